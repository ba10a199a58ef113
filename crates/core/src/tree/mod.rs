//! A pool tree as the core runs it: its validated configuration, its ephemeral pools, and the
//! element arena (root, pools, operations) built at each fair-share update, with the update's
//! results and the statuses derived from them.

use crate::model::{Millis, OperationId};
use fairsched_config::{
    EffectivePool, FifoPoolSchedulingOrder, FifoSortParameter as CfgFifoSort,
    IntegralGuaranteeType as CfgIntegral, PoolConfig, PoolNode, SchedulingMode, TreeConfig,
    ValidatedTree,
};
use fairsched_hdrf::{
    ElementAttributes, ElementIndex, FifoSortParameter, IntegralGuaranteeType, IntegralGuarantees,
    IntegralState, OperationSpec as HdrfOperation, PoolMode, PoolSpec, ROOT, Tree, UpdateError,
    UpdateInput, UpdateOptions,
};
use fairsched_resources::{ResourceVector, Resources};
use std::collections::BTreeMap;
use std::sync::Arc;

mod update;
pub(crate) use update::{PreparedOperation, TreeUpdate, prepare_operation};

/// Name of the root element, as YTsaurus writes it.
pub const ROOT_NAME: &str = "<Root>";

/// An ephemeral pool: created on the fly for an operation, removed when empty.
#[derive(Clone, Debug, PartialEq)]
pub struct EphemeralPool {
    pub parent: String,
    pub user: String,
    pub config: PoolConfig,
}

/// Scheduling status of an element (YTsaurus `scheduling_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulingStatus {
    Normal,
    BelowFairShare,
}

impl SchedulingStatus {
    pub fn name(self) -> &'static str {
        match self {
            SchedulingStatus::Normal => "normal",
            SchedulingStatus::BelowFairShare => "below_fair_share",
        }
    }
}

/// Starvation status of an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StarvationStatus {
    NonStarving,
    Starving,
    AggressivelyStarving,
}

impl StarvationStatus {
    pub fn name(self) -> &'static str {
        match self {
            StarvationStatus::NonStarving => "non_starving",
            StarvationStatus::Starving => "starving",
            StarvationStatus::AggressivelyStarving => "aggressively_starving",
        }
    }
}

/// What an element of the arena is.
#[derive(Clone, Debug, PartialEq)]
pub enum ElementRef {
    Root,
    Pool(String),
    Operation(OperationId),
}

/// One element of the arena with everything the heartbeat and the snapshot need.
#[derive(Clone, Debug)]
pub struct Element {
    pub kind: ElementRef,
    pub parent: Option<ElementIndex>,
    pub children: Vec<ElementIndex>,
    /// FIFO pools: children in FIFO order.
    pub fifo: bool,
    /// FIFO pool with `fifo_pool_scheduling_order: fifo`: the heartbeat takes the first active
    /// child in FIFO order instead of the least satisfied one.
    pub schedule_in_fifo_order: bool,
    /// Specified resource limits (absolute; unset components infinite).
    pub resource_limits: Resources,
    pub attrs: ElementAttributes,
    pub scheduling_status: SchedulingStatus,
    pub starvation_status: StarvationStatus,
    /// Effective starvation settings.
    pub tolerance: f64,
    pub starvation_timeout_ms: u64,
    pub aggressive_starvation_enabled: bool,
    pub use_pool_satisfaction_for_scheduling: bool,
    /// Operations with few pending jobs: both starvation timeouts are multiplied by this
    /// (`allocation_count_preemption_timeout_coefficient`); 1 otherwise.
    pub timeout_scale: f64,
    /// Operations with `enable_guarantee_priority_scheduling`: below the promised guarantee
    /// fair share at the last update, so scheduled in the high-priority regular stage.
    pub guarantee_priority: bool,
    /// Regular (non-SSD) jobs of this subtree may run on SSD nodes
    /// (`allow_regular_jobs_on_ssd_nodes`, inherited; true unless a pool says otherwise).
    pub allow_regular_on_ssd: bool,
    /// The scheduling tag filters a node must match to run this element's jobs: its own
    /// `scheduling_tag_filter` and its ancestors' (an index into [`Arena::tag_sets`]; 0: none).
    ///
    /// They decide where jobs run, not fair shares: the fair-share update does not cap an
    /// element's limits at the resources of the nodes its filters match. YTsaurus computes such
    /// a cap (`scheduling_tag_filter_resource_limits`), but the behaviour the conformance
    /// scenarios pin (YT-S23, pool variant: an operation whose filter matches no node keeps a
    /// fair share and starves, and its pool's fair share is the whole node) needs it off; a
    /// cap was tried on 2026-11-26 and broke that scenario, so it stays off.
    pub tag_set: usize,
    /// An operation of a FIFO pool after the first `max_schedulable_element_count_in_fifo_pool`
    /// operations with a fair share (as of the last update): it gets no jobs.
    pub fifo_limited: bool,
}

