//! Monotone piecewise-linear functions over `f64` (scalar) and [`ResourceVector`] (vector).
//!
//! A function is a list of segments `(x0, y0) → (x1, y1)` with `x0 ≤ x1` that share endpoints
//! exactly; a jump is a vertical segment `(x, y−) → (x, y+)`. Functions are left-continuous:
//! [`Plf::value_at`] is the left limit. Every operation here reproduces the arithmetic of the
//! reference implementation step by step (the two-sided interpolation formula, sampling of left
//! and right limits at critical points, the merge rules of the builder), because the
//! fair-share tests compare some results bit for bit.
//!
//! # Speed
//!
//! The operations are linear sweeps: critical points of two functions are merged rather than
//! sorted, sampling uses cursors that keep the segment the reference traverser would land on
//! (no search), values at segment ends and on horizontal segments skip the division, and the
//! `*_into` variants write into buffers the caller reuses. They produce exactly the segments
//! the straightforward formulation produces (sample both limits at the sorted, deduplicated
//! critical points and feed them to the builder); `tests/differential.rs` checks this against
//! the original implementation kept in `fairsched_hdrf_testkit::oracle`.
//!
//! The one deliberate exception is the summation of many functions: [`Plf::sum`] adds all
//! functions left to right at every critical point, which costs (points × functions)
//! evaluations. [`sum_adaptive_into`] does that for few functions or few evaluations
//! ([`EXACT_SUM`]) and otherwise sums the functions in a balanced binary tree of pairwise sums
//! (O(points · log functions)); see there for what that changes.
//!
//! Negative zero never occurs in the values the fair-share update builds (shares are
//! non-negative and computed without negation), so `x + 0.0 == x` bit for bit everywhere here.

use fairsched_resources::{RESOURCE_COUNT, ResourceVector};
use std::fmt::Debug;

/// When [`sum_adaptive_into`] adds exactly: with at most `max_functions` functions, or at most
/// `max_evaluations` = functions × their total critical points (either suffices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactSum {
    pub max_functions: usize,
    pub max_evaluations: usize,
}

/// The default exact-sum policy.
///
/// The normal-pool sums of the upstream unit tests are tiny: in the public conformance cases
/// translated from them the largest needs 48 evaluations (4 children); a FIFO pool's generic
/// sum (taken only when its children cannot be laid end to end, which is the same sum in
/// linear time) is always exact. 2^16 evaluations keep every test-sized tree exact with a
/// wide margin while the quadratic cost stays below about a millisecond per pool. With up to 8 functions the exact
/// sum costs about what the balanced one does whatever their size (measured on 200,000
/// critical points: 27 against 21 ms for 4 functions, 43 against 49 ms for 8; for 16 it is
/// 1.5 times slower, for 32 three times), so few functions are always summed exactly. Only
/// large fan-outs, where the quadratic cost matters, switch to the balanced summation.
pub const EXACT_SUM: ExactSum = ExactSum {
    max_functions: 8,
    max_evaluations: 1 << 16,
};

/// A value a function can take: a scalar or a resource vector.
pub trait Value: Copy + PartialEq + Debug {
    fn zero() -> Self;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn mul(self, k: f64) -> Self;
    /// `self <= other` (on every component).
    fn le(self, other: Self) -> bool;
    /// `if first { a } else { b }`, without a branch.
    fn select(first: bool, a: Self, b: Self) -> Self;
    /// `self == other` (every component), spelled out so that it inlines.
    fn same(self, other: Self) -> bool;
}

/// `if first { a } else { b }` on the bits, without a branch.
#[inline]
fn select_bits(first: bool, a: f64, b: f64) -> f64 {
    let mask = u64::from(first).wrapping_neg();
    f64::from_bits((a.to_bits() & mask) | (b.to_bits() & !mask))
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
    #[inline]
    fn le(self, o: f64) -> bool {
        self <= o
    }
    #[inline]
    fn select(first: bool, a: f64, b: f64) -> f64 {
        select_bits(first, a, b)
    }
    #[inline(always)]
    fn same(self, o: f64) -> bool {
        self == o
    }
}

