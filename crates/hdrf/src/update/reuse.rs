//! The incremental update: step 10 reuses the functions an element had in the previous update
//! (of the same [`crate::Workspace`]) when everything they were built from is bit for bit the
//! same, copying its S and M segments instead of building F, M and S again.
//!
//! **What an element's functions are built from** (everything `functions.rs` reads for it):
//! whether it is an operation, a FIFO pool or a fair-share pool; an operation's demand and
//! usage shares and whether it takes the gang step function (the tree option, its parent's
//! `allow_gang_step_function`, its `gang` flag); its limits share and its guarantee share
//! (strong plus proposed integral, as the functions read them, at the moment they are built:
//! steps 8 and 9 build some subtrees early with a pool's attributes changed for a while); the
//! children's S, their weights (a fair-share pool's relative weights) and their order (a
//! FIFO pool's `order`); the options `enable_improved_fair_share_by_fit_factor_computation`
//! and `enable_step_function_for_gang_operations` and the tuning
//! (`enable_fast_fifo_fair_share_by_fit_factor_computation` changes nothing: a FIFO pool's
//! functions are concatenated whenever that is the exact sum). Element names only appear in
//! warnings.
//!
//! **When they are reused.** Each element's own inputs are recorded, as bit patterns, in a
//! [`Key`] (its demand, usage, limits and guarantee shares, its weight, its kind), the options
//! in a [`Global`]. Elements are matched to the previous update's structurally, before the
//! steps that build functions: the root to the root, a child to one of the previous children of
//! its parent's match, positionally when the names' hashes agree position by position
//! (the usual case), else by name hash. The match is only a guess of where to look: an element
//! reuses its match's functions only when
//! * the options and tuning are those of the previous update;
//! * its key equals its match's (every bit; a weight in its own key makes its parent check
//!   its children's weights);
//! * every child reused its functions too, and the children (a FIFO pool: its order) are,
//!   position by position, the matches of the previous children (order) of its match: the
//!   children's S, weights and order are then those F was built from;
//! * building the match's functions warned of nothing (a reused element gives no warning, as
//!   building it again would not).
//!
//! So a reused element's functions are those building them again would give, and the update's
//! results are bit-identical to a full update's whatever the previous update was (another tree,
//! other options, nothing: `tests/incremental.rs`). A name hash that collides only loses reuse.
//! The root in classic mode (`Update::root_at_one`) is always computed afresh.
//!
//! The previous update's functions, arenas, keys and structure are kept in the workspace
//! ([`Generation`]); each update writes into the buffers of the update before the previous one
//! and then becomes the previous one (double-buffered arenas).

use super::*;

/// No match in the previous update.
const NONE: u32 = u32::MAX;

/// What building an element's functions reads of the element itself, as bit patterns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Key {
    /// 0: operation, 1: operation with the gang step function, 2: FIFO pool, 3: fair-share
    /// pool (the root included).
    kind: u8,
    weight: u64,
    demand: [u64; RESOURCE_COUNT],
    usage: [u64; RESOURCE_COUNT],
    limits: [u64; RESOURCE_COUNT],
    guarantee: [u64; RESOURCE_COUNT],
}

fn bits(v: &Rv) -> [u64; RESOURCE_COUNT] {
    std::array::from_fn(|r| v[r].to_bits())
}

/// The options and tuning functions depend on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Global {
    improved: bool,
    gang_step: bool,
    envelope: bool,
    exact_sum: crate::plf::ExactSum,
}

/// One update's functions and what they were built from, kept for the next update.
#[derive(Default)]
pub(super) struct Generation {
    pub(super) functions: Vec<Option<Functions>>,
    pub(super) s_arena: Vec<Segment<Rv>>,
    pub(super) m_arena: Vec<Segment<f64>>,
    pub(super) m_points: Vec<Pt>,
    /// Children in the order the update used (FIFO pools).
    pub(super) order: Vec<Vec<ElementIndex>>,
    pub(super) tables: Tables,
}

/// Per element of one update: keys, whether its functions may be reused, the structure.
#[derive(Default)]
pub(super) struct Tables {
    /// `None`: no update was kept (a new workspace).
    global: Option<Global>,
    /// The key of each element's functions (meaningful where `reusable`).
    keys: Vec<Key>,
    /// Whether the element's functions were built with no warning (and are still there: an
    /// improved-mode pool's step data is moved, not copied, when reused).
    reusable: Vec<bool>,
    name_hashes: Vec<u64>,
    /// Element i's children are `children[child_start[i]..child_start[i + 1]]`.
    child_start: Vec<u32>,
    children: Vec<u32>,
}

