//! The room index: per tree, which schedulable nodes (in the tree, enabled, not draining)
//! have each amount of free resources, and the allocations with a time limit in order of
//! when they are expected to end. Kept up to date as allocations start and end and nodes
//! change ([`crate::books`], [`crate::nodes`]), so that a gang's plan
//! ([`crate::backfill`]'s `shadow`) and its scan of the nodes with room
//! ([`crate::gang_scan`]) cost what they look at, not the whole cluster.
//!
//! Each node the index has seen has a slot (a number, kept while the index lives), so that a
//! plan's walk over the ends looks its nodes up by number rather than by id.
//!
//! Data and queries only; ordered collections, so iteration is deterministic.

use crate::model::{AllocationId, Millis, Node, NodeId};
use fairsched_resources::{RESOURCE_COUNT, Resources};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

type Raw = [i64; RESOURCE_COUNT];

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoomIndex {
    /// The slot of each node seen.
    slot_of: BTreeMap<NodeId, Slot>,
    /// By slot: what the index counts for the node if it is schedulable, its tree and free
    /// resources.
    counted: Vec<Option<(usize, Raw)>>,
    /// Schedulable nodes by (tree, free resources), in id order (so that a gang's scan of
    /// the nodes visits only those with room enough: see [`RoomIndex::fitting`]).
    free: BTreeMap<(usize, Raw), BTreeSet<NodeId>>,
    /// Allocations with a time limit: (tree, start + limit, id), with their node's slot and
    /// resources.
    ends: BTreeMap<(usize, Millis, AllocationId), (Slot, Resources)>,
    /// The key of each allocation in `ends`.
    end_of: BTreeMap<AllocationId, (usize, Millis)>,
    /// The nodes present but not schedulable (disabled, draining or in no tree).
    unschedulable: BTreeSet<NodeId>,
    /// Scratch for a plan's walk over the ends (see [`SlotScratch`]).
    scratch: ScratchCell,
    /// Counts the changes to `counted` (a node's tree or free resources, a node becoming
    /// schedulable or not): what was computed from the free room stays valid while it is the
    /// same (see [`crate::unheld`]).
    version: u64,
}

/// A node's number in the index.
pub(crate) type Slot = u32;

/// The free room of the nodes a plan's walk over the ends has touched (`backfill`'s `walk_ends`).
pub(crate) trait FreeByNode<K> {
    /// Node `node`'s entry, set to `first()` if the walk has not touched it yet.
    fn get_or_insert_with(&mut self, node: K, first: impl FnOnce() -> Resources) -> &mut Resources;
}

impl<K: Ord> FreeByNode<K> for BTreeMap<K, Resources> {
    fn get_or_insert_with(&mut self, node: K, first: impl FnOnce() -> Resources) -> &mut Resources {
        self.entry(node).or_insert_with(first)
    }
}

/// The free room of the nodes one walk over the ends has touched, by slot: an entry counts
/// only if it carries the walk's number, so a walk costs the nodes it touches, not the
/// cluster (no map to build, nothing to clear).
#[derive(Clone, Debug, Default)]
pub(crate) struct SlotScratch {
    /// The current walk's number.
    walk: u32,
    /// By slot: the walk that last wrote the entry, and the free room it counts.
    entries: Vec<(u32, Resources)>,
}

impl SlotScratch {
    /// Starts a walk: every entry is untouched.
    fn start(&mut self, slots: usize) {
        self.walk = self.walk.wrapping_add(1);
        if self.walk == 0 {
            // Wrapped: entries written 2^32 walks ago would look current.
            self.entries.iter_mut().for_each(|e| e.0 = 0);
            self.walk = 1;
        }
        if self.entries.len() < slots {
            self.entries.resize(slots, (0, Resources::ZERO));
        }
    }
}

/// The index's [`SlotScratch`], written through a shared borrow of the index. A lock only
/// so that the scheduler stays `Sync`: the core is single-threaded, so it is never contended.
/// A copy of the index starts with an empty scratch (it holds nothing between walks).
#[derive(Debug, Default)]
struct ScratchCell(Mutex<SlotScratch>);

impl Clone for ScratchCell {
    fn clone(&self) -> Self {
        ScratchCell::default()
    }
}

impl FreeByNode<Slot> for SlotScratch {
    fn get_or_insert_with(
        &mut self,
        node: Slot,
        first: impl FnOnce() -> Resources,
    ) -> &mut Resources {
        let entry = &mut self.entries[node as usize];
        if entry.0 != self.walk {
            *entry = (self.walk, first());
        }
        &mut entry.1
    }
}

impl RoomIndex {
    /// The slot of node `id`, given it now if it has none.
    fn slot(&mut self, id: &NodeId) -> Slot {
        if let Some(&slot) = self.slot_of.get(id) {
            return slot;
        }
        let slot = Slot::try_from(self.counted.len()).expect("fewer than 2^32 nodes");
        self.slot_of.insert(id.clone(), slot);
        self.counted.push(None);
        slot
    }

