//! Scenarios: a JSON file of nodes, pool trees and timed events, run in virtual time through the
//! scheduling core (`fairsched scenario FILE [--out DIR] [--stats]`; the format: docs/scenario-format.md).
//!
//! # File
//!
//! ```json
//! {
//!   "name": "guaranteed pool reclaims the cluster",
//!   "nodes": [{"count": 3, "resources": {"cpu": 1, "user_slots": 2}, "tags": ["ssd"]}],
//!   "scheduler": {"fair_share_update_period_ms": 100, "node_heartbeat_period_ms": 100},
//!   "pool_trees": {"default": {"config": {...tree options}, "pools": {"p": {...pool options, "pools": {}}}}},
//!   "events": [{"at_ms": 0, "start_operation": {"id": "op1", "pool": "p", "tasks": [...]}}],
//!   "until_ms": 10000
//! }
//! ```
//!
//! * Top level: `name`, `description` (optional text), `nodes`, `scheduler`
//!   ([`fairsched_core::SchedulerConfig`]), `default_tree` (optional), `pool_trees` (tree name →
//!   [`fairsched_config::PoolTreeConfig`]: tree options under `config`, pool options flat beside
//!   `pools`; absent: one tree `default` with default options), `events`, `until_ms` (required).
//!   Unknown fields are errors everywhere.
//! * `nodes`: groups `{"count", "resources", "tags"?, "id_prefix"?}`. Node ids are
//!   `<id_prefix>-<n>` (prefix default `node`), `n` counting from 0 per prefix over the whole
//!   run, initial groups first in file order, then `add_nodes` events in the order they run:
//!   `node-0`, `node-1`, ... A resource left out is 0.
//! * `events`: objects with `at_ms` and exactly one event kind:
//!   - `start_operation`: a flat [`fairsched_core::OperationSpec`] (`id`, `user`, `pool`,
//!     `weight`, `resource_limits`, `preemption_mode`, `interruption_signal`,
//!     `interruption_timeout_ms`, `scheduling_tag_filter`, ...) whose `tasks` are the
//!     scenario's own ([`operation::ScenarioTask`]): `job_count`, `resources`, `duration_ms`,
//!     `time_limit_ms`, `interruptible`, `exit_after_interrupt_ms`, `gang`, `disk_request`
//!     (`duration_ms`, `interruptible` and `exit_after_interrupt_ms` are the simulated job's;
//!     the core gets the others);
//!   - `abort_operation` `{"id"}`; `update_operation` `{"id", "weight"?, "resource_limits"?,
//!     "pool"?}`;
//!   - `create_pool` `{"tree"?, "name", "parent"?, ...pool options}` (no parent or `"<Root>"`:
//!     under the root); `set_pool` `{"tree"?, "name", "parent"?, ...pool options}`: the options
//!     given replace those options, the others keep their values, `parent` moves the pool with
//!     its children; `remove_pool` `{"tree"?, "name"}` (not a pool with child pools);
//!     `set_tree` `{"tree"?, "config": {...tree options}}` (given options replace, others
//!     kept). `tree` defaults to the scheduler's tree. These go through the core's pool
//!     commands (`create_pool`, `set_pool`, `move_pool`, `remove_pool`, `set_tree_options`),
//!     which validate the whole new tree and refuse, for example, to remove a pool that has
//!     operations; a `set_pool` whose options are accepted but whose move is refused sets the
//!     options back;
//!   - `add_nodes` (a node group); `set_node` `{"id", "resources"?, "tags"?,
//!     "scheduler_jobs_enabled"?}`; `remove_node` `{"id"}`;
//!   - `snapshot`: a label (string).
//!
//!   Events run in `at_ms` order; events with the same `at_ms` keep their file order.
//!
//! # Errors
//!
//! A file that cannot run is rejected before anything runs, with every problem as
//! `FILE: JSON_PATH: MESSAGE` (e.g. `events[3].start_operation.tasks[0].job_cont: unknown field
//! `job_cont` (did you mean `job_count`?)`), and the command exits with status 2: bad JSON,
//! unknown fields and event kinds, wrong types, bad resource amounts, invalid pool trees (the
//! configuration crate's errors with tree, pool and field, at their path under `pool_trees`),
//! periods of 0, an event after `until_ms`.
//!
//! A command that the core or the configuration rejects while running (a duplicate operation
//! id, an unknown node or pool, a pool change that makes the tree invalid, ...; also a task's
//! `duration_ms` or `exit_after_interrupt_ms` over ten years, which the runner refuses in the
//! core's words before the core sees the operation) is not a file error: it changes nothing
//! and becomes an output line
//! `{"t_ms":..,"event":"error","code":..,"message":"events[I].KIND: ..."}` (code: the core's
//! or the configuration's YTsaurus code, else 1), and the run goes on.
//!
//! # The loop
//!
//! Virtual time only; nothing reads a clock except the CPU meter behind `--stats`. A min-heap
//! of (time, phase, sequence) holds the scenario events, the fair-share grid (multiples of
//! `fair_share_update_period_ms`) and heartbeat rounds (multiples of `node_heartbeat_period_ms`).
//! The initial nodes are added at time 0 before anything else. Then, at each time point `t`
//! (each time that has at least one entry), in this order:
//!
//! 1. the scenario events due at `t`, in sorted order;
//! 2. `core.tick(t)` once (the core updates fair shares when its period has passed);
//! 3. if `t` is a heartbeat time: every node heartbeats once, in creation order (nodes added at
//!    `t` included). Its report lists the jobs that exited by `t`; then the core's orders are
//!    carried out: start, interrupt, abort.
//!
//! Simulated jobs (the [`crate::cluster`] rules): a job of a task with `duration_ms: d` started at `s` exits at `s + d` and is
//! reported `completed` in its node's first heartbeat at or after that time (a heartbeat after
//! the one that started it); `duration_ms: null` runs until ended. On an interrupt order at `t`
//! with timeout `T`, a job of an `interruptible` task exits at `t + exit_after_interrupt_ms`
//! (default 0) if that is at most `T`, and is reported `completed`; otherwise (or if the task is
//! not interruptible) it keeps running (a job that would end by itself still does), and the core
//! aborts it at the deadline. An abort order, and any allocation the core reports as finished or
//! preempted (an aborted operation, a disabled or removed node), ends the job at once.
//!
//! A job started by preemption waits on its node for the jobs interrupted for it (the
//! `preemptor` of their `allocation_interrupted` lines): it does not progress until the last of
//! them has left the node (exited, at its exit time, or aborted), and runs its whole
//! `duration_ms` from then. Only that link is modelled: the core counts an interrupted job's
//! resources as free from the interruption on, so a job it places on that node later by the
//! regular stage runs at once. If the job waits longer than the tree's
//! `waiting_for_resources_on_node_timeout_ms`, the core aborts it (reason `waiting_timeout`).
//!
//! The run stops after the time point `until_ms` (which is processed), or earlier, after the
//! first time point at which nothing can change any more: no scenario event is left, every
//! operation has completed, failed or been aborted, and no allocation is left. Stopping early
//! changes no output line; only the heartbeat and fair-share counters of `--stats` stop there.
//!
//! # Output
//!
//! JSON lines on stdout, the same bytes for the same file: every core event as it happens
//! ([`fairsched_core::Event`]: `allocation_started`, `allocation_finished`,
//! `allocation_interrupted`, `allocation_preempted`, `operation_state`) and the `error` lines,
//! then every snapshot in the order taken:
//! `{"t_ms":..,"snapshot":"label","tree":..,"total_resources":{..},"pools":{name:{..}},"operations":{id:{..}}}`
//! with the core's orchid field names. A snapshot is taken among the events of its time point,
//! so it sees the shares of the last fair-share update before it and the usage after the
//! earlier events of that time; to see the effect of the heartbeats at `t`, take it at `t + 1`.
//!
//! `--out DIR` also writes `events.jsonl`, `snapshots.jsonl` and `summary.json`; `--stats` prints
//! `{"placements":..,"preemptions":..,"heartbeats":..,"fair_share_updates":..,"core_cpu_ms":..}`
//! on stderr at the end, `core_cpu_ms` being the thread CPU time spent inside core calls.

pub mod cli;
pub mod format;
pub mod operation;
pub mod pools;
pub mod runner;

pub use format::{
    Command, NodeGroup, Problem, Scenario, ScenarioError, TimedEvent, load_file, parse_str,
};
pub use operation::{ScenarioTask, StartOperation};
pub use runner::{RunReport, RunStats, StopReason, run};

/// Runs a scenario and returns its whole stdout (event lines, then snapshot lines) and the
/// report.
pub fn run_to_string(scenario: &Scenario) -> std::io::Result<(String, RunReport)> {
    let mut out = Vec::new();
    let report = run(scenario, &mut out)?;
    for line in &report.snapshots {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    let text = String::from_utf8(out).map_err(std::io::Error::other)?;
    Ok((text, report))
}
