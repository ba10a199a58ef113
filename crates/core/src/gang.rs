//! All-or-nothing placement of gang operations (tree option `gang_placement`; not in YTsaurus,
//! whose gangs are all-or-nothing in the fair share only).
//!
//! When the regular stage offers a node to a gang operation, the gang is first placed whole if
//! what is free in its tree right now holds all its pending jobs ("placed gangs"; while
//! another gang assembles, only if the gang's jobs end before that one needs what it holds,
//! as for any backfill). Otherwise it assembles: one gang at a time per tree holds what is
//! free on each node it is offered for its jobs instead of starting them. Either way, once
//! every pending job of the operation is held, each node starts its held jobs at its next
//! heartbeat. Held resources are kept from other operations (see [`crate::backfill`]).
//! Assemblies are checked at fair-share updates (timeout, lost nodes, finished operations).
//!
//! Functions over explicit borrows of a tree's arena, the books, the holds and the event log;
//! starting held jobs books allocations, so it is a `Parts` method.

use crate::backfill;
use crate::event::{EventKind, HoldEnd};
use crate::gang_scan::scan_nodes;
use crate::heartbeat::walk::Walk;
pub use crate::holds::GangAssembly;
use crate::holds::{Holds, Offer};
use crate::model::{Millis, Node, NodeId, Operation, OperationId, OperationState};
use crate::scheduler::{Parts, Scheduler, StartOrder};
use crate::state::{Books, EventLog};
use crate::tree::{Arena, ElementRef, PoolTree};
use crate::unheld;
use fairsched_config::GangHold;
use fairsched_hdrf::ElementIndex;
use fairsched_resources::Resources;
use std::collections::BTreeMap;

impl Scheduler {
    /// The gang assembling in tree `t`, if any.
    pub fn gang_assembly(&self, t: usize) -> Option<&GangAssembly> {
        self.holds.gangs.get(&t)
    }

    /// Resources the gang assemblies hold on `node` for operations other than `op`.
    pub fn gang_held_on(&self, node: &NodeId, op: &OperationId) -> Resources {
        backfill::gang_held_from(&self.books, &self.holds, node, op)
    }

    /// Every gang holding resources: the assembling ones and those placed whole.
    pub fn all_gangs(&self) -> impl Iterator<Item = &GangAssembly> {
        self.holds.all_gangs()
    }

    /// Counts the changes to what is held (gangs' jobs, job reservations, their backfill
    /// times): while it is the same, so is every hold.
    pub fn holds_version(&self) -> u64 {
        self.holds.version
    }

    /// Whether gang `a` (of [`Scheduler::all_gangs`]) starts its held jobs at its nodes' next
    /// heartbeats: it holds all it needs and all of that is free (what it lent while it
    /// gathered is back), or it has begun to start.
    pub fn gang_starts(&self, a: &GangAssembly) -> bool {
        // A gang placed whole was placed on room it may use.
        if self.holds.placed_gangs.contains_key(&a.operation) {
            return true;
        }
        a.ready
            && (a.starting
                || (a.lent_at != Some(self.holds.room_epoch)
                    && held_room_free(&self.books, &self.holds, a)))
    }
}

