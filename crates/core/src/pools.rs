//! Runtime changes of the pool tree (issue: create, change, move and remove pools, change the
//! tree options). Every change edits a copy of the configuration, validates the whole tree with
//! the config crate and is applied only if valid: a rejected change names the pool and the field
//! and changes nothing.

use crate::model::Millis;
use crate::scheduler::{CoreError, Scheduler};
use crate::tree::ROOT_NAME;
use fairsched_config::{PoolConfig, PoolNode, PoolTreeConfig, TreeConfig};
use std::collections::BTreeMap;

impl Scheduler {
    /// Validates a whole new tree configuration and makes it the tree's configuration (a
    /// declarative apply). Rejected: nothing changes; the error carries the first YTsaurus code
    /// among the configuration errors (e.g. 29000).
    pub fn set_tree_config(&mut self, now: Millis, new: PoolTreeConfig) -> Result<(), CoreError> {
        self.apply_tree_config(now, self.default_tree, new)
    }

    /// [`Self::set_tree_config`] for the tree named `tree`.
    pub fn set_tree_config_in(
        &mut self,
        now: Millis,
        tree: &str,
        new: PoolTreeConfig,
    ) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.apply_tree_config(now, t, new)
    }

    /// The index of the tree named `name`, or an error naming the trees there are.
    pub(crate) fn tree_named(&self, name: &str) -> Result<usize, CoreError> {
        self.tree_index(name).ok_or_else(|| {
            CoreError::new(format!(
                "tree {name:?} does not exist (trees: {})",
                self.trees
                    .iter()
                    .map(|t| format!("{:?}", t.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    fn apply_tree_config(
        &mut self,
        now: Millis,
        t: usize,
        new: PoolTreeConfig,
    ) -> Result<(), CoreError> {
        let validated =
            fairsched_config::validate_tree(&new).map_err(|errors| CoreError::InvalidConfig {
                code: errors.0.iter().find_map(|e| e.code),
                message: format!("rejected pool tree change: {errors}"),
            })?;
        // A pool that disappears while it has operations lives on as an ephemeral pool of the
        // same name under the default parent until its last operation leaves (YTsaurus: an
        // explicit pool removed with operations turns ephemeral); created again, it takes them
        // over (see `replace_tree_config`).
        // The other trees keep their configuration.
        let mut trees = fairsched_config::ValidatedPoolTrees {
            trees: self
                .trees
                .iter()
                .map(|tree| (tree.name.clone(), (*tree.validated).clone()))
                .collect(),
            default_tree: Some(self.trees[self.default_tree].name.clone()),
            warnings: Vec::new(),
        };
        trees.trees.insert(self.trees[t].name.clone(), validated);
        self.replace_tree_config(now, trees)?;
        self.refresh_lightweight();
        self.try_run_pending(now);
        Ok(())
    }

    /// Path (`a/b/c`) of an explicit pool.
    fn pool_path(&self, t: usize, name: &str) -> Result<String, CoreError> {
        self.trees[t]
            .explicit(name)
            .map(|p| p.path.clone())
            .ok_or_else(|| {
                CoreError::NoSuchObject(format!("pool {name:?} does not exist (or is ephemeral)"))
            })
    }

    fn children_of<'a>(
        tree: &'a mut PoolTreeConfig,
        parent_path: Option<&str>,
    ) -> Option<&'a mut BTreeMap<String, PoolNode>> {
        match parent_path {
            None => Some(&mut tree.pools),
            Some(path) => tree.pool_at_mut(path).map(|n| &mut n.pools),
        }
    }

    /// Creates an explicit pool under `parent` (`None` or `<Root>`: at the top).
    fn create_pool_at(
        &mut self,
        now: Millis,
        t: usize,
        parent: Option<&str>,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        if self.trees[t].explicit(name).is_some() {
            return Err(CoreError::new(format!("pool {name:?} already exists")));
        }
        let parent_path = match parent {
            None | Some(ROOT_NAME) => None,
            Some(p) => Some(self.pool_path(t, p)?),
        };
        let mut new = self.trees[t].validated.tree.clone();
        let children = Self::children_of(&mut new, parent_path.as_deref()).ok_or_else(|| {
            CoreError::NoSuchObject(format!("parent pool {parent:?} does not exist"))
        })?;
        children.insert(
            name.to_string(),
            PoolNode::from_parts(config, BTreeMap::new()),
        );
        self.apply_tree_config(now, t, new)
    }

    /// Replaces a pool's options (its child pools stay).
    fn set_pool_at(
        &mut self,
        now: Millis,
        t: usize,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        let path = self.pool_path(t, name)?;
        let mut new = self.trees[t].validated.tree.clone();
        new.pool_at_mut(&path)
            .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?
            .set_config(config);
        self.apply_tree_config(now, t, new)
    }

    /// Moves a pool (with its subtree) under another parent.
    fn move_pool_at(
        &mut self,
        now: Millis,
        t: usize,
        name: &str,
        new_parent: Option<&str>,
    ) -> Result<(), CoreError> {
        let path = self.pool_path(t, name)?;
        let parent_path = match new_parent {
            None | Some(ROOT_NAME) => None,
            Some(p) => {
                let pp = self.pool_path(t, p)?;
                if pp == path || pp.starts_with(&format!("{path}/")) {
                    return Err(CoreError::new(format!(
                        "pool {name:?} cannot be moved into its own subtree ({p:?})"
                    )));
                }
                Some(pp)
            }
        };
        let mut new = self.trees[t].validated.tree.clone();
        let old_parent = path.rsplit_once('/').map(|(p, _)| p.to_string());
        let node = Self::children_of(&mut new, old_parent.as_deref())
            .and_then(|c| c.remove(name))
            .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?;
        Self::children_of(&mut new, parent_path.as_deref())
            .ok_or_else(|| {
                CoreError::NoSuchObject(format!("parent pool {new_parent:?} does not exist"))
            })?
            .insert(name.to_string(), node);
        self.apply_tree_config(now, t, new)
    }

    /// Removes an explicit pool without child pools; its operations, if any, go on in an
    /// ephemeral pool of that name.
    fn remove_pool_at(&mut self, now: Millis, t: usize, name: &str) -> Result<(), CoreError> {
        let path = self.pool_path(t, name)?;
        let mut new = self.trees[t].validated.tree.clone();
        let node = new
            .pool_at(&path)
            .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?;
        if !node.pools.is_empty() {
            return Err(CoreError::new(format!(
                "pool {name:?} cannot be removed: it has child pools {:?}",
                node.pools.keys().collect::<Vec<_>>()
            )));
        }
        let parent = path.rsplit_once('/').map(|(p, _)| p.to_string());
        Self::children_of(&mut new, parent.as_deref())
            .and_then(|c| c.remove(name))
            .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?;
        self.apply_tree_config(now, t, new)
    }

    /// Replaces the tree's options (`config`).
    fn set_tree_options_at(
        &mut self,
        now: Millis,
        t: usize,
        config: TreeConfig,
    ) -> Result<(), CoreError> {
        let mut new = self.trees[t].validated.tree.clone();
        new.config = config;
        self.apply_tree_config(now, t, new)
    }

    // ---- the commands, in the default tree or in a named one -------------------------------

    /// Creates an explicit pool under `parent` (`None` or `<Root>`: at the top) in the default
    /// tree.
    pub fn create_pool(
        &mut self,
        now: Millis,
        parent: Option<&str>,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        self.create_pool_at(now, self.default_tree, parent, name, config)
    }

    /// [`Self::create_pool`] in the tree named `tree`.
    pub fn create_pool_in(
        &mut self,
        now: Millis,
        tree: &str,
        parent: Option<&str>,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.create_pool_at(now, t, parent, name, config)
    }

    /// Replaces a pool's options (its child pools stay), in the default tree.
    pub fn set_pool(
        &mut self,
        now: Millis,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        self.set_pool_at(now, self.default_tree, name, config)
    }

    /// [`Self::set_pool`] in the tree named `tree`.
    pub fn set_pool_in(
        &mut self,
        now: Millis,
        tree: &str,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.set_pool_at(now, t, name, config)
    }

    /// Moves a pool (with its subtree) under another parent, in the default tree.
    pub fn move_pool(
        &mut self,
        now: Millis,
        name: &str,
        new_parent: Option<&str>,
    ) -> Result<(), CoreError> {
        self.move_pool_at(now, self.default_tree, name, new_parent)
    }

    /// [`Self::move_pool`] in the tree named `tree`.
    pub fn move_pool_in(
        &mut self,
        now: Millis,
        tree: &str,
        name: &str,
        new_parent: Option<&str>,
    ) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.move_pool_at(now, t, name, new_parent)
    }

    /// Removes an explicit pool without child pools from the default tree; its operations, if
    /// any, go on in an ephemeral pool of that name under the default parent.
    pub fn remove_pool(&mut self, now: Millis, name: &str) -> Result<(), CoreError> {
        self.remove_pool_at(now, self.default_tree, name)
    }

    /// [`Self::remove_pool`] in the tree named `tree`.
    pub fn remove_pool_in(&mut self, now: Millis, tree: &str, name: &str) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.remove_pool_at(now, t, name)
    }

    /// Replaces the default tree's options (`config`).
    pub fn set_tree_options(&mut self, now: Millis, config: TreeConfig) -> Result<(), CoreError> {
        self.set_tree_options_at(now, self.default_tree, config)
    }

    /// [`Self::set_tree_options`] for the tree named `tree`.
    pub fn set_tree_options_in(
        &mut self,
        now: Millis,
        tree: &str,
        config: TreeConfig,
    ) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.set_tree_options_at(now, t, config)
    }
}
