//! Commits off the actor: a thread commits each batch the actor hands it and, once the batch is
//! durable, publishes the view built with it, streams its events and sends the replies that
//! waited for it. The actor goes on with the next requests meanwhile and hands over what they
//! changed as one batch when the commit before returns (group commit), so a slow disk delays
//! replies, never the actor. Nothing is acknowledged, shown or streamed before it is durable;
//! a batch that fails to commit is answered with the error, and the actor reloads its state
//! from the store ([`super::Actor::on_done`]).

use super::DeferredReply;
use super::events::event_view;
use crate::metrics::{self, ActorMetrics};
use crate::view::{ReadOnly, View};
use fairsched_api::{ApiError, EventView, codes};
use fairsched_store::{Batch, Store, StoreError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{broadcast, mpsc, watch};

/// The store, shared by the writer (commits) and the actor (reads, pruning, reloads).
pub(super) type SharedStore = Arc<Mutex<Box<dyn Store>>>;

/// The store, locked (a panic while it was held, which stops the server anyway, does not
/// make it unusable).
pub(super) fn lock(store: &SharedStore) -> MutexGuard<'_, Box<dyn Store>> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the writer does with one batch.
pub(super) struct Unit {
    pub batch: Batch,
    /// Sent once the batch is durable (with the error if it is not).
    pub replies: Vec<DeferredReply>,
    /// Published once the batch is durable.
    pub view: Option<Arc<View>>,
    /// Operations that finished in this batch: they leave the actor's memory once it is
    /// durable (until then a read of the store would not find them).
    pub retire: Vec<String>,
}

/// A batch the writer finished.
pub(super) enum Done {
    /// Committed (`Ok`) or not (the error every reply got).
    Committed {
        result: Result<(), ApiError>,
        retire: Vec<String>,
    },
    /// The commit panicked (a bug): the actor panics with the same payload, which stops the
    /// server.
    Panicked(Box<dyn std::any::Any + Send>),
}

/// The actor's handle on the writer thread.
pub(super) struct Writer {
    tx: std::sync::mpsc::Sender<Unit>,
    /// Joined when the handle is dropped, so that the store is closed (and its directory
    /// unlocked) once the actor is gone.
    thread: Option<std::thread::JoinHandle<()>>,
    /// A unit is being committed: the next waits for its [`Done`].
    pub busy: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("busy", &self.busy).finish()
    }
}

/// Where the writer sends what it did after a commit.
pub(super) struct Outlets {
    pub publish: watch::Sender<Arc<View>>,
    pub events: broadcast::Sender<Arc<EventView>>,
    pub metrics: ActorMetrics,
    pub done: mpsc::UnboundedSender<Done>,
}

impl Writer {
    /// Starts the writer thread; it ends when the actor drops its handle.
    pub fn spawn(store: SharedStore, outlets: Outlets) -> std::io::Result<Writer> {
        let (tx, rx) = std::sync::mpsc::channel::<Unit>();
        let thread = std::thread::Builder::new()
            .name(crate::STORE_WRITER_THREAD.into())
            .spawn(move || {
                while let Ok(unit) = rx.recv() {
                    let done = write(&store, &outlets, unit);
                    if outlets.done.send(done).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Writer {
            tx,
            thread: Some(thread),
            busy: false,
        })
    }

    /// A handle on no thread (in place of one moved elsewhere): what it is sent is dropped.
    pub fn closed() -> Writer {
        Writer {
            tx: std::sync::mpsc::channel().0,
            thread: None,
            busy: false,
        }
    }

    /// Hands `unit` over (the caller checked that none is being committed).
    pub fn send(&mut self, unit: Unit) {
        debug_assert!(!self.busy, "one unit at a time");
        // A writer that is gone has sent its last `Done` (a panic): the actor stops on it.
        let _ = self.tx.send(unit);
        self.busy = true;
    }
}

impl Drop for Writer {
    /// Ends the thread after the batch it may be committing.
    fn drop(&mut self) {
        self.tx = std::sync::mpsc::channel().0;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Commits `unit`'s batch, then publishes, streams and replies (or fails the replies).
fn write(store: &SharedStore, outlets: &Outlets, unit: Unit) -> Done {
    let Unit {
        batch,
        replies,
        view,
        retire,
    } = unit;
    let result = if batch.is_empty() {
        Ok(())
    } else {
        let started = Instant::now();
        let committed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lock(store).commit(&batch)));
        let r = match committed {
            Ok(r) => r,
            Err(payload) => return Done::Panicked(payload),
        };
        metrics::observe(&outlets.metrics.store_commit_duration, started.elapsed());
        r.map_err(|e| match e {
            StoreError::NotLeader { .. } => not_leader(&e),
            e => commit_failed(&e.to_string()),
        })
    };
    match &result {
        Ok(()) => {
            // To the live streams open (one opened later reads these from the store: they
            // are committed).
            if outlets.events.receiver_count() > 0 {
                for e in &batch.events {
                    let _ = outlets.events.send(Arc::new(event_view(e)));
                }
            }
            if let Some(view) = view {
                outlets.publish.send_replace(view);
            }
            for reply in replies {
                reply(None);
            }
        }
        // Deposed: the actor stops and the server exits; it never serves as read-only.
        Err(e) if e.code == codes::NOT_LEADER => {
            for reply in replies {
                reply(Some(e));
            }
        }
        Err(e) => {
            // Readers learn that the server is read-only before the replies say so.
            let mut failed = (**outlets.publish.borrow()).clone();
            failed.read_only = Some(ReadOnly {
                reason: e.message.clone(),
                since_unix_ms: super::unix_ms(),
            });
            outlets.publish.send_replace(Arc::new(failed));
            for reply in replies {
                reply(Some(e));
            }
        }
    }
    Done::Committed { result, retire }
}

/// The reply to a change whose commit the store refused because another server was elected
/// leader meanwhile: nothing was changed, and the client retries with the new leader.
pub(super) fn not_leader(e: &StoreError) -> ApiError {
    ApiError::new(
        codes::NOT_LEADER,
        format!("the change was not made: {e}; retry with the new leader"),
    )
}

/// The reply to a change whose commit failed.
pub(super) fn commit_failed(store_error: &str) -> ApiError {
    ApiError::new(
        codes::READ_ONLY,
        format!(
            "the change was not made: the store cannot write (not persisted: {store_error}); the \
             server is read-only until it can (free space on its disk, or make it writable)"
        ),
    )
}
