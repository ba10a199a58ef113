//! M and S on critical points by the oracle's steps (per-resource inverses, their pointwise
//! minimum, the composition and its compression), bit for bit what the segment construction
//! (`crate::plf`) gives. The update no longer uses it (it builds M and S by the walk over F,
//! `crate::envelope`, and otherwise on segments); the unit tests keep it to check the walk
//! against.

use super::*;
use crate::plf::inverse_lower_bound;

/// The critical points of a builder-made function whose arguments never decrease, into `out`.
pub(crate) fn from_segments(segs: &[Segment<f64>], out: &mut Vec<Pt>) {
    out.clear();
    let first = segs[0];
    let mut j = if first.x0 == first.x1 {
        out.push(Pt {
            x: first.x0,
            l: first.y0,
            r: first.y1,
        });
        1
    } else {
        out.push(Pt {
            x: first.x0,
            l: first.y0,
            r: first.y0,
        });
        0
    };
    while j < segs.len() {
        let s = segs[j];
        debug_assert!(
            s.x0 < s.x1,
            "consecutive verticals or a decreasing argument"
        );
        let mut p = Pt {
            x: s.x1,
            l: s.y1,
            r: s.y1,
        };
        j += 1;
        if j < segs.len() && segs[j].x0 == segs[j].x1 {
            p.r = segs[j].y1;
            j += 1;
        }
        out.push(p);
    }
}

/// Whether the function never decreases (no segment's value decreases).
pub(crate) fn is_nondecreasing(pts: &[Pt]) -> bool {
    pts[0].l <= pts[0].r && pts.windows(2).all(|w| w[0].r <= w[1].l && w[1].l <= w[1].r)
}

/// The segments the builder makes of these critical points, into `out`.
pub(crate) fn to_segments(pts: &[Pt], out: &mut Vec<Segment<f64>>) {
    out.clear();
    append_segments(pts, out);
}

/// [`to_segments`] appended to `out`.
pub(crate) fn append_segments(pts: &[Pt], out: &mut Vec<Segment<f64>>) {
    let p0 = pts[0];
    if pts.len() == 1 || p0.l != p0.r {
        out.push(Segment::new(p0.x, p0.l, p0.x, p0.r));
    }
    for k in 1..pts.len() {
        let (p, q) = (pts[k - 1], pts[k]);
        out.push(Segment::new(p.x, p.r, q.x, q.l));
        if q.l != q.r {
            out.push(Segment::new(q.x, q.l, q.x, q.r));
        }
    }
}

/// The segment the reference traverser uses strictly between the critical points `k − 1` and
/// `k`.
#[inline(always)]
pub(super) fn covering(f: &[Pt], k: usize) -> Segment<f64> {
    let (p, q) = (f[k - 1], f[k]);
    Segment {
        x0: p.x,
        y0: p.r,
        x1: q.x,
        y1: q.l,
    }
}

/// The value strictly between the critical points `k − 1` and `k` (`fast_value` of
/// [`crate::plf`]: the constant of a horizontal segment, else the interpolation).
#[inline(always)]
pub(super) fn between(f: &[Pt], k: usize, x: f64) -> f64 {
    let (p, q) = (f[k - 1], f[k]);
    if p.r == q.l {
        p.r
    } else {
        let t = (x - p.x) / (q.x - p.x);
        let d = q.l - p.r;
        if t < 0.5 {
            p.r + d * t
        } else {
            q.l - d * (1.0 - t)
        }
    }
}

/// (left, right) limits at `x`, where `k` is the first critical point at or after `x`.
#[inline(always)]
pub(super) fn limits(f: &[Pt], k: usize, x: f64) -> (f64, f64) {
    let p = f[k];
    if p.x == x {
        (p.l, p.r)
    } else {
        let v = between(f, k, x);
        (v, v)
    }
}

