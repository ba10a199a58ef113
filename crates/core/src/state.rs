//! The scheduler's state apart from its stages, in parts with one owner each: [`Books`] (nodes,
//! operations and allocations; usage changes only in [`crate::books`]), [`Caches`] (kept
//! between fair-share updates for the heartbeat, the counts, the admission pass and preemption,
//! typed in the modules that keep them) and [`EventLog`]. Holds are in [`crate::holds`]. Data
//! and queries only; stages take explicit borrows of the parts they need.

use crate::event::{Event, EventKind};
use crate::heartbeat::walk::Walk;
use crate::model::{Allocation, AllocationId, Millis, Node, NodeId, Operation, OperationId};
use crate::operations::counts::PoolCounts;
use crate::operations::pending::PendingQueue;
use crate::preemptible::classes::PreemptionCache;
use crate::room::RoomIndex;
use fairsched_resources::{RESOURCE_COUNT, Resources};
use std::collections::{BTreeMap, BTreeSet};

/// Nodes, operations and allocations, with the orders the scheduler walks them in.
#[derive(Clone, Debug)]
pub(crate) struct Books {
    pub(crate) nodes: BTreeMap<NodeId, Node>,
    pub(crate) operations: BTreeMap<OperationId, Operation>,
    /// Operations in start order (ids), for deterministic iteration.
    pub(crate) start_order: BTreeMap<u64, OperationId>,
    /// The next operation's `start_seq`.
    pub(crate) next_start_seq: u64,
    /// The operations not finished yet, in start order (with their `start_seq`); finished
    /// ones are dropped at each fair-share update (until then they are skipped, and so is an
    /// entry of a forgotten operation whose id was used again: its sequence differs). Passes
    /// over live operations use it, so that their cost does not grow with every operation
    /// ever run.
    pub(crate) live_order: Vec<(u64, OperationId)>,
    /// The operations finished and not forgotten yet (see `forget_finished_operations`).
    pub(crate) finished: BTreeSet<OperationId>,
    pub(crate) allocations: BTreeMap<AllocationId, Allocation>,
    /// How many allocations are being interrupted (a heartbeat skips looking for overdue ones
    /// and for preemptors waiting on them when there are none).
    pub(crate) interrupting: usize,
    pub(crate) next_allocation: u64,
    /// Free room per tree and expected ends, kept up to date with the nodes and allocations
    /// (see [`crate::room`]).
    pub(crate) room: RoomIndex,
    /// Counts the changes to nodes (joining, leaving, resources, tags, enabled, draining,
    /// tree) and interruptions: what may change a gang's plan besides allocations starting
    /// and ending and holds (see `gang::plan_needed`).
    pub(crate) node_changes: u64,
    /// [`Books::tree_total`] per tree, as of `node_changes` (see [`Books::tree_total_kept`]).
    tree_totals: Option<(u64, BTreeMap<usize, Resources>)>,
    /// The shapes of the jobs running operations have pending, kept up to date as jobs start
    /// and end and operations change state (see [`PendingShapes`]).
    pub(crate) pending_shapes: PendingShapes,
}

/// The resources of the pending jobs of running operations, counted once per task that has
/// pending jobs, and their componentwise minimum: a node that cannot fit the minimum fits no
/// pending job, and its heartbeat's regular stage is skipped. Exact at every heartbeat (not
/// as of the last fair-share update): whether a heartbeat is skipped must not depend on when
/// the shares were last updated, since the regular stage it skips also places gangs whole and
/// plans the head gang's reservation.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingShapes {
    counts: BTreeMap<[i64; RESOURCE_COUNT], u32>,
    min: Option<Resources>,
    /// Counts the tasks that began or stopped having pending jobs: while it is the same, no
    /// running operation with pending jobs has lost them all or stopped running.
    changes: u64,
}

impl PendingShapes {
    /// A task with jobs of `shape` now has pending jobs.
    pub(crate) fn add(&mut self, shape: &Resources) {
        self.changes += 1;
        let count = self.counts.entry(shape.raw()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.min = Some(self.min.map_or(*shape, |min| min.min(shape)));
        }
    }

    /// A task with jobs of `shape` no longer has pending jobs.
    pub(crate) fn remove(&mut self, shape: &Resources) {
        self.changes += 1;
        let Some(count) = self.counts.get_mut(&shape.raw()) else {
            debug_assert!(false, "a pending shape removed that was never added");
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(&shape.raw());
            self.min = self
                .counts
                .keys()
                .map(|raw| Resources::from_raw(*raw))
                .reduce(|a, b| a.min(&b));
        }
    }

    /// See `changes` above.
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// Componentwise minimum of the pending jobs; `None` when no job is pending.
    pub(crate) fn min(&self) -> Option<&Resources> {
        self.min.as_ref()
    }
}

impl Default for Books {
    fn default() -> Books {
        Books {
            nodes: BTreeMap::new(),
            operations: BTreeMap::new(),
            start_order: BTreeMap::new(),
            next_start_seq: 0,
            live_order: Vec::new(),
            finished: BTreeSet::new(),
            allocations: BTreeMap::new(),
            interrupting: 0,
            next_allocation: 1,
            room: RoomIndex::default(),
            node_changes: 0,
            tree_totals: None,
            pending_shapes: PendingShapes::default(),
        }
    }
}

