//! A cluster of real processes on 127.0.0.1 for end-to-end tests: `fairsched server` with a
//! given configuration and `fairsched agent`s, each started by the test and stopped by its PID,
//! driven through the `fairsched` CLI. Every wait is bounded.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_fairsched");

/// A process killed by its PID when dropped (a failing test leaves nothing behind).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    /// Waits (at most `limit`) for the process to exit; its success.
    pub fn wait(mut self, limit: Duration) -> bool {
        self.exit_status(Instant::now(), limit, "the process did not exit")
            .success()
    }

    /// Waits for the process to exit until `limit` after `since` (else fails the test with
    /// `what`); how it exited.
    pub fn exit_status(
        &mut self,
        since: Instant,
        limit: Duration,
        what: &str,
    ) -> std::process::ExitStatus {
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(since.elapsed() < limit, "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts `cmd` (a `fairsched server`, possibly through a wrapper that execs it) with its
/// stdout piped and waits for its first line, `fairsched server listening on URL`: the
/// process (stopped by its PID when dropped) and the URL.
pub fn spawn_server(cmd: &mut Command) -> (Proc, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fairsched server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the server prints its address");
    let server = Proc(child);
    assert!(line.contains("listening"), "{line}");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (server, url)
}

/// Polls `done` every 100 ms until it holds; fails the test after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs the CLI against the server at `url` with `env` (no config file, no token unless
/// `env` sets one).
pub fn run_cli(url: &str, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("FAIRSCHED_SERVER", url)
        .env_remove("FAIRSCHED_CONFIG")
        .env_remove("FAIRSCHED_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the CLI")
}

/// The CLI must fail with exit status 1; its standard error.
pub fn cli_fails(url: &str, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = run_cli(url, env, args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "fairsched {args:?} should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the CLI against the server at `url` (no config file); its standard output. Fails the
/// test when the command fails.
pub fn cli(url: &str, args: &[&str]) -> String {
    let out = run_cli(url, &[], args);
    assert!(
        out.status.success(),
        "fairsched {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// [`cli`] with `--json`, parsed.
pub fn json(url: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&cli(url, &all)).expect("JSON output")
}

/// A server and its agents.
pub struct Cluster {
    // Dropped in this order: the agents, the server, then the files.
    /// With their node ids.
    agents: Vec<(String, Proc)>,
    /// What the agents send as `--token` (the file's `agent_token`).
    agent_token: Option<String>,
    server: Option<Proc>,
    /// Holds the server's data (`server/`), each agent's work directory (`<node>/`) and logs
    /// (`server.log`, `<node>.log`). Kept when the test fails.
    pub dir: tempfile::TempDir,
    pub url: String,
}

impl Cluster {
    /// Starts `fairsched server` with `config` (TOML tables: `[scheduler]`, `[pool_trees]`, ...;
    /// `listen` and `data_dir` are added) and one agent per `(node id, resources)`, and waits
    /// until every node is registered.
    pub fn start(config: &str, nodes: &[(&str, &str)]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("server.toml");
        std::fs::write(
            &config_path,
            format!(
                "listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n{config}",
                dir.path().join("server")
            ),
        )
        .unwrap();
        let mut child = Command::new(BIN)
            .arg("server")
            .arg("--config")
            .arg(&config_path)
            .env("FAIRSCHED_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("server.log")).unwrap())
            .spawn()
            .expect("start fairsched server");
        let stdout = child.stdout.take().unwrap();
        let server = Proc(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server prints its address");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        let mut cluster = Cluster {
            url,
            dir,
            server: Some(server),
            agents: Vec::new(),
            // The agents get the file's `agent_token`, if it has one.
            agent_token: config
                .lines()
                .find_map(|l| l.trim().strip_prefix("agent_token = "))
                .map(|t| t.trim().trim_matches('"').to_string()),
        };
        for (node, resources) in nodes {
            cluster.start_agent(node, resources);
        }
        wait_for("every node to register", Duration::from_secs(30), || {
            cluster.json(&["node", "list"]).as_array().unwrap().len() == nodes.len()
        });
        cluster
    }

    /// Starts `fairsched agent` for `node` with `resources` (its work directory and log,
    /// appended to, under the cluster's directory).
    pub fn start_agent(&mut self, node: &str, resources: &str) {
        let url = self.url.clone();
        self.start_agent_at(node, resources, &url);
    }

    /// [`Cluster::start_agent`] with `--server servers` (a URL or a comma-separated list).
    pub fn start_agent_at(&mut self, node: &str, resources: &str, servers: &str) {
        self.start_agent_with(node, resources, servers, &[]);
    }

    /// [`Cluster::start_agent_at`] with more arguments.
    pub fn start_agent_with(&mut self, node: &str, resources: &str, servers: &str, more: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{node}.log")));
        let mut agent = Command::new(BIN);
        if let Some(token) = &self.agent_token {
            agent.env("FAIRSCHED_AGENT_TOKEN", token);
        }
        self.agents.push((
            node.to_string(),
            Proc(
                agent
                    .args([
                        "agent",
                        "--server",
                        servers,
                        "--node-id",
                        node,
                        "--resources",
                        resources,
                        "--kill-grace-ms",
                        "1000",
                        "--work-dir",
                    ])
                    .arg(self.dir.path().join(node))
                    .args(more)
                    .env("FAIRSCHED_LOG", "fairsched_agent=info")
                    // The test's own cgroup is not the agent's to take over.
                    .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
                    .stdout(Stdio::null())
                    .stderr(log.unwrap())
                    .spawn()
                    .expect("start fairsched agent"),
            ),
        ));
    }

    /// SIGKILLs the agent of `node` and waits until it is gone.
    pub fn kill_agent(&mut self, node: &str) {
        self.end_agent(node, nix::sys::signal::Signal::SIGKILL);
    }

    /// Sends `signal` to the agent of `node` and waits for it to exit.
    pub fn end_agent(&mut self, node: &str, signal: nix::sys::signal::Signal) {
        let at = self
            .agents
            .iter()
            .position(|(n, _)| n == node)
            .expect("an agent of that node");
        let (_, agent) = self.agents.remove(at);
        agent.signal(signal);
        agent.wait(Duration::from_secs(10));
    }

    /// Sends `signal` to the agent of `node` (SIGSTOP, SIGCONT, ...).
    pub fn signal_agent(&self, node: &str, signal: nix::sys::signal::Signal) {
        let (_, agent) = self
            .agents
            .iter()
            .find(|(n, _)| n == node)
            .expect("an agent of that node");
        agent.signal(signal);
    }

    /// The agent log of `node`.
    pub fn agent_log(&self, node: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{node}.log"))).unwrap_or_default()
    }

    /// Runs the CLI against the server (`FAIRSCHED_SERVER`); its stdout. Fails on an error.
    pub fn cli(&self, args: &[&str]) -> String {
        cli(&self.url, args)
    }

    /// The CLI with `--json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        json(&self.url, args)
    }

    /// `op run --id ID ARGS... -- sh -c SCRIPT`.
    pub fn submit(&self, id: &str, args: &[&str], script: &str) {
        let mut all = vec!["op", "run", "--id", id];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "sh", "-c", script]);
        assert_eq!(self.cli(&all).trim(), id);
    }

    pub fn op(&self, id: &str) -> Value {
        self.json(&["op", "show", id])
    }

    /// Events (oldest first) of one operation.
    pub fn events(&self, operation: &str) -> Vec<Value> {
        self.json(&["events", "--operation", operation, "--limit", "10000"])
            .as_array()
            .unwrap()
            .clone()
    }

    /// The PIDs the jobs of `operation` wrote to `pid` in their directories, by job id.
    pub fn job_pids(&self, operation: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for node in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let jobs = node.path().join("jobs").join(operation);
            for job in std::fs::read_dir(&jobs).into_iter().flatten().flatten() {
                let pid = std::fs::read_to_string(job.path().join("pid")).unwrap_or_default();
                if pid.ends_with('\n') {
                    out.push((
                        job.file_name().to_string_lossy().into_owned(),
                        pid.trim().to_string(),
                    ));
                }
            }
        }
        out.sort();
        out
    }

    /// Stops the agents, then the server, with SIGTERM; each must exit cleanly.
    pub fn stop(mut self) {
        for (_, agent) in std::mem::take(&mut self.agents) {
            agent.signal(nix::sys::signal::Signal::SIGTERM);
            assert!(
                agent.wait(Duration::from_secs(20)),
                "an agent stops cleanly"
            );
        }
        let server = self.server.take().unwrap();
        server.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(
            server.wait(Duration::from_secs(20)),
            "the server stops cleanly"
        );
        // Logs going to a file (or journald) are plain text: no terminal colour codes.
        for entry in std::fs::read_dir(self.dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                let log = std::fs::read_to_string(&path).unwrap();
                assert!(
                    !log.contains('\x1b'),
                    "{} has terminal escape codes:\n{log}",
                    path.display()
                );
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Keep the logs and job directories of a failed test.
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap()).keep();
            eprintln!("cluster files kept in {}", kept.display());
        }
    }
}

/// The PIDs of the live processes whose command line has the argument `arg`.
pub fn processes_with_arg(arg: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
                && !process_gone(&pid.to_string())
        })
        .collect()
}

/// Whether the process is gone (or a zombie nobody reaped yet).
pub fn process_gone(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(true)
}

/// Runs `fairsched ARGS` to its end, killing it (by its PID) if it has not ended within
/// `limit`: whether it succeeded, its stdout and its stderr (both read while it runs, so that
/// output larger than a pipe's buffer does not stall it).
pub fn run(args: &[&str], limit: Duration) -> (bool, String, String) {
    run_with_env(args, &[], limit)
}

/// [`run`] with `env` set.
pub fn run_with_env(
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> (bool, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fairsched");
    // Read both pipes while the command runs: its output may outgrow a pipe's buffer.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).unwrap();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "fairsched {args:?} did not end within {limit:?}: {}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.success(), out.join().unwrap(), err.join().unwrap())
}
