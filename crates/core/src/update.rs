//! The periodic work ([`Scheduler::tick`]): the fair-share update, which recomputes every
//! tree's shares and statuses and then lets preemption, reservations and gangs catch up with
//! them, and the check for hung operations; and replacing the trees' configuration, which
//! takes effect at the next update.

use crate::error::CoreError;
use crate::event::EventKind;
use crate::model::Millis;
use crate::model::NodeId;
use crate::model::OperationId;
use crate::model::OperationState;
use crate::scheduler::Scheduler;
use crate::state::{Books, EventLog};
use crate::tree::EphemeralPool;
use crate::tree::PoolTree;
use crate::tree::ROOT_NAME;
use crate::tree::TreeUpdate;
use fairsched_config::PoolConfig;
use fairsched_config::ValidatedPoolTrees;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

impl Scheduler {
    /// Runs periodic work that is due at `now`: the fair-share update (done at once; a driver
    /// that computes it elsewhere asks [`Scheduler::fair_share_update_due`] and prepares it
    /// itself) and the check for hung operations.
    pub fn tick(&mut self, now: Millis) {
        if self.fair_share_update_due(now) {
            self.update_fair_share(now);
        }
        self.check_hung_operations(now);
    }

    /// Whether a fair-share update is due at `now` (`fair_share_update_period_ms` after the
    /// last one installed).
    pub fn fair_share_update_due(&self, now: Millis) -> bool {
        self.last_fair_share_update
            .is_none_or(|last| now >= last.saturating_add(self.config.fair_share_update_period_ms))
    }

    /// The first time after the last fair-share update at which a starvation status it
    /// computed changes by the clock alone: an element below its fair share starves (or
    /// starves aggressively) then if its usage and shares stay as they are. A fair-share
    /// update at or after it would make it a preemption target; a driver that updates only
    /// when something happens (the trace replay) updates then too. `None`: nothing is below
    /// its fair share (or never starves).
    pub fn next_status_change(&self) -> Option<Millis> {
        self.trees
            .iter()
            .filter_map(|t| t.next_status_change_ms)
            .min()
    }

    /// Whether, as of the last fair-share update, a heartbeat's preemptive stages may
    /// preempt: an operation that is a preemption target still has pending jobs and may
    /// start by preemption (gang operations placed all at once start only from what they
    /// hold, never by preemption), or lowered limits may need enforcing. A driver that
    /// heartbeats only the nodes where something happened (the trace replay) then heartbeats
    /// the nodes where victims may run ([`Scheduler::nodes_with_preemptible_allocations`]),
    /// as the periodic heartbeats of a real cluster would.
    pub fn preemption_wanted(&self) -> bool {
        self.trees.iter().enumerate().any(|(t, tree)| {
            let gangs_start_whole = tree.config().gang_placement.enable;
            tree.limits_maybe_violated
                || (self.caches.preemption[t].targets.values().flatten()).any(|&i| {
                    matches!(&tree.arena.elements[i].kind,
                    crate::tree::ElementRef::Operation(id)
                    if self.books.operations.get(id).is_some_and(|op| {
                        op.state == OperationState::Running
                            && op.pending_job_count() > 0
                            && !(gangs_start_whole && op.is_gang())
                    }))
                })
        })
    }

    /// The nodes running an allocation that its operation's classes, as of the last
    /// fair-share update, let be preempted (preemptible or aggressively preemptible; see
    /// [`Scheduler::classify`]): where a preemptive stage may find a victim for a starving
    /// operation. A driver that heartbeats only some nodes (the trace replay) heartbeats these
    /// when [`Scheduler::preemption_wanted`].
    pub fn nodes_with_preemptible_allocations(&self) -> BTreeSet<NodeId> {
        let mut nodes = BTreeSet::new();
        for t in 0..self.trees.len() {
            for op in self.books.operations.values() {
                if op.allocations.is_empty() {
                    continue;
                }
                for (id, status) in crate::preemptible::classify(&self.trees[t], &self.books, t, op)
                {
                    if status != crate::preemptible::PreemptionStatus::NonPreemptible
                        && let Some(a) = self.books.allocations.get(&id)
                    {
                        nodes.insert(a.node.clone());
                    }
                }
            }
        }
        nodes
    }

