//! The server's TOML configuration.

use crate::caller::Identity;
use fairsched_config::PoolTrees;
use fairsched_core::SchedulerConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The server's file: `fairsched server --config fairsched.toml` (TOML). Every option may be
/// left out (its default applies; no file at all means all defaults); an unknown name, here
/// or in `[scheduler]`, is an error that names it and its line.
///
/// ```toml
/// listen = "0.0.0.0:9090"
/// data_dir = "/var/lib/fairsched"
/// agent_token = "secret"          # agents send it as a bearer token
/// pool_trees_file = "pools.toml"  # trees the store lacks are added at start; or inline [pool_trees]
/// node_timeout_ms = 15000
///
/// [scheduler]
/// fair_share_update_period_ms = 200
/// node_heartbeat_period_ms = 100
///
/// [auth]                          # API tokens and pool ACLs; no users: everything open
/// superusers = ["root"]
/// [[auth.users]]
/// name = "root"
/// token_file = "/etc/fairsched/root.token"
/// [[auth.users]]
/// name = "alice"
/// token_file = "/etc/fairsched/alice.token"
/// groups = ["ml"]
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// The address (`host:port`) the server listens on for the HTTP API, the web page and
    /// `/metrics`; agents and the CLI connect to `http://<listen>`. Plain HTTP, no TLS.
    /// `127.0.0.1` accepts local connections only; `0.0.0.0:9090` all of them. Port 0 picks
    /// a free port (the server prints the address it got). `fairsched server --listen`
    /// overrides it.
    pub listen: String,
    /// The URL clients reach this server at (`http://host:port`), with a PostgreSQL store:
    /// it is what this server calls itself in the database while it leads, and the standbys
    /// name it to the clients and agents that come to them, which then go there. Default:
    /// `http://<listen>` (with the port the server got when `listen` has port 0); required
    /// when `listen` is a wildcard address (`0.0.0.0`, `[::]`), which no client can reach.
    /// Unused with SQLite.
    pub advertise_url: Option<String>,
    /// The directory of the server's store (the SQLite database `fairsched.db` and its WAL):
    /// the pool trees as applied, operations, jobs, nodes with their settings, and the event
    /// log. Created if missing; a relative path is relative to the server's working
    /// directory. The server restores its state from here when it restarts.
    /// `fairsched server --data-dir` overrides it.
    pub data_dir: PathBuf,
    /// Shared secret of the agents: the agent endpoints (register, heartbeat) accept only
    /// requests with `Authorization: Bearer <token>`, which agents send from their `--token-file`
    /// (or `--token`, `FAIRSCHED_AGENT_TOKEN`). Required when `[auth]` has users: the server refuses to
    /// start without it then (generate one with, for example, `openssl rand -hex 32`). Unset
    /// (allowed only without users): the agent endpoints are open to anyone who can reach
    /// `listen`. When set, each node also gets its own credential when it registers, and its
    /// heartbeats must carry it (a heartbeat with another node's credential, or none, is
    /// refused). The other endpoints do not take it; `[auth]` users' tokens protect them.
    /// Must not be empty, nor any user's token. Prefer `agent_token_file`: this file is then
    /// free of secrets.
    pub agent_token: Option<String>,
    /// A file holding `agent_token` (one line; surrounding whitespace ignored), readable by
    /// the server's user only (mode 0600; the server warns otherwise). Instead of
    /// `agent_token`, not with it.
    pub agent_token_file: Option<PathBuf>,
    /// A pool-trees file (`.toml` or `.json`, by extension; the layout of the [pool-trees
    /// reference](config-reference.md)), read at every start (one that cannot be read or
    /// parsed stops the start). On the first start with a new `data_dir` (an empty store) the
    /// server runs its trees. The store keeps every tree (and which one is the default) with
    /// the changes made through the API (`fairsched pool ...`), and on every later start the
    /// stored trees win: a tree of the file that the store does not have is added (logged at
    /// `info`); a stored tree the file no longer has is kept, with a warning (a stored tree
    /// cannot be removed); for a tree in both, the stored version is used, so edits to it here
    /// are not applied (a warning names each tree whose version here differs; apply it with
    /// `fairsched pool apply --tree NAME FILE`, `PUT /api/v1/tree?tree=NAME`); the stored
    /// default tree stays the default (a warning when `default_tree` here names another). An
    /// added tree must be valid with the stored ones (with several trees each needs its own
    /// `node_tag_filter`), else the start stops with an error and nothing changes. A relative
    /// path is relative to the server's working directory. Wins over `pool_trees` when both
    /// are set. Both unset: one tree, `default`, with default options and no pools, on the
    /// first start; the stored trees as they are on later starts.
    pub pool_trees_file: Option<PathBuf>,
    /// Pool trees given inline, in the layout of a pool-trees file; used as
    /// `pool_trees_file` is (on the first start, and trees the store does not have yet added
    /// at later starts) and ignored when that is set. In TOML the name is doubled: this
    /// option, then the file's own `pool_trees` table, as in
    /// `[pool_trees.pool_trees.default.pools.research]`.
    pub pool_trees: Option<PoolTrees>,
    /// The scheduling core's settings: fair-share update and heartbeat periods, node
    /// overcommit, hung operations.
    pub scheduler: SchedulerConfig,
    /// A node that has sent no heartbeat for this long, in milliseconds, is lost: it is
    /// removed (event `node_lost`) and its jobs go back to pending and run again elsewhere.
    /// After a server restart, nodes that were running jobs have this long to heartbeat again
    /// and keep them. Checked at each tick of the server's timer (every
    /// `scheduler.fair_share_update_period_ms`, or every second if that is longer). At least
    /// two heartbeat periods (`scheduler.node_heartbeat_period_ms`), else nodes that
    /// heartbeat on time are lost; keep it many periods long: an agent retries a failed
    /// heartbeat with backoff (200 ms doubling to 2 s), and a node lost on a short hiccup has
    /// its jobs run twice.
    pub node_timeout_ms: u64,
    /// How long, in milliseconds, a finished operation (completed, failed or aborted) with its
    /// jobs and their captured output, and every event of the log, are kept after they
    /// finished (events: after they were logged); then they are pruned from the store, a small
    /// batch at a time. Until then `op show`, `op logs`, `op list` and `events` find them. A
    /// finished operation leaves the server's memory at once (its reads come from the
    /// store), so this bounds the store's size, not the cost of requests. 0 keeps everything
    /// forever. Default: 7 days. Agents remove finished jobs' directories after a retention
    /// of their own (`fairsched agent --job-dir-retention`).
    pub history_retention_ms: u64,
    /// Who may use the API: users with their tokens and groups, superusers, and whether reads
    /// need a token. No users (the default, and what `fairsched up` runs with): authentication
    /// is off, every request may do everything and an operation's `user` is what the request
    /// says. With users, pool ACLs (`acl` in the pool-tree options) decide who may use and
    /// administer each pool.
    pub auth: AuthConfig,
    /// Which store the server keeps its state in (SQLite in `data_dir` unless `url` names a
    /// PostgreSQL database) and how it makes commits durable.
    pub store: StoreConfig,
}

