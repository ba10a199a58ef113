//! Reference copy (test oracle) of the original `update` module.
//!
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
//! 10. bottom-up functions F, M, S;
//! 11. top-down distribution;
//! 12. promised-guarantee pass;
//! 13. root fix-up.
//!
//! Internal invariant checks that the reference implementation verifies (and aborts on) are
//! reported as [`UpdateWarning`]s instead: the update always completes.

use super::plf::{Builder, Plf, Segment, inverse_lower_bound};
use fairsched_hdrf::{
    DetailedFairShare, ElementAttributes, FunctionSizes, PhaseClock, PhaseTimings,
    TIER_PRIORITY_POOLS, TIER_REGULAR_POOLS, UpdateError, UpdateOutput, UpdateWarning,
};
use fairsched_hdrf::{
    ElementIndex, FifoSortParameter, IntegralGuaranteeType, PoolMode, ROOT, ResourceVolume, Tree,
    UpdateInput, UpdateOptions,
};
use fairsched_resources::{RESOURCE_COUNT, ResourceKind, ResourceVector, Resources};

/// General epsilon of the algorithm.
pub const EPSILON: f64 = 1e-9;
/// Tolerance of function compression.
pub const COMPRESS_FUNCTION_EPSILON: f64 = 1e-15;

type Rv = ResourceVector;

const EPS_VEC: Rv = ResourceVector::splat(EPSILON);

/// Which fair share a top-down pass writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FairShareType {
    Regular,
    PromisedGuarantee,
}

/// The three functions of an element (and, for normal pools in improved mode, each child's
/// share by the pool's fit factor).
struct Functions {
    f: Plf<Rv>,
    m: Plf<f64>,
    s: Plf<Rv>,
    child_shares_by_fit_factor: Option<Vec<Plf<Rv>>>,
}

struct Update<'a> {
    tree: &'a mut Tree,
    total: Resources,
    opts: &'a UpdateOptions,
    now: f64,
    previous: Option<f64>,
    attrs: Vec<ElementAttributes>,
    usage: Vec<Resources>,
    demand: Vec<Resources>,
    /// Children in the order the update uses (FIFO pools: sorted, maybe reordered).
    order: Vec<Vec<ElementIndex>>,
    functions: Vec<Option<Functions>>,
    burst_pools: Vec<ElementIndex>,
    relaxed_pools: Vec<ElementIndex>,
    fifo_pools: Vec<ElementIndex>,
    priority_without_donor: Vec<bool>,
    errors: Vec<UpdateError>,
    warnings: Vec<UpdateWarning>,
    clock: &'a dyn PhaseClock,
    timing: bool,
    timings: PhaseTimings,
}

