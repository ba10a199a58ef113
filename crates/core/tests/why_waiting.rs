//! "Why does my job wait?" (issue 5, introspection): the reason names the FIFO operation ahead,
//! the ancestor pool that uses its whole fair share, and a full cluster.

mod common;

use common::{Driver, op, res, scheduler, task};
use fairsched_core::{NodeId, NodeSpec, OperationId, Scheduler, SchedulerConfig};

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {
    "fifo": {"mode": "fifo"}, "a": {}, "b": {}
}}}}"#;

fn cluster(cpu: f64) -> Scheduler {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    s.add_node(
        0,
        NodeSpec {
            id: NodeId("n".into()),
            resources: res(cpu, 100.0),
            tags: Default::default(),
        },
    )
    .expect("node");
    s
}

fn why(s: &Scheduler, id: &str) -> String {
    let op = s.operation(&OperationId(id.into())).expect("operation");
    s.why_waiting(op).unwrap_or_default()
}

/// (case, operations started at 0 ms as (id, pool), operations started at 1000 ms, operation
/// asked about, expected fragments of its reason)
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static [&'static str],
);

const CASES: &[Case] = &[
    (
        "a FIFO pool serves the earlier operation first",
        &[("first", "fifo"), ("second", "fifo")],
        &[],
        "second",
        &["waits behind operation \"first\" in FIFO pool \"fifo\""],
    ),
    (
        "its pool uses its whole fair share",
        &[("op_a", "a"), ("op_b", "b")],
        &[],
        "op_a",
        &[
            "no node has room for a job of",
            "pool \"a\" uses its whole fair share",
        ],
    ),
    (
        "below its fair share in a full cluster",
        &[("op_a", "a")],
        &[("op_b", "b")],
        "op_b",
        &[
            "no node has room for a job of",
            "below its fair share; it becomes starving",
        ],
    ),
];

#[test]
fn reasons_name_what_holds_an_operation_back() {
    for &(name, early, late, asked, fragments) in CASES {
        let mut s = cluster(4.0);
        let mut d = Driver::new();
        for &(id, pool) in early {
            s.start_operation(0, op(id, Some(pool), vec![task(10, res(1.0, 1.0), None)]))
                .expect("operation");
        }
        d.run(&mut s, 0, 900, 100);
        for &(id, pool) in late {
            s.start_operation(
                1000,
                op(id, Some(pool), vec![task(10, res(1.0, 1.0), None)]),
            )
            .expect("operation");
        }
        d.run(&mut s, 1000, 1500, 100);
        let reason = why(&s, asked);
        for f in fragments {
            assert!(reason.contains(f), "{name}: {reason:?} lacks {f:?}");
        }
    }
}
