//! `PUT /api/v1/tree`: a whole new configuration of the default tree, validated as a whole and
//! applied at once (or, with `dry_run`, only compared); rejected ones change nothing; an applied
//! one is logged and kept across a restart, and operations in a removed pool go on in an
//! ephemeral pool of that name.

mod common;

use serde_json::{Value, json};
use std::time::Duration;

fn config() -> Value {
    json!({
        "pool_trees": {"pool_trees": {"default": {"pools": {"a": {}, "b": {"weight": 2}}}}},
        "scheduler": {"fair_share_update_period_ms": 50},
    })
}

#[tokio::test]
async fn a_tree_apply_is_validated_atomic_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_config(dir.path(), config()).await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "in-b", "pool": "b",
                   "tasks": [{"job_count": 1, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let new = json!({
        "config": {"fair_share_starvation_timeout_ms": 1000},
        "pools": {
            "a": {"weight": 3, "strong_guarantee_resources": {"cpu": 4},
                  "pools": {"a1": {"strong_guarantee_resources": {"cpu": 2}}}},
            "c": {},
        },
    });

    // A dry run says what would change and changes nothing.
    let (status, dry) = server
        .call("PUT", "/api/v1/tree?dry_run=true", Some(new.clone()))
        .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(
        dry,
        json!({"tree": "default", "added": ["a/a1", "c"], "removed": ["b"], "changed": ["a"],
               "tree_config_changed": true, "applied": false,
               // Guarantees and no nodes yet: said so, not an overcommit of 0.
               "warnings": ["pool tree \"default\": the tree has no nodes yet: the strong \
                             guarantees of the root's pools (cpu: 4) are checked against the \
                             cluster's resources once nodes join"]})
    );
    let before = server.get("/api/v1/tree").await["config"].clone();
    assert!(before["pools"]["b"].is_object(), "{before}");

    // Invalid trees are rejected as a whole, naming the pool and the field.
    for (bad, needle) in [
        (
            json!({"pools": {"a": {"strong_guarantee_resources": {"cpu": 1},
                                   "pools": {"a1": {"strong_guarantee_resources": {"cpu": 2}}}},
                             "c": {"weight": 5}}}),
            "pool \"a\"",
        ),
        (json!({"pools": {"a": {"weight": -1}}}), "weight"),
        (json!({"pools": {"a": {"wieght": 1}}}), "wieght"),
    ] {
        let (status, e) = server.call("PUT", "/api/v1/tree", Some(bad.clone())).await;
        assert_eq!((status, &e["code"]), (400, &json!(100_400)), "{bad}: {e}");
        assert!(e["message"].as_str().unwrap().contains(needle), "{e}");
    }
    assert_eq!(server.get("/api/v1/tree").await["config"], before);

    // Applied: the tree changes at once; the operation of the removed pool goes on in an
    // ephemeral pool of that name.
    let (status, applied) = server.call("PUT", "/api/v1/tree", Some(new.clone())).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(applied["applied"], true);
    assert_eq!(applied["removed"], json!(["b"]));
    server
        .wait_for(
            "the new pools in the snapshot",
            Duration::from_secs(10),
            || async {
                let tree = server.get("/api/v1/tree").await;
                let pools = &tree["snapshot"]["pools"];
                pools["a1"].is_object() && pools["c"].is_object() && pools["a"]["weight"] == 3.0
            },
        )
        .await;
    let tree = server.get("/api/v1/tree").await;
    assert_eq!(
        tree["snapshot"]["pools"]["b"]["is_ephemeral"], true,
        "{tree}"
    );
    assert_eq!(server.get("/api/v1/operations/in-b").await["pool"], "b");
    let events = server.get("/api/v1/events?kind=tree_applied").await;
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
    assert_eq!(events[0]["added"], json!(["a/a1", "c"]), "{events}");
    // The same tree again: nothing changes.
    let (_, again) = server.call("PUT", "/api/v1/tree", Some(new.clone())).await;
    assert_eq!(
        (&again["added"], &again["removed"], &again["changed"]),
        (&json!([]), &json!([]), &json!([]))
    );
    let applied_config = server.get("/api/v1/tree").await["config"].clone();

    // A restart keeps the applied tree (the stored tree wins over the configuration file's).
    server.stop().await;
    let server = common::start_config(dir.path(), config()).await;
    assert_eq!(server.get("/api/v1/tree").await["config"], applied_config);
    server.stop().await;
}
