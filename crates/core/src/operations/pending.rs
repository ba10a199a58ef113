//! The pending operations as the admission pass (`lifecycle`'s `try_run_pending`) sees them:
//! which may have become runnable, or wait for another pool, since they were last looked at.
//!
//! A pending operation waits for its *blocker*: the first pool on its paths (trees in order,
//! each from its pool up to the root) whose running operations reached
//! `max_running_operation_count`. Between configuration changes the paths and limits are
//! fixed, so the answer changes only when a pool on the paths crosses its limit:
//!
//! * a pool that leaves its limit (*freed*) changes the answer of the operations it blocks,
//!   and only theirs (those blocked lower still are);
//! * a pool that reaches its limit changes the answer of the operations below it blocked
//!   further up (the pool is now the first), and only theirs; the operations it had blocked
//!   before it was freed wait for it again, as they were.
//!
//! The queue indexes every pending operation under the pools of its paths and under its
//! blocker, so the pass looks only at the operations those rules name, in start order; the
//! others keep their answer (and `pending_reason`). A pass over every pending operation would
//! start and leave the same operations in the same order; debug builds check after every pass
//! that every operation not looked at still waits for the reason it shows.

use crate::model::OperationId;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// An operation's place in start order, with its id.
pub(crate) type Queued = (u64, OperationId);

/// A pool of a tree.
pub(crate) type PoolKey = (usize, String);

#[derive(Clone, Debug)]
struct Entry {
    seq: u64,
    /// The pools on its paths, in the order they are checked, and their running limits.
    paths: Vec<(PoolKey, u32)>,
    /// Index into `paths` of what it waits for, once looked at.
    blocker: Option<usize>,
}

/// Pending operations by start order, indexed by the pools on their paths and their blockers.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingQueue {
    next_seq: u64,
    entries: BTreeMap<OperationId, Entry>,
    by_pool: BTreeMap<PoolKey, BTreeSet<Queued>>,
    by_blocker: BTreeMap<PoolKey, BTreeSet<Queued>>,
    /// Operations to look at whatever their blocker (new, moved, or below a pool that reached
    /// its limit while they waited further up).
    stale: BTreeSet<Queued>,
    /// Pools that left their limit since the operations they block were looked at.
    freed: BTreeSet<PoolKey>,
    /// Everything is stale and every path must be indexed again.
    all_stale: bool,
}

impl PendingQueue {
    /// A new pending operation (the last in start order) with its paths and their limits,
    /// to be looked at by the next pass.
    pub(crate) fn add(&mut self, id: &OperationId, paths: Vec<(PoolKey, u32)>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.index(id, seq, paths);
        self.stale.insert((seq, id.clone()));
    }

    /// The operation is no longer pending (it runs or finished).
    pub(crate) fn remove(&mut self, id: &OperationId) {
        if let Some(seq) = self.unindex(id) {
            self.stale.remove(&(seq, id.clone()));
        }
    }

    fn index(&mut self, id: &OperationId, seq: u64, paths: Vec<(PoolKey, u32)>) {
        for (key, _) in &paths {
            self.by_pool
                .entry(key.clone())
                .or_default()
                .insert((seq, id.clone()));
        }
        self.entries.insert(
            id.clone(),
            Entry {
                seq,
                paths,
                blocker: None,
            },
        );
    }

    /// Drops the operation from the indexes; its start order.
    fn unindex(&mut self, id: &OperationId) -> Option<u64> {
        let entry = self.entries.remove(id)?;
        let q = (entry.seq, id.clone());
        for (key, _) in &entry.paths {
            remove_from(&mut self.by_pool, key, &q);
        }
        if let Some(b) = entry.blocker {
            remove_from(&mut self.by_blocker, &entry.paths[b].0, &q);
        }
        Some(entry.seq)
    }

    /// The operation's paths and limits, as indexed.
    pub(crate) fn paths(&self, id: &OperationId) -> Option<&[(PoolKey, u32)]> {
        self.entries.get(id).map(|e| e.paths.as_slice())
    }

