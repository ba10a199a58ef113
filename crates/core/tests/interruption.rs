//! Interruption, graceful preemption, node overcommit, lowered limits and disabled nodes through
//! the core (scheduler spec §2.5–§2.8, seed 004; YTsaurus scenarios YT-S2, YT-S4, YT-S6/YT-S32,
//! YT-S17, YT-S19, YT-S20).
//!
//! A small simulated cluster drives the core: every 100 ms a fair-share tick and one heartbeat
//! per node; jobs end after their duration; a job that gets an interrupt order exits (reported
//! `completed`) after a per-operation delay, or ignores it.

use fairsched_core::{
    AllocationId, FinishedAllocation, HeartbeatResponse, JobOutcome, Millis, NodeHeartbeat, NodeId,
    NodeSpec, OperationId, OperationSpec, OperationState, PreemptionMode, PreemptionReason,
    Scheduler, SchedulerConfig, TaskSpec,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const PERIOD: Millis = 100;

fn res(cpu: f64, slots: f64) -> Resources {
    Resources::ZERO
        .with(ResourceKind::Cpu, cpu)
        .with(ResourceKind::UserSlots, slots)
}

/// A task as this driver runs it: the core's task and how long each of its jobs runs (`None`:
/// until ended).
#[derive(Clone, Debug)]
struct Task {
    spec: TaskSpec,
    duration_ms: Option<Millis>,
}

fn task(job_count: u32, cpu: f64, duration_ms: Option<u64>) -> Task {
    // Through serde, so that fields added later take their defaults.
    let spec = serde_json::from_value(serde_json::json!({
        "job_count": job_count,
        "resources": res(cpu, 1.0),
    }))
    .expect("task spec");
    Task { spec, duration_ms }
}

fn op(id: &str, pool: Option<&str>, tasks: Vec<Task>) -> OperationSpec<Task> {
    let specs: Vec<&TaskSpec> = tasks.iter().map(|t| &t.spec).collect();
    let spec: OperationSpec = serde_json::from_value(serde_json::json!({
        "id": id,
        "user": "user",
        "pool": pool,
        "tasks": specs,
    }))
    .expect("operation spec");
    let mut tasks = tasks.into_iter();
    spec.map_tasks(|_| tasks.next().expect("one task each"))
}

fn trees(json: &str) -> fairsched_config::ValidatedPoolTrees {
    let trees = fairsched_config::load_pool_trees_str(json, fairsched_config::Format::Json)
        .expect("tree loads");
    fairsched_config::validate_pool_trees(&trees).expect("tree is valid")
}

/// The driver's view of a job.
#[derive(Debug)]
struct Job {
    node: NodeId,
    operation: String,
    end_at: Option<Millis>,
    exit_at: Option<Millis>,
}

/// A simulated cluster around the core.
struct Cluster {
    s: Scheduler,
    /// Time of the last round.
    now: Millis,
    jobs: BTreeMap<AllocationId, Job>,
    /// Every event as JSON, in order.
    events: Vec<Value>,
    /// Every heartbeat response: (time, node, response).
    responses: Vec<(Millis, NodeId, HeartbeatResponse)>,
    /// Per operation: how long its jobs take to exit after an interrupt order (`None`: they
    /// ignore it and run on).
    exit_after: BTreeMap<String, Option<Millis>>,
    /// Per operation and task: how long its jobs run (`None`: until ended).
    durations: BTreeMap<String, Vec<Option<Millis>>>,
}

impl Cluster {
    fn new(tree: &str, config: SchedulerConfig, nodes: &[(&str, Resources, &[&str])]) -> Cluster {
        let mut s = Scheduler::new(config, trees(tree)).expect("scheduler");
        for (name, resources, tags) in nodes {
            s.add_node(
                0,
                NodeSpec {
                    id: NodeId(name.to_string()),
                    resources: *resources,
                    tags: tags.iter().map(|t| t.to_string()).collect(),
                },
            )
            .expect("node");
        }
        Cluster {
            s,
            now: 0,
            jobs: BTreeMap::new(),
            events: Vec::new(),
            responses: Vec::new(),
            exit_after: BTreeMap::new(),
            durations: BTreeMap::new(),
        }
    }

    /// Starts an operation at `at` (between rounds); its jobs exit `exit_after` ms after an
    /// interrupt order, or ignore it.
    fn start(&mut self, at: Millis, spec: OperationSpec<Task>, exit_after: Option<Millis>) {
        self.exit_after.insert(spec.id.0.clone(), exit_after);
        let durations = spec.tasks.iter().map(|t| t.duration_ms).collect();
        self.durations.insert(spec.id.0.clone(), durations);
        self.s
            .start_operation(at, spec.map_tasks(|t| t.spec))
            .expect("operation starts");
        self.collect();
    }

    fn collect(&mut self) {
        for e in self.s.take_events() {
            self.events
                .push(serde_json::to_value(&e).expect("event serializes"));
        }
        let s = &self.s;
        self.jobs.retain(|id, _| s.allocation(*id).is_some());
    }

    /// Rounds at every multiple of the period in `(now, to]` (and at 0 if nothing ran yet).
    fn run_until(&mut self, to: Millis) {
        let mut t = if self.responses.is_empty() && self.now == 0 {
            0
        } else {
            self.now + PERIOD
        };
        while t <= to {
            self.round(t);
            t += PERIOD;
        }
    }

    fn round(&mut self, t: Millis) {
        self.now = t;
        self.s.tick(t);
        let nodes: Vec<NodeId> = self.s.nodes().map(|n| n.id.clone()).collect();
        for node in nodes {
            let finished: Vec<FinishedAllocation> = self
                .jobs
                .iter()
                .filter(|(_, j)| j.node == node)
                .filter(|(_, j)| {
                    j.exit_at.is_some_and(|x| x <= t) || j.end_at.is_some_and(|x| x <= t)
                })
                .map(|(&allocation, _)| FinishedAllocation {
                    allocation,
                    outcome: JobOutcome::Completed,
                })
                .collect();
            for f in &finished {
                self.jobs.remove(&f.allocation);
            }
            let response = self
                .s
                .process_heartbeat(t, &node, NodeHeartbeat { finished })
                .expect("heartbeat");
            for order in &response.start {
                let end_at = self.durations[&order.operation.0][order.task].map(|d| t + d);
                self.jobs.insert(
                    order.allocation,
                    Job {
                        node: node.clone(),
                        operation: order.operation.0.clone(),
                        end_at,
                        exit_at: None,
                    },
                );
            }
            for order in &response.interrupt {
                if let Some(job) = self.jobs.get_mut(&order.allocation)
                    && let Some(Some(delay)) = self.exit_after.get(&job.operation)
                {
                    job.exit_at = Some(t + delay);
                }
            }
            for a in &response.abort {
                self.jobs.remove(a);
            }
            self.responses.push((t, node, response));
            self.collect();
        }
    }

    fn operation(&self, id: &str) -> &fairsched_core::Operation {
        self.s
            .operation(&OperationId(id.to_string()))
            .expect("operation exists")
    }

    /// Events of one kind about one operation's allocations (or the operation).
    fn events(&self, kind: &str, operation: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["event"] == kind && e["operation"] == operation)
            .collect()
    }

    /// Events of one kind about one allocation.
    fn events_of(&self, kind: &str, allocation: u64) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["event"] == kind && e["allocation"] == allocation)
            .collect()
    }

    fn response_at(&self, t: Millis, node: &str) -> &HeartbeatResponse {
        &self
            .responses
            .iter()
            .find(|(at, n, _)| *at == t && n.0 == node)
            .unwrap_or_else(|| panic!("no heartbeat of {node} at {t}"))
            .2
    }

    /// Every `(t_ms, allocation, node)` of an event kind for an operation.
    fn hits(&self, kind: &str, operation: &str) -> Vec<(Millis, u64, String)> {
        self.events(kind, operation)
            .into_iter()
            .map(|e| {
                (
                    e["t_ms"].as_u64().expect("t_ms"),
                    e["allocation"].as_u64().expect("allocation"),
                    e["node"].as_str().expect("node").to_string(),
                )
            })
            .collect()
    }
}

