//! "Why does it wait?": the reason an unfinished operation's jobs wait, computed from the real
//! blocker with numbers (pending behind a running-operation limit, no node large enough, tag
//! filters, resource limits, FIFO order, gangs, reservations, room on a node, the spare bound,
//! a fair share of 0, starvation with or without anything to preempt, the fair share itself).
//!
//! The answers are methods of a `WhyContext`, which borrows the trees, books, holds and
//! caches it reads; [`Scheduler::why_waiting`] and the snapshot build one.

use crate::holds::Holds;
use crate::model::{AllocationId, Millis, OperationId, OperationState};
use crate::preemptible::PreemptionStatus;
use crate::preemption;
use crate::scheduler::Scheduler;
pub use crate::scheduler_config::WhyTimes;
use crate::state::{Books, Caches};
use crate::tree::PoolTree;
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{ResourceKind, Resources};
use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// What "why does it wait" reads: explicit borrows of the scheduler's trees, books, holds and
/// caches, and what it reads alike for every operation, computed once for a view of many (a
/// snapshot): each tree's live usage per element and, when a starving operation asks, the
/// classes of the allocations on the tree's nodes.
pub(crate) struct WhyContext<'a> {
    trees: &'a [PoolTree],
    books: &'a Books,
    holds: &'a Holds,
    caches: &'a Caches,
    last_fair_share_update: Option<Millis>,
    /// `Some(now)`: times are said from now ([`WhyTimes::FromNow`]); `None`: in the core's
    /// milliseconds.
    from_now: Option<Millis>,
    usages: std::borrow::Cow<'a, [Vec<Resources>]>,
    classes: Vec<OnceCell<OfferClasses>>,
    /// The nodes operations may use, by (their trees, the tree asked about, tag set), and
    /// what they offer jobs of each shape asked about.
    nodes: RefCell<Vec<(NodesKey, Rc<Eligible<'a>>)>>,
}

/// Operations with the same trees and scheduling tag filters may use the same nodes.
type NodesKey = (Vec<usize>, usize, usize);

/// The nodes an operation may use.
struct Eligible<'a> {
    /// Some node of its trees matches its tag filters (whether it takes jobs or not).
    tags_match: bool,
    /// Of its trees, taking jobs, allowed by its tags, by id.
    nodes: Vec<&'a crate::model::Node>,
    /// For each job shape asked about: whether a node is large enough, and (while nothing is
    /// held for anyone) the first node with room and the first with room above its spare
    /// bound (indices into `nodes`).
    shapes: RefCell<Vec<(Resources, Shape)>>,
}

#[derive(Clone, Copy)]
struct Shape {
    large_enough: bool,
    room: Option<usize>,
    room_above_spare: Option<usize>,
}

/// Allocation classes by operation, for preemptive offers.
type OfferClasses = BTreeMap<OperationId, BTreeMap<AllocationId, PreemptionStatus>>;

impl Scheduler {
    /// The context for many [`Scheduler::why_waiting`] questions at once, at `now`.
    pub(crate) fn why_context(&self, now: Option<Millis>) -> WhyContext<'_> {
        self.why_context_with(now, std::borrow::Cow::Owned(self.live_usages()))
    }

    /// How "why does it wait" names times (default: [`WhyTimes::Virtual`]).
    pub fn set_why_times(&mut self, times: WhyTimes) {
        self.why_times = times;
    }

    /// Each tree's live usage per element.
    pub(crate) fn live_usages(&self) -> Vec<Vec<Resources>> {
        (0..self.trees.len())
            .map(|t| preemption::live_usage(&self.trees[t], &self.books, t))
            .collect()
    }

    /// A context with each tree's usage per element as given (taken by
    /// [`Scheduler::live_usages`], earlier when the scheduler may have changed since).
    /// `now` (if known) is when the answers are taken.
    pub(crate) fn why_context_with<'a>(
        &'a self,
        now: Option<Millis>,
        usages: std::borrow::Cow<'a, [Vec<Resources>]>,
    ) -> WhyContext<'a> {
        WhyContext {
            trees: &self.trees,
            books: &self.books,
            holds: &self.holds,
            caches: &self.caches,
            last_fair_share_update: self.last_fair_share_update,
            from_now: now.filter(|_| self.why_times == WhyTimes::FromNow),
            usages,
            classes: (0..self.trees.len()).map(|_| OnceCell::new()).collect(),
            nodes: RefCell::new(Vec::new()),
        }
    }

    /// Why an unfinished operation has jobs waiting, in words (the first reason that applies),
    /// or `None` when nothing holds it back; times in the core's milliseconds.
    pub fn why_waiting(&self, op: &crate::model::Operation) -> Option<String> {
        self.why_context(None).why_waiting(op)
    }
}

