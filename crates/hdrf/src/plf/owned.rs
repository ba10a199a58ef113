//! The owned-function API of the piecewise-linear toolkit, which only the tests use (the update
//! works on segment slices with the `*_into` functions): constructors, sampling, and each
//! operation returning a new [`Plf`].

use super::*;

/// `extend_right(rb)`: a horizontal continuation at the end value up to `rb` (merged with a
/// horizontal last segment, as the builder does).
fn extend_right_in_place<V: Value>(segs: &mut Vec<Segment<V>>, rb: f64) {
    // The reference re-adds every segment to a builder first (a no-op for builder output).
    rebuild_in_place(segs, |s| *s);
    let last = segs[segs.len() - 1];
    if last.x1 < rb {
        push_segment(segs, Segment::new(last.x1, last.y1, rb, last.y1));
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

    /// Number of segments.
    pub fn size(&self) -> usize {
        self.segs.len()
    }

    /// Left limit at `x`.
    #[inline]
    pub fn left_limit_at(&self, x: f64) -> V {
        self.segs[left_segment_index(&self.segs, x)].limits_at(x).0
    }

    /// Right limit at `x`.
    #[inline]
    pub fn right_limit_at(&self, x: f64) -> V {
        self.segs[right_segment_index(&self.segs, x)].limits_at(x).1
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
        trim_in_place(&mut self.segs);
        self
    }

    /// Drops a vertical segment at the left end; a lone vertical becomes its upper point.
    #[must_use]
    pub fn trim_left(mut self) -> Plf<V> {
        trim_left_in_place(&mut self.segs);
        self
    }

    /// Restricts the domain to `[l, r]` (sampling both limits at the new bounds, so a jump
    /// exactly at a bound stays as a vertical segment).
    #[must_use]
    pub fn narrow(&self, l: f64, r: f64) -> Plf<V> {
        let mut out = Vec::new();
        narrow_into(&self.segs, l, r, &mut out);
        Plf { segs: out }
    }

    /// Extends to the right up to `rb` with the end value.
    #[must_use]
    pub fn extend_right(&self, rb: f64) -> Plf<V> {
        let mut segs = self.segs.clone();
        extend_right_in_place(&mut segs, rb);
        Plf { segs }
    }

    /// Sum of functions over the intersection of their domains: at every critical point of
    /// every function, the functions' left limits are added left to right (starting from
    /// zero), and so are their right limits. Costs (points × functions) evaluations.
    pub fn sum(fs: &[Plf<V>]) -> Plf<V> {
        let slices: Vec<&[Segment<V>]> = fs.iter().map(|f| f.segs.as_slice()).collect();
        let mut out = Vec::new();
        sum_exact_into(&slices, &mut SumScratch::default(), &mut out);
        Plf { segs: out }
    }

    /// `self ∘ g` for a nondecreasing scalar `g` whose values lie in `self`'s domain.
    pub fn compose(&self, g: &Plf<f64>) -> Plf<V> {
        let mut out = Vec::new();
        compose_into(
            &self.segs,
            &g.segs,
            &mut ComposeScratch::default(),
            &mut out,
        );
        Plf { segs: out }
    }
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
        let mut out = Vec::new();
        pointwise_min_into(&a.segs, &b.segs, &mut out);
        Plf { segs: out }
    }
}

impl Plf<ResourceVector> {
    /// Greedily merges consecutive segments while the merged chord stays within ±`eps` of every
    /// merged point on every resource (bounds only the size of the function).
    pub fn compress(&self, eps: f64) -> Plf<ResourceVector> {
        let mut out = Vec::new();
        compress_into(&self.segs, eps, &mut out);
        Plf { segs: out }
    }
}
