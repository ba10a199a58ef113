//! Backfill onto held resources: what a job reservation ([`crate::reservation`]) or an
//! assembling gang ([`crate::gang`]) holds idle may run a job that will be gone before the
//! holder is expected to need it (the "safe backfill" Volcano's reservation lacked).
//!
//! When the holder will need its resources is estimated at each fair-share update from the
//! time limits (`TaskSpec::time_limit_ms`) of the allocations running in its way: a
//! reservation's node is expected to have the reserved resources free once enough of its
//! allocations have reached their limits; a gang, once enough nodes have room for all its
//! pending jobs. Allocations without a limit are never expected to end, so a holder that
//! depends on one has no estimate and nothing backfills its resources. A job may then start
//! on held resources only if it has a limit and `now + limit` is at or before the estimate.
//! An allocation past its limit counts as ending now. Nothing enforces limits: a job that
//! overruns delays the holder (which then starts when the resources are actually free).
//!
//! Functions over explicit borrows of the books, the holds and a tree; only [`Scheduler::held_on`]
//! is a method.

pub use crate::holds::Held;
pub(crate) use crate::holds::Shadow;
use crate::holds::{Holds, Reservation, ShadowMemo};
use crate::model::{Allocation, Millis, NodeId, Operation, OperationId};
use crate::room::{FreeByNode, Slot};
use crate::scheduler::Scheduler;
use crate::state::Books;
use crate::tree::{Arena, ElementRef, PoolTree};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{RESOURCE_COUNT, Resources};
use std::collections::{BTreeMap, btree_map};
use std::iter::Peekable;

impl Scheduler {
    /// What `node` holds back from `op` (`None`: nothing), as of now; see [`Held::for_job`].
    pub fn held_on(&self, node: &NodeId, op: &OperationId) -> Option<Held> {
        held_from(&self.books, &self.holds, node, op)
    }
}

/// Resources the gang assemblies hold on `node` for operations other than `op`.
pub(crate) fn gang_held_from(
    books: &Books,
    holds: &Holds,
    node: &NodeId,
    op: &OperationId,
) -> Resources {
    let mut held = Resources::ZERO;
    for a in holds.all_gangs().filter(|a| &a.operation != op) {
        if let Some(tasks) = a.holds.get(node) {
            held = held.add(&held_resources(books, &a.operation, tasks));
        }
    }
    held
}

/// Resources of `tasks` (task -> jobs) of operation `op`.
pub(crate) fn held_resources(
    books: &Books,
    op: &OperationId,
    tasks: &BTreeMap<usize, u32>,
) -> Resources {
    resources_of(books.operations.get(op), tasks)
}

/// Resources of `tasks` (task -> jobs) of operation `op` (none if it is gone).
pub(crate) fn resources_of(op: Option<&Operation>, tasks: &BTreeMap<usize, u32>) -> Resources {
    let Some(op) = op else {
        return Resources::ZERO;
    };
    tasks.iter().fold(Resources::ZERO, |acc, (&task, &n)| {
        (0..n).fold(acc, |acc, _| acc.add(&op.spec.tasks[task].resources))
    })
}

/// When the allocation is expected to end: its start plus its task's time limit, or now if
/// that has passed (`None`: it has no limit).
pub(crate) fn expected_end(books: &Books, now: Millis, a: &Allocation) -> Option<Millis> {
    let op = books.operations.get(&a.operation)?;
    let limit = op.spec.tasks.get(a.task)?.time_limit_ms?;
    Some(a.start_time.saturating_add(limit).max(now))
}

/// The running allocations of `node` with a known end, soonest first (then by id).
fn ends_on(books: &Books, now: Millis, node: &NodeId) -> Vec<(Millis, Resources)> {
    let Some(n) = books.nodes.get(node) else {
        return Vec::new();
    };
    let mut ends: Vec<(Millis, Resources)> = n
        .allocations
        .iter()
        .filter_map(|id| books.allocations.get(id))
        .filter_map(|a| Some((expected_end(books, now, a)?, a.resources)))
        .collect();
    ends.sort_by_key(|(end, _)| *end);
    ends
}

/// When the reservation on `node` is expected to have its resources free (`None`: never,
/// as far as the limits tell; then nothing backfills it).
pub(crate) fn reservation_needed_at(
    books: &Books,
    holds: &Holds,
    now: Millis,
    node: &NodeId,
    r: &Reservation,
) -> Option<Millis> {
    let n = books.nodes.get(node)?;
    let mut free = n
        .free()
        .sub(&gang_held_from(books, holds, node, &r.operation))
        .max(&Resources::ZERO);
    if free.dominates(&r.resources) {
        return Some(now);
    }
    for (end, resources) in ends_on(books, now, node) {
        free = free.add(&resources);
        if free.dominates(&r.resources) {
            return Some(end);
        }
    }
    None
}

