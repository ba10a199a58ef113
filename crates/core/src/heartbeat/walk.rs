//! The heartbeat's descent state (see [`super`]), kept per tree between fair-share updates,
//! and the descent itself over a tree's arena: satisfaction, activity along paths, and the
//! best leaf to serve.

use crate::holds::ParkKey;
use crate::tree::{Arena, ElementRef};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{RESOURCE_COUNT, ResourceVector, Resources};

/// "Infinite" satisfaction (fair share ≈ 0).
const INFINITE_SATISFACTION: f64 = 1e9;
const EPSILON: f64 = 1e-9;

/// Dynamic state of the tree for the descent: usage, activity and satisfaction of every
/// element.
///
/// The scheduler keeps one per tree between fair-share updates (`Scheduler::walks`), updated
/// along the changed path whenever an operation's usage, pending jobs or state change, so that
/// a heartbeat does not walk the whole tree. A heartbeat deactivates, for itself only, the
/// operations that do not fit its node and restores them when it is done.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Walk {
    /// The tree (index) the walk belongs to.
    pub(crate) tree: usize,
    pub(crate) usage: Vec<Resources>,
    pub(crate) active: Vec<bool>,
    /// Satisfaction of each element for the descent (kept up to date along changed paths).
    pub(crate) sat: Vec<f64>,
    /// For pools with many children: their active children ordered for the descent (see
    /// [`Children`]), so that a change below costs O(log children), not O(children).
    pub(crate) children: Vec<Option<Children>>,
    /// Each element's place among its parent's children.
    pub(crate) place: Vec<u32>,
    /// Every operation of the tree is a gang (the tree's operations are fixed between
    /// fair-share updates, and so is whether each is a gang).
    pub(crate) gangs_only: bool,
    /// Whether the operation at each element is a gang operation (false for pools and for
    /// operations the scheduler no longer has), so that a stage need not look it up by id.
    pub(crate) gang: Vec<bool>,
    /// Operations a heartbeat found that no node's offer changes while the holds' park key
    /// stays `parked_key` (gangs that wait behind another one: see
    /// `Holds::offer_changes_nothing`): they stay inactive across heartbeats, so that a
    /// heartbeat does not visit every one of them again, until that key changes
    /// ([`Walk::unpark_stale`]) or their own state does (which refreshes their activity).
    pub(crate) parked: Vec<ElementIndex>,
    /// The park key under which `parked` were parked.
    pub(crate) parked_key: Option<ParkKey>,
}

/// Pools with at least this many children keep them in a [`Children`] tree.
const MANY_CHILDREN: usize = 32;

/// A pool's children as a tournament tree over their places: each node holds the best active
/// child below it for a fair-share pool (the smallest satisfaction, the first of equals: the
/// choice of a scan in children order) and the first active one (a FIFO pool's choice).
/// Satisfactions are never NaN, so the best of a range does not depend on how it is split.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Children {
    /// Leaves at `width..2 * width` (child places), node `k`'s children at `2k` and `2k + 1`.
    nodes: Vec<Best>,
    width: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Best {
    /// The active child with the smallest satisfaction (the first of equals): (sat, place).
    least: Option<(f64, u32)>,
    /// The first active child's place.
    first: Option<u32>,
}

const NONE: Best = Best {
    least: None,
    first: None,
};

impl Best {
    fn of(left: Best, right: Best) -> Best {
        Best {
            least: match (left.least, right.least) {
                (Some(l), Some(r)) => Some(if r.0 < l.0 { r } else { l }),
                (l, r) => l.or(r),
            },
            first: left.first.or(right.first),
        }
    }
}

impl Children {
    fn new(count: usize) -> Children {
        let width = count.next_power_of_two();
        Children {
            nodes: vec![NONE; 2 * width],
            width,
        }
    }

    /// The child at `place` is now `active` with satisfaction `sat`.
    fn set(&mut self, place: u32, active: bool, sat: f64) {
        let mut k = self.width + place as usize;
        let leaf = if active {
            Best {
                least: Some((sat, place)),
                first: Some(place),
            }
        } else {
            NONE
        };
        if self.nodes[k] == leaf {
            return;
        }
        self.nodes[k] = leaf;
        while k > 1 {
            k /= 2;
            self.nodes[k] = Best::of(self.nodes[2 * k], self.nodes[2 * k + 1]);
        }
    }

    fn best(&self) -> Best {
        self.nodes[1]
    }
}

