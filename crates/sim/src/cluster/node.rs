//! A simulated node and the jobs running on it: when each job exits, what an interruption
//! does to it, and which jobs wait on the node for the resources of interrupted ones.

use fairsched_core::{AllocationId, InterruptOrder, Millis, NodeId};
use fairsched_resources::Resources;
use std::collections::BTreeMap;

/// How a job behaves once the core has started it; the driver gives one for each start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobModel {
    /// How long the job runs once it progresses (`None`: until it is ended).
    pub duration_ms: Option<u64>,
    /// Whether the job exits by itself when interrupted (after `exit_after_interrupt_ms`, if
    /// that is within the interruption's timeout).
    pub interruptible: bool,
    pub exit_after_interrupt_ms: u64,
    /// The driver's number for the job, handed back when it starts and when it is aborted
    /// (the replay: its trace job).
    pub tag: usize,
}

impl JobModel {
    /// A job that runs `duration_ms` and does not exit when interrupted.
    pub const fn runs_for(duration_ms: Option<u64>) -> JobModel {
        JobModel {
            duration_ms,
            interruptible: false,
            exit_after_interrupt_ms: 0,
            tag: 0,
        }
    }

    pub const fn with_tag(self, tag: usize) -> JobModel {
        JobModel { tag, ..self }
    }
}

/// A job running on a simulated node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimJob {
    /// What the core started it with.
    pub resources: Resources,
    pub model: JobModel,
    /// When the job exits by itself (`None`: never, or not yet known while it waits).
    pub ends_at: Option<Millis>,
    pub interrupted: bool,
    /// Jobs preempted for this one that still hold the node's resources: while any is left the
    /// job waits on the node and does not progress (scheduler spec §2.6).
    pub waiting_for: u32,
}

impl SimJob {
    /// The job gets the interruption at `t` and has `timeout_ms` to exit: an interruptible job
    /// exits `exit_after_interrupt_ms` later if that is within the timeout (else the core
    /// aborts it at the deadline); other jobs ignore it.
    fn interrupt(&mut self, t: Millis, timeout_ms: u64) {
        if self.interrupted {
            return;
        }
        self.interrupted = true;
        let exit_after = self.model.exit_after_interrupt_ms;
        if self.model.interruptible && exit_after <= timeout_ms {
            let exit = t.saturating_add(exit_after);
            self.ends_at = Some(self.ends_at.map_or(exit, |e| e.min(exit)));
        }
    }
}

/// A simulated node: its id, resources and the jobs running on it.
#[derive(Clone, Debug)]
pub struct SimNode {
    id: NodeId,
    resources: Resources,
    /// Sum of the resources of the jobs on the node.
    used: Resources,
    jobs: BTreeMap<AllocationId, SimJob>,
    /// Interrupted jobs that still hold the node's resources → the jobs preempted for them
    /// (started at once by the core) that wait for those resources.
    waiters: BTreeMap<AllocationId, Vec<AllocationId>>,
}

/// Jobs whose end time was set or moved: (new end, job), to put on the agenda.
pub(super) type NewEnds = Vec<(Millis, AllocationId)>;

impl SimNode {
    pub(super) fn new(id: NodeId, resources: Resources) -> SimNode {
        SimNode {
            id,
            resources,
            used: Resources::ZERO,
            jobs: BTreeMap::new(),
            waiters: BTreeMap::new(),
        }
    }

    pub fn id(&self) -> &NodeId {
        &self.id
    }

    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// What the jobs on the node hold.
    pub fn used(&self) -> &Resources {
        &self.used
    }

    /// Resources minus what the jobs on the node hold.
    pub fn free(&self) -> Resources {
        self.resources.sub(&self.used)
    }

    pub fn job(&self, allocation: AllocationId) -> Option<&SimJob> {
        self.jobs.get(&allocation)
    }

    /// The jobs on the node, by allocation id.
    pub fn jobs(&self) -> impl Iterator<Item = (AllocationId, &SimJob)> {
        self.jobs.iter().map(|(&a, job)| (a, job))
    }

    pub(super) fn set_resources(&mut self, resources: Resources) {
        self.resources = resources;
    }

    /// Starts a job at `t`; returns when it ends by itself.
    pub(super) fn start(
        &mut self,
        t: Millis,
        allocation: AllocationId,
        resources: Resources,
        model: JobModel,
    ) -> Option<Millis> {
        let ends_at = model.duration_ms.map(|d| t.saturating_add(d));
        self.used = self.used.add(&resources);
        self.jobs.insert(
            allocation,
            SimJob {
                resources,
                model,
                ends_at,
                interrupted: false,
                waiting_for: 0,
            },
        );
        ends_at
    }

    /// Carries out an interrupt order at `t`: the job gets the interruption, and the job
    /// started for it waits until it has left the node.
    pub(super) fn interrupt(&mut self, t: Millis, order: &InterruptOrder, new_ends: &mut NewEnds) {
        if let Some(job) = self.jobs.get_mut(&order.allocation) {
            let before = job.ends_at;
            job.interrupt(t, order.timeout_ms);
            if let Some(end) = job.ends_at
                && job.ends_at != before
            {
                new_ends.push((end, order.allocation));
            }
        }
        if let Some(p) = &order.preemptor {
            self.wait_for(p.allocation, order.allocation);
        }
    }

    /// The preemptor `waiter` (just started) waits until the interrupted job `victim` leaves
    /// the node: its run time counts from then.
    fn wait_for(&mut self, waiter: AllocationId, victim: AllocationId) {
        if !self.jobs.contains_key(&victim) {
            return;
        }
        let Some(job) = self.jobs.get_mut(&waiter) else {
            return;
        };
        job.waiting_for += 1;
        if !job.interrupted {
            job.ends_at = None;
        }
        self.waiters.entry(victim).or_default().push(waiter);
    }