/// When the gang assembling in tree `t` (its arena `arena`) for `op` is expected to find room
/// for all its pending jobs (`None`: never, as far as the limits tell). Jobs of a gang with
/// several task shapes are counted at the smallest shape on every resource, which finds room
/// no later than there is (so backfill never counts on a later start than the true one).
pub(crate) fn gang_needed_at(
    books: &Books,
    holds: &Holds,
    arena: &Arena,
    now: Millis,
    t: usize,
    op: &OperationId,
) -> Option<Millis> {
    let o = books.operations.get(op)?;
    let job = o.pending_job_resources().reduce(|a, b| a.min(&b))?;
    let need = u64::from(o.pending_job_count());
    shadow(books, holds, arena, now, t, op, &job, need, false).until
}

/// The expected start of gang `op` in tree `t` as `hold = "needed"` plans it (in jobs of its
/// largest pending shape, gangs placed whole counted as running), with its pending job count
/// (`None`: nothing pending).
pub(crate) fn needed_shadow(
    books: &Books,
    holds: &mut Holds,
    arena: &Arena,
    now: Millis,
    t: usize,
    op_id: &OperationId,
) -> Option<(u32, Shadow)> {
    let op = books.operations.get(op_id)?;
    let pending = op.pending_job_count();
    let largest = op.pending_job_resources().reduce(|a, b| a.max(&b))?;
    let compute = || {
        shadow(
            books,
            holds,
            arena,
            now,
            t,
            op_id,
            &largest,
            u64::from(pending),
            true,
        )
    };
    // The same inputs give the same expected start (the fair-share update computes it, then
    // the tree's next heartbeat plans from it): without job reservations or tag filters, it
    // depends only on the time, the allocations started and ended, the gangs placed, the
    // nodes and the gang's pending jobs (which change only as its allocations start or end).
    let memo_key = (holds.reservations.is_empty() && !arena.any_tag_filter()).then_some([
        now,
        holds.room_epoch,
        books.next_allocation,
        holds.gangs_placed,
        books.node_changes,
    ]);
    let memo = holds
        .needed_shadow_memo
        .as_ref()
        .filter(|m| memo_key == Some(m.inputs) && m.tree == t && &m.operation == op_id);
    let plan = match memo {
        Some(m) => {
            debug_assert_eq!(
                m.shadow,
                compute(),
                "a kept expected start went out of date"
            );
            m.shadow
        }
        None => {
            let plan = compute();
            if let Some(inputs) = memo_key {
                holds.needed_shadow_memo = Some(ShadowMemo {
                    tree: t,
                    operation: op_id.clone(),
                    inputs,
                    shadow: plan,
                });
            }
            plan
        }
    };
    Some((pending, plan))
}

/// When `need` jobs of shape `job` of operation `op` are expected to fit in tree `t` (its
/// arena `arena`), from what is free now (less other operations' reservations, and with
/// `placed_busy` what gangs placed whole hold for others) and the allocations' expected ends;
/// with the room then beyond `need` (EASY backfilling's "shadow time" and "extra").
///
/// Without node tag filters in the tree, from the room index ([`crate::room`]): the cost is
/// the distinct amounts of free room, the nodes others hold and the ends up to the shadow
/// time, not the cluster; debug builds check it against the scan of every node.
#[allow(clippy::too_many_arguments)]
pub(crate) fn shadow(
    books: &Books,
    holds: &Holds,
    arena: &Arena,
    now: Millis,
    t: usize,
    op: &OperationId,
    job: &Resources,
    need: u64,
    placed_busy: bool,
) -> Shadow {
    if arena.any_tag_filter() {
        return shadow_scan(books, holds, arena, now, t, op, job, need, placed_busy);
    }
    let indexed = shadow_indexed(books, holds, now, t, op, job, need, placed_busy);
    debug_assert_eq!(
        indexed,
        shadow_scan(books, holds, arena, now, t, op, job, need, placed_busy),
        "the room index disagrees with the books"
    );
    indexed
}

