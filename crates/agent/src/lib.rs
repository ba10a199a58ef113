//! The fairsched node agent: registers with the server, heartbeats, and runs the jobs it is
//! told to start as real processes.
//!
//! * Each job runs in its own process group, in its own working directory
//!   (`<work_dir>/jobs/<operation>/<job id>`), with stdout and stderr captured to files there
//!   (at most [`AgentConfig::max_job_output`] bytes each)
//!   and `FAIRSCHED_*` variables in its environment (`FAIRSCHED_JOB_ID` is the job id the CLI
//!   and the API show).
//! * Each job runs under its keeper ([`keeper`]): a subreaper of every process the job starts,
//!   which kills them all (SIGTERM, SIGKILL after the grace period) when the job's main
//!   process exits, when the job is aborted or preempted, when the agent is gone, and when
//!   the agent's lease runs out (no heartbeat accepted for most of the server's
//!   `node_timeout_ms`: the server may soon run the job elsewhere).
//! * Interruption: the operation's signal to the group; the scheduler aborts the job if it does
//!   not exit before its deadline.
//! * Memory: a job that asked for `memory` may not use more. With cgroup v2 (when usable)
//!   each such job runs in its own cgroup with `memory.max`; otherwise the RSS of its process
//!   group is polled every 500 ms. Either way a job above its limit is killed and reported
//!   as failed with the reason `memory limit exceeded: ...` ([`memory`];
//!   `FAIRSCHED_MEMORY_ENFORCEMENT=auto|cgroup|poll`).
//! * A finished job's directory is removed `job_dir_retention` after the job ended (its
//!   server keeps the output tails it reported); the directories of running jobs stay.
//! * A short server outage does not stop the jobs: heartbeats are retried with backoff (200 ms
//!   doubling to 2 s), jobs that end meanwhile are kept and reported, with their exit codes, by
//!   the first heartbeat that gets through; the server keeps the jobs still running (after a
//!   restart it restores the node and adopts them). If the server no longer knows the node,
//!   the agent registers again and the server kills, through the next heartbeat, the jobs it
//!   no longer has there.
//! * Each registration returns the node's own credential, which every heartbeat carries; a
//!   heartbeat refused for its credential (a server restart forgets them, another
//!   registration of the same node id replaces it) makes the agent register again.
//!
//! The agent knows nothing about fair share.

pub mod keeper;
pub mod memory;
pub mod metrics;
mod records;
mod spawner;

pub use memory::MemoryEnforcement;
pub use metrics::AgentMetrics;
pub use records::KILLED_AT_RESTART;

use fairsched_api::JobState as Outcome;
use fairsched_api::client::{ApiClient, ClientError};
use fairsched_api::{
    FinishedJob, Heartbeat, JobOutput, JobStart, OUTPUT_CHUNK_BYTES, OUTPUT_HEARTBEAT_BYTES,
    OutputChunk, OutputRequest, RegisterNode, codes,
};
use fairsched_resources::{ResourceKind, Resources};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// How an agent runs.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Server URL (`http://127.0.0.1:9090`).
    pub server: String,
    /// Shared token of the agents.
    pub token: Option<String>,
    /// The file the token was read from (`--token-file`): read again after the server
    /// refuses the token, so that a rotated token is taken without a restart.
    pub token_file: Option<PathBuf>,
    pub node_id: String,
    pub resources: Resources,
    pub tags: Vec<String>,
    /// Where job directories go.
    pub work_dir: PathBuf,
    /// Between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Where to serve the agent's own `GET /metrics` (`host:port`); none: not served.
    pub metrics_listen: Option<String>,
    /// A finished job's directory (`<work_dir>/jobs/<operation>/<job id>`) is removed once
    /// nothing in it changed for this long (and an operation's directory once empty); `None`
    /// keeps them forever.
    pub job_dir_retention: Option<Duration>,
    /// The program run as the agent's job spawner (`PROGRAM __job-spawner ...`, see
    /// [`keeper`]), which forks each job's keeper: `None` is this program, which must then
    /// call [`keeper::spawner_main`] when its first argument is [`keeper::SPAWNER_ARG`] (and
    /// [`keeper::main`] for [`keeper::KEEPER_ARG`]; `fairsched` does).
    pub keeper: Option<PathBuf>,
    /// The most bytes kept of each job's stdout and of its stderr (the first ones; the job's
    /// keeper discards the rest, saying so in the file); `None`: unbounded.
    pub max_job_output: Option<u64>,
    /// Run each job as its operation's user (the local account of that name; the agent must
    /// run as root), not as the agent's user. Jobs of `root`, and of users without an
    /// account here, are refused (they fail, saying why).
    pub run_as_users: bool,
}

/// The program of the job spawner: `fairsched-job-keeper` beside this program if it is
/// there (a small program: the keepers it forks are smaller), else this very program, as
/// `/proc/self/exe`, which runs it even after its file was replaced (an upgrade installed
/// while the agent runs), where its path would run another version or nothing.
fn default_keeper() -> PathBuf {
    let this = PathBuf::from("/proc/self/exe");
    if let Ok(exe) = std::fs::read_link(&this) {
        let beside = exe.with_file_name(keeper::KEEPER_PROGRAM);
        if beside.is_file() {
            return beside;
        }
    }
    this
}

/// `fairsched agent --max-job-output`'s default (and `fairsched up`'s): 1 GiB per stream.
pub const DEFAULT_MAX_JOB_OUTPUT: u64 = 1 << 30;

/// Variables of the agent's own environment that jobs do not get: secrets the agent or the
/// CLI read (a job's task may still set them itself).
pub const JOB_ENV_REMOVED: [&str; 2] = ["FAIRSCHED_AGENT_TOKEN", "FAIRSCHED_TOKEN"];

/// The agents' token in `path` (surrounding white space removed); warns when other users
/// may read the file.
pub fn read_token_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the token file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        anyhow::bail!("the token file {} is empty", path.display());
    }
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", mode & 0o777),
                "the agent's token file may be read by other users (and their jobs); make it \
                 readable by the agent's user only (chmod 600)"
            );
        }
    }
    Ok(token.to_string())
}