/// The reuse state of an update in progress.
#[derive(Default)]
pub(super) struct State {
    /// The previous update.
    pub(super) previous: Generation,
    /// This update's tables (kept with its functions for the next one).
    pub(super) tables: Tables,
    /// Each element's match in the previous update (`NONE`: none).
    matched: Vec<u32>,
    /// Whether each element's current functions are its match's, copied.
    reused: Vec<bool>,
    pub(super) count: usize,
}

impl State {
    /// A state for an update after `previous`, writing its tables into `tables` (their
    /// buffers reused) and its matches into `buffers`.
    pub(super) fn new(previous: Generation, tables: Tables, buffers: MatchBuffers) -> State {
        State {
            previous,
            tables,
            matched: buffers.matched,
            reused: buffers.reused,
            count: 0,
        }
    }

    /// The previous update, this update's tables, and the buffers of the matches.
    pub(super) fn into_parts(self) -> (Generation, Tables, MatchBuffers) {
        (
            self.previous,
            self.tables,
            MatchBuffers {
                matched: self.matched,
                reused: self.reused,
            },
        )
    }
}

/// Buffers of the matching kept between updates.
#[derive(Default)]
pub(super) struct MatchBuffers {
    matched: Vec<u32>,
    reused: Vec<bool>,
}

/// FNV-1a of a name (the matching's guess only: a collision loses reuse, never correctness).
fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn index(i: ElementIndex) -> u32 {
    u32::try_from(i).expect("fewer than 2^32 elements")
}

impl Generation {
    /// Nothing of this update is reused (the buffers are kept).
    pub(super) fn forget(&mut self) {
        self.tables.global = None;
    }
}

impl Tables {
    fn children_of(&self, p: u32) -> &[u32] {
        let p = p as usize;
        &self.children[self.child_start[p] as usize..self.child_start[p + 1] as usize]
    }
}

