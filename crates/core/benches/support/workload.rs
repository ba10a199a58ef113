//! The workload shared by the core's heartbeat benchmark and its memory example: a pool tree of
//! three levels with the given fan-outs (weights 1–3 at the top, 1–2 at the leaves, operation
//! limits out of the way), and the "churn" report of a node that finished 4 jobs.

use fairsched_core::{FinishedAllocation, JobOutcome, NodeHeartbeat, NodeId, Scheduler};
use std::fmt::Write;

/// The pool tree as JSON (no operation or running limits get in the way), and its leaf pools.
pub fn pool_tree(fanout: [usize; 3]) -> (String, Vec<String>) {
    let mut leaves = Vec::new();
    let mut json = String::from(
        r#"{"pool_trees": {"default": {"config": {
            "max_operation_count": 1000000, "max_running_operation_count": 1000000,
            "max_operation_count_per_pool": 1000000, "max_running_operation_count_per_pool": 1000000
        }, "pools": {"#,
    );
    for i in 0..fanout[0] {
        if i > 0 {
            json.push(',');
        }
        write!(json, r#""p{i}": {{"weight": {}, "pools": {{"#, 1 + i % 3).unwrap();
        for j in 0..fanout[1] {
            if j > 0 {
                json.push(',');
            }
            write!(json, r#""p{i}_{j}": {{"pools": {{"#).unwrap();
            for k in 0..fanout[2] {
                if k > 0 {
                    json.push(',');
                }
                let name = format!("p{i}_{j}_{k}");
                write!(json, r#""{name}": {{"weight": {}}}"#, 1 + k % 2).unwrap();
                leaves.push(name);
            }
            json.push_str("}}");
        }
        json.push_str("}}");
    }
    json.push_str("}}}}");
    (json, leaves)
}

/// The heartbeat of a node that reports 4 of its jobs completed (fewer if it runs fewer).
pub fn four_completed(s: &Scheduler, node: &NodeId) -> NodeHeartbeat {
    let finished = s
        .node(node)
        .expect("node")
        .allocations
        .iter()
        .take(4)
        .map(|&allocation| FinishedAllocation {
            allocation,
            outcome: JobOutcome::Completed,
        })
        .collect();
    NodeHeartbeat { finished }
}
