//! Inputs of a fair-share update: the element tree and the per-update options.
//!
//! The tree is an arena: element 0 is the root, every other element has a parent, and a
//! composite's children are kept in attachment order (which matters for tie-breaks).

use fairsched_resources::{
    PartialResources, RESOURCE_COUNT, ResourceKind, ResourceVector, Resources,
};

/// Index of an element in its [`Tree`].
pub type ElementIndex = usize;

/// Index of the root element.
pub const ROOT: ElementIndex = 0;

/// How a pool shares among its children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PoolMode {
    /// Weighted fair share (hierarchical DRF).
    #[default]
    FairShare,
    /// Strict priority in FIFO order; children must be operations.
    Fifo,
}

/// Kind of integral guarantee of a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IntegralGuaranteeType {
    #[default]
    None,
    Burst,
    Relaxed,
}

/// A pool's integral-guarantee configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct IntegralGuarantees {
    pub guarantee_type: IntegralGuaranteeType,
    /// Volume refill rate (resources per second).
    pub resource_flow: Resources,
    /// Burst pools: the most they may take at once.
    pub burst_guarantee_resources: Resources,
    /// Relaxed pools: cap on the integral share as a multiple of the flow ratio; `None` uses the
    /// update's `relaxed_share_multiplier_limit` (tree default 3).
    pub relaxed_share_multiplier_limit: Option<f64>,
    pub can_accept_free_volume: bool,
    pub should_distribute_free_volume_among_children: bool,
}

impl Default for IntegralGuarantees {
    fn default() -> Self {
        IntegralGuarantees {
            guarantee_type: IntegralGuaranteeType::None,
            resource_flow: Resources::ZERO,
            burst_guarantee_resources: Resources::ZERO,
            relaxed_share_multiplier_limit: None,
            can_accept_free_volume: true,
            should_distribute_free_volume_among_children: false,
        }
    }
}

/// One criterion of a FIFO pool's order (YTsaurus `fifo_sort_parameters`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FifoSortParameter {
    /// Earlier start first.
    StartTime,
    /// Heavier first.
    Weight,
    /// Fewer pending jobs first.
    PendingJobCount,
}

/// Configuration of a pool as the fair-share computation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpec {
    pub mode: PoolMode,
    /// Configured strong guarantee; unset components are inferred from the main resource.
    pub strong_guarantee_resources: PartialResources,
    pub integral_guarantees: IntegralGuarantees,
    /// FIFO order criteria, compared lexicographically; ties keep attachment order.
    pub fifo_sort_parameters: Vec<FifoSortParameter>,
    /// Whether gang children may use the step function (needs the tree option too).
    pub allow_gang_step_function: bool,
    /// Compute the promised-guarantee fair share for this subtree.
    pub enable_promised_guarantee_fair_share: bool,
    /// FIFO reordering for guarantee utilisation (needs the tree option and step functions).
    pub enable_fifo_children_reordering_for_guarantee_utilization: bool,
    /// The weight was not configured: with `infer_weight_from_guarantees_share_multiplier` set,
    /// the update infers it from the pool's guarantee share.
    pub infer_weight: bool,
    /// Priority strong-guarantee adjustment: this pool's guarantee is served first.
    pub priority_strong_guarantee_adjustment: bool,
    /// This pool donates guarantee to priority pools below it.
    pub priority_strong_guarantee_adjustment_donorship: bool,
}

impl Default for PoolSpec {
    fn default() -> Self {
        PoolSpec {
            mode: PoolMode::FairShare,
            strong_guarantee_resources: PartialResources::EMPTY,
            integral_guarantees: IntegralGuarantees::default(),
            fifo_sort_parameters: vec![FifoSortParameter::StartTime],
            allow_gang_step_function: true,
            infer_weight: false,
            enable_promised_guarantee_fair_share: false,
            enable_fifo_children_reordering_for_guarantee_utilization: false,
            priority_strong_guarantee_adjustment: false,
            priority_strong_guarantee_adjustment_donorship: false,
        }
    }
}

