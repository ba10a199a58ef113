//! What preemption keeps per tree between fair-share updates (see [`super`]): each operation's
//! allocation classes and the operations by preemption priority.

use crate::model::AllocationId;
use crate::status::strictly_dominates_on_non_blocked;
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{PartialResources, ResourceKind, ResourceVector, Resources};
use std::collections::BTreeMap;

/// One tree's preemption caches.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PreemptionCache {
    /// Operations (arena indices) by preemption priority (none: not listed), as of the last
    /// fair-share update.
    pub(crate) targets: BTreeMap<PreemptionPriority, Vec<ElementIndex>>,
    /// For each priority of `targets`: the operations listed that may start in a preemptive
    /// stage (all but gang operations placed all at once), sorted, with whether gangs were
    /// placed all at once then; `None` when unknown (an operation was submitted since, which
    /// may reuse a forgotten one's id): then every target is looked up.
    pub(crate) open_targets: Option<OpenTargets>,
    /// Allocation classes per operation, dropped when its shares change or one of its
    /// allocations leaves; a new allocation joins them.
    pub(crate) classes: BTreeMap<crate::model::OperationId, OperationClasses>,
}

/// [`PreemptionCache::open_targets`]: whether the tree placed gangs all at once when they were
/// listed, and the list per priority.
pub(crate) type OpenTargets = (bool, BTreeMap<PreemptionPriority, Vec<ElementIndex>>);

/// An operation's cached allocation classes in one tree.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OperationClasses {
    pub(crate) statuses: BTreeMap<AllocationId, PreemptionStatus>,
    /// Usage of the classified allocations: the prefix of the next one.
    pub(crate) prefix: Resources,
    /// The bounds they were classified with (`None`: not in the last update).
    pub(crate) classifier: Option<Classifier>,
}

/// The bounds an operation's allocations are classified with (spec §2.3), fixed between
/// fair-share updates.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Classifier {
    pub(crate) aggressive_bound: ResourceVector,
    pub(crate) regular_bound: ResourceVector,
    pub(crate) threshold: PartialResources,
    pub(crate) total: Resources,
    pub(crate) fair: ResourceVector,
    pub(crate) demand: ResourceVector,
    /// A gang operation its tree starts whole (`gang_placement`): preempting one of its
    /// allocations takes them all, so they are classified as one, each as the first (nothing
    /// of it is taken while any of it is within its fair share).
    pub(crate) whole: bool,
}

impl Classifier {
    /// The class of an allocation started after allocations using `prefix` (of a whole
    /// gang: after none).
    pub(crate) fn status(&self, prefix: &Resources) -> PreemptionStatus {
        let prefix = if self.whole { &Resources::ZERO } else { prefix };
        let below = |bound: &ResourceVector| {
            below_absolute_threshold(&self.threshold, prefix)
                || strictly_dominates_on_non_blocked(
                    bound,
                    &ResourceVector::from_resources(prefix, &self.total),
                    &self.fair,
                    &self.demand,
                )
        };
        if below(&self.aggressive_bound) {
            PreemptionStatus::NonPreemptible
        } else if below(&self.regular_bound) {
            PreemptionStatus::AggressivelyPreemptible
        } else {
            PreemptionStatus::Preemptible
        }
    }
}

/// An allocation's class by the start-order prefix rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PreemptionStatus {
    NonPreemptible,
    AggressivelyPreemptible,
    Preemptible,
}

/// How hard an operation may preempt (its own or an ancestor's starvation), YTsaurus
/// `EOperationPreemptionPriority`. Each preemptive stage serves the operations of one priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PreemptionPriority {
    None,
    /// Starving: the `preemptive` stage.
    Normal,
    /// Aggressively starving: the `aggressive` stage.
    Aggressive,
    /// A starving SSD operation (SSD priority preemption enabled, some task asks for disk on an
    /// SSD medium): the `ssd_preemptive` stage, on SSD nodes only.
    SsdNormal,
    /// An aggressively starving SSD operation: the `ssd_aggressive` stage, on SSD nodes only.
    SsdAggressive,
}

/// `threshold` strictly dominates `usage` (every set component larger; an empty threshold is
/// disabled).
fn below_absolute_threshold(threshold: &PartialResources, usage: &Resources) -> bool {
    if threshold.is_empty() {
        return false;
    }
    ResourceKind::ALL
        .iter()
        .all(|&k| threshold.raw_of(k).is_none_or(|t| usage.raw_of(k) < t))
}
