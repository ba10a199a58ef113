//! Finished operations leave the core: `forget_finished_operations` drops the finished
//! operations nothing refers to any more, and nothing else; scheduling goes on as before.

mod common;

use common::*;
use fairsched_core::{OperationId, OperationState, SchedulerConfig};

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {"pool": {}}}}}"#;

fn id(s: &str) -> OperationId {
    OperationId(s.into())
}

#[test]
fn finished_operations_are_forgotten_after_the_next_update_and_only_they() {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(2.0, 2.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op(
            "short",
            Some("pool"),
            vec![task(2, res(1.0, 1.0), Some(100))],
        ),
    )
    .unwrap();
    d.start(
        &mut s,
        0,
        op(
            "long",
            Some("pool"),
            vec![task(2, res(1.0, 1.0), Some(100_000))],
        ),
    )
    .unwrap();
    d.start(
        &mut s,
        0,
        op("aborted", Some("pool"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 0, 500, 100);
    s.abort_operation(500, &id("aborted")).unwrap();
    assert_eq!(
        s.operation(&id("short")).unwrap().state,
        OperationState::Completed
    );
    assert_eq!(
        s.operation(&id("aborted")).unwrap().state,
        OperationState::Aborted
    );
    s.update_fair_share(600);
    let forgotten = s.forget_finished_operations();
    assert!(forgotten.contains(&id("aborted")), "{forgotten:?}");
    assert!(forgotten.contains(&id("short")), "{forgotten:?}");
    assert!(!forgotten.contains(&id("long")));
    assert!(s.operation(&id("short")).is_none());
    assert!(s.operation(&id("aborted")).is_none());
    let left: Vec<String> = s.operations().map(|o| o.spec.id.0.clone()).collect();
    assert_eq!(left, ["long"]);
    assert!(!s.snapshot(600).operations.contains_key("short"));
    // Nothing more to forget; scheduling goes on with the operations left and new ones.
    assert!(s.forget_finished_operations().is_empty());
    d.start(
        &mut s,
        700,
        op(
            "later",
            Some("pool"),
            vec![task(1, res(1.0, 1.0), Some(100))],
        ),
    )
    .unwrap();
    d.run(&mut s, 700, 3000, 100);
    assert_eq!(
        s.operation(&id("later")).unwrap().state,
        OperationState::Completed
    );
    assert_eq!(s.operation(&id("long")).unwrap().running_job_count(), 2);
    // A forgotten id may be used again.
    d.start(
        &mut s,
        3000,
        op("short", Some("pool"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
}

/// A pending operation aborted while an update is computed is forgotten at its install (it
/// was never in the tree) before the next update prunes it from the live order; an operation
/// started again under its id is in the next update once.
#[test]
fn an_id_used_again_after_its_operation_was_forgotten_is_scheduled_once() {
    let tree = r#"{"pool_trees": {"default": {"pools": {
        "pool": {"max_running_operation_count": 1}}}}}"#;
    let mut s = scheduler(tree, SchedulerConfig::default());
    add_nodes(&mut s, 1, res(4.0, 4.0));
    let one = || vec![task(1, res(1.0, 1.0), None)];
    s.start_op(0, op("runs", Some("pool"), one())).unwrap();
    s.start_op(0, op("waits", Some("pool"), one())).unwrap();
    assert_eq!(
        s.operation(&id("waits")).unwrap().state,
        OperationState::Pending
    );
    let mut update = s.prepare_fair_share_update(10);
    s.abort_operation(20, &id("waits")).unwrap();
    update.compute();
    assert!(s.apply_fair_share_update(&mut update));
    assert_eq!(s.forget_finished_operations(), [id("waits")]);
    // The same id again: the pool's running limit is full, so it waits too.
    s.start_op(30, op("waits", Some("pool"), one())).unwrap();
    let listed = s
        .unfinished_operations()
        .filter(|op| op.spec.id == id("waits"))
        .count();
    assert_eq!(listed, 1, "listed once");
    s.abort_operation(40, &id("runs")).unwrap();
    s.update_fair_share(50);
    let snapshot = s.snapshot(50);
    assert_eq!(snapshot.operations["waits"].state, "running");
    assert!(snapshot.operations["waits"].element.is_some());
    assert_eq!(snapshot.pools["pool"].running_operation_count, 1);
}
