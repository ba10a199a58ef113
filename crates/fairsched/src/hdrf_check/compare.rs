//! The comparisons of the format, in one place.

use super::attribute::Actual;

/// Tolerance of the `exact` comparison.
///
/// Upstream checks these values with `EXPECT_EQ` on doubles, i.e. bit-exact equality in the
/// reference implementation. The format's `comparisons.exact` and the spec (§14) allow a
/// re-implementation that does not reproduce the reference arithmetic bit for bit to compare
/// with about `1e-12` instead, and fairsched's update does not reproduce it everywhere: it builds
/// each element's M and S in one walk over F (`fairsched_hdrf`'s `envelope` module), the same
/// functions as the reference's with values that may differ in the last bits. (Every `exact`
/// assertion of the public file still matches bit for bit.) `0.0` would mean `actual ==
/// expected`, so that `-0.0` equals `0.0` and NaN equals nothing.
pub const EXACT_TOLERANCE: f64 = 1e-12;

/// Tolerance of `near` when a case gives none (upstream `EXPECT_RV_NEAR`'s default, and the value
/// every `near` of the public file states).
pub const DEFAULT_NEAR_TOLERANCE: f64 = 1e-7;

/// Tolerance of the soft `derived_not_asserted` checks (per the file's `derived_values_note`).
pub const DERIVED_TOLERANCE: f64 = 1e-9;

/// `|a - e| <= tolerance`; with a zero tolerance, plain equality.
pub fn numbers_near(actual: f64, expected: f64, tolerance: f64) -> bool {
    if tolerance == 0.0 {
        actual == expected
    } else {
        (actual - expected).abs() <= tolerance
    }
}

/// `near` / `exact` / `equal_across_option_variants`: every component within `tolerance`.
/// Positions and strings compare by equality.
pub fn near(actual: &Actual, expected: &Actual, tolerance: f64) -> bool {
    match (actual, expected) {
        (Actual::Vector(a), Actual::Vector(e)) => a
            .iter()
            .zip(e)
            .all(|(&a, &e)| numbers_near(a, e, tolerance)),
        (Actual::Scalar(a), Actual::Scalar(e)) => numbers_near(*a, *e, tolerance),
        (Actual::Index(a), Actual::Index(e)) => a == e,
        (Actual::Text(a), Actual::Text(e)) => a == e,
        _ => false,
    }
}

/// `exact`: [`near`] with [`EXACT_TOLERANCE`].
pub fn exact(actual: &Actual, expected: &Actual) -> bool {
    near(actual, expected, EXACT_TOLERANCE)
}

/// `lhs >= rhs` on every component (exact, no epsilon).
pub fn dominates(lhs: &Actual, rhs: &Actual) -> bool {
    match (lhs, rhs) {
        (Actual::Vector(a), Actual::Vector(b)) => a.iter().zip(b).all(|(a, b)| a >= b),
        (Actual::Scalar(a), Actual::Scalar(b)) => a >= b,
        _ => false,
    }
}

/// `not_dominated_by`: NOT (value >= actual componentwise).
pub fn not_dominated_by(actual: &Actual, value: &Actual) -> bool {
    !dominates(value, actual)
}

/// Largest componentwise difference (for notes).
pub fn max_difference(actual: &Actual, expected: &Actual) -> Option<f64> {
    match (actual, expected) {
        (Actual::Vector(a), Actual::Vector(e)) => Some(
            a.iter()
                .zip(e)
                .map(|(a, e)| (a - e).abs())
                .fold(0.0, f64::max),
        ),
        (Actual::Scalar(a), Actual::Scalar(e)) => Some((a - e).abs()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons() {
        let a = Actual::Vector([0.5, 0.5, 0.0, 0.5, 0.0]);
        let b = Actual::Vector([0.5, 0.5, 0.0, 0.5000001, 0.0]);
        assert!(exact(&a, &a.clone()));
        assert!(!exact(&a, &b));
        assert!(near(&a, &b, 1e-6));
        assert!(dominates(&b, &a));
        assert!(!dominates(&a, &b));
        assert!(not_dominated_by(&b, &a));
        assert!(!not_dominated_by(&a, &b));
        assert!(exact(&Actual::Index(None), &Actual::Index(None)));
        assert!(!exact(&Actual::Index(Some(0)), &Actual::Index(None)));
        assert!(exact(&Actual::Vector([-0.0; 5]), &Actual::Vector([0.0; 5])));
        assert!(!near(
            &Actual::Scalar(f64::NAN),
            &Actual::Scalar(f64::NAN),
            1.0
        ));
    }
}
