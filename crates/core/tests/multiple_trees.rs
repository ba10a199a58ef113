//! Several pool trees (issue: multiple trees): operation-count limits hold in every tree an
//! operation runs in, and node assignment never lets two trees share a node.

mod common;

use common::{Driver, StartOp, TestOp, op, res, scheduler, task};
use fairsched_core::{
    NodeId, NodeSpec, OperationId, OperationState, OperationUpdate, SchedulerConfig,
    TreeSchedulingOptions,
};

const TREES: &str = r#"{"default_tree": "physical", "pool_trees": {
    "physical": {"config": {"node_tag_filter": "physical"}, "pools": {"prod": {}}},
    "gpu": {"config": {"node_tag_filter": "gpu"}, "pools": {
        "shared": {"max_running_operation_count": 1, "max_operation_count": 2}}}
}}"#;

fn node(s: &mut fairsched_core::Scheduler, id: &str, tag: &str) {
    s.add_node(
        0,
        NodeSpec {
            id: NodeId(id.into()),
            resources: res(4.0, 4.0),
            tags: [tag.to_string()].into(),
        },
    )
    .expect("node");
}

fn in_both(id: &str) -> TestOp {
    let mut spec = op(id, Some("prod"), vec![task(2, res(1.0, 1.0), None)]);
    spec.pool_trees = Some(vec!["physical".into(), "gpu".into()]);
    spec.scheduling_options_per_pool_tree = [(
        "gpu".to_string(),
        serde_json::from_value(serde_json::json!({"pool": "shared"})).expect("options"),
    )]
    .into();
    spec
}

#[test]
fn a_full_pool_in_one_tree_holds_an_operation_of_both_trees_pending() {
    let mut s = scheduler(TREES, SchedulerConfig::default());
    node(&mut s, "p", "physical");
    node(&mut s, "g", "gpu");
    let mut d = Driver::new();
    d.start(&mut s, 0, in_both("a")).expect("a");
    d.start(&mut s, 0, in_both("b")).expect("b");
    let state = |s: &fairsched_core::Scheduler, id: &str| {
        s.operation(&OperationId(id.into())).expect("op").state
    };
    assert_eq!(state(&s, "a"), OperationState::Running);
    // gpu/shared runs one operation at a time; physical/prod would take b.
    assert_eq!(state(&s, "b"), OperationState::Pending);
    let reason = s
        .operation(&OperationId("b".into()))
        .and_then(|o| o.pending_reason.clone())
        .expect("reason");
    assert!(
        reason.contains("pool \"shared\" in tree \"gpu\""),
        "{reason}"
    );
    // The third one exceeds gpu/shared's max_operation_count: 202, nothing created.
    let e = d.start(&mut s, 0, in_both("c")).expect_err("c is rejected");
    assert_eq!(e.code(), Some(202), "{e}");
    assert!(e.message().contains("\"shared\" in tree \"gpu\""), "{e}");
    assert!(s.operation(&OperationId("c".into())).is_none());
    assert_eq!(s.pool_counts()["prod"].operation_count, 2);

    d.run(&mut s, 0, 200, 100);
    // a runs in both trees: one job on each node's tree.
    assert_eq!(d.count("allocation_started", "a"), 2);
    s.abort_operation(300, &OperationId("a".into()))
        .expect("abort");
    assert_eq!(state(&s, "b"), OperationState::Running);
}

#[test]
fn no_node_is_in_two_trees() {
    let mut s = scheduler(TREES, SchedulerConfig::default());
    node(&mut s, "p", "physical");
    // A node both filters match is rejected.
    let e = s
        .add_node(
            0,
            NodeSpec {
                id: NodeId("both".into()),
                resources: res(4.0, 4.0),
                tags: ["physical".to_string(), "gpu".to_string()].into(),
            },
        )
        .expect_err("rejected");
    assert!(e.message().contains("trees must not share nodes"), "{e}");
    assert!(s.node(&NodeId("both".into())).is_none());
    // So is a tag change that would make one.
    let p = NodeId("p".into());
    let e = s
        .set_node(
            0,
            &p,
            None,
            Some(["physical".to_string(), "gpu".to_string()].into()),
            None,
        )
        .expect_err("rejected");
    assert!(e.message().contains("\"gpu\" and \"physical\""), "{e}");
    assert_eq!(s.node(&p).expect("node").tree, s.tree_index("physical"));
    // A tag change moves the node to the other tree.
    s.set_node(0, &p, None, Some(["gpu".to_string()].into()), None)
        .expect("retag");
    assert_eq!(s.node(&p).expect("node").tree, s.tree_index("gpu"));
}

