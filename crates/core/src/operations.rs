//! Where operations go and how many may run (scheduler spec §3.4–§3.5): pool placement with
//! ephemeral pools, `max_operation_count` (error 202), `max_running_operation_count` with a
//! pending queue, lightweight operations, and why an operation waits.

use crate::event::EventKind;
use crate::model::{Millis, OperationId, OperationSpec, OperationState};
use crate::scheduler::{CoreError, ERROR_TOO_MANY_OPERATIONS, Scheduler};
use crate::tree::{EphemeralPool, ROOT_NAME};
use fairsched_config::{PoolConfig, SchedulingMode};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::{ResourceKind, Resources};
use serde::Serialize;
use std::collections::BTreeMap;

/// Operation counts of a pool (its whole subtree) or the root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolCounts {
    pub operation_count: u32,
    pub running_operation_count: u32,
    pub lightweight_running_operation_count: u32,
}

/// Where a new operation goes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Placement {
    pub pool: String,
    /// An ephemeral pool to create for it.
    pub create: Option<(String, EphemeralPool)>,
}

impl Scheduler {
    /// The operation type used for lightweight eligibility (`vanilla` unless given).
    pub(crate) fn is_lightweight(&self, t: usize, spec: &OperationSpec, pool: &str) -> bool {
        let vanilla = spec
            .operation_type
            .as_deref()
            .is_none_or(|t| t == "vanilla");
        vanilla
            && self.trees[t]
                .pool_config(pool)
                .is_some_and(|c| c.mode == SchedulingMode::Fifo)
            && self.trees[t]
                .explicit(pool)
                .map(|p| p.enable_lightweight_operations)
                .or_else(|| {
                    self.trees[t]
                        .pool_config(pool)
                        .and_then(|c| c.enable_lightweight_operations)
                })
                .unwrap_or(false)
    }

    /// Pool names from `pool` up to its top-level ancestor, then the root.
    pub(crate) fn pool_chain(
        &self,
        t: usize,
        pool: &str,
        planned: Option<&(String, EphemeralPool)>,
    ) -> Vec<String> {
        let mut chain = Vec::new();
        let mut cur = Some(pool.to_string());
        while let Some(name) = cur {
            if name == ROOT_NAME {
                break;
            }
            let parent = match planned {
                Some((planned_name, e)) if *planned_name == name => {
                    (e.parent != ROOT_NAME).then(|| e.parent.clone())
                }
                _ => self.trees[t].parent_of(&name),
            };
            chain.push(name);
            cur = parent;
        }
        chain.push(ROOT_NAME.to_string());
        chain
    }

    fn pool_limits(
        &self,
        t: usize,
        name: &str,
        planned: Option<&(String, EphemeralPool)>,
    ) -> (u32, u32) {
        let config = self.trees[t].config();
        if name == ROOT_NAME {
            return (
                config.max_operation_count,
                config.max_running_operation_count,
            );
        }
        if let Some(p) = self.trees[t].explicit(name) {
            return (p.max_operation_count, p.max_running_operation_count);
        }
        let pool_config: Option<&PoolConfig> = match planned {
            Some((n, e)) if n == name => Some(&e.config),
            _ => self.trees[t].pool_config(name),
        };
        let max_ops = pool_config
            .and_then(|c| c.max_operation_count)
            .unwrap_or(config.max_operation_count_per_pool);
        let max_running = pool_config
            .and_then(|c| c.max_running_operation_count)
            .unwrap_or(config.max_running_operation_count_per_pool)
            .min(max_ops);
        (max_ops, max_running)
    }

    /// Counts per pool (subtree totals) and for the root, in the default tree.
    pub fn pool_counts(&self) -> BTreeMap<String, PoolCounts> {
        self.pool_counts_in(self.default_tree)
    }

    /// Counts per pool (subtree totals) and for the root, in tree `t`.
    pub fn pool_counts_in(&self, t: usize) -> BTreeMap<String, PoolCounts> {
        self.debug_check_counts(t);
        self.trees[t].counts.clone()
    }

    /// In debug builds: the maintained counts equal a full recount.
    pub(crate) fn debug_check_counts(&self, t: usize) {
        debug_assert_eq!(
            self.trees[t].counts,
            self.count_all(t),
            "the maintained operation counts of tree {:?} went out of date",
            self.trees[t].name
        );
    }

