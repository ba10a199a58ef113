//! `fairsched server`: the scheduler server, in the foreground until Ctrl-C or SIGTERM.

use crate::runtime::{init_tracing, runtime, stop_signal};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Configuration file (TOML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Overrides `listen`.
    #[arg(long)]
    listen: Option<String>,
    /// Overrides `data_dir`.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(args: ServerArgs) -> anyhow::Result<()> {
    init_tracing();
    let mut config = match &args.config {
        Some(path) => fairsched_server::ServerConfig::from_file(path)?,
        None => fairsched_server::ServerConfig::default(),
    };
    if let Some(l) = args.listen {
        config.listen = l;
    }
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    }
    runtime().block_on(async {
        let server = fairsched_server::Server::bind(&config).await?;
        let stop = stop_signal();
        println!(
            "fairsched server listening on http://{}",
            server.local_addr()?
        );
        server.serve(stop).await
    })
}
