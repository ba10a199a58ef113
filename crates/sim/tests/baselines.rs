//! The simulator's batch baselines (`fcfs`, `easy`), which run through the scheduling core
//! (FIFO pool, gang placement with `hold = "needed"`), reproduce an independent
//! processor-level implementation (`common::reference`) job by job on the KTH SP2 trace
//! (100 single-processor nodes, so nodes and processors are the same thing).

mod common;

use common::reference::{self, RefJob};
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
