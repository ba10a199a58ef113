//! The fair-share update, in the order of `shared/spec/vector_hdrf.md` §3:
//!
//! 1. validate pool configs;
//! 2. infer strong-guarantee resources (top-down);
//! 3. collect burst and relaxed pools;
//! 4. cumulative attributes (bottom-up, FIFO order);
//! 5. consume and refill integral volumes;
//! 6. validate and adjust guarantees at the root, tiers, estimated guarantee;
//! 7. FIFO reordering for guarantee utilisation;
//! 8. burst integral shares;
//! 9. relaxed integral shares;
//! 10. bottom-up functions F, M, S (M and S by one walk over F, `crate::envelope`, unless
//!     F does not suit it, or the tests' `crate::tuning` turns it off: then as the oracle builds
//!     them);
//! 11. top-down distribution;
//! 12. promised-guarantee pass;
//! 13. root fix-up.
//!
//! Internal invariant checks that the reference implementation verifies (and aborts on) are
//! reported as [`UpdateWarning`]s instead: the update always completes.

use crate::crit::{self, Pt};
use crate::improved::{ImprovedPool, ShareEvaluator};
use crate::model::{
    ElementIndex, FifoSortParameter, IntegralGuaranteeType, PoolMode, ROOT, ResourceVolume, Tree,
    UpdateInput, UpdateOptions,
};
use crate::output::{
    DetailedFairShare, ElementAttributes, FunctionSizes, PhaseClock, PhaseTimings,
    TIER_PRIORITY_POOLS, TIER_REGULAR_POOLS, UpdateError, UpdateOutput, UpdateWarning,
};
use crate::plf::{
    Builder, ComposeScratch, Plf, PlfRef, Segment, SumScratch, Value, component_into, compose_into,
    compress_into, inverse_lower_bound, inverse_part_into, pointwise_min_into,
    scale_argument_extend_into, sum_adaptive_into, sum_exact_into,
};
use fairsched_resources::{RESOURCE_COUNT, ResourceKind, ResourceVector, Resources};
use std::ops::Range;

/// General epsilon of the algorithm.
pub const EPSILON: f64 = 1e-9;
/// Tolerance of function compression.
pub const COMPRESS_FUNCTION_EPSILON: f64 = 1e-15;
/// Smallest weight the update uses (YTsaurus' `MinSchedulableWeight`, which its configs
/// enforce): a sibling's relative weight `w / min_w` then stays within `1 ..= 1 / MIN_WEIGHT²`
/// (about 4.5e15), which the functions' arithmetic handles; smaller or non-positive weights
/// are raised to it with a warning.
pub const MIN_WEIGHT: f64 = 1.0 / 67_108_864.0; // 2^-26 = sqrt(f64::EPSILON)
/// Largest weight the update uses (YTsaurus' `MaxSchedulableWeight`, `1 / MIN_WEIGHT`);
/// larger weights are lowered to it with a warning.
pub const MAX_WEIGHT: f64 = 67_108_864.0; // 2^26
/// Longest period (seconds, about 31,700 years) the integral volumes are computed with: a
/// cluster's whole resources (at most about 9.2e18 raw units) over it, times a flow ratio,
/// stay far within a double's range. Longer periods (and saturation periods) are shortened to
/// it with a warning.
pub const MAX_PERIOD_SECONDS: f64 = 1e12;
/// Largest magnitude of a raw component of a stored accumulated volume: volumes of many pools
/// added up stay finite. Larger stored volumes are lowered to it with a warning.
pub const MAX_VOLUME: f64 = 1e300;

type Rv = ResourceVector;

const EPS_VEC: Rv = ResourceVector::splat(EPSILON);

/// Which fair share a top-down pass writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FairShareType {
    Regular,
    PromisedGuarantee,
}

/// The functions of an element: M and S (in the update's arenas), F's size and domain (F
/// itself is not needed once M and S exist), and, for normal pools in improved mode, what
/// gives each child's share by the pool's fit factor.
struct Functions {
    f_size: usize,
    f_right_bound: f64,
    m_size: usize,
    /// M is kept only where the top-down pass reads it: pools in classic mode.
    m: Option<KeptM>,
    s: Range<usize>,
    /// Normal pools in improved mode: how to evaluate the children's shares by fit factor.
    improved: Option<ImprovedPool>,
}

/// Where an element's M is kept: as critical points in `m_points` (when it was built on
/// them) or as segments in `m_arena`.
#[derive(Clone)]
enum KeptM {
    Points(Range<usize>),
    Segments(Range<usize>),
}

/// Buffers reused from one element's functions to the next.
#[derive(Default)]
struct Scratch {
    /// F of the element being built.
    f: Vec<Segment<Rv>>,
    /// S of the element being built.
    s: Vec<Segment<Rv>>,
    /// Children's S scaled by their relative weights.
    scaled: Vec<Vec<Segment<Rv>>>,
    /// One component of F.
    component: Vec<Segment<f64>>,
    /// The per-resource parts of M.
    parts: [Vec<Segment<f64>>; RESOURCE_COUNT],
    /// Pointwise-minimum accumulators.
    min_acc: Vec<Segment<f64>>,
    min_next: Vec<Segment<f64>>,
    /// S before compression.
    composed: Vec<Segment<Rv>>,
    sum: SumScratch<Rv>,
    compose: ComposeScratch,
    /// On critical points: a transposed component of F, the parts of M, and the
    /// pointwise-minimum accumulators.
    crit_t: [Vec<Pt>; RESOURCE_COUNT],
    crit_parts: [Vec<Pt>; RESOURCE_COUNT],
    crit_acc: Vec<Pt>,
    crit_next: Vec<Pt>,
    /// Critical points of F and the composition's points (argument, value of M).
    compose_outer: Vec<f64>,
    compose_points: Vec<(f64, f64)>,
    /// Normal pools in improved mode.
    improved: crate::improved::BuildScratch,
}

/// Every element's attributes while the update computes them, one vector per attribute
/// ([`ElementAttributes`] without what the functions give at the end): the passes over all
/// elements read and write a few attributes each, and a record per element (about a kilobyte)
/// would make every pass stride through a hundred megabytes. The output records are written
/// once, at the end ([`Update::write_attributes`]).
#[derive(Default)]
struct Attrs {
    weight: Vec<f64>,
    fair_share: Vec<DetailedFairShare>,
    promised_guarantee_fair_share: Vec<DetailedFairShare>,
    usage_share: Vec<Rv>,
    demand_share: Vec<Rv>,
    limits_share: Vec<Rv>,
    strong_guarantee_share: Vec<Rv>,
    strong_guarantee_share_by_tier: Vec<[Rv; 2]>,
    proposed_integral_share: Vec<Rv>,
    estimated_guarantee_share: Vec<Rv>,
    inferred_strong_guarantee_resources: Vec<Resources>,
    burst_ratio: Vec<f64>,
    total_burst_ratio: Vec<f64>,
    resource_flow_ratio: Vec<f64>,
    total_resource_flow_ratio: Vec<f64>,
    volume_overflow: Vec<ResourceVolume>,
    acceptable_volume: Vec<ResourceVolume>,
    accepted_free_volume: Vec<ResourceVolume>,
    children_volume_overflow: Vec<ResourceVolume>,
    dominant_resource: Vec<ResourceKind>,
    fifo_index: Vec<Option<usize>>,
    effective_fifo_index: Vec<Option<usize>>,
}

impl Attrs {
    /// `n` elements with [`ElementAttributes::default`]'s values, keeping the allocations.
    fn reset(&mut self, n: usize) {
        let d = ElementAttributes::default();
        fn fill<T: Clone>(v: &mut Vec<T>, n: usize, value: T) {
            v.clear();
            v.resize(n, value);
        }
        fill(&mut self.weight, n, d.weight);
        fill(&mut self.fair_share, n, d.fair_share);
        fill(
            &mut self.promised_guarantee_fair_share,
            n,
            d.promised_guarantee_fair_share,
        );
        fill(&mut self.usage_share, n, d.usage_share);
        fill(&mut self.demand_share, n, d.demand_share);
        fill(&mut self.limits_share, n, d.limits_share);
        fill(
            &mut self.strong_guarantee_share,
            n,
            d.strong_guarantee_share,
        );
        fill(
            &mut self.strong_guarantee_share_by_tier,
            n,
            d.strong_guarantee_share_by_tier,
        );
        fill(
            &mut self.proposed_integral_share,
            n,
            d.proposed_integral_share,
        );
        fill(
            &mut self.estimated_guarantee_share,
            n,
            d.estimated_guarantee_share,
        );
        fill(
            &mut self.inferred_strong_guarantee_resources,
            n,
            d.inferred_strong_guarantee_resources,
        );
        fill(&mut self.burst_ratio, n, d.burst_ratio);
        fill(&mut self.total_burst_ratio, n, d.total_burst_ratio);
        fill(&mut self.resource_flow_ratio, n, d.resource_flow_ratio);
        fill(
            &mut self.total_resource_flow_ratio,
            n,
            d.total_resource_flow_ratio,
        );
        fill(&mut self.volume_overflow, n, d.volume_overflow);
        fill(&mut self.acceptable_volume, n, d.acceptable_volume);
        fill(&mut self.accepted_free_volume, n, d.accepted_free_volume);
        fill(
            &mut self.children_volume_overflow,
            n,
            d.children_volume_overflow,
        );
        fill(&mut self.dominant_resource, n, d.dominant_resource);
        fill(&mut self.fifo_index, n, d.fifo_index);
        fill(&mut self.effective_fifo_index, n, d.effective_fifo_index);
    }
}

struct Update<'a> {
    tree: &'a mut Tree,
    total: Resources,
    opts: &'a UpdateOptions,
    now: f64,
    previous: Option<f64>,
    attrs: Attrs,
    usage: Vec<Resources>,
    demand: Vec<Resources>,
    /// Children in the order the update uses (FIFO pools: sorted, maybe reordered).
    order: Vec<Vec<ElementIndex>>,
    functions: Vec<Option<Functions>>,
    /// Segments of every element's S and M (ranges in `Functions`).
    s_arena: Vec<Segment<Rv>>,
    m_arena: Vec<Segment<f64>>,
    m_points: Vec<Pt>,
    burst_pools: Vec<ElementIndex>,
    relaxed_pools: Vec<ElementIndex>,
    fifo_pools: Vec<ElementIndex>,
    priority_without_donor: Vec<bool>,
    /// Whether each element is an operation (the passes over all elements ask this of every
    /// element; the tree's records are several hundred bytes each).
    is_op: Vec<bool>,
    errors: Vec<UpdateError>,
    warnings: Vec<UpdateWarning>,
    clock: &'a dyn PhaseClock,
    timing: bool,
    timings: PhaseTimings,
    tuning: Tuning,
    scratch: Scratch,
    /// The root's M(1) where its functions are not built ([`Update::root_at_one`]).
    root_fit_at_one: Option<f64>,
    /// `now - previous` and the options' periods within what volumes can hold
    /// ([`Update::check_inputs`]).
    period: Option<f64>,
    saturation_seconds: f64,
    /// `None` when the smooth period is not positive: volumes give no integral share.
    smooth_seconds: Option<f64>,
}

