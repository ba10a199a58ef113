//! Pool options: [`PoolConfig`], the pool object in a tree ([`PoolNode`]), presets.

use crate::common::{
    AccessControlEntry, FifoPoolSchedulingOrder, FifoSortParameter, IntegralGuaranteeType,
    SchedulingMode, default_fifo_sort_parameters, default_true, is_default,
    is_default_fifo_sort_parameters, is_true,
};
use fairsched_resources::PartialResources;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Defines [`PoolConfig`] and [`PoolNode`] from one field list, so that a pool object in a tree
/// has exactly the options of a pool config plus `pools`, without `#[serde(flatten)]` (which
/// does not work together with `deny_unknown_fields`).
macro_rules! pool_options {
    ($( $(#[$meta:meta])* $name:ident : $ty:ty = $default:expr ),* $(,)?) => {
        /// The options of one pool (YTsaurus `TPoolConfig`, the attributes of a
        /// `scheduler_pool` node).
        ///
        /// Options a preset may fill are `Option`s: unset means "take it from the first preset
        /// that sets it, else inherit / use the tree default" (see each field).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields, default)]
        pub struct PoolConfig {
            $( $(#[$meta])* #[schemars(!skip_serializing_if)] pub $name: $ty, )*
        }

        impl Default for PoolConfig {
            fn default() -> Self {
                PoolConfig { $( $name: $default, )* }
            }
        }

        /// A pool as written in a tree: the options of [`PoolConfig`], flat, plus its child
        /// pools in `pools`.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields, default)]
        pub struct PoolNode {
            $( $(#[$meta])* #[schemars(!skip_serializing_if)] pub $name: $ty, )*
            /// Child pools by name. Names are unique in the whole tree, not only among
            /// siblings. Default: none.
            #[schemars(!skip_serializing_if)]
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            pub pools: BTreeMap<String, PoolNode>,
        }

        impl Default for PoolNode {
            fn default() -> Self {
                PoolNode { $( $name: $default, )* pools: BTreeMap::new() }
            }
        }

        impl PoolNode {
            /// The pool's own options, without its children.
            pub fn config(&self) -> PoolConfig {
                PoolConfig { $( $name: self.$name.clone(), )* }
            }

            /// Replaces the pool's own options, keeping its children.
            pub fn set_config(&mut self, config: PoolConfig) {
                let PoolConfig { $( $name, )* } = config;
                $( self.$name = $name; )*
            }

            /// Builds a pool from its options and children.
            pub fn from_parts(config: PoolConfig, pools: BTreeMap<String, PoolNode>) -> PoolNode {
                let PoolConfig { $( $name, )* } = config;
                PoolNode { $( $name, )* pools }
            }
        }
    };
}

pool_options! {
    // ----- Sharing -----
    /// Share of the parent's resources relative to the siblings' weights. Must be finite and in
    /// [≈1.5e-8, ≈6.7e7] (zero and negative weights are rejected). Default: unset, meaning 1, or
    /// inferred from guarantees when the tree sets `infer_weight_from_guarantees_share_multiplier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    weight: Option<f64> = None,

    /// Guaranteed resources (alias `min_share_resources`). Unset components are inferred
    /// proportionally to the tree's main resource, which must be present if anything is. The
    /// children's sum may not exceed the parent's value, per resource. Default: `{}`.
    #[serde(alias = "min_share_resources", skip_serializing_if = "PartialResources::is_empty")]
    #[schemars(with = "crate::reference::ResourceMap")]
    strong_guarantee_resources: PartialResources = PartialResources::EMPTY,

    /// Integral (burst / relaxed) guarantees.
    #[serde(skip_serializing_if = "is_default")]
    integral_guarantees: PoolIntegralGuaranteesConfig = PoolIntegralGuaranteesConfig::default(),

    /// Hard cap on the subtree's usage, per resource. An unset component is unlimited.
    /// Default: `{}` (unlimited).
    #[serde(skip_serializing_if = "PartialResources::is_empty")]
    #[schemars(with = "crate::reference::ResourceMap")]
    resource_limits: PartialResources = PartialResources::EMPTY,

    /// `fair_share` or `fifo`. A FIFO pool cannot have child pools nor create ephemeral
    /// subpools. Default: `fair_share`.
    #[serde(skip_serializing_if = "is_default")]
    mode: SchedulingMode = SchedulingMode::FairShare,

    /// Order of operations in a FIFO pool, compared lexicographically: `start_time` (earlier
    /// first), `weight` (higher first), `pending_job_count` (fewer first). Must not be empty.
    /// Default: `[weight, start_time]` (YTsaurus).
    #[serde(skip_serializing_if = "is_default_fifo_sort_parameters")]
    fifo_sort_parameters: Vec<FifoSortParameter> = default_fifo_sort_parameters(),

    /// Order in which this FIFO pool offers heartbeats to its operations. Default: unset (the
    /// tree's `fifo_pool_scheduling_order`).
    #[serde(skip_serializing_if = "Option::is_none")]
    fifo_pool_scheduling_order: Option<FifoPoolSchedulingOrder> = None,

    /// An operation of this FIFO pool that cannot be fully satisfied gets its fair share
    /// truncated (alias `truncate_fifo_pool_unsatisfied_child_fair_share`). Accepted for
    /// compatibility; no effect, as the tree option of the same name. Default: unset (the
    /// tree's value).
    #[serde(alias = "truncate_fifo_pool_unsatisfied_child_fair_share", skip_serializing_if = "Option::is_none")]
    enable_fair_share_truncation_in_fifo_pool: Option<bool> = None,

    // ----- Operation limits -----
    /// Most operations (running + pending) in the subtree; more are rejected with error 202.
    /// Default: unset (the tree's `max_operation_count_per_pool`, 50).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_operation_count: Option<u32> = None,

    /// Most running operations in the subtree; more stay pending. Must not exceed the pool's
    /// effective `max_operation_count`. Default: unset (the tree's
    /// `max_running_operation_count_per_pool`, 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_running_operation_count: Option<u32> = None,

    /// Operations may not run directly in this pool, only in its subpools. Default: false.
    #[serde(skip_serializing_if = "is_default")]
    forbid_immediate_operations: bool = false,

    /// Operations naming this pool run in a per-user ephemeral subpool `<pool>$<user>`.
    /// Not allowed for FIFO pools. Default: false.
    #[serde(skip_serializing_if = "is_default")]
    create_ephemeral_subpools: bool = false,

    /// Options of ephemeral pools created under this pool (per-user subpools, or ephemeral
    /// pools when this is the default parent). Default: unset (ephemeral pools get defaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    ephemeral_subpool_config: Option<EphemeralSubpoolConfig> = None,

    // ----- Presets -----
    /// Names of the tree's `pool_config_presets` applied to this pool. Options set on the pool
    /// win; among presets, an earlier one wins over a later one (YTsaurus behaviour).
    /// Default: `[]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    config_presets: Vec<String> = Vec::new(),

    // ----- Starvation and preemption overrides (preset-able) -----
    /// Starvation tolerance of this pool. Range [0, 1]. Default: unset (inherited from the
    /// parent, at the top from the tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    fair_share_starvation_tolerance: Option<f64> = None,

    /// Starvation timeout of this pool (alias `fair_share_preemption_timeout_ms`). Default:
    /// unset (inherited).
    #[serde(alias = "fair_share_preemption_timeout_ms", skip_serializing_if = "Option::is_none")]
    fair_share_starvation_timeout_ms: Option<u64> = None,

    /// Whether elements of this subtree may become aggressively starving. Default: unset
    /// (inherited; the tree's `enable_aggressive_starvation` at the top).
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_aggressive_starvation: Option<bool> = None,

    /// Whether allocations in this subtree may be preempted by aggressive preemption (alias
    /// `allow_aggressive_starvation_preemption`). Default: unset (inherited; true at the root).
    #[serde(alias = "allow_aggressive_starvation_preemption", skip_serializing_if = "Option::is_none")]
    allow_aggressive_preemption: Option<bool> = None,

    /// Whether allocations in this subtree may be preempted by normal preemption (a testing
    /// option in YTsaurus; alias `allow_regular_preemption`). Default: unset, meaning true.
    #[serde(alias = "allow_regular_preemption", skip_serializing_if = "Option::is_none")]
    allow_normal_preemption: Option<bool> = None,

    /// Operations using less than this (per resource) are not preempted. Default: unset
    /// (inherited; the tree's threshold at the top).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::reference::ResourceMap>")]
    non_preemptible_resource_usage_threshold: Option<PartialResources> = None,

    /// Whether regular (non-SSD) allocations of this subtree may run on SSD nodes (alias
    /// `allow_regular_jobs_on_ssd_nodes`). Default: unset, meaning true.
    #[serde(alias = "allow_regular_jobs_on_ssd_nodes", skip_serializing_if = "Option::is_none")]
    allow_regular_allocations_on_ssd_nodes: Option<bool> = None,

    /// Vanilla operations in this FIFO pool are lightweight: they never pend and do not count
    /// against `max_running_operation_count`. Effective only in FIFO pools. Default: unset,
    /// meaning false.
    #[serde(skip_serializing_if = "Option::is_none")]
    enable_lightweight_operations: Option<bool> = None,

    /// The pool's scheduling satisfaction is at most its own local satisfaction (the smaller of
    /// its best active child's and its own). Default: unset (inherited; the tree's value at the
    /// top).
    #[serde(skip_serializing_if = "Option::is_none")]
    use_pool_satisfaction_for_scheduling: Option<bool> = None,

    // ----- Fair-share computation flags -----
    /// Compute the promised-guarantee fair share for this subtree (alias
    /// `enable_promised_guarantee_fair_share`). Nested flagged pools raise error 29001 (a
    /// warning here). Default: false.
    #[serde(alias = "enable_promised_guarantee_fair_share", skip_serializing_if = "is_default")]
    compute_promised_guarantee_fair_share: bool = false,

    /// This FIFO pool may reorder its children for guarantee utilisation (needs the tree
    /// option too). Default: false.
    #[serde(skip_serializing_if = "is_default")]
    enable_fifo_children_reordering_for_guarantee_utilization: bool = false,

    /// This pool's strong guarantee is served first (priority tier). Default: false.
    #[serde(skip_serializing_if = "is_default")]
    enable_priority_strong_guarantee_adjustment: bool = false,

    /// This pool donates guarantee to priority pools below it. Default: false.
    #[serde(skip_serializing_if = "is_default")]
    enable_priority_strong_guarantee_adjustment_donorship: bool = false,

    // ----- Placement and access -----
    /// Only nodes matching this tag expression run the subtree's allocations (alias
    /// `scheduling_tag`). Default: unset (all nodes of the tree).
    #[serde(alias = "scheduling_tag", skip_serializing_if = "Option::is_none")]
    scheduling_tag_filter: Option<String> = None,

    /// Access-control list: who may use (run operations in), administer (change its options,
    /// move or remove it, create subpools) and manage (abort or update others' operations in)
    /// the pool. The server enforces it when its `[auth]` section has users (the server
    /// configuration reference). A pool whose own and inherited entries are all empty is open
    /// to use by everyone, and only superusers may administer or manage it; `deny` wins over
    /// `allow`. Default: `[]` (inherited from the parent when `inherit_acl`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    acl: Vec<AccessControlEntry> = Vec::new(),

    /// Whether the parent's ACL also applies to this pool. Default: true.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    inherit_acl: bool = true,
}

/// A pool's integral-guarantee options (YTsaurus `TPoolIntegralGuaranteesConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PoolIntegralGuaranteesConfig {
    /// `none`, `burst` or `relaxed`. A `none` pool may still aggregate its descendants' flows
    /// and bursts (YTsaurus accepts flows and bursts on it and does not treat it as integral).
    /// Default: `none`.
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "is_default")]
    pub guarantee_type: IntegralGuaranteeType,

    /// Volume accumulation rate (resources per second). Children's sum may not exceed the
    /// parent's, per resource. Default: `{}`.
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "PartialResources::is_empty")]
    #[schemars(with = "crate::reference::ResourceMap")]
    pub resource_flow: PartialResources,

    /// Burst pools: the most they may take at once from their volume. Not allowed for
    /// `relaxed` pools. Default: `{}`.
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "PartialResources::is_empty")]
    #[schemars(with = "crate::reference::ResourceMap")]
    pub burst_guarantee_resources: PartialResources,

    /// Relaxed pools: cap on the integral share as a multiple of the flow ratio. Range [1, 10].
    /// Default: unset (the tree's `integral_guarantees.relaxed_share_multiplier_limit`, 3).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relaxed_share_multiplier_limit: Option<f64>,

    /// Whether the pool accepts volume other pools could not keep. Default: true.
    #[schemars(!skip_serializing_if)]
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub can_accept_free_volume: bool,

    /// Whether a non-integral pool passes free volume on to its children. Default: unset (the
    /// tree's `should_distribute_free_volume_among_children`, false).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub should_distribute_free_volume_among_children: Option<bool>,
}