/// The `[store]` section: durability of the server's store.
///
/// The server commits every change to the store before it answers or acts on it: a request
/// answered with success, a job told to start, an operator's node setting. What a commit
/// survives depends on `synchronous`. While the store cannot write (a full or read-only
/// disk), the server is read-only: it refuses changes (HTTP 503, code 100503) and agents'
/// heartbeats (their jobs keep running; agents retry), serves reads, and resumes by itself
/// once a test write succeeds; a change whose commit failed is undone (the state is reloaded
/// from the last commit), so it did not happen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `full` (the default): every commit is flushed to the disk before the server answers,
    /// so everything acknowledged survives a crash of the server process, of the OS and a
    /// power cut. `normal`: commits reach the OS before the server answers and the disk at
    /// SQLite's checkpoints; everything acknowledged survives a crash of the server process
    /// (SIGKILL, OOM kill, panic), but a power cut or an OS crash may lose the last commits
    /// of up to about a second (the store stays consistent: it opens as of an earlier commit,
    /// and agents report the jobs that ran meanwhile as unknown, which are killed). Faster
    /// on disks with slow flushes.
    pub synchronous: Synchronous,
    /// A PostgreSQL database to keep the state in instead of SQLite in `data_dir`:
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (the database must exist; the
    /// server creates its tables). Several servers may share one database for high
    /// availability: one of them leads (schedules, accepts changes, talks to the agents), the
    /// others stand by, answer every request with code 100421 naming the leader
    /// (`advertise_url`), and one of them takes over within about `lease_ms` (plus the time
    /// to load the state) when the leader stops renewing its lease. A leader that loses its
    /// lease exits (a supervisor restarts it as a standby), and the database refuses its late
    /// writes. `fairsched server --store` overrides it. `synchronous` does not apply
    /// (PostgreSQL's own settings decide durability).
    pub url: Option<String>,
    /// With `url`: how long the leader's lease lasts, in milliseconds. The leader renews it
    /// every `lease_ms / 5`; when it cannot for longer than the lease, it stops serving and
    /// exits, and a standby is elected once the lease has run out (standbys try every
    /// `lease_ms / 5`). Shorter: faster failovers; longer: a slow database or network pause
    /// deposes the leader less easily. Default 5000, at least 500.
    pub lease_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            synchronous: Synchronous::default(),
            url: None,
            lease_ms: 5000,
        }
    }
}

