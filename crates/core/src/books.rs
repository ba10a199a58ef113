//! The books: allocations placed (and adopted after a restart), interrupted and ended, with the
//! usage they add to and remove from their node, operation and trees. The only code that
//! changes usage (an interrupted allocation's leaves when it is interrupted, for its preemptor
//! to start at once; `preemption.rs` decides who is interrupted).
//!
//! [`Books`] methods change the books, with the caches that follow them (walks, allocation
//! classes) over explicit borrows; the [`Parts`] methods around them add what else follows
//! (orders, events, stats, holds) and decide nothing more. Adopting an allocation is the one
//! [`Scheduler`] command here.

use crate::error::*;
use crate::event::{EventKind, Stage};
use crate::heartbeat::descent;
use crate::heartbeat::walk::Walk;
use crate::model::PreemptionReason;
use crate::model::Preemptor;
use crate::model::{
    Allocation, AllocationId, AllocationState, JobOutcome, Millis, NodeId, OperationId,
    OperationState,
};
use crate::protocol::*;
use crate::scheduler::*;
use crate::state::{Books, Caches};
use crate::tree::{ElementRef, PoolTree};
use fairsched_hdrf::ElementIndex;
use fairsched_resources::Resources;

impl Scheduler {
    /// Adopts a job that already runs on `node_id`: one pending job of `task` becomes a
    /// running allocation there, started at `now`. For a driver that lost its books while its
    /// nodes kept running (a restarted server re-inserts the jobs its store had as running).
    ///
    /// No event is logged (nothing started now; the driver records the adoption) and the
    /// node's capacity is not checked (what runs there, runs; overcommit is handled as usual).
    /// Rejected, changing nothing, when the operation is not running, the task has no pending
    /// job, or the node does not exist or has `scheduler_jobs_enabled = false`.
    pub fn adopt_allocation(
        &mut self,
        now: Millis,
        op_id: &OperationId,
        task: usize,
        node_id: &NodeId,
    ) -> Result<AllocationId, CoreError> {
        let node = self
            .books
            .nodes
            .get(node_id)
            .ok_or_else(|| CoreError::new(format!("node {:?} does not exist", node_id.0)))?;
        if !node.scheduler_jobs_enabled {
            return Err(CoreError::new(format!(
                "node {:?} has scheduler_jobs_enabled = false",
                node_id.0
            )));
        }
        let tree = node.tree.ok_or_else(|| {
            CoreError::new(format!(
                "node {:?} belongs to no pool tree (no node_tag_filter matches its tags)",
                node_id.0
            ))
        })?;
        let tree_name = self.trees[tree].name.clone();
        let op = self
            .books
            .operations
            .get_mut(op_id)
            .ok_or_else(|| CoreError::new(format!("operation {:?} does not exist", op_id.0)))?;
        if op.state != OperationState::Running {
            return Err(CoreError::new(format!(
                "operation {:?} is {}, not running",
                op_id.0,
                op.state.name()
            )));
        }
        if op.tasks.get(task).is_none_or(|t| t.pending == 0) {
            return Err(CoreError::new(format!(
                "operation {:?}: task {task} has no pending job",
                op_id.0
            )));
        }
        if op.in_tree(tree).is_none() {
            return Err(CoreError::new(format!(
                "operation {:?} does not run in tree {tree_name:?} of node {:?}",
                op_id.0, node_id.0
            )));
        }
        let (id, _) = self.books.book_allocation(
            &mut self.caches,
            &self.trees,
            now,
            op_id,
            task,
            node_id,
            tree,
        );
        Ok(id)
    }
}

