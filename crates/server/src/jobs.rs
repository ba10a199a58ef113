//! The jobs of one operation as the server keeps them: every job it ever ran, in start order.
//!
//! The actor changes them and publishes them to readers after every change, so a copy must
//! cost little: the list is kept in chunks shared between the actor and the published views
//! (`Arc`), and a change copies only the chunk it touches (and only while a view still holds
//! it). Publishing an operation costs O(chunks), not O(jobs): an operation that ran 100,000
//! jobs is about 3,000 pointer copies. Views are published after every commit, so the first
//! change of a chunk after each copies it: jobs are kept behind their own `Arc` in it, so
//! that copy is 32 pointers, and only the job that changes is cloned. The counts by state are kept as jobs are added and
//! change state, so they cost nothing to read.

use fairsched_api::{JobState, JobView};
use std::sync::Arc;

/// Jobs per chunk: running jobs are the newest, so a busy operation's changes fall in its
/// last chunks.
const CHUNK: usize = 32;

/// How many jobs are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateCounts {
    pub running: u32,
    pub completed: u32,
    pub failed: u32,
    /// Aborted, and any state the server does not name otherwise.
    pub aborted: u32,
}

impl StateCounts {
    fn slot(&mut self, state: JobState) -> &mut u32 {
        match state {
            JobState::Running => &mut self.running,
            JobState::Completed => &mut self.completed,
            JobState::Failed => &mut self.failed,
            JobState::Aborted | JobState::Unknown => &mut self.aborted,
        }
    }
}

/// The jobs of one operation (see the module documentation). Cloning is cheap.
#[derive(Clone, Debug, Default)]
pub struct JobList {
    chunks: Vec<Arc<Vec<Arc<JobView>>>>,
    len: usize,
    counts: StateCounts,
}

impl JobList {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn counts(&self) -> StateCounts {
        self.counts
    }

    /// Appends a job; returns its position.
    pub fn push(&mut self, job: JobView) -> usize {
        *self.counts.slot(job.state) += 1;
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(Arc::new(job)),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(Arc::new(job));
                self.chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
        self.len - 1
    }

    pub fn get(&self, i: usize) -> Option<&JobView> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK).map(|j| &**j)
    }

    /// Where job `id` is: at `hint` when it is there, else found by a scan.
    pub fn find(&self, hint: usize, id: &str) -> Option<usize> {
        match self.get(hint) {
            Some(j) if j.id == id => Some(hint),
            _ => self.iter().position(|j| j.id == id),
        }
    }

    /// Changes the job at `i` with `f` (copying its chunk if a published view shares it);
    /// the counts follow a change of state.
    pub fn update<R>(&mut self, i: usize, f: impl FnOnce(&mut JobView) -> R) -> Option<R> {
        if i >= self.len {
            return None;
        }
        let job = Arc::make_mut(&mut Arc::make_mut(&mut self.chunks[i / CHUNK])[i % CHUNK]);
        let before = job.state;
        let r = f(job);
        if job.state != before {
            *self.counts.slot(before) -= 1;
            *self.counts.slot(job.state) += 1;
        }
        Some(r)
    }

    pub fn iter(&self) -> impl Iterator<Item = &JobView> {
        self.chunks.iter().flat_map(|c| c.iter().map(|j| &**j))
    }

    /// Every job, copied (for a reply that shows them).
    pub fn to_vec(&self) -> Vec<JobView> {
        self.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: usize, state: JobState) -> JobView {
        JobView {
            id: format!("1.{id}"),
            task: 0,
            node: "n".into(),
            state,
            exit_code: None,
            reason: None,
            started_at: 0,
            finished_at: None,
        }
    }

    #[test]
    fn jobs_keep_their_order_and_positions_across_chunks() {
        let mut jobs = JobList::default();
        for i in 0..(2 * CHUNK + 3) {
            assert_eq!(jobs.push(job(i, JobState::Running)), i);
        }
        assert_eq!(jobs.len(), 2 * CHUNK + 3);
        let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let expected: Vec<String> = (0..2 * CHUNK + 3).map(|i| format!("1.{i}")).collect();
        assert_eq!(ids, expected);
        assert_eq!(
            jobs.get(CHUNK).map(|j| j.id.as_str()),
            Some(format!("1.{CHUNK}").as_str())
        );
        assert!(jobs.get(2 * CHUNK + 3).is_none());
        assert_eq!(jobs.to_vec().len(), 2 * CHUNK + 3);
    }

    #[test]
    fn a_job_is_found_at_its_hint_else_by_a_scan() {
        let mut jobs = JobList::default();
        for i in 1..=3 {
            jobs.push(job(i, JobState::Running));
        }
        assert_eq!(jobs.find(1, "1.2"), Some(1));
        // A stale or wrong hint still finds the job.
        assert_eq!(jobs.find(0, "1.3"), Some(2));
        assert_eq!(jobs.find(7, "1.1"), Some(0));
        assert_eq!(jobs.find(1, "1.9"), None);
        assert_eq!(JobList::default().find(0, "1.1"), None);
    }

    #[test]
    fn counts_follow_every_change_of_state() {
        let mut jobs = JobList::default();
        for i in 0..5 {
            jobs.push(job(i, JobState::Running));
        }
        jobs.update(0, |j| j.state = JobState::Completed);
        jobs.update(1, |j| j.state = JobState::Failed);
        jobs.update(2, |j| j.state = JobState::Aborted);
        // A change that keeps the state changes no count.
        jobs.update(3, |j| j.exit_code = Some(0));
        assert_eq!(jobs.update(9, |j| j.state = JobState::Failed), None);
        let c = jobs.counts();
        assert_eq!((c.running, c.completed, c.failed, c.aborted), (2, 1, 1, 1));
        // The counts are what a scan of the states gives.
        let running = jobs.iter().filter(|j| j.state == JobState::Running).count();
        assert_eq!(running as u32, c.running);
    }

    #[test]
    fn a_published_copy_does_not_see_later_changes() {
        let mut jobs = JobList::default();
        for i in 0..(CHUNK + 1) {
            jobs.push(job(i, JobState::Running));
        }
        let published = jobs.clone();
        jobs.update(CHUNK, |j| j.state = JobState::Completed);
        jobs.push(job(CHUNK + 1, JobState::Running));
        assert_eq!(published.get(CHUNK).unwrap().state, JobState::Running);
        assert_eq!(published.len(), CHUNK + 1);
        assert_eq!(published.counts().running, CHUNK as u32 + 1);
        assert_eq!(jobs.get(CHUNK).unwrap().state, JobState::Completed);
        // The untouched first chunk is still shared, not copied.
        assert!(Arc::ptr_eq(&published.chunks[0], &jobs.chunks[0]));
        assert!(!Arc::ptr_eq(&published.chunks[1], &jobs.chunks[1]));
        // The copied chunk shares the jobs that did not change.
        jobs.update(CHUNK, |j| j.exit_code = Some(0));
        let published = jobs.clone();
        jobs.update(CHUNK, |j| j.exit_code = Some(1));
        assert!(Arc::ptr_eq(&published.chunks[1][1], &jobs.chunks[1][1]));
        assert!(!Arc::ptr_eq(&published.chunks[1][0], &jobs.chunks[1][0]));
        assert_eq!(published.get(CHUNK).unwrap().exit_code, Some(0));
    }
}
