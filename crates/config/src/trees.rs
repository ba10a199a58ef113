//! A pool tree ([`PoolTreeConfig`]) and a set of trees ([`PoolTrees`]).

use crate::pool::PoolNode;
use crate::tree::TreeConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One pool tree: its options under `config` and its top-level pools under `pools`.
///
/// ```toml
/// [config]
/// fair_share_starvation_timeout_ms = 1000
///
/// [pools.research]
/// strong_guarantee_resources = { cpu = 10 }
///
/// [pools.research.pools.adhoc]
/// weight = 2
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PoolTreeConfig {
    /// The tree's options. Default: all defaults.
    pub config: TreeConfig,
    /// Top-level pools (children of the root) by name. Default: none.
    pub pools: BTreeMap<String, PoolNode>,
}

impl PoolTreeConfig {
    /// Every pool with its path (`"research/adhoc"`), depth-first, children in name order.
    pub fn walk(&self) -> Vec<(String, &PoolNode)> {
        fn go<'a>(
            prefix: &str,
            pools: &'a BTreeMap<String, PoolNode>,
            out: &mut Vec<(String, &'a PoolNode)>,
        ) {
            for (name, node) in pools {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}/{name}")
                };
                out.push((path.clone(), node));
                go(&path, &node.pools, out);
            }
        }
        let mut out = Vec::new();
        go("", &self.pools, &mut out);
        out
    }

    /// Finds a pool by name anywhere in the tree (names are unique per tree). Returns its path
    /// and node.
    pub fn find_pool(&self, name: &str) -> Option<(String, &PoolNode)> {
        self.walk()
            .into_iter()
            .find(|(path, _)| path.rsplit('/').next() == Some(name))
    }

    /// Finds a pool by its path (`"research/adhoc"`).
    pub fn pool_at(&self, path: &str) -> Option<&PoolNode> {
        let mut parts = path.split('/');
        let mut node = self.pools.get(parts.next()?)?;
        for part in parts {
            node = node.pools.get(part)?;
        }
        Some(node)
    }

    /// Mutable access to a pool by its path.
    pub fn pool_at_mut(&mut self, path: &str) -> Option<&mut PoolNode> {
        let mut parts = path.split('/');
        let mut node = self.pools.get_mut(parts.next()?)?;
        for part in parts {
            node = node.pools.get_mut(part)?;
        }
        Some(node)
    }
}

/// Several pool trees, as in YTsaurus `//sys/pool_trees`, plus the default tree.
///
/// File layout (TOML):
///
/// ```toml
/// default_tree = "physical"
///
/// [pool_trees.physical.config]
/// node_tag_filter = "physical"
///
/// [pool_trees.physical.pools.research]
/// weight = 2
///
/// [pool_trees.gpu.config]
/// node_tag_filter = "gpu"
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PoolTrees {
    /// Tree used by operations that do not name their trees. Must name one of `pool_trees`.
    /// Default: unset, meaning the only tree when there is exactly one, else none.
    #[schemars(!skip_serializing_if)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_tree: Option<String>,
    /// Trees by name.
    pub pool_trees: BTreeMap<String, PoolTreeConfig>,
}

impl PoolTrees {
    /// A set holding one tree, which is the default.
    pub fn single(name: impl Into<String>, tree: PoolTreeConfig) -> PoolTrees {
        let name = name.into();
        PoolTrees {
            default_tree: Some(name.clone()),
            pool_trees: BTreeMap::from([(name, tree)]),
        }
    }

    /// Name of the default tree: `default_tree` if set, else the only tree if there is exactly
    /// one, else `None`.
    pub fn default_tree_name(&self) -> Option<&str> {
        match &self.default_tree {
            Some(name) => Some(name.as_str()),
            None if self.pool_trees.len() == 1 => self.pool_trees.keys().next().map(String::as_str),
            None => None,
        }
    }

    /// The default tree, if any (see [`Self::default_tree_name`]).
    pub fn default_tree(&self) -> Option<&PoolTreeConfig> {
        self.pool_trees.get(self.default_tree_name()?)
    }
}
