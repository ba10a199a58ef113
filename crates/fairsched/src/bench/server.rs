//! `fairsched bench server`: a whole-system throughput figure for the scheduler server.
//!
//! A real server (HTTP on 127.0.0.1, the SQLite store in a temporary directory) runs as a child
//! process, `fairsched server --config server.toml` of this binary with the file written to
//! the temporary directory; with `--in-process`, as a [`fairsched_server::Server`] on its own
//! tokio runtime in this process (threads `fsb-server`). N simulated agents run as tasks on a
//! runtime of this process (threads `fsb-agents`) and speak the real agent protocol through
//! one shared [`ApiClient`] (one connection pool, one keep-alive connection per agent). A
//! simulated agent runs no process: a job it is told to start "finishes" `--job-ms` after the
//! reply that started it arrived, and is reported as completed by the first heartbeat after
//! that. Counts come from what the agents see: placements are the starts in heartbeat
//! replies, completions the finished jobs of heartbeats the server accepted, latency the time
//! each heartbeat request took.
//!
//! Only what happens inside the measurement window (after `--warmup`) counts. The server's CPU
//! time over the window is its process's (`/proc/PID/stat`), or in this process that of its
//! runtime's and store writer's threads (`/proc/self/task`); its peak memory is its process's
//! `VmHWM` (not told apart in this process).

use super::harness::{
    AgentSetup, BenchServer, Counters, ErrorSample, ServerMode, TreeShape, Window, bench_pools,
    histogram_sum_count, pool_name, process_cpu_s, process_peak_rss_bytes, raise_open_file_limit,
    simulate_agent, with_server,
};
use anyhow::{Context, anyhow, bail};
use clap::Args;
use fairsched_api::client::ApiClient;
use fairsched_api::{OperationQuery, SubmitOperation, TaskSubmit};
use fairsched_config::{PoolTreeConfig, PoolTrees};
use fairsched_resources::Resources;
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Args)]
pub struct ServerBenchArgs {
    /// Number of simulated agents (nodes).
    #[arg(long, default_value_t = 5000)]
    pub agents: u32,
    /// Jobs each agent runs at once (its resources: this many cpus and user slots, 2 GiB of
    /// memory per slot; every job takes 1 cpu, 1 slot and 1 GiB).
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    /// Heartbeat period of every agent (also the server's `node_heartbeat_period_ms`); agents
    /// start spread evenly over one period and each heartbeat is jittered by up to 10 %.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub heartbeat_ms: u64,
    /// Virtual duration of every job: it is reported completed by the first heartbeat at least
    /// this long after the reply that started it.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub job_ms: u64,
    /// Number of operations submitted before the agents start.
    #[arg(long, default_value_t = 50)]
    pub operations: u32,
    /// Number of pools the operations are spread over (round robin), each with its own user.
    #[arg(long, default_value_t = 5)]
    pub pools: u32,
    /// The pool tree: `flat` (every pool under the root) or `deep` (divisions with
    /// guarantees, departments, then the pools operations run in, every other one FIFO).
    #[arg(long, value_enum, default_value_t = TreeShape::Flat)]
    pub tree: TreeShape,
    /// Jobs per operation [default: enough to keep every slot busy for the whole run].
    #[arg(long)]
    pub jobs_per_operation: Option<u32>,
    /// Length of the measurement window (`30s`, `2m`, or milliseconds).
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub duration: u64,
    /// Warm-up before the window: registrations and the first fill of the cluster.
    #[arg(long, default_value = "5s", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub warmup: u64,
    /// Timeout of one agent request (a slower heartbeat counts as an error).
    #[arg(long, default_value = "10s", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub request_timeout: u64,
    /// The server's data directory (must not exist yet) [default: a temporary directory,
    /// removed at the end].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// The store's durability (`[store] synchronous`): `full` flushes every commit to the
    /// disk (the server's default), `normal` only at checkpoints.
    #[arg(long, default_value = "full", value_parser = ["full", "normal"])]
    pub synchronous: String,
    /// Run the server in this process (its own tokio runtime) instead of as a child process.
    /// Both ends of every connection are then in this process (two open files per agent),
    /// and the server's memory is not told apart from the agents'.
    #[arg(long)]
    pub in_process: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// `fairsched bench server`: runs it and prints the report (a table, or JSON).
pub fn main(args: &ServerBenchArgs) -> ExitCode {
    super::harness::print_report(server(args), args.json, |r| r.table())
}

impl ServerBenchArgs {
    /// Checks the options; the message names the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        let positive: [(&str, u64); 7] = [
            ("--agents", self.agents.into()),
            ("--slots", self.slots.into()),
            ("--operations", self.operations.into()),
            ("--pools", self.pools.into()),
            ("--duration", self.duration),
            ("--job-ms", self.job_ms),
            ("--request-timeout", self.request_timeout),
        ];
        for (name, value) in positive {
            if value == 0 {
                bail!("{name} must be greater than 0");
            }
        }
        if self.jobs_per_operation == Some(0) {
            bail!("--jobs-per-operation must be greater than 0");
        }
        if self.heartbeat_ms < 10 {
            bail!(
                "--heartbeat-ms must be at least 10 (got {})",
                self.heartbeat_ms
            );
        }
        if self.pools > self.operations {
            bail!(
                "--pools ({}) must not exceed --operations ({}): every pool gets operations",
                self.pools,
                self.operations
            );
        }
        if let Some(dir) = &self.data_dir
            && dir.exists()
        {
            bail!(
                "--data-dir {}: already exists (the benchmark needs a fresh store)",
                dir.display()
            );
        }
        Ok(())
    }

    /// Jobs per operation: as given, else enough for every slot to run a job of `job_ms`
    /// back to back through the warm-up, the window and a margin, spread over the operations.
    fn jobs_per_operation(&self) -> u32 {
        self.jobs_per_operation.unwrap_or_else(|| {
            let slots = u64::from(self.agents) * u64::from(self.slots);
            let rounds = (self.warmup + self.duration).div_ceil(self.job_ms) + 2;
            let total = slots * rounds;
            total
                .div_ceil(u64::from(self.operations))
                .min(u64::from(u32::MAX)) as u32
        })
    }
}

