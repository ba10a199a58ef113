//! Heartbeat processing (scheduler spec §1): the node reports finished jobs; the core answers
//! with jobs to start, interrupt or abort.
//!
//! The regular stage walks the tree from the root to the "best leaf": at every pool the active
//! child with the smallest satisfaction (FIFO pools with `fifo` order: the first active child in
//! FIFO order), until an operation is reached; one job of it is started if it fits the node and
//! every limit on its path, else the operation is deactivated for this heartbeat.
//!
//! [`Scheduler::process_heartbeat`] borrows the scheduler's parts once (`Parts`) and runs the
//! stages in order. Which allocations end (no user slots, overdue interruptions, preemptors
//! waiting too long) is chosen by functions over the books (and the trees) and done through
//! `Parts::end_allocation`; the regular stage and the preemptive ones
//! ([`crate::preemption`]) are `Parts` methods, as they book as they go.

pub(crate) mod descent;
pub(crate) mod walk;
pub(crate) use walk::Walk;

use crate::event::Stage;
use crate::gang;
use crate::holds::Offer;
use crate::model::{AllocationId, AllocationState, Millis, NodeId, PreemptionReason, Preemptor};
use crate::scheduler::{
    CoreError, EndKind, HeartbeatResponse, NodeHeartbeat, Parts, Scheduler, SchedulerConfig,
};
use crate::state::Books;
use crate::tree::{ElementRef, PoolTree};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::Resources;

/// Whether `free` lacks some resource of `min_spare` that the node has at all.
pub(crate) fn below_min_spare(
    free: &Resources,
    node: &Resources,
    min_spare: &fairsched_resources::PartialResources,
) -> bool {
    fairsched_resources::ResourceKind::ALL.iter().any(|&k| {
        min_spare
            .raw_of(k)
            .is_some_and(|min| node.raw_of(k) > 0 && free.raw_of(k) < min)
    })
}

impl Scheduler {
    /// Processes one heartbeat of `node` at `now`: the stages below, each over the parts it
    /// changes (`Parts`) or reads.
    pub fn process_heartbeat(
        &mut self,
        now: Millis,
        node: &NodeId,
        report: NodeHeartbeat,
    ) -> Result<HeartbeatResponse, CoreError> {
        if !self.books.nodes.contains_key(node) {
            return Err(CoreError::new(format!(
                "node {:?} is not registered",
                node.0
            )));
        }
        self.stats.heartbeats += 1;
        let mut response = HeartbeatResponse::default();
        let mut s = self.parts();
        s.end_finished(now, node, report.finished);
        for id in without_user_slots(s.config, s.books, node) {
            s.end_allocation(
                now,
                id,
                EndKind::Preempted(PreemptionReason::NodeWithoutUserSlots, None),
            );
        }
        debug_assert_eq!(
            s.books.interrupting,
            s.books
                .allocations
                .values()
                .filter(|a| a.state != AllocationState::Running)
                .count(),
            "count of interrupting allocations out of date"
        );
        if s.books.interrupting > 0 {
            for (id, reason, preemptor) in overdue_interruptions(s.books, now, node) {
                s.end_allocation(now, id, EndKind::Preempted(reason, preemptor));
            }
            for id in waiting_too_long(s.trees, s.books, now, node) {
                s.end_allocation(
                    now,
                    id,
                    EndKind::Preempted(PreemptionReason::WaitingTimeout, None),
                );
            }
        }
        // A node whose allocations this heartbeat would abort for having no user slots gets
        // none either (it used to get jobs only to abort them at its next heartbeat, forever).
        let enabled = s.books.nodes[node].scheduler_jobs_enabled
            && !(s.config.enable_allocation_abort_on_zero_user_slots
                && s.books.nodes[node]
                    .resources
                    .raw_of(fairsched_resources::ResourceKind::UserSlots)
                    == 0);
        let mut skipped = false;
        // A node of no tree (no node_tag_filter matches it) gets no jobs.
        if let Some(t) = s.books.nodes[node].tree
            && enabled
            && !s.trees[t].arena.elements.is_empty()
        {
            s.preempt_gracefully(t, now, node);
            // A draining node starts nothing new; what runs there finishes.
            if !s.books.nodes[node].draining {
                skipped = !s.schedule_regular(t, now, node, &mut response);
                s.schedule_preemptive(t, now, node, &mut response);
            }
            s.preempt_overcommit(now, node);
        }
        // Everything the node must stop: ordered by this heartbeat or since its last one.
        if let Some(orders) = s.orders.remove(node) {
            response.interrupt = orders.interrupt;
            response.abort = orders.abort;
        }
        if skipped {
            self.skipped_heartbeats += 1;
        }
        Ok(response)
    }
}

