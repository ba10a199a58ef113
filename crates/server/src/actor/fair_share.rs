//! The fair-share update off the actor: the timer prepares it (a copy of what it reads, from
//! the core), a blocking-pool thread computes it, and the actor installs the result when it
//! arrives, while heartbeats and requests go on against the previous shares (YTsaurus runs its
//! update on its own thread over a snapshot of the tree the same way). One update is in flight
//! at a time. Without the actor's loop (tests that drive the actor by hand) the update is
//! computed at once.

use super::Actor;
use crate::metrics;
use fairsched_core::FairShareUpdate;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Updates started by submissions are at least this far apart (the actor prepares and
/// installs each: O(tree)).
const ARRIVAL_UPDATE_GAP: Duration = Duration::from_millis(50);

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
        let mut update = self.sched.prepare_fair_share_update(now);
        let Some(tx) = self.updates.tx.clone() else {
            update.compute();
            self.install_fair_share_update(update, started.elapsed());
            return;
        };
        self.updates.in_flight = true;
        let epoch = self.updates.epoch;
        let prepared = started.elapsed();
        self.metrics.paused("fair_share_prepare", prepared);
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
}
