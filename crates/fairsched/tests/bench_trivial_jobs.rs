//! `fairsched bench trivial-jobs` end to end: the real binary starts a real server and real
//! agents with a tiny workload. A smoke test of the command, its JSON and its cleanup, not a
//! timing assertion; it needs no Slurm.

use serde_json::Value;
use std::time::Duration;

mod common;

use common::run;

/// Whether a process with this PID still runs (a zombie counts as gone).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn bench_trivial_jobs_runs_every_phase_on_real_processes() {
    let (ok, out, err) = run(
        &[
            "bench",
            "trivial-jobs",
            "--agents",
            "2",
            "--cpus",
            "2",
            "--latency-samples",
            "3",
            "--operations",
            "6",
            "--jobs",
            "10",
            "--backlog",
            "5",
            "--keep-dir",
            "--json",
        ],
        Duration::from_secs(240),
    );
    assert!(ok, "the benchmark failed: {err}");
    let report: Value = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(report["agents"], 2, "{report:#}");
    assert_eq!(report["slots"], 4, "{report:#}");
    assert_eq!(report["settings"]["job_command"][0], "true", "{report:#}");
    assert!(
        report["settings"]["node_heartbeat_period_ms"].as_u64() > Some(0),
        "{report:#}"
    );
    let phases = report["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "idle_latency",
            "one_after_another",
            "one_operation",
            "with_backlog"
        ]
    );
    // (phase, operations, jobs)
    let want = [
        ("idle_latency", 3, 3),
        ("one_after_another", 6, 6),
        ("one_operation", 1, 10),
        ("with_backlog", 6, 6),
    ];
    for (phase, (name, operations, jobs)) in phases.iter().zip(want) {
        assert_eq!(phase["name"], name);
        assert_eq!(phase["operations"], operations, "{name}: {report:#}");
        assert_eq!(phase["jobs"], jobs, "{name}: {report:#}");
        assert_eq!(phase["jobs_completed"], jobs, "{name}: {report:#}");
        // Every phase commits (submissions, starts, ends); the server's counters are read.
        assert!(
            phase["store_commits"].as_u64() > Some(0),
            "{name}: {report:#}"
        );
        assert!(
            phase["fair_share_updates"].as_u64().is_some(),
            "{name}: {report:#}"
        );
        for key in ["completed_s", "jobs_per_s", "submissions_per_s"] {
            assert!(
                phase[key].as_f64().is_some_and(|v| v > 0.0),
                "{name}.{key}: {report:#}"
            );
        }
        assert!(
            phase["submit_reply_ms"]["p99"].as_f64() >= phase["submit_reply_ms"]["p50"].as_f64(),
            "{name}: {report:#}"
        );
    }
    let latency = &phases[0];
    for key in [
        "submit_to_start_ms",
        "server_submit_to_start_ms",
        "submit_to_completed_ms",
    ] {
        assert!(latency[key]["p50"].as_f64().is_some(), "{key}: {report:#}");
    }
    assert_eq!(phases[3]["backlog_operations"], 5, "{report:#}");

    // Every process it started is gone: the server's and the agents' command lines name the
    // run's directory (their --config and --work-dir), so none may still run with it.
    let dir = report["kept_dir"]
        .as_str()
        .expect("kept_dir with --keep-dir");
    assert!(std::path::Path::new(dir).join("server.toml").is_file());
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(dir) && running(&pid) {
            left.push(pid);
        }
    }
    assert!(
        left.is_empty(),
        "processes of the run still running: {left:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bench_trivial_jobs_rejects_bad_options() {
    for (flags, message) in [
        (&["--agents", "0"][..], "--agents must be greater than 0"),
        (&["--backlog", "0"][..], "--backlog must be greater than 0"),
    ] {
        let mut args = vec!["bench", "trivial-jobs"];
        args.extend_from_slice(flags);
        let (ok, _, err) = run(&args, Duration::from_secs(30));
        assert!(!ok, "{flags:?} should fail");
        assert!(err.contains(message), "{flags:?}: {err}");
    }
}
