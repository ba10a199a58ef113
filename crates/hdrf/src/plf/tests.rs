use super::*;

fn pts(f: &Plf<f64>) -> Vec<(f64, f64, f64, f64)> {
    f.segments()
        .iter()
        .map(|s| (s.x0, s.y0, s.x1, s.y1))
        .collect()
}

#[test]
fn interpolation_is_exact_at_ends_and_left_continuous() {
    let f = Plf::create(
        |x| {
            if x < 1.0 {
                (x, x)
            } else if x == 1.0 {
                (1.0, 3.0)
            } else {
                (3.0, 3.0)
            }
        },
        0.0,
        2.0,
        vec![0.0, 1.0, 2.0],
    );
    assert_eq!(
        pts(&f),
        vec![
            (0.0, 0.0, 1.0, 1.0),
            (1.0, 1.0, 1.0, 3.0),
            (1.0, 3.0, 2.0, 3.0)
        ]
    );
    assert_eq!(f.value_at(1.0), 1.0);
    assert_eq!(f.right_limit_at(1.0), 3.0);
    assert_eq!(f.value_at(0.5), 0.5);
    assert_eq!(f.limits_at(1.0), (1.0, 3.0));
}

#[test]
fn transpose_narrow_trim_shift_extend() {
    // f: flat 0 on [0,1], then up to 2 on [1,2].
    let mut b = Builder::new();
    b.add_point(0.0, 0.0);
    b.add_point(1.0, 0.0);
    b.add_point(2.0, 2.0);
    let f = b.finish();
    let t = f.transpose(); // vertical at 0 from 0 to 1, then (0,1)->(2,2)
    assert_eq!(pts(&t), vec![(0.0, 0.0, 0.0, 1.0), (0.0, 1.0, 2.0, 2.0)]);
    let n = t.narrow(0.0, 1.0).trim_left();
    assert_eq!(pts(&n), vec![(0.0, 1.0, 1.0, 1.5)]);
    let s = n.shift(-0.5, 0.0).extend_right(1.0).trim();
    assert_eq!(pts(&s), vec![(-0.5, 1.0, 0.5, 1.5), (0.5, 1.5, 1.0, 1.5)]);
}

#[test]
fn sum_samples_left_and_right_limits() {
    let a = Plf::linear(0.0, 0.0, 1.0, 1.0);
    let mut b = Builder::new();
    b.add_point(0.0, 0.0);
    b.add_point(0.5, 0.0);
    b.add_point(0.5, 1.0);
    b.add_point(1.0, 1.0);
    let b = b.finish();
    let s = Plf::sum(&[a, b]);
    assert_eq!(
        pts(&s),
        vec![
            (0.0, 0.0, 0.5, 0.5),
            (0.5, 0.5, 0.5, 1.5),
            (0.5, 1.5, 1.0, 2.0)
        ]
    );
}

#[test]
fn pointwise_min_finds_crossings() {
    let a = Plf::linear(0.0, 0.0, 1.0, 1.0);
    let b = Plf::constant(0.0, 1.0, 0.25);
    let m = Plf::pointwise_min(&a, &b);
    assert_eq!(
        pts(&m),
        vec![(0.0, 0.0, 0.25, 0.25), (0.25, 0.25, 1.0, 0.25)]
    );
}

#[test]
fn compose_with_jumps() {
    // F jumps at 1 from 0 to 1; g goes linearly 0 -> 2 on [0,1].
    let mut fb = Builder::new();
    fb.add_point(0.0, 0.0);
    fb.add_point(1.0, 0.0);
    fb.add_point(1.0, 1.0);
    fb.add_point(2.0, 1.0);
    let f = fb.finish();
    let g = Plf::linear(0.0, 0.0, 1.0, 2.0);
    let c = f.compose(&g);
    assert_eq!(
        pts(&c),
        vec![
            (0.0, 0.0, 0.5, 0.0),
            (0.5, 0.0, 0.5, 1.0),
            (0.5, 1.0, 1.0, 1.0)
        ]
    );
    assert_eq!(c.value_at(0.5), 0.0);
}

#[test]
fn inverse_lower_bound_is_exact() {
    let x = inverse_lower_bound(0.0, 1.0, |m| m * 3.0 <= 1.0);
    assert!(x * 3.0 <= 1.0);
    assert!(f64::from_bits(x.to_bits() + 1) * 3.0 > 1.0);
    assert_eq!(inverse_lower_bound(0.0, 1.0, |_| true), 1.0);
    assert_eq!(inverse_lower_bound(0.0, 1.0, |m| m == 0.0), 0.0);
    assert_eq!(inverse_lower_bound(-1.0, 1.0, |m| m <= -0.5), -0.5);
}

#[test]
fn compress_merges_collinear_segments() {
    let v = |x: f64| ResourceVector([x, 2.0 * x, 0.0, 0.0, 0.0]);
    let mut b = Builder::new();
    b.add_point(0.0, v(0.0));
    b.add_point(0.3, v(0.3));
    b.add_point(1.0, v(1.0));
    let f = b.finish();
    assert_eq!(f.size(), 2);
    assert_eq!(f.compress(1e-15).size(), 1);
}