/// The minimum of `a` and `b` without any work (as `trivial_min` in [`crate::plf`]): when one is
/// a constant on the same non-degenerate domain as the other, nondecreasing one, which lies
/// entirely below or above it. `Some(true)`: the minimum is `a`; `Some(false)`: it is `b`.
pub(super) fn trivial_min(a: &[Pt], b: &[Pt]) -> Option<bool> {
    let constant = |f: &[Pt]| {
        (f.len() == 2 && f[0].l == f[0].r && f[1].l == f[1].r && f[0].r == f[1].l).then_some(f[0].r)
    };
    let same_domain = a[0].x == b[0].x && a[a.len() - 1].x == b[b.len() - 1].x;
    if !same_domain || a[0].x >= a[a.len() - 1].x {
        return None;
    }
    // (the constant, the other function, whether the other function is `a`)
    let (c, f, f_is_a) = match (constant(a), constant(b)) {
        (_, Some(c)) => (c, a, true),
        (Some(c), None) => (c, b, false),
        (None, None) => return None,
    };
    let nondecreasing =
        f[0].l <= f[0].r && f.windows(2).all(|w| w[0].r <= w[1].l && w[1].l <= w[1].r);
    if !nondecreasing {
        return None;
    }
    if f[f.len() - 1].r <= c {
        Some(f_is_a)
    } else if f[0].l >= c {
        Some(!f_is_a)
    } else {
        None
    }
}

/// The pointwise minimum of `parts`, folded in order (`min(min(parts[0], parts[1]), …)`, each
/// step exactly [`min_into`]), into `acc`. A step whose minimum is one of its operands as it is
/// (see [`trivial_min`]) copies nothing: the fold goes on with that operand, and a part that is
/// the result at the end is swapped into `acc`. `parts` and `next` are left unspecified.
pub(crate) fn min_fold(parts: &mut [Vec<Pt>], acc: &mut Vec<Pt>, next: &mut Vec<Pt>) {
    // Where the minimum so far is: `Some(k)`: `parts[k]`; `None`: `acc`.
    let mut in_part = Some(0);
    for r in 1..parts.len() {
        let a: &[Pt] = match in_part {
            Some(k) => &parts[k],
            None => acc,
        };
        let b: &[Pt] = &parts[r];
        match trivial_min(a, b) {
            Some(true) => {}
            Some(false) => in_part = Some(r),
            None => {
                min_general_into(a, b, next);
                std::mem::swap(acc, next);
                in_part = None;
            }
        }
    }
    if let Some(k) = in_part {
        std::mem::swap(acc, &mut parts[k]);
    }
}

/// Pointwise minimum of `a` and `b` over the intersection of their domains, into `out`: exactly
/// what [`crate::plf::pointwise_min_into`] computes (the same samples, crossings searched the
/// same way), on critical points.
pub(crate) fn min_into(a: &[Pt], b: &[Pt], out: &mut Vec<Pt>) {
    match trivial_min(a, b) {
        Some(first) => {
            let lb = a[0].x.max(b[0].x);
            let rb = a[a.len() - 1].x.min(b[b.len() - 1].x);
            assert!(lb <= rb);
            out.clear();
            out.extend_from_slice(if first { a } else { b });
        }
        None => min_general_into(a, b, out),
    }
}

/// [`min_into`] where [`trivial_min`] does not apply.
pub(super) fn min_general_into(a: &[Pt], b: &[Pt], out: &mut Vec<Pt>) {
    let lb = a[0].x.max(b[0].x);
    let rb = a[a.len() - 1].x.min(b[b.len() - 1].x);
    assert!(lb <= rb);
    out.clear();
    let (na, nb) = (a.len(), b.len());
    let (mut ia, mut ib) = (0, 0);
    // Skip what lies before the intersection.
    while a[ia].x < lb {
        ia += 1;
    }
    while b[ib].x < lb {
        ib += 1;
    }
    // The previous point and both functions' right limits there (none before the first point).
    let (mut l, mut va, mut vb) = (f64::NAN, f64::NAN, f64::NAN);
    let mut first = true;
    loop {
        let xa = if ia < na { a[ia].x } else { f64::INFINITY };
        let xb = if ib < nb { b[ib].x } else { f64::INFINITY };
        let r = if xa <= xb { xa } else { xb };
        if r > rb {
            break;
        }
        let (al, ar) = limits(a, ia, r);
        let (bl, br) = limits(b, ib, r);
        // `va.min(vb) < va.max(vb)`: the right limits at the previous point differ (neither is
        // NaN). The lower one there is `a` unless `b` is strictly lower.
        if !first && (va < vb || vb < va) && (if vb >= va { al > bl } else { bl > al }) {
            let a_lower = vb >= va;
            let (sa, sb) = (covering(a, ia), covering(b, ib));
            let (lo, hi) = if a_lower { (sa, sb) } else { (sb, sa) };
            let x = inverse_lower_bound(l, r, |m| lo.value_at(m) <= hi.value_at(m));
            // The reference deduplicates a crossing found exactly at l.
            if x > l {
                let v = between(a, ia, x).min(between(b, ib, x));
                push_sample(out, x, v, v);
            }
        }
        push_sample(out, r, al.min(bl), ar.min(br));
        (l, va, vb) = (r, ar, br);
        first = false;
        ia += usize::from(xa == r);
        ib += usize::from(xb == r);
    }
}

