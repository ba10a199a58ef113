//! The running system's subcommands: `server`, `agent`, `up`, and the CLI that talks to a server
//! (`op`, `pool`, `node`, `tree`, `events`).

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use fairsched_api::client::{ApiClient, ClientError};
use fairsched_api::{
    CreatePool, EventQuery, EventView, OperationQuery, SubmitOperation, TaskSubmit,
    TreeOptionsUpdate, UpdateOperation, UpdatePool, format_resources,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod demo;
mod logs;

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Run the scheduler server.
    Server(ServerArgs),
    /// Run a node agent that runs jobs on this machine.
    Agent(AgentArgs),
    /// A whole cluster on this machine: the server and N agents sharing its resources.
    Up(UpArgs),
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

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only events of this operation.
    #[arg(long)]
    operation: Option<String>,
    /// Only events on this node.
    #[arg(long)]
    node: Option<String>,
    /// Only events of this job (its id).
    #[arg(long)]
    job: Option<String>,
    /// Only these events, comma-separated (allocation_started, allocation_finished,
    /// allocation_interrupted, allocation_preempted, operation_state, operation_updated, error,
    /// job_adopted, node_registered, node_lost, node_changed, tree_applied).
    #[arg(long)]
    kind: Option<String>,
    /// Events after this sequence number (the first column).
    #[arg(long)]
    after: Option<u64>,
    /// Events since a time: Unix milliseconds, or a duration ago (`90s`, `10m`, `2h`, `1d`).
    #[arg(long, value_parser = parse_since)]
    since: Option<u64>,
    /// At most this many (at most 10000).
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Keep printing events as they happen.
    #[arg(long, short = 'f')]
    follow: bool,
}

/// How the CLI reaches the server. Each setting comes from its flag, else its environment
/// variable, else the config file (`FAIRSCHED_CONFIG`, else
/// `$XDG_CONFIG_HOME/fairsched/config.toml` or `~/.config/fairsched/config.toml`).
#[derive(Debug, Args)]
pub struct Conn {
    /// Server URL [default: `server` in the config file, else http://127.0.0.1:9090].
    #[arg(long, env = "FAIRSCHED_SERVER", global = true)]
    server: Option<String>,
    /// API token, sent as `Authorization: Bearer` [default: `token` in the config file].
    #[arg(long, env = "FAIRSCHED_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
}

/// Which pool tree a `pool` or `tree` command acts on.
#[derive(Debug, Args)]
pub struct TreeArg {
    /// The pool tree (`fairsched tree list` lists them) [default: the server's default tree].
    #[arg(long, global = true, value_name = "NAME")]
    tree: Option<String>,
}

/// The server URL when neither a flag, the environment nor the config file gives one.
const DEFAULT_SERVER: &str = "http://127.0.0.1:9090";

/// The CLI's config file: `server = "http://..."`, `token = "..."`.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    server: Option<String>,
    token: Option<String>,
}

/// Where the config file is: `FAIRSCHED_CONFIG` (which must exist), else the first of
/// `$XDG_CONFIG_HOME/fairsched/config.toml` and `$HOME/.config/fairsched/config.toml` (either
/// may be absent). `(path, required)`.
fn config_path(env: impl Fn(&str) -> Option<String>) -> Option<(PathBuf, bool)> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(p) = set("FAIRSCHED_CONFIG") {
        return Some((PathBuf::from(p), true));
    }
    let base = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("fairsched").join("config.toml"), false))
}

fn read_config_file(path: &std::path::Path, required: bool) -> anyhow::Result<ConfigFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            return Ok(ConfigFile::default());
        }
        Err(e) => {
            return Err(anyhow!(
                "cannot read the config file {} (FAIRSCHED_CONFIG): {e}",
                path.display()
            ));
        }
    };
    toml::from_str(&text).map_err(|e| anyhow!("config file {}: {e}", path.display()))
}

/// The server URL and token: flag, else environment (clap merged those two), else file, else
/// the default URL and no token.
fn resolve_conn(
    server: Option<String>,
    token: Option<String>,
    file: ConfigFile,
) -> (String, Option<String>) {
    (
        server
            .or(file.server)
            .unwrap_or_else(|| DEFAULT_SERVER.to_string()),
        token.or(file.token),
    )
}

