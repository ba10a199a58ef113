//! `fairsched agent`: a node agent that runs jobs on this machine, in the foreground until
//! Ctrl-C or SIGTERM.

use crate::args::{parse_bytes, parse_duration_ms};
use crate::runtime::{init_tracing, runtime, stop_signal};
use anyhow::anyhow;
use clap::Args;
use fairsched_resources::{ResourceKind, Resources};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Server URL, or several separated by commas (a cluster's servers: the agent talks to
    /// the one that leads, past any it cannot reach).
    #[arg(long, env = "FAIRSCHED_SERVER")]
    server: String,
    /// Resources offered, e.g. `cpu=8,memory=16GiB`. A resource left out keeps its detected
    /// value: cpu the machine's cpus, memory its RAM, user_slots 4 per offered cpu (at least
    /// 1), gpu and network 0.
    #[arg(long)]
    resources: Option<String>,
    /// Shared agent token (the server's `agent_token`). Prefer --token-file: a token given
    /// here shows in `ps`, and in the environment it is readable by whatever runs as the
    /// agent's user (jobs do not inherit it).
    #[arg(long, env = "FAIRSCHED_AGENT_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the agents' token (mode 0600, owned by the agent's user: the agent
    /// warns when others may read it). Read at start and again whenever the server refuses
    /// the token, so a rotated token is taken without a restart.
    #[arg(long, value_name = "PATH", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// Node id (default: the host name).
    #[arg(long)]
    node_id: Option<String>,
    /// Node tags (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Directory for job working directories and output.
    #[arg(long, default_value = ".fairsched-agent")]
    work_dir: PathBuf,
    /// Milliseconds between SIGTERM and SIGKILL when a job is killed.
    #[arg(long, default_value_t = 2000)]
    kill_grace_ms: u64,
    /// Serve this agent's own Prometheus metrics at `GET /metrics` on this address
    /// (`127.0.0.1:9101`, `0.0.0.0:9101`): jobs running, started and ended by outcome,
    /// failed heartbeats, heartbeat latency [default: not served].
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<String>,
    /// A finished job's directory (its output files) is removed once nothing in it changed
    /// for this long (`7d`, `12h`, `30m`, or milliseconds; 0: keep them forever). The server
    /// keeps the output's last 64 KiB for its own retention (`history_retention_ms`).
    #[arg(long, default_value = "7d", value_parser = parse_duration_ms, value_name = "DURATION")]
    job_dir_retention: u64,
    /// The most bytes kept of each job's stdout and of its stderr (`1GiB`, `500MB`; 0:
    /// unbounded): the first ones, then a line saying the rest was discarded. The job is not
    /// stopped for it.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes, value_name = "SIZE")]
    max_job_output: u64,
    /// Run each job as the local account named as its operation's user (as Slurm runs jobs
    /// as their users), so that jobs cannot read one another's files and processes nor the
    /// agent's token and records. The agent must then run as root; a job of a user without
    /// an account on this machine, or of `root`, fails saying so.
    #[arg(long)]
    run_jobs_as_users: bool,
}

/// Runs the agent until Ctrl-C or SIGTERM.
pub fn run(args: AgentArgs) -> anyhow::Result<()> {
    init_tracing();
    let resources = offered_resources(args.resources.as_deref())?;
    let node_id = args.node_id.clone().unwrap_or_else(hostname);
    let token = match &args.token_file {
        Some(path) => Some(fairsched_agent::read_token_file(path)?),
        None => args.token,
    };
    let config = fairsched_agent::AgentConfig {
        server: args.server,
        token,
        token_file: args.token_file,
        node_id,
        resources,
        tags: args.tags,
        work_dir: args.work_dir,
        kill_grace: Duration::from_millis(args.kill_grace_ms),
        metrics_listen: args.metrics_listen.clone(),
        job_dir_retention: (args.job_dir_retention > 0)
            .then(|| Duration::from_millis(args.job_dir_retention)),
        keeper: None,
        max_job_output: (args.max_job_output > 0).then_some(args.max_job_output),
        run_as_users: args.run_jobs_as_users,
    };
    runtime().block_on(async { fairsched_agent::run(config, stop_signal()).await })
}

/// What `fairsched agent --resources` offers: the named resources as given, the others as
/// detected (user slots: 4 per offered cpu, at least 1, unless given).
fn offered_resources(given: Option<&str>) -> anyhow::Result<Resources> {
    let mut out = fairsched_agent::detect_resources();
    let Some(text) = given else {
        return Ok(out);
    };
    let parsed = fairsched_api::parse_resources(text).map_err(|e| anyhow!("--resources: {e}"))?;
    let named: Vec<ResourceKind> = text
        .split(',')
        .filter_map(|part| part.split_once('='))
        .filter_map(|(name, _)| ResourceKind::from_name(name.trim()))
        .collect();
    for kind in &named {
        out.set_raw(*kind, parsed.raw_of(*kind));
    }
    if !named.contains(&ResourceKind::UserSlots) {
        let slots = (out.get(ResourceKind::Cpu) * 4.0).ceil().max(1.0);
        out.set(ResourceKind::UserSlots, slots);
    }
    Ok(out)
}

/// The node id by default: the host name, else `node`.
fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "node".into())
}
