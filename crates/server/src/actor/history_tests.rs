//! Finished operations leave memory and are read from the store; a restart loads only the
//! unfinished ones; the retention prunes the store.

use super::*;
use crate::command::LogsRequest;
use crate::submit::Submission;
use fairsched_api::{
    EventQuery, FinishedJob, Heartbeat, HeartbeatReply, OperationState, OperationView, RegisterNode,
};
use fairsched_core::OperationId;
use fairsched_store::OperationFilter;
use tokio::sync::oneshot;

const PERIOD_MS: u64 = 10;

pub(super) fn actor(dir: &std::path::Path, history_retention_ms: u64) -> Actor {
    let mut config = crate::ServerConfig {
        data_dir: dir.to_path_buf(),
        history_retention_ms,
        ..crate::ServerConfig::default()
    };
    config.scheduler.fair_share_update_period_ms = PERIOD_MS;
    let store = fairsched_store::SqliteStore::open(dir).unwrap();
    Actor::new(&config, Box::new(store)).unwrap().0
}

pub(super) fn ask<T>(
    actor: &mut Actor,
    make: impl FnOnce(Reply<T>) -> Command,
) -> Result<T, ApiError> {
    let (tx, mut rx) = oneshot::channel();
    actor.handle(make(tx));
    actor.settle();
    rx.try_recv().expect("answered at once")
}

/// Registers node `n1` (4 cpus, 4 slots).
pub(super) fn register_n1(actor: &mut Actor) {
    let node = RegisterNode {
        node_id: "n1".into(),
        resources: fairsched_api::parse_resources("cpu=4,user_slots=4").unwrap(),
        tags: Vec::new(),
        agent_id: None,
    };
    ask(actor, |r| Command::Register(node, r)).unwrap();
}

/// Lets a fair-share update come due and runs the timer.
pub(super) fn tick(actor: &mut Actor) {
    std::thread::sleep(Duration::from_millis(PERIOD_MS + 5));
    actor.on_timer();
    actor.settle();
}

fn submit(actor: &mut Actor, id: &str) {
    let spec = json!({"id": id, "tasks": [{"job_count": 1, "resources": {"cpu": 1},
                      "command": ["true"]}]});
    ask(actor, |r| {
        Command::Submit(Box::new(Submission::parse(spec).unwrap()), false, r)
    })
    .unwrap();
}

pub(super) fn heartbeat(actor: &mut Actor, finished: Vec<FinishedJob>) -> HeartbeatReply {
    let hb = Heartbeat {
        node_id: "n1".into(),
        node_credential: None,
        running: Vec::new(),
        finished,
        output: Vec::new(),
        leaving: false,
    };
    ask(actor, |r| Command::Heartbeat(hb, r)).unwrap()
}

fn completed(job: &str) -> FinishedJob {
    FinishedJob {
        stdout_tail: format!("out of {job}\n"),
        ..FinishedJob::completed(job)
    }
}

/// `done` runs to its end on n1, `live` keeps running there.
fn setup(actor: &mut Actor) {
    register_n1(actor);
    submit(actor, "done");
    submit(actor, "live");
    tick(actor);
    let started = heartbeat(actor, Vec::new()).start;
    assert_eq!(started.len(), 2, "{started:?}");
    let done: Vec<FinishedJob> = started
        .iter()
        .filter(|s| s.operation == "done")
        .map(|s| completed(&s.job))
        .collect();
    heartbeat(actor, done);
}

fn ids(ops: &[OperationView]) -> Vec<&str> {
    ops.iter().map(|o| o.id.as_str()).collect()
}