    /// The preemption targets of the last fair-share update: per tree (index), the operations
    /// listed by preemption priority, in that order.
    pub fn preemption_targets(&self) -> impl Iterator<Item = (usize, &OperationId)> {
        self.trees.iter().enumerate().flat_map(|(t, tree)| {
            (self.caches.preemption[t].targets.values().flatten()).filter_map(move |&i| match &tree
                .arena
                .elements[i]
                .kind
            {
                crate::tree::ElementRef::Operation(id) => Some((t, id)),
                _ => None,
            })
        })
    }

    /// Fails hung operations when the check is due (`operation_hangup_check_period_ms`).
    pub fn check_hung_operations(&mut self, now: Millis) {
        let hangup_due = self.last_hangup_check.is_none_or(|last| {
            now >= last.saturating_add(self.config.operation_hangup_check_period_ms)
        });
        if hangup_due {
            self.last_hangup_check = Some(now);
            let skipped = self.skipped_heartbeats;
            self.parts().fail_hung_operations(now, skipped);
        }
    }

    /// Recomputes fair shares and statuses now: [`Scheduler::prepare_fair_share_update`],
    /// [`FairShareUpdate::compute`] and [`Scheduler::apply_fair_share_update`] in turn.
    pub fn update_fair_share(&mut self, now: Millis) {
        let mut update = self.prepare_fair_share_update(now);
        update.compute();
        self.apply_fair_share_update(&mut update);
    }

    /// Prepares a fair-share update at `now`: a copy of what the computation reads from every
    /// tree (each tree's working memory goes with it). A driver may compute it on another
    /// thread while heartbeats and commands go on against the previous shares, then apply it;
    /// it prepares no other until then. The same as [`Scheduler::begin_fair_share_update`]
    /// and [`Scheduler::finish_fair_share_update`] with nothing in between.
    pub fn prepare_fair_share_update(&mut self, now: Millis) -> FairShareUpdate {
        let preparing = self.begin_fair_share_update(now);
        self.finish_fair_share_update(preparing)
    }

    /// Starts preparing a fair-share update at `now` in slices
    /// ([`Scheduler::continue_fair_share_update`], then
    /// [`Scheduler::finish_fair_share_update`]), so that a driver never stops for a whole
    /// copy of a large cluster; the scheduler may change between slices. Each operation is
    /// copied as it is when its slice is taken (one finished by then is left out; one started
    /// since waits for the next update, as if it had started just after this one). A change of
    /// a tree's configuration meanwhile makes the update one that is not installed.
    pub fn begin_fair_share_update(&mut self, now: Millis) -> PreparingUpdate {
        PreparingUpdate::new(now, &self.trees, &self.books)
    }

    /// Copies the next `count` operations into an update being prepared; true when all are.
    pub fn continue_fair_share_update(
        &self,
        preparing: &mut PreparingUpdate,
        count: usize,
    ) -> bool {
        preparing.copy_operations(&self.trees, &self.books, count)
    }

    /// The prepared update (operations not yet copied are copied now). The operations
    /// finished since it began leave the live order.
    pub fn finish_fair_share_update(&mut self, mut preparing: PreparingUpdate) -> FairShareUpdate {
        self.continue_fair_share_update(&mut preparing, usize::MAX);
        let PreparingUpdate {
            now,
            ids,
            mut kept,
            operations,
            generations,
            ..
        } = preparing;
        // The live order is what it was (its operations still unfinished when copied) and
        // the operations started since: nothing but this takes operations out of it.
        debug_assert!(
            self.books.live_order.len() >= ids.len(),
            "the live order only grows"
        );
        kept.extend(
            self.books
                .live_order
                .drain(ids.len().min(self.books.live_order.len())..),
        );
        self.books.live_order = kept;
        let mut trees = Vec::with_capacity(self.trees.len());
        for (t, (ops, generation)) in operations.into_iter().zip(generations).enumerate() {
            let total = self.books.tree_total_kept(t);
            trees.push(self.trees[t].prepare_update(t, now, total, generation, ops));
        }
        FairShareUpdate { now, trees }
    }

