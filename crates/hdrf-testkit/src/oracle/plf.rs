//! Reference copy (test oracle) of the original `plf` module.
//!
//! Monotone piecewise-linear functions over `f64` (scalar) and [`ResourceVector`] (vector).
//!
//! A function is a list of segments `(x0, y0) → (x1, y1)` with `x0 ≤ x1` that share endpoints
//! exactly; a jump is a vertical segment `(x, y−) → (x, y+)`. Functions are left-continuous:
//! [`Plf::value_at`] is the left limit. Every operation here reproduces the arithmetic of the
//! reference implementation step by step (the two-sided interpolation formula, sampling of left
//! and right limits at critical points, the merge rules of the builder), because the
//! fair-share tests compare some results bit for bit.

use fairsched_resources::{RESOURCE_COUNT, ResourceVector};
use std::fmt::Debug;

/// A value a function can take: a scalar or a resource vector.
pub trait Value: Copy + PartialEq + Debug {
    fn zero() -> Self;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn mul(self, k: f64) -> Self;
}

impl Value for f64 {
    #[inline]
    fn zero() -> f64 {
        0.0
    }
    #[inline]
    fn add(self, o: f64) -> f64 {
        self + o
    }
    #[inline]
    fn sub(self, o: f64) -> f64 {
        self - o
    }
    #[inline]
    fn mul(self, k: f64) -> f64 {
        self * k
    }
}

impl Value for ResourceVector {
    #[inline]
    fn zero() -> ResourceVector {
        ResourceVector::ZERO
    }
    #[inline]
    fn add(self, o: ResourceVector) -> ResourceVector {
        self + o
    }
    #[inline]
    fn sub(self, o: ResourceVector) -> ResourceVector {
        self - o
    }
    #[inline]
    fn mul(self, k: f64) -> ResourceVector {
        self * k
    }
}

/// One segment of a function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment<V> {
    pub x0: f64,
    pub y0: V,
    pub x1: f64,
    pub y1: V,
}

impl<V: Value> Segment<V> {
    #[inline]
    pub fn new(x0: f64, y0: V, x1: f64, y1: V) -> Segment<V> {
        debug_assert!(x0 <= x1, "segment bounds out of order: {x0} > {x1}");
        Segment { x0, y0, x1, y1 }
    }

    #[inline]
    pub fn is_vertical(&self) -> bool {
        self.x0 == self.x1 && self.y0 != self.y1
    }

    #[inline]
    pub fn is_horizontal(&self) -> bool {
        self.x0 != self.x1 && self.y0 == self.y1
    }

    #[inline]
    pub fn is_point(&self) -> bool {
        self.x0 == self.x1 && self.y0 == self.y1
    }

    #[inline]
    pub fn is_tilted(&self) -> bool {
        self.x0 != self.x1 && self.y0 != self.y1
    }

    #[inline]
    pub fn is_defined_at(&self, x: f64) -> bool {
        x >= self.x0 && x <= self.x1
    }

    /// Linear interpolation, exact at both ends and monotone: from the left end for `t < 0.5`,
    /// from the right end otherwise.
    #[inline]
    pub fn interpolate(&self, x: f64) -> V {
        let t = (x - self.x0) / (self.x1 - self.x0);
        if t < 0.5 {
            self.y0.add(self.y1.sub(self.y0).mul(t))
        } else {
            self.y1.sub(self.y1.sub(self.y0).mul(1.0 - t))
        }
    }

    /// (left limit, right limit) at `x`: both ends for a vertical (or point) segment, the
    /// interpolated value twice otherwise.
    #[inline]
    pub fn limits_at(&self, x: f64) -> (V, V) {
        if self.x0 == self.x1 {
            (self.y0, self.y1)
        } else {
            let v = self.interpolate(x);
            (v, v)
        }
    }

    /// Left-continuous value (the left limit).
    #[inline]
    pub fn value_at(&self, x: f64) -> V {
        self.limits_at(x).0
    }

    #[must_use]
    pub fn shift(&self, dx: f64, dy: V) -> Segment<V> {
        Segment::new(self.x0 + dx, self.y0.add(dy), self.x1 + dx, self.y1.add(dy))
    }

    #[must_use]
    pub fn scale_argument(&self, k: f64) -> Segment<V> {
        Segment::new(self.x0 / k, self.y0, self.x1 / k, self.y1)
    }
}

