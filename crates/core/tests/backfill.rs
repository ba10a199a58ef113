//! Backfill onto held resources: a job whose time limit ends before a job reservation or an
//! assembling gang is expected to need its resources may use them; any other job may not.

mod common;

use common::*;
use fairsched_core::{Scheduler, SchedulerConfig};
use serde_json::Value;

fn limited(jobs: u32, cpu: f64, duration_ms: u64, limit_ms: Option<u64>) -> TestTask {
    let mut t = task(jobs, res(cpu, 1.0), Some(duration_ms));
    t.time_limit_ms = limit_ms;
    t
}

/// When each of the operation's allocations started, in order.
fn starts(d: &Driver, operation: &str) -> Vec<u64> {
    d.events
        .iter()
        .map(|e| serde_json::to_value(e).expect("event"))
        .filter(|v| v["event"] == "allocation_started" && v["operation"] == operation)
        .map(|v| v["t_ms"].as_u64().expect("t_ms"))
        .collect()
}

fn events(d: &Driver, kind: &str) -> Vec<Value> {
    d.events
        .iter()
        .map(|e| serde_json::to_value(e).expect("event"))
        .filter(|v| v["event"] == kind)
        .collect()
}

const RESERVATION_TREE: &str = r#"{"pool_trees": {"default": {
    "config": {"job_reservation": {"enable": true, "timeout_ms": 1000}},
    "pools": {"small": {}, "big": {}}
}}}"#;

/// One node of 4 cpu: `a` (2 × 1 cpu, limit 2 s) and `b` (2 × 1 cpu, limit `b_limit`, 8 s
/// long) fill it at 0; `filler` (1-cpu jobs, no limit) waits from 50 ms; `big` (one 3-cpu job)
/// arrives at 100 ms and reserves the node at about 1.1 s, needing it when `b` ends (`a`'s
/// 2 cpu are not enough). Runs to 1.4 s.
fn reservation_setup(b_limit: Option<u64>) -> (Scheduler, Driver) {
    let mut s = scheduler(RESERVATION_TREE, SchedulerConfig::default());
    add_nodes(&mut s, 1, res(4.0, 8.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("a", Some("small"), vec![limited(2, 1.0, 2000, Some(2000))]),
    )
    .unwrap();
    d.start(
        &mut s,
        0,
        op("b", Some("small"), vec![limited(2, 1.0, 8000, b_limit)]),
    )
    .unwrap();
    d.run(&mut s, 0, 0, 100);
    d.start(
        &mut s,
        50,
        op(
            "filler",
            Some("small"),
            vec![limited(20, 1.0, 20_000, None)],
        ),
    )
    .unwrap();
    d.start(
        &mut s,
        100,
        op("big", Some("big"), vec![limited(1, 3.0, 1000, None)]),
    )
    .unwrap();
    d.run(&mut s, 100, 1400, 100);
    (s, d)
}

/// [`reservation_setup`] with `b`'s limit 8 s; at 1.5 s `probe` arrives: two 1-cpu jobs of 3 s
/// with the given limit.
fn reservation_run(probe_limit: Option<u64>) -> (Scheduler, Driver) {
    let (mut s, mut d) = reservation_setup(Some(8000));
    d.start(
        &mut s,
        1500,
        op(
            "probe",
            Some("small"),
            vec![limited(2, 1.0, 3000, probe_limit)],
        ),
    )
    .unwrap();
    d.run(&mut s, 1500, 9000, 100);
    (s, d)
}

#[test]
fn a_reservation_is_backfilled_only_by_jobs_that_end_before_it_is_needed() {
    // (the probe's limit, when its two jobs start)
    let cases: Vec<(Option<u64>, Vec<u64>)> = vec![
        // Ends at 6 s, before the 8 s the big job needs the node: backfills at 2 s, when `a`
        // frees 2 cpu.
        (Some(4000), vec![2000, 2000]),
        // Exactly at 8 s still fits.
        (Some(6000), vec![2000, 2000]),
        // Would end at 9 s: waits until the big job has started (at 8 s); it shares what is
        // left with `filler` by fair share.
        (Some(7000), vec![]),
        // No limit: the same.
        (None, vec![]),
    ];
    for (limit, expected) in cases {
        let (_, d) = reservation_run(limit);
        let reserved = events(&d, "job_reserved");
        assert_eq!(reserved.len(), 1, "limit {limit:?}: {reserved:?}");
        assert_eq!(starts(&d, "big"), vec![8000], "limit {limit:?}");
        if expected.is_empty() {
            let probe = starts(&d, "probe");
            assert!(
                probe.iter().all(|&t| t >= 8000),
                "limit {limit:?}: {probe:?}"
            );
        } else {
            assert_eq!(starts(&d, "probe"), expected, "limit {limit:?}");
        }
        // `filler` has no limit: it never backfills.
        assert!(
            starts(&d, "filler").iter().all(|&t| t >= 8000),
            "limit {limit:?}: {:?}",
            starts(&d, "filler")
        );
    }
}

#[test]
fn the_reservation_records_until_when_it_may_be_backfilled() {
    // (b's limit, the reservation's backfill_until): without a limit on `b`, nothing tells
    // when the node frees up, so nothing backfills.
    let cases = [
        (Some(8000), Some(8000)),
        (Some(9000), Some(9000)),
        (None, None),
    ];
    for (b_limit, expected) in cases {
        let (s, _) = reservation_setup(b_limit);
        let until: Vec<Option<u64>> = s.reservations().map(|(_, r)| r.backfill_until).collect();
        assert_eq!(until, vec![expected], "b's limit {b_limit:?}");
    }
}

const GANG_TREE: &str = r#"{"pool_trees": {"default": {
    "config": {"gang_placement": {"enable": true, "assembly_timeout_ms": 60000}},
    "pools": {"small": {}, "gang": {}}
}}}"#;

