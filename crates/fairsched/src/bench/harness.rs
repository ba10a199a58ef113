//! The harness of the whole-system benchmarks (`bench server`, `bench load`): a real server on
//! its own runtime or as a child process, simulated agents that speak the real protocol,
//! counters over a measurement window, and the processes' CPU time, memory and open-file
//! limit; and the child processes of `bench trivial-jobs`.

use anyhow::{Context, anyhow, bail};
use fairsched_api::client::{ApiClient, ClientError};
use fairsched_api::{FinishedJob, Heartbeat, JobState, RegisterNode, codes};
use fairsched_resources::Resources;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
pub struct ErrorSample {
    pub message: String,
    pub count: u64,
}

/// Counters the agents share. Window counters only count what happens inside the window.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) placements: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) heartbeats: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// Whole run, for the progress line.
    pub(crate) all_placements: AtomicU64,
    pub(crate) all_heartbeats: AtomicU64,
    pub(crate) all_errors: AtomicU64,
    pub(crate) error_messages: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    fn error(&self, in_window: bool, what: &str, e: &ClientError) {
        self.all_errors.fetch_add(1, Ordering::Relaxed);
        if in_window {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let mut messages = self.error_messages.lock().expect("not poisoned");
        // With the causes: reqwest's own message does not say "timed out" or "refused".
        let mut message = format!("{what}: {e}");
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !message.contains(&cause_text) {
                message.push_str(&format!(": {cause_text}"));
            }
            source = cause.source();
        }
        if let Some(n) = messages.get_mut(&message) {
            *n += 1;
        } else if messages.len() < 64 {
            messages.insert(message, 1);
        }
    }
}

/// When the window starts and ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Window {
    pub(crate) fn contains(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }
}

/// Where [`with_server`] runs the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerMode {
    /// On its own runtime in this process (threads [`SERVER_THREADS`]): both ends of every
    /// connection are in this process, and the server's CPU time is its threads'.
    InProcess,
    /// As a child process of this binary, `fairsched server --config server.toml`: this
    /// process holds one end of each connection, the server the other.
    Process,
}

/// Open files this process needs for `connections` loopback connections (agents and
/// clients), with some spare: both ends of each with the server in this process, one end
/// otherwise (and the server process as many for the other ends).
fn files_needed(connections: u32, mode: ServerMode) -> u64 {
    let ends = match mode {
        ServerMode::InProcess => 2,
        ServerMode::Process => 1,
    };
    ends * u64::from(connections) + 512
}

/// Raises the soft open-file limit to what the run needs, or fails naming the limit. A server
/// process started afterwards ([`ServerMode::Process`]) inherits the raised limit, which is
/// also what it needs.
pub(crate) fn raise_open_file_limit(connections: u32, mode: ServerMode) -> anyhow::Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = files_needed(connections, mode);
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit(RLIMIT_NOFILE)")?;
    if soft >= need {
        return Ok(());
    }
    if hard < need {
        let why = match mode {
            ServerMode::InProcess => {
                "both ends of one connection per agent or client, with the server in this process"
            }
            ServerMode::Process => {
                "one end of one connection per agent or client, in this process and as many in \
                 the server's"
            }
        };
        bail!(
            "{connections} connections (simulated agents and API clients) need about {need} \
             open files ({why}); the hard limit of open files (RLIMIT_NOFILE, `ulimit -Hn`) is \
             {hard}: raise it or use fewer --agents"
        );
    }
    setrlimit(Resource::RLIMIT_NOFILE, need, hard)
        .with_context(|| format!("raising the open-file limit (RLIMIT_NOFILE) to {need}"))?;
    Ok(())
}

/// CPU seconds of this process's threads whose name starts with `prefix` (Linux; `None`
/// elsewhere).
pub(crate) fn threads_cpu_s(prefix: &str) -> Option<f64> {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()?;
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !comm.starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces): state is field 3, utime 14,
        // stime 15.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0);
        let stime: u64 = fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
        total += utime + stime;
    }
    Some(total as f64 / ticks as f64)
}

/// Peak resident memory of the whole process so far, in bytes (Linux reports KiB).
pub(crate) fn process_peak_rss_bytes() -> Option<u64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    u64::try_from(usage.max_rss()).ok().map(|kib| kib * 1024)
}

/// CPU seconds of the whole process.
pub(crate) fn process_cpu_s() -> Option<f64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(secs(usage.user_time()) + secs(usage.system_time()))
}