/// This machine's cpu count and memory.
pub fn detect_resources() -> Resources {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(1 << 30);
    Resources::ZERO
        .with(ResourceKind::Cpu, cpus as f64)
        .with(ResourceKind::Memory, memory as f64)
        .with(ResourceKind::UserSlots, (cpus * 4) as f64)
}

struct Job {
    /// Its key with the spawner (see `keeper`).
    key: u64,
    /// What the server placed it with.
    resources: Resources,
    state: Arc<JobState>,
    /// Its directory (with `stdout` and `stderr`).
    dir: PathBuf,
}

/// The reason of a job its keeper killed when the agent's lease ran out.
pub const FENCED: &str = "fenced: no heartbeat of the agent was accepted for most of the \
                          server's node_timeout_ms (agent stopped, hung or cut off), so the job \
                          was killed before the server could run it elsewhere";

/// The reason of a job killed because its agent was stopped (SIGTERM, Ctrl-C).
pub const AGENT_STOPPED: &str = "agent_stopped: the node's agent was stopped, and stopped its \
                                 jobs";

/// The reason of a job whose keeper was lost with the agent's job spawner.
pub const SPAWNER_LOST: &str = "spawner_lost: the agent's job spawner process ended while the \
                                job ran (killed by hand or by the OOM killer?), so the job's \
                                keeper killed its processes";

/// What the agent and the job's tasks (its wait, the memory poller) share about a job.
#[derive(Debug, Default)]
pub(crate) struct JobState {
    /// Set when the agent kills the job (its outcome is then `aborted`).
    killed: AtomicBool,
    /// Set when the job is killed for going over a limit (the memory poller, its time
    /// limit): the reason it failed.
    over_limit: OnceLock<String>,
    /// The job's process has exited.
    done: AtomicBool,
}

impl JobState {
    /// Kills the job's process group `pgid` for going over a limit, unless a limit already
    /// did: `reason` is why it fails.
    pub(crate) fn kill_over_limit(&self, reason: String, pgid: i32, grace: Duration) {
        if self.over_limit.set(reason).is_ok() {
            kill_group(Pid::from_raw(pgid), grace);
        }
    }
}

/// A heartbeat that reports a job's end waits this long for other jobs that end with it.
const JOB_END_COALESCE_MS: u64 = 5;

/// Bytes of each stream reported to the server.
const TAIL_BYTES: u64 = 64 * 1024;

/// The last [`TAIL_BYTES`] of a job's stream `name` (its file at `path`), as its end reports
/// them; when the stream is longer, a first line says how much is not there and where it is.
fn tail(path: &std::path::Path, name: &str) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let skipped = len.saturating_sub(TAIL_BYTES);
    let _ = f.seek(SeekFrom::Start(skipped));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    if skipped == 0 {
        return text.into_owned();
    }
    format!(
        "[fairsched: the first {skipped} bytes of {name} are not shown (the end of a job keeps \
         its last {TAIL_BYTES}); all of it is in {} on the job's node until the agent's \
         --job-dir-retention]\n{text}",
        path.display()
    )
}

struct Agent {
    config: AgentConfig,
    client: ApiClient,
    jobs: BTreeMap<String, Job>,
    done_tx: mpsc::UnboundedSender<(String, FinishedJob)>,
    done_rx: mpsc::UnboundedReceiver<(String, FinishedJob)>,
    /// Finished jobs not yet acknowledged by a successful heartbeat.
    unreported: Vec<FinishedJob>,
    memory: memory::Enforcer,
    /// Jobs whose memory the poller watches.
    watches: memory::Watches,
    /// The jobs started and the ends not yet reported, on disk (found again after a crash).
    records: records::Records,
    /// The credential of this node's last registration, sent with every heartbeat.
    credential: Option<String>,
    metrics: AgentMetrics,
    /// When finished jobs' directories are next looked at (see [`Agent::sweep_job_dirs`]).
    next_sweep: std::time::Instant,
    /// The jobs whose output the server asked for in its last reply.
    wanted: Vec<OutputRequest>,
    /// The directories of the jobs in `unreported` (their last output goes with their end).
    finished_dirs: BTreeMap<String, PathBuf>,
    /// Counts heartbeats, to take turns among running jobs whose output does not all fit.
    output_turn: std::sync::atomic::AtomicUsize,
    /// Starts each job under its keeper (see `keeper`).
    spawner: spawner::Spawner,
    /// Set once the agent stops: the jobs it kills then are reported with [`AGENT_STOPPED`].
    stopping: bool,
    /// Jobs the server started here that wait for the node's running jobs to leave them
    /// room (see [`Agent::start_waiting`]), in the order they came.
    waiting: VecDeque<JobStart>,
    /// The lease the jobs' keepers read (see `keeper`).
    lease: keeper::LeaseFile,
    /// The server's `node_timeout_ms`, as its last registration reply said (older servers
    /// do not: no lease then).
    node_timeout: Option<Duration>,
    /// Registrations refused for the token since the last accepted one.
    token_refusals: u32,
}

/// The bytes of the file at `path` from byte `from` (`None`, or past its end: its newest
/// bytes), at most `max` of them: the newest ones when there are more.
fn read_chunk(path: &std::path::Path, from: Option<u64>, max: u64) -> Option<OutputChunk> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let newest = len.saturating_sub(max);
    let start = match from {
        Some(from) if from <= len => from.max(newest),
        _ => newest,
    };
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.take(len - start).read_to_end(&mut buf).ok()?;
    Some(OutputChunk::new(start, &buf))
}

/// The newest modification time of `dir` and the files directly in it.
fn last_change(dir: &std::path::Path) -> Option<std::time::SystemTime> {
    let mut newest = std::fs::metadata(dir).and_then(|m| m.modified()).ok()?;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        if let Ok(t) = entry.metadata().and_then(|m| m.modified()) {
            newest = newest.max(t);
        }
    }
    Some(newest)
}

