//! Conservative backfilling's plan (`gang_placement.hold = "planned"`): every waiting gang of a
//! tree has a planned start, and a gang is placed whole (see `gang::place_gang_now`) only when
//! its planned start is now.
//!
//! The plan is a profile of the resources free in the tree over time: the tree's schedulable
//! nodes as one pool, less the running allocations until they are expected to end (start +
//! time limit, or now if that has passed; never without a limit) and the gangs placed whole
//! (from now until their time limits). The waiting gangs (those `gang::gang_hold` could pick as
//! the one that has waited longest: running, with pending jobs, not placed whole, not cooling
//! down, active) are planned in start order: each at the earliest time from which all its
//! pending jobs fit for its time limit (the longest of its pending tasks', at least 1 ms;
//! forever without one), which then holds them in the profile for the gangs after it. A gang
//! that does not fit even into the whole tree has no planned start.
//!
//! So a gang starts ahead of another (backfills) only where that delays none planned before
//! it, as in conservative backfilling; the assembling gang (the first waiting) keeps holding
//! what it needs as with `hold = "needed"`. The plan is made from scratch when what it depends
//! on changed (the time, allocations started or ended, gangs placed, nodes, operations
//! submitted): in queue order, so a gang that ends early lets the ones after it move up, and
//! one earlier in the queue may take a gap a later one had been planned in.
//!
//! Counting the nodes as one pool is exact when jobs and nodes come in equal units (as a
//! trace's single-processor nodes); with larger nodes a gang planned now may not find the
//! nodes for its jobs (then it waits, keeping its planned start now, so that nothing planned
//! after it passes it by overlapping it).

#[cfg(debug_assertions)]
use crate::backfill::expected_end;
use crate::holds::{GangPlan, Holds};
use crate::model::{Millis, Operation, OperationId, OperationState};
use crate::state::Books;
use crate::tree::Arena;
use fairsched_resources::{RESOURCE_COUNT, Resources};
use std::collections::BTreeMap;

/// The planned start of gang `op` in tree `t` (its arena `arena`) as of `now` (`None`: it is
/// not a waiting gang, or it fits nowhere).
pub(crate) fn planned_start(
    arena: &Arena,
    books: &Books,
    holds: &mut Holds,
    now: Millis,
    t: usize,
    op: &OperationId,
) -> Option<Millis> {
    let key = plan_key(books, holds, now);
    let kept = holds
        .gang_plan
        .as_ref()
        .filter(|p| p.tree == t && p.key == key && p.starts.contains_key(op));
    if let Some(plan) = kept {
        let start = plan.starts[op];
        #[cfg(debug_assertions)]
        {
            let fresh = plan_starts(arena, books, holds, now, t);
            assert_eq!(
                fresh.get(op),
                Some(&start),
                "a kept conservative plan went out of date"
            );
        }
        return Some(start);
    }
    let starts = plan_starts(arena, books, holds, now, t);
    let start = starts.get(op).copied();
    holds.gang_plan = Some(GangPlan {
        tree: t,
        key,
        starts,
    });
    start
}

/// What a plan depends on: the time, the room freed, the allocations started, the gangs
/// placed, the node changes and the operations submitted.
fn plan_key(books: &Books, holds: &Holds, now: Millis) -> [u64; 6] {
    [
        now,
        holds.room_epoch,
        books.next_allocation,
        holds.gangs_placed,
        books.node_changes,
        books.next_start_seq,
    ]
}

/// The planned start of every waiting gang of tree `t` that fits (see the module
/// documentation).
fn plan_starts(
    arena: &Arena,
    books: &Books,
    holds: &Holds,
    now: Millis,
    t: usize,
) -> BTreeMap<OperationId, Millis> {
    let mut profile = base_profile(books, holds, now, t);
    let mut starts = BTreeMap::new();
    for op in books.unfinished_operations() {
        if !waits_to_be_placed(op, holds, now) {
            continue;
        }
        let Some(&leaf) = arena.by_operation.get(&op.spec.id) else {
            continue;
        };
        if !crate::heartbeat::descent::globally_active(arena, &books.operations, leaf) {
            continue;
        }
        let mut need = Resources::ZERO;
        let mut duration: Option<u64> = Some(1);
        for (spec, task) in op.spec.tasks.iter().zip(&op.tasks) {
            if task.pending == 0 {
                continue;
            }
            need = need.add(&times(&spec.resources, task.pending));
            duration = match (duration, spec.time_limit_ms) {
                (Some(d), Some(l)) => Some(d.max(l)),
                _ => None,
            };
        }
        if let Some(at) = profile.earliest(&need, duration) {
            let until = duration.map_or(Millis::MAX, |d| at.saturating_add(d));
            profile.reserve(at, until, &need);
            starts.insert(op.spec.id.clone(), at);
        }
    }
    starts
}

