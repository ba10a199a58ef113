//! `fairsched bench trivial-jobs`: the trivial-job workload of the comparison with Slurm
//! (issue 20) on a cluster of real processes.
//!
//! The command starts a real `fairsched server` and real `fairsched agent`s as separate
//! processes of this binary ([`std::env::current_exe`]), as an operator runs them (README,
//! "Operators"): the server reads `server.toml` and `pools.toml` written to a temporary
//! directory, the agents get the server's `agent_token` in `FAIRSCHED_AGENT_TOKEN`. Every job
//! runs the real command `true` with what `fairsched op run -- true` asks for (1 cpu, 256 MiB).
//! It then drives four phases through the HTTP API ([`ApiClient`]), in this order:
//!
//! 1. `idle_latency`: on an idle cluster, one one-job operation at a time; the time from
//!    sending the submission until the `allocation_started` event of its job arrives on the
//!    live event stream, and until its `operation_state` event says it completed. The next
//!    submission waits for that end and a pseudo-random 0–2 heartbeat periods more, so that
//!    submissions fall at every point of the agents' heartbeat cycles.
//! 2. `one_after_another`: N one-job operations, each submitted when the previous
//!    submission was answered (not when its job ended); submissions per second, and jobs
//!    completed per second counted from the first submission until the last operation ended.
//! 3. `one_operation`: one operation of N jobs; jobs per second from its submission until it
//!    ended.
//! 4. `with_backlog`: first M operations (default 1,000) into the pool `held`, whose
//!    `max_running_operation_count` is 0, so that they stay pending (queued for a running
//!    slot that never comes, as Slurm's `sbatch --hold` jobs wait); then phase 2 again.
//!
//! An operation has ended when the API no longer lists it as pending or running (polled
//! every [`POLL`]); a phase counts the jobs that completed and fails if any job failed. CPU
//! time of the server and of the agents (with the jobs they ran) comes from `/proc/PID/stat`.
//! Every process is stopped by its PID at the end, also when the run fails.

use super::harness::{Proc, child_pids, log_tail, pid_cpu_s, start_server_process};
use anyhow::{Context, anyhow, bail};
use clap::Args;
use fairsched_api::client::ApiClient;
use fairsched_api::{
    EventQuery, EventView, OperationQuery, OperationState, OperationView, SubmitOperation,
    TaskSubmit,
};
use serde::Serialize;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// How often the API is asked whether operations are still unfinished.
const POLL: Duration = Duration::from_millis(20);
/// The pool the measured operations run in.
const POOL: &str = "bench";
/// The pool of the backlog: its running-operation limit is 0.
const HELD_POOL: &str = "held";
/// What every job runs.
const COMMAND: &str = "true";
/// What every job asks for: `fairsched op run`'s defaults.
const JOB_RESOURCES: &str = "cpu=1,memory=256MiB";

#[derive(Clone, Debug, Args)]
pub struct TrivialJobsArgs {
    /// Agents (nodes) to start, each a `fairsched agent` process on 127.0.0.1.
    #[arg(long, default_value_t = 8)]
    pub agents: u32,
    /// Cpus each agent offers (`--resources cpu=N,memory=2N GiB`); a job takes 1 cpu, so
    /// agents × cpus is the cluster's slot count.
    #[arg(long, default_value_t = 8)]
    pub cpus: u32,
    /// Submissions of the idle-latency phase.
    #[arg(long, default_value_t = 50)]
    pub latency_samples: u32,
    /// One-job operations submitted one after another (phase `one_after_another`, and again
    /// after the backlog in `with_backlog`).
    #[arg(long, default_value_t = 2000)]
    pub operations: u32,
    /// Jobs of the one operation of phase `one_operation`.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: u32,
    /// Operations waiting in the held pool during phase `with_backlog`.
    #[arg(long, default_value_t = 1000)]
    pub backlog: u32,
    /// The phases to run, comma-separated, in the order given: idle_latency,
    /// one_after_another, one_operation, with_backlog.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "idle_latency,one_after_another,one_operation,with_backlog"
    )]
    pub phases: Vec<Phase>,
    /// Longest wait for one phase's operations to end (`10m`, `90s`, or milliseconds); past
    /// it the run fails.
    #[arg(long, default_value = "10m", value_parser = crate::args::parse_duration_ms, value_name = "DURATION")]
    pub timeout: u64,
    /// Keep the run's directory (configuration files, logs, the server's store, the agents'
    /// job directories) and print where it is.
    #[arg(long)]
    pub keep_dir: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// A phase of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Phase {
    /// One one-job operation at a time on an idle cluster: submit-to-start latency.
    IdleLatency,
    /// One-job operations submitted one after another.
    OneAfterAnother,
    /// One operation of N jobs.
    OneOperation,
    /// One-job operations submitted one after another while M operations wait.
    WithBacklog,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::IdleLatency => "idle_latency",
            Phase::OneAfterAnother => "one_after_another",
            Phase::OneOperation => "one_operation",
            Phase::WithBacklog => "with_backlog",
        }
    }
}

impl TrivialJobsArgs {
    /// Checks the options; the message names the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, value) in [
            ("--agents", u64::from(self.agents)),
            ("--cpus", u64::from(self.cpus)),
            ("--latency-samples", u64::from(self.latency_samples)),
            ("--operations", u64::from(self.operations)),
            ("--jobs", u64::from(self.jobs)),
            ("--backlog", u64::from(self.backlog)),
            ("--timeout", self.timeout),
        ] {
            if value == 0 {
                bail!("{name} must be greater than 0");
            }
        }
        if self.phases.is_empty() {
            bail!("--phases must name at least one phase");
        }
        Ok(())
    }
}

