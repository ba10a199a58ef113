//! The simulator's batch baselines (`fcfs`, `easy`, `conservative`), which run through the
//! scheduling core (FIFO pool, gang placement with `hold = "needed"`, and `"planned"` for
//! conservative), reproduce an independent processor-level implementation
//! (`common::reference`) job by job: on the hand-worked cases of `common::cases`, on random
//! small workloads, and on the KTH SP2 trace (100 single-processor nodes, so nodes and
//! processors are the same thing).

mod common;

use common::cases::{CASES, NEVER, jobs_of, trace_of};
use common::reference::{self, RefJob};
use fairsched_resources::ResourceKind;
use fairsched_sim::replay::{Policy, ReplayOptions, replay};
use fairsched_sim::trace::{self, Trace};
use proptest::prelude::*;

/// A reference policy: start times of the jobs on so many processors.
type Reference = fn(&[RefJob], u64) -> Vec<Option<u64>>;

/// Replays the first `limit` jobs of `trace` under `policy` and compares every job's start
/// with the reference's.
fn check(
    trace: &Trace,
    policy: Policy,
    limit: usize,
    reference: fn(&[RefJob], u64) -> Vec<Option<u64>>,
) {
    let jobs = reference::ref_jobs(trace, Some(limit));
    let expected = reference(&jobs, processors(trace));
    let options = ReplayOptions {
        policy: policy.clone(),
        limit: Some(limit),
        ..ReplayOptions::default()
    };
    let report = replay(trace, &options, &mut |_| {}).expect("the replay runs");
    assert_eq!(report.job_model, "rigid", "{policy:?}");
    let got: Vec<Option<u64>> = report.records.iter().map(|r| r.first_start_ms).collect();
    assert_eq!(got.len(), expected.len());
    let differing: Vec<(usize, Option<u64>, Option<u64>)> = got
        .iter()
        .zip(&expected)
        .enumerate()
        .filter(|(_, (g, e))| g != e)
        .map(|(i, (g, e))| (i, *g, *e))
        .collect();
    assert!(
        differing.is_empty(),
        "{policy:?}: {} of {limit} jobs start elsewhen than the reference's; first (job, \
         replay, reference): {:?}",
        differing.len(),
        &differing[..differing.len().min(5)]
    );
    let summary = reference::summary(&jobs, &expected);
    eprintln!(
        "{policy:?}, first {limit} jobs: every start as the reference's; mean wait {:.1} s",
        summary.mean_wait_s
    );
}

/// The processors of the machine `trace` describes.
fn processors(trace: &Trace) -> u64 {
    trace
        .machine
        .as_ref()
        .expect("the trace describes its machine")
        .iter()
        .map(|g| u64::from(g.count) * g.resources.get(ResourceKind::Cpu) as u64)
        .sum()
}

#[test]
fn the_baselines_start_every_kth_job_when_the_reference_does() {
    let Some(file) = common::shared_file("traces/KTH-SP2-1996-2.1-cln.swf.gz") else {
        eprintln!("shared/traces/KTH-SP2-1996-2.1-cln.swf.gz not found; skipped");
        return;
    };
    let trace = trace::load(&file, None).expect("the KTH trace loads");
    let cases: [(Policy, usize, Reference); 3] = [
        (Policy::Easy, 2_000, reference::easy),
        (Policy::Fcfs, 1_000, reference::fcfs),
        (Policy::Conservative, 2_000, reference::conservative),
    ];
    for (policy, limit, reference) in cases {
        check(&trace, policy, limit, reference);
    }
}

/// The baseline replaying what the reference's policy does.
fn baseline(policy: reference::Policy) -> Policy {
    match policy {
        reference::Policy::Fcfs => Policy::Fcfs,
        reference::Policy::Easy => Policy::Easy,
        reference::Policy::Conservative => Policy::Conservative,
    }
}

/// Replays `jobs` on `procs` single-processor nodes under the baseline of `policy` (through
/// the core), and runs the reference on the jobs as the replay sees them (a job without an
/// estimate expected to run its run time, at least 1 ms): each job's start, replay's and
/// reference's.
fn both_starts(
    jobs: &[RefJob],
    procs: u64,
    policy: reference::Policy,
) -> (Vec<Option<u64>>, Vec<Option<u64>>) {
    both_starts_on_nodes(jobs, procs, 1, policy)
}

