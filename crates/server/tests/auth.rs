//! API tokens and pool ACLs: a server with `[auth]` users and a tree with ACLs, driven by
//! cases of (who, request) → expected status and error code. After every refused request the
//! operations, the trees' configurations and the nodes are what they were before.

mod common;

use common::Running;
use serde_json::{Value, json};

const ROOT: &str = "t-root";
const ALICE: &str = "t-alice";
const BOB: &str = "t-bob";
const CAROL: &str = "t-carol";
const DAVE: &str = "t-dave";
const MALLORY: &str = "t-mallory";
const AGENT: &str = "t-agent";

fn users() -> Value {
    json!([
        {"name": "root", "token": ROOT},
        {"name": "alice", "token": ALICE, "groups": ["ml"]},
        {"name": "bob", "token": BOB},
        {"name": "carol", "token": CAROL},
        {"name": "dave", "token": DAVE, "groups": ["opsteam"]},
        {"name": "mallory", "token": MALLORY, "groups": ["ml"]},
    ])
}

fn allow(subjects: &[&str], permissions: &[&str]) -> Value {
    json!({"action": "allow", "subjects": subjects, "permissions": permissions})
}

fn deny(subjects: &[&str], permissions: &[&str]) -> Value {
    json!({"action": "deny", "subjects": subjects, "permissions": permissions})
}

/// Two trees. `default` (no `default_parent_pool`: ephemeral pools at the root):
/// `research` (ml may use, alice administers and manages, mallory is denied) with `adhoc`
/// (bob may use; inherits) and `private` (carol only, `inherit_acl = false`), `open` (no
/// ACL), `locked` (carol uses and administers), `ops` (everyone uses, opsteam manages),
/// `readable` (bob and carol use, opsteam reads).
/// `gpu` (`default_parent_pool = "team"`): `team` (ml may use), `secret` (carol only).
fn trees() -> Value {
    json!({"default_tree": "default", "pool_trees": {
        "default": {"config": {"node_tag_filter": "cpu"}, "pools": {
            "research": {
                "acl": [allow(&["ml"], &["use"]), allow(&["alice"], &["administer", "manage"]),
                        deny(&["mallory"], &["use"])],
                "pools": {
                    "adhoc": {"acl": [allow(&["bob"], &["use"])]},
                    "private": {"inherit_acl": false, "acl": [allow(&["carol"], &["use"])]}
                }
            },
            "open": {},
            "locked": {"acl": [allow(&["carol"], &["use", "administer"])]},
            "ops": {"acl": [allow(&["everyone"], &["use"]), allow(&["opsteam"], &["manage"])]},
            "readable": {"acl": [allow(&["bob", "carol"], &["use"]),
                                 allow(&["opsteam"], &["read"])]}
        }},
        "gpu": {
            "config": {"node_tag_filter": "gpu", "default_parent_pool": "team"},
            "pools": {
                "team": {"acl": [allow(&["ml"], &["use"])]},
                "secret": {"acl": [allow(&["carol"], &["use"])]}
            }
        }
    }})
}

async fn start(auth: Value, agent_token: Option<&str>) -> Running {
    let mut config = json!({"pool_trees": trees(), "auth": auth, "node_timeout_ms": 600_000});
    if let Some(t) = agent_token {
        config["agent_token"] = json!(t);
    }
    common::start_with(config).await
}

/// An operation of one job in `pool`, with extra fields.
fn op(id: &str, pool: &str, extra: Value) -> Value {
    let mut body = json!({"id": id, "pool": pool,
        "tasks": [{"job_count": 1, "resources": {"cpu": 1}, "command": ["true"]}]});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    body
}

/// What a refused request must not change: operations (id, state, pool, user), every tree's
/// configuration, the nodes' states.
async fn state(server: &Running) -> Value {
    let (_, ops) = server
        .call_as(Some(ROOT), "GET", "/api/v1/operations?jobs=false", None)
        .await;
    let ops: Vec<Value> = ops
        .as_array()
        .unwrap()
        .iter()
        .map(|o| json!([o["id"], o["state"], o["pool"], o["user"]]))
        .collect();
    let mut trees = serde_json::Map::new();
    for tree in ["default", "gpu"] {
        let (_, t) = server
            .call_as(
                Some(ROOT),
                "GET",
                &format!("/api/v1/tree?tree={tree}"),
                None,
            )
            .await;
        trees.insert(tree.into(), t["config"].clone());
    }
    let (_, nodes) = server
        .call_as(Some(ROOT), "GET", "/api/v1/nodes", None)
        .await;
    let nodes: Vec<Value> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| json!([n["id"], n["state"]]))
        .collect();
    json!({"operations": ops, "trees": trees, "nodes": nodes})
}

/// One case: what it shows, the token sent, the request, the expected status and error code.
struct Case {
    what: &'static str,
    token: Option<&'static str>,
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    status: u16,
    code: Option<u64>,
}

fn case(
    what: &'static str,
    token: Option<&'static str>,
    (method, path, body): (&'static str, &'static str, Option<Value>),
    (status, code): (u16, Option<u64>),
) -> Case {
    Case {
        what,
        token,
        method,
        path,
        body,
        status,
        code,
    }
}

const OK: (u16, Option<u64>) = (200, None);
/// HTTP 401, code 109 (AuthenticationError).
const UNAUTHENTICATED: (u16, Option<u64>) = (401, Some(109));
/// HTTP 403, code 901 (AuthorizationError).
const FORBIDDEN: (u16, Option<u64>) = (403, Some(901));
/// HTTP 404, code 500 (ResolveError): no such tree, node or pool.
const NO_SUCH: (u16, Option<u64>) = (404, Some(500));
/// HTTP 400, code 1 (Generic): how the core refuses an operation naming a tree that does not
/// exist.
const REJECTED: (u16, Option<u64>) = (400, Some(1));

fn post(path: &'static str, body: Value) -> (&'static str, &'static str, Option<Value>) {
    ("POST", path, Some(body))
}