impl Conn {
    /// A client of the server this invocation names.
    fn client(&self) -> anyhow::Result<ApiClient> {
        let file = match config_path(|k| std::env::var(k).ok()) {
            Some((path, required)) => read_config_file(&path, required)?,
            None => ConfigFile::default(),
        };
        let (server, token) = resolve_conn(self.server.clone(), self.token.clone(), file);
        Ok(ApiClient::new(&server, token))
    }
}

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

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Server URL.
    #[arg(long, env = "FAIRSCHED_SERVER")]
    server: String,
    /// Resources offered, e.g. `cpu=8,memory=16GiB`. A resource left out keeps its detected
    /// value: cpu the machine's cpus, memory its RAM, user_slots 4 per offered cpu (at least
    /// 1), gpu and network 0.
    #[arg(long)]
    resources: Option<String>,
    /// Shared agent token.
    #[arg(long, env = "FAIRSCHED_AGENT_TOKEN")]
    token: Option<String>,
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
}

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

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The pool (default: an ephemeral pool named after the user).
    #[arg(long)]
    pool: Option<String>,
    /// Number of jobs.
    #[arg(long, default_value_t = 1)]
    jobs: u32,
    /// CPU of each job (`0.5`).
    #[arg(long, default_value = "1")]
    cpu: String,
    /// Memory of each job (`1GiB`); a job that uses more is killed.
    #[arg(long, default_value = "256MiB")]
    memory: String,
    /// GPUs of each job.
    #[arg(long)]
    gpu: Option<String>,
    /// The user (default: $USER).
    #[arg(long)]
    user: Option<String>,
    /// The operation id (default: chosen by the server).
    #[arg(long)]
    id: Option<String>,
    /// Extra environment, `KEY=VALUE` (repeatable).
    #[arg(long = "env")]
    env: Vec<String>,
    /// The operation's weight among its pool's children (default 1).
    #[arg(long)]
    weight: Option<f64>,
    /// `normal` (default): preempted by starving operations. `graceful`: never preempted
    /// that way; instead, while above its fair share, its jobs are interrupted (reason
    /// `graceful_preemption`) with the tree's `allocation_graceful_preemption_timeout_ms`.
    #[arg(long, value_parser = ["normal", "graceful"])]
    preemption_mode: Option<String>,
    /// A preempted job is sent this signal (`SIGINT`, `INT`, `SIGUSR1`, ...) and may exit by
    /// itself within --interruption-timeout, instead of being killed at once.
    #[arg(long, value_parser = parse_signal)]
    interruption_signal: Option<String>,
    /// How long an interrupted job may take to exit before it is killed: milliseconds or a
    /// duration (`500ms`, `30s`, `2m`); default 15s.
    #[arg(long, value_parser = parse_duration_ms)]
    interruption_timeout: Option<u64>,
    /// The operation's resource limits (`cpu=4,memory=8GiB`; a resource left out is
    /// unlimited).
    #[arg(long, value_parser = parse_limits)]
    resource_limits: Option<PartialResources>,
    /// How long each job may run, by your estimate (`90s`, `30m`, milliseconds): lets the
    /// scheduler start it on resources held for a big job or a gang that it will leave in time
    /// (backfill). Not enforced: a job that overruns delays the job waiting for them.
    #[arg(long, value_parser = parse_duration_ms)]
    time_limit: Option<u64>,
    /// Wait until the operation ends, printing its state; exit status 0 if it completed, 1
    /// if it failed or was aborted (as `op wait`).
    #[arg(long)]
    wait: bool,
    /// Accept it even if no node can hold its jobs yet (nodes that large will join, as in an
    /// autoscaled cluster); otherwise such an operation is refused.
    #[arg(long)]
    wait_for_nodes: bool,
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum OpCommand {
    /// Submit an operation of N identical jobs running CMD.
    Run(Box<RunArgs>),
    /// List operations (in submission order): the newest --limit of them, or --all.
    List {
        /// Only these states, comma-separated (pending, running, completed, failed, aborted).
        #[arg(long)]
        state: Option<String>,
        /// Only operations running in this pool (or its subtree).
        #[arg(long)]
        pool: Option<String>,
        /// Only this user's operations.
        #[arg(long)]
        user: Option<String>,
        /// The newest this many operations (finished ones are kept for the server's
        /// `history_retention_ms`).
        #[arg(long, default_value_t = 100, conflicts_with = "all")]
        limit: usize,
        /// Every operation the server has (fetched a page at a time).
        #[arg(long)]
        all: bool,
    },
    /// Show one operation: its state, why it waits, job counts (aborted ones by reason), its
    /// running jobs and its last failed ones; `--all-jobs` lists every job it ran.
    Show {
        id: String,
        /// List every job, finished ones too.
        #[arg(long)]
        all_jobs: bool,
    },
    /// Wait until an operation ends: prints its final state and job counts; exit status 0 if
    /// it completed, 1 if it failed, was aborted, or --timeout passed first.
    Wait {
        id: String,
        /// Give up after this long (`30s`, `10m`, milliseconds) [default: wait as long as it
        /// takes].
        #[arg(long, value_parser = parse_duration_ms)]
        timeout: Option<u64>,
    },
    /// Change a running or pending operation's weight, resource limits or pool (YTsaurus
    /// `update_op_parameters`); what is not given stays. Takes effect at the next fair-share
    /// update: new jobs follow the new shares (running jobs are not moved).
    Update {
        id: String,
        /// The new weight.
        #[arg(long)]
        weight: Option<f64>,
        /// Move it to this pool (of its first tree; an ephemeral pool is created as at submit).
        #[arg(long)]
        pool: Option<String>,
        /// The new resource limits (`cpu=4,memory=8GiB`; `none`: unlimited).
        #[arg(long, value_parser = parse_limits)]
        resource_limits: Option<PartialResources>,
        /// Change --pool, --weight and --resource-limits in this pool tree only (the
        /// operation's `scheduling_options_per_pool_tree`).
        #[arg(long)]
        tree: Option<String>,
    },
    /// Abort an operation (its jobs are killed).
    Abort { id: String },
    /// Print the output of an operation's jobs: each finished job's captured output (the
    /// last 64 KiB of stdout and of stderr) and each running job's output so far, fetched
    /// from its node (marked `running`; the newest 64 KiB of each stream).
    Logs {
        id: String,
        /// Keep printing the jobs' new output as it comes (as `tail -f`), until the operation
        /// has ended and its jobs' last output is printed (exit status 0). Output that comes
        /// faster than it is read is skipped, and a line says how many bytes.
        #[arg(long, short)]
        follow: bool,
    },
}

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
    /// Remove a pool (refused while it has child pools or unfinished operations; `pool
    /// apply` removes pools with operations, which go on in ephemeral pools).
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