    /// Installs a computed fair-share update: new shares, statuses and preemption targets in
    /// every tree (computed with the shares), then alerts, reservations and gangs from them.
    /// What changed since it was prepared is reconciled: operations that started since wait
    /// for the next update (as if they had started just after this one), finished ones leave
    /// at their next; a tree whose
    /// configuration changed meanwhile keeps its previous shares and nothing is installed
    /// (false: prepare another; every tree's working memory comes back either way).
    /// Afterwards `update` holds what the installed one replaced (the previous arenas): the
    /// driver drops it where that does not hold up scheduling.
    pub fn apply_fair_share_update(&mut self, update: &mut FairShareUpdate) -> bool {
        let now = update.now;
        if update
            .trees
            .iter()
            .any(|u| !self.trees[u.tree_index()].update_is_current(u))
        {
            for u in &mut update.trees {
                self.trees[u.tree_index()].return_workspace(u);
            }
            return false;
        }
        for u in &mut update.trees {
            let t = u.tree_index();
            self.trees[t].apply_update(u);
            let targets = u.take_targets();
            let arena = &self.trees[t].arena;
            let gang_placement = self.trees[t].config().gang_placement.enable;
            let open = targets
                .iter()
                .map(|(&priority, list)| {
                    let mut open: Vec<fairsched_hdrf::ElementIndex> = (list.iter().copied())
                        .filter(|&i| {
                            !(gang_placement
                                && crate::heartbeat::descent::is_gang_leaf(
                                    arena,
                                    &self.books.operations,
                                    i,
                                ))
                        })
                        .collect();
                    open.sort_unstable();
                    (priority, open)
                })
                .collect();
            self.caches.preemption[t].open_targets = Some((gang_placement, open));
            self.caches.preemption[t].targets = targets;
            self.caches.walks[t] = None;
            self.caches.preemption[t].classes.clear();
        }
        for t in 0..self.trees.len() {
            raise_fair_share_alerts(&mut self.trees[t], &self.books, &mut self.events, t, now);
        }
        crate::reservation::update_reservations(
            &self.trees,
            &self.books,
            &mut self.holds,
            &mut self.events,
            now,
        );
        crate::gang::update_gangs(
            &self.trees,
            &self.books,
            &mut self.holds,
            &mut self.events,
            now,
        );
        self.last_fair_share_update = Some(now);
        self.stats.fair_share_updates += 1;
        true
    }

