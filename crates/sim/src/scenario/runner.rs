//! The discrete-event loop in virtual time: scenario events, fair-share ticks and node
//! heartbeats over one [`Scheduler`], with simulated jobs. See the module documentation of
//! [`crate::scenario`] for the rules.

use super::format::{Command, DEFAULT_NODE_ID_PREFIX, NodeGroup, Scenario, TimedEvent};
use super::pools::{self, PoolCommand};
use crate::cpu::CpuMeter;
use fairsched_core::snapshot::{OperationSnapshot, PoolSnapshot};
use fairsched_core::{
    AllocationId, CoreError, Event, EventKind, FinishedAllocation, HeartbeatResponse, JobOutcome,
    Millis, NodeHeartbeat, NodeId, NodeSpec, OperationId, OperationSpec, Scheduler, Snapshot,
};
use fairsched_resources::Resources;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::io::{self, Write};

/// Error code of an `error` line when the core gives none (YTsaurus' generic error).
pub const GENERIC_ERROR_CODE: u32 = 1;

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Virtual time reached `until_ms`.
    UntilMs,
    /// Nothing could change any more: no scenario event left, every operation finished and no
    /// allocation left.
    Quiescent,
}

/// The core's counters and the CPU time spent inside the core (the `--stats` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RunStats {
    pub placements: u64,
    pub preemptions: u64,
    pub heartbeats: u64,
    pub fair_share_updates: u64,
    /// Thread CPU time spent inside calls into the core, in milliseconds (measured; not
    /// deterministic, and never used by the simulation).
    pub core_cpu_ms: f64,
}

/// What a run produced besides the event lines.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The snapshot lines (JSON, without newline), in the order they were taken.
    pub snapshots: Vec<String>,
    pub stats: RunStats,
    /// Virtual time at which the run ended: `until_ms`, or the time point at which it became
    /// quiescent.
    pub end_ms: Millis,
    pub stopped: StopReason,
    /// Number of event lines written (`error` lines included).
    pub event_lines: u64,
    /// Number of `error` lines written.
    pub error_lines: u64,
}

/// Runs a scenario, writing every event as one JSON line to `events` as it happens.
/// Deterministic: the same scenario writes the same bytes and returns the same report (except
/// `stats.core_cpu_ms`).
pub fn run(scenario: &Scenario, events: &mut dyn Write) -> io::Result<RunReport> {
    let core = Scheduler::new(scenario.scheduler.clone(), scenario.validated_trees.clone())
        .map_err(|e| io::Error::other(format!("the core rejects the scenario: {e}")))?;
    let mut runner = Runner {
        scenario,
        core,
        meter: CpuMeter::default(),
        nodes: BTreeMap::new(),
        node_order: BTreeMap::new(),
        next_node: 0,
        id_counters: BTreeMap::new(),
        models: BTreeMap::new(),
        unfinished: BTreeSet::new(),
        pending_events: scenario.events.len(),
        out: events,
        snapshots: Vec::new(),
        event_lines: 0,
        error_lines: 0,
    };
    let (end_ms, stopped) = runner.run_loop()?;
    runner.out.flush()?;
    let core_stats = runner.core.stats;
    Ok(RunReport {
        snapshots: runner.snapshots,
        stats: RunStats {
            placements: core_stats.placements,
            preemptions: core_stats.preemptions,
            heartbeats: core_stats.heartbeats,
            fair_share_updates: core_stats.fair_share_updates,
            core_cpu_ms: runner.meter.total_ms(),
        },
        end_ms,
        stopped,
        event_lines: runner.event_lines,
        error_lines: runner.error_lines,
    })
}

/// What is processed at one time point, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// A scenario event (in sorted file order).
    Event,
    /// A point of the fair-share grid (multiples of `fair_share_update_period_ms`).
    FairShare,
    /// A heartbeat round (multiples of `node_heartbeat_period_ms`).
    Heartbeats,
}

/// One queue entry: ordered by time, then phase, then insertion sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    t: Millis,
    phase: Phase,
    seq: u64,
    /// Index into the scenario's sorted events (phase `Event` only).
    event: usize,
}

