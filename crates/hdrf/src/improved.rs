//! The fair share by fit factor of a normal pool in improved mode (spec §4.2), and each child's
//! share as a function of that fit factor (used by the vector top-down pass, §5.2).
//!
//! The reference sorts every child's critical points as pairs (x, child) and gives each pair its
//! own unit step of the fit factor: at step k, for the pair (x_k, j_k), child i contributes its
//! right limit at x_k if i < j_k, its left limit if i > j_k, and child j_k itself goes from its
//! left to its right limit (a jump of child j_k becomes a vertical at k). F is the sum of the
//! contributions; child i's share by fit factor is the function through its contributions.
//!
//! Materialising every child's share (as the reference does) costs (steps × children) time
//! and memory. Here a child's share is evaluated when needed from the sorted pairs and the
//! child's own function: at an integer k it is the value arriving at step k (the right limit if
//! i < j_k, else the left limit); strictly between k and k + 1 it is the interpolation, on the
//! segment from (k, value leaving step k) to (k + 1, value arriving at step k + 1), that the
//! reference's function has there. (The builder may merge that segment into a longer horizontal
//! one, which interpolates to the same constant; `fit − k` and `(k + 1) − k` are exact.)
//!
//! F itself is always the exact left-to-right sum at every step, as in the reference, whatever
//! the fan-out (unlike the classic pool sum, see [`crate::plf::Plf::sum_adaptive`]). The vector
//! top-down pass looks for the largest fit factor at which the children's shares, summed left to
//! right, are dominated by the pool's target *without slack*; where a resource is saturated
//! (every child constant on it) the target equals that sum only because both are the same
//! left-to-right fold of the same values. A sum rounded differently in the last bit would stop
//! the fit factor at the start of such a plateau and change the result materially.

use crate::plf::{Builder, MemberCursor, PlfRef, Segment, Value, for_each_limits};
use fairsched_resources::ResourceVector;
use std::cmp::Ordering;
use std::ops::Range;

type Rv = ResourceVector;

/// Buffers of [`ImprovedPool::build`] reused from one pool to the next: the steps' arguments and
/// the running (left, right) sums.
pub(crate) type BuildScratch = (Vec<f64>, Vec<(Rv, Rv)>);

/// What a normal pool keeps in improved mode to evaluate its children's shares by fit factor.
#[derive(Debug)]
pub(crate) struct ImprovedPool {
    /// Step k of the fit factor is the pair `points[k]` = (x, child), sorted by (x, child).
    points: Vec<(f64, u32)>,
    /// The children's functions of the pool's fit factor (S scaled by the relative weight),
    /// concatenated; `ranges[c]` holds child c's.
    segments: Vec<Segment<Rv>>,
    ranges: Vec<Range<usize>>,
    /// Whether no child's arguments decrease (then one search finds a child's segments at two
    /// consecutive steps).
    forward: bool,
}

impl ImprovedPool {
    /// Builds the pool's F into `f` from the children's scaled functions.
    pub(crate) fn build(
        children: &[&[Segment<Rv>]],
        scratch: &mut BuildScratch,
        f: &mut Vec<Segment<Rv>>,
    ) -> ImprovedPool {
        let mut points: Vec<(f64, u32)> = Vec::new();
        let mut segments = Vec::with_capacity(children.iter().map(|c| c.len()).sum());
        let mut ranges = Vec::with_capacity(children.len());
        for (index, child) in children.iter().enumerate() {
            let index = u32::try_from(index).expect("fewer than 2^32 children");
            let mut last = child[0].x0;
            points.push((last, index));
            for s in child.iter() {
                if s.x1 > last {
                    points.push((s.x1, index));
                    last = s.x1;
                }
            }
            let start = segments.len();
            segments.extend_from_slice(child);
            ranges.push(start..segments.len());
        }
        // The pairs are distinct (a child's critical points increase strictly), so any sort
        // gives the reference's order; the stable sort merges the children's sorted runs. With
        // the sign bit clear (the usual case: fit factors are nonnegative) `total_cmp` orders
        // doubles as their bit patterns, so the pairs compare as integers.
        if points.iter().all(|p| p.0.to_bits() >> 63 == 0) {
            points.sort_by_key(|&(x, c)| (u128::from(x.to_bits()) << 32) | u128::from(c));
        } else {
            points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        }
        exact_f(children, &points, scratch, f);
        let forward = children.iter().all(|c| c.iter().all(|s| s.x0 <= s.x1));
        ImprovedPool {
            points,
            segments,
            ranges,
            forward,
        }
    }

    /// Child `c`'s value arriving at step k and leaving it.
    fn at_step(&self, c: usize, k: usize) -> (Rv, Rv) {
        let (x, j) = self.points[k];
        let f = PlfRef::new(&self.segments[self.ranges[c].clone()]);
        step_values(c, j, f.limits_at(x))
    }

