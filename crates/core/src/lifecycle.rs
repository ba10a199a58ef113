//! Operation commands and their lifecycle: start (placement in trees and pools), abort,
//! update, fail, finish, and forgetting finished operations.
//!
//! The commands are [`Scheduler`] methods that check first with a planning function that
//! changes nothing (`plan_start`, `plan_update`), then apply. What follows an allocation's
//! end or an operation's (completing, failing, finishing, admitting pending operations) and
//! failing hung operations change most parts and are [`Parts`] methods; what they read (the
//! trees an operation runs in, the pending queue's paths and blockers) are functions over
//! explicit borrows.

use crate::error::*;
use crate::event::{EventKind, HoldEnd};
use crate::model::{AllocationId, AllocationState, JobOutcome, NodeId};
use crate::model::{
    Millis, Operation, OperationId, OperationSpec, OperationState, PreemptionReason, TaskProgress,
};
use crate::operations;
use crate::scheduler::*;
use crate::state::{Books, Caches};
use crate::tree::{PoolTree, ROOT_NAME, tree_index};
use crate::validate::*;
use fairsched_resources::{PartialResources, Resources};
use std::collections::BTreeMap;

impl Scheduler {
    // ---- operations ---------------------------------------------------------------------

    /// Accepts an operation, or rejects it whole with a reason.
    pub fn start_operation(&mut self, now: Millis, spec: OperationSpec) -> Result<(), CoreError> {
        // Decide and check everything first; change state only when the operation is accepted.
        let StartPlan { user, placements } = plan_start(
            &self.trees,
            self.default_tree,
            &self.books,
            &self.caches,
            &spec,
        )?;
        let mut op_trees = Vec::new();
        let mut blocked = None;
        for (t, placement) in placements {
            if let Some((name, pool)) = placement.create.clone() {
                self.trees[t].ephemeral.insert(name, pool);
            }
            let pool = placement.pool;
            let lightweight = operations::is_lightweight(&self.trees[t], &spec, &pool);
            if !lightweight && blocked.is_none() {
                blocked = operations::running_limit_violation(
                    &self.trees[t],
                    &pool,
                    &self.caches.counts[t],
                )
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
        // Never used before, even by a forgotten operation (see `live_order`).
        let start_seq = self.books.next_start_seq;
        self.books.next_start_seq += 1;
        for cache in &mut self.caches.preemption {
            cache.open_targets = None;
        }
        self.books.operations.insert(
            id.clone(),
            Operation {
                spec,
                state,
                pool,
                trees: op_trees,
                user,
                start_time: now,
                start_seq,
                tasks,
                allocations: std::collections::BTreeSet::new(),
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
        self.books.start_order.insert(start_seq, id.clone());
        self.books.live_order.push((start_seq, id.clone()));
        self.parts().count_operation(&id, true);
        if state == OperationState::Pending {
            let paths = pending_paths(&self.trees, &self.books, &id);
            self.caches.pending.add(&id, paths);
        }
        self.log(
            now,
            EventKind::OperationState {
                operation: id.clone(),
                state,
                reason: pending_reason,
            },
        );
        self.parts().maybe_complete(now, &id);
        Ok(())
    }

    /// Aborts an operation: its jobs are killed.
    pub fn abort_operation(&mut self, now: Millis, id: &OperationId) -> Result<(), CoreError> {
        let op = unfinished_operation(&self.books, id)?;
        let allocations = op.allocations.clone();
        let mut s = self.parts();
        for a in allocations {
            s.end_allocation(
                now,
                a,
                EndKind::Preempted(PreemptionReason::OperationAborted, None),
            );
        }
        s.finish_operation(now, id, OperationState::Aborted, None);
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
        let planned = plan_update(self, id, &update)?;
        // Its pool (and so its preemption thresholds) may change.
        for cache in &mut self.caches.preemption {
            cache.classes.remove(id);
        }
        self.parts().count_operation(id, false);
        // Apply.
        let names: Vec<String> = self.trees.iter().map(|t| t.name.clone()).collect();
        let op = self.books.operations.get_mut(id).expect("checked above");
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
            let op = self.books.operations.get_mut(id).expect("checked above");
            op.trees[slot].pool = placement.pool.clone();
            self.caches.pending.invalidate_all();
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
        let op = &self.books.operations[id];
        let lightweight: Vec<bool> = op
            .trees
            .iter()
            .map(|o| operations::is_lightweight(&self.trees[o.tree], &op.spec, &o.pool))
            .collect();
        let op = self.books.operations.get_mut(id).expect("checked above");
        for (o, l) in op.trees.iter_mut().zip(lightweight) {
            o.lightweight = l;
        }
        op.lightweight = op.trees.first().is_some_and(|o| o.lightweight);
        let mut s = self.parts();
        s.count_operation(id, true);
        if update.resource_limits.is_some() || !update.per_tree.is_empty() {
            for t in s.trees.iter_mut() {
                t.limits_maybe_violated = true;
            }
        }
        s.touch_operation(id);
        s.remove_empty_ephemeral_pools();
        s.try_run_pending(now);
        Ok(())
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
            s.books
                .operations
                .get(id)
                .is_some_and(|op| op.state.is_finished() && op.allocations.is_empty())
                && !s
                    .trees
                    .iter()
                    .any(|t| t.arena.by_operation.contains_key(id))
                && !s.holds.holds_for(id)
        };
        debug_assert!(
            self.books
                .operations
                .iter()
                .all(|(id, op)| !op.state.is_finished() || self.books.finished.contains(id)),
            "a finished operation is missing from the finished set"
        );
        // Only finished operations can go: a pass over them, not over every operation.
        let gone: std::collections::BTreeSet<OperationId> = self
            .books
            .finished
            .iter()
            .filter(|id| forgettable(self, id))
            .cloned()
            .collect();
        if gone.is_empty() {
            return Vec::new();
        }
        // In start order. (The live order skips operations it no longer finds, and the
        // next fair-share update drops them from it: no pass over it here.)
        let mut forgotten: Vec<(u64, OperationId)> = gone
            .into_iter()
            .filter_map(|id| Some((self.books.operations.get(&id)?.start_seq, id)))
            .collect();
        forgotten.sort_unstable();
        for (seq, id) in &forgotten {
            self.books.start_order.remove(seq);
            self.books.finished.remove(id);
            self.books.operations.remove(id);
            self.holds.forget(id);
            for cache in &mut self.caches.preemption {
                cache.classes.remove(id);
            }
        }
        let forgotten: Vec<OperationId> = forgotten.into_iter().map(|(_, id)| id).collect();
        forgotten
    }
}

impl Parts<'_> {
    /// Ends an allocation ([`Parts::unbook_allocation`]), then completes or fails its
    /// operation when that was its last job or one failure too many.
    pub(crate) fn end_allocation(&mut self, now: Millis, id: AllocationId, how: EndKind) {
        if let Some(lost) = self.end_allocation_alone(now, id, how) {
            self.end_gang_members(now, lost);
        }
    }

    /// [`Parts::end_allocation`] but for the rest of its gang, which it returns when the
    /// allocation was a running job of a gang that it leaves unable to go on (see
    /// [`loses_a_member`]; to be ended with [`Parts::end_gang_members`]), so that a node
    /// reporting several ends ends every reported allocation as reported first.
    pub(crate) fn end_allocation_alone(
        &mut self,
        now: Millis,
        id: AllocationId,
        how: EndKind,
    ) -> Option<LostMember> {
        // (A node gone ends its other allocations itself, each with the node's reason.)
        let node_gone =
            matches!(how, EndKind::Preempted(r, _) if r != PreemptionReason::WaitingTimeout);
        let lost = (self.books.allocations.get(&id))
            .filter(|a| a.state == AllocationState::Running && loses_a_member(&how))
            .map(|a| LostMember {
                operation: a.operation.clone(),
                tree: a.tree,
                gone: node_gone.then(|| a.node.clone()),
            });
        let ended = self.unbook_allocation(now, id, how)?;
        if ended.completed {
            self.maybe_complete(now, &ended.operation);
        }
        if let Some(reason) = ended.too_many_failed {
            self.fail_operation(now, &ended.operation, reason);
            return None;
        }
        lost
    }

    /// A gang placed whole by tree `tree`'s `gang_placement` lost one of its running jobs
    /// (see [`loses_a_member`]): its other running jobs there (but those on node `gone`,
    /// which it ends itself) are aborted (reason `gang_member_lost`) and go back to pending,
    /// so that it is placed whole again rather than run a part of itself.
    pub(crate) fn end_gang_members(&mut self, now: Millis, lost: LostMember) {
        let LostMember {
            operation,
            tree,
            gone,
        } = lost;
        let members = crate::backfill::running_gang_members(
            &self.trees[tree],
            tree,
            self.books,
            &operation,
            |m| Some(&m.node) != gone.as_ref(),
        );
        for m in members {
            self.end_allocation(
                now,
                m,
                EndKind::Preempted(PreemptionReason::GangMemberLost, None),
            );
        }
    }

    /// Ends an operation as failed (its jobs are aborted).
    pub(crate) fn fail_operation(&mut self, now: Millis, id: &OperationId, reason: String) {
        let allocations = self
            .books
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

    /// Ends an operation in `state` (completed, failed or aborted): it leaves the counts, the
    /// pending queue and the holds, and pending operations may start.
    fn finish_operation(
        &mut self,
        now: Millis,
        id: &OperationId,
        state: OperationState,
        reason: Option<String>,
    ) {
        self.caches.pending.remove(id);
        self.count_operation(id, false);
        if let Some(op) = self.books.operations.get_mut(id) {
            op.state = state;
            op.pending_demand = Resources::ZERO;
            self.books.finished.insert(id.clone());
        }
        self.touch_operation(id);
        self.events.log(
            now,
            EventKind::OperationState {
                operation: id.clone(),
                state,
                reason,
            },
        );
        self.remove_empty_ephemeral_pools();
        crate::reservation::release_reservation_of(
            self.holds,
            self.events,
            now,
            id,
            HoldEnd::OperationFinished,
        );
        self.holds.reservation_streak.remove(id);
        crate::gang::release_gang_of(self.holds, self.events, now, id);
        self.try_run_pending(now);
    }

    /// Ephemeral pools disappear when no unfinished operation uses them (their counts are
    /// subtree totals, so a kept removed pool goes with its subpools' last operation).
    fn remove_empty_ephemeral_pools(&mut self) {
        for (tree, counts) in self.trees.iter_mut().zip(&self.caches.counts) {
            tree.ephemeral
                .retain(|name, _| counts.get(name).is_some_and(|c| c.operation_count > 0));
        }
    }

    /// Completes an operation whose jobs are all done.
    pub(crate) fn maybe_complete(&mut self, now: Millis, id: &OperationId) {
        let done = self.books.operations.get(id).is_some_and(|op| {
            op.state == OperationState::Running
                && op.tasks.iter().all(|t| t.pending == 0 && t.running == 0)
        });
        if done {
            self.finish_operation(now, id, OperationState::Completed, None);
        }
    }

    /// Starts pending operations (in start order) whose pools have running slots again.
    pub(crate) fn try_run_pending(&mut self, now: Millis) {
        // Nothing waits when every unfinished operation runs (each root counts its tree's).
        let waiting = self.caches.counts.iter().any(|counts| {
            counts.get(ROOT_NAME).is_some_and(|c| {
                c.operation_count
                    > c.running_operation_count + c.lightweight_running_operation_count
            })
        });
        if !waiting {
            return;
        }
        if self.caches.pending.needs_reindex() {
            let ids: Vec<OperationId> = self.caches.pending.ids().cloned().collect();
            for id in ids {
                let paths = pending_paths(self.trees, self.books, &id);
                self.caches.pending.reindex(&id, paths);
            }
            self.caches.pending.reindexed();
        }
        // The pending operations whose answer may have changed, in start order (see
        // `operations::pending`: the others' answers have not). Starting one may change
        // others': those after it are looked at in this pass, those before it in the next, as
        // a pass over all would.
        let mut cursor = None;
        while let Some(next) = self.caches.pending.next_after(cursor.as_ref()) {
            let id = next.1.clone();
            cursor = Some(next);
            // Finishing an operation below re-enters this function; skip what it handled.
            if self.books.operations[&id].state != OperationState::Pending {
                continue;
            }
            // It runs once every tree it runs in has a running slot for it.
            match pending_blocker(self.books, self.caches, &id) {
                Some(at) => {
                    // The reason names the blocker: written again only when it changed.
                    if self.caches.pending.blocker(&id) != Some(at) {
                        let ((t, pool), limit) =
                            &self.caches.pending.paths(&id).expect("queued")[at];
                        let reason =
                            crate::operations::pending_reason(pool, *limit, &self.trees[*t].name);
                        if let Some(op) = self.books.operations.get_mut(&id) {
                            op.pending_reason = Some(reason);
                        }
                        self.caches.pending.set_blocker(&id, at);
                    }
                }
                None => {
                    self.caches.pending.remove(&id);
                    self.count_operation(&id, false);
                    if let Some(op) = self.books.operations.get_mut(&id) {
                        op.state = OperationState::Running;
                        op.pending_reason = None;
                    }
                    self.count_operation(&id, true);
                    self.touch_operation(&id);
                    self.events.log(
                        now,
                        EventKind::OperationState {
                            operation: id.clone(),
                            state: OperationState::Running,
                            reason: None,
                        },
                    );
                    // An operation without jobs completes as soon as it runs.
                    self.maybe_complete(now, &id);
                }
            }
        }
        self.caches.pending.settle();
        debug_check_pending(self.trees, self.books, self.caches);
    }

    /// Hung operations (scheduler spec §3.7) are failed: an ancestor's (or the operation's own)
    /// limits too small for its smallest pending job for too long, or starving with nothing
    /// running and no successful schedule for too long (`skipped_heartbeats`: the heartbeats
    /// whose regular stage was skipped so far, failed attempts for every waiting operation).
    pub(crate) fn fail_hung_operations(&mut self, now: Millis, skipped_heartbeats: u64) {
        let (updates, to_fail) =
            hung_operations(self.trees, self.books, self.config, skipped_heartbeats, now);
        for (id, since, starving) in updates {
            if let Some(op) = self.books.operations.get_mut(&id) {
                if let Some(since) = since {
                    op.limiting_ancestor_since = since;
                }
                if !starving {
                    op.last_non_starving_at = now;
                }
            }
        }
        for (id, reason) in to_fail {
            self.fail_operation(now, &id, reason);
        }
    }
}

/// The trees (of `trees`, the default one `default_tree`) an operation runs in (indices; the
/// default tree first if it is one of them):
/// its `pool_trees`, or the default tree. Unknown trees and per-tree options for trees it does not run in are errors.
/// What [`Scheduler::start_operation`] checked and decided before it changes anything.
struct StartPlan {
    /// The operation's user (`root` when the spec names none).
    user: String,
    /// Each tree it runs in (the default tree first) with its pool there.
    placements: Vec<(usize, operations::Placement)>,
}

/// Checks an operation to start, changing nothing: its spec, that its id is new, its trees,
/// and in each its pool and the pools' operation limits.
fn plan_start(
    trees: &[PoolTree],
    default_tree: usize,
    books: &Books,
    caches: &Caches,
    spec: &OperationSpec,
) -> Result<StartPlan, CoreError> {
    validate_operation_spec(spec)?;
    if books.operations.contains_key(&spec.id) {
        return Err(CoreError::new(format!(
            "operation {:?} already exists",
            spec.id.0
        )));
    }
    let user = spec.user.clone().unwrap_or_else(|| "root".to_string());
    let mut placements = Vec::new();
    for t in operation_trees(trees, default_tree, spec)? {
        let options = spec.scheduling_options_per_pool_tree.get(&trees[t].name);
        let requested = options
            .and_then(|o| o.pool.as_deref())
            .or(spec.pool.as_deref());
        let placement = operations::plan_placement(&trees[t], requested, &user)?;
        operations::check_operation_count(
            &trees[t],
            books,
            t,
            &caches.counts[t],
            &placement,
            None,
        )?;
        placements.push((t, placement));
    }
    Ok(StartPlan { user, placements })
}

/// A pool move of [`Scheduler::update_operation_with`]: (slot in the operation's trees, tree,
/// the new pool there, whether it comes from the top-level `pool`).
type PlannedMove = (usize, usize, operations::Placement, bool);

/// Checks an operation update, changing nothing: the operation is unfinished, the weights,
/// the trees named, and each new pool with its operation and running limits. The pool moves
/// to make.
fn plan_update(
    sched: &Scheduler,
    id: &OperationId,
    update: &OperationUpdate,
) -> Result<Vec<PlannedMove>, CoreError> {
    let op = unfinished_operation(&sched.books, id)?;
    let check_weight = |field: &str, w: Option<f64>| match w {
        Some(w) => check_operation_weight(&id.0, field, w),
        None => Ok(()),
    };
    check_weight("weight", update.weight)?;
    // The new pool of each tree: a per-tree pool, else the top-level pool for the first
    // tree (the default tree when the operation runs there).
    // (slot in op.trees, tree, requested pool, from the top-level `pool`)
    let mut moves: Vec<(usize, usize, Option<String>, bool)> = Vec::new();
    for (name, o) in &update.per_tree {
        check_weight(
            &format!("scheduling_options_per_pool_tree.{name}.weight"),
            o.weight,
        )?;
        let slot = sched
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
    for (slot, t, pool, top_level) in moves {
        let (tree, counts) = (&sched.trees[t], &sched.caches.counts[t]);
        let placement = operations::plan_placement(tree, pool.as_deref(), &op.user)?;
        operations::check_operation_count(
            tree,
            &sched.books,
            t,
            counts,
            &placement,
            Some(&op.trees[slot].pool),
        )?;
        operations::check_running_count_on_move(tree, &sched.books, counts, id, slot, &placement)?;
        planned.push((slot, t, placement, top_level));
    }
    Ok(planned)
}

fn operation_trees(
    trees: &[PoolTree],
    default_tree: usize,
    spec: &OperationSpec,
) -> Result<Vec<usize>, CoreError> {
    let id = &spec.id.0;
    let mut ts = match &spec.pool_trees {
        None => vec![default_tree],
        Some(names) if names.is_empty() => {
            return Err(CoreError::new(format!(
                "operation {id:?}: pool_trees must not be empty"
            )));
        }
        Some(names) => names
            .iter()
            .map(|name| {
                tree_index(trees, name).ok_or_else(|| {
                    CoreError::new(format!(
                        "operation {id:?}: pool_trees names tree {name:?}, which does not \
                         exist (trees: {})",
                        trees
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
    ts.sort_unstable_by_key(|&t| (t != default_tree, t));
    ts.dedup();
    for name in spec.scheduling_options_per_pool_tree.keys() {
        if !tree_index(trees, name).is_some_and(|t| ts.contains(&t)) {
            return Err(CoreError::new(format!(
                "operation {id:?}: scheduling_options_per_pool_tree.{name}: the operation \
                 does not run in tree {name:?}"
            )));
        }
    }
    Ok(ts)
}

/// The operation `id` if it exists and has not finished (commands refuse it otherwise).
fn unfinished_operation<'b>(
    books: &'b Books,
    id: &OperationId,
) -> Result<&'b Operation, CoreError> {
    let op = books
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
    Ok(op)
}

/// What a pending operation waits for, from its paths as queued: the first pool (an
/// index into them) at its running limit, trees in order (lightweight ones excepted),
/// each from the operation's pool up; `None`: it may run.
fn pending_blocker(books: &Books, caches: &Caches, id: &OperationId) -> Option<usize> {
    let op = &books.operations[id];
    let paths = caches
        .pending
        .paths(id)
        .expect("pending operations are queued");
    paths.iter().position(|((t, pool), limit)| {
        !op.in_tree(*t).is_some_and(|o| o.lightweight)
            && caches.counts[*t]
                .get(pool)
                .map_or(0, |c| c.running_operation_count)
                >= *limit
    })
}

/// The pools (tree, name) on a pending operation's paths and their running limits, for
/// the queue.
fn pending_paths(
    trees: &[PoolTree],
    books: &Books,
    id: &OperationId,
) -> Vec<((usize, String), u32)> {
    books.operations[id]
        .trees
        .iter()
        .flat_map(|o| {
            let tree = &trees[o.tree];
            operations::pool_chain(tree, &o.pool, None)
                .into_iter()
                .map(move |name| {
                    let limit = operations::pool_limits(tree, &name, None).1;
                    ((o.tree, name), limit)
                })
        })
        .collect()
}

/// Debug builds: the queue holds exactly the pending operations, and every one not stale
/// still waits for the reason it shows (what a pass over all of them would leave).
fn debug_check_pending(trees: &[PoolTree], books: &Books, caches: &Caches) {
    if !cfg!(debug_assertions) {
        return;
    }
    let pending: Vec<&Operation> = books
        .unfinished_operations()
        .filter(|op| op.state == OperationState::Pending)
        .collect();
    debug_assert_eq!(
        pending.len(),
        caches.pending.len(),
        "pending queue out of date"
    );
    for op in pending {
        let id = &op.spec.id;
        debug_assert!(caches.pending.contains(id), "{id:?} pending but not queued");
        if caches.pending.is_stale(id) {
            continue;
        }
        // As a pass over all would find it, from the trees as they are.
        let reason = op.trees.iter().filter(|o| !o.lightweight).find_map(|o| {
            operations::running_limit_violation(&trees[o.tree], &o.pool, &caches.counts[o.tree])
                .map(|(pool, limit)| {
                    crate::operations::pending_reason(&pool, limit, &trees[o.tree].name)
                })
        });
        debug_assert!(reason.is_some(), "{id:?} may run but is not looked at");
        debug_assert_eq!(reason, op.pending_reason, "{id:?} waits for another reason");
    }
}

/// What the check for hung operations finds (scheduler spec §3.7), from the trees, the books,
/// the configuration and the heartbeats skipped so far: for each running operation with
/// pending jobs in an arena, since when an ancestor limits it (`None`: none does, or the check
/// is off) and whether it starves; and the operations to fail, with why.
fn hung_operations(
    trees: &[PoolTree],
    books: &Books,
    config: &SchedulerConfig,
    skipped_heartbeats: u64,
    now: Millis,
) -> (HangupUpdates, Vec<(OperationId, String)>) {
    use crate::tree::{ElementRef, StarvationStatus};
    let mut updates: Vec<(OperationId, Option<Option<Millis>>, bool)> = Vec::new();
    let mut to_fail: Vec<(OperationId, String)> = Vec::new();
    for op in books.unfinished_operations() {
        if op.state != OperationState::Running || op.pending_job_count() == 0 {
            continue;
        }
        // Smallest pending job (componentwise minimum over tasks with pending jobs).
        let min_job = op.pending_job_resources().reduce(|a, b| a.min(&b));
        // An operation in several trees is hung only if it is in every one of them: it
        // can progress in any tree where it is not limited or not starving.
        let mut starving = true;
        let mut limiting_check = true;
        let mut limiting = None;
        let mut in_arena = false;
        for o in &op.trees {
            let t = o.tree;
            let arena = &trees[t].arena;
            let Some(&index) = arena.by_operation.get(&op.spec.id) else {
                starving = false;
                limiting_check = false;
                continue;
            };
            in_arena = true;
            starving &= arena.elements[index].starvation_status != StarvationStatus::NonStarving;
            limiting_check &= trees[t].config().enable_limiting_ancestor_check
                && !arena.total_resources.is_zero();
            let here = min_job.and_then(|job| {
                std::iter::once(index)
                    .chain(arena.ancestors(index))
                    .find(|&e| !arena.elements[e].resource_limits.dominates(&job))
                    .map(|e| (t, e, job))
            });
            match here {
                // The first tree's limiting element names the failure.
                Some(found) => limiting = limiting.or(Some(found)),
                None => limiting_check = false,
            }
        }
        if !in_arena {
            continue;
        }
        let since = match (limiting_check, limiting) {
            (true, Some(_)) => Some(op.limiting_ancestor_since.unwrap_or(now)),
            _ => None,
        };
        updates.push((op.spec.id.clone(), Some(since), starving));
        if let (Some(since), Some((t, e, job))) = (since, limiting)
            && now >= since + config.operation_hangup_due_to_limiting_ancestor_safe_timeout_ms
        {
            let arena = &trees[t].arena;
            let name = match &arena.elements[e].kind {
                ElementRef::Pool(p) => p.clone(),
                ElementRef::Operation(o) => o.0.clone(),
                ElementRef::Root => ROOT_NAME.to_string(),
            };
            // The limits as configured (unset resources are unlimited and not shown).
            let specified = match &arena.elements[e].kind {
                ElementRef::Pool(p) => trees[t]
                    .pool_config(p)
                    .map(|c| c.resource_limits)
                    .unwrap_or_default(),
                _ => op.spec.resource_limits,
            };
            let in_tree = if op.trees.len() > 1 {
                format!(" in tree {:?}", trees[t].name)
            } else {
                String::new()
            };
            to_fail.push((
                op.spec.id.clone(),
                format!(
                    "scheduling hung: operation has ancestor {name:?}{in_tree} (limiting_ancestor: \
                     {name}) whose specified resource limits {} are too small for its minimum \
                     job {job}",
                    specified
                ),
            ));
            continue;
        }
        let quiet_since = op
            .start_time
            .max(op.last_scheduled_at.unwrap_or(0))
            .max(op.last_non_starving_at);
        if starving
            && op.running_job_count() == 0
            && now >= quiet_since.saturating_add(config.operation_hangup_safe_timeout_ms)
            && op.failed_schedule_attempts + (skipped_heartbeats - op.skipped_heartbeats_at_start)
                >= config.operation_hangup_min_schedule_job_attempts
        {
            to_fail.push((
                op.spec.id.clone(),
                "scheduling hung: operation has no successful scheduled allocations for a long period"
                    .to_string(),
            ));
        }
    }
    (updates, to_fail)
}

/// Per operation: its new `limiting_ancestor_since` (if it is to be set) and whether it
/// starves.
type HangupUpdates = Vec<(OperationId, Option<Option<Millis>>, bool)>;

/// A running job of a gang operation that ended without completing (see
/// [`Parts::end_allocation_alone`]).
pub(crate) struct LostMember {
    operation: OperationId,
    tree: usize,
    /// Its node, when the node went away (it ends its other allocations itself).
    gone: Option<NodeId>,
}

/// Whether an allocation ending so leaves the rest of its gang unable to go on: its job
/// failed or was killed, or its node went away (lost, disabled, moved to another tree, out of
/// user slots, or it waited too long there). Preemption takes the whole gang itself
/// ([`crate::preemption`]); an aborted operation ends every job anyway.
fn loses_a_member(how: &EndKind) -> bool {
    match how {
        EndKind::Finished(outcome) => *outcome != JobOutcome::Completed,
        EndKind::Preempted(reason, _) => matches!(
            reason,
            PreemptionReason::NodeDisabled
                | PreemptionReason::NodeLost
                | PreemptionReason::NodeFairShareTreeChanged
                | PreemptionReason::NodeWithoutUserSlots
                | PreemptionReason::WaitingTimeout
        ),
    }
}
