//! The wire contract shared by the fairsched server, its node agents and the CLI.
//!
//! * [`routes`]: every path under `/api/v1`.
//! * DTOs: operations and jobs (the submit body: [`SubmitOperation`]; typed states:
//!   [`OperationState`], [`JobState`], [`NodeState`]), pools, nodes, and the agent protocol
//!   (register, heartbeat).
//! * [`ApiError`]: every error reply is `{"code":..,"message":..,"attributes":{..}}` with
//!   YTsaurus codes where one exists ([`codes`]).
//! * Feature `client`: [`client::ApiClient`], a typed HTTP client used by the CLI and the agent.
//!
//! This crate does not depend on the scheduling core; the server converts between these types
//! and the core's.

#[cfg(feature = "client")]
pub mod client;
mod states;
mod submit;

pub use states::{JobState, NodeState, OperationState};
pub use submit::{
    DiskRequest, PreemptionMode, SubmitOperation, TaskSubmit, TreeOptionsUpdate,
    TreeSchedulingOptions,
};

use fairsched_resources::Resources;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Paths of the HTTP API (axum syntax for path parameters).
pub mod routes {
    /// GET lists (in submission order; query: [`OperationQuery`]), POST submits.
    pub const OPERATIONS: &str = "/api/v1/operations";
    pub const OPERATION: &str = "/api/v1/operations/{id}";
    pub const OPERATION_ABORT: &str = "/api/v1/operations/{id}/abort";
    pub const OPERATION_LOGS: &str = "/api/v1/operations/{id}/logs";
    /// POST [`UpdateOperation`](crate::UpdateOperation): weight, resource limits, pool.
    pub const OPERATION_UPDATE: &str = "/api/v1/operations/{id}/update";
    /// GET: the pools of a tree as the orchid shows them (name → fields); POST
    /// [`CreatePool`](crate::CreatePool) creates one (reply [`PoolReply`](crate::PoolReply)).
    /// Query [`TreeQuery`](crate::TreeQuery):
    /// `?tree=NAME` (default: the default tree).
    pub const POOLS: &str = "/api/v1/pools";
    /// GET, PUT [`UpdatePool`](crate::UpdatePool), DELETE one pool; query
    /// [`TreeQuery`](crate::TreeQuery) as for [`POOLS`].
    pub const POOL: &str = "/api/v1/pools/{name}";
    /// GET: every pool tree ([`PoolTreeView`](crate::PoolTreeView)), sorted by name.
    pub const POOL_TREES: &str = "/api/v1/pool_trees";
    pub const NODES: &str = "/api/v1/nodes";
    pub const NODE: &str = "/api/v1/nodes/{id}";
    /// `scheduler_jobs_enabled = false`: its jobs are aborted and go back to pending.
    pub const NODE_DISABLE: &str = "/api/v1/nodes/{id}/disable";
    pub const NODE_ENABLE: &str = "/api/v1/nodes/{id}/enable";
    /// Nothing new starts on the node; its running jobs finish.
    pub const NODE_DRAIN: &str = "/api/v1/nodes/{id}/drain";
    pub const NODE_UNDRAIN: &str = "/api/v1/nodes/{id}/undrain";
    /// GET: one tree (`tree`, `is_default`, `config`, `snapshot`; query
    /// [`TreeQuery`](crate::TreeQuery), default: the default tree). PUT: replaces that tree's
    /// whole configuration (query [`TreeApplyQuery`](crate::TreeApplyQuery); reply
    /// [`TreeApplyReply`](crate::TreeApplyReply)); the other trees keep theirs.
    pub const TREE: &str = "/api/v1/tree";
    pub const ORCHID_TREE: &str = "/api/v1/orchid/pool_trees/{tree}";
    pub const ORCHID_POOL: &str = "/api/v1/orchid/pool_trees/{tree}/pools/{pool}";
    pub const ORCHID_OPERATION: &str = "/api/v1/orchid/pool_trees/{tree}/operations/{id}";
    /// The event log (query: [`EventQuery`]); oldest first.
    pub const EVENTS: &str = "/api/v1/events";
    /// The event log as it grows: Server-Sent Events, one [`EventView`] as JSON per message
    /// with the sequence number as its `id` (query: [`EventQuery`]; `Last-Event-ID` resumes).
    pub const EVENTS_STREAM: &str = "/api/v1/events/stream";
    pub const AGENT_REGISTER: &str = "/api/v1/agent/register";
    pub const AGENT_HEARTBEAT: &str = "/api/v1/agent/heartbeat";
    /// GET [`ServerStatus`](crate::ServerStatus): whether the server takes changes, and the
    /// active alerts.
    pub const STATUS: &str = "/api/v1/status";
}

