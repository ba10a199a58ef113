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
    /// A PostgreSQL store, `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, shared with
    /// other servers for high availability (overrides `[store] url`; default: SQLite in
    /// `data_dir`).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

/// Set by the benchmarks that start `fairsched server` as a child process (`bench/harness.rs`)
/// to their own PID: the server then gets SIGTERM when that process ends, even when it was
/// killed, so that no benchmark leaves a server behind. Linux only (ignored elsewhere); not
/// for operators.
pub(crate) const EXIT_WITH_PARENT_ENV: &str = "FAIRSCHED_EXIT_WITH_PARENT";

/// With [`EXIT_WITH_PARENT_ENV`] set: asks the kernel for SIGTERM when the parent ends, and
/// fails if it has already ended. (The signal comes when the parent's thread that started this
/// process ends: the benchmarks start the server from their main thread.)
fn exit_with_parent() -> anyhow::Result<()> {
    let Some(parent) = std::env::var_os(EXIT_WITH_PARENT_ENV) else {
        return Ok(());
    };
    #[cfg(target_os = "linux")]
    {
        use anyhow::Context as _;
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
            .context("prctl(PR_SET_PDEATHSIG)")?;
        // The parent may have ended before that call: then no signal would come.
        let ppid = nix::unistd::getppid().as_raw().to_string();
        if parent.to_str() != Some(ppid.as_str()) {
            anyhow::bail!(
                "{EXIT_WITH_PARENT_ENV}={parent:?}: the process that started this server has \
                 ended"
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
    Ok(())
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(args: ServerArgs) -> anyhow::Result<()> {
    init_tracing();
    exit_with_parent()?;
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
    if let Some(url) = args.store {
        config.store.url = Some(url);
    }
    // Again, with the flags.
    config.validate()?;
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