impl Parts<'_> {
    /// At a heartbeat of `node_id`: starts the jobs that complete gangs (the tree's assembly
    /// once ready, gangs placed whole) hold there.
    pub(crate) fn start_gang_holds(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        walk: &mut Walk,
    ) -> Vec<StartOrder> {
        let t = walk.tree;
        let mut orders = Vec::new();
        if let Some(tasks) = (self.holds.gangs.get(&t))
            .filter(|a| a.ready)
            .and_then(|a| a.holds.get(node_id).cloned())
            && whole_room_free(self.books, self.holds, t)
        {
            let a = &self.holds.gangs[&t];
            let op_id = a.operation.clone();
            let started = self.start_held_here(now, node_id, walk, &op_id, &tasks);
            self.holds.version += 1;
            let a = self.holds.gangs.get_mut(&t).expect("checked above");
            a.release_node(node_id);
            match started {
                Some(started) => {
                    orders.extend(started);
                    if a.holds.is_empty() {
                        release_gang(self.holds, self.events, now, t, HoldEnd::Started);
                    }
                }
                // Gathered again elsewhere.
                None => a.unready(),
            }
        }
        let placed: Vec<(OperationId, BTreeMap<usize, u32>)> = self
            .holds
            .placed_gangs
            .iter()
            .filter_map(|(op, a)| Some((op.clone(), a.holds.get(node_id)?.clone())))
            .collect();
        for (op_id, tasks) in placed {
            let started = self.start_held_here(now, node_id, walk, &op_id, &tasks);
            let held: u32 = tasks.values().sum();
            if let Some(started) = started.as_ref().filter(|s| s.len() == held as usize) {
                self.holds.exact_conversions += started.len() as u64;
            }
            self.holds.version += 1;
            let a = self
                .holds
                .placed_gangs
                .get_mut(&op_id)
                .expect("listed above");
            a.release_node(node_id);
            match started {
                Some(started) => {
                    orders.extend(started);
                    if a.holds.is_empty() {
                        release_placed_gang(self.holds, self.events, now, &op_id, HoldEnd::Started);
                    }
                }
                // Its other jobs go back to waiting (the gang is placed or gathers again).
                None => release_placed_gang(
                    self.holds,
                    self.events,
                    now,
                    &op_id,
                    HoldEnd::NodeUnavailable,
                ),
            }
        }
        orders
    }

    /// Starts the held jobs `tasks` of `op_id` on `node_id` (`None`: the node no longer fits
    /// them or no longer suits the operation, having shrunk or changed its tags).
    fn start_held_here(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        walk: &mut Walk,
        op_id: &OperationId,
        tasks: &BTreeMap<usize, u32>,
    ) -> Option<Vec<StartOrder>> {
        let t = walk.tree;
        let leaf = *self.trees[t].arena.by_operation.get(op_id)?;
        let needed = backfill::held_resources(self.books, op_id, tasks);
        let node = &self.books.nodes[node_id];
        let arena = &self.trees[t].arena;
        if !node.free().dominates(&needed)
            || (arena.any_tag_filter() && !arena.tags_allow(leaf, &node.tags))
        {
            return None;
        }
        let mut orders = Vec::new();
        for (&task, &n) in tasks {
            for _ in 0..n {
                if self.books.operations[op_id].tasks[task].pending == 0 {
                    break;
                }
                let spec = &self.books.operations[op_id].spec.tasks[task];
                let limit = spec.time_limit_ms;
                let resources = spec.resources;
                let backfill = Offer {
                    available: self.books.nodes[node_id].free(),
                    held: backfill::held_from(self.books, self.holds, node_id, op_id),
                }
                .backfills(now, limit, &resources);
                let order = self.place(
                    now,
                    op_id,
                    task,
                    node_id,
                    crate::event::Stage::Regular,
                    backfill,
                );
                let arena = &self.trees[t].arena;
                for e in std::iter::once(leaf).chain(arena.ancestors(leaf)) {
                    walk.usage[e] = walk.usage[e].add(&order.resources);
                }
                orders.push(order);
            }
        }
        if self.books.operations[op_id].pending_job_count() == 0 {
            walk.active[leaf] = false;
        }
        walk.refresh_path(&self.trees[walk.tree].arena, leaf);
        Some(orders)
    }
}

/// The regular stage offers a node to the gang operation at `leaf`: if what is free in the
/// tree now (less what others hold, unless its jobs may backfill it) holds all its pending
/// jobs within its path's limits, holds them, ready to start, and returns true. The
/// assembling gang of the tree is never placed this way (it gathers instead); while one
/// assembles, another gang is placed only if its jobs end before that one needs what it
/// holds (but anywhere, on what it does not hold, while it holds all it needs and waits for
/// what it lent to be given back). With `hold = "planned"` a gang is placed only at its planned start
/// ([`crate::gang_plan`]). A gang that did not fit is tried again only once room may have
/// freed up.
#[allow(clippy::too_many_arguments)]
pub(crate) fn place_gang_now(
    arena: &Arena,
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    leaf: ElementIndex,
    walk: &Walk,
    hold: GangHold,
) -> bool {
    let t = walk.tree;
    let ElementRef::Operation(op_id) = &arena.elements[leaf].kind else {
        return false;
    };
    if holds.placed_gangs.contains_key(op_id)
        || holds.gangs.get(&t).is_some_and(|a| &a.operation == op_id)
        || holds.gang_unplaceable_at.get(op_id) == Some(&holds.room_epoch)
    {
        return false;
    }
    let op = &books.operations[op_id];
    // While another gang assembles, its jobs must all end before that one needs its
    // resources, unless that one holds all its plan needs (then what it does not hold is
    // anyone's, and what it holds is offered below to the jobs that end in time) or all it
    // needs, waiting for what it lent (then what it holds is its own).
    if let Some(a) = holds
        .gangs
        .get(&t)
        .filter(|_| !plan_in_force(books, holds, t, now) && !holds.waits_for_lent(t))
    {
        let ends_in_time = a
            .backfill_until
            .is_some_and(|until| op.pending_jobs_end_by(now, until));
        if !ends_in_time {
            return false;
        }
    }
    // Conservative backfilling: not before its planned start, which nothing planned before it
    // is delayed by.
    if hold == GangHold::Planned
        && crate::gang_plan::planned_start(arena, books, holds, now, t, op_id) != Some(now)
    {
        turn_down(holds, t, op_id);
        return false;
    }
    // Its pending jobs, each at least its smallest shape, cannot all fit into less than the
    // tree's free room, nor, if none may backfill what others hold, into less than what is
    // free beyond that: the scan below would find it so.
    if let Some(smallest) = op.pending_job_resources().reduce(|a, b| a.min(&b)) {
        let need = u64::from(op.pending_job_count());
        if backfill::free_room(books, t, &smallest) < need
            || unheld::room_bound(books, holds, now, t, op, &smallest).is_some_and(|r| r < need)
        {
            debug_assert!(
                scan_nodes(arena, books, holds, now, leaf, walk).is_none(),
                "a gang ruled out by a room bound fits"
            );
            turn_down(holds, t, op_id);
            return false;
        }
    }
    let Some(held_jobs) = scan_nodes(arena, books, holds, now, leaf, walk) else {
        turn_down(holds, t, op_id);
        return false;
    };
    let op_id = op_id.clone();
    let (jobs, nodes) = (
        held_jobs.values().flat_map(|t| t.values()).sum(),
        held_jobs.len() as u32,
    );
    holds.gang_unplaceable_at.remove(&op_id);
    holds.gangs_placed += 1;
    holds.version += 1;
    holds.placed_gangs.insert(
        op_id.clone(),
        GangAssembly {
            ready: true,
            ..GangAssembly::holding(op_id.clone(), now, held_jobs)
        },
    );
    events.log(
        now,
        EventKind::GangAssembled {
            operation: op_id,
            jobs,
            nodes,
        },
    );
    true
}