/// Runs one fair-share update over `tree` (advancing its persistent integral state) and returns
/// every element's attributes, indexed like the tree.
pub fn update(tree: &mut Tree, input: &UpdateInput, clock: &dyn PhaseClock) -> UpdateOutput {
    let n = tree.len();
    let start = clock.now_ns();
    let timing = clock.enabled();
    let mut u = Update {
        tree,
        total: input.total_resources,
        opts: &input.options,
        now: input.now_seconds,
        previous: input.previous_update_seconds,
        attrs: vec![ElementAttributes::default(); n],
        usage: vec![Resources::ZERO; n],
        demand: vec![Resources::ZERO; n],
        order: vec![Vec::new(); n],
        functions: (0..n).map(|_| None).collect(),
        burst_pools: Vec::new(),
        relaxed_pools: Vec::new(),
        fifo_pools: Vec::new(),
        priority_without_donor: vec![false; n],
        errors: Vec::new(),
        warnings: Vec::new(),
        clock,
        timing,
        timings: PhaseTimings::default(),
    };
    u.run();
    let mut timings = u.timings;
    timings.total_ns = clock.now_ns().saturating_sub(start);
    UpdateOutput {
        attributes: u.attrs,
        errors: u.errors,
        warnings: u.warnings,
        timings,
    }
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
        self.tree.element(i).is_operation()
    }

    fn weight(&self, i: ElementIndex) -> f64 {
        self.attrs[i].weight
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
        self.attrs[i].strong_guarantee_share + self.attrs[i].proposed_integral_share
    }

    fn run(&mut self) {
        let t0 = self.now_ns();
        self.validate_pool_configs();
        self.infer_strong_guarantees();
        self.collect_integral_pools();
        self.update_cumulative_attributes(ROOT);
        self.infer_weights();
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

        self.prepare_functions(ROOT);

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

        for i in 0..self.tree.len() {
            if let Some(f) = &self.functions[i] {
                self.attrs[i].limited_demand_share = f.s.right_value();
                self.attrs[i].function_sizes = FunctionSizes {
                    fair_share_by_fit_factor: f.f.size(),
                    max_fit_factor_by_suggestion: f.m.size(),
                    fair_share_by_suggestion: f.s.size(),
                };
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
        self.attrs[ROOT].inferred_strong_guarantee_resources = self.total;
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
                let inferred = configured.or_zero();
                self.attrs[c].inferred_strong_guarantee_resources = inferred;
                explicit_sum = explicit_sum.add(&inferred);
            }
            let parent = self.attrs[p].inferred_strong_guarantee_resources;
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
                    let child_main = self.attrs[c].inferred_strong_guarantee_resources.get(main);
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
                        self.attrs[c]
                            .inferred_strong_guarantee_resources
                            .set(kind, v);
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
            self.usage[i] = op.usage;
            self.demand[i] = op.demand;
        } else {
            let (burst, flow) = match self.tree.element(i).pool() {
                Some(p) if p.integral_guarantees.guarantee_type != IntegralGuaranteeType::None => (
                    max_resource_ratio(&p.integral_guarantees.burst_guarantee_resources, &total),
                    max_resource_ratio(&p.integral_guarantees.resource_flow, &total),
                ),
                _ => (0.0, 0.0),
            };
            self.attrs[i].burst_ratio = burst;
            self.attrs[i].total_burst_ratio = burst;
            self.attrs[i].resource_flow_ratio = flow;
            self.attrs[i].total_resource_flow_ratio = flow;
            let mut usage = Resources::ZERO;
            let mut demand = Resources::ZERO;
            for k in 0..self.children(i).len() {
                let c = self.children(i)[k];
                self.update_cumulative_attributes(c);
                self.attrs[i].total_resource_flow_ratio += self.attrs[c].total_resource_flow_ratio;
                self.attrs[i].total_burst_ratio += self.attrs[c].total_burst_ratio;
                usage = usage.add(&self.usage[c]);
                demand = demand.add(&self.demand[c]);
            }
            self.usage[i] = usage;
            self.demand[i] = demand;
        }

        // Own attributes.
        let element = self.tree.element(i);
        let limits = element.resource_limits.or_infinite().min(&total);
        let mut limits_share = Rv::from_resources(&limits, &total);
        if let Some(op) = element.operation() {
            limits_share = limits_share.min(&op.best_allocation_share);
        }
        let a = &mut self.attrs[i];
        a.limits_share = limits_share;
        a.strong_guarantee_share =
            Rv::from_resources(&a.inferred_strong_guarantee_resources, &total);
        a.dominant_resource = if self.usage[i].is_zero() {
            dominant_resource(&self.demand[i], &total)
        } else {
            dominant_resource(&self.usage[i], &total)
        };
        a.usage_share = Rv::from_resources(&self.usage[i], &total);
        a.demand_share = Rv::from_resources(&self.demand[i], &total);
        if !a.demand_share.dominates(&a.usage_share) {
            let msg = format!(
                "usage share {:?} exceeds demand share {:?}",
                a.usage_share, a.demand_share
            );
            self.warn(i, msg);
        }

        if !self.is_operation(i) && self.mode(i) == PoolMode::Fifo {
            self.prepare_fifo_pool(i);
            self.fifo_pools.push(i);
        }
        if i == ROOT {
            let mut sg = Rv::ZERO;
            for &c in self.children(ROOT) {
                sg = sg + self.attrs[c].strong_guarantee_share;
            }
            self.attrs[ROOT].strong_guarantee_share = sg;
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
            self.attrs[c].fifo_index = Some(k);
            self.attrs[c].effective_fifo_index = None;
        }
        self.order[i] = sorted;
    }

    /// Weights: configured, or inferred from the guarantee share relative to the parent's
    /// (`infer_weight_from_guarantees_share_multiplier`).
    fn infer_weights(&mut self) {
        for i in 0..self.tree.len() {
            self.attrs[i].weight = self.tree.element(i).weight;
        }
        let Some(multiplier) = self.opts.infer_weight_from_guarantees_share_multiplier else {
            return;
        };
        let quantity = |a: &ElementAttributes| {
            a.strong_guarantee_share.max_component() + a.total_resource_flow_ratio
        };
        for i in 0..self.tree.len() {
            let infer = self.tree.element(i).pool().is_some_and(|p| p.infer_weight);
            let Some(parent) = self.tree.element(i).parent else {
                continue;
            };
            if !infer {
                continue;
            }
            let own = quantity(&self.attrs[i]);
            let of_parent = quantity(&self.attrs[parent]);
            self.attrs[i].weight = if own < EPSILON || of_parent < EPSILON {
                1.0
            } else {
                multiplier * own / of_parent
            };
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
        let Some(previous) = self.previous else {
            return;
        };
        let period = self.now - previous;
        let flow_ratio = self.attrs[p].resource_flow_ratio;
        let can_accept = self
            .tree
            .element(p)
            .pool()
            .is_some_and(|pool| pool.integral_guarantees.can_accept_free_volume);
        let saturation = self.opts.integral_pool_capacity_saturation_period_seconds;
        let state = &mut self.tree.element_mut(p).integral_state;
        let old = state.accumulated_volume;
        let capacity = ResourceVolume::from_resources(&self.total.scale(flow_ratio), saturation);
        let period_volume = ResourceVolume::from_resources(&self.total, period);
        let mut acc = old.add(&period_volume.scale(flow_ratio));
        acc = acc.sub(&period_volume.scale(state.last_share_ratio));
        acc = acc.max(&ResourceVolume::ZERO);
        let upper = old.max(&capacity);
        self.attrs[p].volume_overflow = acc.sub(&upper).max(&ResourceVolume::ZERO);
        if can_accept {
            self.attrs[p].acceptable_volume = capacity.sub(&acc).max(&ResourceVolume::ZERO);
        }
        state.accumulated_volume = acc.min(&upper);
    }

    fn update_overflow_and_acceptable_volumes(&mut self, i: ElementIndex) {
        if self.integral_type(i) != IntegralGuaranteeType::None {
            return;
        }
        let mut children_acceptable = ResourceVolume::ZERO;
        let mut children_overflow = self.attrs[i].children_volume_overflow;
        for k in 0..self.children(i).len() {
            let c = self.children(i)[k];
            if self.tree.element(c).pool().is_some() {
                self.update_overflow_and_acceptable_volumes(c);
                children_overflow = children_overflow.add(&self.attrs[c].volume_overflow);
                children_acceptable = children_acceptable.add(&self.attrs[c].acceptable_volume);
            }
        }
        self.attrs[i].children_volume_overflow = children_overflow;
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
        self.attrs[i].volume_overflow = overflow;
        self.attrs[i].acceptable_volume = acceptable;
    }

    fn distribute_free_volume(&mut self, i: ElementIndex) {
        let mut free = self.attrs[i].accepted_free_volume;
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
        let overflow = self.attrs[i].children_volume_overflow;
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
                    let acceptable_natural = self.attrs[c].acceptable_volume.values()[r];
                    let weight = self.attrs[c].total_resource_flow_ratio;
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
                    let acceptable = self.attrs[c].acceptable_volume.raw(r);
                    let suggested_cast = if r == ResourceKind::Cpu.index() {
                        suggested.round()
                    } else {
                        suggested
                    };
                    if suggested_cast < acceptable {
                        break;
                    }
                    self.attrs[c].accepted_free_volume.set_raw(r, acceptable);
                    free.set_raw(r, free.raw(r) - acceptable);
                    weight_sum -= w;
                    k += 1;
                }
                while k < hungry.len() {
                    let (c, w, _) = hungry[k];
                    let suggested = free.raw(r) * (w / weight_sum);
                    self.attrs[c].accepted_free_volume.set_raw(r, suggested);
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
        let flow = total.scale(self.attrs[ROOT].total_resource_flow_ratio);
        let burst = total.scale(self.attrs[ROOT].total_burst_ratio);
        let mut strong = Resources::ZERO;
        for &c in self.children(ROOT) {
            strong = strong.add(&self.attrs[c].inferred_strong_guarantee_resources);
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
            let root_sg = self.attrs[ROOT].strong_guarantee_share;
            let ratios: Vec<f64> = self
                .burst_pools
                .iter()
                .map(|&p| self.attrs[p].burst_ratio)
                .collect();
            let fit = inverse_lower_bound(0.0, 1.0, |f| {
                let mut sum = root_sg * f;
                for &ratio in &ratios {
                    sum = sum + Rv::splat(ratio) * f;
                }
                Rv::ONES.dominates(&sum)
            });
            self.attrs[ROOT].strong_guarantee_share = root_sg * fit;
            for k in 0..self.burst_pools.len() {
                let p = self.burst_pools[k];
                self.attrs[p].burst_ratio *= fit;
            }
        }
        self.compute_tiers(ROOT);
        self.adjust_strong_guarantees(ROOT);
        self.attrs[ROOT].estimated_guarantee_share = self.attrs[ROOT].strong_guarantee_share;
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
                child_priority + self.attrs[c].strong_guarantee_share_by_tier[TIER_PRIORITY_POOLS];
        }
        let (priority, donor) = self.tree.element(i).pool().map_or((false, false), |p| {
            (
                p.priority_strong_guarantee_adjustment,
                p.priority_strong_guarantee_adjustment_donorship,
            )
        });
        let priority = priority && !self.priority_without_donor[i];
        let sg = self.attrs[i].strong_guarantee_share;
        self.attrs[i].strong_guarantee_share_by_tier = if priority {
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
        let sg = self.attrs[p]
            .strong_guarantee_share
            .min(&self.attrs[p].limits_share);
        self.attrs[p].strong_guarantee_share = sg;
        let children = self.children(p).to_vec();
        let tiers = [TIER_PRIORITY_POOLS, TIER_REGULAR_POOLS];
        let mut fixed = Rv::ZERO;
        let mut tier_index = 0;
        while tier_index < tiers.len() {
            let tier = tiers[tier_index];
            let mut tier_total = Rv::ZERO;
            for &c in &children {
                tier_total = tier_total + self.attrs[c].strong_guarantee_share_by_tier[tier];
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
                    .map(|&c| self.attrs[c].strong_guarantee_share_by_tier[tier])
                    .collect();
                let fit = inverse_lower_bound(0.0, 1.0, |f| {
                    let mut sum = Rv::ZERO;
                    for v in &values {
                        sum = sum + *v * f;
                    }
                    available.dominates(&sum)
                });
                for (k, &c) in children.iter().enumerate() {
                    self.attrs[c].strong_guarantee_share_by_tier[tier] = values[k] * fit;
                }
                break;
            }
            fixed = fixed + tier_total;
            tier_index += 1;
        }
        tier_index += 1;
        while tier_index < tiers.len() {
            for &c in &children {
                self.attrs[c].strong_guarantee_share_by_tier[tiers[tier_index]] = Rv::ZERO;
            }
            tier_index += 1;
        }
        for &c in &children {
            let mut sum = Rv::ZERO;
            for tier in tiers {
                sum = sum + self.attrs[c].strong_guarantee_share_by_tier[tier];
            }
            self.attrs[c].strong_guarantee_share = sum;
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
        let mut undistributed = self.attrs[p].estimated_guarantee_share;
        for &c in &children {
            weight_sum += self.weight(c);
            let egs = self.attrs[c].strong_guarantee_share.min(&undistributed);
            self.attrs[c].estimated_guarantee_share = egs;
            undistributed = undistributed - egs;
        }
        for r in 0..RESOURCE_COUNT {
            for &c in &children {
                let w = self.weight(c);
                self.attrs[c].estimated_guarantee_share[r] += undistributed[r] * w / weight_sum;
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
        let guarantee = self.attrs[p].strong_guarantee_share;
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
            let a = &self.attrs[c];
            let charge = if gang && !a.limits_share.dominates(&a.demand_share) {
                Rv::ZERO
            } else {
                a.demand_share.min(&a.limits_share)
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
                self.attrs[c].effective_fifo_index = Some(k);
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
            result = result.min(&(self.attrs[cur].limits_share - self.guarantee_share(cur)));
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
            let mut increased = self.attrs[c].proposed_integral_share + delta;
            if c != ROOT {
                let (limits, sg) = (
                    self.attrs[c].limits_share,
                    self.attrs[c].strong_guarantee_share,
                );
                increased = self.adjust_proposed_integral_share(c, limits, sg, increased);
            }
            self.attrs[c].proposed_integral_share = increased;
            cur = self.tree.element(c).parent;
        }
    }

    fn integral_share_ratio_by_volume(&self, p: ElementIndex) -> f64 {
        self.tree
            .element(p)
            .integral_state
            .accumulated_volume
            .min_resource_ratio(&self.total)
            / self.opts.integral_smooth_period_seconds
    }

    fn update_burst_pool_integral_shares(&mut self) {
        for k in 0..self.burst_pools.len() {
            let p = self.burst_pools[k];
            let ratio = self.attrs[p]
                .burst_ratio
                .min(self.integral_share_ratio_by_volume(p));
            let hal = self.hierarchical_available_limits_share(p);
            let mut proposed = Rv::splat(ratio).min(&hal);
            if !proposed.dominates(&Rv::ZERO) {
                self.warn(p, format!("negative proposed integral share {proposed:?}"));
            }
            let (limits, sg) = (
                self.attrs[p].limits_share,
                self.attrs[p].strong_guarantee_share,
            );
            proposed = self.adjust_proposed_integral_share(p, limits, sg, proposed);
            self.attrs[p].proposed_integral_share = proposed;
            self.prepare_functions(p);
            self.attrs[p].proposed_integral_share = Rv::ZERO;
            let within = self.s(p).value_at(0.0);
            let integral = (within - sg).max(&Rv::ZERO);
            self.increase_hierarchical_integral_share(p, integral);
            self.functions[p] = None;
            self.tree.element_mut(p).integral_state.last_share_ratio = integral.max_component();
        }
    }

    fn update_relaxed_pool_integral_shares(&mut self) {
        if self.relaxed_pools.is_empty() {
            return;
        }
        let mut available = Rv::ONES;
        for &c in self.children(ROOT) {
            let used = self.guarantee_share(c).min(&self.attrs[c].demand_share);
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
            original_limits.push(self.attrs[p].limits_share);
            let multiplier = self
                .tree
                .element(p)
                .pool()
                .and_then(|pool| pool.integral_guarantees.relaxed_share_multiplier_limit)
                .unwrap_or(self.opts.relaxed_share_multiplier_limit);
            let share_limit = Rv::splat(self.attrs[p].resource_flow_ratio * multiplier);
            let relaxed_limit =
                Rv::splat(ratio).min(&share_limit) + self.attrs[p].strong_guarantee_share;
            self.attrs[p].limits_share = self.attrs[p].limits_share.min(&relaxed_limit);
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
                    sum = sum + (share - this.attrs[p].strong_guarantee_share).max(&Rv::ZERO);
                }
                available.dominates(&sum)
            })
        };
        for (k, &p) in pools.iter().enumerate() {
            let suggestion = (fit * weights[k]).min(1.0);
            let within = self.s(p).value_at(suggestion);
            let integral = (within - self.attrs[p].strong_guarantee_share).max(&Rv::ZERO);
            self.attrs[p].limits_share = original_limits[k];
            let hal = self.hierarchical_available_limits_share(p);
            let limited = integral.min(&hal);
            if !limited.dominates(&Rv::ZERO) {
                self.warn(p, format!("negative limited integral share {limited:?}"));
            }
            self.increase_hierarchical_integral_share(p, limited);
            self.functions[p] = None;
            self.tree.element_mut(p).integral_state.last_share_ratio = limited.max_component();
        }
    }

    // ---- 10. bottom-up functions -------------------------------------------------------------

    fn s(&self, i: ElementIndex) -> &Plf<Rv> {
        &self.functions[i]
            .as_ref()
            .expect("fair-share functions are prepared before use")
            .s
    }

    fn prepare_functions(&mut self, i: ElementIndex) {
        if self.functions[i].is_some() {
            return;
        }
        if !self.is_operation(i) {
            for k in 0..self.children(i).len() {
                let c = self.children(i)[k];
                self.prepare_functions(c);
            }
        }
        let t0 = self.now_ns();
        let (f, child_shares) = if self.is_operation(i) {
            let f = self.operation_fair_share_by_fit_factor(i);
            let t1 = self.now_ns();
            self.timings.operation_functions_ns += t1 - t0;
            (f, None)
        } else if self.mode(i) == PoolMode::Fifo {
            let f = self.fifo_fair_share_by_fit_factor(i);
            let t1 = self.now_ns();
            self.timings.fifo_pool_functions_ns += t1 - t0;
            (f, None)
        } else {
            let r = self.normal_fair_share_by_fit_factor(i);
            let t1 = self.now_ns();
            self.timings.normal_pool_functions_ns += t1 - t0;
            r
        };
        if !f.is_nondecreasing() {
            self.warn(i, "fair share by fit factor decreases".to_string());
        }

        let t1 = self.now_ns();
        let m = self.max_fit_factor_by_suggestion(i, &f);
        let t2 = self.now_ns();
        let s = f.compose(&m);
        let t3 = self.now_ns();
        let s = s.compress(COMPRESS_FUNCTION_EPSILON);
        let t4 = self.now_ns();
        self.timings.max_fit_factor_ns += t2 - t1;
        self.timings.compose_ns += t3 - t2;
        self.timings.compress_ns += t4 - t3;
        if s.left_bound() != 0.0 || s.right_bound() != 1.0 || !s.is_nondecreasing() {
            self.warn(
                i,
                "fair share by suggestion is not a nondecreasing function on [0, 1]".to_string(),
            );
        }
        self.functions[i] = Some(Functions {
            f,
            m,
            s,
            child_shares_by_fit_factor: child_shares,
        });
    }

    fn operation_fair_share_by_fit_factor(&self, i: ElementIndex) -> Plf<Rv> {
        let a = &self.attrs[i];
        let parent = self.tree.element(i).parent.unwrap_or(ROOT);
        let mut b = Builder::with_capacity(8);
        if self.opts.enable_step_function_for_gang_operations
            && self.step_function_allowed(parent)
            && self.is_gang(i)
        {
            b.push_segment(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
            b.push_segment(Segment::new(1.0, Rv::ZERO, 1.0, a.demand_share));
            b.push_segment(Segment::new(1.0, a.demand_share, 2.0, a.demand_share));
            return b.finish();
        }
        let max_usage = a.usage_share.max_component();
        if max_usage == 0.0 {
            b.push_segment(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
        } else {
            let mut sorted = a.usage_share.0;
            sorted.sort_by(f64::total_cmp);
            b.add_point(0.0, Rv::ZERO);
            let mut previous = 0.0;
            for usage in sorted {
                let fit = usage / max_usage;
                if fit > previous {
                    b.add_point(fit, Rv::splat(usage).min(&a.usage_share));
                    previous = fit;
                }
            }
        }
        b.push_segment(Segment::new(1.0, a.usage_share, 2.0, a.demand_share));
        b.finish()
    }

    fn fifo_fair_share_by_fit_factor(&self, i: ElementIndex) -> Plf<Rv> {
        let order = &self.order[i];
        if order.is_empty() {
            return Plf::constant(0.0, 1.0, Rv::ZERO);
        }
        if self
            .opts
            .enable_fast_fifo_fair_share_by_fit_factor_computation
        {
            let mut b = Builder::with_capacity(order.iter().map(|&c| self.s(c).size()).sum());
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
            return b.finish();
        }
        let right = order.len() as f64;
        let mut shifted = Vec::with_capacity(order.len());
        let mut current = 0.0;
        for &c in order {
            let f = self.s(c).shift(current, Rv::ZERO).extend_const(0.0, right);
            shifted.push(f);
            current += 1.0;
        }
        Plf::sum(&shifted)
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

    fn normal_fair_share_by_fit_factor(&self, i: ElementIndex) -> (Plf<Rv>, Option<Vec<Plf<Rv>>>) {
        let children = self.children(i);
        if children.is_empty() {
            return (Plf::constant(0.0, 1.0, Rv::ZERO), None);
        }
        let min_weight = self.min_child_weight(i);
        let scaled: Vec<Plf<Rv>> = children
            .iter()
            .map(|&c| {
                self.s(c)
                    .scale_argument(self.weight(c) / min_weight)
                    .extend_right(1.0)
            })
            .collect();
        if self
            .opts
            .enable_improved_fair_share_by_fit_factor_computation
        {
            let (f, per_child) = improved_sum(&scaled);
            (f, Some(per_child))
        } else {
            (Plf::sum(&scaled), None)
        }
    }

    fn max_fit_factor_by_suggestion(&mut self, i: ElementIndex, f: &Plf<Rv>) -> Plf<f64> {
        let limits = self.attrs[i].limits_share;
        let guarantee = self.guarantee_share(i);
        let mut parts = Vec::with_capacity(RESOURCE_COUNT);
        for r in 0..RESOURCE_COUNT {
            let c = f.component(r);
            let lo = c.left_value();
            let hi = c.right_value();
            if lo >= limits[r] + EPSILON || lo.is_nan() {
                self.warn(
                    i,
                    format!(
                        "fair share at zero fit factor {lo} exceeds limit {} on resource {r}",
                        limits[r]
                    ),
                );
            }
            let limit = limits[r].max(lo).min(hi);
            let g = guarantee[r].max(lo).min(limit);
            let part = c
                .transpose()
                .narrow(g, limit)
                .trim_left()
                .shift(-g, 0.0)
                .extend_right(1.0)
                .trim();
            parts.push(part);
        }
        let t0 = self.now_ns();
        let m = Plf::pointwise_min_all(&parts);
        self.timings.pointwise_min_ns += self.now_ns() - t0;
        m
    }

    // ---- 11. top-down ------------------------------------------------------------------------

    fn set_detailed(&mut self, i: ElementIndex, total: Rv, kind: FairShareType) {
        let a = &mut self.attrs[i];
        let sg = total.min(&a.strong_guarantee_share);
        let ig = (total - sg).min(&a.proposed_integral_share);
        let detailed = DetailedFairShare {
            total,
            strong_guarantee: sg,
            integral_guarantee: ig,
            weight_proportional: total - sg - ig,
        };
        match kind {
            FairShareType::Regular => a.fair_share = detailed,
            FairShareType::PromisedGuarantee => a.promised_guarantee_fair_share = detailed,
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
                sum = sum + this.s(c).value_at(buf[k]);
            }
            sum
        };
        let mut fit = self.functions[i]
            .as_ref()
            .map_or(0.0, |f| f.m.value_at(suggestion));
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
            FairShareType::Regular => self.attrs[i].fair_share.total,
            FairShareType::PromisedGuarantee => self.attrs[i].promised_guarantee_fair_share.total,
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

    /// Each child's share at fit factor `fit` in the vector (improved) path.
    fn child_shares(
        &self,
        i: ElementIndex,
        children: &[ElementIndex],
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
            let per_child = self.functions[i]
                .as_ref()
                .and_then(|f| f.child_shares_by_fit_factor.as_ref())
                .expect("improved mode prepares per-child functions");
            for f in per_child {
                out.push(f.value_at(fit));
            }
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
        let right = self.functions[i]
            .as_ref()
            .map_or(0.0, |f| f.f.right_bound());
        let sum_at = |this: &Self, fit: f64, buf: &mut Vec<Rv>| {
            this.child_shares(i, &children, fit, buf);
            buf.iter().fold(Rv::ZERO, |acc, v| acc + *v)
        };
        let mut fit = {
            let this = &*self;
            let mut buf = Vec::with_capacity(children.len());
            inverse_lower_bound(0.0, right, |x| target.dominates(&sum_at(this, x, &mut buf)))
        };
        let mut buf = Vec::with_capacity(children.len());
        if !EPS_VEC.dominates(&(target - sum_at(self, fit, &mut buf)))
            && self
                .opts
                .enable_improved_fair_share_by_fit_factor_computation_distribution_gap
        {
            let this = &*self;
            let mut local = Vec::with_capacity(children.len());
            fit = inverse_lower_bound(fit, right, |x| {
                (target + EPS_VEC).dominates(&sum_at(this, x, &mut local))
            });
        }
        if fit < EPSILON {
            fit = 0.0;
        }
        self.child_shares(i, &children, fit, &mut buf);
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
            used_sg = used_sg + self.attrs[c].fair_share.strong_guarantee;
            total = total + self.attrs[c].fair_share.total;
        }
        let configured = self.attrs[ROOT].strong_guarantee_share;
        self.attrs[ROOT].strong_guarantee_share = used_sg;
        self.set_detailed(ROOT, total, FairShareType::Regular);
        self.attrs[ROOT].strong_guarantee_share = configured;
    }
}

/// The improved-mode sum of (already argument-scaled) child functions: every child's jump
/// becomes its own unit step of the fit factor, in child order. Returns the pool's F and each
/// child's share as a function of that fit factor.
fn improved_sum(children: &[Plf<Rv>]) -> (Plf<Rv>, Vec<Plf<Rv>>) {
    let mut points: Vec<(f64, usize)> = Vec::new();
    for (index, f) in children.iter().enumerate() {
        let mut last = f.left_bound();
        points.push((last, index));
        for s in f.segments() {
            if s.x1 > last {
                points.push((s.x1, index));
                last = s.x1;
            }
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));

    let mut traversers: Vec<_> = children.iter().map(Plf::traverser).collect();
    let mut builder = Builder::with_capacity(points.len() * 2);
    let mut child_builders: Vec<Builder<Rv>> = (0..children.len())
        .map(|_| Builder::with_capacity(points.len() + 1))
        .collect();
    let mut fit = 0.0;
    for &(x, point_index) in &points {
        let mut left = Rv::ZERO;
        let mut right = Rv::ZERO;
        for (index, t) in traversers.iter_mut().enumerate() {
            let (cl, cr) = t.limits_at(x);
            match index.cmp(&point_index) {
                std::cmp::Ordering::Less => {
                    left = left + cr;
                    right = right + cr;
                    child_builders[index].add_point(fit, cr);
                }
                std::cmp::Ordering::Greater => {
                    left = left + cl;
                    right = right + cl;
                    child_builders[index].add_point(fit, cl);
                }
                std::cmp::Ordering::Equal => {
                    left = left + cl;
                    right = right + cr;
                    child_builders[index].add_point(fit, cl);
                    child_builders[index].add_point(fit, cr);
                }
            }
        }
        builder.add_point(fit, left);
        builder.add_point(fit, right);
        fit += 1.0;
    }
    let per_child = child_builders.into_iter().map(Builder::finish).collect();
    (builder.finish(), per_child)
}
