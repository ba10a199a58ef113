//! The tree's own options: the `config` object of a pool tree.

use crate::common::{
    FifoPoolSchedulingOrder, PreemptionPriorityScope, ROOT_POOL_NAME, resource_kind_serde,
};
use crate::pool::PoolPresetConfig;
use fairsched_resources::{PartialResources, ResourceKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Options of one pool tree (YTsaurus `//sys/pool_trees/<tree>/@config`,
/// `TFairShareStrategyTreeConfig`).
///
/// Names are the YTsaurus names; durations are the YTsaurus name plus `_ms`, in milliseconds.
/// Every field has a default, so `{}` is a valid tree config. Defaults are those of the
/// YTsaurus code unless the field's documentation says otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TreeConfig {
    // ----- Nodes, structure and operation limits -----
    /// Boolean expression over node tags selecting the nodes of this tree (alias
    /// `nodes_filter`). Absent: every node. Trees must not share nodes. Default: absent.
    #[schemars(!skip_serializing_if)]
    #[serde(alias = "nodes_filter", skip_serializing_if = "Option::is_none")]
    pub node_tag_filter: Option<String>,

    /// The tree's main resource. A pool that configures any strong guarantee must include it
    /// (an explicit 0 is fine); unset guarantee components are inferred proportionally to it.
    /// Default: `cpu`.
    #[serde(with = "resource_kind_serde")]
    #[schemars(with = "crate::reference::ResourceName")]
    pub main_resource: ResourceKind,

    /// Pool under which ephemeral pools (operations naming a pool that does not exist) are
    /// created. `"<Root>"` means directly under the root. A missing or FIFO default parent is
    /// reported as a warning and the root is used instead, as in YTsaurus. Default: `"<Root>"`.
    pub default_parent_pool: String,

    /// Whether the user → default-parent-pool map of the server is consulted before
    /// `default_parent_pool`. Accepted for compatibility with YTsaurus configurations, but
    /// fairsched has no such map yet: this option has no effect (`default_parent_pool` and
    /// `create_ephemeral_subpools` decide). Default: false.
    pub use_user_default_parent_pool_map: bool,

    /// Most operations (running + pending) in the whole tree; more are rejected with error 202.
    /// Must be > 0. Default: 50000.
    pub max_operation_count: u32,

    /// Most running operations in the whole tree; further operations stay pending. Must be > 0
    /// and at most `max_operation_count`. Default: 2000.
    pub max_running_operation_count: u32,

    /// `max_operation_count` of a pool that does not set it. Must be > 0. Default: 50.
    pub max_operation_count_per_pool: u32,

    /// `max_running_operation_count` of a pool that does not set it. Must be > 0 and at most
    /// `max_operation_count_per_pool`. Default: 8, the value the YTsaurus documentation gives
    /// for a pool (seed 001); the YTsaurus code default is 50.
    pub max_running_operation_count_per_pool: u32,

    /// Most ephemeral pools one user may own under the default parent pool. Must be >= 1.
    /// Default: 1. (`max_ephemeral_pool_per_user`, the spelling in the YTsaurus docs, is
    /// accepted as an alias.)
    #[serde(alias = "max_ephemeral_pool_per_user")]
    pub max_ephemeral_pools_per_user: u32,

    /// Forbids starting operations directly in the root pool. Default: true.
    pub forbid_immediate_operations_in_root: bool,

    /// When set to m (>= 1), a pool without an explicit weight gets a weight proportional to its
    /// guarantee: `m × (strong guarantee share + resource flow ratio)` relative to its parent's.
    /// Aliases: `infer_weight_from_strong_guarantee_share_multiplier`,
    /// `infer_weight_from_min_share_ratio_multiplier`. Default: unset (weights default to 1).
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "infer_weight_from_strong_guarantee_share_multiplier",
        alias = "infer_weight_from_min_share_ratio_multiplier",
        skip_serializing_if = "Option::is_none"
    )]
    pub infer_weight_from_guarantees_share_multiplier: Option<f64>,

    /// Tree-wide integral-guarantee settings.
    pub integral_guarantees: TreeIntegralGuaranteesConfig,

    /// Default of the pool option `integral_guarantees.should_distribute_free_volume_among_children`
    /// for pools that do not set it. Default: false.
    pub should_distribute_free_volume_among_children: bool,

    /// Named partial pool configs that pools pull in with `config_presets`.
    /// Default: none.
    pub pool_config_presets: BTreeMap<String, PoolPresetConfig>,

    // ----- Starvation -----
    /// An element is `below_fair_share` when its usage share is below `fair share × tolerance`
    /// (on its non-blocked resources). Range [0, 1]. Default: 0.8.
    pub fair_share_starvation_tolerance: f64,

    /// How long an element must stay below its fair share before it starves and may preempt
    /// (alias `fair_share_preemption_timeout_ms`). Default: 30000 ms.
    #[serde(alias = "fair_share_preemption_timeout_ms")]
    pub fair_share_starvation_timeout_ms: u64,

    /// How long before a starving element becomes aggressively starving (only if aggressive
    /// starvation is enabled for it). Must be >= `fair_share_starvation_timeout_ms`.
    /// Default: 120000 ms.
    pub fair_share_aggressive_starvation_timeout_ms: u64,

    /// Tree-wide default of the pool option `enable_aggressive_starvation`. Default: false.
    pub enable_aggressive_starvation: bool,

    /// Whether pools (not only operations) can starve. Default: true.
    pub enable_pool_starvation: bool,

    /// Timeouts of operations with few pending allocations are scaled by
    /// `pending allocations / coefficient` when that is below 1 (alias
    /// `job_count_preemption_timeout_coefficient`). Must be >= 1. Default: 1.0.
    #[serde(alias = "job_count_preemption_timeout_coefficient")]
    pub allocation_count_preemption_timeout_coefficient: f64,

    // ----- Preemption -----
    /// Allocations whose prefix usage exceeds `fair share × threshold` are preemptible. Must be
    /// > 0. Default: 1.0.
    pub preemption_satisfaction_threshold: f64,

    /// Allocations whose prefix usage exceeds `fair share × threshold` (but not the regular
    /// threshold) are aggressively preemptible. Must be >= 0 and at most
    /// `preemption_satisfaction_threshold`. Default: 0.2.
    pub aggressive_preemption_satisfaction_threshold: f64,

    /// An operation's allocations are never preempted while its usage is below this (per
    /// resource; unset resources do not protect). Default: `{}` (disabled).
    #[schemars(with = "crate::reference::ResourceMap")]
    pub non_preemptible_resource_usage_threshold: PartialResources,

    /// Legacy form of `non_preemptible_resource_usage_threshold.user_slots`: used for it when
    /// the threshold does not set `user_slots` (aliases `max_unpreemptible_running_job_count`,
    /// `max_unpreemptable_running_job_count`). Default: unset.
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "max_unpreemptible_running_job_count",
        alias = "max_unpreemptable_running_job_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_unpreemptible_running_allocation_count: Option<u32>,

    /// Minimum interval between preemptive scheduling passes on one node. Default: 5000 ms.
    pub preemptive_scheduling_backoff_ms: u64,

    /// Interruption window given to a preempted allocation's job (of an operation with an
    /// `interruption_signal`) before it is aborted, for operations that do not set their own
    /// `interruption_timeout_ms` (alias `job_interrupt_timeout_ms`). Default: unset: such
    /// operations get 15000 ms (seed 004's standard `interruption_timeout`; YTsaurus' tree
    /// default is 10000 ms).
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "job_interrupt_timeout_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocation_preemption_timeout_ms: Option<u64>,

    /// Interruption window for allocations of `graceful` operations shrunk to their fair share
    /// (alias `job_graceful_interrupt_timeout_ms`). Default: 60000 ms.
    #[serde(alias = "job_graceful_interrupt_timeout_ms")]
    pub allocation_graceful_preemption_timeout_ms: u64,

    /// Longest a job started by preemption may wait on its node for the jobs preempted for it
    /// (still being interrupted) to give their resources back: at the node's first heartbeat
    /// at or after its start plus this timeout, if one of them is still there, the new job is
    /// aborted with reason `waiting_timeout` and goes back to pending; the preempted jobs keep
    /// their interruption (alias `waiting_job_timeout_ms`). Keep it longer than the
    /// interruption window (`allocation_preemption_timeout_ms`, an operation's
    /// `interruption_timeout_ms`), or preemptors of jobs that do not exit in time are aborted.
    /// Default: unset (no limit).
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "waiting_job_timeout_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub waiting_for_resources_on_node_timeout_ms: Option<u64>,

    /// Which starvation (the operation's own, or also its ancestors') qualifies an operation for
    /// preemptive scheduling. Default: `operation_and_ancestors`.
    pub scheduling_preemption_priority_scope: PreemptionPriorityScope,

    /// Whether aggressive preemption may take allocations of gang operations. Default: true.
    pub allow_aggressive_preemption_for_gang_operations: bool,

    /// Whether allocations of an operation that is itself starving may be preempted. Default:
    /// false (a starving operation is protected, the behaviour of YTsaurus releases up to 2024;
    /// the newest YTsaurus code has the option without a confirmed default).
    pub allow_preemption_from_starving_operations: bool,

    /// Conditional preemption: when the blocking checks (`preemption_check_starvation`,
    /// `preemption_check_satisfaction`) find a blocking pool above a victim operation, the victim
    /// may still be preempted, but only in favour of operations inside that pool; without it
    /// such a victim is protected from every preemptor. Default: true (YTsaurus' newest
    /// configuration).
    pub enable_conditional_preemption: bool,

    /// Blocking check: walking up from a victim operation (the root excluded), the first
    /// element that is starving protects the victim (or, with conditional preemption, makes it
    /// preemptible only from inside that pool). Default: true (YTsaurus).
    pub preemption_check_starvation: bool,

    /// Blocking check: as `preemption_check_starvation`, for the first element whose local
    /// satisfaction is below the preemption satisfaction threshold (the aggressive one in the
    /// aggressive and SSD stages where aggressive preemption is allowed). Default: true
    /// (YTsaurus).
    pub preemption_check_satisfaction: bool,

    /// Most allocations started through preemption per node heartbeat, over all preemptive
    /// stages. YTsaurus hard-codes 1; fairsched makes it a knob. Must be >= 1. Default: 1.
    pub max_preemptive_allocations_per_heartbeat: u32,

    /// SSD priority preemption settings.
    pub ssd_priority_preemption: SsdPriorityPreemptionConfig,

    /// Reservation of node resources for jobs that fragmentation keeps from starting (not in
    /// YTsaurus; see [`JobReservationConfig`]).
    pub job_reservation: JobReservationConfig,

    /// All-or-nothing placement of gang operations (not in YTsaurus; see
    /// [`GangPlacementConfig`]).
    pub gang_placement: GangPlacementConfig,

    // ----- Heartbeat scheduling -----
    /// If a pool's effective value is true, its satisfaction for scheduling is at most its own
    /// local satisfaction: the smaller of its best active child's and its own, so a pool below
    /// its fair share as a whole attracts heartbeats even when its active children are
    /// satisfied (pools overridable, inherited by sub-pools). Default: false.
    pub use_pool_satisfaction_for_scheduling: bool,

    /// Serve operations below their promised guarantee in a first, high-priority regular
    /// stage. Default: false.
    pub enable_guarantee_priority_scheduling: bool,

    /// Fail operations whose ancestor's limits are too small for their smallest job. Default:
    /// true.
    pub enable_limiting_ancestor_check: bool,

    /// Whether scheduling tag filters of pools and operations are honoured. Default: true.
    pub enable_scheduling_tags: bool,

    /// A heartbeat refreshes an operation's usage from the live resource tree if its cached
    /// usage is older than this (YTsaurus). Accepted for compatibility; it has no effect in
    /// fairsched, whose heartbeats always see the current usage. Default: 100 ms.
    pub allowed_resource_usage_staleness_ms: u64,

    /// A heartbeat keeps scheduling while the node has at least these resources free.
    /// Default: `{}` (keep scheduling while the smallest pending job fits). YTsaurus' default,
    /// `{user_slots: 1, cpu: 1, memory: 256MiB}`, is meant for big nodes: on a node of a few
    /// cpus it leaves part of every node idle (a 2-cpu node runs three 0.5-cpu jobs, not four)
    /// and a starving pool then fills only that idle part instead of preempting. Set it to
    /// YTsaurus' value to schedule as YTsaurus does.
    #[schemars(with = "crate::reference::ResourceMap")]
    pub min_spare_allocation_resources_on_node: PartialResources,

    /// Most allocations started in one heartbeat. Default: unset (no limit).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_started_allocations_per_heartbeat: Option<u32>,

    /// Pools with at least this many schedulable children keep them in a heap (a YTsaurus
    /// performance knob). Accepted for compatibility; it has no effect in fairsched, which keeps
    /// its heartbeat walk over the tree between heartbeats and updates it along changed paths.
    /// Default: 16.
    pub min_child_heap_size: u32,

    /// Default order in which FIFO pools offer heartbeats to their operations (pools
    /// overridable). Default: `satisfaction`.
    pub fifo_pool_scheduling_order: FifoPoolSchedulingOrder,

    /// Default of the pool option: an operation of a FIFO pool that cannot be fully satisfied
    /// gets its fair share truncated (alias `truncate_fifo_pool_unsatisfied_child_fair_share`).
    /// Accepted for compatibility: the hook is gone from current YTsaurus code, and fairsched's
    /// fair share follows current YTsaurus, so it has no effect. Default: false.
    #[serde(alias = "truncate_fifo_pool_unsatisfied_child_fair_share")]
    pub enable_fair_share_truncation_in_fifo_pool: bool,

    /// Only the first N operations of a FIFO pool (in FIFO order) that have a fair share get
    /// jobs; the others wait, even where nodes have room (their `why` names this option).
    /// Must be > 0. Default: unset (all).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_schedulable_element_count_in_fifo_pool: Option<u32>,

    // ----- Vector HDRF switches -----
    /// Gang operations become a step function (all or nothing) in the fair-share computation.
    /// Default: false.
    pub enable_step_function_for_gang_operations: bool,

    /// "Improved" pool fair-share-by-fit-factor functions and the vector top-down pass.
    /// Default: false.
    pub enable_improved_fair_share_by_fit_factor_computation: bool,

    /// Distribution-gap fix of the improved computation. Default: false.
    pub enable_improved_fair_share_by_fit_factor_computation_distribution_gap: bool,

    /// The upstream switch for concatenating FIFO functions instead of summing them (same
    /// result, linear time). Accepted for compatibility: fairsched concatenates whenever the
    /// result is the same, whatever this says. Default: false.
    pub enable_fast_fifo_fair_share_by_fit_factor_computation: bool,

    /// FIFO pools that enable it too may reorder their children so that gangs that do not fit
    /// do not leave the pool's guarantee unused (needs the gang step function). Default: false.
    pub enable_fifo_children_reordering_for_guarantee_utilization: bool,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            node_tag_filter: None,
            main_resource: ResourceKind::Cpu,
            default_parent_pool: ROOT_POOL_NAME.to_string(),
            use_user_default_parent_pool_map: false,
            max_operation_count: 50_000,
            max_running_operation_count: 2_000,
            max_operation_count_per_pool: 50,
            max_running_operation_count_per_pool: 8,
            max_ephemeral_pools_per_user: 1,
            forbid_immediate_operations_in_root: true,
            infer_weight_from_guarantees_share_multiplier: None,
            integral_guarantees: TreeIntegralGuaranteesConfig::default(),
            should_distribute_free_volume_among_children: false,
            pool_config_presets: BTreeMap::new(),
            fair_share_starvation_tolerance: 0.8,
            fair_share_starvation_timeout_ms: 30_000,
            fair_share_aggressive_starvation_timeout_ms: 120_000,
            enable_aggressive_starvation: false,
            enable_pool_starvation: true,
            allocation_count_preemption_timeout_coefficient: 1.0,
            preemption_satisfaction_threshold: 1.0,
            aggressive_preemption_satisfaction_threshold: 0.2,
            non_preemptible_resource_usage_threshold: PartialResources::EMPTY,
            max_unpreemptible_running_allocation_count: None,
            preemptive_scheduling_backoff_ms: 5_000,
            allocation_preemption_timeout_ms: None,
            allocation_graceful_preemption_timeout_ms: 60_000,
            waiting_for_resources_on_node_timeout_ms: None,
            scheduling_preemption_priority_scope: PreemptionPriorityScope::OperationAndAncestors,
            allow_aggressive_preemption_for_gang_operations: true,
            allow_preemption_from_starving_operations: false,
            enable_conditional_preemption: true,
            preemption_check_starvation: true,
            preemption_check_satisfaction: true,
            max_preemptive_allocations_per_heartbeat: 1,
            ssd_priority_preemption: SsdPriorityPreemptionConfig::default(),
            job_reservation: JobReservationConfig::default(),
            gang_placement: GangPlacementConfig::default(),
            use_pool_satisfaction_for_scheduling: false,
            enable_guarantee_priority_scheduling: false,
            enable_limiting_ancestor_check: true,
            enable_scheduling_tags: true,
            allowed_resource_usage_staleness_ms: 100,
            min_spare_allocation_resources_on_node: PartialResources::EMPTY,
            max_started_allocations_per_heartbeat: None,
            min_child_heap_size: 16,
            fifo_pool_scheduling_order: FifoPoolSchedulingOrder::Satisfaction,
            enable_fair_share_truncation_in_fifo_pool: false,
            max_schedulable_element_count_in_fifo_pool: None,
            enable_step_function_for_gang_operations: false,
            enable_improved_fair_share_by_fit_factor_computation: false,
            enable_improved_fair_share_by_fit_factor_computation_distribution_gap: false,
            enable_fast_fifo_fair_share_by_fit_factor_computation: false,
            enable_fifo_children_reordering_for_guarantee_utilization: false,
        }
    }
}

