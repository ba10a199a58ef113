//! Agents configure safely (issue 18): resources left out of `--resources` keep their detected
//! values (before, `--resources cpu=2,memory=2GiB` registered 0 user slots and the node took
//! no job), and an agent the server can never accept (a bad node id) exits non-zero saying
//! what to fix instead of retrying forever. An agent whose token is refused (a rotation, a
//! failover to a server with another token) keeps retrying, saying so as an error, and takes
//! the token from its `--token-file` again; jobs never get the agent's token.

mod common;

use common::{BIN, Cluster};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TOKEN_CONFIG: &str = "agent_token = \"the-right-token\"\n";

#[test]
fn resources_left_out_keep_their_detected_values() {
    let c = Cluster::start(
        "agent_token = \"t\"\n\n[scheduler]\nnode_heartbeat_period_ms = 100\n",
        &[("partial", "cpu=2,memory=2GiB"), ("cpu-only", "cpu=1")],
    );
    let nodes = c.json(&["node", "list"]);
    let node = |id: &str| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap()["resources"]
            .clone()
    };
    let partial = node("partial");
    assert_eq!(partial["cpu"], 2.0, "{partial}");
    assert_eq!(partial["user_slots"], 8.0, "{partial}");
    let cpu_only = node("cpu-only");
    assert_eq!(cpu_only["user_slots"], 4.0, "{cpu_only}");
    assert!(
        cpu_only["memory"].as_f64().unwrap() > 0.0,
        "memory left out is detected: {cpu_only}"
    );
    // And they run jobs.
    c.submit("runs", &["--cpu", "1", "--jobs", "2"], "true");
    common::wait_for("the jobs to complete", Duration::from_secs(30), || {
        c.op("runs")["state"] == "completed"
    });
    c.stop();
}

