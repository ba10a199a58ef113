//! `fairsched op`: operations (run, list, show, wait, update, abort; `logs.rs`: logs).

use super::{Conn, print_json};
use crate::args::{parse_duration_ms, parse_limits, parse_signal, parse_weight};
use anyhow::anyhow;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use fairsched_api::client::ApiClient;
use fairsched_api::{
    JobState, OperationQuery, OperationState, PreemptionMode, SubmitOperation, TaskSubmit,
    TreeOptionsUpdate, UpdateOperation,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use std::collections::BTreeMap;
use std::time::Duration;

mod logs;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The pool (default: an ephemeral pool named after the user).
    #[arg(long)]
    pool: Option<String>,
    /// Number of jobs.
    #[arg(long, default_value_t = 1)]
    jobs: u32,
    /// CPU of each job (`0.5`).
    #[arg(long, default_value = "1", allow_negative_numbers = true)]
    cpu: String,
    /// Memory of each job (`1GiB`); a job that uses more is killed.
    #[arg(long, default_value = "256MiB", allow_negative_numbers = true)]
    memory: String,
    /// GPUs of each job.
    #[arg(long, allow_negative_numbers = true)]
    gpu: Option<String>,
    /// The user [default: with a token, the token's user; without one, $USER].
    #[arg(long)]
    user: Option<String>,
    /// The operation id (default: chosen by the server).
    #[arg(long)]
    id: Option<String>,
    /// Extra environment, `KEY=VALUE` (repeatable).
    #[arg(long = "env")]
    env: Vec<String>,
    /// The operation's weight among its pool's children (default 1).
    #[arg(long, value_parser = parse_weight, allow_negative_numbers = true)]
    weight: Option<f64>,
    /// `normal` (default): preempted by starving operations. `graceful`: never preempted
    /// that way; instead, while above its fair share, its jobs are interrupted (reason
    /// `graceful_preemption`) with the tree's `allocation_graceful_preemption_timeout_ms`.
    #[arg(
        long,
        value_parser = PossibleValuesParser::new(["normal", "graceful"]).map(preemption_mode)
    )]
    preemption_mode: Option<PreemptionMode>,
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
    /// (backfill). Enforced: a job still running at its limit is killed and fails (reason
    /// `time limit exceeded`).
    #[arg(long, value_parser = parse_duration_ms)]
    time_limit: Option<u64>,
    /// All or nothing: the jobs are one gang (an MPI-style job). In a pool tree with
    /// `gang_placement` they start together, only once all fit, and are preempted together;
    /// the fair share treats the operation as a gang in any tree.
    #[arg(long)]
    gang: bool,
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
        #[arg(long, value_parser = parse_weight, allow_negative_numbers = true)]
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

pub async fn run(conn: Conn, command: OpCommand) -> anyhow::Result<()> {
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
                gang,
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
            // With a token the server knows who calls: the operation is theirs unless
            // --user names someone else (which only superusers may).
            let user = user.or_else(|| {
                (!client.has_token())
                    .then(|| std::env::var("USER").ok())
                    .flatten()
            });
            let op = SubmitOperation {
                id,
                user,
                pool,
                weight,
                resource_limits,
                preemption_mode,
                interruption_signal,
                interruption_timeout_ms: interruption_timeout,
                tasks: vec![TaskSubmit {
                    job_count: jobs,
                    resources,
                    time_limit_ms: time_limit,
                    command,
                    env,
                    gang,
                    ..TaskSubmit::default()
                }],
                ..SubmitOperation::default()
            };
            let reply = client.submit_with(&op, wait_for_nodes).await?;
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
            for j in o.jobs.iter().filter(|j| j.state == JobState::Aborted) {
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
            // Jobs by state, then the runs that ended without completing (a job that failed
            // or was aborted and ran again counts there once per run).
            println!(
                "jobs: {} total: {} pending, {} running, {} completed; runs that failed: {}, \
                 aborted: {}{by_reason}",
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
            let running: Vec<_> = o
                .jobs
                .iter()
                .filter(|j| j.state == JobState::Running)
                .collect();
            let failed: Vec<_> = o
                .jobs
                .iter()
                .filter(|j| j.state == JobState::Failed)
                .collect();
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
                println!(
                    "({})",
                    hidden_jobs(hidden, running.len() + failed.len(), &o.id)
                );
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
        if o.state.is_finished() {
            let c = &o.job_counts;
            if json {
                print_json(&o)?;
            } else {
                // Failed and aborted count runs: a job that failed and ran again counts in
                // both (a job never run to completion twice).
                println!(
                    "operation {} {}: {} of {} jobs completed; runs that failed: {}, aborted: {}",
                    o.id, o.state, c.completed, c.total, c.failed, c.aborted
                );
            }
            return match o.state {
                OperationState::Completed => Ok(()),
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

/// `--preemption-mode` (one of its possible values).
fn preemption_mode(name: String) -> PreemptionMode {
    match name.as_str() {
        "graceful" => PreemptionMode::Graceful,
        _ => PreemptionMode::Normal,
    }
}

fn amount(kind: ResourceKind, text: &str) -> anyhow::Result<i64> {
    fairsched_resources::parse_amount(kind, text).map_err(|e| anyhow!("--{}: {e}", kind.name()))
}

/// The line that says how many jobs `op show` left out (`listed` were shown above it) and how
/// to see them.
fn hidden_jobs(hidden: usize, listed: usize, id: &str) -> String {
    let jobs = if hidden == 1 { "job" } else { "jobs" };
    let other = if listed > 0 { "other " } else { "" };
    format!("{hidden} {other}{jobs} not listed: `op show {id} --all-jobs` lists every job")
}

#[cfg(test)]
mod hidden_jobs_tests {
    #[test]
    fn the_line_counts_the_jobs_left_out_in_words() {
        for (hidden, listed, line) in [
            (
                4,
                0,
                "4 jobs not listed: `op show x --all-jobs` lists every job",
            ),
            (
                1,
                0,
                "1 job not listed: `op show x --all-jobs` lists every job",
            ),
            (
                1,
                2,
                "1 other job not listed: `op show x --all-jobs` lists every job",
            ),
            (
                7,
                1,
                "7 other jobs not listed: `op show x --all-jobs` lists every job",
            ),
        ] {
            assert_eq!(super::hidden_jobs(hidden, listed, "x"), line);
        }
    }
}