/// What a run measured (only the window after the warm-up).
#[derive(Debug, Serialize)]
pub struct Report {
    pub agents: u32,
    pub slots_per_agent: u32,
    pub heartbeat_ms: u64,
    pub job_ms: u64,
    pub operations: u32,
    pub pools: u32,
    pub tree: TreeShape,
    pub jobs_submitted: u64,
    pub warmup_s: f64,
    /// The window's actual length.
    pub window_s: f64,
    /// Job starts in heartbeat replies received in the window.
    pub placements: u64,
    pub placements_per_s: f64,
    /// Finished jobs reported by heartbeats the server accepted in the window.
    pub completed: u64,
    pub completed_per_s: f64,
    /// Heartbeats answered (successfully or not) in the window.
    pub heartbeats: u64,
    pub heartbeats_per_s: f64,
    /// Heartbeat latency as the agents measured it (request sent to reply read), ms.
    pub heartbeat_latency_ms: Latency,
    /// Failed requests in the window (registrations, heartbeats; HTTP errors, timeouts, error
    /// replies).
    pub errors: u64,
    /// Failed requests over the whole run, by message (at most 5 messages).
    pub error_samples: Vec<ErrorSample>,
    /// Where the server ran: `process` (a child `fairsched server`) or `in_process`
    /// (`--in-process`: on a runtime of the benchmark's process).
    pub server_mode: &'static str,
    /// The server process's PID (`process` mode); it has been stopped when the report is
    /// printed.
    pub server_pid: Option<u32>,
    /// CPU time of the server in the window: of its process (every thread: HTTP, actor, store
    /// writer, fair-share updates), or in this process of its runtime's and store writer's
    /// threads.
    pub server_cpu_s: Option<f64>,
    /// `server_cpu_s` / `window_s`: cores the server kept busy.
    pub server_cpu_cores: Option<f64>,
    /// Peak resident memory of the server process from its start to the end of the window, in
    /// bytes (`VmHWM`); `None` in this process.
    pub server_peak_rss_bytes: Option<u64>,
    /// CPU time of the benchmark's process in the window: the simulated agents and their HTTP
    /// client, and with `--in-process` the server too.
    pub process_cpu_s: Option<f64>,
    /// Peak resident memory of the benchmark's process (the simulated agents and their HTTP
    /// client, and with `--in-process` the server too) from its start to the end of the
    /// window, in bytes (`getrusage`'s `ru_maxrss`).
    pub process_peak_rss_bytes: Option<u64>,
    /// Jobs still pending at the end: 0 means the workload ran out and the figure is a floor.
    pub pending_jobs_at_end: Option<u64>,
    /// Fair-share updates the server installed in the window (from its `/metrics`).
    pub fair_share_updates: Option<u64>,
    /// Their mean duration (preparing, computing and installing; computed off the actor).
    pub fair_share_update_mean_ms: Option<f64>,
    /// The steps in the window that heartbeats waited behind on the server's actor
    /// (`fairsched_actor_pause_duration`): preparing and installing fair-share updates,
    /// taking the view's snapshot.
    pub actor_pauses: Vec<Pause>,
}

