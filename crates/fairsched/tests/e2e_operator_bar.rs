//! Issue 18's bar, on the operator's path: `fairsched server` with a server file and a
//! pool-trees file (as `deploy/` has them: `pool_trees_file`, an agent token) and three
//! `fairsched agent` processes with partial `--resources` (cpu only: memory and user slots
//! keep their detected values), all with the default tree options but a short starvation
//! timeout.
//!
//! * Every node's resources are usable: a batch operation of 0.5-cpu jobs fills every cpu of
//!   the 2-cpu nodes (YTsaurus' default spare bound left 0.5 cpu of each idle).
//! * A guaranteed pool's operation gets its guarantee by preemption once its starvation
//!   timeout has passed (not before, and promptly after).
//! * 500 jobs over the three pools all run to completion; none runs twice.

mod common;

use common::{Cluster, wait_for};
use serde_json::Value;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(180);
const STARVATION_TIMEOUT_MS: u64 = 3000;

fn cpu(r: &Value) -> f64 {
    r["cpu"].as_f64().unwrap_or(0.0)
}

#[test]
fn a_deployed_cluster_fills_small_nodes_meets_a_guarantee_and_runs_500_jobs() {
    let files = tempfile::tempdir().unwrap();
    let pools = files.path().join("pools.toml");
    std::fs::write(
        &pools,
        format!(
            r#"
[pool_trees.default.config]
fair_share_starvation_timeout_ms = {STARVATION_TIMEOUT_MS}

[pool_trees.default.pools.prod]
strong_guarantee_resources = {{ cpu = 3 }}

[pool_trees.default.pools.research]

[pool_trees.default.pools.batch]
"#
        ),
    )
    .unwrap();
    let c = Cluster::start(
        &format!(
            r#"agent_token = "bar-agent-token"
pool_trees_file = {pools:?}
node_timeout_ms = 15000

[scheduler]
fair_share_update_period_ms = 200
node_heartbeat_period_ms = 200
"#
        ),
        &[("n1", "cpu=2"), ("n2", "cpu=2"), ("n3", "cpu=2")],
    );
    // Partial --resources: memory and user slots were detected (4 slots per cpu).
    for node in c.json(&["node", "list"]).as_array().unwrap() {
        assert_eq!(cpu(&node["resources"]), 2.0, "{node}");
        assert_eq!(node["resources"]["user_slots"], 8, "{node}");
        assert!(node["resources"]["memory"].as_u64().unwrap() > 0, "{node}");
    }

    // 12 long jobs of 0.5 cpu fill the 6 cpus: four on each node.
    let half = ["--cpu", "0.5", "--memory", "32MiB"];
    let mut args = vec!["--pool", "batch", "--jobs", "12"];
    args.extend_from_slice(&half);
    c.submit("fill", &args, "sleep 20");
    wait_for("every cpu of every node to be used", LONG, || {
        c.json(&["node", "list"])
            .as_array()
            .unwrap()
            .iter()
            .all(|n| cpu(&n["usage"]) == 2.0)
    });

    // The guaranteed pool's operation: no room, so it waits for its starvation timeout and
    // then preempts.
    let mut args = vec!["--pool", "prod", "--jobs", "12"];
    args.extend_from_slice(&half);
    let submitted = Instant::now();
    c.submit("guaranteed", &args, "sleep 10");
    let mut preempted_at = None;
    wait_for("the guaranteed operation to preempt", LONG, || {
        let done = c
            .events("fill")
            .iter()
            .any(|e| e["event"] == "allocation_preempted");
        if done {
            preempted_at = Some(submitted.elapsed());
        }
        done
    });
    let preempted_at = preempted_at.unwrap();
    let timeout = Duration::from_millis(STARVATION_TIMEOUT_MS);
    assert!(
        preempted_at >= timeout,
        "preempted after {preempted_at:?}, before its starvation timeout"
    );
    // After the timeout: a fair-share update marks it starving and the next heartbeat of each
    // node whose preemptive backoff (5 s by default, counted from its last try) has passed
    // preempts; the bound leaves room for a loaded machine.
    let backoff = Duration::from_secs(5);
    assert!(
        preempted_at < timeout + backoff + Duration::from_secs(3),
        "preempted only after {preempted_at:?}"
    );
    let preemptions: Vec<Value> = c
        .events("fill")
        .into_iter()
        .filter(|e| e["event"] == "allocation_preempted")
        .collect();
    assert!(
        preemptions
            .iter()
            .all(|e| e["preemptor"]["operation"] == "guaranteed"),
        "{preemptions:?}"
    );
    // Six running 0.5-cpu jobs: its 3-cpu guarantee. A node preempts one job per heartbeat
    // and tries again after its backoff: two rounds on three nodes.
    wait_for(
        "the guaranteed operation to hold its guarantee",
        LONG,
        || {
            c.op("guaranteed")["job_counts"]["running"]
                .as_u64()
                .unwrap_or(0)
                >= 6
        },
    );
    let held_at = submitted.elapsed();
    assert!(
        held_at < timeout + 2 * backoff + Duration::from_secs(5),
        "the guarantee was met only after {held_at:?}"
    );

    // The rest of the 500 jobs, in the third pool.
    let mut args = vec!["--pool", "research", "--jobs", "476"];
    args.extend_from_slice(&half);
    c.submit("many", &args, "true");
    for id in ["fill", "guaranteed", "many"] {
        wait_for(&format!("{id} to complete"), LONG, || {
            c.op(id)["state"] == "completed"
        });
    }
    let mut completed = 0;
    for (id, jobs) in [("fill", 12), ("guaranteed", 12), ("many", 476)] {
        let op = c.op(id);
        assert_eq!(op["job_counts"]["completed"], jobs, "{id}: {op}");
        completed += jobs;
        // No job ran twice at once: each job id started at most once at a time (a preempted
        // job's rerun is a new job).
        let events = c.events(id);
        let mut running = std::collections::BTreeSet::new();
        for e in &events {
            let job = e["job"].as_str().unwrap_or_default().to_string();
            match e["event"].as_str() {
                Some("allocation_started") => assert!(running.insert(job), "{id}: {e}"),
                Some("allocation_finished" | "allocation_preempted" | "allocation_aborted") => {
                    running.remove(&job);
                }
                _ => {}
            }
        }
    }
    assert_eq!(completed, 500);
    eprintln!(
        "first preemption {preempted_at:?} and guarantee held {held_at:?} after the submission; \
         500 jobs done {:?} after it",
        submitted.elapsed()
    );
    c.stop();
}
