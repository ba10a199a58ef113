//! A reference implementation of FCFS, EASY backfilling and conservative backfilling, written
//! for the tests only, independently of the scheduling core: the machine is a pool of `P`
//! identical processors (no nodes), times are integer milliseconds, and every policy is a plain
//! event-driven loop written for clarity, not speed.
//!
//! Semantics, common to the three policies:
//!
//! * The queue is in submission order (ties: input order); `jobs` must be sorted by
//!   `submit_ms`. A job wider than the machine never joins the queue (its start is None), so
//!   it blocks nobody.
//! * Time goes from event to event: job ends (start + `run_ms`, the actual run time) and
//!   arrivals. At an instant `t`, every job ending at `t` ends, then every job submitted at `t`
//!   joins the queue, then scheduling passes run until one starts nothing. A job that runs
//!   0 ms ends at the instant it starts, which is processed again as an instant of its own.
//! * A running job is expected to end at `max(start + estimate_ms, t)`: a job past its
//!   estimate is expected to end now.
//!
//! Policies (one scheduling pass at instant `t`):
//!
//! * [`fcfs`]: start the queue head while it fits in the free processors.
//! * [`easy`] (Mu'alem–Feitelson EASY): as FCFS, then the blocked head gets a reservation at
//!   the shadow time S, the earliest expected end at which the free processors plus those
//!   released by then reach the head's width; `extra` = free processors at S (every job
//!   expected to end at or before S released) − the head's width. The rest of the queue is
//!   scanned in order: a job starts if it fits in the processors free now and either
//!   `t + estimate ≤ S` or its width ≤ `extra`; in the second case only, `extra` shrinks by
//!   its width.
//! * [`conservative`]: every waiting job, in queue order, is given a reservation at the
//!   earliest time it fits in a profile of free processors over time made of the running jobs
//!   (until their expected ends) and the reservations of the jobs before it, for its estimate.
//!   A job whose reservation is at `t` starts if it fits in the processors actually free (they
//!   can be fewer than the profile says when a running job is past its estimate; the job then
//!   keeps its reservation at `t` and waits). The whole schedule is recomputed from scratch at
//!   every pass. A waiting job with an estimate of 0 ms is planned as 1 ms, so that its
//!   reservation holds its processors at its instant (otherwise a later job could be planned
//!   across it and delay it).
//!
//!   Recomputing from scratch in queue order does not keep every promise: when a job ends
//!   before its estimate, a job earlier in the queue can move into a gap a later job had been
//!   planned in, and push it back. Only the blocked head's reservation never gets later when
//!   no job overruns its estimate (and no reservation ever changes when every estimate is
//!   exact).

use fairsched_sim::trace::Trace;

/// One job as the reference sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefJob {
    /// Submission time, ms.
    pub submit_ms: u64,
    /// Actual run time, ms.
    pub run_ms: u64,
    /// Processors needed for the whole run.
    pub procs: u64,
    /// The user's estimate (requested time), ms: what backfilling plans with.
    pub estimate_ms: u64,
}

/// The jobs of `trace` (the first `limit` if given), in its submission order. The estimate of
/// a job without a requested time is its own run time (a perfect estimate), at least 1 ms as
/// the simulator's (a time limit is positive).
pub fn ref_jobs(trace: &Trace, limit: Option<usize>) -> Vec<RefJob> {
    let n = limit.unwrap_or(trace.jobs.len());
    trace
        .jobs
        .iter()
        .take(n)
        .map(|j| RefJob {
            submit_ms: j.submit_ms,
            run_ms: j.duration_ms,
            procs: u64::from(j.width),
            estimate_ms: j.time_limit_ms.unwrap_or(j.duration_ms.max(1)),
        })
        .collect()
}

/// Start time per job under first come, first served (None: never started).
pub fn fcfs(jobs: &[RefJob], procs: u64) -> Vec<Option<u64>> {
    simulate(jobs, procs, Policy::Fcfs).start
}

/// Start time per job under EASY backfilling (None: never started).
pub fn easy(jobs: &[RefJob], procs: u64) -> Vec<Option<u64>> {
    simulate(jobs, procs, Policy::Easy).start
}

/// Start time per job under conservative backfilling (None: never started).
pub fn conservative(jobs: &[RefJob], procs: u64) -> Vec<Option<u64>> {
    simulate(jobs, procs, Policy::Conservative).start
}

/// The scheduling policies of the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Fcfs,
    Easy,
    Conservative,
}

impl Policy {
    pub const ALL: [Policy; 3] = [Policy::Fcfs, Policy::Easy, Policy::Conservative];
}

