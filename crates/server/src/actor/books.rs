//! The job books: job ids, allocation ↔ job maps, jobs ending, exits and output tails, and
//! operations leaving memory once finished.

use super::{Actor, unix_ms};
use fairsched_api::{FinishedJob, JobState, JobView, OperationView};
use fairsched_store::{JobExit, StoredJob, StoredOperation};

impl Actor {
    /// A finished operation, once stored, leaves memory: its record, its jobs and their
    /// books. Reads find it in the store ([`Actor::history`]); the core forgets it at its next
    /// fair-share update (`Scheduler::forget_finished_operations`). So what requests,
    /// heartbeats and view builds walk does not grow with the operations ever run.
    pub(super) fn retire(&mut self, id: &str) {
        let Some(record) = self.ops.remove(id) else {
            return;
        };
        for job in record.jobs.iter() {
            self.job_op.remove(&job.id);
            if let Some(a) = self.job_alloc.remove(&job.id) {
                self.alloc_job.remove(&a);
            }
        }
    }

    /// Keeps a finished job's exit code and output (also for a job that the scheduler had
    /// already given up, e.g. one that ended while its node was away).
    pub(super) fn record_exit(&mut self, f: &FinishedJob) {
        let known = self.update_job(&f.job, |job| {
            if job.exit_code.is_none() {
                job.exit_code = f.exit_code;
            }
            // The server's own reason (node_lost, a preemption) stays: the node's report of
            // a job the scheduler had already ended (e.g. `fenced`) comes after it.
            if f.reason.is_some() && job.reason.is_none() {
                job.reason = f.reason.clone();
            }
        });
        if known.is_none() {
            // A job of an operation that left memory (it finished, e.g. aborted, before its
            // node reported the job's end): the stored job gets its end.
            self.batch.job_exit(JobExit {
                id: f.job.clone(),
                exit_code: f.exit_code,
                reason: f.reason.clone(),
                stdout_tail: f.stdout_tail.clone(),
                stderr_tail: f.stderr_tail.clone(),
            });
            return;
        }
        self.tails.insert(
            f.job.clone(),
            (f.stdout_tail.clone(), f.stderr_tail.clone()),
        );
        self.dirty_jobs.insert(f.job.clone());
    }

    pub(super) fn job(&self, id: &str) -> Option<&JobView> {
        let (op, pos) = self.job_op.get(id)?;
        let jobs = &self.ops.get(op)?.jobs;
        jobs.get(jobs.find(*pos, id)?)
    }

    /// Changes job `id` with `f` (`None`: no such job).
    pub(super) fn update_job<R>(
        &mut self,
        id: &str,
        f: impl FnOnce(&mut JobView) -> R,
    ) -> Option<R> {
        let (op, pos) = self.job_op.get(id)?;
        let jobs = &mut self.ops.get_mut(op)?.jobs;
        let at = jobs.find(*pos, id)?;
        jobs.update(at, f)
    }

    /// A new job's id: `<incarnation>.<allocation>` (the allocation counted on from the
    /// state before a reload: see [`Actor::restore`]).
    pub(super) fn new_job_id(&self, allocation: u64) -> String {
        format!("{}.{}", self.incarnation, self.job_id_base + allocation)
    }

    /// The job of an allocation, running or ended since the orders were last queued.
    pub(super) fn job_of(&self, allocation: u64) -> Option<String> {
        self.alloc_job
            .get(&allocation)
            .or_else(|| self.ended_jobs.get(&allocation))
            .cloned()
    }

    /// A running allocation ended: its job takes the state (and keeps a reason it has).
    pub(super) fn end_job(
        &mut self,
        allocation: u64,
        state: JobState,
        reason: Option<&str>,
        now_unix: u64,
    ) {
        let Some(id) = self.alloc_job.remove(&allocation) else {
            return;
        };
        self.ended_jobs.insert(allocation, id.clone());
        self.job_alloc.remove(&id);
        let ended = self.update_job(&id, |job| {
            if job.state != JobState::Running {
                return false;
            }
            job.state = state;
            if let Some(r) = reason {
                job.reason = Some(r.to_string());
            }
            job.finished_at = Some(now_unix);
            true
        });
        if ended == Some(true) {
            self.metrics.job_finished(state);
            self.dirty_jobs.insert(id);
        }
    }

    /// Queues an operation (without its jobs: they are stored one by one) for the store.
    pub(super) fn dirty_op(&mut self, view: &OperationView) {
        debug_assert!(view.jobs.is_empty(), "records keep their jobs apart");
        if let Ok(record) = serde_json::to_string(view) {
            self.batch.operation(StoredOperation {
                id: view.id.clone(),
                state: view.state.name().to_string(),
                pool: view.pool.clone(),
                user: view.user.clone(),
                finished_at: view
                    .state
                    .is_finished()
                    .then(|| view.finished_at.unwrap_or_else(unix_ms)),
                record,
            });
        }
    }

    /// Queues the changed jobs (with the output tails reported for them) for the store.
    pub(super) fn save_jobs(&mut self) {
        for id in std::mem::take(&mut self.dirty_jobs) {
            let Some((op, pos)) = self.job_op.get(&id) else {
                continue;
            };
            let Some(job) = self
                .ops
                .get(op)
                .and_then(|v| v.jobs.get(v.jobs.find(*pos, &id)?))
            else {
                continue;
            };
            let tail = self.tails.remove(&id);
            if let Ok(record) = serde_json::to_string(job) {
                self.batch.job(StoredJob {
                    id,
                    operation: op.clone(),
                    record,
                    stdout_tail: tail.as_ref().map(|t| t.0.clone()),
                    stderr_tail: tail.map(|t| t.1),
                });
            }
        }
    }
}
