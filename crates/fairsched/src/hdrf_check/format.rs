//! Serde types of a conformance file (`shared/conformance/vector_hdrf_cases.json`).
//!
//! The file's `conventions` block defines the format; these types follow it. Everything that
//! changes what is computed or checked is parsed strictly (`deny_unknown_fields`), so a typo is an
//! error naming its JSON path instead of a silently ignored key. Purely descriptive keys (the
//! file's `source`, `counts`, a case's `test`, `kind`, `fixture`, `notes`, a step's `note`) are
//! accepted and ignored.
//!
//! Resource maps are raw test vectors and are read as plain numbers, not with the human-input
//! serde of `fairsched-resources`: memory is in bytes, cpu is rounded half away from zero to
//! 0.01 when it is converted (see `build.rs`).

use fairsched_resources::ResourceKind;
use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// The whole file.
#[derive(Debug, Deserialize)]
pub struct File {
    #[serde(default)]
    pub conventions: Option<Conventions>,
    pub cases: Vec<Case>,
    // `schema_version`, `source`, `counts`, `derived_values_note`: descriptive, ignored.
}

/// The parts of the `conventions` block that are machine-readable.
#[derive(Debug, Deserialize)]
pub struct Conventions {
    /// Options every run starts from (before parametrisation and step options).
    #[serde(default)]
    pub default_options: Option<OptionsPatch>,
    /// Options the format fixes (main resource, integral periods).
    #[serde(default)]
    pub fixed_options: Option<OptionsPatch>,
    /// Names of the comparisons the format defines (checked against what this tool implements).
    #[serde(default)]
    pub comparisons: Option<BTreeMap<String, Value>>,
    /// Names of the attributes the format defines (`a.b|c` lists alternatives of the last part).
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, Value>>,
}

/// One test case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    #[serde(default, rename = "test")]
    _test: IgnoredAny,
    #[serde(default, rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default, rename = "fixture")]
    _fixture: IgnoredAny,
    #[serde(default, rename = "notes")]
    _notes: IgnoredAny,
    #[serde(default, rename = "note")]
    _note: IgnoredAny,
    /// A case recorded by reference to an upstream data file (may not be copied).
    #[serde(default)]
    pub data_file: Option<Value>,
    /// Option name -> values; the case runs once per combination.
    #[serde(default)]
    pub parametrized_over: Option<BTreeMap<String, Vec<Value>>>,
    pub total_resources: ResourceMap,
    #[serde(default)]
    pub elements: Vec<ElementFields>,
    pub steps: Vec<Step>,
}

/// Element type of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementType {
    Root,
    Pool,
    Operation,
}

impl ElementType {
    pub fn name(self) -> &'static str {
        match self {
            ElementType::Root => "root",
            ElementType::Pool => "pool",
            ElementType::Operation => "operation",
        }
    }
}

/// Pool mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    FairShare,
    Fifo,
}

/// Integral guarantee type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuaranteeType {
    #[default]
    None,
    Burst,
    Relaxed,
}

/// An element record (`elements[]`, `add_element.element`) or the `set` of a `mutate` step.
///
/// Every field is optional here; `build.rs` checks which ones a record must have and which ones
/// apply to its type.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementFields {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, rename = "type")]
    pub element_type: Option<ElementType>,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub weight: Option<f64>,
    /// Absent = unchanged (unlimited for a new element); `null` = unlimited.
    #[serde(default, deserialize_with = "present")]
    pub resource_limits: Option<Option<LimitsMap>>,

    // Pools.
    #[serde(default)]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub strong_guarantee_resources: Option<ResourceMap>,
    /// Absent = unchanged; `null` = no integral guarantees.
    #[serde(default, deserialize_with = "present")]
    pub integral_guarantees: Option<Option<IntegralGuaranteesRecord>>,
    #[serde(default)]
    pub initial_accumulated_resource_volume: Option<ResourceMap>,
    #[serde(
        default,
        alias = "enable_fifo_children_reordering_for_guarantee_utilization"
    )]
    pub fifo_children_reordering_for_guarantee_utilization_enabled: Option<bool>,
    #[serde(
        default,
        alias = "compute_promised_guarantee_fair_share",
        alias = "enable_promised_guarantee_fair_share"
    )]
    pub promised_guarantee_fair_share_computation_enabled: Option<bool>,
    #[serde(default, alias = "enable_priority_strong_guarantee_adjustment")]
    pub priority_strong_guarantee_adjustment_enabled: Option<bool>,
    #[serde(
        default,
        alias = "enable_priority_strong_guarantee_adjustment_donorship"
    )]
    pub priority_strong_guarantee_adjustment_donorship_enabled: Option<bool>,
    /// Per-pool permission for the gang step function (the mock allows it everywhere).
    #[serde(default, alias = "enable_step_function_for_gang_operations")]
    pub allow_gang_step_function: Option<bool>,

    // Operations.
    #[serde(default)]
    pub resource_demand: Option<ResourceMap>,
    #[serde(default)]
    pub resource_usage: Option<ResourceMap>,
    #[serde(default)]
    pub gang: Option<bool>,
    #[serde(default)]
    pub best_allocation_share: Option<[f64; 5]>,

    #[serde(default, rename = "note")]
    _note: IgnoredAny,
}

