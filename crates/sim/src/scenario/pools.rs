//! Pool and tree events (`create_pool`, `set_pool`, `remove_pool`, `set_tree`), carried out with
//! the core's pool commands, which validate the whole new tree with the configuration crate and
//! change nothing when they reject a change (the same commands the server uses).
//!
//! `set_pool` and `set_tree` are partial: the options given replace those options, the others
//! keep their current values (read from the core's configuration).

use super::format::{CreatePool, RemovePool, SetPool, SetTree};
use fairsched_config::{PoolConfig, TreeConfig};
use fairsched_core::{CoreError, Millis, Scheduler};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A pool or tree event, borrowed from the scenario.
#[derive(Clone, Copy, Debug)]
pub enum PoolCommand<'a> {
    Create(&'a CreatePool),
    Set(&'a SetPool),
    Remove(&'a RemovePool),
    SetTree(&'a SetTree),
}

impl PoolCommand<'_> {
    /// The tree the command names, if it names one.
    fn tree(&self) -> Option<&str> {
        match self {
            PoolCommand::Create(c) => c.tree.as_deref(),
            PoolCommand::Set(c) => c.tree.as_deref(),
            PoolCommand::Remove(c) => c.tree.as_deref(),
            PoolCommand::SetTree(c) => c.tree.as_deref(),
        }
    }
}

/// Carries out a pool or tree event on the core at `now`. On error nothing has changed.
/// Without a `tree`, a command applies to the default tree.
pub fn apply(core: &mut Scheduler, now: Millis, command: PoolCommand<'_>) -> Result<(), CoreError> {
    let tree = match command.tree() {
        Some(name) => {
            if core.tree_index(name).is_none() {
                return Err(CoreError::new(format!(
                    "tree {name:?} does not exist (trees: {})",
                    core.trees()
                        .iter()
                        .map(|t| format!("{:?}", t.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            name.to_string()
        }
        None => core.tree().name.clone(),
    };
    match command {
        PoolCommand::Create(c) => {
            core.create_pool_in(now, &tree, c.parent.as_deref(), &c.name, c.config.clone())
        }
        PoolCommand::Set(c) => set_pool(core, now, &tree, c),
        PoolCommand::Remove(c) => core.remove_pool_in(now, &tree, &c.name),
        PoolCommand::SetTree(c) => {
            let config = overlay::<TreeConfig>(&tree_config(core, &tree).config, &c.options)?;
            core.set_tree_options_in(now, &tree, config)
        }
    }
}

/// The configuration of the tree named `tree` (which exists).
fn tree_config<'a>(core: &'a Scheduler, tree: &str) -> &'a fairsched_config::PoolTreeConfig {
    let t = core.tree_index(tree).expect("checked by the caller");
    &core.trees()[t].validated.tree
}

/// `set_pool`: new options (merged with the current ones) and, with `parent`, a move — one
/// new tree configuration, validated and applied whole (or not at all).
fn set_pool(
    core: &mut Scheduler,
    now: Millis,
    tree_name: &str,
    c: &SetPool,
) -> Result<(), CoreError> {
    let mut tree = tree_config(core, tree_name).clone();
    let missing = || {
        CoreError::new(format!(
            "pool {:?} does not exist (or is ephemeral)",
            c.name
        ))
    };
    let (path, node) = tree.find_pool(&c.name).ok_or_else(missing)?;
    let mut node = node.clone();
    if !c.options.is_empty() {
        node.set_config(overlay::<PoolConfig>(&node.config(), &c.options)?);
    }
    let old_parent = path.rsplit_once('/').map(|(p, _)| p.to_string());
    let new_parent = match c.parent.as_deref() {
        None => old_parent.clone(),
        Some("<Root>") => None,
        Some(p) => {
            let (parent_path, _) = tree.find_pool(p).ok_or_else(|| {
                CoreError::new(format!(
                    "parent pool {p:?} does not exist (or is ephemeral)"
                ))
            })?;
            if parent_path == path || parent_path.starts_with(&format!("{path}/")) {
                return Err(CoreError::new(format!(
                    "pool {:?} cannot be moved into its own subtree ({p:?})",
                    c.name
                )));
            }
            Some(parent_path)
        }
    };
    children(&mut tree, old_parent.as_deref())
        .and_then(|m| m.remove(&c.name))
        .ok_or_else(missing)?;
    children(&mut tree, new_parent.as_deref())
        .ok_or_else(missing)?
        .insert(c.name.clone(), node);
    core.set_tree_config_in(now, tree_name, tree)
}

/// The child-pool map of the pool at `path` (`None`: the root's).
fn children<'a>(
    tree: &'a mut fairsched_config::PoolTreeConfig,
    path: Option<&str>,
) -> Option<&'a mut std::collections::BTreeMap<String, fairsched_config::PoolNode>> {
    match path {
        None => Some(&mut tree.pools),
        Some(p) => tree.pool_at_mut(p).map(|n| &mut n.pools),
    }
}

/// `current` with the options in `options` replaced.
fn overlay<T: Serialize + DeserializeOwned>(
    current: &T,
    options: &Map<String, Value>,
) -> Result<T, CoreError> {
    let mut value = serde_json::to_value(current).map_err(|e| CoreError::new(e.to_string()))?;
    let Value::Object(object) = &mut value else {
        return Err(CoreError::new("options do not serialize to an object"));
    };
    for (key, v) in options {
        object.insert(key.clone(), v.clone());
    }
    serde_json::from_value(value).map_err(|e| CoreError::new(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn overlay_replaces_only_the_given_options() {
        let current = PoolConfig {
            weight: Some(3.0),
            max_operation_count: Some(7),
            ..PoolConfig::default()
        };
        let new: PoolConfig = overlay(&current, &options(r#"{"weight": 5}"#)).unwrap();
        assert_eq!(new.weight, Some(5.0));
        assert_eq!(new.max_operation_count, Some(7));
        let unset: PoolConfig = overlay(&current, &options(r#"{"weight": null}"#)).unwrap();
        assert_eq!(unset.weight, None);

        let tree: TreeConfig = overlay(
            &TreeConfig::default(),
            &options(r#"{"fair_share_starvation_timeout_ms": 7}"#),
        )
        .unwrap();
        assert_eq!(tree.fair_share_starvation_timeout_ms, 7);
        assert_eq!(tree.fair_share_starvation_tolerance, 0.8);
    }
}
