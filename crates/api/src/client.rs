//! A typed client of the fairsched HTTP API (used by the CLI and the agent).

use crate::*;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// What can go wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error body.
    #[error("{0}")]
    Api(ApiError),
    /// The server could not be reached or answered something unreadable. Shown with the
    /// server's address and the root cause only (reqwest's own message repeats itself).
    #[error("{}", http_message(.0))]
    Http(reqwest::Error),
    /// The request was not sent: what it names cannot be (an empty id, `..`).
    #[error("{0}")]
    Invalid(String),
}

impl From<reqwest::Error> for ClientError {
    fn from(e: reqwest::Error) -> ClientError {
        ClientError::Http(e)
    }
}

/// `cannot connect to the server at URL (Connection refused (os error 111))`.
fn http_message(e: &reqwest::Error) -> String {
    let mut root: &dyn std::error::Error = e;
    while let Some(next) = root.source() {
        root = next;
    }
    let server = e
        .url()
        .map(|u| format!("{}://{}", u.scheme(), u.authority()))
        .unwrap_or_else(|| "its address".into());
    let cause = root.to_string();
    if e.is_connect() {
        format!("cannot connect to the server at {server} ({cause}); is it running there?")
    } else if e.is_timeout() {
        format!("the server at {server} did not answer in time")
    } else if e.is_builder() {
        format!("bad server address: {cause}")
    } else {
        format!("cannot talk to the server at {server}: {cause}")
    }
}

impl ClientError {
    /// The API error code, if the server answered with one.
    pub fn code(&self) -> Option<u32> {
        match self {
            ClientError::Api(e) => Some(e.code),
            ClientError::Http(_) | ClientError::Invalid(_) => None,
        }
    }
}

/// A client of a cluster's servers: one, or several of which one leads and the others stand
/// by.
///
/// With several, a request goes to the server that answered last; when that one cannot be
/// reached (the connection fails, so the request did nothing) or answers that it is not the
/// leader ([`codes::NOT_LEADER`]), it goes to the leader that answer names, else to the next
/// server, until each was tried once. A request that reached a server and failed otherwise
/// (a timeout included: it may have been done) is not sent again, and the next request
/// starts with the next server.
#[derive(Clone, Debug)]
pub struct ApiClient {
    /// The servers' base URLs, in the order given, then any leader a standby named.
    servers: Arc<RwLock<Vec<String>>>,
    /// The index of the one that answered last.
    current: Arc<AtomicUsize>,
    token: Option<String>,
    http: reqwest::Client,
}

/// The longest wait for a connection to a server.
/// How long an idle connection is kept for the next request.
pub const POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// `127.0.0.1:9090` means `http://127.0.0.1:9090`; no trailing `/`.
fn base_url(server: &str) -> String {
    let base = server.trim().trim_end_matches('/');
    if base.contains("://") {
        base.to_string()
    } else {
        format!("http://{base}")
    }
}

impl ApiClient {
    /// `servers` is the server's URL (`http://127.0.0.1:9090`), or several separated by
    /// commas (`http://a:9090,http://b:9090`); `token` goes as a bearer token.
    pub fn new(servers: &str, token: Option<String>) -> ApiClient {
        Self::with_timeout(servers, token, std::time::Duration::from_secs(30))
    }

    /// Whether requests carry a token (the server then knows who calls).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// As [`ApiClient::new`], with requests that fail after `timeout`.
    pub fn with_timeout(
        servers: &str,
        token: Option<String>,
        timeout: std::time::Duration,
    ) -> ApiClient {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            // A server that is down (its machine silent, not refusing) is given up on soon,
            // for the next one.
            .connect_timeout(timeout.min(CONNECT_TIMEOUT))
            // The server closes a connection that sends no request for 30 s
            // (`fairsched_server::http::HEADER_READ_TIMEOUT`): closed here first, a request
            // never goes out on a connection the server is closing.
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build()
            .expect("a reqwest client with default settings");
        let mut list: Vec<String> = servers
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(base_url)
            .collect();
        if list.is_empty() {
            // An empty address: requests fail, naming it.
            list.push(base_url(servers));
        }
        ApiClient {
            servers: Arc::new(RwLock::new(list)),
            current: Arc::new(AtomicUsize::new(0)),
            token,
            http,
        }
    }

    /// The server that answered last (the first one given before any did).
    pub fn base(&self) -> String {
        let servers = self.servers();
        servers[self.current.load(Ordering::Relaxed) % servers.len()].clone()
    }

