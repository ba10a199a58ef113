//! Operation routes: submit, list (from the published view or the store), show, abort,
//! update, logs.

use super::{AppState, Failure, Reply, ask, bad_query, ok, parse};
use crate::caller::Caller;
use crate::command::{Command, HistoryQuery};
use crate::submit::Submission;
use crate::view::{OperationRecord, View};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State};
use fairsched_api::{
    ApiError, OperationQuery, OperationState, OperationView, SubmitReply, UpdateOperation, codes,
};
use serde_json::Value;
use std::time::Duration;

/// `POST /api/v1/operations` query: `wait_for_nodes=true` accepts jobs no node can hold yet.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SubmitQuery {
    #[serde(default)]
    wait_for_nodes: bool,
}

pub(super) async fn submit(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<SubmitQuery>, QueryRejection>,
    body: Bytes,
) -> Reply<SubmitReply> {
    let Query(q) = q.map_err(bad_query)?;
    let mut submission = Submission::parse(parse(&body)?)?;
    // An authenticated user submits as themself unless the body says otherwise (which the
    // actor allows superusers only).
    if let Some(user) = caller.user()
        && submission.spec.user.is_none()
    {
        submission.set_user(&user.name);
    }
    let reply: SubmitReply = ask(&s, &caller, |r| {
        Command::Submit(Box::new(submission), q.wait_for_nodes, r)
    })
    .await?;
    ok(reply)
}

/// Each pool's parent: explicit pools from the tree's configuration, ephemeral ones from the
/// last snapshot.
pub(super) fn pool_parents(view: &View) -> std::collections::BTreeMap<String, String> {
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
pub(super) fn pool_within(
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

/// Default and largest number of operations `GET /api/v1/operations` returns.
pub const OPERATIONS_DEFAULT_LIMIT: usize = 1000;
pub const OPERATIONS_MAX_LIMIT: usize = 10_000;

/// `pool` and the pools of its subtree (as [`pool_parents`] knows them).
pub(super) fn subtree_pools(
    parents: &std::collections::BTreeMap<String, String>,
    pool: &str,
) -> Vec<String> {
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
pub(super) async fn list_operations(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: Result<Query<OperationQuery>, QueryRejection>,
) -> Reply<Vec<OperationView>> {
    let Query(q) = q.map_err(bad_query)?;
    let states: Option<Vec<OperationState>> = match q.state.as_deref() {
        None => None,
        Some(s) => Some(
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(state_filter)
                .collect::<Result<_, _>>()?,
        ),
    };
    let limit = q
        .limit
        .unwrap_or(OPERATIONS_DEFAULT_LIMIT)
        .min(OPERATIONS_MAX_LIMIT);
    let jobs = q.jobs != Some(false);
    let view = s.fresh_view().await;
    let parents = pool_parents(&view);
    let unfinished_only = states
        .as_ref()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|s| !s.is_finished()));
    if unfinished_only && q.after.as_deref().is_none_or(str::is_empty) {
        let matching: Vec<&OperationRecord> = view
            .operations
            .iter()
            .filter(|o| states.as_ref().is_none_or(|s| s.contains(&o.view.state)))
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
        return ok(page
            .iter()
            .map(|o| reads.redact(o.to_view(jobs, &view.snapshot)))
            .collect());
    }
    let filter = fairsched_store::OperationFilter {
        states: states
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.name().to_string())
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

/// A state of `GET /api/v1/operations?state=`: a known one, or an error naming them.
fn state_filter(name: &str) -> Result<OperationState, Failure> {
    OperationState::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = OperationState::ALL.iter().map(|s| s.name()).collect();
        Failure(
            ApiError::new(
                codes::BAD_REQUEST,
                format!(
                    "state {name:?} is not an operation state ({})",
                    known.join(", ")
                ),
            )
            .with_attribute("state", name),
        )
    })
}

/// `GET /api/v1/operations/ID`: an unfinished operation from the published view; any other
/// (finished, in the store only) through the actor.
pub(super) async fn get_operation(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<OperationView> {
    let view = s.fresh_view().await;
    if let Some(op) = view.operations.get(&id) {
        return ok(s
            .reads(&caller, &view)
            .redact(op.to_view(true, &view.snapshot)));
    }
    drop(view);
    let op = ask(&s, &caller, |r| {
        Command::History(HistoryQuery::Operation(id, r))
    })
    .await?;
    ok(s.shown(&caller, op))
}

pub(super) async fn abort(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Reply<OperationView> {
    let op = ask(&s, &caller, |r| Command::Abort(id, r)).await?;
    ok(s.shown(&caller, op))
}

pub(super) async fn update_operation(
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
pub(super) const LOGS_WAIT_MAX: Duration = Duration::from_secs(5);

/// `GET /api/v1/operations/ID/logs` (query [`fairsched_api::LogsQuery`]). A running job's
/// output comes from its node through the heartbeats once this read watches it: when some
/// running job has none yet, the read waits for it, up to two heartbeat periods (and a
/// little), then answers what there is (those jobs marked `waiting`).
pub(super) async fn logs(
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
