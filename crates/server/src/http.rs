//! HTTP handlers. Writes go to the actor by message; reads come from the published [`View`].

use crate::actor::Actor;
use crate::auth::{AclTrees, Auth, ReadAccess};
use crate::caller::Caller;
use crate::command::{Command, HistoryQuery, NodeAction, Request};
use crate::view::{OperationRecord, View};
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use fairsched_api::{
    ApiError, CreatePool, EventQuery, EventView, Heartbeat, NodeView, OPERATION_STATES,
    OperationQuery, OperationView, PoolReply, PoolTreeView, RegisterNode, SubmitReply,
    TreeApplyQuery, TreeApplyReply, TreeQuery, UpdateOperation, UpdatePool, codes, routes,
};
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// Shared by all handlers.
#[derive(Clone, Debug)]
pub struct AppState {
    pub tx: mpsc::Sender<Request>,
    pub view: watch::Receiver<Arc<View>>,
    pub agent_token: Option<String>,
    /// The users and their tokens (none: authentication is off).
    pub auth: Arc<Auth>,
    /// What `GET /metrics` encodes (the actor's counters and the view's gauges).
    pub metrics: Arc<Registry>,
    /// Committed events, for live streams.
    pub events: broadcast::Sender<Arc<EventView>>,
    /// Set when the server stops: live streams end (so that the graceful shutdown can).
    pub stopping: Arc<watch::Sender<bool>>,
    /// The trees' configurations, parsed for read checks.
    pub acl_trees: Arc<AclTrees>,
}

impl AppState {
    /// The state of a router in front of `actor` (before it runs): `view` is what
    /// `Actor::new` returned.
    pub fn new(
        tx: mpsc::Sender<Request>,
        view: watch::Receiver<Arc<View>>,
        agent_token: Option<String>,
        actor: &Actor,
    ) -> AppState {
        let registry = crate::metrics::registry(&actor.metrics(), view.clone());
        AppState {
            tx,
            view,
            agent_token,
            auth: Arc::new(Auth::off()),
            metrics: Arc::new(registry),
            events: actor.events(),
            stopping: Arc::new(watch::channel(false).0),
            acl_trees: Arc::default(),
        }
    }

    /// With `auth`'s users (authentication on when there are some).
    pub fn with_auth(self, auth: Auth) -> AppState {
        AppState {
            auth: Arc::new(auth),
            ..self
        }
    }

    /// Who may read what, on the published view `view`.
    fn reads<'a>(&self, caller: &'a Caller, view: &'a View) -> ReadAccess<'a> {
        ReadAccess::new(caller, view, &self.acl_trees)
    }

    /// `op` as `caller` may see it (its `env` redacted unless it may read it).
    fn shown(&self, caller: &Caller, op: OperationView) -> OperationView {
        let view = self.view.borrow().clone();
        self.reads(caller, &view).redact(op)
    }

    /// Refuses a read of operation `id`'s output or events by a caller who may not read it
    /// (an operation the view does not have passes: the actor answers that it does not exist).
    /// The events `caller` may read. Operations that finished are in the store only: the
    /// ones the events name are read from there to decide.
    async fn readable_events(&self, caller: &Caller, events: Vec<EventView>) -> Vec<EventView> {
        let missing = {
            let view = self.view.borrow().clone();
            self.reads(caller, &view).operations_missing(&events)
        };
        let mut finished = Vec::new();
        for id in missing {
            let stored = ask(self, caller, |r| {
                Command::History(HistoryQuery::Operation(id, r))
            })
            .await;
            if let Ok(op) = stored {
                finished.push(op);
            }
        }
        let view = self.view.borrow().clone();
        self.reads(caller, &view)
            .filter_events_with(events, &finished)
    }

    /// Refuses, unless `caller` may read operation `id`'s output, environment and events. An
    /// operation that finished (in the store only) is read from there to be checked; one that
    /// does not exist passes (the command itself answers "does not exist").
    async fn check_read(&self, caller: &Caller, id: &str) -> Result<(), Failure> {
        {
            let view = self.view.borrow().clone();
            let reads = self.reads(caller, &view);
            if reads.reads_everything() {
                return Ok(());
            }
            if let Some(op) = reads.operation(id) {
                return reads.check(op).map_err(Failure);
            }
        }
        let stored = ask(self, caller, |r| {
            Command::History(HistoryQuery::Operation(id.to_string(), r))
        })
        .await;
        match stored {
            Ok(op) => {
                let view = self.view.borrow().clone();
                self.reads(caller, &view).check(&op).map_err(Failure)
            }
            Err(_) => Ok(()),
        }
    }