/// As [`both_starts`], on nodes of `node_procs` processors (`procs` in all).
fn both_starts_on_nodes(
    jobs: &[RefJob],
    procs: u64,
    node_procs: u64,
    policy: reference::Policy,
) -> (Vec<Option<u64>>, Vec<Option<u64>>) {
    let trace = trace_of(jobs, procs, node_procs);
    let options = ReplayOptions {
        policy: baseline(policy),
        ..ReplayOptions::default()
    };
    let report = replay(&trace, &options, &mut |_| {}).expect("the replay runs");
    let got = report.records.iter().map(|r| r.first_start_ms).collect();
    let seen = reference::ref_jobs(&trace, None);
    (got, reference::simulate(&seen, procs, policy).start)
}

/// Every hand-worked case, under each baseline: every job starts when the reference starts it
/// (and, when no job of the case has an estimate of 0, which the replay cannot give, when the
/// case says).
#[test]
fn the_baselines_start_every_job_of_the_hand_worked_cases_as_the_reference() {
    for case in CASES {
        let jobs = jobs_of(case.jobs);
        for policy in reference::Policy::ALL {
            let (got, expected) = both_starts(&jobs, case.procs, policy);
            assert_eq!(got, expected, "{}: {policy:?}", case.name);
            let column = match policy {
                reference::Policy::Fcfs => case.fcfs,
                reference::Policy::Easy => case.easy,
                reference::Policy::Conservative => case.conservative,
            };
            if jobs.iter().all(|j| j.estimate_ms > 0) {
                let column: Vec<Option<u64>> =
                    column.iter().map(|&s| (s != NEVER).then_some(s)).collect();
                assert_eq!(got, column, "{}: {policy:?}", case.name);
            }
        }
    }
}

