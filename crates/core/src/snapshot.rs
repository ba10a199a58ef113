//! Orchid-like introspection: a snapshot of every pool and operation with YTsaurus field names.

use crate::model::{Millis, OperationState};
use crate::scheduler::Scheduler;
use crate::tree::ElementRef;
use fairsched_hdrf::ElementAttributes;
use fairsched_resources::{ResourceKind, ResourceVector, Resources};
use serde::Serialize;
use std::collections::BTreeMap;

/// A share vector as a map from resource name to share.
pub type ShareMap = BTreeMap<&'static str, f64>;

fn share_map(v: &ResourceVector) -> ShareMap {
    ResourceKind::ALL
        .iter()
        .map(|k| (k.name(), v.get(*k)))
        .collect()
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
}

/// The whole picture at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    pub t_ms: Millis,
    pub tree: String,
    pub total_resources: Resources,
    pub pools: BTreeMap<String, PoolSnapshot>,
    pub operations: BTreeMap<String, OperationSnapshot>,
}

impl Scheduler {
    /// The current state, with shares from the last fair-share update and live usages.
    pub fn snapshot(&self, now: Millis) -> Snapshot {
        let arena = &self.tree.arena;
        let n = arena.elements.len();
        let total = arena.total_resources;
        // Live usage per element.
        let mut usage = vec![Resources::ZERO; n];
        let mut op_counts = vec![(0u32, 0u32); n];
        for (id, &i) in &arena.by_operation {
            if let Some(op) = self.operations.get(id) {
                usage[i] = op.usage;
                let running = u32::from(op.state == OperationState::Running);
                op_counts[i] = (1, running);
            }
        }
        for i in (1..n).rev() {
            if let Some(p) = arena.elements[i].parent {
                usage[p] = usage[p].add(&usage[i]);
                op_counts[p].0 += op_counts[i].0;
                op_counts[p].1 += op_counts[i].1;
            }
        }
        let element = |i: usize| {
            let e = &arena.elements[i];
            let a: &ElementAttributes = &e.attrs;
            let usage_share = ResourceVector::from_resources(&usage[i], &total);
            ElementSnapshot {
                fair_share_ratio: a.fair_share.total.max_component(),
                usage_ratio: usage_share.max_component(),
                demand_ratio: a.demand_share.max_component(),
                satisfaction_ratio: crate::heartbeat::local_satisfaction(
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
            }
        };
        let mut pools = BTreeMap::new();
        for (i, e) in arena.elements.iter().enumerate() {
            let (name, is_ephemeral) = match &e.kind {
                ElementRef::Root => (crate::tree::ROOT_NAME.to_string(), false),
                ElementRef::Pool(p) => (p.clone(), self.tree.ephemeral.contains_key(p)),
                ElementRef::Operation(_) => continue,
            };
            let parent = arena.elements[i]
                .parent
                .map(|p| match &arena.elements[p].kind {
                    ElementRef::Pool(name) => name.clone(),
                    _ => crate::tree::ROOT_NAME.to_string(),
                });
            pools.insert(
                name,
                PoolSnapshot {
                    element: element(i),
                    parent,
                    mode: if arena.elements[i].fifo {
                        "fifo"
                    } else {
                        "fair_share"
                    },
                    is_ephemeral,
                    operation_count: op_counts[i].0,
                    running_operation_count: op_counts[i].1,
                    lightweight_running_operation_count: 0,
                },
            );
        }
        let mut operations = BTreeMap::new();
        for op in self.operations() {
            let index = arena.by_operation.get(&op.spec.id).copied();
            let (preemptible, aggressively_preemptible) = self.preemptible_counts(op);
            operations.insert(
                op.spec.id.0.clone(),
                OperationSnapshot {
                    element: index.map(element),
                    pool: op.pool.clone(),
                    state: op.state.name(),
                    running_job_count: op.running_job_count(),
                    pending_job_count: op.pending_job_count(),
                    completed_job_count: op.tasks.iter().map(|t| t.completed).sum(),
                    preemptible_allocation_count: preemptible,
                    aggressively_preemptible_allocation_count: aggressively_preemptible,
                },
            );
        }
        Snapshot {
            t_ms: now,
            tree: self.tree.name.clone(),
            total_resources: total,
            pools,
            operations,
        }
    }
}
