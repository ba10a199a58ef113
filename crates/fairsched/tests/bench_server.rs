//! `fairsched bench server` end to end: the real binary with a tiny setup. A smoke test of the
//! command and its JSON, not a timing assertion.

use serde_json::Value;
use std::time::Duration;

mod common;

use common::run;

#[test]
fn bench_server_runs_jobs_through_a_real_server() {
    let (ok, out, err) = run(
        &[
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
        ],
        Duration::from_secs(120),
    );
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
