//! Trace replay (`fairsched_sim::replay`) on small handwritten SWF traces: each case is a trace,
//! a policy and the jobs' expected outcome, one line per job (`ID STATE start S finish F`, times
//! in seconds of virtual time), run through one `check`.

use fairsched_sim::replay::{JobState, Policy, ReplayOptions, ReplayReport, replay};
use fairsched_sim::trace::{Trace, parse_swf};

/// SWF job line: number, submit (s), run time (s), processors, user, group.
fn swf(jobs: &[(u32, u32, u32, u32, u32, u32)], max_nodes: u32, max_procs: u32) -> String {
    let mut text = format!("; MaxNodes: {max_nodes}\n; MaxProcs: {max_procs}\n");
    for &(id, submit, run, procs, user, group) in jobs {
        text.push_str(&format!(
            "{id} {submit} 0 {run} {procs} -1 -1 {procs} -1 -1 1 {user} {group} -1 -1 -1 -1 -1\n"
        ));
    }
    text
}

/// Replays under the malleable model, which these cases were written for (the rigid default
/// has its own tests below and in `baselines.rs`).
fn run(trace: &Trace, policy: Policy, limit: Option<usize>) -> ReplayReport {
    let options = ReplayOptions {
        policy,
        limit,
        rigid: false,
        ..ReplayOptions::default()
    };
    replay(trace, &options, &mut |_| {}).expect("replays")
}

fn render(trace: &Trace, report: &ReplayReport) -> Vec<String> {
    report
        .records
        .iter()
        .map(|r| {
            let job = &trace.jobs[r.job];
            let s = |t: Option<u64>| t.map_or("-".to_string(), |t| format!("{}", t / 1000));
            let state = match &r.state {
                JobState::Skipped(reason) | JobState::Failed(reason) => {
                    format!("{} ({reason})", r.state.name())
                }
                other => other.name().to_string(),
            };
            format!(
                "{} {state} start {} finish {}",
                job.id,
                s(r.first_start_ms),
                s(r.finish_ms)
            )
        })
        .collect()
}

struct Case {
    name: &'static str,
    /// (number, submit s, run s, processors, user, group)
    jobs: &'static [(u32, u32, u32, u32, u32, u32)],
    /// MaxNodes, MaxProcs.
    machine: (u32, u32),
    policy: &'static str,
    limit: Option<usize>,
    expect: &'static [&'static str],
}

fn check(case: &Case) {
    let trace = parse_swf(&swf(case.jobs, case.machine.0, case.machine.1), "test.swf")
        .expect("trace parses");
    let report = run(&trace, Policy::parse(case.policy), case.limit);
    assert_eq!(render(&trace, &report), case.expect, "case {}", case.name);
}