    /// Records what the operation waits for (an index into its paths), as just looked at.
    pub(crate) fn set_blocker(&mut self, id: &OperationId, blocker: usize) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let q = (entry.seq, id.clone());
        if entry.blocker == Some(blocker) {
            return;
        }
        if let Some(old) = entry.blocker.replace(blocker) {
            remove_from(&mut self.by_blocker, &entry.paths[old].0, &q);
        }
        self.by_blocker
            .entry(entry.paths[blocker].0.clone())
            .or_default()
            .insert(q);
    }

    /// The operation's blocker as last looked at.
    pub(crate) fn blocker(&self, id: &OperationId) -> Option<usize> {
        self.entries.get(id)?.blocker
    }

    /// Pool `pool` left its running limit.
    pub(crate) fn freed(&mut self, pool: &PoolKey) {
        if self.by_blocker.contains_key(pool) {
            self.freed.insert(pool.clone());
        }
    }

    /// Pool `pool` reached its running limit; `ancestors` are the pools above it in its tree.
    pub(crate) fn reached(&mut self, pool: &PoolKey, ancestors: &[String]) {
        // Those it blocked before it was freed wait for it again, unchanged.
        self.freed.remove(pool);
        // Operations below it blocked further up (an ancestor, or a later tree) now wait for
        // it: from whichever side is smaller.
        let (t, _) = pool;
        let below = self.by_pool.get(pool).map_or(0, BTreeSet::len);
        let later_trees = self
            .by_blocker
            .range((*t + 1, String::new())..)
            .map(|(_, set)| set);
        let above: Vec<&BTreeSet<Queued>> = ancestors
            .iter()
            .filter_map(|name| self.by_blocker.get(&(*t, name.clone())))
            .chain(later_trees)
            .collect();
        let above_count: usize = above.iter().map(|s| s.len()).sum();
        let candidates: Vec<Queued> = if below <= above_count {
            self.by_pool
                .get(pool)
                .into_iter()
                .flatten()
                .cloned()
                .collect()
        } else {
            above.into_iter().flatten().cloned().collect()
        };
        for q in candidates {
            let Some(entry) = self.entries.get(&q.1) else {
                continue;
            };
            let Some(at) = entry.paths.iter().position(|(k, _)| k == pool) else {
                continue;
            };
            if entry.blocker.is_none_or(|b| at < b) {
                self.stale.insert(q);
            }
        }
    }

    /// Something every answer may depend on changed (configuration, an operation's pools or
    /// lightweight-ness): the next pass looks at every pending operation, indexed again.
    pub(crate) fn invalidate_all(&mut self) {
        self.all_stale = true;
    }

    /// Whether every path must be indexed again (with [`PendingQueue::reindex`]).
    pub(crate) fn needs_reindex(&self) -> bool {
        self.all_stale
    }

    /// Indexes a pending operation's paths again, to be looked at.
    pub(crate) fn reindex(&mut self, id: &OperationId, paths: Vec<(PoolKey, u32)>) {
        let Some(seq) = self.unindex(id) else {
            return;
        };
        self.index(id, seq, paths);
        self.stale.insert((seq, id.clone()));
    }

    /// Every path indexed again.
    pub(crate) fn reindexed(&mut self) {
        self.all_stale = false;
        self.freed.clear();
    }

    /// The pending operations (by id).
    pub(crate) fn ids(&self) -> impl Iterator<Item = &OperationId> {
        self.entries.keys()
    }

    /// The next operation after `after` in start order to look at (stale, or blocked by a
    /// freed pool); those before it wait for the next pass.
    pub(crate) fn next_after(&mut self, after: Option<&Queued>) -> Option<Queued> {
        let from = |set: &BTreeSet<Queued>| match after {
            Some(a) => set
                .range((Bound::Excluded(a), Bound::Unbounded))
                .next()
                .cloned(),
            None => set.iter().next().cloned(),
        };
        let mut next = from(&self.stale);
        for pool in &self.freed {
            if let Some(set) = self.by_blocker.get(pool)
                && let Some(q) = from(set)
                && next.as_ref().is_none_or(|n| q < *n)
            {
                next = Some(q);
            }
        }
        let next = next?;
        self.stale.remove(&next);
        Some(next)
    }

    /// After a pass: freed pools that block nobody any more are forgotten.
    pub(crate) fn settle(&mut self) {
        let by_blocker = &self.by_blocker;
        self.freed.retain(|p| by_blocker.contains_key(p));
    }

    /// Whether the operation is to be looked at (its answer may have changed).
    pub(crate) fn is_stale(&self, id: &OperationId) -> bool {
        let Some(entry) = self.entries.get(id) else {
            return false;
        };
        self.all_stale
            || self.stale.contains(&(entry.seq, id.clone()))
            || entry
                .blocker
                .is_none_or(|b| self.freed.contains(&entry.paths[b].0))
    }

    pub(crate) fn contains(&self, id: &OperationId) -> bool {
        self.entries.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

fn remove_from(map: &mut BTreeMap<PoolKey, BTreeSet<Queued>>, key: &PoolKey, q: &Queued) {
    if let Some(set) = map.get_mut(key) {
        set.remove(q);
        if set.is_empty() {
            map.remove(key);
        }
    }
}