fn t_ms(e: &Value) -> Millis {
    e["t_ms"].as_u64().expect("t_ms")
}

// ---- (a), (b): preempted victims with and without an interruption signal ----------------------

/// YT-S2's setup: three nodes of one cpu; a guaranteed pool reclaims the cluster from an
/// ephemeral pool by preemption once it has starved.
const YT_S2_TREE: &str = r#"{"pool_trees": {"default": {
    "config": {
        "preemption_satisfaction_threshold": 0.99,
        "fair_share_starvation_tolerance": 0.8,
        "fair_share_starvation_timeout_ms": 100,
        "max_unpreemptible_running_allocation_count": 0,
        "preemptive_scheduling_backoff_ms": 0,
        "allocation_graceful_preemption_timeout_ms": 10000,
        "max_ephemeral_pools_per_user": 2
    },
    "pools": {"test_pool": {"strong_guarantee_resources": {"cpu": 3}}}
}}}"#;

fn fast_updates() -> SchedulerConfig {
    SchedulerConfig {
        fair_share_update_period_ms: 100,
        ..SchedulerConfig::default()
    }
}

fn three_small_nodes() -> Vec<(&'static str, Resources, &'static [&'static str])> {
    vec![
        ("node-0", res(1.0, 2.0), &[]),
        ("node-1", res(1.0, 2.0), &[]),
        ("node-2", res(1.0, 2.0), &[]),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum VictimFate {
    /// Interrupted; exits before the deadline and counts as a completed job.
    CompletedInTime,
    /// Interrupted; aborted by the core at the deadline, its job goes back to pending.
    AbortedAtDeadline,
    /// No interruption signal: aborted at once.
    AbortedAtOnce,
}

#[derive(Debug)]
struct VictimCase {
    name: &'static str,
    signal: bool,
    interruption_timeout_ms: Option<u64>,
    /// The tree's `allocation_preemption_timeout_ms`.
    tree_timeout_ms: Option<u64>,
    exit_after_ms: Option<u64>,
    expected_timeout_ms: u64,
    fate: VictimFate,
}

const VICTIM_CASES: &[VictimCase] = &[
    VictimCase {
        name: "exits within its timeout",
        signal: true,
        interruption_timeout_ms: Some(2000),
        tree_timeout_ms: None,
        exit_after_ms: Some(500),
        expected_timeout_ms: 2000,
        fate: VictimFate::CompletedInTime,
    },
    VictimCase {
        name: "exits within the default 15 s",
        signal: true,
        interruption_timeout_ms: None,
        tree_timeout_ms: None,
        exit_after_ms: Some(10_000),
        expected_timeout_ms: 15_000,
        fate: VictimFate::CompletedInTime,
    },
    VictimCase {
        name: "ignores the signal",
        signal: true,
        interruption_timeout_ms: Some(2000),
        tree_timeout_ms: None,
        exit_after_ms: None,
        expected_timeout_ms: 2000,
        fate: VictimFate::AbortedAtDeadline,
    },
    VictimCase {
        name: "exits after its timeout",
        signal: true,
        interruption_timeout_ms: Some(1000),
        tree_timeout_ms: None,
        exit_after_ms: Some(3000),
        expected_timeout_ms: 1000,
        fate: VictimFate::AbortedAtDeadline,
    },
    VictimCase {
        name: "ignores the signal, default timeout",
        signal: true,
        interruption_timeout_ms: None,
        tree_timeout_ms: None,
        exit_after_ms: None,
        expected_timeout_ms: 15_000,
        fate: VictimFate::AbortedAtDeadline,
    },
    VictimCase {
        name: "has no interruption signal",
        signal: false,
        interruption_timeout_ms: None,
        tree_timeout_ms: None,
        exit_after_ms: Some(100),
        expected_timeout_ms: 0,
        fate: VictimFate::AbortedAtOnce,
    },
    VictimCase {
        name: "ignores the signal, the tree's timeout",
        signal: true,
        interruption_timeout_ms: None,
        tree_timeout_ms: Some(4000),
        exit_after_ms: None,
        expected_timeout_ms: 4000,
        fate: VictimFate::AbortedAtDeadline,
    },
    VictimCase {
        name: "exits in time, its own timeout over the tree's",
        signal: true,
        interruption_timeout_ms: Some(2000),
        tree_timeout_ms: Some(4000),
        exit_after_ms: Some(1500),
        expected_timeout_ms: 2000,
        fate: VictimFate::CompletedInTime,
    },
];

/// Scheduler spec §2.6, seed 004, YT-S2: a preempted victim with `interruption_signal` gets an
/// interrupt order with its `interruption_timeout_ms` (else the tree's
/// `allocation_preemption_timeout_ms`, else 15 s); exiting in time counts
/// as a completed job (its task gets a completion and nothing is re-run); otherwise the core
/// aborts it at the deadline (abort order, `allocation_preempted`) and the job goes back to
/// pending. Without a signal the victim is aborted at once.
#[test]
fn preempted_victims_are_interrupted_or_aborted() {
    for case in VICTIM_CASES {
        check_victim_case(case);
    }
}

fn check_victim_case(case: &VictimCase) {
    let name = case.name;
    let tree = match case.tree_timeout_ms {
        None => YT_S2_TREE.to_string(),
        Some(ms) => YT_S2_TREE.replace(
            r#""max_ephemeral_pools_per_user": 2"#,
            &format!(
                r#""max_ephemeral_pools_per_user": 2, "allocation_preemption_timeout_ms": {ms}"#
            ),
        ),
    };
    let mut c = Cluster::new(&tree, fast_updates(), &three_small_nodes());
    let mut op1 = op("op1", Some("fake_pool"), vec![task(3, 1.0, None)]);
    if case.signal {
        op1.interruption_signal = Some("SIGINT".into());
    }
    op1.interruption_timeout_ms = case.interruption_timeout_ms;
    c.start(0, op1, case.exit_after_ms);
    c.run_until(1900);
    assert_eq!(c.operation("op1").running_job_count(), 3, "{name}");
    c.start(
        2000,
        op("op2", Some("test_pool"), vec![task(3, 1.0, Some(500))]),
        None,
    );
    c.run_until(2000 + 20_000);

    let interrupted = c.hits("allocation_interrupted", "op1");
    let preempted = c.hits("allocation_preempted", "op1");
    let finished = c.hits("allocation_finished", "op1");
    let started_op1 = c.hits("allocation_started", "op1").len();
    let op1 = c.operation("op1");
    let completed: u32 = op1.tasks.iter().map(|t| t.completed).sum();
    assert_eq!(
        c.operation("op2").state,
        OperationState::Completed,
        "{name}"
    );

    match case.fate {
        VictimFate::AbortedAtOnce => {
            assert!(interrupted.is_empty(), "{name}: {interrupted:?}");
            assert!(!preempted.is_empty(), "{name}: nothing preempted");
            for (t, a, node) in &preempted {
                let e = c.events_of("allocation_preempted", *a)[0];
                assert_eq!(e["reason"], "preemption", "{name}: {e}");
                assert_eq!(e["preemptor"]["operation"], "op2", "{name}: {e}");
                assert!(
                    c.response_at(*t, node).abort.contains(&AllocationId(*a)),
                    "{name}: no abort order for {a}"
                );
                // The preemptor started in the same heartbeat.
                let preemptor = e["preemptor"]["allocation"].as_u64().unwrap();
                assert_eq!(
                    t_ms(c.events_of("allocation_started", preemptor)[0]),
                    *t,
                    "{name}"
                );
            }
            // Aborted jobs are re-run once op2 is done; none completed.
            assert_eq!(completed, 0, "{name}");
            assert_eq!(started_op1, 3 + preempted.len(), "{name}");
            assert_eq!(op1.running_job_count(), 3, "{name}");
        }
        VictimFate::CompletedInTime | VictimFate::AbortedAtDeadline => {
            assert!(!interrupted.is_empty(), "{name}: nothing interrupted");
            for (t, a, node) in &interrupted {
                let e = c.events_of("allocation_interrupted", *a)[0];
                assert_eq!(e["reason"], "preemption", "{name}: {e}");
                assert_eq!(e["timeout_ms"], case.expected_timeout_ms, "{name}: {e}");
                assert_eq!(e["preemptor"]["operation"], "op2", "{name}: {e}");
                let order = c
                    .response_at(*t, node)
                    .interrupt
                    .iter()
                    .find(|o| o.allocation.0 == *a)
                    .unwrap_or_else(|| panic!("{name}: no interrupt order for {a}"));
                assert_eq!(order.signal.as_deref(), Some("SIGINT"), "{name}");
                assert_eq!(order.timeout_ms, case.expected_timeout_ms, "{name}");
                assert_eq!(order.reason, PreemptionReason::Preemption, "{name}");
                let deadline = t + case.expected_timeout_ms;
                if case.fate == VictimFate::CompletedInTime {
                    let exit = t + case.exit_after_ms.unwrap();
                    let f = c.events_of("allocation_finished", *a);
                    assert_eq!(f.len(), 1, "{name}: {a} finished {f:?}");
                    assert_eq!(f[0]["outcome"], "completed", "{name}");
                    assert_eq!(t_ms(f[0]), exit, "{name}");
                    assert!(exit < deadline, "{name}");
                    assert!(
                        c.events_of("allocation_preempted", *a).is_empty(),
                        "{name}: {a} was also preempted"
                    );
                } else {
                    let p = c.events_of("allocation_preempted", *a);
                    assert_eq!(p.len(), 1, "{name}: {a} preempted {p:?}");
                    assert_eq!(t_ms(p[0]), deadline, "{name}: aborted at the deadline");
                    assert_eq!(p[0]["reason"], "preemption", "{name}");
                    // The abort names the preemptor of the interrupt.
                    assert_eq!(p[0]["preemptor"], e["preemptor"], "{name}: {}", p[0]);
                    assert!(
                        c.response_at(deadline, node)
                            .abort
                            .contains(&AllocationId(*a)),
                        "{name}: no abort order at the deadline"
                    );
                    assert!(c.events_of("allocation_finished", *a).is_empty(), "{name}");
                }
            }
            if case.fate == VictimFate::CompletedInTime {
                // The interrupted jobs count as completed; nothing is re-run.
                assert_eq!(completed as usize, interrupted.len(), "{name}");
                assert_eq!(finished.len(), interrupted.len(), "{name}");
                assert_eq!(started_op1, 3, "{name}: interrupted jobs were re-run");
                assert_eq!(op1.pending_job_count(), 0, "{name}");
                assert_eq!(
                    op1.running_job_count() as usize,
                    3 - interrupted.len(),
                    "{name}"
                );
            } else {
                // Aborted at the deadline: back to pending, re-run after op2 is done.
                assert_eq!(completed, 0, "{name}");
                assert_eq!(preempted.len(), interrupted.len(), "{name}");
                assert_eq!(started_op1, 3 + interrupted.len(), "{name}");
                assert_eq!(op1.running_job_count(), 3, "{name}");
            }
        }
    }
}

/// Nothing is interrupted or aborted before the preemptor has starved for the timeout, and a
/// preempted allocation's resources go to the preemptor in the same heartbeat (the interrupted
/// job's resources leave the node's running usage at once).
#[test]
fn the_preemptor_starts_in_the_heartbeat_of_the_interrupt() {
    let mut c = Cluster::new(YT_S2_TREE, fast_updates(), &three_small_nodes());
    let mut op1 = op("op1", Some("fake_pool"), vec![task(3, 1.0, None)]);
    op1.interruption_signal = Some("SIGUSR1".into());
    op1.interruption_timeout_ms = Some(5000);
    c.start(0, op1, None);
    c.run_until(1900);
    c.start(
        2000,
        op("op2", Some("test_pool"), vec![task(1, 1.0, None)]),
        None,
    );
    c.run_until(4000);
    let interrupted = c.hits("allocation_interrupted", "op1");
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    let (t, a, node) = &interrupted[0];
    let e = c.events_of("allocation_interrupted", *a)[0];
    let preemptor = e["preemptor"]["allocation"].as_u64().unwrap();
    let started = c.events_of("allocation_started", preemptor)[0];
    assert_eq!(t_ms(started), *t);
    assert_eq!(started["node"], node.as_str());
    assert_ne!(started["stage"], "regular");
    // op2 first starves (below its fair share since the first update after 2000, for more
    // than 100 ms).
    assert!(*t >= 2200, "interrupted at {t}");
    let order = &c.response_at(*t, node).interrupt[0];
    assert_eq!(order.signal.as_deref(), Some("SIGUSR1"));
    // Node usage counts the preemptor, not the job being interrupted; the node is not over.
    let n = c.s.node(&NodeId(node.clone())).unwrap();
    assert!(n.resources.dominates(&n.usage));
    assert_eq!(n.allocations.len(), 2);
}

// ---- (c): graceful preemption --------------------------------------------------------------

const YT_S4_TREE: &str = r#"{"pool_trees": {"default": {
    "config": {
        "preemption_satisfaction_threshold": 0.99,
        "fair_share_starvation_tolerance": 0.8,
        "fair_share_starvation_timeout_ms": 1000,
        "max_unpreemptible_running_allocation_count": 0,
        "preemptive_scheduling_backoff_ms": 0,
        "allocation_graceful_preemption_timeout_ms": 10000,
        "max_ephemeral_pools_per_user": 2
    },
    "pools": {"test_pool": {"strong_guarantee_resources": {"cpu": 3}}}
}}}"#;