impl Walk {
    /// A walk of tree `tree` over `n` elements: no usage, everything active, to be filled in
    /// and finished with [`Walk::sum_up`].
    pub(crate) fn new(tree: usize, n: usize) -> Walk {
        Walk {
            tree,
            usage: vec![Resources::ZERO; n],
            active: vec![true; n],
            sat: vec![f64::INFINITY; n],
            children: Vec::new(),
            place: Vec::new(),
            gangs_only: true,
            gang: vec![false; n],
            parked: Vec::new(),
            parked_key: None,
        }
    }

    /// Parks operation `i` (found, under park key `key`, to be left as it is by any node's
    /// offer): inactive until the key changes. False (and nothing done) if others are parked
    /// under another key: it is then only deactivated for this heartbeat, by the caller.
    pub(crate) fn park(&mut self, arena: &Arena, i: ElementIndex, key: ParkKey) -> bool {
        if self.parked.is_empty() {
            self.parked_key = Some(key);
        }
        if self.parked_key != Some(key) {
            return false;
        }
        self.parked.push(i);
        self.deactivate(arena, i);
        true
    }

    /// Makes every parked operation's activity what `active` says (whether it wants jobs at
    /// all) again.
    pub(crate) fn unpark_all(&mut self, arena: &Arena, active: impl Fn(ElementIndex) -> bool) {
        let parked = std::mem::take(&mut self.parked);
        self.restore(arena, &parked, active);
        self.parked_key = None;
    }

    /// Makes the activity of each operation in `leaves` what `active` says, then refreshes
    /// their paths: each element on them once, children before parents (an element's values
    /// follow from its children's alone, so this is what refreshing each path in turn gives,
    /// without refreshing the shared ancestors once per leaf).
    pub(crate) fn restore(
        &mut self,
        arena: &Arena,
        leaves: &[ElementIndex],
        active: impl Fn(ElementIndex) -> bool,
    ) {
        let mut touched: Vec<ElementIndex> = Vec::with_capacity(leaves.len() * 3);
        for &leaf in leaves {
            self.active[leaf] = active(leaf);
            let mut cur = Some(leaf);
            while let Some(c) = cur {
                touched.push(c);
                cur = arena.elements[c].parent;
                debug_assert!(cur.is_none_or(|p| p < c), "a parent after its child");
            }
        }
        // A parent's index is below its children's (the arena is built top-down).
        touched.sort_unstable_by(|a, b| b.cmp(a));
        touched.dedup();
        for i in touched {
            self.refresh(arena, i);
        }
    }

    /// Unparks every parked operation ([`Walk::unpark_all`]) if they were parked under
    /// another key than `key`.
    pub(crate) fn unpark_stale(
        &mut self,
        arena: &Arena,
        key: ParkKey,
        active: impl Fn(ElementIndex) -> bool,
    ) {
        if !self.parked.is_empty() && self.parked_key != Some(key) {
            self.unpark_all(arena, active);
        }
    }

    /// Unparks operation `i` if it is parked (its activity: `active`).
    pub(crate) fn unpark(&mut self, arena: &Arena, i: ElementIndex, active: bool) {
        if let Some(k) = self.parked.iter().position(|&p| p == i) {
            self.parked.swap_remove(k);
            self.active[i] = active;
            self.refresh_path(arena, i);
        }
    }

    /// With the operations' usage and activity set: adds usage up to the root and computes
    /// every element's activity and satisfaction.
    pub(crate) fn sum_up(&mut self, arena: &Arena) {
        let n = arena.elements.len();
        for i in (1..n).rev() {
            if let Some(p) = arena.elements[i].parent {
                self.usage[p] = self.usage[p].add(&self.usage[i]);
            }
        }
        self.place = vec![0; n];
        self.children = arena
            .elements
            .iter()
            .map(|e| {
                for (k, &c) in e.children.iter().enumerate() {
                    self.place[c] = k as u32;
                }
                (e.children.len() >= MANY_CHILDREN).then(|| Children::new(e.children.len()))
            })
            .collect();
        // Children come after their parents in the arena, so a reverse sweep is bottom-up.
        for i in (0..n).rev() {
            self.refresh(arena, i);
        }
    }

    /// Recomputes an element's activity (pools: some child active) and satisfaction.
    pub(crate) fn refresh(&mut self, arena: &Arena, i: ElementIndex) {
        self.refresh_one(arena, i);
        // Its parent's tree of children, if it keeps one, learns the new values.
        if let Some(p) = arena.elements[i].parent
            && let Some(children) = self.children.get_mut(p).and_then(Option::as_mut)
        {
            children.set(self.place[i], self.active[i], self.sat[i]);
        }
    }