    /// Child `c`'s values arriving at and leaving step k, and arriving at step k + 1 (which
    /// exists): what [`Self::at_step`] gives, with one search where no child's arguments
    /// decrease (the first segment reaching the argument of step k + 1, which is not below
    /// that of step k, is found by moving forward from the one reaching step k's).
    fn at_step_and_next(&self, c: usize, k: usize) -> (Rv, Rv, Rv) {
        if !self.forward {
            let (arriving, leaving) = self.at_step(c, k);
            return (arriving, leaving, self.at_step(c, k + 1).0);
        }
        let ((x, j), (x_next, j_next)) = (self.points[k], self.points[k + 1]);
        let segs = &self.segments[self.ranges[c].clone()];
        let n = segs.len();
        // `PlfRef::limits_at` from the first segment with x1 >= x (searched from `p`).
        let limits = |p: usize, x: f64| {
            let mut i = p.min(n - 1);
            if segs[i].x1 == x && i + 1 < n && segs[i + 1].is_vertical() {
                i += 1;
            }
            segs[i].limits_at(x)
        };
        let mut p = segs.partition_point(|s| s.x1 < x);
        let (arriving, leaving) = step_values(c, j, limits(p, x));
        while p < n && segs[p].x1 < x_next {
            p += 1;
        }
        let (next, _) = step_values(c, j_next, limits(p, x_next));
        (arriving, leaving, next)
    }

    /// An evaluator of all children's shares, with room for `children` values.
    pub(crate) fn evaluator(&self) -> ShareEvaluator<'_> {
        let n = self.ranges.len();
        ShareEvaluator {
            pool: self,
            cached: None,
            arriving: Vec::with_capacity(n),
            leaving: Vec::with_capacity(n),
            arriving_next: Vec::with_capacity(n),
            delta: Vec::with_capacity(n),
        }
    }
}

/// Child `c`'s values arriving at and leaving a step whose stepping child is `j`, from its
/// (left, right) limits at the step's argument: children before `j` have already stepped
/// (their right limit), children after it have not (their left limit), `j` itself steps.
fn step_values(c: usize, j: u32, (left, right): (Rv, Rv)) -> (Rv, Rv) {
    match c.cmp(&(j as usize)) {
        Ordering::Less => (right, right),
        Ordering::Greater => (left, left),
        Ordering::Equal => (left, right),
    }
}

/// Evaluates every child's share at a fit factor, keeping the values at the ends of the last
/// unit interval used (a binary search over the fit factor mostly probes one interval).
#[derive(Debug)]
pub(crate) struct ShareEvaluator<'a> {
    pool: &'a ImprovedPool,
    /// The step k whose values are cached.
    cached: Option<usize>,
    /// Per child: value arriving at step k, leaving it, and arriving at step k + 1.
    arriving: Vec<Rv>,
    leaving: Vec<Rv>,
    arriving_next: Vec<Rv>,
    /// `arriving_next − leaving` (the interpolation's slope on the unit interval).
    delta: Vec<Rv>,
}

impl ShareEvaluator<'_> {
    fn load(&mut self, k: usize) {
        if self.cached == Some(k) {
            return;
        }
        let pool = self.pool;
        let last = pool.points.len() - 1;
        self.arriving.clear();
        self.leaving.clear();
        self.arriving_next.clear();
        self.delta.clear();
        for c in 0..pool.ranges.len() {
            if k < last {
                let (arriving, leaving, next) = pool.at_step_and_next(c, k);
                self.arriving.push(arriving);
                self.leaving.push(leaving);
                self.arriving_next.push(next);
                self.delta.push(next.sub(leaving));
            } else {
                let (arriving, leaving) = pool.at_step(c, k);
                self.arriving.push(arriving);
                self.leaving.push(leaving);
            }
        }
        self.cached = Some(k);
    }

    /// The step whose arriving values are the shares at `fit`: at the bounds and at integers.
    #[inline]
    fn step_at(&self, fit: f64) -> Option<usize> {
        let last = self.pool.points.len() - 1;
        if fit <= 0.0 {
            Some(0)
        } else if fit >= last as f64 {
            debug_assert!(fit == last as f64, "fit factor {fit} beyond the domain");
            Some(last)
        } else if fit == fit.floor() {
            Some(fit as usize)
        } else {
            None
        }
    }

    /// The children's shares at `fit`, added left to right (starting from zero): what adding up
    /// [`Self::shares`] gives, without storing the shares. Strictly inside a unit interval every
    /// child's share is `Segment::interpolate` on (k, leaving) → (k + 1, arriving next), whose
    /// parameter t is the same for all children.
    pub(crate) fn sum(&mut self, fit: f64) -> Rv {
        debug_assert!(fit >= 0.0, "fit factor {fit} below the domain");
        if let Some(k) = self.step_at(fit) {
            self.load(k);
            return self.arriving.iter().fold(Rv::ZERO, |acc, v| acc.add(*v));
        }
        let k = fit.floor() as usize;
        self.load(k);
        let (x0, x1) = (k as f64, (k + 1) as f64);
        let t = (fit - x0) / (x1 - x0);
        let mut sum = Rv::ZERO;
        if t < 0.5 {
            for (y0, d) in self.leaving.iter().zip(&self.delta) {
                sum = sum.add(y0.add(d.mul(t)));
            }
        } else {
            let u = 1.0 - t;
            for (y1, d) in self.arriving_next.iter().zip(&self.delta) {
                sum = sum.add(y1.sub(d.mul(u)));
            }
        }
        sum
    }

    /// Every child's share at fit factor `fit` (in the pool's F domain `[0, steps − 1]`), into
    /// `out`: the value at `fit` of the function the reference builds for each child.
    pub(crate) fn shares(&mut self, fit: f64, out: &mut Vec<Rv>) {
        debug_assert!(fit >= 0.0, "fit factor {fit} below the domain");
        out.clear();
        // At the bounds and at integers: the value arriving at that step.
        if let Some(k) = self.step_at(fit) {
            self.load(k);
            out.extend_from_slice(&self.arriving);
            return;
        }
        let k = fit.floor() as usize;
        self.load(k);
        let (x0, x1) = (k as f64, (k + 1) as f64);
        for c in 0..self.leaving.len() {
            let segment = Segment::new(x0, self.leaving[c], x1, self.arriving_next[c]);
            out.push(segment.value_at(fit));
        }
    }
}

