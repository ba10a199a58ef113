//! Scalar piecewise-linear functions stored as their critical points, for the hot loops of the
//! update (the maximal fit factor M and the functions it is built from).
//!
//! The update uses the representation, the vertex builder and the sampling (M as the walk over
//! F writes it, `crate::envelope`). `crit/construction.rs` (tests only) is a construction of
//! M and S on critical points by the oracle's steps (inverses, pointwise minimum, composition and
//! compression), bit for bit what the segment construction gives; the update used it as a
//! second fallback until the segment construction became the only one, and the unit tests keep
//! it to check the walk against.
//!
//! A function whose arguments never decrease (every function built from a nondecreasing fair
//! share by fit factor) is determined by its critical points `x_0 < x_1 < … < x_n` and, at
//! each, the left and right limits `l_k`, `r_k`: its segments are the vertical `(x_0, l_0) →
//! (x_0, r_0)` if `l_0 ≠ r_0`, then for every `k ≥ 1` the segment `(x_{k−1}, r_{k−1}) → (x_k,
//! l_k)` followed by the vertical `(x_k, l_k) → (x_k, r_k)` if `l_k ≠ r_k`. A single critical
//! point is a point (or a lone vertical).
//!
//! [`push_sample`] appends a sample with the builder's merge rules (see [`crate::plf::Builder`]):
//! on strictly increasing arguments the only merge that can happen is that of two consecutive
//! horizontal segments, which removes the critical point between them. So a list built here and
//! the segments the builder would build from the same samples describe each other exactly
//! ([`to_segments`], [`from_segments`]), and sampling either at a point gives the same bits: the
//! segment the reference traverser uses between two critical points is the one from
//! `(x_{k−1}, r_{k−1})` to `(x_k, l_k)`, and at a critical point it reads `(l_k, r_k)`.

use crate::plf::{Segment, Value, push_segment};
use fairsched_resources::{RESOURCE_COUNT, ResourceVector};

type Rv = ResourceVector;

/// A critical point: argument, left limit, right limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Pt {
    pub(crate) x: f64,
    pub(crate) l: f64,
    pub(crate) r: f64,
}

/// Appends the sample `(x, l, r)` (`x` greater than the last argument) with the builder's rules:
/// a critical point between two horizontal segments at the same value disappears.
#[inline(always)]
pub(crate) fn push_sample(out: &mut Vec<Pt>, x: f64, l: f64, r: f64) {
    let n = out.len();
    if n >= 2 {
        let last = out[n - 1];
        if last.l == last.r && out[n - 2].r == last.l && l == last.r {
            out[n - 1] = Pt { x, l, r };
            return;
        }
    }
    out.push(Pt { x, l, r });
}

/// The value at `x` (the left limit) of the function [`to_segments`] makes of `pts`, exactly as
/// [`crate::plf::PlfRef::value_at`] reads it from those segments: the first segment ending at or
/// after `x` (the last one if none), its lower end if it is vertical, else the interpolation
/// ([`crate::plf::Segment::interpolate`]; beyond the last critical point it extrapolates).
pub(crate) fn value_at(pts: &[Pt], x: f64) -> f64 {
    let n = pts.len();
    let interpolate = |k: usize| {
        let (p, q) = (pts[k - 1], pts[k]);
        let t = (x - p.x) / (q.x - p.x);
        let d = q.l - p.r;
        if t < 0.5 {
            p.r + d * t
        } else {
            q.l - d * (1.0 - t)
        }
    };
    let p0 = pts[0];
    if x <= p0.x {
        // The vertical (or point) at the first critical point, else the first segment.
        return if n == 1 || p0.l != p0.r {
            p0.l
        } else {
            interpolate(1)
        };
    }
    let k = pts.partition_point(|p| p.x < x);
    if k < n {
        interpolate(k)
    } else {
        let last = pts[n - 1];
        if last.l != last.r {
            last.l
        } else {
            interpolate(n - 1)
        }
    }
}

/// The number of segments [`to_segments`] makes.
pub(crate) fn segment_count(pts: &[Pt]) -> usize {
    let verticals = pts[1..].iter().filter(|p| p.l != p.r).count();
    let first = usize::from(pts.len() == 1 || pts[0].l != pts[0].r);
    first + pts.len() - 1 + verticals
}