impl StoreConfig {
    /// The lease, as a duration.
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms)
    }
}

/// When a commit is durable (SQLite's `synchronous`; the journal is WAL in both).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Flushed to the disk at every commit: survives a power cut.
    #[default]
    Full,
    /// Written to the OS at every commit, flushed at checkpoints: survives a process crash.
    Normal,
}

impl Synchronous {
    /// The store's setting.
    pub fn store(self) -> fairsched_store::Synchronous {
        match self {
            Synchronous::Full => fairsched_store::Synchronous::Full,
            Synchronous::Normal => fairsched_store::Synchronous::Normal,
        }
    }
}

/// The `[auth]` section: API tokens and who is who.
///
/// With at least one user, `agent_token` is required, and every request to `/api/v1`
/// (except the agents' register and heartbeat, which take `agent_token`) must send `Authorization: Bearer <token>` with a
/// user's token; a missing or unknown token is refused (HTTP 401, code 109). Reads (`GET`)
/// without a token are allowed as an anonymous reader unless `authenticate_reads` is set.
/// What an authenticated user may change is decided by the pools' ACLs (`use` to run
/// operations in a pool, `administer` to change it and its subpools, `manage` to abort or
/// update others' operations in it, `read` to read others' operations' output, environment
/// and events: without it their `env` values show as `"<redacted>"`); superusers may do everything, and only they may apply
/// a whole tree, create top-level pools and disable, enable, drain or undrain nodes (HTTP
/// 403, code 901, otherwise). Keep tokens in files only the server's user may read
/// (`token_file`, mode 0600).
///
/// ```toml
/// [auth]
/// superusers = ["root"]
/// authenticate_reads = false
/// [[auth.users]]
/// name = "root"
/// token_file = "/etc/fairsched/root.token"
/// [[auth.users]]
/// name = "alice"
/// token = "s3cret-alice"
/// groups = ["ml"]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Names of users (each one of `users`) who may do everything: every pool permission,
    /// whole-tree applies (`PUT /api/v1/tree`, `fairsched pool apply`), top-level pools, node
    /// actions, and operations submitted on behalf of another user.
    pub superusers: Vec<String>,
    /// `true`: reads (`GET` under `/api/v1`, and `/metrics`) need a user's token too.
    /// `false`: reads without a token are allowed (the web page and Prometheus work without
    /// one); a request that does send a token must send a valid one. The web page's own files
    /// (`/`, `/assets/...`) hold no data and are always served; with `true` the page asks for
    /// a token (or takes one from its address, `/#token=...`). Needs `users`.
    pub authenticate_reads: bool,
    /// The users the server knows: `[[auth.users]]` tables. Empty: authentication is off.
    pub users: Vec<AuthUser>,
}

/// One user of the API: `[[auth.users]]`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuthUser {
    /// The user's name (required): the `user` of the operations they submit and an ACL
    /// subject (pools' `acl` entries name users and groups). Unique; not `everyone`.
    pub name: String,
    /// The user's secret, sent as `Authorization: Bearer <token>` (the CLI's `--token`,
    /// `FAIRSCHED_TOKEN` or its config file's `token`). Unique among the users and not the
    /// `agent_token`. Exactly one of `token` and `token_file`; prefer `token_file` (a token
    /// here is as secret as this file).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(!skip_serializing_if)]
    pub token: Option<String>,
    /// A file that holds the user's token (surrounding whitespace and the final newline are
    /// ignored), read when the server starts; it should be readable by the server's user
    /// only (the server warns when others may read it). A relative path is relative to the
    /// server's working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(!skip_serializing_if)]
    pub token_file: Option<PathBuf>,
    /// Groups the user belongs to: ACL entries that name a group apply to its members.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(!skip_serializing_if)]
    pub groups: Vec<String>,
}

