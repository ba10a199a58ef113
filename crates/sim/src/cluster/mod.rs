//! One simulated cluster around the scheduling core, in virtual time: the scenario runner
//! ([`crate::scenario`]) and the trace replay ([`crate::replay`]) both drive the core through
//! it.
//!
//! A [`Cluster`] owns the [`Scheduler`] and the simulated nodes the core places jobs on. It
//! knows the nodes (in creation order: node numbers count from 0 and are never reused), the
//! jobs running on them with their end times, and how a job behaves when the core orders it
//! started, interrupted or aborted. What the drivers add is when things happen: the scenario
//! runner heartbeats every node once per heartbeat period and reports the jobs that exited
//! by then ([`Cluster::take_exited`]); the replay visits the instants at which jobs end
//! ([`Cluster::next_end`], [`Cluster::end_jobs_due`]) and heartbeats the nodes whose jobs
//! ended and those with room ([`Cluster::track_room`]).
//!
//! # Jobs
//!
//! The driver gives a [`JobModel`] for each job the core starts. A job with `duration_ms: d`
//! started at `s` exits at `s + d`; `duration_ms: None` runs until ended. On an interrupt
//! order at `t` with timeout `T`, an `interruptible` job exits at `t + exit_after_interrupt_ms`
//! if that is at most `T`; otherwise (or if the job is not interruptible) it keeps running (a
//! job that would end by itself still does) and the core aborts it at the deadline. An abort
//! order ends the job at once. A job started by preemption (the `preemptor` of an interrupt
//! order) waits on its node until the last job interrupted for it has left the node, and runs
//! its whole duration from then. A start order whose job the driver does not know (no model)
//! is not carried out.
//!
//! # Calls into the core
//!
//! Every call that does scheduling work goes through [`Cluster::call`] (or the cluster's own
//! node and heartbeat methods), which measures the thread CPU time spent inside the core when
//! the cluster has a CPU meter ([`Cluster::with_cpu_meter`]; the scenario runner's `--stats`).
//! After each call the driver delivers the orders the core gave outside a heartbeat
//! ([`Cluster::deliver_orders`]) and takes the core's events.

pub mod agenda;
mod node;

pub use agenda::Agenda;
pub use node::{JobModel, SimJob, SimNode};

use crate::cpu::CpuMeter;
use fairsched_core::{
    AllocationId, CoreError, FinishedAllocation, InterruptOrder, JobOutcome, Millis, NodeHeartbeat,
    NodeId, NodeSpec, Scheduler, StartOrder,
};
use fairsched_resources::{ResourceKind, Resources};
use node::NewEnds;
use std::collections::{BTreeMap, BTreeSet};

/// A job the cluster started or aborted, for the driver's books.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRef {
    /// Node number.
    pub node: usize,
    pub allocation: AllocationId,
    /// [`JobModel::tag`].
    pub tag: usize,
}

/// What carrying out the core's orders did: the jobs started and the jobs aborted, each in
/// the order of the orders.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    pub started: Vec<JobRef>,
    pub aborted: Vec<JobRef>,
}

/// The nodes with room for a job of at least `needed` resources and a user slot.
#[derive(Clone, Debug)]
struct Room {
    needed: Resources,
    nodes: BTreeSet<usize>,
}

/// The simulated cluster: the core, the nodes and the jobs on them.
#[derive(Debug)]
pub struct Cluster {
    core: Scheduler,
    meter: Option<CpuMeter>,
    /// By node number; `None`: removed.
    nodes: Vec<Option<SimNode>>,
    by_id: BTreeMap<NodeId, usize>,
    /// When jobs end by themselves: (node number, allocation) at their end time. An entry
    /// stays when its job leaves earlier or its end moves; [`Cluster::end_jobs_due`] skips it.
    ends: Agenda<(usize, AllocationId)>,
    /// Jobs on the nodes.
    running: u64,
    /// Resources the jobs on the nodes hold, summed.
    used: Resources,
    room: Option<Room>,
}

