//! A server with several pool trees: nodes join the tree their tags select, an operation runs
//! in two trees, the orchid routes serve every tree, and a restart adds the trees the
//! pool-trees file has and the store does not (the stored ones win).

mod common;

use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test]
async fn orchid_routes_serve_every_tree() {
    let trees = json!({"default_tree": "physical", "pool_trees": {
        "physical": {"config": {"node_tag_filter": "physical"}, "pools": {"prod": {}}},
        "gpu": {"config": {"node_tag_filter": "gpu", "main_resource": "gpu"},
                "pools": {"shared": {}}}
    }});
    let server = common::start(trees, json!({})).await;
    for (node, tag) in [("p1", "physical"), ("g1", "gpu")] {
        server
            .post(
                "/api/v1/agent/register",
                json!({"node_id": node, "resources": {"cpu": 2, "gpu": 2, "user_slots": 2},
                       "tags": [tag]}),
            )
            .await;
    }
    server
        .post(
            "/api/v1/operations",
            json!({"id": "both", "pool": "prod", "pool_trees": ["physical", "gpu"],
                   "scheduling_options_per_pool_tree": {"gpu": {"pool": "shared"}},
                   "tasks": [{"job_count": 4, "resources": {"cpu": 1, "user_slots": 1},
                              "command": ["sleep", "60"]}]}),
        )
        .await;
    // Each node takes jobs in its own tree.
    server.heartbeat_until_started("p1", 2).await;
    server.heartbeat_until_started("g1", 2).await;

    server
        .wait_for(
            "the gpu tree's share",
            std::time::Duration::from_secs(10),
            || async {
                let (_, op) = server
                    .call("GET", "/api/v1/orchid/pool_trees/gpu/operations/both", None)
                    .await;
                op["resource_usage"]["cpu"] == 2.0
            },
        )
        .await;
    let (status, tree) = server
        .call("GET", "/api/v1/orchid/pool_trees/gpu", None)
        .await;
    assert_eq!(status, 200, "{tree}");
    assert_eq!(tree["tree"], "gpu");
    assert_eq!(tree["total_resources"]["gpu"], 2);
    assert_eq!(tree["operations"]["both"]["pool"], "shared");
    let (status, pool) = server
        .call("GET", "/api/v1/orchid/pool_trees/gpu/pools/shared", None)
        .await;
    assert_eq!(status, 200, "{pool}");
    assert_eq!(pool["operation_count"], 1);
    // The default tree as before.
    let (_, op) = server
        .call(
            "GET",
            "/api/v1/orchid/pool_trees/physical/operations/both",
            None,
        )
        .await;
    assert_eq!(op["pool"], "prod");
    assert_eq!(op["resource_usage"]["cpu"], 2.0);
    // An operation that runs in the gpu tree only is in that tree's orchid (with its own
    // fields), not in the default tree's.
    server
        .post(
            "/api/v1/operations",
            json!({"id": "gpu-only", "pool": "shared", "pool_trees": ["gpu"],
                   "tasks": [{"job_count": 1, "resources": {"cpu": 1, "user_slots": 1},
                              "command": ["sleep", "60"]}]}),
        )
        .await;
    let (status, op) = server
        .call(
            "GET",
            "/api/v1/orchid/pool_trees/gpu/operations/gpu-only",
            None,
        )
        .await;
    assert_eq!((status, &op["pool"]), (200, &json!("shared")), "{op}");
    assert_eq!(op["state"], "running", "{op}");
    let (status, e) = server
        .call(
            "GET",
            "/api/v1/orchid/pool_trees/physical/operations/gpu-only",
            None,
        )
        .await;
    assert_eq!((status, &e["code"]), (404, &json!(1915)), "{e}");
    let gpu = server.get("/api/v1/tree?tree=gpu").await;
    let ops = gpu["snapshot"]["operations"].as_object().unwrap();
    assert_eq!(
        ops.keys().collect::<Vec<_>>(),
        ["both", "gpu-only"],
        "{gpu}"
    );
    let physical = server.get("/api/v1/tree").await;
    let ops = physical["snapshot"]["operations"].as_object().unwrap();
    assert_eq!(ops.keys().collect::<Vec<_>>(), ["both"], "{physical}");
    let trees = server.get("/api/v1/pool_trees").await;
    assert_eq!(
        (&trees[0]["operation_count"], &trees[1]["operation_count"]),
        (&json!(2), &json!(1)),
        "{trees}"
    );

    // Unknown names are errors that say what exists.
    let (status, e) = server
        .call(
            "GET",
            "/api/v1/orchid/pool_trees/nowhere/pools/shared",
            None,
        )
        .await;
    assert_eq!(status, 404, "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("trees: \"gpu\", \"physical\""), "{e}");
    let (status, e) = server
        .call("GET", "/api/v1/orchid/pool_trees/gpu/pools/prod", None)
        .await;
    assert_eq!(status, 404, "{e}");
    server.stop().await;
}

