//! A server restart with jobs running: the jobs are adopted on their (restored) nodes, keep their
//! ids, and the node's first heartbeat reconciles them — jobs that ended meanwhile are recorded
//! with their exit codes, jobs the node no longer runs go back to pending, jobs the server does
//! not have are killed. A node that does not come back loses its jobs to pending.

mod common;

use serde_json::{Value, json};
use std::time::Duration;

fn config(node_timeout_ms: u64) -> Value {
    json!({
        "pool_trees": {"pool_trees": {"default": {"pools": {"p": {}}}}},
        "scheduler": {"fair_share_update_period_ms": 50},
        "node_timeout_ms": node_timeout_ms,
    })
}

fn job<'a>(op: &'a Value, id: &str) -> &'a Value {
    op["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("no job {id} in {op}"))
}

#[tokio::test]
async fn running_jobs_are_adopted_and_reconciled() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_config(dir.path(), config(60_000)).await;
    server
        .register("n1", json!({"cpu": 4, "user_slots": 10}))
        .await;
    server
        .register("n2", json!({"cpu": 1, "user_slots": 10}))
        .await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "r", "pool": "p",
                   "tasks": [{"job_count": 5, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let on_n1 = server.heartbeat_until_started("n1", 4).await;
    let on_n2 = server.heartbeat_until_started("n2", 1).await;
    server.post("/api/v1/nodes/n2/drain", json!(null)).await;
    server.stop().await;

    let server = common::start_config(dir.path(), config(60_000)).await;
    let op = server.get("/api/v1/operations/r").await;
    assert_eq!(op["job_counts"]["running"], 5, "{op}");
    assert_eq!(op["job_counts"]["pending"], 0, "{op}");
    for id in on_n1.iter().chain(&on_n2) {
        assert_eq!(job(&op, id)["state"], "running", "{op}");
    }
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(nodes.as_array().unwrap().len(), 2, "{nodes}");
    assert_eq!(nodes[0]["allocation_count"], 4, "{nodes}");
    assert_eq!(
        nodes[1]["state"], "draining",
        "restored with its settings: {nodes}"
    );

    // n1 comes back without registering: one job ended meanwhile (exit 0), one is gone, two
    // still run, and it runs a job the server does not have.
    let hb = server
        .post(
            "/api/v1/agent/heartbeat",
            json!({"node_id": "n1", "running": [on_n1[0], on_n1[1], "7.7"],
                   "finished": [{"job": on_n1[2], "outcome": "completed", "exit_code": 0,
                                 "stdout_tail": "done\n"}]}),
        )
        .await;
    assert_eq!(hb["abort"], json!(["7.7"]), "{hb}");
    let op = server.get("/api/v1/operations/r").await;
    assert_eq!(job(&op, &on_n1[0])["state"], "running", "{op}");
    assert_eq!(job(&op, &on_n1[1])["state"], "running", "{op}");
    let ended = job(&op, &on_n1[2]);
    assert_eq!(
        (&ended["state"], &ended["exit_code"]),
        (&json!("completed"), &json!(0)),
        "{op}"
    );
    let lost = job(&op, &on_n1[3]);
    assert_eq!(
        (&lost["state"], &lost["reason"]),
        (&json!("aborted"), &json!("lost")),
        "{op}"
    );
    assert_eq!(op["job_counts"]["completed"], 1, "{op}");
    let logs = server.get("/api/v1/operations/r/logs").await;
    let log = logs
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["job"] == on_n1[2].as_str())
        .unwrap();
    assert_eq!(log["stdout"], "done\n");

    // The lost job runs again (a new id); nothing else is started twice: one slot is free.
    let mut running = vec![on_n1[0].clone(), on_n1[1].clone()];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while running.len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the lost job did not start again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.heartbeat_running("n1", &mut running).await;
    }
    assert!(!on_n1.contains(&running[2]), "{running:?}");
    assert!(
        running[2].starts_with("1."),
        "a job of this incarnation: {running:?}"
    );
    let op = server.get("/api/v1/operations/r").await;
    assert_eq!(op["job_counts"]["running"], 4, "{op}");
    assert_eq!(op["job_counts"]["pending"], 0, "{op}");

    // n2 registers again (its agent lost the server) and keeps its job.
    server
        .register("n2", json!({"cpu": 1, "user_slots": 10}))
        .await;
    let hb = server.heartbeat("n2", &on_n2).await;
    assert_eq!(hb["abort"], json!([]), "{hb}");
    let op = server.get("/api/v1/operations/r").await;
    assert_eq!(job(&op, &on_n2[0])["state"], "running", "{op}");
    server.stop().await;
}

