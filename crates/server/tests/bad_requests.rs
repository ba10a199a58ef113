//! Bad and hostile request bodies through the router (tower `oneshot`): each case is a
//! request and the answer it must get (status, code, a piece of the message that names the
//! field); a refused request changes nothing. Then random and mangled JSON bodies on every
//! route that takes one: every answer is the API's JSON (never a panic, never a plain-text
//! error), and the server goes on answering heartbeats and scheduling.

use axum::body::Body;
use axum::http::Request;
use fairsched_server::{ServerConfig, actor, http};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

fn app(dir: &std::path::Path) -> axum::Router {
    let config = ServerConfig {
        data_dir: dir.to_path_buf(),
        pool_trees: Some(
            serde_json::from_value(json!({"pool_trees": {"default": {"pools": {"p": {}}}}}))
                .unwrap(),
        ),
        ..ServerConfig::default()
    };
    let store = fairsched_store::SqliteStore::open(dir).unwrap();
    let (actor, view) = actor::Actor::new(&config, Box::new(store)).unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let state = http::AppState::new(tx, view, None, &actor);
    tokio::spawn(actor.run(rx));
    http::router(state)
}

/// Any request with a raw body: status and body (JSON, or `Value::Null` with the text in the
/// panic message of the caller's assertion).
async fn send(app: &axum::Router, method: &str, uri: &str, body: Vec<u8>) -> (u16, Value, String) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text,
    )
}

async fn call(app: &axum::Router, method: &str, uri: &str, body: Value) -> (u16, Value) {
    let (status, value, _) = send(app, method, uri, body.to_string().into_bytes()).await;
    (status, value)
}

/// What a refused request must not change: operations, nodes, the tree.
async fn state(app: &axum::Router) -> Value {
    let (_, ops) = call(app, "GET", "/api/v1/operations", Value::Null).await;
    let (_, nodes) = call(app, "GET", "/api/v1/nodes", Value::Null).await;
    let (_, tree) = call(app, "GET", "/api/v1/tree", Value::Null).await;
    let nodes: Vec<Value> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| json!([n["id"], n["resources"], n["tags"]]))
        .collect();
    json!({"operations": ops, "nodes": nodes, "tree": tree["config"]})
}

/// One operation of one job, with `task` merged into its task and `extra` into it.
fn op(id: Value, task: Value, extra: Value) -> Value {
    let mut t = json!({"job_count": 1, "resources": {"cpu": 1}, "command": ["true"]});
    if let (Value::Object(t), Value::Object(more)) = (&mut t, task) {
        t.extend(more);
    }
    let mut body = json!({"id": id, "pool": "p", "tasks": [t]});
    if let (Value::Object(b), Value::Object(more)) = (&mut body, extra) {
        b.extend(more);
    }
    body
}

struct Case {
    what: &'static str,
    method: &'static str,
    uri: &'static str,
    body: Vec<u8>,
    status: u16,
    code: u64,
    /// Pieces of the message.
    says: &'static [&'static str],
}

fn case(
    what: &'static str,
    (method, uri): (&'static str, &'static str),
    body: Value,
    (status, code): (u16, u64),
    says: &'static [&'static str],
) -> Case {
    Case {
        what,
        method,
        uri,
        body: body.to_string().into_bytes(),
        status,
        code,
        says,
    }
}

const SUBMIT: (&str, &str) = ("POST", "/api/v1/operations");
const REGISTER: (&str, &str) = ("POST", "/api/v1/agent/register");
const HEARTBEAT: (&str, &str) = ("POST", "/api/v1/agent/heartbeat");
const BAD: (u16, u64) = (400, 100_400);

