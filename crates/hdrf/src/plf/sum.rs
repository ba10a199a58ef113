//! Sums of functions: exact (left to right at every critical point), pairwise, balanced, and
//! the adaptive choice between them ([`super::EXACT_SUM`]).

use super::*;

/// Scratch buffers of the summation.
#[derive(Debug)]
pub(crate) struct SumScratch<V> {
    pub(super) points: Vec<f64>,
    /// Running (left, right) sums per point; the right one only where `parted` is set.
    pub(super) sums: Vec<(V, V)>,
    /// Per point: some function so far had different left and right limits there.
    pub(super) parted: Vec<bool>,
    pub(super) spare: Vec<Vec<Segment<V>>>,
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
pub(super) fn add_sampled<V: Value>(
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
pub(super) struct SweepCursor<'a, V> {
    pub(super) f: &'a [Segment<V>],
    /// The next critical point (+∞ past the last).
    pub(super) next: f64,
    /// Before the left bound has been visited.
    pub(super) at_start: bool,
    /// The segment reaching `next` (not vertical).
    pub(super) j: usize,
    pub(super) dx: f64,
    pub(super) d: V,
    pub(super) horizontal: bool,
}

impl<'a, V: Value> SweepCursor<'a, V> {
    pub(super) fn new(f: &'a [Segment<V>]) -> SweepCursor<'a, V> {
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
    pub(super) fn limits(&self, x: f64) -> (V, V) {
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
    pub(super) fn advance(&mut self) {
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
pub(super) fn sum_balanced_into<V: Value>(
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
