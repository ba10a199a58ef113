//! Numbers a careless or hostile user sends (1e-300, 1e308, 2^32, u64::MAX, NaN as text):
//! each is refused with an error that names the field, or accepted and then scheduled without
//! stopping the scheduler. Before, an operation weight of 1e-10 panicked the fair-share update
//! and the actor stopped taking writes and heartbeats.

mod common;

use serde_json::{Value, json};
use std::time::Duration;

fn op(id: &str, extra: Value) -> Value {
    let mut op = json!({"id": id, "tasks": [{"job_count": 1, "resources": {"cpu": 1},
        "command": ["true"]}]});
    merge(&mut op, extra);
    op
}

/// Merges `extra` into `base` (objects key by key; arrays element by element).
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (Value::Array(b), Value::Array(e)) => {
            for (i, v) in e.into_iter().enumerate() {
                if i < b.len() {
                    merge(&mut b[i], v);
                } else {
                    b.push(v);
                }
            }
        }
        (b, e) => *b = e,
    }
}

/// (what, method, path, body, the status wanted, words the error must have).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Value,
    u16,
    &'static [&'static str],
);

fn cases() -> Vec<Case> {
    vec![
        (
            "weight 1e-10",
            "POST",
            "/api/v1/operations",
            op("w1", json!({"weight": 1e-10})),
            400,
            &["weight", "must be in"],
        ),
        (
            "weight 1e308",
            "POST",
            "/api/v1/operations",
            op("w2", json!({"weight": 1e308})),
            400,
            &["weight", "must be in"],
        ),
        (
            "weight 0",
            "POST",
            "/api/v1/operations",
            op("w3", json!({"weight": 0})),
            400,
            &["weight", "positive"],
        ),
        (
            "weight -1",
            "POST",
            "/api/v1/operations",
            op("w4", json!({"weight": -1})),
            400,
            &["weight", "positive"],
        ),
        (
            "weight \"NaN\"",
            "POST",
            "/api/v1/operations",
            op("w5", json!({"weight": "NaN"})),
            400,
            &["weight"],
        ),
        (
            "per-tree weight 1e-300",
            "POST",
            "/api/v1/operations",
            op(
                "w6",
                json!({"scheduling_options_per_pool_tree": {"default": {"weight": 1e-300}}}),
            ),
            400,
            &["scheduling_options_per_pool_tree.default.weight"],
        ),
        (
            "tolerance 2",
            "POST",
            "/api/v1/operations",
            op("t1", json!({"fair_share_starvation_tolerance": 2.0})),
            400,
            &["fair_share_starvation_tolerance"],
        ),
        (
            "interruption timeout u64::MAX",
            "POST",
            "/api/v1/operations",
            op("t2", json!({"interruption_timeout_ms": u64::MAX})),
            400,
            &["interruption_timeout_ms", "at most"],
        ),
        (
            "starvation timeout u64::MAX",
            "POST",
            "/api/v1/operations",
            op("t3", json!({"fair_share_starvation_timeout_ms": u64::MAX})),
            400,
            &["fair_share_starvation_timeout_ms"],
        ),
        (
            "time limit u64::MAX",
            "POST",
            "/api/v1/operations",
            op("t4", json!({"tasks": [{"time_limit_ms": u64::MAX}]})),
            400,
            &["tasks[0].time_limit_ms"],
        ),
        // Simulated-job fields: the server does not read them, but refuses them over ten
        // years as the core did when its tasks carried them.
        (
            "duration u64::MAX",
            "POST",
            "/api/v1/operations",
            op("t5", json!({"tasks": [{"duration_ms": u64::MAX}]})),
            400,
            &[
                "operation \"t5\": tasks[0].duration_ms must be at most 315360000000 ms (ten \
                 years; got 18446744073709551615)",
            ],
        ),
        (
            "exit after interrupt u64::MAX",
            "POST",
            "/api/v1/operations",
            op(
                "t6",
                json!({"tasks": [{"interruptible": true, "exit_after_interrupt_ms": u64::MAX}]}),
            ),
            400,
            &["tasks[0].exit_after_interrupt_ms must be at most"],
        ),
        (
            "cpu 1e308",
            "POST",
            "/api/v1/operations",
            op("r1", json!({"tasks": [{"resources": {"cpu": 1e308}}]})),
            400,
            &["cpu"],
        ),
        (
            "cpu 1e-300",
            "POST",
            "/api/v1/operations",
            op("r2", json!({"tasks": [{"resources": {"cpu": 1e-300}}]})),
            400,
            &["tasks[0].resources"],
        ),
        (
            "memory -1",
            "POST",
            "/api/v1/operations",
            op("r3", json!({"tasks": [{"resources": {"memory": -1}}]})),
            400,
            &["memory"],
        ),
        (
            "job_count 0",
            "POST",
            "/api/v1/operations",
            op("j0", json!({"tasks": [{"job_count": 0}]})),
            400,
            &["tasks[0].job_count", "from 1"],
        ),
        (
            "job_count -1",
            "POST",
            "/api/v1/operations",
            op("j2", json!({"tasks": [{"job_count": -1}]})),
            400,
            &["tasks[0].job_count"],
        ),
        (
            "job_count 2^32",
            "POST",
            "/api/v1/operations",
            op("j1", json!({"tasks": [{"job_count": 4_294_967_296u64}]})),
            400,
            &["job_count"],
        ),
        (
            "limits cpu 1e308",
            "POST",
            "/api/v1/operations",
            op("l1", json!({"resource_limits": {"cpu": 1e308}})),
            400,
            &["cpu"],
        ),
        (
            "pool weight 1e-300",
            "POST",
            "/api/v1/pools",
            json!({"name": "p1", "config": {"weight": 1e-300}}),
            400,
            &["weight"],
        ),
        (
            "pool guarantee 1e308",
            "POST",
            "/api/v1/pools",
            json!({"name": "p2", "config": {"strong_guarantee_resources": {"cpu": 1e308}}}),
            400,
            &["cpu"],
        ),
        (
            "node cpu 1e308",
            "POST",
            "/api/v1/agent/register",
            json!({"node_id": "huge", "resources": {"cpu": 1e308}}),
            400,
            &["cpu"],
        ),
    ]
}

