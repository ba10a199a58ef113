//! `fairsched up`: a whole cluster on this machine (the server and N agents in this process),
//! and with `--demo` a short preemption demo on it (`demo.rs`).

use crate::runtime::{init_tracing, runtime, stop_signal};
use anyhow::{Context, anyhow};
use clap::Args;
use fairsched_api::client::ApiClient;
use fairsched_api::format_resources;
use fairsched_resources::ResourceKind;
use std::path::PathBuf;
use std::time::Duration;

mod demo;

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Number of local agents.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 9090)]
    port: u16,
    /// Data directory (store, job directories).
    #[arg(long, default_value = ".fairsched")]
    data_dir: PathBuf,
    /// Once up, run a short demo on seed 001's project-root pool layout: a batch operation
    /// fills the cluster, then an adhoc operation with a guarantee starves and preempts it
    /// (about 15 s; the cluster stays up afterwards).
    #[arg(long)]
    demo: bool,
}

/// Runs the cluster (and the demo) until Ctrl-C or SIGTERM.
pub fn run(args: UpArgs) -> anyhow::Result<()> {
    init_tracing();
    runtime().block_on(up(args))
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir;
    // `fairsched server` keeps its store in its data directory itself; `up` in `store/`
    // under it (beside its agents' work directories): the same directory given to both
    // would be two stores, and `up` would start an empty cluster beside the server's.
    if fairsched_store::SqliteStore::used_by_a_server(&data_dir) {
        anyhow::bail!(
            "{} is a `fairsched server` data directory (it has fairsched.lock): `fairsched up` \
             keeps its store in {} and its agents' work directories beside it; give up another \
             --data-dir, or run that server with `fairsched server --data-dir {}`",
            data_dir.display(),
            data_dir.join("store").display(),
            data_dir.display()
        );
    }
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    // The agents' token: random, known only to this process (the server and its agents).
    let token = fairsched_server::auth::random_secret()
        .map_err(|e| anyhow!("cannot generate the agents' token: {e}"))?;
    // A new store gets one `default` tree with default options, as `fairsched server`'s; a
    // store's trees are the user's (changed through the API).
    let store_dir = data_dir.join("store");
    let config = fairsched_server::ServerConfig {
        listen: format!("127.0.0.1:{}", args.port),
        data_dir: store_dir,
        agent_token: Some(token.clone()),
        ..fairsched_server::ServerConfig::default()
    };
    let server = fairsched_server::Server::bind(&config).await?;
    let addr = server.local_addr()?;
    let url = format!("http://{addr}");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // The agents stop first (each tells the server its node leaves), then the server.
    let (agents_stop_tx, agents_stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let server_task = tokio::spawn(server.serve(stopped(stop_rx.clone())));
    // The machine's resources, shared among the agents (at least 1 cpu each).
    let total = fairsched_agent::detect_resources();
    let n = args.nodes.max(1);
    let mut share = total.scale(1.0 / n as f64);
    if share.get(ResourceKind::Cpu) < 1.0 {
        share.set(ResourceKind::Cpu, 1.0);
    }
    let mut agents = Vec::new();
    for i in 1..=n {
        let config = fairsched_agent::AgentConfig {
            server: url.clone(),
            token: Some(token.clone()),
            token_file: None,
            node_id: format!("node-{i}"),
            resources: share,
            tags: Vec::new(),
            work_dir: data_dir.join(format!("node-{i}")),
            kill_grace: Duration::from_secs(2),
            metrics_listen: None,
            job_dir_retention: Some(Duration::from_secs(7 * 24 * 3600)),
            keeper: None,
            max_job_output: Some(fairsched_agent::DEFAULT_MAX_JOB_OUTPUT),
            run_as_users: false,
        };
        agents.push(tokio::spawn(fairsched_agent::run(
            config,
            stopped(agents_stop_rx.clone()),
        )));
    }
    println!(
        "fairsched is up: {url}/ ({n} nodes, {} each; data in {}, its store in {})",
        format_resources(&share),
        data_dir.display(),
        data_dir.join("store").display()
    );
    // The command as this user can type it: the binary's own path unless it is on PATH.
    let me = std::env::current_exe()
        .ok()
        .filter(|exe| which_fairsched().as_deref() != Some(exe.as_path()))
        .map(|exe| exe.display().to_string())
        .unwrap_or_else(|| "fairsched".into());
    println!("in another terminal:");
    println!("  export FAIRSCHED_SERVER={url}");
    println!(
        "  {me} op run --jobs 4 --cpu 0.5 -- sh -c 'echo hello from $FAIRSCHED_JOB_ID; sleep 1'"
    );
    println!("  {me} op list");
    println!("  {me} tree show");
    println!("Ctrl-C stops the cluster");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if args.demo {
        let client = ApiClient::new(&url, None);
        tokio::select! {
            r = demo::run(&client, n) => {
                if let Err(e) = r {
                    eprintln!("[demo] failed: {e:#}");
                }
                let _ = std::io::stdout().flush();
                stop_signal().await;
            }
            _ = stop_signal() => {}
        }
    } else {
        stop_signal().await;
    }
    eprintln!("stopping");
    let _ = agents_stop_tx.send(true);
    for a in agents {
        if let Ok(Err(e)) = a.await {
            eprintln!("agent: {e:#}");
        }
    }
    let _ = stop_tx.send(true);
    server_task.await??;
    Ok(())
}

/// `fairsched` as found on PATH (canonical), if it is there.
fn which_fairsched() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("fairsched"))
            .find(|p| p.is_file())
            .and_then(|p| p.canonicalize().ok())
    })
}
