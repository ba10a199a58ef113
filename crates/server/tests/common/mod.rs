//! A real server on 127.0.0.1 (port 0) for the tests that talk HTTP to it, and a fake agent.

#![allow(dead_code)]

use fairsched_server::{Server, ServerConfig};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The server's log lines (`info` and above, as text) while the guard of [`capture_logs`]
/// lives, on this thread: a `#[tokio::test]` runs the server's tasks on its own thread, and
/// `Server::bind` (the start-up) on the caller's.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines that contain every one of `parts`.
    pub fn lines_with(&self, parts: &[&str]) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_string)
            .collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this thread's log lines until the guard is dropped.
///
/// A second dispatcher, never dropped, is registered first. While only one dispatcher exists,
/// `tracing` computes the interest of a callsite hit for the first time from the *hitting
/// thread's* default dispatcher: a server start in another test (no subscriber on its thread)
/// then caches "never" for a log line this test waits for, and the line is lost. With two
/// dispatchers alive, the interest is computed from all of them.
pub fn capture_logs() -> (Logs, tracing::subscriber::DefaultGuard) {
    static KEEPER: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

/// `target/test-artifacts` (under `CARGO_TARGET_DIR` when set), created.
pub fn artifacts_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("..")
                .join("target")
        });
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A served server; dropping it stops it.
pub struct Running {
    pub url: String,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
    /// Each node's credential from its last registration through [`Running::register`] or
    /// [`Running::register_as`]; [`Running::heartbeat`] sends it.
    pub credentials: Mutex<std::collections::BTreeMap<String, String>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts a server with `pool_trees` (the `PoolTrees` layout) and `scheduler` settings.
pub async fn start(pool_trees: Value, scheduler: Value) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut running = start_in(dir.path(), pool_trees, scheduler).await;
    running._dir = Some(dir);
    running
}

/// Starts a server on a new store with `config` (`ServerConfig` fields; `listen` and
/// `data_dir` are set here).
pub async fn start_with(config: Value) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut running = start_config(dir.path(), config).await;
    running._dir = Some(dir);
    running
}

/// Starts a server on the store in `dir` (a restart when it was used before).
pub async fn start_in(dir: &std::path::Path, pool_trees: Value, scheduler: Value) -> Running {
    start_config(
        dir,
        json!({"pool_trees": pool_trees, "scheduler": scheduler}),
    )
    .await
}

/// Starts a server on the store in `dir` with `config` (`ServerConfig` fields; `listen` and
/// `data_dir` are set here).
pub async fn start_config(dir: &std::path::Path, config: Value) -> Running {
    try_start_config(dir, config).await.unwrap()
}

/// [`start_config`], or why the server does not start.
pub async fn try_start_config(dir: &std::path::Path, mut config: Value) -> anyhow::Result<Running> {
    config["listen"] = json!("127.0.0.1:0");
    config["data_dir"] = json!(dir);
    let config: ServerConfig = serde_json::from_value(config).unwrap();
    let server = Server::bind(&config).await?;
    Ok(serve(server))
}

/// Starts a server on `store` with `config` (`ServerConfig` fields; `listen` is set here).
pub async fn start_on_store(store: Box<dyn fairsched_store::Store>, mut config: Value) -> Running {
    config["listen"] = json!("127.0.0.1:0");
    let config: ServerConfig = serde_json::from_value(config).unwrap();
    serve(Server::bind_with_store(&config, store).await.unwrap())
}

/// Serves `server` until the [`Running`] is stopped or dropped.
fn serve(server: Server) -> Running {
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    Running {
        url: format!("http://{addr}"),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        stop: Some(stop),
        task: Some(task),
        _dir: None,
        credentials: Mutex::default(),
    }
}

impl Running {
    /// Stops the server and waits (at most 10 s) until it has stopped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the server stops within 10 s")
                .unwrap()
                .unwrap();
        }
    }

    /// Waits (at most `limit`) for the server to stop by itself; what `serve` returned.
    pub async fn exited(mut self, limit: Duration) -> anyhow::Result<()> {
        let task = self.task.take().expect("a served server");
        tokio::time::timeout(limit, task)
            .await
            .expect("the server stops by itself")
            .unwrap()
    }

    /// Any request: status and JSON body (`Value::Null` when the body is not JSON).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(None, method, path, body).await
    }

    /// Any request with `token` (if any) as `Authorization: Bearer`: status and JSON body.
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.client.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get_text(&self, path: &str) -> (u16, String, String) {
        let resp = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (status, ctype, resp.text().await.unwrap())
    }

    pub async fn get(&self, path: &str) -> Value {
        let (status, _, body) = self.get_text(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    pub async fn post(&self, path: &str, body: Value) -> Value {
        let resp = self
            .client
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert_eq!(status, 200, "POST {path} {body}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Registers a node as an agent would (keeping its credential).
    pub async fn register(&self, node: &str, resources: Value) {
        let reply = self
            .post(
                "/api/v1/agent/register",
                json!({"node_id": node, "resources": resources}),
            )
            .await;
        self.keep_credential(node, &reply);
    }

    fn keep_credential(&self, node: &str, reply: &Value) {
        let credential = reply["node_credential"].as_str().unwrap().to_string();
        self.credentials
            .lock()
            .unwrap()
            .insert(node.to_string(), credential);
    }

    /// The credential of `node`'s last registration here.
    pub fn credential(&self, node: &str) -> Option<String> {
        self.credentials.lock().unwrap().get(node).cloned()
    }

    /// Registers a node with the agents' `token` and `tags`.
    pub async fn register_as(&self, token: &str, node: &str, resources: Value, tags: &[&str]) {
        let (status, body) = self
            .call_as(
                Some(token),
                "POST",
                "/api/v1/agent/register",
                Some(json!({"node_id": node, "resources": resources, "tags": tags})),
            )
            .await;
        assert_eq!(status, 200, "register {node}: {body}");
        self.keep_credential(node, &body);
    }

    /// One heartbeat of `node` reporting `running` (job ids); the reply.
    pub async fn heartbeat(&self, node: &str, running: &[String]) -> Value {
        self.post(
            "/api/v1/agent/heartbeat",
            json!({"node_id": node, "running": running,
                   "node_credential": self.credential(node)}),
        )
        .await
    }

    /// One heartbeat of `node` as a well-behaved agent running `running`: jobs it is told to
    /// start are added, jobs it is told to abort are removed. The reply.
    pub async fn heartbeat_running(&self, node: &str, running: &mut Vec<String>) -> Value {
        let hb = self.heartbeat(node, running).await;
        let aborted: Vec<&str> = hb["abort"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        running.retain(|j| !aborted.contains(&j.as_str()));
        for s in hb["start"].as_array().unwrap() {
            running.push(s["job"].as_str().unwrap().to_string());
        }
        hb
    }

    /// Heartbeats `node` every 50 ms (for at most 10 s) until `count` jobs were started on it;
    /// their job ids.
    pub async fn heartbeat_until_started(&self, node: &str, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut started = Vec::new();
        loop {
            self.heartbeat_running(node, &mut started).await;
            if started.len() >= count {
                return started;
            }
            assert!(
                Instant::now() < deadline,
                "only {} of {count} jobs started on {node} in 10 s",
                started.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls `check` every 50 ms for at most `limit`; panics with `what` when it never holds.
    pub async fn wait_for<F, Fut>(&self, what: &str, limit: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + limit;
        while !check().await {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