    /// The slot of node `id`, if the index has seen it.
    pub(crate) fn slot_of(&self, id: &NodeId) -> Option<Slot> {
        self.slot_of.get(id).copied()
    }

    /// Node `id` (`None`: gone) is now as given: the counts follow.
    pub(crate) fn sync_node(&mut self, id: &NodeId, node: Option<&Node>) {
        let now = node.and_then(|n| {
            let tree = n.tree.filter(|_| n.scheduler_jobs_enabled && !n.draining)?;
            Some((tree, n.free().raw()))
        });
        if node.is_some() && now.is_none() {
            if !self.unschedulable.contains(id) {
                self.unschedulable.insert(id.clone());
            }
        } else if !self.unschedulable.is_empty() {
            self.unschedulable.remove(id);
        }
        let before = match self.slot_of.get(id) {
            Some(&slot) => self.counted[slot as usize],
            None => None,
        };
        if before == now {
            return;
        }
        let slot = self.slot(id) as usize;
        self.version += 1;
        if let Some(key) = before {
            let nodes = self.free.get_mut(&key).expect("counted");
            nodes.remove(id);
            if nodes.is_empty() {
                self.free.remove(&key);
            }
        }
        if let Some(key) = now {
            self.free.entry(key).or_default().insert(id.clone());
        }
        self.counted[slot] = now;
    }

    /// Allocation `id` of `tree` started on `node`, using `resources`, expected to end at `end`
    /// (`None`: no time limit).
    pub(crate) fn started(
        &mut self,
        tree: usize,
        id: AllocationId,
        end: Option<Millis>,
        node: &NodeId,
        resources: Resources,
    ) {
        if let Some(end) = end {
            let slot = self.slot(node);
            self.ends.insert((tree, end, id), (slot, resources));
            self.end_of.insert(id, (tree, end));
        }
    }

    /// Allocation `id` ended.
    pub(crate) fn ended(&mut self, id: AllocationId) {
        if let Some((tree, end)) = self.end_of.remove(&id) {
            self.ends.remove(&(tree, end, id));
        }
    }

    /// Whether every node present is schedulable (then so is the node of every allocation,
    /// as a node leaving a tree or the cluster loses its allocations).
    pub(crate) fn all_schedulable(&self) -> bool {
        self.unschedulable.is_empty()
    }

    /// Runs `f` with the scratch of a walk over the ends, every entry untouched.
    pub(crate) fn with_scratch<R>(&self, f: impl FnOnce(&mut SlotScratch) -> R) -> R {
        let mut scratch = (self.scratch.0.lock()).unwrap_or_else(|poisoned| poisoned.into_inner());
        scratch.start(self.counted.len());
        f(&mut scratch)
    }

    /// See `version` above.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// The tree and free resources of the node in `slot` if it is schedulable.
    pub(crate) fn counted_at(&self, slot: Slot) -> Option<(usize, Resources)> {
        self.counted[slot as usize].map(|(tree, raw)| (tree, Resources::from_raw(raw)))
    }

