//! `fairsched bench load`: a load test of the server's API.
//!
//! A real [`fairsched_server::Server`] (HTTP on 127.0.0.1, the SQLite store in a temporary
//! directory) runs on its own runtime (threads `fsb-server`), as for `bench server`; simulated
//! agents (the same as `bench server`'s: no processes, jobs end `--job-ms` after they start)
//! and `--clients` concurrent API clients run on a second runtime (`fsb-agents`). Each client
//! loops without pause over a fixed mix of requests: reads (the operation list as the web page
//! asks for it, one operation, the tree, the nodes, the newest events) and writes (submit a
//! one-job operation, abort the client's last one). Latencies are measured by the clients
//! (request sent to reply read) and counted per route inside the window that follows the
//! warm-up; heartbeat latency comes from the simulated agents.
//!
//! Phase `empty` runs on a new server. With `--history N`, N one-job operations are then
//! submitted and run to their end, and phase `history` runs the same load again.

use super::harness::{
    AgentSetup, Counters, ServerMode, TreeShape, Window, bench_pools, pool_name,
    raise_open_file_limit, server_cpu_s, simulate_agent,
};
use anyhow::{Context, anyhow, bail};
use clap::Args;
use fairsched_api::client::{ApiClient, ClientError};
use fairsched_api::{EventQuery, OperationQuery, SubmitOperation, TaskSubmit};
use fairsched_config::{PoolTreeConfig, PoolTrees};
use fairsched_resources::Resources;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Args)]
pub struct LoadArgs {
    /// Concurrent API clients; each sends its next request as soon as the last one is answered.
    #[arg(long, default_value_t = 200)]
    pub clients: u32,
    /// Length of each phase's measurement window (`60s`, `2m`, or milliseconds).
    #[arg(long, default_value = "60s", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub duration: u64,
    /// Warm-up of each phase before its window (clients and agents run, nothing is counted).
    #[arg(long, default_value = "2s", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub warmup: u64,
    /// After the first phase, run this many one-job operations to their end, then run the
    /// load again (phase `history`); 0: the first phase only.
    #[arg(long, default_value_t = 0)]
    pub history: u32,
    /// Simulated agents (nodes).
    #[arg(long, default_value_t = 20)]
    pub agents: u32,
    /// Jobs each agent runs at once.
    #[arg(long, default_value_t = 8)]
    pub slots: u32,
    /// Heartbeat period of every agent.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub heartbeat_ms: u64,
    /// Virtual duration of every job.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub job_ms: u64,
    /// Timeout of one request (a slower one counts as an error).
    #[arg(long, default_value = "30s", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub request_timeout: u64,
    /// The server's data directory (must not exist yet) [default: a temporary directory,
    /// removed at the end].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl LoadArgs {
    /// Checks the options; the message names the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, value) in [
            ("--clients", u64::from(self.clients)),
            ("--duration", self.duration),
            ("--agents", u64::from(self.agents)),
            ("--slots", u64::from(self.slots)),
            ("--job-ms", self.job_ms),
            ("--request-timeout", self.request_timeout),
        ] {
            if value == 0 {
                bail!("{name} must be greater than 0");
            }
        }
        if self.heartbeat_ms < 10 {
            bail!(
                "--heartbeat-ms must be at least 10 (got {})",
                self.heartbeat_ms
            );
        }
        if let Some(dir) = &self.data_dir
            && dir.exists()
        {
            bail!(
                "--data-dir {}: already exists (the load test needs a fresh store)",
                dir.display()
            );
        }
        Ok(())
    }
}

/// The routes the clients use, with their share of the requests (in percent).
const MIX: [(Route, u32); 7] = [
    (Route::List, 15),
    (Route::Show, 20),
    (Route::Tree, 15),
    (Route::Nodes, 15),
    (Route::Events, 10),
    (Route::Submit, 15),
    (Route::Abort, 10),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Route {
    List,
    Show,
    Tree,
    Nodes,
    Events,
    Submit,
    Abort,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::List => "GET /api/v1/operations",
            Route::Show => "GET /api/v1/operations/ID",
            Route::Tree => "GET /api/v1/tree",
            Route::Nodes => "GET /api/v1/nodes",
            Route::Events => "GET /api/v1/events",
            Route::Submit => "POST /api/v1/operations",
            Route::Abort => "POST /api/v1/operations/ID/abort",
        }
    }
}