/// The reference's F: at every step, the children's contributions added left to right.
///
/// Up to the stepping child the left and right sums receive the same terms, so they agree
/// there; they only part at the stepping child (when it jumps). The sums are accumulated child by
/// child (each child swept once over all the steps), which gives every step its terms in child
/// order: the same additions as adding left to right at each step.
fn exact_f(
    children: &[&[Segment<Rv>]],
    points: &[(f64, u32)],
    scratch: &mut BuildScratch,
    f: &mut Vec<Segment<Rv>>,
) {
    if !children.iter().all(|c| c.iter().all(|s| s.x0 <= s.x1)) {
        exact_f_by_step(children, points, f);
        return;
    }
    let (xs, sums) = scratch;
    xs.clear();
    xs.extend(points.iter().map(|p| p.0));
    sums.clear();
    sums.resize(points.len(), (Rv::ZERO, Rv::ZERO));
    for (i, child) in children.iter().enumerate() {
        let i = i as u32;
        for_each_limits(child, xs, |k, l, r, critical| {
            let sum = &mut sums[k];
            if critical {
                // Before the stepping child j: the right limit; after it: the left limit; the
                // stepping child itself goes from its left to its right limit.
                let j = points[k].1;
                let (cl, cr) = if i < j {
                    (r, r)
                } else if i > j {
                    (l, l)
                } else {
                    (l, r)
                };
                sum.0 = sum.0.add(cl);
                sum.1 = sum.1.add(cr);
            } else {
                sum.0 = sum.0.add(l);
                sum.1 = sum.1.add(l);
            }
        });
    }
    let mut builder = Builder::from_buffer(std::mem::take(f));
    let mut fit = 0.0;
    for &(left, right) in sums.iter() {
        builder.add_sample(fit, left, right);
        fit += 1.0;
    }
    *f = builder.finish_buffer();
}

/// [`exact_f`] step by step, with a cursor per child (for children whose arguments decrease
/// somewhere).
fn exact_f_by_step(children: &[&[Segment<Rv>]], points: &[(f64, u32)], f: &mut Vec<Segment<Rv>>) {
    let mut traversers: Vec<MemberCursor<'_, Rv>> =
        children.iter().map(|c| MemberCursor::new(c)).collect();
    let mut builder = Builder::from_buffer(std::mem::take(f));
    let mut fit = 0.0;
    for &(x, j) in points {
        let j = j as usize;
        let (before, rest) = traversers.split_at_mut(j);
        let (stepping, after) = rest.split_first_mut().expect("the stepping child exists");
        let mut acc = Rv::ZERO;
        for t in before {
            acc = acc.add(t.limit(x, true));
        }
        let (cl, cr) = stepping.limits(x);
        let mut left = acc.add(cl);
        if cl.same(cr) {
            for t in after {
                left = left.add(t.limit(x, false));
            }
            builder.add_sample(fit, left, left);
        } else {
            let mut right = acc.add(cr);
            for t in after {
                let v = t.limit(x, false);
                left = left.add(v);
                right = right.add(v);
            }
            builder.add_sample(fit, left, right);
        }
        fit += 1.0;
    }
    *f = builder.finish_buffer();
}