impl Parts<'_> {
    /// Creates an allocation for one pending job of `task`.
    pub(crate) fn place(
        &mut self,
        now: Millis,
        op_id: &OperationId,
        task: usize,
        node_id: &NodeId,
        stage: Stage,
        backfill: bool,
    ) -> StartOrder {
        let tree = self.books.nodes[node_id]
            .tree
            .expect("allocations start only on nodes of a tree");
        let (id, resources) =
            self.books
                .book_allocation(self.caches, self.trees, now, op_id, task, node_id, tree);
        self.stats.placements += 1;
        if backfill {
            self.stats.backfills += 1;
        }
        self.events.log(
            now,
            EventKind::AllocationStarted {
                operation: op_id.clone(),
                allocation: id,
                node: node_id.clone(),
                stage,
                backfill,
            },
        );
        crate::reservation::reservation_used(self.holds, self.events, now, op_id, node_id);
        StartOrder {
            allocation: id,
            operation: op_id.clone(),
            task,
            resources,
        }
    }

    /// Removes an allocation from the books ([`Books::unbook`]) and logs how it ended. Says
    /// what its operation's lifecycle must do next ([`crate::lifecycle`]'s `end_allocation`
    /// does it).
    pub(crate) fn unbook_allocation(
        &mut self,
        now: Millis,
        id: AllocationId,
        how: EndKind,
    ) -> Option<Unbooked> {
        self.holds.room_epoch += 1;
        let (alloc, completed, too_many_failed) =
            self.books.unbook(self.caches, self.trees, id, &how)?;
        let kind = match how {
            EndKind::Finished(outcome) => EventKind::AllocationFinished {
                operation: alloc.operation.clone(),
                allocation: id,
                node: alloc.node.clone(),
                outcome,
            },
            EndKind::Preempted(reason, preemptor) => {
                self.stats.preemptions += 1;
                // The node may still run the job: it must stop it.
                if self.books.nodes.contains_key(&alloc.node) {
                    self.orders
                        .entry(alloc.node.clone())
                        .or_default()
                        .abort
                        .push(id);
                }
                EventKind::AllocationPreempted {
                    operation: alloc.operation.clone(),
                    allocation: id,
                    node: alloc.node.clone(),
                    reason,
                    preemptor,
                }
            }
        };
        self.events.log(now, kind);
        Some(Unbooked {
            operation: alloc.operation,
            completed,
            too_many_failed,
        })
    }

    /// Starts one job of the operation at `leaf` if one fits the node and every limit on its
    /// path.
    pub(crate) fn try_start(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        leaf: ElementIndex,
        walk: &mut Walk,
        stage: Stage,
        offer: crate::holds::Offer,
    ) -> Option<crate::scheduler::StartOrder> {
        let arena = &self.trees[walk.tree].arena;
        let ElementRef::Operation(op_id) = &arena.elements[leaf].kind else {
            return None;
        };
        let op = self.books.operations.get(op_id)?;
        // What is held for others stays out of reach unless the job ends before it is needed.
        let free = |spec: &crate::model::TaskSpec| offer.for_job(now, spec.time_limit_ms);
        let path = || std::iter::once(leaf).chain(arena.ancestors(leaf));
        let allow_regular = arena.elements[leaf].allow_regular_on_ssd;
        let task = op.spec.tasks.iter().enumerate().position(|(t, spec)| {
            op.tasks[t].pending > 0
                && free(spec).dominates(&spec.resources)
                && arena.ssd.as_ref().is_none_or(|ssd| {
                    ssd.allows(spec, &self.books.nodes[node_id].tags, allow_regular)
                })
                && path().all(|e| {
                    arena.elements[e]
                        .resource_limits
                        .dominates(&walk.usage[e].add(&spec.resources))
                })
        })?;
        let spec = &op.spec.tasks[task];
        let backfill = offer.backfills(now, spec.time_limit_ms, &spec.resources);
        let op_id = op_id.clone();
        let order = self.place(now, &op_id, task, node_id, stage, backfill);
        let arena = &self.trees[walk.tree].arena;
        for e in std::iter::once(leaf).chain(arena.ancestors(leaf)) {
            walk.usage[e] = walk.usage[e].add(&order.resources);
        }
        if self.books.operations[&op_id].pending_job_count() == 0 {
            walk.active[leaf] = false;
        }
        walk.refresh_path(&self.trees[walk.tree].arena, leaf);
        Some(order)
    }

    /// Interrupts a running allocation (preempted with `signal` and `timeout`): it leaves the
    /// operation's and the node's usage now, so that a preemptor may start at once; the node
    /// gets an interrupt order and lets the job wind down until it exits or the deadline.
    pub(crate) fn book_interruption(
        &mut self,
        now: Millis,
        id: AllocationId,
        signal: Option<String>,
        timeout: u64,
        reason: PreemptionReason,
        preemptor: Option<Preemptor>,
    ) {
        let Some((op_id, node_id)) = self.books.interrupt(
            self.caches,
            self.trees,
            id,
            now.saturating_add(timeout),
            reason,
            &preemptor,
        ) else {
            return;
        };
        self.orders
            .entry(node_id.clone())
            .or_default()
            .interrupt
            .push(InterruptOrder {
                allocation: id,
                signal,
                timeout_ms: timeout,
                reason,
                preemptor: preemptor.clone(),
            });
        self.stats.preemptions += 1;
        self.events.log(
            now,
            EventKind::AllocationInterrupted {
                operation: op_id,
                allocation: id,
                node: node_id,
                reason,
                timeout_ms: timeout,
                preemptor,
            },
        );
    }
}

