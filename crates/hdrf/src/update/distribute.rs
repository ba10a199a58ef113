//! Steps 11–13: the top-down distribution of fair shares (classic by suggestion, improved by
//! vector), the promised-guarantee pass and the root fix-up.

use super::*;

impl Update<'_> {
    pub(super) fn set_detailed(&mut self, i: ElementIndex, total: Rv, kind: FairShareType) {
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
    pub(super) fn distribution_order(&self, i: ElementIndex) -> Vec<ElementIndex> {
        if self.mode(i) == PoolMode::Fifo {
            self.order[i].clone()
        } else {
            self.children(i).to_vec()
        }
    }

    pub(super) fn child_suggestions(
        &self,
        i: ElementIndex,
        n: usize,
        fit: f64,
        out: &mut Vec<f64>,
    ) {
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

    pub(super) fn compute_scalar(&mut self, i: ElementIndex, suggestion: f64, kind: FairShareType) {
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

    pub(super) fn fair_share(&self, i: ElementIndex, kind: FairShareType) -> Rv {
        match kind {
            FairShareType::Regular => self.attrs.fair_share[i].total,
            FairShareType::PromisedGuarantee => self.attrs.promised_guarantee_fair_share[i].total,
        }
    }

    pub(super) fn check_children_sum(&mut self, i: ElementIndex, suggested: Rv, used: Rv) {
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
    pub(super) fn child_shares(
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

    pub(super) fn compute_vec(&mut self, i: ElementIndex, target: Rv, kind: FairShareType) {
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

    pub(super) fn compute_promised_guarantee(&mut self, i: ElementIndex) {
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

    pub(super) fn update_root_fair_share(&mut self) {
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