    /// Removes a job that left the node at `at` (exited, or aborted); the jobs that waited
    /// only for it start progressing then and run their whole duration.
    pub(super) fn remove(
        &mut self,
        id: AllocationId,
        at: Millis,
        new_ends: &mut NewEnds,
    ) -> Option<SimJob> {
        let removed = self.jobs.remove(&id);
        if let Some(job) = &removed {
            self.used = self.used.sub(&job.resources);
        }
        for waiter in self.waiters.remove(&id).unwrap_or_default() {
            if let Some(job) = self.jobs.get_mut(&waiter) {
                job.waiting_for = job.waiting_for.saturating_sub(1);
                if job.waiting_for == 0 && !job.interrupted {
                    job.ends_at = job.model.duration_ms.map(|d| at.saturating_add(d));
                    if let Some(end) = job.ends_at {
                        new_ends.push((end, waiter));
                    }
                }
            }
        }
        removed
    }

    /// The jobs that have exited by `t`, with their exit times, by allocation id.
    pub(super) fn exited_by(&self, t: Millis) -> Vec<(AllocationId, Millis)> {
        self.jobs
            .iter()
            .filter_map(|(&allocation, job)| Some((allocation, job.ends_at.filter(|&e| e <= t)?)))
            .collect()
    }

    pub(super) fn job_count(&self) -> usize {
        self.jobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairsched_core::{OperationId, PreemptionReason, Preemptor};

    const VICTIM: AllocationId = AllocationId(1);
    const PREEMPTOR: AllocationId = AllocationId(2);

    fn interrupt(allocation: AllocationId, timeout_ms: u64, preemptor: bool) -> InterruptOrder {
        InterruptOrder {
            allocation,
            signal: Some("SIGINT".to_string()),
            timeout_ms,
            reason: PreemptionReason::Preemption,
            preemptor: preemptor.then(|| Preemptor {
                operation: OperationId("claimer".to_string()),
                allocation: PREEMPTOR,
            }),
        }
    }

    #[test]
    fn an_interruption_moves_the_end_only_of_a_job_that_exits_in_time() {
        // (duration, interruptible, exit after, timeout; the job starts at 100 and is
        //  interrupted at 200, twice when `twice`: its end)
        let cases = [
            (None, true, 300, 1000, false, Some(500)),
            (Some(50), true, 300, 1000, false, Some(150)),
            (Some(10_000), true, 300, 1000, false, Some(500)),
            (Some(10_000), true, 1000, 1000, false, Some(1200)),
            (None, true, 1001, 1000, false, None),
            (Some(10_000), true, 1001, 1000, false, Some(10_100)),
            (Some(5000), false, 0, 1000, false, Some(5100)),
            // The second interruption changes nothing.
            (None, true, 300, 1000, true, Some(500)),
        ];
        for (duration, interruptible, exit_after, timeout, twice, expect) in cases {
            let mut node = SimNode::new(NodeId("n".to_string()), Resources::ZERO);
            let model = JobModel {
                interruptible,
                exit_after_interrupt_ms: exit_after,
                ..JobModel::runs_for(duration)
            };
            let end = node.start(100, VICTIM, Resources::ZERO, model);
            assert_eq!(end, duration.map(|d| 100 + d));
            let mut new_ends = NewEnds::new();
            node.interrupt(200, &interrupt(VICTIM, timeout, false), &mut new_ends);
            if twice {
                node.interrupt(250, &interrupt(VICTIM, timeout, false), &mut new_ends);
            }
            let job = node.job(VICTIM).unwrap();
            assert!(job.interrupted);
            assert_eq!(job.ends_at, expect, "{model:?}, timeout {timeout}");
            let moved: Vec<(Millis, AllocationId)> = expect
                .filter(|&e| Some(e) != end)
                .map(|e| (e, VICTIM))
                .into_iter()
                .collect();
            assert_eq!(new_ends, moved, "{model:?}: only a moved end is scheduled");
        }
    }

    #[test]
    fn a_preemptor_waits_for_its_victim_and_runs_its_whole_duration_from_then() {
        // (the victim leaves at: the preemptor's end, and whether it has to wait at all)
        let cases: [(Option<Millis>, Option<Millis>); 2] = [(Some(700), Some(1200)), (None, None)];
        for (victim_leaves, preemptor_end) in cases {
            let mut node = SimNode::new(NodeId("n".to_string()), Resources::ZERO);
            let cpu = Resources::ZERO.with(fairsched_resources::ResourceKind::Cpu, 1.0);
            node.start(0, VICTIM, cpu, JobModel::runs_for(None));
            node.start(200, PREEMPTOR, cpu, JobModel::runs_for(Some(500)));
            assert_eq!(node.used(), &cpu.add(&cpu), "nothing refuses a start");
            let mut new_ends = NewEnds::new();
            node.interrupt(200, &interrupt(VICTIM, 1000, true), &mut new_ends);
            let waiting = node.job(PREEMPTOR).unwrap();
            assert_eq!((waiting.ends_at, waiting.waiting_for), (None, 1));
            let Some(at) = victim_leaves else {
                continue;
            };
            let left = node.remove(VICTIM, at, &mut new_ends);
            assert!(left.is_some_and(|j| j.interrupted));
            assert_eq!(node.used(), &cpu);
            let runs = node.job(PREEMPTOR).unwrap();
            assert_eq!((runs.ends_at, runs.waiting_for), (preemptor_end, 0));
            assert_eq!(new_ends, [(1200, PREEMPTOR)]);
            assert_eq!(node.exited_by(1199), []);
            assert_eq!(node.exited_by(1200), [(PREEMPTOR, 1200)]);
        }
    }
}
