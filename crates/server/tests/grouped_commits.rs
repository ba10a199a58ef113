//! Heartbeats that arrive together share a store commit, and each is answered only after the
//! commit that holds its changes: every job a reply starts is already in the store when the
//! agent reads the reply (accepted work is never lost, whatever happens to the server next).

mod common;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::task::JoinSet;

const NODES: usize = 120;
const ROUNDS: usize = 8;

/// The job ids the store holds, read through a connection of our own (the server keeps its
/// database in WAL mode: readers do not wait for it).
fn stored_jobs(dir: &std::path::Path) -> BTreeSet<String> {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join("fairsched.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = conn.prepare("SELECT id FROM jobs").unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Sends `bodies[n]` to `path` for every node n at once; the replies by node, each with the
/// jobs the store held the moment it arrived.
async fn all_at_once(
    server: &Arc<common::Running>,
    dir: &std::path::Path,
    path: &'static str,
    bodies: Vec<Value>,
) -> Vec<(Value, BTreeSet<String>)> {
    let mut set = JoinSet::new();
    for (n, body) in bodies.into_iter().enumerate() {
        let server = Arc::clone(server);
        let dir = dir.to_path_buf();
        set.spawn(async move {
            let reply = server.post(path, body).await;
            (n, reply, stored_jobs(&dir))
        });
    }
    let mut replies = vec![(Value::Null, BTreeSet::new()); NODES];
    while let Some(r) = set.join_next().await {
        let (n, reply, stored) = r.unwrap();
        replies[n] = (reply, stored);
    }
    replies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_heartbeats_is_committed_before_it_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(
        common::start_config(
            dir.path(),
            json!({"pool_trees": {"pool_trees": {"default": {"pools": {"p": {}}}}}}),
        )
        .await,
    );
    let registrations = (0..NODES)
        .map(|n| json!({"node_id": format!("n{n}"), "resources": {"cpu": 2, "user_slots": 2}}))
        .collect();
    all_at_once(&server, dir.path(), "/api/v1/agent/register", registrations).await;
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(
        nodes.as_array().unwrap().len(),
        NODES,
        "every registration counts"
    );
    server
        .post(
            "/api/v1/operations",
            json!({"id": "burst", "pool": "p",
                   "tasks": [{"job_count": 2 * NODES * ROUNDS, "resources": {"cpu": 1},
                              "command": ["sleep", "60"]}]}),
        )
        .await;

    // Every round, each node reports the jobs it ran as completed and is given new ones: each
    // reply starts jobs, and each must be in the store the moment the reply arrives. (The
    // first fair-share update may come after the first heartbeats: rounds that start nothing
    // do not count.)
    let mut running: Vec<Vec<String>> = vec![Vec::new(); NODES];
    let mut started = BTreeSet::new();
    let mut rounds = 0;
    for _ in 0..(ROUNDS + 50) {
        let heartbeats = (0..NODES)
            .map(|n| {
                let finished: Vec<Value> = std::mem::take(&mut running[n])
                    .into_iter()
                    .map(|job| json!({"job": job, "outcome": "completed", "exit_code": 0}))
                    .collect();
                json!({"node_id": format!("n{n}"), "running": [], "finished": finished})
            })
            .collect();
        let replies = all_at_once(&server, dir.path(), "/api/v1/agent/heartbeat", heartbeats).await;
        for (n, (reply, stored)) in replies.iter().enumerate() {
            assert_eq!(reply["abort"], json!([]), "{reply}");
            for s in reply["start"].as_array().unwrap() {
                let job = s["job"].as_str().unwrap().to_string();
                assert!(
                    stored.contains(&job),
                    "job {job} was started by a reply before it was committed"
                );
                running[n].push(job.clone());
                started.insert(job);
            }
        }
        if !started.is_empty() {
            rounds += 1;
        }
        if rounds == ROUNDS {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(rounds, ROUNDS);
    let op = server.get("/api/v1/operations/burst").await;
    let counts = &op["job_counts"];
    assert_eq!(
        counts["running"].as_u64().unwrap() + counts["completed"].as_u64().unwrap(),
        started.len() as u64,
        "{counts}"
    );
    assert_eq!(counts["aborted"], 0, "{counts}");
    assert!(
        started.len() > NODES * ROUNDS,
        "{} jobs started",
        started.len()
    );
    Arc::into_inner(server).unwrap().stop().await;
}
