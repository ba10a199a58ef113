//! `fairsched bench load` end to end: the real binary, a few clients for a few seconds, both
//! phases. A smoke test of the command and its JSON, not a timing assertion.

use serde_json::Value;
use std::time::Duration;

mod common;

use common::run;

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
