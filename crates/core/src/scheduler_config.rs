//! The scheduler-wide settings ([`SchedulerConfig`]).

use serde::{Deserialize, Serialize};

/// Scheduler-wide settings: the `[scheduler]` block of the server's file and the `scheduler`
/// object of a scenario. Every option may be left out (its default applies); an unknown name
/// is an error that names it.
///
/// ```toml
/// [scheduler]
/// fair_share_update_period_ms = 200
/// node_heartbeat_period_ms = 100
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// How often the fair-share update runs, in milliseconds: fair shares, starvation statuses
    /// and preemption targets are recomputed this often, and between updates heartbeats use
    /// the last results (YTsaurus `fair_share_update_period`; 200 ms is its newest default).
    /// The server's timer ticks at this period (at least 10 ms, at most a second apart), and
    /// each tick also checks for lost nodes (`node_timeout_ms`) and hung operations; a
    /// period below 10 ms is taken as 10 ms. The server also starts an update when an
    /// operation is submitted (at most every 50 ms, one at a time), so that a new operation's
    /// jobs do not wait for the period; scenarios and `simulate` update on the period only. A
    /// scenario requires a period above 0.
    pub fair_share_update_period_ms: u64,
    /// How often each node heartbeats, in milliseconds. The server tells every agent this
    /// period when it registers (an agent heartbeats at least 10 ms apart); the scenario
    /// runner heartbeats every simulated node at this period (above 0 required). Jobs start,
    /// are preempted and are reported finished only at heartbeats, so this bounds how fast the
    /// cluster reacts. Keep the server's `node_timeout_ms` several periods long.
    pub node_heartbeat_period_ms: u64,
    /// How long a node may stay over its resources (its allocations use more than it offers,
    /// for example after it re-registered with fewer resources), in milliseconds, before
    /// allocations on it are preempted with reason `resource_overcommit`: checked at the
    /// node's heartbeats; the allocations kept are the non-preemptible ones first, then the
    /// oldest. 0 preempts at the first heartbeat that finds the node overcommitted (YTsaurus
    /// `allowed_node_resources_overcommit_duration`, 15 s).
    pub allowed_node_resources_overcommit_duration_ms: u64,
    /// How often running operations are checked for hanging, in milliseconds (the checks of
    /// `operation_hangup_safe_timeout_ms` and
    /// `operation_hangup_due_to_limiting_ancestor_safe_timeout_ms`; 1 min).
    pub operation_hangup_check_period_ms: u64,
    /// A starving operation without running jobs is failed as hung ("scheduling hung:
    /// operation has no successful scheduled allocations for a long period") when for this
    /// long, in milliseconds, none of its jobs started and it never stopped starving (counted
    /// from its start at the earliest), and it has had at least
    /// `operation_hangup_min_schedule_job_attempts` failed scheduling attempts (60 min).
    pub operation_hangup_safe_timeout_ms: u64,
    /// The failed scheduling attempts an operation needs before it may be failed as hung by
    /// `operation_hangup_safe_timeout_ms`: heartbeats in which it was chosen but no job could
    /// start, plus heartbeats of nodes too small for any pending job since it started (a
    /// count, 1000). It keeps an operation from being failed when nodes were simply not
    /// offered to it.
    pub operation_hangup_min_schedule_job_attempts: u64,
    /// An operation whose own or an ancestor pool's resource limits are too small for its
    /// smallest pending job for this long (in milliseconds) is failed as hung, naming that
    /// pool as `limiting_ancestor` (5 min). The tree option
    /// [`fairsched_config::TreeConfig::enable_limiting_ancestor_check`] turns the check off; it is also skipped
    /// while the tree has no resources.
    pub operation_hangup_due_to_limiting_ancestor_safe_timeout_ms: u64,
    /// A node whose resources have no user slots (`user_slots` 0, for example an agent that
    /// re-registered with none, or a node set so by its operator) has all its allocations
    /// aborted at its next heartbeat, reason `node_without_user_slots`; their jobs go back to
    /// pending and run elsewhere. False leaves them running (only new jobs that need a slot
    /// cannot start there). While it is true, such a node also gets no new allocations (jobs
    /// that need no slot would otherwise start there only to be aborted at the next
    /// heartbeat). YTsaurus `enable_allocation_abort_on_zero_user_slots` (alias
    /// `enable_job_abort_on_zero_user_slots`), default true.
    #[serde(alias = "enable_job_abort_on_zero_user_slots")]
    pub enable_allocation_abort_on_zero_user_slots: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            fair_share_update_period_ms: 200,
            node_heartbeat_period_ms: 100,
            allowed_node_resources_overcommit_duration_ms: 15_000,
            operation_hangup_check_period_ms: 60_000,
            operation_hangup_safe_timeout_ms: 3_600_000,
            operation_hangup_min_schedule_job_attempts: 1000,
            operation_hangup_due_to_limiting_ancestor_safe_timeout_ms: 300_000,
            enable_allocation_abort_on_zero_user_slots: true,
        }
    }
}

/// How "why does it wait" names a time to come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhyTimes {
    /// In the core's milliseconds ("at 8000 ms"): the reader's clock is the core's (a
    /// scenario, a replay).
    #[default]
    Virtual,
    /// From the moment the answer is taken ("in 4.5 s"): the core's clock means nothing to the
    /// reader (a server's is its uptime).
    FromNow,
}