impl Segment<f64> {
    /// Swaps arguments and values.
    #[must_use]
    pub fn transpose(&self) -> Segment<f64> {
        Segment::new(self.y0, self.x0, self.y1, self.x1)
    }
}

/// Appends `seg` to `segs`, merging as the reference builder does: a point segment is dropped,
/// a point before `seg` is replaced, two verticals merge, two horizontals merge.
#[inline]
fn push_segment<V: Value>(segs: &mut Vec<Segment<V>>, seg: Segment<V>) {
    if let Some(last) = segs.last_mut() {
        debug_assert!(
            last.x1 == seg.x0 && last.y1 == seg.y0,
            "segments must touch"
        );
        if seg.is_point() {
            return;
        }
        if last.is_point() {
            *last = seg;
            return;
        }
        if (last.is_vertical() && seg.is_vertical())
            || (last.is_horizontal() && seg.is_horizontal())
        {
            last.x1 = seg.x1;
            last.y1 = seg.y1;
            return;
        }
    }
    segs.push(seg);
}

/// Builds a function point by point or segment by segment.
#[derive(Debug)]
pub struct Builder<V> {
    segs: Vec<Segment<V>>,
    last: Option<(f64, V)>,
}

impl<V: Value> Default for Builder<V> {
    fn default() -> Self {
        Builder::new()
    }
}

impl<V: Value> Builder<V> {
    pub fn new() -> Builder<V> {
        Builder {
            segs: Vec::new(),
            last: None,
        }
    }

    pub fn with_capacity(n: usize) -> Builder<V> {
        Builder {
            segs: Vec::with_capacity(n),
            last: None,
        }
    }

    /// Adds a point, connected to the previous one by a segment.
    #[inline]
    pub fn add_point(&mut self, x: f64, y: V) {
        if let Some((lx, ly)) = self.last {
            push_segment(&mut self.segs, Segment::new(lx, ly, x, y));
        }
        self.last = Some((x, y));
    }

    /// Adds a segment starting at the previous end.
    #[inline]
    pub fn push_segment(&mut self, seg: Segment<V>) {
        push_segment(&mut self.segs, seg);
        self.last = Some((seg.x1, seg.y1));
    }

    pub fn finish(self) -> Plf<V> {
        assert!(
            !self.segs.is_empty(),
            "a function needs at least one segment"
        );
        Plf { segs: self.segs }
    }
}

/// A piecewise-linear function on `[left_bound, right_bound]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plf<V> {
    segs: Vec<Segment<V>>,
}

/// Sorted, deduplicated critical points restricted to `[lb, rb]`.
fn clear_and_sort(points: &mut Vec<f64>, lb: f64, rb: f64) {
    points.retain(|&p| p >= lb && p <= rb);
    points.sort_unstable_by(f64::total_cmp);
    points.dedup();
}

/// Appends the left bound and every strictly increasing segment end.
fn critical_points_into<V: Value>(f: &Plf<V>, out: &mut Vec<f64>) {
    let mut last = f.left_bound();
    out.push(last);
    for s in &f.segs {
        if s.x1 > last {
            out.push(s.x1);
            last = s.x1;
        }
    }
}

/// A cursor for sampling a function at nondecreasing arguments in amortised O(1).
#[derive(Debug)]
pub struct Traverser<'a, V> {
    segs: &'a [Segment<V>],
    cur: usize,
}

impl<V: Value> Traverser<'_, V> {
    /// The first segment with `x1 >= x`, or the vertical one right after it when it ends at x.
    #[inline]
    fn segment_at(&mut self, x: f64) -> &Segment<V> {
        while self.segs[self.cur].x1 < x && self.cur + 1 < self.segs.len() {
            self.cur += 1;
        }
        if self.segs[self.cur].x1 == x
            && self.cur + 1 < self.segs.len()
            && self.segs[self.cur + 1].is_vertical()
        {
            self.cur += 1;
        }
        &self.segs[self.cur]
    }

    /// (left limit, right limit) at `x`.
    #[inline]
    pub fn limits_at(&mut self, x: f64) -> (V, V) {
        self.segment_at(x).limits_at(x)
    }
}

impl<V: Value> Plf<V> {
    /// A single linear segment.
    pub fn linear(x0: f64, y0: V, x1: f64, y1: V) -> Plf<V> {
        let mut b = Builder::with_capacity(1);
        b.push_segment(Segment::new(x0, y0, x1, y1));
        b.finish()
    }

