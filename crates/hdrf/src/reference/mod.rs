//! The original (unoptimised) implementation of the piecewise-linear toolkit and the update,
//! kept verbatim as a test oracle: `crate::perf_equivalence` checks that the optimised code in
//! `crate::plf` / `crate::update` reproduces it (bit for bit where it claims exactness).
//!
//! Do not "fix" or optimise this copy: its only purpose is to be the unchanged baseline.

#![allow(dead_code)]

pub mod plf;
pub mod update;
