//! Nodes: registration, heartbeats (finished jobs, output, the core's orders queued by job id),
//! operator actions (disable, enable, drain) and the stored node records.

use super::{Actor, core_error, internal, unix_ms};
use crate::command::NodeAction;
use crate::metrics;
use fairsched_api::{
    ApiError, Heartbeat, HeartbeatReply, JobInterrupt, JobStart, JobState, NodeState, NodeView,
    RegisterNode, RegisterReply, codes,
};
use fairsched_core::{
    AllocationId, FinishedAllocation, JobOutcome, NodeHeartbeat, NodeId, NodeSpec,
};
use fairsched_resources::Resources;
use fairsched_store::StoredNode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Instant;

/// The stored record of a node: what it registered with and the operator's settings, which
/// survive re-registrations and server restarts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct NodeRecord {
    pub(super) node_id: String,
    pub(super) resources: Resources,
    #[serde(default)]
    pub(super) tags: Vec<String>,
    #[serde(default = "enabled")]
    pub(super) scheduler_jobs_enabled: bool,
    #[serde(default)]
    pub(super) draining: bool,
}

pub(super) fn enabled() -> bool {
    true
}

/// The error for a node the scheduler does not have.
pub fn no_such_node(id: &str) -> ApiError {
    ApiError::new(codes::RESOLVE, format!("node {id:?} does not exist")).with_attribute("node", id)
}

impl Actor {
    /// Registers a node (again), unless another agent runs as it ([`codes::NODE_IN_USE`]:
    /// a registration of the same node id from another `agent_id` while the node heartbeats,
    /// i.e. was seen within `node_timeout_ms`; refused before anything changes).
    pub(super) fn register(&mut self, node: RegisterNode) -> Result<RegisterReply, ApiError> {
        if let (Some(agent), Some(known)) = (&node.agent_id, self.node_agents.get(&node.node_id))
            && agent != known
            && let Some(seen) = self.seen.get(&node.node_id)
            && seen.elapsed() < self.node_timeout
        {
            tracing::warn!(
                node = node.node_id,
                "registration refused: another agent runs as this node"
            );
            return Err(ApiError::new(
                codes::NODE_IN_USE,
                format!(
                    "another agent runs as node {:?}: it heartbeated {} ms ago; two machines (or \
                     two agents) have the same node id. Give each its own (`fairsched agent \
                     --node-id`; the default is the host name), or stop the other agent: once \
                     it has been silent for node_timeout_ms ({} ms) this node may be taken over",
                    node.node_id,
                    seen.elapsed().as_millis(),
                    self.node_timeout.as_millis()
                ),
            )
            .with_attribute("node", node.node_id.as_str()));
        }
        let agent = node.agent_id.clone();
        let node_id = node.node_id.clone();
        let reply = self.register_node(node)?;
        if let Some(agent) = agent {
            self.node_agents.insert(node_id, agent);
        }
        Ok(reply)
    }