#[derive(Debug, Subcommand)]
pub enum TreeCommand {
    /// The tree's name, then its pools with their fair share, usage and demand (--json: also
    /// its configuration and orchid snapshot).
    Show,
    /// Every pool tree: the default one (`*`), its node tag filter, pools, nodes, unfinished
    /// operations and resources.
    List,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FAIRSCHED_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
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

/// Resolves on Ctrl-C or SIGTERM.
/// `fairsched` as found on PATH (canonical), if it is there.
fn which_fairsched() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("fairsched"))
            .find(|p| p.is_file())
            .and_then(|p| p.canonicalize().ok())
    })
}

///
/// The handlers are installed when this is called (inside a runtime), not when the future is
/// first polled: a SIGTERM right after the server printed its address stops it cleanly instead
/// of killing it.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

pub fn main(command: ClusterCommand) -> ExitCode {
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Server(args) => {
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
        ClusterCommand::Agent(args) => {
            init_tracing();
            let resources = offered_resources(args.resources.as_deref())?;
            let node_id = args.node_id.clone().unwrap_or_else(hostname);
            let config = fairsched_agent::AgentConfig {
                server: args.server,
                token: args.token,
                node_id,
                resources,
                tags: args.tags,
                work_dir: args.work_dir,
                kill_grace: Duration::from_millis(args.kill_grace_ms),
                metrics_listen: args.metrics_listen.clone(),
                job_dir_retention: (args.job_dir_retention > 0)
                    .then(|| Duration::from_millis(args.job_dir_retention)),
            };
            runtime().block_on(async { fairsched_agent::run(config, stop_signal()).await })
        }
        ClusterCommand::Up(args) => {
            init_tracing();
            runtime().block_on(up(args))
        }
        ClusterCommand::Op { conn, command } => runtime().block_on(op(conn, command)),
        ClusterCommand::Pool {
            conn,
            tree,
            command,
        } => runtime().block_on(pool(conn, tree.tree, command)),
        ClusterCommand::Node { conn, command } => runtime().block_on(node(conn, command)),
        ClusterCommand::Events { conn, args } => runtime().block_on(events(conn, args)),
        ClusterCommand::Tree {
            conn,
            tree,
            command,
        } => runtime().block_on(tree_command(conn, tree.tree, command)),
    }
}

