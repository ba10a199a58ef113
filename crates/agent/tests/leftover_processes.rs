//! A job ends with its main process: what it left running in its process group (a background
//! child) is killed, so finished jobs leave no processes behind (cgroups or not).

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::{JobState, OperationState};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_jobs_background_children_are_killed() {
    let cluster = common::start(MemoryEnforcement::Poll).await;
    // The main process starts a long background child and exits at once.
    let op = cluster
        .submit("0", "echo $$ > pid; sleep 600 & exit 0")
        .await;
    let done = cluster
        .wait_state(&op, OperationState::Completed, Duration::from_secs(30))
        .await;
    let job = &done.jobs[0];
    assert_eq!((job.state, job.exit_code), (JobState::Completed, Some(0)));
    let pgid = cluster.job_pgid(&op, &job.id);
    common::wait_group_gone(pgid, Duration::from_secs(5)).await;
    cluster.stop().await;
}

/// A job whose program does not exist fails with the reason in its view (what `op show`
/// prints), not only in its stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_cannot_start_says_why() {
    let cluster = common::start(MemoryEnforcement::Poll).await;
    let op = cluster
        .client
        .submit(&fairsched_api::SubmitOperation {
            max_failed_job_count: Some(1),
            tasks: vec![fairsched_api::TaskSubmit {
                job_count: 1,
                resources: fairsched_api::parse_resources("cpu=0.5,memory=0").unwrap(),
                command: vec!["/nonexistent/program".into()],
                ..fairsched_api::TaskSubmit::default()
            }],
            ..fairsched_api::SubmitOperation::default()
        })
        .await
        .unwrap()
        .id;
    let (job, _) = cluster.first_ended_job(&op, Duration::from_secs(30)).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let reason = job.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("cannot start") && reason.contains("/nonexistent/program"),
        "{job:?}"
    );
    cluster.stop().await;
}