fn get(path: &'static str) -> (&'static str, &'static str, Option<Value>) {
    ("GET", path, None)
}

/// Runs the cases in order; a refused one must change nothing.
async fn check(server: &Running, cases: Vec<Case>) {
    for c in cases {
        let before = state(server).await;
        let (status, body) = server
            .call_as(c.token, c.method, c.path, c.body.clone())
            .await;
        let label = format!("{} ({} {} as {:?})", c.what, c.method, c.path, c.token);
        assert_eq!(status, c.status, "{label}: {body}");
        if let Some(code) = c.code {
            assert_eq!(body["code"], code, "{label}: {body}");
        }
        if status == 403 {
            let attributes = &body["attributes"];
            assert!(attributes["user"].is_string(), "{label}: {body}");
            assert!(attributes["permission"].is_string(), "{label}: {body}");
        }
        if let (Some(token), 401) = (c.token, status) {
            assert!(
                !body.to_string().contains(token),
                "{label}: the reply echoes the token: {body}"
            );
        }
        if status >= 400 {
            assert_eq!(state(server).await, before, "{label} changed something");
        }
    }
}

#[tokio::test]
async fn tokens_and_pool_acls_decide_who_may_do_what() {
    let server = start(
        json!({"superusers": ["root"], "users": users()}),
        Some(AGENT),
    )
    .await;
    server
        .register_as(AGENT, "n1", json!({"cpu": 4, "user_slots": 1}), &["cpu"])
        .await;
    let (_, tree) = server.call("GET", "/api/v1/tree", None).await;
    let tree_config = tree["config"].clone();

    let cases = vec![
        // Authentication.
        case(
            "no token: a change is refused",
            None,
            post("/api/v1/operations", op("x1", "open", json!({}))),
            UNAUTHENTICATED,
        ),
        case(
            "an unknown token is refused (and not echoed)",
            Some("nope-token"),
            post("/api/v1/operations", op("x1", "open", json!({}))),
            UNAUTHENTICATED,
        ),
        case(
            "no token: a node action is refused",
            None,
            post("/api/v1/nodes/n1/drain", json!({})),
            UNAUTHENTICATED,
        ),
        case(
            "an anonymous read is allowed",
            None,
            get("/api/v1/operations"),
            OK,
        ),
        case(
            "an anonymous read of a tree",
            None,
            get("/api/v1/tree?tree=gpu"),
            OK,
        ),
        case(
            "a read with an unknown token is refused",
            Some("nope-token"),
            get("/api/v1/operations"),
            UNAUTHENTICATED,
        ),
        case(
            "an authenticated read",
            Some(ALICE),
            get("/api/v1/pool_trees"),
            OK,
        ),
        case(
            "agents' heartbeat takes the agent token, not a user's",
            Some(AGENT),
            post(
                "/api/v1/agent/heartbeat",
                json!({"node_id": "n1", "running": [],
                       "node_credential": server.credential("n1")}),
            ),
            OK,
        ),
        // Submit.
        case(
            "submit as another user",
            Some(BOB),
            post(
                "/api/v1/operations",
                op("b-as-a", "open", json!({"user": "alice"})),
            ),
            FORBIDDEN,
        ),
        case(
            "a superuser submits for another user",
            Some(ROOT),
            post(
                "/api/v1/operations",
                op("r-for-a", "open", json!({"user": "alice"})),
            ),
            OK,
        ),
        case(
            "use allowed through a group",
            Some(ALICE),
            post("/api/v1/operations", op("a1", "research", json!({}))),
            OK,
        ),
        case(
            "no entry allows use",
            Some(BOB),
            post(
                "/api/v1/operations",
                op("b-research", "research", json!({})),
            ),
            FORBIDDEN,
        ),
        case(
            "deny wins over a group's allow",
            Some(MALLORY),
            post("/api/v1/operations", op("m1", "research", json!({}))),
            FORBIDDEN,
        ),
        case(
            "a subpool's own entry",
            Some(BOB),
            post("/api/v1/operations", op("b1", "adhoc", json!({}))),
            OK,
        ),
        case(
            "an inherited entry (the parent's group allow)",
            Some(ALICE),
            post("/api/v1/operations", op("a-adhoc", "adhoc", json!({}))),
            OK,
        ),
        case(
            "an inherited deny",
            Some(MALLORY),
            post("/api/v1/operations", op("m-adhoc", "adhoc", json!({}))),
            FORBIDDEN,
        ),
        case(
            "inherit_acl = false drops the parent's entries",
            Some(ALICE),
            post("/api/v1/operations", op("a-private", "private", json!({}))),
            FORBIDDEN,
        ),
        case(
            "a pool without ACL is open",
            Some(CAROL),
            post("/api/v1/operations", op("c-open", "open", json!({}))),
            OK,
        ),
        case(
            "without `user` the operation is the caller's",
            Some(BOB),
            post("/api/v1/operations", op("b-nouser", "open", json!({}))),
            OK,
        ),
        case(
            "an ephemeral pool at the root",
            Some(ALICE),
            post("/api/v1/operations", op("a-eph", "alices", json!({}))),
            OK,
        ),
        case(
            "an ephemeral pool is checked on default_parent_pool (refused)",
            Some(BOB),
            post(
                "/api/v1/operations",
                op("b-gpu", "bobs", json!({"pool_trees": ["gpu"]})),
            ),
            FORBIDDEN,
        ),
        case(
            "an ephemeral pool is checked on default_parent_pool (allowed)",
            Some(ALICE),
            post(
                "/api/v1/operations",
                op("a-gpu", "alices", json!({"pool_trees": ["gpu"]})),
            ),
            OK,
        ),
        case(
            "use is needed in every tree the operation runs in",
            Some(ALICE),
            post(
                "/api/v1/operations",
                op(
                    "a-both",
                    "research",
                    json!({"pool_trees": ["default", "gpu"],
                           "scheduling_options_per_pool_tree": {"gpu": {"pool": "secret"}}}),
                ),
            ),
            FORBIDDEN,
        ),
        case(
            "use in both trees",
            Some(ALICE),
            post(
                "/api/v1/operations",
                op(
                    "a-both",
                    "research",
                    json!({"pool_trees": ["default", "gpu"],
                           "scheduling_options_per_pool_tree": {"gpu": {"pool": "team"}}}),
                ),
            ),
            OK,
        ),
        case(
            "a per-tree move needs use on the new pool in that tree",
            Some(ALICE),
            post(
                "/api/v1/operations/a-both/update",
                json!({"scheduling_options_per_pool_tree": {"gpu": {"pool": "secret"}}}),
            ),
            FORBIDDEN,
        ),
        // Abort and update.
        case(
            "another user aborts (refused)",
            Some(BOB),
            post("/api/v1/operations/a1/abort", json!({})),
            FORBIDDEN,
        ),
        case(
            "another user updates (refused)",
            Some(BOB),
            post("/api/v1/operations/a1/update", json!({"weight": 2})),
            FORBIDDEN,
        ),
        case(
            "the owner moves it to a pool they may not use",
            Some(ALICE),
            post("/api/v1/operations/a1/update", json!({"pool": "private"})),
            FORBIDDEN,
        ),
        case(
            "the owner updates their operation",
            Some(ALICE),
            post("/api/v1/operations/a1/update", json!({"weight": 2})),
            OK,
        ),
        case(
            "manage through the parent's ACL aborts another's operation",
            Some(ALICE),
            post("/api/v1/operations/b1/abort", json!({})),
            OK,
        ),
        case(
            "the owner aborts their operation",
            Some(BOB),
            post("/api/v1/operations/b-nouser/abort", json!({})),
            OK,
        ),
        case(
            "an ephemeral pool at the root: others may not manage",
            Some(CAROL),
            post("/api/v1/operations/a-eph/abort", json!({})),
            FORBIDDEN,
        ),
        case(
            "everyone may use `ops`",
            Some(CAROL),
            post("/api/v1/operations", op("c-ops", "ops", json!({}))),
            OK,
        ),
        case(
            "use is not manage",
            Some(BOB),
            post("/api/v1/operations/c-ops/abort", json!({})),
            FORBIDDEN,
        ),
        case(
            "the manage permission (a group's) aborts",
            Some(DAVE),
            post("/api/v1/operations/c-ops/abort", json!({})),
            OK,
        ),
        case(
            "a superuser aborts any operation",
            Some(ROOT),
            post("/api/v1/operations/a-adhoc/abort", json!({})),
            OK,
        ),
        // Pools.
        case(
            "administer on the parent creates a pool",
            Some(ALICE),
            post(
                "/api/v1/pools",
                json!({"name": "alice-sub", "parent": "research", "config": {}}),
            ),
            OK,
        ),
        case(
            "no administer on the parent",
            Some(BOB),
            post(
                "/api/v1/pools",
                json!({"name": "bob-sub", "parent": "research", "config": {}}),
            ),
            FORBIDDEN,
        ),
        case(
            "a pool without ACL is open to use, not to change: no subpool",
            Some(CAROL),
            post(
                "/api/v1/pools",
                json!({"name": "carol-sub", "parent": "open", "config": {}}),
            ),
            FORBIDDEN,
        ),
        case(
            "a pool without ACL: no option change",
            Some(CAROL),
            (
                "PUT",
                "/api/v1/pools/open",
                Some(json!({"config": {"weight": 5}})),
            ),
            FORBIDDEN,
        ),
        case(
            "a pool without ACL: a superuser changes it",
            Some(ROOT),
            (
                "PUT",
                "/api/v1/pools/open",
                Some(json!({"config": {"weight": 2}})),
            ),
            OK,
        ),
        case(
            "a top-level pool by a non-superuser",
            Some(ALICE),
            post("/api/v1/pools", json!({"name": "toplevel", "config": {}})),
            FORBIDDEN,
        ),
        case(
            "a top-level pool by a superuser",
            Some(ROOT),
            post("/api/v1/pools", json!({"name": "toplevel", "config": {}})),
            OK,
        ),
        case(
            "a pool in another tree: administer there",
            Some(ALICE),
            post(
                "/api/v1/pools?tree=gpu",
                json!({"name": "gpu-sub", "parent": "team", "config": {}}),
            ),
            FORBIDDEN,
        ),
        case(
            "set options without administer",
            Some(BOB),
            (
                "PUT",
                "/api/v1/pools/research",
                Some(json!({"config": {"weight": 5}})),
            ),
            FORBIDDEN,
        ),
        case(
            // (Its weight too: alice administers its parent, research.)
            "set options with administer (inherited)",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/pools/alice-sub",
                Some(json!({"config": {"weight": 2}})),
            ),
            OK,
        ),
        // A pool's weight and guarantees divide its parent's resources: they take
        // administer on the parent (superusers for a top-level pool), not on the pool.
        case(
            "a top-level pool's own administrator: other options (its ACL kept)",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/pools/research",
                Some(json!({"config": {
                    "acl": [allow(&["ml"], &["use"]), allow(&["alice"], &["administer", "manage"]),
                            deny(&["mallory"], &["use"])],
                    "max_running_operation_count": 7
                }})),
            ),
            OK,
        ),
        case(
            "a top-level pool's own administrator: its guarantees",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/pools/research",
                Some(json!({"config": {"strong_guarantee_resources": {"cpu": 1000}}})),
            ),
            FORBIDDEN,
        ),
        case(
            "a top-level pool's own administrator: its weight",
            Some(CAROL),
            (
                "PUT",
                "/api/v1/pools/locked",
                Some(json!({"config": {"weight": 1000}})),
            ),
            FORBIDDEN,
        ),
        case(
            "move under a parent without administer there",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/pools/alice-sub",
                Some(json!({"parent": "locked"})),
            ),
            FORBIDDEN,
        ),
        case(
            "move without administer on the pool",
            Some(CAROL),
            (
                "PUT",
                "/api/v1/pools/alice-sub",
                Some(json!({"parent": "locked"})),
            ),
            FORBIDDEN,
        ),
        case(
            "move to the top level by a non-superuser",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/pools/alice-sub",
                Some(json!({"parent": "<Root>"})),
            ),
            FORBIDDEN,
        ),
        case(
            "remove without administer",
            Some(BOB),
            ("DELETE", "/api/v1/pools/alice-sub", None),
            FORBIDDEN,
        ),
        case(
            "remove with administer",
            Some(ALICE),
            ("DELETE", "/api/v1/pools/alice-sub", None),
            OK,
        ),
        case(
            "remove a top-level pool by its own administrator",
            Some(CAROL),
            ("DELETE", "/api/v1/pools/locked", None),
            FORBIDDEN,
        ),
        // Whole trees and nodes: superusers only.
        case(
            "apply a tree by a non-superuser",
            Some(ALICE),
            ("PUT", "/api/v1/tree", Some(tree_config.clone())),
            FORBIDDEN,
        ),
        case(
            "a dry-run apply by a non-superuser",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/tree?dry_run=true",
                Some(tree_config.clone()),
            ),
            FORBIDDEN,
        ),
        case(
            "apply a tree by a superuser",
            Some(ROOT),
            ("PUT", "/api/v1/tree?dry_run=true", Some(tree_config)),
            OK,
        ),
        case(
            "a node action by a non-superuser",
            Some(ALICE),
            post("/api/v1/nodes/n1/drain", json!({})),
            FORBIDDEN,
        ),
        case(
            "a node action by a superuser",
            Some(ROOT),
            post("/api/v1/nodes/n1/drain", json!({})),
            OK,
        ),
        // Names are resolved before permissions: a request naming a tree, node or pool that
        // does not exist gets the error a superuser gets (each case is followed by the
        // superuser's), not a refusal.
        case(
            "a node action on a node that does not exist",
            Some(ALICE),
            post("/api/v1/nodes/nope/drain", json!({})),
            NO_SUCH,
        ),
        case(
            "a node action on a node that does not exist (superuser)",
            Some(ROOT),
            post("/api/v1/nodes/nope/drain", json!({})),
            NO_SUCH,
        ),
        case(
            "apply a tree that does not exist",
            Some(ALICE),
            ("PUT", "/api/v1/tree?tree=nope", Some(json!({}))),
            NO_SUCH,
        ),
        case(
            "a dry-run apply of a tree that does not exist",
            Some(BOB),
            (
                "PUT",
                "/api/v1/tree?tree=nope&dry_run=true",
                Some(json!({})),
            ),
            NO_SUCH,
        ),
        case(
            "apply a tree that does not exist (superuser)",
            Some(ROOT),
            ("PUT", "/api/v1/tree?tree=nope", Some(json!({}))),
            NO_SUCH,
        ),
        case(
            "a top-level pool in a tree that does not exist",
            Some(ALICE),
            post(
                "/api/v1/pools?tree=nope",
                json!({"name": "x", "config": {}}),
            ),
            NO_SUCH,
        ),
        case(
            "a pool's options in a tree that does not exist",
            Some(BOB),
            (
                "PUT",
                "/api/v1/pools/research?tree=nope",
                Some(json!({"config": {"weight": 5}})),
            ),
            NO_SUCH,
        ),
        case(
            "submit into a tree that does not exist (and a pool refused in the other)",
            Some(BOB),
            post(
                "/api/v1/operations",
                op(
                    "b-nope",
                    "research",
                    json!({"pool_trees": ["default", "nope"]}),
                ),
            ),
            REJECTED,
        ),
        case(
            "submit as another user into a tree that does not exist",
            Some(BOB),
            post(
                "/api/v1/operations",
                op(
                    "b-nope",
                    "open",
                    json!({"user": "alice", "pool_trees": ["nope"]}),
                ),
            ),
            REJECTED,
        ),
        case(
            "per-tree options for a tree that does not exist",
            Some(BOB),
            post(
                "/api/v1/operations",
                op(
                    "b-nope",
                    "research",
                    json!({"scheduling_options_per_pool_tree": {"nope": {"pool": "x"}}}),
                ),
            ),
            REJECTED,
        ),
        case(
            "submit into a tree that does not exist (superuser)",
            Some(ROOT),
            post(
                "/api/v1/operations",
                op(
                    "r-nope",
                    "research",
                    json!({"pool_trees": ["default", "nope"]}),
                ),
            ),
            REJECTED,
        ),
        case(
            "update another's operation in a tree that does not exist",
            Some(BOB),
            post(
                "/api/v1/operations/a1/update",
                json!({"scheduling_options_per_pool_tree": {"nope": {"weight": 2}}}),
            ),
            REJECTED,
        ),
        case(
            "update an operation in a tree that does not exist (superuser)",
            Some(ROOT),
            post(
                "/api/v1/operations/a1/update",
                json!({"scheduling_options_per_pool_tree": {"nope": {"weight": 2}}}),
            ),
            REJECTED,
        ),
        case(
            "move a pool that does not exist to the top level",
            Some(ALICE),
            (
                "PUT",
                "/api/v1/pools/nope",
                Some(json!({"parent": "<Root>"})),
            ),
            NO_SUCH,
        ),
        case(
            "move a pool that does not exist under a parent one may not administer",
            Some(CAROL),
            (
                "PUT",
                "/api/v1/pools/nope",
                Some(json!({"parent": "research"})),
            ),
            NO_SUCH,
        ),
        case(
            "move a pool that does not exist (superuser)",
            Some(ROOT),
            (
                "PUT",
                "/api/v1/pools/nope",
                Some(json!({"parent": "<Root>"})),
            ),
            NO_SUCH,
        ),
        case(
            "abort an operation that does not exist",
            Some(BOB),
            post("/api/v1/operations/nope/abort", json!({})),
            (404, Some(1915)),
        ),
        case(
            "an existing pool the user may not administer: still refused",
            Some(CAROL),
            (
                "PUT",
                "/api/v1/pools/research",
                Some(json!({"parent": "<Root>"})),
            ),
            FORBIDDEN,
        ),
        case(
            "an existing node: still refused",
            Some(BOB),
            post("/api/v1/nodes/n1/undrain", json!({})),
            FORBIDDEN,
        ),
    ];
    check(&server, cases).await;

    // Who submitted what.
    let users: Vec<(String, String)> = ["r-for-a", "a1", "b-nouser", "a-gpu"]
        .iter()
        .map(|id| id.to_string())
        .zip(["alice", "alice", "bob", "alice"].map(String::from))
        .collect();
    for (id, user) in users {
        let (_, o) = server
            .call("GET", &format!("/api/v1/operations/{id}"), None)
            .await;
        assert_eq!(o["user"], json!(user), "{id}: {o}");
    }
    // A refusal names the user, the permission, the pool and the tree, and says why.
    let (status, e) = server
        .call_as(
            Some(MALLORY),
            "POST",
            "/api/v1/operations",
            Some(op("m2", "adhoc", json!({}))),
        )
        .await;
    assert_eq!(status, 403, "{e}");
    assert_eq!(
        e["attributes"],
        json!({"user": "mallory", "permission": "use", "pool": "adhoc", "tree": "default"})
    );
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(r#"user "mallory" has no use permission on pool "adhoc""#)
            && message.contains(r#"denied by the ACL of "research""#),
        "{message}"
    );
    let (_, e) = server
        .call_as(
            Some(CAROL),
            "POST",
            "/api/v1/operations/a1/abort",
            Some(json!({})),
        )
        .await;
    assert_eq!(e["attributes"]["operation"], "a1", "{e}");
    assert_eq!(e["attributes"]["permission"], "manage", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"user "carol" may not abort operation "a1" of user "alice""#),
        "{message}"
    );
    server.stop().await;
}

