//! Durable state of the fairsched server.
//!
//! [`Store`] is what the server needs: load what is not finished at start, commit one batch
//! of changes (pool trees, operations, jobs, nodes, events) atomically before it replies, read
//! finished operations (by id, in filtered pages) and prune what is older than the retention.
//! [`SqliteStore`] keeps it in one SQLite file (WAL journal, `schema_version` table, migrations
//! as SQL strings), [`PostgresStore`] in a PostgreSQL database, where servers also elect a
//! leader whose writes the database fences (see [`PostgresStore::acquire_leadership`]). Records are JSON documents with a few indexed columns, so the server owns
//! their shape and the schema changes only for new tables or indexes.

mod postgres;
mod sqlite;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use postgres::{Leader, PostgresStore};
pub use sqlite::{SqliteStore, Synchronous};

/// A stored operation: its id, state, the columns its lists filter on and the server's JSON
/// record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredOperation {
    pub id: String,
    pub state: String,
    /// Its pool (in its first tree).
    pub pool: String,
    pub user: String,
    /// When it finished (Unix ms); `None` while it has not.
    pub finished_at: Option<u64>,
    pub record: String,
}

/// The states of a finished operation: [`Store::load`] leaves these operations out, and
/// [`Store::prune`] removes them once old enough.
pub const FINISHED_STATES: [&str; 3] = ["completed", "failed", "aborted"];

/// Which operations [`Store::operations`] returns, in submission order. Every filter given
/// must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperationFilter {
    /// Any of these states (none: all).
    pub states: Vec<String>,
    /// Any of these pools (none: all).
    pub pools: Option<Vec<String>>,
    pub user: Option<String>,
    /// Operations submitted after the one of this id (`Some("")`: from the first one). An id
    /// the store does not have is an error ([`StoreError::Other`] naming it).
    pub after: Option<String>,
    /// At most this many: with `after` the first ones after it, else the newest ones.
    pub limit: usize,
}

/// A finished job's end as its node reported it after its operation had left the server's
/// memory: applied to the stored job (its exit code, when it has none yet; its reason, when
/// given; its output tails).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobExit {
    pub id: String,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub stdout_tail: String,
    pub stderr_tail: String,
}

/// What one [`Store::prune`] call removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub operations: usize,
    pub jobs: usize,
    pub events: usize,
}

/// A stored job (one allocation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredJob {
    pub id: String,
    pub operation: String,
    pub record: String,
    /// The last bytes of its stdout and stderr, once it ended.
    pub stdout_tail: Option<String>,
    pub stderr_tail: Option<String>,
}

/// A stored node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredNode {
    pub id: String,
    pub record: String,
}

/// One event-log entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its place in the log: the server numbers events 1, 2, ... (see [`Loaded::last_event_seq`]).
    pub seq: u64,
    /// Unix time in milliseconds.
    pub unix_ms: u64,
    /// The event's name (`allocation_started`, ...).
    pub kind: String,
    /// What it is about, for filters.
    pub operation: Option<String>,
    pub node: Option<String>,
    pub job: Option<String>,
    /// The whole event (JSON).
    pub record: String,
}

/// Which events [`Store::events`] returns. Every filter given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub operation: Option<String>,
    pub node: Option<String>,
    pub job: Option<String>,
    /// Any of these names (none: all).
    pub kinds: Vec<String>,
    /// Events at or after this Unix time (milliseconds).
    pub since_unix_ms: Option<u64>,
    /// Events after this sequence number.
    pub after_seq: Option<u64>,
    /// At most this many. With `since_unix_ms` or `after_seq`: the first ones from there;
    /// without either: the newest ones. Oldest first in both cases.
    pub limit: usize,
}

/// A stored pool tree: its name, its configuration (JSON) and whether it is the default tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTree {
    pub name: String,
    pub config: String,
    /// At most one stored tree is the default: committing a default tree makes every other
    /// tree a non-default one.
    pub is_default: bool,
}

/// Changes committed together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Pool trees, each replacing the stored tree of its name (trees not named stay).
    pub trees: Vec<StoredTree>,
    pub operations: Vec<StoredOperation>,
    pub jobs: Vec<StoredJob>,
    pub nodes: Vec<StoredNode>,
    pub events: Vec<StoredEvent>,
    /// Ends of stored jobs (see [`JobExit`]), applied after `jobs`.
    pub job_exits: Vec<JobExit>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
            && self.operations.is_empty()
            && self.jobs.is_empty()
            && self.nodes.is_empty()
            && self.events.is_empty()
            && self.job_exits.is_empty()
    }
}

