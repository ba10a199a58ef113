//! Extreme but finite numbers passed straight to the core (issue 17, "no input can stop the
//! scheduler"): the API and config crates refuse them at their boundary, but the computation
//! itself must not panic when they get through.

mod common;

use common::*;
use fairsched_core::{MAX_DURATION_MS, NodeHeartbeat, NodeId, SchedulerConfig};
use fairsched_resources::{PartialResources, ResourceKind};

const TREE: &str = r#"{"pool_trees": {"default": {"config": {}, "pools": {"p": {}}}}}"#;

/// Starts the operations (those the core refuses with an error are left out), then runs ticks
/// and heartbeats on two nodes; returns how many started.
fn run(ops: Vec<TestOp>) -> usize {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(4.0, 4.0));
    let mut started = 0;
    let mut d = Driver::new();
    for spec in ops {
        if d.start(&mut s, 0, spec).is_ok() {
            started += 1;
        }
    }
    d.run(&mut s, 1_000, 10_000, 1_000);
    let response = s
        .process_heartbeat(
            10_000,
            &NodeId("node-0".to_string()),
            NodeHeartbeat::default(),
        )
        .expect("heartbeat");
    let _ = response;
    started
}

fn weighted(id: &str, weight: f64) -> TestOp {
    let mut spec = op(id, Some("p"), vec![task(8, res(1.0, 1.0), Some(2_000))]);
    spec.weight = Some(weight);
    spec
}

/// The core refuses weights outside the pools' range (1e-10 used to panic the fair-share
/// update), naming the field; the others still run.
#[test]
fn weights_out_of_range_are_refused_and_the_rest_runs() {
    for w in [1e-10, 1e308, 1e-300, f64::MIN_POSITIVE, f64::MAX] {
        let mut s = scheduler(TREE, SchedulerConfig::default());
        let e = Driver::new()
            .start(&mut s, 0, weighted("bad", w))
            .unwrap_err();
        assert!(
            e.message().contains("weight must be in"),
            "{w}: {}",
            e.message()
        );
    }
    assert_eq!(
        run(vec![weighted("tiny", 1e-10), weighted("normal", 1.0)]),
        1
    );
}

/// The smallest and the largest weights allowed, side by side, with extreme limits and
/// starvation settings: fair-share updates and heartbeats run.
#[test]
fn the_extreme_weights_allowed_run_side_by_side() {
    use fairsched_config::{MAX_WEIGHT, MIN_WEIGHT};
    assert_eq!(
        run(vec![
            weighted("huge", MAX_WEIGHT),
            weighted("minute", MIN_WEIGHT)
        ]),
        2
    );
    let mut ops = Vec::new();
    for (k, w) in [MIN_WEIGHT, MAX_WEIGHT, MIN_WEIGHT, MAX_WEIGHT]
        .into_iter()
        .enumerate()
    {
        let mut spec = weighted(&format!("w{k}"), w);
        spec.resource_limits = match k {
            0 => PartialResources::EMPTY.with(ResourceKind::Cpu, 1e300),
            1 => PartialResources::EMPTY.with(ResourceKind::Cpu, -1e300),
            2 => PartialResources::EMPTY.with(ResourceKind::Memory, f64::MAX),
            _ => PartialResources::EMPTY.with(ResourceKind::UserSlots, 0.0),
        };
        spec.fair_share_starvation_tolerance = Some([1.0, 0.0, 0.0, f64::MIN_POSITIVE][k]);
        spec.fair_share_starvation_timeout_ms =
            Some([MAX_DURATION_MS, 0, 1, MAX_DURATION_MS / 2][k]);
        ops.push(spec);
    }
    assert_eq!(run(ops), 4);
}

/// An operation below its fair share for good (its jobs fit on no node) with the longest
/// starvation timeout allowed; a longer one is refused by name.
#[test]
fn the_longest_starvation_timeout_does_not_overflow() {
    let mut spec = op("patient", Some("p"), vec![task(1, res(8.0, 1.0), None)]);
    spec.fair_share_starvation_timeout_ms = Some(MAX_DURATION_MS);
    assert_eq!(run(vec![spec.clone()]), 1);
    spec.fair_share_starvation_timeout_ms = Some(u64::MAX);
    let mut s = scheduler(TREE, SchedulerConfig::default());
    let e = s.start_op(0, spec).unwrap_err();
    assert!(
        e.message()
            .contains("fair_share_starvation_timeout_ms must be at most"),
        "{}",
        e.message()
    );
}