/// Componentwise, written out so that it inlines (the same IEEE operations as the operators
/// of [`ResourceVector`]).
impl Value for ResourceVector {
    #[inline]
    fn zero() -> ResourceVector {
        ResourceVector::ZERO
    }
    #[inline]
    fn add(self, o: ResourceVector) -> ResourceVector {
        let (a, b) = (self.0, o.0);
        ResourceVector([
            a[0] + b[0],
            a[1] + b[1],
            a[2] + b[2],
            a[3] + b[3],
            a[4] + b[4],
        ])
    }
    #[inline]
    fn sub(self, o: ResourceVector) -> ResourceVector {
        let (a, b) = (self.0, o.0);
        ResourceVector([
            a[0] - b[0],
            a[1] - b[1],
            a[2] - b[2],
            a[3] - b[3],
            a[4] - b[4],
        ])
    }
    #[inline]
    fn mul(self, k: f64) -> ResourceVector {
        let a = self.0;
        ResourceVector([a[0] * k, a[1] * k, a[2] * k, a[3] * k, a[4] * k])
    }
    #[inline]
    fn le(self, o: ResourceVector) -> bool {
        let (a, b) = (self.0, o.0);
        a[0] <= b[0] && a[1] <= b[1] && a[2] <= b[2] && a[3] <= b[3] && a[4] <= b[4]
    }
    #[inline]
    fn select(first: bool, a: ResourceVector, b: ResourceVector) -> ResourceVector {
        let (a, b) = (a.0, b.0);
        ResourceVector(std::array::from_fn(|r| select_bits(first, a[r], b[r])))
    }
    #[inline(always)]
    fn same(self, o: ResourceVector) -> bool {
        let (a, b) = (self.0, o.0);
        a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4]
    }
}

const _: () = assert!(
    RESOURCE_COUNT == 5,
    "Value for ResourceVector spells out five lanes"
);

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
        self.x0 == self.x1 && !self.y0.same(self.y1)
    }

    #[inline]
    pub fn is_tilted(&self) -> bool {
        self.x0 != self.x1 && !self.y0.same(self.y1)
    }

    /// Linear interpolation, exact at both ends and monotone: from the left end for `t < 0.5`,
    /// from the right end otherwise.
    #[inline]
    pub fn interpolate(&self, x: f64) -> V {
        let t = (x - self.x0) / (self.x1 - self.x0);
        let d = self.y1.sub(self.y0);
        // Both candidates, then a branch-free choice: which one applies is unpredictable.
        let from_left = self.y0.add(d.mul(t));
        let from_right = self.y1.sub(d.mul(1.0 - t));
        V::select(t < 0.5, from_left, from_right)
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
    #[inline]
    pub fn shift(&self, dx: f64, dy: V) -> Segment<V> {
        Segment::new(self.x0 + dx, self.y0.add(dy), self.x1 + dx, self.y1.add(dy))
    }

    #[must_use]
    #[inline]
    pub fn scale_argument(&self, k: f64) -> Segment<V> {
        Segment::new(self.x0 / k, self.y0, self.x1 / k, self.y1)
    }
}

impl Segment<f64> {
    /// Swaps arguments and values.
    #[must_use]
    #[inline]
    pub fn transpose(&self) -> Segment<f64> {
        Segment::new(self.y0, self.x0, self.y1, self.x1)
    }
}

/// [`Segment::value_at`] without the division where the interpolation formula is exact: at
/// `x0` it gives `y0 + (y1 − y0)·0 = y0`, at `x1` (t = 1) it gives `y1 − (y1 − y0)·0 = y1`,
/// and on a horizontal segment `y0 ± 0·t = y0`, for finite values that are not −0.0 (the only
/// ones here).
#[inline(always)]
pub(crate) fn fast_value<V: Value>(s: &Segment<V>, x: f64) -> V {
    if x == s.x0 || s.y0.same(s.y1) {
        s.y0
    } else if x == s.x1 {
        s.y1
    } else {
        s.interpolate(x)
    }
}

/// [`Segment::limits_at`] with [`fast_value`].
#[inline(always)]
fn fast_limits<V: Value>(s: &Segment<V>, x: f64) -> (V, V) {
    if s.x0 == s.x1 {
        (s.y0, s.y1)
    } else {
        let v = fast_value(s, x);
        (v, v)
    }
}

