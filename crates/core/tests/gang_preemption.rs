//! Preempting gang operations that their tree starts whole (`gang_placement`): a gang runs
//! whole or not at all, so its allocations are classified as one (each as its first: nothing
//! of it is taken while any of it is within its fair share), and preempting one takes the
//! others with it (reason `gang_member_preempted`). Operations that are not gangs keep the
//! prefix rule: only what they hold beyond their fair share goes.

mod common;

use common::*;
use fairsched_core::{OperationId, SchedulerConfig};
use serde_json::Value;

/// Two nodes of 4 cpu. Operation `b` (2 jobs of 4 cpu, a gang or not) fills them; then `a`
/// (2 jobs of 4 cpu, not a gang) arrives in pool `a`, which is guaranteed the whole cluster or
/// nothing, and starves a second later.
fn run(gang: bool, guarantee: bool) -> Driver {
    let guarantee = if guarantee {
        r#"{"strong_guarantee_resources": {"cpu": 8}}"#
    } else {
        "{}"
    };
    let tree = format!(
        r#"{{"pool_trees": {{"default": {{
            "config": {{
                "gang_placement": {{"enable": true}},
                "fair_share_starvation_timeout_ms": 1000,
                "preemptive_scheduling_backoff_ms": 0
            }},
            "pools": {{"a": {guarantee}, "b": {{}}}}
        }}}}}}"#
    );
    let mut s = scheduler(
        &tree,
        SchedulerConfig {
            fair_share_update_period_ms: 100,
            ..SchedulerConfig::default()
        },
    );
    add_nodes(&mut s, 2, res(4.0, 8.0));
    let mut d = Driver::new();
    let mut b = task(2, res(4.0, 1.0), None);
    b.gang = gang;
    d.start(&mut s, 0, op("b", Some("b"), vec![b])).unwrap();
    d.run(&mut s, 0, 900, 100);
    assert_eq!(d.count("allocation_started", "b"), 2);
    d.start(
        &mut s,
        1000,
        op("a", Some("a"), vec![task(2, res(4.0, 1.0), None)]),
    )
    .unwrap();
    d.run(&mut s, 1000, 5000, 100);
    let op_b = s.operation(&OperationId("b".into())).unwrap();
    assert_eq!(
        op_b.pending_job_count() as usize + op_b.allocations.len(),
        2,
        "b's jobs are pending or running"
    );
    d
}

/// The reasons `b`'s allocations were preempted for, in order.
fn reasons(d: &Driver) -> Vec<String> {
    d.events
        .iter()
        .map(|e| serde_json::to_value(e).expect("event"))
        .filter(|v| v["event"] == "allocation_preempted" && v["operation"] == "b")
        .map(|v| match &v["reason"] {
            Value::String(r) => r.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn a_gang_is_preempted_whole_or_not_at_all() {
    // (b is a gang, a is guaranteed the cluster (b's fair share is zero), b's preemptions)
    let cases: &[(bool, bool, &[&str])] = &[
        // Nothing of b is within its fair share: one allocation is preempted for a's job,
        // the other goes with it.
        (true, true, &["preemption", "gang_member_preempted"]),
        // Not a gang: each allocation is preempted for one of a's jobs.
        (false, true, &["preemption", "preemption"]),
        // Half the cluster is b's fair share: its first allocation is within it, so the gang
        // is not preempted at all.
        (true, false, &[]),
        // Not a gang: the allocation beyond b's fair share is preempted.
        (false, false, &["preemption"]),
    ];
    for &(gang, guarantee, expected) in cases {
        let d = run(gang, guarantee);
        assert_eq!(
            reasons(&d),
            expected,
            "b a gang: {gang}, a guaranteed the cluster: {guarantee}"
        );
    }
}

/// A gang that plans its start (`gang_placement.hold = "needed"`, a reservation) counts on
/// the room of the running jobs that end before it needs them: a starving operation may take
/// that room by preemption only with jobs that end in time too, as any backfill. Of three
/// nodes of 4 cpu, two run `v` and `w` (pool `b`, time limits 100 s and 1,000 s); gang `h`
/// (pool `g`, 3 jobs of 4 cpu) holds the third and expects the others at 1,000 s; `x` (pool
/// `a`, guaranteed the cluster, 3 jobs of 4 cpu) arrives and starves.
fn reservation_case(x_limit_ms: u64) -> Driver {
    let tree = r#"{"pool_trees": {"default": {
        "config": {
            "gang_placement": {"enable": true, "hold": "needed", "assembly_timeout_ms": 100000000},
            "fair_share_starvation_timeout_ms": 1000,
            "preemptive_scheduling_backoff_ms": 0
        },
        "pools": {"a": {"strong_guarantee_resources": {"cpu": 12}}, "b": {}, "g": {}}
    }}}"#;
    let mut s = scheduler(
        tree,
        SchedulerConfig {
            fair_share_update_period_ms: 100,
            ..SchedulerConfig::default()
        },
    );
    add_nodes(&mut s, 3, res(4.0, 8.0));
    let mut d = Driver::new();
    let limited = |id: &str, pool: &str, jobs: u32, limit: u64, gang: bool| {
        let mut t = task(jobs, res(4.0, 1.0), None);
        t.spec.time_limit_ms = Some(limit);
        t.spec.gang = gang;
        op(id, Some(pool), vec![t])
    };
    d.start(&mut s, 0, limited("v", "b", 1, 100_000, false))
        .unwrap();
    d.start(&mut s, 0, limited("w", "b", 1, 1_000_000, false))
        .unwrap();
    d.run(&mut s, 0, 0, 100);
    d.start(&mut s, 100, limited("h", "g", 3, 10_000, true))
        .unwrap();
    d.run(&mut s, 100, 900, 100);
    assert_eq!(
        s.gang_assembly(0)
            .map(|a| (a.operation.0.as_str(), a.backfill_until)),
        Some(("h", Some(1_000_000))),
        "h plans its start when w ends"
    );
    d.start(&mut s, 1000, limited("x", "a", 3, x_limit_ms, false))
        .unwrap();
    d.run(&mut s, 1000, 5000, 100);
    d
}

#[test]
fn preemption_never_delays_a_reservation() {
    // x's jobs would run past the gang's expected start: nothing is preempted for them.
    let d = reservation_case(5_000_000);
    assert_eq!(d.count("allocation_preempted", "v"), 0);
    assert_eq!(d.count("allocation_preempted", "w"), 0);
    assert_eq!(d.count("allocation_started", "x"), 0);
    // x's jobs end long before it: one backfills what h holds, two take v's and w's room.
    let d = reservation_case(10_000);
    assert_eq!(d.count("allocation_preempted", "v"), 1);
    assert_eq!(d.count("allocation_preempted", "w"), 1);
    assert_eq!(d.count("allocation_started", "x"), 3);
}
