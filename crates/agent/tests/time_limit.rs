//! Time limits, with real jobs through a real server: a job that runs past its task's
//! `time_limit_ms` is killed (its whole process group) and reported failed with the reason; a
//! job that ends within its limit completes. Backfilling trusts the limits (a job placed on
//! resources held for a big job must leave them in time), so they are enforced.

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::{JobState, SubmitOperation, TaskSubmit, parse_resources};
use std::time::Duration;

async fn submit(cluster: &common::Cluster, script: &str, time_limit_ms: u64) -> String {
    let op = SubmitOperation {
        tasks: vec![TaskSubmit {
            job_count: 1,
            resources: parse_resources("cpu=0.5").unwrap(),
            command: vec!["sh".into(), "-c".into(), script.into()],
            time_limit_ms: Some(time_limit_ms),
            ..TaskSubmit::default()
        }],
        max_failed_job_count: Some(1),
        ..SubmitOperation::default()
    };
    cluster.client.submit(&op).await.unwrap().id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_time_limit_is_killed_and_one_within_it_completes() {
    let cluster = common::start(MemoryEnforcement::Poll).await;
    // The shell and its `sleep` both in the job's group; the sleep ignores nothing.
    let long = submit(&cluster, "echo $$ > pid; sleep 30; echo done", 1_500).await;
    let short = submit(&cluster, "sleep 0.2", 30_000).await;

    let (job, took) = cluster
        .first_ended_job(&long, Duration::from_secs(20))
        .await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let reason = job.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("time limit exceeded:") && reason.contains("time limit of 1.5s"),
        "{job:?}"
    );
    // Killed at its limit (1.5 s after it started), not when `sleep 30` ends.
    assert!(
        took >= Duration::from_millis(1_000) && took < Duration::from_secs(10),
        "took {took:?}"
    );
    let pgid = cluster.job_pgid(&long, &job.id);
    common::wait_group_gone(pgid, Duration::from_secs(5)).await;

    cluster.wait_completed_cleanly(&short).await;
    cluster.stop().await;
}
