//! All-or-nothing placement of gang operations (tree option `gang_placement`; not in YTsaurus,
//! whose gangs are all-or-nothing in the fair share only).
//!
//! One gang assembles at a time per tree: the regular stage, when it offers a node to a gang
//! operation, holds what is free there for its jobs instead of starting them; once every
//! pending job of the operation is held, each node starts its held jobs at its next heartbeat.
//! Held resources are kept from other operations (see [`crate::backfill`]). Assemblies
//! are checked at fair-share updates (timeout, lost nodes, finished operations).

use crate::event::EventKind;
use crate::heartbeat::Walk;
use crate::model::{Millis, NodeId, OperationId, OperationState};
use crate::scheduler::{Scheduler, StartOrder};
use crate::tree::ElementRef;
use fairsched_hdrf::ElementIndex;
use fairsched_resources::Resources;
use std::collections::BTreeMap;

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
}

impl GangAssembly {
    /// Jobs held per task, over all nodes.
    fn held_per_task(&self) -> BTreeMap<usize, u32> {
        let mut out = BTreeMap::new();
        for tasks in self.holds.values() {
            for (&task, &n) in tasks {
                *out.entry(task).or_default() += n;
            }
        }
        out
    }

    /// Jobs held, over all nodes and tasks.
    pub fn held_jobs(&self) -> u32 {
        self.holds.values().flat_map(|t| t.values()).sum()
    }
}

impl Scheduler {
    /// Whether tree `t` places the operation's jobs all at once.
    pub(crate) fn gang_placed(&self, t: usize, op: &OperationId) -> bool {
        self.trees[t].config().gang_placement.enable
            && self.operations.get(op).is_some_and(|o| o.is_gang())
    }

    /// The gang assembling in tree `t`, if any.
    pub fn gang_assembly(&self, t: usize) -> Option<&GangAssembly> {
        self.gangs.get(&t)
    }

    /// Resources the gang assemblies hold on `node` for operations other than `op`.
    pub fn gang_held_on(&self, node: &NodeId, op: &OperationId) -> Resources {
        self.gang_held_from(node, op)
    }

    /// Resources the gang assemblies hold on `node` for operations other than `op`.
    pub(crate) fn gang_held_from(&self, node: &NodeId, op: &OperationId) -> Resources {
        let mut held = Resources::ZERO;
        for a in self.gangs.values().filter(|a| &a.operation != op) {
            if let Some(tasks) = a.holds.get(node) {
                held = held.add(&self.held_resources(&a.operation, tasks));
            }
        }
        held
    }

    /// Resources of `tasks` (task -> jobs) of operation `op`.
    pub(crate) fn held_resources(
        &self,
        op: &OperationId,
        tasks: &BTreeMap<usize, u32>,
    ) -> Resources {
        let Some(op) = self.operations.get(op) else {
            return Resources::ZERO;
        };
        tasks.iter().fold(Resources::ZERO, |acc, (&task, &n)| {
            (0..n).fold(acc, |acc, _| acc.add(&op.spec.tasks[task].resources))
        })
    }

