//! The scheduler's state: identifiers, operation and node specs, and the live records of
//! operations, nodes and allocations.

use fairsched_resources::{PartialResources, Resources};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Time in milliseconds, on whatever fixed origin the driver uses. The core never reads a clock.
pub type Millis = u64;

/// An operation's id (chosen by whoever submits it). Ordered as its text ([`cmp_ids`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OperationId(pub String);

/// A node's id (its name). Ordered as its text ([`cmp_ids`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub String);

macro_rules! ordered_as_text {
    ($t:ty) => {
        impl Ord for $t {
            #[inline]
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                cmp_ids(&self.0, &other.0)
            }
        }

        impl PartialOrd for $t {
            #[inline]
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
    };
}
ordered_as_text!(OperationId);
ordered_as_text!(NodeId);

/// `a.cmp(b)` for ids: the same order as `str`'s (bytes, lexicographic), found faster.
///
/// The scheduler keys its nodes and operations by id in ordered maps, so every lookup compares
/// ids a dozen times (profiling a trace replay showed a quarter of the time in `memcmp`). The
/// first 8 bytes, zero-padded, are compared as one big-endian integer first; only when those
/// agree are the whole texts compared. That is the same order: where the padded prefixes first
/// differ, either both texts have a byte there (and it decides, as in `str`), or the shorter
/// text ended there and is a proper prefix of the other (the smaller, as in `str`); a text
/// cannot be below the zero padding.
#[inline]
pub fn cmp_ids(a: &str, b: &str) -> std::cmp::Ordering {
    /// The first 8 bytes, zero-padded, big-endian. Shorter texts are read as two overlapping
    /// loads (the first and the last 4 or 2 bytes), the second shifted into place: where they
    /// overlap they hold the same bytes, so `|` keeps them.
    #[inline(always)]
    fn prefix(s: &str) -> u64 {
        let b = s.as_bytes();
        let n = b.len();
        if let Some(head) = b.first_chunk::<8>() {
            u64::from_be_bytes(*head)
        } else if n >= 4 {
            let head = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let tail = u64::from(u32::from_be_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]));
            (head << 32) | (tail << (64 - 8 * n))
        } else if n >= 2 {
            let head = u64::from(u16::from_be_bytes([b[0], b[1]]));
            let tail = u64::from(u16::from_be_bytes([b[n - 2], b[n - 1]]));
            (head << 48) | (tail << (64 - 8 * n))
        } else if n == 1 {
            u64::from(b[0]) << 56
        } else {
            0
        }
    }
    prefix(a)
        .cmp(&prefix(b))
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// An allocation's id, assigned by the core in start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AllocationId(pub u64);

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for AllocationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How an operation's allocations are preempted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptionMode {
    /// Preempted by starving operations (with interruption) like any other.
    #[default]
    Normal,
    /// Never chosen as a victim; instead its allocations above its fair share are interrupted
    /// proactively with the graceful timeout.
    Graceful,
}

/// One group of identical jobs of an operation: what the core schedules them by. What the jobs
/// do is their driver's (the server keeps their command lines, the scenario runner how long
/// they run; see [`OperationSpec`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub job_count: u32,
    /// Per-job resources; a resource left out is 0.
    #[serde(default)]
    pub resources: Resources,
    /// The job's run time limit as its user states it (Slurm's `--time`, SWF's requested
    /// time), in milliseconds. The core reads it for backfill only: a job whose limit ends
    /// before resources held for a big job or a gang are expected to be needed may start on
    /// them (see [`crate::backfill`]). Nothing kills a job at its limit; one that overruns
    /// delays the job that waits for its resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_ms: Option<u64>,
    /// All-or-nothing: the fair share treats the operation as a gang.
    #[serde(default)]
    pub gang: bool,
    /// The job's disk request (YTsaurus `disk_request`). Its medium decides whether the job is
    /// an SSD job (medium in the tree's `ssd_priority_preemption.medium_names`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_request: Option<DiskRequest>,
}

/// Disk space a job needs, on a medium.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskRequest {
    /// Bytes (the core does not account disk space; nodes do).
    #[serde(default)]
    pub disk_space: u64,
    /// The medium, e.g. `ssd_slots`.
    pub medium_name: String,
}