/// What a run measured.
#[derive(Debug, Serialize)]
pub struct TrivialJobsReport {
    /// The `fairsched` binary that ran the server and the agents.
    pub binary: String,
    /// A debug build: its timings say little.
    pub debug_build: bool,
    pub agents: u32,
    pub cpus_per_agent: u32,
    pub slots: u32,
    pub settings: Settings,
    pub phases: Vec<PhaseReport>,
    /// The run's directory, when kept (`--keep-dir`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_dir: Option<String>,
}

/// The settings the server and the agents ran with (read back from the server's file).
#[derive(Debug, Serialize)]
pub struct Settings {
    pub node_heartbeat_period_ms: u64,
    pub fair_share_update_period_ms: u64,
    pub node_timeout_ms: u64,
    /// The store's `synchronous` (`full`: every commit flushed to the disk).
    pub store_synchronous: String,
    /// The agents' `FAIRSCHED_MEMORY_ENFORCEMENT`.
    pub memory_enforcement: String,
    pub job_command: Vec<String>,
    pub job_resources: String,
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Serialize)]
pub struct Millis {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// The mean: what a rate of requests one after another is the inverse of.
    pub mean: f64,
}

impl Millis {
    fn of(mut samples: Vec<f64>) -> Option<Millis> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i]
        };
        Some(Millis {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: samples[samples.len() - 1],
            mean: samples.iter().sum::<f64>() / samples.len() as f64,
        })
    }
}

/// One phase's figures.
#[derive(Debug, Serialize)]
pub struct PhaseReport {
    pub name: String,
    /// Operations submitted in the measured part.
    pub operations: u64,
    /// Jobs those operations had.
    pub jobs: u64,
    /// Jobs that completed (exit status 0); the phase fails unless all did.
    pub jobs_completed: u64,
    /// Seconds from the first submission until the last one was answered.
    pub submit_s: f64,
    /// Operations submitted per second (`operations / submit_s`).
    pub submissions_per_s: f64,
    /// Seconds from the first submission until every operation had ended.
    pub completed_s: f64,
    /// Jobs completed per second (`jobs_completed / completed_s`).
    pub jobs_per_s: f64,
    /// Time from sending a submission until its reply.
    pub submit_reply_ms: Option<Millis>,
    /// Idle latency: time from sending the submission until the client got the job's
    /// `allocation_started` event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_to_start_ms: Option<Millis>,
    /// Idle latency: the server's own record, the job's `started_at` minus the operation's
    /// `submitted_at` (both Unix milliseconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_submit_to_start_ms: Option<Millis>,
    /// Idle latency: time from sending the submission until the client got the event of
    /// the operation's completion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_to_completed_ms: Option<Millis>,
    /// With backlog: operations waiting in the held pool during the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_operations: Option<u64>,
    /// With backlog: seconds it took to submit them (not part of the figures above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_submit_s: Option<f64>,
    /// Fair-share updates the server installed in the phase (the count of its
    /// `fairsched_fair_share_update_duration_seconds`); one is due every
    /// `fair_share_update_period_ms`.
    pub fair_share_updates: Option<u64>,
    /// Store commits in the phase (`fairsched_store_commit_duration_seconds`): every accepted
    /// change is committed before its reply.
    pub store_commits: Option<u64>,
    /// Their mean duration.
    pub store_commit_mean_ms: Option<f64>,
    /// CPU seconds the server process used in the phase.
    pub server_cpu_s: Option<f64>,
    /// CPU seconds the agent processes themselves used in the phase.
    pub agents_cpu_s: Option<f64>,
    /// CPU seconds of the processes the agents started (each job's command) that the agents
    /// reaped in the phase.
    pub jobs_cpu_s: Option<f64>,
}

impl PhaseReport {
    /// The phase's rates: `submissions` in `submit_s` seconds, the completed jobs in
    /// `completed_s` (both set here).
    fn rates(&mut self, submissions: u32, submit_s: f64, completed_s: f64) {
        self.submit_s = submit_s;
        self.submissions_per_s = f64::from(submissions) / submit_s;
        self.completed_s = completed_s;
        self.jobs_per_s = self.jobs_completed as f64 / completed_s;
    }

    fn new(name: Phase) -> PhaseReport {
        PhaseReport {
            name: name.name().to_string(),
            operations: 0,
            jobs: 0,
            jobs_completed: 0,
            submit_s: 0.0,
            submissions_per_s: 0.0,
            completed_s: 0.0,
            jobs_per_s: 0.0,
            submit_reply_ms: None,
            submit_to_start_ms: None,
            server_submit_to_start_ms: None,
            submit_to_completed_ms: None,
            backlog_operations: None,
            backlog_submit_s: None,
            fair_share_updates: None,
            store_commits: None,
            store_commit_mean_ms: None,
            server_cpu_s: None,
            agents_cpu_s: None,
            jobs_cpu_s: None,
        }
    }
}

