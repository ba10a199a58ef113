//! Preemption (scheduler spec §2.4–§2.8): the preemptive heartbeat stages (which candidates a
//! stage may take, conditional blockers, the preemptor's start), graceful preemption, limit
//! violations and node overcommit. Which allocations are preemptible at all is
//! [`crate::preemptible`].
//!
//! What a stage reads and chooses (candidates and their levels, conditional blockers,
//! preemptive offers, live usage, graceful and overcommit victims) are functions over explicit
//! borrows of a tree, the books and the tree's preemption cache; what preempts and starts jobs
//! are `Parts` methods.

use crate::event::{Preemptor, Stage};
use crate::heartbeat::descent;
use crate::model::{
    AllocationId, AllocationState, Millis, NodeId, Operation, OperationState, PreemptionMode,
    PreemptionReason,
};
use crate::preemptible::{self, PreemptionCache, PreemptionPriority, PreemptionStatus};
use crate::scheduler::{EndKind, HeartbeatResponse, Parts};
use crate::state::Books;
use crate::tree::{PoolTree, StarvationStatus};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{ResourceVector, Resources};
use std::collections::BTreeMap;

/// What protects a candidate under conditional preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blocker {
    /// The victim operation itself: not preemptible.
    Operation,
    /// A pool: preemptible only for operations inside it.
    Pool(ElementIndex),
}

/// Level of an allocation in a preemptive stage (ordered; YTsaurus
/// `EAllocationPreemptionLevel`). A stage may take allocations at or above its minimum level.
/// SSD allocations (SSD priority preemption enabled on their node, their job asks for an SSD
/// medium) that are not plainly preemptible get the `Ssd*` levels, below every non-SSD
/// allocation: only the SSD stages reach them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    SsdNonPreemptible,
    SsdAggressivelyPreemptible,
    NonPreemptible,
    AggressivelyPreemptible,
    Preemptible,
}

impl Level {
    fn is_ssd(self) -> bool {
        matches!(
            self,
            Level::SsdNonPreemptible | Level::SsdAggressivelyPreemptible
        )
    }
}

/// One preemptive stage (spec §1.3): the operations it serves, the allocations it may take and
/// the reason they are preempted with.
#[derive(Clone, Copy, Debug)]
struct PreemptiveStage {
    stage: Stage,
    target: PreemptionPriority,
    min_level: Level,
    reason: PreemptionReason,
}

/// The preemptive stages in the order they run; the SSD ones only on SSD nodes with SSD
/// priority preemption enabled.
const PREEMPTIVE_STAGES: [PreemptiveStage; 4] = [
    PreemptiveStage {
        stage: Stage::SsdAggressive,
        target: PreemptionPriority::SsdAggressive,
        min_level: Level::SsdAggressivelyPreemptible,
        reason: PreemptionReason::SsdAggressivePreemption,
    },
    PreemptiveStage {
        stage: Stage::SsdPreemptive,
        target: PreemptionPriority::SsdNormal,
        min_level: Level::NonPreemptible,
        reason: PreemptionReason::SsdPreemption,
    },
    PreemptiveStage {
        stage: Stage::Aggressive,
        target: PreemptionPriority::Aggressive,
        min_level: Level::AggressivelyPreemptible,
        reason: PreemptionReason::AggressivePreemption,
    },
    PreemptiveStage {
        stage: Stage::Preemptive,
        target: PreemptionPriority::Normal,
        min_level: Level::Preemptible,
        reason: PreemptionReason::Preemption,
    },
];