#[test]
fn a_configuration_that_makes_trees_share_a_node_is_rejected_whole() {
    let mut s = scheduler(TREES, SchedulerConfig::default());
    node(&mut s, "p", "physical");
    let overlapping = TREES.replace(
        r#""node_tag_filter": "gpu""#,
        r#""node_tag_filter": "gpu | physical""#,
    );
    let trees = fairsched_config::load_pool_trees_str(&overlapping, fairsched_config::Format::Json)
        .expect("loads");
    let trees = fairsched_config::validate_pool_trees(&trees).expect("valid on its own");
    let e = s.replace_tree_config(0, trees).expect_err("rejected");
    assert!(e.message().contains("node \"p\""), "{e}");
    // Nothing changed.
    let gpu = s.tree_index("gpu").expect("gpu");
    assert_eq!(
        s.trees()[gpu].validated.config().node_tag_filter.as_deref(),
        Some("gpu")
    );
    assert_eq!(
        s.node(&NodeId("p".into())).expect("node").tree,
        s.tree_index("physical")
    );
}

const MOVES: &str = r#"{"default_tree": "physical", "pool_trees": {
    "physical": {"config": {"node_tag_filter": "physical"}, "pools": {
        "prod": {"max_operation_count": 1, "pools": {"prod-child": {}}}, "dev": {}}},
    "gpu": {"config": {"node_tag_filter": "gpu"}, "pools": {
        "shared": {}, "full": {"max_operation_count": 1}}}
}}"#;

fn per_tree(json: serde_json::Value) -> std::collections::BTreeMap<String, TreeSchedulingOptions> {
    serde_json::from_value(json).expect("per-tree options")
}

/// (pool, weight) of operation `id` in each of its trees, by tree index.
fn places(s: &fairsched_core::Scheduler, id: &str) -> Vec<(String, Option<f64>)> {
    s.operation(&OperationId(id.into()))
        .expect("op")
        .trees
        .iter()
        .map(|o| (o.pool.clone(), o.weight))
        .collect()
}

#[test]
fn an_update_changes_pool_and_weight_per_tree() {
    let mut s = scheduler(MOVES, SchedulerConfig::default());
    s.start_op(0, in_both("a")).expect("a");
    // The default tree first.
    assert_eq!(
        places(&s, "a"),
        [("prod".to_string(), None), ("shared".to_string(), None)]
    );
    // A per-tree pool and weight touch that tree only; the top-level weight the others.
    s.update_operation_with(
        10,
        &OperationId("a".into()),
        OperationUpdate {
            weight: Some(2.0),
            per_tree: per_tree(serde_json::json!({"gpu": {"pool": "gpu-user", "weight": 5.0}})),
            ..OperationUpdate::default()
        },
    )
    .expect("update");
    assert_eq!(
        places(&s, "a"),
        [
            ("prod".to_string(), Some(2.0)),
            ("gpu-user".to_string(), Some(5.0))
        ]
    );
    let gpu = s.trees().iter().position(|t| t.name == "gpu").unwrap();
    let counts = s.pool_counts_in(gpu);
    assert_eq!(counts["gpu-user"].operation_count, 1, "an ephemeral pool");
    assert!(
        counts.get("shared").is_none_or(|c| c.operation_count == 0),
        "{counts:?}"
    );
    // Kept in the spec, so that a restart (which resubmits the spec) puts it back there.
    let spec = &s.operation(&OperationId("a".into())).unwrap().spec;
    assert_eq!(
        spec.scheduling_options_per_pool_tree["gpu"].pool.as_deref(),
        Some("gpu-user")
    );
    assert_eq!(spec.weight, Some(2.0));
}

