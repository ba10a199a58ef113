//! The job events written straight (`Actor::job_event`) are what the generic way writes.

use super::history_tests::{actor, heartbeat, register_n1};
use super::*;
use crate::submit::Submission;
use fairsched_core::{AllocationId, Event, EventKind, JobOutcome, OperationId, Stage};
use tokio::sync::oneshot;

/// The record the generic way writes (every event but the jobs' goes that way).
fn generic(actor: &Actor, e: &Event) -> String {
    Value::Object(actor.event_fields(e)).to_string()
}

#[test]
fn job_events_written_straight_are_the_generic_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 3_600_000);
    register_n1(&mut a);
    let spec = json!({"id": "op-1", "tasks": [{"job_count": 2, "resources": {"cpu": 1},
                      "command": ["true"]}]});
    let (tx, _rx) = oneshot::channel();
    a.handle(Command::Submit(
        Box::new(Submission::parse(spec).unwrap()),
        false,
        tx,
    ));
    a.settle();
    super::history_tests::tick(&mut a);
    let reply = heartbeat(&mut a, Vec::new());
    assert_eq!(reply.start.len(), 2, "{reply:?}");
    let running: Vec<(u64, String)> = a.alloc_job.iter().map(|(k, v)| (*k, v.clone())).collect();
    // One job has an exit code (its end was reported), the other none yet.
    let (with_code, job) = running[0].clone();
    a.update_job(&job, |j| j.exit_code = Some(3)).unwrap();
    let (without_code, _) = running[1].clone();
    // A job the server does not know (its id is made from the allocation).
    let unknown = 999_999;
    let op = OperationId("op-1".into());
    let mut events = Vec::new();
    for allocation in [with_code, without_code, unknown] {
        for node in ["n1", "a \"quoted\" \\ nöde\n"] {
            let node = NodeId(node.into());
            for backfill in [false, true] {
                events.push(EventKind::AllocationStarted {
                    operation: op.clone(),
                    allocation: AllocationId(allocation),
                    node: node.clone(),
                    stage: Stage::SsdAggressive,
                    backfill,
                });
            }
            for outcome in [
                JobOutcome::Completed,
                JobOutcome::Failed,
                JobOutcome::Aborted,
            ] {
                events.push(EventKind::AllocationFinished {
                    operation: op.clone(),
                    allocation: AllocationId(allocation),
                    node: node.clone(),
                    outcome,
                });
            }
        }
    }
    for (i, kind) in events.into_iter().enumerate() {
        let e = Event {
            t_ms: 1000 + i as u64,
            kind,
        };
        let fields = a.event_fields(&e);
        let text = |k: &str| fields.get(k).and_then(Value::as_str).map(str::to_string);
        let stored = a.job_event(&e, 42).expect("a job event");
        assert_eq!(stored.record, generic(&a, &e));
        assert_eq!(stored.kind, text("event").unwrap());
        assert_eq!(stored.operation, text("operation"));
        assert_eq!(stored.node, text("node"));
        assert_eq!(stored.job, text("job"));
        assert_eq!(stored.unix_ms, 42);
    }
    // Any other event goes the generic way.
    let e = Event {
        t_ms: 5,
        kind: EventKind::OperationState {
            operation: op,
            state: fairsched_core::OperationState::Running,
            reason: None,
        },
    };
    assert!(a.job_event(&e, 42).is_none());
}
