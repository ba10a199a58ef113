//! The CLI: the commands that talk to a running server through its HTTP API, one module per
//! command (`op`, `pool`, `tree`, `node`, `events`); `conn.rs` finds the server and the token.

use crate::runtime::runtime;
use clap::Subcommand;
use serde::Serialize;

mod conn;
mod events;
mod node;
mod op;
mod pool;
mod tree;

use conn::Conn;
use events::EventsArgs;
use node::NodeCommand;
use op::OpCommand;
use pool::PoolCommand;
use tree::{TreeArg, TreeCommand};

/// The CLI's commands, among `fairsched`'s own (flattened into its `Command`).
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Operations: run, list, show, update, abort, logs.
    Op {
        #[command(flatten)]
        conn: Conn,
        #[command(subcommand)]
        command: OpCommand,
    },
    /// Pools of a pool tree (--tree; default: the default tree): list, create, set, remove,
    /// apply.
    Pool {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        tree: TreeArg,
        #[command(subcommand)]
        command: PoolCommand,
    },
    /// Nodes.
    Node {
        #[command(flatten)]
        conn: Conn,
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Pool trees: list them, show one (--tree; default: the default tree).
    Tree {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        tree: TreeArg,
        #[command(subcommand)]
        command: TreeCommand,
    },
    /// The event log: job starts and ends (with exit codes), interruptions, preemptions with
    /// their reason, operation states, node changes; oldest first.
    ///
    /// Without --after or --since: the newest --limit events. With --follow, then the events
    /// as they happen (Ctrl-C stops); --json prints one JSON object per line then.
    Events {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        args: EventsArgs,
    },
}

/// Runs one CLI command on a tokio runtime of its own.
pub fn run(command: CliCommand) -> anyhow::Result<()> {
    match command {
        CliCommand::Op { conn, command } => runtime().block_on(op::run(conn, command)),
        CliCommand::Pool {
            conn,
            tree,
            command,
        } => runtime().block_on(pool::run(conn, tree.tree, command)),
        CliCommand::Node { conn, command } => runtime().block_on(node::run(conn, command)),
        CliCommand::Events { conn, args } => runtime().block_on(events::run(conn, args)),
        CliCommand::Tree {
            conn,
            tree,
            command,
        } => runtime().block_on(tree::run(conn, tree.tree, command)),
    }
}

/// `--json`: the reply as pretty JSON.
fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
