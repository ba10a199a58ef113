//! The event log: every start, finish, interruption, preemption, state change and error, in
//! order, as data. Serialized as flat JSON objects (`{"t_ms":..,"event":"allocation_started",..}`).

pub use crate::model::Preemptor;
use crate::model::{
    AllocationId, JobOutcome, Millis, NodeId, OperationId, OperationState, PreemptionReason,
};
use serde::Serialize;

/// Which heartbeat stage started an allocation (YTsaurus `EAllocationSchedulingStage`; the
/// preemptive stages run in the order `SsdAggressive`, `SsdPreemptive`, `Aggressive`,
/// `Preemptive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The regular stage: free resources only.
    Regular,
    /// `PreemptiveNormal`: starving operations preempt preemptible allocations.
    Preemptive,
    /// `PreemptiveAggressive`: aggressively starving operations also preempt aggressively
    /// preemptible allocations.
    Aggressive,
    /// `PreemptiveSsdNormal` (SSD nodes with `ssd_priority_preemption` enabled): starving SSD
    /// operations preempt any non-SSD allocation and preemptible SSD allocations.
    SsdPreemptive,
    /// `PreemptiveSsdAggressive`: aggressively starving SSD operations also preempt aggressively
    /// preemptible SSD allocations.
    SsdAggressive,
}

impl Stage {
    /// The stage's name in the event log and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Regular => "regular",
            Stage::Preemptive => "preemptive",
            Stage::Aggressive => "aggressive",
            Stage::SsdPreemptive => "ssd_preemptive",
            Stage::SsdAggressive => "ssd_aggressive",
        }
    }

    /// Every stage, in the order of their names in metrics.
    pub const ALL: [Stage; 5] = [
        Stage::Regular,
        Stage::Preemptive,
        Stage::Aggressive,
        Stage::SsdPreemptive,
        Stage::SsdAggressive,
    ];

    /// A stage that starts allocations by preemption.
    pub fn is_preemptive(self) -> bool {
        self != Stage::Regular
    }

    /// One of the SSD priority preemption stages.
    pub fn is_ssd(self) -> bool {
        matches!(self, Stage::SsdPreemptive | Stage::SsdAggressive)
    }
}

/// Why resources held for an operation (a job reservation, a gang's assembly or placement)
/// were let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldEnd {
    /// The reserved job started.
    JobStarted,
    /// The gang's jobs started.
    Started,
    OperationFinished,
    /// The reserving operation has no pending job left.
    NoPendingJob,
    /// The reserving operation reached its fair share.
    FairShareReached,
    /// The node left, or no longer takes jobs of the tree.
    NodeUnavailable,
    /// The tree's option was turned off.
    Disabled,
    /// The gang's assembly took longer than `gang_placement.assembly_timeout_ms`.
    Timeout,
}

impl HoldEnd {
    /// As the event log writes it.
    pub fn name(self) -> &'static str {
        match self {
            HoldEnd::JobStarted => "job_started",
            HoldEnd::Started => "started",
            HoldEnd::OperationFinished => "operation_finished",
            HoldEnd::NoPendingJob => "no_pending_job",
            HoldEnd::FairShareReached => "fair_share_reached",
            HoldEnd::NodeUnavailable => "node_unavailable",
            HoldEnd::Disabled => "disabled",
            HoldEnd::Timeout => "timeout",
        }
    }
}

impl std::fmt::Display for HoldEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of the event log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub t_ms: Millis,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    AllocationStarted {
        operation: OperationId,
        allocation: AllocationId,
        node: NodeId,
        stage: Stage,
        /// It runs on resources held for another operation's job reservation or gang, which
        /// its time limit leaves in time (see [`crate::backfill`]); left out when false.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        backfill: bool,
    },
    AllocationFinished {
        operation: OperationId,
        allocation: AllocationId,
        node: NodeId,
        outcome: JobOutcome,
    },
    /// The node was told to interrupt the job (it has `timeout_ms` to exit).
    AllocationInterrupted {
        operation: OperationId,
        allocation: AllocationId,
        node: NodeId,
        reason: PreemptionReason,
        timeout_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        preemptor: Option<Preemptor>,
    },
    /// The allocation was taken away: its job is aborted (or was interrupted and did not exit
    /// in time) and goes back to pending.
    AllocationPreempted {
        operation: OperationId,
        allocation: AllocationId,
        node: NodeId,
        reason: PreemptionReason,
        #[serde(skip_serializing_if = "Option::is_none")]
        preemptor: Option<Preemptor>,
    },
    OperationState {
        operation: OperationId,
        state: OperationState,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Error {
        code: u32,
        message: String,
    },
    /// Resources of one job of the operation are held on the node (`job_reservation`).
    JobReserved {
        operation: OperationId,
        node: NodeId,
        resources: fairsched_resources::Resources,
    },
    /// The node no longer holds resources for the operation: `job_started`,
    /// `operation_finished`, `no_pending_job`, `fair_share_reached`, `node_unavailable` or
    /// `disabled`.
    ReservationReleased {
        operation: OperationId,
        node: NodeId,
        reason: HoldEnd,
    },
    /// Every pending job of the gang operation is held (`gang_placement`): they start at
    /// their nodes' next heartbeats.
    GangAssembled {
        operation: OperationId,
        jobs: u32,
        nodes: u32,
    },
    /// The gang's assembly ended: `started`, `timeout`, `operation_finished`,
    /// `node_unavailable` or `disabled`.
    GangReleased {
        operation: OperationId,
        reason: HoldEnd,
    },
}