impl ElementFields {
    /// Names of the pool-only fields that are present.
    pub fn pool_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut add = |present: bool, name| {
            if present {
                out.push(name)
            }
        };
        add(self.mode.is_some(), "mode");
        add(
            self.strong_guarantee_resources.is_some(),
            "strong_guarantee_resources",
        );
        add(self.integral_guarantees.is_some(), "integral_guarantees");
        add(
            self.initial_accumulated_resource_volume.is_some(),
            "initial_accumulated_resource_volume",
        );
        add(
            self.fifo_children_reordering_for_guarantee_utilization_enabled
                .is_some(),
            "fifo_children_reordering_for_guarantee_utilization_enabled",
        );
        add(
            self.promised_guarantee_fair_share_computation_enabled
                .is_some(),
            "promised_guarantee_fair_share_computation_enabled",
        );
        add(
            self.priority_strong_guarantee_adjustment_enabled.is_some(),
            "priority_strong_guarantee_adjustment_enabled",
        );
        add(
            self.priority_strong_guarantee_adjustment_donorship_enabled
                .is_some(),
            "priority_strong_guarantee_adjustment_donorship_enabled",
        );
        add(
            self.allow_gang_step_function.is_some(),
            "allow_gang_step_function",
        );
        out
    }

    /// Names of the operation-only fields that are present.
    pub fn operation_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut add = |present: bool, name| {
            if present {
                out.push(name)
            }
        };
        add(self.resource_demand.is_some(), "resource_demand");
        add(self.resource_usage.is_some(), "resource_usage");
        add(self.gang.is_some(), "gang");
        add(
            self.best_allocation_share.is_some(),
            "best_allocation_share",
        );
        out
    }
}

/// `integral_guarantees` of a pool.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegralGuaranteesRecord {
    #[serde(default)]
    pub guarantee_type: GuaranteeType,
    #[serde(default)]
    pub resource_flow: ResourceMap,
    #[serde(default)]
    pub burst_guarantee_resources: ResourceMap,
    #[serde(default)]
    pub relaxed_share_multiplier_limit: Option<f64>,
    #[serde(default)]
    pub can_accept_free_volume: Option<bool>,
    #[serde(default)]
    pub should_distribute_free_volume_among_children: Option<bool>,
}

/// A resource map: missing key = 0 (or "not configured" for strong guarantees).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceMap {
    #[serde(default)]
    pub user_slots: Option<f64>,
    #[serde(default)]
    pub cpu: Option<f64>,
    #[serde(default)]
    pub gpu: Option<f64>,
    #[serde(default)]
    pub memory: Option<f64>,
    #[serde(default)]
    pub network: Option<f64>,
}

impl ResourceMap {
    /// Components in canonical resource order.
    pub fn entries(&self) -> [(ResourceKind, Option<f64>); 5] {
        [
            (ResourceKind::UserSlots, self.user_slots),
            (ResourceKind::Cpu, self.cpu),
            (ResourceKind::Gpu, self.gpu),
            (ResourceKind::Memory, self.memory),
            (ResourceKind::Network, self.network),
        ]
    }
}