/// Runs `f`, measuring it when there is a meter.
fn metered<R>(meter: &mut Option<CpuMeter>, f: impl FnOnce() -> R) -> R {
    match meter {
        Some(meter) => meter.measure(f),
        None => f(),
    }
}

impl Cluster {
    /// A cluster without nodes around `core`.
    pub fn new(core: Scheduler) -> Cluster {
        Cluster {
            core,
            meter: None,
            nodes: Vec::new(),
            by_id: BTreeMap::new(),
            ends: Agenda::default(),
            running: 0,
            used: Resources::ZERO,
            room: None,
        }
    }

    /// Measures the thread CPU time spent inside the core from now on ([`Cluster::core_cpu_ms`]).
    pub fn with_cpu_meter(mut self) -> Cluster {
        self.meter = Some(CpuMeter::default());
        self
    }

    pub fn core(&self) -> &Scheduler {
        &self.core
    }

    /// The core, unmeasured: for reading it and taking its events.
    pub fn core_mut(&mut self) -> &mut Scheduler {
        &mut self.core
    }

    /// A call into the core that does scheduling work (a command, a tick, a snapshot),
    /// measured when the cluster has a CPU meter.
    pub fn call<R>(&mut self, f: impl FnOnce(&mut Scheduler) -> R) -> R {
        let core = &mut self.core;
        metered(&mut self.meter, || f(core))
    }

    /// Thread CPU time spent inside the core so far, in milliseconds (0 without a meter).
    pub fn core_cpu_ms(&self) -> f64 {
        self.meter.map_or(0.0, |m| m.total_ms())
    }

    // ---- nodes ------------------------------------------------------------------------------

    /// Adds a node to the core and to the cluster; returns its number.
    pub fn add_node(&mut self, t: Millis, spec: NodeSpec) -> Result<usize, CoreError> {
        let (id, resources) = (spec.id.clone(), spec.resources);
        self.call(|core| core.add_node(t, spec))?;
        let n = self.nodes.len();
        self.nodes.push(Some(SimNode::new(id.clone(), resources)));
        self.by_id.insert(id, n);
        if self.room.is_some() {
            self.refresh_room(n);
        }
        Ok(n)
    }

    /// Removes a node from the core and from the cluster, with the jobs on it.
    pub fn remove_node(&mut self, t: Millis, id: &NodeId) -> Result<(), CoreError> {
        self.call(|core| core.remove_node(t, id))?;
        if let Some(n) = self.by_id.remove(id)
            && let Some(node) = self.nodes[n].take()
        {
            self.running = self.running.saturating_sub(node.job_count() as u64);
            self.used = self.used.sub(node.used());
            if let Some(room) = &mut self.room {
                room.nodes.remove(&n);
            }
        }
        Ok(())
    }

    /// Changes a node in the core ([`Scheduler::set_node`]) and, with it, the node's
    /// resources here.
    pub fn set_node(
        &mut self,
        t: Millis,
        id: &NodeId,
        resources: Option<Resources>,
        tags: Option<BTreeSet<String>>,
        scheduler_jobs_enabled: Option<bool>,
    ) -> Result<(), CoreError> {
        self.call(|core| core.set_node(t, id, resources, tags, scheduler_jobs_enabled))?;
        if let (Some(resources), Some(&n)) = (resources, self.by_id.get(id)) {
            if let Some(node) = &mut self.nodes[n] {
                node.set_resources(resources);
            }
            if self.room.is_some() {
                self.refresh_room(n);
            }
        }
        Ok(())
    }

    pub fn node_number(&self, id: &NodeId) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    pub fn node(&self, n: usize) -> Option<&SimNode> {
        self.nodes.get(n).and_then(Option::as_ref)
    }

