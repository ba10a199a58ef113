//! A store that cannot write (a full or read-only disk): a change whose commit failed did not
//! happen (not in memory, not in the published view, no job started for it), the server says
//! it is read-only and refuses changes and heartbeats until the store can write, then resumes
//! by itself. The store's failures are injected by a wrapper around the real SQLite store; the
//! real full disk is `crates/fairsched/tests/e2e_full_disk.rs`.

mod common;

use fairsched_store::{
    Batch, EventFilter, Loaded, SqliteStore, Store, StoreError, StoreRead, StoredEvent,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The SQLite store, whose writes fail while `full` is set.
struct Faulty {
    inner: SqliteStore,
    full: Arc<AtomicBool>,
    /// Commits that failed.
    failed: Arc<AtomicUsize>,
    /// The next commit panics (a bug anywhere in the actor).
    panic: Arc<AtomicBool>,
}

fn disk_full() -> StoreError {
    StoreError::Other("database or disk is full (injected)".into())
}

impl Store for Faulty {
    fn load(&self) -> Result<Loaded, StoreError> {
        self.inner.load()
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        assert!(
            !self.panic.load(Ordering::SeqCst),
            "injected panic in a commit"
        );
        if self.full.load(Ordering::SeqCst) && !batch.is_empty() {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(disk_full());
        }
        self.inner.commit(batch)
    }
    fn prune(
        &mut self,
        before_unix_ms: u64,
        max_operations: usize,
        max_events: usize,
    ) -> Result<fairsched_store::Pruned, StoreError> {
        self.inner.prune(before_unix_ms, max_operations, max_events)
    }
    fn check_writable(&mut self) -> Result<(), StoreError> {
        if self.full.load(Ordering::SeqCst) {
            return Err(disk_full());
        }
        self.inner.check_writable()
    }
    fn reader(&self) -> Result<Box<dyn StoreRead>, StoreError> {
        self.inner.reader()
    }
}

impl StoreRead for Faulty {
    fn job_logs(&self, operation: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        self.inner.job_logs(operation)
    }
    fn events(&self, filter: &EventFilter) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.events(filter)
    }
    fn operation(
        &self,
        id: &str,
    ) -> Result<
        Option<(
            fairsched_store::StoredOperation,
            Vec<fairsched_store::StoredJob>,
        )>,
        StoreError,
    > {
        self.inner.operation(id)
    }
    fn operation_state(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.inner.operation_state(id)
    }
    fn operations(
        &self,
        filter: &fairsched_store::OperationFilter,
    ) -> Result<Vec<fairsched_store::StoredOperation>, StoreError> {
        self.inner.operations(filter)
    }
}

struct Setup {
    server: common::Running,
    full: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
    panic: Arc<AtomicBool>,
    dir: tempfile::TempDir,
}

async fn start() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let full = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicUsize::new(0));
    let panic = Arc::new(AtomicBool::new(false));
    let store = Faulty {
        inner: SqliteStore::open(dir.path()).unwrap(),
        full: full.clone(),
        failed: failed.clone(),
        panic: panic.clone(),
    };
    let server = common::start_on_store(
        Box::new(store),
        json!({
            "data_dir": dir.path(),
            "scheduler": {"fair_share_update_period_ms": 20, "node_heartbeat_period_ms": 20},
        }),
    )
    .await;
    Setup {
        server,
        full,
        failed,
        panic,
        dir,
    }
}

fn op(id: &str, jobs: u32) -> Value {
    json!({"id": id, "tasks": [{"job_count": jobs, "resources": {"cpu": 1},
        "command": ["true"]}]})
}

async fn operation_ids(server: &common::Running) -> Vec<String> {
    server
        .get("/api/v1/operations")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect()
}

/// Asserts a refusal because of the store: HTTP 503, code 100503, a message that says what
/// happened.
fn assert_read_only(what: &str, status: u16, body: &Value) {
    assert_eq!(status, 503, "{what}: {body}");
    assert_eq!(body["code"], 100_503, "{what}: {body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("store cannot write") && message.contains("disk is full"),
        "{what}: {message}"
    );
}

async fn wait_writable(s: &Setup) {
    s.server
        .wait_for(
            "the server to leave read-only",
            Duration::from_secs(10),
            || async { s.server.get("/api/v1/status").await["read_only"] == json!(false) },
        )
        .await;
}