/// Gang `op_id` of tree `t` does not fit at once: it is not tried again until room may have
/// freed up (the room epoch changes), also by the clock alone reaching the first end that the
/// plan of the gang assembling in `t` left out (see [`clock_frees_room`]; the plan may be
/// from an earlier room epoch).
fn turn_down(holds: &mut Holds, t: usize, op_id: &OperationId) {
    holds
        .gang_unplaceable_at
        .insert(op_id.clone(), holds.room_epoch);
    holds.note_plan_holds_until(holds.gangs.get(&t).and_then(|a| a.next_end));
}

/// The regular stage offers `node_id` to the gang operation at `leaf`: holds what fits
/// there for its pending jobs (if it may assemble now), and marks the assembly ready when
/// every pending job is held. Never starts a job. With `gang_placement.hold = "needed"` the
/// gang instead plans (again, if allocations ended or time passed since) and holds what its
/// plan needs across the tree ([`plan_needed`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gang_hold(
    arena: &Arena,
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    node_id: &NodeId,
    leaf: ElementIndex,
    walk: &Walk,
    hold: GangHold,
) {
    let t = walk.tree;
    let ElementRef::Operation(op_id) = &arena.elements[leaf].kind else {
        return;
    };
    let mut op_id = op_id.clone();
    let mut leaf = leaf;
    if holds.placed_gangs.contains_key(&op_id) {
        return;
    }
    // With `needed` (and `planned`), the reservation goes to the gang that has waited longest (the queue
    // head, whatever the policy's order), not to the first one offered a node.
    if hold.plans_head()
        && !holds.gangs.contains_key(&t)
        && let Some((oldest, oldest_leaf)) = longest_waiting_gang(arena, books, holds, now)
    {
        op_id = oldest;
        leaf = oldest_leaf;
    }
    match holds.gangs.get(&t) {
        Some(a) if a.operation != op_id || a.ready => return,
        Some(_) => {}
        None => {
            if holds
                .gang_cooldown
                .get(&op_id)
                .is_some_and(|&until| now < until)
            {
                return;
            }
            holds.gangs.insert(t, GangAssembly::new(op_id.clone(), now));
            holds.assemblies_changed += 1;
            holds.version += 1;
        }
    }
    if hold.plans_head() {
        plan_needed(arena, books, holds, events, now, leaf, walk);
        return;
    }
    let so_far = HeldSoFar::of(books, holds, t);
    let new_here = hold_here(
        arena,
        &books.nodes[node_id],
        &books.operations[&op_id],
        &path_of(arena, leaf),
        walk,
        u32::MAX,
        &so_far,
        || HeldHere::of(books, holds, t, node_id),
    );
    add_holds(holds, t, node_id, new_here);
    mark_ready(books, holds, events, now, t);
}

/// `gang_placement.hold = "needed"`, at a heartbeat of `walk`'s tree before any operation is
/// offered the node: the gang that has waited longest assembles if none does, and the
/// assembling gang plans again if its plan is not current ([`plan_needed`]), so that the
/// reservation does not depend on which operation the policy offers the node first, and no
/// operation takes what the plan would now hold.
///
/// First, if the clock alone may have freed room ([`clock_frees_room`]), that counts as room
/// freed (the holds' `room_epoch`), as when an allocation ends: a gang that could not be
/// placed before is offered nodes again.
pub(crate) fn keep_needed_plan(
    arena: &Arena,
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    walk: &Walk,
    hold: GangHold,
) {
    let t = walk.tree;
    if clock_frees_room(holds, now, hold) {
        holds.planned_at = Some(now);
        holds.clock_frees_room_at = None;
        holds.room_epoch += 1;
    }
    if !holds.gangs.contains_key(&t) {
        let Some((op, _)) = longest_waiting_gang(arena, books, holds, now) else {
            return;
        };
        holds.gangs.insert(t, GangAssembly::new(op, now));
        holds.assemblies_changed += 1;
        holds.version += 1;
    }
    let a = &holds.gangs[&t];
    if a.ready {
        return;
    }
    if let Some(&leaf) = arena.by_operation.get(&a.operation) {
        plan_needed(arena, books, holds, events, now, leaf, walk);
    }
}

