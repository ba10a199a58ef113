//! M and S of an element in one walk over F (the default; `Tuning::envelope`).
//!
//! The reference builds M as the pointwise minimum of five per-resource inverses of F, each
//! with a critical point wherever its resource of F has one, and then samples F at every one
//! of those points and compresses the result into S. M then has up to five times as many
//! critical points as F (one per resource and breakpoint of F), almost all of them on straight
//! pieces of the minimum, and the composition samples F at each.
//!
//! Here M is built from what it is: with `g` the guarantee and `L` the limits (each clamped to
//! the range of its component of F), and σ(f) = max_r (F_r(f) − g_r) along F,
//!
//! * M(0) = a = sup { f : F_r(f) ≤ g_r for every r } (the largest fit factor within the
//!   guarantee), and
//! * M(s) = min(E(s), b) for s in (0, 1], with E(s) = inf { f : σ(f) ≥ s } and
//!   b = sup { f : F_r(f) ≤ L_r for every r }.
//!
//! (Each per-resource inverse m_r is `inf { f : F_r(f) ≥ g_r + s }` up to `s = L_r − g_r` and
//! `sup { f : F_r(f) ≤ L_r }` beyond; the minimum of the infima is the infimum of the union of
//! the sets, which is E, and since every m_r stays below its own cap, the caps enter as their
//! minimum b.) E is the inverse of σ along F's chain of vertices, so walking F's vertices once
//! from f = a to f = b and mapping each vertex (f, F(f)) to (σ(f), f) gives M's critical points,
//! with one more wherever the resource that attains σ changes inside a segment of F (σ is the
//! maximum of five lines there). S = F ∘ M then needs no sampling: at each of these points F's
//! value is the vertex's own (or, at the few points inside a segment, one interpolation), and
//! the samples go through the same builder as the reference composition. S is not compressed:
//! the reference compresses (ε = 1e-15) to drop the points the extra critical points of its M
//! leave on straight pieces of S, and this S has none of those (on the benchmark tree of 10,000
//! pools and 100,000 operations compression would remove 0.1 % of its segments).
//!
//! The function is the same as the reference's; values differ from it in the last bits only
//! (at points where the reference interpolates M between its extra critical points, at the
//! crossings, which the reference finds by bisection, and by compression), which
//! `tests/differential.rs` bounds against the oracle (`fairsched_hdrf_testkit::oracle`).

use crate::crit::{Pt, VertexBuilder, push_sample};
use crate::plf::{Segment, Value, fast_value};
use fairsched_resources::{RESOURCE_COUNT, ResourceVector};

type Rv = ResourceVector;

/// Whether every component of `y` is at most the bound's.
#[inline(always)]
fn within(y: &Rv, bound: &[f64; RESOURCE_COUNT]) -> bool {
    (0..RESOURCE_COUNT).all(|r| y.0[r] <= bound[r])
}

/// σ at a point of F: the largest `y_r − g_r`.
#[inline(always)]
fn sigma(y: &Rv, g: &[f64; RESOURCE_COUNT]) -> f64 {
    let mut s = y.0[0] - g[0];
    for (&v, &g) in y.0[1..].iter().zip(&g[1..]) {
        s = s.max(v - g);
    }
    s
}

/// The smallest argument on the tilted segment `seg` where a resource that ends above its
/// `level` reaches it: the per-resource inverse of F sampled at that level, as the reference
/// narrows its transposed component (the segment `(y0_r, x0) → (y1_r, x1)` at `level_r`).
fn first_crossing(seg: &Segment<Rv>, level: &[f64; RESOURCE_COUNT]) -> f64 {
    let mut x = seg.x1;
    for (r, &level) in level.iter().enumerate() {
        let (y0, y1) = (seg.y0.0[r], seg.y1.0[r]);
        if y1 > level {
            let at = if y0 == level {
                seg.x0
            } else {
                Segment::new(y0, seg.x0, y1, seg.x1).interpolate(level)
            };
            x = x.min(at);
        }
    }
    x.clamp(seg.x0, seg.x1)
}

