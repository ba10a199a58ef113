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
/// sum is always exact (it is the oracle of the fast FIFO path, which a test runs with 2,000
/// children). 2^16 evaluations keep every test-sized tree exact with a wide margin while the
/// quadratic cost stays below about a millisecond per pool. With up to 8 functions the exact
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

/// Sorted, deduplicated critical points restricted to `[lb, rb]`.
///
/// The points usually come as the concatenation of several sorted runs (one per function); the
/// stable sort merges such runs in O(n log runs).
fn clear_and_sort(points: &mut Vec<f64>, lb: f64, rb: f64) {
    points.retain(|&p| p >= lb && p <= rb);
    points.sort_unstable_by(f64::total_cmp);
    points.dedup();
}

/// A function's critical points in increasing order: its left bound, then every segment end
/// greater than the previous critical point.
#[derive(Clone, Debug)]
struct CriticalPoints<'a, V> {
    segs: &'a [Segment<V>],
    next: usize,
    last: Option<f64>,
}

impl<'a, V> CriticalPoints<'a, V> {
    fn new(segs: &'a [Segment<V>]) -> CriticalPoints<'a, V> {
        CriticalPoints {
            segs,
            next: 0,
            last: None,
        }
    }
}

impl<V> Iterator for CriticalPoints<'_, V> {
    type Item = f64;

    #[inline]
    fn next(&mut self) -> Option<f64> {
        let Some(last) = self.last else {
            let first = self.segs[0].x0;
            self.last = Some(first);
            return Some(first);
        };
        while self.next < self.segs.len() {
            let x = self.segs[self.next].x1;
            self.next += 1;
            if x > last {
                self.last = Some(x);
                return Some(x);
            }
        }
        None
    }
}

/// Walks a function's critical points in increasing order and samples the function at them
/// and between them exactly as the reference traverser does.
///
/// Each critical point after the left bound is the end of the first segment reaching beyond
/// the previous one (its "producer"). The traverser, asked for `x` no later than the next
/// critical point, lands on that producer: every earlier segment ends at or before the previous
/// critical point. At the critical point itself it moves on to a vertical segment right after
/// the producer. So keeping the producer of the next critical point gives the traverser's
/// segment without searching.
#[derive(Debug)]
struct CritCursor<'a, V> {
    segs: &'a [Segment<V>],
    /// The next critical point (+∞ once past the right bound).
    next: f64,
    /// The segment the traverser uses for arguments up to `next`.
    producer: usize,
    /// Where the search for the critical point after `next` continues.
    scan: usize,
}

impl<'a, V: Value> CritCursor<'a, V> {
    #[inline]
    fn new(segs: &'a [Segment<V>]) -> CritCursor<'a, V> {
        CritCursor {
            segs,
            next: segs[0].x0,
            producer: 0,
            scan: 0,
        }
    }

    /// Moves to the critical point after `next`.
    #[inline(always)]
    fn advance(&mut self) {
        let last = self.next;
        let segs = self.segs;
        while self.scan < segs.len() {
            let j = self.scan;
            self.scan += 1;
            if segs[j].x1 > last {
                self.next = segs[j].x1;
                self.producer = j;
                return;
            }
        }
        self.next = f64::INFINITY;
    }

    /// Moves to the first critical point at or after `x`.
    #[inline]
    fn seek(&mut self, x: f64) {
        while self.next < x {
            self.advance();
        }
    }

    /// The traverser's segment at `x` (at most the next critical point).
    #[inline(always)]
    fn segment(&self, x: f64) -> &'a Segment<V> {
        let segs = self.segs;
        let mut k = self.producer;
        if segs[k].x1 == x && k + 1 < segs.len() && segs[k + 1].is_vertical() {
            k += 1;
        }
        &segs[k]
    }

    /// The traverser's (left, right) limits at `x` (at most the next critical point).
    #[inline(always)]
    fn limits(&self, x: f64) -> (V, V) {
        fast_limits(self.segment(x), x)
    }

    /// The segment covering the open interval from the previous critical point to `next` (the
    /// last segment starting at or before any argument in it).
    #[inline(always)]
    fn covering(&self) -> &'a Segment<V> {
        &self.segs[self.producer]
    }
}

/// Samples one of several functions at the union of their critical points, visited in
/// increasing order (every point, each once), as the reference traverser does.
///
/// Between two of its own critical points a function stays on one segment (the producer of the
/// next one), so at a point that is not its own critical point the limits are that segment's
/// value, a constant when the segment is horizontal.
#[derive(Debug)]
pub(crate) struct MemberCursor<'a, V> {
    crit: CritCursor<'a, V>,
    /// The segment used between critical points, prepared for evaluation.
    covering: Covering<V>,
}

