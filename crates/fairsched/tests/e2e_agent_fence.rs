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

/// A process a job started that left its process group and session (`setsid`), cleared its
/// environment and ignores SIGTERM still ends with the job: SIGTERM, then SIGKILL after the
/// grace period, when the job ends by itself and when it is aborted.
#[test]
fn a_jobs_escaped_processes_die_with_its_end_and_its_abort() {
    let c = Cluster::start(CONFIG, &[("n1", "cpu=2,memory=1GiB,user_slots=4")]);
    // A number no other process on the machine is likely to sleep for.
    let ended = format!("3007.{}1", std::process::id());
    let aborted = format!("3007.{}2", std::process::id());
    let escape = |n: &str| {
        format!("setsid env -i sh -c 'trap \"\" TERM; sleep {n}' >/dev/null 2>&1 & sleep 0.5")
    };
    c.submit("ends", &["--cpu", "1"], &escape(&ended));
    c.submit(
        "aborted",
        &["--cpu", "1"],
        &format!("{}; sleep 1000", escape(&aborted)),
    );
    wait_for("the first job to end", Duration::from_secs(30), || {
        c.op("ends")["state"] == "completed"
    });
    assert!(
        common::processes_with_arg(&ended).is_empty(),
        "the escaped process outlived its job's end"
    );
    wait_for("the second job to run", Duration::from_secs(30), || {
        !common::processes_with_arg(&aborted).is_empty()
    });
    c.cli(&["op", "abort", "aborted"]);
    wait_for("the second job to end", Duration::from_secs(30), || {
        c.op("aborted")["job_counts"]["running"] == 0
    });
    wait_for(
        "the escaped process to die with the abort",
        Duration::from_secs(5),
        || common::processes_with_arg(&aborted).is_empty(),
    );
    c.stop();
}

/// An agent stopped past its lease but not past the server's node timeout: its job was
/// killed by its keeper, and the agent, back in time, reports it aborted as fenced (the server
/// still had it running there); it then runs again.
#[test]
fn a_fenced_job_is_reported_as_such_when_the_server_kept_the_node() {
    // The lease: SIGTERM 8 s after the last accepted heartbeat was sent, SIGKILL at 9 s; the
    // node is lost after 10 s (the agents' grace period is 1 s).
    let c = Cluster::start(
        "node_timeout_ms = 10000\n\n[scheduler]\nfair_share_update_period_ms = 100\nnode_heartbeat_period_ms = 100\n",
        &[("n1", "cpu=1,memory=1GiB,user_slots=1")],
    );
    c.submit("fenced", &["--cpu", "1"], "echo $$ > pid; sleep 1000");
    wait_for("the job to start", Duration::from_secs(30), || {
        c.job_pids("fenced").len() == 1
    });
    let (job, pid) = c.job_pids("fenced").remove(0);
    c.signal_agent("n1", Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(8800));
    assert!(process_gone(&pid), "the lease ran out: the job is dead");
    c.signal_agent("n1", Signal::SIGCONT);
    let reason = |c: &Cluster| {
        c.op("fenced")["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == job.as_str())
            .map(|j| (j["state"].clone(), j["reason"].clone()))
            .unwrap()
    };
    wait_for(
        "the job's end to be reported",
        Duration::from_secs(10),
        || reason(&c).0 != "running",
    );
    let (state, why) = reason(&c);
    assert_eq!(state, "aborted", "{why}");
    assert!(
        why.as_str().is_some_and(|r| r.starts_with("fenced")),
        "{why}"
    );
    wait_for("the job to run again", Duration::from_secs(30), || {
        c.job_pids("fenced").len() == 2
    });
    c.cli(&["op", "abort", "fenced"]);
    c.stop();
}
