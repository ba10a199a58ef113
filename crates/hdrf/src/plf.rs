//! Monotone piecewise-linear functions.