/// Compresses a stream of segments as [`crate::plf::compress_into`] does.
///
/// `compress_into` checks resources that are zero everywhere (in the whole function) by a
/// shortcut, `dx · ε > 0`, and stops at the first resource that fails. Here every resource is
/// checked the general way, without stopping: on a resource that is zero the general check
/// reduces to the shortcut (its bounds are (dx, ±ε) and the chord (dx, 0)), and after a failure
/// every bound is reset anyway. Straight-line code over the five lanes, which the compiler can
/// vectorise.
///
/// `N` is the number of resources checked the general way: with `N == RESOURCE_COUNT − 1` the
/// last resource (network) must be zero in every segment fed. On such a resource the general
/// check always reduces to `dx · ε > 0` (its bounds stay (·, ±ε) and the chord is (dx, 0)),
/// which is what is checked for it instead.
struct Compressor<const N: usize> {
    eps: f64,
    out: Vec<Segment<Rv>>,
    /// Where this function's segments start in `out`.
    base: usize,
    /// The accumulated segment (valid once `started`).
    acc: Segment<Rv>,
    started: bool,
    /// Per resource, the tightest upper (t) and lower (b) bound directions (dx, dy).
    tx: [f64; RESOURCE_COUNT],
    ty: [f64; RESOURCE_COUNT],
    bx: [f64; RESOURCE_COUNT],
    by: [f64; RESOURCE_COUNT],
}

impl<const N: usize> Compressor<N> {
    /// A compressor appending to `out` (what it holds stays as it is).
    fn new(eps: f64, out: Vec<Segment<Rv>>) -> Compressor<N> {
        Compressor {
            eps,
            base: out.len(),
            out,
            acc: Segment {
                x0: 0.0,
                y0: Rv::ZERO,
                x1: 0.0,
                y1: Rv::ZERO,
            },
            started: false,
            tx: [0.0; RESOURCE_COUNT],
            ty: [0.0; RESOURCE_COUNT],
            bx: [0.0; RESOURCE_COUNT],
            by: [0.0; RESOURCE_COUNT],
        }
    }

    /// `push_segment` on this function's segments.
    #[inline(always)]
    fn push(&mut self, seg: Segment<Rv>) {
        if self.out.len() > self.base {
            push_segment(&mut self.out, seg);
        } else {
            self.out.push(seg);
        }
    }

    /// Starts a new accumulated segment.
    #[inline(always)]
    fn restart(&mut self, x0: f64, y0: &Rv, x1: f64, y1: &Rv) {
        self.acc = Segment {
            x0,
            y0: *y0,
            x1,
            y1: *y1,
        };
        let dx = x1 - x0;
        let eps = self.eps;
        for r in 0..N {
            self.tx[r] = dx;
            self.ty[r] = (y1.0[r] + eps) - y0.0[r];
            self.bx[r] = dx;
            self.by[r] = (y1.0[r] - eps) - y0.0[r];
        }
    }

    /// The next segment, from (x0, y0) to (x1, y1).
    #[inline(always)]
    fn feed(&mut self, x0: f64, y0: &Rv, x1: f64, y1: &Rv) {
        if self.eps == 0.0 {
            // No compression: every segment as it comes.
            self.push(Segment {
                x0,
                y0: *y0,
                x1,
                y1: *y1,
            });
            self.started = true;
            return;
        }
        if !self.started {
            self.started = true;
            self.restart(x0, y0, x1, y1);
            return;
        }
        let dx = x1 - self.acc.x0;
        let eps = self.eps;
        let a = &self.acc.y0.0;
        let b = &y1.0;
        let mut ok = [false; N];
        for r in 0..N {
            let dyt = (b[r] + eps) - a[r];
            let dyb = (b[r] - eps) - a[r];
            let dym = b[r] - a[r];
            // compare((dx, dyt), top) > 0: a tighter upper bound.
            let up = dx * self.ty[r] - self.tx[r] * dyt > 0.0;
            let (tx, ty) = if up {
                (dx, dyt)
            } else {
                (self.tx[r], self.ty[r])
            };
            // compare((dx, dyb), bottom) < 0: a tighter lower bound.
            let down = dx * self.by[r] - self.bx[r] * dyb < 0.0;
            let (bx, by) = if down {
                (dx, dyb)
            } else {
                (self.bx[r], self.by[r])
            };
            (self.tx[r], self.ty[r], self.bx[r], self.by[r]) = (tx, ty, bx, by);
            // The chord stays strictly between: compare(bottom, m) > 0, compare(top, m) < 0.
            ok[r] = (bx * dym - dx * by > 0.0) & (tx * dym - dx * ty < 0.0);
        }
        // The zero resources (see the type's documentation).
        let zero_ok = N == RESOURCE_COUNT || dx * eps > 0.0;
        if ok.iter().all(|&o| o) && zero_ok {
            self.acc.x1 = x1;
            self.acc.y1 = *y1;
        } else {
            self.push(self.acc);
            self.restart(x0, y0, x1, y1);
        }
    }