    /// A constant function.
    pub fn constant(x0: f64, x1: f64, y: V) -> Plf<V> {
        Plf::linear(x0, y, x1, y)
    }

    /// Builds from critical points: samples (left, right) limits at each point (sorted,
    /// deduplicated, restricted to the bounds, which must be among them) and connects them.
    pub fn create(
        mut sample: impl FnMut(f64) -> (V, V),
        lb: f64,
        rb: f64,
        mut points: Vec<f64>,
    ) -> Plf<V> {
        clear_and_sort(&mut points, lb, rb);
        assert!(
            points.first() == Some(&lb) && points.last() == Some(&rb),
            "critical points must include both bounds"
        );
        let mut b = Builder::with_capacity(points.len() * 2);
        for x in points {
            let (l, r) = sample(x);
            b.add_point(x, l);
            b.add_point(x, r);
        }
        b.finish()
    }

    pub fn segments(&self) -> &[Segment<V>] {
        &self.segs
    }

    /// Number of segments.
    pub fn size(&self) -> usize {
        self.segs.len()
    }

    pub fn left_bound(&self) -> f64 {
        self.segs[0].x0
    }

    pub fn right_bound(&self) -> f64 {
        self.segs[self.segs.len() - 1].x1
    }

    pub fn left_value(&self) -> V {
        self.segs[0].y0
    }

    /// Value at the right bound (the function must be trimmed).
    pub fn right_value(&self) -> V {
        self.segs[self.segs.len() - 1].y1
    }

    pub fn is_defined_at(&self, x: f64) -> bool {
        x >= self.left_bound() && x <= self.right_bound()
    }

    pub fn is_trimmed(&self) -> bool {
        !self.segs[self.segs.len() - 1].is_vertical()
    }

    pub fn is_trimmed_left(&self) -> bool {
        !self.segs[0].is_vertical()
    }

