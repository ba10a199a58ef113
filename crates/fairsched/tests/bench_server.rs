//! `fairsched bench server` end to end: the real binary with a tiny setup. A smoke test of the
//! command and its JSON, not a timing assertion.

use serde_json::Value;
use std::time::Duration;

mod common;

use common::run;

/// Runs `fairsched bench server` with a tiny setup and `extra` flags; its JSON report, after
/// the checks every mode shares.
fn bench_server(extra: &[&str]) -> Value {
    let mut args = vec![
        "bench",
        "server",
        "--agents",
        "20",
        "--slots",
        "2",
        "--heartbeat-ms",
        "100",
        "--job-ms",
        "150",
        "--operations",
        "4",
        "--pools",
        "2",
        "--warmup",
        "1s",
        "--duration",
        "2s",
        "--json",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = run(&args, Duration::from_secs(120));
    assert!(ok, "the benchmark failed: {err}");
    let report: Value = serde_json::from_str(&out).expect("JSON on stdout");
    let number = |key: &str| {
        report[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing in {report:#}"))
    };
    assert!(number("placements") > 0.0, "{report:#}");
    assert!(number("completed") > 0.0, "{report:#}");
    assert!(number("heartbeats") > 0.0, "{report:#}");
    assert!(number("placements_per_s") > 0.0, "{report:#}");
    assert!(number("server_cpu_s") > 0.0, "{report:#}");
    assert_eq!(number("errors"), 0.0, "{report:#}");
    assert_eq!(number("agents"), 20.0);
    assert!(report["heartbeat_latency_ms"]["p99"].as_f64().is_some());
    assert!(
        report["process_peak_rss_bytes"]
            .as_u64()
            .is_some_and(|b| b > 1024 * 1024),
        "{report:#}"
    );
    assert!(
        report["pending_jobs_at_end"].as_u64().unwrap_or(0) > 0,
        "the workload should outlast the run: {report:#}"
    );
    // The actor's steps, each named; updates ran in the window (prepared and installed).
    let pauses = report["actor_pauses"].as_array().expect("actor_pauses");
    let steps: Vec<&str> = pauses.iter().map(|p| p["step"].as_str().unwrap()).collect();
    assert_eq!(
        steps,
        ["fair_share_prepare", "fair_share_install", "snapshot"],
        "{report:#}"
    );
    assert!(pauses[1]["count"].as_u64().unwrap() > 0, "{report:#}");
    report
}

/// By default the server is a child process: its own CPU and memory are reported, and it is
/// gone when the command has ended.
#[test]
fn bench_server_runs_jobs_through_a_server_process() {
    let report = bench_server(&[]);
    assert_eq!(report["server_mode"], "process", "{report:#}");
    assert!(
        report["server_peak_rss_bytes"]
            .as_u64()
            .is_some_and(|b| b > 1024 * 1024),
        "{report:#}"
    );
    let pid = report["server_pid"].as_u64().expect("server_pid");
    assert!(
        !is_fairsched_server(pid as u32),
        "the server process {pid} is still there"
    );
}

/// `--in-process`: the server on a runtime of the benchmark's own process.
#[test]
fn bench_server_runs_jobs_through_a_server_in_process() {
    let report = bench_server(&["--in-process"]);
    assert_eq!(report["server_mode"], "in_process", "{report:#}");
    assert!(report["server_pid"].is_null(), "{report:#}");
    assert!(report["server_peak_rss_bytes"].is_null(), "{report:#}");
}

#[test]
fn bench_server_rejects_bad_options() {
    for (flags, message) in [
        (&["--agents", "0"][..], "--agents must be greater than 0"),
        (
            &["--duration", "0"][..],
            "--duration must be greater than 0",
        ),
    ] {
        let mut args = vec!["bench", "server"];
        args.extend_from_slice(flags);
        let (ok, _, err) = run(&args, Duration::from_secs(30));
        assert!(!ok, "{flags:?} should fail");
        assert!(err.contains(message), "{flags:?}: {err}");
    }
}

/// Whether `pid` is a running `fairsched server` (not one that ended, nor a reused PID).
fn is_fairsched_server(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    let args: Vec<&str> = cmdline.split('\0').collect();
    args.len() > 1 && args[0].ends_with("fairsched") && args[1] == "server"
}

/// SIGTERM to the benchmark stops its server process too, and the run fails saying why.
#[test]
fn bench_server_interrupted_stops_its_server() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut bench = Command::new(common::BIN)
        .args([
            "bench",
            "server",
            "--agents",
            "5",
            "--operations",
            "2",
            "--pools",
            "1",
            "--warmup",
            "1s",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fairsched bench server");
    let mut stderr = BufReader::new(bench.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("operations submitted") {
        line.clear();
        let n = stderr.read_line(&mut line).unwrap();
        assert!(n > 0, "the benchmark ended early");
    }
    // The server is a child of the benchmark's main thread.
    let pid = bench.id();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let servers: Vec<u32> = children
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .filter(|&c| is_fairsched_server(c))
        .collect();
    assert_eq!(servers.len(), 1, "children: {children:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = bench.wait().unwrap();
    assert!(!status.success(), "{rest}");
    assert!(rest.contains("interrupted"), "{rest}");
    assert!(
        !is_fairsched_server(servers[0]),
        "the server process {} is still there",
        servers[0]
    );
}