/// YT-S4: a graceful operation whose limits drop to zero slots has its allocation interrupted
/// with the tree's graceful timeout (reason `graceful_preemption`); the job ignores the
/// interrupt and is aborted exactly at the deadline, not before.
#[test]
fn graceful_job_ignoring_the_interrupt_is_aborted_after_the_graceful_timeout() {
    let mut c = Cluster::new(YT_S4_TREE, fast_updates(), &three_small_nodes());
    let mut spec = op("op", None, vec![task(1, 1.0, Some(100_000))]);
    spec.preemption_mode = PreemptionMode::Graceful;
    c.start(0, spec, None);
    c.run_until(1000);
    assert_eq!(c.operation("op").running_job_count(), 1);
    assert!(c.hits("allocation_interrupted", "op").is_empty());
    c.s.update_operation(
        1000,
        &OperationId("op".into()),
        None,
        Some(PartialResources::EMPTY.with(ResourceKind::UserSlots, 0.0)),
        None,
    )
    .unwrap();
    c.run_until(1000 + 12_000);
    let interrupted = c.hits("allocation_interrupted", "op");
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    let (t, a, node) = &interrupted[0];
    // The first fair-share update after the change makes it preemptible.
    assert_eq!(*t, 1100);
    let e = c.events_of("allocation_interrupted", *a)[0];
    assert_eq!(e["reason"], "graceful_preemption");
    assert_eq!(e["timeout_ms"], 10_000);
    assert!(e.get("preemptor").is_none());
    let order = &c.response_at(*t, node).interrupt[0];
    assert_eq!(
        order.signal, None,
        "the operation has no interruption signal"
    );
    assert_eq!(order.reason, PreemptionReason::GracefulPreemption);
    let preempted = c.events_of("allocation_preempted", *a);
    assert_eq!(preempted.len(), 1);
    assert_eq!(
        t_ms(preempted[0]),
        t + 10_000,
        "aborted at the graceful deadline"
    );
    assert_eq!(preempted[0]["reason"], "graceful_preemption");
    assert!(
        c.response_at(t + 10_000, node)
            .abort
            .contains(&AllocationId(*a))
    );
    // One job, aborted: back to pending, and the zero-slot limit keeps it there.
    let op = c.operation("op");
    assert_eq!(op.running_job_count(), 0);
    assert_eq!(op.pending_job_count(), 1);
    assert_eq!(c.hits("allocation_started", "op").len(), 1);
}