    /// Every server given, in order, then any leader a standby named.
    pub fn servers(&self) -> Vec<String> {
        self.servers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base(), path)
    }

    /// Remembers `server` as the one that answered (added to the list if a standby named it).
    fn answered(&self, server: &str) {
        let mut servers = self.servers.write().unwrap_or_else(|e| e.into_inner());
        let at = match servers.iter().position(|s| s == server) {
            Some(at) => at,
            None => {
                servers.push(server.to_string());
                servers.len() - 1
            }
        };
        self.current.store(at, Ordering::Relaxed);
    }

    async fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let response = self.respond(request).await?;
        let bytes = response.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ClientError::Api(ApiError::new(
                codes::GENERIC,
                format!("unreadable reply from the server: {e}"),
            ))
        })
    }

    /// Sends the request (built on [`ApiClient::base`]) to the leader among the servers (see
    /// [`ApiClient`]); a successful response, or the server's error.
    async fn respond(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let request = match &self.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        };
        let (http, request) = request.build_split();
        let request = request?;
        let mut targets = self.servers();
        let first = self.current.load(Ordering::Relaxed) % targets.len();
        let rest = path_and_query(request.url(), &targets[first]);
        let mut target = first;
        // Each server is asked once at most.
        let mut tried = vec![false; targets.len()];
        let mut refusals: Vec<String> = Vec::new();
        let mut standby: Option<ApiError> = None;
        loop {
            let mut attempt = request
                .try_clone()
                .expect("API requests have no streamed body");
            *attempt.url_mut() = reqwest::Url::parse(&format!("{}{rest}", targets[target]))
                .map_err(|e| {
                    ClientError::Api(ApiError::new(
                        codes::GENERIC,
                        format!("bad server address {}: {e}", targets[target]),
                    ))
                })?;
            tried[target] = true;
            let mut named = None;
            match http.execute(attempt).await {
                Ok(response) if response.status().is_success() => {
                    self.answered(&targets[target]);
                    return Ok(response);
                }
                Ok(response) => {
                    let error = error_of(response).await?;
                    if error.code != codes::NOT_LEADER {
                        return Err(ClientError::Api(error));
                    }
                    refusals.push(format!("{} is not the leader", targets[target]));
                    named = error
                        .attributes
                        .get("leader")
                        .and_then(Value::as_str)
                        .map(base_url);
                    standby = Some(error);
                }
                // Not connected: the request did nothing there.
                Err(e) if e.is_connect() && targets.len() > 1 => {
                    refusals.push(format!("{} cannot be reached", targets[target]));
                    if tried.iter().all(|&t| t) && standby.is_none() {
                        return Err(e.into());
                    }
                }
                Err(e) => {
                    // It may have been done: not sent again. But the next request starts
                    // with the next server: this one may be paused or cut off while another
                    // leads (a standby there names the leader).
                    if targets.len() > 1 {
                        self.current
                            .store((target + 1) % targets.len(), Ordering::Relaxed);
                    }
                    return Err(e.into());
                }
            }
            if let Some(leader) = &named
                && !targets.contains(leader)
            {
                targets.push(leader.clone());
                tried.push(false);
            }
            let named = named.and_then(|l| targets.iter().position(|t| *t == l));
            let untried = (1..=targets.len())
                .map(|k| (target + k) % targets.len())
                .find(|&i| !tried[i]);
            target = match named.filter(|&i| !tried[i]).or(untried) {
                Some(next) => next,
                None => {
                    let last = standby.expect("a standby answered");
                    if refusals.len() == 1 {
                        return Err(ClientError::Api(last));
                    }
                    return Err(ClientError::Api(no_leader(&refusals, last)));
                }
            };
        }
    }

    /// `template` with `{param}` replaced by `value` as one path segment (percent-encoded, so
    /// that `../x` or `a/b` name an object, not another route). An empty value, `.` or `..`
    /// can name nothing (a URL takes them for the path itself): refused here.
    fn path(template: &str, param: &str, value: &str) -> Result<String, ClientError> {
        if matches!(value, "" | "." | "..") {
            return Err(ClientError::Invalid(format!(
                "{value:?} is not a valid {param}: names are letters, digits, `.`, `_` and \
                 `-`"
            )));
        }
        /// Everything but the unreserved characters of RFC 3986.
        const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'.')
            .remove(b'_')
            .remove(b'~');
        let value = percent_encoding::utf8_percent_encode(value, SEGMENT).to_string();
        Ok(template.replace(&format!("{{{param}}}"), &value))
    }

    /// The server's `/metrics` page (Prometheus text format).
    pub async fn metrics_text(&self) -> Result<String, ClientError> {
        let response = self.respond(self.http.get(self.url("/metrics"))).await?;
        Ok(response.text().await?)
    }

    pub async fn submit(&self, op: &SubmitOperation) -> Result<SubmitReply, ClientError> {
        self.submit_with(op, false).await
    }

    /// [`ApiClient::submit`]; `wait_for_nodes`: accepted even if no node can hold its jobs yet.
    pub async fn submit_with(
        &self,
        op: &SubmitOperation,
        wait_for_nodes: bool,
    ) -> Result<SubmitReply, ClientError> {
        let mut request = self.http.post(self.url(routes::OPERATIONS)).json(op);
        if wait_for_nodes {
            request = request.query(&[("wait_for_nodes", "true")]);
        }
        self.send(request).await
    }

    pub async fn list_operations(
        &self,
        query: &OperationQuery,
    ) -> Result<Vec<OperationView>, ClientError> {
        self.send(self.http.get(self.url(routes::OPERATIONS)).query(query))
            .await
    }

    pub async fn get_operation(&self, id: &str) -> Result<OperationView, ClientError> {
        let path = Self::path(routes::OPERATION, "id", id)?;
        self.send(self.http.get(self.url(&path))).await
    }

    pub async fn abort_operation(&self, id: &str) -> Result<OperationView, ClientError> {
        let path = Self::path(routes::OPERATION_ABORT, "id", id)?;
        self.send(self.http.post(self.url(&path))).await
    }

    pub async fn update_operation(
        &self,
        id: &str,
        update: &UpdateOperation,
    ) -> Result<OperationView, ClientError> {
        let path = Self::path(routes::OPERATION_UPDATE, "id", id)?;
        self.send(self.http.post(self.url(&path)).json(update))
            .await
    }

    pub async fn operation_logs(&self, id: &str) -> Result<Vec<JobLogs>, ClientError> {
        self.operation_logs_with(id, &LogsQuery::default()).await
    }

    /// The output of operation `id`'s jobs that `query` names, from where it says.
    pub async fn operation_logs_with(
        &self,
        id: &str,
        query: &LogsQuery,
    ) -> Result<Vec<JobLogs>, ClientError> {
        let path = Self::path(routes::OPERATION_LOGS, "id", id)?;
        self.send(self.http.get(self.url(&path)).query(query)).await
    }

    /// Pools of `tree` (`None`: the default tree) as the orchid shows them (name → fields).
    pub async fn list_pools(&self, tree: Option<&str>) -> Result<Map<String, Value>, ClientError> {
        let request = self
            .http
            .get(self.url(routes::POOLS))
            .query(&tree_query(tree));
        self.send(request).await
    }

    /// Creates a pool in `tree` (`None`: the default tree).
    pub async fn create_pool(
        &self,
        tree: Option<&str>,
        pool: &CreatePool,
    ) -> Result<Value, ClientError> {
        let request = self
            .http
            .post(self.url(routes::POOLS))
            .query(&tree_query(tree))
            .json(pool);
        self.send(request).await
    }

    /// Replaces a pool's options and/or moves it, in `tree` (`None`: the default tree).
    pub async fn update_pool(
        &self,
        tree: Option<&str>,
        name: &str,
        update: &UpdatePool,
    ) -> Result<Value, ClientError> {
        let path = Self::path(routes::POOL, "name", name)?;
        let request = self
            .http
            .put(self.url(&path))
            .query(&tree_query(tree))
            .json(update);
        self.send(request).await
    }

    /// Removes a pool from `tree` (`None`: the default tree).
    pub async fn remove_pool(&self, tree: Option<&str>, name: &str) -> Result<Value, ClientError> {
        let path = Self::path(routes::POOL, "name", name)?;
        let request = self.http.delete(self.url(&path)).query(&tree_query(tree));
        self.send(request).await
    }

    /// Every pool tree, sorted by name.
    pub async fn pool_trees(&self) -> Result<Vec<PoolTreeView>, ClientError> {
        self.send(self.http.get(self.url(routes::POOL_TREES))).await
    }

    pub async fn list_nodes(&self) -> Result<Vec<NodeView>, ClientError> {
        self.send(self.http.get(self.url(routes::NODES))).await
    }

    /// `POST /api/v1/nodes/{id}/<action>` (`disable`, `enable`, `drain`, `undrain`); the node
    /// after the change.
    pub async fn node_action(&self, id: &str, action: &str) -> Result<NodeView, ClientError> {
        let template = match action {
            "disable" => routes::NODE_DISABLE,
            "enable" => routes::NODE_ENABLE,
            "drain" => routes::NODE_DRAIN,
            _ => routes::NODE_UNDRAIN,
        };
        let path = Self::path(template, "id", id)?;
        self.send(self.http.post(self.url(&path))).await
    }

    /// A tree (`None`: the default tree): its name, configuration and orchid snapshot.
    pub async fn tree(&self, tree: Option<&str>) -> Result<Value, ClientError> {
        let request = self
            .http
            .get(self.url(routes::TREE))
            .query(&tree_query(tree));
        self.send(request).await
    }

    /// Replaces a tree's configuration (`None`: the default tree's), or, with `dry_run`, only
    /// says what would change.
    pub async fn apply_tree(
        &self,
        tree: Option<&str>,
        config: &Value,
        dry_run: bool,
    ) -> Result<TreeApplyReply, ClientError> {
        let request = self
            .http
            .put(self.url(routes::TREE))
            .query(&TreeApplyQuery {
                dry_run,
                tree: tree.map(str::to_string),
            })
            .json(config);
        self.send(request).await
    }

    /// `GET /api/v1/events`: the event log, oldest first.
    pub async fn events(&self, query: &EventQuery) -> Result<Vec<EventView>, ClientError> {
        self.send(self.http.get(self.url(routes::EVENTS)).query(query))
            .await
    }

    /// `GET /api/v1/events/stream`: the events that pass `query` as they are logged (after
    /// `query.after`'s backlog, when given). The stream has no overall timeout; it fails when
    /// the server sends nothing (not even its keep-alive) for a minute.
    pub async fn event_stream(&self, query: &EventQuery) -> Result<EventStream, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .read_timeout(std::time::Duration::from_secs(60))
            .build()?;
        let request = http
            .get(self.url(routes::EVENTS_STREAM))
            .query(query)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        let response = self.respond(request).await?;
        Ok(EventStream {
            response,
            buffer: Vec::new(),
            data: String::new(),
        })
    }

    pub async fn register(&self, node: &RegisterNode) -> Result<RegisterReply, ClientError> {
        self.send(self.http.post(self.url(routes::AGENT_REGISTER)).json(node))
            .await
    }

    pub async fn heartbeat(&self, hb: &Heartbeat) -> Result<HeartbeatReply, ClientError> {
        self.send(self.http.post(self.url(routes::AGENT_HEARTBEAT)).json(hb))
            .await
    }
}