    /// Recounts every pool of tree `t` from the operations (after the tree's shape changed).
    pub(crate) fn recount(&mut self, t: usize) {
        self.trees[t].counts = self.count_all(t);
    }

    /// Adds (`add`) or removes the operation's contribution to the counts of its pool and
    /// every ancestor, in every tree it runs in. Called before and after every change of its
    /// state or pool.
    pub(crate) fn count_operation(&mut self, id: &OperationId, add: bool) {
        let Some(op) = self.operations.get(id) else {
            return;
        };
        if op.state.is_finished() {
            return;
        }
        let running = op.state == OperationState::Running;
        let places: Vec<(usize, String, bool)> = op
            .trees
            .iter()
            .map(|o| (o.tree, o.pool.clone(), o.lightweight))
            .collect();
        for (t, pool, lightweight) in places {
            for name in self.pool_chain(t, &pool, None) {
                let counts = &mut self.trees[t].counts;
                let c = counts.entry(name.clone()).or_default();
                let step = |v: &mut u32| {
                    *v = if add { *v + 1 } else { *v - 1 };
                };
                step(&mut c.operation_count);
                if running {
                    if lightweight {
                        step(&mut c.lightweight_running_operation_count);
                    } else {
                        step(&mut c.running_operation_count);
                    }
                }
                if *c == PoolCounts::default() {
                    counts.remove(&name);
                }
            }
        }
    }

    /// The counts of tree `t` computed from scratch.
    fn count_all(&self, t: usize) -> BTreeMap<String, PoolCounts> {
        let mut counts: BTreeMap<String, PoolCounts> = BTreeMap::new();
        for op in self.unfinished_operations() {
            if op.state.is_finished() {
                continue;
            }
            let Some(mine) = op.in_tree(t) else {
                continue;
            };
            for name in self.pool_chain(t, &mine.pool, None) {
                let c = counts.entry(name).or_default();
                c.operation_count += 1;
                if op.state == OperationState::Running {
                    if mine.lightweight {
                        c.lightweight_running_operation_count += 1;
                    } else {
                        c.running_operation_count += 1;
                    }
                }
            }
        }
        counts
    }

    /// Decides the operation's pool without changing anything.
    pub(crate) fn plan_placement(
        &self,
        t: usize,
        pool: Option<&str>,
        user: &str,
    ) -> Result<Placement, CoreError> {
        let requested = pool.unwrap_or(user).to_string();
        if requested == ROOT_NAME && self.trees[t].config().forbid_immediate_operations_in_root {
            return Err(CoreError::new(format!(
                "starting operations immediately in pool {ROOT_NAME:?} is forbidden"
            )));
        }
        if let Some(config) = self.trees[t].pool_config(&requested) {
            if config.create_ephemeral_subpools {
                let name = format!("{requested}${user}");
                if self.trees[t].has_pool(&name) {
                    return Ok(Placement {
                        pool: name,
                        create: None,
                    });
                }
                let config = ephemeral_config(config.ephemeral_subpool_config.as_ref());
                return Ok(Placement {
                    pool: name,
                    create: Some((
                        format!("{requested}${user}"),
                        EphemeralPool {
                            parent: requested,
                            user: user.to_string(),
                            config,
                        },
                    )),
                });
            }
            if config.forbid_immediate_operations {
                return Err(CoreError::new(format!(
                    "starting operations immediately in pool {requested:?} is forbidden"
                )));
            }
            return Ok(Placement {
                pool: requested,
                create: None,
            });
        }
        fairsched_config::check_name(&requested, "pool")
            .map_err(|e| CoreError::new(format!("pool {requested:?}: {e}")))?;
        let parent = self.trees[t]
            .validated
            .default_parent_pool()
            .map(str::to_string)
            .unwrap_or_else(|| ROOT_NAME.to_string());
        let limit = self.trees[t].config().max_ephemeral_pools_per_user as usize;
        let owned: Vec<String> = self.trees[t]
            .ephemeral
            .iter()
            .filter(|(_, e)| e.user == user && e.parent == parent)
            .map(|(n, _)| n.clone())
            .collect();
        if owned.len() >= limit {
            // YTsaurus' message first, then what happened and what to do, in user words.
            let configured: Vec<&str> = self.trees[t]
                .validated
                .pools
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            let hint = match fairsched_config::closest(&requested, configured.iter().copied()) {
                Some(close) => format!(" Did you mean {close:?}?"),
                None => String::new(),
            };
            const SHOWN: usize = 10;
            let mut names: Vec<String> = configured
                .iter()
                .take(SHOWN)
                .map(|n| format!("{n:?}"))
                .collect();
            if configured.len() > SHOWN {
                names.push(format!("and {} more", configured.len() - SHOWN));
            }
            let existing = if names.is_empty() {
                "the tree configures no pools".to_string()
            } else {
                format!(
                    "pools of tree {:?}: {}",
                    self.trees[t].name,
                    names.join(", ")
                )
            };
            return Err(CoreError::new(format!(
                "cannot create new ephemeral pool {requested:?} for user {user:?}: the limit of \
                 {limit} ephemeral pools per user in {parent:?} has been reached; previously \
                 created pools are {owned:?}. Pool {requested:?} does not exist, so running \
                 the operation there would create it as your ephemeral pool.{hint} Name an \
                 existing pool ({existing}) or one of your ephemeral pools {owned:?}, or ask an \
                 administrator to raise max_ephemeral_pools_per_user."
            )));
        }
        let config = ephemeral_config(
            self.trees[t]
                .pool_config(&parent)
                .and_then(|c| c.ephemeral_subpool_config.as_ref()),
        );
        Ok(Placement {
            pool: requested.clone(),
            create: Some((
                requested,
                EphemeralPool {
                    parent,
                    user: user.to_string(),
                    config,
                },
            )),
        })
    }

