//! The core's one output contract (issue 19): every allocation it gives up while the job may
//! still run is an order for its node, handed out in that node's next heartbeat response or
//! taken by a driver at once (`take_orders`); a removed node is owed nothing. Drivers never
//! read the event log to learn what a node must stop.

mod common;

use common::{Driver, StartOp, add_nodes, op, res, scheduler, task};
use fairsched_core::{
    AllocationId, NodeHeartbeat, NodeId, OperationId, Scheduler, SchedulerConfig,
};
use std::collections::BTreeSet;

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {"p": {}}}}}"#;

/// Two nodes running four jobs of `op` (two each).
fn running() -> (Scheduler, Vec<AllocationId>) {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(2.0, 2.0));
    s.start_op(0, op("op", Some("p"), vec![task(4, res(1.0, 1.0), None)]))
        .expect("op");
    Driver::new().run(&mut s, 0, 0, 100);
    let allocations: Vec<AllocationId> = s.allocations().map(|a| a.id).collect();
    assert_eq!(allocations.len(), 4);
    (s, allocations)
}

fn on(s: &Scheduler, node: &str, all: &[AllocationId]) -> BTreeSet<AllocationId> {
    all.iter()
        .copied()
        .filter(|a| s.allocation(*a).is_some_and(|x| x.node.0 == node))
        .collect()
}

fn heartbeat_aborts(s: &mut Scheduler, node: &str) -> BTreeSet<AllocationId> {
    let response = s
        .process_heartbeat(
            1000,
            &NodeId(node.into()),
            NodeHeartbeat { finished: vec![] },
        )
        .expect("heartbeat");
    response.abort.into_iter().collect()
}

#[test]
fn a_commands_aborts_come_with_the_nodes_next_heartbeat() {
    // (case, the command, the node whose jobs it gives up)
    type Command = fn(&mut Scheduler);
    let cases: [(&str, Command, &str); 2] = [
        (
            "operation aborted",
            |s| {
                s.abort_operation(500, &OperationId("op".into()))
                    .expect("abort");
            },
            "node-0",
        ),
        (
            "node disabled",
            |s| {
                s.set_node(500, &NodeId("node-1".into()), None, None, Some(false))
                    .expect("disable");
            },
            "node-1",
        ),
    ];
    for (name, command, node) in cases {
        let (mut s, all) = running();
        let expected = on(&s, node, &all);
        command(&mut s);
        assert_eq!(heartbeat_aborts(&mut s, node), expected, "{name}");
        // Handed out once.
        assert!(
            heartbeat_aborts(&mut s, node).is_empty(),
            "{name}: given twice"
        );
    }
}

#[test]
fn a_driver_may_take_the_orders_at_once() {
    let (mut s, all) = running();
    let expected: Vec<(NodeId, BTreeSet<AllocationId>)> = ["node-0", "node-1"]
        .iter()
        .map(|n| (NodeId((*n).into()), on(&s, n, &all)))
        .collect();
    s.abort_operation(500, &OperationId("op".into()))
        .expect("abort");
    let taken: Vec<(NodeId, BTreeSet<AllocationId>)> = s
        .take_orders()
        .into_iter()
        .map(|(n, o)| (n, o.abort.into_iter().collect()))
        .collect();
    assert_eq!(taken, expected);
    // Taken: the heartbeats carry nothing more.
    assert!(heartbeat_aborts(&mut s, "node-0").is_empty());
    assert!(s.take_orders().is_empty());
}

#[test]
fn a_removed_node_is_owed_nothing() {
    let (mut s, _) = running();
    s.remove_node(500, &NodeId("node-0".into()))
        .expect("remove");
    assert!(!s.take_orders().contains_key(&NodeId("node-0".into())));
}
