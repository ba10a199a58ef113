//! Operators' node actions over HTTP: disable (jobs aborted, back to pending), enable, drain
//! (nothing new starts, running jobs finish), undrain; errors that name the node; the settings
//! survive a re-registration and a server restart. And `GET /api/v1/operations` filters.

mod common;

use serde_json::{Value, json};
use std::time::Duration;

fn trees() -> Value {
    json!({"pool_trees": {"default": {"pools": {"research": {"pools": {"adhoc": {}}}, "prod": {}}}}})
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect()
}

fn node<'a>(nodes: &'a Value, id: &str) -> &'a Value {
    nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {id} in {nodes}"))
}

#[tokio::test]
async fn disable_enable_drain_undrain_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_in(dir.path(), trees(), json!({})).await;
    server
        .register("n1", json!({"cpu": 2, "user_slots": 10}))
        .await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "op1", "pool": "research", "user": "alice",
                   "tasks": [{"job_count": 4, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let on_n1 = server.heartbeat_until_started("n1", 2).await;

    // Disable: the node's jobs are aborted (the agent is told to kill them) and go back to
    // pending; nothing starts there while it is disabled.
    let n = server.post("/api/v1/nodes/n1/disable", json!(null)).await;
    assert_eq!(n["state"], "disabled", "{n}");
    assert_eq!(n["scheduler_jobs_enabled"], false);
    assert_eq!(n["allocation_count"], 0);
    let hb = server.heartbeat("n1", &on_n1).await;
    let mut aborted: Vec<String> = hb["abort"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    aborted.sort();
    let mut expected = on_n1.clone();
    expected.sort();
    assert_eq!(aborted, expected, "{hb}");
    assert!(hb["start"].as_array().unwrap().is_empty(), "{hb}");
    let op = server.get("/api/v1/operations/op1").await;
    assert_eq!(op["job_counts"]["aborted"], 2, "{op}");
    assert_eq!(op["job_counts"]["pending"], 4, "{op}");
    assert!(
        op["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["reason"] == "node_disabled"),
        "{op}"
    );
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let hb = server.heartbeat("n1", &[]).await;
        assert!(hb["start"].as_array().unwrap().is_empty(), "{hb}");
    }

    // Enable: jobs start there again.
    let n = server.post("/api/v1/nodes/n1/enable", json!(null)).await;
    assert_eq!(n["state"], "enabled", "{n}");
    let on_n1 = server.heartbeat_until_started("n1", 2).await;

    // Drain: the running jobs stay, nothing new starts even when they finish.
    let n = server.post("/api/v1/nodes/n1/drain", json!(null)).await;
    assert_eq!(n["state"], "draining", "{n}");
    assert_eq!(n["draining"], true);
    assert_eq!(n["allocation_count"], 2, "{n}");
    let hb = server
        .post(
            "/api/v1/agent/heartbeat",
            json!({"node_id": "n1", "running": [on_n1[1]],
                   "finished": [{"job": on_n1[0], "outcome": "completed", "exit_code": 0}]}),
        )
        .await;
    assert!(hb["abort"].as_array().unwrap().is_empty(), "{hb}");
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let hb = server.heartbeat("n1", &on_n1[1..]).await;
        assert!(hb["start"].as_array().unwrap().is_empty(), "{hb}");
    }
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(node(&nodes, "n1")["allocation_count"], 1, "{nodes}");

    // Errors name the node.
    let (status, body) = server
        .call("POST", "/api/v1/nodes/nope/disable", None)
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], 500, "{body}");
    assert_eq!(body["attributes"]["node"], "nope", "{body}");
    assert!(body["message"].as_str().unwrap().contains("nope"), "{body}");
    let (status, body) = server.call("GET", "/api/v1/nodes/nope", None).await;
    assert_eq!((status, &body["attributes"]["node"]), (404, &json!("nope")));

    // A second node, disabled; then both come back after re-registering and after a restart
    // with their settings.
    server
        .register("n2", json!({"cpu": 2, "user_slots": 10}))
        .await;
    server.post("/api/v1/nodes/n2/disable", json!(null)).await;
    server
        .register("n2", json!({"cpu": 2, "user_slots": 10}))
        .await;
    let n2 = server.get("/api/v1/nodes/n2").await;
    assert_eq!(n2["state"], "disabled", "{n2}");
    server.stop().await;

    let server = common::start_in(dir.path(), trees(), json!({})).await;
    server
        .register("n1", json!({"cpu": 2, "user_slots": 10}))
        .await;
    server
        .register("n2", json!({"cpu": 2, "user_slots": 10}))
        .await;
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(node(&nodes, "n1")["state"], "draining", "{nodes}");
    assert_eq!(node(&nodes, "n2")["state"], "disabled", "{nodes}");
    // Undrain: jobs start again.
    let n = server.post("/api/v1/nodes/n1/undrain", json!(null)).await;
    assert_eq!(n["state"], "enabled", "{n}");
    server.heartbeat_until_started("n1", 1).await;
    server.stop().await;
}