    /// Ends the live streams.
    pub fn stop_streams(&self) {
        self.stopping.send_replace(true);
    }
}

/// An error reply.
#[derive(Debug)]
pub struct Failure(pub ApiError);

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure(e)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        (status, axum::Json(self.0)).into_response()
    }
}

type Reply<T> = Result<axum::Json<T>, Failure>;

/// The body as `T`; an error names the field by its path (`finished[0]: unknown field ...`).
fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, Failure> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        Failure(ApiError::new(
            codes::BAD_REQUEST,
            format!("bad request body: {e}"),
        ))
    })?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = fairsched_config::user_words(&e.inner().to_string());
        let message = if path == "." {
            format!("bad request body: {inner}")
        } else {
            format!("bad request body: {path}: {inner}")
        };
        Failure(ApiError::new(codes::BAD_REQUEST, message).with_attribute("field", path))
    })
}

async fn ask<T>(
    state: &AppState,
    caller: &Caller,
    make: impl FnOnce(oneshot::Sender<Result<T, ApiError>>) -> Command,
) -> Result<T, Failure> {
    let (tx, rx) = oneshot::channel();
    let gone = || {
        Failure(ApiError::new(
            codes::INTERNAL,
            "the scheduler is shutting down",
        ))
    };
    let request = Request {
        caller: caller.clone(),
        command: make(tx),
    };
    state.tx.send(request).await.map_err(|_| gone())?;
    rx.await.map_err(|_| gone())?.map_err(Failure)
}

fn check_token(state: &AppState, headers: &HeaderMap) -> Result<(), Failure> {
    let Some(expected) = &state.agent_token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|t| crate::auth::same_secret(t, expected)) {
        Ok(())
    } else {
        Err(Failure(ApiError::new(
            codes::AUTHENTICATION,
            "agent endpoints need the shared token (Authorization: Bearer ...)",
        )))
    }
}

fn ok<T: Serialize>(value: T) -> Reply<T> {
    Ok(axum::Json(value))
}

/// The largest request body the API takes, in bytes (8 MiB), except heartbeats'.
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// The largest heartbeat body, in bytes (64 MiB): a heartbeat after an outage reports every
/// job that ended meanwhile, each with up to 64 KiB of stdout and of stderr.
pub const MAX_HEARTBEAT_BODY_BYTES: usize = 64 << 20;

/// The API router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/assets/app.js", get(app_js))
        .route("/assets/style.css", get(style_css))
        .route("/metrics", get(metrics))
        .route(routes::OPERATIONS, get(list_operations).post(submit))
        .route(routes::OPERATION, get(get_operation))
        .route(routes::OPERATION_ABORT, post(abort))
        .route(routes::OPERATION_LOGS, get(logs))
        .route(routes::OPERATION_UPDATE, post(update_operation))
        .route(routes::POOLS, get(list_pools).post(create_pool))
        .route(
            routes::POOL,
            get(get_pool).put(update_pool).delete(remove_pool),
        )
        .route(routes::NODES, get(list_nodes))
        .route(routes::NODE, get(get_node))
        .route(routes::NODE_DISABLE, post(disable_node))
        .route(routes::NODE_ENABLE, post(enable_node))
        .route(routes::NODE_DRAIN, post(drain_node))
        .route(routes::NODE_UNDRAIN, post(undrain_node))
        .route(routes::TREE, get(tree).put(apply_tree))
        .route(routes::POOL_TREES, get(pool_trees))
        .route(routes::ORCHID_TREE, get(orchid_tree))
        .route(routes::ORCHID_POOL, get(orchid_pool))
        .route(routes::ORCHID_OPERATION, get(orchid_operation))
        .route(routes::EVENTS, get(list_events))
        .route(routes::EVENTS_STREAM, get(stream_events))
        .route(routes::AGENT_REGISTER, post(register))
        .route(
            routes::AGENT_HEARTBEAT,
            post(heartbeat).layer(DefaultBodyLimit::max(MAX_HEARTBEAT_BODY_BYTES)),
        )
        .route(routes::STATUS, get(status))
        .fallback(|| async { Failure(ApiError::new(codes::RESOLVE, "no such route")) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn(log_request))
        .with_state(state)
}