/// One kind of actor step in the window: how many, their mean and total time.
#[derive(Debug, Serialize)]
pub struct Pause {
    pub step: &'static str,
    pub count: u64,
    pub mean_ms: f64,
    pub total_ms: f64,
}

/// The actor's steps [`Report::actor_pauses`] reports.
const PAUSE_STEPS: [&str; 3] = ["fair_share_prepare", "fair_share_install", "snapshot"];

#[derive(Debug, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Report {
    fn table(&self) -> String {
        let mut out = String::new();
        let mut row = |name: &str, value: String| {
            out.push_str(&format!("{name:<24} {value}\n"));
        };
        row(
            "setup",
            format!(
                "{} agents × {} slots, heartbeat {} ms, jobs {} ms, {} operations in {} pools \
                 ({} tree, {} jobs)",
                self.agents,
                self.slots_per_agent,
                self.heartbeat_ms,
                self.job_ms,
                self.operations,
                self.pools,
                match self.tree {
                    TreeShape::Flat => "flat",
                    TreeShape::Deep => "deep",
                },
                self.jobs_submitted
            ),
        );
        row(
            "server",
            match self.server_pid {
                Some(pid) => format!("a separate process (pid {pid})"),
                None => "in this process (--in-process)".to_string(),
            },
        );
        row(
            "window",
            format!(
                "{:.1} s after {:.1} s warm-up",
                self.window_s, self.warmup_s
            ),
        );
        row(
            "placements",
            format!("{} ({:.0}/s)", self.placements, self.placements_per_s),
        );
        row(
            "completed",
            format!("{} ({:.0}/s)", self.completed, self.completed_per_s),
        );
        row(
            "heartbeats",
            format!("{} ({:.0}/s)", self.heartbeats, self.heartbeats_per_s),
        );
        let l = &self.heartbeat_latency_ms;
        row(
            "heartbeat latency",
            format!(
                "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                l.p50, l.p90, l.p99, l.max
            ),
        );
        if let Some(n) = self.fair_share_updates {
            let mean = self
                .fair_share_update_mean_ms
                .map_or(String::new(), |m| format!(", {m:.1} ms each on average"));
            row("fair-share updates", format!("{n}{mean}"));
        }
        for p in &self.actor_pauses {
            row(
                &format!("actor: {}", p.step.replace('_', " ")),
                format!(
                    "{} × {:.2} ms ({:.0} ms in all)",
                    p.count, p.mean_ms, p.total_ms
                ),
            );
        }
        row("errors", self.errors.to_string());
        for e in &self.error_samples {
            row("", format!("{} × {}", e.count, e.message));
        }
        if let (Some(cpu), Some(cores)) = (self.server_cpu_s, self.server_cpu_cores) {
            row("server CPU", format!("{cpu:.2} s ({cores:.2} cores busy)"));
        }
        let in_process = self.server_pid.is_none();
        if let Some(cpu) = self.process_cpu_s {
            let what = if in_process {
                "server and agents"
            } else {
                "the bench process: simulated agents"
            };
            row("process CPU", format!("{cpu:.2} s ({what})"));
        }
        let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        if let Some(rss) = self.server_peak_rss_bytes {
            row(
                "server peak RSS",
                format!("{:.1} MiB (the server process)", mib(rss)),
            );
        }
        if let Some(rss) = self.process_peak_rss_bytes {
            let what = if in_process {
                "the whole process: server and agents"
            } else {
                "the bench process: simulated agents"
            };
            row("peak RSS", format!("{:.1} MiB ({what})", mib(rss)));
        }
        if let Some(p) = self.pending_jobs_at_end {
            let note = if p == 0 {
                " (the workload ran out: the figures are a floor)"
            } else {
                ""
            };
            row("pending at end", format!("{p}{note}"));
        }
        out
    }
}