/// The heartbeat route's name in the report.
const HEARTBEAT: &str = "POST /api/v1/agent/heartbeat";
/// Operations the list route asks for (as the web page asks for the newest finished ones).
const LIST_LIMIT: usize = 50;
const POOLS: u32 = 5;

/// What a run measured.
#[derive(Debug, Serialize)]
pub struct LoadReport {
    pub clients: u32,
    pub agents: u32,
    pub slots_per_agent: u32,
    pub heartbeat_ms: u64,
    pub job_ms: u64,
    pub warmup_s: f64,
    pub phases: Vec<PhaseReport>,
    /// Seconds it took to run the `--history` operations to their end (between the phases).
    pub history_build_s: Option<f64>,
}

/// One phase's window.
#[derive(Debug, Serialize)]
pub struct PhaseReport {
    /// `empty` or `history`.
    pub name: String,
    /// Operations submitted before the phase started, all finished then.
    pub finished_operations_at_start: u64,
    pub window_s: f64,
    /// Requests answered in the window (clients' and agents' heartbeats).
    pub requests: u64,
    pub requests_per_s: f64,
    pub routes: Vec<RouteReport>,
    /// Failed requests in the window (timeouts, transport errors, error replies other than an
    /// abort's "already finished").
    pub errors: u64,
    /// Failed requests of the phase, by message (at most 5).
    pub error_samples: Vec<super::harness::ErrorSample>,
    /// CPU time of the server's threads in the window, in cores busy.
    pub server_cpu_cores: Option<f64>,
}

/// One route's figures in a window.
#[derive(Debug, Serialize)]
pub struct RouteReport {
    pub route: String,
    pub count: u64,
    pub per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
    /// Aborts answered "already finished" (the operation ended before the abort came).
    pub refused: u64,
}

impl LoadReport {
    fn table(&self) -> String {
        let mut out = format!(
            "{} clients, {} agents × {} slots (heartbeat {} ms, jobs {} ms), {:.1} s warm-up\n",
            self.clients,
            self.agents,
            self.slots_per_agent,
            self.heartbeat_ms,
            self.job_ms,
            self.warmup_s
        );
        if let Some(s) = self.history_build_s {
            out.push_str(&format!("history built in {s:.1} s\n"));
        }
        for p in &self.phases {
            out.push_str(&format!(
                "\nphase {} ({} finished operations at start): {:.1} s, {} requests ({:.0}/s), \
                 {} errors{}\n",
                p.name,
                p.finished_operations_at_start,
                p.window_s,
                p.requests,
                p.requests_per_s,
                p.errors,
                p.server_cpu_cores
                    .map(|c| format!(", server {c:.2} cores busy"))
                    .unwrap_or_default()
            ));
            out.push_str(&format!(
                "{:<34} {:>8} {:>8} {:>10} {:>10} {:>10} {:>7} {:>8}\n",
                "route", "count", "per s", "p50 ms", "p99 ms", "max ms", "errors", "refused"
            ));
            for r in &p.routes {
                out.push_str(&format!(
                    "{:<34} {:>8} {:>8.1} {:>10.2} {:>10.2} {:>10.2} {:>7} {:>8}\n",
                    r.route, r.count, r.per_s, r.p50_ms, r.p99_ms, r.max_ms, r.errors, r.refused
                ));
            }
            for e in &p.error_samples {
                out.push_str(&format!("  {} × {}\n", e.count, e.message));
            }
        }
        if let [empty, history] = &self.phases[..] {
            for route in [Route::Submit.name(), HEARTBEAT] {
                let p99 =
                    |p: &PhaseReport| p.routes.iter().find(|r| r.route == route).map(|r| r.p99_ms);
                if let (Some(a), Some(b)) = (p99(empty), p99(history))
                    && a > 0.0
                {
                    out.push_str(&format!(
                        "{route} p99: {b:.2} ms with history / {a:.2} ms empty = {:.2}×\n",
                        b / a
                    ));
                }
            }
        }
        out
    }
}

pub fn main(args: &LoadArgs) -> ExitCode {
    super::harness::print_report(run(args), args.json, |r| r.table())
}