impl Agent {
    /// Removes the directories of finished jobs whose contents did not change for
    /// `job_dir_retention`, and the operations' directories left empty; at most every half
    /// retention (between 100 ms and 10 minutes). Directories of running jobs and of jobs
    /// whose end the server has not acknowledged yet stay.
    fn sweep_job_dirs(&mut self) {
        let Some(retention) = self.config.job_dir_retention else {
            return;
        };
        let now = std::time::Instant::now();
        if now < self.next_sweep {
            return;
        }
        self.next_sweep =
            now + (retention / 2).clamp(Duration::from_millis(100), Duration::from_secs(600));
        let root = self.config.work_dir.join("jobs");
        let Ok(operations) = std::fs::read_dir(&root) else {
            return;
        };
        let cutoff = std::time::SystemTime::now().checked_sub(retention);
        let mut removed = 0usize;
        for op in operations.flatten() {
            let op_dir = op.path();
            let Ok(jobs) = std::fs::read_dir(&op_dir) else {
                continue;
            };
            for job in jobs.flatten() {
                let name = job.file_name().to_string_lossy().into_owned();
                let busy =
                    self.jobs.contains_key(&name) || self.unreported.iter().any(|f| f.job == name);
                let old = cutoff.is_some_and(|c| last_change(&job.path()).is_some_and(|t| t < c));
                if busy || !old {
                    continue;
                }
                match std::fs::remove_dir_all(job.path()) {
                    Ok(()) => removed += 1,
                    Err(e) => tracing::warn!(
                        dir = %job.path().display(),
                        "cannot remove a finished job's directory: {e}"
                    ),
                }
            }
            // Only when empty.
            let _ = std::fs::remove_dir(&op_dir);
        }
        if removed > 0 {
            tracing::info!(
                removed,
                "removed finished jobs' directories past their retention"
            );
        }
    }

