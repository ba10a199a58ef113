//! The other operations on segment slices: binary operations and narrowing, the pointwise
//! minimum, composition, components and inverses, and compression.

use super::*;

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
pub(super) fn trivial_min<'a>(
    a: &'a [Segment<f64>],
    b: &'a [Segment<f64>],
) -> Option<&'a [Segment<f64>]> {
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
    pub(super) points: Vec<(f64, f64)>,
    pub(super) outer_points: Vec<f64>,
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
pub(super) fn compose_points_reference<V: Value>(
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
    pub(super) fn compare(a: (f64, f64), b: (f64, f64)) -> i32 {
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
    pub(super) fn bounds(
        s: &Segment<ResourceVector>,
        r: usize,
        eps: f64,
    ) -> ((f64, f64), (f64, f64)) {
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