/// Component `r` of a vector function, transposed (arguments and values swapped), as critical
/// points: what `component_into` followed by transposing every segment gives (the builder's rules
/// are symmetric in arguments and values), for a function whose arguments and component `r`
/// never decrease.
pub(crate) fn transposed_component_into(f: &[Segment<Rv>], r: usize, out: &mut Vec<Pt>) {
    out.clear();
    let first = f[0];
    out.push(Pt {
        x: first.y0[r],
        l: first.x0,
        r: first.x0,
    });
    for s in f {
        let (a, b) = (s.y0[r], s.y1[r]);
        if a == b {
            // A vertical (or a point): the value at the last critical point extends to x1.
            if s.x0 != s.x1 {
                let n = out.len();
                out[n - 1].r = s.x1;
            }
        } else {
            push_sample(out, b, s.x1, s.x1);
        }
    }
}

/// [`transposed_component_into`] for every resource, in one pass over `f`.
pub(crate) fn transposed_components_into(f: &[Segment<Rv>], out: &mut [Vec<Pt>; RESOURCE_COUNT]) {
    let first = f[0];
    for (r, o) in out.iter_mut().enumerate() {
        o.clear();
        o.push(Pt {
            x: first.y0[r],
            l: first.x0,
            r: first.x0,
        });
    }
    for s in f {
        for (r, o) in out.iter_mut().enumerate() {
            let (a, b) = (s.y0[r], s.y1[r]);
            if a == b {
                if s.x0 != s.x1 {
                    let n = o.len();
                    o[n - 1].r = s.x1;
                }
            } else {
                push_sample(o, b, s.x1, s.x1);
            }
        }
    }
}

/// The part of the maximal fit factor for one resource, `t.narrow(g, limit).trim_left()
/// .shift(−g, 0).extend_right(1).trim()` with `t` the transposed component (see
/// `crate::plf::inverse_part_into`), into `out`. Returns false (leaving `out` unspecified) when
/// the shift makes two critical points coincide: then the builder would merge segments, which
/// this does not reproduce.
pub(crate) fn inverse_part_into(t: &[Pt], g: f64, limit: f64, out: &mut Vec<Pt>) -> bool {
    out.clear();
    let dx = -g;
    let mut k = 0;
    while t[k].x < g {
        k += 1;
    }
    // The sample at g, its vertical dropped (trim_left).
    let (_, r0) = limits(t, k, g);
    let r0 = r0 + 0.0;
    out.push(Pt {
        x: g + dx,
        l: r0,
        r: r0,
    });
    let mut last_x = g + dx;
    if t[k].x == g {
        k += 1;
    }
    // Critical points strictly between g and the limit, then the sample at the limit.
    let mut push = |out: &mut Vec<Pt>, x: f64, l: f64, r: f64| -> bool {
        let x = x + dx;
        if x <= last_x {
            return false;
        }
        last_x = x;
        push_sample(out, x, l + 0.0, r + 0.0);
        true
    };
    while k < t.len() && t[k].x < limit {
        let p = t[k];
        if !push(out, p.x, p.l, p.r) {
            return false;
        }
        k += 1;
    }
    if limit > g {
        let (l, r) = limits(t, k, limit);
        if !push(out, limit, l, r) {
            return false;
        }
    }
    let n = out.len();
    let last = out[n - 1];
    if last.x < 1.0 {
        push_sample(out, 1.0, last.r, last.r);
    } else if last.l != last.r {
        out[n - 1].r = last.l;
    }
    true
}

