//! Steps 1–4 of the update and the weights: the inputs checked and clamped, pool configs
//! validated, strong guarantees inferred, integral pools collected, cumulative attributes
//! (bottom-up, FIFO pools sorted), inferred and clamped weights.

use super::*;

impl Update<'_> {
    /// `r` with negative components raised to zero, warning (of `what` of `i`) when there are
    /// any: no share of a negative amount means anything, and negative usage or demand would
    /// make an operation's fair share decrease with its fit factor.
    pub(super) fn non_negative(&mut self, i: ElementIndex, what: &str, r: Resources) -> Resources {
        if !r.any_negative() {
            return r;
        }
        self.warn(i, format!("{what} {r} is negative; zero is used instead"));
        r.max(&Resources::ZERO)
    }

    /// The cluster total without negative components, every stored integral state finite, and
    /// the periods the volumes are computed with within [`MAX_PERIOD_SECONDS`].
    pub(super) fn check_inputs(&mut self) {
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
    pub(super) fn check_integral_states(&mut self) {
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

    pub(super) fn validate_pool_configs(&mut self) {
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

    pub(super) fn infer_strong_guarantees(&mut self) {
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

    pub(super) fn collect_integral_pools(&mut self) {
        for i in self.tree.preorder() {
            match self.integral_type(i) {
                IntegralGuaranteeType::Burst => self.burst_pools.push(i),
                IntegralGuaranteeType::Relaxed => self.relaxed_pools.push(i),
                IntegralGuaranteeType::None => {}
            }
        }
    }

    // ---- 4. cumulative attributes ------------------------------------------------------------

    pub(super) fn update_cumulative_attributes(&mut self, i: ElementIndex) {
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

    pub(super) fn prepare_fifo_pool(&mut self, i: ElementIndex) {
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
    pub(super) fn infer_weights(&mut self) {
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
    pub(super) fn clamp_weights(&mut self) {
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
}