/// A segment prepared for evaluations strictly inside it.
#[derive(Clone, Copy, Debug)]
enum Covering<V> {
    /// Horizontal: its value.
    Constant(V),
    /// Tilted: the operands of [`Segment::interpolate`] that do not depend on the argument
    /// (the same values it computes each time).
    Tilted {
        x0: f64,
        dx: f64,
        y0: V,
        y1: V,
        d: V,
    },
    /// Vertical (only before the first critical point): read the segment itself.
    Vertical,
}

impl<'a, V: Value> MemberCursor<'a, V> {
    pub(crate) fn new(segs: &'a [Segment<V>]) -> MemberCursor<'a, V> {
        let mut c = MemberCursor {
            crit: CritCursor::new(segs),
            covering: Covering::Vertical,
        };
        c.refresh();
        c
    }

    /// The traverser's segment strictly between critical points: the producer of the next one,
    /// or, past the right bound, the last segment.
    fn covering_segment(&self) -> &'a Segment<V> {
        if self.crit.next == f64::INFINITY {
            &self.crit.segs[self.crit.segs.len() - 1]
        } else {
            self.crit.covering()
        }
    }

    fn refresh(&mut self) {
        let s = self.covering_segment();
        self.covering = if s.x0 == s.x1 {
            Covering::Vertical
        } else if s.y0.same(s.y1) {
            Covering::Constant(s.y0)
        } else {
            Covering::Tilted {
                x0: s.x0,
                dx: s.x1 - s.x0,
                y0: s.y0,
                y1: s.y1,
                d: s.y1.sub(s.y0),
            }
        };
    }

    #[inline(always)]
    fn catch_up(&mut self, x: f64) {
        if self.crit.next < x {
            while self.crit.next < x {
                self.crit.advance();
            }
            self.refresh();
        }
    }

    /// The value strictly between critical points ([`fast_value`] on the covering segment).
    #[inline(always)]
    fn between(&self, x: f64) -> (V, V) {
        match self.covering {
            Covering::Constant(v) => (v, v),
            Covering::Tilted { x0, dx, y0, y1, d } => {
                let t = (x - x0) / dx;
                let v = V::select(t < 0.5, y0.add(d.mul(t)), y1.sub(d.mul(1.0 - t)));
                (v, v)
            }
            Covering::Vertical => fast_limits(self.covering_segment(), x),
        }
    }

    /// (left limit, right limit) at `x`, not before the previous argument.
    #[inline(always)]
    pub(crate) fn limits(&mut self, x: f64) -> (V, V) {
        self.catch_up(x);
        if x < self.crit.next {
            self.between(x)
        } else {
            self.crit.limits(x)
        }
    }

    /// The left limit (`right == false`) or the right limit at `x`, as [`Self::limits`].
    #[inline(always)]
    pub(crate) fn limit(&mut self, x: f64, right: bool) -> V {
        let (l, r) = self.limits(x);
        if right { r } else { l }
    }
}

/// Walks the union of both functions' critical points inside `[lb, rb]` in increasing order
/// without duplicates (what sorting and deduplicating the concatenation gives), calling `f`
/// with the point and both cursors positioned at it.
#[inline]
fn sweep2<'a, 'b, V: Value, W: Value>(
    a: &'a [Segment<V>],
    b: &'b [Segment<W>],
    lb: f64,
    rb: f64,
    mut f: impl FnMut(f64, &CritCursor<'a, V>, &CritCursor<'b, W>),
) {
    let mut ca = CritCursor::new(a);
    let mut cb = CritCursor::new(b);
    loop {
        let x = if ca.next <= cb.next { ca.next } else { cb.next };
        // Past the right bound (which is finite), or past both functions (+∞).
        if x > rb {
            break;
        }
        if x >= lb {
            f(x, &ca, &cb);
        }
        if ca.next == x {
            ca.advance();
        }
        if cb.next == x {
            cb.advance();
        }
    }
}

/// Index of the first segment with `x1 >= x` (the last one if none).
#[inline]
fn left_segment_index<V>(segs: &[Segment<V>], x: f64) -> usize {
    let i = segs.partition_point(|s| s.x1 < x);
    i.min(segs.len() - 1)
}

/// Index of the last segment with `x0 <= x` (the first one if none).
#[inline]
fn right_segment_index<V>(segs: &[Segment<V>], x: f64) -> usize {
    segs.partition_point(|s| s.x0 <= x).saturating_sub(1)
}

