//! A tiny driver for core tests: nodes heartbeat every period, jobs run for their duration.

#![allow(dead_code)]

use fairsched_core::{
    AllocationId, Event, FinishedAllocation, JobOutcome, Millis, NodeHeartbeat, NodeId, NodeSpec,
    OperationId, OperationSpec, Scheduler, SchedulerConfig, TaskSpec,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use std::collections::BTreeMap;

pub fn res(cpu: f64, slots: f64) -> Resources {
    Resources::ZERO
        .with(ResourceKind::Cpu, cpu)
        .with(ResourceKind::UserSlots, slots)
}

pub fn scheduler(tree_json: &str, config: SchedulerConfig) -> Scheduler {
    let trees = fairsched_config::load_pool_trees_str(tree_json, fairsched_config::Format::Json)
        .expect("tree loads");
    let trees = fairsched_config::validate_pool_trees(&trees).expect("tree is valid");
    Scheduler::new(config, trees).expect("scheduler")
}

pub fn add_nodes(s: &mut Scheduler, count: usize, resources: Resources) {
    for i in 0..count {
        s.add_node(
            0,
            NodeSpec {
                id: NodeId(format!("node-{i}")),
                resources,
                tags: Default::default(),
            },
        )
        .expect("node");
    }
}

pub fn task(job_count: u32, resources: Resources, duration_ms: Option<u64>) -> TaskSpec {
    TaskSpec {
        job_count,
        resources,
        duration_ms,
        time_limit_ms: None,
        interruptible: false,
        exit_after_interrupt_ms: None,
        gang: false,
        command: Vec::new(),
        env: Default::default(),
        disk_request: None,
    }
}

pub fn op(id: &str, pool: Option<&str>, tasks: Vec<TaskSpec>) -> OperationSpec {
    OperationSpec {
        id: OperationId(id.to_string()),
        user: Some("user".to_string()),
        pool: pool.map(str::to_string),
        weight: None,
        resource_limits: PartialResources::EMPTY,
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
        tasks,
    }
}

/// Runs heartbeats of every node every `period` from `from` to `to` (inclusive), finishing jobs
/// whose duration passed; collects the events.
pub struct Driver {
    pub finish_at: BTreeMap<AllocationId, (Millis, NodeId)>,
    pub events: Vec<Event>,
}

impl Driver {
    pub fn new() -> Driver {
        Driver {
            finish_at: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    pub fn run(&mut self, s: &mut Scheduler, from: Millis, to: Millis, period: Millis) {
        let mut t = from;
        while t <= to {
            s.tick(t);
            let nodes: Vec<NodeId> = s.nodes().map(|n| n.id.clone()).collect();
            for node in nodes {
                let finished: Vec<FinishedAllocation> = self
                    .finish_at
                    .iter()
                    .filter(|(_, (at, n))| *at <= t && *n == node)
                    .map(|(&a, _)| FinishedAllocation {
                        allocation: a,
                        outcome: JobOutcome::Completed,
                    })
                    .collect();
                for f in &finished {
                    self.finish_at.remove(&f.allocation);
                }
                let response = s
                    .process_heartbeat(t, &node, NodeHeartbeat { finished })
                    .expect("heartbeat");
                for start in response.start {
                    let op = s.operation(&start.operation).expect("op");
                    if let Some(d) = op.spec.tasks[start.task].duration_ms {
                        self.finish_at
                            .insert(start.allocation, (t + d, node.clone()));
                    }
                }
                for a in response.abort {
                    self.finish_at.remove(&a);
                }
            }
            self.events.extend(s.take_events());
            t += period;
        }
    }

    pub fn count(&self, event: &str, operation: &str) -> usize {
        self.events
            .iter()
            .filter(|e| {
                let v = serde_json::to_value(e).expect("event serializes");
                v["event"] == event && v["operation"] == operation
            })
            .count()
    }
}