    /// The numbers of the nodes, in creation order (the order of a heartbeat round).
    pub fn node_numbers(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].is_some())
            .collect()
    }

    /// The nodes, in creation order.
    pub fn nodes(&self) -> impl Iterator<Item = &SimNode> {
        self.nodes.iter().flatten()
    }

    /// Jobs running on the nodes.
    pub fn running_jobs(&self) -> u64 {
        self.running
    }

    /// Resources the jobs on the nodes hold, summed (kept as they start and leave).
    pub fn used(&self) -> &Resources {
        debug_assert_eq!(
            self.used,
            self.nodes()
                .fold(Resources::ZERO, |sum, n| sum.add(n.used())),
            "the cluster's usage is the sum of its nodes'"
        );
        &self.used
    }

    // ---- job ends ---------------------------------------------------------------------------

    /// The earliest end time on the agenda. It may be the end of a job that has left since
    /// (preempted, or its end moved): a driver that visits it finds nothing ending then.
    pub fn next_end(&self) -> Option<Millis> {
        self.ends.next_time()
    }

    /// Whether the agenda holds any end time (see [`Cluster::next_end`]).
    pub fn has_ends(&self) -> bool {
        !self.ends.is_empty()
    }

    /// Takes off the nodes every job that has ended by `t` (in end time, node and allocation
    /// order): the reports of their nodes' next heartbeats, by node number.
    pub fn end_jobs_due(&mut self, t: Millis) -> BTreeMap<usize, Vec<FinishedAllocation>> {
        let mut reports: BTreeMap<usize, Vec<FinishedAllocation>> = BTreeMap::new();
        while let Some((end, (n, allocation))) = self.ends.pop_due(t) {
            let due = self
                .node(n)
                .and_then(|node| node.job(allocation))
                .is_some_and(|job| job.ends_at == Some(end));
            if due {
                self.leave(n, allocation, end);
                reports.entry(n).or_default().push(completed(allocation));
            }
        }
        reports
    }

    /// Takes off node `n` the jobs that exited by `t` (by allocation id, each leaving at its
    /// exit time): the report of the node's heartbeat at `t`.
    pub fn take_exited(&mut self, n: usize, t: Millis) -> Vec<FinishedAllocation> {
        let Some(node) = self.node(n) else {
            return Vec::new();
        };
        let exited = node.exited_by(t);
        // A job that waited for an exited one runs from the moment that one exited.
        for &(allocation, at) in &exited {
            self.leave(n, allocation, at);
        }
        exited
            .into_iter()
            .map(|(allocation, _)| completed(allocation))
            .collect()
    }

    /// Job `allocation` leaves node `n` at `at`; returns it if it was there.
    fn leave(&mut self, n: usize, allocation: AllocationId, at: Millis) -> Option<SimJob> {
        let node = self.nodes.get_mut(n)?.as_mut()?;
        let mut new_ends = NewEnds::new();
        let job = node.remove(allocation, at, &mut new_ends);
        self.schedule_ends(n, new_ends);
        if let Some(job) = &job {
            self.running = self.running.saturating_sub(1);
            self.used = self.used.sub(&job.resources);
            if self.room.is_some() {
                self.refresh_room(n);
            }
        }
        job
    }

    fn schedule_ends(&mut self, n: usize, new_ends: NewEnds) {
        for (end, allocation) in new_ends {
            self.ends.push(end, (n, allocation));
        }
    }

    // ---- heartbeats and orders --------------------------------------------------------------

    /// Node `n` reports `finished` at `t` without a heartbeat (see
    /// [`Scheduler::report_finished`]). A node that is not in the cluster reports nothing.
    pub fn report_finished(
        &mut self,
        t: Millis,
        n: usize,
        finished: Vec<FinishedAllocation>,
    ) -> Result<(), CoreError> {
        let Some(Some(node)) = self.nodes.get(n) else {
            return Ok(());
        };
        let (core, id) = (&mut self.core, node.id());
        metered(&mut self.meter, || core.report_finished(t, id, finished))
    }

    /// Node `n` heartbeats at `t`, reporting `finished`, and carries out the core's answer:
    /// the jobs to start (each as `model` says; the driver's `None`: not started), interrupt
    /// and abort. A node that is not in the cluster does not heartbeat.
    pub fn heartbeat(
        &mut self,
        t: Millis,
        n: usize,
        finished: Vec<FinishedAllocation>,
        model: &mut dyn FnMut(&StartOrder) -> Option<JobModel>,
    ) -> Result<Carried, CoreError> {
        let Some(Some(node)) = self.nodes.get(n) else {
            return Ok(Carried::default());
        };
        let (core, id) = (&mut self.core, node.id());
        let response = metered(&mut self.meter, || {
            core.process_heartbeat(t, id, NodeHeartbeat { finished })
        })?;
        Ok(self.carry_out(
            t,
            n,
            response.start,
            response.interrupt,
            response.abort,
            model,
        ))
    }

    /// Carries out the orders the core gave outside a heartbeat (an aborted operation, a
    /// disabled node, a preemption after a fair-share update, ...) at once, node by node.
    pub fn deliver_orders(&mut self, t: Millis) -> Carried {
        let mut carried = Carried::default();
        for (id, orders) in self.core.take_orders() {
            if let Some(n) = self.node_number(&id) {
                let done = self.carry_out(
                    t,
                    n,
                    Vec::new(),
                    orders.interrupt,
                    orders.abort,
                    &mut |_| None,
                );
                carried.aborted.extend(done.aborted);
            }
        }
        carried
    }

    /// Carries out orders for node `n` at `t`: start, interrupt, abort.
    fn carry_out(
        &mut self,
        t: Millis,
        n: usize,
        start: Vec<StartOrder>,
        interrupt: Vec<InterruptOrder>,
        abort: Vec<AllocationId>,
        model: &mut dyn FnMut(&StartOrder) -> Option<JobModel>,
    ) -> Carried {
        let mut carried = Carried::default();
        let mut new_ends = NewEnds::new();
        let Some(Some(node)) = self.nodes.get_mut(n) else {
            return carried;
        };
        for order in &start {
            let Some(model) = model(order) else {
                continue;
            };
            if let Some(end) = node.start(t, order.allocation, order.resources, model) {
                new_ends.push((end, order.allocation));
            }
            self.used = self.used.add(&order.resources);
            carried.started.push(JobRef {
                node: n,
                allocation: order.allocation,
                tag: model.tag,
            });
        }
        for order in &interrupt {
            node.interrupt(t, order, &mut new_ends);
        }
        self.running += carried.started.len() as u64;
        self.schedule_ends(n, new_ends);
        if !carried.started.is_empty() && self.room.is_some() {
            self.refresh_room(n);
        }
        for allocation in abort {
            if let Some(job) = self.leave(n, allocation, t) {
                carried.aborted.push(JobRef {
                    node: n,
                    allocation,
                    tag: job.model.tag,
                });
            }
        }
        carried
    }

    // ---- room -------------------------------------------------------------------------------

    /// Keeps the set of nodes with room ([`Cluster::nodes_with_room`]) from now on. Every node
    /// is in it until its jobs change or [`Cluster::recheck_room`] is called.
    pub fn track_room(&mut self) {
        self.room = Some(Room {
            needed: Resources::ZERO,
            nodes: (0..self.nodes.len())
                .filter(|&n| self.nodes[n].is_some())
                .collect(),
        });
    }

    /// Room is for at least `needed` (and a user slot) from now on; nodes are checked against
    /// it as their jobs change, all of them at [`Cluster::recheck_room`].
    pub fn set_room_needed(&mut self, needed: Resources) {
        if let Some(room) = &mut self.room {
            room.needed = needed;
        }
    }

    /// What room is for ([`Resources::ZERO`] until set, or when room is not tracked).
    pub fn room_needed(&self) -> Resources {
        self.room
            .as_ref()
            .map_or(Resources::ZERO, |room| room.needed)
    }

    /// Checks every node's room again.
    pub fn recheck_room(&mut self) {
        for n in 0..self.nodes.len() {
            self.refresh_room(n);
        }
    }

    /// The nodes with room, by number (none when room is not tracked).
    pub fn nodes_with_room(&self) -> Vec<usize> {
        self.room
            .as_ref()
            .map_or_else(Vec::new, |room| room.nodes.iter().copied().collect())
    }

    /// Whether any node has room (false when room is not tracked).
    pub fn any_room(&self) -> bool {
        self.room
            .as_ref()
            .is_some_and(|room| !room.nodes.is_empty())
    }

    fn refresh_room(&mut self, n: usize) {
        let Some(room) = &mut self.room else {
            return;
        };
        let Some(Some(node)) = self.nodes.get(n) else {
            room.nodes.remove(&n);
            return;
        };
        let free = node.free();
        if free.dominates(&room.needed) && free.raw_of(ResourceKind::UserSlots) > 0 {
            room.nodes.insert(n);
        } else {
            room.nodes.remove(&n);
        }
    }
}