impl Scheduler {
    /// `node` reports allocations that finished, outside a heartbeat: they end now (as a
    /// heartbeat's report would end them), and nothing is scheduled. What the ends order
    /// (none today) waits for the node's next heartbeat. A driver that learns of many ends at
    /// one instant reports them all before it lets any node schedule, so that every node
    /// schedules knowing all of them; an allocation of another node is ignored.
    pub fn report_finished(
        &mut self,
        now: Millis,
        node: &NodeId,
        finished: Vec<crate::protocol::FinishedAllocation>,
    ) -> Result<(), CoreError> {
        if !self.books.nodes.contains_key(node) {
            return Err(CoreError::new(format!(
                "node {:?} is not registered",
                node.0
            )));
        }
        self.parts().end_finished(now, node, finished);
        Ok(())
    }
}

impl Parts<'_> {
    /// Ends the allocations `node` reports finished (those of other nodes are ignored).
    fn end_finished(
        &mut self,
        now: Millis,
        node: &NodeId,
        finished: Vec<crate::protocol::FinishedAllocation>,
    ) {
        // Every reported end first, then the rest of the gangs that lost a job (a sibling
        // reported in the same heartbeat ends as reported).
        let mut lost = Vec::new();
        for f in finished {
            let on_this_node = self
                .books
                .allocations
                .get(&f.allocation)
                .is_some_and(|a| &a.node == node);
            if on_this_node {
                lost.extend(self.end_allocation_alone(
                    now,
                    f.allocation,
                    EndKind::Finished(f.outcome),
                ));
            }
        }
        for l in lost {
            self.end_gang_members(now, l);
        }
    }

    /// The regular (non-preemptive) stage. False when it was skipped because the node cannot
    /// fit even the smallest pending job (such a heartbeat counts as a failed attempt for every
    /// waiting operation: hang detection).
    fn schedule_regular(
        &mut self,
        t: usize,
        now: Millis,
        node_id: &NodeId,
        response: &mut HeartbeatResponse,
    ) -> bool {
        #[cfg(debug_assertions)]
        {
            let fresh = self
                .books
                .unfinished_operations()
                .filter(|op| op.state == crate::model::OperationState::Running)
                .flat_map(|op| op.pending_job_resources())
                .reduce(|a, b| a.min(&b));
            assert_eq!(
                self.books.pending_shapes.min(),
                fresh.as_ref(),
                "the pending jobs' minimum is out of date"
            );
        }
        match self.books.pending_shapes.min() {
            Some(min) if self.books.nodes[node_id].free().dominates(min) => {}
            Some(_) => return false,
            None => return true,
        }
        // Guarantee priority scheduling: operations below their promised guarantee first (the
        // high-priority stage), then the others; each stage walks its own operations (the
        // cached walk holds all of them and stays up to date through the placements).
        if self.trees[t].config().enable_guarantee_priority_scheduling {
            for high in [true, false] {
                let arena = &self.trees[t].arena;
                let mut walk = descent::walk_for(
                    t,
                    arena,
                    &self.books.operations,
                    &self.books.nodes[node_id],
                    |i| arena.elements[i].guarantee_priority == high,
                );
                self.regular_stage(now, node_id, &mut walk, &mut Vec::new(), response);
            }
            return true;
        }
        let mut walk = descent::take_cached_walk(
            &mut self.caches.walks,
            t,
            &self.trees[t].arena,
            &self.books.operations,
        );
        // Operations deactivated for this heartbeat only (restored below).
        let mut deactivated = Vec::new();
        let shapes = self.books.pending_shapes.changes();
        self.regular_stage(now, node_id, &mut walk, &mut deactivated, response);
        // Each was active (wanted jobs) when deactivated. It still does if no task has stopped
        // having pending jobs since (what it wants besides that changes only at updates).
        let unchanged = self.books.pending_shapes.changes() == shapes;
        let arena = &self.trees[t].arena;
        let operations = &self.books.operations;
        walk.restore(arena, &deactivated, |leaf| {
            if unchanged {
                debug_assert!(
                    descent::globally_active(arena, operations, leaf),
                    "an operation deactivated for a heartbeat stopped wanting jobs unnoticed"
                );
                true
            } else {
                descent::globally_active(arena, operations, leaf)
            }
        });
        self.caches.walks[t] = Some(walk);
        true
    }

    /// Starts jobs of the best active operations of `walk` while the node has room; operations
    /// that cannot start here are deactivated in `walk` (and listed in `deactivated`).
    fn regular_stage(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        walk: &mut Walk,
        deactivated: &mut Vec<ElementIndex>,
        response: &mut HeartbeatResponse,
    ) {
        let config = self.trees[walk.tree].config();
        let max_started = config.max_started_allocations_per_heartbeat;
        let min_spare = config.min_spare_allocation_resources_on_node;
        let mut started = 0u32;
        // A reservation for the gang that has waited longest, planned as of now, before any
        // operation is offered the node (and before held jobs start, so that a gang found
        // complete starts its jobs here now).
        if self.trees[walk.tree].config().gang_placement.enable
            && self.trees[walk.tree]
                .config()
                .gang_placement
                .hold
                .plans_head()
        {
            gang::keep_needed_plan(
                &self.trees[walk.tree].arena,
                self.books,
                self.holds,
                self.events,
                now,
                walk,
                self.trees[walk.tree].config().gang_placement.hold,
            );
        }
        // A node holding resources for a job serves that job first, once they are free.
        if let Some(order) = self.start_reserved(now, node_id, walk) {
            started += 1;
            response.start.push(order);
        }
        // So does one holding jobs of a gang that is complete.
        if self.holds.any_gang() {
            for order in self.start_gang_holds(now, node_id, walk) {
                started += 1;
                response.start.push(order);
            }
        }
        if self.trees[walk.tree].config().gang_placement.enable {
            gang::note_lent(self.books, self.holds, walk.tree);
        }
        let gangs_only = walk.gangs_only && self.trees[walk.tree].config().gang_placement.enable;
        // Gangs parked at earlier heartbeats stay so while the holds' park key is the same.
        {
            let arena = &self.trees[walk.tree].arena;
            let operations = &self.books.operations;
            let hold = self.trees[walk.tree].config().gang_placement.hold;
            walk.unpark_stale(arena, self.holds.park_key(walk.tree, hold), |i| {
                descent::globally_active(arena, operations, i)
            });
            #[cfg(debug_assertions)]
            for &i in &walk.parked {
                if let ElementRef::Operation(id) = &arena.elements[i].kind {
                    assert!(
                        walk.active[i]
                            || self.holds.offer_changes_nothing(walk.tree, id)
                            || operations.get(id).is_some_and(|op| {
                                self.holds.idle_behind_assembly(walk.tree, op, now, hold)
                            })
                            || !descent::globally_active(arena, operations, i),
                        "a parked gang would change if offered a node"
                    );
                }
            }
        }
        while let Some(leaf) = walk.best_leaf(&self.trees[walk.tree].arena) {
            // Every operation left is a gang that the node's offer would leave as it is (see
            // `gang::others_idle`): offering it to each in turn would change nothing.
            if gangs_only
                && gang::others_idle(
                    &self.trees[walk.tree].arena,
                    self.books,
                    self.holds,
                    now,
                    walk,
                )
            {
                break;
            }
            let node = &self.books.nodes[node_id];
            let available = node.free();
            // A node that can no longer fit the smallest pending job is done for this heartbeat
            // (trying every remaining operation would only fail); so is one with less than
            // `min_spare_allocation_resources_on_node` free (resources the node does not have
            // at all are not asked for), or one that started `max_started_allocations_per_
            // heartbeat` allocations.
            if self
                .books
                .pending_shapes
                .min()
                .is_some_and(|min| !available.dominates(min))
                || below_min_spare(&available, &node.resources, &min_spare)
                || max_started.is_some_and(|max| started >= max)
            {
                break;
            }
            // Operations whose scheduling tag the node lacks are skipped without counting a
            // failed attempt.
            if self.trees[walk.tree].arena.any_tag_filter()
                && !descent::eligible_on(
                    &self.trees[walk.tree].arena,
                    leaf,
                    &self.books.nodes[node_id],
                )
            {
                walk.deactivate(&self.trees[walk.tree].arena, leaf);
                deactivated.push(leaf);
                continue;
            }
            // A gang operation (with `gang_placement`) gets resources held here, not started.
            if self.trees[walk.tree].config().gang_placement.enable && walk.gang[leaf] {
                // One that any node's offer leaves as it is waits, parked, until the holds'
                // park key changes: later heartbeats do not visit it.
                let arena = &self.trees[walk.tree].arena;
                let hold = self.trees[walk.tree].config().gang_placement.hold;
                if let ElementRef::Operation(id) = &arena.elements[leaf].kind
                    && (self.holds.offer_changes_nothing(walk.tree, id)
                        || (self.books.operations.get(id)).is_some_and(|op| {
                            self.holds.idle_behind_assembly(walk.tree, op, now, hold)
                        }))
                {
                    if !walk.park(arena, leaf, self.holds.park_key(walk.tree, hold)) {
                        walk.deactivate(arena, leaf);
                        deactivated.push(leaf);
                    }
                    continue;
                }
                if gang::place_gang_now(
                    &self.trees[walk.tree].arena,
                    self.books,
                    self.holds,
                    self.events,
                    now,
                    leaf,
                    walk,
                    self.trees[walk.tree].config().gang_placement.hold,
                ) {
                    // What it holds here starts now.
                    for order in self.start_gang_holds(now, node_id, walk) {
                        started += 1;
                        response.start.push(order);
                    }
                } else {
                    gang::gang_hold(
                        &self.trees[walk.tree].arena,
                        self.books,
                        self.holds,
                        self.events,
                        now,
                        node_id,
                        leaf,
                        walk,
                        self.trees[walk.tree].config().gang_placement.hold,
                    );
                }
                walk.deactivate(&self.trees[walk.tree].arena, leaf);
                deactivated.push(leaf);
                continue;
            }
            // What the node holds for another operation's job is not offered (but to jobs
            // that end before it is needed).
            let offer = Offer {
                available,
                held: crate::backfill::held_from_leaf(
                    self.books,
                    self.holds,
                    &self.trees[walk.tree].arena,
                    node_id,
                    leaf,
                ),
            };
            match self.try_start(now, node_id, leaf, walk, Stage::Regular, offer) {
                Some(order) => {
                    started += 1;
                    response.start.push(order);
                }
                None => {
                    walk.deactivate(&self.trees[walk.tree].arena, leaf);
                    deactivated.push(leaf);
                    count_failed_attempt(&self.trees[walk.tree], self.books, leaf);
                }
            }
        }
    }

    /// Starts the job the node holds resources for, if they are free and the operation still
    /// wants it (its path's limits and the walk's activity as for any start).
    fn start_reserved(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        walk: &mut Walk,
    ) -> Option<crate::scheduler::StartOrder> {
        let r = self.holds.reservations.get(node_id)?;
        let free = self.books.nodes[node_id].free();
        if r.tree != walk.tree || !free.dominates(&r.resources) {
            return None;
        }
        let leaf = *self.trees[walk.tree].arena.by_operation.get(&r.operation)?;
        // A parked operation is active for this (see `Walk::park`).
        if !walk.active[leaf] && !walk.parked.is_empty() {
            let arena = &self.trees[walk.tree].arena;
            let active = descent::globally_active(arena, &self.books.operations, leaf);
            walk.unpark(arena, leaf, active);
        }
        // (The node's tags may have changed since it was chosen.)
        if !walk.active[leaf]
            || (self.trees[walk.tree].arena.any_tag_filter()
                && !descent::eligible_on(
                    &self.trees[walk.tree].arena,
                    leaf,
                    &self.books.nodes[node_id],
                ))
        {
            return None;
        }
        self.try_start(now, node_id, leaf, walk, Stage::Regular, Offer::all(free))
    }
}

