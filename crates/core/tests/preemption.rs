//! Starvation and preemption through the core (scheduler spec §2; YTsaurus scenario YT-S1).

mod common;

use common::*;
use fairsched_core::{OperationId, OperationState, SchedulerConfig};

const TREE: &str = r#"{"pool_trees": {"default": {
    "config": {
        "preemption_satisfaction_threshold": 0.99,
        "fair_share_starvation_tolerance": 0.8,
        "fair_share_starvation_timeout_ms": 1000,
        "max_unpreemptible_running_allocation_count": 0,
        "preemptive_scheduling_backoff_ms": 0,
        "max_ephemeral_pools_per_user": 2
    },
    "pools": {"test_pool": {"strong_guarantee_resources": {"cpu": 3}}}
}}}"#;

fn config() -> SchedulerConfig {
    SchedulerConfig {
        fair_share_update_period_ms: 100,
        ..SchedulerConfig::default()
    }
}

/// A guaranteed pool reclaims a cluster that an ephemeral pool fills, by preempting once it has
/// starved for the timeout; every preemption names its preemptor.
#[test]
fn guaranteed_pool_reclaims_the_cluster_by_preemption() {
    let mut s = scheduler(TREE, config());
    add_nodes(&mut s, 3, res(1.0, 2.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("op1", Some("fake_pool"), vec![task(3, res(1.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 0, 1900, 100);
    assert_eq!(d.count("allocation_started", "op1"), 3);
    let snap = s.snapshot(1900);
    assert!(snap.pools["fake_pool"].element.fair_share_ratio >= 0.999);
    assert!(snap.pools["fake_pool"].element.usage_ratio >= 0.999);

    d.start(
        &mut s,
        2000,
        op(
            "op2",
            Some("test_pool"),
            vec![task(3, res(1.0, 1.0), Some(500))],
        ),
    )
    .unwrap();
    d.run(&mut s, 2000, 2900, 100);
    // Not before the starvation timeout (1 s after op2 is first seen below its fair share).
    assert_eq!(d.count("allocation_preempted", "op1"), 0);
    d.run(&mut s, 3000, 8000, 100);
    let op2 = s.operation(&OperationId("op2".into())).unwrap();
    assert_eq!(op2.state, OperationState::Completed);
    assert!(d.count("allocation_preempted", "op1") >= 1);
    for e in &d.events {
        let v = serde_json::to_value(e).unwrap();
        if v["event"] == "allocation_preempted" {
            assert_eq!(v["reason"], "preemption", "{v}");
            assert_eq!(v["preemptor"]["operation"], "op2", "{v}");
            assert!(v["t_ms"].as_u64().unwrap() >= 3000, "{v}");
        }
    }
    // op1 gets its jobs back once op2 is done.
    assert_eq!(
        s.operation(&OperationId("op1".into()))
            .unwrap()
            .running_job_count(),
        3
    );
}

/// Without starvation nothing is preempted: a pool above its fair share keeps its jobs while
/// a newcomer without guarantee waits for free resources.
#[test]
fn nothing_is_preempted_without_starvation() {
    let tree = r#"{"pool_trees": {"default": {"config": {"fair_share_starvation_timeout_ms": 100000, "preemptive_scheduling_backoff_ms": 0}, "pools": {"a": {}, "b": {}}}}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 2, res(2.0, 4.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("big", Some("a"), vec![task(4, res(1.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 0, 500, 100);
    d.start(
        &mut s,
        600,
        op("new", Some("b"), vec![task(2, res(1.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 600, 5000, 100);
    assert_eq!(d.count("allocation_preempted", "big"), 0);
    assert_eq!(d.count("allocation_started", "new"), 0);
}

/// The operation spec's `max_unpreemptible_allocation_count` (YTsaurus
/// `max_unpreemptible_job_count`) caps the `user_slots` of the effective non-preemptible
/// threshold: the smaller of the operation's and the tree's applies (YTsaurus
/// `TestNonPreemptibleResourceUsageThreshold::test_operation_max_unpreemptible_running_job_count`).
#[test]
fn operation_max_unpreemptible_allocation_count_caps_the_threshold() {
    let tree = |threshold: &str| {
        format!(
            r#"{{"pool_trees": {{"default": {{"config": {{
                "aggressive_preemption_satisfaction_threshold": 0.4,
                "preemption_satisfaction_threshold": 0.9,
                "fair_share_starvation_tolerance": 1.0,
                "non_preemptible_resource_usage_threshold": {threshold}
            }}, "pools": {{}}}}}}}}"#
        )
    };
    // (preemptible, aggressively preemptible) of 10 running allocations of a 15-job operation
    // filling a 10-cpu node (fair share 1, demand 1.5).
    let counts = |threshold: &str, own: Option<u32>| {
        let mut s = scheduler(&tree(threshold), config());
        add_nodes(&mut s, 1, res(10.0, 10.0));
        let mut spec = op("op", None, vec![task(15, res(1.0, 1.0), None)]);
        spec.max_unpreemptible_allocation_count = own;
        s.start_op(0, spec).unwrap();
        Driver::new().run(&mut s, 0, 500, 100);
        let snap = s.snapshot(500);
        let op = &snap.operations["op"];
        assert_eq!(op.running_job_count, 10);
        (
            op.preemptible_allocation_count,
            op.aggressively_preemptible_allocation_count,
        )
    };
    assert_eq!(counts("{}", None), (1, 5));
    // The operation's 7 alone: 7 protected.
    assert_eq!(counts("{}", Some(7)), (1, 2));
    // min(tree 1, operation 7) = 1: no more than the prefix rule protects.
    assert_eq!(counts(r#"{"user_slots": 1}"#, Some(7)), (1, 5));
    // min(tree 10, operation 7) = 7.
    assert_eq!(counts(r#"{"user_slots": 10}"#, Some(7)), (1, 2));
    // The tree's 10 alone protects everything.
    assert_eq!(counts(r#"{"user_slots": 10}"#, None), (0, 0));
    // The alias of the YTsaurus spec is accepted.
    let spec: fairsched_core::OperationSpec = serde_json::from_value(serde_json::json!({
        "id": "op", "tasks": [], "max_unpreemptible_job_count": 3,
    }))
    .unwrap();
    assert_eq!(spec.max_unpreemptible_allocation_count, Some(3));
}