/// Whether the time `now` may give a gang turned down at the holds' room epoch room that it
/// did not have then, no allocation having ended ("a later time frees room"): an allocation
/// past its limit is expected to end now, so plans move with time. With `hold = "planned"`,
/// any later time than the last that counted (every waiting gang's planned start may move).
/// With `"needed"` (EASY), only the clock reaching the earliest end left out by the plans
/// made in the epoch or that they were turned down under (`Holds::clock_frees_room_at`):
/// until then the assembling gang's expected start only comes closer to now and its surplus
/// stays the same, so none of them finds room or ends by that start; from then on the surplus
/// may be larger. (Allocations started since a gang was turned down only take room; those
/// ending after the expected start add ends, which the plan made after them counts.)
fn clock_frees_room(holds: &Holds, now: Millis, hold: GangHold) -> bool {
    (hold == GangHold::Planned && holds.planned_at != Some(now))
        || (holds.clock_frees_room_at)
            .is_some_and(|(epoch, at)| epoch == holds.room_epoch && now >= at)
}

/// The gang operation of tree `arena` that has waited longest (the first in start order with
/// pending jobs that may start: running, not placed whole, not cooling down after a timeout,
/// within its pools' limits), with its element.
fn longest_waiting_gang(
    arena: &Arena,
    books: &Books,
    holds: &Holds,
    now: Millis,
) -> Option<(OperationId, ElementIndex)> {
    books.unfinished_operations().find_map(|op| {
        if !crate::gang_plan::waits_to_be_placed(op, holds, now) {
            return None;
        }
        let leaf = *arena.by_operation.get(&op.spec.id)?;
        crate::heartbeat::descent::globally_active(arena, &books.operations, leaf)
            .then(|| (op.spec.id.clone(), leaf))
    })
}

/// What the assembling gang of `walk`'s tree holds so far: its resources (which count against
/// its path's limits) and its jobs per task.
struct HeldSoFar {
    total: Resources,
    per_task: BTreeMap<usize, u32>,
}

impl HeldSoFar {
    /// What tree `t`'s assembling gang holds.
    fn of(books: &Books, holds: &Holds, t: usize) -> HeldSoFar {
        let a = &holds.gangs[&t];
        let per_task = a.held_per_task();
        HeldSoFar {
            // (Sums of jobs' resources, which are not negative: the order of the saturating
            // additions does not matter.)
            total: backfill::held_resources(books, &a.operation, &per_task),
            per_task,
        }
    }

    /// The gang (operation `op`) newly holds `new_here`.
    fn add(&mut self, op: &Operation, new_here: &BTreeMap<usize, u32>) {
        self.total = self.total.add(&backfill::resources_of(Some(op), new_here));
        for (&task, &n) in new_here {
            *self.per_task.entry(task).or_default() += n;
        }
    }
}

/// The operation at `leaf` and its ancestors, up to the root.
fn path_of(arena: &Arena, leaf: ElementIndex) -> Vec<ElementIndex> {
    std::iter::once(leaf).chain(arena.ancestors(leaf)).collect()
}

/// What the assembling gang of `walk`'s tree (the operation whose [`path_of`] is `path`) may
/// newly hold on `node_id`, at most `max_jobs` jobs: its pending jobs not held yet that fit
/// into what is free there beyond what others hold, within its path's limits (`so_far`: what
/// it holds).
#[allow(clippy::too_many_arguments)]
fn hold_here(
    arena: &Arena,
    node: &Node,
    op: &Operation,
    path: &[ElementIndex],
    walk: &Walk,
    max_jobs: u32,
    so_far: &HeldSoFar,
    held: impl FnOnce() -> HeldHere,
) -> BTreeMap<usize, u32> {
    // What is held only takes from what is free: a node whose free resources fit no job of
    // the gang fits none once they are counted.
    let free = node.free().max(&Resources::ZERO);
    if !op
        .spec
        .tasks
        .iter()
        .any(|spec| free.dominates(&spec.resources))
    {
        return BTreeMap::new();
    }
    let held = held();
    let mut available = node
        .free()
        .sub(&held.others.map_or(Resources::ZERO, |h| h.all()))
        .sub(&held.own)
        .max(&Resources::ZERO);
    // Everything held so far counts against the path's limits.
    let mut held_total = so_far.total;
    let held_per_task = &so_far.per_task;
    let allow_regular = arena.elements[path[0]].allow_regular_on_ssd;
    let mut new_here: BTreeMap<usize, u32> = BTreeMap::new();
    let mut left = max_jobs;
    for (task, spec) in op.spec.tasks.iter().enumerate() {
        let wanted = op.tasks[task]
            .pending
            .saturating_sub(held_per_task.get(&task).copied().unwrap_or(0));
        if arena
            .ssd
            .as_ref()
            .is_some_and(|ssd| !ssd.allows(spec, &node.tags, allow_regular))
        {
            continue;
        }
        for _ in 0..wanted.min(left) {
            let fits = available.dominates(&spec.resources)
                && path.iter().all(|&e| {
                    arena.elements[e]
                        .resource_limits
                        .dominates(&walk.usage[e].add(&held_total).add(&spec.resources))
                });
            if !fits {
                break;
            }
            available = available.sub(&spec.resources);
            held_total = held_total.add(&spec.resources);
            *new_here.entry(task).or_default() += 1;
            left -= 1;
        }
    }
    new_here
}