    fn start(&mut self, s: JobStart) {
        let dir = self
            .config
            .work_dir
            .join("jobs")
            .join(&s.operation)
            .join(&s.job);
        let limit = u64::try_from(s.resources.raw_of(ResourceKind::Memory)).unwrap_or(0);
        // The job's cgroup, when cgroup v2 enforces its memory.
        let mut cgroup = None;
        // (Not for a job run as its user: the cgroup wrapper, run as that user, could not
        // move it into a cgroup of the agent's; its memory is polled.)
        if limit > 0
            && !self.config.run_as_users
            && let memory::Enforcer::Cgroup(base) = self.memory
        {
            match base.create_job(&s.job, limit) {
                Ok(c) => cgroup = Some(c),
                Err(e) => tracing::warn!(
                    job = s.job,
                    "cannot create the job's cgroup ({e}); polling its RSS instead"
                ),
            }
        }
        let run_as = self.config.run_as_users;
        let spawn = |spawner: &mut spawner::Spawner,
                     cgroup: Option<&memory::JobCgroup>|
         -> std::io::Result<(u64, mpsc::UnboundedReceiver<keeper::Report>)> {
            let (user, home) = if run_as {
                let (user, home) = account(s.user.as_deref())?;
                (Some(user), Some(home))
            } else {
                (None, None)
            };
            std::fs::create_dir_all(&dir)?;
            if let Some(u) = &user {
                // Its working directory is its own (the way to it stays the agent's).
                nix::unistd::chown(
                    &dir,
                    Some(nix::unistd::Uid::from_raw(u.uid)),
                    Some(nix::unistd::Gid::from_raw(u.gid)),
                )?;
            }
            let (program, args) = s
                .command
                .split_first()
                .ok_or_else(|| std::io::Error::other("empty command"))?;
            // The program and its first arguments: the cgroup wrapper, then the job's.
            let mut line: Vec<std::ffi::OsString> = Vec::new();
            if let Some(c) = cgroup {
                line.extend(["/bin/sh".into(), "-c".into(), memory::CGROUP_WRAPPER.into()]);
                line.push(c.procs().into());
            }
            line.push(program.into());
            line.extend(args.iter().map(Into::into));
            // Over the spawner's environment (the agent's, without JOB_ENV_REMOVED); a job
            // run as its user gets that user's HOME, USER and LOGNAME (its own env wins).
            let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
            if let (Some(u), Some(home)) = (&user, home) {
                env.push(("HOME".into(), home.into()));
                env.push(("USER".into(), u.name.clone()));
                env.push(("LOGNAME".into(), u.name.clone()));
            }
            env.extend(s.env.iter().map(|(k, v)| (k.into(), v.into())));
            let own = [
                ("FAIRSCHED_OPERATION_ID", s.operation.clone()),
                ("FAIRSCHED_JOB_ID", s.job.clone()),
                ("FAIRSCHED_TASK_INDEX", s.task.to_string()),
                ("FAIRSCHED_NODE_ID", self.config.node_id.clone()),
                ("FAIRSCHED_SERVER", self.config.server.clone()),
            ];
            env.extend(own.into_iter().map(|(k, v)| (k.into(), v.into())));
            env.push(("FAIRSCHED_JOB_DIR".into(), dir.clone().into()));
            for k in ResourceKind::ALL {
                let raw = s.resources.raw_of(k);
                if raw != 0 {
                    env.push((
                        format!("FAIRSCHED_{}", k.name().to_uppercase()).into(),
                        fairsched_resources::format_amount(k, raw).into(),
                    ));
                }
            }
            spawner.run(dir.clone(), line, env, user)
        };
        let job = s.job.clone();
        // Recorded before its process exists: an agent killed in between leaves a record a
        // restarted agent finds the job's processes by (see `records`).
        self.records.starting(&job, &s.operation);
        let spawned = spawn(&mut self.spawner, cgroup.as_ref());
        match spawned {
            Ok((key, mut reports)) => {
                let records = self.records.clone();
                self.metrics.jobs_started.inc();
                self.metrics.jobs_running.inc();
                let metrics = self.metrics.clone();
                let state = Arc::new(JobState::default());
                self.jobs.insert(
                    job.clone(),
                    Job {
                        key,
                        resources: s.resources,
                        state: state.clone(),
                        dir: dir.clone(),
                    },
                );
                let watches = (limit > 0 && cgroup.is_none()).then(|| self.watches.clone());
                let time_limit = s.time_limit_ms.map(Duration::from_millis);
                let grace = self.config.kill_grace;
                let tx = self.done_tx.clone();
                let id = job.clone();
                let operation = s.operation.clone();
                tokio::spawn(async move {
                    // What the spawner and the keeper say: the keeper's PID, the job's (its
                    // process group), whether the lease ran out, why the job could not start,
                    // and last how the keeper exited (as the job's main process did).
                    let (mut fenced, mut error, mut status) = (false, None, None);
                    let (mut keeper_pid, mut pgid) = (0, 0);
                    // Its time limit runs from the moment its process exists.
                    let mut deadline = None;
                    loop {
                        let report = match deadline {
                            Some(at) => tokio::select! {
                                r = reports.recv() => r,
                                () = tokio::time::sleep_until(at) => {
                                    deadline = None;
                                    let limit = time_limit.unwrap_or_default();
                                    let reason = time_limit_reason(limit, grace);
                                    tracing::warn!(job = id, "{reason}");
                                    state.kill_over_limit(reason, pgid, grace);
                                    continue;
                                }
                            },
                            None => reports.recv().await,
                        };
                        let Some(report) = report else { break };
                        match report {
                            keeper::Report::Keeper(pid) => {
                                keeper_pid = pid;
                                records.started(&id, &operation, pgid, keeper_pid);
                            }
                            keeper::Report::Pid(pid) => {
                                pgid = pid;
                                records.started(&id, &operation, pgid, keeper_pid);
                                tracing::info!(job = id, operation, pid, "job started");
                                deadline = time_limit.map(|l| tokio::time::Instant::now() + l);
                                if let Some(w) = &watches {
                                    w.lock().unwrap_or_else(|e| e.into_inner()).insert(
                                        id.clone(),
                                        memory::Watch {
                                            pgid: pid,
                                            limit,
                                            state: state.clone(),
                                        },
                                    );
                                }
                            }
                            keeper::Report::Fenced => {
                                fenced = true;
                                tracing::warn!(
                                    job = id,
                                    "the agent's lease ran out (no heartbeat accepted for most \
                                     of the server's node_timeout_ms): the job's processes are \
                                     killed before the server can run it elsewhere"
                                );
                            }
                            keeper::Report::Error(e) => error = Some(e),
                            keeper::Report::Exit { code, signal } => {
                                status = Some((code, signal));
                                break;
                            }
                        }
                    }
                    // The keeper has killed whatever the job left running (its descendants).
                    state.done.store(true, Ordering::SeqCst);
                    let oom_kills = match cgroup {
                        Some(c) => {
                            let n = c.oom_kills();
                            c.remove().await;
                            n
                        }
                        None => 0,
                    };
                    let (exit_code, signal) = status.unwrap_or((None, None));
                    let (outcome, reason) = if status.is_none() {
                        (Outcome::Aborted, Some(SPAWNER_LOST.to_string()))
                    } else if fenced {
                        (Outcome::Aborted, Some(FENCED.to_string()))
                    } else if state.killed.load(Ordering::SeqCst) {
                        (Outcome::Aborted, None)
                    } else if let Some(e) = &error {
                        // What `op show` says of the job (not only its stderr).
                        (Outcome::Failed, Some(e.clone()))
                    } else if let Some(r) = state.over_limit.get() {
                        (Outcome::Failed, Some(r.clone()))
                    } else if oom_kills > 0 && exit_code != Some(0) {
                        let r = memory::cgroup_reason(limit);
                        tracing::warn!(job = id, oom_kills, "{r}");
                        (Outcome::Failed, Some(r))
                    } else if exit_code == Some(0) {
                        (Outcome::Completed, None)
                    } else {
                        (Outcome::Failed, None)
                    };
                    let mut stderr_tail = tail(&dir.join("stderr"), "stderr");
                    if let Some(e) = &error {
                        tracing::warn!(job = id, "job could not start: {e}");
                        stderr_tail.push_str(&format!("fairsched agent: {e}\n"));
                    }
                    let finished = FinishedJob {
                        job: id.clone(),
                        outcome,
                        exit_code: if error.is_some() { None } else { exit_code },
                        signal,
                        reason,
                        stdout_tail: tail(&dir.join("stdout"), "stdout"),
                        stderr_tail,
                    };
                    records.ended(&finished);
                    metrics.jobs_running.dec();
                    metrics.finished(finished.outcome);
                    let _ = tx.send((id, finished));
                });
            }
            Err(e) => {
                if let Some(c) = cgroup {
                    tokio::spawn(c.remove());
                }
                tracing::warn!(job, "job could not start: {e}");
                let finished = FinishedJob {
                    job,
                    outcome: Outcome::Failed,
                    exit_code: None,
                    signal: None,
                    reason: Some(format!("cannot start {:?}: {e}", s.command)),
                    stdout_tail: String::new(),
                    stderr_tail: format!("fairsched agent: cannot start {:?}: {e}\n", s.command),
                };
                self.records.ended(&finished);
                self.metrics.finished(finished.outcome);
                self.unreported.push(finished);
            }
        }
    }

    /// A job the server started here: started now if the node has room for it beside the
    /// jobs still running, else when they leave it room.
    fn enqueue(&mut self, s: JobStart) {
        self.waiting.push_back(s);
        self.start_waiting();
    }

    /// Starts the waiting jobs that fit beside the running ones, in the order they came.
    ///
    /// The server counts an interrupted job's resources free at once (its preemptor may be
    /// placed at once), and an aborted job's as soon as it says to kill it, while their
    /// processes may run on until their interruption timeout or kill grace period: starting
    /// the new job beside them would give the node's cpus and memory to more than it has.
    /// So a job waits here until they exit (as a YTsaurus node waits for resources); the
    /// server sees it running meanwhile. A job that does not fit even on an empty node starts
    /// once nothing else runs.
    fn start_waiting(&mut self) {
        let mut used = self
            .jobs
            .values()
            .fold(Resources::default(), |u, j| u.add(&j.resources));
        let mut i = 0;
        while i < self.waiting.len() {
            let needs = used.add(&self.waiting[i].resources);
            if self.config.resources.dominates(&needs) || self.jobs.is_empty() {
                let s = self.waiting.remove(i).expect("in range");
                used = needs;
                self.start(s);
            } else {
                if i == 0 {
                    tracing::info!(
                        job = self.waiting[i].job,
                        running = self.jobs.len(),
                        "the job waits for the node's jobs that are being interrupted or \
                         killed to exit (the server counts their resources free already)"
                    );
                }
                i += 1;
            }
        }
    }

