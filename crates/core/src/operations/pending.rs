//! The pending operations as the admission pass (`lifecycle`'s `try_run_pending`) sees them:
//! which may have become runnable since they were last looked at.
//!
//! A pending operation waits for the lowest pool on its paths whose running operations reached
//! `max_running_operation_count`. That answer changes only when a pool on one of its paths
//! crosses its limit (a running operation starts or leaves there), when the operation itself
//! moves or changes lightweight-ness, or when the trees' configuration changes. The queue
//! indexes every pending operation under the pools of its paths, so a crossing marks only the
//! operations below that pool as stale, and the pass looks at stale operations only; the rest
//! keep their answer (and `pending_reason`). A full pass and this one start and leave the same
//! operations in the same order; debug builds check it after every pass.

use crate::model::OperationId;
use std::collections::{BTreeMap, BTreeSet};

/// An operation's place in start order, with its id.
pub(crate) type Queued = (u64, OperationId);

/// Pending operations by start order, indexed by the pools on their paths.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingQueue {
    next_seq: u64,
    /// Start order of each pending operation.
    seq: BTreeMap<OperationId, u64>,
    /// The pools (tree, name) on each pending operation's paths, as indexed.
    paths: BTreeMap<OperationId, Vec<(usize, String)>>,
    by_pool: BTreeMap<(usize, String), BTreeSet<Queued>>,
    /// Operations whose answer may have changed since they were last looked at.
    stale: BTreeSet<Queued>,
    /// Everything is stale and every path must be indexed again.
    all_stale: bool,
}

impl PendingQueue {
    /// A new pending operation (the last in start order), stale until the next pass.
    pub(crate) fn add(&mut self, id: &OperationId, paths: Vec<(usize, String)>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.seq.insert(id.clone(), seq);
        self.index(id, seq, paths);
        self.stale.insert((seq, id.clone()));
    }

    /// The operation is no longer pending (it runs or finished).
    pub(crate) fn remove(&mut self, id: &OperationId) {
        let Some(seq) = self.seq.remove(id) else {
            return;
        };
        self.unindex(id, seq);
        self.stale.remove(&(seq, id.clone()));
    }

    fn index(&mut self, id: &OperationId, seq: u64, paths: Vec<(usize, String)>) {
        for key in &paths {
            self.by_pool
                .entry(key.clone())
                .or_default()
                .insert((seq, id.clone()));
        }
        self.paths.insert(id.clone(), paths);
    }

    fn unindex(&mut self, id: &OperationId, seq: u64) {
        for key in self.paths.remove(id).unwrap_or_default() {
            if let Some(set) = self.by_pool.get_mut(&key) {
                set.remove(&(seq, id.clone()));
                if set.is_empty() {
                    self.by_pool.remove(&key);
                }
            }
        }
    }

    /// Pool `name` of tree `t` crossed its running limit: every operation below it is stale.
    pub(crate) fn crossed(&mut self, t: usize, name: &str) {
        if let Some(set) = self.by_pool.get(&(t, name.to_string())) {
            self.stale.extend(set.iter().cloned());
        }
    }

    /// Something every answer may depend on changed (configuration, an operation's pools or
    /// lightweight-ness): the next pass looks at every pending operation, indexed again.
    pub(crate) fn invalidate_all(&mut self) {
        self.all_stale = true;
    }

    /// Whether every path must be indexed again (then [`PendingQueue::reindex`] it).
    pub(crate) fn needs_reindex(&self) -> bool {
        self.all_stale
    }

    /// Indexes a pending operation's paths again and marks it stale.
    pub(crate) fn reindex(&mut self, id: &OperationId, paths: Vec<(usize, String)>) {
        let Some(&seq) = self.seq.get(id) else {
            return;
        };
        self.unindex(id, seq);
        self.index(id, seq, paths);
        self.stale.insert((seq, id.clone()));
    }

    /// Every path indexed again.
    pub(crate) fn reindexed(&mut self) {
        self.all_stale = false;
    }

    /// The pending operations, in start order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &OperationId> {
        self.seq.keys()
    }

    /// Takes the first stale operation after `after` in start order (those before it stay
    /// stale for the next pass).
    pub(crate) fn take_stale_after(&mut self, after: Option<&Queued>) -> Option<Queued> {
        let next = match after {
            Some(a) => self
                .stale
                .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))
                .next(),
            None => self.stale.iter().next(),
        }?
        .clone();
        self.stale.remove(&next);
        Some(next)
    }

    /// Whether the operation is stale (its answer not looked at since it may have changed).
    pub(crate) fn is_stale(&self, id: &OperationId) -> bool {
        self.all_stale
            || self
                .seq
                .get(id)
                .is_some_and(|&s| self.stale.contains(&(s, id.clone())))
    }

    pub(crate) fn contains(&self, id: &OperationId) -> bool {
        self.seq.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.seq.len()
    }
}