impl<'a> WhyContext<'a> {
    /// Each tree's live usage per element.
    pub(crate) fn usages(&self) -> &[Vec<Resources>] {
        &self.usages
    }

    /// The nodes an operation of trees `trees`, at element `index` of tree `t`, may use
    /// (computed once per context for operations alike).
    fn eligible(&self, trees: Vec<usize>, t: usize, index: ElementIndex) -> Rc<Eligible<'a>> {
        let arena = &self.trees[t].arena;
        let key = (trees, t, arena.elements[index].tag_set);
        if let Some((_, e)) = self.nodes.borrow().iter().find(|(k, _)| *k == key) {
            return e.clone();
        }
        let books: &'a Books = self.books;
        let of_trees: Vec<&'a crate::model::Node> = books
            .nodes
            .values()
            .filter(|n| n.tree.is_some_and(|nt| key.0.contains(&nt)))
            .collect();
        let eligible = Rc::new(Eligible {
            tags_match: of_trees.iter().any(|n| arena.tags_allow(index, &n.tags)),
            nodes: of_trees
                .into_iter()
                .filter(|n| n.scheduler_jobs_enabled && arena.tags_allow(index, &n.tags))
                .collect(),
            shapes: RefCell::new(Vec::new()),
        });
        self.nodes.borrow_mut().push((key, eligible.clone()));
        eligible
    }

    /// The `min_spare_allocation_resources_on_node` of the node's tree (none: no bound).
    fn spare_of(&self, n: &crate::model::Node) -> fairsched_resources::PartialResources {
        n.tree
            .map(|nt| {
                self.trees[nt]
                    .config()
                    .min_spare_allocation_resources_on_node
            })
            .unwrap_or(fairsched_resources::PartialResources::EMPTY)
    }

    /// What `eligible` offers a job of `job`: large enough, and (when `held` says what each
    /// node holds back from the operation) the first node with room and the first with room
    /// above its spare bound. Without holds, computed once per shape.
    fn shape(
        &self,
        eligible: &Eligible<'_>,
        job: &Resources,
        held: Option<&dyn Fn(&crate::model::Node) -> Resources>,
    ) -> Shape {
        if held.is_none()
            && let Some((_, s)) = eligible.shapes.borrow().iter().find(|(j, _)| j == job)
        {
            return *s;
        }
        let mut shape = Shape {
            large_enough: eligible.nodes.iter().any(|n| n.resources.dominates(job)),
            room: None,
            room_above_spare: None,
        };
        for (i, n) in eligible.nodes.iter().enumerate() {
            if n.draining {
                continue;
            }
            let kept = held.map_or(Resources::ZERO, |h| h(n));
            if !n.free().sub(&kept).dominates(job) {
                continue;
            }
            shape.room.get_or_insert(i);
            if !crate::heartbeat::below_min_spare(&n.free(), &n.resources, &self.spare_of(n)) {
                shape.room_above_spare = Some(i);
                break;
            }
        }
        if held.is_none() {
            eligible.shapes.borrow_mut().push((*job, shape));
        }
        shape
    }

    /// [`Scheduler::why_waiting`], with what every operation's answer reads computed once.
    pub(crate) fn why_waiting(&self, op: &crate::model::Operation) -> Option<String> {
        use crate::tree::{SchedulingStatus, StarvationStatus};
        if op.state == OperationState::Pending {
            return op.pending_reason.clone();
        }
        if op.state != OperationState::Running || op.pending_job_count() == 0 {
            return None;
        }
        // Told for its first tree; nodes of any of its trees may take its jobs.
        let t = op.trees[0].tree;
        let arena = &self.trees[t].arena;
        let Some(&index) = arena.by_operation.get(&op.spec.id) else {
            return Some("waiting for the next fair-share update to include the operation".into());
        };
        let job = op.pending_job_resources().next()?;
        let eligible = self.eligible(op.trees.iter().map(|o| o.tree).collect(), t, index);
        if arena.elements[index].tag_set != 0 && !eligible.tags_match {
            let filters: Vec<String> = arena.tag_sets[arena.elements[index].tag_set]
                .iter()
                .map(|f| format!("{:?}", f.as_str()))
                .collect();
            return Some(format!(
                "no node matches the scheduling tag filters {} (scheduling_tag_filter of the \
                 operation or its pools)",
                filters.join(" and ")
            ));
        }
        // The nodes that may run its jobs: of its trees, taking jobs, allowed by its tags.
        let leaves: Vec<Option<ElementIndex>> = self
            .trees
            .iter()
            .map(|tree| tree.arena.by_operation.get(&op.spec.id).copied())
            .collect();
        // What each node holds back from it (for others' reservations and gangs), if anything
        // is held anywhere.
        let held_back = |n: &crate::model::Node| {
            n.tree
                .and_then(|nt| Some((nt, leaves[nt]?)))
                .and_then(|(nt, leaf)| {
                    crate::backfill::held_from_leaf(
                        self.books,
                        self.holds,
                        &self.trees[nt].arena,
                        &n.id,
                        leaf,
                    )
                })
                .map_or(Resources::ZERO, |h| h.all())
        };
        let held: Option<&dyn Fn(&crate::model::Node) -> Resources> =
            self.holds.any().then_some(&held_back);
        let shape = self.shape(&eligible, &job, held);
        if !shape.large_enough {
            let largest = eligible.nodes.iter().max_by(|a, b| {
                fit_ratio(&a.resources, &job)
                    .total_cmp(&fit_ratio(&b.resources, &job))
                    .then_with(|| b.id.cmp(&a.id))
            });
            return Some(match largest {
                Some(n) => format!(
                    "no node is large enough for a job of {job}: the closest, node {:?}, has {}",
                    n.id.0, n.resources
                ),
                None => format!(
                    "no node is large enough for a job of {job}: no node runs jobs of its trees"
                ),
            });
        }
        let usage = &self.usages[t];
        for e in std::iter::once(index).chain(arena.ancestors(index)) {
            let element = &arena.elements[e];
            if !element.resource_limits.dominates(&usage[e].add(&job)) {
                let who = match &element.kind {
                    crate::tree::ElementRef::Operation(_) => "the operation's".to_string(),
                    crate::tree::ElementRef::Pool(p) => format!("pool {p:?}'s"),
                    crate::tree::ElementRef::Root => "the tree's".to_string(),
                };
                return Some(format!(
                    "{who} resource_limits are reached (usage {}, next job {job})",
                    usage[e]
                ));
            }
        }
        if arena.elements[index].fifo_limited
            && let Some(parent) = arena.elements[index].parent
            && let crate::tree::ElementRef::Pool(pool) = &arena.elements[parent].kind
        {
            return Some(format!(
                "FIFO pool {pool:?} schedules only its first {} operations with a fair share \
                 (max_schedulable_element_count_in_fifo_pool; \
                 fifo_schedulable_element_count_limit_reached)",
                self.trees[t]
                    .config()
                    .max_schedulable_element_count_in_fifo_pool
                    .unwrap_or_default()
            ));
        }
        // A FIFO pool shares in start order (its children are sorted so): name the one ahead.
        if let Some(parent) = arena.elements[index].parent
            && arena.elements[parent].fifo
            && let Some(ahead) = arena.elements[parent]
                .children
                .iter()
                .take_while(|&&c| c != index)
                .find_map(|&c| match &arena.elements[c].kind {
                    crate::tree::ElementRef::Operation(id) => self
                        .books
                        .operations
                        .get(id)
                        .filter(|o| o.state == OperationState::Running && o.pending_job_count() > 0)
                        .map(|o| o.spec.id.0.clone()),
                    _ => None,
                })
            && let crate::tree::ElementRef::Pool(pool) = &arena.elements[parent].kind
        {
            return Some(format!(
                "waits behind operation {ahead:?} in FIFO pool {pool:?}"
            ));
        }
        let full = if shape.room.is_none() {
            format!("no node has room for a job of {job} now; ")
        } else {
            String::new()
        };
        if self.trees[t].config().gang_placement.enable && op.is_gang() {
            let hold = match self.trees[t].config().gang_placement.hold {
                fairsched_config::GangHold::Planned => "planned",
                _ => "needed",
            };
            let text = match self.holds.gangs.get(&t) {
                _ if self.holds.placed_gangs.contains_key(&op.spec.id) => {
                    about_to_start(&self.holds.placed_gangs[&op.spec.id])
                }
                Some(a) if a.operation == op.spec.id && a.ready => {
                    let lent: Vec<&str> = if a.starting {
                        Vec::new()
                    } else {
                        (crate::gang::lent_on(self.books, self.holds, a))
                            .map(|n| n.0.as_str())
                            .collect()
                    };
                    if lent.is_empty() {
                        about_to_start(a)
                    } else {
                        format!(
                            "gang: all its {} pending jobs are held on {} nodes; they start \
                             together once what it lent meanwhile is free again: jobs expected \
                             to end before it needed them still run on {} of those nodes ({}) \
                             (gang_placement)",
                            a.held_jobs(),
                            a.holds.len(),
                            lent.len(),
                            list_some(&lent)
                        )
                    }
                }
                Some(a) if a.operation == op.spec.id => match (a.hold_target, a.backfill_until) {
                    (Some(target), Some(until)) if target < op.pending_job_count() => format!(
                        "gang: holds the reservation, expected to start {} by the running \
                         jobs' time limits; {} of its {} pending jobs held on {} nodes now, the \
                         rest expected to free up by then (gang_placement.hold = {hold}; {})",
                        self.at(until),
                        a.held_jobs(),
                        op.pending_job_count(),
                        a.holds.len(),
                        self.backfill_text(a.backfill_until)
                    ),
                    (Some(_), None) => format!(
                        "gang: holds the reservation, with no expected start: the running \
                         jobs' time limits do not free room for all its {} pending jobs (a job \
                         in its way has no time limit, or the nodes are too few); {} held on {} \
                         nodes now, and nothing backfills them (gang_placement.hold = {hold})",
                        op.pending_job_count(),
                        a.held_jobs(),
                        a.holds.len()
                    ),
                    _ => format!(
                        "gang: {} of its {} pending jobs held on {} nodes; they start together \
                         once all are held (gang_placement; {})",
                        a.held_jobs(),
                        op.pending_job_count(),
                        a.holds.len(),
                        self.backfill_text(a.backfill_until)
                    ),
                },
                Some(a) => format!(
                    "gang: waits until gang {:?} has assembled (one gang gathers resources at a \
                     time; gang_placement)",
                    a.operation.0
                ),
                None => match self.holds.gang_cooldown.get(&op.spec.id) {
                    Some(until) => format!(
                        "gang: its assembly timed out; it may gather resources again {} \
                         (gang_placement.assembly_timeout_ms)",
                        self.from(*until)
                    ),
                    None => "gang: gathers resources for all its jobs when the scheduler offers \
                             it a node (gang_placement)"
                        .to_string(),
                },
            };
            return Some(format!("{full}{text}"));
        }
        let full = match self
            .holds
            .reservations
            .iter()
            .find(|(_, r)| r.operation == op.spec.id)
        {
            Some((node, r)) => format!(
                "{full}node {:?} holds {} for its next job and starts it once that much is free \
                 (job_reservation; {}); ",
                node.0,
                r.resources,
                self.backfill_text(r.backfill_until)
            ),
            None => full,
        };
        // Room somewhere: the next heartbeat of that node starts a job, unless the node stops
        // below its tree's spare bound first.
        if let Some(n) = shape.room_above_spare.map(|i| eligible.nodes[i]) {
            return Some(format!(
                "{full}node {:?} has room for a job of {job} ({} free): a job starts at that \
                 node's next heartbeat",
                n.id.0,
                n.free()
            ));
        }
        if let Some(n) = shape.room.map(|i| eligible.nodes[i]) {
            return Some(format!(
                "{full}node {:?} has room for a job of {job} ({} free), but less than its tree's \
                 min_spare_allocation_resources_on_node ({}), below which a heartbeat starts \
                 nothing; lower that tree option to use such room",
                n.id.0,
                n.free(),
                self.spare_of(n)
            ));
        }
        let total = &arena.total_resources;
        let amount = |share: &fairsched_resources::ResourceVector| total.scale_by(share);
        let e = &arena.elements[index];
        let fair = &e.attrs.fair_share.total;
        let own = format!(
            "usage {}, fair share {}",
            shown(&usage[index]),
            shown(&amount(fair))
        );
        if fairsched_resources::ResourceVector::splat(1e-9).dominates(fair) {
            return Some(format!("{full}{}", self.zero_share_reason(t, index)));
        }
        let text = match (e.scheduling_status, e.starvation_status) {
            (_, StarvationStatus::Starving | StarvationStatus::AggressivelyStarving) => {
                let nodes: Vec<&crate::model::Node> = eligible
                    .nodes
                    .iter()
                    .copied()
                    .filter(|n| n.tree == Some(t) && !n.draining)
                    .collect();
                // (Classes are per operation: those of every allocation on the tree's nodes
                // serve every operation's offers.)
                let classes = self.classes[t].get_or_init(|| {
                    preemption::classes_for_offers(
                        &self.trees[t],
                        self.books,
                        &self.caches.preemption[t],
                        t,
                        self.books
                            .nodes
                            .values()
                            .filter(|n| n.tree == Some(t))
                            .map(|n| &n.id),
                    )
                });
                let offers: Vec<(&crate::model::Node, Resources)> = nodes
                    .iter()
                    .map(|n| {
                        let offer = preemption::preemptive_offer(
                            &self.trees[t],
                            self.books,
                            &self.caches.preemption[t],
                            t,
                            index,
                            &n.id,
                            classes,
                        );
                        (*n, offer)
                    })
                    .collect();
                // A node tries preemption once per backoff: the earliest such node.
                let backoff = self.trees[t].config().preemptive_scheduling_backoff_ms;
                let next_try = |n: &crate::model::Node| {
                    n.last_preemptive_scheduling
                        .map_or(0, |l| l.saturating_add(backoff))
                };
                let fitting = offers
                    .iter()
                    .filter(|(_, offer)| offer.dominates(&job))
                    .min_by_key(|(n, _)| (next_try(n), &n.id));
                match fitting {
                    Some((n, offer)) => {
                        let when = match next_try(n) {
                            at if at > self.last_fair_share_update.unwrap_or(0) => format!(
                                "at its first heartbeat {} \
                                 (preemptive_scheduling_backoff_ms = {backoff})",
                                self.from(at)
                            ),
                            _ => "at its next heartbeat".to_string(),
                        };
                        format!(
                            "{full}starving ({own}): below its fair share for longer than the \
                             starvation timeout; node {:?} offers {offer} counting what it may \
                             preempt there, and preemption frees room for it {when}",
                            n.id.0
                        )
                    }
                    None => {
                        let most = offers.iter().max_by(|a, b| {
                            fit_ratio(&a.1, &job)
                                .total_cmp(&fit_ratio(&b.1, &job))
                                .then_with(|| b.0.id.cmp(&a.0.id))
                        });
                        let most = match most {
                            Some((n, offer)) => {
                                format!("the most is {offer} on node {:?}", n.id.0)
                            }
                            None => "no node of its tree runs jobs".to_string(),
                        };
                        format!(
                            "{full}starving ({own}), but no node has enough free and \
                             preemptible resources for one job of {job}: {most} (allocations \
                             below their operations' non-preemptible thresholds and those of \
                             starving or unsatisfied operations and pools are not preempted)"
                        )
                    }
                }
            }
            (SchedulingStatus::BelowFairShare, _) => format!(
                "{full}below its fair share ({own}); it becomes starving (and may preempt) \
                 after {} s below {} of its fair share (fair_share_starvation_timeout, \
                 fair_share_starvation_tolerance)",
                e.starvation_timeout_ms as f64 / 1000.0,
                e.tolerance
            ),
            _ => match satisfied_ancestor(&self.trees[t], index, usage) {
                Some((pool, a)) => format!(
                    "{full}pool {pool:?} uses its whole fair share (usage {}, fair share {}), \
                     which its operations share: this one gets more only when resources are \
                     free",
                    shown(&usage[a]),
                    shown(&amount(&arena.elements[a].attrs.fair_share.total))
                ),
                None => format!(
                    "{full}at or above its fair share ({own}): it gets more only when resources \
                     are free"
                ),
            },
        };
        Some(text)
    }

    /// Why the operation at `index` of tree `t` has a fair share of 0: the strong guarantees
    /// of other pools cover the cluster, or the others' shares take it all.
    fn zero_share_reason(&self, t: usize, index: ElementIndex) -> String {
        let arena = &self.trees[t].arena;
        let total = &arena.total_resources;
        let own_top = std::iter::once(index)
            .chain(arena.ancestors(index))
            .find(|&e| arena.elements[e].parent == Some(fairsched_hdrf::ROOT));
        let guaranteed: Vec<ElementIndex> = arena.elements[fairsched_hdrf::ROOT]
            .children
            .iter()
            .copied()
            .filter(|&c| Some(c) != own_top)
            .filter(|&c| {
                arena.elements[c]
                    .attrs
                    .strong_guarantee_share
                    .max_component()
                    > 1e-9
            })
            .collect();
        let mut covered = fairsched_resources::ResourceVector::ZERO;
        for &c in &guaranteed {
            covered = covered + arena.elements[c].attrs.strong_guarantee_share;
        }
        let covering: Vec<ResourceKind> = ResourceKind::ALL
            .iter()
            .copied()
            .filter(|&k| total.raw_of(k) > 0 && covered.get(k) >= 1.0 - 1e-6)
            .collect();
        if !covering.is_empty() {
            let names: Vec<String> = guaranteed
                .iter()
                .filter_map(|&c| match &arena.elements[c].kind {
                    crate::tree::ElementRef::Pool(p) => Some(format!(
                        "{p:?} ({})",
                        only(
                            &total.scale_by(&arena.elements[c].attrs.strong_guarantee_share),
                            &covering
                        )
                    )),
                    _ => None,
                })
                .collect();
            return format!(
                "its fair share is 0: the strong guarantees of pools {} cover the cluster's {}; \
                 it gets resources only when they are free",
                names.join(", "),
                only(total, &covering)
            );
        }
        "its fair share is 0: the fair shares of other operations and pools take the whole \
         cluster; it gets resources only when they are free"
            .to_string()
    }
}

