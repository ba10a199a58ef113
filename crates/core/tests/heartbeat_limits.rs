//! Tree options that bound one heartbeat's regular stage: `min_spare_allocation_resources_on_node`
//! (keep scheduling only while the node has that much free) and
//! `max_started_allocations_per_heartbeat`.

mod common;

use common::{StartOp, op, res, scheduler, task};
use fairsched_core::{NodeHeartbeat, NodeId, NodeSpec, SchedulerConfig};

/// (case, tree config options, jobs started by the first heartbeat of a 4-cpu node with 8
/// pending jobs of 0.5 cpu)
const CASES: &[(&str, &str, usize)] = &[
    // Default: no spare bound; the node takes jobs while one fits (issue 18: YTsaurus'
    // default stranded part of every small node).
    ("default spare", "{}", 8),
    // YTsaurus' default: 1 slot, 1 cpu, 256 MiB (the node has no memory, so memory is not
    // asked for): the 7th job leaves 0.5 cpu, less than 1, and the heartbeat stops.
    (
        "YTsaurus' spare",
        r#"{"min_spare_allocation_resources_on_node": {"user_slots": 1, "cpu": 1, "memory": "256MiB"}}"#,
        7,
    ),
    (
        "spare of 2 cpu",
        r#"{"min_spare_allocation_resources_on_node": {"cpu": 2}}"#,
        5,
    ),
    (
        "at most 3 per heartbeat",
        r#"{"max_started_allocations_per_heartbeat": 3}"#,
        3,
    ),
];

#[test]
fn a_heartbeat_stops_at_the_spare_resources_and_the_start_limit() {
    for &(name, config, expected) in CASES {
        let tree = format!(
            r#"{{"pool_trees": {{"default": {{"config": {config}, "pools": {{"p": {{}}}}}}}}}}"#
        );
        let mut s = scheduler(&tree, SchedulerConfig::default());
        s.add_node(
            0,
            NodeSpec {
                id: NodeId("n".into()),
                resources: res(4.0, 100.0),
                tags: Default::default(),
            },
        )
        .expect("node");
        s.start_op(0, op("a", Some("p"), vec![task(8, res(0.5, 1.0), None)]))
            .expect("operation");
        s.tick(0);
        let response = s
            .process_heartbeat(0, &NodeId("n".into()), NodeHeartbeat::default())
            .expect("heartbeat");
        assert_eq!(response.start.len(), expected, "{name}");
    }
}
