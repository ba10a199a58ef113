//! "Why does it wait?" (issue 18, item 4): each explanation kind, computed from the real
//! blocker with numbers, in the situation that produces it. Each case is a scenario run through
//! `fairsched scenario`'s entry point; its snapshot `asked` carries the operation's `why`.

mod common;

use serde_json::{Value, json};

/// (case, nodes, tree (config and pools), operations started as (at ms, body), snapshot time,
/// operation asked about, fragments its reason must contain)
struct Case {
    name: &'static str,
    nodes: Value,
    tree: Value,
    operations: Vec<(u64, Value)>,
    at_ms: u64,
    asked: &'static str,
    fragments: &'static [&'static str],
}

fn endless(id: &str, pool: &str, jobs: u32, cpu: f64) -> Value {
    json!({"id": id, "pool": pool, "tasks": [{"job_count": jobs,
        "resources": {"cpu": cpu, "user_slots": 1}, "duration_ms": null}]})
}

fn with(mut op: Value, key: &str, value: Value) -> Value {
    op[key] = value;
    op
}

fn nodes(count: u32, cpu: f64) -> Value {
    json!([{"count": count, "resources": {"cpu": cpu, "user_slots": 100}}])
}

/// Fast starvation, as YTsaurus' integration tests configure it.
fn fast(mut config: Value) -> Value {
    config["fair_share_starvation_timeout_ms"] = json!(1000);
    config["preemptive_scheduling_backoff_ms"] = json!(5000);
    config
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "a running-operation limit, with the pool that holds it",
            nodes: nodes(1, 4.0),
            tree: json!({"pools": {"p": {"max_running_operation_count": 1}}}),
            operations: vec![
                (0, endless("first", "p", 1, 1.0)),
                (100, endless("second", "p", 1, 1.0)),
            ],
            at_ms: 1000,
            asked: "second",
            fragments: &[
                "pool \"p\" in tree \"default\" already runs 1 operations",
                "max_running_operation_count = 1",
            ],
        },
        Case {
            name: "no node large enough, naming the closest",
            nodes: json!([
                {"count": 1, "resources": {"cpu": 2, "user_slots": 10}},
                {"count": 1, "resources": {"cpu": 3, "user_slots": 10}, "id_prefix": "big"}
            ]),
            tree: json!({"pools": {"p": {}}}),
            operations: vec![(0, endless("huge", "p", 1, 4.0))],
            at_ms: 1000,
            asked: "huge",
            fragments: &[
                "no node is large enough for a job of {user_slots: 1, cpu: 4}",
                "the closest, node \"big-0\", has {user_slots: 10, cpu: 3}",
            ],
        },
        Case {
            name: "a tag filter no node matches",
            nodes: nodes(2, 4.0),
            tree: json!({"pools": {"p": {}}}),
            operations: vec![(
                0,
                with(
                    endless("tagged", "p", 1, 1.0),
                    "scheduling_tag_filter",
                    json!("gpu"),
                ),
            )],
            at_ms: 1000,
            asked: "tagged",
            fragments: &["no node matches the scheduling tag filters \"gpu\""],
        },
        Case {
            name: "a pool's resource limits, with its usage",
            nodes: nodes(1, 8.0),
            tree: json!({"pools": {"lim": {"resource_limits": {"cpu": 2}}}}),
            operations: vec![(0, endless("capped", "lim", 5, 1.0))],
            at_ms: 1000,
            asked: "capped",
            fragments: &[
                "pool \"lim\"'s resource_limits are reached",
                "usage {user_slots: 2, cpu: 2}",
            ],
        },
        Case {
            name: "the spare-resources bound of the tree",
            nodes: nodes(1, 2.0),
            tree: json!({"config": {"min_spare_allocation_resources_on_node": {"cpu": 1}},
                "pools": {"p": {}}}),
            operations: vec![(0, endless("small", "p", 4, 0.5))],
            at_ms: 1000,
            asked: "small",
            fragments: &[
                "node \"node-0\" has room for a job of {user_slots: 1, cpu: 0.5} \
                 ({user_slots: 97, cpu: 0.5} free)",
                "less than its tree's min_spare_allocation_resources_on_node ({cpu: 1})",
            ],
        },
        Case {
            name: "room on a node: it starts at the node's next heartbeat",
            nodes: nodes(1, 8.0),
            tree: json!({"config": {"max_started_allocations_per_heartbeat": 1},
                "pools": {"p": {}}}),
            operations: vec![(0, endless("slow", "p", 5, 1.0))],
            at_ms: 150,
            asked: "slow",
            fragments: &[
                "node \"node-0\" has room for a job of {user_slots: 1, cpu: 1}",
                "a job starts at that node's next heartbeat",
            ],
        },
        Case {
            name: "fair share 0: named guarantees cover the cluster",
            nodes: nodes(2, 2.0),
            tree: json!({"pools": {
                "g1": {"strong_guarantee_resources": {"cpu": 2}},
                "g2": {"strong_guarantee_resources": {"cpu": 2}},
                "other": {}}}),
            operations: vec![
                (0, endless("a", "g1", 10, 1.0)),
                (0, endless("b", "g2", 10, 1.0)),
                (0, endless("c", "other", 10, 1.0)),
            ],
            at_ms: 2000,
            asked: "c",
            fragments: &[
                "its fair share is 0: the strong guarantees of pools \"g1\" ({user_slots: 100, \
                 cpu: 2}), \"g2\" ({user_slots: 100, cpu: 2}) cover the cluster's \
                 {user_slots: 200, cpu: 4}",
            ],
        },
        Case {
            name: "starving, and preemption frees room",
            nodes: nodes(2, 2.0),
            tree: json!({"config": fast(json!({})), "pools": {
                "batch": {}, "g": {"strong_guarantee_resources": {"cpu": 4}}}}),
            operations: vec![
                (0, endless("victim", "batch", 4, 1.0)),
                (1000, endless("needy", "g", 8, 1.0)),
            ],
            // Starving from ~2.1 s; each node tried preemption at 0 ms (nothing to do then)
            // and tries again after the 5 s backoff.
            at_ms: 3000,
            asked: "needy",
            fragments: &[
                "starving (usage 0, fair share {user_slots: 4, cpu: 4})",
                "node \"node-0\" offers {user_slots: 100, cpu: 2} counting what it may preempt \
                 there, and preemption frees room for it at its first heartbeat from 5000 ms \
                 (preemptive_scheduling_backoff_ms = 5000)",
            ],
        },
        Case {
            name: "starving, but nothing on any node may be preempted for one job",
            nodes: nodes(2, 2.0),
            // Each operation's first 10 allocations are not preemptible.
            tree: json!({"config": fast(json!({"max_unpreemptible_running_allocation_count": 10})),
                "pools": {"batch": {}, "g": {"strong_guarantee_resources": {"cpu": 4}}}}),
            operations: vec![
                (0, endless("victim", "batch", 4, 1.0)),
                (1000, endless("needy", "g", 2, 2.0)),
            ],
            at_ms: 3000,
            asked: "needy",
            fragments: &[
                "starving (usage 0, fair share {user_slots: 2, cpu: 4})",
                "no node has enough free and preemptible resources for one job of \
                 {user_slots: 1, cpu: 2}: the most is {user_slots: 98} on node \"node-",
            ],
        },
        Case {
            name: "a FIFO pool serves the earlier operation first",
            nodes: nodes(1, 4.0),
            tree: json!({"pools": {"fifo": {"mode": "fifo"}}}),
            operations: vec![
                (0, endless("first", "fifo", 10, 1.0)),
                (0, endless("second", "fifo", 10, 1.0)),
            ],
            at_ms: 1000,
            asked: "second",
            fragments: &["waits behind operation \"first\" in FIFO pool \"fifo\""],
        },
        Case {
            name: "its pool uses its whole fair share",
            nodes: nodes(1, 4.0),
            tree: json!({"pools": {"a": {}, "b": {}}}),
            operations: vec![
                (0, endless("op_a", "a", 10, 1.0)),
                (0, endless("op_b", "b", 10, 1.0)),
            ],
            at_ms: 1000,
            asked: "op_a",
            fragments: &[
                "no node has room for a job of {user_slots: 1, cpu: 1} now",
                "pool \"a\" uses its whole fair share (usage {user_slots: 2, cpu: 2}, fair share \
                 {user_slots: 2, cpu: 2})",
            ],
        },
        Case {
            name: "below its fair share in a full cluster, with the starvation bounds",
            nodes: nodes(1, 4.0),
            tree: json!({"pools": {"a": {}, "b": {}}}),
            operations: vec![
                (0, endless("op_a", "a", 10, 1.0)),
                (1000, endless("op_b", "b", 10, 1.0)),
            ],
            at_ms: 1500,
            asked: "op_b",
            fragments: &[
                "no node has room for a job of {user_slots: 1, cpu: 1} now",
                "below its fair share (usage 0, fair share {user_slots: 2, cpu: 2}); it becomes \
                 starving (and may preempt) after 30 s below 0.8 of its fair share",
            ],
        },
    ]
}

/// Runs the case's scenario and returns the asked operation's reason.
fn why(case: &Case) -> String {
    let mut events: Vec<Value> = case
        .operations
        .iter()
        .map(|(at, op)| json!({"at_ms": at, "start_operation": op}))
        .collect();
    events.push(json!({"at_ms": case.at_ms, "snapshot": "asked"}));
    let scenario = json!({
        "name": case.name,
        "nodes": case.nodes,
        "scheduler": {"fair_share_update_period_ms": 100, "node_heartbeat_period_ms": 100},
        "pool_trees": {"default": case.tree},
        "events": events,
        "until_ms": case.at_ms,
    });
    let snapshot = common::run(&scenario)
        .into_iter()
        .find(|l| l["snapshot"] == "asked")
        .unwrap_or_else(|| panic!("{}: no snapshot", case.name));
    snapshot["operations"][case.asked]["why"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no reason in {snapshot}", case.name))
        .to_string()
}

#[test]
fn each_reason_names_the_real_blocker_with_numbers() {
    let mut failures = Vec::new();
    for case in cases() {
        let reason = why(&case);
        for f in case.fragments {
            if !reason.contains(f) {
                failures.push(format!(
                    "{}:\n  reason {reason:?}\n  lacks  {f:?}",
                    case.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