/// Error codes. YTsaurus codes where one exists; fairsched's own codes are above 100000.
pub mod codes {
    /// Generic error (YTsaurus `Generic`).
    pub const GENERIC: u32 = 1;
    /// Authentication failed: no token, or one the server does not know (YTsaurus
    /// `RPC AuthenticationError`). HTTP 401.
    pub const AUTHENTICATION: u32 = 109;
    /// The user may not do this: a pool ACL or a superuser-only action refused it (YTsaurus
    /// `AuthorizationError`). HTTP 403; attributes `user`, `permission`, `pool`, `tree`.
    pub const AUTHORIZATION: u32 = 901;
    /// No such object: pool, node, job (YTsaurus `ResolveError`).
    pub const RESOLVE: u32 = 500;
    /// Too many operations in a pool (YTsaurus `TooManyOperations`).
    pub const TOO_MANY_OPERATIONS: u32 = 202;
    /// No such operation (YTsaurus `NoSuchOperation`).
    pub const NO_SUCH_OPERATION: u32 = 1915;
    /// Pool tree guarantees overcommit (YTsaurus `PoolTreeGuaranteesOvercommit`).
    pub const GUARANTEES_OVERCOMMIT: u32 = 29000;
    /// The request body is malformed.
    pub const BAD_REQUEST: u32 = 100_400;
    /// The node is not registered (the agent must register again).
    pub const NODE_NOT_REGISTERED: u32 = 100_404;
    /// The request body is larger than the server takes (HTTP 413; attribute
    /// `limit_bytes`).
    pub const REQUEST_TOO_LARGE: u32 = 100_413;
    /// The server could not persist or process the request.
    pub const INTERNAL: u32 = 100_500;
    /// The server is read-only: its store cannot write (a full or read-only disk), so it
    /// refuses changes and heartbeats; nothing was changed. HTTP 503; retry later.
    pub const READ_ONLY: u32 = 100_503;
    /// The server is a standby, not the leader of its cluster's servers: it did nothing.
    /// HTTP 503; attribute `leader`, the leader's URL when it knows one. Clients given
    /// several servers go to the leader ([`crate::client::ApiClient`]).
    pub const NOT_LEADER: u32 = 100_421;
    /// Another agent runs as this node: it heartbeats, and this registration comes from
    /// another agent (another [`RegisterNode::agent_id`](crate::RegisterNode)). HTTP 409;
    /// attribute `node`. Nothing was changed.
    pub const NODE_IN_USE: u32 = 100_409;
}

/// The body of every error reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: u32,
    pub message: String,
    #[serde(default)]
    pub attributes: Map<String, Value>,
}

/// What a code means, in words (the codes are YTsaurus' where one exists, so some look like
/// HTTP statuses that they are not: 500 is "no such object").
pub fn code_name(code: u32) -> &'static str {
    match code {
        codes::GENERIC => "error",
        codes::AUTHENTICATION => "authentication failed",
        codes::AUTHORIZATION => "not permitted",
        codes::RESOLVE => "no such object",
        codes::TOO_MANY_OPERATIONS => "too many operations",
        codes::NO_SUCH_OPERATION => "no such operation",
        codes::GUARANTEES_OVERCOMMIT => "guarantees overcommitted",
        codes::BAD_REQUEST => "bad request",
        codes::NODE_NOT_REGISTERED => "node not registered",
        codes::NODE_IN_USE => "node in use by another agent",
        codes::REQUEST_TOO_LARGE => "request too large",
        codes::INTERNAL => "internal error",
        codes::READ_ONLY => "server read-only",
        codes::NOT_LEADER => "not the leader",
        _ => "error",
    }
}