impl TrivialJobsReport {
    fn table(&self) -> String {
        let s = &self.settings;
        let mut out = format!(
            "fairsched: {} agents × {} cpus = {} slots on 127.0.0.1, separate processes of {}\n\
             server: node_heartbeat_period_ms {}, fair_share_update_period_ms {}, \
             node_timeout_ms {}, store synchronous = {}; agents: memory enforcement {}\n\
             every job: {:?} with {}\n",
            self.agents,
            self.cpus_per_agent,
            self.slots,
            self.binary,
            s.node_heartbeat_period_ms,
            s.fair_share_update_period_ms,
            s.node_timeout_ms,
            s.store_synchronous,
            s.memory_enforcement,
            s.job_command,
            s.job_resources,
        );
        if self.debug_build {
            out.push_str(
                "warning: a debug build; for figures worth recording build with --release\n",
            );
        }
        out.push_str(&format!(
            "\n{:<18} {:>6} {:>7} {:>9} {:>10} {:>10} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8}\n",
            "phase",
            "ops",
            "jobs",
            "submit s",
            "submits/s",
            "done s",
            "jobs/s",
            "reply p50",
            "reply p99",
            "srv cpu",
            "agt cpu",
            "job cpu"
        ));
        let ms = |m: &Option<Millis>, f: fn(&Millis) -> f64| {
            m.as_ref()
                .map_or("-".to_string(), |m| format!("{:.1}", f(m)))
        };
        let cpu = |c: Option<f64>| c.map_or("-".to_string(), |c| format!("{c:.1}"));
        for p in &self.phases {
            // The idle phase's submissions are paced: its rates measure the pauses.
            let paced = p.submit_to_start_ms.is_some();
            let rate = |r: f64, digits: usize| {
                if paced {
                    "-".to_string()
                } else {
                    format!("{r:.digits$}")
                }
            };
            out.push_str(&format!(
                "{:<18} {:>6} {:>7} {:>9} {:>10} {:>10.2} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8}\n",
                p.name,
                p.operations,
                p.jobs_completed,
                rate(p.submit_s, 2),
                rate(p.submissions_per_s, 1),
                p.completed_s,
                rate(p.jobs_per_s, 1),
                ms(&p.submit_reply_ms, |m| m.p50),
                ms(&p.submit_reply_ms, |m| m.p99),
                cpu(p.server_cpu_s),
                cpu(p.agents_cpu_s),
                cpu(p.jobs_cpu_s),
            ));
        }
        out.push('\n');
        for p in &self.phases {
            if let (Some(updates), Some(commits)) = (p.fair_share_updates, p.store_commits) {
                let period = s.fair_share_update_period_ms.max(1) as f64 / 1e3;
                out.push_str(&format!(
                    "{}: the server installed {updates} fair-share updates in {:.1} s ({:.0} \
                     periods of {} ms); {commits} store commits{}\n",
                    p.name,
                    p.completed_s,
                    p.completed_s / period,
                    s.fair_share_update_period_ms,
                    p.store_commit_mean_ms
                        .map(|m| format!(", {m:.1} ms each on average"))
                        .unwrap_or_default()
                ));
            }
            if let Some(r) = &p.submit_reply_ms
                && p.operations > 1
            {
                out.push_str(&format!(
                    "{}: submission replies mean {:.2} ms, p50 {:.2}, p90 {:.2}, p99 {:.2}, \
                     max {:.1} ms\n",
                    p.name, r.mean, r.p50, r.p90, r.p99, r.max
                ));
            }
        }
        for p in &self.phases {
            if let Some(start) = &p.submit_to_start_ms {
                out.push_str(&format!(
                    "\n{}: submit to start p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
                     ({} submissions; the allocation_started event as the client got it)\n",
                    p.name, start.p50, start.p99, start.max, p.operations
                ));
                if let Some(server) = &p.server_submit_to_start_ms {
                    out.push_str(&format!(
                        "  server's record (job started_at - submitted_at): p50 {:.0} ms, \
                         p99 {:.0} ms, max {:.0} ms\n",
                        server.p50, server.p99, server.max
                    ));
                }
                if let Some(done) = &p.submit_to_completed_ms {
                    out.push_str(&format!(
                        "  submit to completed: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n",
                        done.p50, done.p99, done.max
                    ));
                }
            }
            if let (Some(n), Some(s)) = (p.backlog_operations, p.backlog_submit_s) {
                out.push_str(&format!(
                    "\n{}: {n} operations waited in pool {HELD_POOL:?} \
                     (max_running_operation_count 0), submitted in {s:.1} s beforehand\n",
                    p.name
                ));
            }
        }
        out.push_str(
            "\nsubmit s: first submission to last reply; done s: first submission until every \
             operation ended; jobs/s: jobs completed / done s; cpu: CPU seconds in the phase of the \
             server, the agents, and the jobs' processes (with their keepers and spawners)\n",
        );
        if let Some(dir) = &self.kept_dir {
            out.push_str(&format!("files kept in {dir}\n"));
        }
        out
    }
}

pub fn main(args: &TrivialJobsArgs) -> ExitCode {
    super::harness::print_report(run(args), args.json, |r| r.table())
}

/// The server and the agents; stopped (agents first) when dropped.
#[derive(Debug)]
struct Cluster {
    server: Option<Proc>,
    agents: Vec<Proc>,
    url: String,
}

