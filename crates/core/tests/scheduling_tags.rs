//! Scheduling tag filters: an operation's jobs run only on nodes that match its own
//! `scheduling_tag_filter` and those of all its pools (tag expressions, as `node_tag_filter`);
//! the tree option `enable_scheduling_tags = false` turns them all off.

mod common;

use common::{Driver, StartOp, op, res, scheduler, task};
use fairsched_core::{NodeId, NodeSpec, SchedulerConfig};
use std::collections::BTreeSet;

struct Case {
    name: &'static str,
    /// Options of the tree, and the pools (`a` is a child of `p`).
    tree_config: &'static str,
    pool_p_filter: Option<&'static str>,
    pool_a_filter: Option<&'static str>,
    op_pool: &'static str,
    op_filter: Option<&'static str>,
    /// The nodes that run the operation's jobs.
    expect: &'static [&'static str],
}

/// node-0: gpu; node-1: gpu, old; node-2: cpu; node-3: no tags.
const NODE_TAGS: [&[&str]; 4] = [&["gpu"], &["gpu", "old"], &["cpu"], &[]];

fn check(case: &Case) {
    let filter = |f: Option<&str>| {
        f.map_or(String::new(), |f| {
            format!(r#""scheduling_tag_filter": "{f}","#)
        })
    };
    let tree = format!(
        r#"{{"pool_trees": {{"default": {{"config": {{{}}}, "pools": {{
            "p": {{{} "pools": {{"a": {{{} "weight": 1}}}}}}}}}}}}}}"#,
        case.tree_config,
        filter(case.pool_p_filter),
        filter(case.pool_a_filter)
    );
    let mut s = scheduler(&tree, SchedulerConfig::default());
    for (i, tags) in NODE_TAGS.iter().enumerate() {
        s.add_node(
            0,
            NodeSpec {
                id: NodeId(format!("node-{i}")),
                resources: res(4.0, 4.0),
                tags: tags.iter().map(|t| t.to_string()).collect(),
            },
        )
        .unwrap();
    }
    let mut o = op("o", Some(case.op_pool), vec![task(16, res(1.0, 1.0), None)]);
    o.scheduling_tag_filter = case.op_filter.map(str::to_string);
    s.start_op(0, o).unwrap();
    Driver::new().run(&mut s, 0, 1000, 100);
    let used: BTreeSet<String> = s
        .nodes()
        .filter(|n| !n.allocations.is_empty())
        .map(|n| n.id.0.clone())
        .collect();
    let expect: BTreeSet<String> = case.expect.iter().map(|n| n.to_string()).collect();
    assert_eq!(used, expect, "{}", case.name);
}

#[test]
fn jobs_run_only_where_every_filter_on_their_path_matches() {
    let all: &[&str] = &["node-0", "node-1", "node-2", "node-3"];
    let cases = [
        Case {
            name: "no filter: every node",
            tree_config: "",
            pool_p_filter: None,
            pool_a_filter: None,
            op_pool: "a",
            op_filter: None,
            expect: all,
        },
        Case {
            name: "the operation's tag",
            tree_config: "",
            pool_p_filter: None,
            pool_a_filter: None,
            op_pool: "a",
            op_filter: Some("gpu"),
            expect: &["node-0", "node-1"],
        },
        Case {
            name: "the operation's expression",
            tree_config: "",
            pool_p_filter: None,
            pool_a_filter: None,
            op_pool: "a",
            op_filter: Some("gpu & !old"),
            expect: &["node-0"],
        },
        Case {
            name: "a disjunction",
            tree_config: "",
            pool_p_filter: None,
            pool_a_filter: None,
            op_pool: "a",
            op_filter: Some("old | cpu"),
            expect: &["node-1", "node-2"],
        },
        Case {
            name: "the pool's filter",
            tree_config: "",
            pool_p_filter: Some("gpu"),
            pool_a_filter: None,
            op_pool: "p",
            op_filter: None,
            expect: &["node-0", "node-1"],
        },
        Case {
            name: "a parent pool's filter holds in its subtree",
            tree_config: "",
            pool_p_filter: Some("gpu"),
            pool_a_filter: None,
            op_pool: "a",
            op_filter: None,
            expect: &["node-0", "node-1"],
        },
        Case {
            name: "the pools' and the operation's filters all hold",
            tree_config: "",
            pool_p_filter: Some("gpu | cpu"),
            pool_a_filter: Some("!cpu"),
            op_pool: "a",
            op_filter: Some("old"),
            expect: &["node-1"],
        },
        Case {
            name: "filters that exclude each other leave no node",
            tree_config: "",
            pool_p_filter: Some("cpu"),
            pool_a_filter: None,
            op_pool: "a",
            op_filter: Some("gpu"),
            expect: &[],
        },
        Case {
            name: "enable_scheduling_tags = false ignores every filter",
            tree_config: r#""enable_scheduling_tags": false"#,
            pool_p_filter: Some("cpu"),
            pool_a_filter: None,
            op_pool: "a",
            op_filter: Some("gpu"),
            expect: all,
        },
    ];
    for case in &cases {
        check(case);
    }
}

#[test]
fn an_operation_whose_filter_does_not_parse_is_rejected_naming_the_field() {
    let mut s = scheduler(
        r#"{"pool_trees": {"default": {"pools": {"p": {}}}}}"#,
        SchedulerConfig::default(),
    );
    let mut o = op("o", Some("p"), vec![task(1, res(1.0, 1.0), None)]);
    o.scheduling_tag_filter = Some("gpu & (old".into());
    let e = s.start_op(0, o).unwrap_err();
    assert!(
        e.message().contains("scheduling_tag_filter") && e.message().contains("expected ')'"),
        "{}",
        e.message()
    );
    assert!(
        s.operation(&fairsched_core::OperationId("o".into()))
            .is_none()
    );
}

#[test]
fn why_waiting_names_the_filters_no_node_matches() {
    let mut s = scheduler(
        r#"{"pool_trees": {"default": {"pools": {"p": {"scheduling_tag_filter": "cpu"}}}}}"#,
        SchedulerConfig::default(),
    );
    common::add_nodes(&mut s, 2, res(4.0, 4.0));
    let mut o = op("o", Some("p"), vec![task(1, res(1.0, 1.0), None)]);
    o.scheduling_tag_filter = Some("gpu".into());
    s.start_op(0, o).unwrap();
    Driver::new().run(&mut s, 0, 500, 100);
    let op = s
        .operation(&fairsched_core::OperationId("o".into()))
        .unwrap();
    let why = s.why_waiting(op).unwrap_or_default();
    assert!(why.contains(r#""cpu" and "gpu""#), "{why}");
}