/// CPU seconds of process `pid`: its own (every thread), and its children's that it has
/// waited for (Linux, `/proc/PID/stat`).
pub(crate) fn pid_cpu_s(pid: u32) -> Option<(f64, f64)> {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3; utime 14, stime 15, cutime 16, cstime 17.
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let own = field(11)? + field(12)?;
    let children = field(13)? + field(14)?;
    Some((own as f64 / ticks as f64, children as f64 / ticks as f64))
}

/// The PIDs of the live children of process `pid` (Linux: each process's parent in
/// `/proc/PID/stat`).
pub(crate) fn child_pids(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// Peak resident memory of process `pid` so far, in bytes (Linux: `VmHWM` in
/// `/proc/PID/status`).
pub(crate) fn pid_peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    vm_hwm_bytes(&status)
}

/// `VmHWM` of a `/proc/PID/status` text, in bytes.
fn vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib * 1024)
}

/// A child process, stopped by its PID when dropped: SIGTERM, then SIGKILL after 10 s.
#[derive(Debug)]
pub(crate) struct Proc {
    pub(crate) name: String,
    pub(crate) child: Child,
    /// Its standard error.
    pub(crate) log: PathBuf,
}

impl Proc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the process; a warning when it did not end by itself within the grace period.
    pub(crate) fn stop(&mut self, grace: Duration) -> Option<String> {
        use nix::sys::signal::{Signal, kill};
        if let Ok(Some(_)) = self.child.try_wait() {
            return None;
        }
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Some(format!(
            "{} (pid {}) did not stop within {} s of SIGTERM and was killed; its log: {}",
            self.name,
            self.pid(),
            grace.as_secs(),
            self.log.display()
        ))
    }

    /// The exit status, if it has ended.
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(warning) = self.stop(Duration::from_secs(10)) {
            eprintln!("warning: {warning}");
        }
    }
}

/// The last lines of a log file, for an error message.
pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n  ");
    if tail.is_empty() {
        format!("{} is empty", path.display())
    } else {
        format!("{} ends:\n  {tail}", path.display())
    }
}