impl Parts<'_> {
    /// Takes an allocation away: interrupted (with the operation's signal and timeout) when the
    /// operation handles interruption, aborted otherwise. The other running allocations of a
    /// gang operation its tree starts whole (`gang_placement`) go with it (reason
    /// `gang_member_preempted`, same preemptor).
    pub(crate) fn preempt(
        &mut self,
        now: Millis,
        id: AllocationId,
        reason: PreemptionReason,
        preemptor: Option<Preemptor>,
        timeout_override: Option<u64>,
    ) {
        let Some(a) = self.books.allocations.get(&id) else {
            return;
        };
        if a.state != AllocationState::Running {
            return;
        }
        let members = crate::backfill::running_gang_members(
            &self.trees[a.tree],
            a.tree,
            self.books,
            &a.operation,
            |m| m.id != id,
        );
        self.preempt_one(now, id, reason, preemptor.clone(), timeout_override);
        for m in members {
            self.preempt_one(
                now,
                m,
                PreemptionReason::GangMemberPreempted,
                preemptor.clone(),
                timeout_override,
            );
        }
    }

    /// [`Parts::preempt`] of one allocation.
    fn preempt_one(
        &mut self,
        now: Millis,
        id: AllocationId,
        reason: PreemptionReason,
        preemptor: Option<Preemptor>,
        timeout_override: Option<u64>,
    ) {
        let Some(a) = self.books.allocations.get(&id) else {
            return;
        };
        if a.state != AllocationState::Running {
            return;
        }
        let op = &self.books.operations[&a.operation];
        let signal = op.spec.interruption_signal.clone();
        if signal.is_some() || timeout_override.is_some() {
            let timeout = timeout_override.unwrap_or_else(|| {
                op.interruption_timeout_ms(
                    self.trees[a.tree].config().allocation_preemption_timeout_ms,
                )
            });
            self.book_interruption(now, id, signal, timeout, reason, preemptor);
        } else {
            self.end_allocation(now, id, EndKind::Preempted(reason, preemptor));
        }
    }

    /// Graceful mode (spec §2.7): every preemptible allocation of a graceful operation is
    /// interrupted with the graceful timeout ([`graceful_victims`]).
    pub(crate) fn preempt_gracefully(&mut self, t: usize, now: Millis, node_id: &NodeId) {
        let victims = graceful_victims(&self.trees[t], self.books, t, node_id);
        let timeout = self.trees[t]
            .config()
            .allocation_graceful_preemption_timeout_ms;
        for id in victims {
            self.preempt(
                now,
                id,
                PreemptionReason::GracefulPreemption,
                None,
                Some(timeout),
            );
        }
    }

    /// The preemptive stages (spec §1.3, §2.5): SSD aggressive and SSD normal (on SSD nodes with
    /// SSD priority preemption enabled), aggressive, then normal; at most
    /// `max_preemptive_allocations_per_heartbeat` allocations start by preemption, over all
    /// stages together.
    pub(crate) fn schedule_preemptive(
        &mut self,
        t: usize,
        now: Millis,
        node_id: &NodeId,
        response: &mut HeartbeatResponse,
    ) {
        let backoff = self.trees[t].config().preemptive_scheduling_backoff_ms;
        if let Some(last) = self.books.nodes[node_id].last_preemptive_scheduling
            && now < last + backoff
        {
            return;
        }
        self.books
            .nodes
            .get_mut(node_id)
            .expect("heartbeating node")
            .last_preemptive_scheduling = Some(now);
        let max_started = self.trees[t]
            .config()
            .max_preemptive_allocations_per_heartbeat;
        let ssd_node = self.trees[t]
            .arena
            .ssd
            .as_ref()
            .is_some_and(|ssd| ssd.priority_on(&self.books.nodes[node_id].tags));
        let mut started = 0u32;
        for spec in PREEMPTIVE_STAGES {
            let stage = spec.stage;
            if stage.is_ssd() && !ssd_node {
                continue;
            }
            // The targets that may start here (gang operations placed all at once start only
            // from what they hold, never here), as listed at the last update if that is known.
            let gang_placement = self.trees[t].config().gang_placement.enable;
            let open = (self.caches.preemption[t].open_targets.as_ref())
                .filter(|(g, _)| *g == gang_placement)
                .map(|(_, lists)| lists.get(&spec.target));
            // When none is listed, unless limits may need enforcing, the stage changes
            // nothing: it is skipped without looking the targets up.
            if open.is_some_and(|list| list.is_none_or(Vec::is_empty))
                && (stage != Stage::Preemptive || !self.trees[t].limits_maybe_violated)
            {
                continue;
            }
            // Those still waiting, sorted for the walk's lookups (`start_for_preemption`).
            let waiting = |i: ElementIndex| {
                if let crate::tree::ElementRef::Operation(id) =
                    &self.trees[t].arena.elements[i].kind
                    && let Some(op) = self.books.operations.get(id)
                {
                    op.state == OperationState::Running
                        && op.pending_job_count() > 0
                        && !(gang_placement && op.is_gang())
                } else {
                    false
                }
            };
            let listed = match open {
                Some(list) => list,
                None => self.caches.preemption[t].targets.get(&spec.target),
            };
            let mut targets: Vec<ElementIndex> = (listed.into_iter().flatten().copied())
                .filter(|&i| waiting(i))
                .collect();
            if open.is_none() {
                targets.sort_unstable();
            }
            if targets.is_empty()
                && (stage != Stage::Preemptive || !self.trees[t].limits_maybe_violated)
            {
                continue;
            }
            // Only what ran on the node when its heartbeat arrived may be taken: YTsaurus
            // `TScheduleAllocationsContext::AnalyzePreemptibleAllocations` draws its candidates
            // from `SchedulingHeartbeatContext->RunningAllocations()`, fixed when the heartbeat
            // arrives, while the allocations its stages start go to `StartedAllocations()`
            // (`StartAllocation`), never among them. This heartbeat's starts (of the regular
            // stage or an earlier preemptive one) are classed against the last fair-share
            // update like any other; were they candidates, an operation still listed as
            // starving would preempt what it, or another operation, was just given. (YTsaurus
            // has no rule about the preemptor's own older allocations: they are protected as
            // anyone's are, by the prefix rule and `FindPreemptionBlockingAncestor`.)
            let started_here: std::collections::BTreeSet<AllocationId> =
                response.start.iter().map(|o| o.allocation).collect();
            let candidates: Vec<(AllocationId, Level)> = preemption_candidates(
                &mut self.caches.preemption[t],
                &self.trees[t],
                self.books,
                t,
                node_id,
                stage,
                spec.min_level,
            )
            .into_iter()
            .filter(|(id, _)| !started_here.contains(id))
            .collect();
            let blockers = conditional_blockers(&self.trees[t], self.books, t, &candidates, stage);
            // Candidates protected by the victim operation itself are dropped; those protected
            // by a pool may only go to preemptors inside that pool.
            let mut candidates: Vec<(AllocationId, Level)> = candidates
                .into_iter()
                .filter(|(id, _)| !matches!(blockers.get(id), Some(Blocker::Operation)))
                .collect();
            // A job starts only if the node's free room and what every candidate holds cover
            // it, so at least the smallest pending job: when they do not, the walk over the
            // targets is not built (most preemptive heartbeats of a full cluster).
            let may_start = || {
                let room = (candidates.iter())
                    .fold(self.books.nodes[node_id].free(), |acc, (id, _)| {
                        acc.add(&self.books.allocations[id].resources)
                    });
                (self.books.pending_shapes.min()).is_some_and(|min| room.dominates(min))
            };
            if started < max_started
                && !targets.is_empty()
                && may_start()
                && let Some(order) =
                    self.start_for_preemption(now, node_id, &targets, &candidates, &blockers, stage)
            {
                started += 1;
                let (order_op, order_task) = (order.operation.clone(), order.task);
                let preemptor = Preemptor {
                    operation: order.operation.clone(),
                    allocation: order.allocation,
                };
                response.start.push(order);
                // Minimal set: in preemption order, only while the node is over its limits.
                let preemptor_leaf = self.trees[t].arena.by_operation[&preemptor.operation];
                // What gangs hold here was free: it stays free after the victims leave (unless
                // the preemptor's job backfills it).
                let gang_held = if !self.holds.any_gang() {
                    Resources::ZERO
                } else {
                    let limit =
                        self.books.operations[&order_op].spec.tasks[order_task].time_limit_ms;
                    crate::backfill::held_from(
                        self.books,
                        self.holds,
                        node_id,
                        &preemptor.operation,
                    )
                    .map_or(Resources::ZERO, |h| h.gangs_for_job(now, limit))
                };
                let mut remaining = Vec::new();
                for (id, level) in candidates {
                    let node = &self.books.nodes[node_id];
                    let allowed =
                        candidate_allowed_for(&self.trees[t], &blockers, id, preemptor_leaf);
                    if allowed && !node.resources.dominates(&node.usage.add(&gang_held)) {
                        self.preempt(now, id, spec.reason, Some(preemptor.clone()), None);
                    } else {
                        remaining.push((id, level));
                    }
                }
                candidates = remaining;
            }
            if stage == Stage::Preemptive {
                self.preempt_limit_violations(t, now, candidates);
            }
        }
    }

    /// Starts one allocation for a target operation (arena indices of the node's tree),
    /// counting the candidates' resources as available.
    fn start_for_preemption(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        targets: &[ElementIndex],
        candidates: &[(AllocationId, Level)],
        blockers: &BTreeMap<AllocationId, Blocker>,
        stage: Stage,
    ) -> Option<crate::scheduler::StartOrder> {
        let t = self.books.nodes[node_id].tree?;
        // `targets` is sorted and holds no gang operation placed all at once (those start only
        // from what they hold: see `schedule_preemptive`).
        debug_assert!(targets.is_sorted());
        let mut walk = descent::walk_for(
            t,
            &self.trees[t].arena,
            &self.books.operations,
            &self.books.nodes[node_id],
            |i| targets.binary_search(&i).is_ok(),
        );
        while let Some(leaf) = walk.best_leaf(&self.trees[t].arena) {
            debug_assert!(!(self.trees[t].config().gang_placement.enable && walk.gang[leaf]));
            // The discount: every candidate this operation may take.
            let discount = candidates
                .iter()
                .filter(|(id, _)| candidate_allowed_for(&self.trees[t], blockers, *id, leaf))
                .fold(Resources::ZERO, |acc, (id, _)| {
                    acc.add(&self.books.allocations[id].resources)
                });
            let mut held = crate::backfill::held_from_leaf(
                self.books,
                self.holds,
                &self.trees[t].arena,
                node_id,
                leaf,
            );
            self.hold_for_plan(t, leaf, &discount, &mut held);
            let offer = crate::holds::Offer {
                available: self.books.nodes[node_id].free().add(&discount),
                held,
            };
            if let Some(order) = self.try_start(now, node_id, leaf, &mut walk, stage, offer) {
                return Some(order);
            }
            walk.deactivate(&self.trees[t].arena, leaf);
        }
        None
    }

    /// In a tree whose assembling gang plans its start (a reservation: `gang_placement.hold`
    /// `needed` or `planned`), what preemption would free (`discount`) is counted as held for
    /// that gang: its plan expects the victims' room when they end, so a preemptor of another
    /// operation (at `leaf`) may use it only if its job ends before the gang needs it, as any
    /// backfill. Preemption then never delays the reservation.
    fn hold_for_plan(
        &self,
        t: usize,
        leaf: ElementIndex,
        discount: &Resources,
        held: &mut Option<crate::holds::Held>,
    ) {
        let Some(a) = self.holds.gangs.get(&t) else {
            return;
        };
        let preemptor_is_gang = matches!(&self.trees[t].arena.elements[leaf].kind,
            crate::tree::ElementRef::Operation(id) if *id == a.operation);
        if preemptor_is_gang
            || *discount == Resources::ZERO
            || !self.trees[t].config().gang_placement.hold.plans_head()
        {
            return;
        }
        let h = held.get_or_insert_with(Default::default);
        // Jobs ending by both times may use both parts (`None`: none may).
        h.gangs_until = if h.gangs == Resources::ZERO {
            a.backfill_until
        } else {
            h.gangs_until.zip(a.backfill_until).map(|(x, y)| x.min(y))
        };
        h.gangs = h.gangs.add(discount);
    }

    /// Remaining candidates of operations (or pools) whose usage exceeds their resource limits
    /// are preempted (limits were lowered).
    fn preempt_limit_violations(
        &mut self,
        t: usize,
        now: Millis,
        candidates: Vec<(AllocationId, Level)>,
    ) {
        if !self.trees[t].limits_maybe_violated {
            return;
        }
        let usage = live_usage(&self.trees[t], self.books, t);
        let any_violation = self.trees[t]
            .arena
            .elements
            .iter()
            .zip(&usage)
            .any(|(e, u)| !e.resource_limits.dominates(u));
        if !any_violation {
            self.trees[t].limits_maybe_violated = false;
            return;
        }
        for (id, _) in candidates {
            let Some(a) = self.books.allocations.get(&id) else {
                continue;
            };
            let Some(&leaf) = self.trees[t].arena.by_operation.get(&a.operation) else {
                continue;
            };
            let usage = live_usage(&self.trees[t], self.books, t);
            let violated = preemptible::path_to_root(&self.trees[t].arena, leaf)
                .into_iter()
                .any(|e| {
                    !self.trees[t].arena.elements[e]
                        .resource_limits
                        .dominates(&usage[e])
                });
            if violated {
                self.preempt(
                    now,
                    id,
                    PreemptionReason::ResourceLimitsViolated,
                    None,
                    None,
                );
            }
        }
    }

    /// Node overcommit (spec §2.8): after the allowed duration, allocations that do not fit,
    /// kept in order (non-preemptible first, oldest first), are preempted
    /// ([`overcommit_victims`]).
    pub(crate) fn preempt_overcommit(&mut self, now: Millis, node_id: &NodeId) {
        let node = &self.books.nodes[node_id];
        if node.resources.dominates(&node.usage) {
            self.books
                .nodes
                .get_mut(node_id)
                .expect("node")
                .overcommit_since = None;
            return;
        }
        let since = *self
            .books
            .nodes
            .get_mut(node_id)
            .expect("node")
            .overcommit_since
            .get_or_insert(now);
        if now < since.saturating_add(self.config.allowed_node_resources_overcommit_duration_ms) {
            return;
        }
        for id in overcommit_victims(self.trees, self.books, node_id) {
            // Each victim alone keeps the node over its resources, unless a gang member taken
            // with an earlier one left too (then the node may fit before the list is done).
            let node = &self.books.nodes[node_id];
            if node.resources.dominates(&node.usage) {
                break;
            }
            self.preempt(now, id, PreemptionReason::ResourceOvercommit, None, None);
        }
        self.books
            .nodes
            .get_mut(node_id)
            .expect("node")
            .overcommit_since = None;
    }
}