/// A `resource_limits` map: every key is given; `"inf"` = unlimited, a missing key = 0.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsMap {
    #[serde(default)]
    pub user_slots: Option<LimitValue>,
    #[serde(default)]
    pub cpu: Option<LimitValue>,
    #[serde(default)]
    pub gpu: Option<LimitValue>,
    #[serde(default)]
    pub memory: Option<LimitValue>,
    #[serde(default)]
    pub network: Option<LimitValue>,
}

impl LimitsMap {
    /// Components in canonical resource order.
    pub fn entries(&self) -> [(ResourceKind, Option<LimitValue>); 5] {
        [
            (ResourceKind::UserSlots, self.user_slots),
            (ResourceKind::Cpu, self.cpu),
            (ResourceKind::Gpu, self.gpu),
            (ResourceKind::Memory, self.memory),
            (ResourceKind::Network, self.network),
        ]
    }
}

/// One component of a limits map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LimitValue {
    Finite(f64),
    Infinite,
}

impl<'de> Deserialize<'de> for LimitValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LimitValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or the string \"inf\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LimitValue, E> {
                Ok(LimitValue::Finite(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LimitValue, E> {
                Ok(LimitValue::Finite(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LimitValue, E> {
                Ok(LimitValue::Finite(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LimitValue, E> {
                if v == "inf" {
                    Ok(LimitValue::Infinite)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Step types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepType {
    Update,
    Mutate,
    AddElement,
    CompareVariants,
}

impl StepType {
    pub fn name(self) -> &'static str {
        match self {
            StepType::Update => "update",
            StepType::Mutate => "mutate",
            StepType::AddElement => "add_element",
            StepType::CompareVariants => "compare_variants",
        }
    }
}

/// One step of a case. Which keys a step type allows is checked in `build.rs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    #[serde(rename = "type")]
    pub step_type: StepType,
    #[serde(default)]
    pub now_seconds: Option<f64>,
    /// `null` (or absent) = no previous update.
    #[serde(default, deserialize_with = "present")]
    pub previous_update_seconds: Option<Option<f64>>,
    /// Options for this step, on top of the run's options.
    #[serde(default)]
    pub options: Option<OptionsPatch>,
    /// Cluster total for this step only (default: the case's `total_resources`).
    #[serde(default)]
    pub total_resources: Option<ResourceMap>,
    /// `mutate`: the element's id; `add_element`: the element record.
    #[serde(default)]
    pub element: Option<Value>,
    /// `mutate`: the fields to change.
    #[serde(default)]
    pub set: Option<Value>,
    #[serde(default)]
    pub expect: Option<Vec<Expectation>>,
    #[serde(default)]
    pub upstream_implementation_specific_assertions: Option<Vec<Expectation>>,
    #[serde(default)]
    pub derived_not_asserted: Option<Derived>,
    #[serde(default, rename = "note")]
    _note: IgnoredAny,
    #[serde(default, rename = "notes")]
    _notes: IgnoredAny,
}

/// Comparison kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonKind {
    Near,
    Exact,
    NotDominatedBy,
    Dominates,
    EqualAcrossOptionVariants,
    NoFailure,
}

impl ComparisonKind {
    pub const ALL: [ComparisonKind; 6] = [
        ComparisonKind::Near,
        ComparisonKind::Exact,
        ComparisonKind::NotDominatedBy,
        ComparisonKind::Dominates,
        ComparisonKind::EqualAcrossOptionVariants,
        ComparisonKind::NoFailure,
    ];

    pub fn from_name(name: &str) -> Option<ComparisonKind> {
        ComparisonKind::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            ComparisonKind::Near => "near",
            ComparisonKind::Exact => "exact",
            ComparisonKind::NotDominatedBy => "not_dominated_by",
            ComparisonKind::Dominates => "dominates",
            ComparisonKind::EqualAcrossOptionVariants => "equal_across_option_variants",
            ComparisonKind::NoFailure => "no_failure",
        }
    }
}

/// One expectation of a step.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// A [`ComparisonKind`] name (kept as text so that a comparison the file's conventions define
    /// but this tool does not implement is reported as a failing assertion, not a bad file).
    pub comparison: String,
    #[serde(default)]
    pub element: Option<String>,
    /// `equal_across_option_variants`: the elements to compare.
    #[serde(default)]
    pub elements: Option<Vec<String>>,
    #[serde(default)]
    pub attribute: Option<String>,
    /// Present even when `null` (e.g. `effective_fifo_index: null`).
    #[serde(default, deserialize_with = "present")]
    pub value: Option<Value>,
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// `equal_across_option_variants`: option sets to run the tree under.
    #[serde(default)]
    pub variants: Option<Vec<OptionsPatch>>,
    /// `dominates`: left-hand and right-hand attributes of the same element.
    #[serde(default)]
    pub lhs: Option<String>,
    #[serde(default)]
    pub rhs: Option<String>,
    #[serde(default, rename = "note")]
    _note: IgnoredAny,
}

/// Soft values from an independent prototype (not asserted).
#[derive(Debug, Default, Deserialize)]
pub struct Derived {
    /// Element -> attribute -> value.
    #[serde(default)]
    pub fair_shares: BTreeMap<String, BTreeMap<String, Value>>,
    /// Error descriptions, e.g. `PoolTreeGuaranteesOvercommit (strong guarantees + ...)`.
    #[serde(default)]
    pub errors: Option<Vec<String>>,
}

/// A resource name as an option value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceName {
    UserSlots,
    Cpu,
    Gpu,
    Memory,
    Network,
}

impl ResourceName {
    pub fn kind(self) -> ResourceKind {
        match self {
            ResourceName::UserSlots => ResourceKind::UserSlots,
            ResourceName::Cpu => ResourceKind::Cpu,
            ResourceName::Gpu => ResourceKind::Gpu,
            ResourceName::Memory => ResourceKind::Memory,
            ResourceName::Network => ResourceKind::Network,
        }
    }
}

/// Update options, each optional: the keys given replace the current values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionsPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_step_function_for_gang_operations: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_fifo_children_reordering_for_guarantee_utilization: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_improved_fair_share_by_fit_factor_computation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_improved_fair_share_by_fit_factor_computation_distribution_gap: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_fast_fifo_fair_share_by_fit_factor_computation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_resource: Option<ResourceName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integral_pool_capacity_saturation_period_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integral_smooth_period_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed_share_multiplier_limit: Option<f64>,
}

impl OptionsPatch {
    /// Applies the keys that are set.
    pub fn apply(&self, o: &mut fairsched_hdrf::UpdateOptions) {
        fn set<T: Copy>(dst: &mut T, src: Option<T>) {
            if let Some(v) = src {
                *dst = v;
            }
        }
        set(
            &mut o.enable_step_function_for_gang_operations,
            self.enable_step_function_for_gang_operations,
        );
        set(
            &mut o.enable_fifo_children_reordering_for_guarantee_utilization,
            self.enable_fifo_children_reordering_for_guarantee_utilization,
        );
        set(
            &mut o.enable_improved_fair_share_by_fit_factor_computation,
            self.enable_improved_fair_share_by_fit_factor_computation,
        );
        set(
            &mut o.enable_improved_fair_share_by_fit_factor_computation_distribution_gap,
            self.enable_improved_fair_share_by_fit_factor_computation_distribution_gap,
        );
        set(
            &mut o.enable_fast_fifo_fair_share_by_fit_factor_computation,
            self.enable_fast_fifo_fair_share_by_fit_factor_computation,
        );
        set(
            &mut o.main_resource,
            self.main_resource.map(ResourceName::kind),
        );
        set(
            &mut o.integral_pool_capacity_saturation_period_seconds,
            self.integral_pool_capacity_saturation_period_seconds,
        );
        set(
            &mut o.integral_smooth_period_seconds,
            self.integral_smooth_period_seconds,
        );
        set(
            &mut o.relaxed_share_multiplier_limit,
            self.relaxed_share_multiplier_limit,
        );
    }

    /// The patch as a JSON object (for reports).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Deserializes a field that may be `null`: absent -> `None` (via `#[serde(default)]`),
/// present -> `Some(value)`, where `null` is a value.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}