/// SSD nodes and media as of the last update (`ssd_priority_preemption` with a
/// `node_tag_filter`).
///
/// The nodes the filter matches are the only nodes with SSD media, so a job asking for disk on
/// one of `media` (an SSD job) runs only there, whether or not the feature is enabled. With
/// `enabled`, SSD nodes also run the SSD preemptive stages, SSD allocations there get the `Ssd*`
/// preemption levels, starving SSD operations the `Ssd*` preemption priorities, and pools may
/// keep their regular jobs off SSD nodes (`allow_regular_allocations_on_ssd_nodes`).
#[derive(Clone, Debug)]
pub struct SsdNodes {
    /// Which nodes are SSD nodes.
    pub filter: fairsched_config::TagFilter,
    /// Disk media that make a job an SSD job.
    pub media: Vec<String>,
    /// `ssd_priority_preemption.enable`.
    pub enabled: bool,
}

/// Whether a job of `task` asks for disk on one of `media`.
pub(crate) fn asks_for_media(task: &crate::model::TaskSpec, media: &[String]) -> bool {
    task.disk_request
        .as_ref()
        .is_some_and(|d| media.contains(&d.medium_name))
}

impl SsdNodes {
    /// Whether a job of `task` asks for disk on an SSD medium.
    pub fn is_ssd_task(&self, task: &crate::model::TaskSpec) -> bool {
        asks_for_media(task, &self.media)
    }

    /// Whether SSD priority preemption applies on a node with `tags` (enabled, and the node is
    /// an SSD node): its preemptive heartbeats run the SSD stages first.
    pub fn priority_on(&self, tags: &std::collections::BTreeSet<String>) -> bool {
        self.enabled && self.filter.matches(tags)
    }

    /// Whether SSD priority preemption treats the operation as an SSD operation (enabled, and
    /// some of its tasks asks for an SSD medium): when starving it gets the `Ssd*` preemption
    /// priorities.
    pub fn is_ssd_operation(&self, op: &crate::model::Operation) -> bool {
        self.enabled && op.spec.tasks.iter().any(|t| self.is_ssd_task(t))
    }

    /// Whether a job of `task` may run on a node with `tags` from an element whose
    /// `allow_regular_on_ssd` is `allow_regular`: SSD jobs need an SSD node (the only nodes
    /// with SSD media, as modelled here); with the feature enabled, regular jobs stay off SSD
    /// nodes when not allowed.
    pub fn allows(
        &self,
        task: &crate::model::TaskSpec,
        tags: &std::collections::BTreeSet<String>,
        allow_regular: bool,
    ) -> bool {
        let ssd_node = self.filter.matches(tags);
        if self.is_ssd_task(task) {
            ssd_node
        } else {
            allow_regular || !self.enabled || !ssd_node
        }
    }
}

/// The result of the last fair-share update of a tree.
#[derive(Clone, Debug, Default)]
pub struct Arena {
    pub elements: Vec<Element>,
    pub by_pool: BTreeMap<String, ElementIndex>,
    pub by_operation: BTreeMap<OperationId, ElementIndex>,
    pub total_resources: Resources,
    pub errors: Vec<UpdateError>,
    pub computed_at: Option<Millis>,
    /// Some operation in the tree is in graceful preemption mode.
    pub any_graceful: bool,
    /// Sets of scheduling tag filters (all must match), referred to by [`Element::tag_set`];
    /// the first is empty.
    pub tag_sets: Vec<Vec<fairsched_config::TagFilter>>,
    /// SSD nodes and media when `ssd_priority_preemption` is enabled.
    pub ssd: Option<SsdNodes>,
}

