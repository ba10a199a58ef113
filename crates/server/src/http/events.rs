//! The event log: filtered pages and the live Server-Sent Events stream.

use super::{AppState, Failure, Reply, ask, bad_query, ok};
use crate::caller::Caller;
use crate::command::Command;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{self, KeepAlive, Sse};
use fairsched_api::{ApiError, EventQuery, EventView, codes};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

pub(super) async fn list_events(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<EventQuery>, QueryRejection>,
) -> Reply<Vec<EventView>> {
    let Query(q) = q.map_err(bad_query)?;
    check_kinds(&q)?;
    if let Some(id) = &q.operation {
        s.check_read(&caller, id).await?;
    }
    let events = ask(&s, &caller, |r| Command::Events(q, r)).await?;
    ok(s.readable_events(&caller, events).await)
}

/// Refuses a `kind` that names no event (it would match nothing, silently).
fn check_kinds(q: &EventQuery) -> Result<(), Failure> {
    let names: Vec<&str> = fairsched_core::EventKind::NAMES
        .into_iter()
        .chain(crate::actor::SERVER_EVENT_NAMES)
        .collect();
    for kind in q.kinds() {
        if !names.contains(&kind.as_str()) {
            let hint = fairsched_config::closest(&kind, names.iter().copied())
                .map(|k| format!("did you mean {k:?}? "))
                .unwrap_or_default();
            return Err(Failure(
                ApiError::new(
                    codes::BAD_REQUEST,
                    format!(
                        "kind {kind:?} is not an event kind; {hint}the kinds are {}",
                        names.join(", ")
                    ),
                )
                .with_attribute("field", "kind"),
            ));
        }
    }
    Ok(())
}

/// Events a live stream reads from the store at a time while it catches up.
pub(super) const STREAM_PAGE: usize = 1000;

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
pub(super) async fn stream_events(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    q: Result<Query<EventQuery>, QueryRejection>,
) -> Result<Sse<impl futures_util::Stream<Item = Result<sse::Event, Infallible>>>, Failure> {
    let Query(mut query) = q.map_err(bad_query)?;
    check_kinds(&query)?;
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