#[tokio::test]
async fn a_submission_whose_commit_failed_leaves_no_trace_and_starts_no_job() {
    let s = start().await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    assert_eq!(
        s.server.get("/api/v1/status").await["read_only"],
        json!(false)
    );

    s.full.store(true, Ordering::SeqCst);
    let (status, body) = s
        .server
        .call("POST", "/api/v1/operations", Some(op("lost", 2)))
        .await;
    assert_read_only("the submit", status, &body);
    assert!(
        body["message"].as_str().unwrap().contains("not made"),
        "{body}"
    );
    assert!(s.failed.load(Ordering::SeqCst) >= 1);

    // Not in memory, not shown, and the server says why it refuses.
    assert_eq!(operation_ids(&s.server).await, Vec::<String>::new());
    let st = s.server.get("/api/v1/status").await;
    assert_eq!(st["read_only"], json!(true), "{st}");
    assert!(
        st["read_only_reason"]
            .as_str()
            .unwrap()
            .contains("disk is full"),
        "{st}"
    );
    let (status, body) = s
        .server
        .call("POST", "/api/v1/operations", Some(op("again", 1)))
        .await;
    assert_read_only("a submit while read-only", status, &body);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("nothing was changed"),
        "{body}"
    );
    let (status, body) = s
        .server
        .call(
            "POST",
            "/api/v1/agent/heartbeat",
            Some(json!({"node_id": "n1", "running": []})),
        )
        .await;
    assert_read_only("a heartbeat while read-only", status, &body);
    let (_, _, metrics) = s.server.get_text("/metrics").await;
    assert!(metrics.contains("fairsched_store_read_only 1"), "{metrics}");

    // The disk has room again: the server resumes by itself; the refused operation never
    // existed, so nothing starts until a new one is submitted.
    s.full.store(false, Ordering::SeqCst);
    wait_writable(&s).await;
    let (_, _, metrics) = s.server.get_text("/metrics").await;
    assert!(metrics.contains("fairsched_store_read_only 0"), "{metrics}");
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    let mut running = Vec::new();
    for _ in 0..5 {
        let hb = s.server.heartbeat_running("n1", &mut running).await;
        assert_eq!(
            hb["start"],
            json!([]),
            "a job of the refused submission started"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert_eq!(operation_ids(&s.server).await, Vec::<String>::new());
    s.server.post("/api/v1/operations", op("kept", 1)).await;
    let started = s.server.heartbeat_until_started("n1", 1).await;
    assert_eq!(started.len(), 1);
    assert_eq!(operation_ids(&s.server).await, ["kept"]);
}

#[tokio::test]
async fn a_node_command_whose_commit_failed_is_not_applied_and_not_lost_at_restart() {
    let s = start().await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    s.full.store(true, Ordering::SeqCst);
    let (status, body) = s.server.call("POST", "/api/v1/nodes/n1/drain", None).await;
    assert_read_only("node drain", status, &body);
    s.full.store(false, Ordering::SeqCst);
    wait_writable(&s).await;
    // The reload dropped the node (it ran no job): it registers again, and is not draining.
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    let node = s.server.get("/api/v1/nodes/n1").await;
    assert_eq!(node["state"], "enabled", "{node}");

    // A drain that was committed is kept, in memory and across a restart.
    s.server.post("/api/v1/nodes/n1/drain", json!({})).await;
    let dir = s.dir;
    s.server.stop().await;
    let server = common::start_in(dir.path(), Value::Null, json!({})).await;
    server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    let node = server.get("/api/v1/nodes/n1").await;
    assert_eq!(node["state"], "draining", "{node}");
}

#[tokio::test]
async fn jobs_of_a_heartbeat_whose_commit_failed_are_not_started_and_start_once_later() {
    let s = start().await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    s.server.post("/api/v1/operations", op("a", 2)).await;
    // Let a fair-share update see the operation.
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.full.store(true, Ordering::SeqCst);
    let (status, body) = s
        .server
        .call(
            "POST",
            "/api/v1/agent/heartbeat",
            Some(json!({"node_id": "n1", "running": []})),
        )
        .await;
    assert_read_only("the heartbeat that would start jobs", status, &body);
    let ops = s.server.get("/api/v1/operations/a").await;
    assert_eq!(ops["job_counts"]["running"], 0, "{ops}");
    assert_eq!(ops["jobs"], json!([]), "{ops}");

    s.full.store(false, Ordering::SeqCst);
    wait_writable(&s).await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    let started = s.server.heartbeat_until_started("n1", 2).await;
    let op = s.server.get("/api/v1/operations/a").await;
    assert_eq!(op["job_counts"]["running"], 2, "{op}");
    let jobs: Vec<&str> = op["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(jobs, started.iter().map(String::as_str).collect::<Vec<_>>());
}

#[tokio::test]
async fn job_ids_after_a_reload_are_not_reused() {
    let s = start().await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    s.server.post("/api/v1/operations", op("first", 1)).await;
    let mut running = s.server.heartbeat_until_started("n1", 1).await;
    let first = running[0].clone();
    // The job ends; then a failed commit reloads the state.
    running.clear();
    let hb = json!({"node_id": "n1", "running": [],
        "finished": [{"job": first, "outcome": "completed", "exit_code": 0}]});
    s.server.post("/api/v1/agent/heartbeat", hb).await;
    s.full.store(true, Ordering::SeqCst);
    let (status, _) = s
        .server
        .call("POST", "/api/v1/operations", Some(op("refused", 1)))
        .await;
    assert_eq!(status, 503);
    s.full.store(false, Ordering::SeqCst);
    wait_writable(&s).await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    s.server.post("/api/v1/operations", op("second", 1)).await;
    let second = s.server.heartbeat_until_started("n1", 1).await;
    assert_ne!(second[0], first, "a job id was given twice");
    let events = s
        .server
        .get(&format!("/api/v1/events?job={}&limit=100", second[0]))
        .await;
    let ops: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["operation"].as_str())
        .collect();
    assert!(ops.iter().all(|o| *o == "second"), "{events}");
}

/// A panic in the actor does not leave a server that answers reads of a frozen state and
/// refuses every change: the server stops with the panic's message (the `fairsched server`
/// process then exits non-zero, for its supervisor to restart it).
#[tokio::test]
async fn a_panic_in_the_actor_stops_the_server_with_an_error() {
    let s = start().await;
    s.server
        .register("n1", json!({"cpu": 4, "user_slots": 4}))
        .await;
    s.panic.store(true, Ordering::SeqCst);
    // Its reply may be an error or a closed connection: the server is going away.
    let _ = s
        .server
        .client
        .post(format!("{}/api/v1/operations", s.server.url))
        .json(&op("boom", 1))
        .send()
        .await;
    let url = s.server.url.clone();
    let ended = s.server.exited(Duration::from_secs(10)).await;
    let message = format!("{:#}", ended.expect_err("the server stops with an error"));
    assert!(
        message.contains("actor panicked") && message.contains("injected panic"),
        "{message}"
    );
    // It no longer answers anything.
    let gone = reqwest::get(format!("{url}/api/v1/status")).await;
    assert!(gone.is_err(), "{gone:?}");
    drop(s.dir);
}
