//! The heartbeat's descent over a tree (see [`super`]): usage, activity and satisfaction of
//! every element in a [`Walk`], built afresh or kept up to date between fair-share updates as
//! operations change, and the best leaf to serve. Used by every stage that starts jobs
//! (regular, preemptive, gangs) and by why-waiting.

use super::walk::Walk;
use crate::model::NodeId;
use crate::model::OperationState;
use crate::model::PreemptionMode;
use crate::scheduler::Scheduler;
use crate::tree::ElementRef;
use crate::tree::SchedulingStatus;
use fairsched_hdrf::ElementIndex;
use fairsched_resources::RESOURCE_COUNT;
use fairsched_resources::ResourceVector;
use fairsched_resources::Resources;

/// "Infinite" satisfaction (fair share ≈ 0).
const INFINITE_SATISFACTION: f64 = 1e9;
const EPSILON: f64 = 1e-9;

impl Scheduler {
    /// The cluster-wide walk: the cached one (checked against a fresh one in debug builds) or
    /// a new one.
    pub(crate) fn take_cached_walk(&mut self, t: usize) -> Walk {
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
    pub(crate) fn fresh_walk(&self, t: usize) -> Walk {
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
    pub(crate) fn globally_active(&self, t: usize, i: ElementIndex) -> bool {
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
    pub(crate) fn eligible_on(&self, t: usize, i: ElementIndex, node_id: &NodeId) -> bool {
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
    pub(crate) fn refresh(&self, walk: &mut Walk, i: ElementIndex) {
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

    pub(crate) fn satisfaction(&self, walk: &Walk, i: ElementIndex) -> f64 {
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

    /// Whether the operation at `leaf` is a gang operation.
    pub(crate) fn is_gang_leaf(&self, t: usize, leaf: ElementIndex) -> bool {
        match &self.trees[t].arena.elements[leaf].kind {
            ElementRef::Operation(id) => self.operations.get(id).is_some_and(|op| op.is_gang()),
            _ => false,
        }
    }
}

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