    /// The schedulable nodes of `tree` by free resources, with how many have each.
    pub(crate) fn free_in(&self, tree: usize) -> impl Iterator<Item = (Resources, u32)> + '_ {
        self.classes_in(tree)
            .map(|(free, nodes)| (free, nodes.len() as u32))
    }

    /// The schedulable nodes of `tree` by free resources.
    fn classes_in(&self, tree: usize) -> impl Iterator<Item = (Resources, &BTreeSet<NodeId>)> {
        self.free
            .range((tree, [i64::MIN; RESOURCE_COUNT])..=(tree, [i64::MAX; RESOURCE_COUNT]))
            .map(|(&(_, raw), nodes)| (Resources::from_raw(raw), nodes))
    }

    /// The schedulable nodes of `tree` whose free resources satisfy `fits`, in id order, if
    /// they are at most `at_most` (else `None`: a caller then does better to walk every node).
    pub(crate) fn fitting(
        &self,
        tree: usize,
        at_most: usize,
        fits: impl Fn(&Resources) -> bool,
    ) -> Option<Vec<&NodeId>> {
        let classes: Vec<&BTreeSet<NodeId>> = (self.classes_in(tree))
            .filter(|(free, _)| fits(free))
            .map(|(_, nodes)| nodes)
            .collect();
        if classes.iter().map(|nodes| nodes.len()).sum::<usize>() > at_most {
            return None;
        }
        let mut ids: Vec<&NodeId> = classes.into_iter().flatten().collect();
        ids.sort_unstable();
        Some(ids)
    }

    /// The allocations of `tree` with a time limit, by start + limit (then id), with their
    /// node's slot and resources.
    pub(crate) fn ends_in(
        &self,
        tree: usize,
    ) -> impl Iterator<Item = (Millis, AllocationId, Slot, Resources)> + '_ {
        self.ends
            .range((tree, 0, AllocationId(0))..=(tree, Millis::MAX, AllocationId(u64::MAX)))
            .map(|(&(_, end, id), &(slot, resources))| (end, id, slot, resources))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, cpu: i64, used: i64) -> Node {
        Node {
            id: NodeId(id.to_string()),
            resources: Resources::from_raw([cpu, 0, 0, 0, 0]),
            tags: BTreeSet::new(),
            scheduler_jobs_enabled: true,
            tree: Some(0),
            draining: false,
            allocations: BTreeSet::new(),
            usage: Resources::from_raw([used, 0, 0, 0, 0]),
            last_preemptive_scheduling: None,
            overcommit_since: None,
        }
    }

    fn free_of(index: &RoomIndex, tree: usize) -> Vec<(i64, u32)> {
        index
            .free_in(tree)
            .map(|(free, count)| (free.raw()[0], count))
            .collect()
    }

    #[test]
    fn counts_follow_the_nodes_free_room_and_schedulability() {
        let mut index = RoomIndex::default();
        let (a, b) = (node("a", 4, 1), node("b", 4, 1));
        index.sync_node(&a.id, Some(&a));
        index.sync_node(&b.id, Some(&b));
        assert_eq!(free_of(&index, 0), vec![(3, 2)]);
        let b = node("b", 4, 4);
        index.sync_node(&b.id, Some(&b));
        assert_eq!(free_of(&index, 0), vec![(0, 1), (3, 1)]);
        let a = Node {
            draining: true,
            ..node("a", 4, 1)
        };
        index.sync_node(&a.id, Some(&a));
        assert_eq!(free_of(&index, 0), vec![(0, 1)]);
        assert!(!index.all_schedulable());
        index.sync_node(&b.id, None);
        assert_eq!(free_of(&index, 0), vec![]);
        index.sync_node(&a.id, None);
        assert!(index.all_schedulable());
        assert_eq!(free_of(&index, 1), vec![]);
    }

    #[test]
    fn the_nodes_fitting_come_in_id_order_while_they_are_few_enough() {
        let mut index = RoomIndex::default();
        // (id, cpu, used): free 3, 0, 2, 3, 1; ids out of the order they are synced in.
        for (id, cpu, used) in [("n3", 4, 1), ("n10", 4, 4), ("n1", 4, 2), ("n2", 4, 1)] {
            let n = node(id, cpu, used);
            index.sync_node(&n.id, Some(&n));
        }
        let n = Node {
            tree: Some(1),
            ..node("n0", 4, 3)
        };
        index.sync_node(&n.id, Some(&n));
        let fitting = |index: &RoomIndex, at_most: usize, cpu: i64| -> Option<Vec<String>> {
            let job = Resources::from_raw([cpu, 0, 0, 0, 0]);
            index
                .fitting(0, at_most, |free| free.dominates(&job))
                .map(|ids| ids.into_iter().map(|id| id.0.clone()).collect())
        };
        assert_eq!(
            fitting(&index, 8, 2),
            Some(vec!["n1".into(), "n2".into(), "n3".into()])
        );
        assert_eq!(fitting(&index, 8, 3), Some(vec!["n2".into(), "n3".into()]));
        assert_eq!(fitting(&index, 8, 4), Some(vec![]));
        // More than `at_most`: the caller walks every node instead.
        assert_eq!(fitting(&index, 1, 3), None);
        // A node's room changes: it moves with it; a node gone leaves.
        let n = node("n3", 4, 4);
        index.sync_node(&n.id, Some(&n));
        index.sync_node(&NodeId("n1".into()), None);
        assert_eq!(fitting(&index, 8, 1), Some(vec!["n2".into()]));
        assert_eq!(fitting(&index, 8, 0).map(|ids| ids.len()), Some(3));
    }

    #[test]
    fn ends_come_in_time_order_per_tree_and_leave_when_their_allocation_ends() {
        let mut index = RoomIndex::default();
        let (a, r) = (
            NodeId("a".to_string()),
            Resources::from_raw([1, 0, 0, 0, 0]),
        );
        index.started(0, AllocationId(1), Some(50), &a, r);
        index.started(0, AllocationId(2), Some(20), &a, r);
        index.started(1, AllocationId(3), Some(10), &a, r);
        index.started(0, AllocationId(4), None, &a, r);
        let ends = |index: &RoomIndex| -> Vec<(Millis, AllocationId)> {
            index.ends_in(0).map(|(end, id, _, _)| (end, id)).collect()
        };
        assert_eq!(
            ends(&index),
            vec![(20, AllocationId(2)), (50, AllocationId(1))]
        );
        index.ended(AllocationId(2));
        index.ended(AllocationId(4));
        assert_eq!(ends(&index), vec![(50, AllocationId(1))]);
        assert_eq!(index.ends_in(1).count(), 1);
    }
}