/// Graceful mode's victims on `node_id` (in tree `t`, `tree`): the preemptible allocations of
/// graceful operations. None without a graceful operation in the tree (as of the last
/// fair-share update, which every scheduled operation went through: graceful mode is fixed at
/// submission).
fn graceful_victims(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    node_id: &NodeId,
) -> Vec<AllocationId> {
    let mut victims = Vec::new();
    if !tree.arena.any_graceful {
        return victims;
    }
    let mut cache: BTreeMap<_, BTreeMap<AllocationId, PreemptionStatus>> = BTreeMap::new();
    for &id in &books.nodes[node_id].allocations {
        let Some(a) = books.allocations.get(&id) else {
            continue;
        };
        let op = &books.operations[&a.operation];
        if op.spec.preemption_mode != PreemptionMode::Graceful
            || a.state != AllocationState::Running
        {
            continue;
        }
        let classes = cache.entry(op.spec.id.clone()).or_insert_with(|| {
            preemptible::classify(tree, books, t, op)
                .into_iter()
                .collect()
        });
        if classes.get(&id) == Some(&PreemptionStatus::Preemptible) {
            victims.push(id);
        }
    }
    victims
}

/// The allocations on an overcommitted node `node_id` (of `books`, its allocations classed in
/// `trees`) that do not fit it, keeping them in order: non-preemptible first, oldest first.
fn overcommit_victims(trees: &[PoolTree], books: &Books, node_id: &NodeId) -> Vec<AllocationId> {
    let mut keep: Vec<(PreemptionStatus, Millis, AllocationId, Resources)> = Vec::new();
    let mut classes: BTreeMap<AllocationId, PreemptionStatus> = BTreeMap::new();
    for &id in &books.nodes[node_id].allocations {
        let Some(a) = books.allocations.get(&id) else {
            continue;
        };
        if a.state != AllocationState::Running {
            continue;
        }
        if !classes.contains_key(&id) {
            classes.extend(preemptible::classify(
                &trees[a.tree],
                books,
                a.tree,
                &books.operations[&a.operation],
            ));
        }
        let status = classes
            .get(&id)
            .copied()
            .unwrap_or(PreemptionStatus::Preemptible);
        keep.push((status, a.start_time, id, a.resources));
    }
    keep.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let limits = books.nodes[node_id].resources;
    let mut used = Resources::ZERO;
    let mut victims = Vec::new();
    for (_, _, id, r) in keep {
        let next = used.add(&r);
        if limits.dominates(&next) {
            used = next;
        } else {
            victims.push(id);
        }
    }
    victims
}