/// One tree with [`POOLS`] pools and room for every operation the test submits.
fn server_config(
    data_dir: &std::path::Path,
    token: &str,
    args: &LoadArgs,
) -> anyhow::Result<fairsched_server::ServerConfig> {
    let mut tree = PoolTreeConfig::default();
    let per_pool = 100_000;
    tree.config.max_operation_count_per_pool = per_pool;
    tree.config.max_running_operation_count_per_pool = per_pool;
    tree.config.max_operation_count = per_pool * POOLS;
    tree.config.max_running_operation_count = per_pool * POOLS;
    tree.pools = bench_pools(TreeShape::Flat, POOLS, per_pool, 0.0);
    let mut config = fairsched_server::ServerConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: data_dir.to_path_buf(),
        agent_token: Some(token.to_string()),
        pool_trees: Some(PoolTrees::single("default", tree)),
        ..fairsched_server::ServerConfig::default()
    };
    config.scheduler.node_heartbeat_period_ms = args.heartbeat_ms;
    config.node_timeout_ms = config.node_timeout_ms.max(10 * args.heartbeat_ms);
    config.validate()?;
    Ok(config)
}

/// Runs the load test.
pub fn run(args: &LoadArgs) -> anyhow::Result<LoadReport> {
    args.validate()?;
    raise_open_file_limit(args.agents + args.clients, ServerMode::InProcess)?;
    super::harness::with_server(
        ServerMode::InProcess,
        args.data_dir.as_deref(),
        "fairsched-load-",
        |data_dir, token| server_config(data_dir, token, args),
        |server| async move { drive(args, &server.url, &server.token).await },
    )
}

/// What the clients share.
#[derive(Debug)]
struct Shared {
    client: ApiClient,
    /// Ids of every operation submitted so far (the show route picks one).
    known: Mutex<Vec<String>>,
    resources: Resources,
}

impl Shared {
    fn operation(&self, id: Option<String>, n: u64) -> SubmitOperation {
        let p = (n % u64::from(POOLS)) as u32;
        SubmitOperation {
            id,
            user: Some(format!("load-user-{p}")),
            pool: Some(pool_name(p)),
            tasks: vec![TaskSubmit {
                job_count: 1,
                resources: self.resources,
                command: vec!["true".into()],
                ..TaskSubmit::default()
            }],
            ..SubmitOperation::default()
        }
    }

    fn known_len(&self) -> u64 {
        self.known.lock().expect("not poisoned").len() as u64
    }
}

async fn drive(args: &LoadArgs, url: &str, token: &str) -> anyhow::Result<LoadReport> {
    let client = ApiClient::with_timeout(
        url,
        Some(token.to_string()),
        Duration::from_millis(args.request_timeout),
    );
    let shared = Arc::new(Shared {
        client,
        known: Mutex::new(Vec::new()),
        resources: fairsched_api::parse_resources("cpu=1,user_slots=1,memory=1GiB")
            .map_err(|e| anyhow!(e))?,
    });
    let mut phases = Vec::new();
    phases.push(phase(args, &shared, "empty").await?);
    let mut history_build_s = None;
    if args.history > 0 {
        let started = Instant::now();
        make_history(args, &shared).await?;
        history_build_s = Some(started.elapsed().as_secs_f64());
        phases.push(phase(args, &shared, "history").await?);
    }
    Ok(LoadReport {
        clients: args.clients,
        agents: args.agents,
        slots_per_agent: args.slots,
        heartbeat_ms: args.heartbeat_ms,
        job_ms: args.job_ms,
        warmup_s: args.warmup as f64 / 1000.0,
        phases,
        history_build_s,
    })
}

