//! Step 10: the bottom-up functions of every element — F (fair share by fit factor), M (max
//! fit factor by suggestion) and S (fair share by suggestion) — M and S by one walk over F
//! (`crate::envelope`) where F suits it, else (the one fallback) as the oracle builds them:
//! per-resource inverses, their pointwise minimum, the composition and its compression, on
//! segments (`crate::plf`).

use super::*;

impl Update<'_> {
    pub(super) fn functions_of(&self, i: ElementIndex) -> &Functions {
        self.functions[i]
            .as_ref()
            .expect("fair-share functions are prepared before use")
    }

    /// S, the fair share by suggestion.
    pub(super) fn s(&self, i: ElementIndex) -> PlfRef<'_, Rv> {
        PlfRef::new(&self.s_arena[self.functions_of(i).s.clone()])
    }

    /// M, the maximal fit factor by suggestion (pools in classic mode), at `x`.
    pub(super) fn m_value_at(&self, i: ElementIndex, x: f64) -> f64 {
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
    pub(super) fn root_at_one(&mut self) {
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
        self.not_reusable(ROOT);
        self.timings.max_fit_factor_ns += self.now_ns() - t0;
    }

    /// Builds F, M and S of `i` (and of its subtree first), unless they exist (or reuses the
    /// previous update's, `super::reuse`).
    pub(super) fn prepare_functions(&mut self, i: ElementIndex) {
        let mut scratch = std::mem::take(&mut self.scratch);
        self.prepare_functions_with(i, &mut scratch);
        self.scratch = scratch;
    }

    /// [`Self::prepare_functions`] with the scratch buffers lent for the whole subtree.
    pub(super) fn prepare_functions_with(&mut self, i: ElementIndex, scratch: &mut Scratch) {
        if self.functions[i].is_some() {
            return;
        }
        if !self.is_operation(i) {
            for k in 0..self.children(i).len() {
                let c = self.children(i)[k];
                self.prepare_functions_with(c, scratch);
            }
        }
        let functions = self.build_or_reuse(i, scratch);
        self.functions[i] = Some(functions);
    }

    /// F into `scratch.f`, then M and S appended to the arenas.
    pub(super) fn build_functions(&mut self, i: ElementIndex, scratch: &mut Scratch) -> Functions {
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
        // The fallback: M and S as the oracle builds them, on segments (any F).
        self.max_fit_factor_by_suggestion(i, monotone, scratch);
        let m_size = scratch.min_acc.len();
        let t2 = self.now_ns();
        // S goes straight into its arena.
        let s_start = self.s_arena.len();
        compose_into(
            &scratch.f,
            &scratch.min_acc,
            &mut scratch.compose,
            &mut scratch.composed,
        );
        let t3 = self.now_ns();
        compress_into(&scratch.composed, COMPRESS_FUNCTION_EPSILON, &mut scratch.s);
        self.s_arena.extend_from_slice(&scratch.s);
        let t4 = self.now_ns();
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
            let start = self.m_arena.len();
            self.m_arena.extend_from_slice(&scratch.min_acc);
            KeptM::Segments(start..self.m_arena.len())
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
    pub(super) fn warn_above_limits(&mut self, i: ElementIndex, lo: &Rv) {
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
    pub(super) fn m_bounds(
        &mut self,
        i: ElementIndex,
        f: &[Segment<Rv>],
    ) -> [(f64, f64); RESOURCE_COUNT] {
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
    pub(super) fn build_by_envelope(
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
    pub(super) fn m_bounds_quiet(
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

    pub(super) fn operation_fair_share_by_fit_factor(
        &self,
        i: ElementIndex,
        out: &mut Vec<Segment<Rv>>,
    ) {
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

    pub(super) fn fifo_fair_share_by_fit_factor(&self, i: ElementIndex, scratch: &mut Scratch) {
        let order = &self.order[i];
        let out = &mut scratch.f;
        if order.is_empty() {
            out.clear();
            out.push(Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO));
            return;
        }
        // The children's S laid end to end, which needs each on [0, 1] from zero: true of
        // operations, not always of a pool in a FIFO pool (warned of in step 4). It is the
        // exact sum below bit for bit (at x in [i, i + 1] that sum adds, left to right, the
        // earlier children's right values, child i's value and zeros, and `x + 0.0 == x`), in
        // linear time instead of (children × points): so it is taken whatever
        // `enable_fast_fifo_fair_share_by_fit_factor_computation` says, which only names the
        // upstream switch (a FIFO pool of 3,000 waiting operations made the sum most of a
        // replay's update). The differential tests compare it with the reference's sum.
        if order.iter().all(|&c| {
            let s = self.s(c);
            s.left_bound() == 0.0 && s.right_bound() == 1.0 && s.segments()[0].y0 == Rv::ZERO
        }) {
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
        // Always the exact sum.
        let slices: Vec<&[Segment<Rv>]> = shifted.iter().map(Plf::segments).collect();
        sum_exact_into(&slices, &mut scratch.sum, out);
    }

    pub(super) fn min_child_weight(&self, i: ElementIndex) -> f64 {
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
    pub(super) fn scaled_children<'a>(
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
    pub(super) fn normal_fair_share_by_fit_factor(
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
    /// resource order, into `scratch.min_acc`. Reads F from `scratch.f`. (For F that suits it,
    /// [`Self::build_by_envelope`] gives the same function by one walk over F.)
    pub(super) fn max_fit_factor_by_suggestion(
        &mut self,
        i: ElementIndex,
        monotone: bool,
        scratch: &mut Scratch,
    ) {
        let bounds = self.m_bounds(i, &scratch.f);
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
    }

    // ---- 11. top-down ------------------------------------------------------------------------
}

/// Whether a child's S, as a function of its parent's fit factor (the argument divided by the
/// child's relative weight `k`, extended to 1 with its last value), is S itself: for `k == 1`
/// with S ending at 1 both steps reproduce S exactly (x / 1 == x, nothing to extend; the
/// builder's merges change nothing in a nondecreasing function it built).
fn borrows_scaled_child(s: PlfRef<'_, Rv>, k: f64) -> bool {
    k == 1.0 && s.right_bound() >= 1.0 && s.is_nondecreasing()
}