/// How many jobs of shape `job` fit into what is free on the schedulable nodes of tree `t`,
/// whoever holds it (an upper bound of what any placement there finds).
pub(crate) fn free_room(books: &Books, t: usize, job: &Resources) -> u64 {
    books
        .room
        .free_in(t)
        .map(|(free, count)| u64::from(count) * fit_count(&free.max(&Resources::ZERO), job))
        .sum()
}

/// [`shadow`] from the room index (trees without node tag filters).
#[allow(clippy::too_many_arguments)]
fn shadow_indexed(
    books: &Books,
    holds: &Holds,
    now: Millis,
    t: usize,
    op: &OperationId,
    job: &Resources,
    need: u64,
    placed_busy: bool,
) -> Shadow {
    // Nodes by their slots in the room index; a schedulable node of `t` has one.
    let room = &books.room;
    let slot_in_t = |id: &NodeId| {
        room.slot_of(id)
            .filter(|&s| room.counted_at(s).is_some_and(|(tree, _)| tree == t))
    };
    // What others hold on a node: another operation's reservation, with `placed_busy` the jobs
    // of gangs placed whole (which start at their nodes' next heartbeats and run to their
    // limits: ends of their own).
    let mut busy: BTreeMap<Slot, Resources> = BTreeMap::new();
    let mut placed_ends: Vec<(Millis, Slot, Resources)> = Vec::new();
    for (node, r) in &holds.reservations {
        if &r.operation != op
            && let Some(slot) = slot_in_t(node)
        {
            let b = busy.entry(slot).or_insert(Resources::ZERO);
            *b = b.add(&r.resources);
        }
    }
    if placed_busy {
        for a in holds.placed_gangs.values().filter(|a| &a.operation != op) {
            let Some(o) = books.operations.get(&a.operation) else {
                continue;
            };
            for (node, tasks) in &a.holds {
                let Some(slot) = slot_in_t(node) else {
                    continue;
                };
                let b = busy.entry(slot).or_insert(Resources::ZERO);
                for (&task, &count) in tasks {
                    let spec = &o.spec.tasks[task];
                    for _ in 0..count {
                        *b = b.add(&spec.resources);
                        if let Some(limit) = spec.time_limit_ms {
                            placed_ends.push((now.saturating_add(limit), slot, spec.resources));
                        }
                    }
                }
            }
        }
    }
    // (A node of an end is schedulable in `t`, as checked below.)
    let unbusy = |slot: Slot| {
        room.counted_at(slot)
            .map_or(Resources::ZERO, |(_, free)| free.max(&Resources::ZERO))
    };
    let free_of = |slot: Slot| {
        let busy = busy.get(&slot).copied().unwrap_or(Resources::ZERO);
        unbusy(slot).sub(&busy).max(&Resources::ZERO)
    };
    let mut room_now = free_room(books, t, job);
    for &slot in busy.keys() {
        room_now = room_now - fit_count(&unbusy(slot), job) + fit_count(&free_of(slot), job);
    }
    // The ends in time order (the order among equal times changes nothing: they all count).
    placed_ends.sort_by_key(|e| e.0);
    let mut placed_ends = placed_ends.into_iter().peekable();
    // (The index holds each allocation's start + limit: overdue ones count as ending now. When
    // every node is schedulable, so is every allocation's.)
    let all_schedulable = room.all_schedulable();
    let mut running = room
        .ends_in(t)
        .filter(|&(_, _, slot, _)| {
            all_schedulable || room.counted_at(slot).is_some_and(|(tree, _)| tree == t)
        })
        .map(|(end, _, slot, resources)| (end.max(now), slot, resources))
        .peekable();
    let ends = std::iter::from_fn(|| match (running.peek(), placed_ends.peek()) {
        (Some(r), Some(p)) if p.0 < r.0 => placed_ends.next(),
        (Some(_), _) => running.next(),
        (None, _) => placed_ends.next(),
    });
    room.with_scratch(|scratch| walk_ends(ends, now, room_now, need, job, scratch, free_of))
}