/// What a node holds besides what the assembling gang may newly hold there: for others, and
/// for the gang itself.
struct HeldHere {
    others: Option<backfill::Held>,
    own: Resources,
}

impl HeldHere {
    /// What `node_id` holds for others than tree `t`'s assembling gang, and for it.
    fn of(books: &Books, holds: &Holds, t: usize, node_id: &NodeId) -> HeldHere {
        let a = &holds.gangs[&t];
        HeldHere {
            others: backfill::held_from(books, holds, node_id, &a.operation),
            own: a.holds.get(node_id).map_or(Resources::ZERO, |tasks| {
                backfill::held_resources(books, &a.operation, tasks)
            }),
        }
    }
}

/// Adds `new_here` to what tree `t`'s assembling gang holds on `node_id`.
fn add_holds(holds: &mut Holds, t: usize, node_id: &NodeId, new_here: BTreeMap<usize, u32>) {
    if new_here.is_empty() {
        return;
    }
    holds.version += 1;
    let a = holds.gangs.get_mut(&t).expect("assembling");
    a.add(node_id, new_here);
}

/// Whether tree `t`'s ready assembly may start its jobs: it has begun to, or every node it
/// holds jobs on has room for them now (then it begins). What it held while it gathered may
/// have been lent to jobs expected to end before it needed them, which may still run when it
/// has gathered everything earlier than expected: it then waits for them (nothing else may
/// take what it holds meanwhile), so that it never starts in parts. Found lent, it is not
/// looked at again until room frees up (the holds' `room_epoch`).
fn whole_room_free(books: &Books, holds: &mut Holds, t: usize) -> bool {
    let epoch = holds.room_epoch;
    let Some(a) = holds.gangs.get(&t) else {
        return false;
    };
    if a.starting {
        return true;
    }
    if a.lent_at == Some(epoch) {
        return false;
    }
    let free = held_room_free(books, holds, a);
    let a = holds.gangs.get_mut(&t).expect("looked up above");
    if free {
        a.starting = true;
        return true;
    }
    let first = a.lent_at.replace(epoch).is_none();
    if first {
        // What it does not hold is now anyone's (see `Holds::waits_for_lent`): gangs turned down
        // while it gathered are offered nodes again.
        holds.gang_unplaceable_at.clear();
        holds.assemblies_changed += 1;
        holds.version += 1;
    }
    false
}

/// Whether every node `a` holds jobs on has room for them now, beside what the node holds
/// for others (a gang placed whole on what `a` lent it, not started yet).
fn held_room_free(books: &Books, holds: &Holds, a: &GangAssembly) -> bool {
    lent_on(books, holds, a).next().is_none()
}

/// The nodes `a` holds jobs on that lack room for them now (what it lent is still in use, or
/// held for a gang placed whole on it), in node order.
pub(crate) fn lent_on<'a>(
    books: &'a Books,
    holds: &'a Holds,
    a: &'a GangAssembly,
) -> impl Iterator<Item = &'a NodeId> {
    let op = books.operations.get(&a.operation);
    a.holds.iter().filter_map(move |(node, tasks)| {
        let others = backfill::held_from(books, holds, node, &a.operation)
            .map_or(Resources::ZERO, |h| h.reserved.add(&h.gangs));
        let free = books.nodes.get(node).is_some_and(|n| {
            n.free()
                .dominates(&backfill::resources_of(op, tasks).add(&others))
        });
        (!free).then_some(node)
    })
}

/// At a heartbeat of tree `t`, before gangs are offered the node: whether its ready assembly
/// may start or waits for what it lent, as of now ([`whole_room_free`]).
pub(crate) fn note_lent(books: &Books, holds: &mut Holds, t: usize) {
    if holds.gangs.get(&t).is_some_and(|a| a.ready) {
        whole_room_free(books, holds, t);
    }
}

