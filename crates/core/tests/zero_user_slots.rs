//! `enable_allocation_abort_on_zero_user_slots` (scheduler spec §1.1, YT-S21): a node without
//! user slots has its allocations aborted at its next heartbeat.

mod common;

use common::*;
use fairsched_core::{NodeHeartbeat, NodeId, SchedulerConfig};

const TREE: &str = r#"{"pool_trees": {"default": {"config": {}, "pools": {}}}}"#;

fn run(config: SchedulerConfig) -> (usize, Vec<fairsched_core::AllocationId>) {
    let mut s = scheduler(TREE, config);
    add_nodes(&mut s, 1, res(2.0, 2.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("op1", None, vec![task(2, res(1.0, 1.0), None)]),
    )
    .expect("op");
    d.run(&mut s, 0, 0, 100);
    let node = NodeId("node-0".to_string());
    assert_eq!(s.node(&node).expect("node").allocations.len(), 2);
    s.set_node(100, &node, Some(res(2.0, 0.0)), None, None)
        .expect("set_node");
    // Changing the resources alone aborts nothing; the heartbeat does.
    assert_eq!(s.node(&node).expect("node").allocations.len(), 2);
    let response = s
        .process_heartbeat(100, &node, NodeHeartbeat::default())
        .expect("heartbeat");
    (
        s.node(&node).expect("node").allocations.len(),
        response.abort,
    )
}

#[test]
fn a_node_without_user_slots_loses_its_allocations_at_its_heartbeat() {
    let (left, aborted) = run(SchedulerConfig::default());
    assert_eq!(left, 0);
    assert_eq!(
        aborted.len(),
        2,
        "the node is told to abort both: {aborted:?}"
    );
}

#[test]
fn the_abort_can_be_turned_off_also_by_its_job_alias() {
    let config: SchedulerConfig =
        serde_json::from_str(r#"{"enable_job_abort_on_zero_user_slots": false}"#)
            .expect("alias parses");
    assert!(!config.enable_allocation_abort_on_zero_user_slots);
    let (left, aborted) = run(config);
    assert_eq!(left, 2);
    assert!(aborted.is_empty(), "{aborted:?}");
}

/// Places jobs that need no user slot (as `fairsched op run` submits them) for a second of
/// heartbeats on two nodes, one of them without user slots; how many allocations were started
/// on that one.
fn starts_on_a_node_without_slots(config: SchedulerConfig) -> usize {
    // No spare bound (as `fairsched up` runs): the default one alone keeps a node without
    // slots from getting jobs.
    const NO_SPARE: &str = r#"{"pool_trees": {"default": {"config":
        {"min_spare_allocation_resources_on_node": {}}, "pools": {}}}}"#;
    let mut s = scheduler(NO_SPARE, config);
    add_nodes(&mut s, 2, res(2.0, 2.0));
    let empty = NodeId("node-1".to_string());
    s.set_node(0, &empty, Some(res(2.0, 0.0)), None, None)
        .expect("set_node");
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("op1", None, vec![task(8, res(1.0, 0.0), None)]),
    )
    .expect("op");
    d.run(&mut s, 0, 1_000, 100);
    d.events
        .iter()
        .filter(|e| {
            matches!(&e.kind, fairsched_core::EventKind::AllocationStarted { node, .. } if *node == empty)
        })
        .count()
}

/// Issue 18: the scheduler never places a job where its own next step would abort it. A node
/// without user slots used to get jobs (those that need no slot) at one heartbeat and have them
/// aborted at the next, about 150 times a second on a real cluster.
#[test]
fn a_node_without_user_slots_gets_no_job_its_next_heartbeat_would_abort() {
    assert_eq!(
        starts_on_a_node_without_slots(SchedulerConfig::default()),
        0
    );
    // With the abort off, nothing would abort them: they run there.
    let config = SchedulerConfig {
        enable_allocation_abort_on_zero_user_slots: false,
        ..SchedulerConfig::default()
    };
    assert_eq!(starts_on_a_node_without_slots(config), 2);
}