/// Graceful mode (spec §2.7): the operation is never the victim of a preemptive stage; once a
/// guaranteed pool claims the cluster, its allocations above its fair share are interrupted
/// proactively with the graceful timeout, before anyone starves. Its jobs exit in time and
/// count as completed.
#[test]
fn a_graceful_operation_shrinks_itself_and_is_never_a_preemption_victim() {
    let mut c = Cluster::new(YT_S4_TREE, fast_updates(), &three_small_nodes());
    let mut op1 = op("op1", Some("fake_pool"), vec![task(3, 1.0, None)]);
    op1.preemption_mode = PreemptionMode::Graceful;
    op1.interruption_signal = Some("SIGINT".into());
    c.start(0, op1, Some(300));
    c.run_until(1900);
    assert_eq!(c.operation("op1").running_job_count(), 3);
    assert!(c.hits("allocation_interrupted", "op1").is_empty());
    c.start(
        2000,
        op("op2", Some("test_pool"), vec![task(3, 1.0, Some(500))]),
        None,
    );
    c.run_until(8000);
    let interrupted = c.hits("allocation_interrupted", "op1");
    assert_eq!(interrupted.len(), 3, "{interrupted:?}");
    for (t, a, _) in &interrupted {
        let e = c.events_of("allocation_interrupted", *a)[0];
        assert_eq!(e["reason"], "graceful_preemption", "{e}");
        assert_eq!(e["timeout_ms"], 10_000, "{e}");
        // Before op2 could starve (timeout 1000 ms after it is first below its fair share).
        assert!(*t < 3000, "{e}");
        assert_eq!(
            c.events_of("allocation_finished", *a)[0]["outcome"],
            "completed"
        );
    }
    for e in &c.events {
        if e["event"] == "allocation_interrupted" || e["event"] == "allocation_preempted" {
            assert_eq!(e["reason"], "graceful_preemption", "{e}");
        }
    }
    assert_eq!(c.operation("op2").state, OperationState::Completed);
    let op1 = c.operation("op1");
    assert_eq!(op1.tasks[0].completed, 3);
    assert_eq!(op1.state, OperationState::Completed);
    assert_eq!(c.hits("allocation_started", "op1").len(), 3);
}