/// The points strictly inside `(from, to)` on the tilted segment `seg` where the resource
/// attaining σ changes (σ is the upper envelope of five lines there), with F's values, into
/// `out` as (argument, value, σ).
fn crossings(
    seg: &Segment<Rv>,
    g: &[f64; RESOURCE_COUNT],
    (from, y_from): (f64, &Rv),
    (to, y_to, top_at_to): (f64, &Rv, f64),
    out: &mut Points,
) {
    let at_from: [f64; RESOURCE_COUNT] = std::array::from_fn(|r| y_from.0[r] - g[r]);
    let at_to: [f64; RESOURCE_COUNT] = std::array::from_fn(|r| y_to.0[r] - g[r]);
    // How much each line rises over the piece (in the order of the slopes).
    let rise: [f64; RESOURCE_COUNT] = std::array::from_fn(|r| at_to[r] - at_from[r]);
    // The line on top right after `from`: the largest value, then the steepest.
    let mut cur = 0;
    for r in 1..RESOURCE_COUNT {
        if at_from[r] > at_from[cur] || (at_from[r] == at_from[cur] && rise[r] > rise[cur]) {
            cur = r;
        }
    }
    // The same line on top at `to`: no crossing (σ is convex).
    if at_to[cur] == top_at_to {
        return;
    }
    let width = to - from;
    let mut x = from;
    loop {
        // The first steeper line to overtake `cur` before `to`.
        let mut next: Option<(f64, usize)> = None;
        for q in 0..RESOURCE_COUNT {
            if rise[q] <= rise[cur] {
                continue;
            }
            let t = (at_from[cur] - at_from[q]) / (rise[q] - rise[cur]);
            let xq = (from + width * t).max(x);
            if xq < to && next.is_none_or(|(xn, _)| xq < xn) {
                next = Some((xq, q));
            }
        }
        let Some((xq, q)) = next else { break };
        if xq > x {
            // σ there is on both lines; the one left behind gives it exactly where it is flat
            // (M then rises straight up to the crossing, as in the reference).
            let y = fast_value(seg, xq);
            out.push((xq, y, y.0[cur] - g[cur]));
        }
        x = xq;
        cur = q;
    }
    // Another line is on top at `to` although no crossing was found before it: they cross
    // within rounding of `to`. Then σ stays on `cur`'s line up to `to` (M rises to `to` at
    // that level) before it takes the top line's value there.
    let on_cur = at_to[cur];
    if on_cur < top_at_to && x < to {
        out.push((to, *y_to, on_cur));
    }
}

/// The points of one piece of the walk (argument, F's value, σ): at most four crossings (each
/// moves to a strictly steeper line of five), one more where two lines cross within rounding
/// of the piece's end, and the end.
struct Points {
    items: [(f64, Rv, f64); RESOURCE_COUNT + 1],
    len: usize,
}

impl Points {
    fn new() -> Points {
        Points {
            items: [(0.0, Rv::ZERO, 0.0); RESOURCE_COUNT + 1],
            len: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, p: (f64, Rv, f64)) {
        self.items[self.len] = p;
        self.len += 1;
    }

    #[inline(always)]
    fn as_slice(&self) -> &[(f64, Rv, f64)] {
        &self.items[..self.len]
    }
}

/// The group of points of M at one suggestion (a vertical of M when it spans fit factors).
#[derive(Clone, Copy)]
struct Group {
    s: f64,
    /// M's left and right values.
    l: f64,
    r: f64,
    /// F's left limit at `l`.
    f_left_at_l: Rv,
    /// F's value at the last point of the group (its right limit at `r` when M increases
    /// right after the group).
    f_last: Rv,
    /// F's left limit at `r`.
    f_left_at_r: Rv,
}

/// Collects M's points and S's samples.
struct Emitter<'a, const N: usize> {
    m: &'a mut Vec<Pt>,
    s: VertexBuilder<N>,
    group: Group,
    /// F's left limit at the fit factor of the last point (the first value seen there).
    cur_f: f64,
    cur_left: Rv,
}

