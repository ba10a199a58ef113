//! Router tests: errors, agent authentication, store-before-reply and restart recovery.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use fairsched_server::{ServerConfig, actor, http};
use serde_json::{Value, json};
use std::path::Path;
use tower::ServiceExt;

/// The router of a server on the store in `dir`, and its actor's task (which ends, closing
/// the store, once the router is dropped).
fn app_and_actor(dir: &Path) -> (axum::Router, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let config = ServerConfig {
        data_dir: dir.to_path_buf(),
        agent_token: Some("secret".into()),
        ..ServerConfig::default()
    };
    let store = fairsched_store::SqliteStore::open(dir).unwrap();
    let (actor, view) = actor::Actor::new(&config, Box::new(store)).unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let state = http::AppState::new(tx, view, config.agent_token, &actor);
    let task = tokio::spawn(actor.run(rx));
    (http::router(state), task)
}

fn app(dir: &Path) -> axum::Router {
    app_and_actor(dir).0
}

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
    token: bool,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if token {
        req = req.header("authorization", "Bearer secret");
    }
    let req = req
        .header("content-type", "application/json")
        .body(match body {
            Some(b) => Body::from(b.to_string()),
            None => Body::empty(),
        })
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn errors_auth_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ((credential, running), first_actor) = {
        let (app, first_actor) = app_and_actor(dir.path());
        let (status, body) = call(
            &app,
            "POST",
            "/api/v1/operations",
            Some(json!({"tasks": [{"job_count": 1}]})),
            false,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["code"], 100_400, "{body}");
        assert!(body["attributes"].is_object());

        // A zero time limit is rejected naming the field, and nothing is created.
        let zero = json!({"id": "zero", "tasks": [{"job_count": 1, "resources": {"cpu": 1},
            "command": ["true"], "time_limit_ms": 0}]});
        let (status, body) = call(&app, "POST", "/api/v1/operations", Some(zero), false).await;
        assert_ne!(status, StatusCode::OK, "{body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("tasks[0].time_limit_ms must be positive")),
            "{body}"
        );
        let (status, _) = call(&app, "GET", "/api/v1/operations/zero", None, false).await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        let (status, body) = call(
            &app,
            "POST",
            "/api/v1/agent/register",
            Some(json!({"node_id": "n1", "resources": {"cpu": 2, "user_slots": 2}})),
            false,
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["code"], 109);

        let op = json!({"id": "op1", "pool": "research", "tasks": [{"job_count": 3, "resources": {"cpu": 1}, "command": ["true"]}]});
        let (status, body) = call(&app, "POST", "/api/v1/operations", Some(op), false).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["id"], "op1");

        let (status, body) = call(
            &app,
            "POST",
            "/api/v1/agent/register",
            Some(json!({"node_id": "n1", "resources": {"cpu": 2, "user_slots": 2}})),
            true,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // Heartbeats carry the node's credential from its registration.
        let credential = body["node_credential"].clone();
        assert!(credential.as_str().is_some_and(|c| !c.is_empty()), "{body}");
        // Jobs start once a fair-share update has seen the operation and the node (the timer's
        // first tick may come before or after the submit): heartbeat until they do.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let hb = loop {
            let (_, hb) = call(
                &app,
                "POST",
                "/api/v1/agent/heartbeat",
                Some(json!({"node_id": "n1", "node_credential": credential})),
                true,
            )
            .await;
            if !hb["start"].as_array().unwrap().is_empty() {
                break hb;
            }
            assert!(std::time::Instant::now() < deadline, "no job started: {hb}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let started = hb["start"].as_array().unwrap();
        assert_eq!(started.len(), 2, "{hb}");
        assert_eq!(started[0]["command"], json!(["true"]));
        let first = started[0]["job"].clone();
        let (_, _) = call(&app, "POST", "/api/v1/agent/heartbeat", Some(json!({"node_id": "n1", "node_credential": credential, "running": [started[1]["job"]], "finished": [{"job": first, "outcome": "completed", "exit_code": 0, "stdout_tail": "ok\n"}]})), true).await;
        let (_, op) = call(&app, "GET", "/api/v1/operations/op1", None, false).await;
        assert_eq!(op["job_counts"]["completed"], 1, "{op}");
        let (status, body) = call(&app, "GET", "/api/v1/operations/nope", None, false).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["code"], 1915);
        let (status, _) = call(
            &app,
            "GET",
            "/api/v1/orchid/pool_trees/default/operations/op1",
            None,
            false,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let (_, op) = call(&app, "GET", "/api/v1/operations/op1", None, false).await;
        let running: Vec<Value> = op["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["state"] == "running")
            .map(|j| j["id"].clone())
            .collect();
        ((credential, running), first_actor)
    };
    // The first server's actor ends (its router is gone) and closes the store: one server
    // per store.
    first_actor.await.unwrap().unwrap();
    // A new server on the same store: the operation is back, its completed job is not rerun,
    // its running job is adopted on its node (restored, waiting for its heartbeat).
    let app = app(dir.path());
    let (_, op) = call(&app, "GET", "/api/v1/operations/op1", None, false).await;
    assert_eq!(op["state"], "running", "{op}");
    assert_eq!(op["job_counts"]["completed"], 1, "{op}");
    // (The heartbeat that reported the first job's end started the third one.)
    assert_eq!(op["job_counts"]["running"], 2, "{op}");
    assert_eq!(op["job_counts"]["pending"], 0, "{op}");
    let (_, logs) = call(&app, "GET", "/api/v1/operations/op1/logs", None, false).await;
    assert_eq!(logs[0]["stdout"], "ok\n", "{logs}");
    let (_, nodes) = call(&app, "GET", "/api/v1/nodes", None, false).await;
    assert_eq!(nodes[0]["id"], "n1", "{nodes}");
    assert_eq!(nodes[0]["allocation_count"], 2, "{nodes}");
    // A node the server does not have must register first.
    let (status, body) = call(
        &app,
        "POST",
        "/api/v1/agent/heartbeat",
        Some(json!({"node_id": "n2"})),
        true,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], 100_404);
    // Node credentials are kept in memory only: n1's old one gets "register again", which
    // changes nothing; registered again, n1 keeps its jobs.
    let (status, body) = call(
        &app,
        "POST",
        "/api/v1/agent/heartbeat",
        Some(json!({"node_id": "n1", "node_credential": credential, "running": running})),
        true,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["code"], 100_404, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("must register again"),
        "{body}"
    );
    let (_, body) = call(
        &app,
        "POST",
        "/api/v1/agent/register",
        Some(json!({"node_id": "n1", "resources": {"cpu": 2, "user_slots": 2}})),
        true,
    )
    .await;
    let renewed = body["node_credential"].clone();
    assert_ne!(renewed, credential);
    let (_, nodes) = call(&app, "GET", "/api/v1/nodes", None, false).await;
    assert_eq!(
        nodes[0]["allocation_count"], 2,
        "the jobs are kept: {nodes}"
    );
    let (status, hb) = call(
        &app,
        "POST",
        "/api/v1/agent/heartbeat",
        Some(json!({"node_id": "n1", "node_credential": renewed, "running": running})),
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{hb}");
}