/// `enable_allocation_abort_on_zero_user_slots` (scheduler spec §1.1, YT-S21): a node without
/// user slots has every allocation on it (running or being interrupted) aborted. These
/// allocations of `node` (none unless the `config` option is on and the node has no slots).
fn without_user_slots(config: &SchedulerConfig, books: &Books, node: &NodeId) -> Vec<AllocationId> {
    let n = &books.nodes[node];
    if !config.enable_allocation_abort_on_zero_user_slots
        || n.resources
            .raw_of(fairsched_resources::ResourceKind::UserSlots)
            != 0
        || n.allocations.is_empty()
    {
        return Vec::new();
    }
    n.allocations.iter().copied().collect()
}

/// Interrupted jobs on `node` that did not exit before their deadline (to be aborted), with
/// their interruption's reason and preemptor.
fn overdue_interruptions(
    books: &Books,
    now: Millis,
    node: &NodeId,
) -> Vec<(AllocationId, PreemptionReason, Option<Preemptor>)> {
    books.nodes[node]
        .allocations
        .iter()
        .filter_map(|id| books.allocations.get(id))
        .filter_map(|a| match &a.state {
            AllocationState::Interrupting {
                reason,
                deadline,
                preemptor,
            } if now >= *deadline => Some((a.id, *reason, preemptor.clone())),
            _ => None,
        })
        .collect()
}