/// The shadow from `room_now` (jobs of `job`'s shape that fit now) and the expected `ends`
/// in time order: each end frees its resources on its node (whose free room is in `free`,
/// else `free_of` it), until `need` jobs fit; the ends at that same time count too.
fn walk_ends<K: Ord + Copy>(
    ends: impl IntoIterator<Item = (Millis, K, Resources)>,
    now: Millis,
    room_now: u64,
    need: u64,
    job: &Resources,
    free: &mut impl FreeByNode<K>,
    free_of: impl Fn(K) -> Resources,
) -> Shadow {
    let mut room = room_now;
    let mut until = (room >= need).then_some(now);
    let mut next_end = None;
    for (end, node, resources) in ends {
        // Every allocation ending by the time room is found counts towards the surplus.
        if until.is_some_and(|u| end > u) {
            next_end = Some(end);
            break;
        }
        let f = free.get_or_insert_with(node, || free_of(node));
        let before = fit_count(f, job);
        *f = f.add(&resources);
        room = room - before + fit_count(f, job);
        if until.is_none() && room >= need {
            until = Some(end);
        }
    }
    Shadow {
        until,
        room_now,
        surplus: if until.is_some() { room - need } else { 0 },
        next_end,
    }
}

/// [`shadow`] by a scan of every node of the tree and every allocation there.
#[allow(clippy::too_many_arguments)]
fn shadow_scan(
    books: &Books,
    holds: &Holds,
    arena: &Arena,
    now: Millis,
    t: usize,
    op: &OperationId,
    job: &Resources,
    need: u64,
    placed_busy: bool,
) -> Shadow {
    let leaf = arena.by_operation.get(op).copied();
    let mut free: BTreeMap<&NodeId, Resources> = BTreeMap::new();
    let mut ends: Vec<(Millis, &NodeId, Resources)> = Vec::new();
    for n in books.nodes.values() {
        if n.tree != Some(t)
            || !n.scheduler_jobs_enabled
            || n.draining
            || (arena.any_tag_filter() && leaf.is_some_and(|leaf| !arena.tags_allow(leaf, &n.tags)))
        {
            continue;
        }
        let mut busy = holds
            .reservations
            .get(&n.id)
            .filter(|r| &r.operation != op)
            .map_or(Resources::ZERO, |r| r.resources);
        if placed_busy {
            // Gangs placed whole start at their nodes' next heartbeats and run to their limits.
            for a in holds.placed_gangs.values().filter(|a| &a.operation != op) {
                let Some(tasks) = a.holds.get(&n.id) else {
                    continue;
                };
                let Some(o) = books.operations.get(&a.operation) else {
                    continue;
                };
                for (&task, &count) in tasks {
                    let spec = &o.spec.tasks[task];
                    for _ in 0..count {
                        busy = busy.add(&spec.resources);
                        if let Some(limit) = spec.time_limit_ms {
                            ends.push((now.saturating_add(limit), &n.id, spec.resources));
                        }
                    }
                }
            }
        }
        free.insert(&n.id, n.free().sub(&busy).max(&Resources::ZERO));
        for id in &n.allocations {
            if let Some(a) = books.allocations.get(id)
                && let Some(end) = expected_end(books, now, a)
            {
                ends.push((end, &n.id, a.resources));
            }
        }
    }
    let room_now: u64 = free.values().map(|f| fit_count(f, job)).sum();
    ends.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    walk_ends(ends, now, room_now, need, job, &mut free, |_| {
        unreachable!("every node's free room is collected above")
    })
}

/// What `node` holds back from `op`: another operation's job reservation and what
/// assembling gangs of other operations hold there, each with until when it may be
/// backfilled (`None`: nothing is held).
pub(crate) fn held_from(
    books: &Books,
    holds: &Holds,
    node: &NodeId,
    op: &OperationId,
) -> Option<Held> {
    let mut held = Held::default();
    if let Some(r) = holds.reservations.get(node).filter(|r| &r.operation != op) {
        held.reserved = r.resources;
        held.reserved_until = r.backfill_until;
    }
    if holds.any_gang() {
        let mut untils = Vec::new();
        for a in holds.all_gangs().filter(|a| &a.operation != op) {
            if let Some(tasks) = a.holds.get(node) {
                held.gangs = held.gangs.add(&held_resources(books, &a.operation, tasks));
                untils.push(a.backfill_until);
            }
        }
        // The earliest need of them all; unknown if any is unknown.
        held.gangs_until = untils.into_iter().reduce(|a, b| Some(a?.min(b?))).flatten();
    }
    (!held.is_zero()).then_some(held)
}

/// What nodes hold back from one operation, asked node after node in id order: as
/// [`held_from`] for each, but reading every hold's nodes in step with the questions instead
/// of looking each node up in each hold, and each gang's operation once.
pub(crate) struct HeldCursor<'a> {
    op: &'a OperationId,
    reservations: Peekable<btree_map::Iter<'a, NodeId, Reservation>>,
    any_gang: bool,
    /// Every gang of another operation: its holds by node, its operation, its backfill time.
    gangs: Vec<GangCursor<'a>>,
    #[cfg(debug_assertions)]
    check: (&'a Books, &'a Holds),
}