impl<const N: usize> Emitter<'_, N> {
    /// The point (σ = `s`, fit factor `f`, F's value `y`) of the walk.
    #[inline(always)]
    fn push(&mut self, s: f64, f: f64, y: Rv) {
        let f = f.max(self.cur_f);
        if f != self.cur_f {
            self.cur_f = f;
            self.cur_left = y;
        }
        // M(0) is the start's own value; points at σ ≤ 0 are within the guarantee.
        if s <= 0.0 {
            return;
        }
        let s = s.max(self.group.s);
        if s == self.group.s && self.group.s > 0.0 {
            self.group.r = f;
            self.group.f_last = y;
            self.group.f_left_at_r = self.cur_left;
            return;
        }
        self.flush(f > self.group.r);
        self.group = Group {
            s,
            l: f,
            r: f,
            f_left_at_l: self.cur_left,
            f_last: y,
            f_left_at_r: self.cur_left,
        };
    }

    /// Emits the current group; `increases`: whether M increases right after it.
    #[inline(always)]
    fn flush(&mut self, increases: bool) {
        let g = self.group;
        push_sample(self.m, g.s, g.l, g.r);
        let right = if increases { g.f_last } else { g.f_left_at_r };
        self.s.add_sample(g.s, g.f_left_at_l, right);
    }
}

/// M (as critical points, into `m`) and S (appended to `s_out`) of an element whose F (`f`:
/// nondecreasing values, nondecreasing arguments) has the per-resource
/// guarantee `g` and limit `limit`, each clamped to its component's range (`lo ≤ g ≤ limit ≤
/// hi`). Returns false, leaving both unspecified, when an input is not finite.
pub(crate) fn max_fit_factor_and_share(
    f: &[Segment<Rv>],
    g: &[f64; RESOURCE_COUNT],
    limit: &[f64; RESOURCE_COUNT],
    m: &mut Vec<Pt>,
    s_out: &mut Vec<Segment<Rv>>,
) -> bool {
    if !g.iter().chain(limit).all(|v| v.is_finite()) {
        return false;
    }
    if f.iter()
        .all(|s| s.y0.0[RESOURCE_COUNT - 1] == 0.0 && s.y1.0[RESOURCE_COUNT - 1] == 0.0)
    {
        walk::<{ RESOURCE_COUNT - 1 }>(f, g, limit, m, s_out);
    } else {
        walk::<RESOURCE_COUNT>(f, g, limit, m, s_out);
    }
    true
}

