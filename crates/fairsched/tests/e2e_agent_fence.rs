//! No job runs twice at once when its agent stalls: an agent that stops (SIGSTOP: a hung
//! process, a partitioned machine) gets no heartbeat accepted, and its jobs' keepers kill the
//! jobs' whole process trees once the agent's lease runs out, before the server takes the
//! node for lost and runs them elsewhere. Back, the agent reports them killed.

mod common;

use common::{Cluster, process_gone, wait_for};
use nix::sys::signal::Signal;
use std::time::Duration;

const CONFIG: &str = "node_timeout_ms = 3000\n\n[scheduler]\nfair_share_update_period_ms = 100\nnode_heartbeat_period_ms = 100\n";

/// Writes its PID and a background child's, then appends its node's id to `$SHARED` every
/// 50 ms.
const SCRIPT: &str = "echo $$ > pid; sleep 1000 & echo $! > child; \
                      while :; do echo \"$FAIRSCHED_NODE_ID\" >> \"$SHARED\"; sleep 0.05; done";

#[test]
fn a_stopped_agents_jobs_die_before_they_run_elsewhere() {
    let c = Cluster::start(
        CONFIG,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=1"),
            ("n2", "cpu=1,memory=1GiB,user_slots=1"),
        ],
    );
    let shared = c.dir.path().join("shared");
    let env = format!("SHARED={}", shared.display());
    c.submit("once", &["--cpu", "1", "--env", &env], SCRIPT);
    let lines = || -> Vec<String> {
        std::fs::read_to_string(&shared)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    wait_for("the job to write", Duration::from_secs(30), || {
        !lines().is_empty()
    });
    let first = lines()[0].clone();
    let other = if first == "n1" { "n2" } else { "n1" };
    let job_dir = |node: &str| {
        let ops = c.dir.path().join(node).join("jobs").join("once");
        std::fs::read_dir(ops)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    let dir = job_dir(&first);
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    let (pid, child) = (read("pid"), read("child"));

    c.signal_agent(&first, Signal::SIGSTOP);
    wait_for(
        "the job to run on the other node",
        Duration::from_secs(30),
        || lines().iter().any(|l| l == other),
    );
    // Every process of the first copy was gone before the second started, and no line of
    // the first copy follows one of the second.
    assert!(
        process_gone(&pid) && process_gone(&child),
        "the first copy runs on"
    );
    std::thread::sleep(Duration::from_millis(500));
    let all = lines();
    let second_from = all.iter().position(|l| l == other).unwrap();
    assert!(
        all[second_from..].iter().all(|l| l == other),
        "both copies ran at once: {all:?}"
    );

    c.signal_agent(&first, Signal::SIGCONT);
    // Back, the agent reports the job it killed; the server had counted it lost.
    wait_for(
        "the stalled agent to report its job",
        Duration::from_secs(30),
        || c.agent_log(&first).contains("lease ran out"),
    );
    let jobs = c.op("once")["jobs"].as_array().unwrap().clone();
    let lost: Vec<_> = jobs
        .iter()
        .filter(|j| j["node"] == first.as_str())
        .collect();
    assert_eq!(lost.len(), 1, "{jobs:?}");
    assert_eq!(lost[0]["state"], "aborted", "{jobs:?}");
    assert_eq!(lost[0]["reason"], "node_lost", "{jobs:?}");
    wait_for("the node to come back", Duration::from_secs(30), || {
        c.json(&["node", "list"])
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["id"] == first.as_str())
    });
    let running: Vec<_> = c.op("once")["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["state"] == "running")
        .cloned()
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    c.cli(&["op", "abort", "once"]);
    c.stop();
}