#[tokio::test]
async fn operation_list_filters() {
    let server = common::start(trees(), json!({})).await;
    for (id, pool, user) in [
        ("a", "research", "alice"),
        ("b", "prod", "bob"),
        ("c", "research", "bob"),
        ("d", "adhoc", "carol"),
    ] {
        server
            .post(
                "/api/v1/operations",
                json!({"id": id, "pool": pool, "user": user,
                       "tasks": [{"job_count": 1, "resources": {"cpu": 1}, "command": ["true"]}]}),
            )
            .await;
    }
    server.post("/api/v1/operations/c/abort", json!(null)).await;
    let all = server.get("/api/v1/operations").await;
    assert_eq!(ids(&all), ["a", "b", "c", "d"]);
    let get = |q: &'static str| {
        let server = &server;
        async move { ids(&server.get(&format!("/api/v1/operations?{q}")).await) }
    };
    // A pool's filter takes its subtree.
    assert_eq!(get("pool=research").await, ["a", "c", "d"]);
    assert_eq!(get("pool=adhoc").await, ["d"]);
    assert_eq!(get("user=bob").await, ["b", "c"]);
    assert_eq!(get("user=bob&pool=research").await, ["c"]);
    assert_eq!(get("state=aborted").await, ["c"]);
    assert_eq!(get("state=running,aborted").await, ["a", "b", "c", "d"]);
    assert_eq!(get("state=running&pool=research").await, ["a", "d"]);
    assert!(get("pool=nope").await.is_empty());
    let without_jobs = server.get("/api/v1/operations?jobs=false&user=alice").await;
    assert_eq!(without_jobs[0]["jobs"], json!([]));
    let (status, body) = server
        .call("GET", "/api/v1/operations?state=runing", None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["attributes"]["state"], "runing", "{body}");
    let (status, body) = server
        .call("GET", "/api/v1/operations?jobs=maybe", None)
        .await;
    assert_eq!(
        (status, body["code"].as_u64()),
        (400, Some(100_400)),
        "{body}"
    );
}

/// Issue 18: a node the scheduler could never run a job on is refused at registration, saying
/// why and what to change; nothing is registered.
#[tokio::test]
async fn a_node_that_could_never_run_a_job_is_refused_at_registration() {
    let server = common::start(trees(), json!({})).await;
    let cases = [
        (json!({"cpu": 2, "memory": "2GiB"}), "offers no user slots"),
        (json!({}), "offers no resources at all"),
    ];
    for (resources, why) in cases {
        let (status, body) = server
            .call(
                "POST",
                "/api/v1/agent/register",
                Some(json!({"node_id": "useless", "resources": resources})),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("cannot run any job") && message.contains(why),
            "{message}"
        );
        assert!(message.contains("--resources"), "{message}");
    }
    assert_eq!(server.get("/api/v1/nodes").await, json!([]));
    // Without the abort on zero user slots, such a node is accepted (jobs that need no slot
    // may run there).
    let server = common::start(
        trees(),
        json!({"enable_allocation_abort_on_zero_user_slots": false}),
    )
    .await;
    server.register("no-slots", json!({"cpu": 2})).await;
    assert_eq!(ids(&server.get("/api/v1/nodes").await), ["no-slots"]);
}

/// A silent node is lost within about `node_timeout_ms` even when fair-share updates are far
/// apart: the actor's timer, which finds lost nodes, ticks at least every second (it ticked
/// once per update period, so a node lived up to a minute here).
#[tokio::test]
async fn a_node_is_lost_on_time_whatever_the_fair_share_period() {
    let server = common::start_with(json!({
        "pool_trees": trees(),
        "scheduler": {"fair_share_update_period_ms": 60_000},
        "node_timeout_ms": 500,
    }))
    .await;
    server
        .register("n1", json!({"cpu": 1, "user_slots": 1}))
        .await;
    assert_eq!(ids(&server.get("/api/v1/nodes").await), ["n1"]);
    server
        .wait_for(
            "the silent node to be lost",
            Duration::from_secs(5),
            || async { node(&server.get("/api/v1/nodes").await, "n1")["state"] == "lost" },
        )
        .await;
    // Listed as lost, with nothing running, until it registers again.
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(node(&nodes, "n1")["allocation_count"], 0, "{nodes}");
    server
        .register("n1", json!({"cpu": 1, "user_slots": 1}))
        .await;
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(node(&nodes, "n1")["state"], "enabled", "{nodes}");
    server.stop().await;
}

/// Two agents with one node id (two machines with one host name): while the node heartbeats,
/// a registration from another agent is refused (409, code 100409) and changes nothing; the
/// same agent registers again freely (a restart), and once the node has been silent for
/// `node_timeout_ms` another agent may take it over.
#[tokio::test]
async fn a_second_agent_cannot_take_a_node_that_heartbeats() {
    let server = common::start_with(json!({"pool_trees": trees(), "node_timeout_ms": 600})).await;
    let register = |agent: Option<&str>, cpu: u32| {
        let mut body = json!({"node_id": "n1", "resources": {"cpu": cpu, "user_slots": 4}});
        if let Some(agent) = agent {
            body["agent_id"] = json!(agent);
        }
        server.call("POST", "/api/v1/agent/register", Some(body))
    };
    let cpu = |nodes: &Value| node(nodes, "n1")["resources"]["cpu"].as_f64().unwrap();
    assert_eq!(register(Some("a"), 4).await.0, 200);
    // (agent, its answer)
    for (agent, status) in [
        (Some("b"), 409),
        (Some("a"), 200),
        (None, 200),
        (Some("b"), 409),
    ] {
        let (got, body) = register(agent, 8).await;
        assert_eq!(got, status, "{agent:?}: {body}");
        if status == 409 {
            assert_eq!(body["code"], 100_409, "{body}");
            let message = body["message"].as_str().unwrap();
            assert!(
                message.contains("another agent runs as node \"n1\"")
                    && message.contains("--node-id"),
                "{message}"
            );
            let nodes = server.get("/api/v1/nodes").await;
            assert_eq!(cpu(&nodes), 4.0, "a refused registration changed the node");
        } else {
            // Put back as it was for the next refusal's check.
            assert_eq!(register(agent, 4).await.0, 200);
        }
    }
    // Silent past node_timeout_ms: another agent may take the node.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(register(Some("b"), 4).await.0, 200);
    server.stop().await;
}
