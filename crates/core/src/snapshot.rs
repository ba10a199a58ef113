//! Orchid-like introspection: a snapshot of every pool and operation with YTsaurus field names.
//!
//! The snapshot is taken through [`Scheduler`] methods (it asks why operations wait); its
//! pools and elements are functions over explicit borrows of a tree.

use crate::model::Millis;
use crate::operations::counts::PoolCounts;
use crate::scheduler::Scheduler;
use crate::tree::{Arena, ElementRef, PoolTree};
use fairsched_hdrf::ElementAttributes;
use fairsched_resources::{ResourceKind, ResourceVector, Resources};
use serde::Serialize;
use std::collections::BTreeMap;

/// A share vector, written as a map from resource name to share (names in alphabetical
/// order, as a `BTreeMap` of them would be). A vector, not a map: a snapshot has four per
/// element, and building them as maps was a third of a small cluster's snapshot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareMap(ResourceVector);

impl ShareMap {
    /// The share of the resource named `name` (`cpu`, `memory`, ...).
    pub fn get(&self, name: &str) -> Option<f64> {
        ResourceKind::from_name(name).map(|k| self.0.get(k))
    }
}

/// The resources by name in alphabetical order (the order a map of names serialises in).
const ALPHABETICAL: [ResourceKind; fairsched_resources::RESOURCE_COUNT] = {
    use ResourceKind::*;
    [Cpu, Gpu, Memory, Network, UserSlots]
};

impl Serialize for ShareMap {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(ALPHABETICAL.len()))?;
        for k in ALPHABETICAL {
            map.serialize_entry(k.name(), &self.0.get(k))?;
        }
        map.end()
    }
}

fn share_map(v: &ResourceVector) -> ShareMap {
    ShareMap(*v)
}

/// `detailed_fair_share`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DetailedFairShare {
    pub strong_guarantee: ShareMap,
    pub integral_guarantee: ShareMap,
    pub weight_proportional: ShareMap,
    pub total: ShareMap,
}

/// Fields every element has.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ElementSnapshot {
    pub fair_share_ratio: f64,
    pub usage_ratio: f64,
    pub demand_ratio: f64,
    pub satisfaction_ratio: f64,
    pub dominant_resource: &'static str,
    pub starvation_status: &'static str,
    pub scheduling_status: &'static str,
    pub weight: f64,
    pub detailed_fair_share: DetailedFairShare,
    pub resource_usage: Resources,
    pub resource_demand: Resources,
    pub effective_strong_guarantee_resources: Resources,
    /// Starvation settings after inheritance down the tree.
    pub effective_fair_share_starvation_tolerance: f64,
    pub effective_fair_share_starvation_timeout_ms: u64,
    pub effective_aggressive_starvation_enabled: bool,
}

/// A pool (or the root).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PoolSnapshot {
    #[serde(flatten)]
    pub element: ElementSnapshot,
    pub parent: Option<String>,
    pub mode: &'static str,
    pub is_ephemeral: bool,
    pub operation_count: u32,
    pub running_operation_count: u32,
    pub lightweight_running_operation_count: u32,
}

/// An operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperationSnapshot {
    #[serde(flatten)]
    pub element: Option<ElementSnapshot>,
    pub pool: String,
    pub state: &'static str,
    pub running_job_count: u32,
    pub pending_job_count: u32,
    pub completed_job_count: u32,
    pub preemptible_allocation_count: u32,
    pub aggressively_preemptible_allocation_count: u32,
    pub lightweight: bool,
    /// Why jobs wait (pending operation: which pool's running limit; running: which limit,
    /// fair share or starvation state holds it back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The node holding resources for its next job (`job_reservation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_node: Option<String>,
    /// The operation in its other trees (the fields above are of its first tree).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pool_trees: BTreeMap<String, OperationTreeSnapshot>,
}

/// An operation in one more tree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperationTreeSnapshot {
    #[serde(flatten)]
    pub element: Option<ElementSnapshot>,
    pub pool: String,
    pub preemptible_allocation_count: u32,
    pub aggressively_preemptible_allocation_count: u32,
}

/// A tree other than the default one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TreeSnapshot {
    pub total_resources: Resources,
    pub pools: BTreeMap<String, PoolSnapshot>,
    /// Ephemeral pools by the user they were created for (orchid `user_to_ephemeral_pools`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub user_to_ephemeral_pools: BTreeMap<String, Vec<String>>,
}

/// The whole picture at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    pub t_ms: Millis,
    pub tree: String,
    pub total_resources: Resources,
    pub pools: BTreeMap<String, PoolSnapshot>,
    pub operations: BTreeMap<String, OperationSnapshot>,
    /// The default tree's ephemeral pools by the user they were created for (orchid
    /// `user_to_ephemeral_pools`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub user_to_ephemeral_pools: BTreeMap<String, Vec<String>>,
    /// The other trees (the fields above are of the default tree).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pool_trees: BTreeMap<String, TreeSnapshot>,
}

