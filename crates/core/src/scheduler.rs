//! The scheduler: state plus the commands that change it. Every method takes the current time
//! as an argument; nothing here reads a clock, spawns a thread or depends on hash order.

use crate::event::{Event, EventKind, Preemptor, Stage};
use crate::model::{
    Allocation, AllocationId, AllocationState, JobOutcome, Millis, Node, NodeId, NodeSpec,
    Operation, OperationId, OperationSpec, OperationState, PreemptionReason, TaskProgress,
    TreeSchedulingOptions,
};
use crate::tree::{EphemeralPool, PoolTree, ROOT_NAME};
use fairsched_config::{PoolConfig, ValidatedPoolTrees};
use fairsched_resources::{PartialResources, Resources};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// YTsaurus error code: too many operations in a pool.
pub const ERROR_TOO_MANY_OPERATIONS: u32 = 202;
/// YTsaurus `ResolveError`: what a command names does not exist (a pool, a parent pool).
pub const ERROR_NO_SUCH_OBJECT: u32 = 500;

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
    /// The server's timer ticks at this period, and each tick also checks for lost nodes
    /// (`node_timeout_ms`) and hung operations, so those happen at this granularity too; a
    /// period below 10 ms is taken as 10 ms. A scenario requires a period above 0.
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

/// A command was rejected; nothing changed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct CoreError {
    /// YTsaurus error code where one exists (202 too many operations, 29000 guarantees).
    pub code: Option<u32>,
    pub message: String,
}

impl CoreError {
    pub fn new(message: impl Into<String>) -> CoreError {
        CoreError {
            code: None,
            message: message.into(),
        }
    }

    pub fn with_code(code: u32, message: impl Into<String>) -> CoreError {
        CoreError {
            code: Some(code),
            message: message.into(),
        }
    }
}

/// A job the node reports as ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinishedAllocation {
    pub allocation: AllocationId,
    pub outcome: JobOutcome,
}

/// What a node sends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeHeartbeat {
    pub finished: Vec<FinishedAllocation>,
}

/// What [`Scheduler::update_operation_with`] changes; a field left `None` stays.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperationUpdate {
    /// Weight in every tree without its own per-tree weight.
    pub weight: Option<f64>,
    /// Limits in every tree without its own per-tree limits.
    pub resource_limits: Option<PartialResources>,
    /// Pool in the operation's first tree (its default tree, when it runs there).
    pub pool: Option<String>,
    /// Per tree (by name; the operation must run there): pool, weight and limits in that
    /// tree, kept in the spec's `scheduling_options_per_pool_tree`.
    pub per_tree: BTreeMap<String, TreeSchedulingOptions>,
}

/// Start a job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StartOrder {
    pub allocation: AllocationId,
    pub operation: OperationId,
    pub task: usize,
    pub resources: Resources,
}

/// Interrupt a job: send the signal (if any) and abort it after the timeout.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InterruptOrder {
    pub allocation: AllocationId,
    pub signal: Option<String>,
    pub timeout_ms: u64,
    pub reason: PreemptionReason,
    /// The allocation started for this one's resources (it waits until this one has left the
    /// node).
    pub preemptor: Option<Preemptor>,
}

/// What a node must stop: the core's orders for it, handed out in its next heartbeat's
/// response ([`Scheduler::process_heartbeat`]) or to a driver that delivers them at once
/// ([`Scheduler::take_orders`]). Every allocation the core gives up while its job may still
/// run (preempted, aborted with its operation, on a disabled node, ...) is here, whatever
/// caused it: a command, a fair-share update or a heartbeat of any node.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeOrders {
    pub interrupt: Vec<InterruptOrder>,
    /// Kill these jobs now.
    pub abort: Vec<AllocationId>,
}

/// What the core answers to a heartbeat: the jobs to start, and every order for the node not
/// yet taken ([`NodeOrders`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HeartbeatResponse {
    pub start: Vec<StartOrder>,
    pub interrupt: Vec<InterruptOrder>,
    /// Kill these jobs now.
    pub abort: Vec<AllocationId>,
}

/// The scheduling core.
#[derive(Clone, Debug)]
pub struct Scheduler {
    pub config: SchedulerConfig,
    /// The pool trees, sorted by name (operations and nodes refer to them by index).
    pub(crate) trees: Vec<PoolTree>,
    /// Index of the default tree (operations that name no tree run there).
    pub(crate) default_tree: usize,
    pub(crate) nodes: BTreeMap<NodeId, Node>,
    pub(crate) operations: BTreeMap<OperationId, Operation>,
    /// Operations in start order (ids), for deterministic iteration.
    pub(crate) start_order: Vec<OperationId>,
    /// The operations not finished yet, in start order; finished ones are dropped at each
    /// fair-share update (until then they are skipped). Passes over live operations use it,
    /// so that their cost does not grow with every operation ever run.
    pub(crate) live_order: Vec<OperationId>,
    pub(crate) allocations: BTreeMap<AllocationId, Allocation>,
    next_allocation: u64,
    events: Vec<Event>,
    /// Orders not yet handed out, by node ([`NodeOrders`]).
    pub(crate) orders: BTreeMap<NodeId, NodeOrders>,
    pub(crate) last_fair_share_update: Option<Millis>,
    last_hangup_check: Option<Millis>,
    /// Componentwise minimum of the pending jobs at the last update: a node that cannot fit it
    /// cannot fit any job, and its regular stage is skipped.
    pub(crate) min_pending_job: Option<Resources>,
    /// Heartbeats whose regular stage was skipped because no pending job could fit.
    pub(crate) skipped_heartbeats: u64,
    /// Resources held for big jobs, by node (`job_reservation`; see [`crate::reservation`]).
    pub(crate) reservations: BTreeMap<NodeId, crate::reservation::Reservation>,
    /// Operations whose last job started on their reserved node: they reserve again without a
    /// new wait while they stay blocked.
    pub(crate) reservation_streak: BTreeSet<OperationId>,
    /// The gang assembling in each tree (`gang_placement`; see [`crate::gang`]), by tree.
    pub(crate) gangs: BTreeMap<usize, crate::gang::GangAssembly>,
    /// Gangs whose assembly timed out, and until when they may not assemble again.
    pub(crate) gang_cooldown: BTreeMap<OperationId, Millis>,
    /// Gangs placed whole at once from what was free (see [`crate::gang`]), by operation;
    /// always ready: their nodes start them at their next heartbeats.
    pub(crate) placed_gangs: BTreeMap<OperationId, crate::gang::GangAssembly>,
    /// Counts the events that may free room for a gang (allocations ending, nodes joining,
    /// holds released); a gang that did not fit at one count is not tried again until it
    /// changes.
    pub(crate) room_epoch: u64,
    /// The `room_epoch` at which each gang last failed to fit at once.
    pub(crate) gang_unplaceable_at: BTreeMap<OperationId, u64>,
    /// Counters for `--stats`.
    pub stats: Stats,
}