/// Marks tree `t`'s assembling gang ready if it holds every pending job.
fn mark_ready(books: &Books, holds: &mut Holds, events: &mut EventLog, now: Millis, t: usize) {
    let a = holds.gangs.get_mut(&t).expect("assembling");
    let pending = books.operations[&a.operation].pending_job_count();
    if a.held_jobs() >= pending && pending > 0 {
        holds.version += 1;
        let a = holds.gangs.get_mut(&t).expect("assembling");
        a.ready = true;
        // Its nodes start its jobs at their next heartbeats: nothing may backfill now.
        a.backfill_until = None;
        let (jobs, nodes) = (a.held_jobs(), a.holds.len() as u32);
        events.log(
            now,
            EventKind::GangAssembled {
                operation: a.operation.clone(),
                jobs,
                nodes,
            },
        );
    }
}

/// `gang_placement.hold = "needed"`: the assembling gang of `walk`'s tree (the operation at
/// `leaf`) plans its start as EASY backfilling plans the queue head's, unless its plan is
/// current (made at `now` with no allocation ended, node added or hold released since):
/// its expected start is when room for all its pending jobs is expected from the running
/// allocations' time limits ([`backfill::shadow`], in jobs of its largest pending shape), and
/// of the room free now it holds, node by node in id order, all but the surplus it will have
/// then (everything free when it has no expected start). The rest is left to any job; jobs
/// that end by its expected start may also use what it holds.
fn plan_needed(
    arena: &Arena,
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    leaf: ElementIndex,
    walk: &Walk,
) {
    let t = walk.tree;
    let key = plan_key(books, holds, now);
    let a = &holds.gangs[&t];
    if a.ready || a.planned == Some(key) {
        return;
    }
    // Since the plan was made (at this time, with this room epoch), if the only allocations
    // started are jobs of gangs placed whole, each on a node where all its held jobs started,
    // and no gang was placed, no node changed, no job reservation or other gang holds anything
    // and no limit on the gang's path can bind, the plan made again is the same (what was held
    // for them is what they now use, until the same ends): it is only marked current.
    let inputs = plan_inputs(books, holds, now);
    let same_inputs = a.planned.is_some()
        && a.plan_inputs == Some(inputs)
        && holds.reservations.is_empty()
        && holds.gangs.len() == 1
        && std::iter::once(leaf)
            .chain(arena.ancestors(leaf))
            .all(|e| arena.elements[e].resource_limits == Resources::infinite());
    if same_inputs {
        #[cfg(debug_assertions)]
        {
            let mut again = holds.clone();
            again.gangs.get_mut(&t).expect("assembling").planned = None;
            plan_needed(
                arena,
                books,
                &mut again,
                &mut EventLog::default(),
                now,
                leaf,
                walk,
            );
            let mut kept = holds.gangs[&t].clone();
            kept.planned = Some(key);
            assert_eq!(again.gangs[&t], kept, "a plan marked current would change");
        }
        holds.gangs.get_mut(&t).expect("assembling").planned = Some(key);
        return;
    }
    let op_id = a.operation.clone();
    let Some((pending, plan)) = backfill::needed_shadow(books, holds, arena, now, t, &op_id) else {
        return;
    };
    // Gangs turned down before it in this room epoch were so under an earlier plan, which
    // allocations started since may have given an earlier end left out (see
    // `clock_frees_room`).
    holds.note_plan_holds_until(plan.next_end);
    // What fits now is held whole (overdue allocations counted as ending now may make the
    // surplus exceed what is free); otherwise all but the surplus of what is free.
    let target = match plan.until {
        _ if plan.room_now >= u64::from(pending) => u64::from(pending),
        Some(_) => plan.room_now.saturating_sub(plan.surplus),
        None => u64::from(pending),
    }
    .min(u64::from(pending)) as u32;
    let op = &books.operations[&op_id];
    // A node whose free resources fit no job of the gang holds nothing for it (see
    // `hold_here`): when the room index says such nodes are most of them, only the others
    // are visited, in the same id order.
    let fits_a_job = |free: &Resources| {
        let free = free.max(&Resources::ZERO);
        (op.spec.tasks.iter()).any(|spec| free.dominates(&spec.resources))
    };
    let candidates: Box<dyn Iterator<Item = &Node>> = if target > 0 {
        books.nodes_to_scan(t, fits_a_job)
    } else {
        Box::new(std::iter::empty())
    };
    let nodes = candidates.filter(|n| {
        n.tree == Some(t)
            && n.scheduler_jobs_enabled
            && !n.draining
            && (!arena.any_tag_filter() || arena.tags_allow(leaf, &n.tags))
    });
    let mut held = 0u32;
    let mut so_far = HeldSoFar {
        total: Resources::ZERO,
        per_task: BTreeMap::new(),
    };
    // What it holds on a node is what this pass finds there (each node is visited once, and
    // what it held before counts for nothing), set after the pass, which reads the others'
    // holds node by node.
    let mut cursor = backfill::HeldCursor::new(books, holds, &op_id);
    let mut added: Vec<(&NodeId, BTreeMap<usize, u32>)> = Vec::new();
    let path = path_of(arena, leaf);
    for node in nodes {
        if held >= target {
            break;
        }
        let new_here = hold_here(arena, node, op, &path, walk, target - held, &so_far, || {
            HeldHere {
                others: cursor.held_at(&node.id),
                own: Resources::ZERO,
            }
        });
        held += new_here.values().sum::<u32>();
        so_far.add(op, &new_here);
        if !new_here.is_empty() {
            added.push((&node.id, new_here));
        }
    }
    drop(cursor);
    // Only the nodes whose holds changed are touched (what is held changes little from one
    // plan to the next).
    let a = holds.gangs.get_mut(&t).expect("assembling");
    let changed = a.replace_holds(added);
    let until_changed = a.backfill_until != plan.until;
    a.hold_target = Some(target);
    a.backfill_until = plan.until;
    a.next_end = plan.next_end;
    a.planned = Some(key);
    a.plan_inputs = Some(inputs);
    if changed || until_changed {
        holds.version += 1;
    }
    mark_ready(books, holds, events, now, t);
}