    fn register_node(&mut self, node: RegisterNode) -> Result<RegisterReply, ApiError> {
        let now = self.now();
        let id = NodeId(node.node_id.clone());
        if node.node_id.is_empty() {
            return Err(ApiError::new(
                codes::BAD_REQUEST,
                "node_id must not be empty",
            ));
        }
        self.check_usable(&node)?;
        if self.lost_nodes.remove(&node.node_id).is_some() {
            self.stale_nodes.insert(node.node_id.clone());
        }
        // A node the scheduler still has (e.g. restored at a restart with its running jobs)
        // keeps its jobs: the agent's next heartbeat reconciles them.
        if self.sched.node(&id).is_some() {
            self.sched
                .set_node(
                    now,
                    &id,
                    Some(node.resources),
                    Some(node.tags.iter().cloned().collect()),
                    None,
                )
                .map_err(core_error)?;
            self.saw(&node.node_id);
            self.save_node(NodeRecord {
                node_id: node.node_id.clone(),
                resources: node.resources,
                tags: node.tags.clone(),
                ..self
                    .node_records
                    .get(&node.node_id)
                    .cloned()
                    .unwrap_or(NodeRecord {
                        node_id: node.node_id.clone(),
                        resources: node.resources,
                        tags: Vec::new(),
                        scheduler_jobs_enabled: true,
                        draining: false,
                    })
            })?;
            tracing::info!(
                node = node.node_id,
                "node registered again; its jobs are kept"
            );
            let kept = self.sched.node(&id).map_or(0, |n| n.allocations.len());
            self.server_event(
                json!({"event": "node_registered", "node": node.node_id, "kept_jobs": kept}),
            );
            return Ok(RegisterReply {
                heartbeat_period_ms: self.sched.config.node_heartbeat_period_ms,
                node_credential: String::new(),
                node_timeout_ms: Some(self.node_timeout.as_millis() as u64),
            });
        }
        self.sched
            .add_node(
                now,
                NodeSpec {
                    id: id.clone(),
                    resources: node.resources,
                    tags: node.tags.iter().cloned().collect(),
                },
            )
            .map_err(core_error)?;
        self.kill.remove(&node.node_id);
        self.interrupts.remove(&node.node_id);
        self.saw(&node.node_id);
        // The operator's settings outlive registrations.
        let (enabled, draining) = self
            .node_records
            .get(&node.node_id)
            .map_or((true, false), |r| (r.scheduler_jobs_enabled, r.draining));
        if !enabled {
            self.sched
                .set_node(now, &id, None, None, Some(false))
                .map_err(core_error)?;
        }
        if draining {
            self.sched
                .set_node_draining(now, &id, true)
                .map_err(core_error)?;
        }
        self.save_node(NodeRecord {
            node_id: node.node_id.clone(),
            resources: node.resources,
            tags: node.tags.clone(),
            scheduler_jobs_enabled: enabled,
            draining,
        })?;
        tracing::info!(node = node.node_id, enabled, draining, "node registered");
        self.server_event(json!({"event": "node_registered", "node": node.node_id}));
        Ok(RegisterReply {
            heartbeat_period_ms: self.sched.config.node_heartbeat_period_ms,
            node_credential: String::new(),
            node_timeout_ms: Some(self.node_timeout.as_millis() as u64),
        })
    }

    /// Refuses a node the scheduler could never run a job on, saying why and what to change.
    pub(super) fn check_usable(&self, node: &RegisterNode) -> Result<(), ApiError> {
        use fairsched_resources::ResourceKind;
        let r = &node.resources;
        let why = if r.is_zero() {
            Some("it offers no resources at all".to_string())
        } else if self.sched.config.enable_allocation_abort_on_zero_user_slots
            && r.raw_of(ResourceKind::UserSlots) == 0
        {
            Some(
                "it offers no user slots, and the scheduler aborts every job on a node without \
                 user slots (scheduler.enable_allocation_abort_on_zero_user_slots)"
                    .to_string(),
            )
        } else {
            None
        };
        match why {
            Some(why) => Err(ApiError::new(
                codes::BAD_REQUEST,
                format!(
                    "node {:?} cannot run any job: {why}; offer some with `fairsched agent \
                     --resources` (e.g. user_slots=4,cpu=2,memory=4GiB; resources left out are \
                     detected)",
                    node.node_id
                ),
            )
            .with_attribute("node", node.node_id.as_str())),
            None => Ok(()),
        }
    }

    pub(super) fn save_node(&mut self, record: NodeRecord) -> Result<(), ApiError> {
        self.batch.node(StoredNode {
            id: record.node_id.clone(),
            record: serde_json::to_string(&record).map_err(internal)?,
        });
        self.node_records.insert(record.node_id.clone(), record);
        Ok(())
    }

    /// Disables, enables, drains or undrains a node; the setting is stored and outlives the
    /// node's re-registrations and server restarts.
    pub(super) fn node_action(
        &mut self,
        id: &str,
        action: NodeAction,
    ) -> Result<NodeView, ApiError> {
        let now = self.now();
        let node = NodeId(id.to_string());
        if self.sched.node(&node).is_none() {
            return Err(no_such_node(id));
        }
        self.take_core_events();
        let r = match action {
            NodeAction::Disable => self.sched.set_node(now, &node, None, None, Some(false)),
            NodeAction::Enable => self.sched.set_node(now, &node, None, None, Some(true)),
            NodeAction::Drain => self.sched.set_node_draining(now, &node, true),
            NodeAction::Undrain => self.sched.set_node_draining(now, &node, false),
        };
        r.map_err(|e| core_error(e).with_attribute("node", id))?;
        self.stale_nodes.insert(id.to_string());
        let n = self.sched.node(&node).expect("checked above");
        let record = NodeRecord {
            node_id: id.to_string(),
            resources: n.resources,
            tags: n.tags.iter().cloned().collect(),
            scheduler_jobs_enabled: n.scheduler_jobs_enabled,
            draining: n.draining,
        };
        tracing::info!(
            node = id,
            action = action.name(),
            allocations = n.allocations.len(),
            "node changed by request"
        );
        self.save_node(record)?;
        let view = self.node_view(&node).expect("checked above");
        // Logged before what it caused (the aborts of a disabled node's jobs).
        let fields = self.server_fields(json!({"event": "node_changed", "node": id,
            "action": action.name(), "state": view.state}));
        self.log_event(unix_ms(), fields);
        self.after_change();
        Ok(view)
    }

