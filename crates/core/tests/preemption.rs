//! Starvation and preemption through the core (scheduler spec §2; YTsaurus scenario YT-S1).

mod common;

use common::*;
use fairsched_core::{NodeId, OperationId, OperationState, SchedulerConfig};

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

/// What a driver that updates only when something happens (the trace replay) asks: when the
/// next update would find something starving by the clock alone, whether preemption is
/// wanted, and on which nodes it may find victims. `big` fills both nodes; `new` arrives in
/// pool `b` at 600 ms, below its fair share from the update at 700 ms, starving after the 1 s
/// timeout (the first update after 1,700 ms finds it so).
#[test]
fn the_core_says_when_starvation_begins_and_where_victims_run() {
    let tree = r#"{"pool_trees": {"default": {"config": {"fair_share_starvation_timeout_ms": 1000, "preemptive_scheduling_backoff_ms": 0}, "pools": {"a": {}, "b": {}}}}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 2, res(2.0, 4.0));
    s.start_op(0, op("big", Some("a"), vec![task(4, res(1.0, 1.0), None)]))
        .unwrap();
    s.update_fair_share(0);
    for n in 0..2 {
        s.process_heartbeat(10, &NodeId(format!("node-{n}")), Default::default())
            .unwrap();
    }
    s.update_fair_share(100);
    assert_eq!(
        s.next_status_change(),
        None,
        "nothing is below its fair share"
    );
    assert!(!s.preemption_wanted());
    s.start_op(
        600,
        op("new", Some("b"), vec![task(2, res(1.0, 1.0), None)]),
    )
    .unwrap();
    s.update_fair_share(700);
    assert_eq!(s.next_status_change(), Some(1701));
    assert!(
        !s.preemption_wanted(),
        "below its fair share, not starving yet"
    );
    s.update_fair_share(1700);
    assert!(
        !s.preemption_wanted(),
        "the timeout is not over at 1,700 ms"
    );
    s.update_fair_share(1701);
    assert!(s.preemption_wanted());
    assert_eq!(
        s.next_status_change(),
        None,
        "no aggressive starvation here"
    );
    // `big` holds 4 cpu, its fair share is 2: two of its allocations may be taken, on
    // either node.
    let nodes: Vec<String> = (s.nodes_with_preemptible_allocations().into_iter())
        .map(|n| n.0)
        .collect();
    assert_eq!(nodes, ["node-0", "node-1"]);
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

/// The preemptive stage takes only allocations that ran on the node when its heartbeat arrived
/// (YTsaurus: `AnalyzePreemptibleAllocations` collects the heartbeat context's
/// `RunningAllocations()`; what the stages start goes to `StartedAllocations()`): an operation
/// whose pool still starves as of the last fair-share update does not preempt the allocations
/// it has just been given in the same heartbeat (its own, preemptible against that stale fair
/// share) to start another of its own.
#[test]
fn allocations_started_in_the_heartbeat_are_not_preempted_by_it() {
    // Pool `a` starves after 1 s below its fair share; its operation never does (its own
    // timeout), so it preempts only through its pool. The hog in `b` is protected whole.
    let tree = r#"{"pool_trees": {"default": {
        "config": {
            "fair_share_starvation_timeout_ms": 1000,
            "preemptive_scheduling_backoff_ms": 0
        },
        "pools": {
            "a": {},
            "b": {"non_preemptible_resource_usage_threshold": {"user_slots": 100}}
        }
    }}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 1, res(4.0, 4.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("hog", Some("b"), vec![task(4, res(1.0, 1.0), Some(1500))]),
    )
    .unwrap();
    d.run(&mut s, 0, 0, 100);
    assert_eq!(d.count("allocation_started", "hog"), 4);
    let mut wide = op("wide", Some("a"), vec![task(8, res(1.0, 1.0), None)]);
    wide.fair_share_starvation_timeout_ms = Some(1_000_000);
    d.start(&mut s, 100, wide).unwrap();
    // At 1500 the hog's jobs end: the update before that heartbeat still sees pool `a`
    // starving (fair share 0.5 each), the heartbeat gives `wide` the whole node, and its 3rd
    // and 4th allocations are preemptible against its fair share of 0.5.
    d.run(&mut s, 100, 1400, 100);
    assert_eq!(d.count("allocation_preempted", "hog"), 0);
    let snap = s.snapshot(1400);
    assert_ne!(snap.pools["a"].element.starvation_status, "non_starving");
    d.run(&mut s, 1500, 3000, 100);
    let preempted: Vec<serde_json::Value> = d
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|v| v["event"] == "allocation_preempted")
        .collect();
    assert!(preempted.is_empty(), "{preempted:#?}");
    assert_eq!(d.count("allocation_started", "wide"), 4);
}

/// The same for another operation's allocation: a starving operation does not preempt what
/// the regular stage of the same heartbeat has just started for another operation; the
/// victims of a preemption ran on the node before its heartbeat.
#[test]
fn another_operations_allocation_started_in_the_heartbeat_is_not_preempted_by_it() {
    // The first two allocations of `b`'s operation are protected by their pool's threshold;
    // the next ones are preemptible (above its fair share of 0.5).
    let tree = r#"{"pool_trees": {"default": {
        "config": {
            "fair_share_starvation_timeout_ms": 1000,
            "preemptive_scheduling_backoff_ms": 0
        },
        "pools": {
            "a": {},
            "b": {"non_preemptible_resource_usage_threshold": {"user_slots": 2}}
        }
    }}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 1, res(4.0, 4.0));
    let mut d = Driver::new();
    // Three long jobs and short ones of 1.2 s: the 4th allocation ends at 1200 and the
    // regular stage of that heartbeat starts the next short one in its place.
    d.start(
        &mut s,
        0,
        op(
            "small",
            Some("b"),
            vec![
                task(3, res(1.0, 1.0), None),
                task(5, res(1.0, 1.0), Some(1200)),
            ],
        ),
    )
    .unwrap();
    d.run(&mut s, 0, 0, 100);
    // Jobs of 2 cpu: none fits the 1 cpu freed at 1200, when it first starves (1 s after the
    // update at 100 saw it below its fair share).
    d.start(
        &mut s,
        100,
        op("large", Some("a"), vec![task(2, res(2.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 100, 2000, 100);
    let started: std::collections::BTreeMap<u64, u64> = d
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|v| v["event"] == "allocation_started")
        .map(|v| {
            (
                v["allocation"].as_u64().unwrap(),
                v["t_ms"].as_u64().unwrap(),
            )
        })
        .collect();
    let preempted: Vec<serde_json::Value> = d
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|v| v["event"] == "allocation_preempted")
        .collect();
    // `large` does start by preemption, from allocations that ran before its heartbeat.
    assert!(!preempted.is_empty());
    for v in &preempted {
        assert_eq!(v["preemptor"]["operation"], "large", "{v}");
        let victim_start = started[&v["allocation"].as_u64().unwrap()];
        assert!(victim_start < v["t_ms"].as_u64().unwrap(), "{v}");
    }
}
