//! Deterministic simulation over the scheduling core, in virtual time.
//!
//! * [`scenario`]: scenario files (`fairsched scenario FILE`): nodes, pool trees and timed
//!   events run through [`fairsched_core::Scheduler`], printing every event and the snapshots
//!   as JSON lines, byte-identical for the same file.
//! * [`cpu`]: the thread CPU clock used to report the time spent inside the core.

pub mod cpu;
pub mod scenario;
