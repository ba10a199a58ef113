//! What drivers and the core say to each other about nodes: a node's heartbeat report
//! ([`NodeHeartbeat`], [`FinishedAllocation`]) and the core's orders for it ([`StartOrder`],
//! [`InterruptOrder`], [`NodeOrders`], [`HeartbeatResponse`]).

use crate::event::Preemptor;
use crate::model::{AllocationId, JobOutcome, OperationId, PreemptionReason};
use fairsched_resources::Resources;
use serde::{Deserialize, Serialize};

/// A job the node reports as ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinishedAllocation {
    pub allocation: AllocationId,
    pub outcome: JobOutcome,
}

/// What a node sends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeHeartbeat {
    pub finished: Vec<FinishedAllocation>,
}

/// Start a job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StartOrder {
    pub allocation: AllocationId,
    pub operation: OperationId,
    pub task: usize,
    pub resources: Resources,
}

/// Interrupt a job: send the signal (if any) and abort it after the timeout.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InterruptOrder {
    pub allocation: AllocationId,
    pub signal: Option<String>,
    pub timeout_ms: u64,
    pub reason: PreemptionReason,
    /// The allocation started for this one's resources (it waits until this one has left the
    /// node).
    pub preemptor: Option<Preemptor>,
}

/// What a node must stop: the core's orders for it, handed out in its next heartbeat's
/// response ([`Scheduler::process_heartbeat`](crate::Scheduler::process_heartbeat)) or to a
/// driver that delivers them at once ([`Scheduler::take_orders`](crate::Scheduler::take_orders)). Every allocation the core gives up while its job may still
/// run (preempted, aborted with its operation, on a disabled node, ...) is here, whatever
/// caused it: a command, a fair-share update or a heartbeat of any node.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeOrders {
    pub interrupt: Vec<InterruptOrder>,
    /// Kill these jobs now.
    pub abort: Vec<AllocationId>,
}

/// What the core answers to a heartbeat: the jobs to start, and every order for the node not
/// yet taken ([`NodeOrders`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HeartbeatResponse {
    pub start: Vec<StartOrder>,
    pub interrupt: Vec<InterruptOrder>,
    /// Kill these jobs now.
    pub abort: Vec<AllocationId>,
}