/// `no such object (code 500): node "x" does not exist (node: "x")`; a generic error, which
/// has no name to give, as `(code 1) tasks[0].time_limit_ms must be positive` (the CLI prints
/// `error: ` before it).
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match code_name(self.code) {
            "error" => write!(f, "(code {}) {}", self.code, self.message)?,
            name => write!(f, "{name} (code {}): {}", self.code, self.message)?,
        }
        for (i, (k, v)) in self.attributes.iter().enumerate() {
            let sep = if i == 0 { " (" } else { ", " };
            write!(f, "{sep}{k}: {v}")?;
        }
        if !self.attributes.is_empty() {
            write!(f, ")")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    pub fn new(code: u32, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            attributes: Map::new(),
        }
    }

    pub fn with_attribute(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.attributes.insert(key.to_string(), value.into());
        self
    }

    /// The HTTP status that goes with the code.
    pub fn http_status(&self) -> u16 {
        match self.code {
            codes::AUTHENTICATION => 401,
            codes::AUTHORIZATION => 403,
            codes::RESOLVE | codes::NO_SUCH_OPERATION | codes::NODE_NOT_REGISTERED => 404,
            codes::REQUEST_TOO_LARGE => 413,
            codes::INTERNAL => 500,
            codes::READ_ONLY | codes::NOT_LEADER => 503,
            codes::NODE_IN_USE => 409,
            _ => 400,
        }
    }
}

/// `GET /api/v1/status`: the server's health as a client needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStatus {
    /// `true` while the store cannot write: changes and heartbeats are refused (code
    /// [`codes::READ_ONLY`]), reads work; the server resumes by itself.
    pub read_only: bool,
    /// Why it is read-only (the store's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_reason: Option<String>,
    /// Since when (Unix time in milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_since_unix_ms: Option<u64>,
    /// The scheduler's active alerts, every tree's (as of its last fair-share update), e.g.
    /// 29000 while guarantees exceed a tree's cluster.
    #[serde(default)]
    pub alerts: Vec<AlertView>,
    /// `leader`: this server schedules and accepts changes (a server with SQLite always
    /// does). `standby`: it shares a PostgreSQL store with others and another one leads (or
    /// none yet); it answers everything else with [`codes::NOT_LEADER`].
    #[serde(default)]
    pub role: ServerRole,
    /// On a standby: the URL of the server that leads, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
}

/// Whether a server leads ([`ServerStatus::role`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerRole {
    #[default]
    Leader,
    Standby,
}

/// An active scheduler alert (YTsaurus' scheduler alerts): the configuration is accepted, but
/// something needs an operator's attention. It lasts until a fair-share update no longer
/// raises it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlertView {
    /// The pool tree it is about.
    pub tree: String,
    /// YTsaurus code ([`codes::GUARANTEES_OVERCOMMIT`]: the root's guarantees exceed the
    /// tree's cluster and are scaled down proportionally).
    pub code: u32,
    pub message: String,
}

/// Reply of `POST /api/v1/pools`, `PUT` and `DELETE /api/v1/pools/{name}`: the pool, and
/// what needs attention in its tree after the change (e.g. guarantees that exceed the
/// cluster, code 29000: the change is applied and the guarantees are scaled down).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolReply {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

// ---- operations ---------------------------------------------------------------------------