type GangCursor<'a> = (
    Peekable<btree_map::Iter<'a, NodeId, BTreeMap<usize, u32>>>,
    Option<&'a Operation>,
    Option<Millis>,
);

impl<'a> HeldCursor<'a> {
    /// The holds of `holds` as seen by operation `op`.
    pub(crate) fn new(books: &'a Books, holds: &'a Holds, op: &'a OperationId) -> Self {
        HeldCursor {
            op,
            reservations: holds.reservations.iter().peekable(),
            any_gang: holds.any_gang(),
            gangs: holds
                .all_gangs()
                .filter(|a| &a.operation != op)
                .map(|a| {
                    let o = books.operations.get(&a.operation);
                    (a.holds.iter().peekable(), o, a.backfill_until)
                })
                .collect(),
            #[cfg(debug_assertions)]
            check: (books, holds),
        }
    }

    /// What `node` holds back from the operation ([`held_from`]); `node` comes after every
    /// node asked before.
    pub(crate) fn held_at(&mut self, node: &NodeId) -> Option<Held> {
        fn at<'m, V>(
            it: &mut Peekable<btree_map::Iter<'m, NodeId, V>>,
            node: &NodeId,
        ) -> Option<&'m V> {
            while it.peek().is_some_and(|(n, _)| *n < node) {
                it.next();
            }
            it.peek().filter(|(n, _)| *n == node).map(|(_, v)| *v)
        }
        let mut held = Held::default();
        if let Some(r) = at(&mut self.reservations, node).filter(|r| &r.operation != self.op) {
            held.reserved = r.resources;
            held.reserved_until = r.backfill_until;
        }
        if self.any_gang {
            let mut untils = Vec::new();
            for (it, o, until) in &mut self.gangs {
                if let Some(tasks) = at(it, node) {
                    held.gangs = held.gangs.add(&resources_of(*o, tasks));
                    untils.push(*until);
                }
            }
            held.gangs_until = untils.into_iter().reduce(|a, b| Some(a?.min(b?))).flatten();
        }
        let held = (!held.is_zero()).then_some(held);
        #[cfg(debug_assertions)]
        {
            let (books, holds) = self.check;
            assert_eq!(
                held,
                held_from(books, holds, node, self.op),
                "the held cursor"
            );
        }
        held
    }
}

/// What `node_id` holds back from the operation at `leaf` of `arena` (for another operation's
/// job).
pub(crate) fn held_from_leaf(
    books: &Books,
    holds: &Holds,
    arena: &Arena,
    node_id: &NodeId,
    leaf: ElementIndex,
) -> Option<Held> {
    if !holds.any() {
        return None;
    }
    match &arena.elements[leaf].kind {
        ElementRef::Operation(id) => held_from(books, holds, node_id, id),
        _ => None,
    }
}

/// Whether `tree` places the operation's jobs all at once.
pub(crate) fn gang_placed(tree: &PoolTree, books: &Books, op: &OperationId) -> bool {
    tree.config().gang_placement.enable && books.operations.get(op).is_some_and(|o| o.is_gang())
}

/// The running allocations of gang `op` in tree `t` (`tree`) that `keep` keeps, when the tree
/// places its jobs all at once (none otherwise): what goes when one of them is preempted or
/// lost, since such a gang runs whole or not at all.
pub(crate) fn running_gang_members(
    tree: &PoolTree,
    t: usize,
    books: &Books,
    op: &OperationId,
    keep: impl Fn(&crate::model::Allocation) -> bool,
) -> Vec<crate::model::AllocationId> {
    if !gang_placed(tree, books, op) {
        return Vec::new();
    }
    (books.operations[op].allocations.iter().copied())
        .filter(|m| {
            books.allocations.get(m).is_some_and(|a| {
                a.tree == t && a.state == crate::model::AllocationState::Running && keep(a)
            })
        })
        .collect()
}

/// How many jobs of `job` fit into `free` (at most [`u32::MAX`], also for a job that asks
/// for nothing).
pub(crate) fn fit_count(free: &Resources, job: &Resources) -> u64 {
    let (free, job) = (free.raw(), job.raw());
    (0..RESOURCE_COUNT)
        .filter(|&r| job[r] > 0)
        .map(|r| (free[r].max(0) / job[r]) as u64)
        .fold(u64::from(u32::MAX), u64::min)
}
