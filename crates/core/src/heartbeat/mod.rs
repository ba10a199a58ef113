//! Heartbeat processing (scheduler spec §1): the node reports finished jobs; the core answers
//! with jobs to start, interrupt or abort.
//!
//! The regular stage walks the tree from the root to the "best leaf": at every pool the active
//! child with the smallest satisfaction (FIFO pools with `fifo` order: the first active child in
//! FIFO order), until an operation is reached; one job of it is started if it fits the node and
//! every limit on its path, else the operation is deactivated for this heartbeat.

mod walk;
pub(crate) use walk::Walk;

use crate::event::Stage;
use crate::holds::Offer;
use crate::model::{
    AllocationId, AllocationState, Millis, NodeId, OperationState, PreemptionMode, PreemptionReason,
};
use crate::scheduler::{CoreError, EndKind, HeartbeatResponse, NodeHeartbeat, Scheduler};
use crate::tree::{ElementRef, SchedulingStatus};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{RESOURCE_COUNT, ResourceVector, Resources};

/// "Infinite" satisfaction (fair share ≈ 0).
const INFINITE_SATISFACTION: f64 = 1e9;
const EPSILON: f64 = 1e-9;

/// YTsaurus `ComputeLocalSatisfactionRatio`: how well an element's usage covers its fair share
/// (below 1: under-served).
pub fn local_satisfaction(
    usage: &ResourceVector,
    fair: &ResourceVector,
    demand: &ResourceVector,
) -> f64 {
    if ResourceVector::splat(EPSILON).dominates(fair) {
        return INFINITE_SATISFACTION;
    }
    let mut over = false;
    let mut max_over = 0.0f64;
    for r in 0..RESOURCE_COUNT {
        if usage[r] > fair[r] {
            over = true;
            max_over = max_over.max(if fair[r] > 0.0 {
                usage[r] / fair[r]
            } else {
                INFINITE_SATISFACTION
            });
        }
    }
    if over {
        return max_over.min(INFINITE_SATISFACTION);
    }
    let all_blocked = (0..RESOURCE_COUNT).all(|r| fair[r] >= demand[r]);
    if all_blocked {
        let mut min = f64::INFINITY;
        for r in 0..RESOURCE_COUNT {
            let ratio = if fair[r] == 0.0 {
                1.0
            } else {
                usage[r] / fair[r]
            };
            min = min.min(ratio);
        }
        return min;
    }
    let mut max = 0.0f64;
    for r in 0..RESOURCE_COUNT {
        if fair[r] < demand[r] && fair[r] > 0.0 {
            max = max.max(usage[r] / fair[r]);
        }
    }
    max
}

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
    /// Processes one heartbeat of `node` at `now`.
    pub fn process_heartbeat(
        &mut self,
        now: Millis,
        node: &NodeId,
        report: NodeHeartbeat,
    ) -> Result<HeartbeatResponse, CoreError> {
        if !self.nodes.contains_key(node) {
            return Err(CoreError::new(format!(
                "node {:?} is not registered",
                node.0
            )));
        }
        self.stats.heartbeats += 1;
        let mut response = HeartbeatResponse::default();
        for f in report.finished {
            let on_this_node = self
                .allocations
                .get(&f.allocation)
                .is_some_and(|a| &a.node == node);
            if on_this_node {
                self.end_allocation(now, f.allocation, EndKind::Finished(f.outcome));
            }
        }
        self.abort_on_zero_user_slots(now, node);
        self.abort_overdue_interruptions(now, node);
        self.abort_waiting_too_long(now, node);
        // A node whose allocations this heartbeat would abort for having no user slots gets
        // none either (it used to get jobs only to abort them at its next heartbeat, forever).
        let enabled = self.nodes[node].scheduler_jobs_enabled
            && !(self.config.enable_allocation_abort_on_zero_user_slots
                && self.nodes[node]
                    .resources
                    .raw_of(fairsched_resources::ResourceKind::UserSlots)
                    == 0);
        // A node of no tree (no node_tag_filter matches it) gets no jobs.
        if let Some(t) = self.nodes[node].tree
            && enabled
            && !self.trees[t].arena.elements.is_empty()
        {
            self.preempt_gracefully(t, now, node);
            // A draining node starts nothing new; what runs there finishes.
            if !self.nodes[node].draining {
                self.schedule_regular(t, now, node, &mut response);
                self.schedule_preemptive(t, now, node, &mut response);
            }
            self.preempt_overcommit(now, node);
        }
        // Everything the node must stop: ordered by this heartbeat or since its last one.
        if let Some(orders) = self.orders.remove(node) {
            response.interrupt = orders.interrupt;
            response.abort = orders.abort;
        }
        Ok(response)
    }

    /// `enable_allocation_abort_on_zero_user_slots` (scheduler spec §1.1, YT-S21): a node without
    /// user slots has every allocation on it (running or being interrupted) aborted.
    fn abort_on_zero_user_slots(&mut self, now: Millis, node: &NodeId) {
        let n = &self.nodes[node];
        if !self.config.enable_allocation_abort_on_zero_user_slots
            || n.resources
                .raw_of(fairsched_resources::ResourceKind::UserSlots)
                != 0
            || n.allocations.is_empty()
        {
            return;
        }
        let ids: Vec<AllocationId> = n.allocations.iter().copied().collect();
        for id in ids {
            self.end_allocation(
                now,
                id,
                EndKind::Preempted(PreemptionReason::NodeWithoutUserSlots, None),
            );
        }
    }

    /// Interrupted jobs that did not exit before their deadline are aborted.
    fn abort_overdue_interruptions(&mut self, now: Millis, node: &NodeId) {
        let overdue: Vec<_> = self.nodes[node]
            .allocations
            .iter()
            .filter_map(|id| self.allocations.get(id))
            .filter_map(|a| match &a.state {
                AllocationState::Interrupting {
                    reason,
                    deadline,
                    preemptor,
                } if now >= *deadline => Some((a.id, *reason, preemptor.clone())),
                _ => None,
            })
            .collect();
        for (id, reason, preemptor) in overdue {
            self.end_allocation(now, id, EndKind::Preempted(reason, preemptor));
        }
    }

    /// `waiting_for_resources_on_node_timeout_ms` (scheduler spec §2.6): an allocation started
    /// by preemption begins at once, while the allocations interrupted for it still hold the
    /// node's resources; when one of them is still being interrupted at the first heartbeat at
    /// or after the preemptor's start plus its tree's timeout, the preemptor (the new job) is
    /// aborted with reason `waiting_timeout` and its job goes back to pending. The victims
    /// keep their interruption. Runs after the overdue interruptions are aborted, so a victim
    /// whose deadline is reached in the same heartbeat no longer keeps its preemptor waiting.
    fn abort_waiting_too_long(&mut self, now: Millis, node: &NodeId) {
        // Preemptors whose victims on this node are still being interrupted (few: victims of
        // recent preemptive heartbeats).
        let waiting: std::collections::BTreeSet<AllocationId> = self.nodes[node]
            .allocations
            .iter()
            .filter_map(|id| self.allocations.get(id))
            .filter_map(|a| match &a.state {
                AllocationState::Interrupting {
                    preemptor: Some(p), ..
                } => Some(p.allocation),
                _ => None,
            })
            .collect();
        let expired: Vec<AllocationId> = waiting
            .into_iter()
            .filter_map(|id| self.allocations.get(&id))
            .filter(|a| {
                &a.node == node
                    && a.state == AllocationState::Running
                    && self.trees[a.tree]
                        .config()
                        .waiting_for_resources_on_node_timeout_ms
                        .is_some_and(|timeout| now >= a.start_time.saturating_add(timeout))
            })
            .map(|a| a.id)
            .collect();
        for id in expired {
            self.end_allocation(
                now,
                id,
                EndKind::Preempted(PreemptionReason::WaitingTimeout, None),
            );
        }
    }

    /// The regular (non-preemptive) stage.
    fn schedule_regular(
        &mut self,
        t: usize,
        now: Millis,
        node_id: &NodeId,
        response: &mut HeartbeatResponse,
    ) {
        // Nothing can start on a node that cannot fit even the smallest pending job; such a
        // heartbeat counts as a failed attempt for every waiting operation (hang detection).
        match &self.min_pending_job {
            Some(min) if self.nodes[node_id].free().dominates(min) => {}
            Some(_) => {
                self.skipped_heartbeats += 1;
                return;
            }
            None => return,
        }
        // Guarantee priority scheduling: operations below their promised guarantee first (the
        // high-priority stage), then the others; each stage walks its own operations (the
        // cached walk holds all of them and stays up to date through the placements).
        if self.trees[t].config().enable_guarantee_priority_scheduling {
            for high in [true, false] {
                let arena = &self.trees[t].arena;
                let mut walk =
                    self.walk_for(t, node_id, |i| arena.elements[i].guarantee_priority == high);
                self.regular_stage(now, node_id, &mut walk, &mut Vec::new(), response);
            }
            return;
        }
        let mut walk = self.take_cached_walk(t);
        // Operations deactivated for this heartbeat only (restored below).
        let mut deactivated = Vec::new();
        self.regular_stage(now, node_id, &mut walk, &mut deactivated, response);
        for leaf in deactivated {
            walk.active[leaf] = self.globally_active(t, leaf);
            self.refresh_path(&mut walk, leaf);
        }
        self.walks[t] = Some(walk);
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
        while let Some(leaf) = self.best_leaf(walk) {
            let node = &self.nodes[node_id];
            let available = node.free();
            // A node that can no longer fit the smallest pending job is done for this heartbeat
            // (trying every remaining operation would only fail); so is one with less than
            // `min_spare_allocation_resources_on_node` free (resources the node does not have
            // at all are not asked for), or one that started `max_started_allocations_per_
            // heartbeat` allocations.
            if self
                .min_pending_job
                .as_ref()
                .is_some_and(|min| !available.dominates(min))
                || below_min_spare(&available, &node.resources, &min_spare)
                || max_started.is_some_and(|max| started >= max)
            {
                break;
            }
            // Operations whose scheduling tag the node lacks are skipped without counting a
            // failed attempt.
            if self.trees[walk.tree].arena.any_tag_filter()
                && !self.eligible_on(walk.tree, leaf, node_id)
            {
                self.deactivate(walk, leaf);
                deactivated.push(leaf);
                continue;
            }
            // A gang operation (with `gang_placement`) gets resources held here, not started.
            if self.trees[walk.tree].config().gang_placement.enable
                && self.is_gang_leaf(walk.tree, leaf)
            {
                if self.place_gang_now(now, leaf, walk) {
                    // What it holds here starts now.
                    for order in self.start_gang_holds(now, node_id, walk) {
                        started += 1;
                        response.start.push(order);
                    }
                } else {
                    self.gang_hold(now, node_id, leaf, walk);
                }
                self.deactivate(walk, leaf);
                deactivated.push(leaf);
                continue;
            }
            // What the node holds for another operation's job is not offered (but to jobs
            // that end before it is needed).
            let offer = Offer {
                available,
                held: self.held_from_leaf(walk.tree, node_id, leaf),
            };
            match self.try_start(now, node_id, leaf, walk, Stage::Regular, offer) {
                Some(order) => {
                    started += 1;
                    response.start.push(order);
                }
                None => {
                    self.deactivate(walk, leaf);
                    deactivated.push(leaf);
                    self.count_failed_attempt(walk.tree, leaf);
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
        let free = self.nodes[node_id].free();
        if r.tree != walk.tree || !free.dominates(&r.resources) {
            return None;
        }
        let leaf = *self.trees[walk.tree].arena.by_operation.get(&r.operation)?;
        // (The node's tags may have changed since it was chosen.)
        if !walk.active[leaf]
            || (self.trees[walk.tree].arena.any_tag_filter()
                && !self.eligible_on(walk.tree, leaf, node_id))
        {
            return None;
        }
        self.try_start(now, node_id, leaf, walk, Stage::Regular, Offer::all(free))
    }

    /// Whether the operation at `leaf` is a gang operation.
    pub(crate) fn is_gang_leaf(&self, t: usize, leaf: ElementIndex) -> bool {
        match &self.trees[t].arena.elements[leaf].kind {
            ElementRef::Operation(id) => self.operations.get(id).is_some_and(|op| op.is_gang()),
            _ => false,
        }
    }

    /// What `node_id` holds back from the operation at `leaf` (for another operation's job).
    pub(crate) fn held_from_leaf(
        &self,
        t: usize,
        node_id: &NodeId,
        leaf: ElementIndex,
    ) -> Option<crate::backfill::Held> {
        if !self.holds.any() {
            return None;
        }
        match &self.trees[t].arena.elements[leaf].kind {
            ElementRef::Operation(id) => self.held_from(node_id, id),
            _ => None,
        }
    }

    /// The cluster-wide walk: the cached one (checked against a fresh one in debug builds) or
    /// a new one.
    fn take_cached_walk(&mut self, t: usize) -> Walk {
        match self.walks[t].take() {
            Some(walk) => {
                debug_assert!(
                    walk == self.fresh_walk(t),
                    "the cached walk went out of date"
                );
                walk
            }
            None => self.fresh_walk(t),
        }
    }

    /// The cluster-wide walk computed from scratch.
    fn fresh_walk(&self, t: usize) -> Walk {
        let arena = &self.trees[t].arena;
        let n = arena.elements.len();
        let mut walk = Walk {
            tree: t,
            usage: vec![Resources::ZERO; n],
            active: vec![true; n],
            sat: vec![f64::INFINITY; n],
        };
        for (op_id, &i) in &arena.by_operation {
            walk.usage[i] = self.usage_in(t, op_id);
            walk.active[i] = self.globally_active(t, i);
        }
        for i in (1..n).rev() {
            if let Some(p) = arena.elements[i].parent {
                walk.usage[p] = walk.usage[p].add(&walk.usage[i]);
            }
        }
        for i in (0..n).rev() {
            self.refresh(&mut walk, i);
        }
        walk
    }

    /// Whether the operation at arena index `i` wants jobs on any node: running, with pending
    /// jobs, and (in graceful preemption mode) below its fair share.
    fn globally_active(&self, t: usize, i: ElementIndex) -> bool {
        let arena = &self.trees[t].arena;
        let ElementRef::Operation(id) = &arena.elements[i].kind else {
            return false;
        };
        !arena.elements[i].fifo_limited
            && self.operations.get(id).is_some_and(|op| {
                op.state == OperationState::Running
                    && op.pending_job_count() > 0
                    && (op.spec.preemption_mode == PreemptionMode::Normal
                        || arena.elements[i].scheduling_status == SchedulingStatus::BelowFairShare)
            })
    }

    /// Whether the operation at `i` may run on the node (its and its pools' scheduling tag
    /// filters).
    fn eligible_on(&self, t: usize, i: ElementIndex, node_id: &NodeId) -> bool {
        let arena = &self.trees[t].arena;
        matches!(arena.elements[i].kind, ElementRef::Operation(_))
            && arena.tags_allow(i, &self.nodes[node_id].tags)
    }

    /// Brings the cached walk up to date after the operation's usage, pending jobs or state
    /// changed (no-op while a heartbeat holds the walk: it updates the walk itself).
    pub(crate) fn touch_operation(&mut self, id: &crate::model::OperationId) {
        // One lookup of the operation: where it runs, its usage there, and what its activity
        // depends on.
        let Some(op) = self.operations.get(id) else {
            return;
        };
        let wants_jobs = op.state == OperationState::Running && op.pending_job_count() > 0;
        let graceful = op.spec.preemption_mode == PreemptionMode::Graceful;
        let places: Vec<(usize, Resources)> = op.trees.iter().map(|o| (o.tree, o.usage)).collect();
        for (t, new) in places {
            let Some(mut walk) = self.walks[t].take() else {
                continue;
            };
            let arena = &self.trees[t].arena;
            if let Some(&i) = arena.by_operation.get(id) {
                let old = walk.usage[i];
                if new != old {
                    let mut cur = Some(i);
                    while let Some(e) = cur {
                        walk.usage[e] = walk.usage[e].sub(&old).add(&new);
                        cur = arena.elements[e].parent;
                    }
                }
                // As `globally_active`, without looking the operation up again.
                walk.active[i] = wants_jobs
                    && !arena.elements[i].fifo_limited
                    && (!graceful
                        || arena.elements[i].scheduling_status == SchedulingStatus::BelowFairShare);
                self.refresh_path(&mut walk, i);
            }
            self.walks[t] = Some(walk);
        }
    }

    /// The operation's usage in tree `t` (zero when it does not run there).
    pub(crate) fn usage_in(&self, t: usize, id: &crate::model::OperationId) -> Resources {
        self.operations
            .get(id)
            .and_then(|op| op.in_tree(t))
            .map_or(Resources::ZERO, |o| o.usage)
    }

    fn count_failed_attempt(&mut self, t: usize, leaf: ElementIndex) {
        if let ElementRef::Operation(id) = &self.trees[t].arena.elements[leaf].kind
            && let Some(op) = self.operations.get_mut(id)
        {
            op.failed_schedule_attempts += 1;
        }
    }

    /// Usage and activity of every element for a heartbeat of `node_id`; `eligible` restricts
    /// which operations (by arena index) may be active.
    pub(crate) fn walk_for(
        &self,
        t: usize,
        node_id: &NodeId,
        eligible: impl Fn(ElementIndex) -> bool,
    ) -> Walk {
        let arena = &self.trees[t].arena;
        let n = arena.elements.len();
        let mut walk = Walk {
            tree: t,
            usage: vec![Resources::ZERO; n],
            active: vec![true; n],
            sat: vec![f64::INFINITY; n],
        };
        let node = &self.nodes[node_id];
        // Both maps are sorted by operation id: walk them together instead of looking up,
        // unless the tree holds few of the operations (most have finished long ago), where a
        // lookup per operation of the tree is cheaper than a pass over all of them.
        let merge = arena.by_operation.len() >= self.operations.len() / 8;
        let mut ops = self.operations.iter().peekable();
        for (op_id, &i) in &arena.by_operation {
            let found = if merge {
                while ops.peek().is_some_and(|(id, _)| *id < op_id) {
                    ops.next();
                }
                ops.peek().filter(|(id, _)| *id == op_id).map(|(_, op)| *op)
            } else {
                self.operations.get(op_id)
            };
            let active = match found {
                Some(op) => {
                    walk.usage[i] = op.in_tree(t).map_or(Resources::ZERO, |o| o.usage);
                    eligible(i)
                        && !arena.elements[i].fifo_limited
                        && op.state == OperationState::Running
                        && op.pending_job_count() > 0
                        && arena.tags_allow(i, &node.tags)
                        && (op.spec.preemption_mode == PreemptionMode::Normal
                            || arena.elements[i].scheduling_status
                                == SchedulingStatus::BelowFairShare)
                }
                _ => false,
            };
            walk.active[i] = active;
        }
        for i in (1..n).rev() {
            if let Some(p) = arena.elements[i].parent {
                walk.usage[p] = walk.usage[p].add(&walk.usage[i]);
            }
        }
        // Children come after their parents in the arena, so a reverse sweep is bottom-up.
        for i in (0..n).rev() {
            self.refresh(&mut walk, i);
        }
        walk
    }

    /// Recomputes an element's activity (pools: some child active) and satisfaction.
    fn refresh(&self, walk: &mut Walk, i: ElementIndex) {
        let e = &self.trees[walk.tree].arena.elements[i];
        if matches!(e.kind, ElementRef::Operation(_)) {
            walk.sat[i] = if walk.active[i] {
                self.satisfaction(walk, i)
            } else {
                f64::INFINITY
            };
            return;
        }
        let mut best = f64::INFINITY;
        let mut any = false;
        for &c in &e.children {
            if walk.active[c] {
                any = true;
                best = best.min(walk.sat[c]);
            }
        }
        walk.active[i] = any;
        // use_pool_satisfaction_for_scheduling (spec §1.4; YTsaurus `UpdateDynamicAttributes`
        // takes the std::min): the pool competes with the smaller of its best child's and its
        // own local satisfaction, so a pool below its fair share as a whole attracts heartbeats
        // even when its active children look satisfied.
        if any && e.use_pool_satisfaction_for_scheduling {
            best = best.min(self.satisfaction(walk, i));
        }
        walk.sat[i] = best;
    }

    /// Refreshes `i` and its ancestors after a change of usage or activity at `i`.
    pub(crate) fn refresh_path(&self, walk: &mut Walk, i: ElementIndex) {
        let mut cur = Some(i);
        while let Some(c) = cur {
            self.refresh(walk, c);
            cur = self.trees[walk.tree].arena.elements[c].parent;
        }
    }

    /// Marks `i` inactive and propagates to ancestors without active children.
    pub(crate) fn deactivate(&self, walk: &mut Walk, i: ElementIndex) {
        walk.active[i] = false;
        self.refresh_path(walk, i);
    }

    fn satisfaction(&self, walk: &Walk, i: ElementIndex) -> f64 {
        let arena = &self.trees[walk.tree].arena;
        let e = &arena.elements[i];
        let usage = ResourceVector::from_resources(&walk.usage[i], &arena.total_resources);
        local_satisfaction(&usage, &e.attrs.fair_share.total, &e.attrs.demand_share)
    }

    /// Descends from the root to the active operation that should get the next job.
    pub(crate) fn best_leaf(&self, walk: &Walk) -> Option<ElementIndex> {
        let arena = &self.trees[walk.tree].arena;
        if !walk.active[0] {
            return None;
        }
        let mut cur = 0;
        loop {
            let e = &arena.elements[cur];
            if matches!(e.kind, ElementRef::Operation(_)) {
                return Some(cur);
            }
            let next = if e.schedule_in_fifo_order {
                e.children.iter().copied().find(|&c| walk.active[c])
            } else {
                let mut best: Option<(f64, ElementIndex)> = None;
                for &c in &e.children {
                    if walk.active[c] && best.is_none_or(|(b, _)| walk.sat[c] < b) {
                        best = Some((walk.sat[c], c));
                    }
                }
                best.map(|(_, c)| c)
            };
            cur = next?;
        }
    }

    /// Starts one job of the operation at `leaf` if one fits the node and every limit on its
    /// path.
    pub(crate) fn try_start(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        leaf: ElementIndex,
        walk: &mut Walk,
        stage: Stage,
        offer: crate::holds::Offer,
    ) -> Option<crate::scheduler::StartOrder> {
        let arena = &self.trees[walk.tree].arena;
        let ElementRef::Operation(op_id) = &arena.elements[leaf].kind else {
            return None;
        };
        let op = self.operations.get(op_id)?;
        // What is held for others stays out of reach unless the job ends before it is needed.
        let free = |spec: &crate::model::TaskSpec| offer.for_job(now, spec.time_limit_ms);
        let path = || std::iter::once(leaf).chain(arena.ancestors(leaf));
        let allow_regular = arena.elements[leaf].allow_regular_on_ssd;
        let task = op.spec.tasks.iter().enumerate().position(|(t, spec)| {
            op.tasks[t].pending > 0
                && free(spec).dominates(&spec.resources)
                && arena
                    .ssd
                    .as_ref()
                    .is_none_or(|ssd| ssd.allows(spec, &self.nodes[node_id].tags, allow_regular))
                && path().all(|e| {
                    arena.elements[e]
                        .resource_limits
                        .dominates(&walk.usage[e].add(&spec.resources))
                })
        })?;
        let spec = &op.spec.tasks[task];
        let backfill = offer.backfills(now, spec.time_limit_ms, &spec.resources);
        let op_id = op_id.clone();
        let order = self.place(now, &op_id, task, node_id, stage, backfill);
        let arena = &self.trees[walk.tree].arena;
        for e in std::iter::once(leaf).chain(arena.ancestors(leaf)) {
            walk.usage[e] = walk.usage[e].add(&order.resources);
        }
        if self.operations[&op_id].pending_job_count() == 0 {
            walk.active[leaf] = false;
        }
        self.refresh_path(walk, leaf);
        Some(order)
    }
}
