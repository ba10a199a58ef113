//! What the scheduler holds back for some operations: job reservations (see
//! [`crate::reservation`]) and gangs (assembling or placed whole; see [`crate::gang`]), and what
//! a node offers others around them (see [`crate::backfill`]). Data and queries only: the
//! modules named decide when holds are made and released.

use crate::model::{Millis, NodeId, Operation, OperationId};
use crate::room::Slot;
use fairsched_config::GangHold;
use fairsched_resources::{RESOURCE_COUNT, Resources};
use std::collections::{BTreeMap, BTreeSet};

/// Every hold, with the bookkeeping that decides when holds may be made again.
#[derive(Clone, Debug, Default)]
pub(crate) struct Holds {
    /// Resources held for big jobs, by node (`job_reservation`; see [`crate::reservation`]).
    pub(crate) reservations: BTreeMap<NodeId, Reservation>,
    /// Operations whose last job started on their reserved node: they reserve again without a
    /// new wait while they stay blocked.
    pub(crate) reservation_streak: BTreeSet<OperationId>,
    /// The gang assembling in each tree (`gang_placement`; see [`crate::gang`]), by tree.
    pub(crate) gangs: BTreeMap<usize, GangAssembly>,
    /// Gangs whose assembly timed out, and until when they may not assemble again.
    pub(crate) gang_cooldown: BTreeMap<OperationId, Millis>,
    /// Gangs placed whole at once from what was free (see [`crate::gang`]), by operation;
    /// always ready: their nodes start them at their next heartbeats.
    pub(crate) placed_gangs: BTreeMap<OperationId, GangAssembly>,
    /// Counts the events that may free room for a gang (allocations ending, nodes joining,
    /// holds released); a gang that did not fit at one count is not tried again until it
    /// changes.
    pub(crate) room_epoch: u64,
    /// The `room_epoch` at which each gang last failed to fit at once.
    pub(crate) gang_unplaceable_at: BTreeMap<OperationId, u64>,
    /// Allocations started from what a gang placed whole held on their node, every held job
    /// there starting (the room it held becomes the room they use: an assembling gang's plan
    /// does not change; see `gang::plan_needed`).
    pub(crate) exact_conversions: u64,
    /// Gangs placed whole so far.
    pub(crate) gangs_placed: u64,
    /// Counts the assemblies begun and ended (in any tree): while it and `room_epoch` stay
    /// the same, so does every tree's assembling gang (see [`Holds::park_key`]).
    pub(crate) assemblies_changed: u64,
    /// The last expected start computed for an assembling gang with `hold = "needed"`, kept
    /// for the next one asked with the same inputs (see `backfill::needed_shadow`).
    pub(crate) needed_shadow_memo: Option<ShadowMemo>,
    /// Counts the changes to what is held (a hold made, changed or released, a backfill time
    /// set): with the room index's version, what [`UnheldMemo`] keeps stays valid while it is
    /// the same.
    pub(crate) version: u64,
    /// What is held on the schedulable nodes of one tree, summed up for the bound on the room
    /// a gang placed whole may find (see [`crate::unheld`]).
    pub(crate) unheld_memo: Option<UnheldMemo>,
    /// What is held on each node, as of a `version` (kept across changes of the free room).
    pub(crate) held_sum: Option<HeldSum>,
    /// What each gang holds on each node, kept up to date from the gangs' [`Counted`] notes
    /// when `held_sum` is made again.
    pub(crate) held_sums: HeldSums,
    /// With `gang_placement.hold = "planned"`: the last plan of every waiting gang's start,
    /// kept while what it depends on is the same (see [`crate::gang_plan`]).
    pub(crate) gang_plan: Option<GangPlan>,
    /// The last time the clock counted as freeing room (see `gang::keep_needed_plan`); with
    /// `gang_placement.hold = "planned"` any later time does.
    pub(crate) planned_at: Option<Millis>,
    /// A room epoch and the earliest [`Shadow::next_end`] of the assembling gangs' plans made
    /// in it or that gangs were turned down under in it (`gang_unplaceable_at`): the clock
    /// reaching it in that epoch counts as freeing room (see `gang::keep_needed_plan`).
    pub(crate) clock_frees_room_at: Option<(u64, Millis)>,
}

