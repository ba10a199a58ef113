//! A fair-share update taken apart (prepare, compute, apply) so that a driver can compute it on
//! another thread: what happens between prepare and apply is reconciled as if it had happened
//! just after an update done at once, and an update prepared before the trees' configuration
//! changed is not installed.

// The thread only shows that a prepared update can be computed elsewhere.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use fairsched_config::PoolConfig;
use fairsched_core::{
    FairShareUpdate, NodeHeartbeat, NodeId, OperationId, Scheduler, SchedulerConfig,
};
use fairsched_resources::{PartialResources, ResourceKind};

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {
    "research": {"strong_guarantee_resources": {"cpu": 6}},
    "prod": {}
}}}}"#;

/// A cluster of 4 nodes (4 cpu each) with two operations running, after one update and one
/// round of heartbeats.
fn cluster() -> Scheduler {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 4, res(4.0, 4.0));
    s.start_op(
        0,
        op("r1", Some("research"), vec![task(10, res(1.0, 1.0), None)]),
    )
    .expect("r1");
    s.start_op(
        0,
        op("p1", Some("prod"), vec![task(10, res(1.0, 1.0), None)]),
    )
    .expect("p1");
    s.update_fair_share(0);
    heartbeat_all(&mut s, 10);
    s
}

fn heartbeat_all(s: &mut Scheduler, now: u64) {
    let nodes: Vec<NodeId> = s.nodes().map(|n| n.id.clone()).collect();
    for node in nodes {
        s.process_heartbeat(now, &node, NodeHeartbeat::default())
            .expect("heartbeat");
    }
}

/// Everything an observer sees: the snapshot, the events, the pending orders.
fn seen(s: &mut Scheduler, now: u64) -> String {
    let snapshot = serde_json::to_string(&s.snapshot(now)).expect("snapshot serializes");
    let events = serde_json::to_string(&s.take_events()).expect("events serialize");
    format!("{snapshot}\n{events}\n{:?}", s.take_orders())
}

type Between = fn(&mut Scheduler);

#[test]
fn what_happens_between_prepare_and_apply_is_as_if_just_after() {
    let cases: Vec<(&str, Between)> = vec![
        ("nothing", |_| {}),
        ("an operation starts", |s| {
            s.start_op(
                1_500,
                op("r2", Some("research"), vec![task(4, res(1.0, 1.0), None)]),
            )
            .expect("r2");
        }),
        ("an operation is aborted", |s| {
            s.abort_operation(1_500, &OperationId("p1".into()))
                .expect("abort");
        }),
        ("nodes heartbeat (the shares do not change here)", |s| {
            heartbeat_all(s, 1_500)
        }),
        ("a node joins", |s| {
            s.add_node(
                1_500,
                fairsched_core::NodeSpec {
                    id: NodeId("late".into()),
                    resources: res(8.0, 8.0),
                    tags: Default::default(),
                },
            )
            .expect("node");
        }),
    ];
    for (what, between) in cases {
        // At once: update, then what happens.
        let mut at_once = cluster();
        at_once.update_fair_share(1_000);
        between(&mut at_once);
        // Taken apart: what happens falls between prepare and apply.
        let mut apart = cluster();
        let mut update = apart.prepare_fair_share_update(1_000);
        between(&mut apart);
        update.compute();
        assert!(
            apart.apply_fair_share_update(&mut update),
            "{what}: installed"
        );
        assert_eq!(seen(&mut apart, 2_000), seen(&mut at_once, 2_000), "{what}");
        // And the next update agrees too.
        at_once.update_fair_share(3_000);
        apart.update_fair_share(3_000);
        assert_eq!(
            seen(&mut apart, 3_000),
            seen(&mut at_once, 3_000),
            "{what}: next update"
        );
    }
}