/// A snapshot taken in slices ([`Scheduler::begin_snapshot`]), so that a driver never stops
/// for a whole one: the operations a few at a time, the pools at the end.
#[derive(Debug)]
pub struct SnapshotInProgress {
    now: Millis,
    /// The operations to show, in start order, and how many are done.
    ids: Vec<crate::model::OperationId>,
    done: usize,
    operations: BTreeMap<String, OperationSnapshot>,
    /// Each tree's live usage per element of its arena (O(tree) to take: once, not per
    /// slice), and the count of fair-share updates installed then (a new arena numbers its
    /// elements anew: the usages are taken again).
    usages: Vec<Vec<Resources>>,
    updates: u64,
}

impl SnapshotInProgress {
    /// Whether every operation is in (the pools come with [`Scheduler::finish_snapshot`]).
    pub fn is_done(&self) -> bool {
        self.done == self.ids.len()
    }
}

impl Scheduler {
    /// The current state, with shares from the last fair-share update and live usages.
    pub fn snapshot(&self, now: Millis) -> Snapshot {
        let why = self.why_context(Some(now));
        let mut operations = BTreeMap::new();
        for op in self.operations() {
            operations.insert(op.spec.id.0.clone(), self.operation_snapshot(op, &why));
        }
        self.snapshot_with(now, operations, why.usages())
    }

    /// Starts a snapshot taken in slices ([`Scheduler::continue_snapshot`], then
    /// [`Scheduler::finish_snapshot`]); the scheduler may change between them. Each operation
    /// is shown as it is when its slice is taken (those gone by then are left out; those
    /// started after this call are not in it; their usages are those when it began), the
    /// pools as they are at the finish. Taken at once, with nothing in between, it is
    /// [`Scheduler::snapshot`].
    pub fn begin_snapshot(&self, now: Millis) -> SnapshotInProgress {
        SnapshotInProgress {
            now,
            ids: self.operations().map(|op| op.spec.id.clone()).collect(),
            done: 0,
            operations: BTreeMap::new(),
            usages: self.live_usages(),
            updates: self.stats.fair_share_updates,
        }
    }

    /// Adds the next `count` operations to a snapshot in progress; true when all are in.
    pub fn continue_snapshot(&self, snapshot: &mut SnapshotInProgress, count: usize) -> bool {
        if snapshot.updates != self.stats.fair_share_updates {
            snapshot.usages = self.live_usages();
            snapshot.updates = self.stats.fair_share_updates;
        }
        let SnapshotInProgress {
            now,
            ids,
            done,
            operations,
            usages,
            ..
        } = snapshot;
        let why = self.why_context_with(Some(*now), std::borrow::Cow::Borrowed(usages));
        let end = ids.len().min(done.saturating_add(count));
        for id in &ids[*done..end] {
            if let Some(op) = self.books.operations.get(id) {
                operations.insert(id.0.clone(), self.operation_snapshot(op, &why));
            }
        }
        *done = end;
        snapshot.is_done()
    }

    /// The snapshot, its pools taken now (operations not yet in are taken now too).
    pub fn finish_snapshot(&self, mut snapshot: SnapshotInProgress) -> Snapshot {
        self.continue_snapshot(&mut snapshot, usize::MAX);
        let why = self.why_context(Some(snapshot.now));
        self.snapshot_with(snapshot.now, snapshot.operations, why.usages())
    }