/// Counters of the core's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub placements: u64,
    /// Placements on resources held for others (backfill).
    pub backfills: u64,
    pub preemptions: u64,
    pub heartbeats: u64,
    pub fair_share_updates: u64,
}

impl Scheduler {
    /// A scheduler over the trees of `trees`. Nodes go to the tree whose `node_tag_filter`
    /// matches them; operations run in their `pool_trees` (default: the default tree).
    pub fn new(config: SchedulerConfig, trees: ValidatedPoolTrees) -> Result<Scheduler, CoreError> {
        let name = trees
            .default_tree
            .clone()
            .or_else(|| (trees.trees.len() == 1).then(|| trees.trees.keys().next().cloned())?)
            .ok_or_else(|| {
                CoreError::new(if trees.trees.is_empty() {
                    "no pool tree is configured".to_string()
                } else {
                    "default_tree must be set when there are several trees".to_string()
                })
            })?;
        if !trees.trees.contains_key(&name) {
            return Err(CoreError::new(format!(
                "default tree {name:?} is not configured"
            )));
        }
        let default_tree = trees
            .trees
            .keys()
            .position(|n| *n == name)
            .expect("checked above");
        Ok(Scheduler {
            config,
            trees: trees
                .trees
                .into_iter()
                .map(|(name, validated)| PoolTree::new(name, validated))
                .collect(),
            default_tree,
            nodes: BTreeMap::new(),
            operations: BTreeMap::new(),
            start_order: Vec::new(),
            live_order: Vec::new(),
            allocations: BTreeMap::new(),
            next_allocation: 1,
            events: Vec::new(),
            orders: BTreeMap::new(),
            last_fair_share_update: None,
            last_hangup_check: None,
            min_pending_job: None,
            skipped_heartbeats: 0,
            reservations: BTreeMap::new(),
            reservation_streak: BTreeSet::new(),
            gangs: BTreeMap::new(),
            gang_cooldown: BTreeMap::new(),
            placed_gangs: BTreeMap::new(),
            room_epoch: 0,
            gang_unplaceable_at: BTreeMap::new(),
            stats: Stats::default(),
        })
    }

    /// The id the next allocation will get (ids are never reused by this scheduler). A driver
    /// that builds a new scheduler and names jobs by allocation id continues after it.
    pub fn next_allocation_id(&self) -> u64 {
        self.next_allocation
    }

    /// Every order not yet handed out, by node, for a driver that delivers them itself (a
    /// node's heartbeat response would otherwise carry them). Take them after each command,
    /// fair-share update or heartbeat: the core logs what it did in events, but only orders
    /// say what a node must do.
    pub fn take_orders(&mut self) -> BTreeMap<NodeId, NodeOrders> {
        std::mem::take(&mut self.orders)
    }

