//! The elected server's lease: a thread of its own renews it every fifth of the lease on a
//! connection of its own (it never waits on the actor nor on the actor's commits), and a
//! watchdog task declares the leadership lost once no renewal has succeeded for four fifths
//! of the lease (the database, unreachable or slow, or this process, paused), before any
//! standby can be elected; a renewal the store refuses (another server was elected) loses it
//! at once.

use fairsched_store::{PostgresStore, StoreError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The running lease: [`Keeper::lost`] resolves when the leadership is lost;
/// [`Keeper::release`] ends it when the server stops.
#[derive(Debug)]
pub(super) struct Keeper {
    /// Dropped (or sent to) to stop the renewing thread.
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<PostgresStore>>,
    lost: watch::Receiver<Option<String>>,
    watchdog: tokio::task::JoinHandle<()>,
    validity: Validity,
}

/// Whether the lease holds now, as this process knows it: not lost, and renewed within the
/// watchdog's limit. The leader's router asks before and after each request, so that a
/// process resumed after a pause (or cut off) answers nothing between its resumption and its
/// exit.
#[derive(Clone, Debug)]
pub(super) struct Validity {
    renewed: Renewed,
    limit: Duration,
    lost: watch::Receiver<Option<String>>,
}

impl Validity {
    pub fn holds(&self) -> bool {
        self.lost.borrow().is_none() && now_of(&self.renewed).elapsed() < self.limit
    }
}

/// When the last renewal that succeeded was sent (the lease runs at least `lease` from then,
/// by the database's clock, which runs as fast as ours).
type Renewed = Arc<Mutex<Instant>>;

fn now_of(renewed: &Renewed) -> Instant {
    *renewed.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts keeping the lease of `store` (elected; a connection of its own), taken or renewed
/// last by a request sent at `since`.
pub(super) fn keep(
    mut store: PostgresStore,
    lease: Duration,
    since: Instant,
) -> std::io::Result<Keeper> {
    let (lost_tx, lost) = watch::channel(None::<String>);
    let lost_tx = Arc::new(lost_tx);
    let renewed: Renewed = Arc::new(Mutex::new(since));
    let validity = Validity {
        renewed: renewed.clone(),
        limit: lease * 4 / 5,
        lost: lost.clone(),
    };
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let period = lease / 5;
    let thread = {
        let (renewed, lost_tx) = (renewed.clone(), lost_tx.clone());
        std::thread::Builder::new()
            .name("leader-lease".into())
            .spawn(move || {
                // Until the keeper stops it (sends or is dropped).
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(period)
                {
                    let sent = Instant::now();
                    match store.renew_leadership(lease) {
                        Ok(()) => *renewed.lock().unwrap_or_else(|e| e.into_inner()) = sent,
                        Err(e @ StoreError::NotLeader { .. }) => {
                            lost_tx.send_replace(Some(e.to_string()));
                            break;
                        }
                        Err(e) => tracing::warn!(
                            "cannot renew the leader's lease (the server stops serving if it \
                             cannot for {} ms): {e}",
                            (lease * 4 / 5).as_millis()
                        ),
                    }
                }
                store
            })?
    };
    let watchdog = tokio::spawn(async move {
        let limit = lease * 4 / 5;
        let mut tick = tokio::time::interval((lease / 20).max(Duration::from_millis(5)));
        loop {
            tick.tick().await;
            let since = now_of(&renewed).elapsed();
            if since >= limit {
                lost_tx.send_replace(Some(format!(
                    "its lease ({} ms) was not renewed for {} ms (the database is unreachable \
                     or slow, or this process was paused), so another server may be elected",
                    lease.as_millis(),
                    since.as_millis()
                )));
                return;
            }
            if lost_tx.borrow().is_some() {
                return;
            }
        }
    });
    Ok(Keeper {
        stop: Some(stop),
        thread: Some(thread),
        lost,
        watchdog,
        validity,
    })
}

impl Keeper {
    /// Whether the lease holds, for the router.
    pub fn validity(&self) -> Validity {
        self.validity.clone()
    }

    /// Resolves with why, once the leadership is lost.
    pub async fn lost(&mut self) -> String {
        match self.lost.wait_for(|l| l.is_some()).await {
            Ok(l) => l.clone().unwrap_or_default(),
            Err(_) => "the lease's watchdog stopped".into(),
        }
    }

    /// Stops renewing and ends the lease now, so that a standby is elected at once (the
    /// server stops; its actor has ended, so it writes nothing more).
    pub async fn release(mut self) {
        self.watchdog.abort();
        self.stop.take();
        let Some(thread) = self.thread.take() else {
            return;
        };
        let released = tokio::task::spawn_blocking(move || {
            let mut store = thread.join().map_err(|_| "the lease's thread panicked")?;
            store
                .release_leadership()
                .map_err(|e| format!("cannot release the lease: {e}"))
        })
        .await;
        match released {
            Ok(Ok(())) => tracing::info!("released the leadership"),
            Ok(Err(e)) => tracing::warn!("{e}; a standby takes over once it runs out"),
            Err(e) => tracing::warn!("cannot release the lease: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validity(renewed_ago: Duration, lost: Option<&str>) -> Validity {
        let (_, rx) = watch::channel(lost.map(str::to_string));
        Validity {
            renewed: Arc::new(Mutex::new(Instant::now() - renewed_ago)),
            limit: Duration::from_millis(800),
            lost: rx,
        }
    }

    #[test]
    fn the_lease_holds_until_the_limit_or_its_loss() {
        assert!(validity(Duration::from_millis(100), None).holds());
        // A process resumed after a pause longer than the limit: it answers nothing more.
        assert!(!validity(Duration::from_millis(900), None).holds());
        assert!(!validity(Duration::ZERO, Some("another server leads")).holds());
    }
}