    /// Replaces the trees' configuration (a validated new version: pools created, changed,
    /// moved or removed, tree options changed). The set of trees must stay the same (adding or
    /// removing a tree needs a restart); a node that would match two trees' filters rejects
    /// the whole change. Operations keep their pools; an operation whose pool disappeared
    /// continues in an ephemeral pool of that name, and a removed pool with ephemeral subpools
    /// is kept as one too (both under the default parent, until empty); an ephemeral pool that
    /// is now configured becomes explicit. Takes effect at the next fair-share update.
    pub fn replace_tree_config(
        &mut self,
        now: Millis,
        trees: ValidatedPoolTrees,
    ) -> Result<(), CoreError> {
        let assignment = plan_tree_config(&self.trees, &self.books, &trees)?;
        // Limits and paths may change: every pending operation is looked at again.
        self.caches.pending.invalidate_all();
        for (tree, validated) in self.trees.iter_mut().zip(trees.trees.into_values()) {
            tree.set_validated(validated);
            tree.limits_maybe_violated = true;
        }
        // Preemption thresholds may have changed.
        for cache in &mut self.caches.preemption {
            cache.classes.clear();
        }
        let mut moved = Vec::new();
        for (id, t) in assignment {
            if let Some(node) = self.books.nodes.get_mut(&id)
                && node.tree != t
            {
                node.tree = t;
                self.books.node_changed(&id);
                moved.push(id);
            }
        }
        let mut s = self.parts();
        for id in moved {
            s.abort_allocations_of_moved_node(now, &id);
        }
        for t in 0..self.trees.len() {
            let tree = &mut self.trees[t];
            let explicit: BTreeSet<String> = tree
                .validated
                .pools
                .iter()
                .map(|p| p.name.clone())
                .collect();
            tree.ephemeral.retain(|name, _| !explicit.contains(name));
            // Operations whose pool is gone continue in an ephemeral pool of that name.
            let orphans: Vec<(String, String)> = self
                .unfinished_operations()
                .filter_map(|op| {
                    let pool = &op.in_tree(t)?.pool;
                    (!self.trees[t].has_pool(pool)).then(|| (pool.clone(), op.user.clone()))
                })
                .collect();
            let tree = &mut self.trees[t];
            let parent = tree
                .validated
                .default_parent_pool()
                .map(str::to_string)
                .unwrap_or_else(|| ROOT_NAME.to_string());
            for (pool, user) in orphans {
                tree.ephemeral.entry(pool).or_insert_with(|| EphemeralPool {
                    parent: parent.clone(),
                    user,
                    config: PoolConfig::default(),
                });
            }
            // A removed pool that still has ephemeral subpools is kept too, with the default
            // options under the default parent, until its subtree is empty (YTsaurus keeps a
            // removed pool that is not empty, default-configured, and drops it with its last
            // operation). The default parent exists, so one round settles every chain.
            let kept: Vec<(String, String)> = tree
                .ephemeral
                .values()
                .filter(|e| e.parent != ROOT_NAME && !tree.has_pool(&e.parent))
                .map(|e| (e.parent.clone(), e.user.clone()))
                .collect();
            for (pool, user) in kept {
                tree.ephemeral.entry(pool).or_insert_with(|| EphemeralPool {
                    parent: parent.clone(),
                    user,
                    config: PoolConfig::default(),
                });
            }
            // Pools moved: every operation's chain of ancestors may have changed.
            self.recount(t);
        }
        self.parts().try_run_pending(now);
        Ok(())
    }
}

/// Checks a replacement of every tree's configuration, changing nothing: the same trees,
/// and every node in at most one tree under the new node filters. The nodes' trees under the
/// new filters (empty when no filter changed: every node stays where it is, and a pool change
/// on a large cluster need not revisit every node).
fn plan_tree_config(
    current: &[PoolTree],
    books: &Books,
    new: &ValidatedPoolTrees,
) -> Result<Vec<(NodeId, Option<usize>)>, CoreError> {
    let names: Vec<&String> = new.trees.keys().collect();
    let ours: Vec<&String> = current.iter().map(|t| &t.name).collect();
    if names != ours {
        return Err(CoreError::new(format!(
            "the new configuration has trees {names:?}, the scheduler runs {ours:?}; adding \
             or removing trees needs a restart"
        )));
    }
    let filters_changed = current
        .iter()
        .zip(new.trees.values())
        .any(|(tree, new)| tree.config().node_tag_filter != new.config().node_tag_filter);
    let mut assignment = Vec::new();
    if filters_changed {
        let mut candidate: Vec<PoolTree> = current.to_vec();
        for (tree, validated) in candidate.iter_mut().zip(new.trees.values()) {
            tree.set_validated(validated.clone());
        }
        for node in books.nodes.values() {
            assignment.push((
                node.id.clone(),
                Scheduler::tree_for_tags(&candidate, &node.id, &node.tags)?,
            ));
        }
    }
    Ok(assignment)
}

/// A fair-share update being prepared in slices ([`Scheduler::begin_fair_share_update`]).
#[derive(Debug)]
pub struct PreparingUpdate {
    now: Millis,
    /// The live order when it began (taken as they are copied), and how many are done.
    ids: Vec<(u64, OperationId)>,
    done: usize,
    /// Those still unfinished when copied, in order.
    kept: Vec<(u64, OperationId)>,
    /// Per tree: its running operations as copied, and its configuration's generation.
    operations: Vec<Vec<crate::tree::PreparedOperation>>,
    generations: Vec<u64>,
}