/// Allocations on the node that a stage may take, in preemption order: preemptible first,
/// then aggressively preemptible, then the rest; newest first within a class. Fills tree
/// `t`'s (`tree`'s) class cache `cache` for the operations on the node.
fn preemption_candidates(
    cache: &mut PreemptionCache,
    tree: &PoolTree,
    books: &Books,
    t: usize,
    node_id: &NodeId,
    stage: Stage,
    min_level: Level,
) -> Vec<(AllocationId, Level)> {
    for op_id in &operations_on(books, node_id) {
        preemptible::cached_classes(cache, tree, books, t, op_id);
    }
    let cache = &cache.classes;
    candidates_classified(tree, books, t, node_id, stage, min_level, &|op, id| {
        cache.get(op).and_then(|c| c.statuses.get(&id)).copied()
    })
}

/// Live usage of every element of tree `t`'s (`tree`'s) arena.
pub(crate) fn live_usage(tree: &PoolTree, books: &Books, t: usize) -> Vec<Resources> {
    let arena = &tree.arena;
    let n = arena.elements.len();
    let mut usage = vec![Resources::ZERO; n];
    for (i, op) in crate::heartbeat::descent::tree_operations(arena, &books.operations) {
        if let Some(op) = op {
            usage[i] = op.in_tree(t).map_or(Resources::ZERO, |o| o.usage);
        }
    }
    for i in (1..n).rev() {
        if let Some(p) = arena.elements[i].parent {
            usage[p] = usage[p].add(&usage[i]);
        }
    }
    usage
}