    /// Takes the events logged since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    pub(crate) fn log(&mut self, t_ms: Millis, kind: EventKind) {
        self.events.push(Event { t_ms, kind });
    }

    /// The default tree.
    pub fn tree(&self) -> &PoolTree {
        &self.trees[self.default_tree]
    }

    /// Every tree, sorted by name.
    pub fn trees(&self) -> &[PoolTree] {
        &self.trees
    }

    /// Index of the tree named `name`.
    pub fn tree_index(&self, name: &str) -> Option<usize> {
        self.trees.iter().position(|t| t.name == name)
    }

    pub fn operation(&self, id: &OperationId) -> Option<&Operation> {
        self.operations.get(id)
    }

    pub fn operations(&self) -> impl Iterator<Item = &Operation> {
        self.start_order
            .iter()
            .filter_map(|id| self.operations.get(id))
    }

    /// The operations not finished yet (pending and running), in start order.
    pub fn unfinished_operations(&self) -> impl Iterator<Item = &Operation> {
        self.live_order
            .iter()
            .filter_map(|id| self.operations.get(id))
            .filter(|op| !op.state.is_finished())
    }

    pub fn node(&self, id: &NodeId) -> Option<&Node> {
        self.nodes.get(id)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn allocation(&self, id: AllocationId) -> Option<&Allocation> {
        self.allocations.get(&id)
    }

    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.allocations.values()
    }

    /// Runs periodic work that is due at `now` (the fair-share update).
    pub fn tick(&mut self, now: Millis) {
        let due = self
            .last_fair_share_update
            .is_none_or(|last| now >= last.saturating_add(self.config.fair_share_update_period_ms));
        if due {
            self.update_fair_share(now);
        }
        let hangup_due = self.last_hangup_check.is_none_or(|last| {
            now >= last.saturating_add(self.config.operation_hangup_check_period_ms)
        });
        if hangup_due {
            self.last_hangup_check = Some(now);
            self.fail_hung_operations(now);
        }
    }

    /// Total resources of the nodes tree `t` schedules on.
    fn tree_total(&self, t: usize) -> Resources {
        self.nodes
            .values()
            .filter(|n| n.scheduler_jobs_enabled && n.tree == Some(t))
            .fold(Resources::ZERO, |acc, n| acc.add(&n.resources))
    }

    /// The tree whose node filter matches `tags`; an error when several do (trees must not
    /// share nodes).
    pub(crate) fn tree_for_tags(
        trees: &[PoolTree],
        node: &NodeId,
        tags: &BTreeSet<String>,
    ) -> Result<Option<usize>, CoreError> {
        let matching: Vec<usize> = (0..trees.len())
            .filter(|&t| trees[t].node_filter.matches(tags))
            .collect();
        match matching.as_slice() {
            [] => Ok(None),
            [t] => Ok(Some(*t)),
            _ => Err(CoreError::new(format!(
                "node {:?} (tags {tags:?}) matches the node_tag_filter of trees {}; trees must \
                 not share nodes",
                node.0,
                matching
                    .iter()
                    .map(|&t| format!("{:?}", trees[t].name))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))),
        }
    }

    /// Recomputes fair shares and statuses now.
    pub fn update_fair_share(&mut self, now: Millis) {
        let operations = &self.operations;
        self.live_order
            .retain(|id| operations.get(id).is_some_and(|op| !op.state.is_finished()));
        let ops: Vec<&Operation> = self
            .live_order
            .iter()
            .filter_map(|id| self.operations.get(id))
            .filter(|op| op.state == OperationState::Running)
            .collect();
        self.min_pending_job = ops
            .iter()
            .flat_map(|op| {
                op.spec
                    .tasks
                    .iter()
                    .zip(&op.tasks)
                    .filter(|(_, p)| p.pending > 0)
                    .map(|(t, _)| t.resources)
            })
            .reduce(|a, b| a.min(&b));
        for t in 0..self.trees.len() {
            let total = self.tree_total(t);
            let in_tree: Vec<&Operation> = ops
                .iter()
                .copied()
                .filter(|op| op.in_tree(t).is_some())
                .collect();
            self.trees[t].update_fair_share(t, now, total, &in_tree);
            crate::status::update_statuses(&mut self.trees[t], now);
            self.trees[t].walk_cache = None;
            self.trees[t].class_cache.clear();
        }
        for t in 0..self.trees.len() {
            self.compute_preemption_targets(t);
            self.raise_fair_share_alerts(t, now);
        }
        self.update_reservations(now);
        self.update_gangs(now);
        self.last_fair_share_update = Some(now);
        self.stats.fair_share_updates += 1;
    }

    /// Replaces the trees' configuration (a validated new version: pools created, changed,
    /// moved or removed, tree options changed). The set of trees must stay the same (adding or
    /// removing a tree needs a restart); a node that would match two trees' filters rejects
    /// the whole change. Operations keep their pools; an operation whose pool disappeared
    /// continues in an ephemeral pool of that name, and a removed pool with ephemeral subpools
    /// is kept as one too (both under the default parent, until empty); an ephemeral pool that
    /// is now configured becomes explicit. Takes effect at the next fair-share update.
    pub fn replace_tree_config(
        &mut self,
        now: Millis,
        trees: ValidatedPoolTrees,
    ) -> Result<(), CoreError> {
        let names: Vec<&String> = trees.trees.keys().collect();
        let ours: Vec<&String> = self.trees.iter().map(|t| &t.name).collect();
        if names != ours {
            return Err(CoreError::new(format!(
                "the new configuration has trees {names:?}, the scheduler runs {ours:?}; adding \
                 or removing trees needs a restart"
            )));
        }
        // Check the node assignment under the new filters before changing anything (only
        // when a tree's node filter changes: otherwise every node stays where it is, and a
        // pool change on a large cluster need not revisit every node).
        let filters_changed = self
            .trees
            .iter()
            .zip(trees.trees.values())
            .any(|(tree, new)| tree.config().node_tag_filter != new.config().node_tag_filter);
        let mut assignment = Vec::new();
        if filters_changed {
            let mut candidate: Vec<PoolTree> = self.trees.clone();
            for (tree, validated) in candidate.iter_mut().zip(trees.trees.values()) {
                tree.set_validated(validated.clone());
            }
            for node in self.nodes.values() {
                assignment.push((
                    node.id.clone(),
                    Self::tree_for_tags(&candidate, &node.id, &node.tags)?,
                ));
            }
        }
        for (tree, validated) in self.trees.iter_mut().zip(trees.trees.into_values()) {
            tree.set_validated(validated);
            tree.limits_maybe_violated = true;
            // Preemption thresholds may have changed.
            tree.class_cache.clear();
        }
        let mut moved = Vec::new();
        for (id, t) in assignment {
            if let Some(node) = self.nodes.get_mut(&id)
                && node.tree != t
            {
                node.tree = t;
                moved.push(id);
            }
        }
        for id in moved {
            self.abort_allocations_of_moved_node(now, &id);
        }
        for t in 0..self.trees.len() {
            let tree = &mut self.trees[t];
            let explicit: BTreeSet<String> = tree
                .validated
                .pools
                .iter()
                .map(|p| p.name.clone())
                .collect();
            tree.ephemeral.retain(|name, _| !explicit.contains(name));
            // Operations whose pool is gone continue in an ephemeral pool of that name.
            let orphans: Vec<(String, String)> = self
                .unfinished_operations()
                .filter_map(|op| {
                    let pool = &op.in_tree(t)?.pool;
                    (!self.trees[t].has_pool(pool)).then(|| (pool.clone(), op.user.clone()))
                })
                .collect();
            let tree = &mut self.trees[t];
            let parent = tree
                .validated
                .default_parent_pool()
                .map(str::to_string)
                .unwrap_or_else(|| ROOT_NAME.to_string());
            for (pool, user) in orphans {
                tree.ephemeral.entry(pool).or_insert_with(|| EphemeralPool {
                    parent: parent.clone(),
                    user,
                    config: PoolConfig::default(),
                });
            }
            // A removed pool that still has ephemeral subpools is kept too, with the default
            // options under the default parent, until its subtree is empty (YTsaurus keeps a
            // removed pool that is not empty, default-configured, and drops it with its last
            // operation). The default parent exists, so one round settles every chain.
            let kept: Vec<(String, String)> = tree
                .ephemeral
                .values()
                .filter(|e| e.parent != ROOT_NAME && !tree.has_pool(&e.parent))
                .map(|e| (e.parent.clone(), e.user.clone()))
                .collect();
            for (pool, user) in kept {
                tree.ephemeral.entry(pool).or_insert_with(|| EphemeralPool {
                    parent: parent.clone(),
                    user,
                    config: PoolConfig::default(),
                });
            }
            // Pools moved: every operation's chain of ancestors may have changed.
            self.recount(t);
        }
        self.try_run_pending(now);
        Ok(())
    }

    /// The current configuration of the default tree.
    pub fn tree_config(&self) -> &fairsched_config::PoolTreeConfig {
        &self.tree().validated.tree
    }

    /// Logs an `error` event for every fair-share alert that appeared with this update (YTsaurus
    /// raises a scheduler alert; 29000: strong guarantees exceed the cluster and are scaled down).
    fn raise_fair_share_alerts(&mut self, t: usize, now: Millis) {
        // One alert per code, as YTsaurus raises one scheduler alert per kind.
        let mut by_code: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for e in &self.trees[t].arena.errors {
            by_code
                .entry(e.code().unwrap_or(1))
                .or_default()
                .push(format!("{}: {e}", e.name()));
        }
        if let Some(messages) = by_code.get_mut(&fairsched_config::POOL_TREE_GUARANTEES_OVERCOMMIT)
        {
            // The configuration's words for it (the overcommitted resources only, in human
            // units), as the server's replies to pool changes say it; the update's own text
            // where the configured guarantees alone do not show it (inferred components).
            let total = self.tree_total(t);
            if let Some(alert) =
                fairsched_config::guarantee_overcommit_alert(&self.trees[t].validated.tree, &total)
            {
                *messages = vec![alert.message];
            }
        }
        let alerts: Vec<(u32, String)> = by_code
            .into_iter()
            .map(|(code, messages)| (code, messages.join("; ")))
            .collect();
        for alert in &alerts {
            if !self.trees[t].active_alerts.contains(alert) {
                self.log(
                    now,
                    EventKind::Error {
                        code: alert.0,
                        message: format!("pool tree {:?}: {}", self.trees[t].name, alert.1),
                    },
                );
            }
        }
        self.trees[t].active_alerts = alerts;
    }

    /// Fair-share alerts of the last update (code, message naming the tree), tree by tree.
    pub fn alerts(&self) -> Vec<(u32, String)> {
        self.trees
            .iter()
            .flat_map(|t| {
                t.alerts()
                    .iter()
                    .map(|(code, message)| (*code, format!("pool tree {:?}: {message}", t.name)))
            })
            .collect()
    }

    // ---- nodes ------------------------------------------------------------------------------

    /// Registers a node. Rejected if a node with that id exists.
    pub fn add_node(&mut self, _now: Millis, spec: NodeSpec) -> Result<(), CoreError> {
        self.room_epoch += 1;
        if self.nodes.contains_key(&spec.id) {
            return Err(CoreError::new(format!(
                "node {:?} already exists",
                spec.id.0
            )));
        }
        if spec.resources.any_negative() {
            return Err(CoreError::new(format!(
                "node {:?}: resources must not be negative",
                spec.id.0
            )));
        }
        let tree = Self::tree_for_tags(&self.trees, &spec.id, &spec.tags)?;
        self.nodes.insert(
            spec.id.clone(),
            Node {
                id: spec.id,
                resources: spec.resources,
                tags: spec.tags,
                scheduler_jobs_enabled: true,
                tree,
                draining: false,
                allocations: BTreeSet::new(),
                usage: Resources::ZERO,
                last_preemptive_scheduling: None,
                overcommit_since: None,
            },
        );
        Ok(())
    }

    /// Changes a node's resources, tags or `scheduler_jobs_enabled`. Disabling aborts its
    /// allocations (their jobs go back to pending and run elsewhere).
    pub fn set_node(
        &mut self,
        now: Millis,
        id: &NodeId,
        resources: Option<Resources>,
        tags: Option<BTreeSet<String>>,
        scheduler_jobs_enabled: Option<bool>,
    ) -> Result<(), CoreError> {
        if resources.is_some_and(|r| r.any_negative()) {
            return Err(CoreError::new(format!(
                "node {:?}: resources must not be negative",
                id.0
            )));
        }
        let new_tree = match &tags {
            Some(t) => Some(Self::tree_for_tags(&self.trees, id, t)?),
            None => None,
        };
        let node = self
            .nodes
            .get_mut(id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", id.0)))?;
        let moved = new_tree.is_some_and(|t| t != node.tree);
        if let Some(tree) = new_tree {
            node.tree = tree;
        }
        if let Some(r) = resources {
            node.resources = r;
            // The overcommit clock restarts whenever the node fits again.
            if node.resources.dominates(&node.usage) {
                node.overcommit_since = None;
            }
        }
        if let Some(t) = tags {
            node.tags = t;
        }
        if moved {
            self.abort_allocations_of_moved_node(now, id);
        }
        let node = self.nodes.get_mut(id).expect("checked above");
        if let Some(enabled) = scheduler_jobs_enabled {
            node.scheduler_jobs_enabled = enabled;
            if !enabled {
                let ids: Vec<AllocationId> = node.allocations.iter().copied().collect();
                for a in ids {
                    self.end_allocation(
                        now,
                        a,
                        EndKind::Preempted(PreemptionReason::NodeDisabled, None),
                    );
                }
            }
        }
        Ok(())
    }

    /// A node that moved to another tree loses its allocations: they belonged to the old tree
    /// (their jobs go back to pending and run again in the trees of their operations).
    fn abort_allocations_of_moved_node(&mut self, now: Millis, id: &NodeId) {
        let ids: Vec<AllocationId> = self
            .nodes
            .get(id)
            .map(|n| n.allocations.iter().copied().collect())
            .unwrap_or_default();
        for a in ids {
            self.end_allocation(
                now,
                a,
                EndKind::Preempted(PreemptionReason::NodeFairShareTreeChanged, None),
            );
        }
    }

    /// Starts (`true`) or ends draining a node: while draining, no new allocation starts on it
    /// and its running allocations continue until they end.
    pub fn set_node_draining(
        &mut self,
        _now: Millis,
        id: &NodeId,
        draining: bool,
    ) -> Result<(), CoreError> {
        let node = self
            .nodes
            .get_mut(id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", id.0)))?;
        node.draining = draining;
        Ok(())
    }

    /// Removes a node; its allocations are lost and their jobs go back to pending.
    pub fn remove_node(&mut self, now: Millis, id: &NodeId) -> Result<(), CoreError> {
        let node = self
            .nodes
            .get(id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", id.0)))?;
        let ids: Vec<AllocationId> = node.allocations.iter().copied().collect();
        for a in ids {
            self.end_allocation(now, a, EndKind::Preempted(PreemptionReason::NodeLost, None));
        }
        self.nodes.remove(id);
        // Nobody is left to stop anything there.
        self.orders.remove(id);
        self.release_reservation(now, id, "node_unavailable");
        self.drop_gang_holds_on(now, id);
        Ok(())
    }

    // ---- operations ---------------------------------------------------------------------

    /// Accepts an operation, or rejects it whole with a reason.
    pub fn start_operation(&mut self, now: Millis, spec: OperationSpec) -> Result<(), CoreError> {
        validate_operation_spec(&spec)?;
        if self.operations.contains_key(&spec.id) {
            return Err(CoreError::new(format!(
                "operation {:?} already exists",
                spec.id.0
            )));
        }
        let user = spec.user.clone().unwrap_or_else(|| "root".to_string());
        // Decide and check everything first; change state only when the operation is accepted.
        let trees = self.operation_trees(&spec)?;
        let mut placements = Vec::new();
        for &t in &trees {
            let options = spec
                .scheduling_options_per_pool_tree
                .get(&self.trees[t].name);
            let requested = options
                .and_then(|o| o.pool.as_deref())
                .or(spec.pool.as_deref());
            let placement = self.plan_placement(t, requested, &user)?;
            self.check_operation_count(t, &placement, None)?;
            placements.push((t, placement));
        }
        let mut op_trees = Vec::new();
        let mut blocked = None;
        for (t, placement) in placements {
            if let Some((name, pool)) = placement.create.clone() {
                self.trees[t].ephemeral.insert(name, pool);
            }
            let pool = placement.pool;
            let lightweight = self.is_lightweight(t, &spec, &pool);
            if !lightweight && blocked.is_none() {
                blocked = self
                    .running_limit_violation(t, &pool, &self.trees[t].counts)
                    .map(|(pool, limit)| (t, pool, limit));
            }
            let options = spec
                .scheduling_options_per_pool_tree
                .get(&self.trees[t].name);
            op_trees.push(crate::model::OperationTree {
                tree: t,
                pool,
                weight: options.and_then(|o| o.weight).or(spec.weight),
                resource_limits: options
                    .and_then(|o| o.resource_limits)
                    .unwrap_or(spec.resource_limits),
                usage: Resources::ZERO,
                lightweight,
            });
        }
        let pool = op_trees[0].pool.clone();
        let lightweight = op_trees[0].lightweight;
        let tasks: Vec<TaskProgress> = spec
            .tasks
            .iter()
            .map(|t| TaskProgress {
                pending: t.job_count,
                running: 0,
                completed: 0,
            })
            .collect();
        let pending_demand = spec.tasks.iter().fold(Resources::ZERO, |acc, t| {
            acc.add(&t.resources.scale(f64::from(t.job_count)))
        });
        let id = spec.id.clone();
        let (state, pending_reason) = match &blocked {
            Some((t, pool, limit)) => (
                OperationState::Pending,
                Some(crate::operations::pending_reason(
                    pool,
                    *limit,
                    &self.trees[*t].name,
                )),
            ),
            None => (OperationState::Running, None),
        };
        self.operations.insert(
            id.clone(),
            Operation {
                spec,
                state,
                pool,
                trees: op_trees,
                user,
                start_time: now,
                tasks,
                allocations: Vec::new(),
                usage: Resources::ZERO,
                pending_demand,
                last_scheduled_at: None,
                lightweight,
                pending_reason: pending_reason.clone(),
                failed_schedule_attempts: 0,
                failed_job_count: 0,
                skipped_heartbeats_at_start: self.skipped_heartbeats,
                limiting_ancestor_since: None,
                last_non_starving_at: now,
            },
        );
        self.start_order.push(id.clone());
        self.live_order.push(id.clone());
        self.count_operation(&id, true);
        self.log(
            now,
            EventKind::OperationState {
                operation: id.clone(),
                state,
                reason: pending_reason,
            },
        );
        self.maybe_complete(now, &id);
        Ok(())
    }

    /// The trees an operation runs in (indices; the default tree first if it is one of them):
    /// its `pool_trees`, or the default tree. Unknown trees and per-tree options for trees it does not run in are errors.
    fn operation_trees(&self, spec: &OperationSpec) -> Result<Vec<usize>, CoreError> {
        let id = &spec.id.0;
        let mut trees = match &spec.pool_trees {
            None => vec![self.default_tree],
            Some(names) if names.is_empty() => {
                return Err(CoreError::new(format!(
                    "operation {id:?}: pool_trees must not be empty"
                )));
            }
            Some(names) => names
                .iter()
                .map(|name| {
                    self.tree_index(name).ok_or_else(|| {
                        CoreError::new(format!(
                            "operation {id:?}: pool_trees names tree {name:?}, which does not \
                             exist (trees: {})",
                            self.trees
                                .iter()
                                .map(|t| format!("{:?}", t.name))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        // The default tree first (the operation's fields in snapshots are of its first tree),
        // then by name.
        let default = self.default_tree;
        trees.sort_unstable_by_key(|&t| (t != default, t));
        trees.dedup();
        for name in spec.scheduling_options_per_pool_tree.keys() {
            if !self.tree_index(name).is_some_and(|t| trees.contains(&t)) {
                return Err(CoreError::new(format!(
                    "operation {id:?}: scheduling_options_per_pool_tree.{name}: the operation \
                     does not run in tree {name:?}"
                )));
            }
        }
        Ok(trees)
    }

    /// Aborts an operation: its jobs are killed.
    pub fn abort_operation(&mut self, now: Millis, id: &OperationId) -> Result<(), CoreError> {
        let op = self
            .operations
            .get(id)
            .ok_or_else(|| CoreError::new(format!("operation {:?} does not exist", id.0)))?;
        if op.state.is_finished() {
            return Err(CoreError::new(format!(
                "operation {:?} is already {}",
                id.0,
                op.state.name()
            )));
        }
        let allocations = op.allocations.clone();
        for a in allocations {
            self.end_allocation(
                now,
                a,
                EndKind::Preempted(PreemptionReason::OperationAborted, None),
            );
        }
        self.finish_operation(now, id, OperationState::Aborted, None);
        Ok(())
    }

    /// Changes an operation's weight, resource limits or pool (the pool in its first tree); see
    /// [`Scheduler::update_operation_with`].
    pub fn update_operation(
        &mut self,
        now: Millis,
        id: &OperationId,
        weight: Option<f64>,
        resource_limits: Option<PartialResources>,
        pool: Option<String>,
    ) -> Result<(), CoreError> {
        self.update_operation_with(
            now,
            id,
            OperationUpdate {
                weight,
                resource_limits,
                pool,
                per_tree: BTreeMap::new(),
            },
        )
    }

    /// Changes an operation's parameters (YTsaurus `update_op_parameters`): everything is
    /// checked first (weights, trees, pools and their operation limits), then all of it
    /// applies, or nothing does. Running jobs stay where they are; new ones follow.
    pub fn update_operation_with(
        &mut self,
        now: Millis,
        id: &OperationId,
        update: OperationUpdate,
    ) -> Result<(), CoreError> {
        // Its pool (and so its preemption thresholds) may change.
        for tree in &mut self.trees {
            tree.class_cache.remove(id);
        }
        let op = self
            .operations
            .get(id)
            .ok_or_else(|| CoreError::new(format!("operation {:?} does not exist", id.0)))?;
        if op.state.is_finished() {
            return Err(CoreError::new(format!(
                "operation {:?} is already {}",
                id.0,
                op.state.name()
            )));
        }
        let check_weight = |field: &str, w: Option<f64>| match w {
            Some(w) => check_operation_weight(&id.0, field, w),
            None => Ok(()),
        };
        check_weight("weight", update.weight)?;
        let user = op.user.clone();
        // The new pool of each tree: a per-tree pool, else the top-level pool for the first
        // tree (the default tree when the operation runs there).
        // (slot in op.trees, tree, requested pool, from the top-level `pool`)
        let mut moves: Vec<(usize, usize, Option<String>, bool)> = Vec::new();
        for (name, o) in &update.per_tree {
            check_weight(
                &format!("scheduling_options_per_pool_tree.{name}.weight"),
                o.weight,
            )?;
            let slot = self
                .tree_index(name)
                .and_then(|t| op.trees.iter().position(|x| x.tree == t))
                .ok_or_else(|| {
                    CoreError::new(format!(
                        "operation {:?}: scheduling_options_per_pool_tree.{name}: the operation \
                         does not run in tree {name:?}",
                        id.0
                    ))
                })?;
            if o.pool.is_some() {
                moves.push((slot, op.trees[slot].tree, o.pool.clone(), false));
            }
        }
        if update.pool.is_some() && !moves.iter().any(|m| m.0 == 0) {
            moves.push((0, op.trees[0].tree, update.pool.clone(), true));
        }
        let mut planned = Vec::new();
        for (slot, t, pool, top_level) in &moves {
            let placement = self.plan_placement(*t, pool.as_deref(), &user)?;
            self.check_operation_count(*t, &placement, Some(&op.trees[*slot].pool))?;
            self.check_running_count_on_move(*t, id, *slot, &placement)?;
            planned.push((*slot, *t, placement, *top_level));
        }
        self.count_operation(id, false);
        // Apply.
        let names: Vec<String> = self.trees.iter().map(|t| t.name.clone()).collect();
        let op = self.operations.get_mut(id).expect("checked above");
        for (name, o) in &update.per_tree {
            let own = op
                .spec
                .scheduling_options_per_pool_tree
                .entry(name.clone())
                .or_default();
            if o.weight.is_some() {
                own.weight = o.weight;
            }
            if o.resource_limits.is_some() {
                own.resource_limits = o.resource_limits;
            }
            if o.pool.is_some() {
                own.pool = o.pool.clone();
            }
        }
        if let Some(w) = update.weight {
            op.spec.weight = Some(w);
        }
        if let Some(l) = update.resource_limits {
            op.spec.resource_limits = l;
        }
        // Each tree's weight and limits: its own value, else the operation's.
        for o in &mut op.trees {
            let own = op.spec.scheduling_options_per_pool_tree.get(&names[o.tree]);
            if update.weight.is_some() || update.per_tree.contains_key(&names[o.tree]) {
                o.weight = own.and_then(|x| x.weight).or(op.spec.weight);
            }
            if update.resource_limits.is_some() || update.per_tree.contains_key(&names[o.tree]) {
                o.resource_limits = own
                    .and_then(|x| x.resource_limits)
                    .unwrap_or(op.spec.resource_limits);
            }
        }
        for (slot, t, placement, top_level) in planned {
            if let Some((name, pool)) = placement.create.clone() {
                self.trees[t].ephemeral.insert(name, pool);
            }
            let op = self.operations.get_mut(id).expect("checked above");
            op.trees[slot].pool = placement.pool.clone();
            if slot == 0 {
                op.pool = placement.pool.clone();
            }
            // The spec says where the operation runs now (a restart resubmits it): the
            // top-level `pool` replaces the first tree's pool wherever the spec had it.
            if top_level {
                op.spec.pool = Some(placement.pool.clone());
                if let Some(own) = op.spec.scheduling_options_per_pool_tree.get_mut(&names[t])
                    && own.pool.is_some()
                {
                    own.pool = Some(placement.pool);
                }
            }
        }
        // Lightweight or not in the new pools (counted as such from here on).
        let op = &self.operations[id];
        let lightweight: Vec<bool> = op
            .trees
            .iter()
            .map(|o| self.is_lightweight(o.tree, &op.spec, &o.pool))
            .collect();
        let op = self.operations.get_mut(id).expect("checked above");
        for (o, l) in op.trees.iter_mut().zip(lightweight) {
            o.lightweight = l;
        }
        op.lightweight = op.trees.first().is_some_and(|o| o.lightweight);
        self.count_operation(id, true);
        if update.resource_limits.is_some() || !update.per_tree.is_empty() {
            for t in &mut self.trees {
                t.limits_maybe_violated = true;
            }
        }
        self.touch_operation(id);
        self.remove_empty_ephemeral_pools();
        self.try_run_pending(now);
        Ok(())
    }

    /// Ends an operation as failed (its jobs are aborted).
    pub(crate) fn fail_operation(&mut self, now: Millis, id: &OperationId, reason: String) {
        let allocations = self
            .operations
            .get(id)
            .map(|op| op.allocations.clone())
            .unwrap_or_default();
        for a in allocations {
            self.end_allocation(
                now,
                a,
                EndKind::Preempted(PreemptionReason::OperationAborted, None),
            );
        }
        self.finish_operation(now, id, OperationState::Failed, Some(reason));
    }

    /// Forgets the finished operations that nothing in the core refers to any more (the
    /// fair-share update after an operation finished drops it from the trees; until then it
    /// stays, readable with [`Scheduler::operation`] and in snapshots); returns their ids in
    /// start order. A driver that keeps the history elsewhere (the server's store) calls it
    /// after fair-share updates, so that what the core keeps and walks does not grow with
    /// every operation ever run. An operation forgotten is unknown to the core afterwards
    /// (its id may be used again).
    pub fn forget_finished_operations(&mut self) -> Vec<OperationId> {
        let forgettable = |s: &Scheduler, id: &OperationId| {
            s.operations
                .get(id)
                .is_some_and(|op| op.state.is_finished() && op.allocations.is_empty())
                && !s
                    .trees
                    .iter()
                    .any(|t| t.arena.by_operation.contains_key(id))
                && !s.placed_gangs.contains_key(id)
                && !s.gangs.values().any(|g| g.operation == *id)
                && !s.reservations.values().any(|r| r.operation == *id)
        };
        let mut forgotten = Vec::new();
        let mut kept = Vec::with_capacity(self.start_order.len());
        for id in std::mem::take(&mut self.start_order) {
            if forgettable(self, &id) {
                forgotten.push(id);
            } else {
                kept.push(id);
            }
        }
        self.start_order = kept;
        for id in &forgotten {
            self.operations.remove(id);
            self.reservation_streak.remove(id);
            self.gang_cooldown.remove(id);
            self.gang_unplaceable_at.remove(id);
            for t in &mut self.trees {
                t.class_cache.remove(id);
            }
        }
        if !forgotten.is_empty() {
            let operations = &self.operations;
            self.live_order.retain(|id| operations.contains_key(id));
        }
        forgotten
    }

    fn finish_operation(
        &mut self,
        now: Millis,
        id: &OperationId,
        state: OperationState,
        reason: Option<String>,
    ) {
        self.count_operation(id, false);
        if let Some(op) = self.operations.get_mut(id) {
            op.state = state;
            op.pending_demand = Resources::ZERO;
        }
        self.touch_operation(id);
        self.log(
            now,
            EventKind::OperationState {
                operation: id.clone(),
                state,
                reason,
            },
        );
        self.remove_empty_ephemeral_pools();
        self.release_reservation_of(now, id, "operation_finished");
        self.reservation_streak.remove(id);
        self.release_gang_of(now, id);
        self.try_run_pending(now);
    }

    /// Ephemeral pools disappear when no unfinished operation uses them (their counts are
    /// subtree totals, so a kept removed pool goes with its subpools' last operation).
    fn remove_empty_ephemeral_pools(&mut self) {
        for tree in &mut self.trees {
            let counts = &tree.counts;
            tree.ephemeral
                .retain(|name, _| counts.get(name).is_some_and(|c| c.operation_count > 0));
        }
    }

    /// Completes an operation whose jobs are all done.
    pub(crate) fn maybe_complete(&mut self, now: Millis, id: &OperationId) {
        let done = self.operations.get(id).is_some_and(|op| {
            op.state == OperationState::Running
                && op.tasks.iter().all(|t| t.pending == 0 && t.running == 0)
        });
        if done {
            self.finish_operation(now, id, OperationState::Completed, None);
        }
    }

    // ---- allocations --------------------------------------------------------------------

    /// Creates an allocation for one pending job of `task`.
    pub(crate) fn place(
        &mut self,
        now: Millis,
        op_id: &OperationId,
        task: usize,
        node_id: &NodeId,
        stage: Stage,
        backfill: bool,
    ) -> StartOrder {
        let tree = self.nodes[node_id]
            .tree
            .expect("allocations start only on nodes of a tree");
        let (id, resources) = self.book_allocation(now, op_id, task, node_id, tree);
        self.stats.placements += 1;
        if backfill {
            self.stats.backfills += 1;
        }
        self.log(
            now,
            EventKind::AllocationStarted {
                operation: op_id.clone(),
                allocation: id,
                node: node_id.clone(),
                stage,
                backfill,
            },
        );
        self.reservation_used(now, op_id, node_id);
        StartOrder {
            allocation: id,
            operation: op_id.clone(),
            task,
            resources,
        }
    }

    /// Adopts a job that already runs on `node_id`: one pending job of `task` becomes a
    /// running allocation there, started at `now`. For a driver that lost its books while its
    /// nodes kept running (a restarted server re-inserts the jobs its store had as running).
    ///
    /// No event is logged (nothing started now; the driver records the adoption) and the
    /// node's capacity is not checked (what runs there, runs; overcommit is handled as usual).
    /// Rejected, changing nothing, when the operation is not running, the task has no pending
    /// job, or the node does not exist or has `scheduler_jobs_enabled = false`.
    pub fn adopt_allocation(
        &mut self,
        now: Millis,
        op_id: &OperationId,
        task: usize,
        node_id: &NodeId,
    ) -> Result<AllocationId, CoreError> {
        let node = self
            .nodes
            .get(node_id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", node_id.0)))?;
        if !node.scheduler_jobs_enabled {
            return Err(CoreError::new(format!(
                "node {:?} has scheduler_jobs_enabled = false",
                node_id.0
            )));
        }
        let tree = node.tree.ok_or_else(|| {
            CoreError::new(format!(
                "node {:?} belongs to no pool tree (no node_tag_filter matches its tags)",
                node_id.0
            ))
        })?;
        let tree_name = self.trees[tree].name.clone();
        let op = self
            .operations
            .get_mut(op_id)
            .ok_or_else(|| CoreError::new(format!("operation {:?} does not exist", op_id.0)))?;
        if op.state != OperationState::Running {
            return Err(CoreError::new(format!(
                "operation {:?} is {}, not running",
                op_id.0,
                op.state.name()
            )));
        }
        if op.tasks.get(task).is_none_or(|t| t.pending == 0) {
            return Err(CoreError::new(format!(
                "operation {:?}: task {task} has no pending job",
                op_id.0
            )));
        }
        if op.in_tree(tree).is_none() {
            return Err(CoreError::new(format!(
                "operation {:?} does not run in tree {tree_name:?} of node {:?}",
                op_id.0, node_id.0
            )));
        }
        let (id, _) = self.book_allocation(now, op_id, task, node_id, tree);
        Ok(id)
    }

    /// Books one pending job of `task` as a running allocation on `node_id` (in `tree`, the
    /// node's): the operation's, the node's and the tree's usage, the walk and the class cache.
    /// The caller has checked that the operation, the node and a pending job exist.
    fn book_allocation(
        &mut self,
        now: Millis,
        op_id: &OperationId,
        task: usize,
        node_id: &NodeId,
        tree: usize,
    ) -> (AllocationId, Resources) {
        let id = AllocationId(self.next_allocation);
        self.next_allocation += 1;
        let op = self
            .operations
            .get_mut(op_id)
            .expect("booked operation exists");
        let resources = op.spec.tasks[task].resources;
        op.tasks[task].pending -= 1;
        op.tasks[task].running += 1;
        op.allocations.push(id);
        op.usage = op.usage.add(&resources);
        if let Some(o) = op.in_tree_mut(tree) {
            o.usage = o.usage.add(&resources);
        }
        op.pending_demand = op.pending_demand.sub(&resources);
        op.last_scheduled_at = Some(now);
        let node = self.nodes.get_mut(node_id).expect("booked node exists");
        node.allocations.insert(id);
        node.usage = node.usage.add(&resources);
        self.allocations.insert(
            id,
            Allocation {
                id,
                operation: op_id.clone(),
                task,
                node: node_id.clone(),
                tree,
                resources,
                start_time: now,
                state: AllocationState::Running,
            },
        );
        self.classify_appended(tree, op_id, id, resources);
        self.touch_operation(op_id);
        (id, resources)
    }

    /// Removes an allocation from the books and logs how it ended. A job that did not
    /// complete goes back to pending (unless the operation is finishing).
    pub(crate) fn end_allocation(&mut self, now: Millis, id: AllocationId, how: EndKind) {
        self.room_epoch += 1;
        let Some(alloc) = self.allocations.remove(&id) else {
            return;
        };
        if let Some(tree) = self.trees.get_mut(alloc.tree) {
            tree.class_cache.remove(&alloc.operation);
        }
        // An interrupted allocation already left the node's and the operation's usage.
        let counted = alloc.state == AllocationState::Running;
        if let Some(node) = self.nodes.get_mut(&alloc.node) {
            node.allocations.remove(&id);
            if counted {
                node.usage = node.usage.sub(&alloc.resources);
            }
        }
        let mut completed = false;
        let mut too_many_failed = None;
        if let Some(op) = self.operations.get_mut(&alloc.operation) {
            op.allocations.retain(|&a| a != id);
            if counted {
                op.usage = op.usage.sub(&alloc.resources);
                if let Some(o) = op.in_tree_mut(alloc.tree) {
                    o.usage = o.usage.sub(&alloc.resources);
                }
            }
            let t = &mut op.tasks[alloc.task];
            t.running -= 1;
            match how {
                EndKind::Finished(JobOutcome::Completed) => {
                    t.completed += 1;
                    completed = true;
                }
                _ => {
                    if op.state == OperationState::Running {
                        t.pending += 1;
                        op.pending_demand = op.pending_demand.add(&alloc.resources);
                    }
                }
            }
            // A failed job runs again, until the operation's failed-job limit.
            if how == EndKind::Finished(JobOutcome::Failed) {
                op.failed_job_count += 1;
                let max = op.max_failed_job_count();
                if op.state == OperationState::Running && op.failed_job_count >= max {
                    too_many_failed = Some(format!(
                        "failed jobs limit exceeded: {} jobs failed (max_failed_job_count = {max})",
                        op.failed_job_count
                    ));
                }
            }
        }
        self.touch_operation(&alloc.operation);
        let kind = match how {
            EndKind::Finished(outcome) => EventKind::AllocationFinished {
                operation: alloc.operation.clone(),
                allocation: id,
                node: alloc.node.clone(),
                outcome,
            },
            EndKind::Preempted(reason, preemptor) => {
                self.stats.preemptions += 1;
                // The node may still run the job: it must stop it.
                if self.nodes.contains_key(&alloc.node) {
                    self.orders
                        .entry(alloc.node.clone())
                        .or_default()
                        .abort
                        .push(id);
                }
                EventKind::AllocationPreempted {
                    operation: alloc.operation.clone(),
                    allocation: id,
                    node: alloc.node.clone(),
                    reason,
                    preemptor,
                }
            }
        };
        self.log(now, kind);
        if completed {
            self.maybe_complete(now, &alloc.operation);
        }
        if let Some(reason) = too_many_failed {
            self.fail_operation(now, &alloc.operation, reason);
        }
    }
}

/// How an allocation ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum EndKind {
    Finished(JobOutcome),
    Preempted(PreemptionReason, Option<Preemptor>),
}

/// Rejects specs that cannot run, naming the field.
/// The longest duration an operation may give (a timeout, a time limit), in milliseconds:
/// ten years. Longer ones are refused rather than overflow the core's time arithmetic.
pub const MAX_DURATION_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

fn check_duration(id: &str, field: &str, ms: Option<u64>) -> Result<(), CoreError> {
    match ms {
        Some(ms) if ms > MAX_DURATION_MS => Err(CoreError::new(format!(
            "operation {id:?}: {field} must be at most {MAX_DURATION_MS} ms (ten years; got {ms})"
        ))),
        _ => Ok(()),
    }
}

/// An operation's weight takes the range of a pool's (`fairsched_config::MIN_WEIGHT` ..=
/// `MAX_WEIGHT`, YTsaurus' bounds): weights far apart make the fair-share computation's
/// ratios meaningless.
fn check_operation_weight(id: &str, field: &str, w: f64) -> Result<(), CoreError> {
    use fairsched_config::{MAX_WEIGHT, MIN_WEIGHT};
    if !w.is_finite() || w <= 0.0 {
        return Err(CoreError::new(format!(
            "operation {id:?}: {field} must be a positive number (got {w})"
        )));
    }
    if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&w) {
        return Err(CoreError::new(format!(
            "operation {id:?}: {field} must be in [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}] (got {w:e})"
        )));
    }
    Ok(())
}

fn validate_operation_spec(spec: &OperationSpec) -> Result<(), CoreError> {
    let id = &spec.id.0;
    if id.is_empty() {
        return Err(CoreError::new("operation id must not be empty"));
    }
    if spec.tasks.is_empty() {
        return Err(CoreError::new(format!(
            "operation {id:?}: tasks must not be empty"
        )));
    }
    if let Some(w) = spec.weight {
        check_operation_weight(id, "weight", w)?;
    }
    for (tree, o) in &spec.scheduling_options_per_pool_tree {
        if let Some(w) = o.weight {
            check_operation_weight(
                id,
                &format!("scheduling_options_per_pool_tree.{tree}.weight"),
                w,
            )?;
        }
    }
    if let Some(t) = spec.fair_share_starvation_tolerance
        && !(0.0..=1.0).contains(&t)
    {
        return Err(CoreError::new(format!(
            "operation {id:?}: fair_share_starvation_tolerance must be in [0, 1] (got {t})"
        )));
    }
    let durations = [
        ("interruption_timeout_ms", spec.interruption_timeout_ms),
        (
            "fair_share_starvation_timeout_ms",
            spec.fair_share_starvation_timeout_ms,
        ),
    ];
    for (field, ms) in durations {
        check_duration(id, field, ms)?;
    }
    if let Some(Err(e)) = spec
        .scheduling_tag_filter
        .as_deref()
        .map(fairsched_config::TagFilter::parse)
    {
        return Err(CoreError::new(format!(
            "operation {id:?}: scheduling_tag_filter: {e}"
        )));
    }
    for (i, t) in spec.tasks.iter().enumerate() {
        if t.resources.any_negative() {
            return Err(CoreError::new(format!(
                "operation {id:?}: tasks[{i}].resources must not be negative"
            )));
        }
        if t.resources.is_zero() {
            return Err(CoreError::new(format!(
                "operation {id:?}: tasks[{i}].resources must request something"
            )));
        }
        check_duration(id, &format!("tasks[{i}].time_limit_ms"), t.time_limit_ms)?;
        check_duration(id, &format!("tasks[{i}].duration_ms"), t.duration_ms)?;
        check_duration(
            id,
            &format!("tasks[{i}].exit_after_interrupt_ms"),
            t.exit_after_interrupt_ms,
        )?;
        if t.time_limit_ms == Some(0) {
            return Err(CoreError::new(format!(
                "operation {id:?}: tasks[{i}].time_limit_ms must be positive (leave it out for \
                 no limit)"
            )));
        }
    }
    Ok(())
}