/// The server's configuration: one tree with `pools` pools, room for every operation to run,
/// and the default tree options.
fn server_config(
    args: &ServerBenchArgs,
    data_dir: &std::path::Path,
    token: &str,
) -> anyhow::Result<fairsched_server::ServerConfig> {
    let mut tree = PoolTreeConfig::default();
    let per_pool = args.operations.div_ceil(args.pools).max(50);
    tree.config.max_operation_count_per_pool = per_pool;
    tree.config.max_running_operation_count_per_pool = per_pool;
    tree.config.max_operation_count = tree.config.max_operation_count.max(args.operations);
    tree.config.max_running_operation_count =
        tree.config.max_running_operation_count.max(args.operations);
    tree.pools = bench_pools(
        args.tree,
        args.pools,
        per_pool,
        f64::from(args.agents) * f64::from(args.slots),
    );
    let mut config = fairsched_server::ServerConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: data_dir.to_path_buf(),
        agent_token: Some(token.to_string()),
        pool_trees: Some(PoolTrees::single("default", tree)),
        ..fairsched_server::ServerConfig::default()
    };
    config.scheduler.node_heartbeat_period_ms = args.heartbeat_ms;
    config.store.synchronous = match args.synchronous.as_str() {
        "normal" => fairsched_server::Synchronous::Normal,
        _ => fairsched_server::Synchronous::Full,
    };
    // A node counts as lost after missing many heartbeats, not one slow one.
    config.node_timeout_ms = config.node_timeout_ms.max(10 * args.heartbeat_ms);
    config.validate()?;
    Ok(config)
}

/// Runs the benchmark.
pub fn server(args: &ServerBenchArgs) -> anyhow::Result<Report> {
    args.validate()?;
    let mode = if args.in_process {
        ServerMode::InProcess
    } else {
        ServerMode::Process
    };
    raise_open_file_limit(args.agents, mode)?;
    with_server(
        mode,
        args.data_dir.as_deref(),
        "fairsched-bench-",
        |data_dir, token| server_config(args, data_dir, token),
        |server| async move { drive(args, &server).await },
    )
}