/// What ending an allocation leaves its operation's lifecycle to do.
pub(crate) struct Unbooked {
    pub(crate) operation: OperationId,
    /// A job completed: the operation may have completed.
    pub(crate) completed: bool,
    /// The operation reached its failed-job limit: it fails, for this reason.
    pub(crate) too_many_failed: Option<String>,
}

impl Books {
    /// Books one pending job of `task` as a running allocation on `node_id` (in `tree`, the
    /// node's): the operation's, the node's and the tree's usage, the walks and the class cache
    /// (`caches`, over `trees`).
    /// The caller has checked that the operation, the node and a pending job exist.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn book_allocation(
        &mut self,
        caches: &mut Caches,
        trees: &[PoolTree],
        now: Millis,
        op_id: &OperationId,
        task: usize,
        node_id: &NodeId,
        tree: usize,
    ) -> (AllocationId, Resources) {
        let id = AllocationId(self.next_allocation);
        self.next_allocation += 1;
        let op = self
            .operations
            .get_mut(op_id)
            .expect("booked operation exists");
        let resources = op.spec.tasks[task].resources;
        op.tasks[task].pending -= 1;
        if op.tasks[task].pending == 0 && op.state == OperationState::Running {
            self.pending_shapes.remove(&resources);
        }
        op.tasks[task].running += 1;
        op.allocations.insert(id);
        op.usage = op.usage.add(&resources);
        if let Some(o) = op.in_tree_mut(tree) {
            o.usage = o.usage.add(&resources);
        }
        op.pending_demand = op.pending_demand.sub(&resources);
        op.last_scheduled_at = Some(now);
        let limit = op.spec.tasks[task].time_limit_ms;
        let node = self.nodes.get_mut(node_id).expect("booked node exists");
        node.allocations.insert(id);
        node.usage = node.usage.add(&resources);
        self.sync_room(node_id);
        self.room.started(
            tree,
            id,
            limit.map(|l| now.saturating_add(l)),
            node_id,
            resources,
        );
        self.allocations.insert(
            id,
            Allocation {
                id,
                operation: op_id.clone(),
                task,
                node: node_id.clone(),
                tree,
                resources,
                start_time: now,
                state: AllocationState::Running,
            },
        );
        crate::preemptible::classify_appended(&mut caches.preemption[tree], op_id, id, resources);
        descent::touch_operation(&mut caches.walks, trees, &self.operations, op_id);
        (id, resources)
    }

    /// Removes allocation `id` from the books: its node's, operation's and trees' usage (unless
    /// it was interrupted), the walks and the class cache (`caches`, over `trees`). A job that
    /// did not complete goes back to pending (unless the operation is finishing). Returns the
    /// allocation, whether its job completed and, if the operation reached its failed-job
    /// limit, why it fails.
    pub(crate) fn unbook(
        &mut self,
        caches: &mut Caches,
        trees: &[PoolTree],
        id: AllocationId,
        how: &EndKind,
    ) -> Option<(Allocation, bool, Option<String>)> {
        let alloc = self.allocations.remove(&id)?;
        if alloc.state != AllocationState::Running {
            self.interrupting -= 1;
        }
        if let Some(cache) = caches.preemption.get_mut(alloc.tree) {
            cache.classes.remove(&alloc.operation);
        }
        // An interrupted allocation already left the node's and the operation's usage.
        let counted = alloc.state == AllocationState::Running;
        if let Some(node) = self.nodes.get_mut(&alloc.node) {
            node.allocations.remove(&id);
            if counted {
                node.usage = node.usage.sub(&alloc.resources);
            }
        }
        self.sync_room(&alloc.node);
        self.room.ended(id);
        let mut completed = false;
        let mut too_many_failed = None;
        if let Some(op) = self.operations.get_mut(&alloc.operation) {
            op.allocations.remove(&id);
            if counted {
                op.usage = op.usage.sub(&alloc.resources);
                if let Some(o) = op.in_tree_mut(alloc.tree) {
                    o.usage = o.usage.sub(&alloc.resources);
                }
            }
            let t = &mut op.tasks[alloc.task];
            t.running -= 1;
            match how {
                EndKind::Finished(JobOutcome::Completed) => {
                    t.completed += 1;
                    completed = true;
                }
                _ => {
                    if op.state == OperationState::Running {
                        t.pending += 1;
                        if t.pending == 1 {
                            self.pending_shapes
                                .add(&op.spec.tasks[alloc.task].resources);
                        }
                        op.pending_demand = op.pending_demand.add(&alloc.resources);
                    }
                }
            }
            // A failed job runs again, until the operation's failed-job limit.
            if *how == EndKind::Finished(JobOutcome::Failed) {
                op.failed_job_count += 1;
                let max = op.max_failed_job_count();
                if op.state == OperationState::Running && op.failed_job_count >= max {
                    too_many_failed = Some(format!(
                        "failed jobs limit exceeded: jobs failed {} times (max_failed_job_count = {max})",
                        op.failed_job_count
                    ));
                }
            }
        }
        descent::touch_operation(&mut caches.walks, trees, &self.operations, &alloc.operation);
        Some((alloc, completed, too_many_failed))
    }

    /// Interrupts a running allocation until `deadline`: it leaves the operation's and the
    /// node's usage now, so that a preemptor may start at once (the walks and the class cache,
    /// `caches` over `trees`, follow). Returns its operation and node (`None`: no such
    /// allocation).
    pub(crate) fn interrupt(
        &mut self,
        caches: &mut Caches,
        trees: &[PoolTree],
        id: AllocationId,
        deadline: Millis,
        reason: PreemptionReason,
        preemptor: &Option<Preemptor>,
    ) -> Option<(OperationId, NodeId)> {
        let a = self.allocations.get(&id)?;
        let (op_id, node_id, resources, tree) =
            (a.operation.clone(), a.node.clone(), a.resources, a.tree);
        // The allocation's resources leave the operation's and the node's books now; the
        // preemptor may start at once (the node lets the old job wind down).
        if let Some(a) = self.allocations.get_mut(&id) {
            if a.state == AllocationState::Running {
                self.interrupting += 1;
            }
            a.state = AllocationState::Interrupting {
                reason,
                deadline,
                preemptor: preemptor.clone(),
            };
        }
        if let Some(op) = self.operations.get_mut(&op_id) {
            op.usage = op.usage.sub(&resources);
            if let Some(o) = op.in_tree_mut(tree) {
                o.usage = o.usage.sub(&resources);
            }
        }
        descent::touch_operation(&mut caches.walks, trees, &self.operations, &op_id);
        caches.preemption[tree].classes.remove(&op_id);
        if let Some(n) = self.nodes.get_mut(&node_id) {
            n.usage = n.usage.sub(&resources);
        }
        self.node_changed(&node_id);
        Some((op_id, node_id))
    }
}
