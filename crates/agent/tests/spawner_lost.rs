//! The agent's job spawner killed while a job runs (by hand, by the OOM killer): the job's
//! keeper kills the job's processes, the job is reported aborted saying why (not left running
//! for ever in the agent's view), and the next job starts under a new spawner.

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::{JobState, OperationState};
use std::time::Duration;

/// The PIDs of this process's children whose command line has `word`.
fn children_running(word: &str) -> Vec<i32> {
    let me = std::process::id().to_string();
    common::processes()
        .into_iter()
        .filter(|(pid, f)| {
            f.get(1) == Some(&me)
                && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(word)
                })
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_spawner_aborts_its_jobs_and_a_new_one_runs_the_next() {
    let cluster = common::start(MemoryEnforcement::Poll).await;
    let op = cluster.submit("0", "echo $$ > pid; sleep 600").await;
    // The job runs once its pid file is there.
    let start = std::time::Instant::now();
    let job = loop {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the job did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let view = cluster.client.get_operation(&op).await.unwrap();
        let Some(job) = view.jobs.first() else {
            continue;
        };
        let pid_file = cluster
            .work_dir
            .join("jobs")
            .join(&op)
            .join(&job.id)
            .join("pid");
        if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
            break job.id.clone();
        }
    };
    let pgid = cluster.job_pgid(&op, &job);
    let spawners = children_running("__job-spawner");
    assert_eq!(spawners.len(), 1, "one spawner per agent: {spawners:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(spawners[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();

    let (ended, _) = cluster.first_ended_job(&op, Duration::from_secs(30)).await;
    assert_eq!(ended.state, JobState::Aborted, "{ended:?}");
    let reason = ended.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("spawner_lost: ") && reason.contains("job spawner"),
        "{ended:?}"
    );
    common::wait_group_gone(pgid, Duration::from_secs(5)).await;

    // The next job runs, under a new spawner.
    let next = cluster.submit("0", "exit 0").await;
    let done = cluster
        .wait_state(&next, OperationState::Completed, Duration::from_secs(30))
        .await;
    assert_eq!(done.jobs[0].exit_code, Some(0), "{done:?}");
    let again = children_running("__job-spawner");
    assert!(
        again.len() == 1 && again != spawners,
        "a new spawner: {again:?} (was {spawners:?})"
    );
    cluster.stop().await;
}