/// What a plan is made for: the time, the room freed (`room_epoch`) and the allocations
/// started (a job that ends before the gang's start may have started on what it did not
/// hold, which it then no longer needs to hold as much of).
fn plan_key(books: &Books, holds: &Holds, now: Millis) -> (Millis, u64, u64) {
    (now, holds.room_epoch, books.next_allocation)
}

/// What a plan made now depends on besides jobs of gangs placed whole starting where they
/// held them (see [`plan_needed`]): the time, the room freed, the other allocations started,
/// the gangs placed whole and the node changes.
fn plan_inputs(books: &Books, holds: &Holds, now: Millis) -> [u64; 5] {
    [
        now,
        holds.room_epoch,
        books.next_allocation - holds.exact_conversions,
        holds.gangs_placed,
        books.node_changes,
    ]
}

/// Whether tree `t`'s assembling gang (if any) holds all its plan needs as of now (see
/// [`plan_needed`]): then what it does not hold is free for any job. Not once it is ready: it
/// is about to start, and the gang after it has made no plan yet.
fn plan_in_force(books: &Books, holds: &Holds, t: usize, now: Millis) -> bool {
    holds.gangs.get(&t).is_some_and(|a| {
        !a.ready
            && a.planned == Some(plan_key(books, holds, now))
            && a.hold_target.is_some_and(|target| a.held_jobs() >= target)
    })
}

/// Whether offering a node to any gang operation of `walk`'s tree would leave everything as it
/// is: a gang assembles there, with no expected start and no plan in force (so no other gang
/// may be placed whole: see [`place_gang_now`], and none may assemble: see [`gang_hold`]),
/// and it is ready or has been offered the node already at this heartbeat (inactive in
/// `walk`).
pub(crate) fn others_idle(
    arena: &Arena,
    books: &Books,
    holds: &Holds,
    now: Millis,
    walk: &Walk,
) -> bool {
    let t = walk.tree;
    holds.gangs.get(&t).is_some_and(|a| {
        a.backfill_until.is_none()
            && !plan_in_force(books, holds, t, now)
            && !holds.waits_for_lent(t)
            && (a.ready
                || arena
                    .by_operation
                    .get(&a.operation)
                    .is_none_or(|&leaf| !walk.active[leaf]))
    })
}

/// Ends a gang placed whole (started, or undone).
fn release_placed_gang(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    op: &OperationId,
    reason: HoldEnd,
) {
    if let Some(a) = holds.placed_gangs.remove(op) {
        holds.version += 1;
        // What a gang held and now runs frees no room.
        if reason != HoldEnd::Started {
            holds.room_epoch += 1;
        }
        events.log(
            now,
            EventKind::GangReleased {
                operation: a.operation,
                reason,
            },
        );
    }
}

/// Ends tree `t`'s assembly (its holds are released).
pub(crate) fn release_gang(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    t: usize,
    reason: HoldEnd,
) {
    if let Some(a) = holds.gangs.remove(&t) {
        holds.assemblies_changed += 1;
        holds.version += 1;
        if reason != HoldEnd::Started {
            holds.room_epoch += 1;
        }
        events.log(
            now,
            EventKind::GangReleased {
                operation: a.operation,
                reason,
            },
        );
    }
}

/// The operation finished: its assembly, if any, ends.
pub(crate) fn release_gang_of(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    op: &OperationId,
) {
    let in_trees: Vec<usize> = holds
        .gangs
        .iter()
        .filter(|(_, a)| &a.operation == op)
        .map(|(&t, _)| t)
        .collect();
    for t in in_trees {
        release_gang(holds, events, now, t, HoldEnd::OperationFinished);
    }
    release_placed_gang(holds, events, now, op, HoldEnd::OperationFinished);
    holds.gang_cooldown.remove(op);
    holds.gang_unplaceable_at.remove(op);
}