/// What the server restores at start: everything but finished operations and their jobs
/// (those stay in the store for queries until pruned).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Every stored pool tree, by name.
    pub trees: Vec<StoredTree>,
    /// The operations not finished, in submission order.
    pub operations: Vec<StoredOperation>,
    /// The jobs of those operations.
    pub jobs: Vec<StoredJob>,
    pub nodes: Vec<StoredNode>,
    /// How many times the store was opened before (0 on a new store).
    pub incarnation: u64,
    /// The highest event sequence number stored (0: none).
    pub last_event_seq: u64,
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store: schema version {found} is newer than this binary knows ({known})")]
    TooNew { found: i64, known: i64 },
    /// A PostgreSQL store's request failed (what went wrong, in user words).
    #[error("store: PostgreSQL: {0}")]
    Postgres(String),
    /// The store's URL cannot be read (it is not repeated: it may hold a password).
    #[error(
        "the store URL is not a PostgreSQL URL (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE): \
         {reason}"
    )]
    BadUrl { reason: String },
    /// A PostgreSQL store cannot be reached (`target`: its URL without the password).
    #[error("cannot connect to the PostgreSQL store {target}: {reason}")]
    Connect { target: String, reason: String },
    /// A store opened as the leader of epoch `epoch` was deposed: another server became the
    /// leader (epoch `current`) and the store refused the write.
    #[error(
        "store: this server is no longer the leader (it was elected for epoch {epoch}, the \
         store is at epoch {current}: another server took over); nothing was written"
    )]
    NotLeader { epoch: u64, current: u64 },
    /// Any other failure.
    #[error("store: {0}")]
    Other(String),
    /// Another process has the store open (an OS lock on `fairsched.lock` in its directory).
    #[error(
        "the data directory {dir} is in use by another fairsched server ({holder}): two servers \
         on one store would run the same jobs twice and corrupt its event log; stop that one \
         first, or give this one another --data-dir"
    )]
    Locked { dir: String, holder: String },
    /// The data directory held a store (its lock file is there, left by the server that
    /// created it) but the database is gone: starting empty would kill every job the agents
    /// run as unknown and reuse the ids of operations and jobs.
    #[error(
        "the data directory {dir} held a fairsched store (fairsched.lock, from the server that \
         made it), but its database fairsched.db is missing: restore fairsched.db (and \
         fairsched.db-wal if you have it) from a backup; to start a new, empty cluster instead, \
         remove {dir}/fairsched.lock (the agents' running jobs are then unknown to the server \
         and killed)"
    )]
    Missing { dir: String },
    /// The data directory is a file (or another non-directory).
    #[error("the data directory {dir} is not a directory: give data_dir (--data-dir) a directory")]
    NotADirectory { dir: String },
    /// The lock file cannot be opened or locked.
    #[error("store: cannot lock {path}: {message}")]
    Lock { path: String, message: String },
}

/// Reads of the server's durable state: what is committed.
pub trait StoreRead: Send {
    /// One operation and its jobs (in start order), finished or not.
    fn operation(&self, id: &str) -> Result<Option<(StoredOperation, Vec<StoredJob>)>, StoreError>;
    /// The state of operation `id` (`None`: the store does not have it).
    fn operation_state(&self, id: &str) -> Result<Option<String>, StoreError>;
    /// The operations that pass `filter`, oldest first.
    fn operations(&self, filter: &OperationFilter) -> Result<Vec<StoredOperation>, StoreError>;
    /// The captured output of one operation's jobs: `(job id, stdout, stderr)`.
    fn job_logs(&self, operation: &str) -> Result<Vec<(String, String, String)>, StoreError>;
    /// The newest `limit` events, oldest first.
    fn recent_events(&self, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        self.events(&EventFilter {
            limit,
            ..EventFilter::default()
        })
    }
    /// The events that pass `filter`, oldest first.
    fn events(&self, filter: &EventFilter) -> Result<Vec<StoredEvent>, StoreError>;
}

/// The server's durable state.
pub trait Store: StoreRead {
    /// What the server restores (see [`Loaded`]).
    fn load(&self) -> Result<Loaded, StoreError>;
    /// Removes at most `max_operations` operations that finished before `before_unix_ms`
    /// (oldest first) with their jobs, and at most `max_events` events logged before it
    /// (the newest event always stays: it numbers the next ones). Small batches keep each
    /// call short; call again while it removes something.
    fn prune(
        &mut self,
        before_unix_ms: u64,
        max_operations: usize,
        max_events: usize,
    ) -> Result<Pruned, StoreError>;
    /// Commits a batch atomically (all or nothing).
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError>;
    /// Whether the store can write now: commits a tiny transaction of its own (the server
    /// calls it while it is read-only after a failed commit, to know when to resume).
    fn check_writable(&mut self) -> Result<(), StoreError>;
    /// A reader of its own: it reads what is committed while a commit is in progress (the
    /// server commits on another thread than the one that reads).
    fn reader(&self) -> Result<Box<dyn StoreRead>, StoreError>;
}
