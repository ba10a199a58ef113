//! Integral guarantees: step 5 (accumulated volumes consumed and refilled, free volume
//! distributed) and steps 8–9 (burst and relaxed integral shares).

use super::*;

impl Update<'_> {
    pub(super) fn consume_and_refill_integral_pools(&mut self) {
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

    pub(super) fn update_accumulated_volume(&mut self, p: ElementIndex) {
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

    pub(super) fn update_overflow_and_acceptable_volumes(&mut self, i: ElementIndex) {
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

    pub(super) fn distribute_free_volume(&mut self, i: ElementIndex) {
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
}

impl Update<'_> {
    pub(super) fn adjust_proposed_integral_share(
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

    pub(super) fn hierarchical_available_limits_share(&mut self, i: ElementIndex) -> Rv {
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

    pub(super) fn increase_hierarchical_integral_share(&mut self, i: ElementIndex, delta: Rv) {
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
    pub(super) fn drop_functions(&mut self, p: ElementIndex) {
        let mut cur = Some(p);
        while let Some(c) = cur {
            self.functions[c] = None;
            cur = self.tree.element(c).parent;
        }
    }

    pub(super) fn integral_share_ratio_by_volume(&self, p: ElementIndex) -> f64 {
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

    pub(super) fn update_burst_pool_integral_shares(&mut self) {
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

    pub(super) fn update_relaxed_pool_integral_shares(&mut self) {
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
}
