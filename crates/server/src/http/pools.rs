//! Pool and tree routes (`?tree=NAME`, default: the default tree) and the orchid.

use super::{AppState, Failure, Reply, ask, bad_query, ok, parse};
use crate::caller::Caller;
use crate::command::Command;
use crate::view::View;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use fairsched_api::{
    ApiError, CreatePool, PoolReply, PoolTreeView, TreeApplyQuery, TreeApplyReply, TreeQuery,
    UpdatePool, codes,
};
use serde_json::{Value, json};

/// The tree a pool route names (`?tree=`, default: the default tree).
pub(super) fn tree_query(
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Result<Option<String>, Failure> {
    let Query(q) = q.map_err(bad_query)?;
    Ok(q.tree)
}

/// The pools of the tree named `tree` (as the orchid shows them).
pub(super) fn pools_of<'a>(
    view: &'a View,
    tree: &str,
) -> &'a std::collections::BTreeMap<String, fairsched_core::snapshot::PoolSnapshot> {
    if tree == view.snapshot.tree {
        &view.snapshot.pools
    } else {
        &view.snapshot.pool_trees[tree].pools
    }
}

pub(super) async fn list_pools(
    State(s): State<AppState>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<Value> {
    let tree = tree_query(q)?;
    let view = s.fresh_view().await;
    let name = &view.resolve_tree(tree.as_deref())?.info.name;
    ok(json!(pools_of(&view, name)))
}

pub(super) async fn get_pool(
    State(s): State<AppState>,
    Path(name): Path<String>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<Value> {
    let tree = tree_query(q)?;
    let view = s.fresh_view().await;
    let tree = &view.resolve_tree(tree.as_deref())?.info.name;
    pool_of(&view, tree, &name)
}

pub(super) fn pool_of(view: &View, tree: &str, name: &str) -> Reply<Value> {
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

pub(super) async fn create_pool(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<TreeQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<PoolReply> {
    let tree = tree_query(q)?;
    let req: CreatePool = parse(&body)?;
    s.auth
        .check_acl_subjects(&Value::Object(req.config.clone()))?;
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

pub(super) async fn update_pool(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    q: Result<Query<TreeQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<PoolReply> {
    let tree = tree_query(q)?;
    let req: UpdatePool = parse(&body)?;
    if let Some(config) = &req.config {
        s.auth.check_acl_subjects(&Value::Object(config.clone()))?;
    }
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

pub(super) async fn remove_pool(
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

/// `GET /api/v1/tree`: one tree's name, configuration and orchid snapshot.
pub(super) async fn tree(
    State(s): State<AppState>,
    q: Result<Query<TreeQuery>, QueryRejection>,
) -> Reply<Value> {
    let tree = tree_query(q)?;
    let view = s.fresh_view().await;
    let t = view.resolve_tree(tree.as_deref())?;
    ok(json!({
        "tree": t.info.name,
        "is_default": t.info.is_default,
        "config": t.config.as_ref(),
        "snapshot": tree_snapshot(&view, &t.info.name),
    }))
}

pub(super) async fn pool_trees(State(s): State<AppState>) -> Reply<Vec<PoolTreeView>> {
    let view = s.fresh_view().await;
    ok(view.trees.iter().map(|t| t.info.clone()).collect())
}

pub(super) async fn apply_tree(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<TreeApplyQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<TreeApplyReply> {
    let Query(query) = query.map_err(bad_query)?;
    let config: Value = parse(&body)?;
    s.auth.check_acl_subjects(&config)?;
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
pub(super) fn operation_in_tree(view: &View, tree: &str, id: &str) -> Option<Value> {
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
pub(super) fn tree_snapshot(view: &View, tree: &str) -> Value {
    let operations: serde_json::Map<String, Value> = view
        .snapshot
        .operations
        .keys()
        .filter_map(|id| Some((id.clone(), operation_in_tree(view, tree, id)?)))
        .collect();
    if tree == view.snapshot.tree {
        let mut snapshot = json!(*view.snapshot);
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

pub(super) async fn orchid_tree(
    State(s): State<AppState>,
    Path(tree): Path<String>,
) -> Reply<Value> {
    let view = s.fresh_view().await;
    let name = &view.resolve_tree(Some(&tree))?.info.name;
    ok(tree_snapshot(&view, name))
}

pub(super) async fn orchid_pool(
    State(s): State<AppState>,
    Path((tree, pool)): Path<(String, String)>,
) -> Reply<Value> {
    let view = s.fresh_view().await;
    let name = &view.resolve_tree(Some(&tree))?.info.name;
    pool_of(&view, name, &pool)
}

pub(super) async fn orchid_operation(
    State(s): State<AppState>,
    Path((tree, id)): Path<(String, String)>,
) -> Reply<Value> {
    let view = s.fresh_view().await;
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