/// Left and right limits of a function at nondecreasing arguments (forward-moving indices;
/// falls back to binary search if an argument goes backwards).
#[derive(Debug)]
pub(crate) struct LimitCursor<'a, V> {
    segs: &'a [Segment<V>],
    last_x: f64,
    left: usize,
    right: usize,
}

impl<'a, V: Value> LimitCursor<'a, V> {
    pub(crate) fn new(segs: &'a [Segment<V>]) -> LimitCursor<'a, V> {
        LimitCursor {
            segs,
            last_x: f64::NEG_INFINITY,
            left: 0,
            right: 0,
        }
    }

    #[inline]
    fn seek(&mut self, x: f64) {
        let segs = self.segs;
        if x < self.last_x {
            self.left = left_segment_index(segs, x);
            self.right = right_segment_index(segs, x);
        } else {
            while self.left + 1 < segs.len() && segs[self.left].x1 < x {
                self.left += 1;
            }
            while self.right + 1 < segs.len() && segs[self.right + 1].x0 <= x {
                self.right += 1;
            }
        }
        self.last_x = x;
    }

    /// [`Plf::left_limit_at`].
    #[inline]
    pub(crate) fn left_limit(&mut self, x: f64) -> V {
        self.seek(x);
        fast_limits(&self.segs[self.left], x).0
    }

    /// ([`Plf::left_limit_at`], [`Plf::right_limit_at`]), reading one segment when both are on
    /// the same one.
    #[inline]
    pub(crate) fn limits(&mut self, x: f64) -> (V, V) {
        self.seek(x);
        if self.left == self.right {
            fast_limits(&self.segs[self.left], x)
        } else {
            (
                fast_limits(&self.segs[self.left], x).0,
                fast_limits(&self.segs[self.right], x).1,
            )
        }
    }

    /// [`Plf::right_limit_at`].
    #[inline]
    pub(crate) fn right_limit(&mut self, x: f64) -> V {
        self.seek(x);
        fast_limits(&self.segs[self.right], x).1
    }
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

/// `op` applied pointwise over the intersection of the domains, written into `out`: both
/// limits of `a` and `b` are sampled at the union of their critical points.
pub(crate) fn binary_op_into<V: Value>(
    a: &[Segment<V>],
    b: &[Segment<V>],
    op: impl Fn(V, V) -> V,
    out: &mut Vec<Segment<V>>,
) {
    let lb = a[0].x0.max(b[0].x0);
    let rb = a[a.len() - 1].x1.min(b[b.len() - 1].x1);
    let mut builder = Builder::from_buffer(std::mem::take(out));
    sweep2(a, b, lb, rb, |x, ca, cb| {
        let (al, ar) = ca.limits(x);
        let (bl, br) = cb.limits(x);
        builder.add_sample(x, op(al, bl), op(ar, br));
    });
    *out = builder.finish_buffer();
}

/// [`Plf::narrow`] into `out`. The reference adds the constant zero on `[l, r]` (a binary
/// operation), which samples both limits at `l`, at the critical points strictly between `l`
/// and `r`, and at `r`, adding 0 to each; this samples the same points in the same order.
pub(crate) fn narrow_into<V: Value>(
    segs: &[Segment<V>],
    l: f64,
    r: f64,
    out: &mut Vec<Segment<V>>,
) {
    assert!(
        l >= segs[0].x0 && r <= segs[segs.len() - 1].x1 && l <= r,
        "narrowing outside the domain"
    );
    let mut c = CritCursor::new(segs);
    let mut b = Builder::from_buffer(std::mem::take(out));
    let mut sample = |c: &CritCursor<'_, V>, x: f64| {
        let (left, right) = c.limits(x);
        b.add_sample(x, left.add(V::zero()), right.add(V::zero()));
    };
    c.seek(l);
    sample(&c, l);
    if c.next == l {
        c.advance();
    }
    while c.next < r {
        sample(&c, c.next);
        c.advance();
    }
    if r > l {
        sample(&c, r);
    }
    *out = b.finish_buffer();
}

/// Scratch buffers of the summation.
#[derive(Debug)]
pub(crate) struct SumScratch<V> {
    points: Vec<f64>,
    /// Running (left, right) sums per point; the right one only where `parted` is set.
    sums: Vec<(V, V)>,
    /// Per point: some function so far had different left and right limits there.
    parted: Vec<bool>,
    spare: Vec<Vec<Segment<V>>>,
}

impl<V> Default for SumScratch<V> {
    fn default() -> Self {
        SumScratch {
            points: Vec::new(),
            sums: Vec::new(),
            parted: Vec::new(),
            spare: Vec::new(),
        }
    }
}

/// [`Plf::sum`] into `out`.
///
/// The sum is accumulated function by function: every function is evaluated at all the points
/// in one forward sweep and added into per-point running sums, so each point still receives its
/// terms in function order (the same additions, in the same order, as adding the functions left
/// to right at each point), while the sweep over one function stays on its own segments.
pub(crate) fn sum_exact_into<V: Value>(
    fs: &[&[Segment<V>]],
    scratch: &mut SumScratch<V>,
    out: &mut Vec<Segment<V>>,
) {
    assert!(!fs.is_empty());
    let lb = fs.iter().map(|f| f[0].x0).fold(f64::MIN, f64::max);
    let rb = fs
        .iter()
        .map(|f| f[f.len() - 1].x1)
        .fold(f64::MAX, f64::min);
    assert!(lb <= rb);
    let points = &mut scratch.points;
    points.clear();
    for f in fs {
        points.extend(CriticalPoints::new(f));
    }
    clear_and_sort(points, lb, rb);
    assert!(
        points.first() == Some(&lb) && points.last() == Some(&rb),
        "critical points must include both bounds"
    );
    if !fs.iter().all(|f| f.iter().all(|s| s.x0 <= s.x1)) {
        sum_exact_by_point(fs, points, out);
        return;
    }
    let (sums, parted) = (&mut scratch.sums, &mut scratch.parted);
    sums.clear();
    sums.resize(points.len(), (V::zero(), V::zero()));
    parted.clear();
    parted.resize(points.len(), false);
    for f in fs {
        add_sampled(f, points, sums, parted);
    }
    let mut builder = Builder::from_buffer(std::mem::take(out));
    for ((&x, &(l, r)), &parted) in points.iter().zip(sums.iter()).zip(parted.iter()) {
        builder.add_sample(x, l, if parted { r } else { l });
    }
    *out = builder.finish_buffer();
}

/// Adds `f`'s (left, right) limits at every point of `points` (increasing, inside `f`'s domain)
/// to `sums` (see [`for_each_limits`]).
///
/// Until some function's limits differ at a point, its left and right sums receive the same
/// terms (the limits are equal, and there is no negative zero), so only the left one is kept;
/// at the first difference the right one starts as the left one so far (`parted`).
#[inline]
fn add_sampled<V: Value>(
    f: &[Segment<V>],
    points: &[f64],
    sums: &mut [(V, V)],
    parted: &mut [bool],
) {
    for_each_limits(f, points, |k, l, r, critical| {
        let sum = &mut sums[k];
        if parted[k] {
            sum.1 = sum.1.add(r);
        } else if critical && !r.same(l) {
            parted[k] = true;
            sum.1 = sum.0.add(r);
        }
        sum.0 = sum.0.add(l);
    });
}

/// The right limit at the end of `f`'s segment `j`: the upper end of a vertical that follows
/// it, else the segment's own end.
#[inline(always)]
pub(crate) fn right_limit_at_end<V: Value>(f: &[Segment<V>], j: usize) -> V {
    if j + 1 < f.len() && f[j + 1].x0 == f[j + 1].x1 {
        f[j + 1].y1
    } else {
        f[j].y1
    }
}

/// Calls `emit(k, left, right, critical)` with `f`'s limits at every point `points[k]`
/// (nondecreasing,
/// repetitions allowed, inside `f`'s domain), in order, reading them as the reference traverser
/// does: at one of `f`'s critical points the end of the segment reaching it and, after a
/// vertical there, the vertical's upper end; between critical points the segment covering the
/// point ([`fast_value`], with the interpolation's operands hoisted per segment: along one
/// segment t increases, so the branch on t < 0.5 switches once). Requires a builder-made `f`
/// whose arguments never decrease. `critical` is false where the two limits are the same value
/// read between critical points (it may be true where they happen to be equal).
#[inline(always)]
pub(crate) fn for_each_limits<V: Value>(
    f: &[Segment<V>],
    points: &[f64],
    mut emit: impl FnMut(usize, V, V, bool),
) {
    let (n, np) = (f.len(), points.len());
    let mut k = 0;
    for j in 0..n {
        let s = &f[j];
        if s.x0 == s.x1 {
            // A vertical: at the left bound (or a lone point) it gives both limits there; after a
            // segment it was read as that segment's right limit.
            if j == 0 {
                while k < np && points[k] <= s.x1 {
                    emit(k, s.y0, s.y1, true);
                    k += 1;
                }
            }
            continue;
        }
        if s.y0.same(s.y1) {
            while k < np && points[k] < s.x1 {
                emit(k, s.y0, s.y0, false);
                k += 1;
            }
        } else {
            let dx = s.x1 - s.x0;
            let d = s.y1.sub(s.y0);
            while k < np && points[k] < s.x1 {
                let x = points[k];
                let v = if x == s.x0 {
                    s.y0
                } else {
                    let t = (x - s.x0) / dx;
                    if t < 0.5 {
                        s.y0.add(d.mul(t))
                    } else {
                        s.y1.sub(d.mul(1.0 - t))
                    }
                };
                emit(k, v, v, false);
                k += 1;
            }
        }
        if k < np && points[k] == s.x1 {
            let r = right_limit_at_end(f, j);
            while k < np && points[k] == s.x1 {
                emit(k, s.y1, r, true);
                k += 1;
            }
        }
        if k == np {
            break;
        }
    }
}

/// [`sum_exact_into`] point by point, with a cursor per function (for functions whose arguments
/// decrease somewhere).
pub(crate) fn sum_exact_by_point<V: Value>(
    fs: &[&[Segment<V>]],
    points: &[f64],
    out: &mut Vec<Segment<V>>,
) {
    let mut cursors: Vec<MemberCursor<'_, V>> = fs.iter().map(|f| MemberCursor::new(f)).collect();
    let mut builder = Builder::from_buffer(std::mem::take(out));
    for &x in points.iter() {
        let mut l = V::zero();
        let mut r = V::zero();
        for c in cursors.iter_mut() {
            let (cl, cr) = c.limits(x);
            l = l.add(cl);
            r = r.add(cr);
        }
        builder.add_sample(x, l, r);
    }
    *out = builder.finish_buffer();
}

/// A forward cursor over a builder-made function whose arguments never decrease, reading
/// (left, right) limits at its critical points and between them exactly as [`CritCursor`]
/// does, with the current segment's interpolation operands kept.
struct SweepCursor<'a, V> {
    f: &'a [Segment<V>],
    /// The next critical point (+∞ past the last).
    next: f64,
    /// Before the left bound has been visited.
    at_start: bool,
    /// The segment reaching `next` (not vertical).
    j: usize,
    dx: f64,
    d: V,
    horizontal: bool,
}