/// The node is gone: what assembling gangs held there is gathered again elsewhere; gangs
/// placed whole with jobs there are undone.
pub(crate) fn drop_gang_holds_on(
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
    node: &NodeId,
) {
    holds.version += 1;
    for a in holds.gangs.values_mut() {
        if a.release_node(node).is_some() {
            a.unready();
        }
    }
    let undone: Vec<OperationId> = holds
        .placed_gangs
        .iter()
        .filter(|(_, a)| a.holds.contains_key(node))
        .map(|(op, _)| op.clone())
        .collect();
    for op in undone {
        release_placed_gang(holds, events, now, &op, HoldEnd::NodeUnavailable);
    }
}

/// Runs after every fair-share update: assemblies that time out, lose their operation or
/// nodes, or whose tree turned the option off.
pub(crate) fn update_gangs(
    trees: &[PoolTree],
    books: &Books,
    holds: &mut Holds,
    events: &mut EventLog,
    now: Millis,
) {
    holds.gang_cooldown.retain(|_, until| now < *until);
    // Gangs placed whole whose operation no longer waits, or whose tree turned the option
    // off (their nodes would otherwise start them at their next heartbeats).
    let stale: Vec<(OperationId, HoldEnd)> = holds
        .placed_gangs
        .keys()
        .filter_map(|id| {
            let op = books.operations.get(id);
            if !op
                .is_some_and(|op| op.state == OperationState::Running && op.pending_job_count() > 0)
            {
                Some((id.clone(), HoldEnd::OperationFinished))
            } else if !op.is_some_and(|op| {
                op.trees
                    .iter()
                    .any(|o| trees[o.tree].config().gang_placement.enable)
            }) {
                Some((id.clone(), HoldEnd::Disabled))
            } else {
                None
            }
        })
        .collect();
    for (op, reason) in stale {
        release_placed_gang(holds, events, now, &op, reason);
    }
    let assembling: Vec<usize> = holds.gangs.keys().copied().collect();
    for t in assembling {
        let config = trees[t].config().gang_placement.clone();
        if !config.enable {
            release_gang(holds, events, now, t, HoldEnd::Disabled);
            continue;
        }
        let a = &holds.gangs[&t];
        let running = books
            .operations
            .get(&a.operation)
            .is_some_and(|op| op.state == OperationState::Running && op.pending_job_count() > 0);
        if !running {
            release_gang(holds, events, now, t, HoldEnd::OperationFinished);
            continue;
        }
        // Nodes it holds jobs on that left its tree, were disabled or drain: none can be
        // unless a node changed since it last looked (it holds jobs only on nodes of its tree
        // that take jobs).
        let lost_on = |a: &GangAssembly| -> Vec<NodeId> {
            a.holds
                .keys()
                .filter(|n| {
                    !books.nodes.get(*n).is_some_and(|node| {
                        node.tree == Some(t) && node.scheduler_jobs_enabled && !node.draining
                    })
                })
                .cloned()
                .collect()
        };
        let lost = if a.nodes_checked == Some(books.node_changes) {
            debug_assert_eq!(
                lost_on(a),
                Vec::<NodeId>::new(),
                "a held node was lost unseen"
            );
            Vec::new()
        } else {
            lost_on(a)
        };
        holds.version += 1;
        let a = holds.gangs.get_mut(&t).expect("present");
        a.nodes_checked = Some(books.node_changes);
        for n in &lost {
            a.release_node(n);
            a.unready();
            a.planned = None;
        }
        if !a.ready && now >= a.since.saturating_add(config.assembly_timeout_ms) {
            let op = a.operation.clone();
            release_gang(holds, events, now, t, HoldEnd::Timeout);
            holds
                .gang_cooldown
                .insert(op, now.saturating_add(config.assembly_timeout_ms));
        } else if !lost.is_empty() && a.holds.is_empty() {
            release_gang(holds, events, now, t, HoldEnd::NodeUnavailable);
        } else if !a.ready {
            // Until when other jobs may backfill what it holds. A gang that holds what it needs
            // plans again at the next heartbeat of its tree; meanwhile its expected start is
            // as of now (nodes may have been lost or added).
            let op = a.operation.clone();
            let arena = &trees[t].arena;
            let (until, next_end) = match config.hold {
                GangHold::AllFree => (
                    backfill::gang_needed_at(books, holds, arena, now, t, &op),
                    None,
                ),
                GangHold::Needed | GangHold::Planned => {
                    backfill::needed_shadow(books, holds, arena, now, t, &op)
                        .map_or((None, None), |(_, plan)| (plan.until, plan.next_end))
                }
            };
            holds.version += 1;
            let a = holds.gangs.get_mut(&t).expect("present");
            a.backfill_until = until;
            a.next_end = next_end;
            if config.hold.plans_head() {
                a.planned = None;
            }
        }
    }
}