async fn check(app: &axum::Router, cases: Vec<Case>) {
    for c in cases {
        let before = state(app).await;
        let (status, body, text) = send(app, c.method, c.uri, c.body.clone()).await;
        let label = format!("{} ({} {})", c.what, c.method, c.uri);
        assert_eq!(status, c.status, "{label}: {text}");
        assert_eq!(body["code"], c.code, "{label}: {text}");
        let message = body["message"].as_str().unwrap_or_default();
        for piece in c.says {
            assert!(
                message.contains(piece),
                "{label}: {message:?} lacks {piece:?}"
            );
        }
        assert!(message.len() < 2000, "{label}: a long message: {message}");
        for rust in [
            "f64", "u32", "u64", "usize", "struct ", "enum ", "sequence", "map,",
        ] {
            assert!(
                !message.contains(rust),
                "{label}: {message:?} names a Rust type ({rust:?})"
            );
        }
        assert_eq!(state(app).await, before, "{label} changed something");
    }
}

#[tokio::test]
async fn bad_bodies_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let long = "x".repeat(129);
    let cases = vec![
        // Commands and environments no job could start with.
        case(
            "an empty program",
            SUBMIT,
            op(json!("c1"), json!({"command": [""]}), json!({})),
            BAD,
            &["tasks[0].command[0]: the program to run must not be empty"],
        ),
        case(
            "a variable without a name",
            SUBMIT,
            op(json!("c2"), json!({"env": {"": "x"}}), json!({})),
            BAD,
            &["tasks[0].env[\"\"]: a variable needs a name"],
        ),
        case(
            "a variable longer than exec takes",
            SUBMIT,
            op(
                json!("c3"),
                json!({"env": {"A": "x".repeat(200_000)}}),
                json!({}),
            ),
            BAD,
            &["tasks[0].env[\"A\"]: 195.3 KiB long; a variable may be at most 128.0 KiB"],
        ),
        // An event kind that names no event matches nothing: refused, with the kinds.
        Case {
            what: "an unknown event kind",
            method: "GET",
            uri: "/api/v1/events?kind=allocation_started,nope",
            body: Vec::new(),
            status: 400,
            code: 100_400,
            says: &[
                "kind \"nope\" is not an event kind",
                "node_lost",
                "allocation_started",
            ],
        },
        Case {
            what: "a misspelt event kind",
            method: "GET",
            uri: "/api/v1/events?kind=node_lots",
            body: Vec::new(),
            status: 400,
            code: 100_400,
            says: &["did you mean \"node_lost\"?"],
        },
        // Operation ids.
        case(
            "a path",
            SUBMIT,
            op(json!("../x"), json!({}), json!({})),
            BAD,
            &[
                "id: \"../x\" is not a valid operation id",
                "A-Z a-z 0-9 . _ -",
            ],
        ),
        case(
            "a space",
            SUBMIT,
            op(json!("a b"), json!({}), json!({})),
            BAD,
            &["id: \"a b\""],
        ),
        case(
            "empty",
            SUBMIT,
            op(json!(""), json!({}), json!({})),
            BAD,
            &["id: \"\""],
        ),
        case(
            "a leading dot",
            SUBMIT,
            op(json!(".x"), json!({}), json!({})),
            BAD,
            &["id:"],
        ),
        case(
            "NUL",
            SUBMIT,
            op(json!("a\0b"), json!({}), json!({})),
            BAD,
            &["id: \"a\\0b\""],
        ),
        case(
            "too long",
            SUBMIT,
            op(json!(long), json!({}), json!({})),
            BAD,
            &["is not a valid operation id", "1 to 128"],
        ),
        case(
            "not a string",
            SUBMIT,
            op(json!(7), json!({}), json!({})),
            BAD,
            &["id: must be a string"],
        ),
        // A pool that does not exist is "no such object" (HTTP 404, code 500), as a node or
        // tree is: not a generic error.
        case(
            "set a missing pool",
            ("PUT", "/api/v1/pools/nope"),
            json!({"config": {"weight": 2}}),
            (404, 500),
            &["pool \"nope\" does not exist"],
        ),
        case(
            "remove a missing pool",
            ("DELETE", "/api/v1/pools/nope"),
            Value::Null,
            (404, 500),
            &["pool \"nope\" does not exist"],
        ),
        case(
            "a pool under a missing parent",
            ("POST", "/api/v1/pools"),
            json!({"name": "q", "parent": "nope"}),
            (404, 500),
            &["pool \"nope\" does not exist"],
        ),
        // Type errors name the pool or field in user words, never a Rust type (issue 18).
        case(
            "a pool weight that is a word",
            ("POST", "/api/v1/pools"),
            json!({"name": "q", "config": {"weight": "heavy"}}),
            BAD,
            &["\"q\"", "weight", "the string \"heavy\", expected a number"],
        ),
        case(
            "a negative pool operation count",
            ("POST", "/api/v1/pools"),
            json!({"name": "q", "config": {"max_operation_count": -1}}),
            BAD,
            &[
                "\"q\"",
                "max_operation_count",
                "expected a whole number (0 or more)",
            ],
        ),
        case(
            "a pool mode that is a list",
            ("POST", "/api/v1/pools"),
            json!({"name": "q", "config": {"mode": ["fifo"]}}),
            BAD,
            &["\"q\"", "mode", "a list"],
        ),
        case(
            "a job count that is a fraction",
            SUBMIT,
            op(json!("frac"), json!({"job_count": 1.5}), json!({})),
            BAD,
            &["tasks[0].job_count", "must be a whole number of jobs"],
        ),
        case(
            "a task list that is an object",
            SUBMIT,
            json!({"id": "obj", "pool": "p", "tasks": {"job_count": 1}}),
            BAD,
            &["tasks", "an object, expected a list"],
        ),
        // Unknown fields, named with their path.
        case(
            "an unknown field",
            SUBMIT,
            op(json!("u1"), json!({}), json!({"poool": "p"})),
            BAD,
            &["unknown field `poool`"],
        ),
        case(
            "an unknown field in a task",
            SUBMIT,
            op(json!("u2"), json!({"envv": {}}), json!({})),
            BAD,
            &["tasks[0]", "unknown field `envv`"],
        ),
        case(
            "an unknown field in per-tree options",
            SUBMIT,
            op(
                json!("u3"),
                json!({}),
                json!({"scheduling_options_per_pool_tree": {"default": {"weigth": 2}}}),
            ),
            BAD,
            &["unknown field `weigth`"],
        ),
        case(
            "register: an unknown field",
            REGISTER,
            json!({"node_id": "n1", "resources": {}, "tag": ["x"]}),
            BAD,
            &["unknown field `tag`"],
        ),
        case(
            "heartbeat: an unknown field",
            HEARTBEAT,
            json!({"node_id": "n1", "runing": []}),
            BAD,
            &["unknown field `runing`"],
        ),
        case(
            "heartbeat: an unknown field in a finished job",
            HEARTBEAT,
            json!({"node_id": "n1", "finished": [{"job": "0.1", "outcome": "completed",
                    "exitcode": 0}]}),
            BAD,
            &["finished[0]", "unknown field `exitcode`"],
        ),
        case(
            "pool create: an unknown field",
            ("POST", "/api/v1/pools"),
            json!({"name": "q", "parnt": "p"}),
            BAD,
            &["unknown field `parnt`"],
        ),
        case(
            "pool create: an unknown option",
            ("POST", "/api/v1/pools"),
            json!({"name": "q", "config": {"weigth": 2}}),
            BAD,
            &["weigth"],
        ),
        case(
            "pool update: an unknown field",
            ("PUT", "/api/v1/pools/p"),
            json!({"confg": {}}),
            BAD,
            &["unknown field `confg`"],
        ),
        case(
            "tree apply: an unknown option",
            ("PUT", "/api/v1/tree"),
            json!({"pools": {"p": {"weigth": 1}}}),
            BAD,
            &["weigth"],
        ),
        case(
            "operation update: an unknown field",
            ("POST", "/api/v1/operations/x/update"),
            json!({"wieght": 2}),
            BAD,
            &["unknown field `wieght`"],
        ),
        // Node ids.
        case(
            "register: a node id with a slash",
            REGISTER,
            json!({"node_id": "a/b", "resources": {}}),
            BAD,
            &["node_id: \"a/b\" is not a valid node id"],
        ),
        case(
            "register: an empty node id",
            REGISTER,
            json!({"node_id": "", "resources": {}}),
            BAD,
            &["node_id: \"\""],
        ),
        // Job counts.
        case(
            "u32::MAX jobs",
            SUBMIT,
            op(json!("c1"), json!({"job_count": u32::MAX}), json!({})),
            BAD,
            &["tasks[0].job_count: too many jobs", "at most 1000000"],
        ),
        case(
            "sums over tasks",
            SUBMIT,
            json!({"id": "c2", "tasks": [
                 {"job_count": 600_000, "command": ["true"]},
                 {"job_count": 600_000, "command": ["true"]}]}),
            BAD,
            &["tasks[1].job_count: too many jobs"],
        ),
        case(
            "two tasks of 3e9 (their u32 sum would overflow)",
            SUBMIT,
            json!({"id": "c3", "tasks": [
                 {"job_count": 3_000_000_000u64, "command": ["true"]},
                 {"job_count": 3_000_000_000u64, "command": ["true"]}]}),
            BAD,
            &["too many jobs"],
        ),
        case(
            "a negative count",
            SUBMIT,
            op(json!("c4"), json!({"job_count": -1}), json!({})),
            BAD,
            &["tasks[0].job_count: must be a whole number"],
        ),
        case(
            "beyond u64",
            SUBMIT,
            op(json!("c5"), json!({"job_count": 1e30}), json!({})),
            BAD,
            &["tasks[0].job_count"],
        ),
        // Not JSON, not an object.
        case(
            "an array",
            SUBMIT,
            json!([1, 2]),
            BAD,
            &["an operation must be a JSON object"],
        ),
        case(
            "a method the route does not take",
            ("DELETE", "/api/v1/operations"),
            json!({}),
            (405, 100_400),
            &["Method Not Allowed"],
        ),
    ];
    check(&app, cases).await;
    let raw = |what, body: &[u8], says| Case {
        what,
        method: "POST",
        uri: "/api/v1/operations",
        body: body.to_vec(),
        status: 400,
        code: 100_400,
        says,
    };
    let cases = vec![
        raw("not JSON", b"{nope", &["bad request body"]),
        raw("trailing bytes", b"{} {}", &["bad request body"]),
        raw("empty", b"", &["bad request body"]),
    ];
    check(&app, cases).await;
    // Too large: the JSON error shape, with the limit.
    let big = vec![b' '; http::MAX_BODY_BYTES + 1];
    let cases = vec![Case {
        what: "a body above the limit",
        method: "POST",
        uri: "/api/v1/operations",
        body: big,
        status: 413,
        code: 100_413,
        says: &["larger than the 8388608 bytes (8 MiB) /api/v1/operations takes"],
    }];
    check(&app, cases).await;
    // A good operation still goes in.
    let (status, body) = call(
        &app,
        "POST",
        "/api/v1/operations",
        op(json!("ok-1.x_y"), json!({}), json!({})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

// ---- hostile bodies ---------------------------------------------------------------------------

/// Field names the routes know, and some they do not.
const NAMES: &[&str] = &[
    "id",
    "user",
    "pool",
    "tasks",
    "job_count",
    "resources",
    "command",
    "env",
    "cpu",
    "memory",
    "gpu",
    "user_slots",
    "network",
    "weight",
    "resource_limits",
    "pool_trees",
    "scheduling_options_per_pool_tree",
    "default",
    "node_id",
    "running",
    "finished",
    "job",
    "outcome",
    "exit_code",
    "name",
    "parent",
    "config",
    "pools",
    "mode",
    "acl",
    "strong_guarantee_resources",
    "max_running_operation_count",
    "preemption_mode",
    "interruption_signal",
    "gang",
    "time_limit_ms",
    "tags",
    "node_credential",
    "x",
    "",
];

fn hostile_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![Just(1e308), Just(-1e308), Just(0.5), Just(-0.0)].prop_map(Value::from),
        prop_oneof![Just(u32::MAX as u64), Just(u32::MAX as u64 + 1), Just(0)]
            .prop_map(Value::from),
        "[a-z0-9./ _-]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("../../etc"),
            Just("\u{0}"),
            Just("<Root>"),
            Just("p"),
            Just("default"),
            Just("n1"),
            Just("0.1"),
            Just("completed"),
            Just("sleep"),
            Just("1e400"),
            Just("-5"),
            Just("4GiB"),
            Just("NaN"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            prop::collection::vec((prop::sample::select(NAMES), inner), 0..6).prop_map(|fields| {
                Value::Object(
                    fields
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                )
            }),
        ]
    })
}