/// The planned start of every waiting gang of one tree (see [`crate::gang_plan`]), as of the
/// inputs in `key`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GangPlan {
    pub(crate) tree: usize,
    /// The time, room epoch, next allocation id, gangs placed, node changes and next
    /// operation sequence number the plan was made at.
    pub(crate) key: [u64; 6],
    pub(crate) starts: BTreeMap<OperationId, Millis>,
}

/// What is held on each node the room index has seen (reservations and gangs' jobs), summed
/// up by node, as of [`Holds::version`] `version` (see [`crate::unheld`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HeldSum {
    pub(crate) version: u64,
    /// By the node's slot in the room index, in slot order.
    pub(crate) by_slot: Vec<(Slot, Resources)>,
    /// The latest time until which any hold may be backfilled (`None`: none may be).
    pub(crate) latest_until: Option<Millis>,
}

/// What each gang holds by node (see [`crate::unheld`]), and the sum over the gangs.
#[derive(Clone, Debug, Default)]
pub(crate) struct HeldSums {
    /// By gang (the tree it assembles in, `None` if placed whole; its operation): what it
    /// holds by the node's slot in the room index.
    pub(crate) gangs: BTreeMap<(Option<usize>, OperationId), BTreeMap<Slot, Resources>>,
    /// By slot: the sum of what gangs hold there, and how many gangs hold something there.
    pub(crate) total: BTreeMap<Slot, (Resources, u32)>,
}

/// Free room by node, less what is held there (see [`crate::unheld`]), as of the room index's
/// and the holds' versions in `key`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UnheldMemo {
    pub(crate) tree: usize,
    /// The room index's version and [`Holds::version`].
    pub(crate) key: (u64, u64),
    /// The schedulable nodes of the tree that something is held on, by (free resources, free
    /// resources less everything held there, both at least zero): how many.
    pub(crate) held_nodes: BTreeMap<([i64; RESOURCE_COUNT], [i64; RESOURCE_COUNT]), u32>,
    /// The latest time until which any hold may be backfilled (`None`: none may be).
    pub(crate) latest_until: Option<Millis>,
    /// The bound, by job shape, computed so far.
    pub(crate) by_shape: BTreeMap<[i64; RESOURCE_COUNT], u64>,
}

/// An expected start ([`Shadow`]) and what it was computed from: the tree, the operation, and
/// the time, room epoch, next allocation id, gangs placed and node changes then (with no job
/// reservation anywhere).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ShadowMemo {
    pub(crate) tree: usize,
    pub(crate) operation: OperationId,
    pub(crate) inputs: [u64; 5],
    pub(crate) shadow: Shadow,
}

/// When an assembling gang expects room for its pending jobs, and how much room there is then
/// and now (see `backfill::shadow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shadow {
    /// When room for all its pending jobs is expected (`None`: never, as far as the limits
    /// tell).
    pub(crate) until: Option<Millis>,
    /// Jobs that fit into what is free now.
    pub(crate) room_now: u64,
    /// Jobs that fit at `until` beyond those it needs, counting every allocation expected to
    /// end by then (0 when `until` is `None`).
    pub(crate) surplus: u64,
    /// The first expected end after `until`, which the surplus does not count (`None`: none,
    /// or `until` is `None`). Until the clock reaches it, the same allocations running, the
    /// shadow as of a later time counts the same ends (an allocation past its limit is
    /// expected to end now, which is no later than `until` or is `until`): the same surplus,
    /// and `until` no further from now. From then on the surplus may be larger.
    pub(crate) next_end: Option<Millis>,
}

impl Holds {
    /// Every gang holding resources: the assembling ones and those placed whole.
    pub(crate) fn all_gangs(&self) -> impl Iterator<Item = &GangAssembly> {
        self.gangs.values().chain(self.placed_gangs.values())
    }

    /// Whether any gang holds resources.
    pub(crate) fn any_gang(&self) -> bool {
        !self.gangs.is_empty() || !self.placed_gangs.is_empty()
    }

    /// Whether anything is held anywhere.
    pub(crate) fn any(&self) -> bool {
        !self.reservations.is_empty() || self.any_gang()
    }

    /// The node holding resources for `op`, if any.
    pub(crate) fn reserved_node_of(&self, op: &OperationId) -> Option<&NodeId> {
        self.reservations
            .iter()
            .find(|(_, r)| &r.operation == op)
            .map(|(node, _)| node)
    }