    /// A cursor starting at the first segment.
    pub fn traverser(&self) -> Traverser<'_, V> {
        Traverser {
            segs: &self.segs,
            cur: 0,
        }
    }

    /// Index of the first segment with `x1 >= x`.
    #[inline]
    fn left_segment_index(&self, x: f64) -> usize {
        let i = self.segs.partition_point(|s| s.x1 < x);
        i.min(self.segs.len() - 1)
    }

    /// Index of the last segment with `x0 <= x`.
    #[inline]
    fn right_segment_index(&self, x: f64) -> usize {
        self.segs.partition_point(|s| s.x0 <= x).saturating_sub(1)
    }

    /// The segment used for (left, right) sampling at `x`.
    pub fn segment_at(&self, x: f64) -> &Segment<V> {
        let mut i = self.left_segment_index(x);
        if self.segs[i].x1 == x && i + 1 < self.segs.len() && self.segs[i + 1].is_vertical() {
            i += 1;
        }
        &self.segs[i]
    }

    /// Left limit at `x`.
    #[inline]
    pub fn left_limit_at(&self, x: f64) -> V {
        self.segs[self.left_segment_index(x)].limits_at(x).0
    }

    /// Right limit at `x`.
    #[inline]
    pub fn right_limit_at(&self, x: f64) -> V {
        self.segs[self.right_segment_index(x)].limits_at(x).1
    }

    /// The (left-continuous) value at `x`.
    #[inline]
    pub fn value_at(&self, x: f64) -> V {
        self.left_limit_at(x)
    }

    /// (left limit, right limit) at `x`.
    pub fn limits_at(&self, x: f64) -> (V, V) {
        self.segment_at(x).limits_at(x)
    }

    /// Drops a vertical segment at the right end (meaningless for a left-continuous function).
    #[must_use]
    pub fn trim(mut self) -> Plf<V> {
        let n = self.segs.len();
        if self.segs[n - 1].is_vertical() {
            if n > 1 {
                self.segs.pop();
            } else {
                let s = self.segs[0];
                let v = s.value_at(s.x0);
                self.segs[0] = Segment::new(s.x0, v, s.x0, v);
            }
        }
        self
    }

    /// Drops a vertical segment at the left end; a lone vertical becomes its upper point.
    #[must_use]
    pub fn trim_left(mut self) -> Plf<V> {
        if self.segs[0].is_vertical() {
            if self.segs.len() > 1 {
                self.segs.remove(0);
            } else {
                let s = self.segs[0];
                self.segs[0] = Segment::new(s.x0, s.y1, s.x0, s.y1);
            }
        }
        self
    }

    /// Divides the domain by `k`.
    #[must_use]
    pub fn scale_argument(&self, k: f64) -> Plf<V> {
        let mut b = Builder::with_capacity(self.segs.len());
        for s in &self.segs {
            b.push_segment(s.scale_argument(k));
        }
        b.finish()
    }

    /// Shifts the argument by `dx` and the value by `dy`.
    #[must_use]
    pub fn shift(&self, dx: f64, dy: V) -> Plf<V> {
        let mut b = Builder::with_capacity(self.segs.len());
        for s in &self.segs {
            b.push_segment(s.shift(dx, dy));
        }
        b.finish()
    }

    /// Restricts the domain to `[l, r]` (sampling both limits at the new bounds, so a jump
    /// exactly at a bound stays as a vertical segment).
    #[must_use]
    pub fn narrow(&self, l: f64, r: f64) -> Plf<V> {
        assert!(self.is_defined_at(l) && self.is_defined_at(r) && l <= r);
        let zero = Plf::constant(l, r, V::zero());
        binary_op(self, &zero, V::add)
    }

    /// Extends the domain to `[lb, rb]` with constant values `lv` and `rv` (inserting vertical
    /// segments where they differ from the end values).
    #[must_use]
    pub fn extend(&self, lb: f64, lv: V, rb: f64, rv: V) -> Plf<V> {
        assert!(lb <= self.left_bound());
        let mut b = Builder::with_capacity(self.segs.len() + 4);
        let (flb, frb) = (self.left_bound(), self.right_bound());
        if lb < flb {
            b.push_segment(Segment::new(lb, lv, flb, lv));
            let first = self.segs[0].y0;
            if lv != first {
                b.push_segment(Segment::new(flb, lv, flb, first));
            }
        }
        for s in &self.segs {
            b.push_segment(*s);
        }
        if frb < rb {
            let last = self.segs[self.segs.len() - 1].y1;
            if rv != last {
                b.push_segment(Segment::new(frb, last, frb, rv));
            }
            b.push_segment(Segment::new(frb, rv, rb, rv));
        }
        b.finish()
    }

    /// Extends the domain to `[lb, rb]` with the end values.
    #[must_use]
    pub fn extend_const(&self, lb: f64, rb: f64) -> Plf<V> {
        self.extend(lb, self.segs[0].y0, rb, self.segs[self.segs.len() - 1].y1)
    }

    /// Extends to the right up to `rb` with the end value.
    #[must_use]
    pub fn extend_right(&self, rb: f64) -> Plf<V> {
        self.extend(
            self.left_bound(),
            self.left_value(),
            rb,
            self.segs[self.segs.len() - 1].y1,
        )
    }

    /// Sum of functions over the intersection of their domains.
    pub fn sum(fs: &[Plf<V>]) -> Plf<V> {
        assert!(!fs.is_empty());
        let lb = fs.iter().map(Plf::left_bound).fold(f64::MIN, f64::max);
        let rb = fs.iter().map(Plf::right_bound).fold(f64::MAX, f64::min);
        assert!(lb <= rb);
        let mut points = Vec::with_capacity(fs.iter().map(|f| f.segs.len() + 1).sum());
        for f in fs {
            critical_points_into(f, &mut points);
        }
        let mut ts: Vec<Traverser<'_, V>> = fs.iter().map(Plf::traverser).collect();
        Plf::create(
            |x| {
                let mut l = V::zero();
                let mut r = V::zero();
                for t in ts.iter_mut() {
                    let (cl, cr) = t.limits_at(x);
                    l = l.add(cl);
                    r = r.add(cr);
                }
                (l, r)
            },
            lb,
            rb,
            points,
        )
    }

    /// `self ∘ g` for a nondecreasing scalar `g` whose values lie in `self`'s domain.
    pub fn compose(&self, g: &Plf<f64>) -> Plf<V> {
        // (argument, value of g) at g's own breakpoints...
        let mut points: Vec<(f64, f64)> = Vec::with_capacity(g.segs.len() + 1 + self.segs.len());
        points.push((g.segs[0].x0, g.segs[0].y0));
        for s in &g.segs {
            points.push((s.x1, s.y1));
        }
        // ...plus the arguments where g crosses a breakpoint of self inside a tilted segment.
        let inverse = g.transpose();
        let mut own = Vec::with_capacity(self.segs.len() + 1);
        critical_points_into(self, &mut own);
        for v in own {
            if inverse.is_defined_at(v) {
                let inv_seg = *inverse.segment_at(v);
                let seg = inv_seg.transpose();
                if seg.is_tilted() && v != seg.y0 && v != seg.y1 {
                    points.push((inv_seg.value_at(v), v));
                }
            }
        }
        points.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));

        let n = points.len();
        let mut b = Builder::with_capacity(n * 2);
        for i in 0..n {
            let (x, v) = points[i];
            if i == 0 || points[i - 1].0 != x {
                b.add_point(x, self.left_limit_at(v));
            }
            if i + 1 == n || points[i + 1].0 != x {
                let right = if i + 1 < n && points[i + 1].1 > v {
                    self.right_limit_at(v)
                } else {
                    self.value_at(v)
                };
                b.add_point(x, right);
            }
        }
        b.finish().trim()
    }
}