    /// A waiting job the server no longer wants started: reported aborted, `why`.
    fn drop_waiting(&mut self, id: &str, why: &str) -> bool {
        let Some(at) = self.waiting.iter().position(|s| s.job == id) else {
            return false;
        };
        self.waiting.remove(at);
        let finished = FinishedJob {
            job: id.to_string(),
            outcome: Outcome::Aborted,
            exit_code: None,
            signal: None,
            reason: Some(format!(
                "{why} while it waited on the node for room (its jobs being interrupted or \
                 killed had not exited yet); it never started"
            )),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        };
        self.metrics.finished(finished.outcome);
        self.unreported.push(finished);
        true
    }

    /// Through its keeper: SIGTERM to every process of the job now, SIGKILL to those left
    /// after the grace period.
    fn kill(&mut self, id: &str) {
        if let Some(job) = self.jobs.get(id) {
            job.state.killed.store(true, Ordering::SeqCst);
            self.spawner.tell(&keeper::Request::Kill { key: job.key });
        } else {
            self.drop_waiting(id, "aborted");
        }
    }

    fn interrupt(&mut self, id: &str, signal: Option<&str>) {
        if self.drop_waiting(id, "interrupted") {
            return;
        }
        let Some(key) = self.jobs.get(id).map(|j| j.key) else {
            return;
        };
        let Some(name) = signal else { return };
        let name = if name.starts_with("SIG") {
            name.to_string()
        } else {
            format!("SIG{name}")
        };
        match Signal::from_str(&name) {
            Ok(sig) => {
                // The keeper sends it to the job's process group.
                self.spawner.tell(&keeper::Request::Signal {
                    key,
                    signal: sig as i32,
                });
            }
            Err(_) => tracing::warn!(job = id, signal = name, "unknown interruption signal"),
        }
    }

    fn kill_all(&mut self) {
        let ids: Vec<String> = self.jobs.keys().cloned().collect();
        for id in ids {
            self.kill(&id);
        }
    }

    fn collect_finished(&mut self) {
        while let Ok(done) = self.done_rx.try_recv() {
            self.finished(done);
        }
    }

    /// A job's process has exited: it is reported at the next heartbeat, and waiting jobs
    /// may start in its room.
    fn finished(&mut self, (id, mut f): (String, FinishedJob)) {
        if self.stopping && f.outcome == Outcome::Aborted && f.reason.is_none() {
            f.reason = Some(AGENT_STOPPED.to_string());
        }
        if let Some(job) = self.jobs.remove(&id) {
            self.finished_dirs.insert(id, job.dir);
        }
        self.unreported.push(f);
        self.start_waiting();
    }

    /// The output the server asked for: of the jobs that ended first (to their end: this
    /// heartbeat reports their end), then of the running ones; at most
    /// [`OUTPUT_CHUNK_BYTES`] per stream (the newest) and [`OUTPUT_HEARTBEAT_BYTES`] in all
    /// (the rest is asked for again).
    fn collect_output(&self) -> Vec<JobOutput> {
        let mut asked: Vec<(&OutputRequest, &PathBuf, bool)> = self
            .wanted
            .iter()
            .filter_map(|r| match self.finished_dirs.get(&r.job) {
                Some(dir) => Some((r, dir, true)),
                None => self.jobs.get(&r.job).map(|j| (r, &j.dir, false)),
            })
            .collect();
        // Ended jobs first; the running ones from a place that moves at every heartbeat, so
        // that when they do not all fit, each gets its turn.
        asked.sort_by_key(|(_, _, ended)| !ended);
        let ended = asked.iter().filter(|a| a.2).count();
        let running = asked.len() - ended;
        if running > 0 {
            let turn = self.output_turn.fetch_add(1, Ordering::Relaxed) % running;
            asked[ended..].rotate_left(turn);
        }
        let mut budget = OUTPUT_HEARTBEAT_BYTES;
        let mut out = Vec::new();
        for (r, dir, ended) in asked {
            // A running job that does not fit whole waits for the next heartbeat rather than
            // lose bytes; an ended one gets what is left.
            if budget == 0 || (!ended && budget < 2 * OUTPUT_CHUNK_BYTES) {
                break;
            }
            let mut chunk = |name: &str, from: Option<u64>| {
                let c = read_chunk(&dir.join(name), from, OUTPUT_CHUNK_BYTES.min(budget))?;
                budget = budget.saturating_sub(c.data.len() as u64 / 4 * 3);
                Some(c)
            };
            let stdout = chunk("stdout", r.stdout_from);
            let stderr = chunk("stderr", r.stderr_from);
            out.push(JobOutput {
                job: r.job.clone(),
                stdout,
                stderr,
                ended,
            });
        }
        out
    }