#[tokio::test]
async fn extreme_numbers_are_refused_by_name_and_the_scheduler_keeps_scheduling() {
    let server = common::start(
        Value::Null,
        json!({"fair_share_update_period_ms": 20, "node_heartbeat_period_ms": 20}),
    )
    .await;
    server
        .register("n1", json!({"cpu": 4, "user_slots": 8}))
        .await;
    for (what, method, path, body, want, words) in cases() {
        let (status, reply) = server.call(method, path, Some(body)).await;
        assert_eq!(status, want, "{what}: {reply}");
        let message = reply["message"].as_str().unwrap_or_default();
        for w in words {
            assert!(message.contains(w), "{what}: {w:?} not in {message:?}");
        }
    }
    // Nothing refused was kept.
    let ops = server.get("/api/v1/operations").await;
    assert_eq!(ops, json!([]), "{ops}");

    // The extremes that are allowed, side by side: the smallest and the largest weights, the
    // largest amounts. Fair-share updates run over them and scheduling goes on.
    let min = fairsched_config::MIN_WEIGHT;
    let max = fairsched_config::MAX_WEIGHT;
    server
        .post(
            "/api/v1/operations",
            op("tiny", json!({"weight": min, "tasks": [{"job_count": 3}]})),
        )
        .await;
    server
        .post(
            "/api/v1/operations",
            op("huge", json!({"weight": max, "tasks": [{"job_count": 3}]})),
        )
        .await;
    // No node holds such a job: accepted only when asked to wait for nodes.
    let (status, reply) = server
        .call(
            "POST",
            "/api/v1/operations",
            Some(op(
                "wide",
                json!({"tasks": [{"resources": {"cpu": 1, "memory": "1024PiB"}}]}),
            )),
        )
        .await;
    assert_eq!(status, 400, "{reply}");
    server
        .post(
            "/api/v1/operations?wait_for_nodes=true",
            op(
                "wide",
                json!({"tasks": [{"job_count": 1_000_000,
                "resources": {"cpu": 1, "memory": "1024PiB"}}]}),
            ),
        )
        .await;
    let (status, reply) = server
        .call(
            "POST",
            "/api/v1/operations/tiny/update",
            Some(json!({"weight": 1e-10})),
        )
        .await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["message"].as_str().unwrap().contains("must be in"),
        "{reply}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = server.heartbeat_until_started("n1", 4).await;
    assert_eq!(started.len(), 4, "{started:?}");
    let tree = server.get("/api/v1/tree").await;
    assert!(tree.is_object(), "{tree}");
}

/// Issue 18: an operation whose job no node of its trees could ever hold is refused at submit
/// (it would wait forever), naming what a job needs and the largest node; with
/// `?wait_for_nodes=true`, or while its tree has no nodes yet, it is accepted.
#[tokio::test]
async fn an_operation_no_node_could_run_is_refused_unless_it_waits_for_nodes() {
    let server = common::start(Value::Null, json!({})).await;
    let big = |id: &str| op(id, json!({"tasks": [{"resources": {"cpu": 64}}]}));
    // No node yet: the cluster is starting, nodes that fit may join.
    server.post("/api/v1/operations", big("early")).await;
    server
        .register("small", json!({"cpu": 8, "user_slots": 8}))
        .await;
    let (status, reply) = server
        .call("POST", "/api/v1/operations", Some(big("late")))
        .await;
    assert_eq!(status, 400, "{reply}");
    let message = reply["message"].as_str().unwrap();
    for w in ["tasks[0]", "cpu=64", "\"small\"", "cpu=8", "wait_for_nodes"] {
        assert!(message.contains(w), "{w:?} not in {message}");
    }
    server
        .post("/api/v1/operations?wait_for_nodes=true", big("patient"))
        .await;
    // A tag filter no node matches is refused the same way.
    let (status, reply) = server
        .call(
            "POST",
            "/api/v1/operations",
            Some(op("tagged", json!({"scheduling_tag_filter": "gpu"}))),
        )
        .await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("scheduling_tag_filter"),
        "{reply}"
    );
    // What fits is accepted.
    server
        .post("/api/v1/operations", op("fits", json!({})))
        .await;
    let ids: Vec<Value> = server
        .get("/api/v1/operations")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].clone())
        .collect();
    assert_eq!(ids, [json!("early"), json!("patient"), json!("fits")]);
}