impl TreeConfig {
    /// The tree-level non-preemptible threshold with `max_unpreemptible_running_allocation_count`
    /// folded into `user_slots` when the threshold does not set it (as YTsaurus does).
    pub fn effective_non_preemptible_resource_usage_threshold(&self) -> PartialResources {
        let mut threshold = self.non_preemptible_resource_usage_threshold;
        if !threshold.is_set(ResourceKind::UserSlots)
            && let Some(count) = self.max_unpreemptible_running_allocation_count
        {
            threshold.set_raw(ResourceKind::UserSlots, Some(i64::from(count)));
        }
        threshold
    }
}

/// Tree-wide integral-guarantee settings (the tree's `integral_guarantees`, YTsaurus
/// `TSchedulerIntegralGuaranteesConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TreeIntegralGuaranteesConfig {
    /// Divisor turning accumulated volume into a share ratio: a pool can spend its whole
    /// volume within this period. Must be > 0. Default: 60000 ms (1 minute).
    pub smooth_period_ms: u64,

    /// Cap on a pool's accumulated volume: `resource_flow × this period`. Must be > 0.
    /// Default: 86400000 ms (1 day).
    pub pool_capacity_saturation_period_ms: u64,

    /// Default cap of a relaxed pool's integral share as a multiple of its resource-flow ratio,
    /// for pools that do not set it. Range [1, 10]. Default: 3.
    pub relaxed_share_multiplier_limit: f64,
}