impl Arena {
    /// Some element of the tree has scheduling tag filters that the tree honours (sets beyond
    /// the empty one exist only when `enable_scheduling_tags` is on).
    pub fn any_tag_filter(&self) -> bool {
        self.tag_sets.len() > 1
    }

    /// Whether a node with `tags` matches every scheduling tag filter of element `i` (its own
    /// and its ancestors').
    pub fn tags_allow(&self, i: ElementIndex, tags: &std::collections::BTreeSet<String>) -> bool {
        self.tag_sets[self.elements[i].tag_set]
            .iter()
            .all(|f| f.matches(tags))
    }

    /// Ancestors of `i` (parent first), the root included.
    pub fn ancestors(&self, i: ElementIndex) -> impl Iterator<Item = ElementIndex> + '_ {
        std::iter::successors(self.elements[i].parent, move |&p| self.elements[p].parent)
    }

    /// Path of a pool from the root (`parent/child`), or the operation id.
    pub fn path(&self, i: ElementIndex) -> String {
        let mut names: Vec<&str> = Vec::new();
        let mut cur = Some(i);
        while let Some(c) = cur {
            match &self.elements[c].kind {
                ElementRef::Root => break,
                ElementRef::Pool(p) => names.push(p),
                ElementRef::Operation(o) => names.push(&o.0),
            }
            cur = self.elements[c].parent;
        }
        names.reverse();
        names.join("/")
    }
}

/// A pool tree.
#[derive(Clone, Debug)]
pub struct PoolTree {
    pub name: String,
    /// The pools' configuration (shared with a fair-share update being computed).
    pub validated: Arc<ValidatedTree>,
    pub ephemeral: BTreeMap<String, EphemeralPool>,
    pub integral_states: BTreeMap<String, IntegralState>,
    /// Since when each element (pool name or operation id) has been below its fair share.
    pub below_fair_share_since: BTreeMap<String, Millis>,
    pub arena: Arena,
    pub last_update_ms: Option<Millis>,
    /// Which nodes the tree takes (`node_tag_filter`; validated when the config was accepted).
    pub node_filter: fairsched_config::TagFilter,
    /// Set when limits were lowered (usage may exceed them until preemption trims it).
    pub(crate) limits_maybe_violated: bool,
    /// When a starvation status of the last update changes next by the clock alone (see
    /// [`crate::Scheduler::next_status_change`]).
    pub(crate) next_status_change_ms: Option<Millis>,
    /// Fair-share alerts (code, message; e.g. 29000) raised by the last update, logged when
    /// they appear.
    pub(crate) active_alerts: Vec<(u32, String)>,
    /// The fair-share library's working memory, kept between this tree's updates (lent to an
    /// update being computed).
    pub(crate) workspace: fairsched_hdrf::Workspace,
    /// Counts configuration changes: an update prepared before one is not installed.
    pub(crate) generation: u64,
}

/// Index of the tree named `name` among `trees`.
pub(crate) fn tree_index(trees: &[PoolTree], name: &str) -> Option<usize> {
    trees.iter().position(|t| t.name == name)
}

impl PoolTree {
    /// The fair-share alerts of the last update (code, message without the tree's name), by
    /// code: active until an update no longer raises them.
    pub fn alerts(&self) -> &[(u32, String)] {
        &self.active_alerts
    }

    pub fn new(name: String, validated: ValidatedTree) -> PoolTree {
        let node_filter = node_filter(&validated);
        PoolTree {
            name,
            validated: Arc::new(validated),
            ephemeral: BTreeMap::new(),
            integral_states: BTreeMap::new(),
            below_fair_share_since: BTreeMap::new(),
            arena: Arena::default(),
            last_update_ms: None,
            node_filter,
            limits_maybe_violated: false,
            next_status_change_ms: None,
            active_alerts: Vec::new(),
            workspace: fairsched_hdrf::Workspace::default(),
            generation: 0,
        }
    }

