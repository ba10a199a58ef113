//! A server's `why` says times from now ("ends within 9 min 59 s"), never in the core's
//! milliseconds, which count from the process's start and mean nothing to a reader.

mod common;

use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_says_times_from_now() {
    let server = common::start(
        json!({"pool_trees": {"default": {
            "config": {"job_reservation": {"enable": true, "timeout_ms": 1}},
            "pools": {"small": {}, "big": {}}
        }}}),
        json!({"fair_share_update_period_ms": 50}),
    )
    .await;
    server
        .register("n1", json!({"user_slots": 4, "cpu": 2, "memory": "4GiB"}))
        .await;
    let task = |jobs: u32, cpu: u32, limit: u64| {
        json!([{"job_count": jobs, "resources": {"cpu": cpu, "memory": "1GiB"},
                "command": ["true"], "time_limit_ms": limit}])
    };
    server
        .post(
            "/api/v1/operations",
            json!({"id": "small", "pool": "small", "tasks": task(3, 1, 600_000)}),
        )
        .await;
    // `small` fills the node and has a job pending: `big`'s larger job can be kept out by
    // smaller ones, so it reserves.
    let mut running = server.heartbeat_until_started("n1", 2).await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "big", "pool": "big", "tasks": task(1, 2, 60_000)}),
        )
        .await;
    // The reservation forms at a heartbeat once `big` has waited past the timeout.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let why = loop {
        server.heartbeat_running("n1", &mut running).await;
        let (_, op) = server.call("GET", "/api/v1/operations/big", None).await;
        let why = op["why"].as_str().unwrap_or_default().to_string();
        if why.contains("may use them meanwhile") {
            break why;
        }
        if std::time::Instant::now() > deadline {
            let events = server.get("/api/v1/events").await;
            panic!("no reservation: {op}\n{events}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(why.contains("ends within 9 min"), "{why}");
    assert!(!why.contains(" ms may use"), "{why}");
    server.stop().await;
}