/// What a run produced, per job (indexed like the input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Start time; None: never started (wider than the machine).
    pub start: Vec<Option<u64>>,
    /// Conservative: the job's first reservation (None under FCFS and EASY).
    pub first_reservation: Vec<Option<u64>>,
    /// EASY and conservative: the job's reservation (EASY: the shadow time) in the first pass
    /// that left it as the blocked head, the first waiting job that did not start. None under
    /// FCFS and for a job never blocked at the head.
    pub head_reservation: Vec<Option<u64>>,
}

/// Runs `jobs` on `procs` processors under `policy`.
pub fn simulate(jobs: &[RefJob], procs: u64, policy: Policy) -> Run {
    assert!(
        jobs.is_sorted_by_key(|j| j.submit_ms),
        "jobs must be in submission order"
    );
    let mut st = State {
        jobs,
        procs,
        t: 0,
        queue: Vec::new(),
        running: Vec::new(),
        run: Run {
            start: vec![None; jobs.len()],
            first_reservation: vec![None; jobs.len()],
            head_reservation: vec![None; jobs.len()],
        },
    };
    let mut next_arrival = 0;
    loop {
        let next_end = st.running.iter().map(|&j| st.end(j)).min();
        let arrival = jobs.get(next_arrival).map(|j| j.submit_ms);
        st.t = match (next_end, arrival) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => break,
        };
        let t = st.t;
        let running = std::mem::take(&mut st.running);
        st.running = running.into_iter().filter(|&j| st.end(j) > t).collect();
        while next_arrival < jobs.len() && jobs[next_arrival].submit_ms == t {
            if jobs[next_arrival].procs <= procs {
                st.queue.push(next_arrival);
            }
            next_arrival += 1;
        }
        while st.pass(policy) {}
    }
    st.run
}

/// The simulation at one instant.
struct State<'a> {
    jobs: &'a [RefJob],
    procs: u64,
    /// Current time.
    t: u64,
    /// Waiting jobs, in submission order.
    queue: Vec<usize>,
    /// Running jobs, in start order.
    running: Vec<usize>,
    run: Run,
}

impl State<'_> {
    fn start_of(&self, j: usize) -> u64 {
        self.run.start[j].expect("a running job has started")
    }

    /// Actual end of running job `j`.
    fn end(&self, j: usize) -> u64 {
        self.start_of(j) + self.jobs[j].run_ms
    }

    /// Expected end of running job `j`.
    fn expected_end(&self, j: usize) -> u64 {
        (self.start_of(j) + self.jobs[j].estimate_ms).max(self.t)
    }

    /// Processors free now.
    fn free(&self) -> u64 {
        self.procs
            - self
                .running
                .iter()
                .map(|&j| self.jobs[j].procs)
                .sum::<u64>()
    }

    fn start(&mut self, j: usize) {
        assert!(self.jobs[j].procs <= self.free(), "overcommit");
        self.queue.retain(|&q| q != j);
        self.run.start[j] = Some(self.t);
        self.running.push(j);
    }

    /// One scheduling pass: whether it started a job.
    fn pass(&mut self, policy: Policy) -> bool {
        match policy {
            Policy::Fcfs => self.fcfs_pass(),
            Policy::Easy => self.easy_pass(),
            Policy::Conservative => self.conservative_pass(),
        }
    }

    fn fcfs_pass(&mut self) -> bool {
        let mut started = false;
        while let Some(&head) = self.queue.first() {
            if self.jobs[head].procs > self.free() {
                break;
            }
            self.start(head);
            started = true;
        }
        started
    }

    fn easy_pass(&mut self) -> bool {
        let mut started = self.fcfs_pass();
        let Some(&head) = self.queue.first() else {
            return started;
        };
        let (shadow, mut extra) = self.shadow(self.jobs[head].procs);
        self.run.head_reservation[head].get_or_insert(shadow);
        let rest = self.queue[1..].to_vec(); // a copy: starting a job changes the queue
        for j in rest {
            let job = self.jobs[j];
            if job.procs > self.free() {
                continue;
            }
            let ends_by_shadow = self.t + job.estimate_ms <= shadow;
            if ends_by_shadow || job.procs <= extra {
                if !ends_by_shadow {
                    extra -= job.procs;
                }
                self.start(j);
                started = true;
            }
        }
        started
    }

    /// The shadow time for a blocked head `need` processors wide, and the extra processors:
    /// those free at the shadow time beyond `need`. (The order of jobs expected to end at the
    /// same time changes neither.)
    fn shadow(&self, need: u64) -> (u64, u64) {
        let mut ends: Vec<(u64, u64)> = (self.running.iter())
            .map(|&j| (self.expected_end(j), self.jobs[j].procs))
            .collect();
        ends.sort();
        let free = self.free();
        let mut available = free;
        let shadow = ends
            .iter()
            .find(|&&(_, p)| {
                available += p;
                available >= need
            })
            .expect("a job no wider than the machine fits once everything ended")
            .0;
        let free_at_shadow = free
            + (ends.iter())
                .filter(|&&(end, _)| end <= shadow)
                .map(|&(_, p)| p)
                .sum::<u64>();
        (shadow, free_at_shadow - need)
    }

    fn conservative_pass(&mut self) -> bool {
        let t = self.t;
        let mut profile = Profile::new(t, self.procs);
        for &j in &self.running {
            profile.reserve(t, self.expected_end(j), self.jobs[j].procs);
        }
        let mut started = false;
        let mut head_seen = false;
        for j in self.queue.clone() {
            let job = self.jobs[j];
            // A job of 0 ms holds its processors for 1 ms in the plan: later jobs must not be
            // planned across the instant it starts.
            let hold = job.estimate_ms.max(1);
            let at = profile.earliest(job.procs, hold);
            profile.reserve(at, at + hold, job.procs);
            self.run.first_reservation[j].get_or_insert(at);
            if at == t && job.procs <= self.free() {
                self.start(j);
                started = true;
            } else if !head_seen {
                head_seen = true;
                self.run.head_reservation[j].get_or_insert(at);
            }
        }
        started
    }
}