#[test]
fn an_update_prepared_before_a_configuration_change_is_not_installed() {
    let mut s = cluster();
    let before = serde_json::to_string(&s.snapshot(1_000)).expect("snapshot");
    let clocks = s.tree().below_fair_share_since.clone();
    let mut update = s.prepare_fair_share_update(1_000);
    s.set_pool(
        1_100,
        "prod",
        PoolConfig {
            strong_guarantee_resources: PartialResources::EMPTY.with(ResourceKind::Cpu, 8.0),
            ..PoolConfig::default()
        },
    )
    .expect("pool change");
    update.compute();
    assert!(
        !s.apply_fair_share_update(&mut update),
        "stale update refused"
    );
    let after = serde_json::to_string(&s.snapshot(1_000)).expect("snapshot");
    assert_eq!(before, after, "the previous shares stay");
    // So do the starvation clocks (the computation advanced its own copy of them).
    assert_eq!(s.tree().below_fair_share_since, clocks, "starvation clocks");
    // The next update installs the new configuration (and its working memory came back).
    let mut next = s.prepare_fair_share_update(1_200);
    next.compute();
    assert!(s.apply_fair_share_update(&mut next));
    assert_ne!(
        s.tree().below_fair_share_since,
        clocks,
        "an installed update advances the clocks"
    );
    let snapshot = serde_json::to_value(s.snapshot(1_200)).expect("snapshot");
    let cpu = &snapshot["pools"]["prod"]["effective_strong_guarantee_resources"]["cpu"];
    assert_eq!(
        cpu.as_f64(),
        Some(8.0),
        "new guarantee in force: {snapshot}"
    );
}

#[test]
fn a_prepared_update_can_be_computed_on_another_thread() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<FairShareUpdate>();
    let mut s = cluster();
    let mut at_once = cluster();
    let update = s.prepare_fair_share_update(1_000);
    let mut computed = std::thread::spawn(move || {
        let mut update = update;
        update.compute();
        update
    })
    .join()
    .expect("thread");
    assert!(s.apply_fair_share_update(&mut computed));
    at_once.update_fair_share(1_000);
    assert_eq!(seen(&mut s, 1_000), seen(&mut at_once, 1_000));
}

/// Prepared in slices with nothing in between, an update is the one prepared at once; an
/// operation started between slices waits for the next update, one finished between them is
/// left out, and both updates afterwards agree with a scheduler that saw the same changes
/// without slices.
#[test]
fn an_update_prepared_in_slices_is_the_one_prepared_at_once() {
    for count in [0, 1, 2, 100] {
        let mut at_once = cluster();
        let mut sliced = cluster();
        at_once.update_fair_share(1_000);
        let mut preparing = sliced.begin_fair_share_update(1_000);
        let mut rounds = 0;
        while !sliced.continue_fair_share_update(&mut preparing, count) && rounds < 5 {
            rounds += 1;
        }
        let mut update = sliced.finish_fair_share_update(preparing);
        update.compute();
        assert!(sliced.apply_fair_share_update(&mut update));
        assert_eq!(
            seen(&mut sliced, 1_000),
            seen(&mut at_once, 1_000),
            "slices of {count}"
        );
    }

    // Changes between slices: "late" starts after the first slice, "p1" is aborted.
    let mut sliced = cluster();
    let mut reference = cluster();
    let mut preparing = sliced.begin_fair_share_update(1_000);
    assert!(!sliced.continue_fair_share_update(&mut preparing, 1));
    let late = || op("late", Some("prod"), vec![task(2, res(1.0, 1.0), None)]);
    sliced.start_op(1_000, late()).expect("late");
    sliced
        .abort_operation(1_000, &OperationId("p1".into()))
        .expect("abort");
    let mut update = sliced.finish_fair_share_update(preparing);
    update.compute();
    assert!(sliced.apply_fair_share_update(&mut update));
    let snapshot = sliced.snapshot(1_000);
    assert!(
        snapshot.operations["late"].element.is_none(),
        "not in this update"
    );
    assert!(
        snapshot.operations["p1"].element.is_none(),
        "left out of it"
    );
    // The same changes just after an update done at once.
    reference.update_fair_share(1_000);
    reference.start_op(1_000, late()).expect("late");
    reference
        .abort_operation(1_000, &OperationId("p1".into()))
        .expect("abort");
    reference.take_events();
    sliced.take_events();
    sliced.update_fair_share(2_000);
    reference.update_fair_share(2_000);
    assert_eq!(seen(&mut sliced, 2_000), seen(&mut reference, 2_000));
    assert!(sliced.snapshot(2_000).operations["late"].element.is_some());
}