impl Default for PoolIntegralGuaranteesConfig {
    fn default() -> Self {
        PoolIntegralGuaranteesConfig {
            guarantee_type: IntegralGuaranteeType::None,
            resource_flow: PartialResources::EMPTY,
            burst_guarantee_resources: PartialResources::EMPTY,
            relaxed_share_multiplier_limit: None,
            can_accept_free_volume: true,
            should_distribute_free_volume_among_children: None,
        }
    }
}

/// Options applied to ephemeral pools created under a pool (YTsaurus
/// `TEphemeralSubpoolConfig`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EphemeralSubpoolConfig {
    /// Mode of the ephemeral pools. Default: `fair_share`.
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "is_default")]
    pub mode: SchedulingMode,
    /// Their `max_running_operation_count`. Default: unset (tree per-pool default).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running_operation_count: Option<u32>,
    /// Their `max_operation_count`. Default: unset (tree per-pool default).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_operation_count: Option<u32>,
    /// Their `resource_limits`. Default: `{}` (unlimited).
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "PartialResources::is_empty")]
    #[schemars(with = "crate::reference::ResourceMap")]
    pub resource_limits: PartialResources,
}

/// A named partial pool config (a value of the tree's `pool_config_presets`, YTsaurus
/// `TPoolPresetConfig`). Only the options YTsaurus allows in presets exist here; any other key
/// is an error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PoolPresetConfig {
    /// See [`PoolConfig::fair_share_starvation_tolerance`].
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_share_starvation_tolerance: Option<f64>,
    /// See [`PoolConfig::fair_share_starvation_timeout_ms`].
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "fair_share_preemption_timeout_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub fair_share_starvation_timeout_ms: Option<u64>,
    /// See [`PoolConfig::enable_aggressive_starvation`].
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_aggressive_starvation: Option<bool>,
    /// See [`PoolConfig::allow_aggressive_preemption`].
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "allow_aggressive_starvation_preemption",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_aggressive_preemption: Option<bool>,
    /// See [`PoolConfig::allow_normal_preemption`].
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "allow_regular_preemption",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_normal_preemption: Option<bool>,
    /// See [`PoolConfig::non_preemptible_resource_usage_threshold`].
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::reference::ResourceMap>")]
    pub non_preemptible_resource_usage_threshold: Option<PartialResources>,
    /// See [`PoolConfig::allow_regular_allocations_on_ssd_nodes`].
    #[schemars(!skip_serializing_if)]
    #[serde(
        alias = "allow_regular_jobs_on_ssd_nodes",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_regular_allocations_on_ssd_nodes: Option<bool>,
    /// See [`PoolConfig::enable_lightweight_operations`].
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_lightweight_operations: Option<bool>,
    /// See [`PoolConfig::use_pool_satisfaction_for_scheduling`].
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_pool_satisfaction_for_scheduling: Option<bool>,
}