/// Applies `op` pointwise over the intersection of the domains.
fn binary_op<V: Value>(a: &Plf<V>, b: &Plf<V>, op: impl Fn(V, V) -> V) -> Plf<V> {
    let lb = a.left_bound().max(b.left_bound());
    let rb = a.right_bound().min(b.right_bound());
    let mut points = Vec::with_capacity(a.segs.len() + b.segs.len() + 2);
    critical_points_into(a, &mut points);
    critical_points_into(b, &mut points);
    let mut ta = a.traverser();
    let mut tb = b.traverser();
    Plf::create(
        |x| {
            let (al, ar) = ta.limits_at(x);
            let (bl, br) = tb.limits_at(x);
            (op(al, bl), op(ar, br))
        },
        lb,
        rb,
        points,
    )
}

impl Plf<f64> {
    /// Swaps arguments and values (for nondecreasing functions: the inverse, with flat parts
    /// becoming jumps).
    #[must_use]
    pub fn transpose(&self) -> Plf<f64> {
        Plf {
            segs: self.segs.iter().map(Segment::transpose).collect(),
        }
    }

    /// Pointwise minimum of two functions over the intersection of their domains.
    pub fn pointwise_min(a: &Plf<f64>, b: &Plf<f64>) -> Plf<f64> {
        let lb = a.left_bound().max(b.left_bound());
        let rb = a.right_bound().min(b.right_bound());
        assert!(lb <= rb);
        let mut points = Vec::with_capacity(a.segs.len() + b.segs.len() + 4);
        critical_points_into(a, &mut points);
        critical_points_into(b, &mut points);
        clear_and_sort(&mut points, lb, rb);

        // Crossings strictly between consecutive critical points.
        let initial = points.len();
        let mut ta = 0usize;
        let mut tb = 0usize;
        for i in 1..initial {
            let (l, r) = (points[i - 1], points[i]);
            // Last segment with x0 <= l, moving forward only.
            while ta + 1 < a.segs.len() && a.segs[ta + 1].x0 <= l {
                ta += 1;
            }
            while tb + 1 < b.segs.len() && b.segs[tb + 1].x0 <= l {
                tb += 1;
            }
            let (sa, sb) = (a.segs[ta], b.segs[tb]);
            // Lower at l first; ties keep the first argument as "lower".
            let (lo, hi) = if sb.value_at(l) < sa.value_at(l) {
                (sb, sa)
            } else {
                (sa, sb)
            };
            if lo.value_at(l) < hi.value_at(l) && lo.value_at(r) > hi.value_at(r) {
                points.push(inverse_lower_bound(l, r, |m| {
                    lo.value_at(m) <= hi.value_at(m)
                }));
            }
        }

        let mut ta = a.traverser();
        let mut tb = b.traverser();
        Plf::create(
            |x| {
                let (al, ar) = ta.limits_at(x);
                let (bl, br) = tb.limits_at(x);
                (al.min(bl), ar.min(br))
            },
            lb,
            rb,
            points,
        )
    }

    /// Pointwise minimum of several functions, folded left to right.
    pub fn pointwise_min_all(fs: &[Plf<f64>]) -> Plf<f64> {
        let mut acc = fs[0].clone();
        for f in &fs[1..] {
            acc = Plf::pointwise_min(&acc, f);
        }
        acc
    }

