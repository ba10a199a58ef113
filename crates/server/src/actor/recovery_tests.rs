//! A restart reads the operations the store holds, as any version of the server wrote them.

use super::history_tests::{actor, ask, heartbeat, tick};
use super::*;
use fairsched_api::{JobState, OperationState, RegisterNode};
use fairsched_core::OperationId;
use fairsched_store::{Batch, SqliteStore, StoredJob, StoredOperation};

/// An operation and one of its jobs as the server wrote them before the API owned the submit
/// schema (commit c0062b3: the core's spec parsed the body; the body is the stored `spec`,
/// with the id and the user filled in and an update's `weight`), verbatim.
const OLD_OPERATION: &str = r#"{"id":"old","state":"running","pool":"research","user":"alice","spec":{"id":"old","pool":"research","tasks":[{"command":["sh","-c","echo hi"],"env":{"GREETING":"hi"},"job_count":3,"resources":{"cpu":1}}],"user":"alice","weight":2.0,"max_unpreemptible_job_count":1},"submitted_at":1700000000000,"job_counts":{"total":0,"pending":0,"running":0,"completed":0,"failed":0,"aborted":0},"jobs":[]}"#;
const OLD_JOB: &str = r#"{"id":"1.1","task":0,"node":"n1","state":"completed","exit_code":0,"started_at":1700000000001,"finished_at":1700000000002}"#;

#[test]
fn a_restart_recovers_an_operation_stored_by_the_old_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(dir.path()).unwrap();
    store
        .commit(&Batch {
            operations: vec![StoredOperation {
                id: "old".into(),
                state: "running".into(),
                pool: "research".into(),
                user: "alice".into(),
                finished_at: None,
                record: OLD_OPERATION.into(),
            }],
            jobs: vec![StoredJob {
                id: "1.1".into(),
                operation: "old".into(),
                record: OLD_JOB.into(),
                stdout_tail: Some("hi\n".into()),
                stderr_tail: Some(String::new()),
            }],
            ..Batch::default()
        })
        .unwrap();
    drop(store);

    let mut a = actor(dir.path(), 0);
    let op = a.operation_view("old").unwrap();
    assert_eq!(op.state, OperationState::Running);
    assert_eq!(op.jobs.len(), 1);
    assert_eq!(op.jobs[0].state, JobState::Completed);
    // The core has it as stored: its weight, the older name of a field, its jobs less the
    // completed one.
    let core = a.sched.operation(&OperationId("old".into())).unwrap();
    assert_eq!(core.spec.weight, Some(2.0));
    assert_eq!(core.spec.max_unpreemptible_allocation_count, Some(1));
    assert_eq!(core.spec.tasks[0].job_count, 2);
    assert_eq!(core.user, "alice");

    // Its remaining jobs start with the stored command and environment.
    let node = RegisterNode {
        node_id: "n1".into(),
        resources: fairsched_api::parse_resources("cpu=4,user_slots=4").unwrap(),
        tags: Vec::new(),
        agent_id: None,
    };
    ask(&mut a, |r| Command::Register(node, r)).unwrap();
    tick(&mut a);
    let started = heartbeat(&mut a, Vec::new()).start;
    assert_eq!(started.len(), 2, "{started:?}");
    for s in &started {
        assert_eq!(s.operation, "old");
        assert_eq!(s.command, ["sh", "-c", "echo hi"]);
        assert_eq!(
            s.env,
            BTreeMap::from([("GREETING".to_string(), "hi".to_string())])
        );
    }
}