/// YT-S17: a graceful operation gets new allocations only while below its fair share. With a
/// placeholder holding half of the single node it stays at one job; once the placeholder is
/// done, its fair share equals its demand (tolerance 1.0), so at half usage it is still below
/// its fair share and gets the second job.
#[test]
fn graceful_operation_keeps_getting_allocations_while_its_demand_is_not_met() {
    let tree = r#"{"pool_trees": {"default": {
        "config": {"max_ephemeral_pools_per_user": 2},
        "pools": {"pool": {"fair_share_starvation_tolerance": 0.4}}
    }}}"#;
    let mut c = Cluster::new(tree, fast_updates(), &[("node", res(2.0, 2.0), &[])]);
    c.start(
        0,
        op("placeholder", None, vec![task(1, 1.0, Some(3000))]),
        None,
    );
    c.run_until(0);
    let mut spec = op("op", Some("pool"), vec![task(2, 1.0, Some(10_000))]);
    spec.preemption_mode = PreemptionMode::Graceful;
    c.start(100, spec, None);
    c.run_until(2900);
    assert_eq!(c.operation("op").running_job_count(), 1);
    c.run_until(30_000);
    let op = c.operation("op");
    assert_eq!(op.state, OperationState::Completed);
    assert_eq!(op.tasks[0].completed, 2);
    assert_eq!(c.hits("allocation_started", "op").len(), 2);
    assert!(c.hits("allocation_interrupted", "op").is_empty());
}