    /// Kills every job and waits (at most the grace period and a little) for them to exit;
    /// starts no waiting job.
    async fn stop_all(&mut self) {
        self.stopping = true;
        let waiting: Vec<String> = self.waiting.iter().map(|s| s.job.clone()).collect();
        for id in waiting {
            self.drop_waiting(&id, "the agent stopped");
        }
        self.kill_all();
        let deadline =
            tokio::time::Instant::now() + self.config.kill_grace + Duration::from_millis(500);
        while !self.jobs.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.collect_finished();
        }
    }

    /// Tells the server this node leaves (its last heartbeat, after [`Agent::stop_all`]),
    /// with the ends not reported yet: it removes the node at once rather than after its
    /// `node_timeout_ms`, and runs elsewhere the jobs stopped here. Not while a job still
    /// runs (one that outlived its SIGKILL: the server must not run it again meanwhile).
    async fn leave(&mut self) {
        self.collect_finished();
        if !self.jobs.is_empty() {
            tracing::warn!(
                running = self.jobs.len(),
                "jobs still run after their kill grace: not telling the server that this node \
                 left (it takes it for lost after its node_timeout_ms)"
            );
            return;
        }
        let hb = Heartbeat {
            node_id: self.config.node_id.clone(),
            node_credential: self.credential.clone(),
            running: Vec::new(),
            finished: self.unreported.clone(),
            output: Vec::new(),
            leaving: true,
        };
        match self.client.heartbeat(&hb).await {
            Ok(_) => {
                for f in self.unreported.drain(..) {
                    self.records.reported(&f.job);
                }
                tracing::info!(
                    reported = hb.finished.len(),
                    "told the server that this node left; its stopped jobs run again elsewhere"
                );
            }
            Err(e) => tracing::warn!(
                "could not tell the server that this node left ({e}): it takes the node for \
                 lost after its node_timeout_ms"
            ),
        }
    }

    /// A request sent at `sent_ns` (`CLOCK_BOOTTIME`) was accepted: the server will not
    /// take this node for lost before `node_timeout` after it, so the jobs may run until
    /// [`keeper::Lease::after`] it.
    fn renew_lease(&mut self, sent_ns: u64) {
        let lease = self
            .node_timeout
            .map(|t| keeper::Lease::after(sent_ns, t, self.config.kill_grace));
        if let Err(e) = self.lease.write(lease) {
            tracing::warn!(
                lease = %self.lease.path().display(),
                "cannot renew the lease of this agent's jobs: {e}"
            );
        }
    }

    /// The server refused the agents' token: says so as an error, naming where the token
    /// came from (the first time and every tenth), and reads the token file again.
    fn token_refused(&mut self, e: &ClientError) {
        self.token_refusals += 1;
        if self.token_refusals % 10 == 1 {
            let source = match (&self.config.token_file, &self.config.token) {
                (Some(path), _) => format!("the token in {}", path.display()),
                (None, Some(_)) => "the token of --token or FAIRSCHED_AGENT_TOKEN".to_string(),
                (None, None) => "no token".to_string(),
            };
            tracing::error!(
                running = self.jobs.len(),
                "the server refused this agent's token ({source}): {e}; retrying with backoff. \
                 Give the agent the server's agent_token (--token-file); its jobs run on \
                 until its lease runs out (most of the server's node_timeout_ms)"
            );
        }
        let Some(path) = &self.config.token_file else {
            return;
        };
        match read_token_file(path) {
            Ok(token) if Some(&token) != self.config.token.as_ref() => {
                tracing::info!(path = %path.display(), "the token file changed: using it");
                self.client = ApiClient::with_timeout(
                    &self.config.server,
                    Some(token.clone()),
                    REQUEST_TIMEOUT,
                );
                self.config.token = Some(token);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("{e}"),
        }
    }

    async fn register(&mut self) -> Result<Duration, ClientError> {
        let sent = keeper::boottime_ns();
        let reply = self
            .client
            .register(&RegisterNode {
                node_id: self.config.node_id.clone(),
                resources: self.config.resources,
                tags: self.config.tags.clone(),
                agent_id: Some(self.records.agent_id().to_string()),
            })
            .await?;
        self.credential = Some(reply.node_credential).filter(|c| !c.is_empty());
        self.node_timeout = reply.node_timeout_ms.map(Duration::from_millis);
        self.token_refusals = 0;
        self.renew_lease(sent);
        tracing::info!(node = self.config.node_id, "registered");
        Ok(Duration::from_millis(reply.heartbeat_period_ms.max(10)))
    }
}

/// The local account a job of `user` runs as (`--run-jobs-as-users`), and its home: an error
/// naming what is wrong for none, for `root`, and for a user without an account here.
fn account(user: Option<&str>) -> std::io::Result<(keeper::RunAs, PathBuf)> {
    let refuse = |why: String| std::io::Error::other(format!("{why} (--run-jobs-as-users)"));
    let name = user.ok_or_else(|| {
        refuse("the server did not say whose job this is (an older server?)".into())
    })?;
    let account = nix::unistd::User::from_name(name)
        .map_err(|e| refuse(format!("cannot look up the account {name:?}: {e}")))?
        .ok_or_else(|| {
            refuse(format!(
                "there is no account {name:?} on this node to run the job as"
            ))
        })?;
    if account.uid.is_root() {
        return Err(refuse(format!(
            "jobs of {name:?} would run as root: this agent does not run them"
        )));
    }
    Ok((
        keeper::RunAs {
            name: name.into(),
            uid: account.uid.as_raw(),
            gid: account.gid.as_raw(),
        },
        account.dir,
    ))
}

/// Creates `path` (and its parents) if needed, and gives it mode 0700.
fn private_dir(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

/// Why a job killed at its time limit failed, as `op show` says it.
fn time_limit_reason(limit: Duration, grace: Duration) -> String {
    format!(
        "time limit exceeded: the job ran longer than its time limit of {limit:?} (killed: \
         SIGTERM, then SIGKILL after {grace:?}); submit it with a longer --time-limit \
         (time_limit_ms) if it needs more"
    )
}

pub(crate) fn kill_group(pgid: Pid, grace: Duration) {
    if pgid.as_raw() <= 0 {
        return;
    }
    let _ = killpg(pgid, Signal::SIGTERM);
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        let _ = killpg(pgid, Signal::SIGKILL);
    });
}

/// What an outage does to the node's `running` jobs, in words.
fn jobs_keep_running(running: usize) -> &'static str {
    match running {
        0 => "no job runs here",
        1 => "its job keeps running",
        _ => "its jobs keep running",
    }
}

/// First retry after a failed heartbeat; the wait doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(200);
/// Longest wait between retries (well under the server's node timeout, 15 s by default).
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A heartbeat or registration that takes longer failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The server cannot be reached (or fails): jobs keep running, finished ones are kept for the
/// next successful heartbeat, and the agent retries with backoff.
#[derive(Debug)]
struct Outage {
    since: tokio::time::Instant,
    attempts: u32,
    backoff: Duration,
}