/// `waiting_for_resources_on_node_timeout_ms` (scheduler spec §2.6): an allocation started
/// by preemption begins at once, while the allocations interrupted for it still hold the
/// node's resources; when one of them is still being interrupted at the first heartbeat at
/// or after the preemptor's start plus its tree's timeout (of `trees`), the preemptor (the new
/// job) is aborted with reason `waiting_timeout` and its job goes back to pending. These
/// preemptors on `node`. The victims keep their interruption. Looked for after the overdue
/// interruptions are aborted, so a victim whose deadline is reached in the same heartbeat no
/// longer keeps its preemptor waiting.
fn waiting_too_long(
    trees: &[PoolTree],
    books: &Books,
    now: Millis,
    node: &NodeId,
) -> Vec<AllocationId> {
    // Preemptors whose victims on this node are still being interrupted (few: victims of
    // recent preemptive heartbeats).
    let waiting: std::collections::BTreeSet<AllocationId> = books.nodes[node]
        .allocations
        .iter()
        .filter_map(|id| books.allocations.get(id))
        .filter_map(|a| match &a.state {
            AllocationState::Interrupting {
                preemptor: Some(p), ..
            } => Some(p.allocation),
            _ => None,
        })
        .collect();
    waiting
        .into_iter()
        .filter_map(|id| books.allocations.get(&id))
        .filter(|a| {
            &a.node == node
                && a.state == AllocationState::Running
                && trees[a.tree]
                    .config()
                    .waiting_for_resources_on_node_timeout_ms
                    .is_some_and(|timeout| now >= a.start_time.saturating_add(timeout))
        })
        .map(|a| a.id)
        .collect()
}

/// Counts a failed scheduling attempt for the operation at `leaf` of `tree`.
fn count_failed_attempt(tree: &PoolTree, books: &mut Books, leaf: ElementIndex) {
    if let ElementRef::Operation(id) = &tree.arena.elements[leaf].kind
        && let Some(op) = books.operations.get_mut(id)
    {
        op.failed_schedule_attempts += 1;
    }
}