/// What a user submits.
///
/// `T` is the type of its tasks: the core takes [`TaskSpec`]s. A driver whose tasks carry more
/// than the core reads (the scenario's simulated run times) parses the same operation fields
/// with its own task type and hands the core `spec.map_tasks(...)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationSpec<T = TaskSpec> {
    pub id: OperationId,
    #[serde(default)]
    pub user: Option<String>,
    /// Pool name in the default tree; missing: an ephemeral pool named after the user.
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub weight: Option<f64>,
    /// A resource left out is unlimited.
    #[serde(default)]
    pub resource_limits: PartialResources,
    #[serde(default)]
    pub preemption_mode: PreemptionMode,
    /// Signal sent on interruption (e.g. "SIGINT"); none: jobs are not interruptible.
    #[serde(default)]
    pub interruption_signal: Option<String>,
    /// How long an interrupted job may take to exit before it is aborted (default 15 s).
    #[serde(default)]
    pub interruption_timeout_ms: Option<u64>,
    /// Only nodes matching this tag expression (`gpu`, `gpu & !old`, ...) run its jobs, and
    /// only those that also match its pools' filters.
    #[serde(default)]
    pub scheduling_tag_filter: Option<String>,
    /// Starvation tolerance of the operation; it may only lower its pool's (more conservative).
    #[serde(default)]
    pub fair_share_starvation_tolerance: Option<f64>,
    /// Starvation timeout of the operation; it may only raise its pool's.
    #[serde(default)]
    pub fair_share_starvation_timeout_ms: Option<u64>,
    /// The operation fails when this many of its jobs have failed (YTsaurus
    /// `max_failed_job_count`; default 10). Failed jobs run again until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed_job_count: Option<u32>,
    /// Trees the operation runs in (YTsaurus `pool_trees`); missing: the default tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_trees: Option<Vec<String>>,
    /// Per-tree pool, weight and resource limits (each one missing: the operation's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scheduling_options_per_pool_tree: BTreeMap<String, TreeSchedulingOptions>,
    /// Most of the operation's allocations kept from preemption (YTsaurus operation spec
    /// `max_unpreemptible_allocation_count`, aliases `max_unpreemptible_job_count`,
    /// `max_unpreemptable_job_count`): the `user_slots` component of the operation's effective
    /// `non_preemptible_resource_usage_threshold` becomes the smaller of this and the one its
    /// pool or tree sets (this, when they set none). Default: unset.
    #[serde(
        default,
        alias = "max_unpreemptible_job_count",
        alias = "max_unpreemptable_job_count",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_unpreemptible_allocation_count: Option<u32>,
    /// Operation type (`vanilla`, `map`, ...); only vanilla operations can be lightweight.
    /// Default: vanilla.
    #[serde(default, rename = "type")]
    pub operation_type: Option<String>,
    pub tasks: Vec<T>,
}

impl<T> OperationSpec<T> {
    /// The same operation with each task turned into `f(task)`, in order.
    pub fn map_tasks<U>(self, f: impl FnMut(T) -> U) -> OperationSpec<U> {
        OperationSpec {
            id: self.id,
            user: self.user,
            pool: self.pool,
            weight: self.weight,
            resource_limits: self.resource_limits,
            preemption_mode: self.preemption_mode,
            interruption_signal: self.interruption_signal,
            interruption_timeout_ms: self.interruption_timeout_ms,
            scheduling_tag_filter: self.scheduling_tag_filter,
            fair_share_starvation_tolerance: self.fair_share_starvation_tolerance,
            fair_share_starvation_timeout_ms: self.fair_share_starvation_timeout_ms,
            max_failed_job_count: self.max_failed_job_count,
            pool_trees: self.pool_trees,
            scheduling_options_per_pool_tree: self.scheduling_options_per_pool_tree,
            max_unpreemptible_allocation_count: self.max_unpreemptible_allocation_count,
            operation_type: self.operation_type,
            tasks: self.tasks.into_iter().map(f).collect(),
        }
    }
}

/// Default `interruption_timeout` of an operation (seed 004).
pub const DEFAULT_INTERRUPTION_TIMEOUT_MS: u64 = 15_000;

/// Default `max_failed_job_count` of an operation (YTsaurus).
pub const DEFAULT_MAX_FAILED_JOB_COUNT: u32 = 10;

/// Operation lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationState {
    /// Accepted, waiting for a running slot in its pools.
    Pending,
    Running,
    Completed,
    Failed,
    Aborted,
}

impl OperationState {
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            OperationState::Completed | OperationState::Failed | OperationState::Aborted
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            OperationState::Pending => "pending",
            OperationState::Running => "running",
            OperationState::Completed => "completed",
            OperationState::Failed => "failed",
            OperationState::Aborted => "aborted",
        }
    }
}

/// Per-task job counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TaskProgress {
    pub pending: u32,
    pub running: u32,
    pub completed: u32,
}

