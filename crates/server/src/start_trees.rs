//! The pool trees the server starts with.
//!
//! On the first start (an empty store) they are the configured trees: `pool_trees_file`, else
//! the inline `pool_trees`, else one tree `default`. On every later start they are the stored
//! trees (the store keeps each tree with the changes made through the API) plus the configured
//! trees the store does not have yet, which are added:
//!
//! | tree | at start |
//! |---|---|
//! | configured, not stored | added (stored, logged at info) |
//! | stored, no longer configured | kept, with a warning (no command removes a stored tree) |
//! | in both | the stored version; a warning when the configured one differs |
//! | the default tree | the stored default; a warning when the configuration names another |
//!
//! With neither `pool_trees_file` nor `pool_trees` set, the stored trees are used as they are.

use crate::ServerConfig;
use fairsched_config::PoolTrees;

/// The configured trees and where they come from (for messages): `pool_trees_file`, else the
/// inline `pool_trees`; `None` when neither is set. The file is read at every start: one that
/// cannot be read or parsed is an error naming it.
pub(crate) fn configured(config: &ServerConfig) -> anyhow::Result<Option<(PoolTrees, String)>> {
    match (&config.pool_trees_file, &config.pool_trees) {
        (Some(path), _) => {
            let trees = fairsched_config::load_pool_trees_file(path)
                .map_err(|e| anyhow::anyhow!("pool_trees_file: {e}"))?;
            Ok(Some((
                trees,
                format!("the pool-trees file {}", path.display()),
            )))
        }
        (None, Some(trees)) => Ok(Some((trees.clone(), "the inline pool_trees".into()))),
        (None, None) => Ok(None),
    }
}

/// The stored trees with the configured trees the store does not have, and what differs.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct StartTrees {
    /// What the server runs: the stored trees (default: the stored default) and the added ones.
    pub trees: PoolTrees,
    /// Configured trees the store did not have (added), by name.
    pub added: Vec<String>,
    /// Stored trees the configuration no longer has (kept), by name.
    pub only_stored: Vec<String>,
    /// Trees in both whose configured version is not the stored one (the stored one is used).
    pub differ: Vec<String>,
    /// The configuration's default tree, when it is not the stored default (which stays).
    pub other_default: Option<String>,
}

/// Adds to `stored` (the store's trees, with their default) the trees of `configured` it does
/// not have; a stored tree wins over its configured version, and the stored default stays.
pub(crate) fn merge(stored: PoolTrees, configured: Option<&PoolTrees>) -> StartTrees {
    let mut start = StartTrees {
        trees: stored,
        ..StartTrees::default()
    };
    let Some(configured) = configured else {
        return start;
    };
    for (name, tree) in &configured.pool_trees {
        match start.trees.pool_trees.get(name) {
            None => {
                start.trees.pool_trees.insert(name.clone(), tree.clone());
                start.added.push(name.clone());
            }
            // The stored version went through JSON, which keeps every option as it was.
            Some(stored) if stored != tree => start.differ.push(name.clone()),
            Some(_) => {}
        }
    }
    start.only_stored = start
        .trees
        .pool_trees
        .keys()
        .filter(|name| !configured.pool_trees.contains_key(*name))
        .cloned()
        .collect();
    let stored_default = start.trees.default_tree_name().map(str::to_string);
    if let Some(default) = configured.default_tree_name()
        && stored_default.as_deref() != Some(default)
    {
        start.other_default = Some(default.to_string());
    }
    start
}

