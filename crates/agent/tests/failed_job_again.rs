//! A job that fails runs again at once, through a real server and agent: the heartbeat that
//! reports the failure starts it again, even when a fair-share update ran while it was
//! running (it used to wait for the node's next heartbeat then, since the heartbeat's skip
//! rule read the pending jobs as of that update, when there were none).

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::{JobState, OperationState, SubmitOperation, TaskSubmit, parse_resources};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_runs_again_at_the_heartbeat_that_reports_it() {
    // Heartbeats a second apart, updates five times a second: several updates run while the
    // first attempt does.
    let cluster = common::start_with_server(MemoryEnforcement::Poll, None, None, false, |c| {
        c.scheduler.node_heartbeat_period_ms = 1_000;
        c.scheduler.fair_share_update_period_ms = 200;
    })
    .await;
    let marker = cluster.work_dir.join("first-attempt");
    let op = SubmitOperation {
        tasks: vec![TaskSubmit {
            job_count: 1,
            resources: parse_resources("cpu=0.5").unwrap(),
            // The first attempt fails after a second, the next one succeeds.
            command: vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "if mkdir '{}' 2>/dev/null; then sleep 1; exit 3; fi",
                    marker.display()
                ),
            ],
            ..TaskSubmit::default()
        }],
        ..SubmitOperation::default()
    };
    let id = cluster.client.submit(&op).await.unwrap().id;
    let done = cluster
        .wait_state(&id, OperationState::Completed, Duration::from_secs(30))
        .await;
    let mut jobs = done.jobs.clone();
    jobs.sort_by_key(|j| j.started_at);
    assert_eq!(
        jobs.iter().map(|j| j.state).collect::<Vec<_>>(),
        [JobState::Failed, JobState::Completed],
        "{done:?}"
    );
    let failed_at = jobs[0].finished_at.expect("the failed job ended");
    let again = jobs[1].started_at.saturating_sub(failed_at);
    assert!(
        again < 500,
        "the job ran again {again} ms after the failure was reported: {done:?}"
    );
    cluster.stop().await;
}