/// A graceful operation that is at its fair share (status `normal`) gets nothing more, even
/// with free resources that only it could use. One heartbeat (with the status of the last
/// fair-share update) may give it allocations beyond its fair share; those the prefix rule
/// classifies preemptible (the allocation crossing the fair share stays) are interrupted
/// gracefully at the next heartbeat, and the freed slot stays free.
#[test]
fn a_graceful_operation_at_its_fair_share_gets_nothing_more() {
    let tree = r#"{"pool_trees": {"default": {
        "config": {"allocation_graceful_preemption_timeout_ms": 1000, "max_ephemeral_pools_per_user": 3}
    }}}"#;
    let mut c = Cluster::new(
        tree,
        fast_updates(),
        &[("a", res(4.0, 4.0), &[]), ("b", res(2.0, 2.0), &["x"])],
    );
    let mut x = op("x", Some("px"), vec![task(4, 1.0, None)]);
    x.scheduling_tag_filter = Some("x".into());
    c.start(0, x, None);
    let mut g = op("g", Some("pg"), vec![task(4, 1.0, None)]);
    g.preemption_mode = PreemptionMode::Graceful;
    c.start(0, g, None);
    c.run_until(5000);
    // Fair shares: 3 slots each of 6; x can only use node b.
    let snap = c.s.snapshot(5000);
    let g_snap = snap.operations["g"].element.as_ref().unwrap();
    assert_eq!(g_snap.fair_share_ratio, 0.5);
    assert_eq!(g_snap.scheduling_status, "normal");
    assert_eq!(c.operation("x").running_job_count(), 2);
    let started = c.hits("allocation_started", "g");
    let interrupted = c.hits("allocation_interrupted", "g");
    // The first heartbeat of node a gave g all four slots; the fourth (prefix at the fair
    // share) was interrupted by the next heartbeat and aborted at the graceful deadline.
    assert_eq!(started.len(), 4, "{started:?}");
    assert!(started.iter().all(|s| s.0 == 0), "{started:?}");
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    assert_eq!(interrupted[0].0, 100);
    assert_eq!(interrupted[0].1, started[3].1, "the newest allocation goes");
    let preempted = c.hits("allocation_preempted", "g");
    assert_eq!(preempted.len(), 1);
    assert_eq!(preempted[0].0, 1100);
    // Back at its fair share: three running, one pending, and node a keeps a free slot.
    let g = c.operation("g");
    assert_eq!(g.running_job_count(), 3);
    assert_eq!(g.pending_job_count(), 1);
    let a = c.s.node(&NodeId("a".into())).unwrap();
    assert_eq!(a.usage, res(3.0, 3.0));
}

// ---- (d): node overcommit -------------------------------------------------------------------

/// Spec §2.8, YT-S20: after a node's resources are lowered below its usage, nothing happens for
/// `allowed_node_resources_overcommit_duration_ms` (counted from the first heartbeat that sees
/// the overcommit); then the allocations that do not fit in keep order (least preemptible and
/// oldest first) are preempted with reason `resource_overcommit`: interrupted if the operation
/// has a signal, aborted otherwise.
#[test]
fn node_overcommit_preempts_the_newest_allocations_after_the_allowed_duration() {
    for allowed in [0u64, 1000, 3000] {
        for signal in [false, true] {
            let config = SchedulerConfig {
                fair_share_update_period_ms: 100,
                node_heartbeat_period_ms: 100,
                allowed_node_resources_overcommit_duration_ms: allowed,
                ..SchedulerConfig::default()
            };
            let tree =
                r#"{"pool_trees": {"default": {"config": {"max_ephemeral_pools_per_user": 2}}}}"#;
            let mut c = Cluster::new(tree, config, &[("node", res(4.0, 4.0), &[])]);
            let mut spec = op("op", None, vec![task(4, 1.0, None)]);
            if signal {
                spec.interruption_signal = Some("SIGINT".into());
                spec.interruption_timeout_ms = Some(700);
            }
            c.start(0, spec, None);
            c.run_until(1000);
            let ids: Vec<u64> = c
                .hits("allocation_started", "op")
                .iter()
                .map(|h| h.1)
                .collect();
            assert_eq!(ids.len(), 4);
            let node = NodeId("node".into());
            // Lowered after the round at 1000: the heartbeat at 1100 first sees it.
            c.s.set_node(1000, &node, Some(res(2.0, 4.0)), None, None)
                .unwrap();
            let seen = 1100;
            c.run_until(seen + allowed + 1000);
            let kind = if signal {
                "allocation_interrupted"
            } else {
                "allocation_preempted"
            };
            let victims = c.hits(kind, "op");
            let label = format!("allowed {allowed} signal {signal}");
            assert_eq!(victims.len(), 2, "{label}: {victims:?}");
            for (t, a, _) in &victims {
                assert_eq!(*t, seen + allowed, "{label}: preempted at {t}");
                assert_eq!(c.events_of(kind, *a)[0]["reason"], "resource_overcommit");
            }
            // The newest two go; the oldest two stay.
            let victim_ids: BTreeSet<u64> = victims.iter().map(|v| v.1).collect();
            assert_eq!(victim_ids, ids[2..].iter().copied().collect(), "{label}");
            let n = c.s.node(&node).unwrap();
            assert_eq!(n.usage, res(2.0, 2.0), "{label}");
            let op = c.operation("op");
            if signal {
                // Ignored the interrupt: aborted at the deadline, back to pending.
                for (t, a, _) in &victims {
                    let p = c.events_of("allocation_preempted", *a);
                    assert_eq!(t_ms(p[0]), t + 700, "{label}");
                }
            }
            assert_eq!(op.running_job_count(), 2, "{label}");
            assert_eq!(op.pending_job_count(), 2, "{label}");
        }
    }
}