/// `POST /api/v1/operations/{id}/update` (YTsaurus `update_op_parameters`): what changes in
/// a running or pending operation; a field left out stays. `weight` and `resource_limits`
/// apply in every tree without its own per-tree value, `pool` in the operation's first tree
/// (an ephemeral pool is created as at submission); `scheduling_options_per_pool_tree` sets
/// them in one tree. Everything is checked before anything changes. The reply is the
/// operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateOperation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Replaces the operation's limits: a resource left out is unlimited (`{}`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_limits: Option<fairsched_resources::PartialResources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Per tree (the operation must run there): its pool, weight and limits in that tree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scheduling_options_per_pool_tree: BTreeMap<String, TreeOptionsUpdate>,
}

impl UpdateOperation {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.weight.is_none()
            && self.resource_limits.is_none()
            && self.pool.is_none()
            && self.scheduling_options_per_pool_tree.is_empty()
    }
}

/// Query of `GET /api/v1/operations`: every filter given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperationQuery {
    /// States, comma-separated (`running,pending`; the names of [`OperationState`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The pool the operation runs in (exactly this pool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `false`: leave out each operation's `jobs` (the page polls without them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<bool>,
    /// At most this many operations (default 1000, at most 10000). With `after` the first
    /// ones after it, else the newest ones; oldest first in both cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// A cursor: the operations submitted after the operation of this id (the last one of the
    /// previous page); empty: from the first operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// Reply to a submit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubmitReply {
    pub id: String,
    /// Pools the submission created (an operation naming a pool its tree does not have runs
    /// in a new ephemeral pool of that name, as in YTsaurus).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_pools: Vec<CreatedPool>,
}

/// An ephemeral pool a submission created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreatedPool {
    pub tree: String,
    pub pool: String,
    /// Its parent (`<Root>`: the tree's root).
    pub parent: String,
    /// A configured pool whose name is close (a likely typo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub did_you_mean: Option<String>,
}

/// Job counts of an operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCounts {
    pub total: u32,
    pub pending: u32,
    pub running: u32,
    pub completed: u32,
    pub failed: u32,
    pub aborted: u32,
}

/// One job (one allocation on one node).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    /// The job id, `<server incarnation>.<n>`: unique across server restarts, and the one id
    /// of the job everywhere (API, CLI, the agent protocol, `FAIRSCHED_JOB_ID`, the job's
    /// directory on its node, the event log).
    pub id: String,
    pub task: usize,
    pub node: String,
    pub state: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the job was ended by the scheduler (preemption reason, also when it was interrupted
    /// and then exited by itself), or by its node (`memory limit exceeded: ...`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix time in milliseconds.
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
}

/// An operation as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperationView {
    pub id: String,
    pub state: OperationState,
    pub pool: String,
    pub user: String,
    /// The spec as submitted (with the id filled in).
    pub spec: Value,
    /// Unix time in milliseconds.
    pub submitted_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// Why the operation failed or was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why its jobs wait (from the core; running or pending operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub job_counts: JobCounts,
    #[serde(default)]
    pub jobs: Vec<JobView>,
}

/// The captured output of one job (the last bytes of each stream), as
/// `GET /api/v1/operations/ID/logs` returns it (query: [`LogsQuery`]).
///
/// A finished job's output is the tail its node reported at its end (`live` absent). A
/// running job's is its output so far, fetched from its node through the heartbeats while
/// someone reads it (`live` present); so is a job's that ended while it was read, up to its
/// end (`live.complete`). Non-UTF-8 bytes are shown as U+FFFD.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobLogs {
    pub job: String,
    pub node: String,
    pub stdout: String,
    pub stderr: String,
    /// The job's state; absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// Where `stdout` and `stderr` are in the job's streams, when they come from the live
    /// output of a running (or just ended) job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveLogs>,
}

/// Where a running job's output shown in [`JobLogs`] is in its streams.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveLogs {
    pub stdout: StreamRange,
    pub stderr: StreamRange,
    /// Nothing was received from the job's node yet (it is asked at its next heartbeat):
    /// read again shortly.
    #[serde(default)]
    pub waiting: bool,
    /// The job ended and its output is shown up to its end.
    #[serde(default)]
    pub complete: bool,
}

