//! A typed client of the fairsched HTTP API (used by the CLI and the agent).

use crate::*;
use serde::de::DeserializeOwned;

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
            ClientError::Http(_) => None,
        }
    }
}

/// A client bound to one server.
#[derive(Clone, Debug)]
pub struct ApiClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl ApiClient {
    /// `base` is the server URL (`http://127.0.0.1:9090`); `token` goes as a bearer token.
    pub fn new(base: &str, token: Option<String>) -> ApiClient {
        Self::with_timeout(base, token, std::time::Duration::from_secs(30))
    }

    /// As [`ApiClient::new`], with requests that fail after `timeout`.
    pub fn with_timeout(
        base: &str,
        token: Option<String>,
        timeout: std::time::Duration,
    ) -> ApiClient {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .expect("a reqwest client with default settings");
        // `127.0.0.1:9090` means `http://127.0.0.1:9090`.
        let base = base.trim().trim_end_matches('/');
        let base = if base.contains("://") {
            base.to_string()
        } else {
            format!("http://{base}")
        };
        ApiClient { base, token, http }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
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

    /// Sends the request; a successful response, or the server's error.
    async fn respond(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let request = match &self.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        };
        let response = request.send().await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let bytes = response.bytes().await?;
        Err(ClientError::Api(
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
        ))
    }

    fn path(template: &str, param: &str, value: &str) -> String {
        template.replace(&format!("{{{param}}}"), value)
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
        let path = Self::path(routes::OPERATION, "id", id);
        self.send(self.http.get(self.url(&path))).await
    }

    pub async fn abort_operation(&self, id: &str) -> Result<OperationView, ClientError> {
        let path = Self::path(routes::OPERATION_ABORT, "id", id);
        self.send(self.http.post(self.url(&path))).await
    }

    pub async fn update_operation(
        &self,
        id: &str,
        update: &UpdateOperation,
    ) -> Result<OperationView, ClientError> {
        let path = Self::path(routes::OPERATION_UPDATE, "id", id);
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
        let path = Self::path(routes::OPERATION_LOGS, "id", id);
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
        let path = Self::path(routes::POOL, "name", name);
        let request = self
            .http
            .put(self.url(&path))
            .query(&tree_query(tree))
            .json(update);
        self.send(request).await
    }

    /// Removes a pool from `tree` (`None`: the default tree).
    pub async fn remove_pool(&self, tree: Option<&str>, name: &str) -> Result<Value, ClientError> {
        let path = Self::path(routes::POOL, "name", name);
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
        let path = Self::path(template, "id", id);
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