/// Overcommit that ends before the allowed duration (resources raised again) preempts nothing.
#[test]
fn overcommit_that_ends_in_time_preempts_nothing() {
    let config = SchedulerConfig {
        fair_share_update_period_ms: 100,
        node_heartbeat_period_ms: 100,
        allowed_node_resources_overcommit_duration_ms: 1000,
        ..SchedulerConfig::default()
    };
    let tree = r#"{"pool_trees": {"default": {"config": {"max_ephemeral_pools_per_user": 2}}}}"#;
    let mut c = Cluster::new(tree, config, &[("node", res(4.0, 4.0), &[])]);
    c.start(0, op("op", None, vec![task(4, 1.0, None)]), None);
    c.run_until(1000);
    let node = NodeId("node".into());
    c.s.set_node(1000, &node, Some(res(2.0, 4.0)), None, None)
        .unwrap();
    c.run_until(1900);
    c.s.set_node(1900, &node, Some(res(4.0, 4.0)), None, None)
        .unwrap();
    c.run_until(5000);
    assert!(c.hits("allocation_preempted", "op").is_empty());
    assert_eq!(c.operation("op").running_job_count(), 4);
}

/// The overcommit clock restarts when the node fits again: here the node fits again between
/// two heartbeats and is lowered again before the next one; the second overcommit must last
/// the allowed duration too.
#[test]
fn overcommit_clock_restarts_when_the_node_fits_again() {
    let config = SchedulerConfig {
        fair_share_update_period_ms: 100,
        node_heartbeat_period_ms: 100,
        allowed_node_resources_overcommit_duration_ms: 1000,
        ..SchedulerConfig::default()
    };
    let tree = r#"{"pool_trees": {"default": {"config": {"max_ephemeral_pools_per_user": 2}}}}"#;
    let mut c = Cluster::new(tree, config, &[("node", res(4.0, 4.0), &[])]);
    c.start(0, op("op", None, vec![task(4, 1.0, None)]), None);
    c.run_until(1000);
    let node = NodeId("node".into());
    // Over from 1000 (first seen by the heartbeat at 1100).
    c.s.set_node(1000, &node, Some(res(2.0, 4.0)), None, None)
        .unwrap();
    c.run_until(1900);
    // Fits again at 1950, over again at 1960, both before the heartbeat at 2000.
    c.s.set_node(1950, &node, Some(res(4.0, 4.0)), None, None)
        .unwrap();
    c.s.set_node(1960, &node, Some(res(2.0, 4.0)), None, None)
        .unwrap();
    c.run_until(2900);
    // The second overcommit started at 1960: nothing may be preempted before 2960.
    assert!(
        c.hits("allocation_preempted", "op").is_empty(),
        "preempted at {:?}",
        c.hits("allocation_preempted", "op")
    );
    c.run_until(3100);
    assert_eq!(c.hits("allocation_preempted", "op").len(), 2);
}

// ---- (e): lowered resource limits ------------------------------------------------------------

#[derive(Debug)]
struct LimitCase {
    name: &'static str,
    /// Lower the pool's limit (via a new tree) instead of the operation's.
    pool_limit: bool,
    signal: bool,
}

const LIMIT_CASES: &[LimitCase] = &[
    LimitCase {
        name: "operation limit, abort",
        pool_limit: false,
        signal: false,
    },
    LimitCase {
        name: "operation limit, interrupt",
        pool_limit: false,
        signal: true,
    },
    LimitCase {
        name: "pool limit, abort",
        pool_limit: true,
        signal: false,
    },
];

/// YT-S6 / spec §2.5 step 5: lowering an operation's (or its pool's) resource limits below its
/// usage leads to `resource_limits_violated` preemptions down to exactly the limit (the
/// allocations beyond the new fair share become preemptible), from the first fair-share update
/// after the change; nothing else is preempted and nothing is started above the limit.
#[test]
fn lowered_limits_are_enforced_by_preemption_down_to_the_limit() {
    for case in LIMIT_CASES {
        let name = case.name;
        let tree = |limit: Option<u32>| {
            let limits = limit
                .map(|l| format!(r#", "resource_limits": {{"cpu": {l}}}"#))
                .unwrap_or_default();
            format!(
                r#"{{"pool_trees": {{"default": {{
                    "config": {{"preemptive_scheduling_backoff_ms": 0, "max_ephemeral_pools_per_user": 2}},
                    "pools": {{"p": {{"weight": 1 {limits}}}}}
                }}}}}}"#
            )
        };
        let mut c = Cluster::new(
            &tree(None),
            fast_updates(),
            &[("n0", res(4.0, 4.0), &[]), ("n1", res(4.0, 4.0), &[])],
        );
        let mut spec = op("op", Some("p"), vec![task(8, 1.0, None)]);
        if case.signal {
            spec.interruption_signal = Some("SIGINT".into());
            spec.interruption_timeout_ms = Some(500);
        }
        c.start(0, spec, None);
        c.run_until(1000);
        assert_eq!(c.operation("op").running_job_count(), 8, "{name}");
        if case.pool_limit {
            c.s.replace_tree_config(1000, trees(&tree(Some(3))))
                .unwrap();
        } else {
            c.s.update_operation(
                1000,
                &OperationId("op".into()),
                None,
                Some(PartialResources::EMPTY.with(ResourceKind::Cpu, 3.0)),
                None,
            )
            .unwrap();
        }
        c.run_until(5000);
        let kind = if case.signal {
            "allocation_interrupted"
        } else {
            "allocation_preempted"
        };
        let victims = c.hits(kind, "op");
        assert_eq!(victims.len(), 5, "{name}: {victims:?}");
        for (t, a, _) in &victims {
            let e = c.events_of(kind, *a)[0];
            assert_eq!(e["reason"], "resource_limits_violated", "{name}: {e}");
            assert!(e.get("preemptor").is_none(), "{name}: {e}");
            assert_eq!(
                *t, 1100,
                "{name}: preempted at the first heartbeat after the update"
            );
        }
        let op = c.operation("op");
        assert_eq!(op.usage, res(3.0, 3.0), "{name}");
        assert_eq!(op.running_job_count() - interrupting(&c, "op"), 3, "{name}");
        assert_eq!(
            c.hits("allocation_started", "op").len(),
            8,
            "{name}: started above the limit"
        );
        // Only the violation, nothing else, was preempted.
        for e in &c.events {
            if e["event"] == "allocation_preempted" || e["event"] == "allocation_interrupted" {
                assert_eq!(e["reason"], "resource_limits_violated", "{name}: {e}");
            }
        }
    }
}