/// Starts `exe server --config config` (`exe`: this fairsched binary) with its standard
/// output in `dir/server.out` and its log (`FAIRSCHED_LOG=warn`) in `dir/server.log`, and
/// waits (at most 30 s) for the line with its address: the process and its URL.
///
/// The server gets SIGTERM when this process ends, even when it is killed
/// ([`crate::server::EXIT_WITH_PARENT_ENV`]): more exactly, when the thread that calls this
/// ends, so call it from the main thread.
pub(crate) fn start_server_process(
    exe: &Path,
    dir: &Path,
    config: &Path,
) -> anyhow::Result<(Proc, String)> {
    let out_path = dir.join("server.out");
    let log = dir.join("server.log");
    let child = Command::new(exe)
        .arg("server")
        .arg("--config")
        .arg(config)
        .env("FAIRSCHED_LOG", "warn")
        .env(
            crate::server::EXIT_WITH_PARENT_ENV,
            std::process::id().to_string(),
        )
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| {
            format!(
                "cannot start `{} server`: is this fairsched binary still there and \
                 executable?",
                exe.display()
            )
        })?;
    let mut server = Proc {
        name: "fairsched server".into(),
        child,
        log: log.clone(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        if let Some(url) = text
            .lines()
            .filter(|l| l.contains("listening on"))
            .find_map(|l| l.split_whitespace().find(|w| w.starts_with("http://")))
        {
            return Ok((server, url.to_string()));
        }
        if let Some(status) = server.exited() {
            bail!(
                "`{} server --config {}` exited ({status}) before it listened; {}",
                exe.display(),
                config.display(),
                log_tail(&log)
            );
        }
        if Instant::now() > deadline {
            bail!(
                "`{} server` did not print its address within 30 s; {}",
                exe.display(),
                log_tail(&log)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) const SERVER_THREADS: &str = "fsb-server";

/// CPU time of the server's threads: its runtime's ([`SERVER_THREADS`]) and its store writer's.
pub(crate) fn server_cpu_s() -> Option<f64> {
    Some(
        threads_cpu_s(SERVER_THREADS)?
            + threads_cpu_s(fairsched_server::STORE_WRITER_THREAD).unwrap_or(0.0),
    )
}
pub(crate) const AGENT_THREADS: &str = "fsb-agents";

pub(crate) fn runtime(name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()
        .with_context(|| format!("cannot start the {name} runtime"))
}

pub(crate) fn pool_name(p: u32) -> String {
    format!("bench-{p}")
}

/// The shape of a benchmark's pool tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeShape {
    /// Every pool under the root.
    Flat,
    /// Three levels, as a company's tree: divisions (with strong guarantees that share 60 % of
    /// the cluster's cpus) hold departments (80 % of their division's guarantee), which hold
    /// the teams where operations run, every other one a FIFO pool.
    Deep,
}

/// The pools of a benchmark tree with `teams` pools where operations run ([`pool_name`]),
/// `ops_per_team` operations each at most, on a cluster of `total_cpu` cpus. Pools above the
/// teams may hold and run every operation below them.
pub(crate) fn bench_pools(
    shape: TreeShape,
    teams: u32,
    ops_per_team: u32,
    total_cpu: f64,
) -> BTreeMap<String, fairsched_config::PoolNode> {
    use fairsched_config::{PoolNode, SchedulingMode};
    use fairsched_resources::{PartialResources, ResourceKind};
    let team = |p: u32| {
        let mut node = PoolNode::default();
        if shape == TreeShape::Deep && p % 2 == 1 {
            node.mode = SchedulingMode::Fifo;
        }
        (pool_name(p), node)
    };
    if shape == TreeShape::Flat {
        return (0..teams).map(team).collect();
    }
    let departments = teams.div_ceil(10);
    let divisions = departments.div_ceil(10);
    let cpu = |amount: f64| PartialResources::EMPTY.with(ResourceKind::Cpu, amount.floor());
    let division_cpu = total_cpu * 0.6 / f64::from(divisions);
    let mut tree = BTreeMap::new();
    for v in 0..divisions {
        let dept_range = v * 10..((v + 1) * 10).min(departments);
        let dept_cpu = division_cpu * 0.8 / dept_range.len().max(1) as f64;
        let mut division = PoolNode {
            strong_guarantee_resources: cpu(division_cpu),
            ..PoolNode::default()
        };
        for d in dept_range {
            let team_range = d * 10..((d + 1) * 10).min(teams);
            let below = ops_per_team * team_range.len() as u32;
            let department = PoolNode {
                strong_guarantee_resources: cpu(dept_cpu),
                max_operation_count: Some(below),
                max_running_operation_count: Some(below),
                pools: team_range.map(team).collect(),
                ..PoolNode::default()
            };
            division.pools.insert(format!("bench-dept-{d}"), department);
        }
        let below: u32 = division
            .pools
            .values()
            .filter_map(|d| d.max_operation_count)
            .sum();
        division.max_operation_count = Some(below);
        division.max_running_operation_count = Some(below);
        tree.insert(format!("bench-division-{v}"), division);
    }
    tree
}

/// The sum and count of a histogram on a Prometheus text page (`name_sum`, `name_count`), of
/// the series with `labels` (`""` or e.g. `{step="snapshot"}`).
pub(crate) fn histogram_sum_count(page: &str, name: &str, labels: &str) -> Option<(f64, u64)> {
    let value = |suffix: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("{name}{suffix}{labels} ")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    Some((value("_sum")?, value("_count")? as u64))
}

/// The server a benchmark drives ([`with_server`]).
#[derive(Clone, Debug)]
pub(crate) struct BenchServer {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// The agents' token (`agent_token`).
    pub(crate) token: String,
    /// The server process's PID ([`ServerMode::Process`]); `None` in this process.
    pub(crate) pid: Option<u32>,
}

impl BenchServer {
    /// CPU seconds the server has used so far: its process's (every thread), or in this
    /// process its threads' ([`server_cpu_s`]).
    pub(crate) fn cpu_s(&self) -> Option<f64> {
        match self.pid {
            Some(pid) => pid_cpu_s(pid).map(|(own, _)| own),
            None => server_cpu_s(),
        }
    }

    /// Peak resident memory of the server process so far, in bytes; `None` with the server
    /// in this process (where it cannot be told apart).
    pub(crate) fn peak_rss_bytes(&self) -> Option<u64> {
        self.pid.and_then(pid_peak_rss_bytes)
    }
}

/// The harness of the whole-system benchmarks: a store in `data_dir` (default: in a new
/// temporary directory named `prefix...`, removed at the end), a real server built from
/// `config` (given the store's directory and the agents' token, a random secret) and run as
/// `mode` says, and `drive` (the agents or clients, given the server) on a runtime of its own
/// ([`AGENT_THREADS`]); then the server is stopped (at most 10 s; a failure to stop is a
/// warning) and `drive`'s result returned.
///
/// [`ServerMode::Process`]: the configuration is written to `server.toml` in the temporary
/// directory, where the server's log (`server.log`) goes too; a server that exits during the
/// run, or SIGINT or SIGTERM to this process, ends `drive` with an error. The server is
/// stopped by its PID (SIGTERM, then SIGKILL after 10 s), also when `drive` fails or panics,
/// and gets SIGTERM if this process dies ([`start_server_process`]). Call this from the main
/// thread.
pub(crate) fn with_server<T, F>(
    mode: ServerMode,
    data_dir: Option<&Path>,
    prefix: &str,
    config: impl FnOnce(&Path, &str) -> anyhow::Result<fairsched_server::ServerConfig>,
    drive: impl FnOnce(BenchServer) -> F,
) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let temp = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("cannot create a temporary directory")?;
    let data_dir = data_dir.map_or_else(|| temp.path().join("store"), Path::to_path_buf);
    let token = fairsched_server::auth::random_secret()
        .map_err(|e| anyhow!("cannot generate the agents' token: {e}"))?;
    let config = config(&data_dir, &token)?;
    match mode {
        ServerMode::InProcess => serve_in_process(&config, token, drive),
        ServerMode::Process => serve_as_child(temp.path(), &config, token, drive),
    }
}

/// [`with_server`] with [`ServerMode::InProcess`].
fn serve_in_process<T, F>(
    config: &fairsched_server::ServerConfig,
    token: String,
    drive: impl FnOnce(BenchServer) -> F,
) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let server_rt = runtime(SERVER_THREADS)?;
    let drive_rt = runtime(AGENT_THREADS)?;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = server_rt.block_on(fairsched_server::Server::bind(config))?;
    let url = format!("http://{}", server.local_addr()?);
    let server_task = server_rt.spawn(server.serve(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));

    let result = drive_rt.block_on(drive(BenchServer {
        url,
        token,
        pid: None,
    }));

    let _ = stop_tx.send(true);
    let stopped = server_rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), server_task).await });
    match stopped {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => eprintln!("warning: the server ended with an error: {e:#}"),
        Ok(Err(e)) => eprintln!("warning: the server task failed: {e}"),
        Err(_) => eprintln!("warning: the server did not stop within 10 s"),
    }
    drive_rt.shutdown_timeout(Duration::from_secs(2));
    server_rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// Writes `config` to `dir/server.toml` (mode 0600: it holds the agents' token) and checks