fn walk<const N: usize>(
    f: &[Segment<Rv>],
    g: &[f64; RESOURCE_COUNT],
    limit: &[f64; RESOURCE_COUNT],
    m: &mut Vec<Pt>,
    s_out: &mut Vec<Segment<Rv>>,
) {
    let n = f.len();
    // The segments where F first leaves the guarantee and the limits (n: never).
    let ka = f.iter().position(|s| !within(&s.y1, g)).unwrap_or(n);
    let kb = f[ka.min(n - 1)..]
        .iter()
        .position(|s| !within(&s.y1, limit))
        .map_or(n, |k| k + ka.min(n - 1));
    let kb = kb.max(ka);

    // a, and F's left limit and value there.
    let (a, ya_left, ya) = if ka == n {
        // F's end (its left limit there is the lower end of a final jump, which a trimmed
        // function does not have, or of a lone vertical).
        let last = &f[n - 1];
        let left = if last.x0 == last.x1 { last.y0 } else { last.y1 };
        (last.x1, left, last.y1)
    } else {
        let seg = &f[ka];
        if seg.x0 == seg.x1 {
            (seg.x0, seg.y0, seg.y0)
        } else {
            let a = first_crossing(seg, g);
            let y = fast_value(seg, a);
            // At the start of the segment, after a jump there, the left limit is the jump's
            // lower end.
            let left = if a == seg.x0 && ka > 0 && f[ka - 1].x0 == f[ka - 1].x1 {
                f[ka - 1].y0
            } else {
                y
            };
            (a, left, y)
        }
    };
    m.clear();
    let mut e = Emitter::<N> {
        m,
        s: VertexBuilder::new(0.0, std::mem::take(s_out)),
        group: Group {
            s: 0.0,
            l: a,
            r: a,
            f_left_at_l: ya_left,
            f_last: ya,
            f_left_at_r: ya_left,
        },
        cur_f: a,
        cur_left: ya_left,
    };

    // The walk from a towards b, stopping once σ passes 1.
    let mut last = (0.0, a, ya);
    let mut done = ka == n;
    let mut k = ka;
    // The piece of segment k still to walk starts at `from` (a on segment ka), where F is
    // `y_from`.
    let mut from = a;
    let mut y_from = ya;
    // The points of one piece: the crossings inside it, then its end.
    let mut points = Points::new();
    while !done && k < n {
        let seg = f[k];
        let vertical = seg.x0 == seg.x1;
        // Where this piece ends: the segment's end, or b on segment kb.
        let (to, y_to, stop) = if k == kb {
            if vertical {
                break;
            }
            let b = first_crossing(&seg, limit).max(from);
            (b, fast_value(&seg, b), true)
        } else {
            (seg.x1, seg.y1, false)
        };
        points.len = 0;
        let s_to = sigma(&y_to, g);
        if !vertical && to > from {
            crossings(&seg, g, (from, &y_from), (to, &y_to, s_to), &mut points);
        }
        points.push((to, y_to, s_to));
        for &(x, y, s) in points.as_slice() {
            if s > 1.0 {
                // M reaches 1 on the straight piece of M from the last point to this one.
                let (s0, f0, y0) = last;
                let f1 = if vertical || s <= s0 {
                    f0
                } else {
                    let t = (1.0 - s0) / (s - s0);
                    (f0 + (x - f0) * t).clamp(f0, x)
                };
                let y1 = if vertical { y0 } else { fast_value(&seg, f1) };
                e.push(1.0, f1, y1);
                last = (1.0, f1, y1);
                done = true;
                break;
            }
            e.push(s, x, y);
            last = (s, x, y);
        }
        if stop {
            break;
        }
        k += 1;
        from = to;
        y_from = y_to;
    }
    // Past σ(b) (or the end of F), M stays at its last fit factor up to 1.
    if !done || last.0 < 1.0 {
        let (_, fl, yl) = last;
        e.push(1.0, fl, yl);
    }
    e.flush(false);
    // No vertical at the right end (trim).
    let n_m = e.m.len();
    let p = &mut e.m[n_m - 1];
    p.r = p.l;
    *s_out = e.s.finish();
}

/// The guarantee and the limit M is built with, per resource: the element's `limits` and
/// `guarantee`, clamped to the range `[lo, hi]` of F's component (`lo ≤ g ≤ limit ≤ hi`).
pub(crate) fn clamped_bounds(
    limits: &Rv,
    guarantee: &Rv,
    lo: &Rv,
    hi: &Rv,
) -> ([f64; RESOURCE_COUNT], [f64; RESOURCE_COUNT]) {
    let limit: [f64; RESOURCE_COUNT] =
        std::array::from_fn(|r| limits.0[r].max(lo.0[r]).min(hi.0[r]));
    let g = std::array::from_fn(|r| guarantee.0[r].max(lo.0[r]).min(limit[r]));
    (g, limit)
}

/// A normal pool's F as the sum of its (scaled, extended) children's S, read at single points
/// without being built: the values the exact sum (`crate::plf::sum_exact_into`) gives at its
/// critical points, which are the union of the children's.
struct Sum<'a> {
    children: &'a [&'a [Segment<Rv>]],
}

/// `f`'s (left, right) limits at `x` as `crate::plf::for_each_limits` reads them.
fn limits_on(f: &[Segment<Rv>], x: f64) -> (Rv, Rv) {
    let s0 = &f[0];
    if s0.x0 == s0.x1 && x <= s0.x1 {
        return (s0.y0, s0.y1);
    }
    let j = f.partition_point(|s| s.x1 < x).min(f.len() - 1);
    let s = &f[j];
    if x == s.x1 {
        (s.y1, crate::plf::right_limit_at_end(f, j))
    } else {
        let v = if s.y0.same(s.y1) || x == s.x0 {
            s.y0
        } else {
            s.interpolate(x)
        };
        (v, v)
    }
}