impl Books {
    /// The nodes a pass looking for room in tree `t` must visit, in id order: when the room
    /// index says that the schedulable nodes of `t` whose free resources satisfy `fits` are at
    /// most an eighth of the nodes, those ([`RoomIndex::fitting`]; debug builds compare with a
    /// filter of every node); otherwise every node. The caller still skips the nodes that are
    /// not schedulable in `t` or whose room does not fit.
    pub(crate) fn nodes_to_scan(
        &self,
        t: usize,
        fits: impl Fn(&Resources) -> bool,
    ) -> Box<dyn Iterator<Item = &Node> + '_> {
        let fitting = self.room.fitting(t, self.nodes.len() / 8, &fits);
        #[cfg(debug_assertions)]
        if let Some(ids) = &fitting {
            let expected: Vec<&NodeId> = (self.nodes.values())
                .filter(|n| {
                    n.tree == Some(t) && n.scheduler_jobs_enabled && !n.draining && fits(&n.free())
                })
                .map(|n| &n.id)
                .collect();
            assert_eq!(
                ids, &expected,
                "the room index's nodes by free room are out of date"
            );
        }
        match fitting {
            Some(ids) => Box::new(ids.into_iter().map(|id| &self.nodes[id])),
            None => Box::new(self.nodes.values()),
        }
    }

    /// Every operation, in start order.
    pub(crate) fn in_start_order(&self) -> impl Iterator<Item = &Operation> {
        self.start_order
            .values()
            .filter_map(|id| self.operations.get(id))
    }

    /// The operations not finished yet (pending and running), in start order.
    pub(crate) fn unfinished_operations(&self) -> impl Iterator<Item = &Operation> {
        self.live_order
            .iter()
            .filter_map(|(seq, id)| self.live_operation(*seq, id))
            .filter(|op| !op.state.is_finished())
    }

    /// Operation `id` of the live order entry `(seq, id)`, unless it is gone (forgotten, its
    /// id maybe used again).
    pub(crate) fn live_operation(&self, seq: u64, id: &OperationId) -> Option<&Operation> {
        self.operations.get(id).filter(|op| op.start_seq == seq)
    }

    /// Node `id` changed (resources, usage, tree, enabled, draining) or is gone: the room
    /// index follows.
    pub(crate) fn sync_room(&mut self, id: &NodeId) {
        self.room.sync_node(id, self.nodes.get(id));
    }

    /// Node `id` changed (or is gone) outside allocations starting and ending.
    pub(crate) fn node_changed(&mut self, id: &NodeId) {
        self.node_changes += 1;
        self.sync_room(id);
    }

    /// [`Books::tree_total`], kept while no node changes (every change of a node's resources,
    /// tree or `scheduler_jobs_enabled` counts in `node_changes`; debug builds check a kept
    /// total against a fresh one).
    pub(crate) fn tree_total_kept(&mut self, t: usize) -> Resources {
        let changes = self.node_changes;
        if let Some((at, totals)) = &self.tree_totals
            && *at == changes
            && let Some(&total) = totals.get(&t)
        {
            debug_assert_eq!(
                total,
                self.tree_total(t),
                "a kept tree total went out of date"
            );
            return total;
        }
        let total = self.tree_total(t);
        let (at, totals) = self
            .tree_totals
            .get_or_insert_with(|| (changes, BTreeMap::new()));
        if *at != changes {
            *at = changes;
            totals.clear();
        }
        totals.insert(t, total);
        total
    }

    /// Total resources of the nodes tree `t` schedules on.
    pub(crate) fn tree_total(&self, t: usize) -> Resources {
        self.nodes
            .values()
            .filter(|n| n.scheduler_jobs_enabled && n.tree == Some(t))
            .fold(Resources::ZERO, |acc, n| acc.add(&n.resources))
    }
}

/// What the scheduler keeps between fair-share updates to spare recomputation, each part
/// typed in the module that keeps it up to date.
#[derive(Clone, Debug)]
pub(crate) struct Caches {
    /// The heartbeat's descent state per tree, kept up to date between fair-share updates
    /// (see [`crate::heartbeat`]); `None` until the first heartbeat after an update.
    pub(crate) walks: Vec<Option<Walk>>,
    /// Operation counts per pool (subtree totals) per tree, maintained as operations start,
    /// change state or move (see [`crate::operations`]).
    pub(crate) counts: Vec<BTreeMap<String, PoolCounts>>,
    /// The pending operations, indexed for the admission pass (see
    /// [`crate::operations::pending`]).
    pub(crate) pending: PendingQueue,
    /// Preemption's caches per tree (see [`crate::preemptible`]).
    pub(crate) preemption: Vec<PreemptionCache>,
}

impl Caches {
    /// Empty caches for `tree_count` trees.
    pub(crate) fn new(tree_count: usize) -> Caches {
        Caches {
            walks: vec![None; tree_count],
            counts: vec![BTreeMap::new(); tree_count],
            pending: PendingQueue::default(),
            preemption: vec![PreemptionCache::default(); tree_count],
        }
    }
}

/// The events logged and not taken yet.
#[derive(Clone, Debug, Default)]
pub(crate) struct EventLog {
    events: Vec<Event>,
}

impl EventLog {
    /// Logs `kind` at `t_ms`.
    #[inline]
    pub(crate) fn log(&mut self, t_ms: Millis, kind: EventKind) {
        self.events.push(Event { t_ms, kind });
    }

    /// Takes the events logged since the last call.
    pub(crate) fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