/// that the server reads it back unchanged: the file's path.
pub(crate) fn write_server_config(
    dir: &Path,
    config: &fairsched_server::ServerConfig,
) -> anyhow::Result<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join("server.toml");
    let text = toml::to_string(config).context("cannot write the server's configuration")?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(
        file,
        "# The server's file (fairsched server --config), written by a fairsched benchmark.\n"
    )
    .and_then(|()| file.write_all(text.as_bytes()))
    .with_context(|| format!("cannot write {}", path.display()))?;
    let read = fairsched_server::ServerConfig::from_file(&path)?;
    if read != *config {
        bail!(
            "{}: the server would not read the configuration the benchmark wrote",
            path.display()
        );
    }
    Ok(path)
}

/// [`with_server`] with [`ServerMode::Process`]: `fairsched server` with its files in `dir`.
fn serve_as_child<T, F>(
    dir: &Path,
    config: &fairsched_server::ServerConfig,
    token: String,
    drive: impl FnOnce(BenchServer) -> F,
) -> anyhow::Result<T>
where
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    let exe = std::env::current_exe()
        .context("cannot find this fairsched binary's path to start the server")?;
    let path = write_server_config(dir, config)?;
    let drive_rt = runtime(AGENT_THREADS)?;
    // Stopped by its PID when dropped, also on a panic.
    let (mut server, url) = start_server_process(&exe, dir, &path)?;
    let pid = server.pid();
    let log = server.log.clone();
    let result = drive_rt.block_on(async {
        let interrupted = crate::runtime::stop_signal();
        let server_exit = async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let Some(status) = server.exited() {
                    return status;
                }
            }
        };
        tokio::select! {
            result = drive(BenchServer { url, token, pid: Some(pid) }) => result,
            () = interrupted => Err(anyhow!(
                "interrupted (SIGINT or SIGTERM): the run and its server (pid {pid}) are stopped"
            )),
            status = server_exit => Err(anyhow!(
                "the server (pid {pid}) exited during the run ({status}); {}",
                log_tail(&log)
            )),
        }
    });
    // The agents' connections close with their runtime; then the server is stopped.
    drive_rt.shutdown_timeout(Duration::from_secs(2));
    if let Some(warning) = server.stop(Duration::from_secs(10)) {
        eprintln!("warning: {warning}");
    } else if let Some(status) = server.exited()
        && !status.success()
        && result.is_ok()
    {
        eprintln!(
            "warning: the server (pid {pid}) ended with {status}; {}",
            log_tail(&log)
        );
    }
    result
}

