//! Vector HDRF: YTsaurus' hierarchical, multi-resource fair-share computation.
//!
//! A pure, deterministic library: give it a [`Tree`] of pools and operations (with demands,
//! usages, guarantees, limits and weights) and an [`UpdateInput`] (cluster total, time,
//! options), and [`update`] computes every element's fair share and the attributes YTsaurus
//! exposes. It reads no clock (phase timings use a [`PhaseClock`] the caller lends), spawns no
//! threads, and does not depend on hash order.
//!
//! The algorithm follows `shared/spec/vector_hdrf.md`:
//! * `plf` (private): monotone piecewise-linear functions (scalar and 5-vector) and the
//!   operations the algorithm needs (transpose, narrow, sum, pointwise min, compose, compress);
//! * [`update`]: the update in its thirteen steps — guarantees, integral volumes, FIFO
//!   reordering, burst and relaxed shares, the bottom-up F/M/S functions and the top-down
//!   distribution. A caller that updates repeatedly keeps the working memory in a
//!   [`Workspace`].
//!
//! The public API is [`model`] (the input tree and options), [`output`] (the attributes,
//! errors, warnings and timings), [`update`], [`update_into`] and [`Workspace`]. The feature
//! `tuning` (this crate's own tests only) adds the module `tuning`, the knobs the
//! differential tests against the oracle in `fairsched-hdrf-testkit` set, and `update_tuned`.

mod crit;
mod envelope;
mod improved;
pub mod model;
pub mod output;
mod plf;
mod update;

#[cfg(feature = "tuning")]
pub mod tuning;

pub use model::*;
pub use output::*;
#[cfg(feature = "tuning")]
pub use update::update_tuned;
pub use update::{Workspace, update, update_into};