impl Default for TreeIntegralGuaranteesConfig {
    fn default() -> Self {
        TreeIntegralGuaranteesConfig {
            smooth_period_ms: 60_000,
            pool_capacity_saturation_period_ms: 86_400_000,
            relaxed_share_multiplier_limit: 3.0,
        }
    }
}

/// Reservation for big jobs: a job that cannot start anywhere because every node's free
/// resources are too small for it (while smaller jobs keep taking whatever frees up) gets
/// resources held for it on one node.
///
/// At each fair-share update, an operation of the tree that is below its fair share, has pending
/// jobs and has started none for `timeout_ms` (counted from its start or its last started
/// job) reserves, if the next job of its first task with pending jobs is larger on some
/// resource than the smallest pending job of the tree (jobs of one size all fit whatever frees
/// up, and the fair share decides between them), the resources of that job on the node that
/// lacks the least of them (relative to the tree's resources; among enabled, not draining
/// nodes of the tree that are large enough, allowed by its scheduling tag filters and not
/// reserved already; ties: node id order). The longest-waiting operations reserve first, at
/// most `max_reservations` at a time. While the reservation holds, the node's other jobs keep
/// running and other operations may start jobs there only in what is free beyond the reserved
/// resources (per resource: only what the big job needs is held, not the whole node), except
/// jobs that will be gone in time (backfill: at each update the reservation estimates when its
/// resources will be free from the time limits, a task's `time_limit_ms`, of the node's
/// running allocations; a job whose own limit ends by then may use the reserved resources; no
/// estimate, and no backfill, when an allocation in the way has no limit); the
/// reserving operation starts its job there as soon as the node's free resources hold it,
/// before any other; once its job has taken them, its next job (if still blocked and larger
/// than the smallest) reserves at the next update without a new `timeout_ms` wait, so an
/// operation of several big jobs keeps its lock moving. A reservation ends when the operation
/// starts a job (anywhere) or finishes, when its node is removed, or at an update where the operation has no pending job
/// of that task or reached its fair share, or the node left the tree, was disabled or is
/// draining. Events: `job_reserved`, `reservation_released` (with the reason); the operation's
/// `reserved_node` and `why` in snapshots. Preemption is unaffected: a starving operation may
/// still preempt to make room as before, and reserved resources are not offered to other
/// operations' preemptive stages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct JobReservationConfig {
    /// Turns reservation on for the tree. Default: false.
    pub enable: bool,
    /// How long an operation below its fair share with pending jobs must have started no job
    /// before it reserves, in milliseconds. Default: 60000.
    pub timeout_ms: u64,
    /// Most reservations held at once in the tree. Must be > 0. Default: 4.
    pub max_reservations: u32,
}

