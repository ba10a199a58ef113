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
//!
//! This module holds the entry points, the working memory ([`Workspace`]), the per-element
//! tables and the order of the steps ([`Update::run`]); the steps themselves are in `inputs`
//! (1–4, weights), `guarantees` (6–7), `integral` (5, 8–9), `functions` (10) and `distribute`
//! (11–13).

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

mod distribute;
mod functions;
mod guarantees;
mod inputs;
mod integral;
mod reuse;

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
    /// M as critical points, built by the walk over F (`crate::envelope`).
    crit_acc: Vec<Pt>,
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
    /// The previous update's functions, and what this update records for the next.
    reuse: reuse::State,
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
/// It also keeps the last update's fair-share functions (S and M of every element, improved
/// mode's step data) with, per element, the bit patterns of everything they were built from
/// and the tree's structure (names' hashes, children). The next update reuses an element's
/// functions, copying them instead of building them, when its inputs and its whole subtree are
/// unchanged (the incremental update, `update/reuse.rs`): in a steady state, where few
/// operations change between updates, most subtrees are. The function arenas are
/// double-buffered (the last update's and the ones the next update writes), so the workspace
/// holds about twice the arenas of one update.
///
/// The results never depend on what an earlier update (of any tree) left here: reused
/// functions are exactly those building them again would give, so an update's output is
/// bit-identical to a fresh workspace's (only [`PhaseTimings::reused_elements`] and the
/// timings differ). Cloning gives an empty workspace.
#[derive(Default)]
pub struct Workspace {
    attrs: Attrs,
    usage: Vec<Resources>,
    demand: Vec<Resources>,
    scratch: Scratch,
    /// Buffers the next update writes its functions into (the update before the last's).
    spare: reuse::Generation,
    /// The last update's functions and what they were built from.
    previous: reuse::Generation,
    matching: reuse::MatchBuffers,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("elements", &self.previous.functions.len())
            .field("s_segments", &self.previous.s_arena.len())
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

    /// Forgets the last update's functions (keeping the memory): the next update builds every
    /// element's functions, as a full update does. Results do not change either way; this is
    /// for measuring full updates with warm memory (the benchmarks).
    pub fn forget_functions(&mut self) {
        self.previous.forget();
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
    let reuse::Generation {
        mut functions,
        mut s_arena,
        mut m_arena,
        mut m_points,
        mut order,
        tables,
    } = std::mem::take(&mut workspace.spare);
    order.truncate(n);
    for o in &mut order {
        o.clear();
    }
    order.resize(n, Vec::new());
    functions.clear();
    functions.resize_with(n, || None);
    s_arena.clear();
    m_arena.clear();
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
        reuse: reuse::State::new(
            std::mem::take(&mut workspace.previous),
            tables,
            std::mem::take(&mut workspace.matching),
        ),
    };
    u.run();
    let mut attributes = std::mem::take(&mut out.attributes);
    u.write_attributes(&mut attributes);
    let reused_elements = u.reuse.count;
    let (mut spare, tables, matching) = std::mem::take(&mut u.reuse).into_parts();
    // The update before the last is not needed any more: its buffers are the next update's
    // (its functions dropped now, not kept until then).
    spare.functions.clear();
    *workspace = Workspace {
        attrs: std::mem::take(&mut u.attrs),
        usage: std::mem::take(&mut u.usage),
        demand: std::mem::take(&mut u.demand),
        scratch: std::mem::take(&mut u.scratch),
        spare,
        previous: reuse::Generation {
            functions: std::mem::take(&mut u.functions),
            s_arena: std::mem::take(&mut u.s_arena),
            m_arena: std::mem::take(&mut u.m_arena),
            m_points: std::mem::take(&mut u.m_points),
            order: std::mem::take(&mut u.order),
            tables,
        },
        matching,
    };
    let mut timings = u.timings;
    timings.reused_elements = reused_elements;
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
        self.match_previous();
        let t_match = self.now_ns();
        self.timings.matching_ns = t_match - t0;
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
}

/// [`crate::update`] with explicit tuning (feature `tuning`).
#[cfg(feature = "tuning")]
pub fn update_tuned(
    tree: &mut crate::model::Tree,
    input: &crate::model::UpdateInput,
    clock: &dyn crate::output::PhaseClock,
    tuning: Tuning,
) -> crate::output::UpdateOutput {
    let mut out = crate::output::UpdateOutput::default();
    update_with_into(
        tree,
        input,
        clock,
        tuning,
        &mut crate::Workspace::new(),
        &mut out,
    );
    out
}
