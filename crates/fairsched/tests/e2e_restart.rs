//! End to end: a server restart under a running job, with real processes on 127.0.0.1.
//!
//! `fairsched server` and `fairsched agent` run as separate processes. Two jobs run; the
//! server is killed (SIGKILL, by PID) and started again on the same data directory and port.
//! The agent keeps both jobs running through the outage; the short one ends meanwhile and is
//! reported afterwards with its exit code; the long one is adopted by the new server and
//! finishes once. Neither job is started twice. The agent endpoints need a token, so the
//! node's credential is checked too: the restarted server has forgotten it (credentials live
//! in memory), the agent registers again and keeps its jobs.

mod common;

use common::{BIN, Proc, cli, json, wait_for};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The agents' token of the server's file.
const AGENT_TOKEN: &str = "e2e-restart-agent-token";

/// Starts `fairsched server` (with an `agent_token`) and waits (at most 20 s) for its
/// "listening" line.
fn server(port: u16, data: &Path) -> Proc {
    let config = data.with_extension("toml");
    std::fs::write(&config, format!("agent_token = {AGENT_TOKEN:?}\n")).unwrap();
    let mut child = Command::new(BIN)
        .args([
            "server",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start fairsched server");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the server prints its address");
    assert!(line.contains("listening"), "{line}");
    Proc(child)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The one job of operation `id`: (job id, state, exit code).
fn the_job(url: &str, id: &str) -> (String, String, Value) {
    let op = json(url, &["op", "show", id]);
    let jobs = op["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "one job, started once: {op}");
    (
        jobs[0]["id"].as_str().unwrap().to_string(),
        jobs[0]["state"].as_str().unwrap().to_string(),
        jobs[0]["exit_code"].clone(),
    )
}

#[test]
fn jobs_survive_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("server");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let first = server(port, &data);

    let agent_log = dir.path().join("agent.log");
    let agent = Proc(
        Command::new(BIN)
            .args([
                "agent",
                "--server",
                &url,
                "--node-id",
                "n1",
                "--resources",
                "cpu=2,memory=1GiB,user_slots=8",
                "--token",
                AGENT_TOKEN,
                "--work-dir",
            ])
            .arg(dir.path().join("agent"))
            .env("FAIRSCHED_LOG", "fairsched_agent=info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&agent_log).unwrap())
            .spawn()
            .expect("start fairsched agent"),
    );
    wait_for("the node to register", Duration::from_secs(20), || {
        json(&url, &["node", "list"]).as_array().unwrap().len() == 1
    });

    // `events --follow` runs through the restart: it reconnects and resumes after the last
    // event it printed.
    let follow_out = dir.path().join("follow.jsonl");
    let follow = Proc(
        Command::new(BIN)
            .args(["events", "--follow", "--json"])
            .env("FAIRSCHED_SERVER", &url)
            .stdout(std::fs::File::create(&follow_out).unwrap())
            .stderr(std::fs::File::create(dir.path().join("follow.err")).unwrap())
            .spawn()
            .expect("start fairsched events --follow"),
    );

    // Each job appends its PID to a file when it starts: a second start would show.
    let long_starts = dir.path().join("long.starts");
    let short_starts = dir.path().join("short.starts");
    let submit = |id: &str, starts: &Path, script: &str| {
        cli(
            &url,
            &[
                "op",
                "run",
                "--id",
                id,
                "--cpu",
                "0.5",
                "--memory",
                "64MiB",
                "--env",
                &format!("STARTS={}", starts.display()),
                "--",
                "sh",
                "-c",
                script,
            ],
        );
    };
    submit(
        "long",
        &long_starts,
        "echo $$ >> \"$STARTS\"; sleep 6; echo done",
    );
    submit("short", &short_starts, "echo $$ >> \"$STARTS\"; sleep 1.5");
    wait_for("both jobs to start", Duration::from_secs(20), || {
        lines(&long_starts).len() == 1 && lines(&short_starts).len() == 1
    });
    let (long_job, state, _) = the_job(&url, "long");
    assert_eq!(state, "running");
    let (short_job, _, _) = the_job(&url, "short");
    let long_pid = lines(&long_starts)[0].clone();

    // The server dies; the short job ends while it is down.
    first.signal(nix::sys::signal::Signal::SIGKILL);
    assert!(!first.wait(Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        Path::new(&format!("/proc/{long_pid}")).exists(),
        "the long job runs on without the server"
    );

    // Started again on the same data: the long job is adopted, the short one's end reported.
    let second = server(port, &data);
    let op = json(&url, &["op", "show", "long"]);
    assert_eq!(op["state"], "running", "{op}");
    wait_for("the short job's end", Duration::from_secs(20), || {
        the_job(&url, "short").1 == "completed"
    });
    let (id, state, exit) = the_job(&url, "short");
    assert_eq!(
        (id.as_str(), state.as_str()),
        (short_job.as_str(), "completed")
    );
    assert_eq!(exit, 0);
    assert_eq!(json(&url, &["op", "show", "short"])["state"], "completed");

    // The long job is still the same process, and finishes once.
    let (id, state, _) = the_job(&url, "long");
    assert_eq!(
        (id.as_str(), state.as_str()),
        (long_job.as_str(), "running")
    );
    assert!(Path::new(&format!("/proc/{long_pid}")).exists());
    wait_for("the long job to finish", Duration::from_secs(30), || {
        the_job(&url, "long").1 != "running"
    });
    let (id, state, exit) = the_job(&url, "long");
    assert_eq!(
        (id.as_str(), state.as_str()),
        (long_job.as_str(), "completed")
    );
    assert_eq!(exit, 0);
    let op = json(&url, &["op", "show", "long"]);
    assert_eq!(op["state"], "completed", "{op}");
    assert_eq!(op["job_counts"]["total"], 1, "{op}");
    let logs = json(&url, &["op", "logs", "long"]);
    assert_eq!(logs[0]["stdout"], "done\n", "{logs}");
    assert_eq!(lines(&long_starts), [long_pid], "started once");
    assert_eq!(lines(&short_starts).len(), 1, "started once");

    // The follower saw events from before and after the restart, each once, in order.
    let followed = || -> Vec<Value> {
        lines(&follow_out)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_for(
        "the follower to print the long job's end",
        Duration::from_secs(20),
        || {
            followed()
                .iter()
                .any(|e| e["event"] == "allocation_finished" && e["job"] == long_job.as_str())
        },
    );
    let events = followed();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "each event once, in order: {seqs:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "allocation_started" && e["job"] == long_job.as_str()),
        "{events:?}"
    );
    let err = std::fs::read_to_string(dir.path().join("follow.err")).unwrap();
    assert!(err.contains("reconnecting"), "{err}");
    drop(follow);

    // The agent said what happened.
    let log = std::fs::read_to_string(&agent_log).unwrap();
    assert!(
        log.contains("server is unreachable, its jobs keep running"),
        "{log}"
    );
    assert!(log.contains("server reachable again"), "{log}");
    assert!(
        log.contains("the server does not know this node; registering again"),
        "the restarted server has no credential for the node: {log}"
    );

    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        agent.wait(Duration::from_secs(15)),
        "the agent stops cleanly"
    );
    second.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        second.wait(Duration::from_secs(15)),
        "the server stops cleanly"
    );
}
