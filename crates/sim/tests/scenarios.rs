//! `fairsched scenario`, run in process through the same entry point as the binary, on the
//! repository's `scenarios/` and on the files under `tests/data/`.

use fairsched_sim::scenario::cli::{self, EXIT_BAD_FILE, EXIT_OK, Options};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Result of one run of the command.
#[derive(Debug)]
struct Run {
    code: u8,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Every stdout line as JSON.
    fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// Event lines of kind `event` (for `operation`, if given).
    fn events(&self, event: &str, operation: Option<&str>) -> Vec<Value> {
        self.lines()
            .into_iter()
            .filter(|l| l["event"] == event)
            .filter(|l| operation.is_none_or(|op| l["operation"] == op))
            .collect()
    }

    /// The snapshot line labelled `label`.
    fn snapshot(&self, label: &str) -> Value {
        self.lines()
            .into_iter()
            .find(|l| l["snapshot"] == label)
            .unwrap_or_else(|| panic!("no snapshot {label:?} in\n{}", self.stdout))
    }
}

/// Runs `fairsched scenario FILE [--out DIR] [--stats]`; `file` is relative to the repository
/// root.
fn check(file: &str, out: Option<&Path>, stats: bool) -> Run {
    let options = Options {
        file: repo_root().join(file),
        out: out.map(Path::to_path_buf),
        stats,
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let code = cli::main(&options, &mut stdout, &mut stderr);
    Run {
        code,
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `file` with `from` replaced by `to` (which must occur), from a temporary copy.
fn variant(file: &str, from: &str, to: &str) -> Run {
    let text = std::fs::read_to_string(repo_root().join(file)).expect("scenario");
    let changed = text.replace(from, to);
    assert_ne!(changed, text, "{from:?} is not in {file}");
    let path = std::env::temp_dir().join(format!(
        "fairsched-variant-{}-{}.json",
        file.replace('/', "_"),
        std::process::id()
    ));
    std::fs::write(&path, changed).expect("write");
    let run = check(path.to_str().expect("path"), None, false);
    std::fs::remove_file(&path).ok();
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    run
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `.json` files of a directory (relative to the repository root), sorted.
fn json_files(dir: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo_root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|entry| entry.expect("directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .map(|name| format!("{dir}/{name}"))
        .collect();
    files.sort();
    files
}

const DATA: &str = "crates/sim/tests/data";

#[test]
fn every_scenario_runs_and_twice_gives_the_same_bytes() {
    let mut files = json_files("scenarios");
    files.extend(json_files(DATA));
    assert!(files.len() >= 7, "{files:?}");
    for file in files {
        let first = check(&file, None, false);
        assert_eq!(first.code, EXIT_OK, "{file}: {}", first.stderr);
        assert!(!first.stdout.is_empty(), "{file}: no output");
        let second = check(&file, None, false);
        assert_eq!(first.stdout, second.stdout, "{file}: output differs");
        // Every line is JSON; event lines precede snapshot lines.
        let lines = first.lines();
        let first_snapshot = lines.iter().position(|l| l.get("snapshot").is_some());
        if let Some(i) = first_snapshot {
            assert!(
                lines[i..].iter().all(|l| l.get("snapshot").is_some()),
                "{file}: an event after a snapshot"
            );
        }
    }
}

#[test]
fn lecture_fifo_starts_all_of_op1_and_at_most_220_of_op2() {
    let run = check("scenarios/lecture_fifo.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let op1 = run.events("allocation_started", Some("op1")).len();
    let op2 = run.events("allocation_started", Some("op2")).len();
    assert_eq!(op1, 1000);
    assert!(op2 > 0 && op2 <= 220, "op2 started {op2}");
    let snapshot = run.snapshot("after-1s");
    assert_eq!(snapshot["operations"]["op1"]["running_job_count"], 1000);
    assert_eq!(snapshot["pools"]["fifo"]["mode"], "fifo");
}

#[test]
fn product_example_runs_and_the_guaranteed_pool_gets_its_jobs() {
    let run = check("scenarios/product_example.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    assert!(run.events("allocation_started", Some("op1")).len() >= 3);
    // op2 gets its guaranteed cpu by preempting op1 once test_pool has starved.
    assert!(!run.events("allocation_preempted", Some("op1")).is_empty());
    let op2_states = run.events("operation_state", Some("op2"));
    assert_eq!(
        op2_states.last().map(|l| l["state"].clone()),
        Some(Value::from("completed")),
        "{}",
        run.stdout
    );
    // The snapshot has the orchid field names.
    let snapshot = run.snapshot("after-op2");
    assert_eq!(snapshot["t_ms"], 2500);
    // alice's operation named a pool that does not exist: an ephemeral pool, listed per user.
    assert_eq!(
        snapshot["user_to_ephemeral_pools"],
        serde_json::json!({"alice": ["fake_pool"]})
    );
    let pool = &snapshot["pools"]["test_pool"];
    for field in [
        "fair_share_ratio",
        "usage_ratio",
        "demand_ratio",
        "satisfaction_ratio",
        "dominant_resource",
        "starvation_status",
        "scheduling_status",
        "detailed_fair_share",
        "resource_usage",
        "resource_demand",
        "effective_strong_guarantee_resources",
        "operation_count",
        "running_operation_count",
        "lightweight_running_operation_count",
    ] {
        assert!(
            pool.get(field).is_some(),
            "pool field {field} missing: {pool}"
        );
    }
    for part in [
        "strong_guarantee",
        "integral_guarantee",
        "weight_proportional",
        "total",
    ] {
        assert!(pool["detailed_fair_share"].get(part).is_some(), "{part}");
    }
    let op = &snapshot["operations"]["op2"];
    for field in [
        "state",
        "pool",
        "preemptible_allocation_count",
        "aggressively_preemptible_allocation_count",
    ] {
        assert!(
            op.get(field).is_some(),
            "operation field {field} missing: {op}"
        );
    }
}

#[test]
fn malformed_files_exit_2_naming_the_file_and_the_json_path() {
    // (file under tests/data/malformed, what stderr must contain)
    let cases: &[(&str, &[&str])] = &[
        ("bad_json.json", &["invalid JSON", "line 3"]),
        (
            "unknown_event_kind.json",
            &[
                "events[1].start_operaton: unknown event kind",
                "start_operation",
            ],
        ),
        (
            "unknown_task_field.json",
            &[
                "events[3].start_operation.tasks[0].job_cont: unknown field",
                "did you mean `job_count`",
            ],
        ),
        (
            "wrong_type.json",
            &["events[0].start_operation.tasks[0].job_count: invalid type"],
        ),
        (
            "negative_resources.json",
            &["nodes[0].resources: resource \"cpu\": -4 is negative"],
        ),
        (
            "bad_memory_unit.json",
            &["nodes[0].resources: resource \"memory\": unknown unit"],
        ),
        (
            "unknown_pool_option.json",
            &[
                "pool_trees.default.pools.research.wieght: unknown field",
                "`weight`",
            ],
        ),
        (
            "invalid_pool_tree.json",
            &[
                "pool_trees.default.pools.parent.strong_guarantee_resources.cpu:",
                "tree \"default\": pool \"parent\"",
                "children",
            ],
        ),
        (
            "events_not_an_array.json",
            &["events: invalid type: an object, expected a list"],
        ),
        ("missing_until_ms.json", &["missing field `until_ms`"]),
        (
            "event_after_until_ms.json",
            &["events[1].at_ms: 101 is after until_ms (100)"],
        ),
        (
            "event_without_at_ms.json",
            &["events[0]: missing field `at_ms`"],
        ),
        (
            "two_event_kinds.json",
            &["events[0]: has two event kinds", "remove_node", "snapshot"],
        ),
        (
            "bad_create_pool_option.json",
            &[
                "events[0].create_pool.max_operation_cnt: unknown field",
                "`max_operation_count`",
            ],
        ),
        (
            "bad_set_tree_option.json",
            &[
                "events[0].set_tree.config.fair_share_starvation_timeout: unknown field",
                "`fair_share_starvation_timeout_ms`",
            ],
        ),
        (
            "zero_heartbeat_period.json",
            &["scheduler.node_heartbeat_period_ms: must be > 0"],
        ),
        (
            "unknown_top_level_field.json",
            &["until: unknown field `until`", "`until_ms`"],
        ),
        (
            "top_level_array.json",
            &["expected a scenario object at the top level, found an array"],
        ),
    ];
    let dir = format!("{DATA}/malformed");
    let mut listed: Vec<String> = cases.iter().map(|(f, _)| format!("{dir}/{f}")).collect();
    listed.sort();
    assert_eq!(listed, json_files(&dir), "every malformed file has a case");
    for (file, needles) in cases {
        let run = check(&format!("{dir}/{file}"), None, false);
        assert_eq!(run.code, EXIT_BAD_FILE, "{file}: {}", run.stderr);
        assert!(
            run.stdout.is_empty(),
            "{file}: nothing runs: {}",
            run.stdout
        );
        assert!(run.stderr.starts_with("error: "), "{file}: {}", run.stderr);
        assert!(
            run.stderr.contains(file),
            "{file}: names the file: {}",
            run.stderr
        );
        for needle in *needles {
            assert!(
                run.stderr.contains(needle),
                "{file}: expected {needle:?} in {}",
                run.stderr
            );
        }
    }
}

#[test]
fn rejected_commands_become_error_lines_and_the_run_goes_on() {
    let run = check(&format!("{DATA}/runtime_errors.json"), None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let errors: Vec<(u64, String)> = run
        .events("error", None)
        .iter()
        .map(|e| {
            // A pool that does not exist is YTsaurus' resolve error (500); the rest generic.
            let message = e["message"].as_str().expect("message");
            let code = if message.contains("pool \"missing\" does not exist")
                || message.contains("pool \"zzz\" does not exist")
            {
                500
            } else {
                1
            };
            assert_eq!(e["code"], code, "{e}");
            (e["t_ms"].as_u64().expect("t_ms"), message.to_string())
        })
        .collect();
    // (time, the event, a fragment of the core's or the configuration's message)
    let expected = [
        (0, "events[1].start_operation", "\"op1\" already exists"),
        (50, "events[2].set_node", "\"node-7\" does not exist"),
        (50, "events[3].remove_node", "\"node-8\" does not exist"),
        (
            50,
            "events[4].abort_operation",
            "\"no-such-op\" does not exist",
        ),
        (50, "events[5].update_operation", "weight"),
        (50, "events[6].start_operation", "tasks[0].resources"),
        (
            60,
            "events[7].create_pool",
            "pool \"a\": field \"strong_guarantee_resources.cpu\"",
        ),
        (60, "events[8].create_pool", "\"missing\" does not exist"),
        (60, "events[9].remove_pool", "\"zzz\" does not exist"),
        (60, "events[10].set_tree", "tree \"other\" does not exist"),
        (
            60,
            "events[11].set_tree",
            "field \"config.fair_share_starvation_tolerance\"",
        ),
    ];
    assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    for ((t, message), (want_t, event, fragment)) in errors.iter().zip(expected) {
        assert_eq!(*t, want_t, "{message}");
        assert!(
            message.starts_with(&format!("{event}: ")) && message.contains(fragment),
            "{message:?} should be about {event} and contain {fragment:?}"
        );
        assert!(!message.contains('\n'), "one line: {message:?}");
    }
    // Nothing was half-applied: the first op1 keeps its 2 jobs, the rejected pool is absent.
    assert_eq!(run.events("allocation_started", Some("op1")).len(), 2);
    let snapshot = run.snapshot("after-errors");
    assert!(snapshot["pools"].get("b").is_none());
    assert!(snapshot["operations"].get("op-zero").is_none());
    // The run went on: later commands worked.
    let op2 = run.events("operation_state", Some("op2"));
    assert_eq!(op2.last().expect("op2 states")["state"], "completed");
}

#[test]
fn interrupted_jobs_exit_in_time_or_are_aborted_at_the_deadline() {
    let run = check(&format!("{DATA}/interruption.json"), None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let interrupted = run.events("allocation_interrupted", None);
    assert_eq!(interrupted.len(), 2, "{}", run.stdout);
    let at = interrupted[0]["t_ms"].as_u64().expect("t_ms");
    // soft: interruptible, exits 300 ms after the interruption (reported at that heartbeat).
    let soft = run.events("allocation_finished", Some("soft"));
    assert_eq!(soft.len(), 1);
    assert_eq!(soft[0]["outcome"], "completed");
    assert_eq!(soft[0]["t_ms"].as_u64(), Some(at + 300));
    // hard: ignores the interruption and is aborted once the 1000 ms timeout has passed.
    assert!(run.events("allocation_finished", Some("hard")).is_empty());
    let hard = run.events("allocation_preempted", Some("hard"));
    assert_eq!(hard.len(), 1);
    assert_eq!(hard[0]["t_ms"].as_u64(), Some(at + 1000));
}

#[test]
fn node_events_move_jobs_and_name_nodes_deterministically() {
    let run = check(&format!("{DATA}/nodes.json"), None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let preempted: Vec<(Value, Value)> = run
        .events("allocation_preempted", Some("op"))
        .iter()
        .map(|e| (e["node"].clone(), e["reason"].clone()))
        .collect();
    assert_eq!(
        preempted,
        [
            (Value::from("node-0"), Value::from("node_disabled")),
            (Value::from("gpu-0"), Value::from("node_lost")),
        ]
    );
    let op = run.events("operation_state", Some("op"));
    assert_eq!(op.last().expect("states")["state"], "completed");
    let snapshot = run.snapshot("moved");
    // node-0 (2 cpu again) + node-1 + node-2 + node-3 (added); gpu-0 removed.
    assert_eq!(snapshot["total_resources"]["cpu"], 5.0);
}

#[test]
fn pool_events_edit_the_tree() {
    let run = check(&format!("{DATA}/pools.json"), None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    // A set_pool whose move is rejected leaves the options unchanged too.
    let errors = run.events("error", None);
    assert_eq!(errors.len(), 1, "{}", run.stdout);
    assert!(
        errors[0]["message"]
            .as_str()
            .expect("message")
            .starts_with("events[5].set_pool: "),
        "{}",
        errors[0]
    );
    let created = run.snapshot("created");
    assert_eq!(created["pools"]["adhoc"]["parent"], "prod");
    assert_eq!(created["pools"]["adhoc"]["weight"], 2.0);
    assert_eq!(created["operations"]["op"]["pool"], "adhoc");
    let moved = run.snapshot("moved");
    assert_eq!(moved["pools"]["adhoc"]["parent"], "<Root>");
    assert_eq!(moved["pools"]["adhoc"]["weight"], 5.0);
    let removed = run.snapshot("removed");
    assert!(removed["pools"].get("adhoc").is_none(), "{removed}");
}

#[test]
fn out_dir_and_stats() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scenario-out-dir-and-stats");
    let _ = std::fs::remove_dir_all(&dir);
    let run = check("scenarios/fair_share_weights.json", Some(&dir), true);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
    let (events, snapshots) = (read("events.jsonl"), read("snapshots.jsonl"));
    assert_eq!(format!("{events}{snapshots}"), run.stdout);
    assert_eq!(snapshots.lines().count(), 2);

    // --stats: exactly one JSON line on stderr with the counters.
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    let stats: Value = serde_json::from_str(lines[0]).expect("stats line is JSON");
    let keys: Vec<&str> = stats
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "core_cpu_ms",
            "fair_share_updates",
            "heartbeats",
            "placements",
            "preemptions"
        ]
    );
    assert_eq!(stats["placements"], 12);
    assert_eq!(stats["preemptions"], 0);
    assert!(stats["core_cpu_ms"].as_f64().expect("number") >= 0.0);
    assert!(lines[0].starts_with(r#"{"placements":12,"preemptions":0,"heartbeats":"#));

    let summary: Value = serde_json::from_str(&read("summary.json")).expect("summary is JSON");
    assert_eq!(summary["stopped"], "quiescent");
    assert_eq!(summary["end_ms"], 3000);
    assert_eq!(summary["placements"], 12);
    assert_eq!(summary["snapshots"], 2);
}

#[test]
fn runs_stop_at_until_ms_or_when_nothing_can_change() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scenario-stop-rules");
    // Long-running jobs: runs to until_ms (1000 ms, 100 ms heartbeats: 11 rounds of 100 nodes).
    let run = check(
        "scenarios/lecture_fifo.json",
        Some(&dir.join("until")),
        false,
    );
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("until/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["stopped"], "until_ms");
    assert_eq!(summary["end_ms"], 1000);
    assert_eq!(summary["heartbeats"], 1100);
    // Everything done at 3000 ms: the run stops there instead of at 10000 ms.
    let run = check(
        "scenarios/fair_share_weights.json",
        Some(&dir.join("quiescent")),
        false,
    );
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("quiescent/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["stopped"], "quiescent");
    assert_eq!(summary["end_ms"], 3000);
    assert_eq!(summary["heartbeats"], 62, "2 nodes × 31 rounds (0..=3000)");
}

#[test]
fn fair_share_weights_output_snapshot() {
    let run = check("scenarios/fair_share_weights.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    insta::assert_snapshot!("fair_share_weights", run.stdout);
}

#[test]
fn multiple_trees_partition_nodes_and_an_operation_runs_in_both() {
    let run = check("scenarios/multiple_trees.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let nodes_of = |op: &str| -> std::collections::BTreeSet<String> {
        run.events("allocation_started", Some(op))
            .iter()
            .map(|l| l["node"].as_str().expect("node").to_string())
            .collect()
    };
    let set = |nodes: &[&str]| nodes.iter().map(|n| n.to_string()).collect();
    // Each tree schedules on its own nodes only; an operation in both trees uses both.
    assert_eq!(nodes_of("cpu_op"), set(&["phys-0", "phys-1"]));
    assert_eq!(nodes_of("gpu_op"), set(&["gpu-0"]));
    assert_eq!(nodes_of("both_op"), set(&["gpu-0", "phys-0", "phys-1"]));
    // A node in no tree gets nothing; a node two trees would take is rejected.
    assert!(
        run.events("allocation_started", None)
            .iter()
            .all(|l| l["node"] != "idle-0" && l["node"] != "bad-0")
    );
    let errors: Vec<String> = run
        .events("error", None)
        .iter()
        .map(|l| l["message"].as_str().expect("message").to_string())
        .collect();
    let expected = [
        "node \"bad-0\" (tags {\"gpu\", \"physical\"}) matches the node_tag_filter of trees \"gpu\" and \"physical\"; trees must not share nodes",
        "operation \"lost_op\": pool_trees names tree \"nowhere\", which does not exist",
        "operation \"stray_options_op\": scheduling_options_per_pool_tree.gpu: the operation does not run in tree \"gpu\"",
        "tree \"nowhere\" does not exist (trees: \"gpu\", \"physical\")",
    ];
    for e in expected {
        assert!(
            errors.iter().any(|m| m.contains(e)),
            "no error {e:?} in {errors:#?}"
        );
    }

    let s = run.snapshot("running");
    assert_eq!(s["tree"], "physical");
    assert_eq!(s["total_resources"]["cpu"], 8.0);
    let gpu = &s["pool_trees"]["gpu"];
    assert_eq!(gpu["total_resources"]["gpu"], 4);
    // Per-tree main resource: gpu's guarantee of 2 (half the tree's gpus) gives half of the
    // tree's other resources too (in physical, a guarantee without cpu would be rejected).
    let guarantee = &gpu["pools"]["training"]["effective_strong_guarantee_resources"];
    assert_eq!(
        (guarantee["gpu"].clone(), guarantee["cpu"].clone()),
        (2.into(), 4.0.into())
    );
    // both_op: pool prod in its first (the default) tree; pool shared, weight 3 in gpu.
    let both = &s["operations"]["both_op"];
    assert_eq!(both["pool"], "prod");
    assert_eq!(both["pool_trees"]["gpu"]["pool"], "shared");
    assert_eq!(both["pool_trees"]["gpu"]["weight"], 3.0);
    // Usage is per tree; the job count is the operation's.
    let physical_cpu = both["resource_usage"]["cpu"].as_f64().expect("cpu");
    let gpu_cpu = both["pool_trees"]["gpu"]["resource_usage"]["cpu"]
        .as_f64()
        .expect("cpu");
    assert_eq!(
        both["running_job_count"].as_f64(),
        Some(physical_cpu + gpu_cpu)
    );
    assert!(physical_cpu > 0.0 && gpu_cpu > 0.0);
    // Counts per tree: both_op counts in prod and in shared.
    assert_eq!(s["pools"]["prod"]["operation_count"], 1);
    assert_eq!(gpu["pools"]["shared"]["operation_count"], 1);
    assert_eq!(s["pools"]["<Root>"]["operation_count"], 2);
    assert_eq!(gpu["pools"]["<Root>"]["operation_count"], 2);
    // A pool event names its tree.
    assert_eq!(gpu["pools"]["inference"]["weight"], 2.0);
    assert!(s["pools"].get("inference").is_none());
    assert_eq!(s["pools"]["prod"]["weight"], 1.0);
    // Rejected operations left nothing behind.
    assert!(s["operations"].get("lost_op").is_none());
    assert!(s["operations"].get("stray_options_op").is_none());

    // A per-tree update moves both_op in gpu only; the rejected one changed nothing.
    let s = run.snapshot("moved");
    let both = &s["operations"]["both_op"];
    assert_eq!(both["pool"], "prod");
    assert_eq!(
        both["weight"], 1.0,
        "the rejected update's weight did not apply"
    );
    assert_eq!(both["pool_trees"]["gpu"]["pool"], "inference");
    assert_eq!(both["pool_trees"]["gpu"]["weight"], 5.0);
    let gpu = &s["pool_trees"]["gpu"];
    assert_eq!(gpu["pools"]["inference"]["operation_count"], 1);
    assert_eq!(gpu["pools"]["shared"]["operation_count"], 0);
    assert!(
        errors
            .iter()
            .any(|m| m.contains("scheduling_options_per_pool_tree.nowhere")),
        "{errors:#?}"
    );
}

#[test]
fn pool_presets_apply_in_order_through_the_core_and_own_options_win() {
    let run = check("scenarios/pool_presets.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let s = run.snapshot("presets");
    let effective = |pool: &str| {
        let p = &s["pools"][pool];
        (
            p["effective_fair_share_starvation_tolerance"].as_f64(),
            p["effective_fair_share_starvation_timeout_ms"].as_u64(),
        )
    };
    // [A, B]: the earlier preset wins where both set an option; B fills the timeout.
    assert_eq!(effective("a"), (Some(0.6), Some(2000)));
    // The pool's own tolerance wins over its preset; the timeout is the tree's.
    assert_eq!(effective("b"), (Some(0.9), Some(30000)));
    assert_eq!(effective("c"), (Some(0.5), Some(2000)));
    // The operation inherits its pool's effective settings.
    let op = &s["operations"]["op_a"];
    assert_eq!(op["effective_fair_share_starvation_timeout_ms"], 2000);
    // An unknown preset is rejected naming the pool and the preset; nothing changed.
    let errors = run.events("error", None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = errors[0]["message"].as_str().expect("message");
    assert!(
        message.contains("pool \"c\": field \"config_presets\": unknown preset \"Z\""),
        "{message}"
    );
}

#[test]
fn conditional_preemption_keeps_an_under_served_pools_jobs_for_its_own_operations() {
    let file = "scenarios/conditional_preemption.json";
    let on = check(file, None, false);
    assert_eq!(on.code, EXIT_OK, "{}", on.stderr);
    // op_a is above its fair share, but its pool p is below its own: only operations inside p
    // may take op_a's jobs (op_y's pool forbids normal preemption), so op_x takes nothing.
    assert_eq!(on.events("allocation_preempted", None), Vec::<Value>::new());
    let s = on.snapshot("after");
    assert_eq!(s["operations"]["op_x"]["starvation_status"], "starving");
    assert_eq!(s["operations"]["op_x"]["running_job_count"], 0);

    let with_options =
        |options: &str| variant(file, "\"enable_conditional_preemption\": true", options);
    // Without conditional preemption the blocking pool p protects op_a from everyone.
    let blocked = with_options("\"enable_conditional_preemption\": false");
    assert_eq!(
        blocked.events("allocation_preempted", None),
        Vec::<Value>::new()
    );
    // Without the blocking checks (the newest YTsaurus rules only): op_x preempts op_a's
    // newest job.
    let run = with_options(
        "\"preemption_check_starvation\": false, \"preemption_check_satisfaction\": false",
    );
    let preempted = run.events("allocation_preempted", None);
    assert_eq!(preempted.len(), 1, "{preempted:?}");
    assert_eq!(preempted[0]["operation"], "op_a");
    assert_eq!(preempted[0]["preemptor"]["operation"], "op_x");
}

#[test]
fn seed001_project_root_shares_and_counts() {
    let run = check("scenarios/seed001_project_root.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let share = |snapshot: &Value, pool: &str, field: &str| {
        snapshot["pools"][pool][field]
            .as_f64()
            .unwrap_or_else(|| panic!("{pool}.{field}"))
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    // (snapshot, pool, fair share, usage) — seed 001: under full load the guarantees go to
    // adhoc (80 cpu) and backup (20); batch takes what adhoc leaves.
    let expected = [
        ("batch-alone", "project-batch", 1.0, 1.0),
        ("full-load", "project-adhoc", 0.8, 0.8),
        ("full-load", "project-backup", 0.2, 0.2),
        ("full-load", "project-batch", 0.0, 0.0),
        ("adhoc-idle", "project-adhoc", 0.0, 0.0),
        ("adhoc-idle", "project-batch", 0.8, 0.8),
        ("adhoc-idle", "project-backup", 0.2, 0.2),
        ("adhoc-idle", "project-root", 1.0, 1.0),
    ];
    for (label, pool, fair, usage) in expected {
        let s = run.snapshot(label);
        let (f, u) = (
            share(&s, pool, "fair_share_ratio"),
            share(&s, pool, "usage_ratio"),
        );
        assert!(
            close(f, fair) && close(u, usage),
            "{label} {pool}: fair {f}, usage {u}"
        );
    }
    // Batch lost its jobs to the guarantees by preemption (80 to adhoc, 20 to backup), not
    // the other way round; adhoc's own jobs ended only when it was aborted.
    let preempted: Vec<Value> = run
        .events("allocation_preempted", None)
        .into_iter()
        .filter(|e| e["reason"] == "preemption")
        .collect();
    assert!(preempted.iter().all(|e| e["operation"] == "batch1"));
    let by = |op: &str| {
        preempted
            .iter()
            .filter(|e| e["preemptor"]["operation"] == op)
            .count()
    };
    assert_eq!((by("adhoc1"), by("backup1")), (80, 20));
    // Operation counts: batch runs 4 (max_running_operation_count), backup 2; the rest wait.
    let s = run.snapshot("limits");
    let count = |pool: &str, field: &str| s["pools"][pool][field].as_u64().expect("count");
    assert_eq!(count("project-batch", "operation_count"), 5);
    assert_eq!(count("project-batch", "running_operation_count"), 4);
    assert_eq!(count("project-backup", "operation_count"), 3);
    assert_eq!(count("project-backup", "running_operation_count"), 2);
    assert_eq!(count("project-root", "operation_count"), 8);
    assert_eq!(count("project-root", "running_operation_count"), 6);
    for (op, pool) in [("batch5", "project-batch"), ("backup3", "project-backup")] {
        assert_eq!(s["operations"][op]["state"], "pending");
        let why = s["operations"][op]["why"].as_str().expect("why");
        assert!(why.contains(&format!("pool \"{pool}\"")), "{op}: {why}");
    }
}

#[test]
fn hub_pools_create_per_user_subpools_and_immediate_operations_can_be_forbidden() {
    let run = check(
        "scenarios/hub_pools_and_immediate_operations.json",
        None,
        false,
    );
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let s = run.snapshot("subpools");
    // hub$user subpools with the hub's ephemeral_subpool_config (FIFO, 1 running).
    for (op, pool) in [
        ("alice1", "hub$alice"),
        ("alice2", "hub$alice"),
        ("bob1", "hub$bob"),
    ] {
        assert_eq!(s["operations"][op]["pool"], pool, "{op}");
    }
    for pool in ["hub$alice", "hub$bob"] {
        assert_eq!(s["pools"][pool]["mode"], "fifo");
        assert_eq!(s["pools"][pool]["is_ephemeral"], true);
        assert_eq!(s["pools"][pool]["parent"], "hub");
    }
    assert_eq!(s["operations"]["alice2"]["state"], "pending");
    assert_eq!(
        s["user_to_ephemeral_pools"],
        serde_json::json!({"alice": ["hub$alice"], "bob": ["hub$bob"]})
    );
    // Operations straight into a pool with forbid_immediate_operations, or into the root when
    // the tree forbids it, are rejected naming the pool; a child of the closed pool is fine.
    let errors: Vec<String> = run
        .events("error", None)
        .iter()
        .map(|e| e["message"].as_str().expect("message").to_string())
        .collect();
    for pool in ["closed", "<Root>"] {
        let expected = format!("starting operations immediately in pool \"{pool}\" is forbidden");
        assert!(errors.iter().any(|m| m.contains(&expected)), "{errors:?}");
    }
    assert_eq!(s["operations"]["in_open"]["state"], "running");
    assert!(s["operations"].get("in_closed").is_none());
    assert!(s["operations"].get("in_root").is_none());
    // Once their operations are done, the ephemeral subpools are gone.
    let done = run.snapshot("done");
    assert!(done["pools"].get("hub$alice").is_none());
    assert!(done["pools"].get("hub$bob").is_none());
    assert_eq!(done["operations"]["alice2"]["state"], "completed");
}

#[test]
fn runtime_changes_move_shares_and_invalid_changes_change_nothing() {
    let run = check("scenarios/runtime_changes.json", None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let pool =
        |label: &str, pool: &str, field: &str| run.snapshot(label)["pools"][pool][field].clone();
    let close = |v: Value, x: f64| (v.as_f64().expect("number") - x).abs() < 1e-9;
    // A new weight moves fair share and, as jobs end, usage.
    assert!(close(pool("equal", "b", "fair_share_ratio"), 0.5));
    assert!(close(pool("weighted", "b", "fair_share_ratio"), 0.75));
    assert!(close(pool("weighted", "b", "usage_ratio"), 0.75));
    assert!(close(pool("weighted", "a", "usage_ratio"), 0.25));
    // Moving an operation: it counts in its new pool; the emptied pool could be removed.
    let moved = run.snapshot("moved");
    assert_eq!(moved["operations"]["op1"]["pool"], "b");
    assert_eq!(moved["pools"]["b"]["operation_count"], 2);
    assert!(moved["pools"].get("a").is_none());
    // Rejected: creating a pool that exists; a negative weight (pool and field named).
    let errors: Vec<String> = run
        .events("error", None)
        .iter()
        .map(|e| e["message"].as_str().expect("message").to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("pool \"b\" already exists"),
        "{errors:?}"
    );
    assert!(errors[1].contains("pool \"b\": field \"weight\": must be > 0 (got -1)"));
    // Nothing of the rejected changes applied; later changes did.
    let nested = run.snapshot("nested");
    assert_eq!(nested["pools"]["b"]["weight"], 3.0);
    assert_eq!(nested["pools"]["c"]["parent"], "b");
    assert_eq!(nested["operations"]["op2"]["pool"], "c");
}

#[test]
fn backfill_lets_jobs_that_end_in_time_use_a_reservation() {
    let file = "scenarios/backfill.json";
    let t = |e: &Value| e["t_ms"].as_u64().expect("t_ms");
    // (short's limit in the file, when short's jobs start: the first while big waits or not)
    let cases: [(&str, bool); 2] = [
        // 2 s + 4 s ends by the 8 s the reservation expects to need the node.
        ("\"time_limit_ms\": 4000", true),
        // 2 s + 7 s does not: short waits until big has started.
        ("\"time_limit_ms\": 7000", false),
    ];
    for (limit, backfills) in cases {
        let run = if backfills {
            check(file, None, false)
        } else {
            variant(file, "\"time_limit_ms\": 4000", limit)
        };
        assert_eq!(run.code, EXIT_OK, "{limit}: {}", run.stderr);
        let reserved = run.events("job_reserved", Some("big"));
        assert_eq!(reserved.len(), 1, "{limit}: {reserved:?}");
        let big: Vec<u64> = run
            .events("allocation_started", Some("big"))
            .iter()
            .map(t)
            .collect();
        assert_eq!(big, vec![8000], "{limit}");
        let short: Vec<u64> = run
            .events("allocation_started", Some("short"))
            .iter()
            .map(t)
            .collect();
        let flagged = run
            .events("allocation_started", Some("short"))
            .iter()
            .filter(|e| e["backfill"] == true)
            .count();
        if backfills {
            assert_eq!(short, vec![2000, 2000], "{limit}");
            // Their starts say they backfill.
            assert_eq!(flagged, 2, "{limit}");
        } else {
            assert_eq!(flagged, 0, "{limit}");
            assert!(short.iter().all(|&at| at >= 8000), "{limit}: {short:?}");
        }
        // filler has no limit: nothing of it starts before big.
        let filler: Vec<u64> = run
            .events("allocation_started", Some("filler"))
            .iter()
            .map(t)
            .collect();
        assert!(filler.iter().all(|&at| at >= 8000), "{limit}: {filler:?}");
    }
    let run = check(file, None, false);
    let why = run.snapshot("backfilled")["operations"]["big"]["why"]
        .as_str()
        .expect("why")
        .to_string();
    assert!(why.contains("time limit ends by 8000 ms"), "{why}");
}

#[test]
fn job_reservation_holds_a_node_for_a_big_job_that_small_jobs_keep_out() {
    let file = "scenarios/job_reservation.json";
    let on = check(file, None, false);
    assert_eq!(on.code, EXIT_OK, "{}", on.stderr);
    // Only big reserves (its 4-cpu job is larger than the smallest pending job; the small
    // operations wait for cpus, not for fragmentation), at the first update at or after its
    // start plus the 2 s timeout.
    let reserved = on.events("job_reserved", None);
    assert_eq!(reserved.len(), 1, "{reserved:?}");
    assert_eq!(reserved[0]["operation"], "big");
    assert_eq!(reserved[0]["t_ms"], 2500);
    assert_eq!(reserved[0]["resources"]["cpu"], 4.0);
    let node = reserved[0]["node"].clone();
    let snap = on.snapshot("reserved");
    assert_eq!(snap["operations"]["big"]["reserved_node"], node);
    let why = snap["operations"]["big"]["why"].as_str().expect("why");
    assert!(why.contains("job_reservation"), "{why}");
    // Nothing else starts on the reserved node until big's job does, there.
    let started = on.events("allocation_started", Some("big"));
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["node"], node);
    let big_at = started[0]["t_ms"].as_u64().expect("t_ms");
    assert!(big_at <= 4000, "big started at {big_at} ms");
    let sneaked: Vec<Value> = on
        .events("allocation_started", None)
        .into_iter()
        .filter(|e| e["node"] == node && e["operation"] != "big")
        .filter(|e| (2500..big_at).contains(&e["t_ms"].as_u64().expect("t_ms")))
        .collect();
    assert_eq!(sneaked, Vec::<Value>::new());
    let released = on.events("reservation_released", Some("big"));
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["reason"], "job_started");
    assert_eq!(released[0]["t_ms"].as_u64(), Some(big_at));
    assert!(
        on.snapshot("end")["operations"]["big"]
            .get("reserved_node")
            .is_none()
    );

    // Without reservation the small jobs take every freed cpu: big has not started by 12 s.
    let off = variant(file, "\"enable\": true", "\"enable\": false");
    assert_eq!(off.events("job_reserved", None), Vec::<Value>::new());
    assert_eq!(
        off.events("allocation_started", Some("big")),
        Vec::<Value>::new()
    );
    assert_eq!(
        off.snapshot("end")["operations"]["big"]["running_job_count"],
        0
    );
}

#[test]
fn gang_placement_starts_a_gang_whole_and_keeps_what_it_holds() {
    let file = "scenarios/gang_placement.json";
    let on = check(file, None, false);
    assert_eq!(on.code, EXIT_OK, "{}", on.stderr);
    let starts = |run: &Run| -> Vec<u64> {
        run.events("allocation_started", Some("mpi"))
            .iter()
            .map(|e| e["t_ms"].as_u64().expect("t_ms"))
            .collect()
    };
    // All three jobs start within one heartbeat period, once node-0 frees at 3000 ms.
    assert_eq!(starts(&on), vec![3000, 3000, 3100]);
    let assembled = on.events("gang_assembled", Some("mpi"));
    assert_eq!(assembled.len(), 1, "{assembled:?}");
    assert_eq!(assembled[0]["jobs"], 3);
    assert_eq!(assembled[0]["nodes"], 2);
    let released = on.events("gang_released", Some("mpi"));
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0]["reason"], "started");
    // While it gathers, node-1's 4 free cpu are held: filler starts nothing before 3000 ms.
    let holding = on.snapshot("holding");
    assert_eq!(holding["operations"]["filler"]["running_job_count"], 0);
    let why = holding["operations"]["mpi"]["why"].as_str().expect("why");
    assert!(why.contains("2 of its 3 pending jobs held"), "{why}");
    let filler_first = on.events("allocation_started", Some("filler"))[0]["t_ms"].clone();
    assert_eq!(filler_first, 3000);

    // Without it, the gang starts piecemeal: a job at 200 ms (filler takes the rest of
    // node-1), one at 2200 ms, the last at 3000 ms.
    let off = variant(file, "\"enable\": true", "\"enable\": false");
    assert_eq!(starts(&off), vec![200, 2200, 3000]);
    assert_eq!(off.events("gang_assembled", None), Vec::<Value>::new());
}

#[test]
fn gang_member_lost_runs_the_gang_again_whole() {
    let file = "scenarios/gang_member_lost.json";
    let run = check(file, None, false);
    assert_eq!(run.code, EXIT_OK, "{}", run.stderr);
    let preempted: Vec<(String, String)> = run
        .events("allocation_preempted", Some("mpi"))
        .iter()
        .map(|e| {
            (
                e["node"].as_str().expect("node").to_string(),
                e["reason"].as_str().expect("reason").to_string(),
            )
        })
        .collect();
    // node-0's job is lost with its node; node-1's goes with it rather than run alone.
    assert_eq!(
        preempted,
        [
            ("node-0".to_string(), "node_lost".to_string()),
            ("node-1".to_string(), "gang_member_lost".to_string())
        ]
    );
    // Then both start again, at once, on the two nodes left, and complete.
    let starts: Vec<(u64, String)> = run
        .events("allocation_started", Some("mpi"))
        .iter()
        .map(|e| {
            (
                e["t_ms"].as_u64().expect("t_ms"),
                e["node"].as_str().expect("node").to_string(),
            )
        })
        .collect();
    assert_eq!(
        starts[2..],
        [(1000, "node-1".to_string()), (1000, "node-2".to_string())]
    );
    let finished = run.events("allocation_finished", Some("mpi"));
    assert_eq!(finished.len(), 2, "{finished:?}");
    assert!(
        finished
            .iter()
            .all(|e| e["t_ms"] == 4000 && e["outcome"] == "completed")
    );
}