    /// Whether `op` holds anything (a reservation or a gang).
    pub(crate) fn holds_for(&self, op: &OperationId) -> bool {
        self.placed_gangs.contains_key(op)
            || self.gangs.values().any(|g| g.operation == *op)
            || self.reservations.values().any(|r| r.operation == *op)
    }

    /// What decides whether a node's offer to a gang operation of tree `t` changes nothing
    /// ([`Holds::offer_changes_nothing`], and with `hold = "all_free"`
    /// [`Holds::idle_behind_assembly`]) besides the operation's own state and the clock's
    /// advance: while this is the same, an operation for which it did stays so until its own
    /// state changes.
    pub(crate) fn park_key(&self, t: usize, hold: GangHold) -> ParkKey {
        let assembly = (hold == GangHold::AllFree)
            .then(|| self.gangs.get(&t))
            .flatten()
            .map(|a| {
                (
                    a.backfill_until,
                    a.ready,
                    a.starting,
                    a.lent_at,
                    a.planned.is_some(),
                )
            });
        (self.room_epoch, self.assemblies_changed, assembly)
    }

    /// With `hold = "all_free"`: whether offering any node to gang operation `op` (not placed
    /// whole) of tree `t` at `now` changes nothing because another gang assembles there, has
    /// no plan and waits for nothing it lent, and `op`'s pending jobs do not all end before
    /// that gang's expected start (see `gang::place_gang_now`, which then declines, and
    /// `gang::gang_hold`, which leaves the other gang assembling). As the clock advances they
    /// end later still, so this stays so while [`Holds::park_key`] and `op` are the same.
    pub(crate) fn idle_behind_assembly(
        &self,
        t: usize,
        op: &Operation,
        now: Millis,
        hold: GangHold,
    ) -> bool {
        hold == GangHold::AllFree
            && !self.placed_gangs.contains_key(&op.spec.id)
            && self.gangs.get(&t).is_some_and(|a| {
                a.operation != op.spec.id
                    && a.planned.is_none()
                    && !self.waits_for_lent(t)
                    && !(a.backfill_until).is_some_and(|until| op.pending_jobs_end_by(now, until))
            })
    }

    /// Whether tree `t`'s assembly holds all it needs but waits for some of it, lent while it
    /// gathered, to be given back (as found at this room epoch: see `gang::whole_room_free`).
    /// It is then not about to start, and needs nothing it does not hold: other gangs may be
    /// placed on what it does not hold, whatever their durations.
    pub(crate) fn waits_for_lent(&self, t: usize) -> bool {
        self.gangs
            .get(&t)
            .is_some_and(|a| a.ready && !a.starting && a.lent_at == Some(self.room_epoch))
    }

    /// Whether offering any node to gang operation `op` of tree `t` changes nothing (with
    /// `gang_placement` on; see `gang::place_gang_now` and `gang::gang_hold`): another gang
    /// assembles in `t`, and `op` is placed whole or did not fit at once at this room epoch.
    /// It does not depend on the node, so a heartbeat may skip such an operation until
    /// [`Holds::park_key`] changes (see `heartbeat::walk::Walk::park`).
    pub(crate) fn offer_changes_nothing(&self, t: usize, op: &OperationId) -> bool {
        self.gangs.get(&t).is_some_and(|a| &a.operation != op)
            && (self.placed_gangs.contains_key(op)
                || self.gang_unplaceable_at.get(op) == Some(&self.room_epoch))
    }

    /// Gangs may be turned down at this room epoch under a plan that holds until the clock
    /// reaches `next_end` ([`Shadow::next_end`]): notes the earliest such time of the epoch in
    /// `clock_frees_room_at`.
    pub(crate) fn note_plan_holds_until(&mut self, next_end: Option<Millis>) {
        let epoch = self.room_epoch;
        let noted = (self.clock_frees_room_at)
            .filter(|&(e, _)| e == epoch)
            .map(|(_, at)| at);
        self.clock_frees_room_at = [noted, next_end]
            .into_iter()
            .flatten()
            .min()
            .map(|at| (epoch, at));
    }

    /// Forgets the bookkeeping of an operation that finished.
    pub(crate) fn forget(&mut self, op: &OperationId) {
        self.reservation_streak.remove(op);
        self.gang_cooldown.remove(op);
        self.gang_unplaceable_at.remove(op);
    }
}