#[test]
fn replays() {
    let cases = [
        Case {
            name: "FIFO on one 4-processor node: in submission order, each waiting for the one \
                   before (the first fair-share update, at 0 s, admits the first two jobs; the \
                   third waits for the update at 100 s)",
            jobs: &[
                (1, 0, 100, 4, 1, 1),
                (2, 0, 50, 4, 2, 2),
                (3, 6, 10, 2, 3, 3),
            ],
            machine: (1, 4),
            policy: "fifo",
            limit: None,
            expect: &[
                "1 completed start 0 finish 100",
                "2 completed start 100 finish 150",
                "3 completed start 150 finish 160",
            ],
        },
        Case {
            name: "a job that fits on a node whose room appears starts at the next update \
                   (10 s period)",
            jobs: &[(1, 0, 100, 2, 1, 1), (2, 3, 50, 2, 2, 2)],
            machine: (1, 4),
            policy: "fifo",
            limit: None,
            expect: &[
                "1 completed start 0 finish 100",
                "2 completed start 10 finish 60",
            ],
        },
        Case {
            name: "a job smaller than any before finds room on a node the earlier jobs \
                   had filled beyond their size (the 1-processor job starts at the next \
                   update, not when the 3-processor job ends)",
            jobs: &[(1, 0, 100, 3, 1, 1), (2, 5, 20, 1, 2, 2)],
            machine: (1, 4),
            policy: "fifo",
            limit: None,
            expect: &[
                "1 completed start 0 finish 100",
                "2 completed start 10 finish 30",
            ],
        },
        Case {
            name: "a job wider than one node is cut into per-node allocations that start \
                   independently (the second on the node the first leaves at 30 s); it \
                   finishes with its last allocation",
            jobs: &[(1, 0, 100, 4, 1, 1), (2, 0, 30, 8, 2, 2)],
            machine: (2, 8),
            policy: "fifo",
            limit: None,
            expect: &[
                "1 completed start 0 finish 100",
                "2 completed start 0 finish 60",
            ],
        },
        Case {
            name: "jobs wider than the machine are skipped; --limit replays the first jobs; \
                   with nothing pending no update runs, so the first one comes with job 2",
            jobs: &[
                (1, 0, 10, 9, 1, 1),
                (2, 1, 10, 8, 1, 1),
                (3, 2, 10, 1, 1, 1),
            ],
            machine: (2, 8),
            policy: "fair-share",
            limit: Some(2),
            expect: &[
                "1 skipped (wider than the machine) start - finish -",
                "2 completed start 1 finish 11",
            ],
        },
        Case {
            name: "fair share: the heartbeat descends to the least satisfied operation, and \
                   operations without usage all have satisfaction 0, so the first group's second \
                   job takes the second node (YTsaurus' default: use_pool_satisfaction_for_\
                   scheduling off); the second group's job waits for the next room",
            jobs: &[
                (1, 0, 100, 4, 1, 1),
                (2, 0, 100, 4, 1, 1),
                (3, 0, 100, 4, 2, 2),
            ],
            machine: (2, 8),
            policy: "fair-share",
            limit: None,
            expect: &[
                "1 completed start 0 finish 100",
                "2 completed start 0 finish 100",
                "3 completed start 100 finish 200",
            ],
        },
        Case {
            name: "the same trace under FIFO: submission order",
            jobs: &[
                (1, 0, 100, 4, 1, 1),
                (2, 0, 100, 4, 1, 1),
                (3, 0, 100, 4, 2, 2),
            ],
            machine: (2, 8),
            policy: "fifo",
            limit: None,
            expect: &[
                "1 completed start 0 finish 100",
                "2 completed start 0 finish 100",
                "3 completed start 100 finish 200",
            ],
        },
        Case {
            name: "a run time over ten years fails its job, in the words the core used when \
                   its tasks carried run times; the others run",
            jobs: &[
                (1, 0, 315_360_001, 6, 1, 1),
                (2, 0, 100, 1, 1, 1),
                (3, 0, 10, 1, 2, 2),
            ],
            machine: (2, 8),
            policy: "fair-share",
            limit: None,
            expect: &[
                "1 failed (operation \"1\": tasks[0].duration_ms must be at most 315360000000 \
                 ms (ten years; got 315360001000)) start - finish -",
                "2 completed start 0 finish 100",
                "3 completed start 0 finish 10",
            ],
        },
    ];
    for case in &cases {
        check(case);
    }
}

/// The same trace and options give the same records, series and counters.
#[test]
fn replay_is_deterministic() {
    let jobs: Vec<(u32, u32, u32, u32, u32, u32)> = (0..200)
        .map(|i| {
            (
                i + 1,
                i * 7,
                50 + (i * 37) % 400,
                1 + (i * 13) % 12,
                i % 5,
                i % 3,
            )
        })
        .collect();
    let trace = parse_swf(&swf(&jobs, 4, 32), "test.swf").unwrap();
    for policy in ["fair-share", "drf", "fifo"] {
        let a = run(&trace, Policy::parse(policy), None);
        let b = run(&trace, Policy::parse(policy), None);
        assert_eq!(a.records, b.records, "{policy}");
        assert_eq!(a.series, b.series, "{policy}");
        assert_eq!(a.stats, b.stats, "{policy}");
        assert!(
            a.records.iter().all(|r| r.state == JobState::Completed),
            "{policy}: every job completes"
        );
        // Updates run for new submissions (200 instants here) and otherwise only every
        // QUIET_REFRESH_PERIODS periods while jobs wait, not at every instant.
        let refreshes = a.end_ms
            / (ReplayOptions::default().fair_share_update_period_ms
                * fairsched_sim::replay::QUIET_REFRESH_PERIODS);
        assert!(
            a.stats.fair_share_updates <= 200 + refreshes + 1,
            "{policy}: {} updates for 200 submissions and {refreshes} refreshes ({} instants)",
            a.stats.fair_share_updates,
            a.stats.instants
        );
    }
}

