//! The discrete-event loop in virtual time: scenario events, fair-share ticks and rounds of
//! node heartbeats, driving the core through the simulated [`Cluster`] (which carries out the
//! core's orders and runs the jobs). See the module documentation of [`crate::scenario`] for
//! the rules.

use super::format::{Command, DEFAULT_NODE_ID_PREFIX, NodeGroup, Scenario, TimedEvent};
use super::operation::{self, ScenarioTask, StartOperation};
use super::pools::{self, PoolCommand};
use crate::cluster::{Agenda, Cluster, JobModel};
use fairsched_core::snapshot::{OperationSnapshot, PoolSnapshot};
use fairsched_core::{
    CoreError, Event, EventKind, Millis, NodeId, NodeSpec, OperationId, Scheduler, Snapshot,
    StartOrder,
};
use fairsched_resources::Resources;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
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
        cluster: Cluster::new(core).with_cpu_meter(),
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
    let core_stats = runner.cluster.core().stats;
    Ok(RunReport {
        snapshots: runner.snapshots,
        stats: RunStats {
            placements: core_stats.placements,
            preemptions: core_stats.preemptions,
            heartbeats: core_stats.heartbeats,
            fair_share_updates: core_stats.fair_share_updates,
            core_cpu_ms: runner.cluster.core_cpu_ms(),
        },
        end_ms,
        stopped,
        event_lines: runner.event_lines,
        error_lines: runner.error_lines,
    })
}

/// What is processed at one time point, in this order (the key of the runner's agenda).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// A scenario event: its index into the scenario's sorted events.
    Event(usize),
    /// A point of the fair-share grid (multiples of `fair_share_update_period_ms`).
    FairShare,
    /// A heartbeat round (multiples of `node_heartbeat_period_ms`).
    Heartbeats,
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
    /// The core and the simulated nodes (numbered in creation order: the heartbeat order).
    cluster: Cluster,
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
        let mut agenda = Agenda::default();
        for i in 0..scenario.events.len() {
            agenda.push(scenario.events[i].at_ms, Due::Event(i));
        }
        agenda.push(0, Due::FairShare);
        agenda.push(0, Due::Heartbeats);
        let fair_share_period = scenario.scheduler.fair_share_update_period_ms.max(1);
        let heartbeat_period = scenario.scheduler.node_heartbeat_period_ms.max(1);

        while let Some(t) = agenda.next_time() {
            if t > scenario.until_ms {
                break;
            }
            while let Some((_, due)) = agenda.pop_if(|at, d| at == t && matches!(d, Due::Event(_)))
            {
                if let Due::Event(i) = due {
                    self.pending_events -= 1;
                    self.apply(t, &scenario.events[i])?;
                }
            }
            self.cluster.call(|core| core.tick(t));
            self.flush(t)?;
            while agenda
                .pop_if(|at, d| at == t && *d == Due::FairShare)
                .is_some()
            {
                agenda.push(t.saturating_add(fair_share_period), Due::FairShare);
            }
            if agenda
                .pop_if(|at, d| at == t && *d == Due::Heartbeats)
                .is_some()
            {
                self.heartbeat_round(t)?;
                agenda.push(t.saturating_add(heartbeat_period), Due::Heartbeats);
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
            && self.cluster.core().allocations().next().is_none()
            && self
                .cluster
                .core()
                .operations()
                .all(|op| op.state.is_finished())
    }

    // ---- scenario events ------------------------------------------------------------------

    fn apply(&mut self, t: Millis, event: &TimedEvent) -> io::Result<()> {
        let result = match &event.command {
            Command::StartOperation(spec) => self.start_operation(t, spec),
            Command::AbortOperation { id } => self
                .cluster
                .call(|core| core.abort_operation(t, id))
                .map_err(Rejection::from),
            Command::UpdateOperation(u) => self
                .cluster
                .call(|core| {
                    core.update_operation_with(
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
                .cluster
                .set_node(
                    t,
                    &s.id,
                    s.resources,
                    s.tags.clone(),
                    s.scheduler_jobs_enabled,
                )
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

    fn start_operation(&mut self, t: Millis, spec: &StartOperation) -> Result<(), Rejection> {
        operation::check(spec)?;
        let models = spec.tasks.iter().map(ScenarioTask::job_model).collect();
        let core_spec = operation::core_spec(spec);
        self.cluster
            .call(|core| core.start_operation(t, core_spec))?;
        self.models.insert(spec.id.clone(), models);
        Ok(())
    }

    /// A pool or tree event, through the core's pool commands (rejected: nothing changes).
    fn edit_pools(&mut self, t: Millis, command: PoolCommand<'_>) -> Result<(), Rejection> {
        self.cluster
            .call(|core| pools::apply(core, t, command))
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
        if let Some(id) = ids.iter().find(|id| self.cluster.core().node(id).is_some()) {
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
            self.cluster.add_node(t, spec)?;
        }
        Ok(())
    }

    fn remove_node(&mut self, t: Millis, id: &NodeId) -> Result<(), Rejection> {
        self.cluster.remove_node(t, id)?;
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
        } = self.cluster.call(|core| core.snapshot(t));
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
        for n in self.cluster.node_numbers() {
            self.heartbeat(t, n)?;
        }
        Ok(())
    }

    /// One heartbeat: report the jobs that exited by `t`, then carry out the core's orders.
    fn heartbeat(&mut self, t: Millis, n: usize) -> io::Result<()> {
        if self.cluster.node(n).is_none() {
            return Ok(());
        }
        let finished = self.cluster.take_exited(n, t);
        let models = &self.models;
        let result = self
            .cluster
            .heartbeat(t, n, finished, &mut |start| Some(job_model(models, start)));
        if let Err(e) = result {
            self.flush(t)?;
            return self.error_line(t, Rejection::from(e));
        }
        self.flush(t)
    }

    // ---- output ---------------------------------------------------------------------------

    /// Writes the events the core logged since the last call, keeping the simulated jobs and
    /// the quiescence counters in step with them.
    fn flush(&mut self, t: Millis) -> io::Result<()> {
        // Orders the core gave outside a heartbeat (an aborted operation, a disabled node,
        // ...): the simulated nodes carry them out at once.
        self.cluster.deliver_orders(t);
        let events = self.cluster.core_mut().take_events();
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

/// How the jobs of a start order behave: as their task says (a job of an operation the
/// runner does not know runs until ended).
fn job_model(models: &BTreeMap<OperationId, Vec<JobModel>>, start: &StartOrder) -> JobModel {
    models
        .get(&start.operation)
        .and_then(|tasks| tasks.get(start.task))
        .copied()
        .unwrap_or(JobModel::runs_for(None))
}
