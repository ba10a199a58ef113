//! What a standby answers: `GET /api/v1/status` (a standby, and who leads), `/metrics` (the
//! `fairsched_leader` gauge at 0), the web page (`GET /`: a redirection to the leader's) and,
//! to everything else, [`codes::NOT_LEADER`] naming the leader's URL, so that clients and
//! agents given several servers go there.

use crate::http::Failure;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use fairsched_api::{ApiError, ServerRole, ServerStatus, codes, routes};
use std::sync::{Arc, Mutex};

/// The leader as the standby last read it from the store: its URL, `None` while none leads
/// (no election yet, or its lease ran out and no one was elected since).
#[derive(Clone, Debug, Default)]
pub(super) struct Known(Arc<Mutex<Option<String>>>);

impl Known {
    pub fn set(&self, leader: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = leader;
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The standby's routes.
pub(super) fn router(known: Known) -> Router {
    Router::new()
        .route(routes::STATUS, get(status))
        .route("/metrics", get(metrics))
        .route("/", get(page))
        .fallback(refuse)
        .with_state(known)
}

/// The error of every request to a standby.
pub(super) fn not_leader(leader: Option<&str>) -> ApiError {
    match leader {
        Some(url) => ApiError::new(
            codes::NOT_LEADER,
            format!("this server is a standby; the leader is {url}: send the request there"),
        )
        .with_attribute("leader", url),
        None => ApiError::new(
            codes::NOT_LEADER,
            "this server is a standby and no server leads at the moment (an election is under \
             way); retry in a few seconds",
        ),
    }
}

async fn refuse(State(known): State<Known>) -> Response {
    Failure(not_leader(known.get().as_deref())).into_response()
}

/// The web page is the leader's: a browser is sent there (while none leads, the error).
async fn page(State(known): State<Known>) -> Response {
    match known.get() {
        Some(url) => axum::response::Redirect::temporary(&format!("{url}/")).into_response(),
        None => refuse(State(known)).await,
    }
}

async fn status(State(known): State<Known>) -> Response {
    axum::Json(ServerStatus {
        read_only: false,
        read_only_reason: None,
        read_only_since_unix_ms: None,
        alerts: Vec::new(),
        role: ServerRole::Standby,
        leader: known.get(),
    })
    .into_response()
}

async fn metrics() -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(
        &mut body,
        &crate::metrics::leader_registry(false),
    ) {
        Ok(()) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], body).into_response(),
        Err(e) => Failure(ApiError::new(
            codes::INTERNAL,
            format!("cannot encode metrics: {e}"),
        ))
        .into_response(),
    }
}
