//! Operation counts per pool (see [`super`]), kept per tree as operations start, change state
//! or move.

use serde::Serialize;

/// Operation counts of a pool (its whole subtree) or the root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolCounts {
    pub operation_count: u32,
    pub running_operation_count: u32,
    pub lightweight_running_operation_count: u32,
}
