//! A snapshot taken in slices (a driver's way never to stop for a whole one) is the snapshot
//! taken at once when nothing happens in between; when something does, each operation shows
//! as it was at its slice, operations gone by then are left out and new ones wait for the next.

mod common;

use common::*;
use fairsched_core::{NodeHeartbeat, NodeId, Scheduler, SchedulerConfig};

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {
    "research": {"strong_guarantee_resources": {"cpu": 6}},
    "prod": {"mode": "fifo"}
}}}}"#;

/// Five operations in two pools, some running, one pending behind nothing that fits.
fn cluster() -> Scheduler {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 3, res(4.0, 4.0));
    for (id, pool, jobs, cpu) in [
        ("r1", "research", 6, 1.0),
        ("r2", "research", 2, 2.0),
        ("p1", "prod", 4, 1.0),
        ("p2", "prod", 3, 1.0),
        ("big", "prod", 1, 64.0),
    ] {
        s.start_op(0, op(id, Some(pool), vec![task(jobs, res(cpu, 1.0), None)]))
            .expect(id);
    }
    s.update_fair_share(0);
    let nodes: Vec<NodeId> = s.nodes().map(|n| n.id.clone()).collect();
    for node in nodes {
        s.process_heartbeat(10, &node, NodeHeartbeat::default())
            .expect("heartbeat");
    }
    s
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).expect("serializes")
}

#[test]
fn slices_of_any_size_with_nothing_between_give_the_snapshot_at_once() {
    let s = cluster();
    let at_once = json(&s.snapshot(20));
    for count in [0, 1, 2, 4, 5, 100] {
        let mut sliced = s.begin_snapshot(20);
        let mut rounds = 0;
        while !s.continue_snapshot(&mut sliced, count) && rounds < 10 {
            rounds += 1;
        }
        assert_eq!(
            json(&s.finish_snapshot(sliced)),
            at_once,
            "slices of {count}"
        );
    }
}

#[test]
fn an_operation_started_between_slices_waits_for_the_next_snapshot() {
    let mut s = cluster();
    let mut sliced = s.begin_snapshot(20);
    assert!(!s.continue_snapshot(&mut sliced, 2));
    s.start_op(
        30,
        op("late", Some("research"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .expect("late");
    s.update_fair_share(30);
    assert!(s.continue_snapshot(&mut sliced, 100));
    let snapshot = s.finish_snapshot(sliced);
    assert!(!snapshot.operations.contains_key("late"));
    let ids: Vec<&str> = snapshot.operations.keys().map(String::as_str).collect();
    assert_eq!(ids, ["big", "p1", "p2", "r1", "r2"]);
    // The pools are as they are at the finish: the new operation counts in its pool.
    assert_eq!(snapshot.pools["research"].operation_count, 3);
    assert!(s.snapshot(40).operations.contains_key("late"));
}

/// A fair-share update installed between slices numbers the elements anew: the slices after it
/// show the operations as a snapshot taken then would (not another element's usage, and no
/// element out of range).
#[test]
fn slices_after_a_fair_share_update_read_the_new_tree() {
    let mut s = cluster();
    let mut sliced = s.begin_snapshot(20);
    assert!(!s.continue_snapshot(&mut sliced, 1));
    s.abort_operation(30, &fairsched_core::OperationId("r2".into()))
        .expect("abort");
    s.update_fair_share(30);
    assert!(s.continue_snapshot(&mut sliced, 100));
    let snapshot = s.finish_snapshot(sliced);
    let now = s.snapshot(20);
    for id in ["p1", "p2", "big"] {
        assert_eq!(
            json(&snapshot.operations[id]),
            json(&now.operations[id]),
            "{id}"
        );
    }
}