/// The operations with allocations on node `node_id`.
fn operations_on(
    books: &Books,
    node_id: &NodeId,
) -> std::collections::BTreeSet<crate::model::OperationId> {
    books.nodes[node_id]
        .allocations
        .iter()
        .filter_map(|id| books.allocations.get(id))
        .map(|a| a.operation.clone())
        .collect()
}

/// [`preemption_candidates`] (in tree `t`, `tree`) with the allocations' classes from `status` (`None`:
/// preemptible, as an operation not in the last update).
fn candidates_classified(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    node_id: &NodeId,
    stage: Stage,
    min_level: Level,
    status: &dyn Fn(&crate::model::OperationId, AllocationId) -> Option<PreemptionStatus>,
) -> Vec<(AllocationId, Level)> {
    // SSD priority preemption on this node: which (operation, task) pairs run SSD jobs.
    let ssd = tree.arena.ssd.as_ref();
    let ssd_node = ssd.is_some_and(|ssd| ssd.priority_on(&books.nodes[node_id].tags));
    let mut ssd_tasks: std::collections::BTreeSet<(&crate::model::OperationId, usize)> =
        std::collections::BTreeSet::new();
    if let Some(ssd) = ssd.filter(|_| ssd_node) {
        for (op_id, op) in operations_on(books, node_id)
            .iter()
            .filter_map(|id| books.operations.get_key_value(id))
        {
            for (i, task) in op.spec.tasks.iter().enumerate() {
                if ssd.is_ssd_task(task) {
                    ssd_tasks.insert((op_id, i));
                }
            }
        }
    }
    let mut out = Vec::new();
    for &id in &books.nodes[node_id].allocations {
        let Some(a) = books.allocations.get(&id) else {
            continue;
        };
        if a.state != AllocationState::Running {
            continue;
        }
        let op = &books.operations[&a.operation];
        let status = status(&op.spec.id, id).unwrap_or(PreemptionStatus::Preemptible);
        // SSD allocations are protected from non-SSD preemption unless plainly preemptible.
        let ssd = ssd_node && ssd_tasks.contains(&(&a.operation, a.task));
        let level = match status {
            PreemptionStatus::NonPreemptible if ssd => Level::SsdNonPreemptible,
            PreemptionStatus::NonPreemptible => Level::NonPreemptible,
            PreemptionStatus::AggressivelyPreemptible
                if aggressive_preemption_allowed(tree, t, op) =>
            {
                if ssd {
                    Level::SsdAggressivelyPreemptible
                } else {
                    Level::AggressivelyPreemptible
                }
            }
            PreemptionStatus::AggressivelyPreemptible if ssd => Level::SsdNonPreemptible,
            PreemptionStatus::AggressivelyPreemptible => Level::NonPreemptible,
            PreemptionStatus::Preemptible => Level::Preemptible,
        };
        if level >= min_level && !preemption_blocked(tree, t, op, stage, level) {
            out.push((id, level, a.start_time));
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(b.0.cmp(&a.0)));
    out.into_iter().map(|(id, level, _)| (id, level)).collect()
}

/// Whether the tree (`tree`, tree `t`) lets `op`'s allocations be preempted aggressively.
fn aggressive_preemption_allowed(tree: &PoolTree, t: usize, op: &Operation) -> bool {
    if op.is_gang()
        && !tree
            .config()
            .allow_aggressive_preemption_for_gang_operations
    {
        return false;
    }
    tree.inherited(op.in_tree(t).map_or("", |o| o.pool.as_str()))
        .is_none_or(|p| p.allow_aggressive_preemption)
}

/// Whether an allocation of `op` at `level` is protected in a stage (spec §2.4). The SSD
/// stages ignore every protection but graceful mode for victims without an `Ssd*` level.
fn preemption_blocked(
    tree: &PoolTree,
    t: usize,
    op: &Operation,
    stage: Stage,
    level: Level,
) -> bool {
    if op.spec.preemption_mode == PreemptionMode::Graceful {
        return true;
    }
    if stage.is_ssd() && !level.is_ssd() {
        return false;
    }
    if stage == Stage::Preemptive
        && tree
            .explicit(op.in_tree(t).map_or("", |o| o.pool.as_str()))
            .is_some_and(|p| !p.allow_normal_preemption)
    {
        return true;
    }
    if !tree.config().allow_preemption_from_starving_operations {
        let arena = &tree.arena;
        if let Some(&i) = arena.by_operation.get(&op.spec.id)
            && arena.elements[i].starvation_status != StarvationStatus::NonStarving
        {
            return true;
        }
    }
    false
}

/// What the operation at arena index `leaf` of tree `t` could use on a node of that tree
/// (`tree`, its preemption cache `cache`) in its preemptive stage now (as a heartbeat of the node would count it): the node's
/// free resources plus the allocations the stage of its preemption priority may take for
/// it. Only the free resources when it has no preemption priority or its stage does not
/// run on the node (an SSD stage on a node without SSD priority).
pub(crate) fn preemptive_offer(
    tree: &PoolTree,
    books: &Books,
    cache: &PreemptionCache,
    t: usize,
    leaf: ElementIndex,
    node_id: &NodeId,
    classes: &BTreeMap<crate::model::OperationId, BTreeMap<AllocationId, PreemptionStatus>>,
) -> Resources {
    let node = &books.nodes[node_id];
    let free = node.free();
    let crate::tree::ElementRef::Operation(id) = &tree.arena.elements[leaf].kind else {
        return free;
    };
    let priority = preemptible::preemption_priority(tree, &books.operations[id]);
    let ssd_node = tree
        .arena
        .ssd
        .as_ref()
        .is_some_and(|ssd| ssd.priority_on(&node.tags));
    let Some(spec) = PREEMPTIVE_STAGES
        .iter()
        .find(|s| s.target == priority && (ssd_node || !s.stage.is_ssd()))
    else {
        return free;
    };
    let candidates = candidates_classified(
        tree,
        books,
        t,
        node_id,
        spec.stage,
        spec.min_level,
        &|op, a| {
            cache
                .classes
                .get(op)
                .map(|c| &c.statuses)
                .or_else(|| classes.get(op))
                .and_then(|statuses| statuses.get(&a))
                .copied()
        },
    );
    let blockers = conditional_blockers(tree, books, t, &candidates, spec.stage);
    candidates
        .iter()
        .filter(|(a, _)| candidate_allowed_for(tree, &blockers, *a, leaf))
        .fold(free, |acc, (a, _)| acc.add(&books.allocations[a].resources))
}

/// Classes of the allocations of operations on `nodes` (of tree `t`, `tree`) that its cache
/// lacks (for [`preemptive_offer`], which may not fill the cache).
pub(crate) fn classes_for_offers<'a>(
    tree: &PoolTree,
    books: &Books,
    cache: &PreemptionCache,
    t: usize,
    nodes: impl Iterator<Item = &'a NodeId>,
) -> BTreeMap<crate::model::OperationId, BTreeMap<AllocationId, PreemptionStatus>> {
    let mut out = BTreeMap::new();
    for node in nodes {
        for a in &books.nodes[node].allocations {
            let Some(a) = books.allocations.get(a) else {
                continue;
            };
            if cache.classes.contains_key(&a.operation) || out.contains_key(&a.operation) {
                continue;
            }
            let op = &books.operations[&a.operation];
            out.insert(
                a.operation.clone(),
                preemptible::classify(tree, books, t, op)
                    .into_iter()
                    .collect(),
            );
        }
    }
    out
}