/// A valid body of each route, to mangle.
fn valid(route: usize) -> Value {
    match route {
        0 => op(json!("v"), json!({}), json!({})),
        1 => json!({"name": "q", "parent": "p", "config": {"weight": 2}}),
        2 => json!({"config": {"weight": 3}}),
        3 => json!({"pools": {"p": {}}}),
        4 => json!({"weight": 2, "pool": "p"}),
        5 => json!({"node_id": "n1", "resources": {"cpu": 2, "user_slots": 4}}),
        _ => json!({"node_id": "n1", "running": [], "finished": []}),
    }
}

const ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/v1/operations"),
    ("POST", "/api/v1/pools"),
    ("PUT", "/api/v1/pools/p"),
    ("PUT", "/api/v1/tree"),
    ("POST", "/api/v1/operations/fz/update"),
    ("POST", "/api/v1/agent/register"),
    ("POST", "/api/v1/agent/heartbeat"),
];

/// A body for `route`: random JSON, or a valid body with one field (at any depth) replaced.
fn body_for() -> impl Strategy<Value = (usize, Value)> {
    prop_oneof![3 => random_or_mangled(), 1 => counts()]
}

/// A submit of 1 to 3 tasks with job counts at the edges of `u32`.
fn counts() -> impl Strategy<Value = (usize, Value)> {
    let count = prop_oneof![
        Just(0u64),
        Just(1),
        Just(1 << 31),
        Just(u64::from(u32::MAX)),
        Just(1 << 32),
        any::<u32>().prop_map(u64::from),
    ];
    prop::collection::vec(count, 1..4).prop_map(|counts| {
        let tasks: Vec<Value> = counts
            .into_iter()
            .map(|n| json!({"job_count": n, "resources": {"cpu": 0.01}, "command": ["true"]}))
            .collect();
        (0, json!({"pool": "p", "tasks": tasks}))
    })
}

