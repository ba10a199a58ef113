//! Tests of the reference FCFS, EASY and conservative backfilling (`common/reference.rs`):
//! hand-worked cases, invariants over random small workloads, and a sanity run on the first
//! 2,000 jobs of the KTH SP2 trace.

mod common;

use common::cases::{CASES, Case, NEVER, jobs_of};
use common::reference::{
    Policy, RefJob, Run, conservative, easy, fcfs, ref_jobs, simulate, summary,
};
use proptest::prelude::*;

/// Checks `case`'s starts under `policy`.
fn check(case: &Case, policy: Policy) {
    let jobs = jobs_of(case.jobs);
    let (run, expected) = match policy {
        Policy::Fcfs => (fcfs(&jobs, case.procs), case.fcfs),
        Policy::Easy => (easy(&jobs, case.procs), case.easy),
        Policy::Conservative => (conservative(&jobs, case.procs), case.conservative),
    };
    let expected: Vec<Option<u64>> = (expected.iter())
        .map(|&s| (s != NEVER).then_some(s))
        .collect();
    assert_eq!(run, expected, "{}: {policy:?}", case.name);
}

#[test]
fn hand_worked_cases() {
    for case in CASES {
        assert_eq!(case.jobs.len(), case.fcfs.len(), "{}", case.name);
        for policy in Policy::ALL {
            check(case, policy);
        }
    }
}

#[test]
fn reservations_of_the_hand_worked_cases() {
    let case = |name: &str| {
        let case = CASES.iter().find(|c| c.name.starts_with(name)).unwrap();
        (jobs_of(case.jobs), case.procs)
    };
    // EASY: J1's shadow time is 10 (when J0 ends).
    let (jobs, procs) = case("a long narrow job");
    let run = simulate(&jobs, procs, Policy::Easy);
    assert_eq!(run.head_reservation, [None, Some(10), None, Some(20)]);
    assert_eq!(run.first_reservation, [None; 4]);
    // Overrun: J1's shadow is 10 at 0 (J0's estimate), then "now" at 12.
    let (jobs, procs) = case("an overrunning job");
    let run = simulate(&jobs, procs, Policy::Easy);
    assert_eq!(run.head_reservation[1], Some(10));
    // Conservative: J3 was first planned at 4, started at 14.
    let (jobs, procs) = case("conservative recomputed");
    let run = simulate(&jobs, procs, Policy::Conservative);
    assert_eq!(run.first_reservation, [Some(0), Some(0), Some(10), Some(4)]);
    assert_eq!(run.head_reservation, [None, None, Some(10), Some(14)]);
    assert_eq!(run.start[3], Some(14));
}

#[test]
fn summary_means_wait_and_bounded_slowdown() {
    let jobs = jobs_of(&[(0, 20_000, 1, 20_000), (0, 1_000, 1, 1_000), (0, 1, 9, 1)]);
    // Waits 0 s and 20 s; slowdowns max(1, 20/20) = 1 and (20 + 1) / 10 = 2.1; the third job
    // never started.
    let s = summary(&jobs, &[Some(0), Some(20_000), None]);
    assert_eq!(s.jobs, 2);
    assert!((s.mean_wait_s - 10.0).abs() < 1e-9, "{s:?}");
    assert!((s.mean_bounded_slowdown - 1.55).abs() < 1e-9, "{s:?}");
}

/// A fixed-seed proptest configuration (`PROPTEST_CASES` overrides the count), as in the rest
/// of the workspace: the same cases every run, no failure files.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_ea51),
        ..ProptestConfig::default()
    }
}

/// How a random job's estimate relates to its run time.
#[derive(Clone, Copy, Debug)]
enum Estimates {
    /// Any estimate, shorter or longer than the run.
    Any,
    /// At least the run time.
    AtLeastRun,
    /// Exactly the run time, which is at least 1 ms.
    Exact,
}

/// A machine of 1 to 8 processors and up to 14 jobs on it, some wider than the machine,
/// submitted in order with small gaps (several at the same instant).
fn workload(estimates: Estimates) -> impl Strategy<Value = (u64, Vec<RefJob>)> {
    (1..=8u64).prop_flat_map(move |procs| {
        let job = (0..4u64, 0..12u64, 1..=procs + 1, 0..12u64);
        let jobs = prop::collection::vec(job, 1..=14).prop_map(move |raw| {
            let mut submit_ms = 0;
            (raw.into_iter())
                .map(|(gap, mut run_ms, procs, e)| {
                    submit_ms += gap;
                    if let Estimates::Exact = estimates {
                        // A job of 0 ms is planned as 1 ms: its estimate is never exact.
                        run_ms = run_ms.max(1);
                    }
                    let estimate_ms = match estimates {
                        Estimates::Any => e,
                        Estimates::AtLeastRun => run_ms + e % 4,
                        Estimates::Exact => run_ms,
                    };
                    RefJob {
                        submit_ms,
                        run_ms,
                        procs,
                        estimate_ms,
                    }
                })
                .collect::<Vec<_>>()
        });
        (Just(procs), jobs)
    })
}