/// Never prints the token.
impl std::fmt::Debug for AuthUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthUser")
            .field("name", &self.name)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("groups", &self.groups)
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:9090".into(),
            advertise_url: None,
            data_dir: PathBuf::from(".fairsched"),
            agent_token: None,
            agent_token_file: None,
            pool_trees_file: None,
            pool_trees: None,
            scheduler: SchedulerConfig::default(),
            node_timeout_ms: 15_000,
            history_retention_ms: 7 * 24 * 3600 * 1000,
            auth: AuthConfig::default(),
            store: StoreConfig::default(),
        }
    }
}

impl ServerConfig {
    /// Reads a TOML file; errors name the file, the line, and the option with its path (such
    /// as `scheduler.fair_share_update_period_ms`).
    pub fn from_file(path: &Path) -> anyhow::Result<ServerConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let mut config: ServerConfig =
            fairsched_config::from_str(&text, fairsched_config::Format::Toml)
                .map_err(|e| anyhow::anyhow!("{}", e.with_file(path.to_path_buf())))?;
        let secrets = config.auth.users.iter().any(|u| u.token.is_some())
            || config.agent_token.is_some()
            || config
                .store
                .url
                .as_deref()
                .is_some_and(|u| u.contains("password"));
        config
            .read_agent_token_file(true)
            .and_then(|()| config.validate())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if secrets {
            warn_if_readable_by_others(path, "the server's file (it holds a token or a password)");
        }
        Ok(config)
    }

    /// Parses the file's text (TOML); errors name the line and the option with its path.
    pub fn from_toml(text: &str) -> anyhow::Result<ServerConfig> {
        let mut config: ServerConfig =
            fairsched_config::from_str(text, fairsched_config::Format::Toml)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        config.read_agent_token_file(false)?;
        config.validate()?;
        Ok(config)
    }

    /// Reads `agent_token_file` into `agent_token` (with `warn`, a warning if others may read
    /// the file).
    pub fn read_agent_token_file(&mut self, warn: bool) -> anyhow::Result<()> {
        let Some(path) = &self.agent_token_file else {
            return Ok(());
        };
        if self.agent_token.is_some() {
            anyhow::bail!("give either agent_token or agent_token_file, not both");
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("agent_token_file: cannot read {}: {e}", path.display())
        })?;
        if warn {
            warn_if_readable_by_others(path, "the agent token file");
        }
        let token = text.trim();
        if token.is_empty() {
            anyhow::bail!("agent_token_file: {} is empty", path.display());
        }
        self.agent_token = Some(token.to_string());
        Ok(())
    }

    /// Checks what parsing cannot: the `[auth]` section (users, tokens and token files,
    /// superusers). Errors name the option (`auth.users[1].token`).
    pub fn validate(&self) -> anyhow::Result<()> {
        // An agent heartbeats at least 10 ms apart whatever the period says.
        let heartbeat = self.scheduler.node_heartbeat_period_ms.max(10);
        if self.node_timeout_ms < 2 * heartbeat {
            anyhow::bail!(
                "node_timeout_ms: {} ms is shorter than two heartbeat periods \
                 (scheduler.node_heartbeat_period_ms = {} ms): nodes that heartbeat on time \
                 would be lost and their jobs run again elsewhere while they still run; keep it \
                 many periods long (the defaults are 15000 and 100)",
                self.node_timeout_ms,
                self.scheduler.node_heartbeat_period_ms
            );
        }
        check_listen(&self.listen)?;
        self.check_store()?;
        self.users(false).map(|_| ())
    }

    /// Checks `[store]` and `advertise_url` (without connecting to anything).
    fn check_store(&self) -> anyhow::Result<()> {
        const MIN_LEASE_MS: u64 = 500;
        if self.store.lease_ms < MIN_LEASE_MS {
            anyhow::bail!(
                "store.lease_ms: {} ms is too short; the leader renews its lease every fifth of \
                 it, and a database that answers a little slowly would depose it (at least \
                 {MIN_LEASE_MS}; the default is 5000)",
                self.store.lease_ms
            );
        }
        if self.store.lease_ms > 3_600_000 {
            anyhow::bail!(
                "store.lease_ms: {} ms is longer than an hour: a leader that dies would leave \
                 the cluster without one for that long (the default is 5000)",
                self.store.lease_ms
            );
        }
        if let Some(url) = &self.store.url {
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                anyhow::bail!(
                    "store.url: {url:?} is not a PostgreSQL URL; write it as \
                     postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (or leave store.url out to \
                     keep the state in SQLite in data_dir)"
                );
            }
            fairsched_store::PostgresStore::check_url(url).map_err(|e| {
                anyhow::anyhow!(
                    "store.url: {e} (write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)"
                )
            })?;
        }
        if let Some(advertised) = &self.advertise_url {
            let rest = advertised
                .strip_prefix("http://")
                .or_else(|| advertised.strip_prefix("https://"));
            let host_port = rest.map(|r| r.trim_end_matches('/'));
            match host_port {
                Some(hp) if !hp.is_empty() && !hp.contains('/') && !hp.contains(' ') => {
                    if is_wildcard(hp) {
                        anyhow::bail!(
                            "advertise_url: {advertised:?} names a wildcard address, which \
                             clients cannot reach; give this machine's name or address"
                        );
                    }
                }
                _ => anyhow::bail!(
                    "advertise_url: {advertised:?} is not a server URL; write it as \
                     http://HOST:PORT (the address clients and agents reach this server at)"
                ),
            }
        } else if self.store.url.is_some() && is_wildcard(&self.listen) {
            anyhow::bail!(
                "advertise_url: required with store.url when listen ({:?}) is a wildcard \
                 address: standbys name the leader to clients by this URL; set it to the \
                 address clients reach this server at, e.g. advertise_url = \
                 \"http://sched1.example.com:9090\"",
                self.listen
            );
        }
        Ok(())
    }

    /// What the server calls itself in the store while it leads (see `advertise_url`), with
    /// `bound` the address its listener got.
    pub fn advertised(&self, bound: std::net::SocketAddr) -> String {
        match &self.advertise_url {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => format!("http://{bound}"),
        }
    }

    /// The users of `[auth]`, validated, with their tokens (token files read; with `warn`,
    /// a warning about files others may read). Errors name the option
    /// (`auth.users[1].token`) and never print a token.
    pub(crate) fn users(&self, warn: bool) -> anyhow::Result<Vec<(Vec<u8>, Arc<Identity>)>> {
        let auth = &self.auth;
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut users: Vec<(Vec<u8>, Arc<Identity>)> = Vec::new();
        for (i, u) in auth.users.iter().enumerate() {
            let at = format!("auth.users[{i}]");
            if u.name.trim().is_empty() {
                anyhow::bail!("{at}.name: a user needs a name");
            }
            if u.name == fairsched_config::acl::EVERYONE {
                anyhow::bail!(
                    "{at}.name: {:?} is reserved (the ACL subject every user belongs to)",
                    u.name
                );
            }
            if let Some(first) = names.insert(&u.name, i) {
                anyhow::bail!(
                    "{at}.name: user {:?} is already auth.users[{first}]; names must be unique",
                    u.name
                );
            }
            if let Some(g) = u.groups.iter().position(|g| g.trim().is_empty()) {
                anyhow::bail!("{at}.groups[{g}]: a group needs a name");
            }
            let token = match (&u.token, &u.token_file) {
                (Some(_), Some(_)) => {
                    anyhow::bail!("{at}: give either token or token_file, not both")
                }
                (None, None) => {
                    anyhow::bail!("{at}: user {:?} needs a token or token_file", u.name)
                }
                (Some(t), None) => {
                    if t.trim().is_empty() {
                        anyhow::bail!("{at}.token: the token is empty");
                    }
                    one_word(&format!("{at}.token"), t)?;
                    t.clone()
                }
                (None, Some(path)) => {
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        anyhow::anyhow!("{at}.token_file: cannot read {}: {e}", path.display())
                    })?;
                    if warn {
                        warn_if_readable_by_others(path, "a token file");
                    }
                    let t = text.trim().to_string();
                    if t.is_empty() {
                        anyhow::bail!("{at}.token_file: {} is empty", path.display());
                    }
                    one_word(&format!("{at}.token_file ({})", path.display()), &t)?;
                    t
                }
            };
            let field = if u.token.is_some() {
                "token"
            } else {
                "token_file"
            };
            if let Some(j) = users
                .iter()
                .position(|(other, _)| *other == token.as_bytes())
            {
                anyhow::bail!(
                    "{at}.{field}: the same token as auth.users[{j}] ({:?}); every user needs \
                     their own",
                    users[j].1.name
                );
            }
            if self.agent_token.as_deref() == Some(token.as_str()) {
                anyhow::bail!(
                    "{at}.{field}: the same token as agent_token; users and agents need \
                     different tokens"
                );
            }
            users.push((
                token.into_bytes(),
                Arc::new(Identity {
                    name: u.name.clone(),
                    groups: u.groups.clone(),
                    superuser: auth.superusers.contains(&u.name),
                }),
            ));
        }
        for (i, s) in auth.superusers.iter().enumerate() {
            if !names.contains_key(s.as_str()) {
                anyhow::bail!(
                    "auth.superusers[{i}]: {s:?} is not a user (auth.users names {:?})",
                    names.keys().collect::<Vec<_>>()
                );
            }
        }
        if auth.authenticate_reads && users.is_empty() {
            anyhow::bail!(
                "auth.authenticate_reads: needs auth.users (without users authentication is off)"
            );
        }
        let agent_token_field = if self.agent_token_file.is_some() {
            "agent_token_file"
        } else {
            "agent_token"
        };
        match self.agent_token.as_deref() {
            Some(t) if t.trim().is_empty() => anyhow::bail!(
                "agent_token: the token is empty; set a secret (for example the output of \
                 `openssl rand -hex 32`) or leave the option out"
            ),
            Some(t) if t.contains("REPLACE-WITH") => anyhow::bail!(
                "{agent_token_field}: still the example's placeholder {t:?}, which anyone can \
                 read; set a secret (for example the output of `openssl rand -hex 32`)"
            ),
            Some(t) => one_word(agent_token_field, t)?,
            None if !users.is_empty() => anyhow::bail!(
                "agent_token: required when [auth] has users (without it anyone who can reach \
                 the server could register a node and report on its jobs); set `agent_token = \
                 \"<secret>\"` at the top of the server's file (for example the output of \
                 `openssl rand -hex 32`) and give every agent the same secret (`fairsched agent \
                 --token-file PATH`)"
            ),
            _ => {}
        }
        Ok(users)
    }
}

