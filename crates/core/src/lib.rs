//! The scheduling core: a sans-IO, deterministic state machine that the server, the simulator and
//! the scenario runner all drive.
//!
//! * [`Scheduler`]: nodes, operations, allocations and the pool tree, changed by commands
//!   (`start_operation`, `abort_operation`, `add_node`, ...), [`Scheduler::tick`] (the periodic
//!   fair-share update) and [`Scheduler::process_heartbeat`] (which jobs start, are interrupted
//!   or aborted on a node).
//! * Time is always passed in ([`Millis`]); the core reads no clock, spawns no thread, uses no
//!   randomness and iterates only ordered collections.
//! * Everything that happens is logged as an [`Event`]; [`Scheduler::snapshot`] gives the
//!   orchid-like view with YTsaurus field names.

pub mod backfill;
mod books;
mod error;
pub mod event;
pub mod gang;
mod gang_plan;
mod gang_scan;
pub mod heartbeat;
mod holds;
mod lifecycle;
pub mod model;
mod nodes;
pub mod operations;
pub mod pools;
pub mod preemptible;
pub mod preemption;
pub mod protocol;
pub mod reservation;
mod room;
pub mod scheduler;
mod scheduler_config;
pub mod snapshot;
mod state;
pub mod status;
pub mod tree;
mod unheld;
mod update;
mod validate;
pub mod why;

pub use event::{Event, EventKind, HoldEnd, Preemptor, Stage};
pub use holds::{GangAssembly, Held, Reservation};
pub use model::*;
pub use scheduler::{
    CoreError, FinishedAllocation, HeartbeatResponse, InterruptOrder, MAX_DURATION_MS,
    NodeHeartbeat, NodeOrders, OperationUpdate, Scheduler, SchedulerConfig, StartOrder, Stats,
    check_duration, check_job_durations,
};
pub use snapshot::{OperationTreeSnapshot, Snapshot, SnapshotInProgress, TreeSnapshot};
pub use update::{FairShareUpdate, PreparingUpdate};
pub use why::WhyTimes;