/// An operation's options in one tree (`scheduling_options_per_pool_tree`).
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

/// An operation in one of its trees.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationTree {
    /// Index of the tree in the scheduler (trees sorted by name).
    pub tree: usize,
    /// Pool in that tree (resolved; may be ephemeral).
    pub pool: String,
    pub weight: Option<f64>,
    pub resource_limits: PartialResources,
    /// Sum of its running allocations on the tree's nodes.
    pub usage: Resources,
    /// Lightweight in that tree's pool.
    pub lightweight: bool,
}

/// A live operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub spec: OperationSpec,
    pub state: OperationState,
    /// Pool the operation runs in, in its first tree (resolved; may be ephemeral).
    pub pool: String,
    /// Every tree it runs in (the default tree first if it is one of them, then by name), with
    /// its pool and usage there.
    pub trees: Vec<OperationTree>,
    pub user: String,
    pub start_time: Millis,
    /// Its place in the scheduler's start order (unique, increasing).
    pub start_seq: u64,
    pub tasks: Vec<TaskProgress>,
    /// Running allocations, oldest first (ids are given in start order; a set, so that a
    /// gang of thousands ending together does not shift a list once per job).
    pub allocations: BTreeSet<AllocationId>,
    /// Sum of its running allocations.
    pub usage: Resources,
    /// Pending jobs' resources.
    pub pending_demand: Resources,
    /// When the operation last got an allocation.
    pub last_scheduled_at: Option<Millis>,
    /// A vanilla operation in a FIFO pool with `enable_lightweight_operations`: never pending,
    /// not counted against running limits.
    pub lightweight: bool,
    /// Why a pending operation waits (which pool's running limit).
    pub pending_reason: Option<String>,
    /// Jobs that exited with an error so far.
    pub failed_job_count: u32,
    /// Heartbeats in which the operation was chosen but nothing could start (hang detection).
    pub failed_schedule_attempts: u64,
    /// The scheduler's count of skipped heartbeats when the operation started (heartbeats
    /// skipped since then count as failed attempts too).
    pub skipped_heartbeats_at_start: u64,
    /// Since when an ancestor's (or its own) limits are too small for its smallest job.
    pub limiting_ancestor_since: Option<Millis>,
    /// Last fair-share update at which the operation was not starving.
    pub last_non_starving_at: Millis,
}

impl Operation {
    /// Whether every pending job, started at `now`, would end by `until` by its task's time
    /// limit (a task without a limit never ends by then).
    pub(crate) fn pending_jobs_end_by(&self, now: Millis, until: Millis) -> bool {
        (self.spec.tasks.iter().zip(&self.tasks)).all(|(spec, task)| {
            task.pending == 0
                || (spec.time_limit_ms).is_some_and(|l| now.saturating_add(l) <= until)
        })
    }

    /// Demand = usage + pending jobs (while the operation can run).
    pub fn demand(&self) -> Resources {
        if self.state == OperationState::Running {
            self.usage.add(&self.pending_demand)
        } else {
            self.usage
        }
    }

    /// The operation in tree `t`, if it runs there.
    pub fn in_tree(&self, t: usize) -> Option<&OperationTree> {
        self.trees.iter().find(|o| o.tree == t)
    }

    pub(crate) fn in_tree_mut(&mut self, t: usize) -> Option<&mut OperationTree> {
        self.trees.iter_mut().find(|o| o.tree == t)
    }

    /// Demand in tree `t`: its usage there plus every pending job (any tree may take them).
    pub fn demand_in(&self, t: usize) -> Resources {
        let usage = self.in_tree(t).map_or(Resources::ZERO, |o| o.usage);
        if self.state == OperationState::Running {
            usage.add(&self.pending_demand)
        } else {
            usage
        }
    }

    pub fn is_gang(&self) -> bool {
        self.spec.tasks.iter().any(|t| t.gang)
    }