    /// The regular stage offers `node_id` to the gang operation at `leaf`: holds what fits
    /// there for its pending jobs (if it may assemble now), and marks the assembly ready when
    /// every pending job is held. Never starts a job.
    pub(crate) fn gang_hold(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        leaf: ElementIndex,
        walk: &Walk,
    ) {
        let t = walk.tree;
        let arena = &self.trees[t].arena;
        let ElementRef::Operation(op_id) = &arena.elements[leaf].kind else {
            return;
        };
        let op_id = op_id.clone();
        match self.gangs.get(&t) {
            Some(a) if a.operation != op_id || a.ready => return,
            Some(_) => {}
            None => {
                if self
                    .gang_cooldown
                    .get(&op_id)
                    .is_some_and(|&until| now < until)
                {
                    return;
                }
                self.gangs.insert(
                    t,
                    GangAssembly {
                        operation: op_id.clone(),
                        since: now,
                        holds: BTreeMap::new(),
                        ready: false,
                        backfill_until: None,
                    },
                );
            }
        }
        let a = &self.gangs[&t];
        let op = &self.operations[&op_id];
        let node = &self.nodes[node_id];
        let own_here = a
            .holds
            .get(node_id)
            .map_or(Resources::ZERO, |tasks| self.held_resources(&op_id, tasks));
        let mut available = node
            .free()
            .sub(
                &self
                    .held_from(node_id, &op_id)
                    .map_or(Resources::ZERO, |h| h.all()),
            )
            .sub(&own_here)
            .max(&Resources::ZERO);
        // Everything held so far counts against the path's limits.
        let mut held_total = a.holds.values().fold(Resources::ZERO, |acc, tasks| {
            acc.add(&self.held_resources(&op_id, tasks))
        });
        let held_per_task = a.held_per_task();
        let allow_regular = arena.elements[leaf].allow_regular_on_ssd;
        let path: Vec<ElementIndex> = std::iter::once(leaf).chain(arena.ancestors(leaf)).collect();
        let mut new_here: BTreeMap<usize, u32> = BTreeMap::new();
        for (task, spec) in op.spec.tasks.iter().enumerate() {
            let wanted = op.tasks[task]
                .pending
                .saturating_sub(held_per_task.get(&task).copied().unwrap_or(0));
            if arena
                .ssd
                .as_ref()
                .is_some_and(|ssd| !ssd.allows(spec, &node.tags, allow_regular))
            {
                continue;
            }
            for _ in 0..wanted {
                let fits = available.dominates(&spec.resources)
                    && path.iter().all(|&e| {
                        arena.elements[e]
                            .resource_limits
                            .dominates(&walk.usage[e].add(&held_total).add(&spec.resources))
                    });
                if !fits {
                    break;
                }
                available = available.sub(&spec.resources);
                held_total = held_total.add(&spec.resources);
                *new_here.entry(task).or_default() += 1;
            }
        }
        let pending: u32 = op.pending_job_count();
        let a = self.gangs.get_mut(&t).expect("inserted above");
        if !new_here.is_empty() {
            let here = a.holds.entry(node_id.clone()).or_default();
            for (task, n) in new_here {
                *here.entry(task).or_default() += n;
            }
        }
        if a.held_jobs() >= pending && pending > 0 {
            a.ready = true;
            // Its nodes start its jobs at their next heartbeats: nothing may backfill now.
            a.backfill_until = None;
            let (jobs, nodes) = (a.held_jobs(), a.holds.len() as u32);
            self.log(
                now,
                EventKind::GangAssembled {
                    operation: op_id,
                    jobs,
                    nodes,
                },
            );
        }
    }

    /// At a heartbeat of `node_id`: starts the jobs a ready gang holds there.
    pub(crate) fn start_gang_holds(
        &mut self,
        now: Millis,
        node_id: &NodeId,
        walk: &mut Walk,
    ) -> Vec<StartOrder> {
        let t = walk.tree;
        let Some(a) = self.gangs.get(&t).filter(|a| a.ready) else {
            return Vec::new();
        };
        let Some(tasks) = a.holds.get(node_id).cloned() else {
            return Vec::new();
        };
        let op_id = a.operation.clone();
        let Some(&leaf) = self.trees[t].arena.by_operation.get(&op_id) else {
            return Vec::new();
        };
        // The node may have shrunk or changed its tags since: then its jobs are gathered
        // again elsewhere.
        let needed = self.held_resources(&op_id, &tasks);
        let node = &self.nodes[node_id];
        let arena = &self.trees[t].arena;
        if !node.free().dominates(&needed)
            || (arena.any_tag_filter() && !arena.tags_allow(leaf, &node.tags))
        {
            let a = self.gangs.get_mut(&t).expect("checked above");
            a.holds.remove(node_id);
            a.ready = false;
            return Vec::new();
        }
        let mut orders = Vec::new();
        for (task, n) in tasks {
            for _ in 0..n {
                if self.operations[&op_id].tasks[task].pending == 0 {
                    break;
                }
                let order = self.place(now, &op_id, task, node_id, crate::event::Stage::Regular);
                let arena = &self.trees[t].arena;
                for e in std::iter::once(leaf).chain(arena.ancestors(leaf)) {
                    walk.usage[e] = walk.usage[e].add(&order.resources);
                }
                orders.push(order);
            }
        }
        if self.operations[&op_id].pending_job_count() == 0 {
            walk.active[leaf] = false;
        }
        self.refresh_path(walk, leaf);
        let a = self.gangs.get_mut(&t).expect("checked above");
        a.holds.remove(node_id);
        if a.holds.is_empty() {
            self.release_gang(now, t, "started");
        }
        orders
    }