/// What follows `base` in `url`: its path (without the base's own path) and query.
fn path_and_query(url: &reqwest::Url, base: &str) -> String {
    let base_path = reqwest::Url::parse(base)
        .map(|b| b.path().trim_end_matches('/').to_string())
        .unwrap_or_default();
    let path = url.path();
    let path = path.strip_prefix(base_path.as_str()).unwrap_or(path);
    match url.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_string(),
    }
}

/// The error a server answered with (its body, or the HTTP status and text).
async fn error_of(response: reqwest::Response) -> Result<ApiError, ClientError> {
    let status = response.status();
    let bytes = response.bytes().await?;
    Ok(
        serde_json::from_slice::<ApiError>(&bytes).unwrap_or_else(|_| {
            ApiError::new(
                codes::GENERIC,
                format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&bytes)
                        .chars()
                        .take(500)
                        .collect::<String>()
                ),
            )
        }),
    )
}

/// No server of several leads: what each said, then the last answer's own words.
fn no_leader(refusals: &[String], last: ApiError) -> ApiError {
    ApiError {
        message: format!(
            "no leader among the servers ({}): {}; retry in a few seconds (a standby takes \
             over once the leader's lease expires)",
            refusals.join(", "),
            last.message
        ),
        ..last
    }
}

fn tree_query(tree: Option<&str>) -> TreeQuery {
    TreeQuery {
        tree: tree.map(str::to_string),
    }
}

/// Events as the server sends them (Server-Sent Events).
#[derive(Debug)]
pub struct EventStream {
    response: reqwest::Response,
    /// Bytes received, not yet a whole line.
    buffer: Vec<u8>,
    /// The `data:` lines of the message being read.
    data: String,
}

impl EventStream {
    /// The next event; `None` when the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<EventView>, ClientError> {
        loop {
            while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let raw: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&raw);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    // The end of a message (comments and keep-alives carry no data).
                    if self.data.is_empty() {
                        continue;
                    }
                    let data = std::mem::take(&mut self.data);
                    return serde_json::from_str(&data).map(Some).map_err(|e| {
                        ClientError::Api(ApiError::new(
                            codes::GENERIC,
                            format!("unreadable event from the server: {e}"),
                        ))
                    });
                }
                if let Some(rest) = line.strip_prefix("data:") {
                    if !self.data.is_empty() {
                        self.data.push('\n');
                    }
                    self.data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                }
                // `id:`, `event:`, `retry:` and `:` comments: nothing to keep.
            }
            match self.response.chunk().await? {
                Some(bytes) => self.buffer.extend_from_slice(&bytes),
                None => return Ok(None),
            }
        }
    }
}