/// What every simulated agent shares.
#[derive(Clone, Debug)]
pub(crate) struct AgentSetup {
    pub(crate) client: ApiClient,
    pub(crate) period: Duration,
    pub(crate) job: Duration,
    pub(crate) resources: Resources,
    pub(crate) counters: Arc<Counters>,
    pub(crate) window: Window,
}

/// A small deterministic generator for heartbeat jitter (no randomness crate needed).
pub(crate) fn next_jitter(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 33) as f64) / f64::from(1u32 << 31)
}

/// One simulated agent: registers at `first`, then heartbeats every period (±10 %) until
/// stopped. Returns the latencies (µs) of its heartbeats answered in the window.
pub(crate) async fn simulate_agent(
    setup: AgentSetup,
    index: u32,
    first: Instant,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<u32> {
    let node_id = format!("bench-node-{index}");
    let counters = &setup.counters;
    let mut latencies = Vec::new();
    let mut rng = u64::from(index) ^ 0x9e37_79b9_7f4a_7c15;
    // The node's credential, once registered.
    let mut registered: Option<String> = None;
    // Running jobs: id and when they finish.
    let mut running: Vec<(String, Instant)> = Vec::new();
    // Finished jobs not yet accepted by the server.
    let mut finished: Vec<FinishedJob> = Vec::new();
    let mut next = first;
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = tokio::time::sleep_until(next.into()) => {}
        }
        let jitter = 0.9 + 0.2 * next_jitter(&mut rng);
        next += setup.period.mul_f64(jitter);
        if registered.is_none() {
            let sent = Instant::now();
            let node = RegisterNode {
                node_id: node_id.clone(),
                resources: setup.resources,
                tags: Vec::new(),
                agent_id: None,
            };
            let register = setup.client.register(&node);
            // A request still waiting when the run ends is dropped: it is past the window.
            let reply = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                r = register => r,
            };
            match reply {
                Ok(reply) => registered = Some(reply.node_credential),
                Err(e) => {
                    counters.error(setup.window.contains(sent), "register", &e);
                    continue;
                }
            }
        }
        let now = Instant::now();
        let mut still = Vec::with_capacity(running.len());
        for (job, end) in running.drain(..) {
            if end <= now {
                finished.push(FinishedJob::completed(job));
            } else {
                still.push((job, end));
            }
        }
        running = still;
        let hb = Heartbeat {
            node_id: node_id.clone(),
            node_credential: registered.clone(),
            running: running.iter().map(|(j, _)| j.clone()).collect(),
            finished: std::mem::take(&mut finished),
            output: Vec::new(),
            leaving: false,
        };
        let sent = Instant::now();
        let reply = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            r = setup.client.heartbeat(&hb) => r,
        };
        let got = Instant::now();
        let in_window = setup.window.contains(got);
        counters.all_heartbeats.fetch_add(1, Ordering::Relaxed);
        if in_window {
            counters.heartbeats.fetch_add(1, Ordering::Relaxed);
            let us = got
                .duration_since(sent)
                .as_micros()
                .min(u128::from(u32::MAX)) as u32;
            latencies.push(us);
        }
        match reply {
            Ok(reply) => {
                let completed = hb
                    .finished
                    .iter()
                    .filter(|f| f.outcome == JobState::Completed)
                    .count() as u64;
                let started = reply.start.len() as u64;
                counters
                    .all_placements
                    .fetch_add(started, Ordering::Relaxed);
                if in_window {
                    counters.placements.fetch_add(started, Ordering::Relaxed);
                    counters.completed.fetch_add(completed, Ordering::Relaxed);
                }
                let end = got + setup.job;
                running.extend(reply.start.into_iter().map(|s| (s.job, end)));
                // Aborted and interrupted jobs end at once (a simulated job obeys at once).
                let mut ended = |job: &str| {
                    if let Some(at) = running.iter().position(|(j, _)| j == job) {
                        running.swap_remove(at);
                        finished.push(FinishedJob {
                            job: job.to_string(),
                            outcome: JobState::Aborted,
                            exit_code: None,
                            signal: Some(15),
                            reason: None,
                            stdout_tail: String::new(),
                            stderr_tail: String::new(),
                        });
                    }
                };
                for job in &reply.abort {
                    ended(job);
                }
                for i in &reply.interrupt {
                    ended(&i.job);
                }
            }
            Err(e) => {
                counters.error(in_window, "heartbeat", &e);
                if matches!(
                    e.code(),
                    Some(codes::NODE_NOT_REGISTERED | codes::AUTHENTICATION)
                ) {
                    registered = None;
                }
                // Report them again next time.
                finished = hb.finished;
            }
        }
    }
    latencies
}

