//! Hung operations are failed (scheduler spec §3.7, YTsaurus YT-S34).

mod common;

use common::*;
use fairsched_core::{OperationId, OperationState, SchedulerConfig};

fn config() -> SchedulerConfig {
    SchedulerConfig {
        fair_share_update_period_ms: 100,
        operation_hangup_check_period_ms: 100,
        operation_hangup_safe_timeout_ms: 5000,
        operation_hangup_min_schedule_job_attempts: 10,
        operation_hangup_due_to_limiting_ancestor_safe_timeout_ms: 5000,
        ..SchedulerConfig::default()
    }
}

fn events_with_reason(d: &Driver, op: &str) -> Vec<String> {
    d.events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|v| {
            v["event"] == "operation_state" && v["operation"] == op && v["state"] == "failed"
        })
        .map(|v| v["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn an_operation_under_a_too_small_limit_is_failed_naming_the_limiting_ancestor() {
    let tree = r#"{"pool_trees": {"default": {"config": {"enable_limiting_ancestor_check": true},
        "pools": {"limiting_pool": {"resource_limits": {"cpu": 1.0}, "pools": {"subpool": {}}}}}}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 3, res(2.0, 2.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("big", Some("subpool"), vec![task(10, res(2.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 0, 4800, 100);
    assert_eq!(
        s.operation(&OperationId("big".into())).unwrap().state,
        OperationState::Running
    );
    d.run(&mut s, 4900, 6000, 100);
    assert_eq!(
        s.operation(&OperationId("big".into())).unwrap().state,
        OperationState::Failed
    );
    let reasons = events_with_reason(&d, "big");
    assert!(
        reasons.iter().any(|r| r.contains("scheduling hung")
            && r.contains("limiting_ancestor")
            && r.contains("limiting_pool")),
        "{reasons:?}"
    );
}

#[test]
fn the_limiting_ancestor_check_can_be_turned_off() {
    let tree = r#"{"pool_trees": {"default": {"config": {"enable_limiting_ancestor_check": false},
        "pools": {"limiting_pool": {"resource_limits": {"cpu": 1.0}, "pools": {"subpool": {}}}}}}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 3, res(2.0, 2.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("big", Some("subpool"), vec![task(10, res(2.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 0, 10_000, 100);
    assert_eq!(
        s.operation(&OperationId("big".into())).unwrap().state,
        OperationState::Running
    );
}

#[test]
fn a_starving_operation_that_never_fits_is_failed_after_the_safe_timeout() {
    let tree = r#"{"pool_trees": {"default": {"config": {"fair_share_starvation_timeout_ms": 500, "enable_limiting_ancestor_check": true}}}}"#;
    let mut s = scheduler(tree, config());
    add_nodes(&mut s, 3, res(2.0, 2.0));
    // Three long jobs, one pinned to each node, leave 1 cpu free on every node; the newcomer
    // needs 1.5 cpu.
    let mut d = Driver::new();
    for i in 0..3 {
        let node = fairsched_core::NodeId(format!("node-{i}"));
        let tags = [format!("n{i}")].into_iter().collect();
        s.set_node(0, &node, None, Some(tags), None).unwrap();
        let mut o = op(
            &format!("filler{i}"),
            Some("fake_pool"),
            vec![task(1, res(1.0, 1.0), None)],
        );
        o.user = Some(format!("u{i}"));
        o.scheduling_tag_filter = Some(format!("n{i}"));
        d.start(&mut s, 0, o).unwrap();
    }
    d.run(&mut s, 0, 300, 100);
    d.start(
        &mut s,
        400,
        op(
            "wide",
            Some("fake_pool"),
            vec![task(1, res(1.5, 1.0), None)],
        ),
    )
    .unwrap();
    d.run(&mut s, 400, 3000, 100);
    assert_eq!(
        s.operation(&OperationId("wide".into())).unwrap().state,
        OperationState::Running
    );
    d.run(&mut s, 3100, 12_000, 100);
    let wide = s.operation(&OperationId("wide".into())).unwrap();
    assert_eq!(
        wide.state,
        OperationState::Failed,
        "attempts {}",
        wide.failed_schedule_attempts
    );
    let reasons = events_with_reason(&d, "wide");
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("no successful scheduled allocations")),
        "{reasons:?}"
    );
}

/// An operation in two trees is hung only when it is limited in both: where it is not, it
/// still runs. (Case: (gpu tree's pool limit, failed).)
#[test]
fn an_operation_in_two_trees_is_hung_only_when_limited_in_both() {
    for (gpu_limit, failed) in [(4.0, false), (1.0, true)] {
        let tree = format!(
            r#"{{"default_tree": "a", "pool_trees": {{
            "a": {{"config": {{"node_tag_filter": "a", "enable_limiting_ancestor_check": true}},
                   "pools": {{"small": {{"resource_limits": {{"cpu": 1.0}}}}}}}},
            "b": {{"config": {{"node_tag_filter": "b", "enable_limiting_ancestor_check": true}},
                   "pools": {{"other": {{"resource_limits": {{"cpu": {gpu_limit}}}}}}}}}}}}}"#
        );
        let mut s = scheduler(&tree, config());
        for (id, tag) in [("na", "a"), ("nb", "b")] {
            s.add_node(
                0,
                fairsched_core::NodeSpec {
                    id: fairsched_core::NodeId(id.into()),
                    resources: res(4.0, 4.0),
                    tags: [tag.to_string()].into(),
                },
            )
            .expect("node");
        }
        let mut spec = op("big", Some("small"), vec![task(10, res(2.0, 1.0), None)]);
        spec.pool_trees = Some(vec!["a".into(), "b".into()]);
        spec.scheduling_options_per_pool_tree = [(
            "b".to_string(),
            serde_json::from_value(serde_json::json!({"pool": "other"})).expect("options"),
        )]
        .into();
        let mut d = Driver::new();
        d.start(&mut s, 0, spec).unwrap();
        d.run(&mut s, 0, 7000, 100);
        let state = s.operation(&OperationId("big".into())).unwrap().state;
        assert_eq!(
            state == OperationState::Failed,
            failed,
            "limit {gpu_limit}: {state:?}"
        );
        if failed {
            let reasons = events_with_reason(&d, "big");
            assert!(
                reasons
                    .iter()
                    .any(|r| r.contains("\"small\" in tree \"a\"")
                        && r.contains("limiting_ancestor")),
                "{reasons:?}"
            );
        }
    }
}