    fn refresh_one(&mut self, arena: &Arena, i: ElementIndex) {
        let e = &arena.elements[i];
        if matches!(e.kind, ElementRef::Operation(_)) {
            self.sat[i] = if self.active[i] {
                self.satisfaction(arena, i)
            } else {
                f64::INFINITY
            };
            return;
        }
        let (mut best, any) = match self.children.get(i).and_then(Option::as_ref) {
            Some(children) => match children.best().least {
                Some((sat, _)) => (sat, true),
                None => (f64::INFINITY, false),
            },
            None => {
                let mut best = f64::INFINITY;
                let mut any = false;
                for &c in &e.children {
                    if self.active[c] {
                        any = true;
                        best = best.min(self.sat[c]);
                    }
                }
                (best, any)
            }
        };
        self.active[i] = any;
        // use_pool_satisfaction_for_scheduling (spec §1.4; YTsaurus `UpdateDynamicAttributes`
        // takes the std::min): the pool competes with the smaller of its best child's and its
        // own local satisfaction, so a pool below its fair share as a whole attracts heartbeats
        // even when its active children look satisfied.
        if any && e.use_pool_satisfaction_for_scheduling {
            best = best.min(self.satisfaction(arena, i));
        }
        self.sat[i] = best;
    }

    /// Refreshes `i` and its ancestors after a change of usage or activity at `i`.
    pub(crate) fn refresh_path(&mut self, arena: &Arena, i: ElementIndex) {
        let mut cur = Some(i);
        while let Some(c) = cur {
            self.refresh(arena, c);
            cur = arena.elements[c].parent;
        }
    }

    /// Marks `i` inactive and propagates to ancestors without active children.
    pub(crate) fn deactivate(&mut self, arena: &Arena, i: ElementIndex) {
        self.active[i] = false;
        self.refresh_path(arena, i);
    }

    fn satisfaction(&self, arena: &Arena, i: ElementIndex) -> f64 {
        let e = &arena.elements[i];
        let usage = ResourceVector::from_resources(&self.usage[i], &arena.total_resources);
        local_satisfaction(&usage, &e.attrs.fair_share.total, &e.attrs.demand_share)
    }

    /// Descends from the root to the active operation that should get the next job.
    pub(crate) fn best_leaf(&self, arena: &Arena) -> Option<ElementIndex> {
        if !self.active[0] {
            return None;
        }
        let mut cur = 0;
        loop {
            let e = &arena.elements[cur];
            if matches!(e.kind, ElementRef::Operation(_)) {
                return Some(cur);
            }
            let next = if let Some(children) = self.children.get(cur).and_then(Option::as_ref) {
                let best = children.best();
                let place = if e.schedule_in_fifo_order {
                    best.first
                } else {
                    best.least.map(|(_, place)| place)
                };
                place.map(|k| e.children[k as usize])
            } else if e.schedule_in_fifo_order {
                e.children.iter().copied().find(|&c| self.active[c])
            } else {
                let mut best: Option<(f64, ElementIndex)> = None;
                for &c in &e.children {
                    if self.active[c] && best.is_none_or(|(b, _)| self.sat[c] < b) {
                        best = Some((self.sat[c], c));
                    }
                }
                best.map(|(_, c)| c)
            };
            cur = next?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a scan of the children in order chooses: the first active child of least
    /// satisfaction, and the first active child.
    fn scan(state: &[(bool, f64)]) -> (Option<(f64, u32)>, Option<u32>) {
        let mut least: Option<(f64, u32)> = None;
        for (k, &(active, sat)) in state.iter().enumerate() {
            if active && least.is_none_or(|(b, _)| sat < b) {
                least = Some((sat, k as u32));
            }
        }
        let first = state
            .iter()
            .position(|&(active, _)| active)
            .map(|k| k as u32);
        (least, first)
    }

    proptest! {
        /// The tree of children chooses what a scan in children order chooses, after every
        /// change (satisfactions from a few values, so that ties are common).
        #[test]
        fn children_choose_as_a_scan_does(
            count in 1usize..80,
            changes in prop::collection::vec((0usize..80, any::<bool>(), 0u8..4), 0..200),
        ) {
            let mut tree = Children::new(count);
            let mut state = vec![(false, f64::INFINITY); count];
            for (place, active, sat) in changes {
                let place = place % count;
                let sat = [0.25, 0.5, 1.0, f64::INFINITY][sat as usize];
                state[place] = (active, sat);
                tree.set(place as u32, active, sat);
                let best = tree.best();
                prop_assert_eq!((best.least, best.first), scan(&state));
            }
        }
    }
}