    fn finish(mut self) -> Vec<Segment<Rv>> {
        assert!(self.started, "a function needs at least one segment");
        if self.eps == 0.0 {
            return self.out;
        }
        self.push(self.acc);
        self.out
    }
}

/// What the last segment of a [`VertexBuilder`] is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Point,
    Vertical,
    Horizontal,
    Tilted,
}

/// A builder with the merge rules of [`crate::plf::Builder`], kept as the last segment's two
/// ends (every segment starts where the previous one ends), that hands every segment to a
/// [`Compressor`] once no later one can merge into it; `finish` trims a final vertical as
/// `trim_in_place` does.
pub(crate) struct VertexBuilder<const N: usize> {
    /// Segments built so far (the last one is `prev → cur`).
    count: usize,
    /// Whether a point was added (`cur` holds it; with no segment yet it only starts one).
    started: bool,
    prev_x: f64,
    prev_y: Rv,
    cur_x: f64,
    cur_y: Rv,
    kind: Kind,
    sink: Compressor<N>,
}

impl<const N: usize> VertexBuilder<N> {
    /// A builder whose segments, compressed with `eps` (not at all with 0), are appended to
    /// `out`.
    pub(crate) fn new(eps: f64, out: Vec<Segment<Rv>>) -> VertexBuilder<N> {
        VertexBuilder {
            count: 0,
            started: false,
            prev_x: 0.0,
            prev_y: Rv::ZERO,
            cur_x: 0.0,
            cur_y: Rv::ZERO,
            kind: Kind::Point,
            sink: Compressor::new(eps, out),
        }
    }

    /// `absorb` of [`crate::plf`] on the segment from `cur` to (x, y), or a new segment.
    #[inline(always)]
    fn push_to(&mut self, x: f64, y: Rv) {
        let same_x = self.cur_x == x;
        let same_y = self.cur_y.same(y);
        let kind = match (same_x, same_y) {
            (true, true) => Kind::Point,
            (true, false) => Kind::Vertical,
            (false, true) => Kind::Horizontal,
            (false, false) => Kind::Tilted,
        };
        if self.count == 0 {
            // The first segment is kept whatever it is.
            (self.prev_x, self.prev_y) = (self.cur_x, self.cur_y);
            (self.cur_x, self.cur_y) = (x, y);
            self.kind = kind;
            self.count = 1;
            return;
        }
        match (self.kind, kind) {
            // A point is dropped.
            (_, Kind::Point) => {}
            // A point (the first segment) is replaced.
            (Kind::Point, _) => {
                (self.cur_x, self.cur_y) = (x, y);
                self.kind = kind;
            }
            (Kind::Vertical, Kind::Vertical) => {
                (self.cur_x, self.cur_y) = (x, y);
                // The merged segment may have come back to its start.
                if self.prev_y.same(self.cur_y) {
                    self.kind = Kind::Point;
                }
            }
            (Kind::Horizontal, Kind::Horizontal) => {
                (self.cur_x, self.cur_y) = (x, y);
                if self.prev_x == self.cur_x {
                    self.kind = Kind::Point;
                }
            }
            _ => {
                self.sink
                    .feed(self.prev_x, &self.prev_y, self.cur_x, &self.cur_y);
                (self.prev_x, self.prev_y) = (self.cur_x, self.cur_y);
                (self.cur_x, self.cur_y) = (x, y);
                self.kind = kind;
                self.count += 1;
            }
        }
    }

    #[cfg(test)]
    #[inline(always)]
    fn add_point(&mut self, x: f64, y: Rv) {
        if self.started {
            self.push_to(x, y);
        } else {
            self.started = true;
            (self.cur_x, self.cur_y) = (x, y);
        }
    }

    #[inline(always)]
    pub(crate) fn add_sample(&mut self, x: f64, left: Rv, right: Rv) {
        if self.started {
            self.push_to(x, left);
        } else {
            self.started = true;
            (self.cur_x, self.cur_y) = (x, left);
        }
        self.push_to(x, right);
    }

    pub(crate) fn finish(mut self) -> Vec<Segment<Rv>> {
        assert!(self.count > 0, "a function needs at least one segment");
        if self.kind == Kind::Vertical {
            if self.count > 1 {
                return self.sink.finish();
            }
            // A lone vertical becomes the point at its lower end.
            self.cur_y = self.prev_y;
        }
        self.sink
            .feed(self.prev_x, &self.prev_y, self.cur_x, &self.cur_y);
        self.sink.finish()
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod construction;
#[cfg(test)]
pub(crate) use construction::*;