/// The implementation's knobs: constants in production; the differential tests set them
/// through [`crate::tuning`] (feature `tuning`).
#[cfg(not(feature = "tuning"))]
#[derive(Clone, Copy)]
pub(crate) struct Tuning;

#[cfg(not(feature = "tuning"))]
impl Tuning {
    const PRODUCTION: Tuning = Tuning;

    /// M and S are built in one walk over F (`crate::envelope`) where F suits it.
    fn envelope(self) -> bool {
        true
    }

    /// When classic normal pools' children are summed exactly.
    fn exact_sum(self) -> crate::plf::ExactSum {
        crate::plf::EXACT_SUM
    }
}

#[cfg(feature = "tuning")]
pub(crate) use crate::tuning::Tuning;

/// Working memory of the fair-share update, kept by the caller from one update to the next:
/// the function arenas and per-element tables (among them every attribute of every element;
/// together about four times as large as the returned attributes, some 4.2 KB per element:
/// BENCHMARKS.md, "Memory"). Allocating them afresh costs a page fault per page on every
/// update of a large tree; a caller that updates repeatedly keeps one `Workspace` and calls
/// [`Workspace::update`] or [`Workspace::update_into`].
///
/// Nothing in it is read before an update overwrites it: the results never depend on what an
/// earlier update (of any tree) left there. Cloning gives an empty workspace.
#[derive(Default)]
pub struct Workspace {
    attrs: Attrs,
    usage: Vec<Resources>,
    demand: Vec<Resources>,
    order: Vec<Vec<ElementIndex>>,
    functions: Vec<Option<Functions>>,
    s_arena: Vec<Segment<Rv>>,
    m_arena: Vec<Segment<f64>>,
    m_points: Vec<Pt>,
    scratch: Scratch,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("elements", &self.functions.capacity())
            .field("s_segments", &self.s_arena.capacity())
            .finish_non_exhaustive()
    }
}

impl Clone for Workspace {
    /// An empty workspace: the content is working memory only.
    fn clone(&self) -> Self {
        Workspace::default()
    }
}

impl Workspace {
    /// An empty workspace (it grows to what the largest tree it updates needs).
    pub fn new() -> Workspace {
        Workspace::default()
    }

    /// [`update`], keeping the working memory here for the next update.
    pub fn update(
        &mut self,
        tree: &mut Tree,
        input: &UpdateInput,
        clock: &dyn PhaseClock,
    ) -> UpdateOutput {
        let mut out = UpdateOutput::default();
        update_with_into(tree, input, clock, Tuning::PRODUCTION, self, &mut out);
        out
    }

    /// [`update_into`], keeping the working memory here for the next update.
    pub fn update_into(
        &mut self,
        tree: &mut Tree,
        input: &UpdateInput,
        clock: &dyn PhaseClock,
        out: &mut UpdateOutput,
    ) {
        update_with_into(tree, input, clock, Tuning::PRODUCTION, self, out);
    }
}

/// Runs one fair-share update over `tree` (advancing its persistent integral state) and returns
/// every element's attributes, indexed like the tree.
///
/// The working memory is allocated for this update and freed when it returns; a caller that
/// updates repeatedly keeps it in a [`Workspace`] instead. The library holds no state between
/// calls.
pub fn update(tree: &mut Tree, input: &UpdateInput, clock: &dyn PhaseClock) -> UpdateOutput {
    Workspace::new().update(tree, input, clock)
}

/// [`update`] writing into `out` (overwriting everything in it) and reusing its allocations.
///
/// The attributes take about a kilobyte per element; for a large tree, resetting those of the
/// previous update is several times cheaper than allocating them afresh.
pub fn update_into(
    tree: &mut Tree,
    input: &UpdateInput,
    clock: &dyn PhaseClock,
    out: &mut UpdateOutput,
) {
    Workspace::new().update_into(tree, input, clock, out);
}

/// `v` cleared and refilled with `n` copies of `value`, keeping its allocation.
fn refill<T: Clone>(mut v: Vec<T>, n: usize, value: T) -> Vec<T> {
    v.clear();
    v.resize(n, value);
    v
}

/// [`update_into`] with explicit tuning and working memory.
pub(crate) fn update_with_into(
    tree: &mut Tree,
    input: &UpdateInput,
    clock: &dyn PhaseClock,
    tuning: Tuning,
    workspace: &mut Workspace,
    out: &mut UpdateOutput,
) {
    let n = tree.len();
    let start = clock.now_ns();
    let timing = clock.enabled();
    let mut order = std::mem::take(&mut workspace.order);
    order.truncate(n);
    for o in &mut order {
        o.clear();
    }
    order.resize(n, Vec::new());
    let mut functions = std::mem::take(&mut workspace.functions);
    functions.clear();
    functions.resize_with(n, || None);
    let mut s_arena = std::mem::take(&mut workspace.s_arena);
    s_arena.clear();
    let mut m_arena = std::mem::take(&mut workspace.m_arena);
    m_arena.clear();
    let mut m_points = std::mem::take(&mut workspace.m_points);
    m_points.clear();
    let mut attrs = std::mem::take(&mut workspace.attrs);
    attrs.reset(n);
    let is_op = tree.elements().iter().map(|e| e.is_operation()).collect();
    let mut u = Update {
        tree,
        total: input.total_resources,
        opts: &input.options,
        now: input.now_seconds,
        previous: input.previous_update_seconds,
        attrs,
        usage: refill(std::mem::take(&mut workspace.usage), n, Resources::ZERO),
        demand: refill(std::mem::take(&mut workspace.demand), n, Resources::ZERO),
        order,
        functions,
        s_arena,
        m_arena,
        m_points,
        burst_pools: Vec::new(),
        relaxed_pools: Vec::new(),
        fifo_pools: Vec::new(),
        priority_without_donor: vec![false; n],
        is_op,
        errors: Vec::new(),
        warnings: Vec::new(),
        clock,
        timing,
        timings: PhaseTimings::default(),
        tuning,
        scratch: std::mem::take(&mut workspace.scratch),
        root_fit_at_one: None,
        period: None,
        saturation_seconds: 0.0,
        smooth_seconds: None,
    };
    u.run();
    let mut attributes = std::mem::take(&mut out.attributes);
    u.write_attributes(&mut attributes);
    *workspace = Workspace {
        attrs: std::mem::take(&mut u.attrs),
        usage: std::mem::take(&mut u.usage),
        demand: std::mem::take(&mut u.demand),
        order: std::mem::take(&mut u.order),
        functions: std::mem::take(&mut u.functions),
        s_arena: std::mem::take(&mut u.s_arena),
        m_arena: std::mem::take(&mut u.m_arena),
        m_points: std::mem::take(&mut u.m_points),
        scratch: std::mem::take(&mut u.scratch),
    };
    let mut timings = u.timings;
    timings.total_ns = clock.now_ns().saturating_sub(start);
    *out = UpdateOutput {
        attributes,
        errors: u.errors,
        warnings: u.warnings,
        timings,
    };
}

/// `nextafter(x, 0.0)`.
fn next_toward_zero(x: f64) -> f64 {
    if x > 0.0 {
        x.next_down()
    } else if x < 0.0 {
        x.next_up()
    } else {
        x
    }
}

/// Largest `amount_r / total_r` over resources the cluster has; 0 when none.
fn max_resource_ratio(amount: &Resources, total: &Resources) -> f64 {
    let a = amount.values();
    let t = total.values();
    let mut result = 0.0f64;
    for i in 0..RESOURCE_COUNT {
        if t[i] > 0.0 {
            result = result.max(a[i] / t[i]);
        }
    }
    result
}

fn dominant_resource(amount: &Resources, total: &Resources) -> ResourceKind {
    let a = amount.values();
    let t = total.values();
    let mut best = ResourceKind::Cpu;
    let mut max_ratio = 0.0;
    for k in ResourceKind::ALL {
        let i = k.index();
        if t[i] > 0.0 {
            let ratio = a[i] / t[i];
            if ratio > max_ratio {
                max_ratio = ratio;
                best = k;
            }
        }
    }
    best
}