impl Cluster {
    /// Stops every process by its PID: the agents (which stop their jobs), then the server.
    /// Warnings for processes that had to be killed.
    fn stop(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        for a in &mut self.agents {
            warnings.extend(a.stop(Duration::from_secs(10)));
        }
        self.agents.clear();
        if let Some(mut s) = self.server.take() {
            warnings.extend(s.stop(Duration::from_secs(10)));
        }
        warnings
    }

    /// CPU seconds so far of the server, of the agents, and of the jobs' processes: each
    /// agent's job spawner (its live child) with the keepers and jobs it reaped, and the
    /// agents' reaped children.
    fn cpu(&self) -> Cpu {
        let server = self
            .server
            .as_ref()
            .and_then(|s| pid_cpu_s(s.pid()))
            .map(|(own, _)| own);
        let agents: Option<Vec<(f64, f64)>> = self
            .agents
            .iter()
            .map(|a| {
                let (own, reaped) = pid_cpu_s(a.pid())?;
                let spawners: f64 = child_pids(a.pid())
                    .into_iter()
                    .filter_map(pid_cpu_s)
                    .map(|(own, reaped)| own + reaped)
                    .sum();
                Some((own, reaped + spawners))
            })
            .collect();
        Cpu {
            server,
            agents: agents.as_ref().map(|a| a.iter().map(|c| c.0).sum()),
            jobs: agents.as_ref().map(|a| a.iter().map(|c| c.1).sum()),
        }
    }

    /// An error when a process of the cluster has ended, naming it and its log.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        let procs = self.server.iter_mut().chain(self.agents.iter_mut());
        for p in procs {
            if let Some(status) = p.exited() {
                bail!(
                    "{} (pid {}) exited during the run ({status}); {}",
                    p.name,
                    p.child.id(),
                    log_tail(&p.log)
                );
            }
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for w in self.stop() {
            eprintln!("warning: {w}");
        }
    }
}

/// The server's counters a phase reports ([`Driver::server_counters`]).
#[derive(Clone, Copy, Debug)]
struct ServerCounters {
    updates: u64,
    commits: u64,
    commit_s: f64,
}

impl ServerCounters {
    /// What happened from `before` to `after`: into the report.
    fn until(before: Option<Self>, after: Option<Self>, report: &mut PhaseReport) {
        let Some((a, b)) = before.zip(after) else {
            return;
        };
        let commits = b.commits.saturating_sub(a.commits);
        report.fair_share_updates = Some(b.updates.saturating_sub(a.updates));
        report.store_commits = Some(commits);
        report.store_commit_mean_ms =
            (commits > 0).then(|| (b.commit_s - a.commit_s) * 1e3 / commits as f64);
    }
}

/// CPU seconds of some processes ([`Cluster::cpu`]).
#[derive(Clone, Copy, Debug)]
struct Cpu {
    server: Option<f64>,
    agents: Option<f64>,
    jobs: Option<f64>,
}

impl Cpu {
    /// What was used from `self` to `after`: into the report.
    fn until(self, after: Cpu, report: &mut PhaseReport) {
        let delta = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| b - a);
        report.server_cpu_s = delta(self.server, after.server);
        report.agents_cpu_s = delta(self.agents, after.agents);
        report.jobs_cpu_s = delta(self.jobs, after.jobs);
    }
}

/// The run's files: the server's and the agents' configuration and logs.
struct Files {
    dir: PathBuf,
    server_config: PathBuf,
    token: String,
}

/// Writes `server.toml` and `pools.toml` as an operator would (README, "Operators"): the
/// scheduler's settings are left at their defaults; the pools are `bench`, where the measured
/// operations run, with room for all of them, and `held`, which runs none.
fn write_files(dir: &Path, args: &TrivialJobsArgs) -> anyhow::Result<Files> {
    let token = fairsched_server::auth::random_secret()
        .map_err(|e| anyhow!("cannot generate the agents' token: {e}"))?;
    let most = u64::from(args.operations.max(args.latency_samples)) + 16;
    let total = most + u64::from(args.backlog);
    let pools = format!(
        "# Pool trees of `fairsched bench trivial-jobs` (the server's pool_trees_file).\n\
         [pool_trees.default.config]\n\
         max_operation_count = {total}\n\
         max_running_operation_count = {most}\n\
         \n\
         # The measured operations: every one may run at once.\n\
         [pool_trees.default.pools.{POOL}]\n\
         max_operation_count = {most}\n\
         max_running_operation_count = {most}\n\
         \n\
         # The backlog of phase with_backlog: accepted, never running (the operations wait\n\
         # in the pool's queue for a running slot).\n\
         [pool_trees.default.pools.{HELD_POOL}]\n\
         max_operation_count = {backlog}\n\
         max_running_operation_count = 0\n",
        backlog = args.backlog.max(1),
    );
    let pools_path = dir.join("pools.toml");
    let server_config = dir.join("server.toml");
    let server = format!(
        "# `fairsched bench trivial-jobs`: the server's file (fairsched server --config).\n\
         # [scheduler] and [store] are left at their defaults.\n\
         listen = \"127.0.0.1:0\"\n\
         data_dir = {data:?}\n\
         agent_token = {token:?}\n\
         pool_trees_file = {pools:?}\n",
        data = dir.join("server"),
        pools = pools_path,
    );
    std::fs::write(&pools_path, pools)
        .with_context(|| format!("cannot write {}", pools_path.display()))?;
    std::fs::write(&server_config, server)
        .with_context(|| format!("cannot write {}", server_config.display()))?;
    // The agents' token file, as the README's agent.env (mode 0600).
    let env_path = dir.join("agent.env");
    let mut env = std::fs::File::create(&env_path)
        .with_context(|| format!("cannot write {}", env_path.display()))?;
    writeln!(env, "FAIRSCHED_AGENT_TOKEN={token}")?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&env_path, std::fs::Permissions::from_mode(0o600));
        let _ = std::fs::set_permissions(&server_config, std::fs::Permissions::from_mode(0o600));
    }
    Ok(Files {
        dir: dir.to_path_buf(),
        server_config,
        token,
    })
}

