//! A job runs at most once at a time when its agent is killed (SIGKILL) mid-job: the job's
//! whole process tree dies with the agent (its keeper kills it), a restarted agent makes sure
//! nothing of it is left before it registers again and reports the job aborted (it then runs
//! again), and an agent that does not come back loses its node: its jobs are reported
//! `node_lost` and run elsewhere. An agent stopped (SIGTERM) stops its jobs and tells the
//! server its node left: they run elsewhere at once, not after `node_timeout_ms`.

mod common;

use common::{Cluster, process_gone, wait_for};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

const CONFIG_KEEP: &str = "node_timeout_ms = 60000\n\n[scheduler]\nfair_share_update_period_ms = 100\nnode_heartbeat_period_ms = 100\n";
const CONFIG_LOSE: &str = "node_timeout_ms = 1500\n\n[scheduler]\nfair_share_update_period_ms = 100\nnode_heartbeat_period_ms = 100\n";

/// The job writes its shell's PID to `pid` and a background child's to `child`, then waits.
const SCRIPT: &str = "sleep 1000 & echo $! > child; echo $$ > pid; wait";

/// The job directories of `operation` on `node` with both PID files written: (job, main pid,
/// child pid).
fn jobs_on(c: &Cluster, node: &str, operation: &str) -> Vec<(String, String, String)> {
    let dir: PathBuf = c.dir.path().join(node).join("jobs").join(operation);
    let mut out = Vec::new();
    for job in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let read = |f: &str| std::fs::read_to_string(job.path().join(f)).unwrap_or_default();
        let (pid, child) = (read("pid"), read("child"));
        if pid.ends_with('\n') && child.ends_with('\n') {
            out.push((
                job.file_name().to_string_lossy().into_owned(),
                pid.trim().to_string(),
                child.trim().to_string(),
            ));
        }
    }
    out.sort();
    out
}

fn jobs(c: &Cluster, operation: &str) -> Vec<Value> {
    c.op(operation)["jobs"].as_array().unwrap().clone()
}

#[test]
fn a_killed_agents_whole_job_dies_with_it_and_runs_again_once() {
    let mut c = Cluster::start(CONFIG_KEEP, &[("n1", "cpu=2,memory=1GiB,user_slots=4")]);
    c.submit("long", &["--cpu", "1"], SCRIPT);
    wait_for("the job to start", Duration::from_secs(30), || {
        jobs_on(&c, "n1", "long").len() == 1
    });
    let (job, pid, child) = jobs_on(&c, "n1", "long").remove(0);

    c.kill_agent("n1");
    // The whole job dies with its agent, its background child too (within the grace
    // period: SIGTERM, then SIGKILL), with no agent to help.
    wait_for(
        "the job's processes to die with their agent",
        Duration::from_secs(5),
        || process_gone(&pid) && process_gone(&child),
    );

    c.start_agent("n1", "cpu=2,memory=1GiB,user_slots=4");
    // The job is reported aborted, and runs again.
    wait_for("the job to run again", Duration::from_secs(30), || {
        jobs_on(&c, "n1", "long").len() == 2
    });
    let first = jobs(&c, "long")
        .into_iter()
        .find(|j| j["id"] == job.as_str())
        .expect("the first job");
    assert_eq!(first["state"], "aborted", "{first}");
    assert!(
        first["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("agent_restarted")),
        "{first}"
    );
    let running: Vec<Value> = jobs(&c, "long")
        .into_iter()
        .filter(|j| j["state"] == "running")
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    c.cli(&["op", "abort", "long"]);
    c.stop();
}

#[test]
fn jobs_of_a_node_that_never_comes_back_are_node_lost_and_run_elsewhere() {
    let mut c = Cluster::start(
        CONFIG_LOSE,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=1"),
            ("n2", "cpu=1,memory=1GiB,user_slots=1"),
        ],
    );
    c.submit("moved", &["--cpu", "1"], SCRIPT);
    let (node, pid) = {
        let mut found = None;
        wait_for("the job to start", Duration::from_secs(30), || {
            found = ["n1", "n2"]
                .into_iter()
                .find_map(|n| jobs_on(&c, n, "moved").pop().map(|(_, p, _)| (n, p)));
            found.is_some()
        });
        found.unwrap()
    };
    let other = if node == "n1" { "n2" } else { "n1" };
    c.kill_agent(node);
    wait_for(
        "the job's process to die with its agent",
        Duration::from_secs(5),
        || process_gone(&pid),
    );
    wait_for(
        "the job to run on the other node",
        Duration::from_secs(30),
        || jobs_on(&c, other, "moved").len() == 1,
    );
    let lost: Vec<Value> = jobs(&c, "moved")
        .into_iter()
        .filter(|j| j["node"] == node)
        .collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0]["state"], "aborted", "{lost:?}");
    assert_eq!(lost[0]["reason"], "node_lost", "{lost:?}");
    let events = c.events("moved");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "allocation_preempted" && e["reason"] == "node_lost"),
        "{events:?}"
    );
    c.cli(&["op", "abort", "moved"]);
    c.stop();
}

#[test]
fn a_stopped_agent_tells_the_server_and_its_jobs_run_elsewhere_at_once() {
    // A node timeout far longer than the test waits.
    let mut c = Cluster::start(
        CONFIG_KEEP,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=1"),
            ("n2", "cpu=1,memory=1GiB,user_slots=1"),
        ],
    );
    c.submit("moved", &["--cpu", "1"], SCRIPT);
    let (node, pid, child) = {
        let mut found = None;
        wait_for("the job to start", Duration::from_secs(30), || {
            found = ["n1", "n2"].into_iter().find_map(|n| {
                jobs_on(&c, n, "moved")
                    .pop()
                    .map(|(_, p, ch)| (n.to_string(), p, ch))
            });
            found.is_some()
        });
        found.unwrap()
    };
    let other = if node == "n1" { "n2" } else { "n1" };
    c.end_agent(&node, nix::sys::signal::Signal::SIGTERM);
    assert!(
        process_gone(&pid) && process_gone(&child),
        "stopped with its agent"
    );
    wait_for(
        "the job to run on the other node, well before node_timeout_ms (60 s)",
        Duration::from_secs(15),
        || jobs_on(&c, other, "moved").len() == 1,
    );
    let stopped: Vec<Value> = jobs(&c, "moved")
        .into_iter()
        .filter(|j| j["node"] == node.as_str())
        .collect();
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(stopped[0]["state"], "aborted", "{stopped:?}");
    assert!(
        stopped[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("agent_stopped")),
        "{stopped:?}"
    );
    let lost = c.json(&["events", "--kind", "node_lost"]);
    assert!(
        lost.as_array()
            .unwrap()
            .iter()
            .any(|e| e["node"] == node.as_str() && e["reason"] == "agent_stopped"),
        "{lost}"
    );
    // `node list` shows the node lost (not gone without a trace), until it registers again.
    let state_of = |c: &Cluster| {
        c.json(&["node", "list"])
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == node.as_str())
            .map(|n| (n["state"].clone(), n["allocation_count"].clone()))
    };
    assert_eq!(state_of(&c), Some(("lost".into(), 0.into())));
    let text = c.cli(&["node", "list"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&node) && l.contains("lost")),
        "{text}"
    );
    c.start_agent(&node, "cpu=1,memory=1GiB,user_slots=1");
    wait_for(
        "the node to register again",
        Duration::from_secs(30),
        || state_of(&c).is_some_and(|(s, _)| s == "enabled"),
    );
    c.cli(&["op", "abort", "moved"]);
    c.stop();
}
