//! Extreme but finite numbers passed straight to the core (issue 17, "no input can stop the
//! scheduler"): the API and config crates refuse them at their boundary, but the computation
//! itself must not panic when they get through.

mod common;

use common::*;
use fairsched_core::{NodeHeartbeat, NodeId, SchedulerConfig};
use fairsched_resources::{PartialResources, ResourceKind};

const TREE: &str = r#"{"pool_trees": {"default": {"config": {}, "pools": {"p": {}}}}}"#;

/// Starts the operations (those the core refuses with an error are left out), then runs ticks
/// and heartbeats on two nodes; returns how many started.
fn run(ops: Vec<fairsched_core::OperationSpec>) -> usize {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 2, res(4.0, 4.0));
    let mut started = 0;
    for spec in ops {
        if s.start_operation(0, spec).is_ok() {
            started += 1;
        }
    }
    let mut d = Driver::new();
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

fn weighted(id: &str, weight: f64) -> fairsched_core::OperationSpec {
    let mut spec = op(id, Some("p"), vec![task(8, res(1.0, 1.0), Some(2_000))]);
    spec.weight = Some(weight);
    spec
}

#[test]
fn an_operation_of_weight_1e_minus_10_runs() {
    assert_eq!(
        run(vec![weighted("tiny", 1e-10), weighted("normal", 1.0)]),
        2
    );
}

#[test]
fn weights_1e308_and_1e_minus_300_side_by_side_run() {
    assert_eq!(
        run(vec![weighted("huge", 1e308), weighted("minute", 1e-300)]),
        2
    );
}

#[test]
fn extreme_weights_limits_and_starvation_settings_run() {
    let mut ops = Vec::new();
    for (k, w) in [1e-10, 1e-300, f64::MIN_POSITIVE, f64::MAX]
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
        spec.fair_share_starvation_tolerance = Some([1e308, -1e308, 0.0, f64::MIN_POSITIVE][k]);
        spec.fair_share_starvation_timeout_ms = Some([u64::MAX, 0, 1, u64::MAX / 2][k]);
        ops.push(spec);
    }
    assert_eq!(run(ops), 4);
}

/// An operation below its fair share for good (its jobs fit on no node) with the longest
/// starvation timeout there is.
#[test]
fn the_longest_starvation_timeout_does_not_overflow() {
    let mut spec = op("patient", Some("p"), vec![task(1, res(8.0, 1.0), None)]);
    spec.fair_share_starvation_timeout_ms = Some(u64::MAX);
    assert_eq!(run(vec![spec]), 1);
}
