//! A submitted operation on its way from the HTTP body to the core: [`Submission`] keeps the
//! body as sent (stored, and shown as the operation's `spec`) with the same parsed into the
//! API's [`SubmitOperation`]; [`core_spec`] is the one place where that becomes the core's
//! [`OperationSpec`]. The real-job part of each task, its command line and environment
//! ([`JobCommand`]), stays with the server, which sends it to the agents: the core gets none
//! of it.
//!
//! A restart reads the stored `spec` back with [`stored_spec`]: the bodies the server ever
//! accepted, whatever version stored them (the core's spec was the submit schema before the
//! API owned it, and the API's type accepts the same JSON).

use fairsched_api::{ApiError, PreemptionMode, SubmitOperation, TaskSubmit, codes};
use fairsched_core::{
    CoreError, DiskRequest, OperationId, OperationSpec, PreemptionMode as CorePreemptionMode,
    TaskSpec, TreeSchedulingOptions,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A submitted operation: the body as sent and the same parsed (both get the id the server
/// chooses and the caller's user; see [`Submission::set_id`], [`Submission::set_user`]).
#[derive(Debug)]
pub struct Submission {
    /// The JSON object as sent.
    pub body: Map<String, Value>,
    pub spec: SubmitOperation,
}

impl Submission {
    /// The body of `POST /api/v1/operations`, checked and parsed (see
    /// [`crate::validate::submit`]).
    pub fn parse(body: Value) -> Result<Submission, ApiError> {
        let spec = crate::validate::submit(&body)?;
        let Value::Object(body) = body else {
            unreachable!("validate::submit refuses what is not an object")
        };
        Ok(Submission { body, spec })
    }

    pub fn set_id(&mut self, id: &str) {
        self.body.insert("id".into(), Value::String(id.to_string()));
        self.spec.id = Some(id.to_string());
    }

    pub fn set_user(&mut self, user: &str) {
        self.body
            .insert("user".into(), Value::String(user.to_string()));
        self.spec.user = Some(user.to_string());
    }
}

/// What an agent runs for each job of one task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobCommand {
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
}

/// The commands of an operation's tasks, by task index.
pub fn job_commands(spec: &SubmitOperation) -> Vec<JobCommand> {
    spec.tasks
        .iter()
        .map(|t| JobCommand {
            command: t.command.clone(),
            env: t.env.clone(),
        })
        .collect()
}

/// The operation as the core takes it, with id `id`: everything but the tasks' commands and
/// environments (see [`JobCommand`]).
pub fn core_spec(id: &str, spec: &SubmitOperation) -> OperationSpec {
    OperationSpec {
        id: OperationId(id.to_string()),
        user: spec.user.clone(),
        pool: spec.pool.clone(),
        weight: spec.weight,
        resource_limits: spec.resource_limits.unwrap_or_default(),
        preemption_mode: match spec.preemption_mode.unwrap_or_default() {
            PreemptionMode::Normal => CorePreemptionMode::Normal,
            PreemptionMode::Graceful => CorePreemptionMode::Graceful,
        },
        interruption_signal: spec.interruption_signal.clone(),
        interruption_timeout_ms: spec.interruption_timeout_ms,
        scheduling_tag_filter: spec.scheduling_tag_filter.clone(),
        fair_share_starvation_tolerance: spec.fair_share_starvation_tolerance,
        fair_share_starvation_timeout_ms: spec.fair_share_starvation_timeout_ms,
        max_failed_job_count: spec.max_failed_job_count,
        pool_trees: spec.pool_trees.clone(),
        scheduling_options_per_pool_tree: spec
            .scheduling_options_per_pool_tree
            .iter()
            .map(|(tree, o)| {
                let options = TreeSchedulingOptions {
                    pool: o.pool.clone(),
                    weight: o.weight,
                    resource_limits: o.resource_limits,
                };
                (tree.clone(), options)
            })
            .collect(),
        max_unpreemptible_allocation_count: spec.max_unpreemptible_allocation_count,
        operation_type: spec.operation_type.clone(),
        tasks: spec.tasks.iter().map(core_task).collect(),
    }
}

/// A task as the core takes it: what it reads for scheduling. The command line and
/// environment are the server's ([`JobCommand`]); the simulated-job fields the API still
/// accepts (`duration_ms`, `interruptible`, `exit_after_interrupt_ms`) nobody here reads.
fn core_task(t: &TaskSubmit) -> TaskSpec {
    TaskSpec {
        job_count: t.job_count,
        resources: t.resources,
        time_limit_ms: t.time_limit_ms,
        gang: t.gang,
        disk_request: t.disk_request.as_ref().map(|d| DiskRequest {
            disk_space: d.disk_space,
            medium_name: d.medium_name.clone(),
        }),
    }
}

/// Refuses operation `id` when a task's `duration_ms` or `exit_after_interrupt_ms` is over
/// [`fairsched_core::MAX_DURATION_MS`], in the core's words: the server does not read these
/// fields, but the core refused such operations when its tasks carried them, and a submit
/// still is refused alike (checked before the core sees the operation).
pub fn check_durations(id: &str, spec: &SubmitOperation) -> Result<(), CoreError> {
    fairsched_core::check_job_durations(
        id,
        spec.tasks
            .iter()
            .map(|t| (t.duration_ms, t.exit_after_interrupt_ms)),
    )
}

/// Longest single argument or `KEY=VALUE` environment entry a job may have: Linux refuses a
/// longer one at `exec` (`MAX_ARG_STRLEN`, 32 pages, counting the final NUL).
pub const MAX_JOB_STRING_BYTES: usize = 128 * 1024 - 1;

/// Most bytes a job's command line and extra environment may take together (each string
/// with its NUL): well inside Linux's limit on what `exec` takes, which also counts the
/// agent's own environment.
pub const MAX_JOB_EXEC_BYTES: usize = 1024 * 1024;

/// Refuses a task whose job could never start: an empty command or program name, an
/// environment variable without a name or with `=` in its name, a NUL byte anywhere, an
/// argument or variable longer than `exec` takes, or all of them together over
/// [`MAX_JOB_EXEC_BYTES`]. The message names the field (`tasks[0].env["X"]`); checked at
/// submit, so that a job does not fail at every start until the operation does.
pub fn check_commands(spec: &SubmitOperation) -> Result<(), ApiError> {
    let bad = |field: String, what: String| {
        ApiError::new(codes::BAD_REQUEST, format!("{field}: {what}")).with_attribute("field", field)
    };
    let size = |n: usize| {
        if n >= 1 << 20 {
            format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
        } else {
            format!("{:.1} KiB", n as f64 / 1024.0)
        }
    };
    for (i, t) in spec.tasks.iter().enumerate() {
        let field = format!("tasks[{i}].command");
        match t.command.first() {
            None => return Err(bad(field, "must not be empty".to_string())),
            Some(p) if p.trim().is_empty() => {
                return Err(bad(
                    format!("{field}[0]"),
                    "the program to run must not be empty".to_string(),
                ));
            }
            Some(_) => {}
        }
        let mut total = 0;
        for (j, arg) in t.command.iter().enumerate() {
            let field = format!("{field}[{j}]");
            if arg.contains('\0') {
                return Err(bad(field, "must not contain a NUL byte".to_string()));
            }
            if arg.len() > MAX_JOB_STRING_BYTES {
                return Err(bad(
                    field,
                    format!(
                        "{} long; an argument may be at most {} (Linux's limit)",
                        size(arg.len()),
                        size(MAX_JOB_STRING_BYTES)
                    ),
                ));
            }
            total += arg.len() + 1;
        }
        for (k, v) in &t.env {
            let field = format!("tasks[{i}].env[{k:?}]");
            if k.is_empty() {
                return Err(bad(field, "a variable needs a name".to_string()));
            }
            if k.contains('=') || k.contains('\0') {
                return Err(bad(
                    field,
                    "a variable's name may not contain `=` or a NUL byte".to_string(),
                ));
            }
            if v.contains('\0') {
                return Err(bad(field, "must not contain a NUL byte".to_string()));
            }
            let entry = k.len() + 1 + v.len();
            if entry > MAX_JOB_STRING_BYTES {
                return Err(bad(
                    field,
                    format!(
                        "{} long; a variable may be at most {} (Linux's limit)",
                        size(entry),
                        size(MAX_JOB_STRING_BYTES)
                    ),
                ));
            }
            total += entry + 1;
        }
        if total > MAX_JOB_EXEC_BYTES {
            return Err(bad(
                format!("tasks[{i}]"),
                format!(
                    "the command and environment take {}; at most {} in all",
                    size(total),
                    size(MAX_JOB_EXEC_BYTES)
                ),
            ));
        }
    }
    Ok(())
}

/// An operation's stored `spec` (the body as it was accepted, with its id, and changed by
/// updates: `pool`, `weight`, `resource_limits`, `scheduling_options_per_pool_tree`).
pub fn stored_spec(spec: &Value) -> Result<SubmitOperation, serde_json::Error> {
    SubmitOperation::deserialize(spec)
}

#[cfg(test)]
#[path = "submit_tests.rs"]
mod tests;