#[test]
fn a_rejected_update_changes_nothing() {
    let mut s = scheduler(MOVES, SchedulerConfig::default());
    s.start_op(0, in_both("a")).expect("a");
    let mut other = in_both("b");
    other.pool = Some("dev".into());
    other.scheduling_options_per_pool_tree = per_tree(serde_json::json!({"gpu": {"pool": "full"}}));
    s.start_op(0, other).expect("b");
    let before = s.operation(&OperationId("a".into())).unwrap().clone();
    let id = OperationId("a".into());
    let cases: Vec<(OperationUpdate, &str)> = vec![
        // The first tree's move is fine, the gpu one hits max_operation_count.
        (
            OperationUpdate {
                pool: Some("dev".into()),
                per_tree: per_tree(serde_json::json!({"gpu": {"pool": "full"}})),
                ..OperationUpdate::default()
            },
            "\"full\"",
        ),
        // A tree the operation does not run in.
        (
            OperationUpdate {
                weight: Some(3.0),
                per_tree: per_tree(serde_json::json!({"nope": {"weight": 2.0}})),
                ..OperationUpdate::default()
            },
            "scheduling_options_per_pool_tree.nope",
        ),
        // A bad per-tree weight.
        (
            OperationUpdate {
                pool: Some("dev".into()),
                per_tree: per_tree(serde_json::json!({"gpu": {"weight": -1.0}})),
                ..OperationUpdate::default()
            },
            "scheduling_options_per_pool_tree.gpu.weight",
        ),
    ];
    for (update, names) in cases {
        let e = s
            .update_operation_with(10, &id, update.clone())
            .expect_err("rejected");
        assert!(e.message().contains(names), "{update:?}: {e}");
        assert_eq!(s.operation(&id).unwrap(), &before, "{update:?} changed it");
    }
}

#[test]
fn a_move_inside_a_full_pool_does_not_count_the_operation_twice() {
    let mut s = scheduler(MOVES, SchedulerConfig::default());
    s.start_op(0, in_both("a")).expect("a");
    // prod holds one operation (a); prod-child is inside prod, so a may move there.
    s.update_operation(
        10,
        &OperationId("a".into()),
        None,
        None,
        Some("prod-child".into()),
    )
    .expect("move into the subtree");
    assert_eq!(places(&s, "a")[0].0, "prod-child");
    assert_eq!(s.pool_counts()["prod"].operation_count, 1);
    assert_eq!(s.pool_counts()["prod-child"].operation_count, 1);
}

/// A node that moves to another tree (new tags, YTsaurus `NodeFairShareTreeChanged`) loses its
/// allocations of the old tree: their jobs go back to pending.
#[test]
fn a_node_that_moves_to_another_tree_loses_its_allocations() {
    let mut s = scheduler(TREES, SchedulerConfig::default());
    node(&mut s, "p", "physical");
    let mut spec = op("a", Some("prod"), vec![task(2, res(1.0, 1.0), None)]);
    spec.pool_trees = Some(vec!["physical".into()]);
    let mut d = Driver::new();
    d.start(&mut s, 0, spec).expect("a");
    d.run(&mut s, 0, 200, 100);
    let a = OperationId("a".into());
    assert_eq!(s.operation(&a).unwrap().running_job_count(), 2);
    s.set_node(
        300,
        &NodeId("p".into()),
        None,
        Some(["gpu".to_string()].into()),
        None,
    )
    .expect("retag");
    let op = s.operation(&a).unwrap();
    assert_eq!(op.running_job_count(), 0);
    assert_eq!(op.pending_job_count(), 2);
    let reasons: Vec<String> = s
        .take_events()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["event"] == "allocation_preempted")
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasons, ["node_fair_share_tree_changed"; 2]);
    // Retagging within the same tree keeps them.
    node(&mut s, "p2", "physical");
    d.run(&mut s, 400, 600, 100);
    assert_eq!(s.operation(&a).unwrap().running_job_count(), 2);
    s.set_node(
        700,
        &NodeId("p2".into()),
        None,
        Some(["physical".to_string(), "fast".to_string()].into()),
        None,
    )
    .expect("retag in the same tree");
    assert_eq!(s.operation(&a).unwrap().running_job_count(), 2);
}
