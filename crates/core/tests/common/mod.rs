//! A tiny driver for core tests: nodes heartbeat every period, jobs run for their duration.
//! The durations are the driver's: its tasks ([`TestTask`]) are the core's task with how long
//! each job runs, and [`Driver::start`] keeps them when it starts an operation.

#![allow(dead_code)]

use fairsched_core::{
    AllocationId, CoreError, Event, FinishedAllocation, JobOutcome, Millis, NodeHeartbeat, NodeId,
    NodeSpec, OperationId, OperationSpec, Scheduler, SchedulerConfig, TaskSpec,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

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

/// A task as the driver runs it: the core's task (which it derefs to) and how long each of
/// its jobs runs (`None`: until ended).
#[derive(Clone, Debug, PartialEq)]
pub struct TestTask {
    pub spec: TaskSpec,
    pub duration_ms: Option<Millis>,
}

impl Deref for TestTask {
    type Target = TaskSpec;
    fn deref(&self) -> &TaskSpec {
        &self.spec
    }
}

impl DerefMut for TestTask {
    fn deref_mut(&mut self) -> &mut TaskSpec {
        &mut self.spec
    }
}

/// An operation as the driver starts it.
pub type TestOp = OperationSpec<TestTask>;

pub fn task(job_count: u32, resources: Resources, duration_ms: Option<u64>) -> TestTask {
    TestTask {
        spec: TaskSpec {
            job_count,
            resources,
            time_limit_ms: None,
            gang: false,
            disk_request: None,
        },
        duration_ms,
    }
}

/// Starts an operation without a [`Driver`]: its jobs never end by themselves, so its tasks
/// must have no durations (an operation whose jobs end is started with [`Driver::start`]).
pub trait StartOp {
    fn start_op(&mut self, now: Millis, spec: TestOp) -> Result<(), CoreError>;
}

impl StartOp for Scheduler {
    fn start_op(&mut self, now: Millis, spec: TestOp) -> Result<(), CoreError> {
        assert!(
            spec.tasks.iter().all(|t| t.duration_ms.is_none()),
            "operation {}: jobs with a duration need Driver::start",
            spec.id
        );
        self.start_operation(now, spec.map_tasks(|t| t.spec))
    }
}

pub fn op(id: &str, pool: Option<&str>, tasks: Vec<TestTask>) -> TestOp {
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
    /// How long the jobs of each task of each operation it started run.
    pub durations: BTreeMap<OperationId, Vec<Option<Millis>>>,
}

impl Driver {
    pub fn new() -> Driver {
        Driver {
            finish_at: BTreeMap::new(),
            events: Vec::new(),
            durations: BTreeMap::new(),
        }
    }

    /// Starts `spec` at `now`; once started, its jobs run their tasks' durations.
    pub fn start(&mut self, s: &mut Scheduler, now: Millis, spec: TestOp) -> Result<(), CoreError> {
        let id = spec.id.clone();
        let durations = spec.tasks.iter().map(|t| t.duration_ms).collect();
        s.start_operation(now, spec.map_tasks(|t| t.spec))?;
        self.durations.insert(id, durations);
        Ok(())
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
                    let duration = self
                        .durations
                        .get(&start.operation)
                        .and_then(|tasks| tasks[start.task]);
                    if let Some(d) = duration {
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
