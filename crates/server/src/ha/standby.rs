//! What a standby answers: `GET /api/v1/status` (a standby, and who leads), `/metrics` (the
//! `fairsched_leader` gauge at 0), the web page (`GET /`: a redirection to the leader's) and,
//! to everything else, [`codes::NOT_LEADER`] naming the leader's URL, so that clients and
//! agents given several servers go there. Every request is first checked as the leader
//! checks it ([`crate::auth::caller_of`], the agents' shared token), so that a standby tells a
//! caller without a valid token no more than the leader would.

use crate::auth::Auth;
use crate::http::Failure;
use axum::Router;
use axum::extract::{Request, State};
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

/// Who may ask a standby anything: the leader's users and agents.
#[derive(Clone, Debug)]
pub(super) struct Guard {
    pub auth: Arc<Auth>,
    /// The agents' shared token (`agent_token`), if any.
    pub agent_token: Option<String>,
}

/// The standby's routes, behind `guard`.
pub(super) fn router(known: Known, guard: Guard) -> Router {
    Router::new()
        .route(routes::STATUS, get(status))
        .route("/metrics", get(metrics))
        .route("/", get(page))
        .fallback(refuse)
        .layer(axum::middleware::from_fn_with_state(guard, authenticate))
        .with_state(known)
}

/// Refuses a request the leader would refuse for its token alone.
async fn authenticate(
    State(guard): State<Guard>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let path = req.uri().path();
    let checked = if crate::auth::is_agent_path(path) {
        crate::auth::agent_token(guard.agent_token.as_deref(), req.headers())
    } else {
        crate::auth::caller_of(&guard.auth, req.method(), path, req.headers()).map(|_| ())
    };
    match checked {
        Ok(()) => next.run(req).await,
        Err(e) => Failure(e).into_response(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AuthConfig, AuthUser};
    use axum::body::Body;
    use axum::http::Method;
    use tower::ServiceExt;

    const LEADER: &str = "http://10.0.0.1:9090";

    fn standby(authenticate_reads: bool) -> Router {
        let config = crate::ServerConfig {
            agent_token: Some("agent-secret".into()),
            auth: AuthConfig {
                authenticate_reads,
                users: vec![AuthUser {
                    name: "alice".into(),
                    token: Some("alice-secret".into()),
                    ..AuthUser::default()
                }],
                ..AuthConfig::default()
            },
            ..crate::ServerConfig::default()
        };
        let known = Known::default();
        known.set(Some(LEADER.into()));
        let guard = Guard {
            auth: Arc::new(Auth::from_config(&config).unwrap()),
            agent_token: config.agent_token.clone(),
        };
        router(known, guard)
    }

    /// What a standby answers: HTTP status, API error code (if an error), whether it names
    /// the leader.
    type Answer = (u16, Option<u32>, bool);

    /// What a standby answers to one request.
    fn check(authenticate_reads: bool, method: Method, path: &str, token: Option<&str>) -> Answer {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut req = axum::http::Request::builder().method(method).uri(path);
            if let Some(t) = token {
                req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
            }
            let resp = standby(authenticate_reads)
                .oneshot(req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let text = String::from_utf8_lossy(&body).to_string();
            let code = serde_json::from_slice::<ApiError>(&body)
                .ok()
                .map(|e| e.code);
            (
                status,
                code.filter(|_| status >= 400),
                text.contains(LEADER),
            )
        })
    }

    #[test]
    fn a_standby_checks_tokens_as_the_leader_does() {
        use Method as M;
        let auth = Some(codes::AUTHENTICATION);
        let standby = Some(codes::NOT_LEADER);
        // (authenticate_reads, method, path, token) -> (HTTP status, error code, names the leader)
        let cases: &[(bool, M, &str, Option<&str>, Answer)] = &[
            // Reads need a token with authenticate_reads.
            (true, M::GET, routes::STATUS, None, (401, auth, false)),
            (true, M::GET, "/metrics", None, (401, auth, false)),
            (true, M::GET, routes::OPERATIONS, None, (401, auth, false)),
            (
                true,
                M::GET,
                routes::STATUS,
                Some("alice-secret"),
                (200, None, true),
            ),
            (
                true,
                M::GET,
                "/metrics",
                Some("alice-secret"),
                (200, None, false),
            ),
            (
                true,
                M::GET,
                routes::OPERATIONS,
                Some("alice-secret"),
                (503, standby, true),
            ),
            // ... and not without it; a token sent must be valid either way.
            (false, M::GET, routes::STATUS, None, (200, None, true)),
            (
                false,
                M::GET,
                routes::OPERATIONS,
                None,
                (503, standby, true),
            ),
            (
                false,
                M::GET,
                routes::STATUS,
                Some("wrong"),
                (401, auth, false),
            ),
            // Writes always need a user's token (an agent's is not one).
            (false, M::POST, routes::OPERATIONS, None, (401, auth, false)),
            (
                false,
                M::POST,
                routes::OPERATIONS,
                Some("agent-secret"),
                (401, auth, false),
            ),
            (
                false,
                M::POST,
                routes::OPERATIONS,
                Some("alice-secret"),
                (503, standby, true),
            ),
            // Agents need the shared token (a user's is not it).
            (
                false,
                M::POST,
                routes::AGENT_HEARTBEAT,
                None,
                (401, auth, false),
            ),
            (
                false,
                M::POST,
                routes::AGENT_REGISTER,
                Some("alice-secret"),
                (401, auth, false),
            ),
            (
                false,
                M::POST,
                routes::AGENT_HEARTBEAT,
                Some("agent-secret"),
                (503, standby, true),
            ),
            // The page holds no data: a browser is sent to the leader's.
            (true, M::GET, "/", None, (307, None, false)),
        ];
        for (reads, method, path, token, expected) in cases {
            assert_eq!(
                check(*reads, method.clone(), path, *token),
                *expected,
                "authenticate_reads = {reads}, {method} {path}, token {token:?}"
            );
        }
    }
}