/// The time-ordered queue (a min-heap on (time, phase, sequence)).
#[derive(Debug, Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, t: Millis, phase: Phase, event: usize) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            t,
            phase,
            seq: self.seq,
            event,
        }));
    }

    fn next_time(&self) -> Option<Millis> {
        self.heap.peek().map(|Reverse(e)| e.t)
    }

    /// Pops the next entry if it is at time `t` in `phase`.
    fn pop_if(&mut self, t: Millis, phase: Phase) -> Option<Entry> {
        match self.heap.peek() {
            Some(Reverse(e)) if e.t == t && e.phase == phase => self.heap.pop().map(|r| r.0),
            _ => None,
        }
    }
}

/// How the jobs of one task behave.
#[derive(Clone, Copy, Debug)]
struct JobModel {
    duration_ms: Option<u64>,
    interruptible: bool,
    exit_after_interrupt_ms: u64,
}

/// A job running on a simulated node.
#[derive(Clone, Copy, Debug)]
struct SimJob {
    /// When the job exits by itself (`None`: never, or not yet known while it waits).
    ends_at: Option<Millis>,
    model: JobModel,
    interrupted: bool,
    /// Jobs preempted for this one that still hold the node's resources: while any is left the
    /// job waits on the node and does not progress (scheduler spec §2.6).
    waiting_for: u32,
}

impl SimJob {
    /// The job gets the interruption at `t` and has `timeout_ms` to exit: an interruptible job
    /// exits `exit_after_interrupt_ms` later if that is within the timeout (else the core
    /// aborts it at the deadline); other jobs ignore it.
    fn interrupt(&mut self, t: Millis, timeout_ms: u64) {
        if self.interrupted {
            return;
        }
        self.interrupted = true;
        let exit_after = self.model.exit_after_interrupt_ms;
        if self.model.interruptible && exit_after <= timeout_ms {
            let exit = t.saturating_add(exit_after);
            self.ends_at = Some(self.ends_at.map_or(exit, |e| e.min(exit)));
        }
    }
}

/// A simulated node: its id and the jobs running on it.
#[derive(Debug)]
struct SimNode {
    id: NodeId,
    jobs: BTreeMap<AllocationId, SimJob>,
    /// Interrupted jobs that still hold the node's resources → the jobs preempted for them
    /// (started at once by the core) that wait for those resources.
    waiters: BTreeMap<AllocationId, Vec<AllocationId>>,
}

impl SimNode {
    /// The preemptor `waiter` (just started) waits until the interrupted job `victim` leaves
    /// the node: its run time counts from then.
    fn wait_for(&mut self, waiter: AllocationId, victim: AllocationId) {
        if !self.jobs.contains_key(&victim) {
            return;
        }
        let Some(job) = self.jobs.get_mut(&waiter) else {
            return;
        };
        job.waiting_for += 1;
        if !job.interrupted {
            job.ends_at = None;
        }
        self.waiters.entry(victim).or_default().push(waiter);
    }

    /// Removes a job that left the node at `at` (exited, or aborted); the jobs that waited
    /// only for it start progressing then and run their whole duration.
    fn remove_job(&mut self, id: AllocationId, at: Millis) {
        self.jobs.remove(&id);
        for waiter in self.waiters.remove(&id).unwrap_or_default() {
            if let Some(job) = self.jobs.get_mut(&waiter) {
                job.waiting_for = job.waiting_for.saturating_sub(1);
                if job.waiting_for == 0 && !job.interrupted {
                    job.ends_at = job.model.duration_ms.map(|d| at.saturating_add(d));
                }
            }
        }
    }
}

/// A command the core (or the configuration) rejected: becomes an `error` line.
struct Rejection {
    code: u32,
    message: String,
}

impl From<CoreError> for Rejection {
    fn from(e: CoreError) -> Rejection {
        // One line: multi-line messages (a list of configuration errors) are joined.
        let message = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        Rejection {
            code: e.code().unwrap_or(GENERIC_ERROR_CODE),
            message,
        }
    }
}

impl Rejection {
    fn generic(message: impl Into<String>) -> Rejection {
        Rejection {
            code: GENERIC_ERROR_CODE,
            message: message.into(),
        }
    }
}