    /// Ends tree `t`'s assembly (its holds are released).
    pub(crate) fn release_gang(&mut self, now: Millis, t: usize, reason: &'static str) {
        if let Some(a) = self.gangs.remove(&t) {
            self.log(
                now,
                EventKind::GangReleased {
                    operation: a.operation,
                    reason,
                },
            );
        }
    }

    /// The operation finished: its assembly, if any, ends.
    pub(crate) fn release_gang_of(&mut self, now: Millis, op: &OperationId) {
        let trees: Vec<usize> = self
            .gangs
            .iter()
            .filter(|(_, a)| &a.operation == op)
            .map(|(&t, _)| t)
            .collect();
        for t in trees {
            self.release_gang(now, t, "operation_finished");
        }
        self.gang_cooldown.remove(op);
    }

    /// The node is gone: what gangs held there is gathered again elsewhere.
    pub(crate) fn drop_gang_holds_on(&mut self, node: &NodeId) {
        for a in self.gangs.values_mut() {
            if a.holds.remove(node).is_some() {
                a.ready = false;
            }
        }
    }

    /// Runs after every fair-share update: assemblies that time out, lose their operation or
    /// nodes, or whose tree turned the option off.
    pub(crate) fn update_gangs(&mut self, now: Millis) {
        self.gang_cooldown.retain(|_, until| now < *until);
        let trees: Vec<usize> = self.gangs.keys().copied().collect();
        for t in trees {
            let config = self.trees[t].config().gang_placement.clone();
            if !config.enable {
                self.release_gang(now, t, "disabled");
                continue;
            }
            let a = &self.gangs[&t];
            let running = self.operations.get(&a.operation).is_some_and(|op| {
                op.state == OperationState::Running && op.pending_job_count() > 0
            });
            if !running {
                self.release_gang(now, t, "operation_finished");
                continue;
            }
            let lost: Vec<NodeId> = a
                .holds
                .keys()
                .filter(|n| {
                    !self.nodes.get(*n).is_some_and(|node| {
                        node.tree == Some(t) && node.scheduler_jobs_enabled && !node.draining
                    })
                })
                .cloned()
                .collect();
            let a = self.gangs.get_mut(&t).expect("present");
            for n in &lost {
                a.holds.remove(n);
                a.ready = false;
            }
            if !a.ready && now >= a.since.saturating_add(config.assembly_timeout_ms) {
                let op = a.operation.clone();
                self.release_gang(now, t, "timeout");
                self.gang_cooldown
                    .insert(op, now.saturating_add(config.assembly_timeout_ms));
            } else if !lost.is_empty() && a.holds.is_empty() {
                self.release_gang(now, t, "node_unavailable");
            } else if !a.ready {
                // Until when other jobs may backfill what it holds.
                let op = a.operation.clone();
                let until = self.gang_needed_at(now, t, &op);
                self.gangs.get_mut(&t).expect("present").backfill_until = until;
            }
        }
    }
}