impl Update<'_> {
    fn reuse_global(&self) -> Global {
        Global {
            improved: self
                .opts
                .enable_improved_fair_share_by_fit_factor_computation,
            gang_step: self.opts.enable_step_function_for_gang_operations,
            envelope: self.tuning.envelope(),
            exact_sum: self.tuning.exact_sum(),
        }
    }

    /// Records this update's structure and matches its elements to the previous update's
    /// (before anything builds functions).
    pub(super) fn match_previous(&mut self) {
        let n = self.tree.len();
        let global = self.reuse_global();
        let st = &mut self.reuse;
        let t = &mut st.tables;
        t.global = Some(global);
        t.keys.truncate(n);
        t.keys.resize(n, Key::default());
        t.reusable.clear();
        t.reusable.resize(n, false);
        t.name_hashes.clear();
        t.child_start.clear();
        t.children.clear();
        for e in self.tree.elements() {
            t.name_hashes.push(name_hash(&e.name));
            t.child_start.push(index(t.children.len()));
            t.children.extend(e.children.iter().map(|&c| index(c)));
        }
        t.child_start.push(index(t.children.len()));
        st.reused.clear();
        st.reused.resize(n, false);
        st.matched.clear();
        st.matched.resize(n, NONE);
        let previous = &st.previous.tables;
        if previous.global != Some(global) || previous.keys.is_empty() {
            return;
        }
        st.matched[ROOT] = 0;
        let mut stack = vec![ROOT];
        let mut sorted: Vec<(u64, u32)> = Vec::new();
        let mut used: Vec<bool> = Vec::new();
        while let Some(i) = stack.pop() {
            let p = st.matched[i];
            let current = st.tables.children_of(index(i));
            let before = previous.children_of(p);
            let positional = current.len() == before.len()
                && current.iter().zip(before).all(|(&c, &b)| {
                    st.tables.name_hashes[c as usize] == previous.name_hashes[b as usize]
                });
            if positional {
                for (&c, &b) in current.iter().zip(before) {
                    st.matched[c as usize] = b;
                    stack.push(c as usize);
                }
                continue;
            }
            // Children added, removed or moved: by name hash, each previous child once.
            sorted.clear();
            sorted.extend(
                before
                    .iter()
                    .map(|&b| (previous.name_hashes[b as usize], b)),
            );
            sorted.sort_unstable();
            used.clear();
            used.resize(sorted.len(), false);
            for &c in current {
                let h = st.tables.name_hashes[c as usize];
                let mut k = sorted.partition_point(|&(x, _)| x < h);
                while k < sorted.len() && sorted[k].0 == h && used[k] {
                    k += 1;
                }
                if k < sorted.len() && sorted[k].0 == h {
                    used[k] = true;
                    st.matched[c as usize] = sorted[k].1;
                    stack.push(c as usize);
                }
            }
        }
    }

    /// What building `i`'s functions now reads of `i` itself.
    fn reuse_key(&self, i: ElementIndex) -> Key {
        let a = &self.attrs;
        let kind = if self.is_operation(i) {
            let parent = self.tree.element(i).parent.unwrap_or(ROOT);
            u8::from(
                self.opts.enable_step_function_for_gang_operations
                    && self.step_function_allowed(parent)
                    && self.is_gang(i),
            )
        } else if self.mode(i) == PoolMode::Fifo {
            2
        } else {
            3
        };
        Key {
            kind,
            weight: a.weight[i].to_bits(),
            demand: bits(&a.demand_share[i]),
            usage: bits(&a.usage_share[i]),
            limits: bits(&a.limits_share[i]),
            guarantee: bits(&self.guarantee_share(i)),
        }
    }

    /// `i`'s functions, built (its children's are) or reused from the previous update; records
    /// what they were built from for the next update.
    pub(super) fn build_or_reuse(&mut self, i: ElementIndex, scratch: &mut Scratch) -> Functions {
        let key = self.reuse_key(i);
        self.reuse.tables.keys[i] = key;
        if let Some(functions) = self.reused_functions(i, &key) {
            self.reuse.tables.reusable[i] = true;
            self.reuse.reused[i] = true;
            self.reuse.count += 1;
            return functions;
        }
        let warnings = self.warnings.len();
        let functions = self.build_functions(i, scratch);
        self.reuse.tables.reusable[i] = self.warnings.len() == warnings;
        self.reuse.reused[i] = false;
        functions
    }

    /// The root's functions computed at suggestion 1 only: never reused.
    pub(super) fn not_reusable(&mut self, i: ElementIndex) {
        self.reuse.tables.reusable[i] = false;
        self.reuse.reused[i] = false;
    }

    /// The previous functions of `i`'s match, copied into this update's arenas, when they are
    /// what building `i`'s would give (see the module docs).
    fn reused_functions(&mut self, i: ElementIndex, key: &Key) -> Option<Functions> {
        let st = &self.reuse;
        let p = st.matched[i];
        if p == NONE {
            return None;
        }
        let previous = &st.previous.tables;
        let pu = p as usize;
        if !previous.reusable[pu] || previous.keys[pu] != *key {
            return None;
        }
        let current = st.tables.children_of(index(i));
        let before = previous.children_of(p);
        if current.len() != before.len()
            || !current
                .iter()
                .zip(before)
                .all(|(&c, &b)| st.reused[c as usize] && st.matched[c as usize] == b)
        {
            return None;
        }
        if key.kind == 2 {
            let order = &self.order[i];
            let before = &st.previous.order[pu];
            if order.len() != before.len()
                || !order
                    .iter()
                    .zip(before)
                    .all(|(&c, &b)| st.matched[c] as usize == b)
            {
                return None;
            }
        }
        let previous = &mut self.reuse.previous;
        let f = previous.functions[pu].as_mut()?;
        let s_start = self.s_arena.len();
        self.s_arena
            .extend_from_slice(&previous.s_arena[f.s.clone()]);
        let m = match &f.m {
            None => None,
            Some(KeptM::Points(range)) => {
                let start = self.m_points.len();
                self.m_points
                    .extend_from_slice(&previous.m_points[range.clone()]);
                Some(KeptM::Points(start..self.m_points.len()))
            }
            Some(KeptM::Segments(range)) => {
                let start = self.m_arena.len();
                self.m_arena
                    .extend_from_slice(&previous.m_arena[range.clone()]);
                Some(KeptM::Segments(start..self.m_arena.len()))
            }
        };
        let improved = f.improved.take();
        if improved.is_some() {
            // Moved: a second use (the element built again after steps 8–9 dropped it) builds.
            previous.tables.reusable[pu] = false;
        }
        Some(Functions {
            f_size: f.f_size,
            f_right_bound: f.f_right_bound,
            m_size: f.m_size,
            m,
            s: s_start..self.s_arena.len(),
            improved,
        })
    }
}