    /// Replaces the validated configuration (and the node filter with it).
    pub(crate) fn set_validated(&mut self, validated: ValidatedTree) {
        self.node_filter = node_filter(&validated);
        self.validated = Arc::new(validated);
        self.generation += 1;
    }

    pub fn config(&self) -> &TreeConfig {
        self.validated.config()
    }

    /// Whether a pool (explicit or ephemeral) exists.
    pub fn has_pool(&self, name: &str) -> bool {
        self.validated.pool(name).is_some() || self.ephemeral.contains_key(name)
    }

    /// Explicit pool's effective settings.
    pub fn explicit(&self, name: &str) -> Option<&EffectivePool> {
        self.validated.pool(name)
    }

    /// The settings a pool's operations inherit: an explicit pool's effective ones; for an
    /// ephemeral pool (which configures none of them) its parent's, as an explicit child
    /// without its own takes its parent's (YTsaurus: own value, else the parent's effective
    /// one). `None` at the root's level (the tree's settings apply).
    pub fn inherited(&self, name: &str) -> Option<&EffectivePool> {
        self.validated.pool(name).or_else(|| {
            self.ephemeral
                .get(name)
                .and_then(|e| self.validated.pool(&e.parent))
        })
    }

    /// A pool's configuration (explicit or ephemeral).
    pub fn pool_config(&self, name: &str) -> Option<&PoolConfig> {
        self.validated
            .pool(name)
            .map(|p| &p.config)
            .or_else(|| self.ephemeral.get(name).map(|e| &e.config))
    }

    /// A pool's parent name (`None` for top-level pools).
    pub fn parent_of(&self, name: &str) -> Option<String> {
        if let Some(p) = self.validated.pool(name) {
            return p.parent.clone();
        }
        self.ephemeral
            .get(name)
            .and_then(|e| (e.parent != ROOT_NAME).then(|| e.parent.clone()))
    }
}

/// The fair-share computation's options from a tree's configuration.
fn update_options(c: &TreeConfig) -> UpdateOptions {
    UpdateOptions {
        main_resource: c.main_resource,
        integral_pool_capacity_saturation_period_seconds: c
            .integral_guarantees
            .pool_capacity_saturation_period_ms
            as f64
            / 1000.0,
        integral_smooth_period_seconds: c.integral_guarantees.smooth_period_ms as f64 / 1000.0,
        relaxed_share_multiplier_limit: c.integral_guarantees.relaxed_share_multiplier_limit,
        infer_weight_from_guarantees_share_multiplier: c
            .infer_weight_from_guarantees_share_multiplier,
        enable_step_function_for_gang_operations: c.enable_step_function_for_gang_operations,
        enable_fifo_children_reordering_for_guarantee_utilization: c
            .enable_fifo_children_reordering_for_guarantee_utilization,
        enable_improved_fair_share_by_fit_factor_computation: c
            .enable_improved_fair_share_by_fit_factor_computation,
        enable_improved_fair_share_by_fit_factor_computation_distribution_gap: c
            .enable_improved_fair_share_by_fit_factor_computation_distribution_gap,
        enable_fast_fifo_fair_share_by_fit_factor_computation: c
            .enable_fast_fifo_fair_share_by_fit_factor_computation,
    }
}

/// The fair-share view of a pool's configuration.
/// The tree's node filter (an unparsable one, which validation rejects, matches nothing).
fn node_filter(validated: &ValidatedTree) -> fairsched_config::TagFilter {
    let text = validated.config().node_tag_filter.as_deref().unwrap_or("");
    fairsched_config::TagFilter::parse(text).unwrap_or_else(|_| {
        fairsched_config::TagFilter::parse("!__invalid_node_tag_filter__ & __invalid__")
            .expect("literal filter parses")
    })
}

