//! The room index: per tree, how many schedulable nodes (in the tree, enabled, not draining)
//! have each amount of free resources, and the allocations with a time limit in order of
//! when they are expected to end. Kept up to date as allocations start and end and nodes
//! change ([`crate::books`], [`crate::nodes`]), so that a gang's plan
//! ([`crate::backfill`]'s `shadow`) costs what it looks at, not the whole cluster.
//!
//! Data and queries only; ordered collections, so iteration is deterministic.

use crate::model::{AllocationId, Millis, Node, NodeId};
use fairsched_resources::{RESOURCE_COUNT, Resources};
use std::collections::{BTreeMap, BTreeSet};

type Raw = [i64; RESOURCE_COUNT];

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoomIndex {
    /// What the index counts for each schedulable node: its tree and free resources.
    counted: BTreeMap<NodeId, (usize, Raw)>,
    /// Schedulable nodes by (tree, free resources): how many.
    free: BTreeMap<(usize, Raw), u32>,
    /// Allocations with a time limit: (tree, start + limit, id).
    ends: BTreeSet<(usize, Millis, AllocationId)>,
    /// The key of each allocation in `ends`.
    end_of: BTreeMap<AllocationId, (usize, Millis)>,
}

impl RoomIndex {
    /// Node `id` (`None`: gone) is now as given: the counts follow.
    pub(crate) fn sync_node(&mut self, id: &NodeId, node: Option<&Node>) {
        let now = node.and_then(|n| {
            let tree = n.tree.filter(|_| n.scheduler_jobs_enabled && !n.draining)?;
            Some((tree, n.free().raw()))
        });
        let before = self.counted.get(id).copied();
        if before == now {
            return;
        }
        if let Some(key) = before {
            let count = self.free.get_mut(&key).expect("counted");
            *count -= 1;
            if *count == 0 {
                self.free.remove(&key);
            }
        }
        match now {
            Some(key) => {
                *self.free.entry(key).or_default() += 1;
                self.counted.insert(id.clone(), key);
            }
            None => {
                self.counted.remove(id);
            }
        }
    }

    /// Allocation `id` of `tree` started, expected to end at `end` (`None`: no time limit).
    pub(crate) fn started(&mut self, tree: usize, id: AllocationId, end: Option<Millis>) {
        if let Some(end) = end {
            self.ends.insert((tree, end, id));
            self.end_of.insert(id, (tree, end));
        }
    }

    /// Allocation `id` ended.
    pub(crate) fn ended(&mut self, id: AllocationId) {
        if let Some((tree, end)) = self.end_of.remove(&id) {
            self.ends.remove(&(tree, end, id));
        }
    }

    /// The schedulable nodes of `tree` by free resources, with how many have each.
    pub(crate) fn free_in(&self, tree: usize) -> impl Iterator<Item = (Resources, u32)> + '_ {
        self.free
            .range((tree, [i64::MIN; RESOURCE_COUNT])..=(tree, [i64::MAX; RESOURCE_COUNT]))
            .map(|(&(_, raw), &count)| (Resources::from_raw(raw), count))
    }

    /// The allocations of `tree` with a time limit, by start + limit (then id).
    pub(crate) fn ends_in(&self, tree: usize) -> impl Iterator<Item = (Millis, AllocationId)> + '_ {
        self.ends
            .range((tree, 0, AllocationId(0))..=(tree, Millis::MAX, AllocationId(u64::MAX)))
            .map(|&(_, end, id)| (end, id))
    }
}
