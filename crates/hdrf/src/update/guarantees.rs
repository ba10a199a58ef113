//! Steps 6–7: guarantees validated and adjusted at the root, tiers, estimated guarantee
//! shares, and FIFO children reordered for guarantee utilisation.

use super::*;

impl Update<'_> {
    pub(super) fn validate_and_adjust_guarantees(&mut self) {
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

    pub(super) fn compute_tiers(&mut self, i: ElementIndex) {
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

    pub(super) fn adjust_strong_guarantees(&mut self, p: ElementIndex) {
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

    pub(super) fn compute_estimated_guarantee_share(&mut self, p: ElementIndex) {
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

    pub(super) fn step_function_allowed(&self, pool: ElementIndex) -> bool {
        self.tree
            .element(pool)
            .pool()
            .is_some_and(|p| p.allow_gang_step_function)
    }

    pub(super) fn is_gang(&self, i: ElementIndex) -> bool {
        self.tree.element(i).operation().is_some_and(|o| o.gang)
    }

    pub(super) fn reorder_fifo_children(&mut self, p: ElementIndex) {
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
}