#[tokio::test]
async fn authenticate_reads_and_agent_tokens() {
    let server = start(
        json!({"superusers": ["root"], "authenticate_reads": true, "users": users()}),
        Some(AGENT),
    )
    .await;
    let register = json!({"node_id": "n1", "resources": {"cpu": 1, "user_slots": 1}});
    let cases = vec![
        case(
            "an anonymous read is refused",
            None,
            get("/api/v1/operations"),
            UNAUTHENTICATED,
        ),
        case(
            "an anonymous event read is refused",
            None,
            get("/api/v1/events"),
            UNAUTHENTICATED,
        ),
        case(
            "an authenticated read",
            Some(BOB),
            get("/api/v1/operations"),
            OK,
        ),
        case("metrics need a token", None, get("/metrics"), (401, None)),
        case("metrics with a token", Some(BOB), get("/metrics"), OK),
        case("the page is served", None, get("/"), OK),
        case(
            "the page's files are served",
            None,
            get("/assets/app.js"),
            OK,
        ),
        case(
            "an unknown path needs a token too",
            None,
            get("/api/v1/nope"),
            UNAUTHENTICATED,
        ),
        case(
            "an unknown path with a token",
            Some(BOB),
            get("/api/v1/nope"),
            (404, Some(500)),
        ),
        case(
            "a user's token is not the agents'",
            Some(ROOT),
            post("/api/v1/agent/register", register.clone()),
            UNAUTHENTICATED,
        ),
        case(
            "the agents' token is not a user's",
            Some(AGENT),
            get("/api/v1/nodes"),
            UNAUTHENTICATED,
        ),
        case(
            "an agent registers with its token",
            Some(AGENT),
            post("/api/v1/agent/register", register),
            OK,
        ),
    ];
    check(&server, cases).await;
    server.stop().await;
}

