//! `fairsched pool`: the pools of a pool tree (list, create, set, remove, apply).

use super::{Conn, print_json};
use anyhow::{Context, anyhow};
use clap::Subcommand;
use fairsched_api::client::ApiClient;
use fairsched_api::{CreatePool, UpdatePool};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// The tree's pools with their fair share, usage and demand (dominant resource).
    List,
    /// Create a pool; options as JSON (`--config '{"weight":2}'`).
    Create {
        name: String,
        #[arg(long)]
        parent: Option<String>,
        #[arg(long)]
        config: Option<String>,
    },
    /// Change a pool's options and/or move it. The options given (JSON, `--config
    /// '{"weight":2}'`; `null` unsets one) are merged into the pool's; the others keep their
    /// values (`--replace`: the given ones are all it keeps). Prints what changed, as `pool
    /// apply` does.
    Set {
        name: String,
        #[arg(long)]
        config: Option<String>,
        #[arg(long)]
        parent: Option<String>,
        /// Replace all the pool's options with --config instead of merging.
        #[arg(long)]
        replace: bool,
    },
    /// Remove a pool, named by its name or its path (`research/sub`, as `pool set` prints it;
    /// refused while it has child pools or unfinished operations; `pool apply` removes pools
    /// with operations, which go on in ephemeral pools).
    Remove { name: String },
    /// Replace the tree's whole configuration with FILE (`.toml` or `.json`): one tree
    /// (`[config]` and `[pools.NAME]`, as `tree show --json` shows under `config`) or a
    /// pool-trees file (`[pool_trees.TREE...]`, the tree of that name taken from it). The new
    /// tree is validated as a whole and applied at once, or not at all; the other trees keep
    /// theirs. Prints what changes: `+` added pools, `-` removed ones, `~` changed ones with
    /// their changed options.
    Apply {
        file: PathBuf,
        /// Print what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run(conn: Conn, tree: Option<String>, command: PoolCommand) -> anyhow::Result<()> {
    let client = conn.client()?;
    let tree = tree.as_deref();
    let reply = match command {
        PoolCommand::List => {
            let pools = client.list_pools(tree).await?;
            if conn.json {
                return print_json(&pools);
            }
            print_pools(pools);
            return Ok(());
        }
        PoolCommand::Create {
            name,
            parent,
            config,
        } => {
            let config = json_object(config.as_deref())?.unwrap_or_default();
            client
                .create_pool(
                    tree,
                    &CreatePool {
                        name,
                        parent,
                        config,
                    },
                )
                .await?
        }
        PoolCommand::Set {
            name,
            config,
            parent,
            replace,
        } => {
            let given = json_object(config.as_deref())?;
            let current = client.tree(tree).await?;
            let pools = pool_options(&current["config"]);
            let name = pool_name(&name, &pools)?;
            let (old_path, old) = pools
                .get(&name)
                .cloned()
                .unwrap_or_else(|| (name.clone(), Map::new()));
            let config = match given {
                Some(given) if !replace => {
                    let mut merged = old.clone();
                    for (k, v) in given {
                        if v.is_null() {
                            merged.remove(&k);
                        } else {
                            merged.insert(k, v);
                        }
                    }
                    Some(merged)
                }
                other => other,
            };
            let reply = client
                .update_pool(
                    tree,
                    &name,
                    &UpdatePool {
                        config: config.clone(),
                        parent: parent.clone(),
                    },
                )
                .await?;
            if conn.json {
                return print_json(&reply);
            }
            print_warnings(&reply);
            let mut changes = Vec::new();
            if let Some(p) = &parent {
                let old_parent = old_path.rsplit_once('/').map_or("<Root>", |(p, _)| p);
                let old_parent = old_parent.rsplit('/').next().unwrap_or(old_parent);
                if old_parent != p {
                    changes.push(format!("moved from {old_path}"));
                }
            }
            if let Some(new) = &config {
                changes.extend(option_changes(&old, new));
            }
            if changes.is_empty() {
                println!("no change");
            } else {
                println!("~ {old_path}: {}", changes.join(", "));
            }
            return Ok(());
        }
        PoolCommand::Remove { name } => {
            let name = if name.contains('/') {
                pool_name(&name, &pool_options(&client.tree(tree).await?["config"]))?
            } else {
                name
            };
            client.remove_pool(tree, &name).await?
        }
        PoolCommand::Apply { file, dry_run } => {
            return apply_tree(&client, tree, conn.json, &file, dry_run).await;
        }
    };
    if conn.json {
        print_json(&reply)
    } else {
        print_warnings(&reply);
        println!("ok");
        Ok(())
    }
}

