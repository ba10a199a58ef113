//! The original (unoptimised) implementation of the piecewise-linear toolkit and the update,
//! kept verbatim as a test oracle: `fairsched-hdrf`'s differential tests
//! (`crates/hdrf/tests/differential.rs`) check that the production update reproduces it (bit
//! for bit where it claims exactness). It sees the production crate only through its public
//! model and output types.
//!
//! Do not "fix" or optimise this copy: its only purpose is to be the unchanged baseline.

#![allow(dead_code)]

pub mod plf;
pub mod update;