/// An operation (leaf) as the fair-share computation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationSpec {
    pub demand: Resources,
    pub usage: Resources,
    /// All-or-nothing ("gang-like").
    pub gang: bool,
    /// Extra cap on the operation's limits share; all ones for none.
    pub best_allocation_share: ResourceVector,
    /// For FIFO ordering.
    pub start_time: f64,
    /// For FIFO ordering.
    pub pending_job_count: u64,
}

impl Default for OperationSpec {
    fn default() -> Self {
        OperationSpec {
            demand: Resources::ZERO,
            usage: Resources::ZERO,
            gang: false,
            best_allocation_share: ResourceVector::ONES,
            start_time: 0.0,
            pending_job_count: 0,
        }
    }
}

/// What an element is.
#[derive(Clone, Debug, PartialEq)]
pub enum ElementKind {
    Root,
    Pool(PoolSpec),
    Operation(OperationSpec),
}

/// Resource × seconds (`TResourceVolume`).
///
/// The cpu component is fixed point with two decimals, as in YTsaurus: it is stored as a whole
/// number of hundredths (exact in an `f64`), and every operation rounds it half away from zero.
/// The other components are plain doubles.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ResourceVolume {
    raw: [f64; RESOURCE_COUNT],
}

const CPU: usize = ResourceKind::Cpu.index();

impl ResourceVolume {
    pub const ZERO: ResourceVolume = ResourceVolume {
        raw: [0.0; RESOURCE_COUNT],
    };

    /// From natural-unit values (cpu·s as a decimal, rounded to hundredths).
    pub fn from_values(values: [f64; RESOURCE_COUNT]) -> ResourceVolume {
        let mut raw = values;
        raw[CPU] = (values[CPU] * 100.0).round();
        ResourceVolume { raw }
    }

    /// Natural-unit values (cpu·s as a decimal).
    pub fn values(&self) -> [f64; RESOURCE_COUNT] {
        let mut v = self.raw;
        v[CPU] = self.raw[CPU] / 100.0;
        v
    }

    /// `resources × seconds`.
    pub fn from_resources(r: &Resources, seconds: f64) -> ResourceVolume {
        let raw = r.raw();
        ResourceVolume {
            raw: std::array::from_fn(|i| {
                if i == CPU {
                    (raw[i] as f64 * seconds).round()
                } else {
                    raw[i] as f64 * seconds
                }
            }),
        }
    }

    /// Every component times `k` (cpu rounded to hundredths).
    #[must_use]
    pub fn scale(&self, k: f64) -> ResourceVolume {
        self.map(|i, x| if i == CPU { (x * k).round() } else { x * k })
    }

    fn map(&self, f: impl Fn(usize, f64) -> f64) -> ResourceVolume {
        ResourceVolume {
            raw: std::array::from_fn(|i| f(i, self.raw[i])),
        }
    }

    fn zip(&self, o: &ResourceVolume, f: impl Fn(f64, f64) -> f64) -> ResourceVolume {
        ResourceVolume {
            raw: std::array::from_fn(|i| f(self.raw[i], o.raw[i])),
        }
    }

    #[must_use]
    pub fn add(&self, o: &ResourceVolume) -> ResourceVolume {
        self.zip(o, |a, b| a + b)
    }

    #[must_use]
    pub fn sub(&self, o: &ResourceVolume) -> ResourceVolume {
        self.zip(o, |a, b| a - b)
    }

    #[must_use]
    pub fn max(&self, o: &ResourceVolume) -> ResourceVolume {
        self.zip(o, f64::max)
    }

    #[must_use]
    pub fn min(&self, o: &ResourceVolume) -> ResourceVolume {
        self.zip(o, f64::min)
    }

    pub fn is_zero(&self) -> bool {
        self.raw.iter().all(|&x| x == 0.0)
    }

    /// Natural value of one component.
    pub fn get(&self, kind: ResourceKind) -> f64 {
        self.values()[kind.index()]
    }

