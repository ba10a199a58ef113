//! A server with several pool trees: nodes join the tree their tags select, an operation runs
//! in two trees, and the orchid routes serve every tree.

mod common;

use serde_json::json;

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

#[tokio::test]
async fn a_restart_keeps_every_tree_and_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_in(dir.path(), two_trees(), json!({})).await;
    server
        .post(
            "/api/v1/operations",
            json!({"id": "both", "pool": "prod", "pool_trees": ["physical", "gpu"],
                   "scheduling_options_per_pool_tree": {"gpu": {"pool": "shared"}},
                   "tasks": [{"job_count": 1, "resources": {"cpu": 1},
                              "command": ["sleep", "60"]}]}),
        )
        .await;
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
