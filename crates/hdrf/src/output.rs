//! Outputs of a fair-share update: per-element attributes, errors, warnings and timings.

use crate::model::ResourceVolume;
use fairsched_resources::{ResourceKind, ResourceVector, Resources};

/// A fair share split into its parts: `total = strong_guarantee + integral_guarantee +
/// weight_proportional`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DetailedFairShare {
    pub total: ResourceVector,
    pub strong_guarantee: ResourceVector,
    pub integral_guarantee: ResourceVector,
    pub weight_proportional: ResourceVector,
}

/// Sizes (segment counts) of an element's three functions.
///
/// In classic mode the root's functions are not built (its M and S are read at suggestion 1
/// only, and that is computed from its children directly): its sizes are 0, 0 and 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionSizes {
    pub fair_share_by_fit_factor: usize,
    pub max_fit_factor_by_suggestion: usize,
    pub fair_share_by_suggestion: usize,
}

/// Strong-guarantee tiers, in priority order.
pub const TIER_PRIORITY_POOLS: usize = 0;
pub const TIER_REGULAR_POOLS: usize = 1;

/// Everything the update computes for one element (names follow YTsaurus).
#[derive(Clone, Debug, PartialEq)]
pub struct ElementAttributes {
    /// The weight used (the configured one, or the inferred one).
    pub weight: f64,
    pub fair_share: DetailedFairShare,
    pub promised_guarantee_fair_share: DetailedFairShare,
    pub usage_share: ResourceVector,
    pub demand_share: ResourceVector,
    pub limits_share: ResourceVector,
    /// After adjustment (§3.5).
    pub strong_guarantee_share: ResourceVector,
    pub strong_guarantee_share_by_tier: [ResourceVector; 2],
    pub proposed_integral_share: ResourceVector,
    pub estimated_guarantee_share: ResourceVector,
    pub inferred_strong_guarantee_resources: Resources,
    pub burst_ratio: f64,
    pub total_burst_ratio: f64,
    pub resource_flow_ratio: f64,
    pub total_resource_flow_ratio: f64,
    pub volume_overflow: ResourceVolume,
    pub acceptable_volume: ResourceVolume,
    pub accepted_free_volume: ResourceVolume,
    pub children_volume_overflow: ResourceVolume,
    pub dominant_resource: ResourceKind,
    /// Canonical FIFO position (children of FIFO pools only).
    pub fifo_index: Option<usize>,
    /// Position actually used after reordering; `None` when nothing was reordered.
    pub effective_fifo_index: Option<usize>,
    /// `S(1)`: the fair share at full suggestion (limited demand).
    pub limited_demand_share: ResourceVector,
    pub function_sizes: FunctionSizes,
}

impl Default for ElementAttributes {
    fn default() -> Self {
        ElementAttributes {
            weight: 1.0,
            fair_share: DetailedFairShare::default(),
            promised_guarantee_fair_share: DetailedFairShare::default(),
            usage_share: ResourceVector::ZERO,
            demand_share: ResourceVector::ZERO,
            limits_share: ResourceVector::ZERO,
            strong_guarantee_share: ResourceVector::ZERO,
            strong_guarantee_share_by_tier: [ResourceVector::ZERO; 2],
            proposed_integral_share: ResourceVector::ZERO,
            estimated_guarantee_share: ResourceVector::ZERO,
            inferred_strong_guarantee_resources: Resources::ZERO,
            burst_ratio: 0.0,
            total_burst_ratio: 0.0,
            resource_flow_ratio: 0.0,
            total_resource_flow_ratio: 0.0,
            volume_overflow: ResourceVolume::ZERO,
            acceptable_volume: ResourceVolume::ZERO,
            accepted_free_volume: ResourceVolume::ZERO,
            children_volume_overflow: ResourceVolume::ZERO,
            dominant_resource: ResourceKind::Cpu,
            fifo_index: None,
            effective_fifo_index: None,
            limited_demand_share: ResourceVector::ZERO,
            function_sizes: FunctionSizes::default(),
        }
    }
}

/// Errors an update reports. They never stop the update.
#[derive(Clone, Debug, PartialEq)]
pub enum UpdateError {
    /// Strong guarantees plus resource flows exceed the cluster (YTsaurus alert 29000).
    PoolTreeGuaranteesOvercommitFlows {
        total: Resources,
        strong_plus_flow: Resources,
    },
    /// Strong guarantees plus burst guarantees exceed the cluster (alert 29000); guarantees
    /// were scaled down.
    PoolTreeGuaranteesOvercommitBurst {
        total: Resources,
        strong_plus_burst: Resources,
    },
    /// A promised-guarantee pool has a promised-guarantee ancestor.
    NestedPromisedGuaranteeFairSharePools { pools: Vec<String> },
    /// Priority strong-guarantee pools without a donor ancestor.
    PriorityStrongGuaranteeAdjustmentPoolsWithoutDonor { pools: Vec<String> },
}