/// Random JSON, or a valid body with one member replaced by random JSON.
fn random_or_mangled() -> impl Strategy<Value = (usize, Value)> {
    (
        0..ROUTES.len(),
        hostile_json(),
        any::<bool>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(route, random, mangle, at)| {
            if !mangle {
                return (route, random);
            }
            let mut body = valid(route);
            // Replace one object member (any depth), the one `at` picks.
            let pick = at.index(members(&body).max(1));
            replace_nth(&mut body, pick, &mut 0, &random);
            (route, body)
        })
}

/// How many object members `v` has, at any depth.
fn members(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.values().map(|x| 1 + members(x)).sum(),
        Value::Array(a) => a.iter().map(members).sum(),
        _ => 0,
    }
}

/// Replaces the `target`-th object member (depth first, as `members` counts) by `with`.
fn replace_nth(v: &mut Value, target: usize, n: &mut usize, with: &Value) -> bool {
    match v {
        Value::Object(m) => {
            for x in m.values_mut() {
                if *n == target {
                    *x = with.clone();
                    return true;
                }
                *n += 1;
                if replace_nth(x, target, n, with) {
                    return true;
                }
            }
            false
        }
        Value::Array(a) => a.iter_mut().any(|x| replace_nth(x, target, n, with)),
        _ => false,
    }
}