/// A snapshot line: the core's snapshot with the label after the time.
#[derive(Serialize)]
struct SnapshotLine<'a> {
    t_ms: Millis,
    snapshot: &'a str,
    tree: &'a str,
    total_resources: &'a Resources,
    pools: &'a BTreeMap<String, PoolSnapshot>,
    operations: &'a BTreeMap<String, OperationSnapshot>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    user_to_ephemeral_pools: &'a BTreeMap<String, Vec<String>>,
    /// The other trees, when there are several.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pool_trees: &'a BTreeMap<String, fairsched_core::TreeSnapshot>,
}

struct Runner<'s, 'w> {
    scenario: &'s Scenario,
    core: Scheduler,
    meter: CpuMeter,
    /// Simulated nodes by creation number: the heartbeat order.
    nodes: BTreeMap<u64, SimNode>,
    node_order: BTreeMap<NodeId, u64>,
    next_node: u64,
    /// Next number per node id prefix.
    id_counters: BTreeMap<String, u64>,
    /// Job behaviour per accepted operation and task.
    models: BTreeMap<OperationId, Vec<JobModel>>,
    /// Operations not yet completed, failed or aborted (from the event log).
    unfinished: BTreeSet<OperationId>,
    pending_events: usize,
    out: &'w mut dyn Write,
    snapshots: Vec<String>,
    event_lines: u64,
    error_lines: u64,
}

impl Runner<'_, '_> {
    fn run_loop(&mut self) -> io::Result<(Millis, StopReason)> {
        let scenario = self.scenario;
        for group in &scenario.nodes {
            if let Err(r) = self.add_nodes(0, group) {
                self.error_line(0, r)?;
            }
        }
        let mut queue = Queue::default();
        for i in 0..scenario.events.len() {
            queue.push(scenario.events[i].at_ms, Phase::Event, i);
        }
        queue.push(0, Phase::FairShare, 0);
        queue.push(0, Phase::Heartbeats, 0);
        let fair_share_period = scenario.scheduler.fair_share_update_period_ms.max(1);
        let heartbeat_period = scenario.scheduler.node_heartbeat_period_ms.max(1);

        while let Some(t) = queue.next_time() {
            if t > scenario.until_ms {
                break;
            }
            while let Some(entry) = queue.pop_if(t, Phase::Event) {
                self.pending_events -= 1;
                self.apply(t, &scenario.events[entry.event])?;
            }
            self.meter.measure(|| self.core.tick(t));
            self.flush(t)?;
            while queue.pop_if(t, Phase::FairShare).is_some() {
                queue.push(t.saturating_add(fair_share_period), Phase::FairShare, 0);
            }
            if queue.pop_if(t, Phase::Heartbeats).is_some() {
                self.heartbeat_round(t)?;
                queue.push(t.saturating_add(heartbeat_period), Phase::Heartbeats, 0);
            }
            if self.quiescent() {
                return Ok((t, StopReason::Quiescent));
            }
        }
        Ok((scenario.until_ms, StopReason::UntilMs))
    }

    /// No scenario event is left, every operation has finished and no allocation is left:
    /// ticks and heartbeats cannot change anything any more.
    fn quiescent(&self) -> bool {
        self.pending_events == 0
            && self.unfinished.is_empty()
            && self.core.allocations().next().is_none()
            && self.core.operations().all(|op| op.state.is_finished())
    }

    // ---- scenario events ------------------------------------------------------------------

    fn apply(&mut self, t: Millis, event: &TimedEvent) -> io::Result<()> {
        let result = match &event.command {
            Command::StartOperation(spec) => self.start_operation(t, spec),
            Command::AbortOperation { id } => self
                .meter
                .measure(|| self.core.abort_operation(t, id))
                .map_err(Rejection::from),
            Command::UpdateOperation(u) => self
                .meter
                .measure(|| {
                    self.core.update_operation_with(
                        t,
                        &u.id,
                        fairsched_core::OperationUpdate {
                            weight: u.weight,
                            resource_limits: u.resource_limits,
                            pool: u.pool.clone(),
                            per_tree: u.scheduling_options_per_pool_tree.clone(),
                        },
                    )
                })
                .map_err(Rejection::from),
            Command::CreatePool(c) => self.edit_pools(t, PoolCommand::Create(c)),
            Command::SetPool(c) => self.edit_pools(t, PoolCommand::Set(c)),
            Command::RemovePool(c) => self.edit_pools(t, PoolCommand::Remove(c)),
            Command::SetTree(c) => self.edit_pools(t, PoolCommand::SetTree(c)),
            Command::AddNodes(group) => self.add_nodes(t, group),
            Command::SetNode(s) => self
                .meter
                .measure(|| {
                    self.core.set_node(
                        t,
                        &s.id,
                        s.resources,
                        s.tags.clone(),
                        s.scheduler_jobs_enabled,
                    )
                })
                .map_err(Rejection::from),
            Command::RemoveNode { id } => self.remove_node(t, id),
            Command::Snapshot(label) => self.snapshot(t, label),
        };
        // What the command logged comes first (nothing, if it was rejected).
        self.flush(t)?;
        match result {
            Ok(()) => Ok(()),
            Err(r) => self.error_line(
                t,
                Rejection {
                    code: r.code,
                    message: format!(
                        "events[{}].{}: {}",
                        event.index,
                        event.command.kind(),
                        r.message
                    ),
                },
            ),
        }
    }