fn two_trees() -> serde_json::Value {
    json!({"default_tree": "physical", "pool_trees": {
        "physical": {"config": {"node_tag_filter": "physical"}, "pools": {"prod": {}}},
        "gpu": {"config": {"node_tag_filter": "gpu", "main_resource": "gpu"},
                "pools": {"shared": {"weight": 2}}}
    }})
}

/// Submits operation `both`: pool `prod` in `physical`, `shared` in `gpu` (of `two_trees`).
async fn submit_in_both_trees(server: &common::Running) {
    server
        .post(
            "/api/v1/operations",
            json!({"id": "both", "pool": "prod", "pool_trees": ["physical", "gpu"],
                   "scheduling_options_per_pool_tree": {"gpu": {"pool": "shared"}},
                   "tasks": [{"job_count": 1, "resources": {"cpu": 1},
                              "command": ["sleep", "60"]}]}),
        )
        .await;
}

#[tokio::test]
async fn a_restart_keeps_every_tree_and_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_in(dir.path(), two_trees(), json!({})).await;
    submit_in_both_trees(&server).await;
    server.stop().await;

    // Restarted without any configured trees: the store has them all.
    let server = common::start_config(
        dir.path(),
        json!({"scheduler": {"fair_share_update_period_ms": 50}}),
    )
    .await;
    let tree = server.get("/api/v1/tree").await;
    assert_eq!(tree["tree"], "physical", "the default tree: {tree}");
    assert!(tree["config"]["pools"]["prod"].is_object(), "{tree}");
    let (status, gpu) = server
        .call("GET", "/api/v1/orchid/pool_trees/gpu", None)
        .await;
    assert_eq!(status, 200, "the gpu tree is restored: {gpu}");
    server
        .wait_for(
            "a fair-share update of the gpu tree",
            std::time::Duration::from_secs(10),
            || async {
                let (_, gpu) = server
                    .call("GET", "/api/v1/orchid/pool_trees/gpu", None)
                    .await;
                gpu["pools"]["<Root>"].is_object()
            },
        )
        .await;
    let gpu = server.get("/api/v1/orchid/pool_trees/gpu").await;
    assert_eq!(gpu["pools"]["shared"]["weight"], 2.0, "{gpu}");
    assert_eq!(gpu["operations"]["both"]["pool"], "shared", "{gpu}");
    let op = server.get("/api/v1/operations/both").await;
    assert_eq!(op["state"], "running", "{op}");
    server.stop().await;
}

/// Each tree's configuration as `GET /api/v1/tree?tree=` shows it.
async fn configs(server: &common::Running) -> (serde_json::Value, serde_json::Value) {
    (
        server.get("/api/v1/tree?tree=physical").await["config"].clone(),
        server.get("/api/v1/tree?tree=gpu").await["config"].clone(),
    )
}

