//! An ephemeral pool takes its preemption settings from its parent, as an explicit child pool
//! without its own does (YTsaurus: `EffectiveAggressivePreemptionAllowed` is the element's own
//! value, else its parent's): under a parent with `allow_aggressive_preemption = false`, the
//! jobs of an ephemeral pool's operation are not taken aggressively either (issue 19). Checked
//! differentially: the same run with the operation in an explicit child pool and in an
//! ephemeral one gives the same preemptions.

mod common;

use serde_json::{Value, json};

/// YTsaurus' TestSchedulerAggressivePreemption2 setup, with the protected operation in `pool`
/// (`child`: explicit; anything else: ephemeral under `protected`, the default parent).
fn scenario(pool: &str) -> Value {
    let endless = |id: &str, pool: &str, jobs: u32, cpu: u32| {
        json!({"id": id, "user": "root", "pool": pool, "tasks": [{"job_count": jobs,
            "resources": {"cpu": cpu, "user_slots": 1}, "duration_ms": null}]})
    };
    json!({
        "name": "ephemeral pools inherit allow_aggressive_preemption",
        "nodes": [{"count": 5, "resources": {"cpu": 5, "user_slots": 5}}],
        "scheduler": {"fair_share_update_period_ms": 100, "node_heartbeat_period_ms": 100},
        "pool_trees": {"default": {
            "config": {
                "aggressive_preemption_satisfaction_threshold": 0.2,
                "preemption_satisfaction_threshold": 0.75,
                "enable_conditional_preemption": false,
                "fair_share_starvation_timeout_ms": 100,
                "fair_share_aggressive_starvation_timeout_ms": 200,
                "max_unpreemptible_running_allocation_count": 2,
                "preemptive_scheduling_backoff_ms": 0,
                "default_parent_pool": "protected"
            },
            "pools": {
                "protected": {"allow_aggressive_preemption": false,
                    "strong_guarantee_resources": {"cpu": 15}, "pools": {"child": {}}},
                "other": {},
                "special": {"strong_guarantee_resources": {"cpu": 10},
                    "enable_aggressive_starvation": true}
            }
        }},
        "events": [
            {"at_ms": 0, "start_operation": endless("other_op", "other", 2, 5)},
            {"at_ms": 500, "start_operation": endless("protected_op", pool, 20, 1)},
            {"at_ms": 2000, "start_operation": endless("special_op", "special", 10, 1)},
            {"at_ms": 4000, "snapshot": "end"}
        ],
        "until_ms": 4000
    })
}

/// Preemptions of `protected_op` and the running jobs of every operation at the end.
fn outcome(pool: &str) -> (usize, Value) {
    let lines = common::run(&scenario(pool));
    let preempted = lines
        .iter()
        .filter(|l| l["event"] == "allocation_preempted" && l["operation"] == "protected_op")
        .count();
    let end = lines
        .iter()
        .find(|l| l["snapshot"] == "end")
        .expect("snapshot");
    let running: Value = ["other_op", "protected_op", "special_op"]
        .iter()
        .map(|id| {
            (
                id.to_string(),
                end["operations"][id]["running_job_count"].clone(),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    (preempted, running)
}

#[test]
fn an_ephemeral_pool_is_protected_like_an_explicit_child() {
    let explicit = outcome("child");
    let ephemeral = outcome("adhoc");
    assert_eq!(ephemeral, explicit, "ephemeral vs explicit child");
}