/// A range of bytes of one stream of a job: the text shown is the bytes `offset..end` (byte
/// offsets in the stream, counted from its start). A reader that printed them asks next
/// `from` `end` ([`LogsQuery::from`]) and gets only what came after.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamRange {
    pub offset: u64,
    pub end: u64,
    /// Bytes between where the reader asked to start (0 without `from`) and `offset` that the
    /// server no longer has or never got (it keeps a bounded tail): not shown.
    #[serde(default)]
    pub skipped: u64,
}

/// Query of `GET /api/v1/operations/ID/logs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogsQuery {
    /// Only these jobs (ids, comma-separated); absent: every job of the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<String>,
    /// Where to start in the live output of some jobs: `JOB:STDOUT_OFFSET:STDERR_OFFSET`,
    /// comma-separated (the `end`s of the previous read). Jobs not named start at the oldest
    /// byte the server has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl LogsQuery {
    /// `from` parsed: job → (stdout offset, stderr offset).
    pub fn parse_from(&self) -> Result<BTreeMap<String, (u64, u64)>, String> {
        let mut out = BTreeMap::new();
        for part in self.from.iter().flat_map(|f| f.split(',')) {
            if part.is_empty() {
                continue;
            }
            let bad = || format!("from: {part:?}: expected JOB:STDOUT_OFFSET:STDERR_OFFSET");
            let mut it = part.rsplitn(3, ':');
            let err = it.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
            let out_ = it.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
            let job = it.next().filter(|j| !j.is_empty()).ok_or_else(bad)?;
            out.insert(job.to_string(), (out_, err));
        }
        Ok(out)
    }

    /// `jobs` parsed (`None`: every job).
    pub fn job_set(&self) -> Option<std::collections::BTreeSet<String>> {
        self.jobs.as_ref().map(|j| {
            j.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
    }
}

// ---- pools, nodes, tree -------------------------------------------------------------------

/// `POST /api/v1/pools`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatePool {
    pub name: String,
    /// Parent pool; absent: under the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Pool options (PRODUCT.md names: `weight`, `strong_guarantee_resources`, `mode`, ...).
    #[serde(default)]
    pub config: Map<String, Value>,
}

/// `PUT /api/v1/pools/{name}`: replaces the pool's options and/or moves it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdatePool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Map<String, Value>>,
    /// New parent (`<Root>` for the top level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// Query of the pool routes and of `GET /api/v1/tree`: which pool tree. A tree the server
/// does not run is an error (code [`codes::RESOLVE`], attribute `tree`) and changes nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TreeQuery {
    /// The tree's name; absent: the default tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
}

/// Query of `PUT /api/v1/tree`, whose body is the tree's whole configuration (the `config` of
/// `GET /api/v1/tree`: tree options under `config`, pools under `pools`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TreeApplyQuery {
    /// Validate and compare only; change nothing.
    pub dry_run: bool,
    /// The tree to replace; absent: the default tree (as in [`TreeQuery`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
}

/// One pool tree in `GET /api/v1/pool_trees`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolTreeView {
    pub name: String,
    /// Operations that name no tree run in the default tree; routes without `?tree=` use it.
    pub is_default: bool,
    /// Which nodes the tree takes (absent: every node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_tag_filter: Option<String>,
    /// Explicit (configured) pools.
    pub pool_count: usize,
    /// Ephemeral pools (created for operations).
    pub ephemeral_pool_count: usize,
    /// Nodes in the tree.
    pub node_count: usize,
    /// Unfinished operations that run in the tree.
    pub operation_count: usize,
    /// Resources of its schedulable nodes.
    pub total_resources: Resources,
    /// Its active alerts (as of its last fair-share update).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertView>,
}

