//! Draining a node: nothing new starts there, what runs there finishes, and the node takes
//! jobs again once draining ends.

mod common;

use common::{Driver, add_nodes, op, res, scheduler, task};
use fairsched_core::{NodeId, SchedulerConfig};

#[test]
fn a_draining_node_finishes_its_jobs_and_starts_none() {
    let mut s = scheduler(
        r#"{"pool_trees": {"default": {"pools": {"p": {}}}}}"#,
        SchedulerConfig::default(),
    );
    add_nodes(&mut s, 2, res(2.0, 2.0));
    // 8 jobs of 1 s on 2 nodes with 2 slots each: 4 run at a time.
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("a", Some("p"), vec![task(8, res(1.0, 1.0), Some(1000))]),
    )
    .expect("operation");
    d.run(&mut s, 0, 0, 100);
    let node0 = NodeId("node-0".into());
    assert_eq!(s.node(&node0).expect("node").allocations.len(), 2);

    s.set_node_draining(0, &node0, true).expect("drain");
    d.run(&mut s, 100, 3900, 100);
    let started_on_0 = |d: &Driver| {
        d.events
            .iter()
            .filter(|e| {
                let v = serde_json::to_value(e).expect("event");
                v["event"] == "allocation_started" && v["node"] == "node-0"
            })
            .count()
    };
    // Its two jobs finished; nothing new started there; node-1 ran the rest.
    assert_eq!(started_on_0(&d), 2, "only the jobs started before draining");
    assert!(s.node(&node0).expect("node").allocations.is_empty());
    assert_eq!(d.count("allocation_finished", "a"), 8);

    // Draining ends: the node takes jobs again.
    d.start(
        &mut s,
        4000,
        op("b", Some("p"), vec![task(4, res(1.0, 1.0), None)]),
    )
    .expect("operation");
    s.set_node_draining(4000, &node0, false).expect("undrain");
    d.run(&mut s, 4000, 4200, 100);
    assert_eq!(s.node(&node0).expect("node").allocations.len(), 2);
    assert!(
        s.set_node_draining(0, &NodeId("nope".into()), true)
            .is_err()
    );
}