impl<'a, V: Value> SweepCursor<'a, V> {
    fn new(f: &'a [Segment<V>]) -> SweepCursor<'a, V> {
        SweepCursor {
            f,
            next: f[0].x0,
            at_start: true,
            j: 0,
            dx: 0.0,
            d: V::zero(),
            horizontal: false,
        }
    }

    /// (left, right) limits at `x`, which is at most `next` and not before the previous point.
    #[inline(always)]
    fn limits(&self, x: f64) -> (V, V) {
        let f = self.f;
        if self.at_start {
            let s = &f[0];
            return if s.x0 == s.x1 {
                (s.y0, s.y1)
            } else {
                (s.y0, s.y0)
            };
        }
        let s = &f[self.j];
        if x == self.next {
            let j = self.j;
            let r = right_limit_at_end(f, j);
            (s.y1, r)
        } else {
            let v = if self.horizontal || x == s.x0 {
                s.y0
            } else {
                let t = (x - s.x0) / self.dx;
                if t < 0.5 {
                    s.y0.add(self.d.mul(t))
                } else {
                    s.y1.sub(self.d.mul(1.0 - t))
                }
            };
            (v, v)
        }
    }

    /// Moves past `next`.
    #[inline(always)]
    fn advance(&mut self) {
        let f = self.f;
        let mut j = if self.at_start {
            self.at_start = false;
            usize::from(f[0].x0 == f[0].x1)
        } else {
            self.j + 1
        };
        if j < f.len() && f[j].x0 == f[j].x1 {
            j += 1;
        }
        self.j = j;
        if j < f.len() {
            let s = &f[j];
            self.next = s.x1;
            self.dx = s.x1 - s.x0;
            self.d = s.y1.sub(s.y0);
            self.horizontal = s.y0.same(s.y1);
        } else {
            self.next = f64::INFINITY;
        }
    }
}

/// `binary_op_into(a, b, add)` for functions whose arguments never decrease, with
/// [`SweepCursor`]s: the same points, limits and sums.
pub(crate) fn add_two_into<V: Value>(
    a: &[Segment<V>],
    b: &[Segment<V>],
    out: &mut Vec<Segment<V>>,
) {
    if !(a.iter().all(|s| s.x0 <= s.x1) && b.iter().all(|s| s.x0 <= s.x1)) {
        binary_op_into(a, b, V::add, out);
        return;
    }
    let lb = a[0].x0.max(b[0].x0);
    let rb = a[a.len() - 1].x1.min(b[b.len() - 1].x1);
    let mut builder = Builder::from_buffer(std::mem::take(out));
    let (mut ca, mut cb) = (SweepCursor::new(a), SweepCursor::new(b));
    loop {
        let x = if ca.next <= cb.next { ca.next } else { cb.next };
        if x > rb {
            break;
        }
        if x >= lb {
            let (al, ar) = ca.limits(x);
            let (bl, br) = cb.limits(x);
            builder.add_sample(x, al.add(bl), ar.add(br));
        }
        if ca.next == x {
            ca.advance();
        }
        if cb.next == x {
            cb.advance();
        }
    }
    *out = builder.finish_buffer();
}

/// Balanced pairwise sum (see [`sum_adaptive_into`]) into `out`.
fn sum_balanced_into<V: Value>(
    fs: &[&[Segment<V>]],
    scratch: &mut SumScratch<V>,
    out: &mut Vec<Segment<V>>,
) {
    match fs.len() {
        0 => panic!("summing no functions"),
        // Sampling one function at its own critical points reproduces it.
        1 => {
            out.clear();
            out.extend_from_slice(fs[0]);
        }
        2 => add_two_into(fs[0], fs[1], out),
        n => {
            let mut left = scratch.spare.pop().unwrap_or_default();
            let mut right = scratch.spare.pop().unwrap_or_default();
            sum_balanced_into(&fs[..n / 2], scratch, &mut left);
            sum_balanced_into(&fs[n / 2..], scratch, &mut right);
            add_two_into(&left, &right, out);
            scratch.spare.push(left);
            scratch.spare.push(right);
        }
    }
}

/// [`sum_adaptive_into`] into `out`.
pub(crate) fn sum_adaptive_into<V: Value>(
    fs: &[&[Segment<V>]],
    exact: ExactSum,
    scratch: &mut SumScratch<V>,
    out: &mut Vec<Segment<V>>,
) {
    let points: usize = fs.iter().map(|f| f.len() + 1).sum();
    assert!(
        fs.iter().map(|f| f[0].x0).fold(f64::MIN, f64::max)
            <= fs
                .iter()
                .map(|f| f[f.len() - 1].x1)
                .fold(f64::MAX, f64::min),
        "summing functions with disjoint domains"
    );
    if fs.len() <= exact.max_functions || points.saturating_mul(fs.len()) <= exact.max_evaluations {
        sum_exact_into(fs, scratch, out);
    } else {
        sum_balanced_into(fs, scratch, out);
    }
}

/// Pointwise minimum of two scalar functions over the intersection of their domains, into
/// `out`: critical points of both plus crossing points (located by binary search between
/// consecutive critical points), with the min of the left and of the right limits sampled at
/// each.
pub(crate) fn pointwise_min_into(
    a: &[Segment<f64>],
    b: &[Segment<f64>],
    out: &mut Vec<Segment<f64>>,
) {
    let lb = a[0].x0.max(b[0].x0);
    let rb = a[a.len() - 1].x1.min(b[b.len() - 1].x1);
    assert!(lb <= rb);
    if let Some(min) = trivial_min(a, b) {
        out.clear();
        out.extend_from_slice(min);
        return;
    }
    let mut builder = Builder::from_buffer(std::mem::take(out));
    // The previous point and both functions' right limits there.
    let mut previous: Option<(f64, f64, f64)> = None;
    sweep2(a, b, lb, rb, |r, ca, cb| {
        let (al, ar) = ca.limits(r);
        let (bl, br) = cb.limits(r);
        if let Some((l, va, vb)) = previous {
            // Both functions are linear on (l, r), on their covering segments. The reference
            // reads their values at l and r on those segments; these are the right limits
            // sampled at l and the left limits sampled at r (the same segments and formula,
            // or the shared endpoint of adjacent segments).
            // Lower at l first; ties keep the first argument as "lower" (and then it is not
            // strictly lower, so there is no crossing).
            let a_lower = vb >= va || vb.is_nan() || va.is_nan();
            if va.min(vb) < va.max(vb) && (if a_lower { al > bl } else { bl > al }) {
                let (sa, sb) = (ca.covering(), cb.covering());
                let (lo, hi) = if a_lower { (sa, sb) } else { (sb, sa) };
                let x = inverse_lower_bound(l, r, |m| lo.value_at(m) <= hi.value_at(m));
                // The reference deduplicates a crossing found exactly at l.
                if x > l {
                    let (xal, xar) = ca.limits(x);
                    let (xbl, xbr) = cb.limits(x);
                    builder.add_sample(x, xal.min(xbl), xar.min(xbr));
                }
            }
        }
        builder.add_sample(r, al.min(bl), ar.min(br));
        previous = Some((r, ar, br));
    });
    *out = builder.finish_buffer();
}

/// The minimum of `a` and `b` when it is one of them without any work: when one is a constant
/// `c` on the same (non-degenerate) domain as the other, nondecreasing function, and the other
/// lies entirely below or above `c`. Then there are no crossings, and sampling the minimum at
/// the critical points rebuilds that function's own segments (or merges into the constant).
fn trivial_min<'a>(a: &'a [Segment<f64>], b: &'a [Segment<f64>]) -> Option<&'a [Segment<f64>]> {
    let constant = |f: &[Segment<f64>]| (f.len() == 1 && f[0].y0 == f[0].y1).then_some(f[0].y0);
    let same_domain = a[0].x0 == b[0].x0 && a[a.len() - 1].x1 == b[b.len() - 1].x1;
    if !same_domain || a[0].x0 >= a[a.len() - 1].x1 {
        return None;
    }
    let (c, f, constant_fn) = match (constant(a), constant(b)) {
        (_, Some(c)) => (c, a, b),
        (Some(c), None) => (c, b, a),
        (None, None) => return None,
    };
    if !f.iter().all(|s| s.y0 <= s.y1) {
        return None;
    }
    if f[f.len() - 1].y1 <= c {
        Some(f)
    } else if f[0].y0 >= c {
        Some(constant_fn)
    } else {
        None
    }
}

/// Scratch buffers of the composition.
#[derive(Debug, Default)]
pub(crate) struct ComposeScratch {
    points: Vec<(f64, f64)>,
    outer_points: Vec<f64>,
}

/// `f ∘ g` into `out` for a scalar `g` whose values lie in `f`'s domain.
///
/// The reference collects (argument, value of g) at g's segment ends, plus, for every critical
/// point v of f that falls strictly inside a tilted segment of g, the argument where g
/// reaches v (interpolated on the transposed segment); it sorts these pairs and samples f at
/// them. For a nondecreasing g these pairs come out sorted when generated segment by segment,
/// so this generates them in that order (checking that they are sorted, and sorting
/// otherwise) and samples f with forward-moving cursors. A g that decreases somewhere takes the
/// reference path unchanged.
pub(crate) fn compose_into<V: Value>(
    f: &[Segment<V>],
    g: &[Segment<f64>],
    scratch: &mut ComposeScratch,
    out: &mut Vec<Segment<V>>,
) {
    let by_argument_then_value =
        |p: &(f64, f64), q: &(f64, f64)| p.0.total_cmp(&q.0).then(p.1.total_cmp(&q.1));
    let points = &mut scratch.points;
    points.clear();
    if g.iter().all(|s| s.y0 <= s.y1) {
        let outer = &mut scratch.outer_points;
        outer.clear();
        outer.extend(CriticalPoints::new(f));
        let mut next = 0;
        points.push((g[0].x0, g[0].y0));
        for s in g {
            if s.is_tilted() {
                // Critical points of f strictly inside (y0, y1).
                while next < outer.len() && outer[next] <= s.y0 {
                    next += 1;
                }
                let inverse = s.transpose();
                while next < outer.len() && outer[next] < s.y1 {
                    let v = outer[next];
                    points.push((inverse.value_at(v), v));
                    next += 1;
                }
            }
            points.push((s.x1, s.y1));
        }
        if !points.is_sorted_by(|p, q| by_argument_then_value(p, q).is_le()) {
            points.sort_unstable_by(by_argument_then_value);
        }
    } else {
        compose_points_reference(f, g, points);
        points.sort_unstable_by(by_argument_then_value);
    }

    let mut cursor = LimitCursor::new(f);
    let n = points.len();
    let mut b = Builder::from_buffer(std::mem::take(out));
    for i in 0..n {
        let (x, v) = points[i];
        let first = i == 0 || points[i - 1].0 != x;
        let last = i + 1 == n || points[i + 1].0 != x;
        // The right limit where g increases right after x, else the (left-continuous) value.
        let increases = i + 1 < n && points[i + 1].1 > v;
        if first && last {
            let (left, right) = cursor.limits(v);
            b.add_sample(x, left, if increases { right } else { left });
        } else if first {
            b.add_point(x, cursor.left_limit(v));
        } else if last {
            let right = if increases {
                cursor.right_limit(v)
            } else {
                cursor.left_limit(v)
            };
            b.add_point(x, right);
        }
    }
    *out = b.finish_buffer();
    trim_in_place(out);
}

/// The reference's (unsorted) composition points, for any g.
fn compose_points_reference<V: Value>(
    f: &[Segment<V>],
    g: &[Segment<f64>],
    points: &mut Vec<(f64, f64)>,
) {
    points.push((g[0].x0, g[0].y0));
    for s in g {
        points.push((s.x1, s.y1));
    }
    let inverse = Plf {
        segs: g.iter().map(Segment::transpose).collect(),
    };
    for v in CriticalPoints::new(f) {
        if inverse.is_defined_at(v) {
            let inv_seg = *inverse.segment_at(v);
            let seg = inv_seg.transpose();
            if seg.is_tilted() && v != seg.y0 && v != seg.y1 {
                points.push((inv_seg.value_at(v), v));
            }
        }
    }
}

/// Component `r` of a vector function as a scalar function, into `out` (builder rules apply:
/// segments that are vertical, horizontal or points in this component merge).
pub(crate) fn component_into(f: &[Segment<ResourceVector>], r: usize, out: &mut Vec<Segment<f64>>) {
    out.clear();
    for s in f {
        push_segment(out, Segment::new(s.x0, s.y0[r], s.x1, s.y1[r]));
    }
}

/// The part of the maximal fit factor for one resource (update §4): with `comp` a component
/// `c` of the fair share by fit factor, `c.transpose().narrow(g, limit).trim_left()
/// .shift(-g, 0).extend_right(1).trim()` into `out`. `comp` is transposed in place.
///
/// `monotone` says that `comp` is nondecreasing; then every intermediate function is a
/// nondecreasing builder output, which the builder's rules leave unchanged, so the re-building
/// inside `extend_right` can be skipped.
pub(crate) fn inverse_part_into(
    comp: &mut [Segment<f64>],
    g: f64,
    limit: f64,
    monotone: bool,
    out: &mut Vec<Segment<f64>>,
) {
    for s in comp.iter_mut() {
        *s = s.transpose();
    }
    narrow_into(comp, g, limit, out);
    trim_left_in_place(out);
    rebuild_in_place(out, |s| s.shift(-g, 0.0));
    if !monotone {
        rebuild_in_place(out, |s| *s);
    }
    let last = out[out.len() - 1];
    if last.x1 < 1.0 {
        push_segment(out, Segment::new(last.x1, last.y1, 1.0, last.y1));
    }
    trim_in_place(out);
}

/// [`Plf::compress`] of the function made of `segs`, into `out`.
pub(crate) fn compress_into(
    segs: &[Segment<ResourceVector>],
    eps: f64,
    out: &mut Vec<Segment<ResourceVector>>,
) {
    // Direction comparison of two scalar segments by the cross product of their deltas.
    #[inline]
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
    #[inline]
    fn bounds(s: &Segment<ResourceVector>, r: usize, eps: f64) -> ((f64, f64), (f64, f64)) {
        let dx = s.x1 - s.x0;
        let top = (dx, (s.y1[r] + eps) - s.y0[r]);
        let bottom = (dx, (s.y1[r] - eps) - s.y0[r]);
        (top, bottom)
    }

    // On a resource that is zero everywhere the bounds are (dx, ±eps) and the merged chord is
    // (dx, 0): it stays strictly inside exactly when dx·eps > 0, whatever the earlier bounds. Such
    // resources (the ones the cluster lacks) are checked that way. Skipping the others' bound
    // updates when a check fails changes nothing: the bounds are then reset.
    let zero: [bool; RESOURCE_COUNT] =
        std::array::from_fn(|r| segs.iter().all(|s| s.y0[r] == 0.0 && s.y1[r] == 0.0));
    let any_zero = zero.iter().any(|&z| z);
    let mut active = [0usize; RESOURCE_COUNT];
    let mut active_count = 0;
    for (r, &is_zero) in zero.iter().enumerate() {
        if !is_zero {
            active[active_count] = r;
            active_count += 1;
        }
    }
    let active = &active[..active_count];

    let mut b = Builder::from_buffer(std::mem::take(out));
    let mut acc = segs[0];
    let mut top = [(0.0, 0.0); RESOURCE_COUNT];
    let mut bottom = [(0.0, 0.0); RESOURCE_COUNT];
    for r in 0..RESOURCE_COUNT {
        (top[r], bottom[r]) = bounds(&acc, r, eps);
    }
    for cur in &segs[1..] {
        let merged = Segment::new(acc.x0, acc.y0, cur.x1, cur.y1);
        let mut can_extend = !any_zero || (merged.x1 - merged.x0) * eps > 0.0;
        for &r in active {
            if !can_extend {
                break;
            }
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
    *out = b.finish_buffer();
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

#[cfg(test)]
mod owned;
#[cfg(test)]
mod tests;
