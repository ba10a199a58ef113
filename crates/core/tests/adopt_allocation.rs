//! Adopting a job that already runs on a node (a restarted server re-inserts what its store had
//! as running): it counts as running there, logs nothing, ends through the node's heartbeat
//! like any allocation, and is rejected — changing nothing — when it cannot be.

mod common;

use common::{Driver, StartOp, add_nodes, op, res, scheduler, task};
use fairsched_core::{
    FinishedAllocation, JobOutcome, NodeHeartbeat, NodeId, OperationId, SchedulerConfig,
};

fn tree() -> &'static str {
    r#"{"pool_trees": {"default": {"pools": {"p": {}}}}}"#
}

#[test]
fn an_adopted_job_runs_where_it_was_and_ends_by_heartbeat() {
    let mut s = scheduler(tree(), SchedulerConfig::default());
    add_nodes(&mut s, 2, res(2.0, 2.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("a", Some("p"), vec![task(3, res(1.0, 1.0), None)]),
    )
    .expect("operation");
    s.take_events();
    let a = OperationId("a".into());
    let node0 = NodeId("node-0".into());

    let id = s.adopt_allocation(5, &a, 0, &node0).expect("adopted");
    assert!(s.take_events().is_empty(), "adoption logs nothing");
    let alloc = s.allocation(id).expect("allocation");
    assert_eq!((&alloc.node, alloc.task, alloc.start_time), (&node0, 0, 5));
    let op_a = s.operation(&a).expect("op");
    assert_eq!((op_a.running_job_count(), op_a.pending_job_count()), (1, 2));
    assert_eq!(op_a.usage, res(1.0, 1.0));
    let n = s.node(&node0).expect("node");
    assert_eq!(n.usage, res(1.0, 1.0));
    assert!(n.allocations.contains(&id));

    // The other two jobs are placed around it: node-0 has room for one more.
    d.run(&mut s, 100, 300, 100);
    assert_eq!(d.count("allocation_started", "a"), 2);
    assert_eq!(s.node(&node0).expect("node").allocations.len(), 2);

    // It ends like any allocation, when its node reports it.
    s.process_heartbeat(
        400,
        &node0,
        NodeHeartbeat {
            finished: vec![FinishedAllocation {
                allocation: id,
                outcome: JobOutcome::Completed,
            }],
        },
    )
    .expect("heartbeat");
    let events: Vec<serde_json::Value> = s
        .take_events()
        .iter()
        .map(|e| serde_json::to_value(e).expect("event"))
        .collect();
    assert!(
        events.iter().any(|e| e["event"] == "allocation_finished"
            && e["allocation"] == id.0
            && e["outcome"] == "completed"),
        "{events:?}"
    );
    assert_eq!(s.operation(&a).expect("op").tasks[0].completed, 1);
}

#[test]
fn adoption_is_rejected_without_changes() {
    let mut s = scheduler(tree(), SchedulerConfig::default());
    add_nodes(&mut s, 1, res(2.0, 2.0));
    s.start_op(0, op("a", Some("p"), vec![task(1, res(1.0, 1.0), None)]))
        .expect("operation");
    let a = OperationId("a".into());
    let node0 = NodeId("node-0".into());
    let before = format!("{:?}", s.snapshot(0));

    assert!(
        s.adopt_allocation(0, &a, 0, &NodeId("nope".into()))
            .is_err()
    );
    assert!(
        s.adopt_allocation(0, &OperationId("nope".into()), 0, &node0)
            .is_err()
    );
    assert!(s.adopt_allocation(0, &a, 1, &node0).is_err(), "no task 1");
    s.set_node(0, &node0, None, None, Some(false))
        .expect("disable");
    assert!(s.adopt_allocation(0, &a, 0, &node0).is_err(), "disabled");
    s.set_node(0, &node0, None, None, Some(true))
        .expect("enable");
    assert_eq!(format!("{:?}", s.snapshot(0)), before);

    // Its only job adopted, the task has none pending left.
    s.adopt_allocation(0, &a, 0, &node0).expect("adopted");
    let err = s.adopt_allocation(0, &a, 0, &node0).unwrap_err();
    assert!(err.message().contains("no pending job"), "{err}");
    assert_eq!(s.allocations().count(), 1);

    // A finished operation adopts nothing.
    s.abort_operation(0, &a).expect("abort");
    assert!(s.adopt_allocation(0, &a, 0, &node0).is_err());
}

#[test]
fn adoption_is_deterministic() {
    let run = || {
        let mut s = scheduler(tree(), SchedulerConfig::default());
        add_nodes(&mut s, 2, res(2.0, 2.0));
        let mut d = Driver::new();
        d.start(
            &mut s,
            0,
            op("a", Some("p"), vec![task(4, res(1.0, 1.0), Some(300))]),
        )
        .expect("operation");
        for node in ["node-1", "node-0", "node-1"] {
            s.adopt_allocation(0, &OperationId("a".into()), 0, &NodeId(node.into()))
                .expect("adopted");
        }
        d.run(&mut s, 0, 1000, 100);
        (format!("{:?}", d.events), format!("{:?}", s.snapshot(1000)))
    };
    assert_eq!(run(), run());
}