async fn tree_command(
    conn: Conn,
    tree: Option<String>,
    command: TreeCommand,
) -> anyhow::Result<()> {
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

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "node".into())
}

fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn print_pools(pools: Map<String, Value>) {
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

fn amount(kind: ResourceKind, text: &str) -> anyhow::Result<i64> {
    fairsched_resources::parse_amount(kind, text).map_err(|e| anyhow!("--{}: {e}", kind.name()))
}

/// Polls operation `id` until it ends (or `timeout_ms` passes); prints its final state (as
/// JSON with `json`); an error unless it completed.
async fn wait_for_operation(
    client: &ApiClient,
    id: &str,
    timeout_ms: Option<u64>,
    json: bool,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        let o = client.get_operation(id).await?;
        if matches!(o.state.as_str(), "completed" | "failed" | "aborted") {
            let c = &o.job_counts;
            if json {
                print_json(&o)?;
            } else {
                println!(
                    "operation {} {}: {} completed, {} failed, {} aborted of {} jobs",
                    o.id, o.state, c.completed, c.failed, c.aborted, c.total
                );
            }
            return match o.state.as_str() {
                "completed" => Ok(()),
                state => Err(anyhow!(
                    "operation {id:?} {state}{}",
                    o.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )),
            };
        }
        if let Some(t) = timeout_ms
            && started.elapsed() >= Duration::from_millis(t)
        {
            return Err(anyhow!(
                "operation {id:?} is still {} after {}s",
                o.state,
                t as f64 / 1000.0
            ));
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

async fn op(conn: Conn, command: OpCommand) -> anyhow::Result<()> {
    let client = conn.client()?;
    match command {
        OpCommand::Run(args) => {
            let RunArgs {
                pool,
                jobs,
                cpu,
                memory,
                gpu,
                user,
                id,
                env,
                weight,
                preemption_mode,
                interruption_signal,
                interruption_timeout,
                resource_limits,
                time_limit,
                wait,
                wait_for_nodes,
                command,
            } = *args;
            let mut resources = Resources::ZERO;
            resources.set_raw(ResourceKind::Cpu, amount(ResourceKind::Cpu, &cpu)?);
            resources.set_raw(ResourceKind::Memory, amount(ResourceKind::Memory, &memory)?);
            if let Some(g) = gpu {
                resources.set_raw(ResourceKind::Gpu, amount(ResourceKind::Gpu, &g)?);
            }
            let env = env
                .iter()
                .map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .ok_or_else(|| anyhow!("--env {kv:?}: expected KEY=VALUE"))
                })
                .collect::<anyhow::Result<_>>()?;
            let user = user.or_else(|| std::env::var("USER").ok());
            let mut options = Map::new();
            if let Some(w) = weight {
                options.insert("weight".into(), w.into());
            }
            if let Some(m) = preemption_mode {
                options.insert("preemption_mode".into(), m.into());
            }
            if let Some(s) = interruption_signal {
                options.insert("interruption_signal".into(), s.into());
            }
            if let Some(t) = interruption_timeout {
                options.insert("interruption_timeout_ms".into(), t.into());
            }
            if let Some(l) = resource_limits {
                options.insert("resource_limits".into(), serde_json::to_value(l)?);
            }
            let reply = client
                .submit_with(
                    &SubmitOperation {
                        id,
                        user,
                        pool,
                        tasks: vec![TaskSubmit {
                            job_count: jobs,
                            resources,
                            command,
                            env,
                            gang: false,
                            time_limit_ms: time_limit,
                        }],
                        options,
                    },
                    wait_for_nodes,
                )
                .await?;
            if conn.json && !wait {
                return print_json(&reply);
            }
            if !conn.json {
                println!("{}", reply.id);
            }
            for c in &reply.created_pools {
                let hint = c
                    .did_you_mean
                    .as_deref()
                    .map(|p| format!(" (did you mean {p:?}? pass --pool {p})"))
                    .unwrap_or_default();
                eprintln!(
                    "note: pool {:?} did not exist in tree {:?}: created it as an ephemeral pool \
                     under {:?}{hint}",
                    c.pool, c.tree, c.parent
                );
            }
            if wait {
                return wait_for_operation(&client, &reply.id, None, conn.json).await;
            }
            Ok(())
        }
        OpCommand::Wait { id, timeout } => {
            wait_for_operation(&client, &id, timeout, conn.json).await
        }
        OpCommand::List {
            state,
            pool,
            user,
            limit,
            all,
        } => {
            /// Operations per request with --all.
            const PAGE: usize = 1000;
            let mut query = OperationQuery {
                state,
                pool,
                user,
                // The table needs no jobs; JSON shows everything.
                jobs: (!conn.json).then_some(false),
                limit: Some(if all { PAGE } else { limit }),
                // --all: from the first one, a page at a time.
                after: all.then(String::new),
            };
            let mut ops = Vec::new();
            loop {
                let page = client.list_operations(&query).await?;
                let more = all && page.len() >= PAGE;
                query.after = page.last().map(|o| o.id.clone());
                ops.extend(page);
                if !more {
                    break;
                }
            }
            if conn.json {
                return print_json(&ops);
            }
            println!(
                "{:<20} {:<10} {:<16} {:>6} {:>6} {:>6} {:>6}",
                "ID", "STATE", "POOL", "DONE", "RUN", "PEND", "TOTAL"
            );
            for o in ops {
                let c = o.job_counts;
                println!(
                    "{:<20} {:<10} {:<16} {:>6} {:>6} {:>6} {:>6}",
                    o.id, o.state, o.pool, c.completed, c.running, c.pending, c.total
                );
            }
            Ok(())
        }
        OpCommand::Show { id, all_jobs } => {
            let o = client.get_operation(&id).await?;
            if conn.json {
                return print_json(&o);
            }
            println!(
                "operation {} ({}) in pool {} by {}",
                o.id, o.state, o.pool, o.user
            );
            if let Some(r) = &o.reason {
                println!("reason: {r}");
            }
            if let Some(w) = &o.why {
                println!("why waiting: {w}");
            }
            let c = &o.job_counts;
            // Aborted jobs by why: preempted, lost with their node, ... (the reason's first
            // word: `agent_restarted: ...` is `agent_restarted`).
            let mut aborted: BTreeMap<String, usize> = BTreeMap::new();
            for j in o.jobs.iter().filter(|j| j.state == "aborted") {
                let why = j
                    .reason
                    .as_deref()
                    .map(|r| r.split(':').next().unwrap_or(r).trim().to_string())
                    .unwrap_or_else(|| "aborted".into());
                *aborted.entry(why).or_default() += 1;
            }
            let by_reason = if aborted.is_empty() {
                String::new()
            } else {
                let parts: Vec<String> = aborted.iter().map(|(r, n)| format!("{r} {n}")).collect();
                format!(" ({})", parts.join(", "))
            };
            println!(
                "jobs: {} total: {} pending, {} running, {} completed, {} failed, {} aborted{by_reason}",
                c.total, c.pending, c.running, c.completed, c.failed, c.aborted
            );
            let line = |j: &fairsched_api::JobView| {
                format!(
                    "  job {} on {}: {}{}{}",
                    j.id,
                    j.node,
                    j.state,
                    j.exit_code
                        .map(|c| format!(" (exit {c})"))
                        .unwrap_or_default(),
                    j.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )
            };
            if all_jobs {
                for j in &o.jobs {
                    println!("{}", line(j));
                }
                return Ok(());
            }
            /// Failed jobs shown without --all-jobs (the newest).
            const FAILED_SHOWN: usize = 5;
            let running: Vec<_> = o.jobs.iter().filter(|j| j.state == "running").collect();
            let failed: Vec<_> = o.jobs.iter().filter(|j| j.state == "failed").collect();
            if !running.is_empty() {
                println!("running:");
                for j in &running {
                    println!("{}", line(j));
                }
            }
            if !failed.is_empty() {
                println!("failed (the last {}):", failed.len().min(FAILED_SHOWN));
                for j in failed.iter().rev().take(FAILED_SHOWN).rev() {
                    println!("{}", line(j));
                }
            }
            let hidden = o.jobs.len() - running.len() - failed.len().min(FAILED_SHOWN);
            if hidden > 0 {
                println!("({hidden} more jobs: op show {} --all-jobs)", o.id);
            }
            Ok(())
        }
        OpCommand::Update {
            id,
            weight,
            pool,
            resource_limits,
            tree,
        } => {
            if weight.is_none() && pool.is_none() && resource_limits.is_none() {
                return Err(anyhow!(
                    "nothing to change: give --weight, --pool or --resource-limits"
                ));
            }
            let update = match tree {
                None => UpdateOperation {
                    weight,
                    resource_limits,
                    pool,
                    ..UpdateOperation::default()
                },
                Some(tree) => UpdateOperation {
                    scheduling_options_per_pool_tree: [(
                        tree,
                        TreeOptionsUpdate {
                            pool,
                            weight,
                            resource_limits,
                        },
                    )]
                    .into(),
                    ..UpdateOperation::default()
                },
            };
            let o = client.update_operation(&id, &update).await?;
            if conn.json {
                print_json(&o)
            } else {
                println!("{} {} in pool {}", o.id, o.state, o.pool);
                Ok(())
            }
        }
        OpCommand::Abort { id } => {
            let o = client.abort_operation(&id).await?;
            if conn.json {
                print_json(&o)
            } else {
                println!("{} {}", o.id, o.state);
                Ok(())
            }
        }
        OpCommand::Logs { id, follow } => {
            if follow {
                return logs::follow(&client, &id, conn.json).await;
            }
            let logs = client.operation_logs(&id).await?;
            if conn.json {
                return print_json(&logs);
            }
            for l in logs {
                logs::print(&l);
            }
            Ok(())
        }
    }
}

/// A duration in milliseconds: a plain number of milliseconds, or a number with a unit
/// (`ms`, `s`, `m`, `h`; `1.5s`).
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        _ => {
            return Err(format!(
                "{text:?}: expected milliseconds or a duration (500ms, 30s, 2m)"
            ));
        }
    };
    match n.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok((v * scale).round() as u64),
        _ => Err(format!(
            "{text:?}: expected milliseconds or a duration (500ms, 30s, 2m)"
        )),
    }
}