/// [`inverse_part_into`] that may take `t`'s buffer (leaving `t` unspecified): where the part
/// keeps every critical point of `t` (the guarantee at its first argument, the limit at its
/// last; the common case), `t` is shifted in place and swapped into `out` instead of being
/// re-sampled point by point. The same operations on every point give the same bits, and the
/// builder's merges cannot differ: they compare values only, which are those `t` was built from
/// (but for the first point's left limit, which no later merge test reads).
pub(crate) fn inverse_part_take(t: &mut Vec<Pt>, g: f64, limit: f64, out: &mut Vec<Pt>) -> bool {
    let n = t.len();
    if !(n >= 2 && t[0].x == g && t[n - 1].x == limit && limit > g) {
        return inverse_part_into(t, g, limit, out);
    }
    let dx = -g;
    let r0 = t[0].r + 0.0;
    let mut last_x = g + dx;
    t[0] = Pt {
        x: last_x,
        l: r0,
        r: r0,
    };
    for p in &mut t[1..] {
        let x = p.x + dx;
        if x <= last_x {
            return false;
        }
        last_x = x;
        *p = Pt {
            x,
            l: p.l + 0.0,
            r: p.r + 0.0,
        };
    }
    let last = t[n - 1];
    if last.x < 1.0 {
        push_sample(t, 1.0, last.r, last.r);
    } else if last.l != last.r {
        t[n - 1].r = last.l;
    }
    std::mem::swap(t, out);
    true
}

/// Left and right limits of F at nondecreasing arguments, as [`LimitCursor`] reads them, on a
/// forward cursor over F's segments (which must never decrease in argument) with the current
/// segment's interpolation operands kept; an argument that goes backwards starts over.
pub(super) struct FSampler<'a> {
    f: &'a [Segment<Rv>],
    /// The first segment with `x1 >= x` for the last argument x.
    j: usize,
    /// Operands of the interpolation on segment j: dx, d, and whether it is horizontal.
    dx: f64,
    d: Rv,
    horizontal: bool,
}

