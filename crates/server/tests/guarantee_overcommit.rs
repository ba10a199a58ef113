//! Guarantees that exceed the cluster (YTsaurus alert 29000 `PoolTreeGuaranteesOvercommit`):
//! a pool change or tree apply that leaves the root's strong guarantees above the tree's
//! nodes is applied (the guarantees are scaled down proportionally) and its reply says so in
//! `warnings`; a tree without nodes says that it has none; the scheduler's active alert shows
//! in `GET /api/v1/status`, `GET /api/v1/pool_trees` and the `fairsched_alerts` gauge while
//! the overcommit lasts, and goes when a node joins or a guarantee is lowered. A child pool
//! above its parent's guarantee is still refused.

mod common;

use serde_json::{Value, json};
use std::time::Duration;

fn guarantee(cpu: u32) -> Value {
    json!({"strong_guarantee_resources": {"cpu": cpu}})
}

/// One request, its expected status, and the fragments its one warning must hold (none: no
/// warning at all).
struct Step {
    what: &'static str,
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    status: u16,
    warning: &'static [&'static str],
}

async fn check(server: &common::Running, steps: &[Step]) {
    for step in steps {
        let (status, reply) = server.call(step.method, step.path, step.body.clone()).await;
        assert_eq!(status, step.status, "{}: {reply}", step.what);
        if status != 200 {
            continue;
        }
        let warnings: Vec<&str> = reply["warnings"]
            .as_array()
            .map(|w| w.iter().map(|w| w.as_str().unwrap()).collect())
            .unwrap_or_default();
        if step.warning.is_empty() {
            assert!(warnings.is_empty(), "{}: no warning: {reply}", step.what);
            continue;
        }
        assert_eq!(warnings.len(), 1, "{}: one warning: {reply}", step.what);
        for fragment in step.warning {
            assert!(
                warnings[0].contains(fragment),
                "{}: the warning has no {fragment:?}: {}",
                step.what,
                warnings[0]
            );
        }
    }
}

const OVER_12_8: &[&str] = &[
    "pool tree \"default\"",
    "29000",
    "cpu: guarantees 12 > cluster 8",
    "scaled down proportionally",
];

#[tokio::test]
async fn pool_changes_and_applies_warn_of_guarantee_overcommit() {
    let server = common::start(json!({"pool_trees": {"default": {}}}), json!({})).await;
    server
        .register(
            "node-1",
            json!({"cpu": 8, "memory": "16GiB", "user_slots": 8}),
        )
        .await;
    let steps = [
        Step {
            what: "create a, 4 of 8 cpu",
            method: "POST",
            path: "/api/v1/pools",
            body: Some(json!({"name": "a", "config": guarantee(4)})),
            status: 200,
            warning: &[],
        },
        Step {
            what: "create b, 4 + 8 > 8 cpu: applied, with the warning",
            method: "POST",
            path: "/api/v1/pools",
            body: Some(json!({"name": "b", "config": guarantee(8)})),
            status: 200,
            warning: OVER_12_8,
        },
        Step {
            what: "a child above its parent's guarantee is still refused",
            method: "POST",
            path: "/api/v1/pools",
            body: Some(json!({"name": "a1", "parent": "a", "config": guarantee(5)})),
            status: 400,
            warning: &[],
        },
        Step {
            what: "set b to 2: fits",
            method: "PUT",
            path: "/api/v1/pools/b",
            body: Some(json!({"config": guarantee(2)})),
            status: 200,
            warning: &[],
        },
        Step {
            what: "set b to 6: 10 > 8",
            method: "PUT",
            path: "/api/v1/pools/b",
            body: Some(json!({"config": guarantee(6)})),
            status: 200,
            warning: &["cpu: guarantees 10 > cluster 8", "29000"],
        },
        Step {
            what: "a dry run that overcommits says so and applies nothing",
            method: "PUT",
            path: "/api/v1/tree?dry_run=true",
            body: Some(json!({"pools": {"a": guarantee(6), "b": guarantee(6)}})),
            status: 200,
            warning: OVER_12_8,
        },
        Step {
            what: "apply a fitting tree",
            method: "PUT",
            path: "/api/v1/tree",
            body: Some(json!({"pools": {"a": guarantee(4), "b": guarantee(3)}})),
            status: 200,
            warning: &[],
        },
        Step {
            what: "apply an overcommitting tree: applied, with the warning",
            method: "PUT",
            path: "/api/v1/tree",
            body: Some(json!({"pools": {"a": guarantee(6), "b": guarantee(6)}})),
            status: 200,
            warning: OVER_12_8,
        },
        Step {
            what: "removing b ends it",
            method: "DELETE",
            path: "/api/v1/pools/b",
            body: None,
            status: 200,
            warning: &[],
        },
    ];
    check(&server, &steps).await;
    // The overcommitting changes were applied.
    let config = server.get("/api/v1/tree").await["config"].clone();
    assert_eq!(
        config["pools"]["a"]["strong_guarantee_resources"]["cpu"],
        json!(6.0),
        "{config}"
    );
    assert!(config["pools"]["b"].is_null(), "{config}");
}