impl Outage {
    fn failed(outage: &mut Option<Outage>, what: &str, e: &ClientError, running: usize) {
        match outage {
            None => {
                // "Unreachable" only when it is: a server that answers with an error (such
                // as read-only while its store cannot write) says why itself.
                let why = match e {
                    ClientError::Http(_) => "the server is unreachable",
                    ClientError::Api(_) => "the server refused it",
                    ClientError::Invalid(_) => "it was not sent",
                };
                let jobs = jobs_keep_running(running);
                tracing::warn!(running, "{what}: {e}; {why}, {jobs}; retrying with backoff");
                *outage = Some(Outage {
                    since: tokio::time::Instant::now(),
                    attempts: 1,
                    backoff: MIN_BACKOFF,
                });
            }
            Some(o) => {
                o.attempts += 1;
                o.backoff = (o.backoff * 2).min(MAX_BACKOFF);
                // Every tenth attempt, so that a long outage stays visible without flooding.
                if o.attempts % 10 == 0 {
                    tracing::warn!(
                        running,
                        attempts = o.attempts,
                        for_s = o.since.elapsed().as_secs_f64(),
                        "{what}: {e}; still retrying"
                    );
                } else {
                    tracing::debug!(attempts = o.attempts, "{what}: {e}");
                }
            }
        }
    }
}

/// Runs the agent until `shutdown` resolves; then kills its jobs (SIGTERM, SIGKILL after the
/// grace period) and returns. Memory is enforced as `FAIRSCHED_MEMORY_ENFORCEMENT` says
/// (`auto` when unset).
pub async fn run(
    config: AgentConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let memory = MemoryEnforcement::from_env().map_err(|e| anyhow::anyhow!(e))?;
    run_with_memory_enforcement(config, memory, shutdown).await
}