/// Resources held on a node for one job of an operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    /// The tree of the node (and of the operation's element that reserved).
    pub tree: usize,
    pub operation: OperationId,
    /// The task whose job the resources are held for.
    pub task: usize,
    pub resources: Resources,
    /// When the reservation was made.
    pub since: Millis,
    /// Jobs of other operations that end by then may use the reserved resources (as of the
    /// last fair-share update; see [`crate::backfill`]).
    pub backfill_until: Option<Millis>,
}

/// See [`Holds::park_key`]: the room epoch, the assemblies' changes and, with
/// `hold = "all_free"`, the state of the tree's assembling gang that decides whether other
/// gangs may be placed.
pub(crate) type ParkKey = (
    u64,
    u64,
    Option<(Option<Millis>, bool, bool, Option<u64>, bool)>,
);

/// A gang operation gathering resources for all its pending jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct GangAssembly {
    pub operation: OperationId,
    /// When it began.
    pub since: Millis,
    /// Jobs held, per node and task.
    pub holds: BTreeMap<NodeId, BTreeMap<usize, u32>>,
    /// Every pending job is held: the nodes start them at their next heartbeats.
    pub ready: bool,
    /// Jobs of other operations that end by then may use the held resources (as of the last
    /// fair-share update; see [`crate::backfill`]).
    pub backfill_until: Option<Millis>,
    /// With `gang_placement.hold = "needed"`: the most jobs it holds (its plan; `None`: all
    /// its pending jobs).
    pub hold_target: Option<u32>,
    /// When its plan was made: the time, the holds' `room_epoch` and the books' next
    /// allocation id then (`None`: never).
    pub(crate) planned: Option<(Millis, u64, u64)>,
    /// What its plan depends on, as of when it was made (see `gang::plan_needed`).
    pub(crate) plan_inputs: Option<[u64; 5]>,
    /// The first expected end after `backfill_until` that its plan left out
    /// ([`Shadow::next_end`]): until the clock reaches it, the plan as of a later time turns
    /// down no gang it did not (see `gang::keep_needed_plan`).
    pub(crate) next_end: Option<Millis>,
    /// Jobs held, over all nodes and tasks (the sum over `holds`, kept with it: see
    /// [`GangAssembly::held_jobs`]).
    pub(crate) held: u32,
    /// Jobs held per task, over all nodes (kept with `holds`, as `held`).
    pub(crate) per_task: BTreeMap<usize, u32>,
    /// Ready, it has begun to start: its other nodes start their jobs at their next
    /// heartbeats (see `gang::whole_room_free`).
    pub(crate) starting: bool,
    /// Ready, the holds' `room_epoch` at which some of what it holds was found still lent
    /// (taken by a job that was to end by its expected start): it does not start before an
    /// allocation ends or a node changes.
    pub(crate) lent_at: Option<u64>,
    /// The books' `node_changes` when the fair-share update last looked for nodes it holds
    /// jobs on that it lost (see `gang::update_gangs`).
    pub(crate) nodes_checked: Option<u64>,
    /// The nodes its holds changed on since [`crate::unheld`] last counted them.
    pub(crate) counted: Counted,
}

/// Whether a gang's holds were counted into the holds' per-node sum ([`HeldSums`]), and the
/// nodes they changed on since. Bookkeeping, not part of what the gang is: any two compare
/// equal.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counted {
    pub(crate) yes: bool,
    pub(crate) touched: Vec<NodeId>,
}

impl PartialEq for Counted {
    fn eq(&self, _: &Counted) -> bool {
        true
    }
}

impl GangAssembly {
    /// A gang that holds nothing yet.
    pub(crate) fn new(operation: OperationId, since: Millis) -> GangAssembly {
        GangAssembly {
            operation,
            since,
            holds: BTreeMap::new(),
            ready: false,
            backfill_until: None,
            hold_target: None,
            planned: None,
            plan_inputs: None,
            next_end: None,
            held: 0,
            per_task: BTreeMap::new(),
            starting: false,
            lent_at: None,
            nodes_checked: None,
            counted: Counted::default(),
        }
    }

    /// Its holds changed on `node`: noted for the per-node sum if it counted them (a long list
    /// is dropped for a count afresh).
    fn touch(&mut self, node: &NodeId) {
        if self.counted.yes {
            if self.counted.touched.len() > self.holds.len() + 64 {
                self.counted = Counted::default();
            } else {
                self.counted.touched.push(node.clone());
            }
        }
    }