/// Prints a bench's report, as JSON or as its table, or its error; the command's exit status.
pub(crate) fn print_report<R: Serialize>(
    result: anyhow::Result<R>,
    json: bool,
    table: impl Fn(&R) -> String,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    match result {
        Ok(report) => {
            if json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                print!("{}", table(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_is_read_from_proc_status() {
        let status = "Name:\tfairsched\nVmPeak:\t  300 kB\nVmHWM:\t   1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(vm_hwm_bytes(status), Some(1234 * 1024));
        assert_eq!(vm_hwm_bytes("Name:\tx\n"), None);
        // This process has one.
        assert!(pid_peak_rss_bytes(std::process::id()).is_some_and(|b| b > 0));
    }

    #[test]
    fn open_file_need_grows_with_agents() {
        assert_eq!(files_needed(5000, ServerMode::InProcess), 10_512);
        assert_eq!(files_needed(10_000, ServerMode::Process), 10_512);
    }

    use fairsched_config::{PoolTreeConfig, PoolTrees, SchedulingMode};

    fn count(pools: &BTreeMap<String, fairsched_config::PoolNode>, out: &mut (u32, u32, u32)) {
        for (name, node) in pools {
            if name.starts_with("bench-dept-") || name.starts_with("bench-division-") {
                out.2 += 1;
            } else {
                out.0 += 1;
                if node.mode == SchedulingMode::Fifo {
                    out.1 += 1;
                }
            }
            count(&node.pools, out);
        }
    }

    /// Benchmark trees are valid configurations with the pools they promise.
    #[test]
    fn bench_trees_are_valid() {
        // (shape, teams, total cpu, expected (teams, fifo teams, pools above teams))
        let cases = [
            (TreeShape::Flat, 5, 20.0, (5, 0, 0)),
            (TreeShape::Deep, 1, 4.0, (1, 0, 2)),
            (TreeShape::Deep, 100, 8_000.0, (100, 50, 11)),
            (TreeShape::Deep, 10_000, 40_000.0, (10_000, 5_000, 1_100)),
        ];
        for (shape, teams, cpu, want) in cases {
            let mut tree = PoolTreeConfig::default();
            tree.config.max_operation_count = 1_000_000;
            tree.config.max_running_operation_count = 1_000_000;
            tree.pools = bench_pools(shape, teams, 10, cpu);
            let mut got = (0, 0, 0);
            count(&tree.pools, &mut got);
            assert_eq!(got, want, "{shape:?} {teams}");
            fairsched_config::validate_pool_trees(&PoolTrees::single("default", tree))
                .unwrap_or_else(|e| panic!("{shape:?} {teams}: {e}"));
        }
    }

    #[test]
    fn histogram_sum_and_count_are_read_from_a_metrics_page() {
        let page = "# HELP x_seconds Time.\n# TYPE x_seconds histogram\n\
                    x_seconds_sum 1.5\nx_seconds_count 3\nx_seconds_bucket{le=\"0.1\"} 1\n";
        assert_eq!(histogram_sum_count(page, "x_seconds", ""), Some((1.5, 3)));
        assert_eq!(histogram_sum_count(page, "y_seconds", ""), None);
        let page = "z_seconds_sum{step=\"a\"} 2\nz_seconds_count{step=\"a\"} 4\n\
                    z_seconds_sum{step=\"b\"} 1\nz_seconds_count{step=\"b\"} 1\n";
        assert_eq!(
            histogram_sum_count(page, "z_seconds", "{step=\"a\"}"),
            Some((2.0, 4))
        );
        assert_eq!(histogram_sum_count(page, "z_seconds", ""), None);
    }
}
