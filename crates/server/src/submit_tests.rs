//! The submit schema moved from the core's `OperationSpec` to the API's `SubmitOperation`: the
//! same bodies are accepted, refused with the same errors, and reach the core as the same
//! spec (but for the tasks' commands and environments, which the server keeps, and the
//! simulated-job fields, which the core no longer carries).

use super::*;
use crate::validate::{MAX_OPERATION_JOBS, check_id};
use fairsched_api::codes;
use fairsched_resources::Resources;
use serde_json::json;

/// The core's task at commit c0062b3, when submit bodies were parsed into the core's spec:
/// the same fields in the same order, with the same defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OldTask {
    job_count: u32,
    #[serde(default)]
    resources: Resources,
    #[serde(default)]
    duration_ms: Option<u64>,
    #[serde(default)]
    time_limit_ms: Option<u64>,
    #[serde(default)]
    interruptible: bool,
    #[serde(default)]
    exit_after_interrupt_ms: Option<u64>,
    #[serde(default)]
    gang: bool,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    disk_request: Option<DiskRequest>,
}

impl OldTask {
    /// What the core's task keeps of it.
    fn core(self) -> TaskSpec {
        TaskSpec {
            job_count: self.job_count,
            resources: self.resources,
            time_limit_ms: self.time_limit_ms,
            gang: self.gang,
            disk_request: self.disk_request,
        }
    }
}

/// The submit check before the API owned the schema (commit c0062b3's
/// `validate::submit`): the body parsed as the core's spec of then, with a probe id where it
/// has none.
fn before(spec: &Value) -> Result<OperationSpec<OldTask>, ApiError> {
    let bad = |field: &str, message: String| {
        ApiError::new(codes::BAD_REQUEST, message).with_attribute("field", field)
    };
    let Some(obj) = spec.as_object() else {
        return Err(ApiError::new(
            codes::BAD_REQUEST,
            "an operation must be a JSON object",
        ));
    };
    match obj.get("id") {
        None => {}
        Some(Value::String(id)) => check_id("id", "operation", id)?,
        Some(_) => return Err(bad("id", "id: must be a string".into())),
    }
    let mut total: u64 = 0;
    let tasks = obj.get("tasks").and_then(Value::as_array);
    for (i, task) in tasks.into_iter().flatten().enumerate() {
        let field = format!("tasks[{i}].job_count");
        let Some(count) = task.get("job_count") else {
            continue;
        };
        let Some(count) = count.as_u64().filter(|c| *c > 0) else {
            return Err(bad(
                &field,
                format!("{field}: must be a whole number of jobs from 1 to {MAX_OPERATION_JOBS}"),
            ));
        };
        total = total.saturating_add(count);
        if total > MAX_OPERATION_JOBS {
            return Err(bad(
                &field,
                format!(
                    "{field}: too many jobs: an operation may have at most \
                     {MAX_OPERATION_JOBS} jobs over all its tasks ({total} so far); split it \
                     into several operations"
                ),
            ));
        }
    }
    let mut probe = spec.clone();
    if let Some(o) = probe.as_object_mut() {
        o.entry("id").or_insert_with(|| Value::String("id".into()));
    }
    serde_path_to_error::deserialize::<_, OperationSpec<OldTask>>(probe).map_err(|e| {
        let path = e.path().to_string();
        let inner = fairsched_config::user_words(&e.inner().to_string());
        let message = if path == "." {
            format!("bad operation spec: {inner}")
        } else {
            format!("bad operation spec: {path}: {inner}")
        };
        ApiError::new(codes::BAD_REQUEST, message).with_attribute("field", path)
    })
}

/// A valid body with every field set.
fn full() -> Value {
    json!({
        "id": "op-1", "user": "alice", "pool": "research", "weight": 2.5,
        "resource_limits": {"cpu": 4, "memory": "8GiB"}, "preemption_mode": "graceful",
        "interruption_signal": "SIGINT", "interruption_timeout_ms": 5000,
        "scheduling_tag_filter": "gpu & !old", "fair_share_starvation_tolerance": 0.7,
        "fair_share_starvation_timeout_ms": 3000, "max_failed_job_count": 4,
        "pool_trees": ["default", "gpu"],
        "scheduling_options_per_pool_tree": {"gpu": {"pool": "g", "weight": 3,
                                                     "resource_limits": {"gpu": 2}}},
        "max_unpreemptible_allocation_count": 2, "type": "map",
        "tasks": [
            {"job_count": 3, "resources": {"cpu": 1.5, "memory": "1GiB", "gpu": 1},
             "duration_ms": 100, "time_limit_ms": 200, "interruptible": true,
             "exit_after_interrupt_ms": 50, "gang": true, "command": ["sh", "-c", "true"],
             "env": {"A": "1", "B": "2"},
             "disk_request": {"disk_space": 1024, "medium_name": "ssd_slots"}},
            {"job_count": 1, "command": ["true"]}
        ]
    })
}