#[test]
fn a_finished_operation_leaves_memory_and_is_read_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 0);
    setup(&mut a);
    // Gone from what requests, heartbeats and views walk.
    assert!(!a.ops.contains_key("done"));
    assert_eq!(a.ops.ids().collect::<Vec<_>>(), ["live"]);
    assert!(a.job_op.values().all(|(op, _)| op == "live"));
    let view = a.build_view(a.sched.snapshot(0));
    assert_eq!(
        view.operations
            .iter()
            .map(|o| o.view.id.as_str())
            .collect::<Vec<_>>(),
        ["live"]
    );
    // The core forgets it at the next fair-share update.
    tick(&mut a);
    assert!(a.sched.operation(&OperationId("done".into())).is_none());
    assert!(a.sched.operation(&OperationId("live".into())).is_some());
    // Read from the store: the record with its final counts, its job, its output.
    let done = a.operation_view("done").unwrap();
    assert_eq!(done.state, OperationState::Completed);
    assert_eq!(done.job_counts.completed, 1, "{done:?}");
    assert_eq!(done.job_counts.total, 1);
    assert_eq!(done.jobs.len(), 1);
    assert_eq!(done.jobs[0].exit_code, Some(0));
    let logs = a.logs(LogsRequest::all("done")).unwrap().logs;
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].node, "n1");
    assert!(logs[0].stdout.starts_with("out of "), "{logs:?}");
    let listed = a
        .operation_views(
            &OperationFilter {
                limit: 10,
                ..OperationFilter::default()
            },
            false,
        )
        .unwrap();
    assert_eq!(ids(&listed), ["done", "live"]);
    assert_eq!(listed[1].state, OperationState::Running);
    // Commands on it say what it is.
    let e = ask(&mut a, |r| Command::Abort("done".into(), r)).unwrap_err();
    assert!(e.message.contains("is already completed"), "{e:?}");
    let spec = json!({"id": "done", "tasks": [{"job_count": 1, "command": ["true"]}]});
    let e = ask(&mut a, |r| {
        Command::Submit(Box::new(Submission::parse(spec).unwrap()), false, r)
    })
    .unwrap_err();
    assert!(e.message.contains("already exists"), "{e:?}");
    let e = a.operation_view("nope").unwrap_err();
    assert_eq!(e.code, codes::NO_SUCH_OPERATION);
}

#[test]
fn a_restart_loads_only_unfinished_operations() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 0);
    setup(&mut a);
    drop(a);
    let b = actor(dir.path(), 0);
    assert_eq!(b.ops.ids().collect::<Vec<_>>(), ["live"]);
    assert!(b.sched.operation(&OperationId("done".into())).is_none());
    assert!(b.job_op.values().all(|(op, _)| op == "live"));
    assert_eq!(
        b.operation_view("done").unwrap().state,
        OperationState::Completed
    );
}

#[test]
fn the_retention_prunes_finished_operations_and_old_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 30);
    setup(&mut a);
    assert!(a.operation_view("done").is_ok());
    std::thread::sleep(Duration::from_millis(60));
    a.prune_at = Instant::now();
    a.prune_history();
    let e = a.operation_view("done").unwrap_err();
    assert_eq!(e.code, codes::NO_SUCH_OPERATION, "{e:?}");
    assert!(a.logs(LogsRequest::all("done")).is_err());
    // The unfinished operation stays; of the events, the newest.
    assert_eq!(
        a.operation_view("live").unwrap().state,
        OperationState::Running
    );
    let events = a
        .read_events(&EventQuery {
            limit: Some(100),
            ..EventQuery::default()
        })
        .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    // Without a retention nothing goes.
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 0);
    setup(&mut a);
    a.prune_at = Instant::now();
    a.prune_history();
    assert!(a.operation_view("done").is_ok());
}

/// Jobs starting and ending do not rewrite their operation's stored record (its counts are
/// stored with its end); a restart counts a running operation's jobs from the stored jobs.
#[test]
fn job_changes_leave_the_stored_operation_alone_and_a_restart_counts_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = actor(dir.path(), 0);
    register_n1(&mut a);
    let spec = json!({"id": "wide", "tasks": [{"job_count": 3, "resources": {"cpu": 1},
                      "command": ["true"]}]});
    ask(&mut a, |r| {
        Command::Submit(Box::new(Submission::parse(spec).unwrap()), false, r)
    })
    .unwrap();
    let stored = |a: &Actor| a.reader.operation("wide").unwrap().unwrap().0.record;
    let submitted = stored(&a);
    tick(&mut a);
    let started = heartbeat(&mut a, Vec::new()).start;
    assert_eq!(started.len(), 3);
    heartbeat(&mut a, vec![completed(&started[0].job)]);
    assert_eq!(
        stored(&a),
        submitted,
        "the stored record is the submitted one"
    );
    let counts = a.ops.get("wide").unwrap().counts;
    assert_eq!((counts.running, counts.completed), (2, 1));
    drop(a);
    let b = actor(dir.path(), 0);
    let view = b.publish.borrow().clone();
    let counts = &view.operations.get("wide").unwrap().counts;
    assert_eq!((counts.running, counts.completed, counts.total), (2, 1, 3));
}