/// Free processors over time from some instant on: `(time, free from then until the next
/// step)`, times increasing; the last step lasts forever.
#[derive(Debug)]
struct Profile {
    steps: Vec<(u64, u64)>,
}

impl Profile {
    /// `procs` free from `t` on.
    fn new(t: u64, procs: u64) -> Profile {
        Profile {
            steps: vec![(t, procs)],
        }
    }

    /// End of step `i`.
    fn step_end(&self, i: usize) -> u64 {
        self.steps.get(i + 1).map_or(u64::MAX, |s| s.0)
    }

    /// Makes `at` (no earlier than the first step) the start of a step.
    fn split(&mut self, at: u64) {
        let i = self.steps.partition_point(|s| s.0 <= at);
        if self.steps[i - 1].0 != at {
            self.steps.insert(i, (at, self.steps[i - 1].1));
        }
    }

    /// Takes `procs` processors during [from, to).
    fn reserve(&mut self, from: u64, to: u64, procs: u64) {
        if from >= to {
            return;
        }
        self.split(from);
        self.split(to);
        for step in self.steps.iter_mut().filter(|s| from <= s.0 && s.0 < to) {
            step.1 = step.1.checked_sub(procs).expect("reserved beyond the free");
        }
    }

    /// The earliest step start from which `procs` processors are free for `duration` ms (at
    /// least 1). Every candidate is a step start: freeing happens only there.
    fn earliest(&self, procs: u64, duration: u64) -> u64 {
        let mut i = 0;
        'candidates: while i < self.steps.len() {
            let from = self.steps[i].0;
            let to = from + duration;
            let mut k = i;
            while k < self.steps.len() && self.steps[k].0 < to {
                if self.steps[k].1 < procs {
                    // No window starting before the end of step k can hold the job.
                    i = k + 1;
                    continue 'candidates;
                }
                k += 1;
            }
            return from;
        }
        unreachable!("the last step has every processor not held forever");
    }
}

/// Mean wait and mean bounded slowdown of the started jobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Number of jobs started.
    pub jobs: usize,
    /// Mean of start − submit, seconds.
    pub mean_wait_s: f64,
    /// Mean of max(1, (wait + run) / max(run, 10 s)).
    pub mean_bounded_slowdown: f64,
}

/// Mean wait and mean bounded slowdown of the jobs that started (`starts` indexed like
/// `jobs`; None: left out).
pub fn summary(jobs: &[RefJob], starts: &[Option<u64>]) -> Summary {
    let (mut n, mut wait_ms, mut slowdown) = (0, 0.0, 0.0);
    for (job, start) in jobs.iter().zip(starts) {
        let Some(start) = *start else { continue };
        let wait = (start - job.submit_ms) as f64;
        let run = job.run_ms as f64;
        n += 1;
        wait_ms += wait;
        slowdown += ((wait + run) / run.max(10_000.0)).max(1.0);
    }
    let mean = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
    Summary {
        jobs: n,
        mean_wait_s: mean(wait_ms) / 1000.0,
        mean_bounded_slowdown: mean(slowdown),
    }
}
