//! A bound on the room a gang placed whole may find (see `gang::place_gang_now`) that counts
//! what others hold: when none of the gang's pending jobs may backfill any hold (each would
//! end after every hold's backfill time, or has no time limit), it fits only into what is free
//! less everything held, so it cannot be placed when that room is smaller than its jobs.
//!
//! Without it a gang waiting behind a queue head that holds most of the free room scanned
//! every node to find so, at every room epoch. What is held on each node is summed once per
//! change of the holds ([`HeldSum`], by the node's slot in the room index), the nodes counted
//! by (free, unheld) room once per change of the free room or of the holds ([`UnheldMemo`],
//! kept in the holds by their and the room index's versions; debug builds check both against
//! fresh ones), and the bound per job shape from that; the cost is the distinct (free,
//! unheld) amounts, not the nodes.

#[cfg(debug_assertions)]
use crate::backfill::held_resources;
use crate::backfill::{fit_count, free_room, resources_of};
use crate::holds::{HeldSum, Holds, UnheldMemo};
#[cfg(debug_assertions)]
use crate::model::NodeId;
use crate::model::{Millis, Operation};
use crate::room::Slot;
use crate::state::Books;
use fairsched_resources::Resources;
use std::collections::{BTreeMap, BTreeSet};

/// At most how many jobs of shape `job` fit in tree `t` into what is free less everything
/// held, for operation `op` (with pending jobs), if none of its pending jobs may backfill any
/// hold at `now` (else `None`: the bound does not apply, nor when `op` holds something itself
/// or nothing is held).
pub(crate) fn room_bound(
    books: &Books,
    holds: &mut Holds,
    now: Millis,
    t: usize,
    op: &Operation,
    job: &Resources,
) -> Option<u64> {
    if !holds.any() || holds.holds_for(&op.spec.id) {
        return None;
    }
    let key = (books.room.version(), holds.version);
    let kept = holds
        .unheld_memo
        .as_ref()
        .is_some_and(|m| m.tree == t && m.key == key);
    if kept {
        #[cfg(debug_assertions)]
        {
            let fresh = memo(books, &held_sum_afresh(books, holds), t, key);
            let m = holds.unheld_memo.as_ref().expect("kept");
            assert_eq!(
                (&fresh.held_nodes, fresh.latest_until),
                (&m.held_nodes, m.latest_until),
                "a kept sum of what is held went out of date"
            );
        }
    } else {
        if holds.held_sum.as_ref().map(|h| h.version) != Some(holds.version) {
            holds.held_sum = Some(held_sum(books, holds));
        }
        let sum = holds.held_sum.as_ref().expect("set above");
        #[cfg(debug_assertions)]
        assert_eq!(
            sum,
            &held_sum_afresh(books, holds),
            "a kept sum of what is held per node went out of date"
        );
        holds.unheld_memo = Some(memo(books, sum, t, key));
    }
    let m = holds.unheld_memo.as_mut().expect("set above");
    // A job may backfill a hold if it ends by that hold's backfill time, the latest of which
    // is `latest_until` (see `Held::for_job`).
    let may_backfill = op.spec.tasks.iter().zip(&op.tasks).any(|(spec, task)| {
        task.pending > 0
            && matches!(
                (spec.time_limit_ms, m.latest_until),
                (Some(l), Some(u)) if now.saturating_add(l) <= u
            )
    });
    if may_backfill {
        return None;
    }
    if let Some(&room) = m.by_shape.get(&job.raw()) {
        return Some(room);
    }
    let held_away: u64 = m
        .held_nodes
        .iter()
        .map(|(&(free, unheld), &count)| {
            let (free, unheld) = (Resources::from_raw(free), Resources::from_raw(unheld));
            u64::from(count) * (fit_count(&free, job) - fit_count(&unheld, job))
        })
        .sum();
    let room = free_room(books, t, job).saturating_sub(held_away);
    m.by_shape.insert(job.raw(), room);
    Some(room)
}

