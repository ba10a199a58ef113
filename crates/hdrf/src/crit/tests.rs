use super::*;
use crate::plf::{Builder, component_into, pointwise_min_into};
use fairsched_resources::ResourceVector;

/// SplitMix64.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A nonnegative step: often zero (flats, jumps), often round, otherwise arbitrary.
    pub(crate) fn step(&mut self) -> f64 {
        match self.below(4) {
            0 => 0.0,
            1 => self.below(4) as f64 / 8.0,
            _ => (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 0.3,
        }
    }
}

/// A random nondecreasing vector function built by the builder from samples (jumps, flats,
/// shared levels across resources), on `[x0, x0 + something]`.
pub(crate) fn random_vector(rng: &mut Rng, x0: f64) -> Vec<Segment<ResourceVector>> {
    let mut b = Builder::new();
    let n = 1 + rng.below(8) as usize;
    let (mut x, mut y) = (x0, ResourceVector::ZERO);
    for k in 0..n {
        if k > 0 {
            x += rng.step();
            if rng.below(3) == 0 {
                x += 0.25;
            }
        }
        let mut left = y;
        for r in 0..5 {
            left[r] += if rng.below(3) == 0 { 0.0 } else { rng.step() };
        }
        let mut right = left;
        if rng.below(4) == 0 {
            right[rng.below(5) as usize] += rng.step();
        }
        b.add_sample(x, left, right);
        y = right;
    }
    if n == 1 {
        b.add_sample(x + 1.0, y, y);
    }
    b.finish_buffer()
}

#[test]
fn function_by_function_sum_matches_the_point_by_point_sum() {
    let mut rng = Rng(11);
    let mut scratch = crate::plf::SumScratch::default();
    let (mut expected, mut actual) = (Vec::new(), Vec::new());
    let mut points = Vec::new();
    for case in 0..5_000 {
        let n = 1 + rng.below(6) as usize;
        let fs: Vec<Vec<Segment<ResourceVector>>> = (0..n)
            .map(|_| {
                let x0 = if rng.below(3) == 0 { 0.125 } else { 0.0 };
                let mut f = random_vector(&mut rng, x0);
                // Extend to a common right end so that the domains intersect.
                let end = f[f.len() - 1];
                if end.x1 < 3.0 {
                    f.push(Segment::new(end.x1, end.y1, 3.0, end.y1));
                }
                f
            })
            .collect();
        let slices: Vec<&[Segment<ResourceVector>]> = fs.iter().map(|f| f.as_slice()).collect();
        crate::plf::sum_exact_into(&slices, &mut scratch, &mut actual);
        points.clear();
        let lb = slices.iter().map(|f| f[0].x0).fold(f64::MIN, f64::max);
        for f in &slices {
            let mut last = f[0].x0;
            points.push(last);
            for s in f.iter() {
                if s.x1 > last {
                    last = s.x1;
                    points.push(last);
                }
            }
        }
        let rb = slices
            .iter()
            .map(|f| f[f.len() - 1].x1)
            .fold(f64::MAX, f64::min);
        points.retain(|&p| p >= lb && p <= rb);
        points.sort_by(f64::total_cmp);
        points.dedup();
        crate::plf::sum_exact_by_point(&slices, &points, &mut expected);
        assert_eq!(actual, expected, "case {case}");
    }
}

#[test]
fn sum_of_two_matches_the_binary_operation() {
    let mut rng = Rng(13);
    let (mut expected, mut actual) = (Vec::new(), Vec::new());
    for case in 0..10_000 {
        let (xa, xb) = (rng.below(3) as f64 / 8.0, rng.below(3) as f64 / 8.0);
        let a = random_vector(&mut rng, xa);
        let b = random_vector(&mut rng, xb);
        let (lb, rb) = (
            a[0].x0.max(b[0].x0),
            a[a.len() - 1].x1.min(b[b.len() - 1].x1),
        );
        if lb > rb {
            continue;
        }
        crate::plf::binary_op_into(&a, &b, ResourceVector::add, &mut expected);
        crate::plf::add_two_into(&a, &b, &mut actual);
        assert_eq!(actual, expected, "case {case}");
    }
}