#[test]
fn hostile_bodies_get_json_answers_and_scheduling_goes_on() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = rt.block_on(async {
        let app = app(dir.path());
        // Something to act on: a node and an operation of its own.
        let (s, b) = call(&app, "POST", "/api/v1/agent/register", valid(5)).await;
        assert_eq!(s, 200, "{b}");
        let (s, b) = call(
            &app,
            "POST",
            "/api/v1/operations",
            op(json!("fz"), json!({}), json!({})),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        app
    });
    let config = ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |((route, body) in body_for())| {
        let (method, uri) = ROUTES[route];
        let (status, value, text) = rt.block_on(send(&app, method, uri, body.to_string().into_bytes()));
        prop_assert!(status == 200 || (400..500).contains(&status),
            "{method} {uri} {body}: HTTP {status}: {text}");
        if status != 200 {
            prop_assert!(value["code"].is_u64() && value["message"].is_string(),
                "{method} {uri} {body}: not the JSON error shape: {text}");
        }
    });
    // The server still heartbeats and schedules (in a tree set back to a known one: the
    // random bodies may have changed it, and filled pool `p`).
    rt.block_on(async {
        let tree = json!({"pools": {"p": {}, "after": {}}});
        let (s, b) = call(&app, "PUT", "/api/v1/tree", tree).await;
        assert_eq!(s, 200, "{b}");
        let (s, b) = call(
            &app,
            "POST",
            "/api/v1/agent/register",
            json!({"node_id": "after", "resources": {"cpu": 4, "user_slots": 8}}),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let (s, b) = call(
            &app,
            "POST",
            "/api/v1/operations",
            json!({"id": "after-op", "pool": "after", "tasks": [{"job_count": 1,
                   "resources": {"cpu": 1}, "command": ["true"]}]}),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (s, hb) = call(
                &app,
                "POST",
                "/api/v1/agent/heartbeat",
                json!({"node_id": "after"}),
            )
            .await;
            assert_eq!(s, 200, "{hb}");
            let (_, op) = call(&app, "GET", "/api/v1/operations/after-op", Value::Null).await;
            if op["job_counts"]["running"] == 1 || op["job_counts"]["completed"] == 1 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "nothing scheduled: {op}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
}

/// A submission without an id is refused without naming the id the server would have given
/// it (which never exists); the message still names the field.
#[tokio::test]
async fn errors_of_a_submission_without_an_id_name_no_id() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let cases: &[(Value, Value, &str)] = &[
        (json!({}), json!({"weight": 0}), "weight"),
        (
            json!({"time_limit_ms": 0}),
            json!({}),
            "tasks[0].time_limit_ms",
        ),
        (
            json!({"resources": {"cpu": 0}}),
            json!({}),
            "tasks[0].resources",
        ),
        (
            json!({}),
            json!({"fair_share_starvation_tolerance": 2}),
            "fair_share_starvation_tolerance",
        ),
        (json!({}), json!({"pool_trees": ["nope"]}), "pool_trees"),
    ];
    for (task, extra, field) in cases {
        let mut body = op(Value::Null, task.clone(), extra.clone());
        body.as_object_mut().unwrap().remove("id");
        let before = state(&app).await;
        let (status, reply) = call(&app, "POST", "/api/v1/operations", body.clone()).await;
        let message = reply["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{body}: {reply}");
        assert!(
            message.contains(field),
            "{body}: {message:?} lacks {field:?}"
        );
        assert!(
            !message.contains("op-"),
            "{body}: {message:?} names a generated id"
        );
        assert_eq!(state(&app).await, before, "{body} changed something");
    }
}

/// A body with a key twice is read as before bodies were parsed straight into their types:
/// the last one counts (a JSON object read as a whole keeps the last value of a key).
#[tokio::test]
async fn a_key_given_twice_takes_the_last_value() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let body = r#"{"node_id": "first", "node_id": "second",
                   "resources": {"user_slots": 1, "cpu": 1}}"#;
    let (status, reply, text) = send(&app, "POST", REGISTER.1, body.into()).await;
    assert_eq!(status, 200, "{text}");
    assert!(reply.is_object(), "{text}");
    let (status, nodes) = call(&app, "GET", "/api/v1/nodes", Value::Null).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["second"]);
}
