//! An agent reports a job's end at once, not at its next periodic heartbeat (issue 20: slots
//! turn over in milliseconds, not heartbeat periods). With a 10 s heartbeat period, a job that
//! exits right away is seen completed within a few seconds of being seen running.

mod common;

use common::{Cluster, wait_for};
use std::time::{Duration, Instant};

#[test]
fn a_finished_job_is_reported_before_the_next_periodic_heartbeat() {
    let c = Cluster::start(
        // The node timeout must be at least two heartbeat periods.
        "node_timeout_ms = 60000\n\n[scheduler]\nnode_heartbeat_period_ms = 10000\n\
         fair_share_update_period_ms = 100\n",
        &[("n1", "cpu=2,memory=1GiB,user_slots=4")],
    );
    // The job sleeps a little so that it is seen running before it ends.
    c.submit("quick", &[], "sleep 1");
    let state = |c: &Cluster| c.op("quick")["state"].as_str().unwrap_or("").to_string();
    let jobs_running = |c: &Cluster| c.op("quick")["job_counts"]["running"].as_u64() == Some(1);
    // Started at the agent's next heartbeat (at most one period).
    wait_for("the job to run", Duration::from_secs(30), || {
        jobs_running(&c)
    });
    let running_at = Instant::now();
    wait_for("the operation to complete", Duration::from_secs(30), || {
        state(&c) == "completed"
    });
    let took = running_at.elapsed();
    // The job runs 1 s; its end is reported at once (the next periodic heartbeat is ~10 s
    // after the one that started it).
    assert!(
        took < Duration::from_secs(6),
        "completed {took:?} after it was seen running: its end waited for a periodic heartbeat"
    );
    c.stop();
}