    pub(super) fn node_view(&self, id: &NodeId) -> Option<NodeView> {
        let n = self.sched.node(id)?;
        Some(NodeView {
            id: n.id.0.clone(),
            resources: n.resources,
            usage: n.usage,
            tags: n.tags.iter().cloned().collect(),
            allocation_count: n.allocations.len(),
            scheduler_jobs_enabled: n.scheduler_jobs_enabled,
            draining: n.draining,
            state: Some(if !n.scheduler_jobs_enabled {
                NodeState::Disabled
            } else if n.draining {
                NodeState::Draining
            } else {
                NodeState::Enabled
            }),
            last_heartbeat_ago_ms: self
                .seen
                .get(&n.id.0)
                .map(|t| t.elapsed().as_millis() as u64)
                .unwrap_or(0),
            tree: n.tree.map(|t| self.sched.trees()[t].name.clone()),
        })
    }

    pub(super) fn heartbeat(&mut self, hb: Heartbeat) -> Result<HeartbeatReply, ApiError> {
        let now = self.now();
        let node = NodeId(hb.node_id.clone());
        if self.sched.node(&node).is_none() {
            return Err(ApiError::new(
                codes::NODE_NOT_REGISTERED,
                format!("node {:?} is not registered", hb.node_id),
            ));
        }
        self.node_credentials
            .check(&hb.node_id, hb.node_credential.as_deref())?;
        self.saw(&hb.node_id);
        // Output of watched jobs first: a job's end below leaves its copy complete.
        self.live.receive(&hb.node_id, &hb.output);
        for f in &hb.finished {
            self.live.ended(&hb.node_id, &f.job);
        }
        let mut finished = Vec::new();
        let mut reported: BTreeSet<&str> = hb.running.iter().map(String::as_str).collect();
        for f in &hb.finished {
            reported.insert(&f.job);
            // A node reports on its own jobs only.
            if self.job(&f.job).is_some_and(|j| j.node != hb.node_id) {
                tracing::warn!(
                    node = hb.node_id,
                    job = f.job,
                    "a heartbeat reported the end of another node's job; ignored"
                );
                continue;
            }
            self.record_exit(f);
            let Some(&allocation) = self.job_alloc.get(&f.job) else {
                continue;
            };
            let outcome = match f.outcome {
                JobState::Completed => JobOutcome::Completed,
                JobState::Failed => JobOutcome::Failed,
                JobState::Aborted | JobState::Running | JobState::Unknown => JobOutcome::Aborted,
            };
            finished.push(FinishedAllocation {
                allocation: AllocationId(allocation),
                outcome,
            });
        }
        // Jobs the core has on this node that the node neither runs nor reports as ended are
        // lost (e.g. a start order whose reply never reached the agent): back to pending.
        let lost: Vec<(u64, String)> = self
            .sched
            .node(&node)
            .map(|n| n.allocations.iter().map(|a| a.0).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|a| self.alloc_job.get(&a).map(|j| (a, j.clone())))
            .filter(|(_, j)| !reported.contains(j.as_str()))
            .collect();
        for (allocation, job) in lost {
            tracing::warn!(
                node = hb.node_id,
                job,
                "job lost: the node neither runs it nor reported its end"
            );
            self.update_job(&job, |j| j.reason = Some("lost".into()));
            finished.push(FinishedAllocation {
                allocation: AllocationId(allocation),
                outcome: JobOutcome::Aborted,
            });
        }
        if hb.leaving {
            // Its ends are taken below; nothing new starts there.
            let _ = self.sched.set_node_draining(now, &node, true);
        }
        let started = Instant::now();
        let response = self
            .sched
            .process_heartbeat(now, &node, NodeHeartbeat { finished })
            .map_err(core_error);
        let took = started.elapsed();
        metrics::observe(&self.metrics.heartbeat_duration, took);
        let response = response?;
        tracing::debug!(
            node = hb.node_id,
            finished = hb.finished.len(),
            started = response.start.len(),
            took_us = took.as_micros() as u64,
            "heartbeat"
        );
        // Jobs the node runs that the core does not have there (e.g. ended while the node was
        // away): kill them.
        for job in &hb.running {
            let known = self
                .job_alloc
                .get(job)
                .and_then(|&a| self.sched.allocation(AllocationId(a)))
                .is_some_and(|x| x.node == node);
            if !known {
                // At info: an aborted job still running out its kill grace is reported so at
                // every heartbeat meanwhile. (A store that lost every job is refused at start:
                // `StoreError::Missing`.)
                tracing::info!(
                    node = hb.node_id,
                    job,
                    "the node runs a job the server does not have running there (aborted, \
                     ended, or run elsewhere after the node was lost): killing it"
                );
                self.kill
                    .entry(hb.node_id.clone())
                    .or_default()
                    .insert(job.clone());
            }
        }
        if hb.leaving {
            tracing::info!(
                node = hb.node_id,
                ended = hb.finished.len(),
                running = hb.running.len(),
                "the node's agent stopped: node removed (its jobs still there run again \
                 elsewhere)"
            );
            self.server_event(
                json!({"event": "node_lost", "node": hb.node_id, "reason": "agent_stopped"}),
            );
            self.forget_node(now, &hb.node_id);
            self.fold_changes();
            return Ok(HeartbeatReply::default());
        }
        // The events name the new jobs; the orders (this heartbeat's, and those of commands
        // since) are queued once they are folded. The view is published when the request
        // finishes.
        self.heartbeat_orders.push((
            node.clone(),
            fairsched_core::NodeOrders {
                interrupt: response.interrupt,
                abort: response.abort,
            },
        ));
        self.fold_changes();
        let mut reply = HeartbeatReply::default();
        for s in response.start {
            // The core has the job's resources; the server what it runs.
            let task = self.ops.get(&s.operation.0).and_then(|op| {
                op.commands
                    .get(s.task)
                    .map(|t| (t.clone(), op.view.user.clone()))
            });
            let Some((task, user)) = task else { continue };
            let Some(job) = self.alloc_job.get(&s.allocation.0).cloned() else {
                continue;
            };
            let time_limit_ms = (self.sched.operation(&s.operation))
                .and_then(|op| op.spec.tasks.get(s.task)?.time_limit_ms);
            reply.start.push(JobStart {
                job,
                operation: s.operation.0.clone(),
                task: s.task,
                resources: s.resources,
                command: task.command,
                env: task.env,
                user: Some(user),
                time_limit_ms,
            });
        }
        reply.interrupt = self.interrupts.remove(&hb.node_id).unwrap_or_default();
        reply.abort = self
            .kill
            .remove(&hb.node_id)
            .unwrap_or_default()
            .into_iter()
            .collect();
        reply.output = self.live.requests(&hb.node_id, Instant::now());
        Ok(reply)
    }

    /// Queues the core's orders (a heartbeat's, and those of commands and fair-share
    /// updates) for their nodes' next heartbeat replies, by job id. The only source of what
    /// an agent must stop: the event log is not read for it.
    pub(super) fn queue_orders(&mut self) {
        let mut orders = std::mem::take(&mut self.heartbeat_orders);
        orders.extend(self.sched.take_orders());
        for (node, o) in orders {
            for order in o.interrupt {
                let Some(job) = self.job_of(order.allocation.0) else {
                    continue;
                };
                self.interrupts
                    .entry(node.0.clone())
                    .or_default()
                    .push(JobInterrupt {
                        job,
                        signal: order.signal,
                        timeout_ms: order.timeout_ms,
                    });
            }
            for allocation in o.abort {
                if let Some(job) = self.job_of(allocation.0) {
                    self.kill.entry(node.0.clone()).or_default().insert(job);
                }
            }
        }
        self.ended_jobs.clear();
    }
}
