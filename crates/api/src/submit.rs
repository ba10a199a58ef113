//! What `POST /api/v1/operations` takes: [`SubmitOperation`] with its [`TaskSubmit`]s. This is
//! the HTTP contract of a submit; the server parses the body into it and converts it to the
//! scheduling core's spec in one place.
//!
//! Field names, defaults and order follow the core's spec that the server parsed bodies into
//! before this type owned them, so the same bodies are accepted and refused with the same
//! messages: unknown fields are errors everywhere (`deny_unknown_fields`), and a field that has
//! a default is refused as `null` where the core refused it (`resource_limits`,
//! `preemption_mode`, `resources`, ...). Serialising leaves out what is absent or at its
//! default (but always writes `resources` and `command`), so a client sends what it set.

use fairsched_resources::{PartialResources, Resources};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// What `POST /api/v1/operations` takes (YTsaurus operation spec names; see PRODUCT.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitOperation {
    /// Chosen by the server when absent (`op-<incarnation>-<n>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Absent: the caller's user (with authentication), else `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The pool in its first tree; absent: an ephemeral pool named after the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Its weight among its pool's children (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// A resource left out is unlimited; absent: no limits. (`null` is refused.)
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_limits: Option<PartialResources>,
    /// Absent: [`PreemptionMode::Normal`]. (`null` is refused.)
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub preemption_mode: Option<PreemptionMode>,
    /// Signal sent to a job on interruption (`SIGINT`); none: jobs are not interruptible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption_signal: Option<String>,
    /// How long an interrupted job may take to exit before it is aborted (default 15 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption_timeout_ms: Option<u64>,
    /// Only nodes matching this tag expression (`gpu`, `gpu & !old`) run its jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_tag_filter: Option<String>,
    /// Starvation tolerance; it may only lower its pool's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_starvation_tolerance: Option<f64>,
    /// Starvation timeout; it may only raise its pool's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share_starvation_timeout_ms: Option<u64>,
    /// The operation fails when this many of its jobs have failed (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed_job_count: Option<u32>,
    /// The pool trees it runs in; absent: the default tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_trees: Option<Vec<String>>,
    /// Per tree: its pool, weight and limits there (each one absent: the operation's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scheduling_options_per_pool_tree: BTreeMap<String, TreeSchedulingOptions>,
    /// Most of its allocations kept from preemption (YTsaurus
    /// `max_unpreemptible_allocation_count`, also taken under its older names).
    #[serde(
        default,
        alias = "max_unpreemptible_job_count",
        alias = "max_unpreemptable_job_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_unpreemptible_allocation_count: Option<u32>,
    /// Operation type (`vanilla`, `map`, ...); only vanilla operations can be lightweight.
    /// Absent: vanilla.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub operation_type: Option<String>,
    pub tasks: Vec<TaskSubmit>,
}

/// One group of identical jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSubmit {
    pub job_count: u32,
    /// Per-job resources (a resource left out is 0).
    #[serde(default)]
    pub resources: Resources,
    /// Simulated drivers only: how long a job runs. The server does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How long a job may run, by its submitter's estimate, in milliseconds: lets the scheduler
    /// backfill the job onto resources held for a big job or a gang that it will leave in
    /// time. Enforced: the agent kills a job that runs longer (failed, `time limit exceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_ms: Option<u64>,
    /// Simulated drivers only: the job handles the interruption signal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interruptible: bool,
    /// Simulated drivers only: how long an interrupted job takes to exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_after_interrupt_ms: Option<u64>,
    /// All-or-nothing: the fair share treats the operation as a gang.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gang: bool,
    /// The command line each job runs (must not be empty).
    #[serde(default)]
    pub command: Vec<String>,
    /// Extra environment of each job.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The job's disk request (YTsaurus `disk_request`); its medium decides whether it is an
    /// SSD job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_request: Option<DiskRequest>,
}

/// How an operation's jobs are preempted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptionMode {
    /// Preempted by starving operations (with interruption) like any other.
    #[default]
    Normal,
    /// Never chosen as a victim; its jobs above its fair share are interrupted instead.
    Graceful,
}

/// Disk space a job needs, on a medium.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskRequest {
    /// Bytes.
    #[serde(default)]
    pub disk_space: u64,
    /// The medium, e.g. `ssd_slots`.
    pub medium_name: String,
}

/// An operation's options in one pool tree: in a submit
/// ([`SubmitOperation::scheduling_options_per_pool_tree`]) a field left out is the operation's
/// own; in an update ([`UpdateOperation`](crate::UpdateOperation)) it stays as it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeSchedulingOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_limits: Option<PartialResources>,
}

/// The options of an operation in one tree, as [`UpdateOperation`](crate::UpdateOperation)
/// takes them (the same object as in a submit).
pub type TreeOptionsUpdate = TreeSchedulingOptions;