/// Two nodes of 4 cpu. `a` (1 × 4 cpu, limit 2 s) fills node-0 and `b` (1 × 4 cpu, limit 8 s)
/// node-1 at 0. `gang` (2 × 4 cpu) arrives at 100 ms: it holds node-0 once `a` ends at 2 s and
/// needs node-1 at 8 s. At 1.5 s `probe` arrives: `jobs` 1-cpu jobs of 3 s with the given
/// limit, a gang itself if `probe_gang`.
fn gang_run(jobs: u32, probe_gang: bool, probe_limit: Option<u64>) -> Driver {
    let mut s = scheduler(GANG_TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(4.0, 8.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("a", Some("small"), vec![limited(1, 4.0, 2000, Some(2000))]),
    )
    .unwrap();
    d.start(
        &mut s,
        0,
        op("b", Some("small"), vec![limited(1, 4.0, 8000, Some(8000))]),
    )
    .unwrap();
    d.run(&mut s, 0, 0, 100);
    let mut g = limited(2, 4.0, 1000, None);
    g.gang = true;
    d.start(&mut s, 100, op("gang", Some("gang"), vec![g]))
        .unwrap();
    d.run(&mut s, 100, 1400, 100);
    let mut probe = limited(jobs, 1.0, 3000, probe_limit);
    probe.gang = probe_gang;
    d.start(&mut s, 1500, op("probe", Some("small"), vec![probe]))
        .unwrap();
    d.run(&mut s, 1500, 10_000, 100);
    d
}

#[test]
fn a_gang_hold_is_backfilled_only_by_jobs_and_gangs_that_end_before_the_gang_can_start() {
    // (the probe's jobs, whether it is a gang, its limit, when its jobs start)
    let cases: Vec<(u32, bool, Option<u64>, Vec<u64>)> = vec![
        // Ends by 8 s: runs on node-0's held cpu from shortly after 2 s (the update after
        // the gang took its hold there sets the estimate).
        (2, false, Some(4000), vec![2200, 2200]),
        // A gang of the same jobs is placed whole there at once, for the same reason.
        (2, true, Some(4000), vec![2200, 2200]),
        // Would end after 8 s: waits until the gang has started (at the heartbeat after its
        // last hold, 8.1 s) and ended (9.1 s).
        (2, false, Some(7000), vec![9100, 9100]),
        (2, true, Some(7000), vec![9100, 9100]),
        (2, false, None, vec![9100, 9100]),
        (2, true, None, vec![9100, 9100]),
    ];
    for (jobs, gang, limit, expected) in cases {
        let d = gang_run(jobs, gang, limit);
        let limit = (gang, limit);
        assert_eq!(starts(&d, "gang"), vec![8100, 8100], "limit {limit:?}");
        assert_eq!(starts(&d, "probe"), expected, "limit {limit:?}");
    }
}

#[test]
fn bad_operation_specs_are_rejected_naming_the_field_and_change_nothing() {
    type Mutate = fn(&mut TestOp);
    let cases: Vec<(&str, Mutate, &str)> = vec![
        (
            "a zero time limit",
            |o| o.tasks[0].time_limit_ms = Some(0),
            "tasks[0].time_limit_ms must be positive",
        ),
        ("no tasks", |o| o.tasks.clear(), "tasks must not be empty"),
        (
            "a task asking for nothing",
            |o| o.tasks[0].resources = fairsched_resources::Resources::ZERO,
            "tasks[0].resources must request something",
        ),
        (
            "a negative weight",
            |o| o.weight = Some(-1.0),
            "weight must be a positive number",
        ),
    ];
    for (what, mutate, message) in cases {
        let mut s = scheduler(RESERVATION_TREE, SchedulerConfig::default());
        let mut spec = op("x", Some("small"), vec![limited(1, 1.0, 1000, Some(1000))]);
        mutate(&mut spec);
        let err = Driver::new()
            .start(&mut s, 0, spec)
            .expect_err(what)
            .to_string();
        assert!(err.contains(message), "{what}: {err}");
        assert!(err.contains("\"x\""), "{what}: {err}");
        assert!(s.snapshot(0).operations.is_empty(), "{what}");
    }
}

const PLACED_TREE: &str = r#"{"pool_trees": {"default": {
    "config": {"gang_placement": {"enable": true, "assembly_timeout_ms": 60000}},
    "pools": {"a": {}}
}}}"#;