/// What is held on each node the room index has seen, summed up by node (see [`HeldSum`]):
/// the job reservations' summed afresh (there are few), the gangs' kept in
/// [`Holds::held_sums`] and brought up to date on the nodes each gang's holds changed on since
/// (a gang new, or whose list of changes grew long, is counted afresh). A gang gathering
/// changes its holds a node at a time, and holds thousands of nodes.
fn held_sum(books: &Books, holds: &mut Holds) -> HeldSum {
    let sums = &mut holds.held_sums;
    let mut seen = BTreeSet::new();
    let assembling = (holds.gangs.iter_mut()).map(|(t, a)| (Some(*t), a));
    let placed = (holds.placed_gangs.values_mut()).map(|a| (None, a));
    for (tree, a) in assembling.chain(placed) {
        let key = (tree, a.operation.clone());
        let op = books.operations.get(&a.operation);
        let counted = a.counted.yes && sums.gangs.contains_key(&key);
        let touched = std::mem::take(&mut a.counted.touched);
        if counted {
            let mine = sums.gangs.get_mut(&key).expect("counted");
            for node in touched.iter().collect::<BTreeSet<_>>() {
                let Some(slot) = books.room.slot_of(node) else {
                    continue;
                };
                let now = a.holds.get(node).map(|tasks| resources_of(op, tasks));
                let before = match now {
                    Some(r) => mine.insert(slot, r),
                    None => mine.remove(&slot),
                };
                change_total(&mut sums.total, slot, before, now);
            }
        } else {
            if let Some(before) = sums.gangs.remove(&key) {
                for (slot, r) in before {
                    change_total(&mut sums.total, slot, Some(r), None);
                }
            }
            let mut mine = BTreeMap::new();
            for (node, tasks) in &a.holds {
                if let Some(slot) = books.room.slot_of(node) {
                    let r = resources_of(op, tasks);
                    mine.insert(slot, r);
                    change_total(&mut sums.total, slot, None, Some(r));
                }
            }
            sums.gangs.insert(key.clone(), mine);
            a.counted.yes = true;
        }
        seen.insert(key);
    }
    let gone: Vec<_> = (sums.gangs.keys())
        .filter(|k| !seen.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        for (slot, r) in sums.gangs.remove(&key).expect("listed") {
            change_total(&mut sums.total, slot, Some(r), None);
        }
    }
    let mut by_slot: Vec<(Slot, Resources)> = (sums.total.iter())
        .map(|(&slot, &(r, _))| (slot, r))
        .collect();
    let mut latest_until: Option<Millis> = None;
    let mut until = |u: Option<Millis>| {
        if let Some(u) = u {
            latest_until = Some(latest_until.map_or(u, |l| l.max(u)));
        }
    };
    for (node, r) in &holds.reservations {
        if let Some(slot) = books.room.slot_of(node) {
            match by_slot.binary_search_by_key(&slot, |&(s, _)| s) {
                Ok(at) => by_slot[at].1 = by_slot[at].1.add(&r.resources),
                Err(at) => by_slot.insert(at, (slot, r.resources)),
            }
        }
        until(r.backfill_until);
    }
    for a in holds.all_gangs() {
        until(a.backfill_until);
    }
    HeldSum {
        version: holds.version,
        by_slot,
        latest_until,
    }
}

/// One gang's hold on the node in `slot` went from `before` to `now` (`None`: nothing held).
fn change_total(
    total: &mut BTreeMap<Slot, (Resources, u32)>,
    slot: Slot,
    before: Option<Resources>,
    now: Option<Resources>,
) {
    let entry = total.entry(slot).or_insert((Resources::ZERO, 0));
    if let Some(r) = before {
        entry.0 = entry.0.sub(&r);
        entry.1 -= 1;
    }
    if let Some(r) = now {
        entry.0 = entry.0.add(&r);
        entry.1 += 1;
    }
    if entry.1 == 0 {
        total.remove(&slot);
    }
}

/// [`held_sum`] computed from every hold (debug builds check the kept sums against it).
#[cfg(debug_assertions)]
fn held_sum_afresh(books: &Books, holds: &Holds) -> HeldSum {
    let mut held: BTreeMap<Slot, Resources> = BTreeMap::new();
    let mut latest_until: Option<Millis> = None;
    let mut until = |u: Option<Millis>| {
        if let Some(u) = u {
            latest_until = Some(latest_until.map_or(u, |l| l.max(u)));
        }
    };
    let mut add = |node: &NodeId, r: Resources| {
        if let Some(slot) = books.room.slot_of(node) {
            let h = held.entry(slot).or_insert(Resources::ZERO);
            *h = h.add(&r);
        }
    };
    for (node, r) in &holds.reservations {
        add(node, r.resources);
        until(r.backfill_until);
    }
    for a in holds.all_gangs() {
        for (node, tasks) in &a.holds {
            add(node, held_resources(books, &a.operation, tasks));
        }
        until(a.backfill_until);
    }
    HeldSum {
        version: holds.version,
        by_slot: held.into_iter().collect(),
        latest_until,
    }
}

/// What is held on the schedulable nodes of tree `t`, by (free, unheld) room (see
/// [`UnheldMemo`]), from the sum of what is held on each node.
fn memo(books: &Books, sum: &HeldSum, t: usize, key: (u64, u64)) -> UnheldMemo {
    let mut held_nodes = BTreeMap::new();
    for (slot, h) in &sum.by_slot {
        if let Some((tree, free)) = books.room.counted_at(*slot)
            && tree == t
        {
            let free = free.max(&Resources::ZERO);
            let unheld = free.sub(h).max(&Resources::ZERO);
            *held_nodes.entry((free.raw(), unheld.raw())).or_insert(0u32) += 1;
        }
    }
    UnheldMemo {
        tree: t,
        key,
        held_nodes,
        latest_until: sum.latest_until,
        by_shape: BTreeMap::new(),
    }
}