impl UpdateError {
    /// YTsaurus error code (29000 for guarantee overcommit), where one exists.
    pub fn code(&self) -> Option<u32> {
        match self {
            UpdateError::PoolTreeGuaranteesOvercommitFlows { .. }
            | UpdateError::PoolTreeGuaranteesOvercommitBurst { .. } => Some(29000),
            _ => None,
        }
    }

    /// YTsaurus-style name of the error.
    pub fn name(&self) -> &'static str {
        match self {
            UpdateError::PoolTreeGuaranteesOvercommitFlows { .. }
            | UpdateError::PoolTreeGuaranteesOvercommitBurst { .. } => {
                "PoolTreeGuaranteesOvercommit"
            }
            UpdateError::NestedPromisedGuaranteeFairSharePools { .. } => {
                "NestedPromisedGuaranteeFairSharePools"
            }
            UpdateError::PriorityStrongGuaranteeAdjustmentPoolsWithoutDonor { .. } => {
                "PriorityStrongGuaranteeAdjustmentPoolsWithoutDonor"
            }
        }
    }
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::PoolTreeGuaranteesOvercommitFlows {
                total,
                strong_plus_flow,
            } => write!(
                f,
                "strong guarantees plus resource flows ({strong_plus_flow}) exceed the cluster ({total})"
            ),
            UpdateError::PoolTreeGuaranteesOvercommitBurst {
                total,
                strong_plus_burst,
            } => write!(
                f,
                "strong guarantees plus burst guarantees ({strong_plus_burst}) exceed the cluster ({total}); guarantees were scaled down"
            ),
            UpdateError::NestedPromisedGuaranteeFairSharePools { pools } => write!(
                f,
                "promised-guarantee pools nested in other promised-guarantee pools: {}",
                pools.join(", ")
            ),
            UpdateError::PriorityStrongGuaranteeAdjustmentPoolsWithoutDonor { pools } => write!(
                f,
                "priority strong-guarantee pools without a donor ancestor: {}",
                pools.join(", ")
            ),
        }
    }
}

/// An invariant the update noticed was off (a numeric artefact beyond its epsilon). Never fatal;
/// tests treat any warning as a failure of "no_failure".
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateWarning {
    pub element: String,
    pub message: String,
}

/// CPU time per phase, in nanoseconds, measured with the caller's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseTimings {
    /// Steps 1–9: validation, guarantees, cumulative attributes, integral shares.
    pub prepare_ns: u64,
    /// Building F for operations.
    pub operation_functions_ns: u64,
    /// Building F for FIFO pools.
    pub fifo_pool_functions_ns: u64,
    /// Building F for fair-share pools.
    pub normal_pool_functions_ns: u64,
    /// Building M and S from F: the one walk over F (the default), or, in the reference
    /// construction (used where the walk does not apply, e.g. an F that decreases), the
    /// per-resource parts of M (transpose, narrow, shift) with their minimum.
    pub max_fit_factor_ns: u64,
    /// Reference construction only: the pointwise minimum over resources in M (part of
    /// `max_fit_factor_ns`).
    pub pointwise_min_ns: u64,
    /// Reference construction only: F ∘ M.
    pub compose_ns: u64,
    /// Reference construction only: compressing S.
    pub compress_ns: u64,
    /// Top-down distribution, promised guarantees and root fix-up.
    pub top_down_ns: u64,
    /// The whole update.
    pub total_ns: u64,
    /// Matching the elements to the previous update's, to reuse their functions (part of
    /// `prepare_ns`).
    pub matching_ns: u64,
    /// Not a time: how many elements reused the functions they had in the previous update of
    /// the same [`crate::Workspace`] instead of building them (an incremental update; 0 with a
    /// fresh workspace). The only output besides times that differs between a fresh and a
    /// kept workspace.
    pub reused_elements: usize,
}

/// The result of one update: attributes indexed by [`crate::ElementIndex`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateOutput {
    pub attributes: Vec<ElementAttributes>,
    pub errors: Vec<UpdateError>,
    pub warnings: Vec<UpdateWarning>,
    pub timings: PhaseTimings,
}

/// A monotonic clock the caller lends the update to time its phases. The library itself
/// never reads a clock; [`NoClock`] disables timing.
pub trait PhaseClock {
    /// Nanoseconds since an arbitrary fixed origin.
    fn now_ns(&self) -> u64;

    /// Whether phases should be timed at all (reading a clock per element costs time).
    fn enabled(&self) -> bool {
        true
    }
}

/// A clock that always reads 0: no timings.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoClock;

impl PhaseClock for NoClock {
    fn now_ns(&self) -> u64 {
        0
    }

    fn enabled(&self) -> bool {
        false
    }
}