impl Sum<'_> {
    /// F's (left, right) limits at the critical point `x`, added child by child.
    fn limits(&self, x: f64) -> (Rv, Rv) {
        let (mut l, mut r) = (Rv::ZERO, Rv::ZERO);
        for f in self.children {
            let (a, b) = limits_on(f, x);
            l = l.add(a);
            r = r.add(b);
        }
        (l, r)
    }

    /// The last critical point at or before `x`.
    fn last_point(&self, x: f64) -> f64 {
        let mut p = f64::MIN;
        for f in self.children {
            let k = f.partition_point(|s| s.x1 <= x);
            p = p.max(if k == 0 { f[0].x0 } else { f[k - 1].x1 });
        }
        p
    }

    /// The first critical point after `u`.
    fn next_point(&self, u: f64) -> f64 {
        let mut q = f64::INFINITY;
        for f in self.children {
            let k = f.partition_point(|s| s.x1 <= u);
            if k < f.len() {
                q = q.min(f[k].x1);
            }
        }
        q
    }

    /// The first vertex of F's chain (in order: the left limit at each critical point, then
    /// the right limit) that fails `ok`, as the segment ending there: (its start `u`, its end
    /// `q`, whether it is the vertical at `q`). Vertices never fail and then pass again.
    fn first_failure(&self, ok: impl Fn(&Rv) -> bool) -> Option<(f64, f64, bool)> {
        let passes = |f: f64| {
            let (l, r) = self.limits(self.last_point(f));
            ok(&l) && ok(&r)
        };
        if !passes(0.0) {
            let (l, _) = self.limits(0.0);
            return Some((0.0, 0.0, ok(&l)));
        }
        if passes(1.0) {
            return None;
        }
        let f = crate::plf::inverse_lower_bound(0.0, 1.0, passes);
        let u = self.last_point(f);
        let q = self.next_point(u);
        let (left, _) = self.limits(q);
        Some((u, q, ok(&left)))
    }
}