impl PoolPresetConfig {
    /// Fills the options `config` leaves unset with this preset's values. Options already set
    /// (explicitly or by an earlier preset) are kept.
    pub fn fill_unset(&self, config: &mut PoolConfig) {
        fn fill<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
            if slot.is_none() {
                slot.clone_from(value);
            }
        }
        fill(
            &mut config.fair_share_starvation_tolerance,
            &self.fair_share_starvation_tolerance,
        );
        fill(
            &mut config.fair_share_starvation_timeout_ms,
            &self.fair_share_starvation_timeout_ms,
        );
        fill(
            &mut config.enable_aggressive_starvation,
            &self.enable_aggressive_starvation,
        );
        fill(
            &mut config.allow_aggressive_preemption,
            &self.allow_aggressive_preemption,
        );
        fill(
            &mut config.allow_normal_preemption,
            &self.allow_normal_preemption,
        );
        fill(
            &mut config.non_preemptible_resource_usage_threshold,
            &self.non_preemptible_resource_usage_threshold,
        );
        fill(
            &mut config.allow_regular_allocations_on_ssd_nodes,
            &self.allow_regular_allocations_on_ssd_nodes,
        );
        fill(
            &mut config.enable_lightweight_operations,
            &self.enable_lightweight_operations,
        );
        fill(
            &mut config.use_pool_satisfaction_for_scheduling,
            &self.use_pool_satisfaction_for_scheduling,
        );
    }
}
