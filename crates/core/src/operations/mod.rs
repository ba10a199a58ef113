//! Where operations go and how many may run (scheduler spec §3.4–§3.5): pool placement with
//! ephemeral pools, `max_operation_count` (error 202), `max_running_operation_count` with a
//! pending queue, lightweight operations, and why an operation waits.
//!
//! Functions over explicit borrows of a tree, the books and the counts; the [`Scheduler`] and
//! `Parts` methods keep the counts cache (and give them to the public API).

pub(crate) mod counts;
pub(crate) mod pending;
pub use counts::PoolCounts;

use crate::model::{OperationId, OperationSpec, OperationState};
use crate::scheduler::{CoreError, Parts, Scheduler};
use crate::state::Books;
use crate::tree::{EphemeralPool, PoolTree, ROOT_NAME};
use fairsched_config::{PoolConfig, SchedulingMode};
use pending::PendingQueue;
use std::collections::BTreeMap;

/// Where a new operation goes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Placement {
    pub pool: String,
    /// An ephemeral pool to create for it.
    pub create: Option<(String, EphemeralPool)>,
}

impl Scheduler {
    /// Counts per pool (subtree totals) and for the root, in the default tree.
    pub fn pool_counts(&self) -> BTreeMap<String, PoolCounts> {
        self.pool_counts_in(self.default_tree)
    }

    /// Counts per pool (subtree totals) and for the root, in tree `t`.
    pub fn pool_counts_in(&self, t: usize) -> BTreeMap<String, PoolCounts> {
        debug_check_counts(&self.trees[t], &self.books, t, &self.caches.counts[t]);
        self.caches.counts[t].clone()
    }

    /// Recounts every pool of tree `t` from the operations (after the tree's shape changed).
    pub(crate) fn recount(&mut self, t: usize) {
        self.caches.counts[t] = count_all(&self.trees[t], &self.books, t);
    }
}

impl Parts<'_> {
    /// Adds (`add`) or removes the operation's contribution to the counts of its pool and
    /// every ancestor, in every tree it runs in ([`count_operation`]). Called before and after
    /// every change of its state or pool.
    #[inline]
    pub(crate) fn count_operation(&mut self, id: &OperationId, add: bool) {
        count_operation(
            self.trees,
            self.books,
            &mut self.caches.counts,
            &mut self.caches.pending,
            id,
            add,
        );
        // Its pending jobs count for the heartbeat's skip while it runs.
        let books = &mut *self.books;
        if let Some(op) = books.operations.get(id)
            && op.state == OperationState::Running
        {
            for shape in op.pending_job_resources() {
                if add {
                    books.pending_shapes.add(&shape);
                } else {
                    books.pending_shapes.remove(&shape);
                }
            }
        }
    }

    /// Re-decides which operations are lightweight after their pools or the pools' options
    /// changed (YTsaurus re-evaluates it on every pool change): an operation becomes
    /// lightweight when it is vanilla and its pool is now a FIFO pool with
    /// `enable_lightweight_operations`, and stops being lightweight otherwise. Running
    /// operations keep running either way (one that stops being lightweight may leave its pools
    /// above their running limits, as in YTsaurus); a pending one that becomes lightweight runs
    /// at the next `Parts::try_run_pending`.
    pub(crate) fn refresh_lightweight(&mut self) {
        let mut changed = Vec::new();
        for op in self.books.unfinished_operations() {
            if op.state.is_finished() {
                continue;
            }
            let now: Vec<bool> = op
                .trees
                .iter()
                .map(|o| is_lightweight(&self.trees[o.tree], &op.spec, &o.pool))
                .collect();
            if op.trees.iter().zip(&now).any(|(o, l)| o.lightweight != *l) {
                changed.push((op.spec.id.clone(), now));
            }
        }
        if !changed.is_empty() {
            self.caches.pending.invalidate_all();
        }
        for (id, now) in changed {
            self.count_operation(&id, false);
            if let Some(op) = self.books.operations.get_mut(&id) {
                for (o, l) in op.trees.iter_mut().zip(now) {
                    o.lightweight = l;
                }
                op.lightweight = op.trees.first().is_some_and(|o| o.lightweight);
            }
            self.count_operation(&id, true);
            self.touch_operation(&id);
        }
    }
}

