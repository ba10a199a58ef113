//! `fairsched node`: list nodes; disable, enable, drain, undrain one.

use super::{Conn, print_json};
use clap::Subcommand;
use fairsched_api::{NodeState, format_resources};

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Nodes with their state (enabled, draining, disabled), jobs and resources.
    List,
    /// Stop scheduling on a node: its jobs are aborted and go back to pending (they run
    /// elsewhere). Kept across the node's re-registrations and server restarts.
    Disable { id: String },
    /// Schedule on a disabled node again.
    Enable { id: String },
    /// Start nothing new on a node; its running jobs finish.
    Drain { id: String },
    /// End draining: the node takes new jobs again.
    Undrain { id: String },
}

pub async fn run(conn: Conn, command: NodeCommand) -> anyhow::Result<()> {
    let client = conn.client()?;
    let (id, action) = match command {
        NodeCommand::List => {
            let nodes = client.list_nodes().await?;
            if conn.json {
                return print_json(&nodes);
            }
            println!(
                "{:<16} {:<9} {:>5}  {:<32} USAGE",
                "NODE", "STATE", "JOBS", "RESOURCES"
            );
            for n in nodes {
                println!(
                    "{:<16} {:<9} {:>5}  {:<32} {}",
                    n.id,
                    n.state.map_or("", NodeState::name),
                    n.allocation_count,
                    format_resources(&n.resources),
                    format_resources(&n.usage)
                );
            }
            return Ok(());
        }
        NodeCommand::Disable { id } => (id, "disable"),
        NodeCommand::Enable { id } => (id, "enable"),
        NodeCommand::Drain { id } => (id, "drain"),
        NodeCommand::Undrain { id } => (id, "undrain"),
    };
    let n = client.node_action(&id, action).await?;
    if conn.json {
        print_json(&n)
    } else {
        println!("{} {}", n.id, n.state.map_or("", NodeState::name));
        Ok(())
    }
}
