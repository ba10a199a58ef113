//! Test and benchmark support for `fairsched-hdrf`.
//!
//! * [`random_tree`]: a seeded random pool tree of any size ([`TreeParams`]: pool and operation
//!   counts, depth range, shares of FIFO pools, strong and integral guarantees, limits, gangs,
//!   usage, weight range, cluster shape). Deterministic for a seed.
//! * [`strategy`]: proptest strategies for small trees (depth ≤ 5, about 30 elements) and flat
//!   DRF trees, drawn as round numbers so that shrunk counterexamples are readable.
//! * [`TreeSpec`]: the declarative description both produce; [`TreeSpec::build`] turns it into a
//!   [`fairsched_hdrf::Tree`] and an [`fairsched_hdrf::UpdateInput`], keeping every configuration
//!   feasible (guarantees fit in their parents and the cluster, FIFO pools hold only operations,
//!   usage ≤ demand and fits the cluster).
//! * [`oracle`]: the original, unoptimised update and piecewise-linear toolkit, kept verbatim
//!   as the oracle of `fairsched-hdrf`'s differential tests.
//! * [`InstantClock`]: a [`fairsched_hdrf::PhaseClock`] on `std::time::Instant` for per-phase
//!   timings.

pub mod oracle;
mod random;
pub mod rng;
mod spec;
pub mod strategy;

pub use random::{TreeParams, random_spec, random_tree};
pub use spec::{
    GuaranteeNode, INTEGRAL_BUDGET, IntegralNode, LimitsNode, NOW_SECONDS, NodeSpec, OperationNode,
    PoolNode, SIBLING_GUARANTEE_CAP, TreeSpec, USAGE_CAP, options,
};

/// A [`fairsched_hdrf::PhaseClock`] reading `std::time::Instant` (nanoseconds since creation).
#[derive(Clone, Copy, Debug)]
pub struct InstantClock {
    origin: std::time::Instant,
}

impl InstantClock {
    pub fn new() -> InstantClock {
        InstantClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for InstantClock {
    fn default() -> Self {
        InstantClock::new()
    }
}

impl fairsched_hdrf::PhaseClock for InstantClock {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