impl Default for JobReservationConfig {
    fn default() -> Self {
        JobReservationConfig {
            enable: false,
            timeout_ms: 60_000,
            max_reservations: 4,
        }
    }
}

/// All-or-nothing placement of gang operations (an operation with a task marked `gang`): its
/// pending jobs start together or not at all, never a part of them that would wait, holding
/// resources, for the rest.
///
/// While a gang operation waits, the resources that are free on the nodes the regular stage
/// offers it (in fair-share order, as any operation) are held for its jobs, node by node
/// (other operations see only what is free beyond them; a job is held only where the path's
/// resource limits leave room for it and everything held before), until every pending job
/// of the operation is held; then each node starts its held jobs at its next heartbeat, so the
/// whole gang starts within one heartbeat period. One gang assembles at a time per tree, so
/// two gangs never hold parts of the cluster against each other; if it is not complete within
/// `assembly_timeout_ms`, everything it holds is released and it may not assemble again for as
/// long, so that a gang larger than what frees up does not block the others. A gang that
/// fits whole into what is free in the tree when it is offered a node is instead placed at
/// once (all its jobs held, started at their nodes' next heartbeats), while another gang
/// assembles only if its jobs' time limits end before that gang is expected to need what it
/// holds. Jobs may backfill what an assembling gang holds on the same terms: the gang
/// estimates at each update, from the running allocations' time limits (`time_limit_ms`),
/// when enough nodes will have room for all its jobs (no estimate, and no backfill, when
/// that depends on an allocation without a limit). When it has gathered every job sooner
/// than that (jobs ending before their limits), some of what it holds may still be lent: it
/// then starts once all of it is free (on no node before), and meanwhile what it does not
/// hold is anyone's, whatever their jobs' limits. Gang jobs are not
/// started by preemptive stages or job reservation while this is on. A running gang that
/// loses a job (it fails or is killed, or its node is lost, disabled, moved to another tree or
/// left without user slots) does not go on in part: its other running jobs are aborted
/// (reason `gang_member_lost`) and it is placed whole again (only the lost job counts as
/// failed). A running gang is preempted whole or not at all: its
/// allocations are classified for preemption as one (each as its first, so nothing of it is
/// taken while any of it is within its fair share), and when one is preempted the others are
/// too (reason `gang_member_preempted`, with the same preemptor). Events: `gang_assembled` (all held),
/// `gang_released` (with the reason: `started`, `timeout`, `operation_finished`,
/// `node_unavailable`, `disabled`); the operation's `why` in snapshots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GangPlacementConfig {
    /// Turns all-or-nothing placement on for the tree's gang operations. Default: false (gang
    /// operations are all-or-nothing in the fair share only, as in YTsaurus, and their jobs
    /// start one by one).
    pub enable: bool,
    /// Longest a gang may hold resources while it assembles, in milliseconds; also how long it
    /// then waits before it may assemble again. Must be > 0. Default: 30000.
    pub assembly_timeout_ms: u64,
    /// What the assembling gang holds of what is free. Default: `all_free`.
    pub hold: GangHold,
}

