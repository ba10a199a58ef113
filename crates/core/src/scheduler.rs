//! The scheduler: a facade over its state, kept in parts with one owner each (the trees,
//! `Books`, `Caches`, `Holds`, the `EventLog`, the orders and the stats; see `state.rs`), and
//! its accessors. The commands are in the stage modules, as methods that split the borrows
//! over functions taking only the parts they need, or over `Parts` (every part borrowed
//! apart) for the stages that change many at once. Every method takes the current time as an
//! argument; nothing here reads a clock, spawns a thread or depends on hash order.

use crate::event::{Event, EventKind};
use crate::holds::Holds;
use crate::model::{
    Allocation, AllocationId, Millis, Node, NodeId, Operation, OperationId, TreeSchedulingOptions,
};
use crate::state::{Books, Caches, EventLog};
use crate::tree::PoolTree;
use fairsched_config::ValidatedPoolTrees;
use fairsched_resources::PartialResources;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::error::*;
pub(crate) use crate::model::EndKind;
pub use crate::protocol::*;
pub use crate::scheduler_config::SchedulerConfig;
pub use crate::validate::{MAX_DURATION_MS, check_duration, check_job_durations};

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

/// The scheduling core: its state in parts, the commands added by the stage modules.
#[derive(Clone, Debug)]
pub struct Scheduler {
    pub config: SchedulerConfig,
    /// The pool trees, sorted by name (operations and nodes refer to them by index).
    pub(crate) trees: Vec<PoolTree>,
    /// Index of the default tree (operations that name no tree run there).
    pub(crate) default_tree: usize,
    /// Nodes, operations and allocations (see [`Books`]).
    pub(crate) books: Books,
    /// The events logged and not taken yet.
    pub(crate) events: EventLog,
    /// Orders not yet handed out, by node ([`NodeOrders`]).
    pub(crate) orders: BTreeMap<NodeId, NodeOrders>,
    pub(crate) last_fair_share_update: Option<Millis>,
    pub(crate) last_hangup_check: Option<Millis>,
    /// Heartbeats whose regular stage was skipped because no pending job could fit.
    pub(crate) skipped_heartbeats: u64,
    /// What is kept between updates to spare recomputation (see [`Caches`]).
    pub(crate) caches: Caches,
    /// Reservations and gangs (see [`crate::holds`]).
    pub(crate) holds: Holds,
    /// Counters for `--stats`.
    pub stats: Stats,
    /// How `why` names times ([`Scheduler::set_why_times`]).
    pub(crate) why_times: crate::scheduler_config::WhyTimes,
}

/// The scheduler's parts borrowed apart ([`Scheduler::parts`]), for the stages that change
/// many of them at once: booking and ending allocations with what follows (orders, events,
/// stats, holds, an operation finishing), preempting, the heartbeat's stages. Their methods sit
/// in the stage modules; what needs fewer parts takes them one by one instead.
pub(crate) struct Parts<'a> {
    pub(crate) config: &'a SchedulerConfig,
    pub(crate) trees: &'a mut [PoolTree],
    pub(crate) books: &'a mut Books,
    pub(crate) caches: &'a mut Caches,
    pub(crate) holds: &'a mut Holds,
    pub(crate) events: &'a mut EventLog,
    /// Orders not yet handed out, by node.
    pub(crate) orders: &'a mut BTreeMap<NodeId, NodeOrders>,
    pub(crate) stats: &'a mut Stats,
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
            books: Books::default(),
            events: EventLog::default(),
            orders: BTreeMap::new(),
            last_fair_share_update: None,
            last_hangup_check: None,
            skipped_heartbeats: 0,
            caches: Caches::new(tree_count),
            holds: Holds::default(),
            stats: Stats::default(),
            why_times: crate::scheduler_config::WhyTimes::default(),
        })
    }

    /// Every part but the default tree, the update clocks and the skipped-heartbeat count,
    /// borrowed apart.
    #[inline]
    pub(crate) fn parts(&mut self) -> Parts<'_> {
        Parts {
            config: &self.config,
            trees: &mut self.trees,
            books: &mut self.books,
            caches: &mut self.caches,
            holds: &mut self.holds,
            events: &mut self.events,
            orders: &mut self.orders,
            stats: &mut self.stats,
        }
    }

    /// The id the next allocation will get (ids are never reused by this scheduler). A driver
    /// that builds a new scheduler and names jobs by allocation id continues after it.
    pub fn next_allocation_id(&self) -> u64 {
        self.books.next_allocation
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
        self.events.take()
    }

    #[inline]
    pub(crate) fn log(&mut self, t_ms: Millis, kind: EventKind) {
        self.events.log(t_ms, kind);
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
        crate::tree::tree_index(&self.trees, name)
    }

    pub fn operation(&self, id: &OperationId) -> Option<&Operation> {
        self.books.operations.get(id)
    }

    pub fn operations(&self) -> impl Iterator<Item = &Operation> {
        self.books.in_start_order()
    }

    /// The operations not finished yet (pending and running), in start order.
    pub fn unfinished_operations(&self) -> impl Iterator<Item = &Operation> {
        self.books.unfinished_operations()
    }

    pub fn node(&self, id: &NodeId) -> Option<&Node> {
        self.books.nodes.get(id)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.books.nodes.values()
    }

    pub fn allocation(&self, id: AllocationId) -> Option<&Allocation> {
        self.books.allocations.get(&id)
    }

    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> {
        self.books.allocations.values()
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

    /// The current configuration of the default tree.
    pub fn tree_config(&self) -> &fairsched_config::PoolTreeConfig {
        &self.tree().validated.tree
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