    /// The resources of one job of each task that has pending jobs, in task order.
    pub fn pending_job_resources(&self) -> impl Iterator<Item = Resources> + '_ {
        self.spec
            .tasks
            .iter()
            .zip(&self.tasks)
            .filter(|(_, progress)| progress.pending > 0)
            .map(|(task, _)| task.resources)
    }

    /// Pending jobs over all tasks (saturating: tasks' counts are `u32` each).
    pub fn pending_job_count(&self) -> u32 {
        self.tasks
            .iter()
            .fold(0u32, |sum, t| sum.saturating_add(t.pending))
    }

    /// Running jobs over all tasks (saturating).
    pub fn running_job_count(&self) -> u32 {
        self.tasks
            .iter()
            .fold(0u32, |sum, t| sum.saturating_add(t.running))
    }

    /// `max_failed_job_count` or its default.
    pub fn max_failed_job_count(&self) -> u32 {
        self.spec
            .max_failed_job_count
            .unwrap_or(DEFAULT_MAX_FAILED_JOB_COUNT)
    }

    /// The interruption window of its preempted jobs: its own `interruption_timeout_ms`,
    /// else its tree's `allocation_preemption_timeout_ms`, else the standard 15 s.
    pub fn interruption_timeout_ms(&self, tree_default: Option<u64>) -> u64 {
        self.spec
            .interruption_timeout_ms
            .or(tree_default)
            .unwrap_or(DEFAULT_INTERRUPTION_TIMEOUT_MS)
    }
}

/// What a node offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub id: NodeId,
    pub resources: Resources,
    #[serde(default)]
    pub tags: BTreeSet<String>,
}

/// A live node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub id: NodeId,
    pub resources: Resources,
    pub tags: BTreeSet<String>,
    /// `scheduler_jobs_enabled`: false stops scheduling and aborts its allocations.
    pub scheduler_jobs_enabled: bool,
    /// The tree whose `node_tag_filter` matches the node (index; `None`: no tree takes it).
    pub tree: Option<usize>,
    /// Draining: no new allocations start here; running ones continue until they end.
    pub draining: bool,
    /// Allocations on the node (including ones being interrupted).
    pub allocations: BTreeSet<AllocationId>,
    /// Sum of its running allocations' resources; those of allocations being interrupted were
    /// taken off when they were preempted.
    pub usage: Resources,
    /// Last heartbeat with a preemptive stage.
    pub last_preemptive_scheduling: Option<Millis>,
    /// Since when usage has exceeded the node's resources.
    pub overcommit_since: Option<Millis>,
}

impl Node {
    pub fn free(&self) -> Resources {
        self.resources.sub(&self.usage)
    }
}

/// Why an allocation was preempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptionReason {
    /// A starving operation needed the resources.
    Preemption,
    /// An aggressively starving operation needed the resources.
    AggressivePreemption,
    /// A starving SSD operation needed the resources on an SSD node (the `ssd_preemptive`
    /// stage of SSD priority preemption).
    SsdPreemption,
    /// An aggressively starving SSD operation needed the resources on an SSD node (the
    /// `ssd_aggressive` stage).
    SsdAggressivePreemption,
    /// Graceful mode: the operation is above its fair share.
    GracefulPreemption,
    /// The node's usage exceeded its resources for too long.
    ResourceOvercommit,
    /// The operation's or a pool's resource limits were lowered below its usage.
    ResourceLimitsViolated,
    /// The node stopped accepting jobs (`scheduler_jobs_enabled = false`).
    NodeDisabled,
    /// The node was removed: it left, or its driver declared it lost (no heartbeat).
    NodeLost,
    /// The node moved to another pool tree (its tags or the trees' `node_tag_filter`
    /// changed): its allocations belonged to the old tree (YTsaurus `NodeFairShareTreeChanged`).
    NodeFairShareTreeChanged,
    /// The node reported (or was set to) zero user slots, with the scheduler's
    /// `enable_allocation_abort_on_zero_user_slots` (YTsaurus aborts these with "Node without
    /// user slots").
    NodeWithoutUserSlots,
    /// The operation was aborted.
    OperationAborted,
    /// The allocation was started by preemption and waited on its node, for the allocations
    /// preempted for it to give their resources back, longer than its tree's
    /// `waiting_for_resources_on_node_timeout_ms` (YTsaurus abort reason `waiting_timeout`).
    WaitingTimeout,
    /// Another allocation of its gang operation, started whole by the tree's
    /// `gang_placement`, was preempted: a gang runs whole or not at all, so its other jobs
    /// are taken away with it (as YTsaurus restarts every job of a gang operation when one is
    /// lost) and it is placed whole again.
    GangMemberPreempted,
    /// Another allocation of its gang operation, started whole by the tree's
    /// `gang_placement`, ended without completing (its job failed, or its node was lost,
    /// disabled, moved to another tree or lost its user slots): a gang runs whole or not at
    /// all, so its other running jobs are aborted and it is placed whole again.
    GangMemberLost,
}

