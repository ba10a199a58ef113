//! Reservation for big jobs (tree option `job_reservation`; not in YTsaurus, the idea Volcano
//! tried): a job that no node's free resources can hold, while smaller jobs keep taking what
//! frees up, gets the resources of one job held on one node until they are free.
//!
//! Reservations are decided at fair-share updates (deterministically: candidates by how long
//! they have waited, then start order; nodes by how little they lack, then id) and honoured by
//! heartbeats: on a reserved node other operations see only what is free beyond the reserved
//! resources, and the reserving operation is served first once its job fits.
//!
//! Functions over explicit borrows of the trees, the books, the holds and the event log; the
//! queries of the public API are [`Scheduler`] methods.

use crate::backfill::{gang_held_from, gang_placed, reservation_needed_at};
use crate::event::{EventKind, HoldEnd};
use crate::holds::Holds;
pub use crate::holds::Reservation;
use crate::model::{Millis, NodeId, OperationId, OperationState};
use crate::scheduler::Scheduler;
use crate::state::{Books, EventLog};
use crate::status::strictly_dominates_on_non_blocked;
use crate::tree::{ElementRef, PoolTree};
use fairsched_resources::{RESOURCE_COUNT, ResourceVector, Resources};

impl Scheduler {
    /// The reservations in force, by node.
    pub fn reservations(&self) -> impl Iterator<Item = (&NodeId, &Reservation)> {
        self.holds.reservations.iter()
    }

    /// Whether a job reservation holds resources on `node`.
    pub fn reserved_on(&self, node: &NodeId) -> bool {
        self.holds.reservations.contains_key(node)
    }

    /// The node holding resources for `op`, if any.
    pub fn reserved_node_of(&self, op: &OperationId) -> Option<&NodeId> {
        self.holds.reserved_node_of(op)
    }
}

/// The operation started a job on `node`: its reservation, if it has one, has served. If
/// the job took the reserved resources, the operation may reserve again at the next update
/// without a new wait (its next big job is as blocked as this one was).
pub(crate) fn reservation_used(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    op: &OperationId,
    node: &NodeId,
) {
    if holds.reservations.is_empty() {
        return;
    }
    match holds.reserved_node_of(op).cloned() {
        Some(held) if &held == node => {
            holds.reservation_streak.insert(op.clone());
            release_reservation(holds, events, now, &held, HoldEnd::JobStarted);
        }
        Some(held) => {
            holds.reservation_streak.remove(op);
            release_reservation(holds, events, now, &held, HoldEnd::JobStarted);
        }
        None => {}
    }
}

/// Ends the operation's reservation, if it has one (it started a job, or finished).
pub(crate) fn release_reservation_of(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    op: &OperationId,
    reason: HoldEnd,
) {
    if holds.reservations.is_empty() {
        return;
    }
    if let Some(node) = holds.reserved_node_of(op).cloned() {
        release_reservation(holds, events, now, &node, reason);
    }
}

/// Ends the reservation on `node`, if there is one.
pub(crate) fn release_reservation(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    node: &NodeId,
    reason: HoldEnd,
) {
    if let Some(r) = holds.reservations.remove(node) {
        holds.version += 1;
        events.log(
            now,
            EventKind::ReservationReleased {
                operation: r.operation,
                node: node.clone(),
                reason,
            },
        );
    }
}

/// Runs after every fair-share update: ends the reservations that no longer hold, then
/// reserves for the operations that have waited too long.
pub(crate) fn update_reservations(
    trees: &[PoolTree],
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
) {
    let stale: Vec<(NodeId, HoldEnd)> = holds
        .reservations
        .iter()
        .filter_map(|(node, r)| {
            reservation_void(trees, books, node, r).map(|why| (node.clone(), why))
        })
        .collect();
    for (node, why) in stale {
        release_reservation(holds, events, now, &node, why);
    }
    let mut still_blocked = std::collections::BTreeSet::new();
    for (t, tree) in trees.iter().enumerate() {
        let config = tree.config().job_reservation.clone();
        if !config.enable {
            continue;
        }
        let held = holds.reservations.values().filter(|r| r.tree == t).count();
        let room = (config.max_reservations as usize).saturating_sub(held);
        // Only a job larger than the smallest pending job of the tree (on some resource) can
        // be kept out by smaller ones taking every freed resource; among jobs of one size,
        // whatever frees up suits all and the fair share decides.
        let smallest = books
            .unfinished_operations()
            .filter(|op| op.state == OperationState::Running && op.in_tree(t).is_some())
            .flat_map(|op| op.pending_job_resources())
            .reduce(|a, b| a.min(&b));
        let Some(smallest) = smallest else {
            continue;
        };
        // Operations that qualify, longest waiting first (then in start order); one whose
        // last job started on its reserved node is still blocked and needs no new wait.
        // (streak first, then since when it waits, then start order)
        let blocked: Vec<(bool, Millis, OperationId)> = books
            .unfinished_operations()
            .filter(|op| holds.reserved_node_of(&op.spec.id).is_none())
            .filter(|op| first_pending_job(op).is_some_and(|(_, job)| !smallest.dominates(&job)))
            .filter(|op| qualifies(tree, books, &op.spec.id))
            .map(|op| {
                (
                    !holds.reservation_streak.contains(&op.spec.id),
                    op.last_scheduled_at.unwrap_or(0).max(op.start_time),
                    op.spec.id.clone(),
                )
            })
            .collect();
        still_blocked.extend(blocked.iter().map(|(_, _, id)| id.clone()));
        let mut waiting: Vec<(bool, Millis, OperationId)> = blocked
            .into_iter()
            .filter(|(waits, since, _)| !waits || now >= since.saturating_add(config.timeout_ms))
            .collect();
        waiting.sort_by_key(|(waits, since, _)| (*waits, *since));
        for (_, _, op) in waiting.into_iter().take(room) {
            reserve(tree, books, holds, events, t, now, &op);
        }
    }
    // A streak ends once the operation no longer waits blocked.
    let reservations = &holds.reservations;
    holds.reservation_streak.retain(|id| {
        still_blocked.contains(id) || reservations.values().any(|r| &r.operation == id)
    });
    // Until when other jobs may backfill each reservation.
    let needed: Vec<(NodeId, Option<Millis>)> = holds
        .reservations
        .iter()
        .map(|(node, r)| {
            (
                node.clone(),
                reservation_needed_at(books, holds, now, node, r),
            )
        })
        .collect();
    for (node, until) in needed {
        if let Some(r) = holds.reservations.get_mut(&node) {
            r.backfill_until = until;
            holds.version += 1;
        }
    }
}