/// Runs `fairsched agent ARGS` against the cluster; its exit code and standard error. It must
/// exit by itself (bounded).
fn agent_exits(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let work = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args([
            "agent",
            "--server",
            url,
            "--resources",
            "cpu=1",
            "--work-dir",
        ])
        .arg(work.path())
        .args(args)
        .env_remove("FAIRSCHED_AGENT_TOKEN")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return (status.code(), stderr);
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the agent did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_the_server_can_never_accept_exits_saying_what_to_fix() {
    let c = Cluster::start(TOKEN_CONFIG, &[]);
    let (code, stderr) = agent_exits(&c.url, &["--node-id", "../x", "--token", "the-right-token"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("refused to register node \"../x\""),
        "{stderr}"
    );
    c.stop();
}

/// A second agent with the node id of one that heartbeats (another machine with the same
/// host name) exits saying so, and the first keeps its node and its job.
#[test]
fn a_second_agent_with_a_node_id_in_use_exits_saying_so() {
    let c = Cluster::start(TOKEN_CONFIG, &[("n1", "cpu=2,memory=1GiB,user_slots=4")]);
    c.submit("long", &["--cpu", "1"], "sleep 30");
    common::wait_for("the job to start", Duration::from_secs(30), || {
        c.op("long")["job_counts"]["running"] == 1
    });
    let (code, stderr) = agent_exits(&c.url, &["--node-id", "n1", "--token", "the-right-token"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("another agent runs as node \"n1\"") && stderr.contains("--node-id"),
        "{stderr}"
    );
    // The first agent's job was neither lost nor run again.
    std::thread::sleep(Duration::from_secs(2));
    let op = c.op("long");
    assert_eq!(op["job_counts"]["running"], 1, "{op}");
    assert_eq!(op["job_counts"]["aborted"], 0, "{op}");
    c.stop();
}

/// An agent serves its own Prometheus metrics with --metrics-listen (issue 18).
#[test]
fn an_agent_serves_its_own_metrics() {
    let c = Cluster::start(
        "[scheduler]\nnode_heartbeat_period_ms = 100\nfair_share_update_period_ms = 100\n",
        &[],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let work = tempfile::tempdir().unwrap();
    let agent = common::Proc(
        Command::new(BIN)
            .args(["agent", "--server", &c.url, "--node-id", "m1"])
            .args(["--resources", "cpu=2,memory=1GiB,user_slots=4"])
            .args([
                "--metrics-listen",
                &format!("127.0.0.1:{port}"),
                "--work-dir",
            ])
            .arg(work.path())
            .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    c.submit("two", &["--cpu", "1", "--jobs", "2"], "true");
    common::wait_for("the jobs to complete", Duration::from_secs(30), || {
        c.op("two")["state"] == "completed"
    });
    let metrics = || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    let value = |text: &str, series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {text}"))
    };
    let mut text = metrics();
    // The last end is counted once the job's exit was seen.
    for _ in 0..50 {
        if value(
            &text,
            "fairsched_agent_jobs_finished_total{outcome=\"completed\"}",
        ) == 2.0
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        text = metrics();
    }
    assert!(text.contains("application/openmetrics-text"), "{text}");
    assert_eq!(value(&text, "fairsched_agent_jobs_started_total"), 2.0);
    assert_eq!(
        value(
            &text,
            "fairsched_agent_jobs_finished_total{outcome=\"completed\"}"
        ),
        2.0
    );
    assert_eq!(value(&text, "fairsched_agent_jobs_running"), 0.0);
    assert!(value(&text, "fairsched_agent_heartbeat_duration_seconds_count") >= 1.0);
    assert!(
        text.contains("fairsched_agent_build_info{version="),
        "{text}"
    );
    assert!(text.contains("node=\"m1\""), "{text}");
    drop(agent);
    c.stop();
}

/// `fairsched agent ARGS` against `url` with `env`, its log (info) in `log`.
fn spawn_agent(url: &str, args: &[&str], env: &[(&str, &str)], log: &Path) -> common::Proc {
    let mut cmd = Command::new(BIN);
    cmd.args(["agent", "--server", url, "--node-id", "n1"])
        .args(["--resources", "cpu=1,memory=1GiB,user_slots=2"])
        .args(args)
        .env_remove("FAIRSCHED_AGENT_TOKEN")
        .env("FAIRSCHED_LOG", "fairsched_agent=info")
        .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
        .stderr(std::fs::File::create(log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::Proc(cmd.spawn().unwrap())
}

/// A refused token does not stop the agent (that killed every job of the cluster at a token
/// rotation or a failover to a server with another token, and looped under systemd): it
/// retries with backoff, logging an error that says where the token came from, never the
/// token.
#[test]
fn an_agent_whose_token_is_refused_keeps_retrying() {
    let c = Cluster::start(TOKEN_CONFIG, &[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("agent.log");
    let work = dir.path().join("work");
    let mut agent = spawn_agent(
        &c.url,
        &["--work-dir", work.to_str().unwrap()],
        &[("FAIRSCHED_AGENT_TOKEN", "wrong-token")],
        &log,
    );
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    common::wait_for("the refusal to be logged", Duration::from_secs(20), || {
        read_log().contains("refused this agent's token")
    });
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        agent.0.try_wait().unwrap().is_none(),
        "the agent exited: {}",
        read_log()
    );
    let text = read_log();
    assert!(text.contains("ERROR"), "{text}");
    assert!(text.contains("FAIRSCHED_AGENT_TOKEN"), "{text}");
    assert!(
        !text.contains("wrong-token"),
        "the token is never logged: {text}"
    );
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        agent.wait(Duration::from_secs(20)),
        "the agent stops cleanly"
    );
    c.stop();
}

/// `--token-file`: a file others may read is warned about; after a refusal the agent reads
/// the file again, so writing the rotated token there is enough (no restart, which would
/// kill the node's jobs).
#[test]
fn an_agent_takes_its_token_from_a_file_and_again_after_a_refusal() {
    use std::os::unix::fs::PermissionsExt;
    let c = Cluster::start(TOKEN_CONFIG, &[]);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "wrong\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let log = dir.path().join("agent.log");
    let work = dir.path().join("work");
    let agent = spawn_agent(
        &c.url,
        &[
            "--token-file",
            token.to_str().unwrap(),
            "--work-dir",
            work.to_str().unwrap(),
        ],
        &[],
        &log,
    );
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    common::wait_for("the refusal to be logged", Duration::from_secs(20), || {
        read_log().contains("refused this agent's token")
    });
    let text = read_log();
    assert!(text.contains(&token.display().to_string()), "{text}");
    assert!(text.contains("may be read by other users"), "{text}");

    std::fs::write(&token, "the-right-token\n").unwrap();
    common::wait_for("the node to register", Duration::from_secs(20), || {
        c.json(&["node", "list"]).as_array().unwrap().len() == 1
    });
    c.submit("runs", &["--cpu", "1"], "true");
    common::wait_for("the job to complete", Duration::from_secs(30), || {
        c.op("runs")["state"] == "completed"
    });
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        agent.wait(Duration::from_secs(20)),
        "the agent stops cleanly"
    );
    c.stop();
}

/// A job's environment does not have the agent's token (which `fairsched agent` may take from
/// `FAIRSCHED_AGENT_TOKEN`): a user could otherwise register a node of their own and receive
/// other users' jobs.
#[test]
fn jobs_do_not_get_the_agents_token() {
    let c = Cluster::start(TOKEN_CONFIG, &[("n1", "cpu=1,memory=1GiB,user_slots=2")]);
    c.submit("env", &["--cpu", "1"], "env");
    common::wait_for("the job to complete", Duration::from_secs(30), || {
        c.op("env")["state"] == "completed"
    });
    let jobs = c.dir.path().join("n1").join("jobs").join("env");
    let job = std::fs::read_dir(jobs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let env = std::fs::read_to_string(job.join("stdout")).unwrap();
    assert!(env.contains("FAIRSCHED_JOB_ID="), "{env}");
    assert!(!env.contains("the-right-token"), "{env}");
    assert!(!env.contains("FAIRSCHED_AGENT_TOKEN"), "{env}");
    c.stop();
}