fn completed(allocation: AllocationId) -> FinishedAllocation {
    FinishedAllocation {
        allocation,
        outcome: JobOutcome::Completed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairsched_config::{PoolTreeConfig, PoolTrees, validate_pool_trees};
    use fairsched_core::{OperationId, SchedulerConfig};

    fn cluster_with_one_node(resources: Resources) -> Cluster {
        let trees = PoolTrees::single("default", PoolTreeConfig::default());
        let core = Scheduler::new(
            SchedulerConfig::default(),
            validate_pool_trees(&trees).expect("valid"),
        )
        .expect("a core");
        let mut cluster = Cluster::new(core);
        let spec = NodeSpec {
            id: NodeId("n0".to_string()),
            resources,
            tags: BTreeSet::new(),
        };
        cluster.add_node(0, spec).expect("added");
        cluster.track_room();
        cluster
    }

    fn start_order(allocation: u64, resources: Resources) -> StartOrder {
        StartOrder {
            allocation: AllocationId(allocation),
            operation: OperationId("op".to_string()),
            task: 0,
            resources,
        }
    }

    /// The core decides what fits; the cluster carries out every start it orders, even on a
    /// node its jobs already fill (the node is then overcommitted and has no room).
    #[test]
    fn a_start_on_a_full_node_is_carried_out() {
        let one = Resources::ZERO
            .with(ResourceKind::Cpu, 1.0)
            .with(ResourceKind::UserSlots, 1.0);
        let mut cluster = cluster_with_one_node(one);
        cluster.set_room_needed(one);
        let starts = vec![start_order(1, one), start_order(2, one)];
        let carried = cluster.carry_out(10, 0, starts, Vec::new(), Vec::new(), &mut |s| {
            Some(JobModel::runs_for(Some(5)).with_tag(s.allocation.0 as usize))
        });
        let tags: Vec<usize> = carried.started.iter().map(|j| j.tag).collect();
        assert_eq!(tags, [1, 2]);
        let node = cluster.node(0).unwrap();
        assert_eq!(node.used(), &one.add(&one));
        assert!(node.free().any_negative());
        assert_eq!(cluster.running_jobs(), 2);
        assert!(!cluster.any_room());
        // An abort of a job that is not there does nothing.
        let carried = cluster.carry_out(
            11,
            0,
            Vec::new(),
            Vec::new(),
            vec![AllocationId(9), AllocationId(1)],
            &mut |_| None,
        );
        assert_eq!(carried.aborted.len(), 1);
        assert_eq!(cluster.running_jobs(), 1);
        assert_eq!(cluster.node(0).unwrap().free(), Resources::ZERO);
        assert!(!cluster.any_room(), "full");
        cluster.carry_out(
            12,
            0,
            Vec::new(),
            Vec::new(),
            vec![AllocationId(2)],
            &mut |_| None,
        );
        assert_eq!(cluster.running_jobs(), 0);
        assert!(cluster.any_room());
    }
}