/// Why the reservation on `node` no longer holds (`None`: it does).
fn reservation_void(
    trees: &[PoolTree],
    books: &Books,
    node: &NodeId,
    r: &Reservation,
) -> Option<HoldEnd> {
    let tree = &trees[r.tree];
    if !tree.config().job_reservation.enable {
        return Some(HoldEnd::Disabled);
    }
    let usable = books
        .nodes
        .get(node)
        .is_some_and(|n| n.tree == Some(r.tree) && n.scheduler_jobs_enabled && !n.draining);
    if !usable {
        return Some(HoldEnd::NodeUnavailable);
    }
    let Some(op) = books.operations.get(&r.operation) else {
        return Some(HoldEnd::OperationFinished);
    };
    if op.state != OperationState::Running {
        return Some(HoldEnd::OperationFinished);
    }
    if op.tasks.get(r.task).is_none_or(|task| task.pending == 0) {
        return Some(HoldEnd::NoPendingJob);
    }
    if !qualifies(tree, books, &r.operation) {
        return Some(HoldEnd::FairShareReached);
    }
    // The node's tags (or the operation's filters) may have changed.
    let arena = &tree.arena;
    if arena.any_tag_filter()
        && let Some(&leaf) = arena.by_operation.get(&r.operation)
        && !arena.tags_allow(leaf, &books.nodes[node].tags)
    {
        return Some(HoldEnd::NodeUnavailable);
    }
    None
}

/// A running operation of `tree` with pending jobs whose usage is below its fair share (as of
/// the last update).
fn qualifies(tree: &PoolTree, books: &Books, id: &OperationId) -> bool {
    let Some(op) = books.operations.get(id) else {
        return false;
    };
    if op.state != OperationState::Running
        || op.pending_job_count() == 0
        || gang_placed(tree, books, id)
    {
        return false;
    }
    let arena = &tree.arena;
    let Some(&i) = arena.by_operation.get(id) else {
        return false;
    };
    let a = &arena.elements[i].attrs;
    strictly_dominates_on_non_blocked(
        &a.fair_share.total,
        &a.usage_share,
        &a.fair_share.total,
        &a.demand_share,
    )
}

/// Reserves one job of `op`'s first task with pending jobs on the node of tree `t` (`tree`)
/// that lacks the least of it (relative to the tree's resources, on the resource it lacks
/// most).
fn reserve(
    tree: &PoolTree,
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    t: usize,
    now: Millis,
    id: &OperationId,
) {
    let op = &books.operations[id];
    let Some((task, job)) = first_pending_job(op) else {
        return;
    };
    let spec = &op.spec.tasks[task];
    let arena = &tree.arena;
    let Some(&leaf) = arena.by_operation.get(id) else {
        return;
    };
    debug_assert!(matches!(
        arena.elements[leaf].kind,
        ElementRef::Operation(_)
    ));
    let allow_regular = arena.elements[leaf].allow_regular_on_ssd;
    let mut best: Option<(f64, &NodeId)> = None;
    for node in books.nodes.values() {
        if node.tree != Some(t)
            || !node.scheduler_jobs_enabled
            || node.draining
            || holds.reservations.contains_key(&node.id)
            || !node.resources.dominates(&job)
            || (arena.any_tag_filter() && !arena.tags_allow(leaf, &node.tags))
            || arena
                .ssd
                .as_ref()
                .is_some_and(|ssd| !ssd.allows(spec, &node.tags, allow_regular))
        {
            continue;
        }
        // What gangs hold there is not free for this job.
        let free = node.free().sub(&gang_held_from(books, holds, &node.id, id));
        let lacking = ResourceVector::from_resources(
            &job.sub(&free).max(&Resources::ZERO),
            &arena.total_resources,
        );
        let worst = (0..RESOURCE_COUNT).fold(0.0f64, |m, r| m.max(lacking[r]));
        if best.is_none_or(|(b, _)| worst < b) {
            best = Some((worst, &node.id));
        }
    }
    let Some((_, node)) = best else {
        return;
    };
    let node = node.clone();
    holds.version += 1;
    holds.reservations.insert(
        node.clone(),
        Reservation {
            tree: t,
            operation: id.clone(),
            task,
            resources: job,
            since: now,
            backfill_until: None,
        },
    );
    events.log(
        now,
        EventKind::JobReserved {
            operation: id.clone(),
            node,
            resources: job,
        },
    );
}

/// The operation's first task with pending jobs and the resources of one of its jobs.
fn first_pending_job(op: &crate::model::Operation) -> Option<(usize, Resources)> {
    let task = op.tasks.iter().position(|task| task.pending > 0)?;
    Some((task, op.spec.tasks[task].resources))
}
