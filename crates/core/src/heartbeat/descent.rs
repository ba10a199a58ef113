//! The heartbeat's walks built from the scheduler's operations (see [`super`]): afresh for
//! the whole tree or for one node, kept up to date as operations change, and the questions a
//! stage asks about a leaf. Functions over explicit borrows of a tree's arena, the
//! operations and the cache of walks ([`take_cached_walk`], [`touch_operation`]).

use super::walk::Walk;
use crate::model::{Node, Operation, OperationId, OperationState, PreemptionMode};
use crate::scheduler::Parts;
use crate::tree::{Arena, ElementRef, PoolTree, SchedulingStatus};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::Resources;
use std::collections::BTreeMap;

/// The operations, by id.
pub(crate) type Operations = BTreeMap<OperationId, Operation>;

/// Whether `op` wants jobs on any node, at arena index `i`: running, with pending jobs, not
/// held back by FIFO, and (in graceful preemption mode) below its fair share.
fn wants_jobs(arena: &Arena, i: ElementIndex, op: &Operation) -> bool {
    !arena.elements[i].fifo_limited
        && op.state == OperationState::Running
        && op.pending_job_count() > 0
        && (op.spec.preemption_mode == PreemptionMode::Normal
            || arena.elements[i].scheduling_status == SchedulingStatus::BelowFairShare)
}

/// The walk of tree `t` for the whole cluster, computed from scratch.
pub(crate) fn fresh_walk(t: usize, arena: &Arena, operations: &Operations) -> Walk {
    let mut walk = Walk::new(t, arena.elements.len());
    for (i, op) in tree_operations(arena, operations) {
        walk.usage[i] = op
            .and_then(|op| op.in_tree(t))
            .map_or(Resources::ZERO, |o| o.usage);
        walk.active[i] = op.is_some_and(|op| wants_jobs(arena, i, op));
        walk.gangs_only &= op.is_none_or(|op| op.is_gang());
        walk.gang[i] = op.is_some_and(|op| op.is_gang());
    }
    walk.sum_up(arena);
    walk
}

/// Each operation element of `arena` (in id order) with its operation, if the scheduler still
/// has it. Both maps are sorted by operation id: they are walked together instead of looking
/// each up, unless the tree holds few of the operations (most finished long ago), where a
/// lookup per operation of the tree is cheaper than a pass over all of them.
pub(crate) fn tree_operations<'a>(
    arena: &'a Arena,
    operations: &'a Operations,
) -> impl Iterator<Item = (ElementIndex, Option<&'a Operation>)> + 'a {
    let merge = arena.by_operation.len() >= operations.len() / 8;
    let mut ops = operations.iter().peekable();
    arena.by_operation.iter().map(move |(op_id, &i)| {
        let found = if merge {
            while ops.peek().is_some_and(|(id, _)| *id < op_id) {
                ops.next();
            }
            ops.peek().filter(|(id, _)| *id == op_id).map(|(_, op)| *op)
        } else {
            operations.get(op_id)
        };
        (i, found)
    })
}

/// Whether the operation at arena index `i` wants jobs on any node ([`wants_jobs`]).
pub(crate) fn globally_active(arena: &Arena, operations: &Operations, i: ElementIndex) -> bool {
    let ElementRef::Operation(id) = &arena.elements[i].kind else {
        return false;
    };
    operations
        .get(id)
        .is_some_and(|op| wants_jobs(arena, i, op))
}

/// Whether the operation at `i` may run on `node` (its and its pools' scheduling tag filters).
pub(crate) fn eligible_on(arena: &Arena, i: ElementIndex, node: &Node) -> bool {
    matches!(arena.elements[i].kind, ElementRef::Operation(_)) && arena.tags_allow(i, &node.tags)
}

/// Whether the operation at `leaf` is a gang operation.
pub(crate) fn is_gang_leaf(arena: &Arena, operations: &Operations, leaf: ElementIndex) -> bool {
    match &arena.elements[leaf].kind {
        ElementRef::Operation(id) => operations.get(id).is_some_and(|op| op.is_gang()),
        _ => false,
    }
}

/// The walk of tree `t` for a heartbeat of `node`; `eligible` restricts which operations (by
/// arena index) may be active.
pub(crate) fn walk_for(
    t: usize,
    arena: &Arena,
    operations: &Operations,
    node: &Node,
    eligible: impl Fn(ElementIndex) -> bool,
) -> Walk {
    let mut walk = Walk::new(t, arena.elements.len());
    for (i, found) in tree_operations(arena, operations) {
        walk.active[i] = match found {
            Some(op) => {
                walk.gangs_only &= op.is_gang();
                walk.gang[i] = op.is_gang();
                walk.usage[i] = op.in_tree(t).map_or(Resources::ZERO, |o| o.usage);
                eligible(i) && wants_jobs(arena, i, op) && arena.tags_allow(i, &node.tags)
            }
            None => false,
        };
    }
    walk.sum_up(arena);
    walk
}

impl Parts<'_> {
    /// Brings the cached walks up to date after the operation's usage, pending jobs or state
    /// changed ([`touch_operation`]).
    #[inline]
    pub(crate) fn touch_operation(&mut self, id: &OperationId) {
        touch_operation(
            &mut self.caches.walks,
            self.trees,
            &self.books.operations,
            id,
        );
    }
}

/// Tree `t`'s cached walk (checked against a fresh one in debug builds) or a new one, from
/// `walks` (the cache, by tree) and the tree's arena.
pub(crate) fn take_cached_walk(
    walks: &mut [Option<Walk>],
    t: usize,
    arena: &Arena,
    operations: &Operations,
) -> Walk {
    match walks[t].take() {
        Some(walk) => {
            #[cfg(debug_assertions)]
            {
                // Parked operations aside (they are inactive on purpose), it is the fresh walk.
                let mut unparked = walk.clone();
                unparked.unpark_all(arena, |i| globally_active(arena, operations, i));
                assert!(
                    unparked == fresh_walk(t, arena, operations),
                    "the cached walk went out of date"
                );
            }
            walk
        }
        None => fresh_walk(t, arena, operations),
    }
}

/// Brings the cached walks (`walks`, by tree) up to date after the operation's usage, pending
/// jobs or state changed (no-op while a heartbeat holds the walk: it updates the walk itself).
pub(crate) fn touch_operation(
    walks: &mut [Option<Walk>],
    trees: &[PoolTree],
    operations: &Operations,
    id: &OperationId,
) {
    let Some(op) = operations.get(id) else {
        return;
    };
    for o in &op.trees {
        let (t, new) = (o.tree, o.usage);
        let Some(walk) = walks[t].as_mut() else {
            continue;
        };
        let arena = &trees[t].arena;
        if let Some(&i) = arena.by_operation.get(id) {
            let old = walk.usage[i];
            if new != old {
                let mut cur = Some(i);
                while let Some(e) = cur {
                    walk.usage[e] = walk.usage[e].sub(&old).add(&new);
                    cur = arena.elements[e].parent;
                }
            }
            walk.active[i] = wants_jobs(arena, i, op);
            walk.gang[i] = op.is_gang();
            walk.refresh_path(arena, i);
        }
    }
}