/// Whether an operation of `spec` in `pool` of `tree` is lightweight (its type, `vanilla`
/// unless given, and the pool's mode and options).
pub(crate) fn is_lightweight(tree: &PoolTree, spec: &OperationSpec, pool: &str) -> bool {
    let vanilla = spec
        .operation_type
        .as_deref()
        .is_none_or(|t| t == "vanilla");
    vanilla
        && tree
            .pool_config(pool)
            .is_some_and(|c| c.mode == SchedulingMode::Fifo)
        && tree
            .explicit(pool)
            .map(|p| p.enable_lightweight_operations)
            .or_else(|| {
                tree.pool_config(pool)
                    .and_then(|c| c.enable_lightweight_operations)
            })
            .unwrap_or(false)
}

/// Pool names of `tree` from `pool` up to its top-level ancestor, then the root.
pub(crate) fn pool_chain(
    tree: &PoolTree,
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
            _ => tree.parent_of(&name),
        };
        chain.push(name);
        cur = parent;
    }
    chain.push(ROOT_NAME.to_string());
    chain
}

/// The `max_operation_count` and `max_running_operation_count` of pool `name` of `tree` (or
/// of the tree, for the root).
pub(crate) fn pool_limits(
    tree: &PoolTree,
    name: &str,
    planned: Option<&(String, EphemeralPool)>,
) -> (u32, u32) {
    let config = tree.config();
    if name == ROOT_NAME {
        return (
            config.max_operation_count,
            config.max_running_operation_count,
        );
    }
    if let Some(p) = tree.explicit(name) {
        return (p.max_operation_count, p.max_running_operation_count);
    }
    let pool_config: Option<&PoolConfig> = match planned {
        Some((n, e)) if n == name => Some(&e.config),
        _ => tree.pool_config(name),
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

/// In debug builds: the maintained counts `counts` of tree `t` (`tree`) equal a full recount.
pub(crate) fn debug_check_counts(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    counts: &BTreeMap<String, PoolCounts>,
) {
    debug_assert_eq!(
        *counts,
        count_all(tree, books, t),
        "the maintained operation counts of tree {:?} went out of date",
        tree.name
    );
}

/// Adds (`add`) or removes the operation's contribution to the counts of its pool and
/// every ancestor, in every tree it runs in. Called before and after every change of its
/// state or pool. `counts` and `pending` are the caches of [`Parts::count_operation`].
fn count_operation(
    trees: &[PoolTree],
    books: &Books,
    counts: &mut [BTreeMap<String, PoolCounts>],
    pending: &mut PendingQueue,
    id: &OperationId,
    add: bool,
) {
    let Some(op) = books.operations.get(id) else {
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
        let chain = pool_chain(&trees[t], &pool, None);
        for (level, name) in chain.iter().enumerate() {
            // The pool's running limit, when this changes its running count.
            let limit = (running && !lightweight).then(|| pool_limits(&trees[t], name, None).1);
            let counts = &mut counts[t];
            let c = counts.entry(name.clone()).or_default();
            let step = |v: &mut u32| {
                *v = if add { *v + 1 } else { *v - 1 };
            };
            step(&mut c.operation_count);
            let was = c.running_operation_count;
            if running {
                if lightweight {
                    step(&mut c.lightweight_running_operation_count);
                } else {
                    step(&mut c.running_operation_count);
                }
            }
            let now = c.running_operation_count;
            if *c == PoolCounts::default() {
                counts.remove(name);
            }
            // Pending operations below a pool that reached or left its limit may now run
            // or wait elsewhere.
            if let Some(limit) = limit
                && (was >= limit) != (now >= limit)
            {
                let key = (t, name.clone());
                if now >= limit {
                    pending.reached(&key, &chain[level + 1..]);
                } else {
                    pending.freed(&key);
                }
            }
        }
    }
}

/// The counts of tree `t` (`tree`) computed from scratch.
fn count_all(tree: &PoolTree, books: &Books, t: usize) -> BTreeMap<String, PoolCounts> {
    let mut counts: BTreeMap<String, PoolCounts> = BTreeMap::new();
    for op in books.unfinished_operations() {
        if op.state.is_finished() {
            continue;
        }
        let Some(mine) = op.in_tree(t) else {
            continue;
        };
        for name in pool_chain(tree, &mine.pool, None) {
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

/// Decides the operation's pool in `tree` without changing anything.
pub(crate) fn plan_placement(
    tree: &PoolTree,
    pool: Option<&str>,
    user: &str,
) -> Result<Placement, CoreError> {
    let requested = pool.unwrap_or(user).to_string();
    if requested == ROOT_NAME && tree.config().forbid_immediate_operations_in_root {
        return Err(CoreError::new(format!(
            "starting operations immediately in pool {ROOT_NAME:?} is forbidden"
        )));
    }
    if let Some(config) = tree.pool_config(&requested) {
        if config.create_ephemeral_subpools {
            let name = format!("{requested}${user}");
            if tree.has_pool(&name) {
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
    let parent = tree
        .validated
        .default_parent_pool()
        .map(str::to_string)
        .unwrap_or_else(|| ROOT_NAME.to_string());
    let limit = tree.config().max_ephemeral_pools_per_user as usize;
    let owned: Vec<String> = tree
        .ephemeral
        .iter()
        .filter(|(_, e)| e.user == user && e.parent == parent)
        .map(|(n, _)| n.clone())
        .collect();
    if owned.len() >= limit {
        // YTsaurus' message first, then what happened and what to do, in user words.
        let configured: Vec<&str> = tree
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
            format!("pools of tree {:?}: {}", tree.name, names.join(", "))
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
        tree.pool_config(&parent)
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

/// Rejects the operation with error 202 if any pool on its path (or tree `t`, `tree`, with
/// its operation counts `counts`) is full.
/// `moving_from`: the pool an operation being moved is in now, whose path counts it
/// already (a move inside that path does not add it twice).
pub(crate) fn check_operation_count(
    tree: &PoolTree,
    books: &Books,
    t: usize,
    counts: &BTreeMap<String, PoolCounts>,
    placement: &Placement,
    moving_from: Option<&str>,
) -> Result<(), CoreError> {
    debug_check_counts(tree, books, t, counts);
    let counted: Vec<String> =
        moving_from.map_or_else(Vec::new, |pool| pool_chain(tree, pool, None));
    for name in pool_chain(tree, &placement.pool, placement.create.as_ref()) {
        let (max_ops, _) = pool_limits(tree, &name, placement.create.as_ref());
        let current =
            counts.get(&name).map_or(0, |c| c.operation_count) - u32::from(counted.contains(&name));
        if current >= max_ops {
            return Err(CoreError::TooManyOperations(format!(
                "limit for the number of concurrent operations {max_ops} for pool {name:?} \
                     in tree {:?} has been reached",
                tree.name
            )));
        }
    }
    Ok(())
}

/// The lowest pool on the operation's path whose running-operation limit is reached.
pub(crate) fn running_limit_violation(
    tree: &PoolTree,
    pool: &str,
    counts: &BTreeMap<String, PoolCounts>,
) -> Option<(String, u32)> {
    for name in pool_chain(tree, pool, None) {
        let (_, max_running) = pool_limits(tree, &name, None);
        let running = counts.get(&name).map_or(0, |c| c.running_operation_count);
        if running >= max_running {
            return Some((name, max_running));
        }
    }
    None
}

/// Rejects moving operation `id` (in its tree slot `slot`, of `tree` with its operation counts
/// `counts`) to `placement` if a
/// pool on the new path is at its `max_running_operation_count` and the operation would
/// count there as running (YTsaurus `ValidateAllOperationCountsOnPoolChange`). A running,
/// non-lightweight operation already counts in the pools its old and new paths share, so
/// only the others are checked; a pending or lightweight one is checked on the whole path.
/// An operation that is lightweight in its new pool is never refused for running slots.
pub(crate) fn check_running_count_on_move(
    tree: &PoolTree,
    books: &Books,
    counts: &BTreeMap<String, PoolCounts>,
    id: &OperationId,
    slot: usize,
    placement: &Placement,
) -> Result<(), CoreError> {
    let Some(op) = books.operations.get(id) else {
        return Ok(());
    };
    if is_lightweight(tree, &op.spec, &placement.pool) {
        return Ok(());
    }
    let mut new_chain = pool_chain(tree, &placement.pool, placement.create.as_ref());
    if op.state == OperationState::Running && !op.trees[slot].lightweight {
        let mut old_chain = pool_chain(tree, &op.trees[slot].pool, None);
        while !new_chain.is_empty() && new_chain.last() == old_chain.last() {
            new_chain.pop();
            old_chain.pop();
        }
    }
    for name in new_chain {
        let (_, max_running) = pool_limits(tree, &name, placement.create.as_ref());
        let running = counts.get(&name).map_or(0, |c| c.running_operation_count);
        if running >= max_running {
            return Err(CoreError::new(format!(
                "cannot move operation {:?} to pool {:?}: max running operation count of \
                 pool {name:?} in tree {:?} violated ({running} running, \
                 max_running_operation_count = {max_running})",
                id.0, placement.pool, tree.name
            )));
        }
    }
    Ok(())
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
