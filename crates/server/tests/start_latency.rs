//! A submitted operation's jobs start without waiting for the next periodic fair-share
//! update: its arrival starts one.

mod common;

use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_new_operation_starts_before_the_next_periodic_update() {
    // Updates every 20 s: the first one runs at start, the next only 20 s later.
    let server = common::start(
        Value::Null,
        json!({"fair_share_update_period_ms": 20_000, "node_heartbeat_period_ms": 50}),
    )
    .await;
    server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    // Past the first update.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let submitted = Instant::now();
    server
        .post(
            "/api/v1/operations",
            json!({"id": "quick", "tasks": [{"job_count": 1, "resources": {"cpu": 1},
                   "command": ["true"]}]}),
        )
        .await;
    let started = server.heartbeat_until_started("n1", 1).await;
    assert_eq!(started.len(), 1);
    let waited = submitted.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "the job started {waited:?} after its submission"
    );
    server.stop().await;
}
