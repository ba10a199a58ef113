//! An agent given a relative work directory (as `fairsched agent`'s default
//! `.fairsched-agent`, or `fairsched up`'s `.fairsched`) runs its jobs: the directory is taken
//! from the agent's working directory, not from each job's. Alone in its binary: it changes
//! the process's working directory.

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::{JobState, OperationState};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_work_directory_runs_jobs() {
    let cwd = tempfile::tempdir().unwrap();
    std::env::set_current_dir(cwd.path()).unwrap();
    let cluster = common::start_with_work_dir(
        MemoryEnforcement::Poll,
        None,
        Some("relative-agent-dir".into()),
    )
    .await;
    let op = cluster.submit("0", "echo ran").await;
    let done = cluster
        .wait_state(&op, OperationState::Completed, Duration::from_secs(30))
        .await;
    assert_eq!(done.jobs[0].state, JobState::Completed, "{done:?}");
    assert!(cwd.path().join("relative-agent-dir/jobs").is_dir());
    cluster.stop().await;
}