impl Default for GangPlacementConfig {
    fn default() -> Self {
        GangPlacementConfig {
            enable: false,
            assembly_timeout_ms: 30_000,
            hold: GangHold::AllFree,
        }
    }
}

/// What an assembling gang (see [`GangPlacementConfig`]) holds of the resources that are free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GangHold {
    /// Everything free on the nodes it is offered, up to all its pending jobs, until they are
    /// all held.
    #[default]
    AllFree,
    /// Only what it needs (EASY backfilling's reservation for the queue head): from the
    /// running allocations' time limits it computes when room for all its pending jobs will
    /// be free (its expected start) and how much more than it needs will be free then; of the
    /// resources free now it holds only what it will not find then beyond its need, across the
    /// tree at once. The rest may run any job (as EASY's "extra" processors), and jobs that
    /// end by its expected start may also run on what it holds. The plan is made again
    /// whenever allocations end or time passes. Room is counted in jobs of the gang's largest
    /// pending job shape (exact when its jobs have one shape; otherwise it may wait for more
    /// than it needs). Without a time limit on an allocation in its way it holds everything
    /// free, as `all_free` (strict order: nothing passes it). Preemption for a starving
    /// operation keeps to the plan too: what the victims would free counts as held, so only a
    /// job that ends by the gang's expected start may take it.
    Needed,
    /// As `needed` for the assembling gang, and every other waiting gang has a planned start
    /// too (conservative backfilling): in start order, each gang is planned at the earliest
    /// time its pending jobs fit, for its time limit, into the tree's resources less the
    /// running allocations (until their time limits), the gangs placed whole and the plans of
    /// the gangs before it; a gang is placed whole only when its planned start is now, so no
    /// gang starts ahead of another's planned start in a way that delays it. The plan is made
    /// again whenever allocations start or end, gangs are placed or time passes. It counts the
    /// tree's schedulable nodes as one pool of resources (exact when every job takes one
    /// node's worth or less of what the nodes hold in equal units, as on single-processor
    /// nodes); placement itself stays node by node. A gang without a time limit is planned
    /// to hold its resources forever. Operations that are not gangs are not planned, and see
    /// only what the assembling gang holds.
    Planned,
}