    /// Jobs held per task, over all nodes.
    pub(crate) fn held_per_task(&self) -> BTreeMap<usize, u32> {
        #[cfg(debug_assertions)]
        {
            let mut out = BTreeMap::new();
            for tasks in self.holds.values() {
                for (&task, &n) in tasks {
                    *out.entry(task).or_insert(0u32) += n;
                }
            }
            out.retain(|_, n| *n > 0);
            assert_eq!(
                out, self.per_task,
                "the held jobs per task went out of date"
            );
        }
        self.per_task.clone()
    }

    /// Jobs held, over all nodes and tasks.
    pub fn held_jobs(&self) -> u32 {
        debug_assert_eq!(
            self.held,
            self.holds.values().flat_map(|t| t.values()).sum::<u32>(),
            "the count of held jobs went out of date"
        );
        self.held
    }

    /// A gang holding `holds` (task -> jobs, by node) of `operation` since `since`.
    pub(crate) fn holding(
        operation: OperationId,
        since: Millis,
        holds: BTreeMap<NodeId, BTreeMap<usize, u32>>,
    ) -> GangAssembly {
        let mut a = GangAssembly::new(operation, since);
        for (node, tasks) in holds {
            a.add(&node, tasks);
        }
        a
    }

    /// It gathers again (a node it held jobs on is gone or no longer fits them).
    pub(crate) fn unready(&mut self) {
        self.ready = false;
        self.starting = false;
        self.lent_at = None;
    }

    /// It no longer holds anything on `node`; returns what it held there.
    pub(crate) fn release_node(&mut self, node: &NodeId) -> Option<BTreeMap<usize, u32>> {
        let tasks = self.holds.remove(node)?;
        self.touch(node);
        for (task, &n) in &tasks {
            self.held -= n;
            let left = self.per_task.get_mut(task).expect("counted when added");
            *left -= n;
            if *left == 0 {
                self.per_task.remove(task);
            }
        }
        Some(tasks)
    }

    /// It holds exactly `holds` (node -> task -> jobs, in node order, none empty) instead of
    /// what it held: the nodes whose holds are the same are left as they are. True if
    /// anything changed.
    pub(crate) fn replace_holds(&mut self, holds: Vec<(&NodeId, BTreeMap<usize, u32>)>) -> bool {
        debug_assert!(holds.windows(2).all(|w| w[0].0 < w[1].0), "in node order");
        debug_assert!(
            holds.iter().all(|(_, tasks)| !tasks.is_empty()),
            "none empty"
        );
        let mut gone: Vec<NodeId> = Vec::new();
        let mut new: Vec<(&NodeId, BTreeMap<usize, u32>)> = Vec::new();
        {
            let mut old = self.holds.iter().peekable();
            let mut wanted = holds.into_iter().peekable();
            loop {
                match (old.peek(), wanted.peek()) {
                    (None, None) => break,
                    (Some((n, _)), None) => {
                        gone.push((*n).clone());
                        old.next();
                    }
                    (None, Some(_)) => new.extend(wanted.next()),
                    (Some((n, tasks)), Some((m, want))) => match (*n).cmp(*m) {
                        std::cmp::Ordering::Less => {
                            gone.push((*n).clone());
                            old.next();
                        }
                        std::cmp::Ordering::Greater => new.extend(wanted.next()),
                        std::cmp::Ordering::Equal => {
                            if *tasks != want {
                                gone.push((*n).clone());
                                new.extend(wanted.next());
                            } else {
                                wanted.next();
                            }
                            old.next();
                        }
                    },
                }
            }
        }
        let changed = !gone.is_empty() || !new.is_empty();
        for node in &gone {
            self.release_node(node);
        }
        for (node, tasks) in new {
            self.add(node, tasks);
        }
        changed
    }

    /// It also holds `new_here` (task -> jobs) on `node`.
    pub(crate) fn add(&mut self, node: &NodeId, new_here: BTreeMap<usize, u32>) {
        if new_here.is_empty() {
            return;
        }
        self.touch(node);
        let here = self.holds.entry(node.clone()).or_default();
        for (task, n) in new_here {
            *here.entry(task).or_default() += n;
            self.held += n;
            *self.per_task.entry(task).or_default() += n;
        }
    }
}