/// Reply of `PUT /api/v1/tree`: what the new configuration changes (pools matched by name).
/// The new tree is validated as a whole and applied at once, or not at all; operations keep
/// their pools (one whose pool is gone continues in an ephemeral pool of that name).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeApplyReply {
    pub tree: String,
    /// Paths (`parent/child`) of the pools that did not exist.
    pub added: Vec<String>,
    /// Paths of the pools that no longer exist.
    pub removed: Vec<String>,
    /// Paths of the pools whose own options or parent changed.
    pub changed: Vec<String>,
    /// Whether the tree's own options (`config`) changed.
    pub tree_config_changed: bool,
    /// Whether it was applied (`false` for a dry run).
    pub applied: bool,
    /// The new configuration's warnings, and what needs attention in the tree after the
    /// change (e.g. guarantees that exceed the cluster, code 29000: applied all the same, the
    /// guarantees are scaled down).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// A node as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: String,
    pub resources: Resources,
    pub usage: Resources,
    pub tags: Vec<String>,
    pub allocation_count: usize,
    pub scheduler_jobs_enabled: bool,
    /// Draining: nothing new starts here; running jobs finish.
    #[serde(default)]
    pub draining: bool,
    /// Disabled wins over draining; absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<NodeState>,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_ago_ms: u64,
    /// The pool tree whose `node_tag_filter` takes it (absent: none does; it gets no jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
}

// ---- the event log ------------------------------------------------------------------------

/// Query of `GET /api/v1/events` and `GET /api/v1/events/stream`. Every filter given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EventQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A job id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Event names, comma-separated (`allocation_started,allocation_preempted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Events at or after this Unix time in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Events after this sequence number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// At most this many (`GET /events`: default 100, at most 10000). With `since` or `after`
    /// the first ones from there, else the newest ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