/// Names the caller of every request (a [`Caller`] extension the handlers pass to the
/// actor). With users configured, every request but the agent endpoints (which check
/// `agent_token`) and the page's own files needs a user's token, except reads (`GET`,
/// `HEAD`: the API and `/metrics`) while `authenticate_reads` is off, which go as an
/// anonymous reader; a token that is sent must be valid.
async fn authenticate(
    State(s): State<AppState>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = req.uri().path();
    // Everything else (the API, `/metrics`, unknown paths) is guarded.
    let open = [
        routes::AGENT_REGISTER,
        routes::AGENT_HEARTBEAT,
        "/",
        "/assets/app.js",
        "/assets/style.css",
    ]
    .contains(&path);
    let caller = if !s.auth.enabled() {
        Caller::Unchecked
    } else if open {
        Caller::Anonymous
    } else {
        let read = matches!(
            *req.method(),
            axum::http::Method::GET | axum::http::Method::HEAD
        );
        match req.headers().get(header::AUTHORIZATION) {
            None if read && !s.auth.authenticate_reads => Caller::Anonymous,
            None => {
                tracing::warn!(method = %req.method(), path, "request without a token refused");
                return Failure(crate::auth::authentication_required()).into_response();
            }
            Some(value) => {
                let user = value
                    .to_str()
                    .ok()
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .and_then(|token| s.auth.identify(token.trim()));
                match user {
                    Some(user) => Caller::User(user),
                    None => {
                        tracing::warn!(
                            method = %req.method(),
                            path,
                            "request with an unknown token refused"
                        );
                        return Failure(ApiError::new(
                            codes::AUTHENTICATION,
                            "the token is not valid: send a user's token as `Authorization: \
                             Bearer <token>` (the CLI's --token, FAIRSCHED_TOKEN or its \
                             config file's token)",
                        ))
                        .into_response();
                    }
                }
            }
        }
    };
    if let Caller::User(user) = &caller {
        tracing::debug!(user = user.name, method = %req.method(), path, "authenticated");
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// Gives every error answer the API's JSON error shape: axum's own rejections (a body above
/// the limit: 413; a method the route does not take: 405; ...) come as plain text or empty.
async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path().to_string();
    let limit = if path == routes::AGENT_HEARTBEAT {
        MAX_HEARTBEAT_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    };
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let error = if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            codes::REQUEST_TOO_LARGE,
            format!(
                "the request body is larger than the {limit} bytes ({} MiB) {path} takes",
                limit >> 20
            ),
        )
        .with_attribute("limit_bytes", limit)
    } else {
        let bytes = axum::body::to_bytes(resp.into_body(), 4096)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let reason = status.canonical_reason().unwrap_or("error");
        let message = if text.trim().is_empty() {
            format!("{reason} (HTTP {})", status.as_u16())
        } else {
            format!("{reason} (HTTP {}): {}", status.as_u16(), text.trim())
        };
        let code = if status.is_server_error() {
            codes::INTERNAL
        } else {
            codes::BAD_REQUEST
        };
        ApiError::new(code, message)
    };
    (status, axum::Json(error)).into_response()
}

/// Logs every request (debug level) with its method, path, status and time.
async fn log_request(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    if resp.status().is_server_error() {
        tracing::warn!(%method, path, status, "request failed");
    } else {
        tracing::debug!(
            %method,
            path,
            status,
            took_us = started.elapsed().as_micros() as u64,
            "request"
        );
    }
    resp
}

/// `POST /api/v1/operations` query: `wait_for_nodes=true` accepts jobs no node can hold yet.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitQuery {
    #[serde(default)]
    wait_for_nodes: bool,
}