/// Simulated agents heartbeating until `stop`; their latencies count in `window`.
fn spawn_agents(
    args: &LoadArgs,
    shared: &Shared,
    counters: Arc<Counters>,
    window: Window,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<Vec<u32>>>> {
    let resources = fairsched_api::parse_resources(&format!(
        "cpu={s},user_slots={s},memory={m}GiB",
        s = args.slots,
        m = 2 * u64::from(args.slots)
    ))
    .map_err(|e| anyhow!(e))?;
    let setup = AgentSetup {
        client: shared.client.clone(),
        period: Duration::from_millis(args.heartbeat_ms),
        job: Duration::from_millis(args.job_ms),
        resources,
        counters,
        window,
    };
    let begin = Instant::now();
    Ok((0..args.agents)
        .map(|i| {
            let offset = setup.period.mul_f64(f64::from(i) / f64::from(args.agents));
            tokio::spawn(simulate_agent(
                setup.clone(),
                i,
                begin + offset,
                stop.clone(),
            ))
        })
        .collect())
}

/// Waits until no operation is pending or running (or fails after `limit`).
async fn wait_until_idle(shared: &Shared, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let unfinished = shared
            .client
            .list_operations(&OperationQuery {
                state: Some("pending,running".into()),
                jobs: Some(false),
                limit: Some(1),
                ..OperationQuery::default()
            })
            .await
            .context("listing unfinished operations")?;
        if unfinished.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "operations were still unfinished after {} s",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Submits `--history` one-job operations (32 at a time) with agents running them, and waits
/// until all have finished.
async fn make_history(args: &LoadArgs, shared: &Arc<Shared>) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let past = Instant::now();
    let agents = spawn_agents(
        args,
        shared,
        Arc::new(Counters::default()),
        Window {
            start: past,
            end: past,
        },
        &stop_rx,
    )?;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = u64::from(args.history);
    let base = shared.known_len();
    let mut submitters = Vec::new();
    for _ in 0..32 {
        let shared = shared.clone();
        let next = next.clone();
        submitters.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    return Ok::<(), anyhow::Error>(());
                }
                let id = format!("history-{}", base + i);
                shared
                    .client
                    .submit(&shared.operation(Some(id.clone()), i))
                    .await
                    .with_context(|| format!("submitting {id}"))?;
                shared.known.lock().expect("not poisoned").push(id);
            }
        }));
    }
    let started = Instant::now();
    let mut progress = started + Duration::from_secs(5);
    for s in submitters {
        while !s.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if !args.quiet && Instant::now() >= progress {
                progress += Duration::from_secs(5);
                eprintln!(
                    "[load] history: {} of {total} operations submitted in {:.0} s",
                    next.load(std::sync::atomic::Ordering::Relaxed).min(total),
                    started.elapsed().as_secs_f64()
                );
            }
        }
        s.await??;
    }
    let r = wait_until_idle(shared, Duration::from_secs(600)).await;
    let _ = stop_tx.send(true);
    for a in agents {
        let _ = a.await;
    }
    r
}

/// One request's outcome in the window.
#[derive(Debug)]
struct Sample {
    route: Route,
    us: u32,
    outcome: Outcome,
}

#[derive(Debug)]
enum Outcome {
    Ok,
    Refused,
    Error(String),
}

