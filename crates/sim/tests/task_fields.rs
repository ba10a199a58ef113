//! A scenario task's fields: the core's (`job_count`, `resources`, `time_limit_ms`, `gang`,
//! `disk_request`) and the simulated job's (`duration_ms`, `interruptible`,
//! `exit_after_interrupt_ms`), and nothing else: the real-job fields of the server (`command`,
//! `env`) and unknown fields are refused by name when the file loads; durations the core
//! cannot count to are refused while running, in the words the core used when its tasks
//! carried them. One table of task bodies, each started as operation `op` at time 0.

mod common;

use fairsched_sim::scenario::cli::{EXIT_BAD_FILE, EXIT_OK};
use serde_json::{Value, json};

/// What a scenario with the task does.
enum Expect {
    /// The file is refused (exit 2) with this text on stderr (after the file name).
    Refused(&'static str),
    /// The run goes on, with one `error` line (code 1) of this message for the operation.
    ErrorLine(&'static str),
    /// The operation starts: its jobs run.
    Runs,
}

/// Runs a scenario whose only event starts `op` with `tasks`; (exit code, stdout, stderr).
fn run(tasks: Value) -> (u8, String, String) {
    common::run_raw(&json!({
        "nodes": [{"count": 1, "resources": {"cpu": 4, "user_slots": 4}}],
        "events": [{"at_ms": 0, "start_operation": {"id": "op", "user": "u", "tasks": tasks}}],
        "until_ms": 200
    }))
}

#[test]
fn a_scenario_task_takes_the_core_and_simulated_fields_and_refuses_others_by_name() {
    // 10 years, the longest duration the core counts to (`fairsched_core::MAX_DURATION_MS`).
    const MAX: u64 = 315_360_000_000;
    let one = |fields: Value| {
        let mut task = json!({"job_count": 1, "resources": {"cpu": 1, "user_slots": 1}});
        for (k, v) in fields.as_object().expect("fields") {
            task[k] = v.clone();
        }
        task
    };
    let cases: Vec<(Value, Expect)> = vec![
        (
            json!([one(json!({"command": ["sleep", "1"]}))]),
            Expect::Refused(
                "events[0].start_operation.tasks[0].command: unknown field `command` (expected \
                 one of job_count, resources, duration_ms, time_limit_ms, interruptible, \
                 exit_after_interrupt_ms, gang, disk_request)",
            ),
        ),
        (
            json!([one(json!({})), one(json!({"env": {"A": "1"}}))]),
            Expect::Refused("events[0].start_operation.tasks[1].env: unknown field `env`"),
        ),
        (
            json!([one(json!({"duration": 5}))]),
            Expect::Refused(
                "events[0].start_operation.tasks[0].duration: unknown field `duration` (did you \
                 mean `duration_ms`?)",
            ),
        ),
        (
            json!([one(json!({"exit_after_interupt_ms": 5}))]),
            Expect::Refused(
                "tasks[0].exit_after_interupt_ms: unknown field `exit_after_interupt_ms` (did \
                 you mean `exit_after_interrupt_ms`?)",
            ),
        ),
        (
            json!([one(json!({"interruptible": "yes"}))]),
            Expect::Refused("events[0].start_operation.tasks[0].interruptible: invalid type"),
        ),
        (
            json!([one(json!({"duration_ms": -1}))]),
            Expect::Refused("events[0].start_operation.tasks[0].duration_ms: invalid value"),
        ),
        (
            json!([one(json!({"duration_ms": MAX + 1}))]),
            Expect::ErrorLine(
                "events[0].start_operation: operation \"op\": tasks[0].duration_ms must be at \
                 most 315360000000 ms (ten years; got 315360000001)",
            ),
        ),
        (
            json!([
                one(json!({})),
                one(json!({"exit_after_interrupt_ms": u64::MAX}))
            ]),
            Expect::ErrorLine(
                "events[0].start_operation: operation \"op\": tasks[1].exit_after_interrupt_ms \
                 must be at most 315360000000 ms (ten years; got 18446744073709551615)",
            ),
        ),
        (
            json!([one(
                json!({"duration_ms": MAX, "exit_after_interrupt_ms": MAX,
                              "interruptible": true, "time_limit_ms": MAX, "gang": false,
                              "disk_request": {"disk_space": 1, "medium_name": "default"}})
            )]),
            Expect::Runs,
        ),
        (json!([one(json!({"duration_ms": null}))]), Expect::Runs),
    ];
    for (tasks, expect) in cases {
        let (code, stdout, stderr) = run(tasks.clone());
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        let errors: Vec<&Value> = lines.iter().filter(|l| l["event"] == "error").collect();
        let started = lines
            .iter()
            .filter(|l| l["event"] == "allocation_started" && l["operation"] == "op")
            .count();
        match expect {
            Expect::Refused(text) => {
                assert_eq!(code, EXIT_BAD_FILE, "{tasks}: {stderr}");
                assert!(stdout.is_empty(), "{tasks}: nothing runs: {stdout}");
                assert!(
                    stderr.contains(text),
                    "{tasks}: expected {text:?} in {stderr}"
                );
            }
            Expect::ErrorLine(message) => {
                assert_eq!(code, EXIT_OK, "{tasks}: {stderr}");
                assert_eq!(errors.len(), 1, "{tasks}: {stdout}");
                assert_eq!(errors[0]["message"], message, "{tasks}");
                assert_eq!(errors[0]["code"], 1, "{tasks}");
                assert_eq!(started, 0, "{tasks}: the operation does not start");
            }
            Expect::Runs => {
                assert_eq!(code, EXIT_OK, "{tasks}: {stderr}");
                assert!(errors.is_empty(), "{tasks}: {stdout}");
                assert_eq!(started, 1, "{tasks}: {stdout}");
            }
        }
    }
}