async fn submit(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<SubmitQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<SubmitReply> {
    let Query(q) = q.map_err(bad_query)?;
    let mut spec: Value = parse(&body)?;
    crate::validate::submit(&spec)?;
    // An authenticated user submits as themself unless the body says otherwise (which the
    // actor allows superusers only).
    if let (Some(user), Value::Object(obj)) = (caller.user(), &mut spec)
        && obj.get("user").is_none_or(Value::is_null)
    {
        obj.insert("user".into(), Value::String(user.name.clone()));
    }
    let reply: SubmitReply =
        ask(&s, &caller, |r| Command::Submit(spec, q.wait_for_nodes, r)).await?;
    ok(reply)
}

/// Each pool's parent: explicit pools from the tree's configuration, ephemeral ones from the
/// last snapshot.
fn pool_parents(view: &View) -> std::collections::BTreeMap<String, String> {
    fn walk(
        pools: &Value,
        parent: Option<&str>,
        out: &mut std::collections::BTreeMap<String, String>,
    ) {
        if let Some(map) = pools.as_object() {
            for (name, node) in map {
                if let Some(p) = parent {
                    out.insert(name.clone(), p.to_string());
                }
                walk(&node["pools"], Some(name), out);
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(&view.default_config()["pools"], None, &mut out);
    for (name, pool) in &view.snapshot.pools {
        if let Some(parent) = &pool.parent {
            out.entry(name.clone()).or_insert_with(|| parent.clone());
        }
    }
    out
}

/// Whether `pool` is `ancestor` or lies in its subtree.
fn pool_within(
    parents: &std::collections::BTreeMap<String, String>,
    pool: &str,
    ancestor: &str,
) -> bool {
    let mut cur = pool;
    // Bounded by the number of pools, whatever the map holds.
    for _ in 0..=parents.len() {
        if cur == ancestor {
            return true;
        }
        match parents.get(cur) {
            Some(parent) => cur = parent,
            None => return false,
        }
    }
    false
}

async fn status(State(s): State<AppState>) -> Reply<fairsched_api::ServerStatus> {
    let view = s.view.borrow().clone();
    let r = view.read_only.as_ref();
    ok(fairsched_api::ServerStatus {
        read_only: r.is_some(),
        read_only_reason: r.map(|r| r.reason.clone()),
        read_only_since_unix_ms: r.map(|r| r.since_unix_ms),
        alerts: view
            .trees
            .iter()
            .flat_map(|t| t.info.alerts.iter().cloned())
            .collect(),
    })
}

/// Default and largest number of operations `GET /api/v1/operations` returns.
pub const OPERATIONS_DEFAULT_LIMIT: usize = 1000;
pub const OPERATIONS_MAX_LIMIT: usize = 10_000;

/// `pool` and the pools of its subtree (as [`pool_parents`] knows them).
fn subtree_pools(parents: &std::collections::BTreeMap<String, String>, pool: &str) -> Vec<String> {
    let mut pools = vec![pool.to_string()];
    pools.extend(
        parents
            .keys()
            .filter(|p| p.as_str() != pool && pool_within(parents, p, pool))
            .cloned(),
    );
    pools
}

/// `GET /api/v1/operations`: in submission order, filtered and paged (`limit`, `after`). A
/// query for unfinished operations only without a cursor is answered from the published view;
/// others by the actor, from the store (where finished operations are).
async fn list_operations(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<OperationQuery>, QueryRejection>,
) -> Reply<Vec<OperationView>> {
    let Query(q) = q.map_err(bad_query)?;
    let states: Option<Vec<&str>> = q.state.as_deref().map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    });
    for state in states.iter().flatten() {
        if !OPERATION_STATES.contains(state) {
            return Err(Failure(
                ApiError::new(
                    codes::BAD_REQUEST,
                    format!(
                        "state {state:?} is not an operation state ({})",
                        OPERATION_STATES.join(", ")
                    ),
                )
                .with_attribute("state", *state),
            ));
        }
    }
    let limit = q
        .limit
        .unwrap_or(OPERATIONS_DEFAULT_LIMIT)
        .min(OPERATIONS_MAX_LIMIT);
    let jobs = q.jobs != Some(false);
    let view = s.view.borrow().clone();
    let parents = pool_parents(&view);
    let unfinished_only = states
        .as_ref()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|s| matches!(*s, "pending" | "running")));
    if unfinished_only && q.after.as_deref().is_none_or(str::is_empty) {
        let matching: Vec<&OperationRecord> = view
            .operations
            .iter()
            .filter(|o| {
                states
                    .as_ref()
                    .is_none_or(|s| s.contains(&o.view.state.as_str()))
            })
            .filter(|o| {
                q.pool
                    .as_ref()
                    .is_none_or(|p| pool_within(&parents, &o.view.pool, p))
            })
            .filter(|o| q.user.as_ref().is_none_or(|u| *u == o.view.user))
            .collect();
        // From the first ones with `after=` (empty), else the newest.
        let page = if q.after.is_some() {
            &matching[..limit.min(matching.len())]
        } else {
            &matching[matching.len().saturating_sub(limit)..]
        };
        let reads = s.reads(&caller, &view);
        return ok(page.iter().map(|o| reads.redact(o.to_view(jobs))).collect());
    }
    let filter = fairsched_store::OperationFilter {
        states: states
            .unwrap_or_default()
            .into_iter()
            .map(str::to_string)
            .collect(),
        pools: q.pool.as_deref().map(|p| subtree_pools(&parents, p)),
        user: q.user.clone(),
        after: q.after.clone(),
        limit,
    };
    drop(view);
    let ops = ask(&s, &caller, |reply| {
        Command::History(HistoryQuery::List {
            filter,
            jobs,
            reply,
        })
    })
    .await?;
    // Finished operations follow the read permission as unfinished ones do.
    let view = s.view.borrow().clone();
    let reads = s.reads(&caller, &view);
    ok(ops.into_iter().map(|o| reads.redact(o)).collect())
}