/// A trace without a machine needs nodes; a policy file that is not a valid tree is refused
/// with its name.
#[test]
fn replay_refuses_what_it_cannot_run() {
    let trace = parse_swf("1 0 0 10 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n", "t.swf").unwrap();
    let err = replay(&trace, &ReplayOptions::default(), &mut |_| {}).unwrap_err();
    assert!(err.contains("--nodes"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.json");
    std::fs::write(&path, r#"{"pools": {"a": {"weight": -1}}}"#).unwrap();
    let trace = parse_swf(&swf(&[(1, 0, 10, 1, 1, 1)], 1, 1), "t.swf").unwrap();
    let options = ReplayOptions {
        policy: Policy::File(path.clone()),
        ..ReplayOptions::default()
    };
    let err = replay(&trace, &options, &mut |_| {}).unwrap_err();
    assert!(err.contains("tree.json") && err.contains("weight"), "{err}");
}

/// While a queue drains without new submissions, fair shares are refreshed only every
/// QUIET_REFRESH_PERIODS periods, not at every job end: 400 one-processor jobs of 15 s
/// submitted at once on one 1-processor node end at 400 instants over 6,000 s.
#[test]
fn a_draining_queue_refreshes_fair_shares_rarely() {
    let jobs: Vec<(u32, u32, u32, u32, u32, u32)> =
        (0..400).map(|i| (i + 1, 0, 15, 1, i % 4, i % 2)).collect();
    let trace = parse_swf(&swf(&jobs, 1, 1), "test.swf").unwrap();
    let report = run(&trace, Policy::FairShare, None);
    assert!(
        report
            .records
            .iter()
            .all(|r| r.state == JobState::Completed)
    );
    assert_eq!(report.end_ms, 6_000_000);
    let period = ReplayOptions::default().fair_share_update_period_ms;
    let refreshes = report.end_ms / (period * fairsched_sim::replay::QUIET_REFRESH_PERIODS);
    // Besides the refreshes: the first updates, and those at which an operation that waits
    // starves (a user's next job, 30 s after it is first below its fair share), a few.
    assert!(
        report.stats.fair_share_updates <= refreshes + refreshes / 10 + 2,
        "{} updates, {refreshes} refreshes expected, {} instants",
        report.stats.fair_share_updates,
        report.stats.instants
    );
}

/// The batch baselines decide from the queue and the running jobs' requested times, not from
/// fair shares: they update only to admit new jobs (one update per instant with
/// submissions), never to refresh shares while a queue drains. The same 400 jobs at once, 15 s
/// each on one node: one update, not one per job end (an update is O(queue), and Curie's
/// queue holds thousands).
#[test]
fn the_baselines_update_only_to_admit_jobs() {
    let jobs: Vec<(u32, u32, u32, u32, u32, u32)> =
        (0..400).map(|i| (i + 1, 0, 15, 1, i % 4, i % 2)).collect();
    let trace = parse_swf(&swf(&jobs, 1, 1), "test.swf").unwrap();
    for policy in [Policy::Fcfs, Policy::Easy, Policy::Conservative] {
        let options = ReplayOptions {
            policy: policy.clone(),
            ..ReplayOptions::default()
        };
        let report = replay(&trace, &options, &mut |_| {}).expect("replays");
        assert!(
            report
                .records
                .iter()
                .all(|r| r.state == JobState::Completed)
        );
        assert_eq!(report.end_ms, 6_000_000, "{policy:?}");
        assert_eq!(
            report.stats.fair_share_updates, 1,
            "{policy:?}: {} instants",
            report.stats.instants
        );
    }
}

/// Under fair share a group's pool exists while the group has jobs: three groups one after
/// another, two jobs each, make three pools, each removed when its group's last job finished
/// (and a group that comes back gets its pool again).
#[test]
fn group_pools_come_and_go_with_their_jobs() {
    let jobs = [
        (1, 0, 10, 1, 1, 1),
        (2, 0, 10, 1, 2, 1),
        (3, 100, 10, 1, 3, 2),
        (4, 100, 10, 1, 3, 2),
        (5, 200, 10, 1, 4, 3),
        (6, 300, 10, 1, 1, 1),
    ];
    let trace = parse_swf(&swf(&jobs, 1, 4), "test.swf").unwrap();
    let report = run(&trace, Policy::FairShare, None);
    assert!(
        report
            .records
            .iter()
            .all(|r| r.state == JobState::Completed)
    );
    assert_eq!(
        (
            report.stats.group_pools_created,
            report.stats.group_pools_removed
        ),
        (4, 4)
    );
    let pools: Vec<_> = report.records.iter().map(|r| r.pool.clone()).collect();
    assert_eq!(
        pools,
        ["g1", "g1", "g2", "g2", "g3", "g1"].map(|p| Some(p.to_string()))
    );
}

/// `rigid`: a job of several allocations starts whole, through the core's gang placement,
/// where the malleable model starts each allocation as a node frees up.
#[test]
fn rigid_jobs_start_whole() {
    // Two 4-processor nodes; job 1 takes one for 100 s; job 2 needs both for 30 s
    // (malleable: its two allocations run one after the other on the free node).
    let jobs = [
        (1, 0, 100, 4, 1, 1),
        (2, 0, 30, 8, 2, 2),
        (3, 200, 10, 8, 1, 1),
    ];
    let trace = parse_swf(&swf(&jobs, 2, 8), "test.swf").expect("trace parses");
    let run_with = |rigid: bool| {
        let options = ReplayOptions {
            policy: Policy::Fifo,
            rigid,
            ..ReplayOptions::default()
        };
        replay(&trace, &options, &mut |_| {}).expect("replays")
    };
    let malleable = run_with(false);
    assert_eq!(malleable.job_model, "malleable");
    assert_eq!(
        render(&trace, &malleable),
        [
            "1 completed start 0 finish 100",
            "2 completed start 0 finish 60",
            "3 completed start 200 finish 210",
        ]
    );
    let rigid = run_with(true);
    assert_eq!(rigid.job_model, "rigid");
    // Job 2 holds the free node from 0 s and starts on both when job 1 ends; job 3, alone on
    // an empty machine, gathers both nodes at once.
    assert_eq!(
        render(&trace, &rigid),
        [
            "1 completed start 0 finish 100",
            "2 completed start 100 finish 130",
            "3 completed start 200 finish 210",
        ]
    );
}

/// A group that starves on a full machine preempts, although no node has anything to report:
/// job 1 (group 1) fills ten 1-processor nodes for 10,000 s; group 2's five jobs, submitted
/// at 100 s, are below their fair share (half the machine), starve 30 s later (the default
/// starvation timeout) and take the room of job 1's allocations beyond its fair share at the
/// update that finds them starving (130.001 s). Malleable: five of job 1's allocations are
/// preempted and run again. Rigid: job 1 is a gang, preempted whole or not at all, and its
/// first allocation is within its fair share: nothing is preempted (the core's tests cover a
/// gang preempted whole).
#[test]
fn starving_groups_preempt_on_full_nodes() {
    let mut jobs = vec![(1, 0, 10_000, 10, 1, 1)];
    jobs.extend((2..7).map(|id| (id, 100, 1_000, 1, 2, 2)));
    let trace = parse_swf(&swf(&jobs, 10, 10), "test.swf").expect("trace parses");
    let run_with = |rigid: bool| {
        let options = ReplayOptions {
            policy: Policy::FairShare,
            rigid,
            ..ReplayOptions::default()
        };
        replay(&trace, &options, &mut |_| {}).expect("replays")
    };
    let preemptions = |report: &ReplayReport| -> Vec<u32> {
        report.records.iter().map(|r| r.preemptions).collect()
    };
    let malleable = run_with(false);
    assert_eq!(
        render(&trace, &malleable),
        [
            "1 completed start 0 finish 11130",
            "2 completed start 130 finish 1130",
            "3 completed start 130 finish 1130",
            "4 completed start 130 finish 1130",
            "5 completed start 130 finish 1130",
            "6 completed start 130 finish 1130",
        ]
    );
    assert_eq!(preemptions(&malleable), [5, 0, 0, 0, 0, 0]);
    assert_eq!(malleable.stats.preemptions, 5);
    let rigid = run_with(true);
    assert_eq!(preemptions(&rigid), [0, 0, 0, 0, 0, 0]);
    assert_eq!(
        render(&trace, &rigid)[..2],
        [
            "1 completed start 0 finish 10000",
            "2 completed start 10000 finish 11000",
        ]
    );
}

/// What an observer of a replay is told: every job's outcome once, as it becomes final
/// (completed and failed jobs in the order they ended), each equal to the report's record,
/// and the jobs.csv written from them has a row per job (header the same with no rows).
mod observed {
    use super::swf;
    use fairsched_sim::replay::output::JobsCsv;
    use fairsched_sim::replay::{
        JobRecord, JobState, Observer, Policy, ProgressUpdate, ReplayOptions, replay_observed,
    };
    use fairsched_sim::trace::parse_swf;
    use proptest::prelude::*;

    #[derive(Default)]
    struct Seen {
        outcomes: Vec<JobRecord>,
        last: Option<ProgressUpdate>,
    }

    impl Observer for Seen {
        fn progress(&mut self, update: ProgressUpdate) {
            self.last = Some(update);
        }

        fn outcome(&mut self, record: &JobRecord) -> Result<(), String> {
            self.outcomes.push(record.clone());
            Ok(())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn every_outcome_once_in_the_order_jobs_end(
            jobs in prop::collection::vec((0u32..200, 0u32..100, 1u32..12, 1u32..4), 1..40),
            policy in prop::sample::select(vec!["fifo", "fair-share", "easy", "fcfs", "conservative"]),
            rigid in any::<bool>(),
        ) {
            let jobs: Vec<_> = jobs
                .iter()
                .enumerate()
                .map(|(i, &(submit, run, procs, user))| (i as u32 + 1, submit, run, procs, user, user))
                .collect();
            let mut jobs = jobs;
            jobs.sort_by_key(|j| j.1);
            // Two 4-processor nodes: jobs of more than 8 processors are skipped.
            let trace = parse_swf(&swf(&jobs, 2, 8), "t.swf").expect("trace parses");
            let policy = Policy::parse(policy);
            let options = ReplayOptions {
                rigid: rigid || policy.is_baseline(),
                policy,
                ..ReplayOptions::default()
            };
            let mut seen = Seen::default();
            let report = replay_observed(&trace, &options, &mut seen).expect("replays");
            let mut by_job = seen.outcomes.clone();
            by_job.sort_by_key(|r| r.job);
            prop_assert_eq!(&by_job, &report.records, "each job once, as recorded");
            let ends: Vec<u64> = seen
                .outcomes
                .iter()
                .filter(|r| matches!(r.state, JobState::Completed | JobState::Failed(_)))
                .filter_map(|r| r.finish_ms)
                .collect();
            prop_assert!(ends.is_sorted(), "in the order jobs ended: {:?}", ends);
            let last = seen.last.expect("progress at the end");
            prop_assert_eq!(last.total, report.records.len() as u64);

            let dir = tempfile::tempdir().unwrap();
            let mut csv = JobsCsv::new(dir.path());
            for r in &seen.outcomes {
                csv.write(&trace, r).unwrap();
            }
            prop_assert!(dir.path().join(JobsCsv::PARTIAL).exists());
            csv.finish().unwrap();
            let text = std::fs::read_to_string(dir.path().join("jobs.csv")).unwrap();
            prop_assert_eq!(text.lines().count(), report.records.len() + 1);
            let empty = tempfile::tempdir().unwrap();
            JobsCsv::new(empty.path()).finish().unwrap();
            let header = std::fs::read_to_string(empty.path().join("jobs.csv")).unwrap();
            prop_assert_eq!(header.as_str(), format!("{}\n", text.lines().next().unwrap()));
            prop_assert!(!dir.path().join(JobsCsv::PARTIAL).exists());
        }
    }
}

/// A rigid job starts whole under fairsched's own policies too, where the gathering gang
/// lends what it holds: none of KTH's first 600 jobs (three of which started in parts before
/// the gathering gang waited for what it lent) runs past its first start plus its run time
/// unless it was preempted. Skipped (with a message) when the trace is not there.
#[test]
fn no_rigid_job_of_kth_starts_in_parts() {
    let dir = std::env::var_os("FAIRSCHED_SHARED_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        std::path::PathBuf::from,
    );
    let file = dir.join("traces/KTH-SP2-1996-2.1-cln.swf.gz");
    if !file.is_file() {
        eprintln!("{} not found; skipped", file.display());
        return;
    }
    let trace = fairsched_sim::trace::load(&file, None).expect("the KTH trace loads");
    for policy in ["fair-share", "drf", "fifo"] {
        let options = ReplayOptions {
            policy: Policy::parse(policy),
            limit: Some(600),
            ..ReplayOptions::default()
        };
        let report = replay(&trace, &options, &mut |_| {}).expect("replays");
        let parts: Vec<String> = report
            .records
            .iter()
            .filter(|r| r.state == JobState::Completed && r.preemptions == 0)
            .filter_map(|r| {
                let (start, finish) = (r.first_start_ms?, r.finish_ms?);
                let run = trace.jobs[r.job].duration_ms;
                (finish > start + run).then(|| {
                    format!(
                        "{} ({} allocations) started at {start} ms, ended {} ms late",
                        trace.jobs[r.job].id,
                        r.allocations,
                        finish - start - run
                    )
                })
            })
            .collect();
        assert_eq!(
            parts,
            Vec::<String>::new(),
            "{policy}: jobs started in parts"
        );
    }
}