impl PreemptionReason {
    pub fn name(self) -> &'static str {
        match self {
            PreemptionReason::Preemption => "preemption",
            PreemptionReason::AggressivePreemption => "aggressive_preemption",
            PreemptionReason::SsdPreemption => "ssd_preemption",
            PreemptionReason::SsdAggressivePreemption => "ssd_aggressive_preemption",
            PreemptionReason::GracefulPreemption => "graceful_preemption",
            PreemptionReason::ResourceOvercommit => "resource_overcommit",
            PreemptionReason::ResourceLimitsViolated => "resource_limits_violated",
            PreemptionReason::NodeDisabled => "node_disabled",
            PreemptionReason::NodeLost => "node_lost",
            PreemptionReason::NodeFairShareTreeChanged => "node_fair_share_tree_changed",
            PreemptionReason::NodeWithoutUserSlots => "node_without_user_slots",
            PreemptionReason::OperationAborted => "operation_aborted",
            PreemptionReason::WaitingTimeout => "waiting_timeout",
            PreemptionReason::GangMemberPreempted => "gang_member_preempted",
            PreemptionReason::GangMemberLost => "gang_member_lost",
        }
    }
}

/// Who an allocation was preempted for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Preemptor {
    pub operation: OperationId,
    pub allocation: AllocationId,
}

/// How an allocation ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum EndKind {
    Finished(JobOutcome),
    Preempted(PreemptionReason, Option<Preemptor>),
}

/// The allocation's lifecycle on the scheduler's side.
#[derive(Clone, Debug, PartialEq)]
pub enum AllocationState {
    Running,
    /// Told to stop (preempted with interruption). Its resources leave the scheduler's books at
    /// once: its operation's and pools' usage and its node's `usage` no longer count them, so
    /// the preemptor can start in the same heartbeat. Only the job itself still runs on the
    /// node (it is listed in the node's `allocations`) until it exits or is aborted at
    /// `deadline`; a driver that models the node's real occupancy (the scenario runner) lets
    /// the preemptor's job wait for it meanwhile.
    Interrupting {
        reason: PreemptionReason,
        deadline: Millis,
        /// Who it was preempted for, if anyone.
        preemptor: Option<Preemptor>,
    },
}

/// One job placed on one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub id: AllocationId,
    pub operation: OperationId,
    pub task: usize,
    pub node: NodeId,
    /// The tree of its node when it started (its usage counts there).
    pub tree: usize,
    pub resources: Resources,
    pub start_time: Millis,
    pub state: AllocationState,
}

/// How a job ended, as the node reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// Exited successfully (also after an interruption it handled in time).
    Completed,
    /// Exited with an error.
    Failed,
    /// Killed (preemption without interruption, timeout, node loss).
    Aborted,
}

impl JobOutcome {
    pub fn name(self) -> &'static str {
        match self {
            JobOutcome::Completed => "completed",
            JobOutcome::Failed => "failed",
            JobOutcome::Aborted => "aborted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Ids that often share long prefixes, end inside or past the 8 compared bytes, and hold
    /// NUL bytes (equal to the padding) and bytes above 0x7f.
    fn id() -> impl Strategy<Value = String> {
        (
            prop::sample::select(vec!["", "n", "node-", "worker-17.rack-3.", "\0", "a\0"]),
            "[\\x00a-c\u{e9}]{0,20}",
        )
            .prop_map(|(p, rest)| format!("{p}{rest}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]
        #[test]
        fn ids_order_as_their_text(a in id(), b in id()) {
            prop_assert_eq!(cmp_ids(&a, &b), a.cmp(&b));
            prop_assert_eq!(NodeId(a.clone()).cmp(&NodeId(b.clone())), a.cmp(&b));
            prop_assert_eq!(
                OperationId(a.clone()).partial_cmp(&OperationId(b.clone())),
                Some(a.cmp(&b))
            );
        }
    }

    #[test]
    fn ids_at_the_edges_order_as_their_text() {
        let cases = [
            ("", ""),
            ("", "\0"),
            ("a", "a\0"),
            ("n9", "n10"),
            ("0123456789abcdef", "0123456789abcdef\0"),
            ("01234567", "01234567\0"),
            ("0123456", "01234567"),
            ("0123456789abcdefX", "0123456789abcdefY"),
            ("0123456789abcdeX", "0123456789abcdefY"),
            ("\u{e9}", "z"),
        ];
        for (a, b) in cases {
            assert_eq!(cmp_ids(a, b), a.cmp(b), "{a:?} {b:?}");
            assert_eq!(cmp_ids(b, a), b.cmp(a), "{b:?} {a:?}");
            assert_eq!(cmp_ids(a, a), std::cmp::Ordering::Equal, "{a:?}");
        }
    }
}