impl EventKind {
    /// Every event's name (its `event` field), as [`EventKind::name`] gives them.
    pub const NAMES: [&'static str; 10] = [
        "allocation_started",
        "allocation_finished",
        "allocation_interrupted",
        "allocation_preempted",
        "operation_state",
        "error",
        "job_reserved",
        "reservation_released",
        "gang_assembled",
        "gang_released",
    ];

    /// The event's name: its `event` field when serialised.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::AllocationStarted { .. } => "allocation_started",
            EventKind::AllocationFinished { .. } => "allocation_finished",
            EventKind::AllocationInterrupted { .. } => "allocation_interrupted",
            EventKind::AllocationPreempted { .. } => "allocation_preempted",
            EventKind::OperationState { .. } => "operation_state",
            EventKind::Error { .. } => "error",
            EventKind::JobReserved { .. } => "job_reserved",
            EventKind::ReservationReleased { .. } => "reservation_released",
            EventKind::GangAssembled { .. } => "gang_assembled",
            EventKind::GangReleased { .. } => "gang_released",
        }
    }

    /// The node the event is about, if one.
    pub fn node(&self) -> Option<&NodeId> {
        match self {
            EventKind::AllocationStarted { node, .. }
            | EventKind::AllocationFinished { node, .. }
            | EventKind::AllocationInterrupted { node, .. }
            | EventKind::AllocationPreempted { node, .. }
            | EventKind::JobReserved { node, .. }
            | EventKind::ReservationReleased { node, .. } => Some(node),
            EventKind::OperationState { .. }
            | EventKind::Error { .. }
            | EventKind::GangAssembled { .. }
            | EventKind::GangReleased { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event of every kind: its `name` is its serialised `event` field, and
    /// [`EventKind::NAMES`] lists each once.
    #[test]
    fn names_are_the_serialised_event_fields() {
        let op = || OperationId("op".into());
        let node = || NodeId("n".into());
        let events = [
            EventKind::AllocationStarted {
                operation: op(),
                allocation: AllocationId(1),
                node: node(),
                stage: Stage::Regular,
                backfill: false,
            },
            EventKind::AllocationFinished {
                operation: op(),
                allocation: AllocationId(1),
                node: node(),
                outcome: JobOutcome::Completed,
            },
            EventKind::AllocationInterrupted {
                operation: op(),
                allocation: AllocationId(1),
                node: node(),
                reason: PreemptionReason::Preemption,
                timeout_ms: 1,
                preemptor: None,
            },
            EventKind::AllocationPreempted {
                operation: op(),
                allocation: AllocationId(1),
                node: node(),
                reason: PreemptionReason::Preemption,
                preemptor: None,
            },
            EventKind::OperationState {
                operation: op(),
                state: OperationState::Running,
                reason: None,
            },
            EventKind::Error {
                code: 1,
                message: String::new(),
            },
            EventKind::JobReserved {
                operation: op(),
                node: node(),
                resources: fairsched_resources::Resources::ZERO,
            },
            EventKind::ReservationReleased {
                operation: op(),
                node: node(),
                reason: HoldEnd::Started,
            },
            EventKind::GangAssembled {
                operation: op(),
                jobs: 1,
                nodes: 1,
            },
            EventKind::GangReleased {
                operation: op(),
                reason: HoldEnd::Started,
            },
        ];
        let names: Vec<&str> = events.iter().map(EventKind::name).collect();
        assert_eq!(names, EventKind::NAMES);
        for e in &events {
            let json = serde_json::to_value(e).unwrap();
            assert_eq!(json["event"], e.name());
        }
    }
}