#[tokio::test]
async fn a_tree_without_nodes_says_it_has_none() {
    let server = common::start(json!({"pool_trees": {"default": {}}}), json!({})).await;
    check(
        &server,
        &[
            Step {
                what: "no guarantee, no nodes: nothing to say",
                method: "POST",
                path: "/api/v1/pools",
                body: Some(json!({"name": "free", "config": {"weight": 2}})),
                status: 200,
                warning: &[],
            },
            Step {
                what: "a guarantee, no nodes",
                method: "POST",
                path: "/api/v1/pools",
                body: Some(json!({"name": "a", "config": guarantee(4)})),
                status: 200,
                warning: &[
                    "pool tree \"default\"",
                    "no nodes yet",
                    "cpu: 4",
                    "once nodes join",
                ],
            },
        ],
    )
    .await;
    let (_, reply) = server
        .call(
            "PUT",
            "/api/v1/pools/a",
            Some(json!({"config": guarantee(5)})),
        )
        .await;
    assert!(!reply.to_string().contains("> cluster 0"), "{reply}");
}

/// The active alerts as the status, the tree list and `/metrics` show them: each one's
/// (tree, code, message); `None` while they disagree (a fair-share update between the reads).
async fn active_alerts(server: &common::Running) -> Option<Vec<(String, u64, String)>> {
    let status = server.get("/api/v1/status").await;
    let alerts: Vec<(String, u64, String)> = status["alerts"]
        .as_array()
        .unwrap_or_else(|| panic!("status has alerts: {status}"))
        .iter()
        .map(|a| {
            (
                a["tree"].as_str().unwrap().to_string(),
                a["code"].as_u64().unwrap(),
                a["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let trees = server.get("/api/v1/pool_trees").await;
    let in_trees: Vec<Value> = trees
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alerts"].as_array().cloned().unwrap_or_default())
        .collect();
    let (_, _, metrics) = server.get_text("/metrics").await;
    let gauge: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("fairsched_alerts{tree=\"default\",code=\"29000\"} "))
        .unwrap_or_else(|| panic!("no 29000 gauge:\n{metrics}"))
        .parse()
        .unwrap();
    let active = alerts.iter().any(|a| a.1 == 29000);
    let agree = json!(in_trees) == status["alerts"] && gauge == if active { 1.0 } else { 0.0 };
    agree.then_some(alerts)
}

/// A change in the alert test.
enum Change {
    None,
    /// A request (method, path, body) that must succeed.
    Request(&'static str, &'static str, Value),
    /// A node with 8 cpu (and 8 user slots) registers.
    Node(&'static str),
}

#[tokio::test]
async fn the_alert_is_active_while_guarantees_overcommit() {
    let server = common::start(
        json!({"pool_trees": {"default": {"pools": {"a": guarantee(4)}}}}),
        json!({"fair_share_update_period_ms": 50}),
    )
    .await;
    // (what, the change, a fragment of the alert's message while it overcommits, else None)
    let steps = [
        ("start: 4 of 8 cpu", Change::Node("node-1"), None),
        (
            "create b with 8: 12 > 8",
            Change::Request(
                "POST",
                "/api/v1/pools",
                json!({"name": "b", "config": guarantee(8)}),
            ),
            Some("cpu: guarantees 12 > cluster 8"),
        ),
        ("a second node: 12 of 16", Change::Node("node-2"), None),
        (
            "set b to 20: 24 > 16",
            Change::Request("PUT", "/api/v1/pools/b", json!({"config": guarantee(20)})),
            Some("cpu: guarantees 24 > cluster 16"),
        ),
        (
            "nothing changes: still 24 > 16",
            Change::None,
            Some("24 > cluster 16"),
        ),
        (
            "lower b to 2: 6 of 16",
            Change::Request("PUT", "/api/v1/pools/b", json!({"config": guarantee(2)})),
            None,
        ),
    ];
    for (what, change, expected) in steps {
        match change {
            Change::None => {}
            Change::Request(method, path, body) => {
                let (status, reply) = server.call(method, path, Some(body)).await;
                assert_eq!(status, 200, "{what}: {reply}");
            }
            Change::Node(node) => {
                server
                    .register(node, json!({"cpu": 8, "user_slots": 8}))
                    .await
            }
        }
        // Until a fair-share update has seen the change.
        server
            .wait_for(what, Duration::from_secs(5), || async {
                let Some(alerts) = active_alerts(&server).await else {
                    return false;
                };
                match expected {
                    None => alerts.is_empty(),
                    Some(fragment) => {
                        alerts.len() == 1
                            && alerts[0].0 == "default"
                            && alerts[0].1 == 29000
                            && alerts[0].2.contains(fragment)
                            && alerts[0].2.contains("scaled down proportionally")
                    }
                }
            })
            .await;
    }
}

/// Before any node registered, guarantees always exceed the empty cluster: the alert is
/// logged at `info`, not as a warning at every start.
#[tokio::test]
async fn the_alert_of_a_tree_without_nodes_is_not_a_warning() {
    let (logs, guard) = common::capture_logs();
    let server = common::start(
        json!({"pool_trees": {"default": {"pools": {"a": guarantee(4)}}}}),
        json!({"fair_share_update_period_ms": 50}),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logs.lines_with(&["core error event"]).is_empty() && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(guard);
    let lines = logs.lines_with(&["core error event"]);
    assert!(!lines.is_empty(), "the alert is logged: {}", logs.text());
    assert!(
        lines
            .iter()
            .all(|l| l.contains("INFO") && l.contains("no nodes yet")),
        "{}",
        logs.text()
    );
    server.stop().await;
}