#[tokio::test]
async fn pools_of_a_named_tree_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = json!({"fair_share_update_period_ms": 50});
    let server = common::start_in(dir.path(), two_trees(), scheduler.clone()).await;
    for (node, tag) in [("p1", "physical"), ("g1", "gpu"), ("g2", "gpu")] {
        server
            .post(
                "/api/v1/agent/register",
                json!({"node_id": node, "resources": {"cpu": 2, "gpu": 1, "user_slots": 2},
                       "tags": [tag]}),
            )
            .await;
    }

    // The trees, sorted by name.
    let trees = server.get("/api/v1/pool_trees").await;
    assert_eq!(
        trees,
        json!([
            {"name": "gpu", "is_default": false, "node_tag_filter": "gpu", "pool_count": 1,
             "ephemeral_pool_count": 0, "node_count": 2, "operation_count": 0,
             "total_resources": {"user_slots": 4, "cpu": 4.0, "gpu": 2, "memory": 0, "network": 0}},
            {"name": "physical", "is_default": true, "node_tag_filter": "physical",
             "pool_count": 1, "ephemeral_pool_count": 0, "node_count": 1, "operation_count": 0,
             "total_resources": {"user_slots": 2, "cpu": 2.0, "gpu": 1, "memory": 0, "network": 0}},
        ])
    );
    let nodes = server.get("/api/v1/nodes").await;
    assert_eq!(nodes[0]["tree"], "gpu", "{nodes}");
    assert_eq!(nodes[2]["tree"], "physical", "{nodes}");

    // Create, change, move and remove a pool in the gpu tree; a pool of the same name in the
    // default tree is another pool (names are unique per tree).
    server
        .post(
            "/api/v1/pools?tree=gpu",
            json!({"name": "training", "parent": "shared", "config": {"weight": 3}}),
        )
        .await;
    server
        .post("/api/v1/pools", json!({"name": "training"}))
        .await;
    let (physical, gpu) = configs(&server).await;
    assert_eq!(
        gpu["pools"]["shared"]["pools"]["training"],
        json!({"weight": 3.0}),
        "{gpu}"
    );
    assert_eq!(physical["pools"]["training"], json!({}), "{physical}");
    server
        .wait_for(
            "training in the gpu orchid",
            Duration::from_secs(10),
            || async {
                let (_, pools) = server.call("GET", "/api/v1/pools?tree=gpu", None).await;
                pools["training"]["parent"] == "shared"
            },
        )
        .await;
    let pool = server.get("/api/v1/pools/training?tree=gpu").await;
    assert_eq!(pool["weight"], 3.0, "{pool}");
    let (status, body) = server
        .call(
            "PUT",
            "/api/v1/pools/training?tree=gpu",
            Some(json!({"config": {"weight": 5},
                                                                    "parent": "<Root>"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (physical, gpu) = configs(&server).await;
    assert_eq!(gpu["pools"]["training"], json!({"weight": 5.0}), "{gpu}");
    assert!(
        gpu["pools"]["shared"]["pools"].get("training").is_none(),
        "{gpu}"
    );
    assert_eq!(physical["pools"]["training"], json!({}), "{physical}");

    // A rejected change (a move under a pool that does not exist) changes nothing, not even
    // the options given with it; the error names the tree.
    let (status, e) = server
        .call(
            "PUT",
            "/api/v1/pools/training?tree=gpu",
            Some(json!({"config": {"weight": 7},
                                                                   "parent": "nowhere"})),
        )
        .await;
    assert_eq!((status, &e["code"]), (404, &json!(500)), "{e}");
    assert_eq!(e["attributes"]["tree"], "gpu", "{e}");
    assert_eq!(configs(&server).await, (physical.clone(), gpu.clone()));

    // The core kept the options too: the next change (a move back) shows weight 5.
    let (status, body) = server
        .call(
            "PUT",
            "/api/v1/pools/training?tree=gpu",
            Some(json!({"parent": "shared"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (physical, gpu) = configs(&server).await;
    assert_eq!(
        gpu["pools"]["shared"]["pools"]["training"],
        json!({"weight": 5.0}),
        "{gpu}"
    );

    // Unknown trees: a RESOLVE error naming the tree, and nothing changes.
    let events_before = server.get("/api/v1/events?limit=1").await[0]["seq"].clone();
    for (method, path, body) in [
        ("GET", "/api/v1/pools?tree=nope", None),
        ("GET", "/api/v1/pools/shared?tree=nope", None),
        (
            "POST",
            "/api/v1/pools?tree=nope",
            Some(json!({"name": "x"})),
        ),
        (
            "PUT",
            "/api/v1/pools/shared?tree=nope",
            Some(json!({"config": {"weight": 9}})),
        ),
        ("DELETE", "/api/v1/pools/training?tree=nope", None),
        ("GET", "/api/v1/tree?tree=nope", None),
        ("PUT", "/api/v1/tree?tree=nope", Some(json!({"pools": {}}))),
        (
            "PUT",
            "/api/v1/tree?tree=nope&dry_run=true",
            Some(json!({"pools": {}})),
        ),
        ("GET", "/api/v1/orchid/pool_trees/nope", None),
    ] {
        let (status, e) = server.call(method, path, body).await;
        assert_eq!(
            (status, &e["code"]),
            (404, &json!(500)),
            "{method} {path}: {e}"
        );
        assert_eq!(e["attributes"]["tree"], "nope", "{method} {path}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("\"nope\"") && message.contains("trees: \"gpu\", \"physical\""),
            "{method} {path}: {e}"
        );
    }
    assert_eq!(configs(&server).await, (physical.clone(), gpu.clone()));
    assert_eq!(
        server.get("/api/v1/events?limit=1").await[0]["seq"],
        events_before
    );
    // A pool the tree does not have.
    let (status, e) = server
        .call("GET", "/api/v1/pools/prod?tree=gpu", None)
        .await;
    assert_eq!(
        (status, &e["attributes"]["tree"]),
        (404, &json!("gpu")),
        "{e}"
    );

    // Removal is of the named tree's pool only.
    let (status, body) = server
        .call("DELETE", "/api/v1/pools/training?tree=gpu", None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (physical, gpu) = configs(&server).await;
    assert!(gpu["pools"].get("training").is_none(), "{gpu}");
    assert_eq!(physical["pools"]["training"], json!({}), "{physical}");
    server
        .post(
            "/api/v1/pools?tree=gpu",
            json!({"name": "inference", "config": {"strong_guarantee_resources": {"gpu": 1}}}),
        )
        .await;
    let before_restart = configs(&server).await;
    server.stop().await;

    // A restart keeps both trees with every change.
    let server = common::start_in(dir.path(), two_trees(), scheduler).await;
    assert_eq!(configs(&server).await, before_restart);
    let trees = server.get("/api/v1/pool_trees").await;
    assert_eq!(
        (
            &trees[0]["name"],
            &trees[0]["pool_count"],
            &trees[1]["is_default"]
        ),
        (&json!("gpu"), &json!(2), &json!(true)),
        "{trees}"
    );
    server.stop().await;
}

#[tokio::test]
async fn applying_a_named_tree_changes_only_that_tree() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_in(
        dir.path(),
        two_trees(),
        json!({"fair_share_update_period_ms": 50}),
    )
    .await;
    let (physical, gpu) = configs(&server).await;
    let new = json!({"config": {"node_tag_filter": "gpu", "main_resource": "gpu"},
                     "pools": {"shared": {"weight": 4}, "batch": {}}});

    // A dry run says what would change in that tree, and changes nothing.
    let (status, dry) = server
        .call(
            "PUT",
            "/api/v1/tree?tree=gpu&dry_run=true",
            Some(new.clone()),
        )
        .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(
        dry,
        json!({"tree": "gpu", "added": ["batch"], "removed": [], "changed": ["shared"],
               "tree_config_changed": false, "applied": false, "warnings": []})
    );
    assert_eq!(configs(&server).await, (physical.clone(), gpu.clone()));

    // A bad tree is rejected as a whole, naming the tree.
    let (status, e) = server
        .call(
            "PUT",
            "/api/v1/tree?tree=gpu",
            Some(json!({"pools": {"shared": {"weight": -1}}})),
        )
        .await;
    assert_eq!(
        (status, &e["attributes"]["tree"]),
        (400, &json!("gpu")),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains("weight"), "{e}");
    assert_eq!(configs(&server).await, (physical.clone(), gpu.clone()));

    // Applied: only the gpu tree changes.
    let (status, applied) = server
        .call("PUT", "/api/v1/tree?tree=gpu", Some(new.clone()))
        .await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(
        (&applied["tree"], &applied["applied"]),
        (&json!("gpu"), &json!(true))
    );
    let (physical_now, gpu_now) = configs(&server).await;
    assert_eq!(physical_now, physical);
    assert_eq!(
        gpu_now["pools"],
        json!({"shared": {"weight": 4.0}, "batch": {}})
    );
    let events = server.get("/api/v1/events?kind=tree_applied").await;
    assert_eq!(events[0]["tree"], "gpu", "{events}");
    let tree = server.get("/api/v1/tree?tree=gpu").await;
    assert_eq!(
        (&tree["tree"], &tree["is_default"]),
        (&json!("gpu"), &json!(false))
    );
    server
        .wait_for(
            "batch in the gpu snapshot",
            Duration::from_secs(10),
            || async {
                let tree = server.get("/api/v1/tree?tree=gpu").await;
                tree["snapshot"]["pools"]["batch"].is_object()
                    && tree["snapshot"]["pools"].get("prod").is_none()
            },
        )
        .await;
    // The default tree is what `GET /api/v1/tree` shows without a name.
    let default = server.get("/api/v1/tree").await;
    assert_eq!(
        (&default["tree"], &default["is_default"]),
        (&json!("physical"), &json!(true))
    );
    assert_eq!(default["config"], physical);
    server.stop().await;

    let server = common::start_in(dir.path(), two_trees(), json!({})).await;
    assert_eq!(configs(&server).await, (physical, gpu_now));
    server.stop().await;
}

/// `POST /api/v1/operations/{id}/update` with `scheduling_options_per_pool_tree` moves the
/// operation in one tree only, keeps it across a restart, and a rejected update (one part
/// bad) changes nothing.
#[tokio::test]
async fn an_operation_update_per_tree() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_in(dir.path(), two_trees(), json!({})).await;
    submit_in_both_trees(&server).await;
    let op = server
        .post(
            "/api/v1/operations/both/update",
            json!({"weight": 3.0,
                   "scheduling_options_per_pool_tree": {"gpu": {"pool": "gpu-team", "weight": 7.0}}}),
        )
        .await;
    assert_eq!(op["pool"], "prod", "the first tree keeps its pool: {op}");
    assert_eq!(
        op["spec"]["scheduling_options_per_pool_tree"]["gpu"],
        json!({"pool": "gpu-team", "weight": 7.0}),
        "{op}"
    );
    assert_eq!(op["spec"]["weight"], 3.0, "{op}");

    // Rejected as a whole: the first tree's pool would change, the second tree is unknown.
    let before = server.get("/api/v1/operations/both").await;
    let (status, e) = server
        .call(
            "POST",
            "/api/v1/operations/both/update",
            Some(json!({"pool": "other",
                        "scheduling_options_per_pool_tree": {"nope": {"weight": 2.0}}})),
        )
        .await;
    assert_eq!(status, 400, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("scheduling_options_per_pool_tree.nope"),
        "{e}"
    );
    // (`why` follows the scheduler, e.g. a fair-share update meanwhile: not compared.)
    let without_why = |mut op: Value| {
        op.as_object_mut().unwrap().remove("why");
        op
    };
    assert_eq!(
        without_why(server.get("/api/v1/operations/both").await),
        without_why(before)
    );
    // An unknown field is named.
    let (status, e) = server
        .call(
            "POST",
            "/api/v1/operations/both/update",
            Some(json!({"scheduling_options_per_pool_tree": {"gpu": {"wieght": 2.0}}})),
        )
        .await;
    assert_eq!(status, 400, "{e}");
    assert!(e["message"].as_str().unwrap().contains("wieght"), "{e}");
    server.stop().await;

    // After a restart the operation is still where the update put it, in each tree.
    let server = common::start_config(
        dir.path(),
        json!({"scheduler": {"fair_share_update_period_ms": 50}}),
    )
    .await;
    server
        .wait_for(
            "a fair-share update of the gpu tree",
            Duration::from_secs(10),
            || async {
                let (_, gpu) = server
                    .call("GET", "/api/v1/orchid/pool_trees/gpu", None)
                    .await;
                let (_, physical) = server
                    .call("GET", "/api/v1/orchid/pool_trees/physical", None)
                    .await;
                // Placed, and through a fair-share update in both trees.
                gpu["operations"]["both"]["pool"] == "gpu-team"
                    && gpu["operations"]["both"]["weight"].is_number()
                    && physical["operations"]["both"]["weight"].is_number()
            },
        )
        .await;
    let gpu = server
        .get("/api/v1/orchid/pool_trees/gpu/operations/both")
        .await;
    assert_eq!(gpu["weight"], 7.0, "{gpu}");
    let physical = server
        .get("/api/v1/orchid/pool_trees/physical/operations/both")
        .await;
    assert_eq!(physical["pool"], "prod", "{physical}");
    assert_eq!(physical["weight"], 3.0, "{physical}");
    server.stop().await;
}

/// The pool-trees file of the restart tests: tree `cpu` (pool `prod`), and with `gpu` tree
/// `gpu` (pool `train`) too, named the default tree.
fn trees_file(gpu: bool) -> String {
    let mut text = String::new();
    if gpu {
        text.push_str("default_tree = \"gpu\"\n");
    }
    text.push_str(
        "[pool_trees.cpu.config]\nnode_tag_filter = \"cpu\"\n[pool_trees.cpu.pools.prod]\n",
    );
    if gpu {
        text.push_str(
            "[pool_trees.gpu.config]\nnode_tag_filter = \"gpu\"\nmain_resource = \"gpu\"\n\
             [pool_trees.gpu.pools.train]\nweight = 3\n",
        );
    }
    text
}

/// Registers `node` with `tags` as an agent would; the status and reply.
async fn register_tagged(
    server: &common::Running,
    node: &str,
    tags: &[&str],
    resources: serde_json::Value,
) -> (u16, serde_json::Value) {
    server
        .call(
            "POST",
            "/api/v1/agent/register",
            Some(json!({"node_id": node, "resources": resources, "tags": tags})),
        )
        .await
}

/// The tree of each node the server has.
async fn node_trees(server: &common::Running) -> serde_json::Value {
    let nodes = server.get("/api/v1/nodes").await;
    nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), n["tree"].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// A tree added to the pool-trees file after the first start is added at the next start (and
/// stored); the stored trees and the stored default win over the file's versions, with a
/// warning; nodes join the new tree by their tags; a tree removed from the file is kept.
#[tokio::test]
async fn a_tree_added_to_the_file_is_added_at_restart_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pools.toml");
    let config = json!({"pool_trees_file": file, "node_timeout_ms": 60_000,
                        "scheduler": {"fair_share_update_period_ms": 50}});
    std::fs::write(&file, trees_file(false)).unwrap();
    let server = common::start_config(dir.path(), config.clone()).await;
    let cpu = json!({"cpu": 1, "user_slots": 10});
    let gpu = json!({"cpu": 4, "gpu": 1, "user_slots": 10});
    assert_eq!(
        register_tagged(&server, "c1", &["cpu"], cpu.clone())
            .await
            .0,
        200
    );
    // Matches cpu now and gpu once that tree exists: it is refused after the restart.
    assert_eq!(
        register_tagged(&server, "c2", &["cpu", "gpu"], cpu.clone())
            .await
            .0,
        200
    );
    assert_eq!(
        register_tagged(&server, "g1", &["gpu"], gpu.clone())
            .await
            .0,
        200
    );
    assert_eq!(
        node_trees(&server).await,
        json!({"c1": "cpu", "c2": "cpu", "g1": null}),
        "no tree takes g1 yet"
    );
    server
        .post(
            "/api/v1/operations",
            json!({"id": "c", "pool": "prod",
                   "tasks": [{"job_count": 2, "resources": {"cpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    server.heartbeat_until_started("c1", 1).await;
    server.heartbeat_until_started("c2", 1).await;
    // A change made through the API: the stored tree is no longer the file's.
    server
        .post(
            "/api/v1/pools?tree=cpu",
            json!({"name": "api-made", "config": {}}),
        )
        .await;
    server.stop().await;

    // The file gains tree gpu (and names it the default).
    std::fs::write(&file, trees_file(true)).unwrap();
    let (logs, guard) = common::capture_logs();
    let server = common::start_config(dir.path(), config.clone()).await;
    drop(guard);

    let trees = server.get("/api/v1/pool_trees").await;
    let names: Vec<(&str, bool)> = trees
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["is_default"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [("cpu", true), ("gpu", false)], "{trees}");
    let tree = server.get("/api/v1/tree?tree=gpu").await;
    assert_eq!(tree["config"]["pools"]["train"]["weight"], 3.0, "{tree}");
    let tree = server.get("/api/v1/tree").await;
    assert_eq!(tree["tree"], "cpu", "the stored default stays: {tree}");
    assert!(
        tree["config"]["pools"]["api-made"].is_object(),
        "the stored cpu wins: {tree}"
    );
    let (status, orchid) = server
        .call("GET", "/api/v1/orchid/pool_trees/gpu", None)
        .await;
    assert_eq!(status, 200, "{orchid}");
    // Logged once at start: the added tree, the file's cpu and default that are not used,
    // the node the new tree's filter gives a second tree.
    let added = logs.lines_with(&["INFO", "pool tree \"gpu\" added from the pool-trees file"]);
    assert_eq!(added.len(), 1, "{}", logs.text());
    let differs = logs.lines_with(&["WARN", "pool tree \"cpu\"", "differs from the stored one"]);
    assert_eq!(differs.len(), 1, "{}", logs.text());
    assert!(
        differs[0].contains("fairsched pool apply --tree cpu FILE"),
        "{}",
        differs[0]
    );
    let default = logs.lines_with(&["WARN", "names \"gpu\" the default tree", "\"cpu\", stays"]);
    assert_eq!(default.len(), 1, "{}", logs.text());
    let c2 = logs.lines_with(&["WARN", "node \"c2\"", "\"cpu\", \"gpu\""]);
    assert!(!c2.is_empty(), "{}", logs.text());

    // c1 is restored in cpu with its job; c2 now matches both trees: not restored, its job
    // goes back to pending, and it is refused when it registers.
    assert_eq!(node_trees(&server).await, json!({"c1": "cpu"}));
    let op = server.get("/api/v1/operations/c").await;
    assert_eq!(op["job_counts"]["running"], 1, "{op}");
    let (status, e) = register_tagged(&server, "c2", &["cpu", "gpu"], cpu.clone()).await;
    assert_eq!(status, 400, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("\"cpu\" and \"gpu\""), "{message}");
    // g1 comes back (its agent registers again when its heartbeat is refused) and joins gpu.
    let (status, e) = server
        .call(
            "POST",
            "/api/v1/agent/heartbeat",
            Some(json!({"node_id": "g1", "running": []})),
        )
        .await;
    assert_eq!(status, 404, "{e}");
    assert_eq!(
        register_tagged(&server, "g1", &["gpu"], gpu.clone())
            .await
            .0,
        200
    );
    assert_eq!(node_trees(&server).await, json!({"c1": "cpu", "g1": "gpu"}));
    server
        .post(
            "/api/v1/operations",
            json!({"id": "g", "pool": "train", "pool_trees": ["gpu"],
                   "tasks": [{"job_count": 1, "resources": {"gpu": 1}, "command": ["sleep", "60"]}]}),
        )
        .await;
    let on_g1 = server.heartbeat_until_started("g1", 1).await;
    server.stop().await;

    // The file loses tree gpu again: the store keeps it, with a warning.
    std::fs::write(&file, trees_file(false)).unwrap();
    let (logs, guard) = common::capture_logs();
    let server = common::start_config(dir.path(), config).await;
    let kept = logs.lines_with(&["WARN", "pool tree \"gpu\" is stored but no longer in"]);
    assert_eq!(kept.len(), 1, "{}", logs.text());
    assert!(kept[0].contains("cannot be removed"), "{}", kept[0]);
    assert!(
        logs.lines_with(&["added from"]).is_empty(),
        "nothing is added: {}",
        logs.text()
    );
    drop(guard);
    let trees = server.get("/api/v1/pool_trees").await;
    assert_eq!(trees.as_array().unwrap().len(), 2, "{trees}");
    let tree = server.get("/api/v1/tree?tree=gpu").await;
    assert_eq!(tree["config"]["pools"]["train"]["weight"], 3.0, "{tree}");
    let op = server.get("/api/v1/operations/g").await;
    assert_eq!(op["state"], "running", "{op}");
    assert_eq!(op["jobs"][0]["id"], on_g1[0].as_str(), "{op}");
    assert_eq!(op["jobs"][0]["state"], "running", "adopted on g1: {op}");
    assert_eq!(node_trees(&server).await, json!({"c1": "cpu", "g1": "gpu"}));
    server.stop().await;
}

/// A tree the file adds that does not fit the stored trees (here: the stored single tree has
/// no `node_tag_filter`, which several trees need) stops the start with an error that names
/// the problem and the way out, and changes nothing; applying the filter first, then
/// restarting, adds the tree.
#[tokio::test]
async fn an_added_tree_that_does_not_fit_the_stored_ones_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let one = json!({"pool_trees": {"pool_trees": {"default": {"pools": {"p": {}}}}}});
    let two = json!({"pool_trees": {"default_tree": "default", "pool_trees": {
        "default": {"config": {"node_tag_filter": "cpu"}, "pools": {"p": {}}},
        "gpu": {"config": {"node_tag_filter": "gpu"}}
    }}});
    let server = common::start_config(dir.path(), one.clone()).await;
    server.stop().await;

    let e = common::try_start_config(dir.path(), two.clone())
        .await
        .err()
        .expect("the start fails")
        .to_string();
    for part in [
        "the ones the inline pool_trees adds (\"gpu\")",
        "tree \"default\"",
        "node_tag_filter",
        "fairsched pool apply --tree NAME FILE",
        "Nothing was changed",
    ] {
        assert!(e.contains(part), "{part:?} in {e}");
    }

    // Nothing changed: the store still holds its one tree.
    let server = common::start_config(dir.path(), one).await;
    let trees = server.get("/api/v1/pool_trees").await;
    assert_eq!(trees.as_array().unwrap().len(), 1, "{trees}");
    let (status, reply) = server
        .call(
            "PUT",
            "/api/v1/tree",
            Some(json!({"config": {"node_tag_filter": "cpu"}, "pools": {"p": {}}})),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    server.stop().await;

    let server = common::start_config(dir.path(), two).await;
    let trees = server.get("/api/v1/pool_trees").await;
    assert_eq!(trees.as_array().unwrap().len(), 2, "{trees}");
    server.stop().await;
}
