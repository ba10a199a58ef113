//! HTTP handlers. Writes go to the actor by message; reads come from the published [`View`].

mod events;
mod nodes;
mod operations;
mod pools;
mod serve;

use crate::actor::Actor;
use crate::auth::{AclTrees, Auth, ReadAccess};
use crate::caller::Caller;
use crate::command::{Command, HistoryQuery, Request};
use crate::view::View;
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use events::{list_events, stream_events};
use fairsched_api::{ApiError, EventView, OperationView, codes, routes};
use nodes::{
    disable_node, drain_node, enable_node, get_node, heartbeat, list_nodes, register, undrain_node,
};
pub use operations::{OPERATIONS_DEFAULT_LIMIT, OPERATIONS_MAX_LIMIT};
use operations::{abort, get_operation, list_operations, logs, submit, update_operation};
use pools::{
    apply_tree, create_pool, get_pool, list_pools, orchid_operation, orchid_pool, orchid_tree,
    pool_trees, remove_pool, tree, update_pool,
};
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
pub use serve::{HEADER_READ_TIMEOUT, serve, serve_with};
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// Shared by all handlers: cloned for every request (and by every layer), so one pointer
/// (a clone of each of its fields was 2 % of the server's CPU per heartbeat).
#[derive(Clone, Debug)]
pub struct AppState(Arc<AppStateFields>);

impl std::ops::Deref for AppState {
    type Target = AppStateFields;

    fn deref(&self) -> &AppStateFields {
        &self.0
    }
}

/// What [`AppState`] shares.
#[derive(Clone, Debug)]
pub struct AppStateFields {
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
        AppState(Arc::new(AppStateFields {
            tx,
            view,
            agent_token,
            auth: Arc::new(Auth::off()),
            metrics: Arc::new(registry),
            events: actor.events(),
            stopping: Arc::new(watch::channel(false).0),
            acl_trees: Arc::default(),
        }))
    }

    /// With `auth`'s users (authentication on when there are some).
    pub fn with_auth(self, auth: Auth) -> AppState {
        AppState(Arc::new(AppStateFields {
            auth: Arc::new(auth),
            ..Arc::unwrap_or_clone(self.0)
        }))
    }

    /// The published view, with a snapshot at least as new as its records: when the view
    /// says the actor takes one on request ([`View::refresh_on_read`], a small cluster),
    /// it is asked for first. For handlers that show the snapshot (fair shares, why jobs
    /// wait, the trees' summaries), so that a caller reads what it just did there too.
    async fn fresh_view(&self) -> Arc<View> {
        let view = self.view.borrow().clone();
        if !view.refresh_on_read {
            return view;
        }
        // Refused only when the actor is gone: the view there is is the answer then.
        let _ = ask(self, &Caller::Unchecked, Command::Snapshot).await;
        self.view.borrow().clone()
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
    // Straight into `T` (the agents' heartbeats and registrations, a tenth of the server's
    // CPU per heartbeat, parsed into a `Value` first cost half of it again). A body that does
    // not parse so (also one with a key twice, which the `Value` takes the last of) goes the
    // way that names what is wrong.
    if let Ok(parsed) = serde_json::from_slice(body) {
        return Ok(parsed);
    }
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
    crate::auth::agent_token(state.agent_token.as_deref(), headers).map_err(Failure)
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
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware,
        ))
        .with_state(state)
}

/// Names the caller of every request (a [`Caller`] extension the handlers pass to the
/// actor), by [`crate::auth::caller_of`]'s rules: the request with its [`Caller`] (an
/// extension), or the refusal to answer.
#[allow(clippy::result_large_err)] // A response, once per request.
fn authenticate(
    s: &AppState,
    mut req: axum::extract::Request,
) -> Result<axum::extract::Request, Response> {
    let path = req.uri().path();
    let caller = match crate::auth::caller_of(&s.auth, req.method(), path, req.headers()) {
        Ok(caller) => caller,
        Err(e) => return Err(Failure(e).into_response()),
    };
    if let Caller::User(user) = &caller {
        tracing::debug!(user = user.name, method = %req.method(), path, "authenticated");
    }
    req.extensions_mut().insert(caller);
    Ok(req)
}

/// Gives every error answer the API's JSON error shape: axum's own rejections (a body above
/// the limit: 413; a method the route does not take: 405; ...) come as plain text or empty.
async fn json_errors(
    path: &str,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
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
/// The one middleware of every request (one layer: each layer clones the routes' service
/// per request, which three layers made 5 % of the server's CPU per heartbeat): the request
/// is authenticated ([`authenticate`]), run with errors made the API's JSON
/// ([`json_errors`]), and logged with its answer's status.
async fn middleware(
    State(s): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let resp = match authenticate(&s, req) {
        Ok(req) => json_errors(&path, req, next).await,
        Err(refused) => refused,
    };
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

async fn status(State(s): State<AppState>) -> Reply<fairsched_api::ServerStatus> {
    let view = s.fresh_view().await;
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
        role: fairsched_api::ServerRole::Leader,
        leader: None,
    })
}

fn bad_query(e: QueryRejection) -> Failure {
    Failure(ApiError::new(
        codes::BAD_REQUEST,
        format!("bad query: {}", e.body_text()),
    ))
}

/// `GET /metrics`: OpenMetrics text.
async fn metrics(State(s): State<AppState>) -> Response {
    // The gauges read the published view's snapshot.
    s.fresh_view().await;
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
const INDEX_HTML: &str = include_str!("../../assets/index.html");
const APP_JS: &str = include_str!("../../assets/app.js");
const STYLE_CSS: &str = include_str!("../../assets/style.css");

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