/// [`run`] with memory enforced as `memory` says.
pub async fn run_with_memory_enforcement(
    config: AgentConfig,
    memory: MemoryEnforcement,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut config = config;
    if config.run_as_users && !nix::unistd::geteuid().is_root() {
        anyhow::bail!(
            "--run-jobs-as-users needs the agent to run as root (it runs each job as its \
             user's account)"
        );
    }
    // Jobs run in their own directories (their keepers' working directories): a relative
    // work directory would name another place there.
    config.work_dir = std::path::absolute(&config.work_dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot use the work directory {}: {e} (--work-dir)",
            config.work_dir.display()
        )
    })?;
    let memory = memory::Enforcer::start(memory)?;
    if config.run_as_users && matches!(memory, memory::Enforcer::Cgroup(_)) {
        tracing::warn!(
            "jobs run as their users (--run-jobs-as-users): their memory is enforced by \
             polling their RSS, not by cgroups"
        );
    }
    let watches = memory::Watches::default();
    let poller = tokio::spawn(memory::poll_rss(watches.clone(), config.kill_grace));
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let records = records::Records::open(&config.work_dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot use the work directory {}: {e} (--work-dir)",
            config.work_dir.display()
        )
    })?;
    // Before registering: what a killed agent left behind is killed (or its ends reported).
    let recovered = records
        .recover(&config.node_id, Duration::from_secs(10))
        .await;
    if !recovered.is_empty() {
        tracing::warn!(
            jobs = recovered.len(),
            "found the jobs of a previous agent on this work directory; their ends are \
             reported at the first heartbeat"
        );
    }
    // Jobs' output, environment and directories, and the agent's journal and lease: for this
    // user only (the directories were created with the umask's modes, 0755 by default).
    for dir in ["state", "jobs"] {
        let path = config.work_dir.join(dir);
        private_dir(&path).map_err(|e| {
            anyhow::anyhow!(
                "cannot make {} private to the agent's user: {e} (--work-dir)",
                path.display()
            )
        })?;
    }
    let lease = keeper::LeaseFile::open(&config.work_dir.join("state").join("lease"))
        .map_err(|e| anyhow::anyhow!("cannot write the agent's lease: {e}"))?;
    let keeper = config.keeper.clone().unwrap_or_else(default_keeper);
    let spawner = spawner::Spawner::start(
        keeper,
        keeper::spawner_args(Some(lease.path()), config.kill_grace, config.max_job_output),
        &JOB_ENV_REMOVED,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let metrics = AgentMetrics::default();
    let metrics_task = match &config.metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (--metrics-listen): {e}"))?;
            tracing::info!(
                "metrics at http://{}/metrics",
                listener
                    .local_addr()
                    .map_or(addr.clone(), |a| a.to_string())
            );
            let registry = metrics.registry(&config.node_id);
            Some(tokio::spawn(metrics::serve(listener, registry)))
        }
        None => None,
    };
    let mut agent = Agent {
        metrics,
        client: ApiClient::with_timeout(&config.server, config.token.clone(), REQUEST_TIMEOUT),
        config,
        jobs: BTreeMap::new(),
        done_tx,
        done_rx,
        unreported: recovered,
        memory,
        watches,
        records,
        credential: None,
        next_sweep: std::time::Instant::now(),
        wanted: Vec::new(),
        finished_dirs: BTreeMap::new(),
        output_turn: Default::default(),
        spawner,
        stopping: false,
        waiting: VecDeque::new(),
        lease,
        node_timeout: None,
        token_refusals: 0,
    };
    tokio::pin!(shutdown);
    // Some(period) once registered.
    let mut period: Option<Duration> = None;
    let mut outage: Option<Outage> = None;
    // Set when the agent cannot go on: it stops its jobs and returns it.
    let mut fatal: Option<anyhow::Error> = None;
    // The server answered that it does not know this node: register at once (its jobs live
    // only as long as the lease).
    let mut register_now = false;
    loop {
        let wait = match (&outage, period) {
            _ if register_now => Duration::ZERO,
            (Some(o), _) => o.backoff,
            (None, Some(p)) => p,
            (None, None) => MIN_BACKOFF,
        };
        register_now = false;
        // Registered and reachable: a job that ends is reported at once (with any others that
        // end within JOB_END_COALESCE_MS), not at the next periodic heartbeat, so that its
        // slot turns over in milliseconds.
        let report_ends = period.is_some() && outage.is_none();
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep(wait) => {}
            Some(done) = agent.done_rx.recv(), if report_ends => {
                agent.finished(done);
                tokio::time::sleep(Duration::from_millis(JOB_END_COALESCE_MS)).await;
            }
        }
        if period.is_none() {
            match agent.register().await {
                Ok(p) => period = Some(p),
                // Refusals that no retry can change: the agent stops, saying what to fix.
                // A refused token is retried (a rotation, a failover to a server with
                // another token): the jobs run on until the lease runs out.
                Err(e) if e.code() == Some(codes::AUTHENTICATION) => {
                    agent.metrics.server_errors.inc();
                    agent.token_refused(&e);
                    Outage::failed(&mut outage, "cannot register", &e, agent.jobs.len());
                    continue;
                }
                Err(e) if e.code() == Some(codes::BAD_REQUEST) => {
                    fatal = Some(anyhow::anyhow!(
                        "the server refused to register node {:?}: {e}",
                        agent.config.node_id
                    ));
                    break;
                }
                Err(e) if e.code() == Some(codes::NODE_IN_USE) => {
                    fatal = Some(anyhow::anyhow!(
                        "the server refused to register node {:?}: {e}",
                        agent.config.node_id
                    ));
                    break;
                }
                Err(e) => {
                    agent.metrics.server_errors.inc();
                    Outage::failed(&mut outage, "cannot register", &e, agent.jobs.len());
                    continue;
                }
            }
        }
        agent.collect_finished();
        let hb = Heartbeat {
            node_id: agent.config.node_id.clone(),
            node_credential: agent.credential.clone(),
            running: agent
                .jobs
                .keys()
                .chain(agent.waiting.iter().map(|s| &s.job))
                .cloned()
                .collect(),
            finished: agent.unreported.clone(),
            output: agent.collect_output(),
            leaving: false,
        };
        let sent = std::time::Instant::now();
        let sent_ns = keeper::boottime_ns();
        let result = agent.client.heartbeat(&hb).await;
        // Accepted, or refused by a server that cannot write (it loses no node meanwhile and
        // gives every node a whole node timeout once it can): the jobs may go on.
        if result.is_ok()
            || result
                .as_ref()
                .is_err_and(|e| e.code() == Some(codes::READ_ONLY))
        {
            agent.renew_lease(sent_ns);
        }
        if result.is_ok() {
            agent
                .metrics
                .heartbeat_duration
                .observe(sent.elapsed().as_secs_f64());
        }
        match result {
            Ok(reply) => {
                if let Some(o) = outage.take() {
                    tracing::warn!(
                        after_s = o.since.elapsed().as_secs_f64(),
                        attempts = o.attempts,
                        reported_finished = hb.finished.len(),
                        running = hb.running.len(),
                        "server reachable again: reported the jobs that ended meanwhile; the \
                         server keeps the ones still running"
                    );
                }
                for f in agent.unreported.drain(..hb.finished.len()) {
                    agent.records.reported(&f.job);
                    agent.finished_dirs.remove(&f.job);
                }
                agent.wanted = reply.output;
                for a in reply.abort {
                    agent.kill(&a);
                }
                for i in reply.interrupt {
                    agent.interrupt(&i.job, i.signal.as_deref());
                }
                for s in reply.start {
                    agent.enqueue(s);
                }
                agent.sweep_job_dirs();
            }
            Err(e) if e.code() == Some(codes::NODE_NOT_REGISTERED) => {
                // The server lost this node (it timed out, or the server restarted without
                // it). Jobs keep running: after registering, the next heartbeat reports them
                // and the server kills those it no longer has.
                tracing::warn!(
                    running = agent.jobs.len(),
                    "the server does not know this node; registering again (it restarted, or \
                     lost the node)"
                );
                period = None;
                // It answers: no backoff (the outage, if any, ends with the next heartbeat).
                register_now = true;
            }
            Err(e) if e.code() == Some(codes::AUTHENTICATION) => {
                // The server refused this node's credential (another registration of the
                // same node id replaced it) or the agents' token. Registering again gets a
                // new credential; a wrong token fails there, and is retried with backoff.
                tracing::warn!(
                    running = agent.jobs.len(),
                    "heartbeat refused: {e}; registering again"
                );
                period = None;
                register_now = true;
            }
            Err(e) => {
                agent.metrics.server_errors.inc();
                Outage::failed(&mut outage, "heartbeat failed", &e, agent.jobs.len());
            }
        }
    }
    // Give the groups their grace period to exit.
    agent.stop_all().await;
    if period.is_some() && fatal.is_none() {
        agent.leave().await;
    }
    poller.abort();
    if let Some(t) = metrics_task {
        t.abort();
    }
    match fatal {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_streams_tail_says_what_it_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout");
        std::fs::write(&path, "short\n").unwrap();
        assert_eq!(tail(&path, "stdout"), "short\n");
        let mut long = "x".repeat(TAIL_BYTES as usize + 10);
        long.push_str("end\n");
        std::fs::write(&path, &long).unwrap();
        let t = tail(&path, "stdout");
        let (first, rest) = t.split_once('\n').unwrap();
        assert!(
            first.starts_with("[fairsched: the first 14 bytes of stdout are not shown"),
            "{first}"
        );
        assert_eq!(rest.len() as u64, TAIL_BYTES);
        assert!(rest.ends_with("xend\n"));
        assert_eq!(tail(&dir.path().join("none"), "stdout"), "");
    }

    #[test]
    fn an_outage_says_no_job_runs_when_none_does() {
        assert_eq!(jobs_keep_running(0), "no job runs here");
        assert_eq!(jobs_keep_running(1), "its job keeps running");
        assert_eq!(jobs_keep_running(3), "its jobs keep running");
    }

    #[test]
    fn a_chunk_is_the_bytes_from_the_offset_or_the_newest_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout");
        std::fs::write(&path, b"0123456789").unwrap();
        let read = |from, max| {
            let c = read_chunk(&path, from, max).unwrap();
            (c.offset, String::from_utf8(c.bytes().unwrap()).unwrap())
        };
        assert_eq!(read(Some(4), 100), (4, "456789".into()));
        assert_eq!(read(None, 3), (7, "789".into()), "the newest");
        assert_eq!(
            read(Some(2), 3),
            (7, "789".into()),
            "more than max: the newest"
        );
        assert_eq!(read(Some(10), 3), (10, "".into()), "nothing new");
        assert_eq!(
            read(Some(99), 3),
            (7, "789".into()),
            "past the end: the newest"
        );
        assert!(read_chunk(&dir.path().join("none"), None, 3).is_none());
    }
}