impl EventQuery {
    /// The event names of `kind`.
    pub fn kinds(&self) -> Vec<String> {
        self.kind
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Whether `e` passes the filters (all but `limit`).
    pub fn matches(&self, e: &EventView) -> bool {
        let field = |name: &str| e.fields.get(name).and_then(Value::as_str);
        let kinds = self.kinds();
        self.operation
            .as_deref()
            .is_none_or(|o| field("operation") == Some(o))
            && self
                .node
                .as_deref()
                .is_none_or(|n| field("node") == Some(n))
            && self.job.as_deref().is_none_or(|j| field("job") == Some(j))
            && (kinds.is_empty() || kinds.iter().any(|k| Some(k.as_str()) == field("event")))
            && self.since.is_none_or(|t| e.unix_ms >= t)
            && self.after.is_none_or(|s| e.seq > s)
    }
}

/// One entry of the event log: the scheduling core's events (`allocation_started`,
/// `allocation_finished` with the job's `exit_code`, `allocation_interrupted`,
/// `allocation_preempted` with `reason`, `operation_state`, `error`) and the server's own
/// (`job_adopted`, `node_registered`, `node_lost`, `node_changed`, `operation_updated`,
/// `tree_applied`). Jobs are named by `job`
/// (the job id).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    /// Position in the log (1, 2, ...; never reused).
    pub seq: u64,
    /// Unix time in milliseconds.
    pub unix_ms: u64,
    /// `event` (the name), `t_ms` (the server's clock: milliseconds since it started), and the
    /// event's own fields (`operation`, `job`, `node`, `reason`, ...).
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl EventView {
    /// The event's name.
    pub fn kind(&self) -> &str {
        self.fields
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

// ---- the agent protocol -------------------------------------------------------------------

/// `POST /api/v1/agent/register` (bearer token). A node the server still has keeps its jobs
/// (the next heartbeat reconciles them); a new one starts empty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterNode {
    pub node_id: String,
    pub resources: Resources,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Who the agent is: an id it keeps in its work directory (`fairsched agent` makes one
    /// on its first start), the same after a restart, another for an agent elsewhere. While
    /// a node heartbeats, a registration of the same node id by another agent is refused
    /// ([`codes::NODE_IN_USE`]): two machines with one host name would otherwise take the
    /// node from each other and have its jobs lost and run again. Left out: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// Reply to a registration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegisterReply {
    pub heartbeat_period_ms: u64,
    /// The node's own secret, new at every registration (the previous one stops working):
    /// its heartbeats send it as [`Heartbeat::node_credential`]. The server keeps it in memory
    /// only, so after a server restart the node must register again (its heartbeats are then
    /// answered [`codes::NODE_NOT_REGISTERED`]). Checked while the server has an
    /// `agent_token`.
    #[serde(default)]
    pub node_credential: String,
    /// The server's `node_timeout_ms`: a node it hears nothing from for that long is lost
    /// and its jobs run elsewhere. Agents kill their jobs well before it runs out since
    /// their last accepted heartbeat (their lease), so that a job never runs twice at once.
    /// Left out by older servers: no lease then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_timeout_ms: Option<u64>,
}

/// A job that ended on the node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishedJob {
    /// The job id.
    pub job: String,
    /// Completed, failed or aborted (the server takes any other as aborted).
    pub outcome: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the process, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why the node ended the job, when it did (`memory limit exceeded: ...`); the server
    /// keeps it as the job's `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last bytes of stdout and stderr.
    #[serde(default)]
    pub stdout_tail: String,
    #[serde(default)]
    pub stderr_tail: String,
}

impl FinishedJob {
    /// Job `job` completed (exit status 0), with no output.
    pub fn completed(job: impl Into<String>) -> FinishedJob {
        FinishedJob {
            job: job.into(),
            outcome: JobState::Completed,
            exit_code: Some(0),
            signal: None,
            reason: None,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        }
    }
}

/// `POST /api/v1/agent/heartbeat` (bearer token).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub node_id: String,
    /// The credential of the node's last registration ([`RegisterReply::node_credential`]).
    /// While the server has an `agent_token`, a heartbeat without it, or with another
    /// node's, is refused ([`codes::AUTHENTICATION`], HTTP 401) and changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_credential: Option<String>,
    /// Jobs (ids) still running on the node. A job the server has on this node that is
    /// neither running nor in `finished` is lost: it goes back to pending.
    #[serde(default)]
    pub running: Vec<String>,
    #[serde(default)]
    pub finished: Vec<FinishedJob>,
    /// Output of the jobs the server asked for ([`HeartbeatReply::output`]): of running jobs,
    /// and of jobs in `finished` up to their end. At most [`OUTPUT_CHUNK_BYTES`] per stream
    /// and [`OUTPUT_HEARTBEAT_BYTES`] in all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<JobOutput>,
    /// The agent is stopping (its last heartbeat, after it stopped its jobs): once this
    /// heartbeat's ends are taken, the server removes the node at once (event `node_lost`
    /// with reason `agent_stopped`; jobs still running there run again elsewhere) instead
    /// of waiting `node_timeout_ms`, and gives it no job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leaving: bool,
}

/// The most bytes of one stream of one job a heartbeat carries: with more new output since
/// the asked offset, the agent sends the newest bytes (the server notes the skipped ones).
pub const OUTPUT_CHUNK_BYTES: u64 = 64 * 1024;
/// The most output bytes (before encoding) one heartbeat carries; what does not fit is sent
/// at the next one (the server asks again from where it is).
pub const OUTPUT_HEARTBEAT_BYTES: u64 = 1024 * 1024;

/// New output of one job ([`Heartbeat::output`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobOutput {
    pub job: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<OutputChunk>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<OutputChunk>,
    /// The job has ended: the chunks reach the end of its streams.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended: bool,
}

/// Bytes of one stream of a job, from byte `offset` of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputChunk {
    pub offset: u64,
    /// The bytes, in base64 (standard alphabet, padded): output need not be UTF-8.
    pub data: String,
}