    /// Raw component `i` in resource order (cpu in hundredths, as stored).
    pub fn raw(&self, i: usize) -> f64 {
        self.raw[i]
    }

    /// Sets raw component `i` in resource order (cpu in hundredths, rounded).
    pub fn set_raw(&mut self, i: usize, v: f64) {
        self.raw[i] = if i == CPU { v.round() } else { v };
    }

    /// `min over resources with total_r > 0 of volume_r / total_r`, or 0 when the total is empty.
    pub fn min_resource_ratio(&self, total: &Resources) -> f64 {
        let v = self.values();
        let t = total.values();
        let mut result = f64::MAX;
        let mut updated = false;
        for i in 0..RESOURCE_COUNT {
            if t[i] > 0.0 {
                result = result.min(v[i] / t[i]);
                updated = true;
            }
        }
        if updated { result } else { 0.0 }
    }
}

/// Persistent integral-guarantee state of a pool, carried across updates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IntegralState {
    pub accumulated_volume: ResourceVolume,
    pub last_share_ratio: f64,
}

/// One node of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    pub name: String,
    pub parent: Option<ElementIndex>,
    /// Children in attachment order.
    pub children: Vec<ElementIndex>,
    pub kind: ElementKind,
    /// Must be > 0.
    pub weight: f64,
    /// Absent components are unlimited.
    pub resource_limits: PartialResources,
    /// Persistent integral state (pools only).
    pub integral_state: IntegralState,
}

impl Element {
    pub fn is_operation(&self) -> bool {
        matches!(self.kind, ElementKind::Operation(_))
    }

    pub fn is_root(&self) -> bool {
        matches!(self.kind, ElementKind::Root)
    }

    pub fn pool(&self) -> Option<&PoolSpec> {
        match &self.kind {
            ElementKind::Pool(p) => Some(p),
            _ => None,
        }
    }

    pub fn pool_mut(&mut self) -> Option<&mut PoolSpec> {
        match &mut self.kind {
            ElementKind::Pool(p) => Some(p),
            _ => None,
        }
    }

    pub fn operation(&self) -> Option<&OperationSpec> {
        match &self.kind {
            ElementKind::Operation(o) => Some(o),
            _ => None,
        }
    }

    pub fn operation_mut(&mut self) -> Option<&mut OperationSpec> {
        match &mut self.kind {
            ElementKind::Operation(o) => Some(o),
            _ => None,
        }
    }
}

/// Why an element could not be attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeError {
    UnknownParent(ElementIndex),
    ParentIsOperation(ElementIndex),
}

impl std::fmt::Display for TreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TreeError::UnknownParent(p) => write!(f, "parent element {p} does not exist"),
            TreeError::ParentIsOperation(p) => {
                write!(
                    f,
                    "parent element {p} is an operation and cannot have children"
                )
            }
        }
    }
}

impl std::error::Error for TreeError {}

/// The element tree: an arena whose element 0 is the root.
#[derive(Clone, Debug, PartialEq)]
pub struct Tree {
    elements: Vec<Element>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    /// A tree holding only the root.
    pub fn new() -> Tree {
        Tree {
            elements: vec![Element {
                name: "<Root>".to_string(),
                parent: None,
                children: Vec::new(),
                kind: ElementKind::Root,
                weight: 1.0,
                resource_limits: PartialResources::EMPTY,
                integral_state: IntegralState::default(),
            }],
        }
    }

    /// Appends a pool under `parent`.
    pub fn add_pool(
        &mut self,
        parent: ElementIndex,
        name: impl Into<String>,
        weight: f64,
        spec: PoolSpec,
    ) -> Result<ElementIndex, TreeError> {
        self.attach(parent, name.into(), weight, ElementKind::Pool(spec))
    }

    /// Appends an operation under `parent`.
    pub fn add_operation(
        &mut self,
        parent: ElementIndex,
        name: impl Into<String>,
        weight: f64,
        spec: OperationSpec,
    ) -> Result<ElementIndex, TreeError> {
        self.attach(parent, name.into(), weight, ElementKind::Operation(spec))
    }

