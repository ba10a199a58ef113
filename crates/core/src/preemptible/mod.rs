//! Which allocations may be taken away (scheduler spec §2.3): each operation's allocations
//! classified oldest first against its fair share (preemptible, aggressively preemptible,
//! non-preemptible), cached per tree until its shares change; and each operation's preemption
//! priority from its own and its ancestors' starvation.
//!
//! Functions over explicit borrows of a tree, the books and the tree's `PreemptionCache`;
//! the queries of the public API are [`Scheduler`] methods.

pub(crate) mod classes;
pub(crate) use classes::{Classifier, OperationClasses, PreemptionCache};
pub use classes::{PreemptionPriority, PreemptionStatus};

use crate::model::{AllocationId, AllocationState, Operation, OperationId};
use crate::scheduler::Scheduler;
use crate::state::Books;
use crate::tree::{Arena, PoolTree, StarvationStatus};
use fairsched_config::PreemptionPriorityScope;
use fairsched_config::TreeConfig;
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{PartialResources, ResourceKind, ResourceVector, Resources};
use std::collections::BTreeMap;

impl Scheduler {
    /// Classifies an operation's running allocations, oldest first (spec §2.3): an allocation
    /// is non-preemptible while the usage of the allocations before it is below the aggressive
    /// bound, aggressively preemptible while below the regular bound, preemptible after.
    pub fn classify(&self, t: usize, op: &Operation) -> Vec<(AllocationId, PreemptionStatus)> {
        classify(&self.trees[t], &self.books, t, op)
    }

    /// Counts (preemptible, aggressively preemptible) allocations of an operation.
    pub fn preemptible_counts(&self, t: usize, op: &Operation) -> (u32, u32) {
        let mut p = 0;
        let mut ap = 0;
        for (_, s) in self.classify(t, op) {
            match s {
                PreemptionStatus::Preemptible => p += 1,
                PreemptionStatus::AggressivelyPreemptible => ap += 1,
                PreemptionStatus::NonPreemptible => {}
            }
        }
        (p, ap)
    }

    /// The operation's preemption priority from its own and (by scope) its ancestors' starvation;
    /// the SSD variants for an SSD operation when SSD priority preemption is enabled.
    pub fn preemption_priority(&self, t: usize, op: &Operation) -> PreemptionPriority {
        preemption_priority(&self.trees[t], op)
    }
}

/// [`Scheduler::classify`] in tree `t` (`tree`).
pub(crate) fn classify(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    op: &Operation,
) -> Vec<(AllocationId, PreemptionStatus)> {
    classify_with_prefix(tree, books, t, op).0
}

/// [`Scheduler::preemption_priority`] in `tree`.
pub(crate) fn preemption_priority(tree: &PoolTree, op: &Operation) -> PreemptionPriority {
    let arena = &tree.arena;
    let Some(&index) = arena.by_operation.get(&op.spec.id) else {
        return PreemptionPriority::None;
    };
    let ssd = arena
        .ssd
        .as_ref()
        .is_some_and(|ssd| ssd.is_ssd_operation(op));
    priority_of(arena, tree.config(), index, ssd)
}

/// Effective `non_preemptible_resource_usage_threshold` for an operation, with the tree's
/// `max_unpreemptible_running_allocation_count` folded into `user_slots`, then capped by
/// the operation's own `max_unpreemptible_allocation_count` (YTsaurus
/// `TSchedulerOperationElement::UpdateRecursiveAttributes`: the minimum of both, or the
/// operation's when the threshold has no `user_slots`).
fn non_preemptible_threshold(tree: &PoolTree, t: usize, op: &Operation) -> PartialResources {
    let mut threshold = tree
        .inherited(op.in_tree(t).map_or("", |o| o.pool.as_str()))
        .map(|p| p.non_preemptible_resource_usage_threshold)
        .unwrap_or(tree.config().non_preemptible_resource_usage_threshold);
    if !threshold.is_set(ResourceKind::UserSlots)
        && let Some(count) = tree.config().max_unpreemptible_running_allocation_count
    {
        threshold.set(ResourceKind::UserSlots, f64::from(count));
    }
    if let Some(count) = op.spec.max_unpreemptible_allocation_count {
        let own = Resources::convert(ResourceKind::UserSlots, f64::from(count));
        let slots = threshold
            .raw_of(ResourceKind::UserSlots)
            .map_or(own, |tree| tree.min(own));
        threshold.set_raw(ResourceKind::UserSlots, Some(slots));
    }
    threshold
}

/// [`Scheduler::classify`] (of tree `t`, `tree`), the usage of the classified allocations (the prefix the next
/// allocation of the operation would be classified with) and the classifier used.
fn classify_with_prefix(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    op: &Operation,
) -> (
    Vec<(AllocationId, PreemptionStatus)>,
    Resources,
    Option<Classifier>,
) {
    let classifier = classifier(tree, t, op);
    let mut prefix = Resources::ZERO;
    let mut out = Vec::with_capacity(op.allocations.len());
    // Only its allocations in this tree (each looked up once).
    for (id, a) in op
        .allocations
        .iter()
        .filter_map(|id| Some((*id, books.allocations.get(id)?)))
        .filter(|(_, a)| a.tree == t)
    {
        if classifier.is_some() && a.state != AllocationState::Running {
            continue;
        }
        let status = classifier
            .as_ref()
            .map_or(PreemptionStatus::Preemptible, |c| c.status(&prefix));
        out.push((id, status));
        prefix = prefix.add(&a.resources);
    }
    (out, prefix, classifier)
}

