//! Runtime changes of the pool tree (issue: create, change, move and remove pools, change the
//! tree options). Every change edits a copy of the configuration, validates the whole tree with
//! the config crate and is applied only if valid: a rejected change names the pool and the field
//! and changes nothing.
//!
//! The edits are functions of a tree giving its new configuration; the [`Scheduler`] applies
//! them (`edit_tree`, `apply_tree_config`).

use crate::model::Millis;
use crate::scheduler::{CoreError, Scheduler};
use crate::tree::{PoolTree, ROOT_NAME};
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
        let mut s = self.parts();
        s.refresh_lightweight();
        s.try_run_pending(now);
        Ok(())
    }

    /// Validates `edit`'s configuration of tree `t` and applies it
    /// ([`Self::apply_tree_config`]).
    fn edit_tree(
        &mut self,
        now: Millis,
        t: usize,
        edit: impl FnOnce(&PoolTree) -> Result<PoolTreeConfig, CoreError>,
    ) -> Result<(), CoreError> {
        let new = edit(&self.trees[t])?;
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
        self.edit_tree(now, self.default_tree, |tree| {
            pool_created(tree, parent, name, config)
        })
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
        self.edit_tree(now, t, |tree| pool_created(tree, parent, name, config))
    }

    /// Replaces a pool's options (its child pools stay), in the default tree.
    pub fn set_pool(
        &mut self,
        now: Millis,
        name: &str,
        config: PoolConfig,
    ) -> Result<(), CoreError> {
        self.edit_tree(now, self.default_tree, |tree| pool_set(tree, name, config))
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
        self.edit_tree(now, t, |tree| pool_set(tree, name, config))
    }

    /// Moves a pool (with its subtree) under another parent, in the default tree.
    pub fn move_pool(
        &mut self,
        now: Millis,
        name: &str,
        new_parent: Option<&str>,
    ) -> Result<(), CoreError> {
        self.edit_tree(now, self.default_tree, |tree| {
            pool_moved(tree, name, new_parent)
        })
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
        self.edit_tree(now, t, |tree| pool_moved(tree, name, new_parent))
    }

    /// Removes an explicit pool without child pools from the default tree; its operations, if
    /// any, go on in an ephemeral pool of that name under the default parent.
    pub fn remove_pool(&mut self, now: Millis, name: &str) -> Result<(), CoreError> {
        self.edit_tree(now, self.default_tree, |tree| pool_removed(tree, name))
    }

    /// [`Self::remove_pool`] in the tree named `tree`.
    pub fn remove_pool_in(&mut self, now: Millis, tree: &str, name: &str) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.edit_tree(now, t, |tree| pool_removed(tree, name))
    }

    /// Replaces the default tree's options (`config`).
    pub fn set_tree_options(&mut self, now: Millis, config: TreeConfig) -> Result<(), CoreError> {
        self.edit_tree(now, self.default_tree, |tree| {
            Ok(tree_options_set(tree, config))
        })
    }

    /// [`Self::set_tree_options`] for the tree named `tree`.
    pub fn set_tree_options_in(
        &mut self,
        now: Millis,
        tree: &str,
        config: TreeConfig,
    ) -> Result<(), CoreError> {
        let t = self.tree_named(tree)?;
        self.edit_tree(now, t, |tree| Ok(tree_options_set(tree, config)))
    }
}

/// Path (`a/b/c`) of an explicit pool of `tree`.
fn pool_path(tree: &PoolTree, name: &str) -> Result<String, CoreError> {
    tree.explicit(name).map(|p| p.path.clone()).ok_or_else(|| {
        CoreError::NoSuchObject(format!("pool {name:?} does not exist (or is ephemeral)"))
    })
}

/// The child pools of the pool at `parent_path` of `tree` (`None`: the top-level pools).
fn children_of<'a>(
    tree: &'a mut PoolTreeConfig,
    parent_path: Option<&str>,
) -> Option<&'a mut BTreeMap<String, PoolNode>> {
    match parent_path {
        None => Some(&mut tree.pools),
        Some(path) => tree.pool_at_mut(path).map(|n| &mut n.pools),
    }
}

/// `tree`'s configuration with an explicit pool created under `parent` (`None` or `<Root>`: at
/// the top).
fn pool_created(
    tree: &PoolTree,
    parent: Option<&str>,
    name: &str,
    config: PoolConfig,
) -> Result<PoolTreeConfig, CoreError> {
    if tree.explicit(name).is_some() {
        return Err(CoreError::new(format!("pool {name:?} already exists")));
    }
    let parent_path = match parent {
        None | Some(ROOT_NAME) => None,
        Some(p) => Some(pool_path(tree, p)?),
    };
    let mut new = tree.validated.tree.clone();
    let children = children_of(&mut new, parent_path.as_deref())
        .ok_or_else(|| CoreError::NoSuchObject(format!("parent pool {parent:?} does not exist")))?;
    children.insert(
        name.to_string(),
        PoolNode::from_parts(config, BTreeMap::new()),
    );
    Ok(new)
}

/// `tree`'s configuration with a pool's options replaced (its child pools stay).
fn pool_set(tree: &PoolTree, name: &str, config: PoolConfig) -> Result<PoolTreeConfig, CoreError> {
    let path = pool_path(tree, name)?;
    let mut new = tree.validated.tree.clone();
    new.pool_at_mut(&path)
        .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?
        .set_config(config);
    Ok(new)
}

/// `tree`'s configuration with a pool (and its subtree) moved under another parent.
fn pool_moved(
    tree: &PoolTree,
    name: &str,
    new_parent: Option<&str>,
) -> Result<PoolTreeConfig, CoreError> {
    let path = pool_path(tree, name)?;
    let parent_path = match new_parent {
        None | Some(ROOT_NAME) => None,
        Some(p) => {
            let pp = pool_path(tree, p)?;
            if pp == path || pp.starts_with(&format!("{path}/")) {
                return Err(CoreError::new(format!(
                    "pool {name:?} cannot be moved into its own subtree ({p:?})"
                )));
            }
            Some(pp)
        }
    };
    let mut new = tree.validated.tree.clone();
    let old_parent = path.rsplit_once('/').map(|(p, _)| p.to_string());
    let node = children_of(&mut new, old_parent.as_deref())
        .and_then(|c| c.remove(name))
        .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?;
    children_of(&mut new, parent_path.as_deref())
        .ok_or_else(|| {
            CoreError::NoSuchObject(format!("parent pool {new_parent:?} does not exist"))
        })?
        .insert(name.to_string(), node);
    Ok(new)
}

/// `tree`'s configuration without an explicit pool that has no child pools (its operations,
/// if any, go on in an ephemeral pool of that name).
fn pool_removed(tree: &PoolTree, name: &str) -> Result<PoolTreeConfig, CoreError> {
    let path = pool_path(tree, name)?;
    let mut new = tree.validated.tree.clone();
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
    children_of(&mut new, parent.as_deref())
        .and_then(|c| c.remove(name))
        .ok_or_else(|| CoreError::NoSuchObject(format!("pool {name:?} does not exist")))?;
    Ok(new)
}

/// `tree`'s configuration with its options replaced by `config`.
fn tree_options_set(tree: &PoolTree, config: TreeConfig) -> PoolTreeConfig {
    let mut new = tree.validated.tree.clone();
    new.config = config;
    new
}