impl OutputChunk {
    pub fn new(offset: u64, bytes: &[u8]) -> OutputChunk {
        use base64::Engine;
        OutputChunk {
            offset,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// The bytes (`None`: `data` is not base64).
    pub fn bytes(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .ok()
    }
}

/// The server asks a node for new output of one of its jobs ([`HeartbeatReply::output`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputRequest {
    pub job: String,
    /// From this byte of stdout; absent: its newest [`OUTPUT_CHUNK_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_from: Option<u64>,
}

/// Start a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobStart {
    /// The job id (`FAIRSCHED_JOB_ID`).
    pub job: String,
    pub operation: String,
    pub task: usize,
    pub resources: Resources,
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The operation's user: the account the job runs as on an agent that runs jobs as their
    /// users (`fairsched agent --run-jobs-as-users`); absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The job's time limit (its task's `time_limit_ms`): the agent kills a job that runs
    /// longer and reports it failed, `time limit exceeded: ...`. Absent: no limit (and from
    /// older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_ms: Option<u64>,
}

/// Interrupt a job: send the signal; the scheduler aborts it after the timeout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInterrupt {
    pub job: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub timeout_ms: u64,
}

/// Reply to a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    pub start: Vec<JobStart>,
    pub interrupt: Vec<JobInterrupt>,
    /// Kill these jobs (ids) now (SIGTERM to the group, SIGKILL after the grace period).
    pub abort: Vec<String>,
    /// Send the new output of these jobs with the next heartbeat ([`Heartbeat::output`]):
    /// someone reads it. Asked again at every heartbeat while they do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<OutputRequest>,
}

/// Parses `cpu=8,memory=16GiB` (human amounts as in PRODUCT.md).
pub fn parse_resources(text: &str) -> Result<Resources, String> {
    let mut out = Resources::ZERO;
    let mut given = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected NAME=AMOUNT"))?;
        let kind = fairsched_resources::ResourceKind::from_name(name.trim()).ok_or_else(|| {
            format!("{name:?} is not a resource (cpu, memory, gpu, user_slots, network)")
        })?;
        if given.contains(&kind) {
            return Err(format!(
                "{} is given twice (`{text}`): give each resource once",
                kind.name()
            ));
        }
        given.push(kind);
        let raw = fairsched_resources::parse_amount(kind, value.trim())
            .map_err(|e| format!("{name}: {e}"))?;
        out.set_raw(kind, raw);
    }
    Ok(out)
}

/// Formats resources for people: `cpu=8 memory=16GiB`.
pub fn format_resources(r: &Resources) -> String {
    fairsched_resources::ResourceKind::ALL
        .iter()
        .filter(|k| r.raw_of(**k) != 0)
        .map(|k| {
            format!(
                "{}={}",
                k.name(),
                fairsched_resources::format_amount(*k, r.raw_of(*k))
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_resources() {
        let r = parse_resources("cpu=2.5, memory=1GiB").unwrap();
        assert_eq!(format_resources(&r), "cpu=2.5 memory=1GiB");
        assert!(parse_resources("cpus=1").is_err());
        // A resource given twice is a mistake, not "the last one wins".
        let e = parse_resources("cpu=4, memory=1GiB, cpu=8").unwrap_err();
        assert!(e.contains("cpu is given twice"), "{e}");
    }

    #[test]
    fn errors_display_their_code_in_words() {
        let e =
            ApiError::new(codes::RESOLVE, "node \"x\" does not exist").with_attribute("node", "x");
        assert_eq!(
            e.to_string(),
            "no such object (code 500): node \"x\" does not exist (node: \"x\")"
        );
        // Not "error (code 1): ...", which the CLI printed as "error: error (code 1): ...".
        let e = ApiError::new(codes::GENERIC, "tasks[0].time_limit_ms must be positive");
        assert_eq!(
            e.to_string(),
            "(code 1) tasks[0].time_limit_ms must be positive"
        );
    }

    #[test]
    fn error_body_shape() {
        let e = ApiError::new(codes::TOO_MANY_OPERATIONS, "too many").with_attribute("pool", "a");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"code": 202, "message": "too many", "attributes": {"pool": "a"}})
        );
        assert_eq!(
            e.to_string(),
            r#"too many operations (code 202): too many (pool: "a")"#
        );
        let e = ApiError::new(codes::RESOLVE, "node \"n9\" does not exist");
        assert_eq!(
            e.to_string(),
            r#"no such object (code 500): node "n9" does not exist"#
        );
    }
}