/// The builder's merge rules: absorbs `seg` into `last` (the previous segment) when a point
/// segment is dropped, a point before `seg` is replaced, two verticals merge or two horizontals
/// merge. Returns false when `seg` has to be appended.
#[inline(always)]
pub(crate) fn absorb<V: Value>(last: &mut Segment<V>, seg: &Segment<V>) -> bool {
    debug_assert!(
        last.x1 == seg.x0 && last.y1 == seg.y0,
        "segments must touch"
    );
    // A segment that is not a point is vertical when its arguments are equal and horizontal
    // when its values are.
    let (seg_same_x, seg_same_y) = (seg.x0 == seg.x1, seg.y0.same(seg.y1));
    if seg_same_x && seg_same_y {
        return true;
    }
    let (last_same_x, last_same_y) = (last.x0 == last.x1, last.y0.same(last.y1));
    if last_same_x && last_same_y {
        *last = *seg;
        return true;
    }
    if (last_same_x && seg_same_x) || (last_same_y && seg_same_y) {
        last.x1 = seg.x1;
        last.y1 = seg.y1;
        return true;
    }
    false
}

/// Appends `seg` to `segs` with the builder's merge rules.
#[inline(always)]
pub(crate) fn push_segment<V: Value>(segs: &mut Vec<Segment<V>>, seg: Segment<V>) {
    if let Some(last) = segs.last_mut()
        && absorb(last, &seg)
    {
        return;
    }
    segs.push(seg);
}

/// Maps every segment and feeds the results through the builder's merge rules, in place (the
/// output never gets ahead of the input, so one buffer suffices).
fn rebuild_in_place<V: Value>(segs: &mut Vec<Segment<V>>, map: impl Fn(&Segment<V>) -> Segment<V>) {
    let mut len = 0;
    for i in 0..segs.len() {
        let seg = map(&segs[i]);
        if len > 0 && absorb(&mut segs[len - 1], &seg) {
            continue;
        }
        segs[len] = seg;
        len += 1;
    }
    segs.truncate(len);
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

    /// A builder writing into `buffer` (cleared first), to reuse its allocation.
    pub fn from_buffer(mut buffer: Vec<Segment<V>>) -> Builder<V> {
        buffer.clear();
        Builder {
            segs: buffer,
            last: None,
        }
    }

    /// Adds a point, connected to the previous one by a segment.
    #[inline(always)]
    pub fn add_point(&mut self, x: f64, y: V) {
        if let Some((lx, ly)) = self.last {
            push_segment(&mut self.segs, Segment::new(lx, ly, x, y));
        }
        self.last = Some((x, y));
    }

    /// Adds the point `(x, left)` and then `(x, right)`: both limits sampled at `x`.
    #[inline(always)]
    pub fn add_sample(&mut self, x: f64, left: V, right: V) {
        if let Some((lx, ly)) = self.last {
            push_segment(&mut self.segs, Segment::new(lx, ly, x, left));
            push_segment(&mut self.segs, Segment::new(x, left, x, right));
        } else {
            // The first point only starts the function.
            push_segment(&mut self.segs, Segment::new(x, left, x, right));
        }
        self.last = Some((x, right));
    }

    /// Adds a segment starting at the previous end.
    #[inline]
    pub fn push_segment(&mut self, seg: Segment<V>) {
        push_segment(&mut self.segs, seg);
        self.last = Some((seg.x1, seg.y1));
    }

    pub fn finish(self) -> Plf<V> {
        Plf {
            segs: self.finish_buffer(),
        }
    }

    /// The segments built (at least one).
    pub fn finish_buffer(self) -> Vec<Segment<V>> {
        assert!(
            !self.segs.is_empty(),
            "a function needs at least one segment"
        );
        self.segs
    }
}

/// A piecewise-linear function on `[left_bound, right_bound]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plf<V> {
    segs: Vec<Segment<V>>,
}

impl<V: Value> Plf<V> {
    pub fn segments(&self) -> &[Segment<V>] {
        &self.segs
    }

    pub fn left_bound(&self) -> f64 {
        self.segs[0].x0
    }

    pub fn right_bound(&self) -> f64 {
        self.segs[self.segs.len() - 1].x1
    }

    pub fn is_defined_at(&self, x: f64) -> bool {
        x >= self.left_bound() && x <= self.right_bound()
    }

