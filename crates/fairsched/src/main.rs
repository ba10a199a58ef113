//! The `fairsched` binary.

use clap::Parser;

/// fairsched: a cluster scheduler for shared batch compute with hierarchical quotas.
#[derive(Debug, Parser)]
#[command(name = "fairsched", version)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
