//! Cursors over functions: critical points of several functions in increasing order, and
//! sampling of left and right limits at nondecreasing arguments in amortised O(1) (landing on
//! the segment the reference traverser lands on).

use super::*;

/// Sorted, deduplicated critical points restricted to `[lb, rb]`.
///
/// The points usually come as the concatenation of several sorted runs (one per function); the
/// stable sort merges such runs in O(n log runs).
pub(super) fn clear_and_sort(points: &mut Vec<f64>, lb: f64, rb: f64) {
    points.retain(|&p| p >= lb && p <= rb);
    points.sort_unstable_by(f64::total_cmp);
    points.dedup();
}

/// A function's critical points in increasing order: its left bound, then every segment end
/// greater than the previous critical point.
#[derive(Clone, Debug)]
pub(super) struct CriticalPoints<'a, V> {
    pub(super) segs: &'a [Segment<V>],
    pub(super) next: usize,
    pub(super) last: Option<f64>,
}

impl<'a, V> CriticalPoints<'a, V> {
    pub(super) fn new(segs: &'a [Segment<V>]) -> CriticalPoints<'a, V> {
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
pub(super) struct CritCursor<'a, V> {
    pub(super) segs: &'a [Segment<V>],
    /// The next critical point (+∞ once past the right bound).
    pub(super) next: f64,
    /// The segment the traverser uses for arguments up to `next`.
    pub(super) producer: usize,
    /// Where the search for the critical point after `next` continues.
    pub(super) scan: usize,
}

impl<'a, V: Value> CritCursor<'a, V> {
    #[inline]
    pub(super) fn new(segs: &'a [Segment<V>]) -> CritCursor<'a, V> {
        CritCursor {
            segs,
            next: segs[0].x0,
            producer: 0,
            scan: 0,
        }
    }

    /// Moves to the critical point after `next`.
    #[inline(always)]
    pub(super) fn advance(&mut self) {
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
    pub(super) fn seek(&mut self, x: f64) {
        while self.next < x {
            self.advance();
        }
    }

    /// The traverser's segment at `x` (at most the next critical point).
    #[inline(always)]
    pub(super) fn segment(&self, x: f64) -> &'a Segment<V> {
        let segs = self.segs;
        let mut k = self.producer;
        if segs[k].x1 == x && k + 1 < segs.len() && segs[k + 1].is_vertical() {
            k += 1;
        }
        &segs[k]
    }

    /// The traverser's (left, right) limits at `x` (at most the next critical point).
    #[inline(always)]
    pub(super) fn limits(&self, x: f64) -> (V, V) {
        fast_limits(self.segment(x), x)
    }

    /// The segment covering the open interval from the previous critical point to `next` (the
    /// last segment starting at or before any argument in it).
    #[inline(always)]
    pub(super) fn covering(&self) -> &'a Segment<V> {
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
    pub(super) crit: CritCursor<'a, V>,
    /// The segment used between critical points, prepared for evaluation.
    pub(super) covering: Covering<V>,
}

/// A segment prepared for evaluations strictly inside it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Covering<V> {
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
    pub(super) fn covering_segment(&self) -> &'a Segment<V> {
        if self.crit.next == f64::INFINITY {
            &self.crit.segs[self.crit.segs.len() - 1]
        } else {
            self.crit.covering()
        }
    }

    pub(super) fn refresh(&mut self) {
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
    pub(super) fn catch_up(&mut self, x: f64) {
        if self.crit.next < x {
            while self.crit.next < x {
                self.crit.advance();
            }
            self.refresh();
        }
    }

    /// The value strictly between critical points ([`fast_value`] on the covering segment).
    #[inline(always)]
    pub(super) fn between(&self, x: f64) -> (V, V) {
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
pub(super) fn sweep2<'a, 'b, V: Value, W: Value>(
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
pub(super) fn left_segment_index<V>(segs: &[Segment<V>], x: f64) -> usize {
    let i = segs.partition_point(|s| s.x1 < x);
    i.min(segs.len() - 1)
}

/// Index of the last segment with `x0 <= x` (the first one if none).
#[inline]
pub(super) fn right_segment_index<V>(segs: &[Segment<V>], x: f64) -> usize {
    segs.partition_point(|s| s.x0 <= x).saturating_sub(1)
}

/// Left and right limits of a function at nondecreasing arguments (forward-moving indices;
/// falls back to binary search if an argument goes backwards).
#[derive(Debug)]
pub(crate) struct LimitCursor<'a, V> {
    pub(super) segs: &'a [Segment<V>],
    pub(super) last_x: f64,
    pub(super) left: usize,
    pub(super) right: usize,
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
    pub(super) fn seek(&mut self, x: f64) {
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
