//! Agents configure safely (issue 18): resources left out of `--resources` keep their detected
//! values (before, `--resources cpu=2,memory=2GiB` registered 0 user slots and the node took
//! no job), and an agent the server can never accept (a wrong token, a bad node id) exits
//! non-zero saying what to fix instead of retrying forever.

mod common;

use common::{BIN, Cluster};
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
    let (code, stderr) = agent_exits(&c.url, &["--node-id", "n1", "--token", "wrong"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("refused this agent's token") && stderr.contains("--token"),
        "{stderr}"
    );
    assert!(!stderr.contains("unreachable"), "{stderr}");
    let (code, stderr) = agent_exits(&c.url, &["--node-id", "n1"]);
    assert_eq!(code, Some(1), "no token at all: {stderr}");
    assert!(stderr.contains("FAIRSCHED_AGENT_TOKEN"), "{stderr}");
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