/// The tree's free resources from `now` on, before any waiting gang is planned: from the room
/// index (what is free on the schedulable nodes, by amount; the allocations with a time limit
/// by expected end), so the cost is the distinct amounts of free room and the running
/// allocations, not the nodes; debug builds check it against the scan of every node.
fn base_profile(books: &Books, holds: &Holds, now: Millis, t: usize) -> Profile {
    let room = &books.room;
    // What is free now, with the allocations past their limits counted as ending now.
    let mut free = Resources::ZERO;
    for (f, count) in room.free_in(t) {
        free = free.add(&times(&f, count));
    }
    let all_schedulable = room.all_schedulable();
    let mut ends: Vec<(Millis, Resources)> = Vec::new();
    for (end, _, slot, resources) in room.ends_in(t) {
        if !all_schedulable && room.counted_at(slot).is_none_or(|(tree, _)| tree != t) {
            continue;
        }
        if end <= now {
            free = free.add(&resources);
        } else {
            match ends.last_mut() {
                Some((e, r)) if *e == end => *r = r.add(&resources),
                _ => ends.push((end, resources)),
            }
        }
    }
    let mut placed: BTreeMap<Millis, Resources> = BTreeMap::new();
    for (end, resources) in placed_gangs(books, holds, now, t) {
        free = free.sub(&resources);
        if let Some(end) = end {
            let e = placed.entry(end).or_insert(Resources::ZERO);
            *e = e.add(&resources);
        }
    }
    let mut steps: Vec<(Millis, Resources)> = Vec::with_capacity(ends.len() + placed.len() + 1);
    steps.push((now, free));
    let mut ends = ends.into_iter().peekable();
    let mut placed = placed.into_iter().peekable();
    loop {
        let (end, resources) = match (ends.peek(), placed.peek()) {
            (Some(a), Some(b)) if b.0 < a.0 => placed.next(),
            (Some(a), Some(b)) if b.0 == a.0 => {
                let (end, r) = ends.next().expect("peeked");
                let (_, p) = placed.next().expect("peeked");
                Some((end, r.add(&p)))
            }
            (Some(_), _) => ends.next(),
            (None, _) => placed.next(),
        }
        .map_or((None, Resources::ZERO), |(e, r)| (Some(e), r));
        let Some(end) = end else { break };
        free = free.add(&resources);
        steps.push((end, free));
    }
    let profile = Profile { steps };
    #[cfg(debug_assertions)]
    {
        let scanned = base_profile_scan(books, holds, now, t);
        assert_eq!(
            profile.steps, scanned.steps,
            "the room index disagrees with the books"
        );
    }
    profile
}

/// What the gangs placed whole hold in tree `t`, by job: until when (`None`: they have no time
/// limit), and how much. They start at their nodes' next heartbeats and run to their limits.
fn placed_gangs(
    books: &Books,
    holds: &Holds,
    now: Millis,
    t: usize,
) -> Vec<(Option<Millis>, Resources)> {
    let mut out = Vec::new();
    for a in holds.placed_gangs.values() {
        let Some(o) = books.operations.get(&a.operation) else {
            continue;
        };
        for (node, tasks) in &a.holds {
            if books.nodes.get(node).is_none_or(|n| n.tree != Some(t)) {
                continue;
            }
            for (&task, &count) in tasks {
                let spec = &o.spec.tasks[task];
                let end = spec.time_limit_ms.map(|l| now.saturating_add(l.max(1)));
                out.push((end, times(&spec.resources, count)));
            }
        }
    }
    out
}

