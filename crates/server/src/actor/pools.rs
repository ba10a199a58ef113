//! Pool and tree commands in any pool tree (`tree` names it; none: the default tree), the
//! warnings about a tree after a change, and the trees saved to the store.

use super::{Actor, core_error};
use crate::view::unknown_tree;
use fairsched_api::{ApiError, TreeApplyReply, codes};
use fairsched_config::{PoolConfig, PoolTreeConfig};
use fairsched_resources::Resources;
use fairsched_store::StoredTree;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Pool `name`'s options from a request; an error names the pool and the option, in user
/// words (`pool "q": weight: invalid type: the string "heavy", expected a number`).
pub(super) fn pool_config(name: &str, config: Map<String, Value>) -> Result<PoolConfig, ApiError> {
    serde_path_to_error::deserialize(Value::Object(config)).map_err(|e| {
        let path = e.path().to_string();
        let inner = fairsched_config::user_words(&e.inner().to_string());
        let message = if path == "." {
            format!("bad pool config: pool {name:?}: {inner}")
        } else {
            format!("bad pool config: pool {name:?}: {path}: {inner}")
        };
        ApiError::new(codes::BAD_REQUEST, message)
            .with_attribute("pool", name)
            .with_attribute("field", path)
    })
}

impl Actor {
    /// The name of the tree a request names (`None`: the default tree), or an error naming
    /// the trees there are.
    pub(super) fn resolve_tree(&self, tree: Option<&str>) -> Result<String, ApiError> {
        match tree {
            None => Ok(self.sched.tree().name.clone()),
            Some(name) if self.sched.tree_index(name).is_some() => Ok(name.to_string()),
            Some(name) => Err(unknown_tree(
                name,
                self.sched.trees().iter().map(|t| t.name.as_str()),
            )),
        }
    }

    pub(super) fn create_pool(
        &mut self,
        tree: Option<&str>,
        name: &str,
        parent: Option<&str>,
        config: Map<String, Value>,
    ) -> Result<Vec<String>, ApiError> {
        let tree = self.resolve_tree(tree)?;
        let config = pool_config(name, config)?;
        let now = self.now();
        self.sched
            .create_pool_in(now, &tree, parent, name, config)
            .map_err(|e| core_error(e).with_attribute("tree", tree.as_str()))?;
        tracing::info!(tree, pool = name, parent, "pool created");
        self.save_tree(&tree);
        Ok(self.tree_warnings(&tree))
    }