#[test]
fn a_gang_that_fits_now_is_placed_whole_and_starts_at_once() {
    // Three nodes of 4 cpu, a 2-cpu job of `other` on node-0 (no limit). A gang of 3-cpu jobs:
    // two fit now (node-1, node-2): placed whole at the first heartbeat after the update that
    // admits the gang (200 ms), both start in that round of heartbeats; three do not: it
    // gathers.
    let cases: Vec<(u32, Vec<u64>, &str)> =
        vec![(2, vec![200, 200], "placed"), (3, vec![], "gathers")];
    for (jobs, expected, what) in cases {
        let mut s = scheduler(PLACED_TREE, SchedulerConfig::default());
        add_nodes(&mut s, 3, res(4.0, 8.0));
        let mut d = Driver::new();
        d.start(
            &mut s,
            0,
            op("other", Some("a"), vec![task(1, res(2.0, 1.0), None)]),
        )
        .unwrap();
        d.run(&mut s, 0, 0, 100);
        let mut g = limited(jobs, 3.0, 1000, None);
        g.gang = true;
        d.start(&mut s, 50, op("g", Some("a"), vec![g])).unwrap();
        d.run(&mut s, 100, 500, 100);
        assert_eq!(starts(&d, "g"), expected, "{what}");
        let assembled = events(&d, "gang_assembled");
        if expected.is_empty() {
            assert!(assembled.is_empty(), "{what}: {assembled:?}");
            let why = s.snapshot(500).operations["g"]
                .why
                .clone()
                .unwrap_or_default();
            assert!(
                why.contains("2 of its 3 pending jobs held"),
                "{what}: {why}"
            );
        } else {
            assert_eq!(assembled.len(), 1, "{what}");
            assert_eq!(assembled[0]["nodes"], 2, "{what}");
            let released = events(&d, "gang_released");
            assert_eq!(released.len(), 1, "{what}: {released:?}");
            assert_eq!(released[0]["reason"], "started", "{what}");
        }
    }
}
