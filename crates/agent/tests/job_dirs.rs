//! Finished jobs' directories are removed after the agent's `job_dir_retention`; running
//! jobs' directories stay. Jobs' directories and the agent's state are the agent's user's
//! only.

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::OperationState;
use std::time::{Duration, Instant};

#[tokio::test]
async fn finished_job_directories_are_removed_after_the_retention() {
    let cluster =
        common::start_with_retention(MemoryEnforcement::Poll, Some(Duration::from_millis(400)))
            .await;
    let running = cluster.submit("10MiB", "sleep 4").await;
    let done = cluster.submit("10MiB", "echo hi").await;
    let view = cluster
        .wait_state(&done, OperationState::Completed, Duration::from_secs(20))
        .await;
    for dir in ["jobs", "state"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(cluster.work_dir.join(dir))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{dir}: {mode:o}");
    }
    let job_dir = |op: &str, job: &str| cluster.work_dir.join("jobs").join(op).join(job);
    let done_dir = job_dir(&done, &view.jobs[0].id);
    let started = Instant::now();
    while done_dir.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} still exists",
            done_dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The operation's directory went with its only job's.
    assert!(!cluster.work_dir.join("jobs").join(&done).exists());
    let running_view = cluster.client.get_operation(&running).await.unwrap();
    assert_eq!(
        running_view.state,
        OperationState::Running,
        "{running_view:?}"
    );
    assert!(job_dir(&running, &running_view.jobs[0].id).exists());
    cluster.stop().await;
}