fn bad_query(e: QueryRejection) -> Failure {
    Failure(ApiError::new(
        codes::BAD_REQUEST,
        format!("bad query: {}", e.body_text()),
    ))
}

/// `GET /api/v1/operations/ID`: an unfinished operation from the published view; any other
/// (finished, in the store only) through the actor.
async fn get_operation(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<OperationView> {
    let view = s.view.borrow().clone();
    if let Some(op) = view.operations.iter().find(|o| o.view.id == id) {
        return ok(s.reads(&caller, &view).redact(op.to_view(true)));
    }
    drop(view);
    let op = ask(&s, &caller, |r| {
        Command::History(HistoryQuery::Operation(id, r))
    })
    .await?;
    ok(s.shown(&caller, op))
}

async fn abort(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<OperationView> {
    let op = ask(&s, &caller, |r| Command::Abort(id, r)).await?;
    ok(s.shown(&caller, op))
}

async fn update_operation(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply<OperationView> {
    let update: UpdateOperation = parse(&body)?;
    let op = ask(&s, &caller, |r| Command::UpdateOperation(id, update, r)).await?;
    ok(s.shown(&caller, op))
}

/// The longest a read of logs waits for a running job's first output.
const LOGS_WAIT_MAX: Duration = Duration::from_secs(5);

/// `GET /api/v1/operations/ID/logs` (query [`fairsched_api::LogsQuery`]). A running job's
/// output comes from its node through the heartbeats once this read watches it: when some
/// running job has none yet, the read waits for it, up to two heartbeat periods (and a
/// little), then answers what there is (those jobs marked `waiting`).
async fn logs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<Query<fairsched_api::LogsQuery>, QueryRejection>,
) -> Reply<Vec<fairsched_api::JobLogs>> {
    let Query(q) = q.map_err(bad_query)?;
    let from = q
        .parse_from()
        .map_err(|e| Failure(ApiError::new(codes::BAD_REQUEST, format!("bad query: {e}"))))?;
    let jobs = q.job_set();
    s.check_read(&caller, &id).await?;
    let request = || crate::command::LogsRequest {
        operation: id.clone(),
        jobs: jobs.clone(),
        from: from.clone(),
    };
    let started = tokio::time::Instant::now();
    loop {
        let reply = ask(&s, &caller, |r| Command::Logs(request(), r)).await?;
        let waiting = reply
            .logs
            .iter()
            .any(|l| l.live.as_ref().is_some_and(|l| l.waiting));
        let wait = (reply.heartbeat_period * 2 + Duration::from_millis(250)).min(LOGS_WAIT_MAX);
        if !waiting || started.elapsed() >= wait {
            return ok(reply.logs);
        }
        tokio::time::sleep(
            (reply.heartbeat_period / 4)
                .clamp(Duration::from_millis(10), Duration::from_millis(100)),
        )
        .await;
    }
}

/// The tree a pool route names (`?tree=`, default: the default tree).
fn tree_query(q: Result<Query<TreeQuery>, QueryRejection>) -> Result<Option<String>, Failure> {
    let Query(q) = q.map_err(bad_query)?;
    Ok(q.tree)
}

/// The pools of the tree named `tree` (as the orchid shows them).
fn pools_of<'a>(
    view: &'a View,
    tree: &str,
) -> &'a std::collections::BTreeMap<String, fairsched_core::snapshot::PoolSnapshot> {
    if tree == view.snapshot.tree {
        &view.snapshot.pools
    } else {
        &view.snapshot.pool_trees[tree].pools
    }
}