/// [`base_profile`] by a scan of every node of the tree and every allocation there.
#[cfg(debug_assertions)]
fn base_profile_scan(books: &Books, holds: &Holds, now: Millis, t: usize) -> Profile {
    let mut total = Resources::ZERO;
    let mut ends: BTreeMap<Millis, Resources> = BTreeMap::new();
    let mut forever = Resources::ZERO;
    let mut end_at = |end: Option<Millis>, resources: &Resources| match end {
        Some(end) if end > now => {
            let e = ends.entry(end).or_insert(Resources::ZERO);
            *e = e.add(resources);
        }
        Some(_) => {}
        None => forever = forever.add(resources),
    };
    for node in books.nodes.values() {
        if node.tree != Some(t) || !node.scheduler_jobs_enabled || node.draining {
            continue;
        }
        total = total.add(&node.resources);
        for id in &node.allocations {
            if let Some(a) = books.allocations.get(id) {
                end_at(expected_end(books, now, a), &a.resources);
            }
        }
    }
    for (end, resources) in placed_gangs(books, holds, now, t) {
        end_at(end, &resources);
    }
    // (Sums of allocations' resources, not negative: the order of the additions does not
    // matter.)
    let mut free = ends.values().fold(total.sub(&forever), |f, r| f.sub(r));
    let mut steps = Vec::with_capacity(ends.len() + 1);
    steps.push((now, free));
    for (end, resources) in ends {
        free = free.add(&resources);
        steps.push((end, free));
    }
    Profile { steps }
}

/// `count` times `r`.
fn times(r: &Resources, count: u32) -> Resources {
    let raw = r.raw();
    let mut out = [0i64; RESOURCE_COUNT];
    for (o, x) in out.iter_mut().zip(raw) {
        *o = x.saturating_mul(i64::from(count));
    }
    Resources::from_raw(out)
}

/// Free resources over time: `(time, free from then until the next step)`, times increasing;
/// the last step lasts forever.
#[derive(Debug)]
struct Profile {
    steps: Vec<(Millis, Resources)>,
}

impl Profile {
    /// Makes `at` (no earlier than the first step) the start of a step.
    fn split(&mut self, at: Millis) {
        let i = self.steps.partition_point(|s| s.0 <= at);
        if self.steps[i - 1].0 != at {
            let free = self.steps[i - 1].1;
            self.steps.insert(i, (at, free));
        }
    }

    /// Takes `r` during [from, to) (`to` = `Millis::MAX`: forever).
    fn reserve(&mut self, from: Millis, to: Millis, r: &Resources) {
        if from >= to {
            return;
        }
        self.split(from);
        if to != Millis::MAX {
            self.split(to);
        }
        let first = self.steps.partition_point(|s| s.0 < from);
        let end = self.steps.partition_point(|s| s.0 < to);
        for step in &mut self.steps[first..end] {
            step.1 = step.1.sub(r);
        }
    }

    /// The earliest step start from which `need` is free for `duration` ms (`None`: forever),
    /// if any. Every candidate is a step start: room frees up only there.
    fn earliest(&self, need: &Resources, duration: Option<u64>) -> Option<Millis> {
        let mut i = 0;
        'candidates: while i < self.steps.len() {
            let from = self.steps[i].0;
            let to = duration.map_or(Millis::MAX, |d| from.saturating_add(d));
            let mut k = i;
            while k < self.steps.len() && self.steps[k].0 < to {
                if !self.steps[k].1.dominates(need) {
                    // No window starting before the end of step k holds it.
                    i = k + 1;
                    continue 'candidates;
                }
                k += 1;
            }
            return Some(from);
        }
        None
    }
}

/// A running gang with jobs pending that is neither placed nor cooling down after a failed
/// placement: one the head's plan (and `hold = "planned"`'s) may be for.
pub(crate) fn waits_to_be_placed(op: &Operation, holds: &Holds, now: Millis) -> bool {
    op.is_gang()
        && op.state == OperationState::Running
        && op.pending_job_count() > 0
        && !holds.placed_gangs.contains_key(&op.spec.id)
        && holds
            .gang_cooldown
            .get(&op.spec.id)
            .is_none_or(|&until| now >= until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(n: i64) -> Resources {
        Resources::from_raw([0, n, 0, 0, 0])
    }

    #[test]
    fn a_profile_finds_the_earliest_window_and_keeps_it() {
        let mut p = Profile {
            steps: vec![(0, cpu(10))],
        };
        p.reserve(0, 10, &cpu(6));
        p.reserve(10, 20, &cpu(6));
        assert_eq!(p.earliest(&cpu(4), Some(35)), Some(0));
        assert_eq!(p.earliest(&cpu(5), Some(5)), Some(20));
        assert_eq!(p.earliest(&cpu(11), Some(1)), None);
        p.reserve(20, Millis::MAX, &cpu(2));
        assert_eq!(p.earliest(&cpu(9), None), None);
        assert_eq!(p.earliest(&cpu(8), None), Some(20));
    }
}