/// A field whose absence has a meaning but whose `null` is refused (with the error the value's
/// own type gives, e.g. `invalid type: null, expected a map`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(v: Value) -> Result<SubmitOperation, String> {
        serde_path_to_error::deserialize(v).map_err(|e| format!("{}: {}", e.path(), e.inner()))
    }

    /// What a client sets is what it sends: defaults and absent fields stay out (but
    /// `resources` and `command` are always written).
    #[test]
    fn serialises_what_is_set() {
        let op = SubmitOperation {
            tasks: vec![TaskSubmit {
                job_count: 2,
                command: vec!["true".into()],
                ..TaskSubmit::default()
            }],
            ..SubmitOperation::default()
        };
        let zero = serde_json::to_value(Resources::ZERO).unwrap();
        assert_eq!(
            serde_json::to_value(&op).unwrap(),
            json!({"tasks": [{"job_count": 2, "resources": zero, "command": ["true"]}]})
        );
        let full = json!({
            "id": "a", "user": "u", "pool": "p", "weight": 2.0,
            "resource_limits": {"cpu": 4.0}, "preemption_mode": "graceful",
            "interruption_signal": "SIGINT", "interruption_timeout_ms": 5,
            "scheduling_tag_filter": "gpu", "fair_share_starvation_tolerance": 0.5,
            "fair_share_starvation_timeout_ms": 7, "max_failed_job_count": 3,
            "pool_trees": ["t"], "scheduling_options_per_pool_tree": {"t": {"pool": "q"}},
            "max_unpreemptible_allocation_count": 1, "type": "map",
            "tasks": [{"job_count": 1, "resources": zero, "duration_ms": 9,
                       "time_limit_ms": 8, "interruptible": true,
                       "exit_after_interrupt_ms": 6, "gang": true, "command": ["x"],
                       "env": {"K": "V"},
                       "disk_request": {"disk_space": 1, "medium_name": "ssd"}}]
        });
        let op = parse(full.clone()).unwrap();
        assert_eq!(serde_json::to_value(&op).unwrap(), full);
    }

    /// Refused: `null` where the core refused it, unknown fields (also in tasks, disk
    /// requests and per-tree options), an unknown preemption mode. Accepted: `null` for an
    /// optional value, the older names of `max_unpreemptible_allocation_count`.
    #[test]
    fn accepts_and_refuses() {
        let task = json!({"job_count": 1, "command": ["true"]});
        let with = |field: &str, value: Value| {
            let mut op = json!({"tasks": [task.clone()]});
            op[field] = value;
            op
        };
        let with_task = |field: &str, value: Value| {
            let mut t = task.clone();
            t[field] = value;
            json!({"tasks": [t]})
        };
        let refused: Vec<(Value, &str)> = vec![
            (
                with("resource_limits", Value::Null),
                "resource_limits: invalid type: null",
            ),
            (
                with("preemption_mode", Value::Null),
                "preemption_mode: invalid type: null",
            ),
            (
                with("preemption_mode", json!("soft")),
                "unknown variant `soft`",
            ),
            (with("poool", json!("p")), "poool: unknown field `poool`"),
            (
                with("scheduling_options_per_pool_tree", Value::Null),
                "invalid type: null",
            ),
            (
                with(
                    "scheduling_options_per_pool_tree",
                    json!({"t": {"weigth": 1}}),
                ),
                "scheduling_options_per_pool_tree.t.weigth: unknown field `weigth`",
            ),
            (
                with_task("envv", json!({})),
                "tasks[0].envv: unknown field `envv`",
            ),
            (
                with_task("resources", Value::Null),
                "tasks[0].resources: invalid type: null",
            ),
            (
                with_task("gang", Value::Null),
                "tasks[0].gang: invalid type: null",
            ),
            (
                with_task("disk_request", json!({"medium": "ssd"})),
                "tasks[0].disk_request.medium: unknown field `medium`",
            ),
            (
                json!({"tasks": [{"command": ["x"]}]}),
                "missing field `job_count`",
            ),
            (json!({"id": "a"}), "missing field `tasks`"),
        ];
        for (body, expected) in refused {
            let e = parse(body.clone()).expect_err(&body.to_string());
            assert!(e.contains(expected), "{body}: {e}");
        }
        let accepted = [
            with("weight", Value::Null),
            with("user", Value::Null),
            with("pool_trees", Value::Null),
            with_task("time_limit_ms", Value::Null),
            with_task("disk_request", Value::Null),
            with("max_unpreemptible_job_count", json!(2)),
            with("max_unpreemptable_job_count", json!(2)),
            json!({"tasks": [{"job_count": 1}]}),
        ];
        for body in accepted {
            parse(body.clone()).unwrap_or_else(|e| panic!("{body}: {e}"));
        }
        let old = parse(with("max_unpreemptable_job_count", json!(2))).unwrap();
        assert_eq!(old.max_unpreemptible_allocation_count, Some(2));
    }
}
