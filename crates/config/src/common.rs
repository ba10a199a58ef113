//! Small shared pieces: enums used by several configs, serde helpers, constants.

use fairsched_resources::ResourceKind;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Name of the implicit root of every pool tree (YTsaurus `RootPoolName`). It is reserved: no
/// pool may be called this, and `default_parent_pool = "<Root>"` means "directly under the
/// root".
pub const ROOT_POOL_NAME: &str = "<Root>";

/// Smallest accepted pool weight: `sqrt(f64::EPSILON)` ≈ 1.5e-8 (YTsaurus
/// `MinSchedulableWeight`).
pub const MIN_WEIGHT: f64 = 1.490_116_119_384_765_6e-8;

/// Largest accepted pool weight: `1 / sqrt(f64::EPSILON)` ≈ 6.7e7 (YTsaurus
/// `MaxSchedulableWeight`).
pub const MAX_WEIGHT: f64 = 67_108_864.0;

/// Longest accepted pool or tree name, in bytes. YTsaurus limits the length on its master
/// server without a documented default; 100 is our choice.
pub const MAX_NAME_LENGTH: usize = 100;

/// Deepest accepted pool, counting children of the root as depth 1. YTsaurus' master limits the
/// depth too (its tests use about 30 levels); deeper pools are rejected.
pub const MAX_POOL_DEPTH: usize = 30;

/// Accepted range of `relaxed_share_multiplier_limit` (tree and pool).
pub const RELAXED_SHARE_MULTIPLIER_RANGE: (f64, f64) = (1.0, 10.0);

/// Error code of the "pool tree guarantees overcommit" alert (YTsaurus
/// `PoolTreeGuaranteesOvercommit`).
pub const POOL_TREE_GUARANTEES_OVERCOMMIT: u32 = 29000;

/// Error code raised when a pool computing the promised-guarantee fair share has an ancestor
/// that does it too (YTsaurus `NestedPromisedGuaranteeFairSharePools`).
pub const NESTED_PROMISED_GUARANTEE_FAIR_SHARE_POOLS: u32 = 29001;

/// How a pool shares its resources among its children (YTsaurus `ESchedulingMode`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SchedulingMode {
    /// Weighted hierarchical fair share (vector HDRF). Children may be pools and operations.
    #[default]
    FairShare,
    /// Strict order given by `fifo_sort_parameters`. Children may only be operations.
    Fifo,
}

impl SchedulingMode {
    /// The configuration name (`fair_share` / `fifo`).
    pub const fn name(self) -> &'static str {
        match self {
            SchedulingMode::FairShare => "fair_share",
            SchedulingMode::Fifo => "fifo",
        }
    }
}

/// One criterion of a FIFO pool's order (YTsaurus `EFifoSortParameter`). Criteria are compared
/// lexicographically in the order listed.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FifoSortParameter {
    /// Earlier start first.
    StartTime,
    /// Higher weight first.
    Weight,
    /// Fewer pending jobs first (prioritises small operations). `pending_allocation_count` is
    /// accepted as an alias.
    #[serde(alias = "pending_allocation_count")]
    PendingJobCount,
}

/// The YTsaurus default of `fifo_sort_parameters`: `[weight, start_time]`.
pub fn default_fifo_sort_parameters() -> Vec<FifoSortParameter> {
    vec![FifoSortParameter::Weight, FifoSortParameter::StartTime]
}

/// Kind of integral guarantee of a pool (YTsaurus `EIntegralGuaranteeType`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IntegralGuaranteeType {
    /// No integral guarantee of its own. Such a pool may still aggregate the resource flows and
    /// burst guarantees of integral descendants.
    #[default]
    None,
    /// Accumulates volume at `resource_flow` and may spend it at up to
    /// `burst_guarantee_resources` at once.
    Burst,
    /// Accumulates volume at `resource_flow`; its integral share is capped at
    /// `resource_flow_ratio × relaxed_share_multiplier_limit`.
    Relaxed,
}

impl IntegralGuaranteeType {
    /// The configuration name.
    pub const fn name(self) -> &'static str {
        match self {
            IntegralGuaranteeType::None => "none",
            IntegralGuaranteeType::Burst => "burst",
            IntegralGuaranteeType::Relaxed => "relaxed",
        }
    }
}

/// Order in which a FIFO pool's operations are offered heartbeats (YTsaurus
/// `EFifoPoolSchedulingOrder`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FifoPoolSchedulingOrder {
    /// Least satisfied operation first, as in fair-share pools.
    #[default]
    Satisfaction,
    /// By FIFO index.
    Fifo,
}

/// Which starvation makes an operation eligible for preemptive scheduling (YTsaurus
/// `EOperationPreemptionPriorityScope`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PreemptionPriorityScope {
    /// The operation or any of its ancestor pools starving counts.
    #[default]
    OperationAndAncestors,
    /// Only the operation's own starvation counts.
    OperationOnly,
}

/// `allow` or `deny` in an access-control entry.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AceAction {
    #[default]
    Allow,
    Deny,
}

/// A permission on a pool.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Run operations in the pool (or its subtree).
    Use,
    /// Change the pool's options, move it (also needed on the new parent) or remove it, and
    /// create pools under it. Its weight and guarantees, which divide its parent's resources,
    /// take it on the parent (a superuser for a top-level pool).
    Administer,
    /// Read other users' operations in the pool: their jobs' output, their environment
    /// (`env`) and their events (their owners always may). Grant it only to those who may
    /// see those operations' secrets.
    Read,
    /// Accepted for YTsaurus ACLs; grants nothing (changing a pool takes `administer`).
    Write,
    /// Abort and update other users' operations in the pool (their owners always may).
    Manage,
}

/// One access-control entry of a pool, in the shape YTsaurus uses for Cypress ACLs:
/// `{action: allow, subjects: [alice, team-ml], permissions: [use]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AccessControlEntry {
    /// `allow` (default) or `deny`. A matching `deny` wins over any `allow`.
    pub action: AceAction,
    /// Users or groups the entry applies to. Must not be empty.
    pub subjects: Vec<String>,
    /// Permissions granted or denied. Must not be empty.
    pub permissions: Vec<Permission>,
}

/// Serde for [`ResourceKind`] by its YTsaurus name (`"cpu"`, `"user_slots"`, ...).
pub(crate) mod resource_kind_serde {
    use super::*;

    pub fn serialize<S: Serializer>(kind: &ResourceKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ResourceKind, D::Error> {
        let name = String::deserialize(d)?;
        ResourceKind::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown resource {name:?} (expected one of user_slots, cpu, gpu, memory, network)"
            ))
        })
    }
}

/// `skip_serializing_if` helper: the value equals its type's default.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// `skip_serializing_if` helper for `fifo_sort_parameters`.
pub(crate) fn is_default_fifo_sort_parameters(value: &[FifoSortParameter]) -> bool {
    value == default_fifo_sort_parameters().as_slice()
}

/// `skip_serializing_if` helper for booleans defaulting to true.
pub(crate) fn is_true(value: &bool) -> bool {
    *value
}

/// `serde(default = ...)` helper.
pub(crate) fn default_true() -> bool {
    true
}