fn json_object(text: Option<&str>) -> anyhow::Result<Option<Map<String, Value>>> {
    text.map(|t| serde_json::from_str(t).context("--config must be a JSON object"))
        .transpose()
}

pub(super) fn print_pools(pools: Map<String, Value>) {
    println!(
        "{:<24} {:<16} {:>10} {:>10} {:>10} {:>5}",
        "POOL", "PARENT", "FAIR", "USAGE", "DEMAND", "OPS"
    );
    for (name, p) in pools {
        let f = |k: &str| p[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<24} {:<16} {:>10.4} {:>10.4} {:>10.4} {:>5}",
            name,
            p["parent"].as_str().unwrap_or("-"),
            f("fair_share_ratio"),
            f("usage_ratio"),
            f("demand_ratio"),
            p["operation_count"].as_u64().unwrap_or(0)
        );
    }
}

/// Prints a pool change's `warnings` (the tree after it: guarantees that overcommit the
/// cluster, ...) on stderr, as `pool apply` does.
fn print_warnings(reply: &Value) {
    let warnings = serde_json::from_value::<fairsched_api::PoolReply>(reply.clone())
        .map(|r| r.warnings)
        .unwrap_or_default();
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// `pool apply`: reads the file, sends it, prints the difference.
async fn apply_tree(
    client: &ApiClient,
    tree: Option<&str>,
    json: bool,
    file: &std::path::Path,
    dry_run: bool,
) -> anyhow::Result<()> {
    // The file first: a missing or malformed file is the error, whatever the server.
    let document: Value = fairsched_config::from_file(file)?;
    let current = client.tree(tree).await?;
    let tree = current["tree"].as_str().unwrap_or("default").to_string();
    let new = if document.get("pool_trees").is_some() {
        let trees = fairsched_config::load_pool_trees_file(file)?;
        let names: Vec<&String> = trees.pool_trees.keys().collect();
        trees.pool_trees.get(&tree).cloned().ok_or_else(|| {
            anyhow!(
                "{}: no tree {tree:?} in it (the tree to apply; --tree names another); it has \
                 {names:?}",
                file.display()
            )
        })?
    } else {
        fairsched_config::load_pool_tree_file(file)?
    };
    let new = serde_json::to_value(&new)?;
    let reply = client.apply_tree(Some(&tree), &new, dry_run).await?;
    if json {
        return print_json(&reply);
    }
    for w in &reply.warnings {
        eprintln!("warning: {w}");
    }
    let old_pools = pool_options(&current["config"]);
    let new_pools = pool_options(&new);
    for path in &reply.added {
        println!("+ {path}");
    }
    for path in &reply.removed {
        println!("- {path}");
    }
    for path in &reply.changed {
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut changes = Vec::new();
        if let (Some((old_path, old)), Some((_, new))) = (old_pools.get(name), new_pools.get(name))
        {
            if old_path != path {
                changes.push(format!("moved from {old_path}"));
            }
            changes.extend(option_changes(old, new));
        }
        println!("~ {path}: {}", changes.join(", "));
    }
    if reply.tree_config_changed {
        let options = |v: &Value| v["config"].as_object().cloned().unwrap_or_default();
        let changes = option_changes(&options(&current["config"]), &options(&new));
        println!("~ tree options: {}", changes.join(", "));
    }
    let n = reply.added.len() + reply.removed.len() + reply.changed.len();
    let what = if n == 0 && !reply.tree_config_changed {
        "no changes".to_string()
    } else {
        format!(
            "{} added, {} removed, {} changed{}",
            reply.added.len(),
            reply.removed.len(),
            reply.changed.len(),
            if reply.tree_config_changed {
                ", tree options changed"
            } else {
                ""
            }
        )
    };
    if reply.applied {
        println!("tree {}: {what}; applied", reply.tree);
    } else {
        println!("tree {}: {what}; dry run, nothing applied", reply.tree);
    }
    Ok(())
}

/// Every pool of a tree's configuration (JSON) by name: its path and its own options.
/// The pool a command names: its name, or its path (`research/sub`, as `pool set` and `pool
/// apply` print it), which must then be where the pool is.
fn pool_name(
    given: &str,
    pools: &BTreeMap<String, (String, Map<String, Value>)>,
) -> anyhow::Result<String> {
    let Some((_, name)) = given.rsplit_once('/') else {
        return Ok(given.to_string());
    };
    match pools.get(name) {
        Some((path, _)) if path == given.trim_start_matches('/') => Ok(name.to_string()),
        Some((path, _)) => anyhow::bail!("pool {name:?} is at {path}, not {given}"),
        None => anyhow::bail!("the tree has no pool {name:?} (from {given})"),
    }
}

fn pool_options(tree: &Value) -> BTreeMap<String, (String, Map<String, Value>)> {
    fn walk(pools: &Value, prefix: &str, out: &mut BTreeMap<String, (String, Map<String, Value>)>) {
        for (name, pool) in pools.as_object().into_iter().flatten() {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let mut own = pool.as_object().cloned().unwrap_or_default();
            let children = own.remove("pools").unwrap_or(Value::Null);
            out.entry(name.clone()).or_insert((path.clone(), own));
            walk(&children, &path, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&tree["pools"], "", &mut out);
    out
}

/// `option old -> new` for every option that differs (`unset` where there is none).
/// Numbers are compared and shown by value (`3` and `3.0` are the same weight, shown `3`).
fn option_changes(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<String> {
    fn numbers_as_f64(v: &Value) -> Value {
        match v {
            Value::Number(n) => n
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .map_or_else(|| v.clone(), Value::Number),
            Value::Array(a) => Value::Array(a.iter().map(numbers_as_f64).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), numbers_as_f64(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let get = |m: &Map<String, Value>, k: &str| m.get(k).map(numbers_as_f64);
    /// A whole number as an integer (`50`, not `50.0`).
    fn whole(v: Value) -> Value {
        match v {
            Value::Number(n) => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
                _ => Value::Number(n),
            },
            Value::Array(a) => Value::Array(a.into_iter().map(whole).collect()),
            Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, whole(v))).collect()),
            other => other,
        }
    }
    let show = |v: Option<Value>| match v {
        None | Some(Value::Null) => "unset".to_string(),
        Some(v) => whole(v).to_string(),
    };
    keys.into_iter()
        .filter(|k| get(old, k) != get(new, k))
        .map(|k| format!("{k} {} -> {}", show(get(old, k)), show(get(new, k))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn tree_differences_by_pool_and_option() {
        let old = serde_json::json!({"pools": {"a": {"weight": 1.0, "pools": {"b": {}}}}});
        let new = serde_json::json!({"pools": {"a": {}, "c": {"pools": {"b": {"weight": 2.5}}}}});
        let (old, new) = (pool_options(&old), pool_options(&new));
        assert_eq!(old["b"].0, "a/b");
        assert_eq!(new["b"].0, "c/b");
        assert_eq!(
            option_changes(&old["a"].1, &new["a"].1),
            ["weight 1 -> unset"]
        );
        assert_eq!(
            option_changes(&old["b"].1, &new["b"].1),
            ["weight unset -> 2.5"]
        );
    }

    #[test]
    fn a_pool_is_named_by_its_name_or_its_path() {
        let tree = serde_json::json!({"pools": {"research": {"pools": {"sub": {}}}}});
        let pools = pool_options(&tree);
        let name = |g: &str| pool_name(g, &pools).map_err(|e| e.to_string());
        assert_eq!(name("sub"), Ok("sub".into()));
        assert_eq!(name("research/sub"), Ok("sub".into()));
        assert_eq!(name("/research/sub"), Ok("sub".into()));
        assert_eq!(
            name("other/sub"),
            Err("pool \"sub\" is at research/sub, not other/sub".into())
        );
        assert_eq!(
            name("research/nope"),
            Err("the tree has no pool \"nope\" (from research/nope)".into())
        );
    }
}