/// Runs the clients and agents through a warm-up and the window; waits for the operations
/// still running at its end.
async fn phase(args: &LoadArgs, shared: &Arc<Shared>, name: &str) -> anyhow::Result<PhaseReport> {
    wait_until_idle(shared, Duration::from_secs(600)).await?;
    let finished_operations_at_start = shared.known_len();
    let begin = Instant::now();
    let window = Window {
        start: begin + Duration::from_millis(args.warmup),
        end: begin + Duration::from_millis(args.warmup + args.duration),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let counters = Arc::new(Counters::default());
    let agents = spawn_agents(args, shared, counters.clone(), window, &stop_rx)?;
    let clients: Vec<_> = (0..args.clients)
        .map(|i| tokio::spawn(client_loop(shared.clone(), i, window)))
        .collect();
    if !args.quiet {
        eprintln!(
            "[load] phase {name}: {} clients, {} finished operations, {:.0} s",
            args.clients,
            finished_operations_at_start,
            (args.warmup + args.duration) as f64 / 1000.0
        );
    }
    tokio::time::sleep_until(window.start.into()).await;
    let cpu_start = server_cpu_s();
    tokio::time::sleep_until(window.end.into()).await;
    let cpu_end = server_cpu_s();
    let ended = Instant::now();
    let mut samples = Vec::new();
    for c in clients {
        samples.extend(c.await.map_err(|e| anyhow!("a client failed: {e}"))?);
    }
    let _ = stop_tx.send(true);
    let mut heartbeats = Vec::new();
    for a in agents {
        heartbeats.extend(a.await.map_err(|e| anyhow!("an agent failed: {e}"))?);
    }
    let window_s = ended.duration_since(window.start).as_secs_f64();
    let mut by_route: BTreeMap<String, (Vec<u32>, u64, u64)> = BTreeMap::new();
    let mut messages: BTreeMap<String, u64> = BTreeMap::new();
    for s in &samples {
        let entry = by_route.entry(s.route.name().to_string()).or_default();
        entry.0.push(s.us);
        match &s.outcome {
            Outcome::Ok => {}
            Outcome::Refused => entry.2 += 1,
            Outcome::Error(m) => {
                entry.1 += 1;
                *messages
                    .entry(format!("{}: {m}", s.route.name()))
                    .or_default() += 1;
            }
        }
    }
    let hb_errors = counters.errors.load(std::sync::atomic::Ordering::Relaxed);
    for (m, n) in counters.error_messages.lock().expect("not poisoned").iter() {
        *messages.entry(m.clone()).or_default() += n;
    }
    by_route.insert(HEARTBEAT.to_string(), (heartbeats, hb_errors, 0));
    let mut routes = Vec::new();
    let mut requests = 0;
    let mut errors = 0;
    for (route, (mut us, e, refused)) in by_route {
        us.sort_unstable();
        let pct = |q: f64| -> f64 {
            if us.is_empty() {
                return 0.0;
            }
            let i = ((us.len() as f64 * q).ceil() as usize).clamp(1, us.len()) - 1;
            f64::from(us[i]) / 1000.0
        };
        requests += us.len() as u64;
        errors += e;
        routes.push(RouteReport {
            route,
            count: us.len() as u64,
            per_s: us.len() as f64 / window_s,
            p50_ms: pct(0.5),
            p99_ms: pct(0.99),
            max_ms: us.last().map_or(0.0, |&u| f64::from(u) / 1000.0),
            errors: e,
            refused,
        });
    }
    let mut error_samples: Vec<super::harness::ErrorSample> = messages
        .into_iter()
        .map(|(message, count)| super::harness::ErrorSample { message, count })
        .collect();
    error_samples.sort_by_key(|e| std::cmp::Reverse(e.count));
    error_samples.truncate(5);
    Ok(PhaseReport {
        name: name.to_string(),
        finished_operations_at_start,
        window_s,
        requests,
        requests_per_s: requests as f64 / window_s,
        routes,
        errors,
        error_samples,
        server_cpu_cores: cpu_start.zip(cpu_end).map(|(a, b)| (b - a) / window_s),
    })
}

/// One client: requests of the mix back to back until the window ends.
async fn client_loop(shared: Arc<Shared>, index: u32, window: Window) -> Vec<Sample> {
    let mut rng = u64::from(index).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d;
    let mut own: Vec<String> = Vec::new();
    let mut samples = Vec::new();
    let mut n = u64::from(index);
    let client = &shared.client;
    while Instant::now() < window.end {
        let pick = (super::harness::next_jitter(&mut rng) * 100.0) as u32;
        let mut acc = 0;
        let mut route = Route::Submit;
        for (r, share) in MIX {
            acc += share;
            if pick < acc {
                route = r;
                break;
            }
        }
        let known = shared.known_len();
        if (route == Route::Show && known == 0) || (route == Route::Abort && own.is_empty()) {
            route = Route::Submit;
        }
        let sent = Instant::now();
        let result: Result<(), ClientError> = match route {
            Route::List => client
                .list_operations(&OperationQuery {
                    jobs: Some(false),
                    limit: Some(LIST_LIMIT),
                    ..OperationQuery::default()
                })
                .await
                .map(drop),
            Route::Show => {
                let at = (super::harness::next_jitter(&mut rng) * known as f64) as usize;
                let id = shared.known.lock().expect("not poisoned").get(at).cloned();
                match id {
                    Some(id) => client.get_operation(&id).await.map(drop),
                    None => Ok(()),
                }
            }
            Route::Tree => client.tree(None).await.map(drop),
            Route::Nodes => client.list_nodes().await.map(drop),
            Route::Events => client
                .events(&EventQuery {
                    limit: Some(50),
                    ..EventQuery::default()
                })
                .await
                .map(drop),
            Route::Submit => {
                n += u64::from(POOLS) + 1;
                match client.submit(&shared.operation(None, n)).await {
                    Ok(reply) => {
                        shared
                            .known
                            .lock()
                            .expect("not poisoned")
                            .push(reply.id.clone());
                        own.push(reply.id);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            Route::Abort => {
                let id = own.pop().expect("checked above");
                client.abort_operation(&id).await.map(drop)
            }
        };
        let got = Instant::now();
        if !window.contains(sent) {
            continue;
        }
        let outcome = match result {
            Ok(()) => Outcome::Ok,
            Err(ClientError::Api(e)) if route == Route::Abort && e.message.contains("already") => {
                Outcome::Refused
            }
            Err(e) => Outcome::Error(e.to_string()),
        };
        samples.push(Sample {
            route,
            us: got
                .duration_since(sent)
                .as_micros()
                .min(u128::from(u32::MAX)) as u32,
            outcome,
        });
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_adds_up_to_100() {
        assert_eq!(MIX.iter().map(|(_, s)| s).sum::<u32>(), 100);
    }
}