fn interrupting(c: &Cluster, operation: &str) -> u32 {
    c.s.allocations()
        .filter(|a| a.operation.0 == operation)
        .filter(|a| !matches!(a.state, fairsched_core::AllocationState::Running))
        .count() as u32
}

/// A limit lowered between two fair-share updates is checked against the limits of the last
/// update: the core may start allocations above the new limit until the next update, then
/// trims them back (documented behaviour, the limits live in the tree snapshot).
#[test]
fn starts_follow_the_limits_of_the_last_fair_share_update() {
    let tree = r#"{"pool_trees": {"default": {"config": {"preemptive_scheduling_backoff_ms": 0, "max_ephemeral_pools_per_user": 2}}}}"#;
    let config = SchedulerConfig {
        fair_share_update_period_ms: 1000,
        ..SchedulerConfig::default()
    };
    let mut c = Cluster::new(tree, config, &[("n0", res(8.0, 8.0), &[])]);
    c.start(0, op("op", None, vec![task(100, 1.0, Some(150))]), None);
    c.run_until(0);
    assert_eq!(c.operation("op").running_job_count(), 8);
    c.s.update_operation(
        50,
        &OperationId("op".into()),
        None,
        Some(PartialResources::EMPTY.with(ResourceKind::Cpu, 2.0)),
        None,
    )
    .unwrap();
    // The jobs end at 150 and are reported at 200; eight more start (the tree has no limit yet).
    c.run_until(200);
    assert_eq!(c.operation("op").running_job_count(), 8);
    // From the update at 1000 on, the limit holds.
    c.run_until(1000);
    assert_eq!(c.operation("op").running_job_count(), 2);
    c.run_until(3000);
    assert!(c.operation("op").usage.get(ResourceKind::Cpu) <= 2.0);
}

// ---- (f): disabling a node ------------------------------------------------------------------

/// YT-S19: `scheduler_jobs_enabled: false` aborts a node's allocations (reason
/// `node_disabled`); their jobs go back to pending and run on another node.
#[test]
fn disabling_a_node_aborts_its_allocations_and_they_run_elsewhere() {
    let config = SchedulerConfig {
        fair_share_update_period_ms: 100,
        node_heartbeat_period_ms: 100,
        allowed_node_resources_overcommit_duration_ms: 1000,
        ..SchedulerConfig::default()
    };
    let tree = r#"{"pool_trees": {"default": {"config": {"max_ephemeral_pools_per_user": 3}}}}"#;
    let mut c = Cluster::new(
        tree,
        config,
        &[("node0", res(2.0, 2.0), &[]), ("node1", res(2.0, 2.0), &[])],
    );
    let node0 = NodeId("node0".into());
    let node1 = NodeId("node1".into());
    c.s.set_node(0, &node0, None, None, Some(false)).unwrap();
    c.start(0, op("op1", None, vec![task(1, 1.0, None)]), None);
    let mut op2 = op("op2", None, vec![task(1, 1.0, None)]);
    op2.user = Some("other".into());
    c.start(0, op2, None);
    c.run_until(1000);
    assert_eq!(c.s.node(&node1).unwrap().usage, res(2.0, 2.0));
    assert_eq!(c.operation("op1").running_job_count(), 1);
    assert_eq!(c.operation("op2").running_job_count(), 1);
    c.s.set_node(1000, &node0, None, None, Some(true)).unwrap();
    c.s.set_node(1000, &node1, None, None, Some(false)).unwrap();
    c.collect();
    for id in ["op1", "op2"] {
        let p = c.events("allocation_preempted", id);
        assert_eq!(p.len(), 1, "{id}");
        assert_eq!(p[0]["reason"], "node_disabled");
        assert_eq!(p[0]["node"], "node1");
        assert_eq!(c.operation(id).pending_job_count(), 1);
    }
    assert!(c.s.node(&node1).unwrap().allocations.is_empty());
    c.run_until(2000);
    for id in ["op1", "op2"] {
        assert_eq!(c.operation(id).running_job_count(), 1, "{id}");
        let started = c.hits("allocation_started", id);
        assert_eq!(started.len(), 2, "{id}");
        assert_eq!(started[1].2, "node0", "{id}");
    }
}
