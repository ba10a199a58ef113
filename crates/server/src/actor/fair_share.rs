//! The fair-share update off the actor: the timer prepares it (a copy of what it reads, from
//! the core, taken [`PREPARE_SLICE`] operations at a time between requests), a blocking-pool
//! thread computes it, and the actor installs the result when it arrives, while heartbeats and
//! requests go on against the previous shares (YTsaurus runs its update on its own thread over
//! a snapshot of the tree the same way). One update is in flight at a time. Without the
//! actor's loop (tests that drive the actor by hand) the update is prepared and computed at
//! once.

use super::Actor;
use crate::metrics;
use fairsched_core::{FairShareUpdate, PreparingUpdate};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Updates started by submissions are at least this far apart (the actor prepares and
/// installs each: O(tree)).
const ARRIVAL_UPDATE_GAP: Duration = Duration::from_millis(50);

/// An update is prepared this many operations at a time (a slice takes a few milliseconds;
/// heartbeats and requests are served between slices).
const PREPARE_SLICE: usize = 5000;

/// A computed update on its way back to the actor.
pub(crate) struct Computed {
    /// The [`Background::epoch`] it was prepared in.
    epoch: u64,
    update: FairShareUpdate,
    /// Time spent preparing and computing it (not waiting for a thread).
    took: Duration,
}

/// The actor's side of the background update.
pub(crate) struct Background {
    /// Where computed updates go (set by the actor's loop).
    pub(super) tx: Option<mpsc::UnboundedSender<Computed>>,
    in_flight: bool,
    /// The update being prepared in slices (in flight already), the actor's time on it, and
    /// where it goes once computed.
    pub(super) preparing: Option<(PreparingUpdate, Duration, mpsc::UnboundedSender<Computed>)>,
    /// Operations per slice ([`PREPARE_SLICE`]; tests take smaller ones).
    slice: usize,
    /// An operation was submitted since the last update was prepared: the next update starts
    /// as soon as none is in flight (see [`Actor::start_fair_share_update`]).
    arrivals: bool,
    /// When the last update was prepared.
    last_start: Option<Instant>,
    /// The actor's time on the last update (preparing plus installing it).
    last_actor_cost: Duration,
    /// Tells this actor's core apart from the one a reload replaced (whose updates are
    /// dropped when they arrive).
    epoch: u64,
}

/// Distinct for every core the process builds.
static EPOCHS: AtomicU64 = AtomicU64::new(0);

impl Background {
    pub(super) fn new() -> Background {
        Background {
            tx: None,
            in_flight: false,
            preparing: None,
            slice: PREPARE_SLICE,
            arrivals: false,
            last_start: None,
            last_actor_cost: Duration::ZERO,
            epoch: EPOCHS.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Actor {
    /// Starts a fair-share update if none is in flight and one is due, or an operation was
    /// submitted since the last one was prepared: a new operation gets its share, and its jobs
    /// their nodes, without waiting for the next periodic update. Updates for arrivals are at
    /// least [`ARRIVAL_UPDATE_GAP`] apart (or a quarter of `fair_share_update_period_ms` if
    /// that is shorter), and at least four times the actor's time on the last one, so that a
    /// stream of submissions into a large tree keeps the actor's updates under a quarter of
    /// its time. The actor's loop calls it again after every request while arrivals wait.
    pub(super) fn start_fair_share_update(&mut self, now: u64) {
        if self.updates.in_flight {
            return;
        }
        let gap = ARRIVAL_UPDATE_GAP
            .min(Duration::from_millis(
                self.sched.config.fair_share_update_period_ms / 4,
            ))
            .max(self.updates.last_actor_cost * 4);
        let for_arrivals = self.updates.arrivals
            && self
                .updates
                .last_start
                .is_none_or(|last| last.elapsed() >= gap);
        // The timer's ticks are a period apart, but `now` counts whole milliseconds: a tick may
        // read 199 ms after an update at 200 ms. A tenth of the period early is on time (else
        // every few ticks would skip its update).
        let period = self.sched.config.fair_share_update_period_ms;
        let due = self
            .sched
            .fair_share_update_due(now.saturating_add((period / 10).max(1)));
        if !for_arrivals && !due {
            return;
        }
        self.updates.arrivals = false;
        self.updates.last_start = Some(Instant::now());
        let started = Instant::now();
        let Some(tx) = self.updates.tx.clone() else {
            let mut update = self.sched.prepare_fair_share_update(now);
            update.compute();
            self.install_fair_share_update(update, started.elapsed());
            return;
        };
        self.updates.in_flight = true;
        let preparing = self.sched.begin_fair_share_update(now);
        let began = started.elapsed();
        self.metrics.paused("fair_share_prepare", began);
        self.updates.preparing = Some((preparing, began, tx));
        self.prepare_slice();
    }

    /// Copies the next slice of the update being prepared; once all is copied, hands it to a
    /// blocking-pool thread to compute.
    pub(super) fn prepare_slice(&mut self) {
        let Some((mut preparing, cost, tx)) = self.updates.preparing.take() else {
            return;
        };
        let started = Instant::now();
        if !self
            .sched
            .continue_fair_share_update(&mut preparing, self.updates.slice)
        {
            let slice = started.elapsed();
            self.metrics.paused("fair_share_prepare", slice);
            self.updates.preparing = Some((preparing, cost + slice, tx));
            return;
        }
        let mut update = self.sched.finish_fair_share_update(preparing);
        let slice = started.elapsed();
        self.metrics.paused("fair_share_prepare", slice);
        let prepared = cost + slice;
        let epoch = self.updates.epoch;
        self.updates.last_actor_cost = prepared;
        tokio::task::spawn_blocking(move || {
            let computing = Instant::now();
            update.compute();
            let took = prepared + computing.elapsed();
            // The actor may have stopped meanwhile: nothing to install then.
            let _ = tx.send(Computed {
                epoch,
                update,
                took,
            });
        });
    }

    /// An operation was submitted: an update includes it as soon as it can.
    pub(super) fn on_arrival(&mut self) {
        self.updates.arrivals = true;
        self.start_fair_share_update(self.now());
    }

    /// Starts the update that operations submitted meanwhile wait for, if it may start now.
    pub(super) fn start_update_for_arrivals(&mut self) {
        if self.updates.arrivals {
            self.start_fair_share_update(self.now());
        }
    }

    /// A computed update arrived: installs it (unless a reload replaced the core it was
    /// prepared from, or the store cannot write), then hands what it changed to the writer.
    pub(super) fn on_fair_share_computed(&mut self, computed: Computed) {
        if computed.epoch != self.updates.epoch {
            return;
        }
        self.updates.in_flight = false;
        if self.read_only.is_some() {
            // Changes wait until the store can write; the next update starts from there.
            return;
        }
        self.install_fair_share_update(computed.update, computed.took);
        // Operations submitted while it was computed get theirs now.
        self.start_fair_share_update(self.now());
        self.fold_changes();
        self.flush(true);
    }

    fn install_fair_share_update(&mut self, mut update: FairShareUpdate, took: Duration) {
        let installing = Instant::now();
        let now = update.now();
        let installed = self.sched.apply_fair_share_update(&mut update);
        // What it replaced (the previous arenas, the computation's tree: O(tree) to free) is
        // dropped off the actor.
        if self.updates.tx.is_some() {
            tokio::task::spawn_blocking(move || drop(update));
        }
        if !installed {
            tracing::debug!(now_ms = now, "fair-share update outdated by a pool change");
            return;
        }
        // The operations that finished before this update leave the core too (the actor let
        // them go when it stored them).
        self.sched.forget_finished_operations();
        self.metrics
            .paused("fair_share_install", installing.elapsed());
        self.updates.last_actor_cost += installing.elapsed();
        let took = took + installing.elapsed();
        metrics::observe(&self.metrics.fair_share_update_duration, took);
        tracing::trace!(
            now_ms = now,
            took_us = took.as_micros() as u64,
            "fair-share update"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tick that reads a millisecond less than a period after the last update (whole
    /// milliseconds against the timer's period) still updates.
    #[test]
    fn a_tick_a_millisecond_early_updates() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::ServerConfig {
            data_dir: dir.path().to_path_buf(),
            ..crate::ServerConfig::default()
        };
        config.scheduler.fair_share_update_period_ms = 200;
        let store = fairsched_store::SqliteStore::open(dir.path()).unwrap();
        let mut a = Actor::new(&config, Box::new(store)).unwrap().0;
        a.start_fair_share_update(1_000);
        let updates = a.sched.stats.fair_share_updates;
        a.start_fair_share_update(1_100);
        assert_eq!(
            a.sched.stats.fair_share_updates, updates,
            "half a period: not due"
        );
        a.start_fair_share_update(1_199);
        assert_eq!(a.sched.stats.fair_share_updates, updates + 1);
    }

    /// With its loop, the actor prepares an update a slice at a time (requests in between:
    /// one submitted meanwhile waits for the next update), then computes it on another thread
    /// and installs it.
    #[test]
    fn an_update_is_prepared_in_slices_then_computed_and_installed() {
        // The computation runs on the runtime's blocking pool (requests are answered by hand,
        // outside it).
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut a = super::super::history_tests::actor(dir.path(), 0);
        super::super::history_tests::register_n1(&mut a);
        let submit = |a: &mut Actor, id: &str| {
            let spec = serde_json::json!({"id": id, "tasks": [{"job_count": 1,
                "resources": {"cpu": 1}, "command": ["true"]}]});
            super::super::history_tests::ask(a, |r| {
                crate::command::Command::Submit(
                    Box::new(crate::submit::Submission::parse(spec).unwrap()),
                    false,
                    r,
                )
            })
            .unwrap();
        };
        for id in ["a", "b", "c"] {
            submit(&mut a, id);
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        a.updates.tx = Some(tx);
        a.updates.slice = 1;
        let updates = a.sched.stats.fair_share_updates;
        a.start_fair_share_update(60_000);
        assert!(a.updates.preparing.is_some(), "one slice of three taken");
        submit(&mut a, "late");
        let mut slices = 1;
        {
            let _runtime = rt.enter();
            while a.updates.preparing.is_some() {
                a.prepare_slice();
                slices += 1;
            }
        }
        assert_eq!(slices, 3);
        let computed = rx.blocking_recv().expect("computed");
        {
            let _runtime = rt.enter();
            a.on_fair_share_computed(computed);
        }
        assert_eq!(a.sched.stats.fair_share_updates, updates + 1);
        let shares = |a: &Actor, id: &str| {
            a.sched
                .tree()
                .arena
                .by_operation
                .contains_key(&fairsched_core::OperationId(id.into()))
        };
        assert!(["a", "b", "c"].iter().all(|id| shares(&a, id)));
        assert!(!shares(&a, "late"), "submitted while it was prepared");
    }
}