/// The blocking checks (`preemption_check_starvation`, `preemption_check_satisfaction`):
/// for each candidate, the first element from its operation up to (not including) the root
/// that is starving or below its preemption satisfaction threshold.
fn conditional_blockers(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    candidates: &[(AllocationId, Level)],
    stage: Stage,
) -> BTreeMap<AllocationId, Blocker> {
    let mut out = BTreeMap::new();
    let (check_starvation, check_satisfaction) = {
        let c = tree.config();
        (
            c.preemption_check_starvation,
            c.preemption_check_satisfaction,
        )
    };
    if !(check_starvation || check_satisfaction) || candidates.is_empty() {
        return out;
    }
    let arena = &tree.arena;
    let usage = live_usage(tree, books, t);
    let config = tree.config();
    let mut by_op: BTreeMap<ElementIndex, Option<Blocker>> = BTreeMap::new();
    for &(id, level) in candidates {
        // The SSD stages ignore the blocking ancestor of victims without an SSD level.
        if stage.is_ssd() && !level.is_ssd() {
            continue;
        }
        let Some(a) = books.allocations.get(&id) else {
            continue;
        };
        let Some(&leaf) = arena.by_operation.get(&a.operation) else {
            continue;
        };
        // The aggressive threshold in the stages of aggressive or SSD targets (YTsaurus:
        // target priority >= Aggressive).
        let aggressive = stage != Stage::Preemptive
            && aggressive_preemption_allowed(tree, t, &books.operations[&a.operation]);
        let threshold = if aggressive {
            config.aggressive_preemption_satisfaction_threshold
        } else {
            config.preemption_satisfaction_threshold
        };
        let blocker = *by_op.entry(leaf).or_insert_with(|| {
            preemptible::path_to_root(&tree.arena, leaf)
                .into_iter()
                .find_map(|e| {
                    let element = &arena.elements[e];
                    let share = ResourceVector::from_resources(&usage[e], &arena.total_resources);
                    let satisfaction = crate::heartbeat::walk::local_satisfaction(
                        &share,
                        &element.attrs.fair_share.total,
                        &element.attrs.demand_share,
                    );
                    let blocks = (check_starvation
                        && element.starvation_status != StarvationStatus::NonStarving)
                        || (check_satisfaction && satisfaction < threshold);
                    blocks.then_some(if e == leaf {
                        Blocker::Operation
                    } else {
                        Blocker::Pool(e)
                    })
                })
        });
        if let Some(b) = blocker {
            out.insert(id, b);
        }
    }
    out
}

/// Whether a candidate may be taken for an operation at arena index `preemptor` of `tree`.
fn candidate_allowed_for(
    tree: &PoolTree,
    blockers: &BTreeMap<AllocationId, Blocker>,
    id: AllocationId,
    preemptor: ElementIndex,
) -> bool {
    match blockers.get(&id) {
        None => true,
        Some(Blocker::Operation) => false,
        // Without conditional preemption a blocking pool protects the victim from everyone.
        Some(Blocker::Pool(pool)) => {
            tree.config().enable_conditional_preemption
                && tree.arena.ancestors(preemptor).any(|a| a == *pool)
        }
    }
}