async fn list_pools(
    State(s): State<AppState>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<Value> {
    let tree = tree_query(q)?;
    let view = s.view.borrow().clone();
    let name = &view.resolve_tree(tree.as_deref())?.info.name;
    ok(json!(pools_of(&view, name)))
}

async fn get_pool(
    State(s): State<AppState>,
    Path(name): Path<String>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<Value> {
    let tree = tree_query(q)?;
    let view = s.view.borrow().clone();
    let tree = &view.resolve_tree(tree.as_deref())?.info.name;
    pool_of(&view, tree, &name)
}

fn pool_of(view: &View, tree: &str, name: &str) -> Reply<Value> {
    match pools_of(view, tree).get(name) {
        Some(p) => ok(json!(p)),
        None => Err(Failure(
            ApiError::new(
                codes::RESOLVE,
                format!("pool {name:?} does not exist in tree {tree:?}"),
            )
            .with_attribute("pool", name)
            .with_attribute("tree", tree),
        )),
    }
}

async fn create_pool(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<TreeQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<PoolReply> {
    let tree = tree_query(q)?;
    let req: CreatePool = parse(&body)?;
    let name = req.name.clone();
    let warnings = ask(&s, &caller, |reply| Command::CreatePool {
        tree,
        name: req.name,
        parent: req.parent,
        config: req.config,
        reply,
    })
    .await?;
    ok(PoolReply { name, warnings })
}

async fn update_pool(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    q: Result<Query<TreeQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<PoolReply> {
    let tree = tree_query(q)?;
    let req: UpdatePool = parse(&body)?;
    let n = name.clone();
    let warnings = ask(&s, &caller, |reply| Command::UpdatePool {
        tree,
        name: n,
        config: req.config,
        parent: req.parent,
        reply,
    })
    .await?;
    ok(PoolReply { name, warnings })
}

async fn remove_pool(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<PoolReply> {
    let tree = tree_query(q)?;
    let n = name.clone();
    let warnings = ask(&s, &caller, |reply| Command::RemovePool {
        tree,
        name: n,
        reply,
    })
    .await?;
    ok(PoolReply { name, warnings })
}

async fn list_nodes(State(s): State<AppState>) -> Reply<Vec<NodeView>> {
    let view = s.view.borrow().clone();
    ok(view.nodes.clone())
}

async fn get_node(State(s): State<AppState>, Path(id): Path<String>) -> Reply<NodeView> {
    let view = s.view.borrow().clone();
    match view.nodes.iter().find(|n| n.id == id) {
        Some(n) => ok(n.clone()),
        None => Err(Failure(crate::actor::no_such_node(&id))),
    }
}

async fn node_action(
    s: AppState,
    caller: Caller,
    id: String,
    action: NodeAction,
) -> Reply<NodeView> {
    ok(ask(&s, &caller, |reply| Command::Node { id, action, reply }).await?)
}

async fn disable_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Disable).await
}

async fn enable_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Enable).await
}

async fn drain_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Drain).await
}

async fn undrain_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Undrain).await
}

