//! Who a request comes from, by its headers alone: the rules both the leader's router and a
//! standby's apply before anything else (so that a standby tells a caller without a valid
//! token no more than the leader would).

use super::Auth;
use crate::caller::Caller;
use axum::http::{HeaderMap, Method, header};
use fairsched_api::{ApiError, codes, routes};

/// The agents' endpoints: they check the shared `agent_token` ([`agent_token`]), not users.
pub fn is_agent_path(path: &str) -> bool {
    [routes::AGENT_REGISTER, routes::AGENT_HEARTBEAT].contains(&path)
}

/// Paths anyone may fetch: the web page's own files (the page asks for a token itself).
fn is_page_path(path: &str) -> bool {
    ["/", "/assets/app.js", "/assets/style.css"].contains(&path)
}

/// The caller of a request. With users configured, every request but the agent endpoints
/// (which check `agent_token`) and the page's own files needs a user's token, except reads
/// (`GET`, `HEAD`: the API and `/metrics`) while `authenticate_reads` is off, which go as an
/// anonymous reader; a token that is sent must be valid. The error says what to send.
pub fn caller_of(
    auth: &Auth,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    if !auth.enabled() {
        return Ok(Caller::Unchecked);
    }
    if is_agent_path(path) || is_page_path(path) {
        return Ok(Caller::Anonymous);
    }
    let read = matches!(*method, Method::GET | Method::HEAD);
    match headers.get(header::AUTHORIZATION) {
        None if read && !auth.authenticate_reads => Ok(Caller::Anonymous),
        None => {
            tracing::warn!(%method, path, "request without a token refused");
            Err(super::authentication_required())
        }
        Some(value) => {
            let user = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .and_then(|token| auth.identify(token.trim()));
            match user {
                Some(user) => Ok(Caller::User(user)),
                None => {
                    tracing::warn!(%method, path, "request with an unknown token refused");
                    Err(ApiError::new(
                        codes::AUTHENTICATION,
                        "the token is not valid: send a user's token as `Authorization: \
                         Bearer <token>` (the CLI's --token, FAIRSCHED_TOKEN or its config \
                         file's token)",
                    ))
                }
            }
        }
    }
}

/// Whether an agent's request carries the shared `expected` token (none configured: the
/// agent endpoints are open).
pub fn agent_token(expected: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|t| super::same_secret(t, expected)) {
        Ok(())
    } else {
        // As every refusal (README, "Security"); never the token.
        tracing::warn!(
            token_given = given.is_some(),
            "an agent request refused: not the agents' token (agent_token); an agent with \
             another token, or someone else"
        );
        Err(ApiError::new(
            codes::AUTHENTICATION,
            "agent endpoints need the shared token (Authorization: Bearer ...)",
        ))
    }
}