pub fn pool_spec(config: &PoolConfig, infer_weights: bool) -> PoolSpec {
    let integral = &config.integral_guarantees;
    PoolSpec {
        mode: match config.mode {
            SchedulingMode::Fifo => PoolMode::Fifo,
            SchedulingMode::FairShare => PoolMode::FairShare,
        },
        strong_guarantee_resources: config.strong_guarantee_resources,
        integral_guarantees: IntegralGuarantees {
            guarantee_type: match integral.guarantee_type {
                CfgIntegral::None => IntegralGuaranteeType::None,
                CfgIntegral::Burst => IntegralGuaranteeType::Burst,
                CfgIntegral::Relaxed => IntegralGuaranteeType::Relaxed,
            },
            resource_flow: integral.resource_flow.or_zero(),
            burst_guarantee_resources: integral.burst_guarantee_resources.or_zero(),
            relaxed_share_multiplier_limit: integral.relaxed_share_multiplier_limit,
            can_accept_free_volume: integral.can_accept_free_volume,
            should_distribute_free_volume_among_children: integral
                .should_distribute_free_volume_among_children
                .unwrap_or(false),
        },
        fifo_sort_parameters: config
            .fifo_sort_parameters
            .iter()
            .map(|p| match p {
                CfgFifoSort::Weight => FifoSortParameter::Weight,
                CfgFifoSort::StartTime => FifoSortParameter::StartTime,
                CfgFifoSort::PendingJobCount => FifoSortParameter::PendingJobCount,
            })
            .collect(),
        allow_gang_step_function: true,
        infer_weight: infer_weights && config.weight.is_none(),
        enable_promised_guarantee_fair_share: config.compute_promised_guarantee_fair_share,
        enable_fifo_children_reordering_for_guarantee_utilization: config
            .enable_fifo_children_reordering_for_guarantee_utilization,
        priority_strong_guarantee_adjustment: config.enable_priority_strong_guarantee_adjustment,
        priority_strong_guarantee_adjustment_donorship: config
            .enable_priority_strong_guarantee_adjustment_donorship,
    }
}

#[cfg(test)]
mod ssd_tests {
    use super::SsdNodes;
    use crate::model::TaskSpec;

    fn task(medium: Option<&str>) -> TaskSpec {
        serde_json::from_value(serde_json::json!({
            "job_count": 1,
            "disk_request": medium.map(|m| serde_json::json!({"medium_name": m})),
        }))
        .expect("task spec")
    }

    /// (job's medium, node is SSD, regular jobs allowed on SSD, may run)
    const CASES: &[(Option<&str>, bool, bool, bool)] = &[
        (None, false, false, true),
        (None, true, false, false),
        (None, true, true, true),
        (Some("hdd"), true, false, false),
        (Some("ssd_slots"), true, false, true),
        (Some("ssd_slots"), false, true, false),
    ];

    fn ssd(enabled: bool) -> SsdNodes {
        SsdNodes {
            filter: fairsched_config::TagFilter::parse("ssd_tag").expect("filter"),
            media: vec!["ssd_slots".to_string()],
            enabled,
        }
    }

    #[test]
    fn ssd_jobs_need_ssd_nodes_and_regular_jobs_may_be_kept_off_them() {
        let ssd = ssd(true);
        for &(medium, ssd_node, allow_regular, expected) in CASES {
            let tags = if ssd_node {
                ["ssd_tag".to_string()].into()
            } else {
                Default::default()
            };
            assert_eq!(
                ssd.allows(&task(medium), &tags, allow_regular),
                expected,
                "medium {medium:?}, SSD node {ssd_node}, regular allowed {allow_regular}"
            );
        }
    }

    /// With the feature disabled SSD jobs still need the SSD nodes (the only ones with SSD
    /// media), but regular jobs may go anywhere and nothing gets SSD priority.
    #[test]
    fn disabled_keeps_media_placement_only() {
        let disabled = ssd(false);
        let on_ssd: std::collections::BTreeSet<String> = ["ssd_tag".to_string()].into();
        let off_ssd = Default::default();
        assert!(disabled.allows(&task(Some("ssd_slots")), &on_ssd, false));
        assert!(!disabled.allows(&task(Some("ssd_slots")), &off_ssd, true));
        assert!(disabled.allows(&task(None), &on_ssd, false));
        assert!(!disabled.priority_on(&on_ssd));
        assert!(ssd(true).priority_on(&on_ssd));
        assert!(!ssd(true).priority_on(&off_ssd));
    }
}
