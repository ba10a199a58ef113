//! SSD priority preemption through the core (scheduler spec §1.3 stages and levels, §2.5): the
//! SSD stages run first on SSD nodes, and the per-heartbeat limit on preemptive starts holds
//! over all stages together.

mod common;

use common::*;
use fairsched_core::{
    DiskRequest, Event, EventKind, NodeHeartbeat, NodeId, NodeSpec, Scheduler, SchedulerConfig,
    Stage,
};

fn tree(max_preemptive: u32) -> String {
    format!(
        r#"{{"pool_trees": {{"default": {{
        "config": {{
            "fair_share_starvation_tolerance": 0.9,
            "fair_share_starvation_timeout_ms": 100,
            "max_unpreemptible_running_allocation_count": 0,
            "preemptive_scheduling_backoff_ms": 0,
            "max_preemptive_allocations_per_heartbeat": {max_preemptive},
            "ssd_priority_preemption": {{
                "enable": true, "node_tag_filter": "ssd_tag", "medium_names": ["ssd_slots"]
            }}
        }},
        "pools": {{
            "filler": {{}},
            "a": {{"strong_guarantee_resources": {{"cpu": 2}}}},
            "b": {{"strong_guarantee_resources": {{"cpu": 2}}}}
        }}
    }}}}}}"#
    )
}

fn ssd_task(job_count: u32) -> TestTask {
    let mut t = task(job_count, res(1.0, 1.0), None);
    t.disk_request = Some(DiskRequest {
        disk_space: 1 << 20,
        medium_name: "ssd_slots".to_string(),
    });
    t
}

/// One SSD node with 4 cpu filled by `filler_op`; `ssd_op` (pool a) and `plain_op` (pool b)
/// both starve for 2 cpu each. Returns the scheduler after the starvation set in.
fn starving_pair(max_preemptive: u32) -> Scheduler {
    let config = SchedulerConfig {
        fair_share_update_period_ms: 100,
        ..SchedulerConfig::default()
    };
    let mut s = scheduler(&tree(max_preemptive), config);
    s.add_node(
        0,
        NodeSpec {
            id: NodeId("node-0".to_string()),
            resources: res(4.0, 4.0),
            tags: ["ssd_tag".to_string()].into(),
        },
    )
    .expect("node");
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op(
            "filler_op",
            Some("filler"),
            vec![task(4, res(1.0, 1.0), None)],
        ),
    )
    .expect("filler");
    d.run(&mut s, 0, 100, 100);
    d.start(&mut s, 200, op("ssd_op", Some("a"), vec![ssd_task(2)]))
        .expect("ssd_op");
    d.start(
        &mut s,
        200,
        op("plain_op", Some("b"), vec![task(2, res(1.0, 1.0), None)]),
    )
    .expect("plain_op");
    // Fair-share updates only (no heartbeat) until both starve.
    for t in (200..=600).step_by(100) {
        s.tick(t);
    }
    s.take_events();
    s
}

/// (operation, stage) of every allocation started by `events`.
fn starts(events: &[Event]) -> Vec<(String, Stage)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AllocationStarted {
                operation, stage, ..
            } => Some((operation.0.clone(), *stage)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_ssd_stage_comes_first_and_one_preemptive_start_per_heartbeat_is_shared_by_all_stages() {
    let mut s = starving_pair(1);
    s.process_heartbeat(700, &NodeId("node-0".into()), NodeHeartbeat::default())
        .expect("heartbeat");
    let events = s.take_events();
    assert_eq!(
        starts(&events),
        vec![("ssd_op".to_string(), Stage::SsdPreemptive)],
        "{events:#?}"
    );
    // The preemption names the SSD reason.
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::AllocationPreempted {
            reason: fairsched_core::PreemptionReason::SsdPreemption,
            ..
        }
    )));
}

#[test]
fn with_two_preemptive_starts_per_heartbeat_both_stages_start_one() {
    let mut s = starving_pair(2);
    s.process_heartbeat(700, &NodeId("node-0".into()), NodeHeartbeat::default())
        .expect("heartbeat");
    let events = s.take_events();
    assert_eq!(
        starts(&events),
        vec![
            ("ssd_op".to_string(), Stage::SsdPreemptive),
            ("plain_op".to_string(), Stage::Preemptive),
        ],
        "{events:#?}"
    );
}
