//! The simulator's batch baselines (`fcfs`, `easy`), which run through the scheduling core
//! (FIFO pool, gang placement with `hold = "needed"`), reproduce an independent
//! processor-level implementation (`common::reference`) job by job on the KTH SP2 trace
//! (100 single-processor nodes, so nodes and processors are the same thing).

mod common;

use common::reference::{self, RefJob};
use fairsched_resources::ResourceKind;
use fairsched_sim::replay::{Policy, ReplayOptions, replay};
use fairsched_sim::trace::{self, Trace};

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
    let expected = reference(&jobs, 100);
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
        "{policy:?}, KTH first {limit} jobs: every start as the reference's; mean wait {:.1} s",
        summary.mean_wait_s
    );
}

#[test]
fn fcfs_and_easy_start_every_kth_job_when_the_reference_does() {
    let Some(file) = common::shared_file("traces/KTH-SP2-1996-2.1-cln.swf.gz") else {
        eprintln!("shared/traces/KTH-SP2-1996-2.1-cln.swf.gz not found; skipped");
        return;
    };
    let trace = trace::load(&file, None).expect("the KTH trace loads");
    let cases: [(Policy, usize, Reference); 2] = [
        (Policy::Easy, 2_000, reference::easy),
        (Policy::Fcfs, 1_000, reference::fcfs),
    ];
    for (policy, limit, reference) in cases {
        check(&trace, policy, limit, reference);
    }
}

/// A whole Parallel Workloads Archive trace under `easy` against the reference, in mean wait
/// and mean bounded slowdown, printed (the reference counts processors; the replay places
/// jobs on the trace's nodes, so on nodes of several processors the two models differ). Slow:
/// run them with `cargo test --release -p fairsched-sim --test baselines -- --ignored
/// --nocapture whole_`.
fn easy_on_whole_trace(name: &str) {
    let Some(file) = common::shared_file(&format!("traces/{name}")) else {
        eprintln!("{name} not found; skipped");
        return;
    };
    let trace = trace::load(&file, None).expect("the trace loads");
    let procs: u64 = trace
        .machine
        .as_ref()
        .expect("the trace describes its machine")
        .iter()
        .map(|g| u64::from(g.count) * g.resources.get(ResourceKind::Cpu) as u64)
        .sum();
    let jobs = reference::ref_jobs(&trace, None);
    let started = std::time::Instant::now();
    let expected = reference::summary(&jobs, &reference::easy(&jobs, procs));
    let reference_s = started.elapsed().as_secs_f64();
    let options = ReplayOptions {
        policy: Policy::Easy,
        ..ReplayOptions::default()
    };
    let started = std::time::Instant::now();
    let report = replay(&trace, &options, &mut |_| {}).expect("the replay runs");
    let replay_s = started.elapsed().as_secs_f64();
    let starts: Vec<Option<u64>> = report.records.iter().map(|r| r.first_start_ms).collect();
    let got = reference::summary(&jobs, &starts);
    let reference_starts = reference::easy(&jobs, procs);
    let differing: Vec<(&str, Option<u64>, Option<u64>)> = starts
        .iter()
        .zip(&reference_starts)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| (trace.jobs[i].id.as_str(), *a, *b))
        .collect();
    let same = starts.len() - differing.len();
    if !differing.is_empty() {
        eprintln!(
            "{name}: first jobs starting elsewhen (id, replay ms, reference ms): {:?}",
            &differing[..differing.len().min(5)]
        );
    }
    let off = |a: f64, b: f64| 100.0 * (a - b) / b;
    eprintln!(
        "{name} ({procs} processors): replay ({replay_s:.1} s) mean wait {:.1} s, bounded \
         slowdown {:.3} ({} jobs); reference ({reference_s:.1} s) {:.1} s, {:.3} ({} jobs); \
         off by {:+.2} % and {:+.2} %; {same} jobs start at the same time",
        got.mean_wait_s,
        got.mean_bounded_slowdown,
        got.jobs,
        expected.mean_wait_s,
        expected.mean_bounded_slowdown,
        expected.jobs,
        off(got.mean_wait_s, expected.mean_wait_s),
        off(got.mean_bounded_slowdown, expected.mean_bounded_slowdown),
    );
}

#[test]
#[ignore]
fn whole_kth_under_easy() {
    easy_on_whole_trace("KTH-SP2-1996-2.1-cln.swf.gz");
}

#[test]
#[ignore]
fn whole_llnl_thunder_under_easy() {
    easy_on_whole_trace("LLNL-Thunder-2007-1.1-cln.swf.gz");
}

#[test]
#[ignore]
fn whole_curie_under_easy() {
    easy_on_whole_trace("CEA-Curie-2011-2.1-cln.swf.gz");
}
