//! The event log over HTTP: `GET /api/v1/events` with its filters, and the live stream
//! (`GET /api/v1/events/stream`, Server-Sent Events) read with the API client: the backlog after
//! a sequence number, then events as they are committed; `Last-Event-ID` resumes; a stream
//! open while the server stops does not hold the shutdown.

mod common;

use fairsched_api::EventQuery;
use fairsched_api::client::{ApiClient, EventStream};
use serde_json::{Value, json};
use std::time::Duration;

fn trees() -> Value {
    json!({"pool_trees": {"default": {"pools": {"p": {}}}}})
}

async fn events(server: &common::Running, query: &str) -> Vec<Value> {
    server
        .get(&format!("/api/v1/events?{query}"))
        .await
        .as_array()
        .unwrap()
        .clone()
}

fn names(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

/// The next event of `stream`, waiting at most 10 s.
async fn next(stream: &mut EventStream) -> Value {
    let e = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream works")
        .expect("the stream goes on");
    serde_json::to_value(e).unwrap()
}

#[tokio::test]
async fn event_log_filters_and_live_stream() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_in(dir.path(), trees(), json!({})).await;
    server
        .register("n1", json!({"cpu": 2, "user_slots": 10}))
        .await;
    server
        .register("n2", json!({"cpu": 1, "user_slots": 10}))
        .await;
    for id in ["a", "b"] {
        server
            .post(
                "/api/v1/operations",
                json!({"id": id, "pool": "p",
                       "tasks": [{"job_count": 1, "resources": {"cpu": 1}, "command": ["true"]}]}),
            )
            .await;
    }
    let on_n1 = server.heartbeat_until_started("n1", 2).await;
    server
        .post(
            "/api/v1/agent/heartbeat",
            json!({"node_id": "n1", "running": [on_n1[1]],
                   "finished": [{"job": on_n1[0], "outcome": "completed", "exit_code": 0}]}),
        )
        .await;

    // Everything, oldest first, numbered.
    let all = events(&server, "").await;
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    assert!(all.iter().all(|e| e["unix_ms"].as_u64() > Some(0)));
    assert_eq!(
        names(&all[..2]),
        ["node_registered", "node_registered"],
        "{all:?}"
    );

    // Jobs are named by their job id; a finished job carries its exit code.
    let started = events(&server, "kind=allocation_started").await;
    assert_eq!(started.len(), 2, "{started:?}");
    let ids: Vec<&str> = started.iter().map(|e| e["job"].as_str().unwrap()).collect();
    assert_eq!(ids, on_n1.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(started.iter().all(|e| e.get("allocation").is_none()));
    let first_op = started[0]["operation"].as_str().unwrap().to_string();
    let finished = events(&server, "kind=allocation_finished").await;
    assert_eq!(finished.len(), 1, "{finished:?}");
    assert_eq!(
        (
            &finished[0]["job"],
            &finished[0]["exit_code"],
            &finished[0]["outcome"]
        ),
        (&json!(on_n1[0]), &json!(0), &json!("completed"))
    );

    // Filters: operation, node, job, several kinds, after, since, limit.
    let of_op = events(&server, &format!("operation={first_op}")).await;
    assert_eq!(
        names(&of_op),
        [
            "operation_state",
            "allocation_started",
            "allocation_finished",
            "operation_state"
        ],
        "{of_op:?}"
    );
    assert_eq!(of_op[3]["state"], "completed");
    let on_n2 = events(&server, "node=n2").await;
    assert_eq!(names(&on_n2), ["node_registered"]);
    assert_eq!(events(&server, &format!("job={}", on_n1[1])).await.len(), 1);
    let two = events(&server, "kind=node_registered,allocation_finished").await;
    assert_eq!(
        names(&two),
        ["node_registered", "node_registered", "allocation_finished"]
    );
    let after = events(&server, &format!("after={}", seqs[seqs.len() - 3])).await;
    assert_eq!(after.len(), 2);
    let since = all[3]["unix_ms"].as_u64().unwrap();
    let from = events(&server, &format!("since={since}")).await;
    assert!(
        from.len() >= all.len() - 3 && from.len() < all.len(),
        "{from:?}"
    );
    let newest = events(&server, "limit=2").await;
    assert_eq!(newest, all[all.len() - 2..].to_vec());
    let first = events(&server, "after=0&limit=2").await;
    assert_eq!(first, all[..2].to_vec());
    let (status, body) = server.call("GET", "/api/v1/events?after=x", None).await;
    assert_eq!((status, &body["code"]), (400, &json!(100_400)), "{body}");

    // The stream: the backlog after a point, then live events, filtered.
    let client = ApiClient::new(&server.url, None);
    let mut stream = client
        .event_stream(&EventQuery {
            node: Some("n1".into()),
            after: Some(0),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let backlog: Vec<Value> = {
        let mut v = Vec::new();
        let n1_events = events(&server, "node=n1").await;
        for _ in 0..n1_events.len() {
            v.push(next(&mut stream).await);
        }
        assert_eq!(v, n1_events);
        v
    };
    // A change on n1 arrives; one on n2 does not.
    server.post("/api/v1/nodes/n2/drain", json!(null)).await;
    server.post("/api/v1/nodes/n1/disable", json!(null)).await;
    let live = next(&mut stream).await;
    assert_eq!(
        (&live["event"], &live["node"], &live["state"]),
        (&json!("node_changed"), &json!("n1"), &json!("disabled")),
        "{live}"
    );
    let preempted = next(&mut stream).await;
    assert_eq!(
        (&preempted["event"], &preempted["job"], &preempted["reason"]),
        (
            &json!("allocation_preempted"),
            &json!(on_n1[1]),
            &json!("node_disabled")
        ),
        "{preempted}"
    );
    assert!(live["seq"].as_u64() > backlog.last().unwrap()["seq"].as_u64());

    // Last-Event-ID resumes after that event (raw SSE: `id:` lines carry the sequence).
    let resp = server
        .client
        .get(format!("{}/api/v1/events/stream?node=n1", server.url))
        .header("last-event-id", live["seq"].to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut resp = resp;
    let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&chunk).to_string();
    assert!(
        text.contains(&format!("id: {}", preempted["seq"])),
        "{text}"
    );
    assert!(text.contains("allocation_preempted"), "{text}");

    // A server stops even with streams open; the streams end.
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("the server stops with a stream open");
    let end = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("the stream ends");
    assert!(matches!(end, Ok(None) | Err(_)), "{end:?}");
    drop(resp);

    // Sequence numbers go on after a restart; the log is kept.
    let server = common::start_in(dir.path(), trees(), json!({})).await;
    server
        .register("n1", json!({"cpu": 2, "user_slots": 10}))
        .await;
    let again = events(&server, "node=n1&limit=1").await;
    assert_eq!(again[0]["event"], "node_registered");
    assert!(
        again[0]["seq"].as_u64() > preempted["seq"].as_u64(),
        "{again:?}"
    );
    assert_eq!(
        events(&server, "after=0&limit=10000").await.len(),
        all.len() + 5
    );
    server.stop().await;
}
