//! Finished operations through the API: listed, filtered and paged on the server, shown and
//! their logs read from the store; a job that ends after its operation was aborted still gets
//! its exit code and output.

mod common;

use serde_json::{Value, json};
use std::time::Duration;

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn finished_operations_are_listed_in_pages_and_read_from_the_store() {
    let server = common::start(
        json!({"pool_trees": {"default": {"pools": {"a": {"pools": {"a1": {}}}, "b": {}}}}}),
        json!({"fair_share_update_period_ms": 50}),
    )
    .await;
    server
        .register("n1", json!({"cpu": 8, "user_slots": 8}))
        .await;
    // f1..f5 finish (f2 in a1, under a; f4 by bob); `live` keeps running.
    for (id, pool, user) in [
        ("f1", "a", "alice"),
        ("f2", "a1", "alice"),
        ("f3", "b", "alice"),
        ("f4", "b", "bob"),
        ("f5", "a", "alice"),
        ("live", "b", "alice"),
    ] {
        server
            .post(
                "/api/v1/operations",
                json!({"id": id, "pool": pool, "user": user,
                       "tasks": [{"job_count": 1, "resources": {"cpu": 1}, "command": ["x"]}]}),
            )
            .await;
    }
    let jobs = server.heartbeat_until_started("n1", 6).await;
    let live_job = server.get("/api/v1/operations/live").await["jobs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let finished: Vec<Value> = jobs
        .iter()
        .filter(|j| **j != live_job)
        .map(|j| {
            json!({"job": j, "outcome": "completed", "exit_code": 0,
                        "stdout_tail": format!("hello from {j}\n")})
        })
        .collect();
    server
        .post(
            "/api/v1/agent/heartbeat",
            json!({"node_id": "n1", "running": [live_job], "finished": finished}),
        )
        .await;

    // Unfinished only: from memory.
    let running = server.get("/api/v1/operations?state=running,pending").await;
    assert_eq!(ids(&running), ["live"]);
    // Everything, newest `limit` first page, then pages after a cursor.
    let all = server.get("/api/v1/operations?jobs=false").await;
    assert_eq!(ids(&all), ["f1", "f2", "f3", "f4", "f5", "live"]);
    assert_eq!(all[0]["state"], "completed");
    assert_eq!(all[0]["job_counts"]["completed"], 1, "{all}");
    assert_eq!(all[5]["state"], "running");
    let newest = server.get("/api/v1/operations?limit=2&jobs=false").await;
    assert_eq!(ids(&newest), ["f5", "live"]);
    let first = server.get("/api/v1/operations?limit=2&after=").await;
    assert_eq!(ids(&first), ["f1", "f2"]);
    assert_eq!(first[0]["jobs"].as_array().unwrap().len(), 1, "{first}");
    let next = server.get("/api/v1/operations?limit=2&after=f2").await;
    assert_eq!(ids(&next), ["f3", "f4"]);
    // Filters, on the server: state, pool with its subtree, user.
    let done = server
        .get("/api/v1/operations?state=completed&pool=a&user=alice")
        .await;
    assert_eq!(ids(&done), ["f1", "f2", "f5"]);
    let bob = server.get("/api/v1/operations?user=bob").await;
    assert_eq!(ids(&bob), ["f4"]);
    let (status, e) = server
        .call("GET", "/api/v1/operations?after=nope", None)
        .await;
    assert_eq!(status, 404, "{e}");
    assert!(e["message"].as_str().unwrap().contains("\"nope\""), "{e}");

    // One finished operation, its logs; commands on it say it finished.
    let f3 = server.get("/api/v1/operations/f3").await;
    assert_eq!(f3["state"], "completed");
    assert_eq!(f3["jobs"][0]["exit_code"], 0, "{f3}");
    let logs = server.get("/api/v1/operations/f3/logs").await;
    assert_eq!(logs[0]["node"], "n1", "{logs}");
    assert!(
        logs[0]["stdout"]
            .as_str()
            .unwrap()
            .starts_with("hello from ")
    );
    let (status, e) = server
        .call("POST", "/api/v1/operations/f3/abort", None)
        .await;
    assert!(status >= 400, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("is already completed"),
        "{e}"
    );
    let (status, _) = server.call("GET", "/api/v1/operations/nope", None).await;
    assert_eq!(status, 404);

    // An aborted operation leaves memory at once; its job's end comes with the next
    // heartbeat and is kept.
    server
        .post("/api/v1/operations/live/abort", json!(null))
        .await;
    server
        .post(
            "/api/v1/agent/heartbeat",
            json!({"node_id": "n1", "running": [],
                   "finished": [{"job": live_job, "outcome": "aborted", "exit_code": 143,
                                 "stdout_tail": "bye\n"}]}),
        )
        .await;
    server
        .wait_for(
            "the aborted job's output",
            Duration::from_secs(5),
            || async {
                let logs = server.get("/api/v1/operations/live/logs").await;
                logs[0]["stdout"] == "bye\n"
            },
        )
        .await;
    let live = server.get("/api/v1/operations/live").await;
    assert_eq!(live["state"], "aborted");
    assert_eq!(live["jobs"][0]["exit_code"], 143, "{live}");
    assert_eq!(live["jobs"][0]["state"], "aborted", "{live}");
    server.stop().await;
}