    /// Returns true when the function never decreases.
    pub fn is_nondecreasing(&self) -> bool {
        self.segs.iter().all(|s| s.y0 <= s.y1)
    }
}

impl Plf<ResourceVector> {
    /// One component as a scalar function.
    pub fn component(&self, r: usize) -> Plf<f64> {
        let mut b = Builder::with_capacity(self.segs.len());
        for s in &self.segs {
            b.push_segment(Segment::new(s.x0, s.y0[r], s.x1, s.y1[r]));
        }
        b.finish()
    }

    /// Returns true when no component ever decreases.
    pub fn is_nondecreasing(&self) -> bool {
        self.segs.iter().all(|s| s.y1.dominates(&s.y0))
    }

    /// Greedily merges consecutive segments while the merged chord stays within ±`eps` of every
    /// merged point on every resource (bounds only the size of the function).
    pub fn compress(&self, eps: f64) -> Plf<ResourceVector> {
        // Direction comparison of two scalar segments by the cross product of their deltas.
        fn compare(a: (f64, f64), b: (f64, f64)) -> i32 {
            let cross = a.0 * b.1 - b.0 * a.1;
            if cross > 0.0 {
                1
            } else if cross < 0.0 {
                -1
            } else {
                0
            }
        }
        // Deltas (dx, dy) of the bounds of one component of a segment.
        fn bounds(s: &Segment<ResourceVector>, r: usize, eps: f64) -> ((f64, f64), (f64, f64)) {
            let dx = s.x1 - s.x0;
            let top = (dx, (s.y1[r] + eps) - s.y0[r]);
            let bottom = (dx, (s.y1[r] - eps) - s.y0[r]);
            (top, bottom)
        }

        let segs = &self.segs;
        let mut b = Builder::with_capacity(segs.len());
        let mut acc = segs[0];
        let mut top = [(0.0, 0.0); RESOURCE_COUNT];
        let mut bottom = [(0.0, 0.0); RESOURCE_COUNT];
        for r in 0..RESOURCE_COUNT {
            (top[r], bottom[r]) = bounds(&acc, r, eps);
        }
        for cur in &segs[1..] {
            let merged = Segment::new(acc.x0, acc.y0, cur.x1, cur.y1);
            let mut can_extend = true;
            for r in 0..RESOURCE_COUNT {
                let (ct, cb) = bounds(&merged, r, eps);
                if compare(ct, top[r]) > 0 {
                    top[r] = ct;
                }
                if compare(cb, bottom[r]) < 0 {
                    bottom[r] = cb;
                }
                let m = (merged.x1 - merged.x0, merged.y1[r] - merged.y0[r]);
                if compare(bottom[r], m) <= 0 || compare(top[r], m) >= 0 {
                    can_extend = false;
                    break;
                }
            }
            if can_extend {
                acc = merged;
            } else {
                b.push_segment(acc);
                acc = *cur;
                for r in 0..RESOURCE_COUNT {
                    (top[r], bottom[r]) = bounds(&acc, r, eps);
                }
            }
        }
        b.push_segment(acc);
        b.finish()
    }
}

/// Maps doubles to u64 preserving order (negative values have all bits flipped, others only
/// the sign bit).
#[inline]
fn to_ordered_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    let mask = ((bits as i64) >> 63) as u64 | (1u64 << 63);
    bits ^ mask
}

#[inline]
fn from_ordered_bits(bits: u64) -> f64 {
    let mask = ((!bits as i64) >> 63) as u64 | (1u64 << 63);
    f64::from_bits(bits ^ mask)
}

/// The largest double `x` in `[lo, hi]` with `pred(x)`, for a predicate that is true at `lo`
/// and monotone (true then false). Exact to the last ulp: a binary search over the ordered bit
/// patterns of doubles, at most ~64 steps.
pub fn inverse_lower_bound(lo: f64, hi: f64, mut pred: impl FnMut(f64) -> bool) -> f64 {
    assert!(!lo.is_nan() && !hi.is_nan() && lo <= hi);
    if lo == hi {
        return lo;
    }
    let (mut l, mut h) = (to_ordered_bits(lo), to_ordered_bits(hi));
    if pred(from_ordered_bits(h)) {
        return from_ordered_bits(h);
    }
    while l + 1 < h {
        let mid = l + ((h - l) >> 1);
        if pred(from_ordered_bits(mid)) {
            l = mid;
        } else {
            h = mid;
        }
    }
    from_ordered_bits(l)
}