/// Without users authentication is off: no token is needed and `user` is what the request
/// says, whatever the ACLs.
#[tokio::test]
async fn without_users_everything_is_open() {
    let server = start(json!({}), None).await;
    let cases = vec![
        case(
            "submit into a pool with an ACL, as anyone",
            None,
            post(
                "/api/v1/operations",
                op("o1", "private", json!({"user": "someone"})),
            ),
            OK,
        ),
        case(
            "a top-level pool",
            None,
            post("/api/v1/pools", json!({"name": "new", "config": {}})),
            OK,
        ),
        case(
            "any token is ignored",
            Some("whatever"),
            post("/api/v1/operations/o1/abort", json!({})),
            OK,
        ),
    ];
    check(&server, cases).await;
    let (_, o) = server.call("GET", "/api/v1/operations/o1", None).await;
    assert_eq!(o["user"], "someone");
    server.stop().await;
}

/// With users, the server does not start without `agent_token`, and says how to set it.
#[tokio::test]
async fn users_need_an_agent_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"auth": {"users": users()}});
    let error = match common::try_start_config(dir.path(), config).await {
        Ok(_) => panic!("the server started with users and no agent_token"),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("agent_token: required when [auth] has users")
            && error.contains("fairsched agent --token"),
        "{error}"
    );
}