/// What holds of every policy's starts: jobs wider than the machine never start, every other
/// one starts, not before its submission, and the processors in use never exceed the machine
/// (checked at every start, where the use peaks; a job of 0 ms holds nothing).
fn check_sane(jobs: &[RefJob], procs: u64, starts: &[Option<u64>]) -> Result<(), TestCaseError> {
    for (i, (job, start)) in jobs.iter().zip(starts).enumerate() {
        prop_assert_eq!(start.is_some(), job.procs <= procs, "job {}", i);
        if let Some(start) = *start {
            prop_assert!(start >= job.submit_ms, "job {} starts before submission", i);
        }
    }
    for at in starts.iter().flatten() {
        let in_use: u64 = (jobs.iter().zip(starts))
            .filter_map(|(job, start)| start.map(|s| (job, s)))
            .filter(|&(job, s)| s <= *at && *at < s + job.run_ms)
            .map(|(job, _)| job.procs)
            .sum();
        prop_assert!(in_use <= procs, "{} processors in use at {}", in_use, at);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(2_000))]

    #[test]
    fn no_policy_overcommits_or_forgets_a_job((procs, jobs) in workload(Estimates::Any)) {
        for policy in Policy::ALL {
            let run = simulate(&jobs, procs, policy);
            check_sane(&jobs, procs, &run.start)?;
        }
    }

    #[test]
    fn fcfs_starts_jobs_in_submission_order((procs, jobs) in workload(Estimates::Any)) {
        let starts: Vec<u64> = fcfs(&jobs, procs).into_iter().flatten().collect();
        prop_assert!(starts.is_sorted(), "{:?}", starts);
    }

    /// With no job running past its estimate, the blocked head starts at the latest at the
    /// shadow time computed when it first became the head.
    #[test]
    fn easy_head_starts_by_its_first_shadow_time(
        (procs, jobs) in workload(Estimates::AtLeastRun)
    ) {
        let run = simulate(&jobs, procs, Policy::Easy);
        check_reservations_kept(&run, &run.head_reservation)?;
    }

    /// With no job running past its estimate, the blocked head starts at the latest at its
    /// reservation when it first became the head. (Its first reservation, made further back
    /// in the queue, is not a bound: see the hand-worked case "conservative recomputed from
    /// scratch".)
    #[test]
    fn conservative_head_starts_by_its_reservation(
        (procs, jobs) in workload(Estimates::AtLeastRun)
    ) {
        let run = simulate(&jobs, procs, Policy::Conservative);
        check_reservations_kept(&run, &run.head_reservation)?;
    }

    /// With exact estimates nothing ends early, the schedule never changes, and every job
    /// starts exactly at its first reservation.
    #[test]
    fn conservative_with_exact_estimates_starts_jobs_as_first_planned(
        (procs, jobs) in workload(Estimates::Exact)
    ) {
        let run = simulate(&jobs, procs, Policy::Conservative);
        for (i, start) in run.start.iter().enumerate() {
            prop_assert_eq!(*start, run.first_reservation[i], "job {}", i);
        }
    }

    /// On a machine wide enough for all jobs at once, every job starts at its submission.
    #[test]
    fn on_a_machine_wide_enough_no_job_waits((_, jobs) in workload(Estimates::Any)) {
        let wide = jobs.iter().map(|j| j.procs).sum();
        for policy in Policy::ALL {
            let starts = simulate(&jobs, wide, policy).start;
            let submits: Vec<_> = jobs.iter().map(|j| Some(j.submit_ms)).collect();
            prop_assert_eq!(starts, submits, "{:?}", policy);
        }
    }
}

/// Every job given a reservation started, no later than it.
fn check_reservations_kept(run: &Run, reservations: &[Option<u64>]) -> Result<(), TestCaseError> {
    for (i, reserved) in reservations.iter().enumerate() {
        if let Some(reserved) = *reserved {
            let start = run.start[i];
            prop_assert!(
                start.is_some_and(|s| s <= reserved),
                "job {} started at {:?}, reserved at {}",
                i,
                start,
                reserved
            );
        }
    }
    Ok(())
}

/// The first 2,000 jobs of KTH's SP2 (100 processors) under the three policies: every job
/// fitting the machine starts, never beyond 100 processors in use. Skipped (with a message)
/// when the trace is not there.
#[test]
fn kth_first_2000_jobs_run_sanely_under_every_policy() {
    let Some(file) = common::shared_file("traces/KTH-SP2-1996-2.1-cln.swf.gz") else {
        eprintln!("shared/traces/KTH-SP2-1996-2.1-cln.swf.gz not found; skipped");
        return;
    };
    const PROCS: u64 = 100;
    let trace = fairsched_sim::trace::load(&file, None).expect("the KTH trace loads");
    let jobs = ref_jobs(&trace, Some(2_000));
    assert_eq!(jobs.len(), 2_000);
    for policy in Policy::ALL {
        let starts = simulate(&jobs, PROCS, policy).start;
        check_sane(&jobs, PROCS, &starts).unwrap_or_else(|e| panic!("{policy:?}: {e}"));
        let s = summary(&jobs, &starts);
        eprintln!(
            "KTH first 2,000 jobs, {policy:?}: {} jobs, mean wait {:.1} s, mean bounded slowdown {:.2}",
            s.jobs, s.mean_wait_s, s.mean_bounded_slowdown
        );
    }
}
