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

use crate::backfill::{fit_count, free_room, held_resources};
use crate::holds::{HeldSum, Holds, UnheldMemo};
use crate::model::{Millis, NodeId, Operation};
use crate::room::Slot;
use crate::state::Books;
use fairsched_resources::Resources;
use std::collections::BTreeMap;

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
            let fresh = memo(books, &held_sum(books, holds), t, key);
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
            &held_sum(books, holds),
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

/// What is held on each node the room index has seen, summed up by node (see [`HeldSum`]).
fn held_sum(books: &Books, holds: &Holds) -> HeldSum {
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
