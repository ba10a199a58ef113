//! Operation commands: submit, abort, update, and reads of jobs' output.

use super::{Actor, core_error, internal, no_such_operation, operation_state, unix_ms};
use crate::command::{LogsReply, LogsRequest};
use crate::jobs::JobList;
use crate::submit::Submission;
use crate::view::OperationRecord;
use fairsched_api::{
    ApiError, JobCounts, JobLogs, JobState, JobView, OperationView, SubmitOperation,
    UpdateOperation, codes,
};
use fairsched_core::{CoreError, OperationId};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

impl Actor {
    /// Refuses an operation no node could ever run a job of (see
    /// [`crate::validate::fits_some_node`]).
    pub(super) fn check_fits(&self, spec: &SubmitOperation) -> Result<(), ApiError> {
        let trees = self.sched.trees();
        let nodes: Vec<crate::validate::NodeFit> = self
            .sched
            .nodes()
            .map(|n| crate::validate::NodeFit {
                id: n.id.0.clone(),
                tree: n.tree.map(|t| trees[t].name.clone()),
                tags: n.tags.iter().cloned().collect(),
                resources: n.resources,
            })
            .collect();
        crate::validate::fits_some_node(spec, &nodes, &self.sched.tree().name)
    }

    /// Starts a submitted operation (checked and parsed by the handler: see
    /// [`Submission::parse`]); its body is its stored `spec`.
    pub(super) fn submit(
        &mut self,
        mut submission: Submission,
    ) -> Result<fairsched_api::SubmitReply, ApiError> {
        let generated = submission.spec.id.is_none();
        let id = match submission.spec.id.clone() {
            Some(id) => id,
            None => loop {
                let id = format!("op-{}-{}", self.incarnation, self.next_id);
                self.next_id += 1;
                if !self.operation_known(&id)? {
                    submission.set_id(&id);
                    break id;
                }
            },
        };
        if self.operation_known(&id)? {
            return Err(ApiError::new(
                codes::GENERIC,
                format!("operation {id:?} already exists"),
            ));
        }
        crate::submit::check_commands(&submission.spec)?;
        // The core's errors name the operation; one without an id of its own is "the
        // operation" (the id it would have had is never used).
        let refused = |e: CoreError| {
            let e = core_error(e);
            if generated { without_id(e, &id) } else { e }
        };
        crate::submit::check_durations(&id, &submission.spec).map_err(refused)?;
        let spec = crate::submit::core_spec(&id, &submission.spec);
        let now = self.now();
        // Which pools exist now, to tell the submitter of a pool its submission creates.
        let ephemeral_before: Vec<BTreeSet<String>> = self
            .sched
            .trees()
            .iter()
            .map(|t| t.ephemeral.keys().cloned().collect())
            .collect();
        self.sched
            .start_operation(now, spec.clone())
            .map_err(refused)?;
        let op = self.sched.operation(&spec.id).expect("just started");
        let mut created_pools = Vec::new();
        for placement in &op.trees {
            let tree = &self.sched.trees()[placement.tree];
            let Some(pool) = tree.ephemeral.get(&placement.pool) else {
                continue;
            };
            if ephemeral_before[placement.tree].contains(&placement.pool) {
                continue;
            }
            let configured = tree.validated.pools.iter().map(|p| p.name.as_str());
            created_pools.push(fairsched_api::CreatedPool {
                tree: tree.name.clone(),
                pool: placement.pool.clone(),
                parent: pool.parent.clone(),
                did_you_mean: fairsched_config::closest(&placement.pool, configured)
                    .map(str::to_string),
            });
        }
        let commands = crate::submit::job_commands(&submission.spec);
        let view = OperationView {
            id: id.clone(),
            state: operation_state(op.state),
            pool: op.pool.clone(),
            user: op.user.clone(),
            spec: Value::Object(submission.body),
            submitted_at: unix_ms(),
            finished_at: None,
            reason: None,
            why: None,
            job_counts: JobCounts::default(),
            jobs: Vec::new(),
        };
        tracing::info!(
            operation = id,
            pool = view.pool,
            user = view.user,
            tasks = spec.tasks.len(),
            "operation submitted"
        );
        self.stale_ops.insert(id.clone());
        self.ops
            .push(OperationRecord::new(view, JobList::default(), commands));
        Ok(fairsched_api::SubmitReply { id, created_pools })
    }

    pub(super) fn abort(&mut self, id: &str) -> Result<OperationView, ApiError> {
        let Some(record) = self.ops.get(id) else {
            return Err(self.not_in_memory(id, |state| format!("is already {state}")));
        };
        // Finished, and waiting for the commit that lets it leave memory (the core may have
        // forgotten it already).
        if record.view.state.is_finished() {
            return Err(ApiError::new(
                codes::GENERIC,
                format!("operation {id:?} is already {}", record.view.state),
            )
            .with_attribute("operation", id));
        }
        let now = self.now();
        self.sched
            .abort_operation(now, &OperationId(id.to_string()))
            .map_err(core_error)?;
        tracing::info!(operation = id, "operation aborted by request");
        self.after_change();
        Ok(self.shown(self.ops.get(id).expect("checked above"), true))
    }

