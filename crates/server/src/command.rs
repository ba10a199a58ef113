//! What handlers send the actor: a [`Request`] (a [`Command`] and its [`Caller`]) with a
//! oneshot for the reply (a leaf: `http` builds them, `auth` checks them, the actor runs them).

use crate::caller::Caller;
use fairsched_api::{
    ApiError, EventQuery, EventView, Heartbeat, HeartbeatReply, JobLogs, NodeView, OperationView,
    RegisterNode, RegisterReply, TreeApplyReply, UpdateOperation,
};
use fairsched_store::OperationFilter;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::oneshot;

pub type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

/// What handlers send the actor: a command and who asks ([`crate::auth::authorize`] decides
/// whether they may, before the command runs).
#[derive(Debug)]
pub struct Request {
    pub caller: Caller,
    pub command: Command,
}

/// A command to the actor.
#[derive(Debug)]
pub enum Command {
    /// The operation, and whether to accept jobs no node can hold yet
    /// (`?wait_for_nodes=true`).
    Submit(
        Box<crate::submit::Submission>,
        bool,
        Reply<fairsched_api::SubmitReply>,
    ),
    Abort(String, Reply<OperationView>),
    UpdateOperation(String, UpdateOperation, Reply<OperationView>),
    /// The output of an operation's jobs (a read of a running job's watches it: see
    /// [`crate::live`]).
    Logs(LogsRequest, Reply<LogsReply>),
    /// Pool commands act in `tree` (`None`: the default tree); they reply with the warnings
    /// about the tree after the change (`Actor::tree_warnings`).
    CreatePool {
        tree: Option<String>,
        name: String,
        parent: Option<String>,
        config: Map<String, Value>,
        reply: Reply<Vec<String>>,
    },
    UpdatePool {
        tree: Option<String>,
        name: String,
        config: Option<Map<String, Value>>,
        parent: Option<String>,
        reply: Reply<Vec<String>>,
    },
    RemovePool {
        tree: Option<String>,
        name: String,
        reply: Reply<Vec<String>>,
    },
    /// Replaces a tree's configuration (`None`: the default tree's; `dry_run`: only compares).
    ApplyTree {
        tree: Option<String>,
        config: Value,
        dry_run: bool,
        reply: Reply<TreeApplyReply>,
    },
    Node {
        id: String,
        action: NodeAction,
        reply: Reply<NodeView>,
    },
    Register(RegisterNode, Reply<RegisterReply>),
    Heartbeat(Heartbeat, Reply<HeartbeatReply>),
    /// Reads the event log.
    Events(EventQuery, Reply<Vec<EventView>>),
    /// Reads operations that may have left memory (finished ones are in the store only).
    History(HistoryQuery),
    /// Asks for a view whose snapshot is at least as new as the records now: replies once
    /// it is published (see [`crate::view::View::refresh_on_read`]).
    Snapshot(Reply<()>),
}

/// A read of an operation's jobs' output.
#[derive(Debug)]
pub struct LogsRequest {
    pub operation: String,
    /// Only these jobs (`None`: all).
    pub jobs: Option<BTreeSet<String>>,
    /// Where to start in jobs' live output: job → (stdout, stderr) byte offsets.
    pub from: BTreeMap<String, (u64, u64)>,
}

impl LogsRequest {
    /// Every job of `operation`, each from the oldest byte held.
    pub fn all(operation: &str) -> LogsRequest {
        LogsRequest {
            operation: operation.to_string(),
            jobs: None,
            from: BTreeMap::new(),
        }
    }
}

/// The answer to a [`LogsRequest`].
#[derive(Debug)]
pub struct LogsReply {
    pub logs: Vec<JobLogs>,
    /// The nodes' heartbeat period (a running job's first output comes within two).
    pub heartbeat_period: Duration,
}

/// A read of operations, finished or not: the actor answers the unfinished ones from memory
/// and the others from the store.
#[derive(Debug)]
pub enum HistoryQuery {
    /// One operation with its jobs.
    Operation(String, Reply<OperationView>),
    /// The operations that pass `filter` (oldest first), with their jobs if `jobs`.
    List {
        filter: OperationFilter,
        jobs: bool,
        reply: Reply<Vec<OperationView>>,
    },
}

impl HistoryQuery {
    pub(crate) fn refuse(self, error: ApiError) {
        match self {
            HistoryQuery::Operation(_, r) => {
                let _ = r.send(Err(error));
            }
            HistoryQuery::List { reply, .. } => {
                let _ = reply.send(Err(error));
            }
        }
    }
}

impl Command {
    /// For logs.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Submit(..) => "submit",
            Command::Abort(..) => "abort",
            Command::UpdateOperation(..) => "update_operation",
            Command::Logs(..) => "logs",
            Command::CreatePool { .. } => "create_pool",
            Command::UpdatePool { .. } => "update_pool",
            Command::RemovePool { .. } => "remove_pool",
            Command::ApplyTree { .. } => "apply_tree",
            Command::Node { .. } => "node",
            Command::Register(..) => "register",
            Command::Heartbeat(..) => "heartbeat",
            Command::Events(..) => "events",
            Command::History(..) => "history",
            Command::Snapshot(..) => "snapshot",
        }
    }

    /// Whether the command is a user's change (logged with the user; agents' are not).
    pub(crate) fn is_users_change(&self) -> bool {
        !matches!(
            self,
            Command::Logs(..)
                | Command::Events(..)
                | Command::History(..)
                | Command::Snapshot(..)
                | Command::Register(..)
                | Command::Heartbeat(..)
        )
    }

    /// Whether the command may change state (and so needs a store that can write): all but
    /// the reads of logs, events, history and the snapshot.
    pub(crate) fn changes_state(&self) -> bool {
        !matches!(
            self,
            Command::Logs(..) | Command::Events(..) | Command::History(..) | Command::Snapshot(..)
        )
    }

    /// Replies `error` without running the command.
    pub(crate) fn refuse(self, error: ApiError) {
        fn send<T>(reply: Reply<T>, error: ApiError) {
            let _ = reply.send(Err(error));
        }
        match self {
            Command::Submit(_, _, r) => send(r, error),
            Command::Abort(_, r) => send(r, error),
            Command::UpdateOperation(_, _, r) => send(r, error),
            Command::Logs(_, r) => send(r, error),
            Command::CreatePool { reply, .. } => send(reply, error),
            Command::UpdatePool { reply, .. } => send(reply, error),
            Command::RemovePool { reply, .. } => send(reply, error),
            Command::ApplyTree { reply, .. } => send(reply, error),
            Command::Node { reply, .. } => send(reply, error),
            Command::Register(_, r) => send(r, error),
            Command::Heartbeat(_, r) => send(r, error),
            Command::Events(_, r) => send(r, error),
            Command::History(q) => q.refuse(error),
            Command::Snapshot(r) => send(r, error),
        }
    }
}

/// What an operator does to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAction {
    /// `scheduler_jobs_enabled = false`: its jobs are aborted (they go back to pending).
    Disable,
    Enable,
    /// Nothing new starts there; running jobs finish.
    Drain,
    Undrain,
}

impl NodeAction {
    pub fn name(self) -> &'static str {
        match self {
            NodeAction::Disable => "disable",
            NodeAction::Enable => "enable",
            NodeAction::Drain => "drain",
            NodeAction::Undrain => "undrain",
        }
    }
}