/// `GET /api/v1/tree`: one tree's name, configuration and orchid snapshot.
async fn tree(
    State(s): State<AppState>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<Value> {
    let tree = tree_query(q)?;
    let view = s.view.borrow().clone();
    let t = view.resolve_tree(tree.as_deref())?;
    ok(json!({
        "tree": t.info.name,
        "is_default": t.info.is_default,
        "config": t.config.as_ref(),
        "snapshot": tree_snapshot(&view, &t.info.name),
    }))
}

async fn pool_trees(State(s): State<AppState>) -> Reply<Vec<PoolTreeView>> {
    let view = s.view.borrow().clone();
    ok(view.trees.iter().map(|t| t.info.clone()).collect())
}

async fn apply_tree(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<TreeApplyQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<TreeApplyReply> {
    let Query(query) = query.map_err(bad_query)?;
    let config: Value = parse(&body)?;
    ok(ask(&s, &caller, |reply| Command::ApplyTree {
        tree: query.tree,
        config,
        dry_run: query.dry_run,
        reply,
    })
    .await?)
}

/// An operation as the orchid of `tree` shows it: its fields there, or `None` when it does
/// not run in that tree.
fn operation_in_tree(view: &View, tree: &str, id: &str) -> Option<Value> {
    let op = view.snapshot.operations.get(id)?;
    if view.operation_trees.get(id).map(String::as_str) == Some(tree) {
        // Its first tree: the operation's own fields (its other trees under `pool_trees`).
        Some(json!(op))
    } else {
        op.pool_trees.get(tree).map(|o| json!(o))
    }
}

/// The orchid of one tree: `tree`, `t_ms`, `total_resources`, `pools`, the operations that run
/// in it (with their fields in that tree), `user_to_ephemeral_pools`; the default tree's also
/// has the other trees under `pool_trees`.
fn tree_snapshot(view: &View, tree: &str) -> Value {
    let operations: serde_json::Map<String, Value> = view
        .snapshot
        .operations
        .keys()
        .filter_map(|id| Some((id.clone(), operation_in_tree(view, tree, id)?)))
        .collect();
    if tree == view.snapshot.tree {
        let mut snapshot = json!(view.snapshot);
        snapshot["operations"] = Value::Object(operations);
        return snapshot;
    }
    let t = &view.snapshot.pool_trees[tree];
    json!({
        "t_ms": view.snapshot.t_ms,
        "tree": tree,
        "total_resources": t.total_resources,
        "pools": t.pools,
        "user_to_ephemeral_pools": t.user_to_ephemeral_pools,
        "operations": operations,
    })
}

async fn orchid_tree(State(s): State<AppState>, Path(tree): Path<String>) -> Reply<Value> {
    let view = s.view.borrow().clone();
    let name = &view.resolve_tree(Some(&tree))?.info.name;
    ok(tree_snapshot(&view, name))
}

async fn orchid_pool(
    State(s): State<AppState>,
    Path((tree, pool)): Path<(String, String)>,
) -> Reply<Value> {
    let view = s.view.borrow().clone();
    let name = &view.resolve_tree(Some(&tree))?.info.name;
    pool_of(&view, name, &pool)
}

async fn orchid_operation(
    State(s): State<AppState>,
    Path((tree, id)): Path<(String, String)>,
) -> Reply<Value> {
    let view = s.view.borrow().clone();
    let name = &view.resolve_tree(Some(&tree))?.info.name;
    match operation_in_tree(&view, name, &id) {
        Some(op) => ok(op),
        None => Err(Failure(
            ApiError::new(
                codes::NO_SUCH_OPERATION,
                format!("operation {id:?} does not run in tree {name:?}"),
            )
            .with_attribute("operation", id.as_str())
            .with_attribute("tree", name.as_str()),
        )),
    }
}

async fn list_events(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<EventQuery>, QueryRejection>,
) -> Reply<Vec<EventView>> {
    let Query(q) = q.map_err(bad_query)?;
    if let Some(id) = &q.operation {
        s.check_read(&caller, id).await?;
    }
    let events = ask(&s, &caller, |r| Command::Events(q, r)).await?;
    ok(s.readable_events(&caller, events).await)
}

/// Events a live stream reads from the store at a time while it catches up.
const STREAM_PAGE: usize = 1000;

/// A live stream's state.
struct Follow {
    app: AppState,
    caller: Caller,
    query: EventQuery,
    rx: broadcast::Receiver<Arc<EventView>>,
    stopping: watch::Receiver<bool>,
    /// Read from the store, not sent yet.
    backlog: VecDeque<EventView>,
    /// The last sequence number sent (or the starting point).
    last: u64,
    /// The store has events after `last` the stream has not read (it started with `after` or
    /// `since`, or fell behind the broadcast).
    catching_up: bool,
}

impl Follow {
    /// The events the stream's caller may read.
    async fn readable(&self, events: Vec<EventView>) -> Vec<EventView> {
        self.app.readable_events(&self.caller, events).await
    }

    /// The next event to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Arc<EventView>> {
        loop {
            if let Some(e) = self.backlog.pop_front() {
                self.last = self.last.max(e.seq);
                return Some(Arc::new(e));
            }
            if self.catching_up {
                let page = EventQuery {
                    after: Some(self.last),
                    limit: Some(STREAM_PAGE),
                    ..self.query.clone()
                };
                let events = ask(&self.app, &self.caller, |r| Command::Events(page, r))
                    .await
                    .ok()?;
                self.catching_up = events.len() >= STREAM_PAGE;
                // Left out events still move the stream on.
                if let Some(last) = events.last() {
                    self.last = last.seq;
                }
                self.backlog.extend(self.readable(events).await);
                continue;
            }
            let received = tokio::select! {
                r = self.rx.recv() => r,
                _ = self.stopping.wait_for(|s| *s) => return None,
            };
            match received {
                Ok(e) if e.seq > self.last && self.query.matches(&e) => {
                    self.last = e.seq;
                    if self.readable(vec![(*e).clone()]).await.is_empty() {
                        continue;
                    }
                    return Some(e);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => self.catching_up = true,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// `GET /api/v1/events/stream`: Server-Sent Events, one event (JSON) per message with its
/// sequence number as the message id. With `after` (or a `Last-Event-ID` header) or `since`,
/// the stored events from there come first; then events as they are committed.
async fn stream_events(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    q: Result<Query<EventQuery>, QueryRejection>,
) -> Result<Sse<impl futures_util::Stream<Item = Result<sse::Event, Infallible>>>, Failure> {
    let Query(mut query) = q.map_err(bad_query)?;
    if let Some(op) = &query.operation {
        s.check_read(&caller, op).await?;
    }
    if let Some(id) = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        query.after = Some(id);
    }
    // Subscribe before reading the store: nothing committed in between is missed (events
    // read twice are dropped by their sequence numbers).
    let follow = Follow {
        rx: s.events.subscribe(),
        stopping: s.stopping.subscribe(),
        catching_up: query.after.is_some() || query.since.is_some(),
        last: query.after.unwrap_or(0),
        backlog: VecDeque::new(),
        query,
        app: s,
        caller,
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        let e = f.next().await?;
        let data = serde_json::to_string(&*e).unwrap_or_default();
        Some((
            Ok(sse::Event::default().id(e.seq.to_string()).data(data)),
            f,
        ))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

async fn register(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply<fairsched_api::RegisterReply> {
    check_token(&s, &headers)?;
    let req: RegisterNode = parse(&body)?;
    crate::validate::check_id("node_id", "node", &req.node_id)?;
    ok(ask(&s, &caller, |r| Command::Register(req, r)).await?)
}

async fn heartbeat(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply<fairsched_api::HeartbeatReply> {
    check_token(&s, &headers)?;
    let req: Heartbeat = parse(&body)?;
    ok(ask(&s, &caller, |r| Command::Heartbeat(req, r)).await?)
}

/// `GET /metrics`: OpenMetrics text.
async fn metrics(State(s): State<AppState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &s.metrics) {
        Ok(()) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], body).into_response(),
        Err(e) => Failure(ApiError::new(
            codes::INTERNAL,
            format!("cannot encode metrics: {e}"),
        ))
        .into_response(),
    }
}

// The Scheduling page: static files compiled into the binary; the page polls the JSON API.
const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}
