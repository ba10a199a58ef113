//! `start_operation`'s body: the core's operation fields with the scenario's own tasks. A task
//! carries what the core reads (`job_count`, `resources`, `time_limit_ms`, `gang`,
//! `disk_request`) and what only the simulated cluster reads: how long a job runs and how it
//! takes an interruption. [`core_spec`] is the one place where it becomes the core's spec;
//! [`check`] refuses simulated durations the core cannot count to, in the core's words.

use crate::cluster::JobModel;
use fairsched_core::{CoreError, DiskRequest, OperationSpec, TaskSpec};
use fairsched_resources::Resources;
use serde::Deserialize;

/// `start_operation`: the core's operation fields, flat, with [`ScenarioTask`]s.
pub type StartOperation = OperationSpec<ScenarioTask>;

/// One task of a `start_operation`: `count` identical jobs. The fields are in the order of the
/// core's task before the simulated ones left it (serde lists them in this order when a field
/// is unknown); unknown fields, `command` and `env` among them, are refused.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioTask {
    pub job_count: u32,
    /// Per-job resources; a resource left out is 0.
    #[serde(default)]
    pub resources: Resources,
    /// How long a job runs once it runs (`None`: until ended).
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// The core's `time_limit_ms` (backfill).
    #[serde(default)]
    pub time_limit_ms: Option<u64>,
    /// The job exits by itself when interrupted, `exit_after_interrupt_ms` later.
    #[serde(default)]
    pub interruptible: bool,
    /// How long an interrupted job takes to exit (default 0).
    #[serde(default)]
    pub exit_after_interrupt_ms: Option<u64>,
    /// The core's `gang`.
    #[serde(default)]
    pub gang: bool,
    /// The core's `disk_request`.
    #[serde(default)]
    pub disk_request: Option<DiskRequest>,
}

impl ScenarioTask {
    /// The task as the core takes it.
    pub fn core(&self) -> TaskSpec {
        TaskSpec {
            job_count: self.job_count,
            resources: self.resources,
            time_limit_ms: self.time_limit_ms,
            gang: self.gang,
            disk_request: self.disk_request.clone(),
        }
    }

    /// How the simulated cluster runs each of its jobs.
    pub fn job_model(&self) -> JobModel {
        JobModel {
            interruptible: self.interruptible,
            exit_after_interrupt_ms: self.exit_after_interrupt_ms.unwrap_or(0),
            ..JobModel::runs_for(self.duration_ms)
        }
    }
}

/// The operation as the core takes it.
pub fn core_spec(spec: &StartOperation) -> OperationSpec {
    spec.clone().map_tasks(|t| t.core())
}

/// Refuses a task's `duration_ms` or `exit_after_interrupt_ms` above
/// [`fairsched_core::MAX_DURATION_MS`], as the core did when its tasks carried them (the same
/// words: `operation "op": tasks[0].duration_ms must be at most ...`).
pub fn check(spec: &StartOperation) -> Result<(), CoreError> {
    fairsched_core::check_job_durations(
        &spec.id.0,
        spec.tasks
            .iter()
            .map(|t| (t.duration_ms, t.exit_after_interrupt_ms)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairsched_resources::ResourceKind;

    /// Every field of the core's task can be written in a scenario task and reaches the core
    /// unchanged: a field the core's task gains fails here until the scenario takes it too.
    #[test]
    fn every_core_task_field_passes_through() {
        let core = TaskSpec {
            job_count: 3,
            resources: Resources::ZERO.with(ResourceKind::Cpu, 2.0),
            time_limit_ms: Some(5),
            gang: true,
            disk_request: Some(DiskRequest {
                disk_space: 7,
                medium_name: "ssd_slots".into(),
            }),
        };
        let json = serde_json::to_value(&core).expect("serializes");
        let task: ScenarioTask = serde_json::from_value(json.clone())
            .unwrap_or_else(|e| panic!("a scenario task takes {json}: {e}"));
        assert_eq!(task.core(), core);
    }
}
