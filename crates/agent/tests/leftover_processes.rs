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
