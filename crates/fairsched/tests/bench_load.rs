//! `fairsched bench load` end to end: the real binary, a few clients for a few seconds, both
//! phases. A smoke test of the command and its JSON, not a timing assertion.

use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fairsched");

/// Runs the command, killing it (by its PID) if it has not ended within `limit`.
fn run(args: &[&str], limit: Duration) -> (bool, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fairsched");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fairsched {args:?} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.success(), out, err)
}

#[test]
fn bench_load_reports_every_route_in_both_phases() {
    let (ok, out, err) = run(
        &[
            "bench",
            "load",
            "--clients",
            "4",
            "--agents",
            "3",
            "--warmup",
            "500ms",
            "--duration",
            "2s",
            "--history",
            "40",
            "--json",
        ],
        Duration::from_secs(180),
    );
    assert!(ok, "the load test failed: {err}");
    let report: Value = serde_json::from_str(&out).expect("JSON on stdout");
    let phases = report["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 2, "{report:#}");
    assert_eq!(phases[0]["name"], "empty");
    assert_eq!(phases[1]["name"], "history");
    assert!(
        phases[1]["finished_operations_at_start"].as_u64().unwrap() >= 40,
        "{report:#}"
    );
    for phase in phases {
        assert_eq!(phase["errors"], 0, "{report:#}");
        let routes: Vec<&str> = phase["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["route"].as_str().unwrap())
            .collect();
        for route in [
            "GET /api/v1/operations",
            "GET /api/v1/tree",
            "POST /api/v1/operations",
            "POST /api/v1/agent/heartbeat",
        ] {
            assert!(routes.contains(&route), "{route} missing: {report:#}");
        }
        for r in phase["routes"].as_array().unwrap() {
            assert!(r["p99_ms"].as_f64().unwrap() >= r["p50_ms"].as_f64().unwrap());
        }
    }
}

#[test]
fn bench_load_rejects_bad_options() {
    let (ok, _, err) = run(
        &["bench", "load", "--clients", "0"],
        Duration::from_secs(30),
    );
    assert!(!ok);
    assert!(err.contains("--clients must be greater than 0"), "{err}");
}
