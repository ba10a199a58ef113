//! Node routes (list, show, operator actions) and the agents' register and heartbeat.

use super::{AppState, Failure, Reply, ask, check_token, ok, parse};
use crate::caller::Caller;
use crate::command::{Command, NodeAction};
use crate::view::NodeEntry;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use fairsched_api::{Heartbeat, NodeView, RegisterNode};

pub(super) async fn list_nodes(State(s): State<AppState>) -> Reply<Vec<NodeView>> {
    let view = s.view.borrow().clone();
    ok(view.nodes.values().map(NodeEntry::to_view).collect())
}

pub(super) async fn get_node(State(s): State<AppState>, Path(id): Path<String>) -> Reply<NodeView> {
    let view = s.view.borrow().clone();
    match view.nodes.get(&id) {
        Some(n) => ok(n.to_view()),
        None => Err(Failure(crate::actor::no_such_node(&id))),
    }
}

pub(super) async fn node_action(
    s: AppState,
    caller: Caller,
    id: String,
    action: NodeAction,
) -> Reply<NodeView> {
    ok(ask(&s, &caller, |reply| Command::Node { id, action, reply }).await?)
}

pub(super) async fn disable_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Disable).await
}

pub(super) async fn enable_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Enable).await
}

pub(super) async fn drain_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Drain).await
}

pub(super) async fn undrain_node(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<NodeView> {
    node_action(s, caller, id, NodeAction::Undrain).await
}

pub(super) async fn register(
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

pub(super) async fn heartbeat(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply<fairsched_api::HeartbeatReply> {
    check_token(&s, &headers)?;
    let req: Heartbeat = parse(&body)?;
    ok(ask(&s, &caller, |r| Command::Heartbeat(req, r)).await?)
}