/// Resource limits: `cpu=4,memory=8GiB` (a resource left out is unlimited), or `none`.
fn parse_limits(text: &str) -> Result<PartialResources, String> {
    if text.trim() == "none" {
        return Ok(PartialResources::default());
    }
    let mut map = Map::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected NAME=AMOUNT (cpu=4,memory=8GiB) or none"))?;
        map.insert(
            name.trim().to_string(),
            Value::String(value.trim().to_string()),
        );
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| e.to_string())
}

/// A signal name (`SIGINT`, `INT`, `sigusr1`) as `SIGINT`.
fn parse_signal(text: &str) -> Result<String, String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    <nix::sys::signal::Signal as std::str::FromStr>::from_str(&name)
        .map(|_| name)
        .map_err(|_| format!("{text:?} is not a signal name (SIGINT, SIGTERM, SIGUSR1, ...)"))
}

/// `--since`: Unix milliseconds, or a duration ago.
fn parse_since(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let unit = |u: &str| match u {
        "ms" => Some(1),
        "s" => Some(1_000),
        "m" => Some(60_000),
        "h" => Some(3_600_000),
        "d" => Some(86_400_000),
        _ => None,
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: expected Unix milliseconds or a duration like 10m"))?;
    let (n, u) = text.split_at(split);
    let ago = n
        .parse::<u64>()
        .ok()
        .zip(unit(u))
        .map(|(n, u)| n * u)
        .ok_or_else(|| {
            format!("{text:?}: expected Unix milliseconds or a duration (90s, 10m, 2h, 1d)")
        })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Ok(now.saturating_sub(ago))
}

/// `2026-11-22 10:04:05.123` (UTC) from Unix milliseconds.
fn utc_time(unix_ms: u64) -> String {
    let (days, ms) = (unix_ms / 86_400_000, unix_ms % 86_400_000);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// One event as a line: sequence number, time (UTC), name, then its fields.
fn event_line(e: &EventView) -> String {
    let mut line = format!("{:>7}  {}  {:<22}", e.seq, utc_time(e.unix_ms), e.kind());
    let first = ["operation", "job", "node"];
    let rest = e
        .fields
        .iter()
        .filter(|(k, _)| !first.contains(&k.as_str()) && *k != "event" && *k != "t_ms");
    let named = first
        .iter()
        .filter_map(|k| e.fields.get_key_value(*k))
        .chain(rest);
    for (k, v) in named {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        line.push_str(&format!(" {k}={v}"));
    }
    line
}

async fn events(conn: Conn, args: EventsArgs) -> anyhow::Result<()> {
    let client = conn.client()?;
    let query = EventQuery {
        operation: args.operation,
        node: args.node,
        job: args.job,
        kind: args.kind,
        since: args.since,
        after: args.after,
        limit: Some(args.limit),
    };
    // Following from now on (no --after or --since): the newest event of all, before reading
    // the filtered ones, is where the stream starts at the latest.
    let now_seq = if args.follow && query.after.is_none() && query.since.is_none() {
        let newest = client
            .events(&EventQuery {
                limit: Some(1),
                ..EventQuery::default()
            })
            .await?;
        newest.last().map_or(0, |e| e.seq)
    } else {
        0
    };
    let events = client.events(&query).await?;
    if conn.json && !args.follow {
        return print_json(&events);
    }
    let print = |e: &EventView| {
        if conn.json {
            println!("{}", serde_json::to_string(e).unwrap_or_default());
        } else {
            println!("{}", event_line(e));
        }
    };
    for e in &events {
        print(e);
    }
    if !args.follow {
        return Ok(());
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let mut after = events
        .last()
        .map(|e| e.seq)
        .or(query.after)
        .unwrap_or(0)
        .max(now_seq);
    // Follow until stopped: when the server goes away (a restart, a network blip) the stream
    // is opened again from the last event printed, so nothing is missed or printed twice (the
    // log is durable and its numbers are never reused). Errors the server answers with (a bad
    // filter) end the command.
    let mut backoff = FOLLOW_BACKOFF_MIN;
    loop {
        let lost = match client
            .event_stream(&EventQuery {
                after: Some(after),
                limit: None,
                ..query.clone()
            })
            .await
        {
            Err(ClientError::Api(e)) => return Err(e.into()),
            Err(e) => e.to_string(),
            Ok(mut stream) => loop {
                match stream.next().await {
                    Ok(Some(e)) => {
                        after = after.max(e.seq);
                        print(&e);
                        let _ = std::io::stdout().flush();
                        backoff = FOLLOW_BACKOFF_MIN;
                    }
                    Ok(None) => break "the server ended the event stream".to_string(),
                    Err(ClientError::Api(e)) => return Err(e.into()),
                    Err(e) => break e.to_string(),
                }
            },
        };
        eprintln!(
            "events: {lost}; reconnecting in {:.1} s (from event {after})",
            backoff.as_secs_f64()
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(FOLLOW_BACKOFF_MAX);
    }
}

/// `events --follow` waits this long before reconnecting, doubling up to the maximum.
const FOLLOW_BACKOFF_MIN: Duration = Duration::from_millis(250);
const FOLLOW_BACKOFF_MAX: Duration = Duration::from_secs(5);

async fn node(conn: Conn, command: NodeCommand) -> anyhow::Result<()> {
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
                    n.state,
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
        println!("{} {}", n.id, n.state);
        Ok(())
    }
}

fn json_object(text: Option<&str>) -> anyhow::Result<Option<Map<String, Value>>> {
    text.map(|t| serde_json::from_str(t).context("--config must be a JSON object"))
        .transpose()
}

async fn pool(conn: Conn, tree: Option<String>, command: PoolCommand) -> anyhow::Result<()> {
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
        PoolCommand::Remove { name } => client.remove_pool(tree, &name).await?,
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
/// Numbers are compared and shown by value (`3` and `3.0` are the same weight).
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
    let show = |v: Option<Value>| match v {
        None | Some(Value::Null) => "unset".to_string(),
        Some(v) => v.to_string(),
    };
    keys.into_iter()
        .filter(|k| get(old, k) != get(new, k))
        .map(|k| format!("{k} {} -> {}", show(get(old, k)), show(get(new, k))))
        .collect()
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir;
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
            node_id: format!("node-{i}"),
            resources: share,
            tags: Vec::new(),
            work_dir: data_dir.join(format!("node-{i}")),
            kill_grace: Duration::from_secs(2),
            metrics_listen: None,
            job_dir_retention: Some(Duration::from_secs(7 * 24 * 3600)),
        };
        agents.push(tokio::spawn(fairsched_agent::run(
            config,
            stopped(stop_rx.clone()),
        )));
    }
    println!(
        "fairsched is up: {url}/ ({n} nodes, {} each; data in {})",
        format_resources(&share),
        data_dir.display()
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
    let _ = stop_tx.send(true);
    for a in agents {
        if let Ok(Err(e)) = a.await {
            eprintln!("agent: {e:#}");
        }
    }
    server_task.await??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn flag_or_env_beats_the_config_file_which_beats_the_default() {
        let f = || file("server = \"http://file:1\"\ntoken = \"file-token\"\n");
        // clap gives the flag, else the environment variable, as one value.
        assert_eq!(
            resolve_conn(Some("http://flag:2".into()), Some("t".into()), f()),
            ("http://flag:2".to_string(), Some("t".to_string()))
        );
        assert_eq!(
            resolve_conn(None, None, f()),
            ("http://file:1".to_string(), Some("file-token".to_string()))
        );
        assert_eq!(
            resolve_conn(None, None, ConfigFile::default()),
            (DEFAULT_SERVER.to_string(), None)
        );
        assert_eq!(
            resolve_conn(None, None, file("token = \"x\"")).0,
            DEFAULT_SERVER
        );
    }

    #[test]
    fn config_file_location() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            config_path(env(&[("FAIRSCHED_CONFIG", "/x.toml"), ("HOME", "/home/a")])),
            Some((PathBuf::from("/x.toml"), true))
        );
        assert_eq!(
            config_path(env(&[("XDG_CONFIG_HOME", "/cfg"), ("HOME", "/home/a")])),
            Some((PathBuf::from("/cfg/fairsched/config.toml"), false))
        );
        assert_eq!(
            config_path(env(&[("HOME", "/home/a")])),
            Some((
                PathBuf::from("/home/a/.config/fairsched/config.toml"),
                false
            ))
        );
        assert_eq!(config_path(env(&[])), None);
    }

    #[test]
    fn config_file_errors_name_the_file_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        // An absent default file is no error; an absent FAIRSCHED_CONFIG is.
        assert_eq!(
            read_config_file(&path, false).unwrap(),
            ConfigFile::default()
        );
        let err = read_config_file(&path, true).unwrap_err().to_string();
        assert!(
            err.contains("config.toml") && err.contains("FAIRSCHED_CONFIG"),
            "{err}"
        );
        std::fs::write(&path, "servr = \"http://x\"\n").unwrap();
        let err = read_config_file(&path, false).unwrap_err().to_string();
        assert!(
            err.contains("config.toml") && err.contains("servr"),
            "{err}"
        );
    }

    #[test]
    fn tree_differences_by_pool_and_option() {
        let old = serde_json::json!({"pools": {"a": {"weight": 1.0, "pools": {"b": {}}}}});
        let new = serde_json::json!({"pools": {"a": {}, "c": {"pools": {"b": {"weight": 2.0}}}}});
        let (old, new) = (pool_options(&old), pool_options(&new));
        assert_eq!(old["b"].0, "a/b");
        assert_eq!(new["b"].0, "c/b");
        assert_eq!(
            option_changes(&old["a"].1, &new["a"].1),
            ["weight 1.0 -> unset"]
        );
        assert_eq!(
            option_changes(&old["b"].1, &new["b"].1),
            ["weight unset -> 2.0"]
        );
    }

    #[test]
    fn durations_and_signals() {
        assert_eq!(parse_duration_ms("2500"), Ok(2500));
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        assert!(parse_duration_ms("10 parsecs").is_err());
        assert!(parse_duration_ms("s").is_err());
        assert_eq!(parse_signal("SIGINT"), Ok("SIGINT".to_string()));
        assert_eq!(parse_signal("usr1"), Ok("SIGUSR1".to_string()));
        assert!(parse_signal("SIGNOPE").is_err());
        let l = parse_limits("cpu=4, memory=8GiB").unwrap();
        assert_eq!(
            serde_json::to_value(l).unwrap(),
            serde_json::json!({"cpu": 4.0, "memory": 8u64 << 30})
        );
        assert_eq!(parse_limits("none"), Ok(PartialResources::default()));
        let err = parse_limits("cpuu=1").unwrap_err();
        assert!(err.contains("cpuu"), "{err}");
        assert!(parse_limits("cpu").is_err());
    }
}
