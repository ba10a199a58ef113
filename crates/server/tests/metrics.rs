//! `GET /metrics` on a real server: the named series exist, counters and histograms move with
//! placements, heartbeats, fair-share updates and preemptions.

mod common;

use serde_json::json;
use std::time::{Duration, Instant};

/// The value of the sample whose name and labels are exactly `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        rest.split(' ').next()?.parse().ok()
    })
}

fn must(text: &str, series: &str) -> f64 {
    sample(text, series).unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_placements_and_preemptions() {
    let server = common::start(
        json!({"pool_trees": {"default": {
            "config": {
                "fair_share_starvation_timeout_ms": 100,
                "preemptive_scheduling_backoff_ms": 0
            },
            "pools": {
                "guaranteed": {"strong_guarantee_resources": {"cpu": 3}},
                "batch": {}
            }
        }}}),
        json!({"fair_share_update_period_ms": 50}),
    )
    .await;

    // Pool series come from the published snapshot, which the first fair-share update fills:
    // scrape until it has (bounded), so the test does not race the server's first timer tick.
    let first_pool = "fairsched_pool_fair_share_ratio{tree=\"default\",pool=\"guaranteed\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, ctype, text) = loop {
        let (status, ctype, text) = server.get_text("/metrics").await;
        if sample(&text, first_pool).is_some() || Instant::now() > deadline {
            break (status, ctype, text);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    for series in [
        "fairsched_placements_total{stage=\"regular\"}",
        "fairsched_preemptions_total{reason=\"preemption\"}",
        "fairsched_interruptions_total{reason=\"graceful_preemption\"}",
        "fairsched_heartbeat_duration_seconds_count",
        "fairsched_fair_share_update_duration_seconds_count",
        "fairsched_pool_fair_share_ratio{tree=\"default\",pool=\"guaranteed\"}",
        "fairsched_pool_usage_ratio{tree=\"default\",pool=\"batch\"}",
        "fairsched_pool_demand_ratio{tree=\"default\",pool=\"batch\"}",
        "fairsched_pool_operations{tree=\"default\",pool=\"batch\"}",
        "fairsched_pool_starvation_status{tree=\"default\",pool=\"guaranteed\",status=\"starving\"}",
        "fairsched_operations{state=\"running\"}",
        "fairsched_nodes{scheduler_jobs_enabled=\"true\"}",
        "fairsched_build_info{version=\"0.1.0\"}",
        "fairsched_jobs_finished_total{outcome=\"completed\"}",
        "fairsched_operations_finished_total{state=\"failed\"}",
        "fairsched_job_wait_seconds_count",
    ] {
        must(&text, series);
    }
    // Prometheus conventions: no gauge named like a counter, one unit per metric (no
    // resource label on an amount; ratios are unitless), counters end in _total.
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut parts = line.split_whitespace().skip(2);
        let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
        assert!(
            !(kind == "gauge" && (name.ends_with("_count") || name.ends_with("_total"))),
            "{line}"
        );
    }
    for line in text.lines().filter(|l| l.contains("resource=\"")) {
        assert!(
            line.split('{').next().unwrap().ends_with("_ratio"),
            "{line}"
        );
    }
    // Reservation, gang and backfill counters exist from the start (at 0: this tree has
    // neither option on).
    for counter in [
        "fairsched_backfills_total",
        "fairsched_job_reservations_total",
        "fairsched_gangs_assembled_total",
    ] {
        assert_eq!(must(&text, counter), 0.0, "{counter}");
    }
    for help in [
        "# TYPE fairsched_heartbeat_duration_seconds histogram",
        "# TYPE fairsched_placements counter",
        "# TYPE fairsched_pool_fair_share_ratio gauge",
    ] {
        assert!(text.contains(help), "no {help:?} in:\n{text}");
    }
    assert_eq!(
        must(&text, "fairsched_placements_total{stage=\"regular\"}"),
        0.0
    );

    // Batch fills the node; a placement moves the counter and the heartbeat histogram.
    server
        .register("n1", json!({"cpu": 3, "user_slots": 10}))
        .await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "filler", "pool": "batch",
                   "tasks": [{"job_count": 3, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let running = server.heartbeat_until_started("n1", 3).await;
    assert_eq!(running.len(), 3);
    let (_, _, text) = server.get_text("/metrics").await;
    assert_eq!(
        must(&text, "fairsched_placements_total{stage=\"regular\"}"),
        3.0
    );
    // Each job's wait from its operation's submission.
    assert_eq!(must(&text, "fairsched_job_wait_seconds_count"), 3.0);
    let heartbeats = must(&text, "fairsched_heartbeat_duration_seconds_count");
    assert!(heartbeats >= 1.0, "{text}");
    assert_eq!(must(&text, "fairsched_operations{state=\"running\"}"), 1.0);
    assert_eq!(
        must(
            &text,
            "fairsched_cluster_cpu_cores{tree=\"default\",state=\"total\"}"
        ),
        3.0
    );
    // Per-resource series for the resources the nodes have, none for the others.
    must(
        &text,
        "fairsched_pool_resource_fair_share_ratio{tree=\"default\",pool=\"guaranteed\",resource=\"cpu\"}",
    );
    assert!(!text.contains(
        "fairsched_pool_resource_usage_ratio{tree=\"default\",pool=\"batch\",resource=\"gpu\"}"
    ));

    // The timer's fair-share updates are timed; gauges follow them.
    server
        .wait_for(
            "a fair-share update showing batch's usage",
            Duration::from_secs(10),
            || async {
                let (_, _, text) = server.get_text("/metrics").await;
                sample(&text, "fairsched_fair_share_update_duration_seconds_count") >= Some(1.0)
                    && sample(
                        &text,
                        "fairsched_pool_usage_ratio{tree=\"default\",pool=\"batch\"}",
                    ) == Some(1.0)
            },
        )
        .await;

    // The guaranteed pool starves and takes the node back by preemption.
    server
        .post(
            "/api/v1/operations",
            json!({"id": "urgent", "pool": "guaranteed",
                   "tasks": [{"job_count": 2, "resources": {"cpu": 1}, "command": ["true"]}]}),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let hb = server.heartbeat("n1", &running).await;
        let aborted: Vec<&str> = hb["abort"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        if !aborted.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "no preemption in 10 s: {hb}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, _, text) = server.get_text("/metrics").await;
    assert!(
        must(&text, "fairsched_preemptions_total{reason=\"preemption\"}") >= 1.0,
        "{text}"
    );
    assert!(
        must(
            &text,
            "fairsched_pool_operations{tree=\"default\",pool=\"guaranteed\"}"
        ) == 1.0,
        "{text}"
    );
    assert!(must(&text, "fairsched_heartbeat_duration_seconds_count") > heartbeats);
    // Kept for people to read: what a scrape looks like.
    std::fs::write(common::artifacts_dir().join("metrics.txt"), &text).unwrap();
}