/// What classifies the operation's allocations in tree `t` until the next fair-share
/// update (`None`: it is not in the tree's last update, and everything is preemptible).
fn classifier(tree: &PoolTree, t: usize, op: &Operation) -> Option<Classifier> {
    let arena = &tree.arena;
    let &index = arena.by_operation.get(&op.spec.id)?;
    let attrs = &arena.elements[index].attrs;
    let fair = attrs.fair_share.total;
    let demand = attrs.demand_share;
    let config = tree.config();
    let satisfied = (fair + ResourceVector::splat(1e-6)).dominates(&demand);
    Some(Classifier {
        aggressive_bound: fair * config.aggressive_preemption_satisfaction_threshold,
        regular_bound: if satisfied {
            ResourceVector::splat(f64::INFINITY)
        } else {
            fair * config.preemption_satisfaction_threshold
        },
        threshold: non_preemptible_threshold(tree, t, op),
        total: arena.total_resources,
        fair,
        demand,
        whole: op.is_gang() && config.gang_placement.enable,
    })
}

/// A new allocation of `op` in the tree of `cache` (the last in its start order): its class joins
/// the cached classes, if any, instead of dropping them (a wide operation starting one
/// allocation per heartbeat would otherwise be classified from scratch every time).
pub(crate) fn classify_appended(
    cache: &mut PreemptionCache,
    op_id: &OperationId,
    id: AllocationId,
    resources: Resources,
) {
    let Some(classes) = cache.classes.get_mut(op_id) else {
        return;
    };
    let status = classes
        .classifier
        .as_ref()
        .map_or(PreemptionStatus::Preemptible, |c| c.status(&classes.prefix));
    classes.statuses.insert(id, status);
    classes.prefix = classes.prefix.add(&resources);
}

/// Elements of `arena` from `i` up to (not including) the root.
pub(crate) fn path_to_root(arena: &Arena, i: ElementIndex) -> Vec<ElementIndex> {
    std::iter::once(i)
        .chain(arena.ancestors(i))
        .filter(|&e| e != fairsched_hdrf::ROOT)
        .collect()
}

/// Classes of an operation's allocations in tree `t` (`tree`, its cache `cache`), cached until
/// its shares change or an allocation leaves (a new one joins the cache:
/// [`classify_appended`]). Debug builds check the cache against a classification from scratch
/// at every use.
pub(crate) fn cached_classes<'c>(
    cache: &'c mut PreemptionCache,
    tree: &PoolTree,
    books: &Books,
    t: usize,
    op_id: &OperationId,
) -> &'c BTreeMap<AllocationId, PreemptionStatus> {
    if !cache.classes.contains_key(op_id) {
        let (classes, prefix, classifier) =
            classify_with_prefix(tree, books, t, &books.operations[op_id]);
        cache.classes.insert(
            op_id.clone(),
            OperationClasses {
                statuses: classes.into_iter().collect(),
                prefix,
                classifier,
            },
        );
    } else if cfg!(debug_assertions) {
        let (fresh, prefix, _) = classify_with_prefix(tree, books, t, &books.operations[op_id]);
        let fresh: BTreeMap<AllocationId, PreemptionStatus> = fresh.into_iter().collect();
        debug_assert_eq!(
            cache.classes[op_id].statuses, fresh,
            "cached allocation classes of {op_id:?} differ from a fresh classification \
             (prefix {:?} cached, {prefix:?} fresh)",
            cache.classes[op_id].prefix
        );
    }
    &cache.classes[op_id].statuses
}

/// The preemption priority of operation element `index` of `arena` (`ssd`: an SSD
/// operation, under SSD priority preemption) from its own and, by the tree's scope, its
/// ancestors' starvation.
fn priority_of(
    arena: &Arena,
    config: &TreeConfig,
    index: ElementIndex,
    ssd: bool,
) -> PreemptionPriority {
    let own = std::iter::once(index);
    let worst = match config.scheduling_preemption_priority_scope {
        PreemptionPriorityScope::OperationOnly => {
            own.map(|e| arena.elements[e].starvation_status).max()
        }
        _ => own
            .chain(arena.ancestors(index))
            .filter(|&e| e != fairsched_hdrf::ROOT)
            .map(|e| arena.elements[e].starvation_status)
            .max(),
    }
    .unwrap_or(StarvationStatus::NonStarving);
    match (worst, ssd) {
        (StarvationStatus::NonStarving, _) => PreemptionPriority::None,
        (StarvationStatus::Starving, false) => PreemptionPriority::Normal,
        (StarvationStatus::Starving, true) => PreemptionPriority::SsdNormal,
        (StarvationStatus::AggressivelyStarving, false) => PreemptionPriority::Aggressive,
        (StarvationStatus::AggressivelyStarving, true) => PreemptionPriority::SsdAggressive,
    }
}

/// The operations of a freshly computed arena by preemption priority (none: not listed), in
/// id order (`ssd_task(i)`: element `i`'s operation has a task on an SSD medium).
pub(crate) fn preemption_targets(
    arena: &Arena,
    config: &TreeConfig,
    ssd_task: impl Fn(ElementIndex) -> bool,
) -> BTreeMap<PreemptionPriority, Vec<ElementIndex>> {
    let ssd_enabled = arena.ssd.as_ref().is_some_and(|ssd| ssd.enabled);
    let mut targets: BTreeMap<PreemptionPriority, Vec<ElementIndex>> = BTreeMap::new();
    for &i in arena.by_operation.values() {
        match priority_of(arena, config, i, ssd_enabled && ssd_task(i)) {
            PreemptionPriority::None => {}
            priority => targets.entry(priority).or_default().push(i),
        }
    }
    targets
}
