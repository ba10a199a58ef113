//! `fairsched tree`: the pool trees (list them, show one), and `--tree`, which `pool` takes too.

use super::pool::print_pools;
use super::{Conn, print_json};
use anyhow::anyhow;
use clap::{Args, Subcommand};
use fairsched_api::format_resources;

/// Which pool tree a `pool` or `tree` command acts on.
#[derive(Debug, Args)]
pub struct TreeArg {
    /// The pool tree (`fairsched tree list` lists them) [default: the server's default tree].
    #[arg(long, global = true, value_name = "NAME")]
    pub(super) tree: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TreeCommand {
    /// The tree's name, then its pools with their fair share, usage and demand (--json: also
    /// its configuration and orchid snapshot).
    Show,
    /// Every pool tree: the default one (`*`), its node tag filter, pools, nodes, unfinished
    /// operations and resources.
    List,
}

pub async fn run(conn: Conn, tree: Option<String>, command: TreeCommand) -> anyhow::Result<()> {
    let client = conn.client()?;
    match command {
        TreeCommand::Show => {
            let tree = client.tree(tree.as_deref()).await?;
            if conn.json {
                return print_json(&tree);
            }
            println!(
                "tree {}{}",
                tree["tree"].as_str().unwrap_or(""),
                if tree["is_default"] == true {
                    " (default)"
                } else {
                    ""
                }
            );
            print_pools(
                tree["snapshot"]["pools"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            Ok(())
        }
        TreeCommand::List => {
            if tree.is_some() {
                return Err(anyhow!("tree list lists every tree; --tree does not apply"));
            }
            let trees = client.pool_trees().await?;
            if conn.json {
                return print_json(&trees);
            }
            println!(
                "{:<16} {:<7} {:<16} {:>6} {:>9} {:>6} {:>6}  RESOURCES",
                "TREE", "DEFAULT", "NODE FILTER", "POOLS", "EPHEMERAL", "NODES", "OPS"
            );
            for t in trees {
                println!(
                    "{:<16} {:<7} {:<16} {:>6} {:>9} {:>6} {:>6}  {}",
                    t.name,
                    if t.is_default { "*" } else { "" },
                    t.node_tag_filter.as_deref().unwrap_or("-"),
                    t.pool_count,
                    t.ephemeral_pool_count,
                    t.node_count,
                    t.operation_count,
                    format_resources(&t.total_resources)
                );
            }
            Ok(())
        }
    }
}
