//! Tests of the reference FCFS, EASY and conservative backfilling (`common/reference.rs`):
//! hand-worked cases, invariants over random small workloads, and a sanity run on the first
//! 2,000 jobs of the KTH SP2 trace.

mod common;

use common::reference::{
    Policy, RefJob, Run, conservative, easy, fcfs, ref_jobs, simulate, summary,
};
use proptest::prelude::*;

/// Marks a job that never starts in the expected starts of a [`Case`].
const NEVER: u64 = u64::MAX;

/// A hand-worked case: jobs as (submit, run, procs, estimate) in ms, and the expected start of
/// each job under each policy.
struct Case {
    name: &'static str,
    procs: u64,
    jobs: &'static [(u64, u64, u64, u64)],
    fcfs: &'static [u64],
    easy: &'static [u64],
    conservative: &'static [u64],
}

const CASES: &[Case] = &[
    Case {
        // J1 (6 of 10) waits for J0 until 10; J2 (4, 5 ms) fits beside J0 and ends by then.
        name: "head blocked, a short job backfills",
        procs: 10,
        jobs: &[(0, 10, 6, 10), (0, 5, 6, 5), (0, 5, 4, 5)],
        fcfs: &[0, 10, 10],
        easy: &[0, 10, 0],
        conservative: &[0, 10, 0],
    },
    Case {
        // J1 (8) has shadow 10 with 2 extra processors: J2 (2, 100 ms) takes them, after which
        // J3 (1, 100 ms) fits now but has no extra left and does not end by 10.
        name: "a long narrow job backfills on the extra processors",
        procs: 10,
        jobs: &[
            (0, 10, 5, 10),
            (0, 10, 8, 10),
            (0, 100, 2, 100),
            (0, 100, 1, 100),
        ],
        fcfs: &[0, 10, 10, 20],
        easy: &[0, 10, 0, 20],
        conservative: &[0, 10, 0, 20],
    },
    Case {
        // J1 needs the whole machine at 10 (no extra): J2 (5, 20 ms) fits now but would delay
        // it; J3 (5, 10 ms) ends by 10 and backfills.
        name: "a long job that would delay the head does not start",
        procs: 10,
        jobs: &[
            (0, 10, 5, 10),
            (0, 10, 10, 10),
            (0, 20, 5, 20),
            (0, 10, 5, 10),
        ],
        fcfs: &[0, 10, 20, 20],
        easy: &[0, 10, 20, 0],
        conservative: &[0, 10, 20, 0],
    },
    Case {
        // J0 is expected to end at 10 but runs until 30. J2 backfills until 5. At 12 J0 is
        // past its estimate, expected to end now: the head J1 is due now (shadow time 12), so
        // J3 (5, 5 ms) does not start although 5 processors are free, but EASY starts J4
        // (0 ms), which ends by 12. Conservative: J1 keeps its reservation at 12 while J0
        // holds the processors, J3 and J4 are planned after it.
        name: "an overrunning job",
        procs: 10,
        jobs: &[
            (0, 30, 5, 10),
            (0, 10, 10, 10),
            (0, 5, 5, 5),
            (12, 5, 5, 5),
            (12, 0, 5, 0),
        ],
        fcfs: &[0, 30, 40, 40, 45],
        easy: &[0, 30, 0, 40, 12],
        conservative: &[0, 30, 0, 40, 40],
    },
    Case {
        // J2 (6) is due at 10, when J0 and J1 both end: 10 processors free then, 4 extra,
        // which J3 (2, 100 ms) uses at once.
        name: "extra counts every job ending at the shadow time",
        procs: 10,
        jobs: &[
            (0, 10, 4, 10),
            (0, 10, 4, 10),
            (0, 10, 6, 10),
            (0, 100, 2, 100),
        ],
        fcfs: &[0, 0, 10, 10],
        easy: &[0, 0, 10, 0],
        conservative: &[0, 0, 10, 0],
    },
    Case {
        // At 10, J0 ends and J2, J3 arrive: the waiting J1 goes first, then J2 (submitted
        // at 10) takes the last processor; J3 waits.
        name: "simultaneous end and arrivals",
        procs: 4,
        jobs: &[
            (0, 10, 4, 10),
            (5, 10, 3, 10),
            (10, 10, 1, 10),
            (10, 1, 2, 1),
        ],
        fcfs: &[0, 10, 10, 20],
        easy: &[0, 10, 10, 20],
        conservative: &[0, 10, 10, 20],
    },
    Case {
        // J0 and J1 both end at 10, when J2 (the whole machine) can start; J3 and J4 wait.
        name: "simultaneous ends",
        procs: 4,
        jobs: &[
            (0, 10, 2, 10),
            (0, 10, 2, 15),
            (0, 20, 4, 20),
            (10, 5, 2, 5),
            (10, 5, 2, 5),
        ],
        fcfs: &[0, 0, 10, 30, 30],
        easy: &[0, 0, 10, 30, 30],
        conservative: &[0, 0, 10, 30, 30],
    },
    Case {
        // J0 runs 0 ms: it ends at the instant it starts, and J1 gets the machine then.
        name: "a job of 0 ms",
        procs: 2,
        jobs: &[(0, 0, 2, 0), (0, 5, 2, 5), (3, 0, 2, 0)],
        fcfs: &[0, 0, 5],
        easy: &[0, 0, 5],
        conservative: &[0, 0, 5],
    },
    Case {
        // J1 (0 ms, the whole machine) is due at 4: conservative holds its processors at that
        // instant, so J2 (5 ms) does not backfill across it at 0.
        name: "a job of 0 ms planned in the future",
        procs: 2,
        jobs: &[(0, 4, 1, 4), (0, 0, 2, 0), (0, 5, 1, 5)],
        fcfs: &[0, 4, 4],
        easy: &[0, 4, 4],
        conservative: &[0, 4, 4],
    },
    Case {
        // J0 (5 of 4 processors) never starts and blocks nobody.
        name: "a job wider than the machine",
        procs: 4,
        jobs: &[(0, 5, 5, 5), (0, 5, 4, 5), (1, 5, 1, 5)],
        fcfs: &[NEVER, 0, 5],
        easy: &[NEVER, 0, 5],
        conservative: &[NEVER, 0, 5],
    },
    Case {
        // J1 (6) is due at 10, J2 (8) after it at 20. EASY protects only J1: J3 (4, 35 ms)
        // uses J1's extra processors, and J2 waits for J3's end. Conservative plans J3 after
        // J2 (at 30, when 4 processors are free for 35 ms).
        name: "EASY delays the second job, conservative does not",
        procs: 10,
        jobs: &[
            (0, 10, 6, 10),
            (0, 10, 6, 10),
            (0, 10, 8, 10),
            (0, 35, 4, 35),
        ],
        fcfs: &[0, 10, 20, 30],
        easy: &[0, 10, 35, 0],
        conservative: &[0, 10, 20, 30],
    },
    Case {
        // At 0, J3 (5, 6 ms) is planned at 4 beside J0, before J2 (the whole machine) at 10.
        // J0 ends at 2 instead of 10: the schedule recomputed in queue order moves J2 to 4,
        // and J3 after it, to 14, later than its first reservation.
        name: "conservative recomputed from scratch: a job can start after its first reservation",
        procs: 10,
        jobs: &[(0, 2, 5, 10), (0, 4, 5, 4), (0, 10, 10, 10), (0, 6, 5, 6)],
        fcfs: &[0, 0, 4, 14],
        easy: &[0, 0, 4, 14],
        conservative: &[0, 0, 4, 14],
    },
];

fn jobs_of(table: &[(u64, u64, u64, u64)]) -> Vec<RefJob> {
    (table.iter())
        .map(|&(submit_ms, run_ms, procs, estimate_ms)| RefJob {
            submit_ms,
            run_ms,
            procs,
            estimate_ms,
        })
        .collect()
}

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
