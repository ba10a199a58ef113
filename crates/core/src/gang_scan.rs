//! The node scan of a gang placed whole (see `gang::place_gang_now`): what it would hold on
//! each node, in id order, to place all its pending jobs at once.

use crate::backfill;
use crate::heartbeat::walk::Walk;
use crate::holds::Holds;
use crate::model::{Millis, NodeId};
use crate::state::Books;
use crate::tree::{Arena, ElementRef};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::Resources;
use std::collections::BTreeMap;

/// What the gang operation at `leaf` would hold, node by node in id order, to place all its
/// pending jobs at once into what is free in its tree now less what others hold from its
/// jobs, within its path's limits (`None`: not all fit).
pub(crate) fn scan_nodes(
    arena: &Arena,
    books: &Books,
    holds: &Holds,
    now: Millis,
    leaf: ElementIndex,
    walk: &Walk,
) -> Option<BTreeMap<NodeId, BTreeMap<usize, u32>>> {
    let t = walk.tree;
    let ElementRef::Operation(op_id) = &arena.elements[leaf].kind else {
        return None;
    };
    let op = &books.operations[op_id];
    let allow_regular = arena.elements[leaf].allow_regular_on_ssd;
    let path: Vec<ElementIndex> = std::iter::once(leaf).chain(arena.ancestors(leaf)).collect();
    let mut wanted: Vec<u32> = op.tasks.iter().map(|task| task.pending).collect();
    let mut held_total = Resources::ZERO;
    let mut held_jobs: BTreeMap<NodeId, BTreeMap<usize, u32>> = BTreeMap::new();
    let mut cursor = backfill::HeldCursor::new(books, holds, op_id);
    // A node whose free resources fit none of the jobs wanted is passed over below (they only
    // become fewer): when the room index says such nodes are most of them, only the others
    // are visited, in the same id order.
    let fits_a_wanted = |free: &Resources| {
        (op.spec.tasks.iter().zip(&wanted))
            .any(|(spec, &w)| w > 0 && free.dominates(&spec.resources))
    };
    let nodes = books.nodes_to_scan(t, fits_a_wanted);
    for node in nodes {
        if wanted.iter().all(|&w| w == 0) {
            break;
        }
        if node.tree != Some(t)
            || !node.scheduler_jobs_enabled
            || node.draining
            || (arena.any_tag_filter() && !arena.tags_allow(leaf, &node.tags))
        {
            continue;
        }
        // What others hold only takes from what is free: a node whose free resources fit no
        // wanted job fits none once they are counted.
        let free = node.free();
        if !op
            .spec
            .tasks
            .iter()
            .zip(&wanted)
            .any(|(spec, &w)| w > 0 && free.dominates(&spec.resources))
        {
            continue;
        }
        let held = cursor.held_at(&node.id);
        let mut taken = Resources::ZERO;
        let mut here: BTreeMap<usize, u32> = BTreeMap::new();
        for (task, spec) in op.spec.tasks.iter().enumerate() {
            if wanted[task] == 0
                || arena
                    .ssd
                    .as_ref()
                    .is_some_and(|ssd| !ssd.allows(spec, &node.tags, allow_regular))
            {
                continue;
            }
            let held = held.map_or(Resources::ZERO, |h| h.for_job(now, spec.time_limit_ms));
            let mut available = node.free().sub(&held).sub(&taken);
            while wanted[task] > 0
                && available.dominates(&spec.resources)
                && path.iter().all(|&e| {
                    arena.elements[e]
                        .resource_limits
                        .dominates(&walk.usage[e].add(&held_total).add(&spec.resources))
                })
            {
                available = available.sub(&spec.resources);
                taken = taken.add(&spec.resources);
                held_total = held_total.add(&spec.resources);
                wanted[task] -= 1;
                *here.entry(task).or_default() += 1;
            }
        }
        if !here.is_empty() {
            held_jobs.insert(node.id.clone(), here);
        }
    }
    (wanted.iter().all(|&w| w == 0) && !held_jobs.is_empty()).then_some(held_jobs)
}
