//! Memory enforcement with cgroup v2, with real jobs through a real server: a job that grows
//! to 200 MiB with a 50 MiB limit is OOM-killed in its cgroup and reported as failed with the
//! memory reason; a job under its limit completes; the jobs' cgroups are removed.
//!
//! It needs cgroup v2 with the memory controller and a cgroup this process may use alone
//! (cgroup v2 gives controllers only to the children of a cgroup without processes, and the
//! test binary usually shares its cgroup with cargo). When that is not so, the test prints
//! why and passes without running: run the test binary alone in a delegated cgroup, e.g.
//! `systemd-run --scope -p Delegate=yes target/debug/deps/memory_cgroup-*`.

mod common;

use common::{HOG, MODEST};
use fairsched_agent::MemoryEnforcement;
use fairsched_api::JobState;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_kills_a_job_above_its_memory_and_spares_one_below() {
    let base = match fairsched_agent::memory::cgroup_v2() {
        Ok(base) => base,
        Err(why) => {
            println!("skipped: cgroup v2 memory enforcement is not usable here: {why}");
            return;
        }
    };
    let cluster = common::start(MemoryEnforcement::Cgroup).await;
    let hog = cluster.submit("50MiB", HOG).await;
    let modest = cluster.submit("50MiB", MODEST).await;

    let (job, took) = cluster.first_ended_job(&hog, Duration::from_secs(20)).await;
    assert_eq!(job.state, JobState::Failed, "{job:?}");
    let reason = job.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("memory limit exceeded:")
            && reason.contains("50MiB")
            && reason.contains("cgroup"),
        "{job:?}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    println!("job {} ended after {took:?}: {reason}", job.id);
    let pgid = cluster.job_pgid(&hog, &job.id);
    common::wait_group_gone(pgid, Duration::from_secs(5)).await;
    assert!(
        !base.dir().join(format!("job-{}", job.id)).exists(),
        "the job's cgroup is removed"
    );

    let job = cluster.wait_completed_cleanly(&modest).await;
    assert!(!base.dir().join(format!("job-{}", job.id)).exists());

    cluster.client.abort_operation(&hog).await.unwrap();
    cluster.stop().await;
}