    /// The segment used for (left, right) sampling at `x`.
    pub fn segment_at(&self, x: f64) -> &Segment<V> {
        let mut i = left_segment_index(&self.segs, x);
        if self.segs[i].x1 == x && i + 1 < self.segs.len() && self.segs[i + 1].is_vertical() {
            i += 1;
        }
        &self.segs[i]
    }

    /// Shifts the argument by `dx` and the value by `dy`.
    #[must_use]
    pub fn shift(&self, dx: f64, dy: V) -> Plf<V> {
        let mut segs = self.segs.clone();
        rebuild_in_place(&mut segs, |s| s.shift(dx, dy));
        Plf { segs }
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
}

/// A function whose segments are stored elsewhere (an arena): the queries of [`Plf`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlfRef<'a, V> {
    segs: &'a [Segment<V>],
}

impl<'a, V: Value> PlfRef<'a, V> {
    /// Segments built by a [`Builder`] (at least one).
    pub(crate) fn new(segs: &'a [Segment<V>]) -> PlfRef<'a, V> {
        debug_assert!(!segs.is_empty());
        PlfRef { segs }
    }

    pub(crate) fn segments(&self) -> &'a [Segment<V>] {
        self.segs
    }

    /// [`Plf::left_bound`].
    pub(crate) fn left_bound(&self) -> f64 {
        self.segs[0].x0
    }

    /// [`Plf::right_bound`].
    pub(crate) fn right_bound(&self) -> f64 {
        self.segs[self.segs.len() - 1].x1
    }

    /// [`Plf::right_value`].
    pub(crate) fn right_value(&self) -> V {
        self.segs[self.segs.len() - 1].y1
    }

    /// [`Plf::value_at`].
    #[inline]
    pub(crate) fn value_at(&self, x: f64) -> V {
        self.segs[left_segment_index(self.segs, x)].limits_at(x).0
    }

    /// Whether no value decreases along any segment (every component, for vectors).
    pub(crate) fn is_nondecreasing(&self) -> bool {
        self.segs.iter().all(|s| s.y0.le(s.y1))
    }

    /// [`Plf::limits_at`].
    pub(crate) fn limits_at(&self, x: f64) -> (V, V) {
        let segs = self.segs;
        let mut i = left_segment_index(segs, x);
        if segs[i].x1 == x && i + 1 < segs.len() && segs[i + 1].is_vertical() {
            i += 1;
        }
        segs[i].limits_at(x)
    }

    /// An owned copy.
    pub(crate) fn to_plf(self) -> Plf<V> {
        Plf {
            segs: self.segs.to_vec(),
        }
    }
}

/// `Plf::scale_argument(k).extend_right(rb)` of the function made of `segs`, into `out`.
pub(crate) fn scale_argument_extend_into<V: Value>(
    segs: &[Segment<V>],
    k: f64,
    rb: f64,
    out: &mut Vec<Segment<V>>,
) {
    out.clear();
    for s in segs {
        push_segment(out, s.scale_argument(k));
    }
    // `extend_right` re-adds every segment to a builder. That changes nothing unless the first
    // pass merged something (only a merge can leave a point between segments).
    if out.len() != segs.len() {
        rebuild_in_place(out, |s| *s);
    }
    let last = out[out.len() - 1];
    if last.x1 < rb {
        push_segment(out, Segment::new(last.x1, last.y1, rb, last.y1));
    }
}

/// Drops a vertical segment at the right end; a lone vertical becomes its lower point.
fn trim_in_place<V: Value>(segs: &mut Vec<Segment<V>>) {
    let n = segs.len();
    if segs[n - 1].is_vertical() {
        if n > 1 {
            segs.pop();
        } else {
            let s = segs[0];
            let v = s.value_at(s.x0);
            segs[0] = Segment::new(s.x0, v, s.x0, v);
        }
    }
}

/// Drops a vertical segment at the left end; a lone vertical becomes its upper point.
fn trim_left_in_place<V: Value>(segs: &mut Vec<Segment<V>>) {
    if segs[0].is_vertical() {
        if segs.len() > 1 {
            segs.remove(0);
        } else {
            let s = segs[0];
            segs[0] = Segment::new(s.x0, s.y1, s.x0, s.y1);
        }
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

mod cursor;
mod ops;
mod sum;

pub(crate) use cursor::*;
pub(crate) use ops::*;
pub(crate) use sum::*;

#[cfg(test)]
mod owned;
#[cfg(test)]
mod tests;