impl<'a> FSampler<'a> {
    fn new(f: &'a [Segment<Rv>]) -> FSampler<'a> {
        let mut s = FSampler {
            f,
            j: 0,
            dx: 0.0,
            d: Rv::ZERO,
            horizontal: false,
        };
        s.load();
        s
    }

    #[inline(always)]
    fn load(&mut self) {
        let s = &self.f[self.j];
        self.dx = s.x1 - s.x0;
        self.d = s.y1.sub(s.y0);
        self.horizontal = s.y0.same(s.y1);
    }

    #[inline(always)]
    fn seek(&mut self, x: f64) {
        let f = self.f;
        let n = f.len();
        // Backwards (or onto the start of segment j, which only a backward move reaches): search.
        if x <= f[self.j].x0 && self.j > 0 {
            self.j = f.partition_point(|s| s.x1 < x).min(n - 1);
            self.load();
            return;
        }
        if f[self.j].x1 < x && self.j + 1 < n {
            while f[self.j].x1 < x && self.j + 1 < n {
                self.j += 1;
            }
            self.load();
        }
    }

    /// `fast_value` on segment j.
    #[inline(always)]
    fn value(&self, x: f64) -> Rv {
        let s = &self.f[self.j];
        if x == s.x0 || self.horizontal {
            s.y0
        } else if x == s.x1 {
            s.y1
        } else {
            let t = (x - s.x0) / self.dx;
            if t < 0.5 {
                s.y0.add(self.d.mul(t))
            } else {
                s.y1.sub(self.d.mul(1.0 - t))
            }
        }
    }

    /// (left limit, right limit) at `x`.
    #[inline(always)]
    fn limits(&mut self, x: f64) -> (Rv, Rv) {
        self.seek(x);
        let f = self.f;
        let j = self.j;
        let s = &f[j];
        if s.x0 == s.x1 {
            // A vertical (only at the left bound, or past its end for a single segment).
            let right = if j + 1 < f.len() && f[j + 1].x0 <= x {
                fast_value_right(&f[j + 1], x)
            } else {
                s.y1
            };
            return (s.y0, right);
        }
        let left = self.value(x);
        // The right limit comes from the last segment starting at or before x.
        if x == s.x1 && j + 1 < f.len() {
            let mut k = j + 1;
            while k + 1 < f.len() && f[k + 1].x0 <= x {
                k += 1;
            }
            (left, fast_value_right(&f[k], x))
        } else {
            (left, left)
        }
    }
}

/// `fast_limits(s, x).1` of [`crate::plf`] for a segment starting at or before `x`.
#[inline(always)]
pub(super) fn fast_value_right(s: &Segment<Rv>, x: f64) -> Rv {
    if s.x0 == s.x1 {
        s.y1
    } else if x == s.x0 || s.y0.same(s.y1) {
        s.y0
    } else if x == s.x1 {
        s.y1
    } else {
        s.interpolate(x)
    }
}

/// [`compose_compress_append`] into `out`, cleared first.
pub(crate) fn compose_compress_into(
    f: &[Segment<Rv>],
    g: &[Pt],
    eps: f64,
    outer: &mut Vec<f64>,
    points: &mut Vec<(f64, f64)>,
    out: &mut Vec<Segment<Rv>>,
) {
    out.clear();
    compose_compress_append(f, g, eps, outer, points, out);
}

/// `compress(F ∘ g)` appended to `out` for a nondecreasing scalar `g` given by its critical points whose
/// values lie in F's domain (F's arguments never decrease): exactly `compose_into` (on
/// `to_segments(g)`) followed by `compress_into`, without materialising the composition.
/// `outer` and `points` are scratch space.
pub(crate) fn compose_compress_append(
    f: &[Segment<Rv>],
    g: &[Pt],
    eps: f64,
    outer: &mut Vec<f64>,
    points: &mut Vec<(f64, f64)>,
    out: &mut Vec<Segment<Rv>>,
) {
    // The composition's points: g's segment ends and, inside every tilted segment of g, the
    // arguments where g reaches a critical point of F (as `compose_into` generates them).
    outer.clear();
    let mut last = f[0].x0;
    outer.push(last);
    for s in f {
        if s.x1 > last {
            last = s.x1;
            outer.push(last);
        }
    }
    points.clear();
    let mut next = 0;
    let g0 = g[0];
    points.push((g0.x, g0.l));
    if g.len() == 1 || g0.l != g0.r {
        points.push((g0.x, g0.r));
    }
    for k in 1..g.len() {
        let (p, q) = (g[k - 1], g[k]);
        if p.r != q.l {
            // Tilted: critical points of F strictly inside (p.r, q.l).
            while next < outer.len() && outer[next] <= p.r {
                next += 1;
            }
            let inverse = Segment {
                x0: p.r,
                y0: p.x,
                x1: q.l,
                y1: q.x,
            };
            while next < outer.len() && outer[next] < q.l {
                let v = outer[next];
                points.push((inverse.value_at(v), v));
                next += 1;
            }
        }
        points.push((q.x, q.l));
        if q.l != q.r {
            points.push((q.x, q.r));
        }
    }
    let by_argument_then_value =
        |p: &(f64, f64), q: &(f64, f64)| p.0.total_cmp(&q.0).then(p.1.total_cmp(&q.1));
    if !points.is_sorted_by(|p, q| by_argument_then_value(p, q).is_le()) {
        points.sort_unstable_by(by_argument_then_value);
    }

    // Network is zero in many trees (and in the benchmark's): then the compressor skips it.
    if f.iter()
        .all(|s| s.y0.0[RESOURCE_COUNT - 1] == 0.0 && s.y1.0[RESOURCE_COUNT - 1] == 0.0)
    {
        sample_and_compress::<{ RESOURCE_COUNT - 1 }>(f, points, eps, out);
    } else {
        sample_and_compress::<RESOURCE_COUNT>(f, points, eps, out);
    }
}

/// The composition's points, sampled on F, through the builder into the compressor (appended
/// to `out`); with `N < RESOURCE_COUNT`, F's last resource must be zero everywhere.
#[inline(always)]
pub(super) fn sample_and_compress<const N: usize>(
    f: &[Segment<Rv>],
    points: &[(f64, f64)],
    eps: f64,
    out: &mut Vec<Segment<Rv>>,
) {
    let mut sampler = FSampler::new(f);
    let n = points.len();
    let mut b = VertexBuilder::<N>::new(eps, std::mem::take(out));
    for i in 0..n {
        let (x, v) = points[i];
        let first = i == 0 || points[i - 1].0 != x;
        let last = i + 1 == n || points[i + 1].0 != x;
        // The right limit where g increases right after x, else the (left-continuous) value.
        let increases = i + 1 < n && points[i + 1].1 > v;
        if first && last {
            let (left, right) = sampler.limits(v);
            b.add_sample(x, left, if increases { right } else { left });
        } else if first {
            b.add_point(x, sampler.limits(v).0);
        } else if last {
            let (left, right) = sampler.limits(v);
            b.add_point(x, if increases { right } else { left });
        }
    }
    *out = b.finish();
}