    /// Rejects the operation with error 202 if any pool on its path (or the tree) is full.
    /// `moving_from`: the pool an operation being moved is in now, whose path counts it
    /// already (a move inside that path does not add it twice).
    pub(crate) fn check_operation_count(
        &self,
        t: usize,
        placement: &Placement,
        moving_from: Option<&str>,
    ) -> Result<(), CoreError> {
        self.debug_check_counts(t);
        let counts = &self.trees[t].counts;
        let counted: Vec<String> =
            moving_from.map_or_else(Vec::new, |pool| self.pool_chain(t, pool, None));
        for name in self.pool_chain(t, &placement.pool, placement.create.as_ref()) {
            let (max_ops, _) = self.pool_limits(t, &name, placement.create.as_ref());
            let current = counts.get(&name).map_or(0, |c| c.operation_count)
                - u32::from(counted.contains(&name));
            if current >= max_ops {
                return Err(CoreError::with_code(
                    ERROR_TOO_MANY_OPERATIONS,
                    format!(
                        "limit for the number of concurrent operations {max_ops} for pool {name:?} \
                         in tree {:?} has been reached",
                        self.trees[t].name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The lowest pool on the operation's path whose running-operation limit is reached.
    pub(crate) fn running_limit_violation(
        &self,
        t: usize,
        pool: &str,
        counts: &BTreeMap<String, PoolCounts>,
    ) -> Option<(String, u32)> {
        for name in self.pool_chain(t, pool, None) {
            let (_, max_running) = self.pool_limits(t, &name, None);
            let running = counts.get(&name).map_or(0, |c| c.running_operation_count);
            if running >= max_running {
                return Some((name, max_running));
            }
        }
        None
    }

    /// Rejects moving operation `id` (now in `from`, in tree slot `slot`) to `placement` if a
    /// pool on the new path is at its `max_running_operation_count` and the operation would
    /// count there as running (YTsaurus `ValidateAllOperationCountsOnPoolChange`). A running,
    /// non-lightweight operation already counts in the pools its old and new paths share, so
    /// only the others are checked; a pending or lightweight one is checked on the whole path.
    /// An operation that is lightweight in its new pool is never refused for running slots.
    pub(crate) fn check_running_count_on_move(
        &self,
        t: usize,
        id: &OperationId,
        slot: usize,
        placement: &Placement,
    ) -> Result<(), CoreError> {
        let Some(op) = self.operations.get(id) else {
            return Ok(());
        };
        if self.is_lightweight(t, &op.spec, &placement.pool) {
            return Ok(());
        }
        let mut new_chain = self.pool_chain(t, &placement.pool, placement.create.as_ref());
        if op.state == OperationState::Running && !op.trees[slot].lightweight {
            let mut old_chain = self.pool_chain(t, &op.trees[slot].pool, None);
            while !new_chain.is_empty() && new_chain.last() == old_chain.last() {
                new_chain.pop();
                old_chain.pop();
            }
        }
        let counts = &self.trees[t].counts;
        for name in new_chain {
            let (_, max_running) = self.pool_limits(t, &name, placement.create.as_ref());
            let running = counts.get(&name).map_or(0, |c| c.running_operation_count);
            if running >= max_running {
                return Err(CoreError::new(format!(
                    "cannot move operation {:?} to pool {:?}: max running operation count of \
                     pool {name:?} in tree {:?} violated ({running} running, \
                     max_running_operation_count = {max_running})",
                    id.0, placement.pool, self.trees[t].name
                )));
            }
        }
        Ok(())
    }

    /// Re-decides which operations are lightweight after their pools or the pools' options
    /// changed (YTsaurus re-evaluates it on every pool change): an operation becomes
    /// lightweight when it is vanilla and its pool is now a FIFO pool with
    /// `enable_lightweight_operations`, and stops being lightweight otherwise. Running
    /// operations keep running either way (one that stops being lightweight may leave its pools
    /// above their running limits, as in YTsaurus); a pending one that becomes lightweight runs
    /// at the next [`Scheduler::try_run_pending`].
    pub(crate) fn refresh_lightweight(&mut self) {
        let mut changed = Vec::new();
        for op in self.unfinished_operations() {
            if op.state.is_finished() {
                continue;
            }
            let now: Vec<bool> = op
                .trees
                .iter()
                .map(|o| self.is_lightweight(o.tree, &op.spec, &o.pool))
                .collect();
            if op.trees.iter().zip(&now).any(|(o, l)| o.lightweight != *l) {
                changed.push((op.spec.id.clone(), now));
            }
        }
        for (id, now) in changed {
            self.count_operation(&id, false);
            if let Some(op) = self.operations.get_mut(&id) {
                for (o, l) in op.trees.iter_mut().zip(now) {
                    o.lightweight = l;
                }
                op.lightweight = op.trees.first().is_some_and(|o| o.lightweight);
            }
            self.count_operation(&id, true);
            self.touch_operation(&id);
        }
    }

    /// Starts pending operations (in start order) whose pools have running slots again.
    pub(crate) fn try_run_pending(&mut self, now: Millis) {
        // Nothing waits when every unfinished operation runs (each root counts its tree's).
        let waiting = self.trees.iter().any(|tree| {
            tree.counts.get(ROOT_NAME).is_some_and(|c| {
                c.operation_count
                    > c.running_operation_count + c.lightweight_running_operation_count
            })
        });
        if !waiting {
            return;
        }
        let pending: Vec<OperationId> = self
            .unfinished_operations()
            .filter(|op| op.state == OperationState::Pending)
            .map(|op| op.spec.id.clone())
            .collect();
        if pending.is_empty() {
            return;
        }
        for id in pending {
            // Finishing an operation below re-enters this function; skip what it handled.
            if self.operations[&id].state != OperationState::Pending {
                continue;
            }
            // It runs once every tree it runs in has a running slot for it.
            let blocked = self.operations[&id]
                .trees
                .iter()
                .filter(|o| !o.lightweight)
                .find_map(|o| {
                    self.running_limit_violation(o.tree, &o.pool, &self.trees[o.tree].counts)
                        .map(|(pool, limit)| (o.tree, pool, limit))
                });
            match blocked {
                Some((t, blocking, limit)) => {
                    let reason = pending_reason(&blocking, limit, &self.trees[t].name);
                    if let Some(op) = self.operations.get_mut(&id) {
                        op.pending_reason = Some(reason);
                    }
                }
                None => {
                    self.count_operation(&id, false);
                    if let Some(op) = self.operations.get_mut(&id) {
                        op.state = OperationState::Running;
                        op.pending_reason = None;
                    }
                    self.count_operation(&id, true);
                    self.touch_operation(&id);
                    self.log(
                        now,
                        EventKind::OperationState {
                            operation: id.clone(),
                            state: OperationState::Running,
                            reason: None,
                        },
                    );
                    // An operation without jobs completes as soon as it runs.
                    self.maybe_complete(now, &id);
                }
            }
        }
    }
}

/// Configuration of a new ephemeral pool from its parent's `ephemeral_subpool_config`.
fn ephemeral_config(sub: Option<&fairsched_config::EphemeralSubpoolConfig>) -> PoolConfig {
    match sub {
        Some(sub) => PoolConfig {
            mode: sub.mode,
            max_operation_count: sub.max_operation_count,
            max_running_operation_count: sub.max_running_operation_count,
            resource_limits: sub.resource_limits,
            ..PoolConfig::default()
        },
        None => PoolConfig::default(),
    }
}

/// Why an operation is pending (YTsaurus alert `operation_pending`).
pub(crate) fn pending_reason(pool: &str, limit: u32, tree: &str) -> String {
    format!(
        "max running operation count violated: pool {pool:?} in tree {tree:?} already runs {limit} operations (max_running_operation_count = {limit})"
    )
}

impl Scheduler {
    /// Why an unfinished operation has jobs waiting, in words (the first reason that applies),
    /// or `None` when nothing holds it back.
    pub fn why_waiting(&self, op: &crate::model::Operation) -> Option<String> {
        use crate::tree::{SchedulingStatus, StarvationStatus};
        if op.state == OperationState::Pending {
            return op.pending_reason.clone();
        }
        if op.state != OperationState::Running || op.pending_job_count() == 0 {
            return None;
        }
        // Told for its first tree; nodes of any of its trees may take its jobs.
        let t = op.trees[0].tree;
        let in_its_trees = |n: &&crate::model::Node| {
            n.tree
                .is_some_and(|nt| op.trees.iter().any(|o| o.tree == nt))
        };
        let arena = &self.trees[t].arena;
        let Some(&index) = arena.by_operation.get(&op.spec.id) else {
            return Some("waiting for the next fair-share update to include the operation".into());
        };
        let job = op
            .spec
            .tasks
            .iter()
            .enumerate()
            .filter(|(t, _)| op.tasks[*t].pending > 0)
            .map(|(_, t)| t.resources)
            .next()?;
        if arena.elements[index].tag_set != 0
            && !self
                .nodes
                .values()
                .filter(in_its_trees)
                .any(|n| arena.tags_allow(index, &n.tags))
        {
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
        let eligible: Vec<&crate::model::Node> = self
            .nodes
            .values()
            .filter(in_its_trees)
            .filter(|n| n.scheduler_jobs_enabled && arena.tags_allow(index, &n.tags))
            .collect();
        if !eligible.iter().any(|n| n.resources.dominates(&job)) {
            let largest = eligible.iter().max_by(|a, b| {
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
        let usage = self.live_usage(t);
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
        // Where a job fits now: free resources, less what nodes hold for others' jobs.
        let leaf_in = |n: &crate::model::Node| {
            n.tree
                .and_then(|nt| Some((nt, *self.trees[nt].arena.by_operation.get(&op.spec.id)?)))
        };
        let with_room: Vec<&crate::model::Node> = eligible
            .iter()
            .copied()
            .filter(|n| !n.draining)
            .filter(|n| {
                let held = leaf_in(n)
                    .and_then(|(nt, leaf)| self.held_from_leaf(nt, &n.id, leaf))
                    .map_or(Resources::ZERO, |h| h.all());
                n.free().sub(&held).dominates(&job)
            })
            .collect();
        let full = if with_room.is_empty() {
            format!("no node has room for a job of {job} now; ")
        } else {
            String::new()
        };
        if self.trees[t].config().gang_placement.enable && op.is_gang() {
            let text = match self.gangs.get(&t) {
                _ if self.placed_gangs.contains_key(&op.spec.id) => {
                    let a = &self.placed_gangs[&op.spec.id];
                    format!(
                        "gang: all its {} pending jobs are held on {} nodes, which start them at \
                         their next heartbeats (gang_placement)",
                        a.held_jobs(),
                        a.holds.len()
                    )
                }
                Some(a) if a.operation == op.spec.id => format!(
                    "gang: {} of its {} pending jobs held on {} nodes; they start together once \
                     all are held (gang_placement; {})",
                    a.held_jobs(),
                    op.pending_job_count(),
                    a.holds.len(),
                    backfill_text(a.backfill_until)
                ),
                Some(a) => format!(
                    "gang: waits until gang {:?} has assembled (one gang gathers resources at a \
                     time; gang_placement)",
                    a.operation.0
                ),
                None => match self.gang_cooldown.get(&op.spec.id) {
                    Some(until) => format!(
                        "gang: its assembly timed out; it may gather resources again from \
                         {until} ms (gang_placement.assembly_timeout_ms)"
                    ),
                    None => "gang: gathers resources for all its jobs when the scheduler offers \
                             it a node (gang_placement)"
                        .to_string(),
                },
            };
            return Some(format!("{full}{text}"));
        }
        let full = match self
            .reservations
            .iter()
            .find(|(_, r)| r.operation == op.spec.id)
        {
            Some((node, r)) => format!(
                "{full}node {:?} holds {} for its next job and starts it once that much is free \
                 (job_reservation; {}); ",
                node.0,
                r.resources,
                backfill_text(r.backfill_until)
            ),
            None => full,
        };
        // Room somewhere: the next heartbeat of that node starts a job, unless the node stops
        // below its tree's spare bound first.
        let spare_of = |n: &crate::model::Node| {
            n.tree
                .map(|nt| {
                    self.trees[nt]
                        .config()
                        .min_spare_allocation_resources_on_node
                })
                .unwrap_or(fairsched_resources::PartialResources::EMPTY)
        };
        if let Some(n) = with_room
            .iter()
            .find(|n| !crate::heartbeat::below_min_spare(&n.free(), &n.resources, &spare_of(n)))
        {
            return Some(format!(
                "{full}node {:?} has room for a job of {job} ({} free): a job starts at that \
                 node's next heartbeat",
                n.id.0,
                n.free()
            ));
        }
        if let Some(n) = with_room.first() {
            return Some(format!(
                "{full}node {:?} has room for a job of {job} ({} free), but less than its tree's \
                 min_spare_allocation_resources_on_node ({}), below which a heartbeat starts \
                 nothing; lower that tree option to use such room",
                n.id.0,
                n.free(),
                spare_of(n)
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
                    .iter()
                    .copied()
                    .filter(|n| n.tree == Some(t) && !n.draining)
                    .collect();
                let classes = self.classes_for_offers(t, nodes.iter().map(|n| &n.id));
                let offers: Vec<(&crate::model::Node, Resources)> = nodes
                    .iter()
                    .map(|n| (*n, self.preemptive_offer(t, index, &n.id, &classes)))
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
                                "at its first heartbeat from {at} ms \
                                 (preemptive_scheduling_backoff_ms = {backoff})"
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
            _ => match satisfied_ancestor(self, t, index, &usage) {
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
    s: &Scheduler,
    t: usize,
    index: ElementIndex,
    usage: &[Resources],
) -> Option<(String, ElementIndex)> {
    let arena = &s.trees[t].arena;
    arena
        .ancestors(index)
        .filter(|&a| a != fairsched_hdrf::ROOT)
        .find(|&a| {
            let share = fairsched_resources::ResourceVector::from_resources(
                &usage[a],
                &arena.total_resources,
            );
            let attrs = &arena.elements[a].attrs;
            crate::heartbeat::local_satisfaction(
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

impl Scheduler {
    /// Hung operations (scheduler spec §3.7) are failed: an ancestor's (or the operation's own)
    /// limits too small for its smallest pending job for too long, or starving with nothing
    /// running and no successful schedule for too long.
    pub(crate) fn fail_hung_operations(&mut self, now: Millis) {
        use crate::tree::{ElementRef, StarvationStatus};
        let mut updates: Vec<(OperationId, Option<Option<Millis>>, bool)> = Vec::new();
        let mut to_fail: Vec<(OperationId, String)> = Vec::new();
        for op in self.unfinished_operations() {
            if op.state != OperationState::Running || op.pending_job_count() == 0 {
                continue;
            }
            // Smallest pending job (componentwise minimum over tasks with pending jobs).
            let min_job = op
                .spec
                .tasks
                .iter()
                .enumerate()
                .filter(|(t, _)| op.tasks[*t].pending > 0)
                .map(|(_, t)| t.resources)
                .reduce(|a, b| a.min(&b));
            // An operation in several trees is hung only if it is in every one of them: it
            // can progress in any tree where it is not limited or not starving.
            let mut starving = true;
            let mut limiting_check = true;
            let mut limiting = None;
            let mut in_arena = false;
            for o in &op.trees {
                let t = o.tree;
                let arena = &self.trees[t].arena;
                let Some(&index) = arena.by_operation.get(&op.spec.id) else {
                    starving = false;
                    limiting_check = false;
                    continue;
                };
                in_arena = true;
                starving &=
                    arena.elements[index].starvation_status != StarvationStatus::NonStarving;
                limiting_check &= self.trees[t].config().enable_limiting_ancestor_check
                    && !arena.total_resources.is_zero();
                let here = min_job.and_then(|job| {
                    std::iter::once(index)
                        .chain(arena.ancestors(index))
                        .find(|&e| !arena.elements[e].resource_limits.dominates(&job))
                        .map(|e| (t, e, job))
                });
                match here {
                    // The first tree's limiting element names the failure.
                    Some(found) => limiting = limiting.or(Some(found)),
                    None => limiting_check = false,
                }
            }
            if !in_arena {
                continue;
            }
            let since = match (limiting_check, limiting) {
                (true, Some(_)) => Some(op.limiting_ancestor_since.unwrap_or(now)),
                _ => None,
            };
            updates.push((op.spec.id.clone(), Some(since), starving));
            if let (Some(since), Some((t, e, job))) = (since, limiting)
                && now
                    >= since
                        + self
                            .config
                            .operation_hangup_due_to_limiting_ancestor_safe_timeout_ms
            {
                let arena = &self.trees[t].arena;
                let name = match &arena.elements[e].kind {
                    ElementRef::Pool(p) => p.clone(),
                    ElementRef::Operation(o) => o.0.clone(),
                    ElementRef::Root => ROOT_NAME.to_string(),
                };
                // The limits as configured (unset resources are unlimited and not shown).
                let specified = match &arena.elements[e].kind {
                    ElementRef::Pool(p) => self.trees[t]
                        .pool_config(p)
                        .map(|c| c.resource_limits)
                        .unwrap_or_default(),
                    _ => op.spec.resource_limits,
                };
                let in_tree = if op.trees.len() > 1 {
                    format!(" in tree {:?}", self.trees[t].name)
                } else {
                    String::new()
                };
                to_fail.push((
                    op.spec.id.clone(),
                    format!(
                        "scheduling hung: operation has ancestor {name:?}{in_tree} (limiting_ancestor: \
                         {name}) whose specified resource limits {} are too small for its minimum \
                         job {job}",
                        specified
                    ),
                ));
                continue;
            }
            let quiet_since = op
                .start_time
                .max(op.last_scheduled_at.unwrap_or(0))
                .max(op.last_non_starving_at);
            if starving
                && op.running_job_count() == 0
                && now >= quiet_since.saturating_add(self.config.operation_hangup_safe_timeout_ms)
                && op.failed_schedule_attempts
                    + (self.skipped_heartbeats - op.skipped_heartbeats_at_start)
                    >= self.config.operation_hangup_min_schedule_job_attempts
            {
                to_fail.push((
                    op.spec.id.clone(),
                    "scheduling hung: operation has no successful scheduled allocations for a long period"
                        .to_string(),
                ));
            }
        }
        for (id, since, starving) in updates {
            if let Some(op) = self.operations.get_mut(&id) {
                if let Some(since) = since {
                    op.limiting_ancestor_since = since;
                }
                if !starving {
                    op.last_non_starving_at = now;
                }
            }
        }
        for (id, reason) in to_fail {
            self.fail_operation(now, &id, reason);
        }
    }
}

/// How a reservation's or a gang's `backfill_until` reads in `why`.
fn backfill_text(until: Option<Millis>) -> String {
    match until {
        Some(until) => format!("jobs whose time limit ends by {until} ms may use them meanwhile"),
        None => "nothing backfills them: no time limits tell when they will be needed".into(),
    }
}