/// M(1) and S(1) of a normal pool in classic mode, from its children's S scaled by their
/// relative weights and extended to 1 (`children`), without building its functions: the walk of
/// [`max_fit_factor_and_share`] on the sum of the children would stop on the first segment of F
/// where it leaves the limits or where σ passes 1, and these are found by bisection over F's
/// vertices, read as the exact sum computes them; that one segment is then walked with the
/// walk's own arithmetic. Returns (M(1), S(1), F(0), F(1)); `limits` and `guarantee` are the
/// pool's, unclamped.
pub(crate) fn max_fit_factor_and_share_at_one(
    children: &[&[Segment<Rv>]],
    limits: &Rv,
    guarantee: &Rv,
) -> (f64, Rv, Rv, Rv) {
    let sum = Sum { children };
    let lo = sum.limits(0.0).0;
    let hi = sum.limits(1.0).1;
    let (g, limit) = clamped_bounds(limits, guarantee, &lo, &hi);
    let segment = |u: f64, q: f64| Segment {
        x0: u,
        y0: sum.limits(u).1,
        x1: q,
        y1: sum.limits(q).0,
    };
    // Where the walk starts: a, F's left limit and value there, and a's segment.
    let at_a = sum.first_failure(|y| within(y, &g));
    let (a, a_left, a_value) = match at_a {
        None => {
            let end = sum.limits(1.0).0;
            (1.0, end, end)
        }
        Some((_, q, true)) => {
            let left = sum.limits(q).0;
            (q, left, left)
        }
        Some((u, q, false)) => {
            let seg = segment(u, q);
            let a = first_crossing(&seg, &g);
            let y = fast_value(&seg, a);
            let left = if a == u { sum.limits(u).0 } else { y };
            (a, left, y)
        }
    };
    let Some(a_at) = at_a else {
        return (a, a_left, lo, hi);
    };
    let at_b = sum.first_failure(|y| within(y, &limit));
    let at_one = sum.first_failure(|y| sigma(y, &g) <= 1.0);
    // The first of the two in chain order (the limits' first on a tie: that piece ends at b).
    let position = |(_, q, vertical): (f64, f64, bool)| (q, vertical);
    let (piece, stop) = match (at_b, at_one) {
        (None, None) => {
            let end = sum.limits(1.0).0;
            return (1.0, end, lo, hi);
        }
        (Some(b), None) => (b, true),
        (None, Some(o)) => (o, false),
        (Some(b), Some(o)) => {
            if position(b) <= position(o) {
                (b, true)
            } else {
                (o, false)
            }
        }
    };
    let (u, q, vertical) = piece;
    if vertical {
        // M stays at q from the vertex before the jump on (S at its left limit).
        return (q, sum.limits(q).0, lo, hi);
    }
    let seg = segment(u, q);
    let starts_at_a = position(a_at) == (q, false);
    let (from, y_from) = if starts_at_a {
        (a, a_value)
    } else {
        (u, seg.y0)
    };
    let mut last = if starts_at_a {
        (0.0, a, a_value)
    } else {
        (sigma(&seg.y0, &g), u, seg.y0)
    };
    let (mut cur_f, mut cur_left) = if starts_at_a {
        (a, a_left)
    } else {
        (u, sum.limits(u).0)
    };
    let (to, y_to) = if stop {
        let b = first_crossing(&seg, &limit).max(from);
        (b, fast_value(&seg, b))
    } else {
        (q, seg.y1)
    };
    let mut points = Points::new();
    let s_to = sigma(&y_to, &g);
    if to > from {
        crossings(&seg, &g, (from, &y_from), (to, &y_to, s_to), &mut points);
    }
    points.push((to, y_to, s_to));
    let track = |x: f64, y: Rv, cur_f: &mut f64, cur_left: &mut Rv| {
        let x = x.max(*cur_f);
        if x != *cur_f {
            *cur_f = x;
            *cur_left = y;
        }
    };
    for &(x, y, s) in points.as_slice() {
        if s > 1.0 {
            let (s0, f0, _) = last;
            let f1 = if s <= s0 {
                f0
            } else {
                let t = (1.0 - s0) / (s - s0);
                (f0 + (x - f0) * t).clamp(f0, x)
            };
            let y1 = fast_value(&seg, f1);
            track(f1, y1, &mut cur_f, &mut cur_left);
            return (cur_f, cur_left, lo, hi);
        }
        track(x, y, &mut cur_f, &mut cur_left);
        last = (s, x, y);
    }
    (cur_f, cur_left, lo, hi)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::crit::tests::{Rng, random_vector};
    use crate::plf::{
        ComposeScratch, PlfRef, component_into, compose_into, compress_into, inverse_part_into,
        pointwise_min_into,
    };

    /// M and S as the reference builds them (per-resource inverses, their pointwise minimum in
    /// resource order, the composition and its compression), on segments.
    pub(crate) fn reference(
        f: &[Segment<Rv>],
        g: &[f64; RESOURCE_COUNT],
        limit: &[f64; RESOURCE_COUNT],
    ) -> (Vec<Segment<f64>>, Vec<Segment<Rv>>) {
        let mut parts: Vec<Vec<Segment<f64>>> = Vec::new();
        for r in 0..RESOURCE_COUNT {
            let mut comp = Vec::new();
            component_into(f, r, &mut comp);
            let mut part = Vec::new();
            inverse_part_into(&mut comp, g[r], limit[r], true, &mut part);
            parts.push(part);
        }
        let mut m = parts[0].clone();
        for part in &parts[1..] {
            let mut next = Vec::new();
            pointwise_min_into(&m, part, &mut next);
            m = next;
        }
        let mut composed = Vec::new();
        compose_into(f, &m, &mut ComposeScratch::default(), &mut composed);
        let mut s = Vec::new();
        compress_into(&composed, 1e-15, &mut s);
        (m, s)
    }

    pub(crate) fn envelope(
        f: &[Segment<Rv>],
        g: &[f64; RESOURCE_COUNT],
        limit: &[f64; RESOURCE_COUNT],
    ) -> (Vec<Pt>, Vec<Segment<Rv>>) {
        let (mut m, mut s) = (Vec::new(), Vec::new());
        assert!(max_fit_factor_and_share(f, g, limit, &mut m, &mut s));
        (m, s)
    }

    pub(crate) fn describe(
        f: &[Segment<Rv>],
        g: &[f64; RESOURCE_COUNT],
        limit: &[f64; RESOURCE_COUNT],
    ) -> String {
        let (rm, rs) = reference(f, g, limit);
        let (em, es) = envelope(f, g, limit);
        format!(
            "F {f:?}\ng {g:?}\nlimit {limit:?}\nreference M {rm:?}\nenvelope M {em:?}\nreference S {rs:?}\nenvelope S {es:?}"
        )
    }

    /// A bound for resource `r` of `f` in `[lo, hi]`: an end, a value F takes, or anything.
    fn bound(rng: &mut Rng, f: &[Segment<Rv>], r: usize, lo: f64, hi: f64) -> f64 {
        match rng.below(5) {
            0 => lo,
            1 => hi,
            2 => f[rng.below(f.len() as u64) as usize].y1.0[r].clamp(lo, hi),
            _ => lo + (hi - lo) * (rng.next() >> 11) as f64 / (1u64 << 53) as f64,
        }
    }

    /// Where `f` jumps by more than `min_height` (its vertical segments).
    fn jumps<V: Value + Copy>(
        f: &[Segment<V>],
        height: impl Fn(&Segment<V>) -> f64,
        min_height: f64,
    ) -> Vec<f64> {
        f.iter()
            .filter(|s| s.x0 == s.x1 && height(s) > min_height)
            .map(|s| s.x0)
            .collect()
    }

    /// M(1) and S(1) read off a normal pool's children without building its F are exactly
    /// (bit for bit) what the walk gives on the exact sum of those children, on random
    /// children (jumps, flats, shared levels; some ending before 1 and extended, as heavier
    /// children's scaled functions are) and random limits and guarantees.
    #[test]
    fn at_one_matches_the_walk_on_the_built_sum() {
        let mut rng = Rng(41);
        let mut checked = 0;
        for case in 0..20_000 {
            let n = 1 + rng.below(5) as usize;
            let mut children: Vec<Vec<Segment<Rv>>> = Vec::new();
            for _ in 0..n {
                let mut f = random_vector(&mut rng, 0.0);
                if f[0].x0 == f[0].x1 {
                    // S never jumps at 0.
                    f.remove(0);
                    if f.is_empty() {
                        f = vec![Segment::new(0.0, Rv::ZERO, 1.0, Rv::ZERO)];
                    }
                }
                while f.len() > 1 && f[f.len() - 1].x0 == f[f.len() - 1].x1 {
                    f.pop();
                }
                let end = f[f.len() - 1].x1;
                // Ends at 1, or earlier and extended (a heavier sibling's scaled S).
                let k = if rng.below(2) == 0 {
                    end
                } else {
                    end * (1.0 + rng.below(4) as f64)
                };
                let mut scaled = Vec::new();
                crate::plf::scale_argument_extend_into(&f, k, 1.0, &mut scaled);
                children.push(scaled);
            }
            let slices: Vec<&[Segment<Rv>]> = children.iter().map(|f| f.as_slice()).collect();
            let unit = |rng: &mut Rng| (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
            let limits = ResourceVector(std::array::from_fn(|_| {
                if rng.below(4) == 0 {
                    1.0
                } else {
                    1.5 * unit(&mut rng)
                }
            }));
            let guarantee = ResourceVector(std::array::from_fn(|_| {
                if rng.below(2) == 0 {
                    0.0
                } else {
                    0.6 * unit(&mut rng)
                }
            }));

            let mut f = Vec::new();
            crate::plf::sum_exact_into(&slices, &mut crate::plf::SumScratch::default(), &mut f);
            let (g, limit) = clamped_bounds(&limits, &guarantee, &f[0].y0, &f[f.len() - 1].y1);
            let (m, s) = envelope(&f, &g, &limit);
            let (walk_fit, walk_share) = (crate::crit::value_at(&m, 1.0), s[s.len() - 1].y1);
            let (fit, share, _, _) = max_fit_factor_and_share_at_one(&slices, &limits, &guarantee);
            assert!(
                fit == walk_fit && share.same(walk_share),
                "case {case}: M(1) {fit} / {walk_fit}, S(1) {share:?} / {walk_share:?}\nchildren {children:?}\nlimits {limits:?} guarantee {guarantee:?}\n{}",
                describe(&f, &g, &limit)
            );
            checked += 1;
        }
        assert_eq!(checked, 20_000);
    }

    /// M and S by the walk agree with the reference construction on random nondecreasing F
    /// (jumps, flats, shared levels, guarantees and limits at F's own values and at its
    /// ends): the same jumps within 1e-12, and the same values within 1e-12 (relative, for M's
    /// fit factors) at every critical point of either and between them, away from the jumps.
    #[test]
    fn walk_matches_the_reference_construction() {
        let mut rng = Rng(29);
        let mut checked_jumps = 0;
        for case in 0..20_000 {
            let f = random_vector(&mut rng, 0.0);
            let (first, last) = (f[0].y0, f[f.len() - 1].y1);
            let mut g = [0.0; RESOURCE_COUNT];
            let mut limit = [0.0; RESOURCE_COUNT];
            for r in 0..RESOURCE_COUNT {
                let (lo, hi) = (first[r], last[r]);
                limit[r] = bound(&mut rng, &f, r, lo, hi);
                g[r] = if rng.below(2) == 0 {
                    lo
                } else {
                    bound(&mut rng, &f, r, lo, limit[r])
                };
            }
            let (rm, rs) = reference(&f, &g, &limit);
            let (em, es) = envelope(&f, &g, &limit);
            let mut em_segments = Vec::new();
            crate::crit::to_segments(&em, &mut em_segments);
            let context = || describe(&f, &g, &limit);

            // Jumps of S (by their largest component) and of M.
            let height = |s: &Segment<Rv>| {
                (0..RESOURCE_COUNT)
                    .map(|r| s.y1.0[r] - s.y0.0[r])
                    .fold(0.0, f64::max)
            };
            let (rj, ej) = (jumps(&rs, height, 1e-9), jumps(&es, height, 1e-9));
            assert_eq!(rj.len(), ej.len(), "case {case}: jumps of S\n{}", context());
            for (a, b) in rj.iter().zip(&ej) {
                assert!(
                    (a - b).abs() <= 1e-12,
                    "case {case}: S jumps at {a} / {b}\n{}",
                    context()
                );
            }
            checked_jumps += rj.len();
            let m_height = |s: &Segment<f64>| s.y1 - s.y0;
            let (rmj, emj) = (
                jumps(&rm, m_height, 1e-9),
                jumps(&em_segments, m_height, 1e-9),
            );
            assert_eq!(
                rmj.len(),
                emj.len(),
                "case {case}: jumps of M\n{}",
                context()
            );

            // Values away from the jumps.
            let near_jump = |x: f64| rj.iter().chain(&rmj).any(|&j| (x - j).abs() < 1e-9);
            let (pr, pe) = (PlfRef::new(&rs), PlfRef::new(&es));
            let (mr, me) = (PlfRef::new(&rm), PlfRef::new(&em_segments));
            let xs = rs
                .iter()
                .chain(&es)
                .flat_map(|s| [s.x0, s.x1, 0.5 * (s.x0 + s.x1)]);
            let mxs = rm
                .iter()
                .chain(&em_segments)
                .flat_map(|s| [s.x0, s.x1, 0.5 * (s.x0 + s.x1)]);
            for x in xs.chain(mxs) {
                if near_jump(x) {
                    continue;
                }
                let (a, b) = (pr.value_at(x), pe.value_at(x));
                for r in 0..RESOURCE_COUNT {
                    assert!(
                        (a.0[r] - b.0[r]).abs() <= 1e-12,
                        "case {case}: S({x})[{r}] {} / {}\n{}",
                        a.0[r],
                        b.0[r],
                        context()
                    );
                }
                let (a, b) = (mr.value_at(x), me.value_at(x));
                assert!(
                    (a - b).abs() <= 1e-12 * a.abs().max(1.0),
                    "case {case}: M({x}) {a} / {b}\n{}",
                    context()
                );
            }
            // M(0) is exact: the largest fit factor within the guarantee.
            assert_eq!(rm[0].y0, em[0].l, "case {case}: M(0)\n{}", context());
        }
        assert!(checked_jumps > 1000, "jumps checked: {checked_jumps}");
    }
}