/// The nearest ancestor (below the root) at or above its own fair share: it holds its subtree
/// back. Its pool name and arena index.
fn satisfied_ancestor(
    tree: &PoolTree,
    index: ElementIndex,
    usage: &[Resources],
) -> Option<(String, ElementIndex)> {
    let arena = &tree.arena;
    arena
        .ancestors(index)
        .filter(|&a| a != fairsched_hdrf::ROOT)
        .find(|&a| {
            let share = fairsched_resources::ResourceVector::from_resources(
                &usage[a],
                &arena.total_resources,
            );
            let attrs = &arena.elements[a].attrs;
            crate::heartbeat::walk::local_satisfaction(
                &share,
                &attrs.fair_share.total,
                &attrs.demand_share,
            ) >= 1.0 - 1e-6
        })
        .and_then(|a| match &arena.elements[a].kind {
            crate::tree::ElementRef::Pool(p) => Some((p.clone(), a)),
            _ => None,
        })
}

/// How close `offer` comes to holding `job`: the smallest ratio over the job's resources
/// (1 or more: it fits).
fn fit_ratio(offer: &Resources, job: &Resources) -> f64 {
    ResourceKind::ALL
        .iter()
        .filter(|&&k| job.raw_of(k) > 0)
        .map(|&k| offer.raw_of(k) as f64 / job.raw_of(k) as f64)
        .fold(f64::INFINITY, f64::min)
}