impl PreparingUpdate {
    /// Starts preparing an update at `now` from the trees (their generations) and the books'
    /// live order.
    fn new(now: Millis, trees: &[PoolTree], books: &Books) -> PreparingUpdate {
        PreparingUpdate {
            now,
            ids: books.live_order.clone(),
            done: 0,
            kept: Vec::with_capacity(books.live_order.len()),
            operations: vec![Vec::new(); trees.len()],
            generations: trees.iter().map(|t| t.generation).collect(),
        }
    }

    /// Copies the next `count` operations of `books` (for each of `trees`); true when all are.
    fn copy_operations(&mut self, trees: &[PoolTree], books: &Books, count: usize) -> bool {
        let end = self.ids.len().min(self.done.saturating_add(count));
        let media: Vec<Option<&[String]>> = trees.iter().map(|t| t.ssd_media()).collect();
        for i in self.done..end {
            let (seq, id) = std::mem::replace(&mut self.ids[i], (0, OperationId(String::new())));
            let Some(op) = books
                .live_operation(seq, &id)
                .filter(|op| !op.state.is_finished())
            else {
                continue;
            };
            if op.state == OperationState::Running {
                for (t, ssd_media) in media.iter().enumerate() {
                    if let Some(prepared) = crate::tree::prepare_operation(t, op, *ssd_media) {
                        self.operations[t].push(prepared);
                    }
                }
            }
            self.kept.push((seq, id));
        }
        self.done = end;
        self.done == self.ids.len()
    }
}

/// A fair-share update of every tree, prepared by [`Scheduler::prepare_fair_share_update`]:
/// [`FairShareUpdate::compute`] runs it (a pure computation that needs nothing else, on any
/// thread), [`Scheduler::apply_fair_share_update`] installs it.
pub struct FairShareUpdate {
    now: Millis,
    trees: Vec<TreeUpdate>,
}

impl std::fmt::Debug for FairShareUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairShareUpdate")
            .field("now", &self.now)
            .field("trees", &self.trees.len())
            .finish()
    }
}

impl FairShareUpdate {
    /// Computes every tree's fair shares.
    pub fn compute(&mut self) {
        for tree in &mut self.trees {
            tree.compute();
        }
    }

    /// The time it is an update at.
    pub fn now(&self) -> Millis {
        self.now
    }
}

/// Logs an `error` event for every fair-share alert that appeared with this update of tree `t`
/// (`tree`) (YTsaurus
/// raises a scheduler alert; 29000: strong guarantees exceed the cluster and are scaled down).
fn raise_fair_share_alerts(
    tree: &mut PoolTree,
    books: &Books,
    events: &mut EventLog,
    t: usize,
    now: Millis,
) {
    // One alert per code, as YTsaurus raises one scheduler alert per kind.
    let mut by_code: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for e in &tree.arena.errors {
        by_code
            .entry(e.code().unwrap_or(1))
            .or_default()
            .push(format!("{}: {e}", e.name()));
    }
    if let Some(messages) = by_code.get_mut(&fairsched_config::POOL_TREE_GUARANTEES_OVERCOMMIT) {
        // The configuration's words for it (the overcommitted resources only, in human
        // units), as the server's replies to pool changes say it; the update's own text
        // where the configured guarantees alone do not show it (inferred components).
        let total = books.tree_total(t);
        if let Some(alert) =
            fairsched_config::guarantee_overcommit_alert(&tree.validated.tree, &total)
        {
            *messages = vec![alert.message];
        }
    }
    let alerts: Vec<(u32, String)> = by_code
        .into_iter()
        .map(|(code, messages)| (code, messages.join("; ")))
        .collect();
    for alert in &alerts {
        if !tree.active_alerts.contains(alert) {
            events.log(
                now,
                EventKind::Error {
                    code: alert.0,
                    message: format!("pool tree {:?}: {}", tree.name, alert.1),
                },
            );
        }
    }
    tree.active_alerts = alerts;
}