    fn start_operation(&mut self, t: Millis, spec: &OperationSpec) -> Result<(), Rejection> {
        let models = spec
            .tasks
            .iter()
            .map(|task| JobModel {
                duration_ms: task.duration_ms,
                interruptible: task.interruptible,
                exit_after_interrupt_ms: task.exit_after_interrupt_ms.unwrap_or(0),
            })
            .collect();
        self.meter
            .measure(|| self.core.start_operation(t, spec.clone()))?;
        self.models.insert(spec.id.clone(), models);
        Ok(())
    }

    /// A pool or tree event, through the core's pool commands (rejected: nothing changes).
    fn edit_pools(&mut self, t: Millis, command: PoolCommand<'_>) -> Result<(), Rejection> {
        self.meter
            .measure(|| pools::apply(&mut self.core, t, command))
            .map_err(Rejection::from)
    }

    /// Adds a group of nodes, all or none.
    fn add_nodes(&mut self, t: Millis, group: &NodeGroup) -> Result<(), Rejection> {
        let prefix = group
            .id_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_NODE_ID_PREFIX.to_string());
        let first = self.id_counters.get(&prefix).copied().unwrap_or(0);
        let ids: Vec<NodeId> = (0..u64::from(group.count))
            .map(|i| NodeId(format!("{prefix}-{}", first + i)))
            .collect();
        if let Some(id) = ids.iter().find(|id| self.core.node(id).is_some()) {
            return Err(Rejection::generic(format!(
                "node {:?} already exists",
                id.0
            )));
        }
        self.id_counters
            .insert(prefix, first + u64::from(group.count));
        for id in ids {
            let spec = NodeSpec {
                id: id.clone(),
                resources: group.resources,
                tags: group.tags.clone(),
            };
            self.meter.measure(|| self.core.add_node(t, spec))?;
            self.node_order.insert(id.clone(), self.next_node);
            self.nodes.insert(
                self.next_node,
                SimNode {
                    id,
                    jobs: BTreeMap::new(),
                    waiters: BTreeMap::new(),
                },
            );
            self.next_node += 1;
        }
        Ok(())
    }

    fn remove_node(&mut self, t: Millis, id: &NodeId) -> Result<(), Rejection> {
        self.meter.measure(|| self.core.remove_node(t, id))?;
        if let Some(n) = self.node_order.remove(id) {
            self.nodes.remove(&n);
        }
        Ok(())
    }

    fn snapshot(&mut self, t: Millis, label: &str) -> Result<(), Rejection> {
        let Snapshot {
            t_ms,
            tree,
            total_resources,
            pools,
            operations,
            user_to_ephemeral_pools,
            pool_trees,
        } = self.meter.measure(|| self.core.snapshot(t));
        let line = SnapshotLine {
            t_ms,
            snapshot: label,
            tree: &tree,
            total_resources: &total_resources,
            pools: &pools,
            operations: &operations,
            user_to_ephemeral_pools: &user_to_ephemeral_pools,
            pool_trees: &pool_trees,
        };
        let text = serde_json::to_string(&line)
            .map_err(|e| Rejection::generic(format!("cannot write the snapshot: {e}")))?;
        self.snapshots.push(text);
        Ok(())
    }

    // ---- heartbeats and simulated jobs ------------------------------------------------------

    /// Every node heartbeats once, in creation order.
    fn heartbeat_round(&mut self, t: Millis) -> io::Result<()> {
        let order: Vec<u64> = self.nodes.keys().copied().collect();
        for n in order {
            self.heartbeat(t, n)?;
        }
        Ok(())
    }

    /// One heartbeat: report the jobs that exited by `t`, then carry out the core's orders.
    fn heartbeat(&mut self, t: Millis, n: u64) -> io::Result<()> {
        let Some(node) = self.nodes.get_mut(&n) else {
            return Ok(());
        };
        let exited: Vec<(AllocationId, Millis)> = node
            .jobs
            .iter()
            .filter_map(|(&allocation, job)| Some((allocation, job.ends_at.filter(|&e| e <= t)?)))
            .collect();
        // A job that waited for an exited one runs from the moment that one exited.
        for &(allocation, at) in &exited {
            node.remove_job(allocation, at);
        }
        let finished: Vec<FinishedAllocation> = exited
            .into_iter()
            .map(|(allocation, _)| FinishedAllocation {
                allocation,
                outcome: JobOutcome::Completed,
            })
            .collect();
        let id = node.id.clone();
        let report = NodeHeartbeat { finished };
        let response = self
            .meter
            .measure(|| self.core.process_heartbeat(t, &id, report));
        match response {
            Ok(response) => self.carry_out(t, n, response),
            Err(e) => {
                self.flush(t)?;
                return self.error_line(t, Rejection::from(e));
            }
        }
        self.flush(t)
    }

    fn carry_out(&mut self, t: Millis, n: u64, response: HeartbeatResponse) {
        let models = &self.models;
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        for start in response.start {
            let model = models
                .get(&start.operation)
                .and_then(|tasks| tasks.get(start.task))
                .copied()
                .unwrap_or(JobModel {
                    duration_ms: None,
                    interruptible: false,
                    exit_after_interrupt_ms: 0,
                });
            node.jobs.insert(
                start.allocation,
                SimJob {
                    ends_at: model.duration_ms.map(|d| t.saturating_add(d)),
                    model,
                    interrupted: false,
                    waiting_for: 0,
                },
            );
        }
        for order in response.interrupt {
            if let Some(job) = node.jobs.get_mut(&order.allocation) {
                job.interrupt(t, order.timeout_ms);
            }
            // The job started for it waits until the interrupted one leaves the node.
            if let Some(p) = &order.preemptor {
                node.wait_for(p.allocation, order.allocation);
            }
        }
        for allocation in response.abort {
            node.remove_job(allocation, t);
        }
    }

    // ---- output ---------------------------------------------------------------------------

    /// Writes the events the core logged since the last call, keeping the simulated jobs and
    /// the quiescence counters in step with them.
    fn flush(&mut self, t: Millis) -> io::Result<()> {
        // Orders the core gave outside a heartbeat (an aborted operation, a disabled node,
        // ...): the simulated nodes carry them out at once.
        for (node, orders) in self.core.take_orders() {
            if let Some(&n) = self.node_order.get(&node) {
                self.carry_out(
                    t,
                    n,
                    HeartbeatResponse {
                        start: Vec::new(),
                        interrupt: orders.interrupt,
                        abort: orders.abort,
                    },
                );
            }
        }
        let events = self.core.take_events();
        for event in &events {
            self.observe(event);
            self.write_line(event)?;
        }
        Ok(())
    }

    /// Follows the log for what the run reports: which operations are unfinished and how
    /// many error lines there were. (What the nodes must do comes from the core's orders.)
    fn observe(&mut self, event: &Event) {
        match &event.kind {
            EventKind::OperationState {
                operation, state, ..
            } => {
                if state.is_finished() {
                    self.unfinished.remove(operation);
                } else {
                    self.unfinished.insert(operation.clone());
                }
            }
            EventKind::Error { .. } => self.error_lines += 1,
            _ => {}
        }
    }

    fn error_line(&mut self, t: Millis, r: Rejection) -> io::Result<()> {
        self.error_lines += 1;
        self.write_line(&Event {
            t_ms: t,
            kind: EventKind::Error {
                code: r.code,
                message: r.message,
            },
        })
    }

    fn write_line(&mut self, event: &Event) -> io::Result<()> {
        serde_json::to_writer(&mut *self.out, event)?;
        self.out.write_all(b"\n")?;
        self.event_lines += 1;
        Ok(())
    }
}
