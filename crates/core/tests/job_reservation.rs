//! Job reservation (`job_reservation`): who reserves, where, what others may use of a reserved
//! node, and every way a reservation ends.

mod common;

use common::*;
use fairsched_core::{NodeId, OperationId, Scheduler, SchedulerConfig};
use fairsched_resources::{PartialResources, ResourceKind};
use serde_json::Value;

const TREE: &str = r#"{"pool_trees": {"default": {
    "config": {"job_reservation": {"enable": true, "timeout_ms": 1000, "max_reservations": 2}},
    "pools": {"small": {}, "big": {}}
}}}"#;

/// Two nodes of 4 cpu kept full by 1-cpu jobs of 5 s (with more pending); `big` arrives at
/// 100 ms with two jobs of 2 cpu and reserves at the first update at or after 1100 ms.
fn setup() -> (Scheduler, Driver) {
    setup_with(2, 2.0)
}

fn setup_with(big_jobs: u32, big_cpu: f64) -> (Scheduler, Driver) {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(4.0, 8.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op(
            "small",
            Some("small"),
            vec![task(40, res(1.0, 1.0), Some(5000))],
        ),
    )
    .unwrap();
    d.run(&mut s, 0, 0, 100);
    d.start(
        &mut s,
        100,
        op(
            "big",
            Some("big"),
            vec![task(big_jobs, res(big_cpu, 1.0), Some(5000))],
        ),
    )
    .unwrap();
    d.run(&mut s, 100, 1200, 100);
    (s, d)
}

fn events(d: &Driver, kind: &str) -> Vec<Value> {
    d.events
        .iter()
        .map(|e| serde_json::to_value(e).expect("event"))
        .filter(|v| v["event"] == kind)
        .collect()
}

#[test]
fn a_big_job_reserves_the_node_that_lacks_least_and_only_it() {
    let (s, d) = setup();
    let reserved = events(&d, "job_reserved");
    assert_eq!(reserved.len(), 1, "{reserved:?}");
    assert_eq!(reserved[0]["operation"], "big");
    assert_eq!(reserved[0]["t_ms"], 1200);
    // Both nodes lack 2 cpu: the first by id.
    assert_eq!(reserved[0]["node"], "node-0");
    assert_eq!(reserved[0]["resources"]["cpu"], 2.0);
    assert_eq!(
        s.reserved_node_of(&OperationId("big".into())),
        Some(&NodeId("node-0".into()))
    );
    let snap = s.snapshot(1200);
    assert_eq!(
        snap.operations["big"].reserved_node.as_deref(),
        Some("node-0")
    );
    assert!(snap.operations["small"].reserved_node.is_none());
}

/// What happens at 1300 ms.
type End = fn(&mut Scheduler);

#[test]
fn every_way_a_reservation_ends() {
    // (what, change, reason, the node big holds afterwards: a lost node is replaced by the
    // other one at the next update, as big still waits)
    let cases: Vec<(&str, End, &str, Option<&str>)> = vec![
        (
            "the operation is aborted",
            |s| s.abort_operation(1300, &OperationId("big".into())).unwrap(),
            "operation_finished",
            None,
        ),
        (
            "the node is removed",
            |s| s.remove_node(1300, &NodeId("node-0".into())).unwrap(),
            "node_unavailable",
            Some("node-1"),
        ),
        (
            "the node drains",
            |s| {
                s.set_node_draining(1300, &NodeId("node-0".into()), true)
                    .unwrap()
            },
            "node_unavailable",
            Some("node-1"),
        ),
        (
            "the tree turns reservation off",
            |s| {
                let mut options = s.tree_config().config.clone();
                options.job_reservation.enable = false;
                s.set_tree_options(1300, options).unwrap();
            },
            "disabled",
            None,
        ),
        (
            "the operation's limits leave it no fair share",
            |s| {
                s.update_operation(
                    1300,
                    &OperationId("big".into()),
                    None,
                    Some(PartialResources::EMPTY.with(ResourceKind::Cpu, 0.0)),
                    None,
                )
                .unwrap()
            },
            "fair_share_reached",
            None,
        ),
    ];
    for (what, change, reason, afterwards) in cases {
        let (mut s, mut d) = setup();
        change(&mut s);
        d.run(&mut s, 1300, 1600, 100);
        let released = events(&d, "reservation_released");
        assert_eq!(released.len(), 1, "{what}: {released:?}");
        assert_eq!(released[0]["operation"], "big", "{what}");
        assert_eq!(released[0]["node"], "node-0", "{what}");
        assert_eq!(released[0]["reason"], reason, "{what}");
        let held: Vec<&str> = s.reservations().map(|(n, _)| n.0.as_str()).collect();
        assert_eq!(held, afterwards.into_iter().collect::<Vec<_>>(), "{what}");
    }
}

#[test]
fn the_reserved_node_fills_only_with_the_big_job_which_then_releases_it() {
    let (mut s, mut d) = setup();
    d.run(&mut s, 1300, 7000, 100);
    let started: Vec<Value> = events(&d, "allocation_started");
    // While node-0 holds 2 cpu for big, small starts nothing there after the reservation.
    let big_first = started
        .iter()
        .find(|e| e["operation"] == "big")
        .expect("big starts")
        .clone();
    assert_eq!(big_first["node"], "node-0");
    let at = big_first["t_ms"].as_u64().unwrap();
    // node-0's small jobs started at 0 ms end at 5000 ms; big starts at that heartbeat.
    assert_eq!(at, 5000);
    let sneaked: Vec<&Value> = started
        .iter()
        .filter(|e| e["node"] == "node-0" && e["operation"] == "small")
        .filter(|e| (1200..at).contains(&e["t_ms"].as_u64().unwrap()))
        .collect();
    assert!(sneaked.is_empty(), "{sneaked:?}");
    let released = events(&d, "reservation_released");
    assert_eq!(released[0]["reason"], "job_started");
    assert_eq!(released[0]["t_ms"].as_u64(), Some(at));
}

/// Once a job took its reservation, the operation's next big job (still blocked: the 1 cpu
/// left on node-0 is too small) reserves at the next update, without a new `timeout_ms`
/// wait; a job started elsewhere would not have kept the streak.
#[test]
fn a_job_that_took_its_reservation_lets_the_next_one_reserve_at_once() {
    let (mut s, mut d) = setup_with(3, 3.0);
    d.run(&mut s, 1300, 5400, 100);
    let reserved = events(&d, "job_reserved");
    let at: Vec<(u64, &str)> = reserved
        .iter()
        .map(|e| (e["t_ms"].as_u64().unwrap(), e["node"].as_str().unwrap()))
        .collect();
    // node-0 at 1200; big's first job starts there at 5000; the next reservation comes at the
    // update of 5200, not at 6000 (5000 + the timeout), again on node-0, which now lacks
    // 2 cpu (its 1 free) where node-1, full of small jobs, lacks 3.
    assert_eq!(at, vec![(1200, "node-0"), (5200, "node-0")], "{reserved:?}");
    let started: Vec<Value> = events(&d, "allocation_started")
        .into_iter()
        .filter(|e| e["operation"] == "big")
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["t_ms"], 5000);
}
