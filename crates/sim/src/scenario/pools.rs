//! Pool and tree events (`create_pool`, `set_pool`, `remove_pool`, `set_tree`): each edits a
//! copy of the pool-tree configuration; the runner validates the copy with the configuration
//! crate and hands it to the core only if it is valid, so a rejected event changes nothing.

use super::format::{CreatePool, RemovePool, SetPool, SetTree};
use fairsched_config::{
    PoolConfig, PoolNode, PoolTreeConfig, PoolTrees, ROOT_POOL_NAME, TreeConfig,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

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

/// Returns `trees` with the command applied (not yet validated), or why it cannot apply.
/// `default_tree` is used when the command names no tree.
pub fn edit(
    trees: &PoolTrees,
    default_tree: &str,
    command: PoolCommand<'_>,
) -> Result<PoolTrees, String> {
    let name = command.tree().unwrap_or(default_tree);
    let mut trees = trees.clone();
    let tree = trees
        .pool_trees
        .get_mut(name)
        .ok_or_else(|| format!("tree {name:?} does not exist"))?;
    match command {
        PoolCommand::Create(c) => create(tree, c)?,
        PoolCommand::Set(c) => set(tree, c)?,
        PoolCommand::Remove(c) => remove(tree, &c.name)?,
        PoolCommand::SetTree(c) => {
            tree.config = overlay::<TreeConfig>(&tree.config, &c.options)?;
        }
    }
    Ok(trees)
}

fn create(tree: &mut PoolTreeConfig, c: &CreatePool) -> Result<(), String> {
    if tree.find_pool(&c.name).is_some() {
        return Err(format!("pool {:?} already exists", c.name));
    }
    let node = PoolNode::from_parts(c.config.clone(), BTreeMap::new());
    children_of(tree, c.parent.as_deref())?.insert(c.name.clone(), node);
    Ok(())
}

fn set(tree: &mut PoolTreeConfig, c: &SetPool) -> Result<(), String> {
    let path = path_of(tree, &c.name)?;
    if let Some(parent) = c.parent.as_deref()
        && parent != ROOT_POOL_NAME
    {
        let parent_path = path_of(tree, parent)?;
        if parent_path == path || parent_path.starts_with(&format!("{path}/")) {
            return Err(format!(
                "cannot move pool {:?} under {parent:?}, which is inside it",
                c.name
            ));
        }
    }
    let node = tree.pool_at_mut(&path).expect("path found above");
    let config = overlay::<PoolConfig>(&node.config(), &c.options)?;
    node.set_config(config);
    if let Some(parent) = c.parent.as_deref() {
        let node = detach(tree, &path);
        children_of(tree, Some(parent))?.insert(c.name.clone(), node);
    }
    Ok(())
}

fn remove(tree: &mut PoolTreeConfig, name: &str) -> Result<(), String> {
    let path = path_of(tree, name)?;
    let node = tree.pool_at(&path).expect("path found above");
    if !node.pools.is_empty() {
        let children: Vec<&str> = node.pools.keys().map(String::as_str).collect();
        return Err(format!(
            "pool {name:?} has child pools ({}); remove them first",
            children.join(", ")
        ));
    }
    detach(tree, &path);
    Ok(())
}

/// Path (`a/b`) of a pool by name.
fn path_of(tree: &PoolTreeConfig, name: &str) -> Result<String, String> {
    tree.find_pool(name)
        .map(|(path, _)| path)
        .ok_or_else(|| format!("pool {name:?} does not exist"))
}

/// The children map of `parent` (the root's for `None` and `<Root>`).
fn children_of<'t>(
    tree: &'t mut PoolTreeConfig,
    parent: Option<&str>,
) -> Result<&'t mut BTreeMap<String, PoolNode>, String> {
    match parent {
        None | Some(ROOT_POOL_NAME) => Ok(&mut tree.pools),
        Some(parent) => {
            let path = tree
                .find_pool(parent)
                .map(|(path, _)| path)
                .ok_or_else(|| format!("parent pool {parent:?} does not exist"))?;
            Ok(&mut tree.pool_at_mut(&path).expect("path found above").pools)
        }
    }
}

/// Takes the pool at `path` (which exists) out of the tree.
fn detach(tree: &mut PoolTreeConfig, path: &str) -> PoolNode {
    let siblings = match path.rsplit_once('/') {
        None => &mut tree.pools,
        Some((parent, _)) => &mut tree.pool_at_mut(parent).expect("parent exists").pools,
    };
    let name = path.rsplit('/').next().unwrap_or(path);
    siblings.remove(name).expect("pool exists")
}

/// `current` with the options in `options` replaced.
fn overlay<T: Serialize + DeserializeOwned>(
    current: &T,
    options: &Map<String, Value>,
) -> Result<T, String> {
    let mut value = serde_json::to_value(current).map_err(|e| e.to_string())?;
    let Value::Object(object) = &mut value else {
        return Err("options do not serialize to an object".to_string());
    };
    for (key, v) in options {
        object.insert(key.clone(), v.clone());
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees(json: &str) -> PoolTrees {
        serde_json::from_str(json).unwrap()
    }

    fn options(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn create_set_move_and_remove() {
        let t = trees(r#"{"pool_trees": {"default": {"pools": {"a": {"pools": {"b": {}}}}}}}"#);
        let create = CreatePool {
            tree: None,
            name: "c".into(),
            parent: Some("b".into()),
            config: PoolConfig::default(),
        };
        let t = edit(&t, "default", PoolCommand::Create(&create)).unwrap();
        let tree = &t.pool_trees["default"];
        assert!(tree.pool_at("a/b/c").is_some());
        assert_eq!(
            edit(&t, "default", PoolCommand::Create(&create)).unwrap_err(),
            "pool \"c\" already exists"
        );

        let set = SetPool {
            tree: None,
            name: "c".into(),
            parent: Some("<Root>".into()),
            options: options(r#"{"weight": 2}"#),
        };
        let t = edit(&t, "default", PoolCommand::Set(&set)).unwrap();
        let tree = &t.pool_trees["default"];
        assert_eq!(tree.pool_at("c").unwrap().weight, Some(2.0));
        assert!(tree.pool_at("a/b/c").is_none());

        let into_itself = SetPool {
            tree: None,
            name: "a".into(),
            parent: Some("b".into()),
            options: Map::new(),
        };
        assert!(
            edit(&t, "default", PoolCommand::Set(&into_itself))
                .unwrap_err()
                .contains("inside it")
        );

        let remove_a = RemovePool {
            tree: None,
            name: "a".into(),
        };
        assert!(
            edit(&t, "default", PoolCommand::Remove(&remove_a))
                .unwrap_err()
                .contains("child pools (b)")
        );
        let remove_b = RemovePool {
            tree: None,
            name: "b".into(),
        };
        let t = edit(&t, "default", PoolCommand::Remove(&remove_b)).unwrap();
        assert!(t.pool_trees["default"].pool_at("a/b").is_none());

        let set_tree = SetTree {
            tree: Some("default".into()),
            options: options(r#"{"fair_share_starvation_timeout_ms": 7}"#),
        };
        let t = edit(&t, "other", PoolCommand::SetTree(&set_tree)).unwrap();
        let config = &t.pool_trees["default"].config;
        assert_eq!(config.fair_share_starvation_timeout_ms, 7);
        assert_eq!(
            config.fair_share_starvation_tolerance, 0.8,
            "others are kept"
        );
        assert_eq!(
            edit(&t, "other", PoolCommand::Remove(&remove_b)).unwrap_err(),
            "tree \"other\" does not exist"
        );
    }
}