/// What a node holds back from one operation, with until when each part may be backfilled.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Held {
    /// Held for another operation's job reservation.
    pub reserved: Resources,
    /// Jobs ending at or before this may use `reserved` (`None`: none may).
    pub reserved_until: Option<Millis>,
    /// Held by assembling gangs of other operations.
    pub gangs: Resources,
    /// Jobs ending at or before this may use `gangs` (`None`: none may).
    pub gangs_until: Option<Millis>,
}

impl Held {
    /// What stays held from a job of time limit `limit` starting at `now`.
    pub fn for_job(&self, now: Millis, limit: Option<u64>) -> Resources {
        let mut held = self.gangs_for_job(now, limit);
        if !ends_by(now, limit, self.reserved_until) {
            held = held.add(&self.reserved);
        }
        held
    }

    /// The gangs' part of [`Held::for_job`].
    pub fn gangs_for_job(&self, now: Millis, limit: Option<u64>) -> Resources {
        if ends_by(now, limit, self.gangs_until) {
            Resources::ZERO
        } else {
            self.gangs
        }
    }

    /// Everything held, whatever a job's limit.
    pub(crate) fn all(&self) -> Resources {
        self.reserved.add(&self.gangs)
    }

    /// Whether nothing is held.
    pub(crate) fn is_zero(&self) -> bool {
        self.reserved.is_zero() && self.gangs.is_zero()
    }
}

/// What a node offers one operation at a start: its available resources, less what it holds
/// for others unless the job backfills.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Offer {
    pub available: Resources,
    pub held: Option<Held>,
}

impl Offer {
    /// All of `available`, nothing held back.
    pub(crate) fn all(available: Resources) -> Offer {
        Offer {
            available,
            held: None,
        }
    }

    /// Whether `job` fits only thanks to backfill: into what a job of time limit `limit` may
    /// use, but not into what is left with everything held kept out.
    pub(crate) fn backfills(&self, now: Millis, limit: Option<u64>, job: &Resources) -> bool {
        self.held.is_some_and(|h| {
            !self.available.sub(&h.all()).dominates(job) && self.for_job(now, limit).dominates(job)
        })
    }

    /// What a job of time limit `limit` starting at `now` may use.
    pub(crate) fn for_job(&self, now: Millis, limit: Option<u64>) -> Resources {
        match &self.held {
            Some(h) => self
                .available
                .sub(&h.for_job(now, limit))
                .max(&Resources::ZERO),
            None => self.available,
        }
    }
}

fn ends_by(now: Millis, limit: Option<u64>, until: Option<Millis>) -> bool {
    match (limit, until) {
        (Some(l), Some(u)) => now.saturating_add(l) <= u,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Holds on up to 8 nodes, 1 or 2 tasks each.
    fn holds() -> impl Strategy<Value = BTreeMap<u8, BTreeMap<usize, u32>>> {
        proptest::collection::btree_map(
            0u8..8,
            proptest::collection::btree_map(0usize..2, 1u32..3, 1..3),
            0..8,
        )
    }

    fn node(n: u8) -> NodeId {
        NodeId(format!("n{n}"))
    }

    proptest! {
        /// Replacing the holds leaves the gang as if it had been given the new ones from
        /// nothing (holds and their counts), and says whether anything changed.
        #[test]
        fn replacing_holds_is_holding_the_new_ones_from_nothing(old in holds(), new in holds()) {
            let mut gang = GangAssembly::new(OperationId("g".into()), 0);
            for (n, tasks) in &old {
                gang.add(&node(*n), tasks.clone());
            }
            let before = gang.holds.clone();
            let ids: Vec<(NodeId, BTreeMap<usize, u32>)> =
                new.iter().map(|(n, tasks)| (node(*n), tasks.clone())).collect();
            let mut wanted: Vec<(&NodeId, BTreeMap<usize, u32>)> =
                ids.iter().map(|(n, tasks)| (n, tasks.clone())).collect();
            wanted.sort_by(|a, b| a.0.cmp(b.0));
            let changed = gang.replace_holds(wanted);
            let mut fresh = GangAssembly::new(OperationId("g".into()), 0);
            for (n, tasks) in &ids {
                fresh.add(n, tasks.clone());
            }
            prop_assert_eq!(&gang.holds, &fresh.holds);
            prop_assert_eq!(gang.held, fresh.held);
            prop_assert_eq!(&gang.per_task, &fresh.per_task);
            prop_assert_eq!(changed, before != fresh.holds);
        }
    }
}