/// `r` in words: `0` when it is nothing.
fn shown(r: &Resources) -> String {
    if r.is_zero() {
        "0".to_string()
    } else {
        r.to_string()
    }
}

/// `r` with only the resources `kinds`.
fn only(r: &Resources, kinds: &[ResourceKind]) -> Resources {
    let mut out = Resources::ZERO;
    for &k in kinds {
        out.set_raw(k, r.raw_of(k));
    }
    out
}

impl WhyContext<'_> {
    /// A time to come: "at 8000 ms", or from now "in 4.5 s".
    fn at(&self, t: Millis) -> String {
        match self.from_now {
            None => format!("at {t} ms"),
            Some(now) => from_now(t, now),
        }
    }

    /// A time from which something may happen: "from 8000 ms", or from now "in 4.5 s".
    fn from(&self, t: Millis) -> String {
        match self.from_now {
            None => format!("from {t} ms"),
            Some(now) => from_now(t, now),
        }
    }

    /// How a reservation's or a gang's `backfill_until` reads in `why`.
    fn backfill_text(&self, until: Option<Millis>) -> String {
        match (until, self.from_now) {
            (Some(until), None) => {
                format!("jobs whose time limit ends by {until} ms may use them meanwhile")
            }
            (Some(until), Some(now)) if until > now => format!(
                "jobs whose time limit ends within {} may use them meanwhile",
                duration_words(until - now)
            ),
            (Some(_), Some(_)) => "nothing backfills them now: they are needed".into(),
            (None, _) => {
                "nothing backfills them: no time limits tell when they will be needed".into()
            }
        }
    }
}