#[tokio::test]
async fn a_node_that_does_not_come_back_loses_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_config(dir.path(), config(60_000)).await;
    server
        .register("n1", json!({"cpu": 2, "user_slots": 10}))
        .await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "r", "pool": "p",
                   "tasks": [{"job_count": 2, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let on_n1 = server.heartbeat_until_started("n1", 2).await;
    server.stop().await;

    let server = common::start_config(dir.path(), config(300)).await;
    let op = server.get("/api/v1/operations/r").await;
    assert_eq!(op["job_counts"]["running"], 2, "{op}");
    server
        .wait_for("the node to be lost", Duration::from_secs(10), || async {
            let op = server.get("/api/v1/operations/r").await;
            op["job_counts"]["pending"] == 2 && op["job_counts"]["running"] == 0
        })
        .await;
    let op = server.get("/api/v1/operations/r").await;
    for id in &on_n1 {
        assert_eq!(job(&op, id)["state"], "aborted", "{op}");
    }
    // Listed as lost, with nothing running there.
    let nodes = server.get("/api/v1/nodes").await;
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(
        (
            &nodes[0]["id"],
            &nodes[0]["state"],
            &nodes[0]["allocation_count"]
        ),
        (&json!("n1"), &json!("lost"), &json!(0)),
        "{nodes:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn operation_updates_are_checked_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        json!({
            "pool_trees": {"pool_trees": {"default": {"pools": {"p": {}, "q": {}}}}},
            "scheduler": {"fair_share_update_period_ms": 50},
        })
    };
    let server = common::start_config(dir.path(), config()).await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "u", "pool": "p",
                   "tasks": [{"job_count": 2, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let op = server
        .post(
            "/api/v1/operations/u/update",
            json!({"pool": "q", "weight": 2.5, "resource_limits": {"cpu": 1}}),
        )
        .await;
    assert_eq!(op["pool"], "q", "{op}");
    assert_eq!(op["spec"]["weight"], 2.5, "{op}");
    assert_eq!(op["spec"]["resource_limits"], json!({"cpu": 1.0}), "{op}");
    let events = server
        .get("/api/v1/events?operation=u&kind=operation_updated")
        .await;
    assert_eq!(events[0]["pool"], "q", "{events}");
    assert_eq!(events[0]["weight"], 2.5, "{events}");

    // Rejected updates change nothing.
    for (path, body, status, code) in [
        (
            "/api/v1/operations/nope/update",
            json!({"weight": 2}),
            404,
            1915,
        ),
        ("/api/v1/operations/u/update", json!({"weight": -1}), 400, 1),
        (
            "/api/v1/operations/u/update",
            json!({"weight": "x"}),
            400,
            100_400,
        ),
        (
            "/api/v1/operations/u/update",
            json!({"resource_limits": {"cpuu": 1}}),
            400,
            100_400,
        ),
    ] {
        let (s, e) = server.call("POST", path, Some(body.clone())).await;
        assert_eq!(
            (s, &e["code"]),
            (status, &json!(code)),
            "{path} {body}: {e}"
        );
    }
    let op = server.get("/api/v1/operations/u").await;
    assert_eq!(
        (&op["pool"], &op["spec"]["weight"]),
        (&json!("q"), &json!(2.5))
    );

    // After a restart the operation is where the update put it.
    server.stop().await;
    let server = common::start_config(dir.path(), config()).await;
    let op = server.get("/api/v1/operations/u").await;
    assert_eq!(
        (&op["pool"], &op["state"]),
        (&json!("q"), &json!("running")),
        "{op}"
    );
    server
        .wait_for(
            "the restored operation in q",
            Duration::from_secs(10),
            || async {
                let tree = server.get("/api/v1/tree").await;
                let o = &tree["snapshot"]["operations"]["u"];
                o["pool"] == "q" && o["weight"] == 2.5
            },
        )
        .await;
    // A finished operation cannot change.
    server.post("/api/v1/operations/u/abort", json!(null)).await;
    let (s, e) = server
        .call(
            "POST",
            "/api/v1/operations/u/update",
            Some(json!({"weight": 1})),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    assert!(e["message"].as_str().unwrap().contains("aborted"), "{e}");
    server.stop().await;
}
