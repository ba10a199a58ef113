//! Test-only knobs of the implementation (feature `tuning`, which only this crate's own tests
//! enable): the differential tests against the oracle (`tests/differential.rs`) run the update
//! with M and S built as the oracle builds them and with other summation thresholds.
//! [`crate::update_tuned`] runs an update with them. Production builds have no such knobs: there the update uses [`Tuning::default`]'s values as
//! constants.

pub use crate::plf::ExactSum;

/// Knobs of the implementation.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// When the children of a classic normal pool are summed exactly, left to right at every
    /// point, rather than by balanced pairwise summation (see [`ExactSum`]). Improved-mode and
    /// FIFO sums are always exact.
    pub exact_sum: ExactSum,
    /// Whether M and S are built in one walk over F (`crate::envelope`) where F suits it,
    /// rather than always by the fallback, as the oracle builds them (per-resource inverses,
    /// their pointwise minimum, the composition and its compression, on segments). The same
    /// functions; values differ in the last bits.
    pub envelope: bool,
}

impl Default for Tuning {
    /// What production uses.
    fn default() -> Self {
        Tuning::PRODUCTION
    }
}

impl Tuning {
    pub(crate) const PRODUCTION: Tuning = Tuning {
        exact_sum: crate::plf::EXACT_SUM,
        envelope: true,
    };

    pub(crate) fn envelope(self) -> bool {
        self.envelope
    }

    pub(crate) fn exact_sum(self) -> ExactSum {
        self.exact_sum
    }
}