#[test]
fn parts_and_minimum_match_the_segment_implementation() {
    let mut rng = Rng(7);
    let (mut comp, mut part, mut t, mut p) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut compositions = 0;
    for case in 0..20_000 {
        let f = random_vector(&mut rng, 0.0);
        let mut seg_parts: Vec<Vec<Segment<f64>>> = Vec::new();
        let mut pt_parts: Vec<Vec<Pt>> = Vec::new();
        for r in 0..5 {
            component_into(&f, r, &mut comp);
            let (lo, hi) = (comp[0].y0, comp[comp.len() - 1].y1);
            let pick = |rng: &mut Rng, a: f64, b: f64| match rng.below(4) {
                0 => a,
                1 => b,
                _ => a + (b - a) * rng.step() / 0.3,
            };
            let limit = pick(&mut rng, lo, hi).min(hi);
            let g = pick(&mut rng, lo, limit).min(limit);
            crate::plf::inverse_part_into(&mut comp, g, limit, true, &mut part);
            transposed_component_into(&f, r, &mut t);
            let mut all: [Vec<Pt>; 5] = Default::default();
            transposed_components_into(&f, &mut all);
            assert_eq!(
                all[r], t,
                "case {case} resource {r}: transposed in one pass"
            );
            assert!(inverse_part_into(&t, g, limit, &mut p), "case {case}");
            let (mut taken_from, mut taken) = (t.clone(), Vec::new());
            assert!(inverse_part_take(&mut taken_from, g, limit, &mut taken));
            assert_eq!(taken, p, "case {case} resource {r}: part taken");
            let mut back = Vec::new();
            to_segments(&p, &mut back);
            assert_eq!(back, part, "case {case} resource {r}: part");
            seg_parts.push(part.clone());
            pt_parts.push(p.clone());
        }
        let (mut acc, mut next) = (seg_parts[0].clone(), Vec::new());
        let (mut pacc, mut pnext) = (pt_parts[0].clone(), Vec::new());
        for r in 1..5 {
            pointwise_min_into(&acc, &seg_parts[r], &mut next);
            std::mem::swap(&mut acc, &mut next);
            min_into(&pacc, &pt_parts[r], &mut pnext);
            std::mem::swap(&mut pacc, &mut pnext);
            let mut back = Vec::new();
            to_segments(&pacc, &mut back);
            assert_eq!(back, acc, "case {case}: minimum after resource {r}");
            from_segments(&acc, &mut pnext);
            assert_eq!(pnext, pacc, "case {case}: critical points of the minimum");
        }
        // Values read from the critical points and from the segments.
        let m = crate::plf::PlfRef::new(&acc);
        let (lo, hi) = (pacc[0].x, pacc[pacc.len() - 1].x);
        let mut xs = vec![lo - 0.5, hi + 0.5, (lo + hi) / 2.0];
        for w in pacc.windows(2) {
            xs.extend([
                w[0].x,
                w[1].x,
                (w[0].x + w[1].x) / 2.0,
                w[0].x * 0.9 + w[1].x * 0.1,
            ]);
        }
        for x in xs {
            assert_eq!(
                value_at(&pacc, x).to_bits(),
                m.value_at(x).to_bits(),
                "case {case}: value at {x}"
            );
        }
        let mut folded_parts = pt_parts.clone();
        let (mut folded, mut spare) = (Vec::new(), Vec::new());
        min_fold(&mut folded_parts, &mut folded, &mut spare);
        assert_eq!(folded, pacc, "case {case}: the fold");
        if is_nondecreasing(&pacc) && pacc[pacc.len() - 1].x <= f[f.len() - 1].x1 {
            // M's values are fit factors within F's domain.
            let (mut composed, mut expected) = (Vec::new(), Vec::new());
            crate::plf::compose_into(
                &f,
                &acc,
                &mut crate::plf::ComposeScratch::default(),
                &mut composed,
            );
            crate::plf::compress_into(&composed, 1e-15, &mut expected);
            let (mut outer, mut points, mut actual) = (Vec::new(), Vec::new(), Vec::new());
            compose_compress_into(&f, &pacc, 1e-15, &mut outer, &mut points, &mut actual);
            assert_eq!(actual, expected, "case {case}: composition");
            // Appended after another function's segments, which it must leave alone.
            let point = Segment::new(-1.0, ResourceVector::ZERO, -1.0, ResourceVector::ZERO);
            let mut appended = vec![point];
            compose_compress_append(&f, &pacc, 1e-15, &mut outer, &mut points, &mut appended);
            assert_eq!(appended[0], point, "case {case}: appended");
            assert_eq!(appended[1..], expected[..], "case {case}: appended");
            // With network zero everywhere (the compressor then skips it).
            let mut f0 = f.clone();
            for s in &mut f0 {
                s.y0.0[4] = 0.0;
                s.y1.0[4] = 0.0;
            }
            crate::plf::compose_into(
                &f0,
                &acc,
                &mut crate::plf::ComposeScratch::default(),
                &mut composed,
            );
            crate::plf::compress_into(&composed, 1e-15, &mut expected);
            compose_compress_into(&f0, &pacc, 1e-15, &mut outer, &mut points, &mut actual);
            assert_eq!(actual, expected, "case {case}: composition without network");
            compositions += 1;
        }
    }
    assert!(compositions > 1000, "compositions: {compositions}");
}