/// A heartbeat as an agent with `credential` sends it: status and body.
async fn agent_heartbeat(server: &Running, credential: Option<&str>, body: Value) -> (u16, Value) {
    let mut body = body;
    if let Some(c) = credential {
        body["node_credential"] = json!(c);
    }
    server
        .call_as(Some(AGENT), "POST", "/api/v1/agent/heartbeat", Some(body))
        .await
}

/// Heartbeats `node` with its credential until one job started there; its id.
async fn start_one_job(server: &Running, node: &str) -> String {
    let credential = server.credential(node).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, hb) =
            agent_heartbeat(server, Some(&credential), json!({"node_id": node})).await;
        assert_eq!(status, 200, "{hb}");
        if let Some(job) = hb["start"][0]["job"].as_str() {
            return job.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no job started");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The state of job `job` of operation `op`.
async fn job_state(server: &Running, op: &str, job: &str) -> Value {
    let (_, o) = server
        .call_as(Some(ROOT), "GET", &format!("/api/v1/operations/{op}"), None)
        .await;
    let j = o["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == job)
        .unwrap_or_else(|| panic!("no job {job} in {o}"));
    json!([j["node"], j["state"], j["exit_code"]])
}

/// Node credentials: a heartbeat carries its own node's, from its last registration; any
/// other (none, another node's, an old one) is refused and changes nothing, and a node
/// reports the end of its own jobs only.
#[tokio::test]
async fn heartbeats_carry_their_nodes_credential() {
    let server = start(
        json!({"superusers": ["root"], "users": users()}),
        Some(AGENT),
    )
    .await;
    let slots = json!({"cpu": 1, "user_slots": 10});
    server
        .register_as(AGENT, "n1", slots.clone(), &["cpu"])
        .await;
    let (status, body) = server
        .call_as(
            Some(ROOT),
            "POST",
            "/api/v1/operations",
            Some(op(
                "o1",
                "open",
                json!({"tasks": [{"job_count": 1,
                "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
            )),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = start_one_job(&server, "n1").await;
    server.register_as(AGENT, "n2", slots, &["cpu"]).await;
    let n1 = server.credential("n1").unwrap();
    let n2 = server.credential("n2").unwrap();
    assert_ne!(n1, n2);
    assert!(n1.len() >= 32, "a credential of 32 random bytes: {n1}");
    let running = json!([job]);
    let ended = json!([{"job": job, "outcome": "completed", "exit_code": 0,
                        "stdout_tail": "forged"}]);
    // (what, credential, body, status, code)
    let cases: Vec<(&str, Option<&str>, Value, u16, u64)> = vec![
        (
            "no credential",
            None,
            json!({"node_id": "n1", "finished": ended}),
            401,
            109,
        ),
        (
            "another node's credential",
            Some(&n2),
            json!({"node_id": "n1", "finished": ended}),
            401,
            109,
        ),
        (
            "a made-up credential",
            Some("0123456789abcdef0123456789abcdef"),
            json!({"node_id": "n1", "finished": ended}),
            401,
            109,
        ),
        (
            "an empty credential",
            Some(""),
            json!({"node_id": "n1", "finished": ended}),
            401,
            109,
        ),
        (
            "a node that is not registered",
            Some(&n1),
            json!({"node_id": "n9"}),
            404,
            100_404,
        ),
        (
            "its own credential",
            Some(&n1),
            json!({"node_id": "n1", "running": running}),
            200,
            0,
        ),
        (
            "another node reports n1's job as ended (ignored)",
            Some(&n2),
            json!({"node_id": "n2", "finished": ended}),
            200,
            0,
        ),
    ];
    for (what, credential, body, status, code) in cases {
        let before = json!([state(&server).await, job_state(&server, "o1", &job).await]);
        let (got, reply) = agent_heartbeat(&server, credential, body).await;
        assert_eq!(got, status, "{what}: {reply}");
        if status != 200 {
            assert_eq!(reply["code"], code, "{what}: {reply}");
            assert!(
                reply["message"].as_str().unwrap().contains("register"),
                "{what}: the message says what to do: {reply}"
            );
            for secret in [&n1, &n2] {
                assert!(
                    !reply.to_string().contains(secret.as_str()),
                    "{what}: {reply}"
                );
            }
        }
        let after = json!([state(&server).await, job_state(&server, "o1", &job).await]);
        assert_eq!(after, before, "{what} changed something");
    }
    assert_eq!(
        job_state(&server, "o1", &job).await,
        json!(["n1", "running", null])
    );
    let (_, logs) = server
        .call_as(Some(ROOT), "GET", "/api/v1/operations/o1/logs", None)
        .await;
    assert!(!logs.to_string().contains("forged"), "{logs}");

    // A new registration replaces the credential: the old one is refused, the new one works.
    server
        .register_as(AGENT, "n1", json!({"cpu": 1, "user_slots": 10}), &["cpu"])
        .await;
    let renewed = server.credential("n1").unwrap();
    assert_ne!(renewed, n1);
    let (status, reply) = agent_heartbeat(
        &server,
        Some(&n1),
        json!({"node_id": "n1", "running": [job]}),
    )
    .await;
    assert_eq!((status, &reply["code"]), (401, &json!(109)), "{reply}");
    let (status, reply) = agent_heartbeat(
        &server,
        Some(&renewed),
        json!({"node_id": "n1", "finished": ended}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        job_state(&server, "o1", &job).await,
        json!(["n1", "completed", 0]),
        "its own node reports its end"
    );
    server.stop().await;
}

/// The `read` permission: an operation's output (`logs`), its jobs' environment and its
/// events are shown to its owner, superusers and those its pool's ACL lets read; others see
/// that it exists with its `env` values redacted, and get no output and no events of it.
#[tokio::test]
async fn reading_output_env_and_events_needs_read() {
    let server = start(
        json!({"superusers": ["root"], "users": users()}),
        Some(AGENT),
    )
    .await;
    server
        .register_as(AGENT, "n1", json!({"cpu": 3, "user_slots": 10}), &["cpu"])
        .await;
    let with_env = |id: &str, pool: &str| {
        op(
            id,
            pool,
            json!({"tasks": [{"job_count": 1, "resources": {"cpu": 1},
                "command": ["sleep", "60"], "env": {"API_KEY": "s3cr3t-value"}}]}),
        )
    };
    // bob's, in `readable` (opsteam reads), `open` (no ACL: everyone reads) and an ephemeral
    // pool at the root (its owner and superusers only).
    for (id, pool) in [
        ("guarded", "readable"),
        ("public", "open"),
        ("mine", "bobs"),
    ] {
        let (status, body) = server
            .call_as(
                Some(BOB),
                "POST",
                "/api/v1/operations",
                Some(with_env(id, pool)),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    // Their jobs run and end with some output (and events).
    let credential = server.credential("n1").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut jobs = Vec::new();
    while jobs.len() < 3 {
        assert!(std::time::Instant::now() < deadline, "jobs did not start");
        let (_, hb) = agent_heartbeat(
            &server,
            Some(&credential),
            json!({"node_id": "n1", "running": jobs}),
        )
        .await;
        for s in hb["start"].as_array().unwrap() {
            jobs.push(s["job"].clone());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let finished: Vec<Value> = jobs
        .iter()
        .map(|j| {
            json!({"job": j, "outcome": "completed", "exit_code": 0,
                        "stdout_tail": "the-output"})
        })
        .collect();
    let (status, body) = agent_heartbeat(
        &server,
        Some(&credential),
        json!({"node_id": "n1", "finished": finished}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // (who, operation, may read; the status of its logs when not)
    let cases: Vec<(Option<&str>, &str, bool, u16)> = vec![
        (Some(BOB), "guarded", true, 200),
        (Some(ROOT), "guarded", true, 200),
        (Some(DAVE), "guarded", true, 200),
        (Some(CAROL), "guarded", false, 403),
        (Some(ALICE), "guarded", false, 403),
        (None, "guarded", false, 401),
        (Some(CAROL), "public", true, 200),
        (None, "public", true, 200),
        (Some(BOB), "mine", true, 200),
        (Some(CAROL), "mine", false, 403),
        (None, "mine", false, 401),
    ];
    for (who, id, may, logs_status) in cases {
        let label = format!("{who:?} reads {id}");
        let env = if may { "s3cr3t-value" } else { "<redacted>" };
        let (status, one) = server
            .call_as(who, "GET", &format!("/api/v1/operations/{id}"), None)
            .await;
        assert_eq!(status, 200, "{label}: it is seen to exist: {one}");
        assert_eq!(
            one["spec"]["tasks"][0]["env"]["API_KEY"], env,
            "{label}: {one}"
        );
        assert_eq!(one["job_counts"]["completed"], 1, "{label}: {one}");
        let (_, list) = server
            .call_as(who, "GET", "/api/v1/operations?jobs=false", None)
            .await;
        let listed = list
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id)
            .unwrap_or_else(|| panic!("{label}: not listed: {list}"));
        assert_eq!(listed["spec"]["tasks"][0]["env"]["API_KEY"], env, "{label}");
        let (status, logs) = server
            .call_as(who, "GET", &format!("/api/v1/operations/{id}/logs"), None)
            .await;
        assert_eq!(status, logs_status, "{label}: logs: {logs}");
        assert_eq!(
            logs.to_string().contains("the-output"),
            may,
            "{label}: {logs}"
        );
        if !may {
            let message = logs["message"].as_str().unwrap();
            assert!(message.contains(id), "{label}: {message}");
            if who.is_some() {
                assert_eq!(logs["attributes"]["permission"], "read", "{label}: {logs}");
            }
        }
        let (_, events) = server
            .call_as(who, "GET", "/api/v1/events?limit=1000", None)
            .await;
        let about = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["operation"] == id)
            .count();
        assert_eq!(about > 0, may, "{label}: events: {events}");
        let (status, _) = server
            .call_as(who, "GET", &format!("/api/v1/events?operation={id}"), None)
            .await;
        assert_eq!(status, logs_status, "{label}: events of it");
    }

    // The live stream leaves them out too: carol's, from the start, up to an event she may
    // read that comes after all of them.
    let client = fairsched_api::client::ApiClient::new(&server.url, Some(CAROL.into()));
    let mut stream = client
        .event_stream(&fairsched_api::EventQuery {
            after: Some(0),
            ..Default::default()
        })
        .await
        .unwrap();
    server
        .register_as(AGENT, "n2", json!({"cpu": 1, "user_slots": 1}), &["cpu"])
        .await;
    let mut seen = Vec::new();
    loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), stream.next())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .expect("the stream goes on");
        seen.push(json!(e));
        if e.fields.get("node") == Some(&json!("n2")) {
            break;
        }
    }
    let shown: Vec<&Value> = seen.iter().map(|e| &e["operation"]).collect();
    assert!(shown.contains(&&json!("public")), "{seen:?}");
    assert!(!shown.contains(&&json!("guarded")), "{seen:?}");
    assert!(!shown.contains(&&json!("mine")), "{seen:?}");
    server.stop().await;
}

/// A running job's output (fetched from its node while someone reads it) follows the `read`
/// permission as a finished job's does: a reader without it is refused the same way, and
/// its refused read does not make the server ask the node for the output.
#[tokio::test]
async fn reading_a_running_jobs_output_needs_read() {
    let server = start(
        json!({"superusers": ["root"], "users": users()}),
        Some(AGENT),
    )
    .await;
    server
        .register_as(AGENT, "n1", json!({"cpu": 3, "user_slots": 10}), &["cpu"])
        .await;
    let (status, body) = server
        .call_as(
            Some(BOB),
            "POST",
            "/api/v1/operations",
            Some(op(
                "guarded",
                "readable",
                json!({"tasks": [{"job_count": 1, "resources": {"cpu": 1},
                    "command": ["sleep", "60"]}]}),
            )),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = start_one_job(&server, "n1").await;
    let credential = server.credential("n1").unwrap();
    let running = json!({"node_id": "n1", "running": [job]});
    let logs = "/api/v1/operations/guarded/logs";

    // Refused: carol (no `read` in `readable`), and without a token. Nobody is asked for it.
    let (status, body) = server.call_as(Some(CAROL), "GET", logs, None).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["code"], 901, "{body}");
    assert_eq!(body["attributes"]["permission"], "read", "{body}");
    let (status, _) = server.call_as(None, "GET", logs, None).await;
    assert_eq!(status, 401);
    let (_, hb) = agent_heartbeat(&server, Some(&credential), running.clone()).await;
    assert!(
        hb.get("output").is_none(),
        "a refused read watches nothing: {hb}"
    );

    // dave (opsteam reads) may: the read watches the job; the node is asked for its output.
    let (status, body) = server.call_as(Some(DAVE), "GET", logs, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["job"], job.as_str(), "{body}");
    assert_eq!(body[0]["state"], "running", "{body}");
    assert_eq!(
        body[0]["live"]["waiting"], true,
        "nothing from the node yet: {body}"
    );
    let (_, hb) = agent_heartbeat(&server, Some(&credential), running.clone()).await;
    assert_eq!(hb["output"], json!([{"job": job}]), "{hb}");
    let chunk = fairsched_api::OutputChunk::new(0, b"secret-running-output\n");
    let mut with_output = running.clone();
    with_output["output"] = json!([{"job": job, "stdout": chunk}]);
    let (status, hb) = agent_heartbeat(&server, Some(&credential), with_output).await;
    assert_eq!(status, 200, "{hb}");
    assert_eq!(
        hb["output"],
        json!([{"job": job, "stdout_from": 22}]),
        "asked again from where it is: {hb}"
    );

    for (who, may, status_when_not) in [
        (Some(DAVE), true, 200),
        (Some(BOB), true, 200),
        (Some(ROOT), true, 200),
        (Some(CAROL), false, 403),
        (Some(ALICE), false, 403),
        (None, false, 401),
    ] {
        let (status, body) = server.call_as(who, "GET", logs, None).await;
        let label = format!("{who:?}");
        assert_eq!(
            status,
            if may { 200 } else { status_when_not },
            "{label}: {body}"
        );
        assert_eq!(
            body.to_string().contains("secret-running-output"),
            may,
            "{label}: {body}"
        );
        if may {
            assert_eq!(body[0]["live"]["stdout"]["end"], 22, "{label}: {body}");
        } else if who.is_some() {
            assert_eq!(body["attributes"]["permission"], "read", "{label}: {body}");
        }
        // Also with a query naming the job and an offset.
        let (status, body) = server
            .call_as(
                who,
                "GET",
                &format!("{logs}?jobs={job}&from={job}:22:0"),
                None,
            )
            .await;
        assert_eq!(
            status,
            if may { 200 } else { status_when_not },
            "{label}: {body}"
        );
        if may {
            assert_eq!(body[0]["stdout"], "", "nothing after offset 22: {body}");
        }
    }
    server.stop().await;
}

/// An ACL subject that names neither a user nor a group of `[auth]` (nor `everyone`) is
/// refused, naming where it is (with a did-you-mean): a misspelt subject would make its entry
/// apply to no one, a `deny` that denies nothing. Nothing changes.
#[tokio::test]
async fn acl_subjects_name_users_or_groups() {
    let server = start(
        json!({"superusers": ["root"], "users": users()}),
        Some(AGENT),
    )
    .await;
    let cases: Vec<(&str, &str, Value, Option<&str>)> = vec![
        (
            "PUT",
            "/api/v1/pools/open",
            json!({"config": {"acl": [allow(&["alcie"], &["use"])]}}),
            Some(
                "acl[0].subjects: \"alcie\" is neither a user nor a group of the server's [auth] (nor everyone); did you mean \"alice\"?",
            ),
        ),
        (
            "PUT",
            "/api/v1/pools/open",
            json!({"config": {"acl": [allow(&["ml", "bob"], &["use"]), deny(&["malory"], &["use"])]}}),
            Some("acl[1].subjects: \"malory\""),
        ),
        (
            "POST",
            "/api/v1/pools",
            json!({"name": "new", "config": {"acl": [allow(&["nobody-here"], &["use"])]}}),
            Some("acl[0].subjects: \"nobody-here\""),
        ),
        (
            "PUT",
            "/api/v1/tree",
            json!({"pools": {"research": {"pools": {"adhoc": {"acl": [allow(&["bobb"], &["use"])]}}}}}),
            Some("pools.research.pools.adhoc.acl[0].subjects: \"bobb\""),
        ),
        (
            "PUT",
            "/api/v1/pools/open",
            json!({"config": {"acl": [allow(&["ml", "bob", "everyone", "opsteam"], &["use"])]}}),
            None,
        ),
    ];
    for (method, path, body, want) in cases {
        let before = state(&server).await;
        let (status, reply) = server
            .call_as(Some(ROOT), method, path, Some(body.clone()))
            .await;
        match want {
            None => assert_eq!(status, 200, "{body}: {reply}"),
            Some(want) => {
                assert_eq!(status, 400, "{body}: {reply}");
                let message = reply["message"].as_str().unwrap_or_default();
                assert!(message.starts_with(want), "{want}\n{message}");
                assert_eq!(state(&server).await, before, "{body} changed something");
            }
        }
    }
    server.stop().await;
}

/// A registration with the wrong agent token is refused and logged at `warn` (as every
/// refusal), without the token.
#[tokio::test]
async fn a_refused_agent_token_is_logged() {
    let (logs, guard) = common::capture_logs();
    let server = start(
        json!({"superusers": ["root"], "users": users()}),
        Some(AGENT),
    )
    .await;
    let (status, _) = server
        .call_as(
            Some("t-not-the-agent-token"),
            "POST",
            "/api/v1/agent/register",
            Some(json!({"node_id": "n9", "resources": {"cpu": 1}})),
        )
        .await;
    drop(guard);
    assert_eq!(status, 401);
    let lines = logs.lines_with(&["WARN", "not the agents' token"]);
    assert_eq!(lines.len(), 1, "{}", logs.text());
    assert!(
        !logs.text().contains("t-not-the-agent-token"),
        "{}",
        logs.text()
    );
    server.stop().await;
}