    /// Changes an operation's weight, limits or pool in the core, and in its stored spec (a
    /// restart submits that again).
    pub(super) fn update_operation(
        &mut self,
        id: &str,
        update: UpdateOperation,
    ) -> Result<OperationView, ApiError> {
        let Some(record) = self.ops.get(id) else {
            return Err(self.not_in_memory(id, |state| format!("is {state} and cannot change")));
        };
        let view = &record.view;
        if view.state.is_finished() {
            return Err(ApiError::new(
                codes::GENERIC,
                format!("operation {id:?} is {} and cannot change", view.state),
            )
            .with_attribute("operation", id));
        }
        let now = self.now();
        let op_id = OperationId(id.to_string());
        let per_tree = update
            .scheduling_options_per_pool_tree
            .iter()
            .map(|(tree, o)| {
                let options = fairsched_core::TreeSchedulingOptions {
                    pool: o.pool.clone(),
                    weight: o.weight,
                    resource_limits: o.resource_limits,
                };
                (tree.clone(), options)
            })
            .collect();
        self.sched
            .update_operation_with(
                now,
                &op_id,
                fairsched_core::OperationUpdate {
                    weight: update.weight,
                    resource_limits: update.resource_limits,
                    pool: update.pool.clone(),
                    per_tree,
                },
            )
            .map_err(core_error)?;
        // The stored spec follows the core's, which says where the operation runs now (a
        // restart resubmits it).
        let core_spec = self.sched.operation(&op_id).map(|op| {
            (
                op.pool.clone(),
                op.spec.weight,
                op.spec.resource_limits,
                op.spec.scheduling_options_per_pool_tree.clone(),
            )
        });
        let view = self.ops.get_mut(id).expect("checked above").view_mut();
        view.pool = core_spec
            .as_ref()
            .map_or(view.pool.clone(), |c| c.0.clone());
        if let (Value::Object(spec), Some((_, weight, limits, per_tree))) =
            (&mut view.spec, core_spec)
        {
            if update.pool.is_some() {
                spec.insert("pool".into(), json!(view.pool));
            }
            if let Some(w) = weight {
                spec.insert("weight".into(), json!(w));
            }
            if update.resource_limits.is_some() {
                spec.insert("resource_limits".into(), json!(limits));
            }
            if !per_tree.is_empty() {
                spec.insert(
                    "scheduling_options_per_pool_tree".into(),
                    serde_json::to_value(&per_tree).unwrap_or_default(),
                );
            }
        }
        tracing::info!(
            operation = id,
            weight = update.weight,
            pool = update.pool,
            "operation updated"
        );
        let mut record = serde_json::to_value(&update).unwrap_or_default();
        if let Value::Object(m) = &mut record {
            m.insert("event".into(), json!("operation_updated"));
            m.insert("operation".into(), json!(id));
        }
        self.server_event(record);
        self.touched.insert(id.to_string());
        self.stale_ops.insert(id.to_string());
        self.after_change();
        Ok(self.shown(self.ops.get(id).expect("checked above"), true))
    }

    /// The output of the jobs `request` names: a running job's from its live copy (the read
    /// watches it, so its node is asked for its output), a job that ended while watched from
    /// that copy up to its end, any other from its stored final tail.
    pub(super) fn logs(&mut self, request: LogsRequest) -> Result<LogsReply, ApiError> {
        let id = &request.operation;
        let wanted = |job: &str| request.jobs.as_ref().is_none_or(|j| j.contains(job));
        let jobs: Vec<JobView> = match self.ops.get(id) {
            Some(op) => op.jobs.iter().filter(|j| wanted(&j.id)).cloned().collect(),
            None => {
                let (_, jobs) = self
                    .store()
                    .operation(id)
                    .map_err(internal)?
                    .ok_or_else(|| no_such_operation(id))?;
                jobs.iter()
                    .filter_map(|j| serde_json::from_str::<JobView>(&j.record).ok())
                    .filter(|j| wanted(&j.id))
                    .collect()
            }
        };
        let now = Instant::now();
        let mut stored: Option<BTreeMap<String, (String, String)>> = None;
        let mut logs = Vec::with_capacity(jobs.len());
        for job in jobs {
            let from = request.from.get(&job.id).copied();
            let running = job.state == JobState::Running;
            if running {
                self.live.watch(&job.id, &job.node, now);
            }
            let live = if running || self.live.is_complete(&job.id) {
                self.live.read(&job.id, from)
            } else {
                None
            };
            let (stdout, stderr, live) = match live {
                Some(r) => (r.stdout, r.stderr, Some(r.live)),
                // Watched by too many readers' jobs already: nothing yet.
                None if running => (
                    String::new(),
                    String::new(),
                    Some(fairsched_api::LiveLogs {
                        waiting: true,
                        ..Default::default()
                    }),
                ),
                None => {
                    if stored.is_none() {
                        let rows = self.store().job_logs(id).map_err(internal)?;
                        stored = Some(rows.into_iter().map(|(j, o, e)| (j, (o, e))).collect());
                    }
                    let (o, e) = stored
                        .as_mut()
                        .and_then(|s| s.remove(&job.id))
                        .unwrap_or_default();
                    (o, e, None)
                }
            };
            logs.push(JobLogs {
                job: job.id,
                node: job.node,
                stdout,
                stderr,
                state: Some(job.state),
                live,
            });
        }
        Ok(LogsReply {
            logs,
            heartbeat_period: Duration::from_millis(self.sched.config.node_heartbeat_period_ms),
        })
    }
}

/// `e` without the operation id `id` (one the server made up for a submission without one):
/// its `operation "id": ` prefix dropped, and `operation "id"` elsewhere "the operation".
fn without_id(mut e: ApiError, id: &str) -> ApiError {
    let named = format!("operation {id:?}");
    e.message = match e.message.strip_prefix(&format!("{named}: ")) {
        Some(rest) => rest.to_string(),
        None => e.message.replace(&named, "the operation"),
    };
    e
}