    /// Operation `op` as the snapshot shows it.
    fn operation_snapshot<'a>(
        &'a self,
        op: &crate::model::Operation,
        why: &crate::why::WhyContext<'a>,
    ) -> OperationSnapshot {
        let usages = why.usages();
        let first = op.trees[0].tree;
        let (preemptible, aggressively_preemptible) = self.preemptible_counts(first, op);
        let pool_trees =
            op.trees[1..]
                .iter()
                .map(|o| {
                    let (p, ap) = self.preemptible_counts(o.tree, op);
                    (
                        self.trees[o.tree].name.clone(),
                        OperationTreeSnapshot {
                            element: self.trees[o.tree].arena.by_operation.get(&op.spec.id).map(
                                |&i| {
                                    element_snapshot(&self.trees[o.tree].arena, i, &usages[o.tree])
                                },
                            ),
                            pool: o.pool.clone(),
                            preemptible_allocation_count: p,
                            aggressively_preemptible_allocation_count: ap,
                        },
                    )
                })
                .collect();
        OperationSnapshot {
            element: self.trees[first]
                .arena
                .by_operation
                .get(&op.spec.id)
                .map(|&i| element_snapshot(&self.trees[first].arena, i, &usages[first])),
            pool: op.pool.clone(),
            state: op.state.name(),
            running_job_count: op.running_job_count(),
            pending_job_count: op.pending_job_count(),
            completed_job_count: op.tasks.iter().map(|t| t.completed).sum(),
            preemptible_allocation_count: preemptible,
            aggressively_preemptible_allocation_count: aggressively_preemptible,
            lightweight: op.lightweight,
            why: why.why_waiting(op),
            reserved_node: self.reserved_node_of(&op.spec.id).map(|n| n.0.clone()),
            pool_trees,
        }
    }

    /// The snapshot of `operations` with every tree's pools (`usages`: each tree's live usage
    /// per element).
    fn snapshot_with(
        &self,
        now: Millis,
        operations: BTreeMap<String, OperationSnapshot>,
        usages: &[Vec<Resources>],
    ) -> Snapshot {
        let d = self.default_tree;
        Snapshot {
            t_ms: now,
            tree: self.trees[d].name.clone(),
            total_resources: self.trees[d].arena.total_resources,
            pools: pool_snapshots(&self.trees[d], &self.pool_counts_in(d), &usages[d]),
            operations,
            user_to_ephemeral_pools: user_to_ephemeral_pools(&self.trees[d]),
            pool_trees: (0..self.trees.len())
                .filter(|&t| t != d)
                .map(|t| {
                    (
                        self.trees[t].name.clone(),
                        TreeSnapshot {
                            total_resources: self.trees[t].arena.total_resources,
                            pools: pool_snapshots(
                                &self.trees[t],
                                &self.pool_counts_in(t),
                                &usages[t],
                            ),
                            user_to_ephemeral_pools: user_to_ephemeral_pools(&self.trees[t]),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// The tree's ephemeral pools by user (names sorted).
fn user_to_ephemeral_pools(tree: &PoolTree) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, pool) in &tree.ephemeral {
        out.entry(pool.user.clone()).or_default().push(name.clone());
    }
    out
}

/// Element `i` of `arena` (`usage`: the live usage per element).
fn element_snapshot(arena: &Arena, i: usize, usage: &[Resources]) -> ElementSnapshot {
    let total = arena.total_resources;
    let e = &arena.elements[i];
    let a: &ElementAttributes = &e.attrs;
    let usage_share = ResourceVector::from_resources(&usage[i], &total);
    ElementSnapshot {
        fair_share_ratio: a.fair_share.total.max_component(),
        usage_ratio: usage_share.max_component(),
        demand_ratio: a.demand_share.max_component(),
        satisfaction_ratio: crate::heartbeat::walk::local_satisfaction(
            &usage_share,
            &a.fair_share.total,
            &a.demand_share,
        ),
        dominant_resource: a.dominant_resource.name(),
        starvation_status: e.starvation_status.name(),
        scheduling_status: e.scheduling_status.name(),
        weight: a.weight,
        detailed_fair_share: DetailedFairShare {
            strong_guarantee: share_map(&a.fair_share.strong_guarantee),
            integral_guarantee: share_map(&a.fair_share.integral_guarantee),
            weight_proportional: share_map(&a.fair_share.weight_proportional),
            total: share_map(&a.fair_share.total),
        },
        resource_usage: usage[i],
        resource_demand: total.scale_by(&a.demand_share),
        effective_strong_guarantee_resources: total.scale_by(&a.strong_guarantee_share),
        effective_fair_share_starvation_tolerance: e.tolerance,
        effective_fair_share_starvation_timeout_ms: e.starvation_timeout_ms,
        effective_aggressive_starvation_enabled: e.aggressive_starvation_enabled,
    }
}

/// The pools (and the root) of `tree`, by name (`counts`: its operation counts per pool).
fn pool_snapshots(
    tree: &PoolTree,
    counts: &BTreeMap<String, PoolCounts>,
    usage: &[Resources],
) -> BTreeMap<String, PoolSnapshot> {
    let arena = &tree.arena;
    let mut pools = BTreeMap::new();
    for (i, e) in arena.elements.iter().enumerate() {
        let (name, is_ephemeral) = match &e.kind {
            ElementRef::Root => (crate::tree::ROOT_NAME.to_string(), false),
            ElementRef::Pool(p) => (p.clone(), tree.ephemeral.contains_key(p)),
            ElementRef::Operation(_) => continue,
        };
        let parent = arena.elements[i]
            .parent
            .map(|p| match &arena.elements[p].kind {
                ElementRef::Pool(name) => name.clone(),
                _ => crate::tree::ROOT_NAME.to_string(),
            });
        let c = counts.get(&name).copied().unwrap_or_default();
        pools.insert(
            name,
            PoolSnapshot {
                element: element_snapshot(arena, i, usage),
                parent,
                mode: if arena.elements[i].fifo {
                    "fifo"
                } else {
                    "fair_share"
                },
                is_ephemeral,
                operation_count: c.operation_count,
                running_operation_count: c.running_operation_count,
                lightweight_running_operation_count: c.lightweight_running_operation_count,
            },
        );
    }
    pools
}

#[cfg(test)]
mod share_map_tests {
    use super::*;

    #[test]
    fn a_share_map_is_written_as_the_map_of_names_it_replaced() {
        let v = ResourceVector([0.125, 0.25, 0.375, 0.5, 0.625]);
        let as_map: BTreeMap<&str, f64> = ResourceKind::ALL
            .into_iter()
            .map(|k| (k.name(), v.get(k)))
            .collect();
        assert_eq!(
            serde_json::to_string(&share_map(&v)).unwrap(),
            serde_json::to_string(&as_map).unwrap()
        );
        assert_eq!(
            share_map(&v).get("memory"),
            Some(v.get(ResourceKind::Memory))
        );
        assert_eq!(share_map(&v).get("disk"), None);
    }
}