impl GangHold {
    /// Whether the assembling gang plans its start and holds only what it needs (`needed`,
    /// `planned`).
    pub fn plans_head(self) -> bool {
        matches!(self, GangHold::Needed | GangHold::Planned)
    }
}

/// SSD priority preemption (YTsaurus `TFairShareStrategySsdPriorityPreemptionConfig`):
/// allocations using an SSD medium on matching nodes are protected from non-SSD preemption.
///
/// The nodes `node_tag_filter` matches are the SSD nodes, the only nodes with the media of
/// `medium_names`: a job whose `disk_request` names one of them runs only there, whether or not
/// the feature is enabled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SsdPriorityPreemptionConfig {
    /// Turns the feature on. On SSD nodes the preemptive heartbeat then first runs two SSD
    /// stages: `ssd_aggressive` (aggressively starving SSD operations take any non-SSD
    /// allocation and aggressively preemptible SSD ones; reason `ssd_aggressive_preemption`)
    /// and `ssd_preemptive` (starving SSD operations take any non-SSD allocation and
    /// preemptible SSD ones; reason `ssd_preemption`), ignoring conditional preemption's
    /// protections for non-SSD victims. An SSD operation (some task asks for an SSD medium)
    /// takes part in these stages instead of the aggressive and normal ones; an SSD allocation
    /// that is not plainly preemptible can be taken by the SSD stages only. Pools with
    /// `allow_regular_allocations_on_ssd_nodes` false keep their other jobs off SSD nodes.
    /// Default: false.
    pub enable: bool,
    /// The SSD nodes (a tag expression). Required (non-empty) when `enable` is true. Default:
    /// unset.
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_tag_filter: Option<String>,
    /// Disk media that count as SSD. Default: empty.
    pub medium_names: Vec<String>,
}