/// Starts agent `i` (`bench-node-i`) with its own work directory.
fn start_agent(exe: &Path, files: &Files, url: &str, i: u32, cpus: u32) -> anyhow::Result<Proc> {
    let node = format!("bench-node-{i}");
    let log = files.dir.join(format!("{node}.log"));
    let child = Command::new(exe)
        .args(["agent", "--server", url, "--node-id", &node, "--resources"])
        .arg(format!("cpu={cpus},memory={}GiB", 2 * cpus))
        .arg("--work-dir")
        .arg(files.dir.join(&node))
        .env("FAIRSCHED_AGENT_TOKEN", &files.token)
        .env("FAIRSCHED_LOG", "warn")
        // Every agent of this run shares this process's cgroup: none may take it over.
        .env(fairsched_agent::memory::MEMORY_ENFORCEMENT_ENV, "poll")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| {
            format!(
                "cannot start `{} agent` for {node}: is this fairsched binary still there \
                 and executable?",
                exe.display()
            )
        })?;
    Ok(Proc {
        name: format!("fairsched agent {node}"),
        child,
        log,
    })
}

/// Runs the workload.
pub fn run(args: &TrivialJobsArgs) -> anyhow::Result<TrivialJobsReport> {
    args.validate()?;
    let exe = std::env::current_exe()
        .context("cannot find this fairsched binary's path to start the server and agents")?;
    let temp = tempfile::Builder::new()
        .prefix("fairsched-trivial-jobs-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let files = write_files(temp.path(), args)?;
    let effective = fairsched_server::ServerConfig::from_file(&files.server_config)?;
    let (server, url) = start_server_process(&exe, &files.dir, &files.server_config)?;
    let mut cluster = Cluster {
        server: Some(server),
        agents: Vec::new(),
        url,
    };
    for i in 0..args.agents {
        cluster
            .agents
            .push(start_agent(&exe, &files, &cluster.url, i, args.cpus)?);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("fsb-client")
        .build()
        .context("cannot start the client's runtime")?;
    let heartbeat = Duration::from_millis(effective.scheduler.node_heartbeat_period_ms);
    let result = rt.block_on(drive(args, &mut cluster, heartbeat));
    let warnings = cluster.stop();
    rt.shutdown_timeout(Duration::from_secs(2));
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let kept_dir = if args.keep_dir || result.is_err() {
        let kept = temp.keep();
        if result.is_err() {
            eprintln!(
                "the run's files (logs, store) are kept in {}",
                kept.display()
            );
        }
        Some(kept.display().to_string())
    } else {
        None
    };
    let phases = result?;
    Ok(TrivialJobsReport {
        binary: exe.display().to_string(),
        debug_build: cfg!(debug_assertions),
        agents: args.agents,
        cpus_per_agent: args.cpus,
        slots: args.agents * args.cpus,
        settings: Settings {
            node_heartbeat_period_ms: effective.scheduler.node_heartbeat_period_ms,
            fair_share_update_period_ms: effective.scheduler.fair_share_update_period_ms,
            node_timeout_ms: effective.node_timeout_ms,
            store_synchronous: format!("{:?}", effective.store.synchronous).to_lowercase(),
            memory_enforcement: "poll".into(),
            job_command: vec![COMMAND.into()],
            job_resources: JOB_RESOURCES.into(),
        },
        phases,
        kept_dir: kept_dir.filter(|_| args.keep_dir),
    })
}

/// What the phases share.
struct Driver<'a> {
    args: &'a TrivialJobsArgs,
    client: ApiClient,
    job: fairsched_resources::Resources,
    /// Numbers operation ids across phases.
    next_id: u64,
    heartbeat: Duration,
}

impl Driver<'_> {
    fn progress(&self, text: &str) {
        if !self.args.quiet {
            eprintln!("[trivial-jobs] {text}");
        }
    }

    fn operation(&mut self, pool: &str, jobs: u32) -> SubmitOperation {
        self.next_id += 1;
        SubmitOperation {
            id: Some(format!("tj-{}", self.next_id)),
            user: Some("bench".into()),
            pool: Some(pool.into()),
            tasks: vec![TaskSubmit {
                job_count: jobs,
                resources: self.job,
                command: vec![COMMAND.into()],
                ..TaskSubmit::default()
            }],
            ..SubmitOperation::default()
        }
    }

    /// The server's fair-share update and commit counters, from its `/metrics` (`None` when
    /// the page cannot be read: the report leaves them out).
    async fn server_counters(&self) -> Option<ServerCounters> {
        let page = self.client.metrics_text().await.ok()?;
        let count = |name| super::harness::histogram_sum_count(&page, name, "");
        let (_, updates) = count("fairsched_fair_share_update_duration_seconds")?;
        let (commit_s, commits) = count("fairsched_store_commit_duration_seconds")?;
        Some(ServerCounters {
            updates,
            commits,
            commit_s,
        })
    }

    /// Unfinished (pending or running) operations of `pool`, at most `limit`.
    async fn unfinished(&self, pool: &str, limit: usize) -> anyhow::Result<Vec<OperationView>> {
        self.client
            .list_operations(&OperationQuery {
                state: Some("pending,running".into()),
                pool: Some(pool.into()),
                jobs: Some(false),
                limit: Some(limit),
                ..OperationQuery::default()
            })
            .await
            .with_context(|| format!("listing the unfinished operations of pool {pool:?}"))
    }

    /// Waits until pool `bench` has no unfinished operation; the instant that was seen.
    async fn wait_until_done(
        &self,
        cluster: &mut Cluster,
        phase: &str,
        started: Instant,
    ) -> anyhow::Result<Instant> {
        let deadline = started + Duration::from_millis(self.args.timeout);
        let mut next_progress = Instant::now() + Duration::from_secs(5);
        loop {
            let left = self.unfinished(POOL, 1).await?;
            if left.is_empty() {
                return Ok(Instant::now());
            }
            cluster.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "{phase}: operations of pool {POOL:?} were still unfinished {} s after the \
                     phase started (--timeout); the oldest: {} ({}, jobs: {} pending, {} \
                     running, {} completed)",
                    self.args.timeout / 1000,
                    left[0].id,
                    left[0].state,
                    left[0].job_counts.pending,
                    left[0].job_counts.running,
                    left[0].job_counts.completed,
                );
            }
            if Instant::now() >= next_progress {
                next_progress += Duration::from_secs(5);
                self.progress(&format!(
                    "{phase}: waiting for the jobs to end, {:.0} s",
                    started.elapsed().as_secs_f64()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Counts the jobs of `ids` (operations of pool `bench`) that completed; an error naming
    /// an operation that did not complete.
    async fn completed_jobs(&self, phase: &str, ids: &[String]) -> anyhow::Result<u64> {
        let wanted: std::collections::HashSet<&String> = ids.iter().collect();
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        let mut completed = 0u64;
        let mut after: Option<String> = None;
        loop {
            let page = self
                .client
                .list_operations(&OperationQuery {
                    pool: Some(POOL.into()),
                    jobs: Some(false),
                    limit: Some(10_000),
                    after: Some(after.clone().unwrap_or_default()),
                    ..OperationQuery::default()
                })
                .await
                .context("listing the finished operations")?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for op in &page {
                seen.insert(op.id.clone());
                if !wanted.contains(&op.id) {
                    continue;
                }
                if op.state != OperationState::Completed {
                    bail!(
                        "{phase}: operation {} ended {} ({}); its jobs: {} completed, {} \
                         failed, {} aborted",
                        op.id,
                        op.state,
                        op.reason.as_deref().unwrap_or("no reason given"),
                        op.job_counts.completed,
                        op.job_counts.failed,
                        op.job_counts.aborted
                    );
                }
                completed += u64::from(op.job_counts.completed);
            }
        }
        if let Some(missing) = ids.iter().find(|id| !seen.contains(*id)) {
            bail!("{phase}: operation {missing} is not listed in pool {POOL:?}");
        }
        Ok(completed)
    }

    /// Submits `n` one-job operations into pool `bench`, each after the previous reply, and
    /// waits until all have ended.
    async fn one_after_another(
        &mut self,
        cluster: &mut Cluster,
        phase: Phase,
        n: u32,
    ) -> anyhow::Result<PhaseReport> {
        let name = phase.name();
        let mut report = PhaseReport::new(phase);
        let cpu_before = cluster.cpu();
        let counters_before = self.server_counters().await;
        let mut ids = Vec::with_capacity(n as usize);
        let mut replies = Vec::with_capacity(n as usize);
        let started = Instant::now();
        let mut next_progress = started + Duration::from_secs(5);
        for i in 0..n {
            let op = self.operation(POOL, 1);
            let sent = Instant::now();
            let reply = self
                .client
                .submit(&op)
                .await
                .with_context(|| format!("{name}: submitting operation {} of {n}", i + 1))?;
            replies.push(sent.elapsed().as_secs_f64() * 1e3);
            ids.push(reply.id);
            if Instant::now() >= next_progress {
                next_progress += Duration::from_secs(5);
                self.progress(&format!("{name}: {} of {n} submitted", i + 1));
            }
        }
        let submitted = Instant::now();
        let done = self.wait_until_done(cluster, name, started).await?;
        let cpu_after = cluster.cpu();
        let counters_after = self.server_counters().await;
        report.operations = u64::from(n);
        report.jobs = u64::from(n);
        report.jobs_completed = self.completed_jobs(name, &ids).await?;
        report.rates(
            n,
            submitted.duration_since(started).as_secs_f64(),
            done.duration_since(started).as_secs_f64(),
        );
        report.submit_reply_ms = Millis::of(replies);
        cpu_before.until(cpu_after, &mut report);
        ServerCounters::until(counters_before, counters_after, &mut report);
        self.progress(&format!(
            "{name}: {n} operations, {:.1} submitted/s, {:.1} jobs completed/s",
            report.submissions_per_s, report.jobs_per_s
        ));
        Ok(report)
    }

    /// One operation of `--jobs` jobs.
    async fn one_operation(&mut self, cluster: &mut Cluster) -> anyhow::Result<PhaseReport> {
        let phase = Phase::OneOperation;
        let name = phase.name();
        let n = self.args.jobs;
        let mut report = PhaseReport::new(phase);
        let cpu_before = cluster.cpu();
        let counters_before = self.server_counters().await;
        let op = self.operation(POOL, n);
        let started = Instant::now();
        let reply = self
            .client
            .submit(&op)
            .await
            .with_context(|| format!("{name}: submitting an operation of {n} jobs"))?;
        let submitted = Instant::now();
        let done = self.wait_until_done(cluster, name, started).await?;
        let cpu_after = cluster.cpu();
        let counters_after = self.server_counters().await;
        report.operations = 1;
        report.jobs = u64::from(n);
        report.jobs_completed = self.completed_jobs(name, &[reply.id]).await?;
        report.rates(
            1,
            submitted.duration_since(started).as_secs_f64(),
            done.duration_since(started).as_secs_f64(),
        );
        report.submit_reply_ms = Millis::of(vec![report.submit_s * 1e3]);
        cpu_before.until(cpu_after, &mut report);
        ServerCounters::until(counters_before, counters_after, &mut report);
        self.progress(&format!(
            "{name}: {n} jobs in {:.1} s, {:.1} jobs completed/s",
            report.completed_s, report.jobs_per_s
        ));
        Ok(report)
    }

    /// `--backlog` operations into the held pool, then [`Self::one_after_another`].
    async fn with_backlog(&mut self, cluster: &mut Cluster) -> anyhow::Result<PhaseReport> {
        let phase = Phase::WithBacklog;
        let name = phase.name();
        let m = self.args.backlog;
        let started = Instant::now();
        for i in 0..m {
            let op = self.operation(HELD_POOL, 1);
            self.client.submit(&op).await.with_context(|| {
                format!("{name}: submitting backlog operation {} of {m}", i + 1)
            })?;
        }
        let backlog_submit_s = started.elapsed().as_secs_f64();
        self.check_backlog(name, m).await?;
        self.progress(&format!(
            "{name}: {m} operations wait in pool {HELD_POOL:?} (submitted in {backlog_submit_s:.1} s)"
        ));
        let mut report = self
            .one_after_another(cluster, phase, self.args.operations)
            .await?;
        // Still all there, none running.
        self.check_backlog(name, m).await?;
        report.backlog_operations = Some(u64::from(m));
        report.backlog_submit_s = Some(backlog_submit_s);
        Ok(report)
    }

    /// Checks that all `m` backlog operations are pending.
    async fn check_backlog(&self, phase: &str, m: u32) -> anyhow::Result<()> {
        // Page through them (a page holds at most 10,000).
        let (mut unfinished, mut pending) = (0usize, 0usize);
        let mut after = String::new();
        loop {
            let page = self
                .client
                .list_operations(&OperationQuery {
                    state: Some("pending,running".into()),
                    pool: Some(HELD_POOL.into()),
                    jobs: Some(false),
                    limit: Some(10_000),
                    after: Some(after.clone()),
                    ..OperationQuery::default()
                })
                .await
                .with_context(|| format!("listing the operations of pool {HELD_POOL:?}"))?;
            let Some(last) = page.last() else { break };
            after = last.id.clone();
            unfinished += page.len();
            pending += page
                .iter()
                .filter(|o| o.state == OperationState::Pending)
                .count();
        }
        if pending != m as usize || unfinished != m as usize {
            bail!(
                "{phase}: the backlog should be {m} pending operations in pool {HELD_POOL:?} \
                 (max_running_operation_count 0); the API lists {unfinished} unfinished, \
                 {pending} of them pending"
            );
        }
        Ok(())
    }

    /// One one-job operation at a time; each waits for the last to end.
    async fn idle_latency(&mut self, cluster: &mut Cluster) -> anyhow::Result<PhaseReport> {
        let phase = Phase::IdleLatency;
        let name = phase.name();
        let n = self.args.latency_samples;
        let mut report = PhaseReport::new(phase);
        // The events, with the instant each arrived, read by a task of their own.
        let mut stream = self
            .client
            .event_stream(&EventQuery {
                kind: Some("allocation_started,operation_state".into()),
                ..EventQuery::default()
            })
            .await
            .context("opening the live event stream")?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(EventView, Instant)>();
        let reader = tokio::spawn(async move {
            while let Ok(Some(e)) = stream.next().await {
                if tx.send((e, Instant::now())).is_err() {
                    break;
                }
            }
        });
        let cpu_before = cluster.cpu();
        let counters_before = self.server_counters().await;
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut replies = Vec::new();
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        let mut ids = Vec::new();
        let started = Instant::now();
        let mut busy = Duration::ZERO;
        let limit = Duration::from_secs(30);
        for i in 0..n {
            // A pause of 0 to 2 heartbeat periods.
            let pause = self
                .heartbeat
                .mul_f64(2.0 * super::harness::next_jitter(&mut rng));
            tokio::time::sleep(pause).await;
            let op = self.operation(POOL, 1);
            let sent = Instant::now();
            let reply = self
                .client
                .submit(&op)
                .await
                .with_context(|| format!("{name}: submitting operation {} of {n}", i + 1))?;
            replies.push(sent.elapsed().as_secs_f64() * 1e3);
            let mut start = None;
            loop {
                let Ok(got) = tokio::time::timeout_at((sent + limit).into(), rx.recv()).await
                else {
                    cluster.check_alive()?;
                    bail!(
                        "{name}: operation {} {} within {} s of its submission",
                        reply.id,
                        if start.is_none() {
                            "did not start"
                        } else {
                            "did not complete"
                        },
                        limit.as_secs()
                    );
                };
                let Some((event, at)) = got else {
                    bail!("{name}: the server ended the live event stream");
                };
                let field = |k: &str| event.fields.get(k).and_then(|v| v.as_str());
                if field("operation") != Some(reply.id.as_str()) {
                    continue;
                }
                match event.kind() {
                    "allocation_started" => start = Some(at),
                    "operation_state" => match field("state") {
                        Some("completed") => {
                            let start = start.unwrap_or(at);
                            starts.push(start.duration_since(sent).as_secs_f64() * 1e3);
                            ends.push(at.duration_since(sent).as_secs_f64() * 1e3);
                            break;
                        }
                        Some(state @ ("failed" | "aborted")) => bail!(
                            "{name}: operation {} ended {state}: {}",
                            reply.id,
                            field("reason").unwrap_or("no reason given")
                        ),
                        _ => {}
                    },
                    _ => {}
                }
            }
            busy += sent.elapsed();
            ids.push(reply.id);
        }
        let done = Instant::now();
        reader.abort();
        let cpu_after = cluster.cpu();
        let counters_after = self.server_counters().await;
        // The server's own record of each start.
        let mut server = Vec::new();
        for id in &ids {
            let op = self
                .client
                .get_operation(id)
                .await
                .with_context(|| format!("{name}: reading operation {id}"))?;
            if let Some(job) = op.jobs.first() {
                server.push(job.started_at.saturating_sub(op.submitted_at) as f64);
            }
        }
        report.operations = u64::from(n);
        report.jobs = u64::from(n);
        report.jobs_completed = self.completed_jobs(name, &ids).await?;
        // Time spent in submissions and their jobs, without the pauses between them.
        report.rates(
            n,
            busy.as_secs_f64(),
            done.duration_since(started).as_secs_f64(),
        );
        report.submit_reply_ms = Millis::of(replies);
        report.submit_to_start_ms = Millis::of(starts);
        report.server_submit_to_start_ms = Millis::of(server);
        report.submit_to_completed_ms = Millis::of(ends);
        cpu_before.until(cpu_after, &mut report);
        ServerCounters::until(counters_before, counters_after, &mut report);
        if let Some(s) = &report.submit_to_start_ms {
            self.progress(&format!(
                "{name}: {n} submissions, submit to start p50 {:.1} ms, p99 {:.1} ms",
                s.p50, s.p99
            ));
        }
        Ok(report)
    }
}

/// Waits until every agent is registered, then runs the phases.
async fn drive(
    args: &TrivialJobsArgs,
    cluster: &mut Cluster,
    heartbeat: Duration,
) -> anyhow::Result<Vec<PhaseReport>> {
    let client = ApiClient::with_timeout(&cluster.url, None, Duration::from_secs(60));
    let job = fairsched_api::parse_resources(JOB_RESOURCES).map_err(|e| anyhow!(e))?;
    let started = Instant::now();
    loop {
        let nodes = client.list_nodes().await.context("listing the nodes")?;
        if nodes.len() == args.agents as usize {
            break;
        }
        cluster.check_alive()?;
        if started.elapsed() > Duration::from_secs(30) {
            bail!(
                "only {} of {} agents registered within 30 s; their logs are *.log in the \
                 run's directory",
                nodes.len(),
                args.agents
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut driver = Driver {
        args,
        client,
        job,
        next_id: 0,
        heartbeat,
    };
    driver.progress(&format!(
        "{} agents registered at {} in {:.1} s; phases: {}",
        args.agents,
        cluster.url,
        started.elapsed().as_secs_f64(),
        args.phases
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut phases = Vec::new();
    for phase in &args.phases {
        driver.progress(&format!("{}: starting", phase.name()));
        let report = match phase {
            Phase::IdleLatency => driver.idle_latency(cluster).await?,
            Phase::OneAfterAnother => {
                driver
                    .one_after_another(cluster, Phase::OneAfterAnother, args.operations)
                    .await?
            }
            Phase::OneOperation => driver.one_operation(cluster).await?,
            Phase::WithBacklog => driver.with_backlog(cluster).await?,
        };
        phases.push(report);
    }
    Ok(phases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_of_the_sorted_samples() {
        let m = Millis::of((1..=100).rev().map(f64::from).collect()).unwrap();
        assert_eq!((m.p50, m.p99, m.max), (50.0, 99.0, 100.0));
        assert!(Millis::of(Vec::new()).is_none());
    }

    #[test]
    fn the_files_are_valid_for_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let args = TrivialJobsArgs {
            agents: 8,
            cpus: 8,
            latency_samples: 50,
            operations: 1000,
            jobs: 10,
            backlog: 1000,
            phases: vec![Phase::IdleLatency],
            timeout: 1000,
            keep_dir: false,
            json: false,
            quiet: true,
        };
        let files = write_files(dir.path(), &args).unwrap();
        let config = fairsched_server::ServerConfig::from_file(&files.server_config).unwrap();
        fairsched_server::check_config(&config).unwrap();
        assert_eq!(config.scheduler, Default::default());
    }
}