/// Submits the workload, runs the agents through warm-up and window, and gathers the report.
async fn drive(args: &ServerBenchArgs, server: &BenchServer) -> anyhow::Result<Report> {
    let timeout = Duration::from_millis(args.request_timeout);
    let client = ApiClient::with_timeout(&server.url, Some(server.token.clone()), timeout);
    let jobs_per_operation = args.jobs_per_operation();
    let resources: Resources =
        fairsched_api::parse_resources("cpu=1,user_slots=1,memory=1GiB").map_err(|e| anyhow!(e))?;
    // Submitted SUBMITTERS at a time (a large tree takes many operations).
    const SUBMITTERS: u32 = 16;
    let submitting = Instant::now();
    let mut submitters = tokio::task::JoinSet::new();
    for s in 0..SUBMITTERS.min(args.operations) {
        let client = client.clone();
        let (operations, pools) = (args.operations, args.pools);
        submitters.spawn(async move {
            for i in (s..operations).step_by(SUBMITTERS as usize) {
                let p = i % pools;
                client
                    .submit(&SubmitOperation {
                        id: Some(format!("bench-op-{i}")),
                        user: Some(format!("bench-user-{p}")),
                        pool: Some(pool_name(p)),
                        tasks: vec![TaskSubmit {
                            job_count: jobs_per_operation,
                            resources,
                            command: vec!["true".into()],
                            ..TaskSubmit::default()
                        }],
                        ..SubmitOperation::default()
                    })
                    .await
                    .with_context(|| format!("submitting operation {i}"))?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = submitters.join_next().await {
        done??;
    }
    if !args.quiet {
        eprintln!(
            "[bench] {} operations submitted in {:.1} s",
            args.operations,
            submitting.elapsed().as_secs_f64()
        );
    }
    let jobs_submitted = u64::from(jobs_per_operation) * u64::from(args.operations);

    let counters = Arc::new(Counters::default());
    let begin = Instant::now();
    let window = Window {
        start: begin + Duration::from_millis(args.warmup),
        end: begin + Duration::from_millis(args.warmup + args.duration),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let node_resources = fairsched_api::parse_resources(&format!(
        "cpu={s},user_slots={s},memory={m}GiB",
        s = args.slots,
        m = 2 * u64::from(args.slots)
    ))
    .map_err(|e| anyhow!(e))?;
    let agent = AgentSetup {
        client: client.clone(),
        period: Duration::from_millis(args.heartbeat_ms),
        job: Duration::from_millis(args.job_ms),
        resources: node_resources,
        counters: counters.clone(),
        window,
    };
    let mut tasks = Vec::with_capacity(args.agents as usize);
    for i in 0..args.agents {
        let offset = agent.period.mul_f64(f64::from(i) / f64::from(args.agents));
        tasks.push(tokio::spawn(simulate_agent(
            agent.clone(),
            i,
            begin + offset,
            stop_rx.clone(),
        )));
    }
    drop(agent);

    // Progress, CPU at the window's edges.
    let progress_every = Duration::from_secs(5);
    let mut next_progress = begin + progress_every;
    let mut last = (begin, 0u64);
    let mut cpu_start = None;
    let mut updates_start = None;
    let mut edge_start_done = false;
    loop {
        let now = Instant::now();
        if now >= window.end {
            break;
        }
        let mut wake = window.end.min(next_progress);
        if !edge_start_done {
            wake = wake.min(window.start);
        }
        tokio::time::sleep_until(wake.into()).await;
        let now = Instant::now();
        if !edge_start_done && now >= window.start {
            edge_start_done = true;
            cpu_start = Some((server.cpu_s(), process_cpu_s(), now));
            updates_start = server_histograms(&client).await;
        }
        if now >= next_progress && now < window.end {
            next_progress += progress_every;
            if !args.quiet {
                let placements = counters.all_placements.load(Ordering::Relaxed);
                let rate = (placements - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
                last = (now, placements);
                let phase = if now < window.start {
                    "warm-up"
                } else {
                    "measuring"
                };
                eprintln!(
                    "[bench] {:>5.1} s {phase}: {placements} placements ({rate:.0}/s lately), \
                     {} heartbeats, {} errors",
                    now.duration_since(begin).as_secs_f64(),
                    counters.all_heartbeats.load(Ordering::Relaxed),
                    counters.all_errors.load(Ordering::Relaxed),
                );
            }
        }
    }
    let end_cpu = (server.cpu_s(), process_cpu_s(), Instant::now());
    let process_peak_rss_bytes = process_peak_rss_bytes();
    let server_peak_rss_bytes = server.peak_rss_bytes();
    let updates_end = server_histograms(&client).await;
    let actor_pauses = match (&updates_start, &updates_end) {
        (Some(start), Some(end)) => PAUSE_STEPS
            .iter()
            .zip(start.pauses.iter().zip(&end.pauses))
            .map(|(&step, (a, b))| {
                let count = b.1.saturating_sub(a.1);
                let total_ms = (b.0 - a.0) * 1000.0;
                Pause {
                    step,
                    count,
                    mean_ms: if count > 0 {
                        total_ms / count as f64
                    } else {
                        0.0
                    },
                    total_ms,
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    let (updates_start, updates_end) = (
        updates_start.map(|h| h.update),
        updates_end.map(|h| h.update),
    );
    let (fair_share_updates, fair_share_update_mean_ms) = match (updates_start, updates_end) {
        (Some((s0, c0)), Some((s1, c1))) if c1 > c0 => {
            (Some(c1 - c0), Some((s1 - s0) / (c1 - c0) as f64 * 1000.0))
        }
        (Some(_), Some(_)) => (Some(0), None),
        _ => (None, None),
    };
    let (start_server, start_process, start_at) = cpu_start.unwrap_or((None, None, window.start));
    let window_s = end_cpu.2.duration_since(start_at).as_secs_f64();
    let _ = stop_tx.send(true);
    let mut latencies: Vec<u32> = Vec::new();
    // Agents drop their request in flight when told to stop; this bounds the wait anyway.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut unfinished = 0;
    for mut t in tasks {
        match tokio::time::timeout_at(deadline, &mut t).await {
            Ok(Ok(l)) => latencies.extend(l),
            Ok(Err(e)) => bail!("a simulated agent failed: {e}"),
            Err(_) => {
                t.abort();
                unfinished += 1;
            }
        }
    }
    if unfinished > 0 {
        eprintln!(
            "warning: {unfinished} simulated agents did not stop within 10 s; their latencies \
             are left out"
        );
    }
    let pending_jobs_at_end = client
        .list_operations(&OperationQuery {
            jobs: Some(false),
            ..OperationQuery::default()
        })
        .await
        .ok()
        .map(|ops| ops.iter().map(|o| u64::from(o.job_counts.pending)).sum());
    latencies.sort_unstable();
    let pct = |q: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1;
        f64::from(latencies[i]) / 1000.0
    };
    let heartbeat_latency_ms = Latency {
        p50: pct(0.50),
        p90: pct(0.90),
        p99: pct(0.99),
        max: latencies.last().map_or(0.0, |&l| f64::from(l) / 1000.0),
    };
    let per_s = |n: u64| {
        if window_s > 0.0 {
            n as f64 / window_s
        } else {
            0.0
        }
    };
    let placements = counters.placements.load(Ordering::Relaxed);
    let completed = counters.completed.load(Ordering::Relaxed);
    let heartbeats = counters.heartbeats.load(Ordering::Relaxed);
    let mut error_samples: Vec<ErrorSample> = counters
        .error_messages
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|(message, &count)| ErrorSample {
            message: message.clone(),
            count,
        })
        .collect();
    error_samples.sort_by_key(|e| std::cmp::Reverse(e.count));
    error_samples.truncate(5);
    let server_cpu_s = start_server.zip(end_cpu.0).map(|(a, b)| b - a);
    Ok(Report {
        agents: args.agents,
        slots_per_agent: args.slots,
        heartbeat_ms: args.heartbeat_ms,
        job_ms: args.job_ms,
        operations: args.operations,
        pools: args.pools,
        tree: args.tree,
        jobs_submitted,
        warmup_s: args.warmup as f64 / 1000.0,
        window_s,
        placements,
        placements_per_s: per_s(placements),
        completed,
        completed_per_s: per_s(completed),
        heartbeats,
        heartbeats_per_s: per_s(heartbeats),
        heartbeat_latency_ms,
        errors: counters.errors.load(Ordering::Relaxed),
        error_samples,
        server_mode: if server.pid.is_some() {
            "process"
        } else {
            "in_process"
        },
        server_pid: server.pid,
        server_cpu_s,
        server_cpu_cores: server_cpu_s.map(|c| if window_s > 0.0 { c / window_s } else { 0.0 }),
        server_peak_rss_bytes,
        process_cpu_s: start_process.zip(end_cpu.1).map(|(a, b)| b - a),
        process_peak_rss_bytes,
        pending_jobs_at_end,
        fair_share_updates,
        fair_share_update_mean_ms,
        actor_pauses,
    })
}

/// Sums (seconds) and counts of the server's histograms the report uses.
struct Histograms {
    update: (f64, u64),
    /// In [`PAUSE_STEPS`] order (a step not yet seen: zero).
    pauses: Vec<(f64, u64)>,
}

/// [`Histograms`] from the server's `/metrics`.
async fn server_histograms(client: &ApiClient) -> Option<Histograms> {
    let page = client.metrics_text().await.ok()?;
    Some(Histograms {
        update: histogram_sum_count(&page, "fairsched_fair_share_update_duration_seconds", "")?,
        pauses: PAUSE_STEPS
            .iter()
            .map(|step| {
                histogram_sum_count(
                    &page,
                    "fairsched_actor_pause_duration_seconds",
                    &format!("{{step=\"{step}\"}}"),
                )
                .unwrap_or((0.0, 0))
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::BenchCommand;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: BenchCommand,
    }

    fn args(extra: &[&str]) -> ServerBenchArgs {
        let mut argv = vec!["x", "server"];
        argv.extend_from_slice(extra);
        let BenchCommand::Server(a) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not bench server");
        };
        a
    }

    #[test]
    fn options_are_validated_with_the_option_named() {
        assert!(args(&[]).validate().is_ok());
        for (flags, message) in [
            (&["--agents", "0"][..], "--agents must be greater than 0"),
            (
                &["--duration", "0"][..],
                "--duration must be greater than 0",
            ),
            (&["--slots", "0"][..], "--slots must be greater than 0"),
            (&["--job-ms", "0"][..], "--job-ms must be greater than 0"),
            (
                &["--heartbeat-ms", "5"][..],
                "--heartbeat-ms must be at least 10",
            ),
            (
                &["--operations", "2", "--pools", "3"][..],
                "--pools (3) must not exceed --operations (2)",
            ),
            (
                &["--jobs-per-operation", "0"][..],
                "--jobs-per-operation must be greater than 0",
            ),
        ] {
            let e = args(flags).validate().unwrap_err().to_string();
            assert!(e.contains(message), "{flags:?}: {e}");
        }
    }

    #[test]
    fn default_workload_keeps_every_slot_busy() {
        // 5000 × 4 slots, (5 s + 30 s) / 1 s + 2 rounds = 37 rounds, over 50 operations.
        assert_eq!(args(&[]).jobs_per_operation(), 5000 * 4 * 37 / 50);
        assert_eq!(args(&["--jobs-per-operation", "7"]).jobs_per_operation(), 7);
    }

    /// The file a server process is started with holds the in-process configuration.
    #[test]
    fn the_server_process_reads_the_same_configuration() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = args(&[
            "--tree",
            "deep",
            "--pools",
            "300",
            "--operations",
            "3000",
            "--heartbeat-ms",
            "200",
            "--synchronous",
            "normal",
        ]);
        let config = server_config(&a, &dir.path().join("store"), "secret").unwrap();
        let path = super::super::harness::write_server_config(dir.path(), &config).unwrap();
        let read = fairsched_server::ServerConfig::from_file(&path).unwrap();
        assert_eq!(read, config);
        assert_eq!(read.scheduler.node_heartbeat_period_ms, 200);
        assert_eq!(read.agent_token.as_deref(), Some("secret"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn durations_parse() {
        let a = args(&["--duration", "2s", "--warmup", "500ms"]);
        assert_eq!((a.duration, a.warmup), (2000, 500));
    }
}