    /// Replaces a pool's options and/or moves it: both or neither (a rejected move undoes the
    /// options' change).
    pub(super) fn update_pool(
        &mut self,
        tree: Option<&str>,
        name: &str,
        config: Option<Map<String, Value>>,
        parent: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        let tree = self.resolve_tree(tree)?;
        let config = config.map(|c| pool_config(name, c)).transpose()?;
        let now = self.now();
        let t = self.sched.tree_index(&tree).expect("resolved above");
        let before = self.sched.trees()[t].validated.tree.clone();
        let r = (|| {
            if let Some(c) = config {
                self.sched.set_pool_in(now, &tree, name, c)?;
            }
            if let Some(p) = parent {
                self.sched.move_pool_in(now, &tree, name, Some(p))?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            if self.sched.trees()[t].validated.tree != before {
                // The options changed, the move was rejected: back to how it was.
                if let Err(undo) = self.sched.set_tree_config_in(now, &tree, before) {
                    tracing::error!(tree, pool = name, "cannot undo a pool change: {undo}");
                }
            }
            return Err(core_error(e).with_attribute("tree", tree.as_str()));
        }
        tracing::info!(tree, pool = name, "pool updated");
        self.save_tree(&tree);
        Ok(self.tree_warnings(&tree))
    }

    pub(super) fn remove_pool(
        &mut self,
        tree: Option<&str>,
        name: &str,
    ) -> Result<Vec<String>, ApiError> {
        let tree = self.resolve_tree(tree)?;
        let now = self.now();
        self.sched
            .remove_pool_in(now, &tree, name)
            .map_err(|e| core_error(e).with_attribute("tree", tree.as_str()))?;
        tracing::info!(tree, pool = name, "pool removed");
        self.save_tree(&tree);
        Ok(self.tree_warnings(&tree))
    }

    /// What needs attention in tree `name` as it is now (after a change): its guarantees
    /// overcommit ([`Actor::overcommit_warning`]).
    pub(super) fn tree_warnings(&self, name: &str) -> Vec<String> {
        let Some(t) = self.sched.tree_index(name) else {
            return Vec::new();
        };
        self.overcommit_warning(name, &self.sched.trees()[t].validated.tree)
            .into_iter()
            .collect()
    }

    /// `config` as tree `name`'s, against the tree's nodes now: when the strong guarantees
    /// (with flows or burst guarantees) of the root's pools exceed the cluster, says so
    /// (alert 29000). Such a tree is accepted, as in YTsaurus: the fair-share update scales
    /// the guarantees down proportionally and raises the alert. A tree without nodes yet is
    /// said to have none, not to overcommit a cluster of 0.
    pub(super) fn overcommit_warning(&self, name: &str, config: &PoolTreeConfig) -> Option<String> {
        let t = self.sched.tree_index(name)?;
        let total = self
            .sched
            .nodes()
            .filter(|n| n.tree == Some(t) && n.scheduler_jobs_enabled)
            .fold(Resources::ZERO, |acc, n| acc.add(&n.resources));
        let alert = fairsched_config::guarantee_overcommit_alert(config, &total)?;
        Some(if total == Resources::ZERO {
            format!("pool tree {name:?}: {}", alert.message)
        } else {
            format!(
                "pool tree {name:?} overcommits its guarantees (alert {}): {}",
                alert.code, alert.message
            )
        })
    }

    /// Validates a new configuration of a tree (`None`: the default tree) as a whole and,
    /// unless `dry_run`, applies it at once (the other trees keep theirs).
    pub(super) fn apply_tree(
        &mut self,
        tree: Option<&str>,
        config: Value,
        dry_run: bool,
    ) -> Result<TreeApplyReply, ApiError> {
        let name = self.resolve_tree(tree)?;
        let t = self.sched.tree_index(&name).expect("resolved above");
        let new: PoolTreeConfig = serde_json::from_value(config)
            .map_err(|e| ApiError::new(codes::BAD_REQUEST, format!("bad pool tree: {e}")))?;
        let update = fairsched_config::validate_update(&self.sched.trees()[t].validated.tree, &new)
            .map_err(|errors| {
                ApiError::new(codes::BAD_REQUEST, errors.to_string())
                    .with_attribute("tree", name.as_str())
            })?;
        let diff = &update.diff;
        let reply = TreeApplyReply {
            tree: name.clone(),
            added: diff.added.clone(),
            removed: diff.removed.clone(),
            changed: diff.changed.clone(),
            tree_config_changed: diff.tree_config_changed,
            applied: !dry_run,
            warnings: update
                .validated
                .warnings
                .iter()
                .map(|w| w.to_string())
                .chain(self.overcommit_warning(&name, &update.validated.tree))
                .collect(),
        };
        if dry_run || diff.is_empty() {
            return Ok(reply);
        }
        let trees = fairsched_config::ValidatedPoolTrees {
            trees: self
                .sched
                .trees()
                .iter()
                .map(|t| {
                    let validated = if t.name == name {
                        update.validated.clone()
                    } else {
                        (*t.validated).clone()
                    };
                    (t.name.clone(), validated)
                })
                .collect(),
            default_tree: Some(self.sched.tree().name.clone()),
            warnings: Vec::new(),
        };
        let now = self.now();
        self.sched
            .replace_tree_config(now, trees)
            .map_err(|e| core_error(e).with_attribute("tree", name.as_str()))?;
        self.save_tree(&name);
        tracing::info!(
            tree = name,
            added = reply.added.len(),
            removed = reply.removed.len(),
            changed = reply.changed.len(),
            "pool tree applied"
        );
        self.server_event(json!({
            "event": "tree_applied",
            "tree": name,
            "added": reply.added,
            "removed": reply.removed,
            "changed": reply.changed,
            "tree_config_changed": reply.tree_config_changed,
        }));
        Ok(reply)
    }

    /// Queues every tree for the store, with which one is the default.
    pub(super) fn save_trees(&mut self) {
        let names: Vec<String> = self.sched.trees().iter().map(|t| t.name.clone()).collect();
        for name in names {
            self.save_tree(&name);
        }
    }

    /// Queues the tree named `name` (its configuration now) for the store.
    pub(super) fn save_tree(&mut self, name: &str) {
        let Some(t) = self.sched.tree_index(name) else {
            return;
        };
        let tree = &self.sched.trees()[t];
        let Ok(config) = serde_json::to_string(&tree.validated.tree) else {
            return;
        };
        if let Ok(value) = serde_json::from_str(&config) {
            self.tree_configs.insert(tree.name.clone(), Arc::new(value));
        }
        let stored = StoredTree {
            name: tree.name.clone(),
            config,
            is_default: tree.name == self.sched.tree().name,
        };
        self.batch.tree(stored);
    }
}