/// A machine of 1 to 8 single-processor nodes and up to 14 jobs on it (some wider than the
/// machine, several submitted at the same instant), with estimates shorter or longer than the
/// run time (0: none, the run time).
fn workload() -> impl Strategy<Value = (u64, Vec<RefJob>)> {
    (1..=8u64).prop_flat_map(|procs| {
        let job = (0..4u64, 0..12u64, 1..=procs + 1, 0..12u64);
        let jobs = prop::collection::vec(job, 1..=14).prop_map(|raw| {
            let mut submit_ms = 0;
            (raw.into_iter())
                .map(|(gap, run_ms, procs, estimate_ms)| {
                    submit_ms += gap;
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0xc0de_5e7e),
        ..ProptestConfig::default()
    })]

    /// Every baseline through the core starts every job of a random small workload when the
    /// reference does, jobs overrunning their estimates or not. (Under `easy`, the clock alone
    /// moving the queue head's expected start is rare in such workloads: the hand-worked cases
    /// "a running job reaching its estimate gives the head extra processors" and "a job
    /// started on the extra processors reaching its estimate gives them back" are two; the
    /// second one took 30,000 cases to find.)
    #[test]
    fn the_baselines_start_random_jobs_as_the_reference(
        (procs, jobs) in workload(),
        policy in prop::sample::select(reference::Policy::ALL.to_vec()),
    ) {
        let (got, expected) = both_starts(&jobs, procs, policy);
        prop_assert_eq!(got, expected, "{:?}", policy);
    }

    /// Easy and conservative backfilling on nodes of 4 processors with jobs of whole nodes
    /// (the plan counts the nodes as one pool of processors; the placement is node by node).
    /// The head holds whole nodes alike, so the replay skips the heartbeats of held nodes
    /// that would change nothing here (debug builds check every skip).
    #[test]
    fn the_baselines_start_random_whole_node_jobs_as_the_reference(
        (nodes, jobs) in workload(),
        policy in prop::sample::select(vec![
            reference::Policy::Easy,
            reference::Policy::Conservative,
        ]),
    ) {
        let jobs: Vec<RefJob> = (jobs.iter())
            .map(|j| RefJob { procs: 4 * j.procs, ..*j })
            .collect();
        let (got, expected) = both_starts_on_nodes(&jobs, 4 * nodes, 4, policy);
        prop_assert_eq!(got, expected, "{:?}", policy);
    }
}

/// A whole Parallel Workloads Archive trace under a baseline against the reference, printed:
/// how many jobs start at the same time, how many within 5 s, the largest difference, and mean
/// wait and mean bounded slowdown of both (the reference counts processors; the replay places
/// jobs on the trace's nodes, so on nodes of several processors the two models differ).
/// Slow: run them with `cargo test --release -p fairsched-sim --test baselines -- --ignored
/// --nocapture whole_` (and `curie_first` for the first 20,000 jobs of CEA-Curie).
fn on_whole_trace(name: &str, policy: reference::Policy) {
    on_trace(name, policy, None);
}

/// [`on_whole_trace`] on the first `limit` jobs (all: `None`).
fn on_trace(name: &str, policy: reference::Policy, limit: Option<usize>) {
    let Some(file) = common::shared_file(&format!("traces/{name}")) else {
        eprintln!("{name} not found; skipped");
        return;
    };
    let trace = trace::load(&file, None).expect("the trace loads");
    let procs = processors(&trace);
    let jobs = reference::ref_jobs(&trace, limit);
    let started = std::time::Instant::now();
    let reference_starts = reference::simulate(&jobs, procs, policy).start;
    let reference_s = started.elapsed().as_secs_f64();
    let expected = reference::summary(&jobs, &reference_starts);
    let options = ReplayOptions {
        policy: baseline(policy),
        limit,
        ..ReplayOptions::default()
    };
    let started = std::time::Instant::now();
    let report = replay(&trace, &options, &mut |_| {}).expect("the replay runs");
    let replay_s = started.elapsed().as_secs_f64();
    let starts: Vec<Option<u64>> = report.records.iter().map(|r| r.first_start_ms).collect();
    let got = reference::summary(&jobs, &starts);
    let differing: Vec<(&str, Option<u64>, Option<u64>)> = starts
        .iter()
        .zip(&reference_starts)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| (trace.jobs[i].id.as_str(), *a, *b))
        .collect();
    let same = starts.len() - differing.len();
    let gap = |&(_, a, b): &(&str, Option<u64>, Option<u64>)| match (a, b) {
        (Some(a), Some(b)) => a.abs_diff(b),
        _ => u64::MAX,
    };
    let within_5s = same + differing.iter().filter(|d| gap(d) <= 5_000).count();
    let largest = differing.iter().map(gap).max().unwrap_or(0);
    if !differing.is_empty() {
        eprintln!(
            "{name}, {policy:?}: first jobs starting elsewhen (id, replay ms, reference ms): {:?}",
            &differing[..differing.len().min(5)]
        );
    }
    let off = |a: f64, b: f64| 100.0 * (a - b) / b;
    eprintln!(
        "{name} ({procs} processors), {policy:?}: replay ({replay_s:.1} s) mean wait {:.1} s, \
         bounded slowdown {:.3} ({} jobs); reference ({reference_s:.1} s) {:.1} s, {:.3} ({} \
         jobs); off by {:+.2} % and {:+.2} %; {same} of {} jobs start at the same time, \
         {within_5s} within 5 s, the largest difference {:.1} s",
        got.mean_wait_s,
        got.mean_bounded_slowdown,
        got.jobs,
        expected.mean_wait_s,
        expected.mean_bounded_slowdown,
        expected.jobs,
        off(got.mean_wait_s, expected.mean_wait_s),
        off(got.mean_bounded_slowdown, expected.mean_bounded_slowdown),
        starts.len(),
        largest as f64 / 1000.0,
    );
}

#[test]
#[ignore]
fn whole_kth_under_easy() {
    on_whole_trace("KTH-SP2-1996-2.1-cln.swf.gz", reference::Policy::Easy);
}

#[test]
#[ignore]
fn whole_kth_under_conservative() {
    on_whole_trace(
        "KTH-SP2-1996-2.1-cln.swf.gz",
        reference::Policy::Conservative,
    );
}

#[test]
#[ignore]
fn whole_llnl_thunder_under_easy() {
    on_whole_trace("LLNL-Thunder-2007-1.1-cln.swf.gz", reference::Policy::Easy);
}

#[test]
#[ignore]
fn whole_llnl_thunder_under_conservative() {
    on_whole_trace(
        "LLNL-Thunder-2007-1.1-cln.swf.gz",
        reference::Policy::Conservative,
    );
}

#[test]
#[ignore]
fn whole_curie_under_easy() {
    on_whole_trace("CEA-Curie-2011-2.1-cln.swf.gz", reference::Policy::Easy);
}

#[test]
#[ignore]
fn whole_curie_under_conservative() {
    on_whole_trace(
        "CEA-Curie-2011-2.1-cln.swf.gz",
        reference::Policy::Conservative,
    );
}

/// CEA-Curie's nodes have 16 processors and its jobs do not take whole nodes: the replay
/// places them node by node, the reference counts processors, so the two differ.
#[test]
#[ignore]
fn curie_first_20000_jobs_under_easy_and_conservative() {
    for policy in [reference::Policy::Easy, reference::Policy::Conservative] {
        on_trace("CEA-Curie-2011-2.1-cln.swf.gz", policy, Some(20_000));
    }
}