/// `t` said from `now`: "in 4.5 s", "now" once it has come.
fn from_now(t: Millis, now: Millis) -> String {
    if t > now {
        format!("in {}", duration_words(t - now))
    } else {
        "now".to_string()
    }
}

/// A duration in words a reader takes in at a glance: "450 ms", "4.5 s", "12 min 5 s",
/// "3 h 20 min", "2 d 4 h".
pub fn duration_words(ms: Millis) -> String {
    const S: Millis = 1000;
    const MIN: Millis = 60 * S;
    const H: Millis = 60 * MIN;
    const D: Millis = 24 * H;
    match ms {
        ms if ms < S => format!("{ms} ms"),
        ms if ms < 10 * S => format!("{:.1} s", ms as f64 / 1000.0),
        ms if ms < MIN => format!("{} s", ms / S),
        ms if ms < H => format!("{} min {} s", ms / MIN, ms % MIN / S),
        ms if ms < D => format!("{} h {} min", ms / H, ms % H / MIN),
        ms => format!("{} d {} h", ms / D, ms % D / H),
    }
}

/// What a gang whose nodes start all its held jobs at their next heartbeats waits for.
fn about_to_start(a: &crate::holds::GangAssembly) -> String {
    format!(
        "gang: all its {} pending jobs are held on {} nodes, which start them at their next \
         heartbeats (gang_placement)",
        a.held_jobs(),
        a.holds.len()
    )
}

/// Up to three of `names`, then how many more: "a1, a2, a3 and 5 more".
fn list_some(names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let head = names[..names.len().min(SHOWN)].join(", ");
    match names.len().saturating_sub(SHOWN) {
        0 => head,
        more => format!("{head} and {more} more"),
    }
}
