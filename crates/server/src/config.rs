//! The server's TOML configuration.

use fairsched_config::PoolTrees;
use fairsched_core::SchedulerConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `fairsched server --config fairsched.toml`.
///
/// ```toml
/// listen = "127.0.0.1:9090"
/// data_dir = ".fairsched"
/// agent_token = "secret"          # agents send it as a bearer token
/// pool_trees_file = "pools.toml"  # or inline: [pool_trees.pool_trees.default.pools.research]
///
/// [scheduler]
/// fair_share_update_period_ms = 200
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// Where the store lives.
    pub data_dir: PathBuf,
    /// Shared secret of the agents; none: agent endpoints are open.
    pub agent_token: Option<String>,
    /// Pool trees file (TOML, YAML or JSON; the `PoolTrees` layout). Used when the store has no
    /// pool tree yet; afterwards the stored trees (with their API changes) and the stored
    /// default tree win.
    pub pool_trees_file: Option<PathBuf>,
    /// Pool trees given inline (same layout as the file).
    pub pool_trees: Option<PoolTrees>,
    /// The scheduling core's settings (PRODUCT.md names).
    pub scheduler: SchedulerConfig,
    /// A node that has not heartbeated for this long is removed; its jobs are rescheduled.
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
    /// Reads a TOML file; errors name the file and the field.
    pub fn from_file(path: &Path) -> anyhow::Result<ServerConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }
}