/// `"a", "b"`: names for messages.
pub(crate) fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl StartTrees {
    /// Logs what the start did with the configured trees (`source` names them); once per start.
    pub(crate) fn log(&self, source: &str) {
        for name in &self.added {
            tracing::info!(
                tree = name,
                "pool tree {name:?} added from {source} (the store did not have it)"
            );
        }
        for name in &self.only_stored {
            tracing::warn!(
                tree = name,
                "pool tree {name:?} is stored but no longer in {source}; it is kept (the stored \
                 trees win: it may hold changes made through the API). A stored pool tree \
                 cannot be removed: no command or API request removes one"
            );
        }
        for name in &self.differ {
            tracing::warn!(
                tree = name,
                "pool tree {name:?} in {source} differs from the stored one, which is used (the \
                 stored trees win; edits to a tree's file configuration after it was first \
                 stored are not applied at start): apply the file's with `fairsched pool apply \
                 --tree {name} FILE` (PUT /api/v1/tree?tree={name}), or ignore this if the \
                 stored tree was changed through the API on purpose"
            );
        }
        if let (Some(other), Some(default)) = (&self.other_default, self.trees.default_tree_name())
        {
            tracing::warn!(
                tree = default,
                "{source} names {other:?} the default tree; the stored default tree, \
                 {default:?}, stays (the default tree does not change after the first start)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairsched_config::PoolTreeConfig;

    fn trees(text: &str) -> PoolTrees {
        fairsched_config::from_str(text, fairsched_config::Format::Toml).unwrap()
    }

    /// The stored version of `trees`: each tree through JSON, as the store keeps it.
    fn stored(trees: &PoolTrees) -> PoolTrees {
        PoolTrees {
            default_tree: trees.default_tree_name().map(str::to_string),
            pool_trees: trees
                .pool_trees
                .iter()
                .map(|(name, t)| {
                    let json = serde_json::to_string(t).unwrap();
                    (name.clone(), serde_json::from_str(&json).unwrap())
                })
                .collect(),
        }
    }

    const ONE: &str = r#"
        [pool_trees.cpu.config]
        node_tag_filter = "cpu"
        [pool_trees.cpu.pools.research]
        weight = 2
        strong_guarantee_resources = { cpu = 1.5, memory = "1GiB" }
    "#;

    /// A pool-trees file that cannot be read stops the start, naming the option and the file.
    #[test]
    fn an_unreadable_file_names_the_option() {
        let config = ServerConfig {
            pool_trees_file: Some("/nonexistent/pools.toml".into()),
            ..ServerConfig::default()
        };
        let e = configured(&config).unwrap_err().to_string();
        assert!(
            e.starts_with("pool_trees_file: ") && e.contains("/nonexistent/pools.toml"),
            "{e}"
        );
    }

    #[test]
    fn nothing_configured_keeps_the_stored_trees() {
        let s = stored(&trees(ONE));
        let start = merge(s.clone(), None);
        assert_eq!(
            start,
            StartTrees {
                trees: s,
                ..StartTrees::default()
            }
        );
    }

    #[test]
    fn the_same_file_again_changes_nothing() {
        let seed001: PoolTreeConfig = fairsched_config::from_str(
            include_str!("../../config/examples/seed001_project_root.toml"),
            fairsched_config::Format::Toml,
        )
        .unwrap();
        for file in [
            trees(ONE),
            trees(include_str!("../../config/examples/pool_trees.toml")),
            PoolTrees::single("default", seed001),
        ] {
            let start = merge(stored(&file), Some(&file));
            assert_eq!(start.trees, stored(&file));
            assert!(
                start.added.is_empty() && start.only_stored.is_empty(),
                "{start:?}"
            );
            assert!(
                start.differ.is_empty(),
                "the stored version is the file's: {start:?}"
            );
            assert_eq!(start.other_default, None);
        }
    }

    #[test]
    fn a_new_tree_is_added_and_the_stored_ones_win() {
        let s = stored(&trees(ONE));
        let file = trees(&format!(
            "default_tree = \"gpu\"\n{}\n{}",
            ONE.replace("weight = 2", "weight = 3"),
            r#"[pool_trees.gpu.config]
            node_tag_filter = "gpu"
            [pool_trees.gpu.pools.train]
            "#
        ));
        let start = merge(s.clone(), Some(&file));
        assert_eq!(start.added, ["gpu"]);
        assert_eq!(start.differ, ["cpu"]);
        assert!(start.only_stored.is_empty());
        assert_eq!(start.other_default.as_deref(), Some("gpu"));
        assert_eq!(start.trees.default_tree_name(), Some("cpu"));
        assert_eq!(start.trees.pool_trees["cpu"], s.pool_trees["cpu"]);
        assert_eq!(start.trees.pool_trees["gpu"], file.pool_trees["gpu"]);
    }

    #[test]
    fn a_tree_gone_from_the_file_is_kept() {
        let both = trees(&format!(
            "default_tree = \"cpu\"\n{ONE}\n[pool_trees.gpu.config]\nnode_tag_filter = \"gpu\""
        ));
        let start = merge(stored(&both), Some(&trees(ONE)));
        assert_eq!(start.trees, stored(&both));
        assert_eq!(start.only_stored, ["gpu"]);
        assert!(
            start.added.is_empty() && start.differ.is_empty(),
            "{start:?}"
        );
        assert_eq!(start.other_default, None);
    }
}