/// Refuses a `listen` that is not `HOST:PORT` (the bind would fail only at start, after
/// `config check` passed the file).
fn check_listen(listen: &str) -> anyhow::Result<()> {
    let port = listen
        .rsplit_once(':')
        .filter(|(host, _)| !host.is_empty())
        .map(|(_, port)| port.parse::<u16>());
    match port {
        Some(Ok(_)) => Ok(()),
        Some(Err(_)) => anyhow::bail!(
            "listen: {listen:?}: the port must be a number from 0 to 65535 (such as \
             127.0.0.1:9090; 0 picks a free port)"
        ),
        None => anyhow::bail!(
            "listen: {listen:?} is not HOST:PORT (such as 127.0.0.1:9090, or 0.0.0.0:9090 for \
             every address)"
        ),
    }
}

/// Refuses a token with whitespace or a line break inside: no client could send it (an
/// `Authorization` header is one line), so its user would be locked out without a word.
fn one_word(field: &str, token: &str) -> anyhow::Result<()> {
    if token.trim().contains(char::is_whitespace) {
        anyhow::bail!(
            "{field}: the token has a space or a line break inside; a token is one word (one \
             line), which clients send as `Authorization: Bearer <token>`"
        );
    }
    Ok(())
}

/// Whether `host:port` (or a bare host) names every address of the machine, not one.
fn is_wildcard(host_port: &str) -> bool {
    let host = match host_port.rsplit_once(':') {
        Some((h, port)) if !port.contains(']') => h,
        _ => host_port,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.is_empty()
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified())
}

/// Warns (once, at load) when a file holding secrets may be read by other users.
pub fn warn_if_readable_by_others(path: &Path, what: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{:o}", mode & 0o777),
                    "{what} may be read by other users; make it readable by the server's user \
                     only (chmod 600)"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
}