impl Update<'_> {
    fn now_ns(&self) -> u64 {
        if self.timing { self.clock.now_ns() } else { 0 }
    }

    fn warn(&mut self, element: ElementIndex, message: String) {
        let name = self.tree.element(element).name.clone();
        self.warnings.push(UpdateWarning {
            element: name,
            message,
        });
    }

    fn children(&self, i: ElementIndex) -> &[ElementIndex] {
        &self.tree.element(i).children
    }

    fn is_operation(&self, i: ElementIndex) -> bool {
        self.is_op[i]
    }

    fn weight(&self, i: ElementIndex) -> f64 {
        self.attrs.weight[i]
    }

    fn integral_type(&self, i: ElementIndex) -> IntegralGuaranteeType {
        self.tree
            .element(i)
            .pool()
            .map_or(IntegralGuaranteeType::None, |p| {
                p.integral_guarantees.guarantee_type
            })
    }

    fn mode(&self, i: ElementIndex) -> PoolMode {
        self.tree
            .element(i)
            .pool()
            .map_or(PoolMode::FairShare, |p| p.mode)
    }

    fn guarantee_share(&self, i: ElementIndex) -> Rv {
        self.attrs.strong_guarantee_share[i] + self.attrs.proposed_integral_share[i]
    }

    fn run(&mut self) {
        let t0 = self.now_ns();
        self.check_inputs();
        self.validate_pool_configs();
        self.infer_strong_guarantees();
        self.collect_integral_pools();
        self.update_cumulative_attributes(ROOT);
        self.infer_weights();
        self.clamp_weights();
        self.consume_and_refill_integral_pools();
        self.validate_and_adjust_guarantees();
        for k in 0..self.fifo_pools.len() {
            let pool = self.fifo_pools[k];
            self.reorder_fifo_children(pool);
        }
        self.update_burst_pool_integral_shares();
        self.update_relaxed_pool_integral_shares();
        let t1 = self.now_ns();
        self.timings.prepare_ns = t1 - t0;

        if self.tuning.envelope()
            && !self
                .opts
                .enable_improved_fair_share_by_fit_factor_computation
            && !self.children(ROOT).is_empty()
        {
            // Classic mode reads the root's functions at suggestion 1 only.
            for k in 0..self.children(ROOT).len() {
                let c = self.children(ROOT)[k];
                self.prepare_functions(c);
            }
            self.root_at_one();
        } else {
            self.prepare_functions(ROOT);
        }

        let t2 = self.now_ns();
        if self
            .opts
            .enable_improved_fair_share_by_fit_factor_computation
        {
            let target = self.s(ROOT).value_at(1.0);
            self.compute_vec(ROOT, target, FairShareType::Regular);
        } else {
            self.compute_scalar(ROOT, 1.0, FairShareType::Regular);
        }
        self.compute_promised_guarantee(ROOT);
        self.update_root_fair_share();
        self.timings.top_down_ns = self.now_ns() - t2;
    }

    /// The output records, into `out` (cleared first, its allocation kept), in one sequential
    /// pass: the attributes and, from the functions, the limited demand share and the
    /// functions' sizes.
    fn write_attributes(&self, out: &mut Vec<ElementAttributes>) {
        let n = self.tree.len();
        out.clear();
        out.reserve(n);
        let a = &self.attrs;
        out.extend((0..n).map(|i| {
            let (limited_demand_share, function_sizes) = match &self.functions[i] {
                Some(f) => (
                    self.s_arena[f.s.end - 1].y1,
                    FunctionSizes {
                        fair_share_by_fit_factor: f.f_size,
                        max_fit_factor_by_suggestion: f.m_size,
                        fair_share_by_suggestion: f.s.len(),
                    },
                ),
                None => (Rv::ZERO, FunctionSizes::default()),
            };
            ElementAttributes {
                weight: a.weight[i],
                fair_share: a.fair_share[i],
                promised_guarantee_fair_share: a.promised_guarantee_fair_share[i],
                usage_share: a.usage_share[i],
                demand_share: a.demand_share[i],
                limits_share: a.limits_share[i],
                strong_guarantee_share: a.strong_guarantee_share[i],
                strong_guarantee_share_by_tier: a.strong_guarantee_share_by_tier[i],
                proposed_integral_share: a.proposed_integral_share[i],
                estimated_guarantee_share: a.estimated_guarantee_share[i],
                inferred_strong_guarantee_resources: a.inferred_strong_guarantee_resources[i],
                burst_ratio: a.burst_ratio[i],
                total_burst_ratio: a.total_burst_ratio[i],
                resource_flow_ratio: a.resource_flow_ratio[i],
                total_resource_flow_ratio: a.total_resource_flow_ratio[i],
                volume_overflow: a.volume_overflow[i],
                acceptable_volume: a.acceptable_volume[i],
                accepted_free_volume: a.accepted_free_volume[i],
                children_volume_overflow: a.children_volume_overflow[i],
                dominant_resource: a.dominant_resource[i],
                fifo_index: a.fifo_index[i],
                effective_fifo_index: a.effective_fifo_index[i],
                limited_demand_share,
                function_sizes,
            }
        }));
    }

    // ---- 0. inputs no result can come from -----------------------------------------------------

    /// `r` with negative components raised to zero, warning (of `what` of `i`) when there are
    /// any: no share of a negative amount means anything, and negative usage or demand would
    /// make an operation's fair share decrease with its fit factor.
    fn non_negative(&mut self, i: ElementIndex, what: &str, r: Resources) -> Resources {
        if !r.any_negative() {
            return r;
        }
        self.warn(i, format!("{what} {r} is negative; zero is used instead"));
        r.max(&Resources::ZERO)
    }

    /// The cluster total without negative components, every stored integral state finite, and
    /// the periods the volumes are computed with within [`MAX_PERIOD_SECONDS`].
    fn check_inputs(&mut self) {
        self.total = self.non_negative(ROOT, "total resources", self.total);
        self.check_integral_states();
        if let Some(previous) = self.previous {
            let period = self.now - previous;
            let used = if period.is_nan() {
                0.0
            } else {
                period.clamp(-MAX_PERIOD_SECONDS, MAX_PERIOD_SECONDS)
            };
            if used != period {
                self.warn(
                    ROOT,
                    format!(
                        "time since the previous update ({} - {previous}) is outside \
                         [-{MAX_PERIOD_SECONDS:e}, {MAX_PERIOD_SECONDS:e}] s; {used:e} s is used",
                        self.now
                    ),
                );
            }
            self.period = Some(used);
        }
        let saturation = self.opts.integral_pool_capacity_saturation_period_seconds;
        self.saturation_seconds = if saturation.is_nan() {
            0.0
        } else {
            saturation.clamp(0.0, MAX_PERIOD_SECONDS)
        };
        if self.saturation_seconds != saturation {
            self.warn(
                ROOT,
                format!(
                    "integral pool capacity saturation period {saturation:e} s is outside \
                     [0, {MAX_PERIOD_SECONDS:e}] s; {:e} s is used",
                    self.saturation_seconds
                ),
            );
        }
        let smooth = self.opts.integral_smooth_period_seconds;
        self.smooth_seconds = (smooth > 0.0).then_some(smooth.min(MAX_PERIOD_SECONDS));
        if self.smooth_seconds != Some(smooth) {
            self.warn(
                ROOT,
                format!(
                    "integral smooth period {smooth:e} s is outside (0, {MAX_PERIOD_SECONDS:e}] s; \
                     {}",
                    match self.smooth_seconds {
                        Some(s) => format!("{s:e} s is used"),
                        None => "accumulated volumes give no integral share".to_string(),
                    }
                ),
            );
        }
    }

    /// Resets a stored integral state that is not finite (a volume of 1e308 cpu·s is infinite in
    /// hundredths; nothing the update computes could come back from it), with a warning.
    fn check_integral_states(&mut self) {
        for i in 0..self.tree.len() {
            let state = self.tree.element(i).integral_state;
            let volume = state.accumulated_volume.values();
            if volume.iter().any(|v| !v.is_finite()) {
                self.tree.element_mut(i).integral_state.accumulated_volume = ResourceVolume::ZERO;
                self.warn(
                    i,
                    format!(
                        "accumulated integral volume {volume:?} is not finite; it is reset to zero"
                    ),
                );
            } else if (0..RESOURCE_COUNT)
                .any(|r| state.accumulated_volume.raw(r).abs() > MAX_VOLUME)
            {
                let v = &mut self.tree.element_mut(i).integral_state.accumulated_volume;
                for r in 0..RESOURCE_COUNT {
                    let x = v.raw(r);
                    v.set_raw(r, x.clamp(-MAX_VOLUME, MAX_VOLUME));
                }
                self.warn(
                    i,
                    format!("accumulated integral volume {volume:?} exceeds {MAX_VOLUME:e} (raw); it is lowered to it"),
                );
            }
            let ratio = state.last_share_ratio;
            if !(0.0..=1.0).contains(&ratio) {
                // A share ratio, at most 1 where the update wrote it.
                let used = if ratio > 1.0 { 1.0 } else { 0.0 };
                self.tree.element_mut(i).integral_state.last_share_ratio = used;
                self.warn(
                    i,
                    format!(
                        "last integral share ratio {ratio:e} is outside [0, 1]; {used} is used"
                    ),
                );
            }
        }
    }

    // ---- 1. validation ---------------------------------------------------------------------

    fn validate_pool_configs(&mut self) {
        let mut nested = Vec::new();
        let mut without_donor = Vec::new();
        // (element, has donor ancestor, has promised ancestor)
        let mut stack = vec![(ROOT, false, false)];
        while let Some((i, has_donor, has_promised)) = stack.pop() {
            let (priority, donor, promised) = match self.tree.element(i).pool() {
                Some(p) => (
                    p.priority_strong_guarantee_adjustment,
                    p.priority_strong_guarantee_adjustment_donorship,
                    p.enable_promised_guarantee_fair_share,
                ),
                None => (false, false, false),
            };
            if priority && !has_donor {
                self.priority_without_donor[i] = true;
                without_donor.push(i);
            }
            if promised && has_promised {
                nested.push(i);
            }
            let child_donor = donor || (has_donor && !priority);
            for &c in self.tree.element(i).children.iter().rev() {
                if !self.tree.element(c).is_operation() {
                    stack.push((c, child_donor, has_promised || promised));
                }
            }
        }
        if !nested.is_empty() {
            let pools = nested
                .iter()
                .map(|&i| self.tree.element(i).name.clone())
                .collect();
            self.errors
                .push(UpdateError::NestedPromisedGuaranteeFairSharePools { pools });
        }
        if !without_donor.is_empty() {
            let pools = without_donor
                .iter()
                .map(|&i| self.tree.element(i).name.clone())
                .collect();
            self.errors
                .push(UpdateError::PriorityStrongGuaranteeAdjustmentPoolsWithoutDonor { pools });
        }
    }

    // ---- 2. inferred strong guarantees -----------------------------------------------------

    fn infer_strong_guarantees(&mut self) {
        self.attrs.inferred_strong_guarantee_resources[ROOT] = self.total;
        let main = self.opts.main_resource;
        for p in self.tree.preorder() {
            if self.is_operation(p) {
                continue;
            }
            let children = self.children(p).to_vec();
            let mut explicit_sum = Resources::ZERO;
            for &c in &children {
                let configured = self
                    .tree
                    .element(c)
                    .pool()
                    .map(|pool| pool.strong_guarantee_resources)
                    .unwrap_or_default();
                let inferred = self.non_negative(c, "strong guarantee", configured.or_zero());
                self.attrs.inferred_strong_guarantee_resources[c] = inferred;
                explicit_sum = explicit_sum.add(&inferred);
            }
            let parent = self.attrs.inferred_strong_guarantee_resources[p];
            let residual = parent.sub(&explicit_sum).max(&Resources::ZERO);
            let parent_main = parent.get(main);
            let is_root = p == ROOT;
            for kind in ResourceKind::ALL {
                if kind == main {
                    continue;
                }
                let mut implicit: Vec<Option<f64>> = vec![None; children.len()];
                let mut total_implicit = 0.0;
                for (k, &c) in children.iter().enumerate() {
                    let configured = self
                        .tree
                        .element(c)
                        .pool()
                        .is_some_and(|pool| pool.strong_guarantee_resources.is_set(kind));
                    if configured {
                        continue;
                    }
                    let child_main = self.attrs.inferred_strong_guarantee_resources[c].get(main);
                    let ratio = if parent_main > 0.0 {
                        child_main / parent_main
                    } else {
                        0.0
                    };
                    let v = ratio * parent.get(kind);
                    implicit[k] = Some(v);
                    total_implicit += v;
                }
                let residual_r = residual.get(kind);
                if !is_root && total_implicit > residual_r {
                    let factor = residual_r / total_implicit;
                    for v in implicit.iter_mut().flatten() {
                        *v *= factor;
                    }
                }
                for (k, &c) in children.iter().enumerate() {
                    if let Some(v) = implicit[k] {
                        self.attrs.inferred_strong_guarantee_resources[c].set(kind, v);
                    }
                }
            }
        }
    }

    // ---- 3. integral pool lists --------------------------------------------------------------

    fn collect_integral_pools(&mut self) {
        for i in self.tree.preorder() {
            match self.integral_type(i) {
                IntegralGuaranteeType::Burst => self.burst_pools.push(i),
                IntegralGuaranteeType::Relaxed => self.relaxed_pools.push(i),
                IntegralGuaranteeType::None => {}
            }
        }
    }

    // ---- 4. cumulative attributes ------------------------------------------------------------

    fn update_cumulative_attributes(&mut self, i: ElementIndex) {
        let total = self.total;
        if let Some(op) = self.tree.element(i).operation() {
            let (usage, demand) = (op.usage, op.demand);
            self.usage[i] = self.non_negative(i, "usage", usage);
            self.demand[i] = self.non_negative(i, "demand", demand);
        } else {
            let (burst, flow) = match self.tree.element(i).pool() {
                Some(p) if p.integral_guarantees.guarantee_type != IntegralGuaranteeType::None => (
                    max_resource_ratio(&p.integral_guarantees.burst_guarantee_resources, &total),
                    max_resource_ratio(&p.integral_guarantees.resource_flow, &total),
                ),
                _ => (0.0, 0.0),
            };
            self.attrs.burst_ratio[i] = burst;
            self.attrs.total_burst_ratio[i] = burst;
            self.attrs.resource_flow_ratio[i] = flow;
            self.attrs.total_resource_flow_ratio[i] = flow;
            let mut usage = Resources::ZERO;
            let mut demand = Resources::ZERO;
            for k in 0..self.children(i).len() {
                let c = self.children(i)[k];
                self.update_cumulative_attributes(c);
                self.attrs.total_resource_flow_ratio[i] += self.attrs.total_resource_flow_ratio[c];
                self.attrs.total_burst_ratio[i] += self.attrs.total_burst_ratio[c];
                usage = usage.add(&self.usage[c]);
                demand = demand.add(&self.demand[c]);
            }
            self.usage[i] = usage;
            self.demand[i] = demand;
        }

        // Own attributes.
        let limits = self
            .tree
            .element(i)
            .resource_limits
            .or_infinite()
            .min(&total);
        let limits = self.non_negative(i, "resource limits", limits);
        let element = self.tree.element(i);
        let mut limits_share = Rv::from_resources(&limits, &total);
        if let Some(op) = element.operation() {
            limits_share = limits_share.min(&op.best_allocation_share);
        }
        let a = &mut self.attrs;
        a.limits_share[i] = limits_share;
        a.strong_guarantee_share[i] =
            Rv::from_resources(&a.inferred_strong_guarantee_resources[i], &total);
        a.dominant_resource[i] = if self.usage[i].is_zero() {
            dominant_resource(&self.demand[i], &total)
        } else {
            dominant_resource(&self.usage[i], &total)
        };
        let usage_share = Rv::from_resources(&self.usage[i], &total);
        let demand_share = Rv::from_resources(&self.demand[i], &total);
        a.usage_share[i] = usage_share;
        a.demand_share[i] = demand_share;
        if !demand_share.dominates(&usage_share) {
            let msg = format!("usage share {usage_share:?} exceeds demand share {demand_share:?}");
            self.warn(i, msg);
        }

        if !self.is_operation(i) && self.mode(i) == PoolMode::Fifo {
            self.prepare_fifo_pool(i);
            self.fifo_pools.push(i);
        }
        if i == ROOT {
            let mut sg = Rv::ZERO;
            for &c in self.children(ROOT) {
                sg = sg + self.attrs.strong_guarantee_share[c];
            }
            self.attrs.strong_guarantee_share[ROOT] = sg;
        }
    }

    fn prepare_fifo_pool(&mut self, i: ElementIndex) {
        let mut sorted = self.children(i).to_vec();
        for &c in &sorted {
            if !self.is_operation(c) {
                self.warn(i, "a FIFO pool may only contain operations".to_string());
            }
        }
        let params = self
            .tree
            .element(i)
            .pool()
            .map(|p| p.fifo_sort_parameters.clone())
            .unwrap_or_default();
        let tree = &*self.tree;
        // Stable: ties keep attachment order.
        sorted.sort_by(|&a, &b| {
            let (ea, eb) = (tree.element(a), tree.element(b));
            let (oa, ob) = (ea.operation(), eb.operation());
            for p in &params {
                let ord = match (p, oa, ob) {
                    (FifoSortParameter::Weight, _, _) => eb.weight.total_cmp(&ea.weight),
                    (FifoSortParameter::StartTime, Some(x), Some(y)) => {
                        x.start_time.total_cmp(&y.start_time)
                    }
                    (FifoSortParameter::PendingJobCount, Some(x), Some(y)) => {
                        x.pending_job_count.cmp(&y.pending_job_count)
                    }
                    _ => std::cmp::Ordering::Equal,
                };
                if ord != std::cmp::Ordering::Equal {
                    return ord;
                }
            }
            std::cmp::Ordering::Equal
        });
        for (k, &c) in sorted.iter().enumerate() {
            self.attrs.fifo_index[c] = Some(k);
            self.attrs.effective_fifo_index[c] = None;
        }
        self.order[i] = sorted;
    }

    /// Weights: configured, or inferred from the guarantee share relative to the parent's
    /// (`infer_weight_from_guarantees_share_multiplier`).
    fn infer_weights(&mut self) {
        for i in 0..self.tree.len() {
            self.attrs.weight[i] = self.tree.element(i).weight;
        }
        let Some(multiplier) = self.opts.infer_weight_from_guarantees_share_multiplier else {
            return;
        };
        let a = &self.attrs;
        let quantity = |i: ElementIndex| {
            a.strong_guarantee_share[i].max_component() + a.total_resource_flow_ratio[i]
        };
        let mut weights = Vec::new();
        for i in 0..self.tree.len() {
            let infer = self.tree.element(i).pool().is_some_and(|p| p.infer_weight);
            let Some(parent) = self.tree.element(i).parent else {
                continue;
            };
            if !infer {
                continue;
            }
            let own = quantity(i);
            let of_parent = quantity(parent);
            weights.push((
                i,
                if own < EPSILON || of_parent < EPSILON {
                    1.0
                } else {
                    multiplier * own / of_parent
                },
            ));
        }
        for (i, w) in weights {
            self.attrs.weight[i] = w;
        }
    }

    /// Brings every weight into `MIN_WEIGHT ..= MAX_WEIGHT` (NaN and non-positive weights to
    /// `MIN_WEIGHT`), warning for each one changed: a weight of 1e-300 beside 1e308 has no
    /// relative weight a double can hold, and would make the children's functions NaN.
    fn clamp_weights(&mut self) {
        for i in 0..self.tree.len() {
            let w = self.attrs.weight[i];
            if (MIN_WEIGHT..=MAX_WEIGHT).contains(&w) {
                continue;
            }
            let used = if w > MAX_WEIGHT {
                MAX_WEIGHT
            } else {
                MIN_WEIGHT
            };
            self.attrs.weight[i] = used;
            self.warn(
                i,
                format!(
                    "weight {w:e} is outside [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}]; {used:e} is used"
                ),
            );
        }
    }

    // ---- 5. integral volumes -----------------------------------------------------------------

    fn consume_and_refill_integral_pools(&mut self) {
        let pools: Vec<ElementIndex> = self
            .burst_pools
            .iter()
            .chain(self.relaxed_pools.iter())
            .copied()
            .collect();
        for p in pools {
            self.update_accumulated_volume(p);
        }
        self.update_overflow_and_acceptable_volumes(ROOT);
        self.distribute_free_volume(ROOT);
    }

    fn update_accumulated_volume(&mut self, p: ElementIndex) {
        if self.total.is_zero() {
            return;
        }
        let Some(period) = self.period else {
            return;
        };
        let flow_ratio = self.attrs.resource_flow_ratio[p];
        let can_accept = self
            .tree
            .element(p)
            .pool()
            .is_some_and(|pool| pool.integral_guarantees.can_accept_free_volume);
        let saturation = self.saturation_seconds;
        let state = &mut self.tree.element_mut(p).integral_state;
        let old = state.accumulated_volume;
        let capacity = ResourceVolume::from_resources(&self.total.scale(flow_ratio), saturation);
        let period_volume = ResourceVolume::from_resources(&self.total, period);
        let mut acc = old.add(&period_volume.scale(flow_ratio));
        acc = acc.sub(&period_volume.scale(state.last_share_ratio));
        acc = acc.max(&ResourceVolume::ZERO);
        let upper = old.max(&capacity);
        self.attrs.volume_overflow[p] = acc.sub(&upper).max(&ResourceVolume::ZERO);
        if can_accept {
            self.attrs.acceptable_volume[p] = capacity.sub(&acc).max(&ResourceVolume::ZERO);
        }
        state.accumulated_volume = acc.min(&upper);
    }

    fn update_overflow_and_acceptable_volumes(&mut self, i: ElementIndex) {
        if self.integral_type(i) != IntegralGuaranteeType::None {
            return;
        }
        let mut children_acceptable = ResourceVolume::ZERO;
        let mut children_overflow = self.attrs.children_volume_overflow[i];
        for k in 0..self.children(i).len() {
            let c = self.children(i)[k];
            if self.tree.element(c).pool().is_some() {
                self.update_overflow_and_acceptable_volumes(c);
                children_overflow = children_overflow.add(&self.attrs.volume_overflow[c]);
                children_acceptable = children_acceptable.add(&self.attrs.acceptable_volume[c]);
            }
        }
        self.attrs.children_volume_overflow[i] = children_overflow;
        let can_accept = self
            .tree
            .element(i)
            .pool()
            .is_some_and(|p| p.integral_guarantees.can_accept_free_volume);
        let mut overflow = ResourceVolume::ZERO;
        let mut acceptable = ResourceVolume::ZERO;
        for r in 0..RESOURCE_COUNT {
            let diff = children_overflow.raw(r) - children_acceptable.raw(r);
            if diff > 0.0 {
                overflow.set_raw(r, diff);
            } else if can_accept {
                acceptable.set_raw(r, -diff);
            }
        }
        self.attrs.volume_overflow[i] = overflow;
        self.attrs.acceptable_volume[i] = acceptable;
    }

    fn distribute_free_volume(&mut self, i: ElementIndex) {
        let mut free = self.attrs.accepted_free_volume[i];
        if self.integral_type(i) != IntegralGuaranteeType::None {
            if !free.is_zero() {
                let state = &mut self.tree.element_mut(i).integral_state;
                state.accumulated_volume = state.accumulated_volume.add(&free);
            }
            return;
        }
        let distribute = self.tree.element(i).pool().is_some_and(|p| {
            p.integral_guarantees
                .should_distribute_free_volume_among_children
        });
        let overflow = self.attrs.children_volume_overflow[i];
        if distribute && !(free.is_zero() && overflow.is_zero()) {
            free = free.add(&overflow);
            let children = self.children(i).to_vec();
            for r in 0..RESOURCE_COUNT {
                if free.raw(r) == 0.0 {
                    continue;
                }
                // (child, weight, acceptable/weight)
                let mut hungry: Vec<(ElementIndex, f64, f64)> = Vec::new();
                let mut weight_sum = 0.0;
                for &c in &children {
                    let acceptable_natural = self.attrs.acceptable_volume[c].values()[r];
                    let weight = self.attrs.total_resource_flow_ratio[c];
                    if acceptable_natural > EPSILON && weight > EPSILON {
                        hungry.push((c, weight, acceptable_natural / weight));
                        weight_sum += weight;
                    }
                }
                hungry.sort_by(|a, b| a.2.total_cmp(&b.2));
                let mut k = 0;
                while k < hungry.len() {
                    let (c, w, _) = hungry[k];
                    let suggested = free.raw(r) * (w / weight_sum);
                    let acceptable = self.attrs.acceptable_volume[c].raw(r);
                    let suggested_cast = if r == ResourceKind::Cpu.index() {
                        suggested.round()
                    } else {
                        suggested
                    };
                    if suggested_cast < acceptable {
                        break;
                    }
                    self.attrs.accepted_free_volume[c].set_raw(r, acceptable);
                    free.set_raw(r, free.raw(r) - acceptable);
                    weight_sum -= w;
                    k += 1;
                }
                while k < hungry.len() {
                    let (c, w, _) = hungry[k];
                    let suggested = free.raw(r) * (w / weight_sum);
                    self.attrs.accepted_free_volume[c].set_raw(r, suggested);
                    k += 1;
                }
            }
        }
        for k in 0..self.children(i).len() {
            let c = self.children(i)[k];
            if !self.is_operation(c) {
                self.distribute_free_volume(c);
            }
        }
    }

    // ---- 6. guarantee validation and adjustment ------------------------------------------

    fn validate_and_adjust_guarantees(&mut self) {
        let total = self.total;
        let flow = total.scale(self.attrs.total_resource_flow_ratio[ROOT]);
        let burst = total.scale(self.attrs.total_burst_ratio[ROOT]);
        let mut strong = Resources::ZERO;
        for &c in self.children(ROOT) {
            strong = strong.add(&self.attrs.inferred_strong_guarantee_resources[c]);
        }
        let strong_plus_flow = strong.add(&flow);
        if !total.dominates(&strong_plus_flow) {
            self.errors
                .push(UpdateError::PoolTreeGuaranteesOvercommitFlows {
                    total,
                    strong_plus_flow,
                });
        }
        let strong_plus_burst = strong.add(&burst);
        if !total.dominates(&strong_plus_burst) {
            self.errors
                .push(UpdateError::PoolTreeGuaranteesOvercommitBurst {
                    total,
                    strong_plus_burst,
                });
            let root_sg = self.attrs.strong_guarantee_share[ROOT];
            let ratios: Vec<f64> = self
                .burst_pools
                .iter()
                .map(|&p| self.attrs.burst_ratio[p])
                .collect();
            let fit = inverse_lower_bound(0.0, 1.0, |f| {
                let mut sum = root_sg * f;
                for &ratio in &ratios {
                    sum = sum + Rv::splat(ratio) * f;
                }
                Rv::ONES.dominates(&sum)
            });
            self.attrs.strong_guarantee_share[ROOT] = root_sg * fit;
            for k in 0..self.burst_pools.len() {
                let p = self.burst_pools[k];
                self.attrs.burst_ratio[p] *= fit;
            }
        }
        self.compute_tiers(ROOT);
        self.adjust_strong_guarantees(ROOT);
        self.attrs.estimated_guarantee_share[ROOT] = self.attrs.strong_guarantee_share[ROOT];
        self.compute_estimated_guarantee_share(ROOT);
    }

    fn compute_tiers(&mut self, i: ElementIndex) {
        if self.is_operation(i) {
            return;
        }
        let mut child_priority = Rv::ZERO;
        for k in 0..self.children(i).len() {
            let c = self.children(i)[k];
            self.compute_tiers(c);
            child_priority =
                child_priority + self.attrs.strong_guarantee_share_by_tier[c][TIER_PRIORITY_POOLS];
        }
        let (priority, donor) = self.tree.element(i).pool().map_or((false, false), |p| {
            (
                p.priority_strong_guarantee_adjustment,
                p.priority_strong_guarantee_adjustment_donorship,
            )
        });
        let priority = priority && !self.priority_without_donor[i];
        let sg = self.attrs.strong_guarantee_share[i];
        self.attrs.strong_guarantee_share_by_tier[i] = if priority {
            [sg, Rv::ZERO]
        } else if donor {
            [Rv::ZERO, sg]
        } else {
            [child_priority, sg - child_priority]
        };
    }

    fn adjust_strong_guarantees(&mut self, p: ElementIndex) {
        if self.is_operation(p) {
            return;
        }
        let sg = self.attrs.strong_guarantee_share[p].min(&self.attrs.limits_share[p]);
        self.attrs.strong_guarantee_share[p] = sg;
        let children = self.children(p).to_vec();
        let tiers = [TIER_PRIORITY_POOLS, TIER_REGULAR_POOLS];
        let mut fixed = Rv::ZERO;
        let mut tier_index = 0;
        while tier_index < tiers.len() {
            let tier = tiers[tier_index];
            let mut tier_total = Rv::ZERO;
            for &c in &children {
                tier_total = tier_total + self.attrs.strong_guarantee_share_by_tier[c][tier];
            }
            let mut available = sg - fixed;
            if !(available + EPS_VEC).dominates(&Rv::ZERO) {
                self.warn(
                    p,
                    format!("negative available strong guarantee {available:?}"),
                );
            }
            available = available.max(&Rv::ZERO);
            if !available.dominates(&tier_total) {
                let values: Vec<Rv> = children
                    .iter()
                    .map(|&c| self.attrs.strong_guarantee_share_by_tier[c][tier])
                    .collect();
                let fit = inverse_lower_bound(0.0, 1.0, |f| {
                    let mut sum = Rv::ZERO;
                    for v in &values {
                        sum = sum + *v * f;
                    }
                    available.dominates(&sum)
                });
                for (k, &c) in children.iter().enumerate() {
                    self.attrs.strong_guarantee_share_by_tier[c][tier] = values[k] * fit;
                }
                break;
            }
            fixed = fixed + tier_total;
            tier_index += 1;
        }
        tier_index += 1;
        while tier_index < tiers.len() {
            for &c in &children {
                self.attrs.strong_guarantee_share_by_tier[c][tiers[tier_index]] = Rv::ZERO;
            }
            tier_index += 1;
        }
        for &c in &children {
            let mut sum = Rv::ZERO;
            for tier in tiers {
                sum = sum + self.attrs.strong_guarantee_share_by_tier[c][tier];
            }
            self.attrs.strong_guarantee_share[c] = sum;
        }
        for &c in &children {
            self.adjust_strong_guarantees(c);
        }
    }

    fn compute_estimated_guarantee_share(&mut self, p: ElementIndex) {
        if self.is_operation(p) {
            return;
        }
        let children = self.children(p).to_vec();
        let mut weight_sum = 0.0;
        let mut undistributed = self.attrs.estimated_guarantee_share[p];
        for &c in &children {
            weight_sum += self.weight(c);
            let egs = self.attrs.strong_guarantee_share[c].min(&undistributed);
            self.attrs.estimated_guarantee_share[c] = egs;
            undistributed = undistributed - egs;
        }
        for r in 0..RESOURCE_COUNT {
            for &c in &children {
                let w = self.weight(c);
                self.attrs.estimated_guarantee_share[c][r] += undistributed[r] * w / weight_sum;
            }
        }
        for &c in &children {
            self.compute_estimated_guarantee_share(c);
        }
    }

    // ---- 7. FIFO reordering ------------------------------------------------------------------

    fn step_function_allowed(&self, pool: ElementIndex) -> bool {
        self.tree
            .element(pool)
            .pool()
            .is_some_and(|p| p.allow_gang_step_function)
    }

    fn is_gang(&self, i: ElementIndex) -> bool {
        self.tree.element(i).operation().is_some_and(|o| o.gang)
    }

    fn reorder_fifo_children(&mut self, p: ElementIndex) {
        let enabled = self
            .tree
            .element(p)
            .pool()
            .is_some_and(|pool| pool.enable_fifo_children_reordering_for_guarantee_utilization);
        if !self.opts.enable_step_function_for_gang_operations
            || !self.step_function_allowed(p)
            || !self
                .opts
                .enable_fifo_children_reordering_for_guarantee_utilization
            || !enabled
        {
            return;
        }
        let guarantee = self.attrs.strong_guarantee_share[p];
        if EPS_VEC.dominates(&guarantee) {
            return;
        }
        let mut emitted = Vec::with_capacity(self.order[p].len());
        let mut deferred = Vec::new();
        let mut accepted = Rv::ZERO;
        let mut stopped = false;
        for k in 0..self.order[p].len() {
            let c = self.order[p][k];
            let gang = self.is_gang(c);
            let (limits, demand) = (self.attrs.limits_share[c], self.attrs.demand_share[c]);
            let charge = if gang && !limits.dominates(&demand) {
                Rv::ZERO
            } else {
                demand.min(&limits)
            };
            let running = !self.usage[c].is_zero();
            let fits = (guarantee + EPS_VEC).dominates(&(accepted + charge));
            if stopped || (gang && !running && !fits) {
                deferred.push(c);
                continue;
            }
            if !fits && !gang {
                stopped = true;
            }
            emitted.push(c);
            accepted = accepted + charge;
        }
        emitted.extend(deferred);
        if emitted != self.order[p] {
            for (k, &c) in emitted.iter().enumerate() {
                self.attrs.effective_fifo_index[c] = Some(k);
            }
            self.order[p] = emitted;
        }
    }

    // ---- 8–9. integral shares ----------------------------------------------------------------

    fn adjust_proposed_integral_share(
        &mut self,
        i: ElementIndex,
        limits: Rv,
        sg: Rv,
        pis: Rv,
    ) -> Rv {
        if limits.dominates(&(sg + pis)) {
            return pis;
        }
        if !(limits + EPS_VEC).dominates(&(sg + pis)) || !limits.dominates(&sg) {
            self.warn(
                i,
                format!("proposed integral share {pis:?} + strong guarantee {sg:?} exceeds limits {limits:?}"),
            );
        }
        let mut out = limits - sg;
        for r in 0..RESOURCE_COUNT {
            let mut iterations = 0;
            while limits[r] < sg[r] + out[r] && iterations < 32 {
                out[r] = next_toward_zero(out[r]);
                iterations += 1;
            }
        }
        out
    }

    fn hierarchical_available_limits_share(&mut self, i: ElementIndex) -> Rv {
        let mut result = Rv::ONES;
        let mut cur = i;
        while cur != ROOT {
            result = result.min(&(self.attrs.limits_share[cur] - self.guarantee_share(cur)));
            if !result.dominates(&Rv::ZERO) {
                self.warn(
                    i,
                    format!("negative hierarchical available limits share {result:?}"),
                );
            }
            cur = self.tree.element(cur).parent.unwrap_or(ROOT);
        }
        result
    }

    fn increase_hierarchical_integral_share(&mut self, i: ElementIndex, delta: Rv) {
        let mut cur = Some(i);
        while let Some(c) = cur {
            let mut increased = self.attrs.proposed_integral_share[c] + delta;
            if c != ROOT {
                let (limits, sg) = (
                    self.attrs.limits_share[c],
                    self.attrs.strong_guarantee_share[c],
                );
                increased = self.adjust_proposed_integral_share(c, limits, sg, increased);
            }
            self.attrs.proposed_integral_share[c] = increased;
            cur = self.tree.element(c).parent;
        }
    }

    /// Drops the functions of `p` and of its ancestors, built on `p`'s: the next
    /// [`Self::prepare_functions`] of any of them rebuilds them all (an ancestor's functions
    /// kept would skip `p`'s, leaving `p` without any).
    fn drop_functions(&mut self, p: ElementIndex) {
        let mut cur = Some(p);
        while let Some(c) = cur {
            self.functions[c] = None;
            cur = self.tree.element(c).parent;
        }
    }

    fn integral_share_ratio_by_volume(&self, p: ElementIndex) -> f64 {
        let Some(smooth) = self.smooth_seconds else {
            return 0.0;
        };
        self.tree
            .element(p)
            .integral_state
            .accumulated_volume
            .min_resource_ratio(&self.total)
            / smooth
    }

    fn update_burst_pool_integral_shares(&mut self) {
        for k in 0..self.burst_pools.len() {
            let p = self.burst_pools[k];
            let ratio = self.attrs.burst_ratio[p].min(self.integral_share_ratio_by_volume(p));
            let hal = self.hierarchical_available_limits_share(p);
            let mut proposed = Rv::splat(ratio).min(&hal);
            if !proposed.dominates(&Rv::ZERO) {
                self.warn(p, format!("negative proposed integral share {proposed:?}"));
            }
            let (limits, sg) = (
                self.attrs.limits_share[p],
                self.attrs.strong_guarantee_share[p],
            );
            proposed = self.adjust_proposed_integral_share(p, limits, sg, proposed);
            self.attrs.proposed_integral_share[p] = proposed;
            self.prepare_functions(p);
            self.attrs.proposed_integral_share[p] = Rv::ZERO;
            let within = self.s(p).value_at(0.0);
            let integral = (within - sg).max(&Rv::ZERO);
            self.increase_hierarchical_integral_share(p, integral);
            self.drop_functions(p);
            self.tree.element_mut(p).integral_state.last_share_ratio = integral.max_component();
        }
    }

    fn update_relaxed_pool_integral_shares(&mut self) {
        if self.relaxed_pools.is_empty() {
            return;
        }
        let mut available = Rv::ONES;
        for &c in self.children(ROOT) {
            let used = self.guarantee_share(c).min(&self.attrs.demand_share[c]);
            available = available - used;
        }
        available = available.max(&Rv::ZERO);

        let mut pools = Vec::new();
        let mut weights = Vec::new();
        let mut original_limits = Vec::new();
        for k in 0..self.relaxed_pools.len() {
            let p = self.relaxed_pools[k];
            let ratio = self.integral_share_ratio_by_volume(p);
            if ratio == 0.0 {
                continue;
            }
            pools.push(p);
            weights.push(ratio);
            original_limits.push(self.attrs.limits_share[p]);
            let multiplier = self
                .tree
                .element(p)
                .pool()
                .and_then(|pool| pool.integral_guarantees.relaxed_share_multiplier_limit)
                .unwrap_or(self.opts.relaxed_share_multiplier_limit);
            let share_limit = Rv::splat(self.attrs.resource_flow_ratio[p] * multiplier);
            let relaxed_limit =
                Rv::splat(ratio).min(&share_limit) + self.attrs.strong_guarantee_share[p];
            self.attrs.limits_share[p] = self.attrs.limits_share[p].min(&relaxed_limit);
            self.prepare_functions(p);
        }
        if pools.is_empty() {
            return;
        }
        let min_weight = weights.iter().copied().fold(f64::INFINITY, f64::min);
        for w in &mut weights {
            *w /= min_weight;
        }
        let fit = {
            let this = &*self;
            inverse_lower_bound(0.0, 1.0, |f| {
                let mut sum = Rv::ZERO;
                for (k, &p) in pools.iter().enumerate() {
                    let suggestion = (f * weights[k]).min(1.0);
                    let share = this.s(p).value_at(suggestion);
                    sum = sum + (share - this.attrs.strong_guarantee_share[p]).max(&Rv::ZERO);
                }
                available.dominates(&sum)
            })
        };
        for (k, &p) in pools.iter().enumerate() {
            let suggestion = (fit * weights[k]).min(1.0);
            let within = self.s(p).value_at(suggestion);
            let integral = (within - self.attrs.strong_guarantee_share[p]).max(&Rv::ZERO);
            self.attrs.limits_share[p] = original_limits[k];
            let hal = self.hierarchical_available_limits_share(p);
            let limited = integral.min(&hal);
            if !limited.dominates(&Rv::ZERO) {
                self.warn(p, format!("negative limited integral share {limited:?}"));
            }
            self.increase_hierarchical_integral_share(p, limited);
            self.drop_functions(p);
            self.tree.element_mut(p).integral_state.last_share_ratio = limited.max_component();
        }
    }

    // ---- 10. bottom-up functions -------------------------------------------------------------

    fn functions_of(&self, i: ElementIndex) -> &Functions {
        self.functions[i]
            .as_ref()
            .expect("fair-share functions are prepared before use")
    }

    /// S, the fair share by suggestion.
    fn s(&self, i: ElementIndex) -> PlfRef<'_, Rv> {
        PlfRef::new(&self.s_arena[self.functions_of(i).s.clone()])
    }

    /// M, the maximal fit factor by suggestion (pools in classic mode), at `x`.
    fn m_value_at(&self, i: ElementIndex, x: f64) -> f64 {
        match self.functions_of(i).m.clone() {
            Some(KeptM::Points(range)) => crit::value_at(&self.m_points[range], x),
            Some(KeptM::Segments(range)) => PlfRef::new(&self.m_arena[range]).value_at(x),
            None => panic!("M is kept for pools in classic mode"),
        }
    }

    /// The root's M and S at suggestion 1 without building its functions (classic mode, where
    /// nothing else reads them; the root's F has about as many critical points as the tree has
    /// operations, and summing it is the largest single piece of the bottom-up pass):
    /// `crate::envelope::max_fit_factor_and_share_at_one`. The root keeps S as the constant
    /// S(1) on [0, 1] (the output's limited demand share), and its function sizes are 0, 0, 1.
    fn root_at_one(&mut self) {
        let t0 = self.now_ns();
        let mut owned = std::mem::take(&mut self.scratch.scaled);
        let slices = self.scaled_children(ROOT, &mut owned);
        let limits = self.attrs.limits_share[ROOT];
        let guarantee = self.guarantee_share(ROOT);
        let (fit, share, lo, _) =
            crate::envelope::max_fit_factor_and_share_at_one(&slices, &limits, &guarantee);
        drop(slices);
        self.scratch.scaled = owned;
        self.warn_above_limits(ROOT, &lo);
        let start = self.s_arena.len();
        self.s_arena.push(Segment::new(0.0, share, 1.0, share));
        self.functions[ROOT] = Some(Functions {
            f_size: 0,
            f_right_bound: 1.0,
            m_size: 0,
            m: None,
            s: start..self.s_arena.len(),
            improved: None,
        });
        self.root_fit_at_one = Some(fit);
        self.timings.max_fit_factor_ns += self.now_ns() - t0;
    }

    /// Builds F, M and S of `i` (and of its subtree first), unless they exist.
    fn prepare_functions(&mut self, i: ElementIndex) {
        let mut scratch = std::mem::take(&mut self.scratch);
        self.prepare_functions_with(i, &mut scratch);
        self.scratch = scratch;
    }

    /// [`Self::prepare_functions`] with the scratch buffers lent for the whole subtree.
    fn prepare_functions_with(&mut self, i: ElementIndex, scratch: &mut Scratch) {
        if self.functions[i].is_some() {
            return;
        }
        if !self.is_operation(i) {
            for k in 0..self.children(i).len() {
                let c = self.children(i)[k];
                self.prepare_functions_with(c, scratch);
            }
        }
        let functions = self.build_functions(i, scratch);
        self.functions[i] = Some(functions);
    }

    /// F into `scratch.f`, then M and S appended to the arenas.
    fn build_functions(&mut self, i: ElementIndex, scratch: &mut Scratch) -> Functions {
        let t0 = self.now_ns();
        let improved = if self.is_operation(i) {
            self.operation_fair_share_by_fit_factor(i, &mut scratch.f);
            let t1 = self.now_ns();
            self.timings.operation_functions_ns += t1 - t0;
            None
        } else if self.mode(i) == PoolMode::Fifo {
            self.fifo_fair_share_by_fit_factor(i, scratch);
            let t1 = self.now_ns();
            self.timings.fifo_pool_functions_ns += t1 - t0;
            None
        } else {
            let r = self.normal_fair_share_by_fit_factor(i, scratch);
            let t1 = self.now_ns();
            self.timings.normal_pool_functions_ns += t1 - t0;
            r
        };
        let monotone = PlfRef::new(&scratch.f).is_nondecreasing();
        if !monotone {
            self.warn(i, "fair share by fit factor decreases".to_string());
        }

        let t1 = self.now_ns();
        if self.tuning.envelope()
            && monotone
            && scratch.f.iter().all(|s| s.x0 <= s.x1)
            && let Some(functions) = self.build_by_envelope(i, scratch, improved.as_ref())
        {
            let t2 = self.now_ns();
            self.timings.max_fit_factor_ns += t2 - t1;
            return Functions {
                improved,
                ..functions
            };
        }
        let on_critical_points = self.max_fit_factor_by_suggestion(i, monotone, scratch);
        let m_size = if on_critical_points {
            crit::segment_count(&scratch.crit_acc)
        } else {
            scratch.min_acc.len()
        };
        let t2 = self.now_ns();
        let (t3, t4);
        // S goes straight into its arena.
        let s_start = self.s_arena.len();
        if on_critical_points && crit::is_nondecreasing(&scratch.crit_acc) {
            // Composition and compression in one pass (the time counts as composition).
            crit::compose_compress_append(
                &scratch.f,
                &scratch.crit_acc,
                COMPRESS_FUNCTION_EPSILON,
                &mut scratch.compose_outer,
                &mut scratch.compose_points,
                &mut self.s_arena,
            );
            t3 = self.now_ns();
            t4 = t3;
        } else {
            if on_critical_points {
                crit::to_segments(&scratch.crit_acc, &mut scratch.min_acc);
            }
            compose_into(
                &scratch.f,
                &scratch.min_acc,
                &mut scratch.compose,
                &mut scratch.composed,
            );
            t3 = self.now_ns();
            compress_into(&scratch.composed, COMPRESS_FUNCTION_EPSILON, &mut scratch.s);
            self.s_arena.extend_from_slice(&scratch.s);
            t4 = self.now_ns();
        }
        self.timings.max_fit_factor_ns += t2 - t1;
        self.timings.compose_ns += t3 - t2;
        self.timings.compress_ns += t4 - t3;
        let s = PlfRef::new(&self.s_arena[s_start..]);
        if s.left_bound() != 0.0 || s.right_bound() != 1.0 || !s.is_nondecreasing() {
            self.warn(
                i,
                "fair share by suggestion is not a nondecreasing function on [0, 1]".to_string(),
            );
        }
        let keep_m = !self.is_operation(i)
            && !self
                .opts
                .enable_improved_fair_share_by_fit_factor_computation;
        let m = keep_m.then(|| {
            if on_critical_points {
                let start = self.m_points.len();
                self.m_points.extend_from_slice(&scratch.crit_acc);
                KeptM::Points(start..self.m_points.len())
            } else {
                let start = self.m_arena.len();
                self.m_arena.extend_from_slice(&scratch.min_acc);
                KeptM::Segments(start..self.m_arena.len())
            }
        });
        Functions {
            f_size: scratch.f.len(),
            f_right_bound: PlfRef::new(&scratch.f).right_bound(),
            m_size,
            m,
            s: s_start..self.s_arena.len(),
            improved,
        }
    }

    /// Warns of every resource on which F at zero (`lo`) exceeds `i`'s limits (the reference
    /// checks this where it builds M).
    fn warn_above_limits(&mut self, i: ElementIndex, lo: &Rv) {
        let limits = self.attrs.limits_share[i];
        for r in 0..RESOURCE_COUNT {
            if lo[r] >= limits[r] + EPSILON || lo[r].is_nan() {
                self.warn(
                    i,
                    format!(
                        "fair share at zero fit factor {} exceeds limit {} on resource {r}",
                        lo[r], limits[r]
                    ),
                );
            }
        }
    }

    /// The per-resource guarantee and limit of M, clamped to the range of F's components
    /// (warning when F at zero exceeds the limit).
    fn m_bounds(&mut self, i: ElementIndex, f: &[Segment<Rv>]) -> [(f64, f64); RESOURCE_COUNT] {
        let (lo, hi) = (f[0].y0, f[f.len() - 1].y1);
        self.warn_above_limits(i, &lo);
        let (g, limit) = crate::envelope::clamped_bounds(
            &self.attrs.limits_share[i],
            &self.guarantee_share(i),
            &lo,
            &hi,
        );
        std::array::from_fn(|r| (g[r], limit[r]))
    }

    /// M and S by one walk over F (`crate::envelope`), S appended to the arena; None (nothing
    /// appended, no warning given) when the walk does not apply.
    fn build_by_envelope(
        &mut self,
        i: ElementIndex,
        scratch: &mut Scratch,
        improved: Option<&ImprovedPool>,
    ) -> Option<Functions> {
        let bounds = self.m_bounds_quiet(i, &scratch.f)?;
        let g = bounds.map(|(g, _)| g);
        let limit = bounds.map(|(_, l)| l);
        let s_start = self.s_arena.len();
        let mut arena = std::mem::take(&mut self.s_arena);
        let ok = crate::envelope::max_fit_factor_and_share(
            &scratch.f,
            &g,
            &limit,
            &mut scratch.crit_acc,
            &mut arena,
        );
        if !ok {
            arena.truncate(s_start);
            self.s_arena = arena;
            return None;
        }
        self.s_arena = arena;
        let s = PlfRef::new(&self.s_arena[s_start..]);
        if s.left_bound() != 0.0 || s.right_bound() != 1.0 || !s.is_nondecreasing() {
            self.warn(
                i,
                "fair share by suggestion is not a nondecreasing function on [0, 1]".to_string(),
            );
        }
        let keep_m = !self.is_operation(i)
            && improved.is_none()
            && !self
                .opts
                .enable_improved_fair_share_by_fit_factor_computation;
        let m = keep_m.then(|| {
            let start = self.m_points.len();
            self.m_points.extend_from_slice(&scratch.crit_acc);
            KeptM::Points(start..self.m_points.len())
        });
        Some(Functions {
            f_size: scratch.f.len(),
            f_right_bound: PlfRef::new(&scratch.f).right_bound(),
            m_size: crate::crit::segment_count(&scratch.crit_acc),
            m,
            s: s_start..self.s_arena.len(),
            improved: None,
        })
    }

    /// [`Self::m_bounds`] when F at zero is within the limits and finite (else None, and the
    /// reference path gives the warning).
    fn m_bounds_quiet(
        &mut self,
        i: ElementIndex,
        f: &[Segment<Rv>],
    ) -> Option<[(f64, f64); RESOURCE_COUNT]> {
        let limits = self.attrs.limits_share[i];
        let first = f[0].y0;
        if (0..RESOURCE_COUNT).any(|r| first[r] >= limits[r] + EPSILON || first[r].is_nan()) {
            return None;
        }
        Some(self.m_bounds(i, f))
    }

    fn operation_fair_share_by_fit_factor(&self, i: ElementIndex, out: &mut Vec<Segment<Rv>>) {
        let demand_share = self.attrs.demand_share[i];
        // Usage above demand (warned of in step 4) would make F decrease from 1 to 2: F takes
        // the usage only up to the demand.
        let usage_share = self.attrs.usage_share[i].min(&demand_share);
        let parent = self.tree.element(i).parent.unwrap_or(ROOT);
        let mut b = Builder::from_buffer(std::mem::take(out));
        if self.opts.enable_step_function_for_gang_operations
            && self.step_function_allowed(parent)
            && self.is_gang(i)
        {
            b.push_segment(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
            b.push_segment(Segment::new(1.0, Rv::ZERO, 1.0, demand_share));
            b.push_segment(Segment::new(1.0, demand_share, 2.0, demand_share));
            *out = b.finish_buffer();
            return;
        }
        let max_usage = usage_share.max_component();
        if max_usage == 0.0 {
            b.push_segment(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
        } else {
            let mut sorted = usage_share.0;
            sorted.sort_by(f64::total_cmp);
            b.add_point(0.0, Rv::ZERO);
            let mut previous = 0.0;
            for usage in sorted {
                let fit = usage / max_usage;
                if fit > previous {
                    b.add_point(fit, Rv::splat(usage).min(&usage_share));
                    previous = fit;
                }
            }
        }
        b.push_segment(Segment::new(1.0, usage_share, 2.0, demand_share));
        *out = b.finish_buffer();
    }

    fn fifo_fair_share_by_fit_factor(&self, i: ElementIndex, scratch: &mut Scratch) {
        let order = &self.order[i];
        let out = &mut scratch.f;
        if order.is_empty() {
            out.clear();
            out.push(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
            return;
        }
        // The fast path lays the children's S end to end, which needs each on [0, 1] from zero:
        // true of operations, not always of a pool in a FIFO pool (warned of in step 4).
        if self
            .opts
            .enable_fast_fifo_fair_share_by_fit_factor_computation
            && order.iter().all(|&c| {
                let s = self.s(c);
                s.left_bound() == 0.0 && s.right_bound() == 1.0 && s.segments()[0].y0 == Rv::ZERO
            })
        {
            let mut b = Builder::from_buffer(std::mem::take(out));
            let mut prefix = Rv::ZERO;
            let mut shift = 0.0;
            for &c in order {
                let s = self.s(c);
                for seg in s.segments() {
                    b.push_segment(seg.shift(shift, prefix));
                }
                prefix = prefix + s.right_value();
                shift += 1.0;
            }
            *out = b.finish_buffer();
            return;
        }
        let right = order.len() as f64;
        let mut shifted = Vec::with_capacity(order.len());
        let mut current = 0.0;
        for &c in order {
            let f = self
                .s(c)
                .to_plf()
                .shift(current, Rv::ZERO)
                .extend_const(0.0, right);
            shifted.push(f);
            current += 1.0;
        }
        // Always the exact sum: it is what the fast FIFO path must reproduce bit for bit.
        let slices: Vec<&[Segment<Rv>]> = shifted.iter().map(Plf::segments).collect();
        sum_exact_into(&slices, &mut scratch.sum, out);
    }

    fn min_child_weight(&self, i: ElementIndex) -> f64 {
        let mut min = f64::MAX;
        for &c in self.children(i) {
            let w = self.weight(c);
            if w > EPSILON {
                min = min.min(w);
            }
        }
        min
    }

    /// The children's S in child order, each scaled by its relative weight and extended to 1 (a
    /// normal pool's F sums these): a child of relative weight 1 as it is (dividing by 1 changes
    /// nothing and its S already ends at 1), the others scaled into `owned`, whose buffers are
    /// reused.
    fn scaled_children<'a>(
        &'a self,
        i: ElementIndex,
        owned: &'a mut Vec<Vec<Segment<Rv>>>,
    ) -> Vec<&'a [Segment<Rv>]> {
        let min_weight = self.min_child_weight(i);
        let children = self.children(i);
        let mut which = Vec::with_capacity(children.len());
        let mut used = 0;
        for &c in children {
            let k = self.weight(c) / min_weight;
            if borrows_scaled_child(self.s(c), k) {
                which.push(None);
            } else {
                if owned.len() == used {
                    owned.push(Vec::new());
                }
                scale_argument_extend_into(self.s(c).segments(), k, 1.0, &mut owned[used]);
                which.push(Some(used));
                used += 1;
            }
        }
        let owned: &'a Vec<Vec<Segment<Rv>>> = owned;
        children
            .iter()
            .zip(which)
            .map(|(&c, w)| match w {
                None => self.s(c).segments(),
                Some(k) => owned[k].as_slice(),
            })
            .collect()
    }

    /// The children's S, each scaled by its relative weight, summed (classic) or stepped
    /// through (improved), into `scratch.f`.
    fn normal_fair_share_by_fit_factor(
        &self,
        i: ElementIndex,
        scratch: &mut Scratch,
    ) -> Option<ImprovedPool> {
        let children = self.children(i);
        if children.is_empty() {
            scratch.f.clear();
            scratch.f.push(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
            return None;
        }
        let mut owned = std::mem::take(&mut scratch.scaled);
        let slices = self.scaled_children(i, &mut owned);
        let improved = if self
            .opts
            .enable_improved_fair_share_by_fit_factor_computation
        {
            Some(ImprovedPool::build(
                &slices,
                &mut scratch.improved,
                &mut scratch.f,
            ))
        } else {
            sum_adaptive_into(
                &slices,
                self.tuning.exact_sum(),
                &mut scratch.sum,
                &mut scratch.f,
            );
            None
        };
        drop(slices);
        scratch.scaled = owned;
        improved
    }

    /// M: per resource, the inverse of F's component between the guarantee and the limit,
    /// shifted to start at 0 and extended to 1; then their pointwise minimum, folded in
    /// resource order. Reads F from `scratch.f`; returns whether M was computed on critical
    /// points, left in `scratch.crit_acc` (otherwise as segments in `scratch.min_acc`).
    fn max_fit_factor_by_suggestion(
        &mut self,
        i: ElementIndex,
        monotone: bool,
        scratch: &mut Scratch,
    ) -> bool {
        let bounds = self.m_bounds(i, &scratch.f);
        // Nondecreasing functions: on critical points (see `crate::crit`).
        if monotone && scratch.f.iter().all(|s| s.x0 <= s.x1) {
            let Scratch {
                f,
                crit_t,
                crit_parts,
                crit_acc,
                crit_next,
                ..
            } = scratch;
            let mut ok = true;
            crit::transposed_components_into(f, crit_t);
            for (r, &(g, limit)) in bounds.iter().enumerate() {
                if !crit::inverse_part_take(&mut crit_t[r], g, limit, &mut crit_parts[r]) {
                    ok = false;
                    break;
                }
            }
            if ok {
                let t0 = self.now_ns();
                crit::min_fold(crit_parts, crit_acc, crit_next);
                self.timings.pointwise_min_ns += self.now_ns() - t0;
                return true;
            }
        }
        for (r, &(g, limit)) in bounds.iter().enumerate() {
            let c = &mut scratch.component;
            component_into(&scratch.f, r, c);
            inverse_part_into(
                &mut scratch.component,
                g,
                limit,
                monotone,
                &mut scratch.parts[r],
            );
        }
        let t0 = self.now_ns();
        let Scratch {
            parts,
            min_acc,
            min_next,
            ..
        } = scratch;
        min_acc.clear();
        min_acc.extend_from_slice(&parts[0]);
        for part in &parts[1..] {
            pointwise_min_into(min_acc, part, min_next);
            std::mem::swap(min_acc, min_next);
        }
        self.timings.pointwise_min_ns += self.now_ns() - t0;
        false
    }

    // ---- 11. top-down ------------------------------------------------------------------------

    fn set_detailed(&mut self, i: ElementIndex, total: Rv, kind: FairShareType) {
        let a = &mut self.attrs;
        let sg = total.min(&a.strong_guarantee_share[i]);
        let ig = (total - sg).min(&a.proposed_integral_share[i]);
        let detailed = DetailedFairShare {
            total,
            strong_guarantee: sg,
            integral_guarantee: ig,
            weight_proportional: total - sg - ig,
        };
        match kind {
            FairShareType::Regular => a.fair_share[i] = detailed,
            FairShareType::PromisedGuarantee => a.promised_guarantee_fair_share[i] = detailed,
        }
    }

    /// Children in the order used for distribution (FIFO pools: the effective FIFO order).
    fn distribution_order(&self, i: ElementIndex) -> Vec<ElementIndex> {
        if self.mode(i) == PoolMode::Fifo {
            self.order[i].clone()
        } else {
            self.children(i).to_vec()
        }
    }

    fn child_suggestions(&self, i: ElementIndex, n: usize, fit: f64, out: &mut Vec<f64>) {
        out.clear();
        if self.mode(i) == PoolMode::Fifo {
            let satisfied = fit as usize;
            let partial = fit - satisfied as f64;
            out.resize(n, 0.0);
            for s in out.iter_mut().take(satisfied.min(n)) {
                *s = 1.0;
            }
            if partial != 0.0 && satisfied < n {
                out[satisfied] = partial;
            }
        } else {
            let min_weight = self.min_child_weight(i);
            for &c in self.children(i) {
                out.push((fit * (self.weight(c) / min_weight)).min(1.0));
            }
        }
    }

    fn compute_scalar(&mut self, i: ElementIndex, suggestion: f64, kind: FairShareType) {
        if self.is_operation(i) {
            let share = self.s(i).value_at(suggestion);
            self.set_detailed(i, share, kind);
            return;
        }
        if self.children(i).is_empty() {
            self.set_detailed(i, Rv::ZERO, kind);
            return;
        }
        let suggested = self.s(i).value_at(suggestion);
        let children = self.distribution_order(i);
        let mut buf = Vec::with_capacity(children.len());
        let children_share = |this: &Self, fit: f64, buf: &mut Vec<f64>| {
            this.child_suggestions(i, children.len(), fit, buf);
            let mut sum = Rv::ZERO;
            for (k, &c) in children.iter().enumerate() {
                sum = sum.add(this.s(c).value_at(buf[k]));
            }
            sum
        };
        let mut fit = match self.root_fit_at_one {
            Some(fit) if i == ROOT => fit,
            _ if self.functions[i].is_some() => self.m_value_at(i, suggestion),
            _ => 0.0,
        };
        if !(suggested + EPS_VEC).dominates(&children_share(self, fit, &mut buf)) {
            let this = &*self;
            let mut local = Vec::with_capacity(children.len());
            fit = inverse_lower_bound(0.0, fit, |x| {
                (suggested + EPS_VEC).dominates(&children_share(this, x, &mut local))
            });
        }
        self.child_suggestions(i, children.len(), fit, &mut buf);
        let mut used = Rv::ZERO;
        for (k, &c) in children.iter().enumerate() {
            self.compute_scalar(c, buf[k], kind);
            used = used + self.fair_share(c, kind);
        }
        self.check_children_sum(i, suggested, used);
        self.set_detailed(i, suggested, kind);
    }

    fn fair_share(&self, i: ElementIndex, kind: FairShareType) -> Rv {
        match kind {
            FairShareType::Regular => self.attrs.fair_share[i].total,
            FairShareType::PromisedGuarantee => self.attrs.promised_guarantee_fair_share[i].total,
        }
    }

    fn check_children_sum(&mut self, i: ElementIndex, suggested: Rv, used: Rv) {
        if !(suggested + EPS_VEC).dominates(&used) {
            self.warn(
                i,
                format!(
                    "children's fair shares {used:?} exceed the pool's fair share {suggested:?}"
                ),
            );
        }
    }

    /// Each child's share at fit factor `fit` in the vector (improved) path: FIFO pools from
    /// the children's S, normal pools from `evaluator`.
    fn child_shares(
        &self,
        i: ElementIndex,
        children: &[ElementIndex],
        evaluator: &mut Option<ShareEvaluator<'_>>,
        fit: f64,
        out: &mut Vec<Rv>,
    ) {
        out.clear();
        if self.mode(i) == PoolMode::Fifo {
            let satisfied = fit as usize;
            let partial = fit - satisfied as f64;
            out.resize(children.len(), Rv::ZERO);
            for k in 0..satisfied.min(children.len()) {
                out[k] = self.s(children[k]).value_at(1.0);
            }
            if partial != 0.0 && satisfied < children.len() {
                out[satisfied] = self.s(children[satisfied]).value_at(partial);
            }
        } else {
            evaluator
                .as_mut()
                .expect("improved mode prepares the children's shares")
                .shares(fit, out);
        }
    }

    fn compute_vec(&mut self, i: ElementIndex, target: Rv, kind: FairShareType) {
        if self.is_operation(i) {
            self.set_detailed(i, target, kind);
            return;
        }
        if self.children(i).is_empty() {
            self.set_detailed(i, Rv::ZERO, kind);
            return;
        }
        let children = self.distribution_order(i);
        let mut buf = Vec::with_capacity(children.len());
        {
            let this = &*self;
            let right = this.functions[i].as_ref().map_or(0.0, |f| f.f_right_bound);
            let mut evaluator = this.functions[i]
                .as_ref()
                .and_then(|f| f.improved.as_ref())
                .map(ImprovedPool::evaluator);
            // The children's shares at a fit factor, added left to right. (Normal pools: the
            // evaluator adds them without storing them.)
            let fifo = this.mode(i) == PoolMode::Fifo;
            let mut sum_at = |fit: f64, buf: &mut Vec<Rv>| {
                if !fifo && let Some(e) = evaluator.as_mut() {
                    return e.sum(fit);
                }
                this.child_shares(i, &children, &mut evaluator, fit, buf);
                buf.iter().fold(Rv::ZERO, |acc, v| acc.add(*v))
            };
            let mut fit = inverse_lower_bound(0.0, right, |x| sum_at(x, &mut buf).le(target));
            if !EPS_VEC.dominates(&(target - sum_at(fit, &mut buf)))
                && this
                    .opts
                    .enable_improved_fair_share_by_fit_factor_computation_distribution_gap
            {
                let slack = target.add(EPS_VEC);
                fit = inverse_lower_bound(fit, right, |x| sum_at(x, &mut buf).le(slack));
            }
            if fit < EPSILON {
                fit = 0.0;
            }
            this.child_shares(i, &children, &mut evaluator, fit, &mut buf);
        }
        let mut used = Rv::ZERO;
        for (k, &c) in children.iter().enumerate() {
            used = used + buf[k];
            self.compute_vec(c, buf[k], kind);
        }
        self.check_children_sum(i, target, used);
        self.set_detailed(i, target, kind);
    }

    // ---- 12–13. promised guarantee, root ----------------------------------------------------

    fn compute_promised_guarantee(&mut self, i: ElementIndex) {
        if self.is_operation(i) {
            return;
        }
        let flagged = self
            .tree
            .element(i)
            .pool()
            .is_some_and(|p| p.enable_promised_guarantee_fair_share);
        if flagged {
            if self
                .opts
                .enable_improved_fair_share_by_fit_factor_computation
            {
                let target = self.s(i).value_at(0.0);
                self.compute_vec(i, target, FairShareType::PromisedGuarantee);
            } else {
                self.compute_scalar(i, 0.0, FairShareType::PromisedGuarantee);
            }
            return;
        }
        for k in 0..self.children(i).len() {
            let c = self.children(i)[k];
            self.compute_promised_guarantee(c);
        }
    }

    fn update_root_fair_share(&mut self) {
        let mut used_sg = Rv::ZERO;
        let mut total = Rv::ZERO;
        for &c in self.children(ROOT) {
            used_sg = used_sg + self.attrs.fair_share[c].strong_guarantee;
            total = total + self.attrs.fair_share[c].total;
        }
        let configured = self.attrs.strong_guarantee_share[ROOT];
        self.attrs.strong_guarantee_share[ROOT] = used_sg;
        self.set_detailed(ROOT, total, FairShareType::Regular);
        self.attrs.strong_guarantee_share[ROOT] = configured;
    }
}

/// Whether a child's S, as a function of its parent's fit factor (the argument divided by the
/// child's relative weight `k`, extended to 1 with its last value), is S itself: for `k == 1`
/// with S ending at 1 both steps reproduce S exactly (x / 1 == x, nothing to extend; the
/// builder's merges change nothing in a nondecreasing function it built).
fn borrows_scaled_child(s: PlfRef<'_, Rv>, k: f64) -> bool {
    k == 1.0 && s.right_bound() >= 1.0 && s.is_nondecreasing()
}