    fn attach(
        &mut self,
        parent: ElementIndex,
        name: String,
        weight: f64,
        kind: ElementKind,
    ) -> Result<ElementIndex, TreeError> {
        let p = self
            .elements
            .get(parent)
            .ok_or(TreeError::UnknownParent(parent))?;
        if p.is_operation() {
            return Err(TreeError::ParentIsOperation(parent));
        }
        let index = self.elements.len();
        self.elements.push(Element {
            name,
            parent: Some(parent),
            children: Vec::new(),
            kind,
            weight,
            resource_limits: PartialResources::EMPTY,
            integral_state: IntegralState::default(),
        });
        self.elements[parent].children.push(index);
        Ok(index)
    }

    /// Number of elements, the root included.
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    /// Never true: the root always exists.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn element(&self, i: ElementIndex) -> &Element {
        &self.elements[i]
    }

    pub fn element_mut(&mut self, i: ElementIndex) -> &mut Element {
        &mut self.elements[i]
    }

    pub fn elements(&self) -> &[Element] {
        &self.elements
    }

    /// Finds an element by name (linear; for tests and tools).
    pub fn find(&self, name: &str) -> Option<ElementIndex> {
        self.elements.iter().position(|e| e.name == name)
    }

    /// Elements in pre-order (parents before children, children in attachment order).
    pub fn preorder(&self) -> Vec<ElementIndex> {
        let mut out = Vec::with_capacity(self.elements.len());
        let mut stack = vec![ROOT];
        while let Some(i) = stack.pop() {
            out.push(i);
            for &c in self.elements[i].children.iter().rev() {
                stack.push(c);
            }
        }
        out
    }
}

/// Options of one update (YTsaurus `TFairShareUpdateOptions` plus the tree-level defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateOptions {
    pub main_resource: ResourceKind,
    pub integral_pool_capacity_saturation_period_seconds: f64,
    pub integral_smooth_period_seconds: f64,
    /// Tree default of a relaxed pool's `relaxed_share_multiplier_limit`.
    pub relaxed_share_multiplier_limit: f64,
    /// Pools with `infer_weight` get weight `m × (guarantee dominant share + flow ratio) /
    /// (the parent's same quantity)`, or 1 when either is ~0.
    pub infer_weight_from_guarantees_share_multiplier: Option<f64>,
    pub enable_step_function_for_gang_operations: bool,
    pub enable_fifo_children_reordering_for_guarantee_utilization: bool,
    pub enable_improved_fair_share_by_fit_factor_computation: bool,
    pub enable_improved_fair_share_by_fit_factor_computation_distribution_gap: bool,
    pub enable_fast_fifo_fair_share_by_fit_factor_computation: bool,
}

impl Default for UpdateOptions {
    fn default() -> Self {
        UpdateOptions {
            main_resource: ResourceKind::Cpu,
            integral_pool_capacity_saturation_period_seconds: 86400.0,
            integral_smooth_period_seconds: 60.0,
            relaxed_share_multiplier_limit: 3.0,
            infer_weight_from_guarantees_share_multiplier: None,
            enable_step_function_for_gang_operations: false,
            enable_fifo_children_reordering_for_guarantee_utilization: false,
            enable_improved_fair_share_by_fit_factor_computation: false,
            enable_improved_fair_share_by_fit_factor_computation_distribution_gap: false,
            enable_fast_fifo_fair_share_by_fit_factor_computation: false,
        }
    }
}

/// Everything an update needs besides the tree. Time is passed in: the library reads no clock.
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateInput {
    /// Cluster total resources.
    pub total_resources: Resources,
    /// Current time, in seconds on any fixed origin.
    pub now_seconds: f64,
    /// Time of the previous update; `None` means integral volumes are neither refilled nor
    /// consumed.
    pub previous_update_seconds: Option<f64>,
    pub options: UpdateOptions,
}
