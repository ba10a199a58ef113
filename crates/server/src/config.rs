//! The server's TOML configuration.

use fairsched_config::PoolTrees;
use fairsched_core::SchedulerConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The server's file: `fairsched server --config fairsched.toml` (TOML). Every option may be
/// left out (its default applies; no file at all means all defaults); an unknown name, here
/// or in `[scheduler]`, is an error that names it and its line.
///
/// ```toml
/// listen = "0.0.0.0:9090"
/// data_dir = "/var/lib/fairsched"
/// agent_token = "secret"          # agents send it as a bearer token
/// pool_trees_file = "pools.toml"  # read on the first start only; or inline [pool_trees]
/// node_timeout_ms = 15000
///
/// [scheduler]
/// fair_share_update_period_ms = 200
/// node_heartbeat_period_ms = 100
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
    /// The directory of the server's store (the SQLite database `fairsched.db` and its WAL):
    /// the pool tree as applied, operations, jobs, nodes with their settings, and the event
    /// log. Created if missing; a relative path is relative to the server's working
    /// directory. The server restores its state from here when it restarts.
    /// `fairsched server --data-dir` overrides it.
    pub data_dir: PathBuf,
    /// Shared secret of the agents: the agent endpoints (register, heartbeat) accept only
    /// requests with `Authorization: Bearer <token>`, which agents send from their `--token`
    /// (or `FAIRSCHED_AGENT_TOKEN`). Unset: the agent endpoints are open to anyone who can reach
    /// `listen`. The CLI's endpoints do not check it.
    pub agent_token: Option<String>,
    /// A pool-trees file (`.toml` or `.json`, by extension; the layout of the [pool-trees
    /// reference](config-reference.md)) the server starts with when its store holds no pool
    /// tree yet, that is on the first start with a new `data_dir`. From then on the stored
    /// trees win: the store keeps every tree (and which one is the default) with the changes
    /// made through the API (`fairsched pool ...`), and editing this file has no effect (apply
    /// it with `fairsched pool apply [--tree NAME]` instead); a tree added to the file later
    /// is not picked up. A relative path is relative to the server's working directory. Wins
    /// over `pool_trees` when both are set. Both unset: one tree, `default`, with default
    /// options and no pools.
    pub pool_trees_file: Option<PathBuf>,
    /// Pool trees given inline, in the layout of a pool-trees file; used as
    /// `pool_trees_file` is (first start only) and ignored when that is set. In TOML the name
    /// is doubled: this option, then the file's own `pool_trees` table, as in
    /// `[pool_trees.pool_trees.default.pools.research]`.
    pub pool_trees: Option<PoolTrees>,
    /// The scheduling core's settings: fair-share update and heartbeat periods, node
    /// overcommit, hung operations.
    pub scheduler: SchedulerConfig,
    /// A node that has sent no heartbeat for this long, in milliseconds, is lost: it is
    /// removed (event `node_lost`) and its jobs go back to pending and run again elsewhere.
    /// After a server restart, nodes that were running jobs have this long to heartbeat again
    /// and keep them. Checked at each tick of the fair-share timer
    /// (`scheduler.fair_share_update_period_ms`). Keep it many heartbeat periods long: an
    /// agent retries a failed heartbeat with backoff (200 ms doubling to 2 s), and a node lost
    /// on a short hiccup has its jobs run twice.
    pub node_timeout_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:9090".into(),
            data_dir: PathBuf::from(".fairsched"),
            agent_token: None,
            pool_trees_file: None,
            pool_trees: None,
            scheduler: SchedulerConfig::default(),
            node_timeout_ms: 15_000,
        }
    }
}

impl ServerConfig {
    /// Reads a TOML file; errors name the file, the line, and the option with its path (such
    /// as `scheduler.fair_share_update_period_ms`).
    pub fn from_file(path: &Path) -> anyhow::Result<ServerConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        fairsched_config::from_str(&text, fairsched_config::Format::Toml)
            .map_err(|e| anyhow::anyhow!("{}", e.with_file(path.to_path_buf())))
    }

    /// Parses the file's text (TOML); errors name the line and the option with its path.
    pub fn from_toml(text: &str) -> anyhow::Result<ServerConfig> {
        fairsched_config::from_str(text, fairsched_config::Format::Toml)
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}
