//! Deterministic simulation over the scheduling core, in virtual time.
//!
//! * [`cluster`]: the simulated cluster both drive the core through: the nodes, the jobs on
//!   them with their end times, carrying out the core's orders, heartbeats.
//! * [`scenario`]: scenario files (`fairsched scenario FILE`): nodes, pool trees and timed
//!   events run through [`fairsched_core::Scheduler`], printing every event and the snapshots
//!   as JSON lines, byte-identical for the same file.
//! * [`trace`]: workload traces to replay (`fairsched simulate --trace FILE`): the Standard
//!   Workload Format and Alibaba's GPU cluster trace read into jobs in submission order, with
//!   what was left out or adjusted and the machine the trace describes.
//! * [`cpu`]: the thread CPU clock used to report the time spent inside the core.

pub mod cluster;
pub mod cpu;
pub mod replay;
pub mod scenario;
pub mod trace;