/// Every field of the body and of a task with each kind of JSON value, and bodies broken in
/// other ways.
fn cases() -> Vec<Value> {
    let values = [
        Value::Null,
        json!("x"),
        json!(""),
        json!(0),
        json!(7),
        json!(-1),
        json!(1.5),
        json!(1e30),
        json!(true),
        json!([]),
        json!(["a"]),
        json!({}),
        json!({"cpu": 1}),
        json!({"x": 1}),
        json!({"pool": "p"}),
        json!({"t": {}}),
        json!({"t": {"pool": "p", "weigth": 1}}),
        json!({"medium_name": "ssd"}),
        json!({"medium_name": "ssd", "disk_space": -1}),
        json!({"cpu": "lots"}),
        json!({"cpus": 1}),
        json!({"A": 1}),
        json!("normal"),
        json!("graceful"),
        json!("soft"),
    ];
    let top = full()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect::<Vec<_>>();
    let task = full()["tasks"][0].as_object().unwrap().clone();
    let mut out = vec![full()];
    for field in top.iter().chain(
        [
            "max_unpreemptible_job_count",
            "max_unpreemptable_job_count",
            "poool",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .iter(),
    ) {
        for v in &values {
            let mut body = full();
            body[field.as_str()] = v.clone();
            out.push(body.clone());
            body.as_object_mut().unwrap().remove(field.as_str());
            out.push(body);
        }
    }
    for field in task.keys().map(String::as_str).chain(["envv"]) {
        for v in &values {
            let mut body = full();
            body["tasks"][0][field] = v.clone();
            out.push(body.clone());
            body["tasks"][0].as_object_mut().unwrap().remove(field);
            out.push(body);
        }
    }
    out.extend([
        json!([]),
        json!("op"),
        Value::Null,
        json!({}),
        json!({"tasks": []}),
        json!({"tasks": {"job_count": 1}}),
        json!({"tasks": [1]}),
        json!({"tasks": [{"job_count": 1}]}),
        json!({"tasks": [{"job_count": 1, "command": ["true"]}]}),
        json!({"id": "a b", "tasks": [{"job_count": 1}]}),
        json!({"id": ".x", "tasks": [{"job_count": 1}]}),
        json!({"tasks": [{"job_count": 600_000}, {"job_count": 600_000}]}),
        json!({"tasks": [{"job_count": u32::MAX}]}),
        json!({"max_unpreemptible_job_count": 1, "max_unpreemptible_allocation_count": 2,
               "tasks": [{"job_count": 1}]}),
    ]);
    out
}

#[test]
fn accepts_and_refuses_what_the_core_spec_did() {
    let mut accepted = 0;
    for body in cases() {
        let now = crate::validate::submit(&body);
        let then = before(&body);
        match (now, then) {
            (Ok(spec), Ok(old)) => {
                accepted += 1;
                let id = spec.id.clone().unwrap_or_else(|| "id".into());
                let commands: Vec<JobCommand> = old
                    .tasks
                    .iter()
                    .map(|t| JobCommand {
                        command: t.command.clone(),
                        env: t.env.clone(),
                    })
                    .collect();
                assert_eq!(job_commands(&spec), commands, "{body}");
                // The simulated-job fields are taken as they were (and not read).
                let old_simulated: Vec<_> = old
                    .tasks
                    .iter()
                    .map(|t| (t.duration_ms, t.interruptible, t.exit_after_interrupt_ms))
                    .collect();
                let new_simulated: Vec<_> = spec
                    .tasks
                    .iter()
                    .map(|t| (t.duration_ms, t.interruptible, t.exit_after_interrupt_ms))
                    .collect();
                assert_eq!(new_simulated, old_simulated, "{body}");
                assert_eq!(
                    core_spec(&id, &spec),
                    old.map_tasks(OldTask::core),
                    "{body}"
                );
                // What a restart reads back is the same.
                assert_eq!(stored_spec(&body).unwrap(), spec, "{body}");
            }
            (Err(now), Err(then)) => assert_eq!(now, then, "{body}"),
            (now, then) => panic!("{body}: now {now:?}, before {then:?}"),
        }
    }
    assert!(accepted > 100, "{accepted}");
}

/// The id and the user the server fills in go into the body (stored and shown) and the parsed
/// spec alike.
#[test]
fn a_submission_gets_its_id_and_user_in_both() {
    let mut s = Submission::parse(json!({"tasks": [{"job_count": 1, "command": ["x"]}]})).unwrap();
    s.set_id("op-7");
    s.set_user("alice");
    assert_eq!(s.body["id"], "op-7");
    assert_eq!(s.body["user"], "alice");
    assert_eq!(s.spec.id.as_deref(), Some("op-7"));
    assert_eq!(s.spec.user.as_deref(), Some("alice"));
    assert_eq!(
        Value::Object(s.body.clone()),
        json!({"id": "op-7", "user": "alice", "tasks": [{"job_count": 1, "command": ["x"]}]})
    );
    let e = Submission::parse(json!([1])).unwrap_err();
    assert_eq!(e.message, "an operation must be a JSON object");
}

/// Commands and environments a job could never start with are refused at submit, naming
/// the field; what `exec` takes is accepted.
#[test]
fn commands_and_environments_exec_could_not_take_are_refused() {
    let long = "x".repeat(MAX_JOB_STRING_BYTES + 1);
    let at_limit = "x".repeat(MAX_JOB_STRING_BYTES);
    let cases: Vec<(Value, Option<&str>)> = vec![
        (
            json!({"command": ["sh", "-c", "true"], "env": {"A": "1"}}),
            None,
        ),
        (json!({"command": [at_limit]}), None),
        (
            json!({"command": []}),
            Some("tasks[0].command: must not be empty"),
        ),
        (json!({}), Some("tasks[0].command: must not be empty")),
        (
            json!({"command": [""]}),
            Some("tasks[0].command[0]: the program to run must not be empty"),
        ),
        (
            json!({"command": [" "]}),
            Some("tasks[0].command[0]: the program"),
        ),
        (
            json!({"command": ["echo", "a\u{0}b"]}),
            Some("tasks[0].command[1]: must not contain a NUL"),
        ),
        (
            json!({"command": ["echo", long]}),
            Some("tasks[0].command[1]: 128.0 KiB long; an argument may be at most 128.0 KiB"),
        ),
        (
            json!({"command": ["true"], "env": {"": "x"}}),
            Some("tasks[0].env[\"\"]: a variable needs a name"),
        ),
        (
            json!({"command": ["true"], "env": {"A=B": "x"}}),
            Some("tasks[0].env[\"A=B\"]: a variable's name may not contain `=`"),
        ),
        (
            json!({"command": ["true"], "env": {"A": "a\u{0}"}}),
            Some("tasks[0].env[\"A\"]: must not contain a NUL"),
        ),
        (
            json!({"command": ["true"], "env": {"BIG": "x".repeat(7 << 20)}}),
            Some("tasks[0].env[\"BIG\"]: 7.0 MiB long; a variable may be at most"),
        ),
        (
            json!({"command": ["true"], "env": (0..9).map(|i| (format!("V{i}"), json!("x".repeat(120_000)))).collect::<serde_json::Map<_, _>>()}),
            Some("tasks[0]: the command and environment take 1.0 MiB; at most 1.0 MiB in all"),
        ),
    ];
    for (task, want) in cases {
        let mut t = task.clone();
        t["job_count"] = json!(1);
        let body = json!({"tasks": [{"job_count": 1, "command": ["true"]}, t]});
        let spec: SubmitOperation = serde_json::from_value(body).unwrap();
        let got = check_commands(&spec);
        match want {
            None => assert!(got.is_ok(), "{task}: {got:?}"),
            Some(want) => {
                let err = got.expect_err("refused");
                let want = want.replace("tasks[0]", "tasks[1]");
                assert!(err.message.starts_with(&want), "{}: {}", want, err.message);
                assert_eq!(err.code, codes::BAD_REQUEST);
            }
        }
    }
}
