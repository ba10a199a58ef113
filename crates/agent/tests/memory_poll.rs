//! Memory enforcement by RSS polling, with real jobs through a real server: a job that grows
//! to 200 MiB with a 50 MiB limit is killed (its whole process group) and reported as failed
//! with the memory reason; a job that stays under its limit completes.
//!
//! The polling path works on every Linux machine, so this test never skips.

mod common;

use common::{HOG, MODEST};
use fairsched_agent::MemoryEnforcement;
use fairsched_api::JobState;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_kills_a_job_above_its_memory_and_spares_one_below() {
    let cluster = common::start(MemoryEnforcement::Poll).await;
    let hog = cluster.submit("50MiB", HOG).await;
    let modest = cluster.submit("50MiB", MODEST).await;

    // Seen within a poll (500 ms) of growing past 50 MiB, then SIGTERM; well before its
    // `sleep 30` ends.
    let (job, took) = cluster.first_ended_job(&hog, Duration::from_secs(20)).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let reason = job.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("memory limit exceeded:") && reason.contains("more than its 50MiB"),
        "{job:?}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    println!("job {} ended after {took:?}: {reason}", job.id);
    // The whole group is gone (tail, head, the `sleep 30`, the shell).
    let pgid = cluster.job_pgid(&hog, &job.id);
    common::wait_group_gone(pgid, Duration::from_secs(5)).await;

    cluster.wait_completed_cleanly(&modest).await;

    // A failed job goes back to pending and runs again: stop the hog's operation.
    cluster.client.abort_operation(&hog).await.unwrap();
    cluster.stop().await;
}
