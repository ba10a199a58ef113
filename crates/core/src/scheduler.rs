//! The scheduler: state plus the commands that change it. Every method takes the current time
//! as an argument; nothing here reads a clock, spawns a thread or depends on hash order.

use crate::event::{Event, EventKind};
use crate::heartbeat::Walk;
use crate::holds::Holds;
use crate::model::{
    Allocation, AllocationId, Millis, Node, NodeId, Operation, OperationId, OperationState,
    TreeSchedulingOptions,
};
use crate::operations::PoolCounts;
use crate::preemptible::PreemptionCache;
use crate::tree::{EphemeralPool, PoolTree, ROOT_NAME};
use fairsched_config::{PoolConfig, ValidatedPoolTrees};
use fairsched_resources::{PartialResources, Resources};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub(crate) use crate::books::EndKind;
pub use crate::error::*;
pub use crate::protocol::*;
pub use crate::scheduler_config::SchedulerConfig;
pub use crate::validate::MAX_DURATION_MS;

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
    pub(crate) next_allocation: u64,
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
    /// The heartbeat's descent state per tree, kept up to date between fair-share updates
    /// (see [`crate::heartbeat`]); `None` until the first heartbeat after an update.
    pub(crate) walks: Vec<Option<Walk>>,
    /// Operation counts per pool (subtree totals) per tree, maintained as operations start,
    /// change state or move (see [`crate::operations`]).
    pub(crate) counts: Vec<BTreeMap<String, PoolCounts>>,
    /// Preemption's caches per tree (see [`crate::preemptible`]).
    pub(crate) preemption: Vec<PreemptionCache>,
    /// Reservations and gangs (see [`crate::holds`]).
    pub(crate) holds: Holds,
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
        let tree_count = trees.trees.len();
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
            walks: vec![None; tree_count],
            counts: vec![BTreeMap::new(); tree_count],
            preemption: vec![PreemptionCache::default(); tree_count],
            holds: Holds::default(),
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
            self.walks[t] = None;
            self.preemption[t].classes.clear();
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
        }
        // Preemption thresholds may have changed.
        for cache in &mut self.preemption {
            cache.classes.clear();
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
}
