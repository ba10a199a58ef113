//! The lecture's FIFO example (seed 003): 100 nodes of (32 cpu, 64 GB); op1 has 1000 jobs of
//! (1 cpu, 4 GB), then op2 has 500 jobs of (10 cpu, 1 GB), both in one FIFO pool scheduled in
//! FIFO order. All of op1 starts, and at most 220 of op2.

use fairsched_core::{
    NodeHeartbeat, NodeId, NodeSpec, OperationId, OperationSpec, Scheduler, SchedulerConfig,
    TaskSpec,
};
use fairsched_resources::{ResourceKind, Resources};

const GB: f64 = 1e9;

fn task(count: u32, cpu: f64, memory: f64) -> TaskSpec {
    TaskSpec {
        job_count: count,
        resources: Resources::ZERO
            .with(ResourceKind::Cpu, cpu)
            .with(ResourceKind::Memory, memory)
            .with(ResourceKind::UserSlots, 1.0),
        time_limit_ms: None,
        gang: false,
        disk_request: None,
    }
}

fn op(id: &str, t: TaskSpec) -> OperationSpec {
    OperationSpec {
        id: OperationId(id.to_string()),
        user: Some("alice".to_string()),
        pool: Some("fifo".to_string()),
        weight: None,
        resource_limits: Default::default(),
        preemption_mode: Default::default(),
        interruption_signal: None,
        interruption_timeout_ms: None,
        scheduling_tag_filter: None,
        max_unpreemptible_allocation_count: None,
        operation_type: None,
        max_failed_job_count: None,
        pool_trees: None,
        scheduling_options_per_pool_tree: Default::default(),
        fair_share_starvation_tolerance: None,
        fair_share_starvation_timeout_ms: None,
        tasks: vec![t],
    }
}

#[test]
fn fifo_starts_all_of_op1_and_at_most_220_of_op2() {
    let trees = fairsched_config::load_pool_trees_str(
        r#"{"pool_trees": {"default": {"pools": {"fifo": {"mode": "fifo", "fifo_pool_scheduling_order": "fifo", "fifo_sort_parameters": ["start_time"]}}}}}"#,
        fairsched_config::Format::Json,
    )
    .unwrap();
    let trees = fairsched_config::validate_pool_trees(&trees).unwrap();
    let mut s = Scheduler::new(SchedulerConfig::default(), trees).unwrap();
    for i in 0..100 {
        s.add_node(
            0,
            NodeSpec {
                id: NodeId(format!("node-{i:03}")),
                resources: Resources::ZERO
                    .with(ResourceKind::Cpu, 32.0)
                    .with(ResourceKind::Memory, 64.0 * GB)
                    .with(ResourceKind::UserSlots, 1000.0),
                tags: Default::default(),
            },
        )
        .unwrap();
    }
    s.start_operation(0, op("op1", task(1000, 1.0, 4.0 * GB)))
        .unwrap();
    s.start_operation(1, op("op2", task(500, 10.0, GB)))
        .unwrap();
    s.tick(10);
    let nodes: Vec<NodeId> = s.nodes().map(|n| n.id.clone()).collect();
    for node in &nodes {
        s.process_heartbeat(20, node, NodeHeartbeat::default())
            .unwrap();
    }
    let running = |id: &str| {
        s.operation(&OperationId(id.to_string()))
            .unwrap()
            .running_job_count()
    };
    assert_eq!(running("op1"), 1000);
    assert!(running("op2") <= 220, "op2 started {}", running("op2"));
    assert!(running("op2") > 0);
    // No node is over capacity.
    for n in s.nodes() {
        assert!(n.resources.dominates(&n.usage), "{} over capacity", n.id);
    }
}
