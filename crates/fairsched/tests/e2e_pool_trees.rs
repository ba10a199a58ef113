//! End to end, with real processes on 127.0.0.1: `fairsched server` with two pool trees, driven
//! through the CLI. `tree list` lists both; `pool create|set|remove|list --tree gpu` and `tree
//! show --tree gpu` work in the non-default tree and leave the default one alone; `pool apply
//! --tree gpu` of a pool-trees file takes the gpu tree from it (a dry run changes nothing, a
//! real one only that tree); an unknown tree is an error that names it and changes nothing.
//!
//! Every wait is bounded.

mod common;

use common::{Cluster, cli_fails, wait_for};
use serde_json::{Value, json};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

const CONFIG: &str = r#"
[scheduler]
fair_share_update_period_ms = 100

[pool_trees]
default_tree = "physical"

[pool_trees.pool_trees.physical.config]
node_tag_filter = "physical"

[pool_trees.pool_trees.physical.pools.prod]

[pool_trees.pool_trees.gpu.config]
node_tag_filter = "gpu"
main_resource = "gpu"

[pool_trees.pool_trees.gpu.pools.shared]
weight = 2
"#;

/// Both trees' configurations, as `tree show --json` shows them.
fn configs(c: &Cluster) -> (Value, Value) {
    (
        c.json(&["tree", "show", "--tree", "physical"])["config"].clone(),
        c.json(&["tree", "show", "--tree", "gpu"])["config"].clone(),
    )
}

#[test]
fn pools_and_applies_in_a_named_tree_through_the_cli() {
    let c = Cluster::start(CONFIG, &[]);

    // The trees: the default one marked.
    let trees = c.json(&["tree", "list"]);
    let summary: Vec<(&str, bool, &str)> = trees
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["is_default"].as_bool().unwrap(),
                t["node_tag_filter"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("gpu", false, "gpu"), ("physical", true, "physical")]
    );
    let text = c.cli(&["tree", "list"]);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line of {name}: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(line("physical")[1..3], ["*", "physical"], "{text}");
    assert_eq!(line("gpu")[1], "gpu", "not the default: {text}");
    assert!(
        c.cli(&["tree", "show"])
            .starts_with("tree physical (default)\n"),
        "the default tree without --tree"
    );
    assert!(
        c.cli(&["tree", "show", "--tree", "gpu"])
            .starts_with("tree gpu\n")
    );

    // Create, change and remove a pool in the gpu tree; the default tree does not change.
    let (physical, _) = configs(&c);
    let create = [
        "pool",
        "create",
        "training",
        "--tree",
        "gpu",
        "--parent",
        "shared",
        "--config",
        r#"{"weight": 3}"#,
    ];
    assert_eq!(c.cli(&create).trim(), "ok");
    wait_for("training in the gpu tree's pool list", LONG, || {
        c.json(&["pool", "list", "--tree", "gpu"])["training"]["weight"] == 3.0
    });
    // --tree goes before the subcommand too.
    assert_eq!(
        c.json(&["pool", "--tree", "gpu", "list"])["training"]["parent"],
        "shared"
    );
    assert!(c.json(&["pool", "list"]).get("training").is_none());
    c.cli(&[
        "pool",
        "set",
        "training",
        "--tree",
        "gpu",
        "--config",
        r#"{"weight": 5}"#,
    ]);
    let (physical_now, gpu) = configs(&c);
    assert_eq!(
        gpu["pools"]["shared"]["pools"]["training"],
        json!({"weight": 5.0}),
        "{gpu}"
    );
    assert_eq!(physical_now, physical);
    c.cli(&["pool", "remove", "training", "--tree", "gpu"]);
    let (physical_now, gpu) = configs(&c);
    assert_eq!(gpu["pools"], json!({"shared": {"weight": 2.0}}), "{gpu}");
    assert_eq!(physical_now, physical);

    // Unknown trees: errors that name the tree; nothing changes.
    let file = c.dir.path().join("trees.toml");
    std::fs::write(
        &file,
        r#"
default_tree = "physical"

[pool_trees.physical.pools.other]

[pool_trees.gpu.config]
node_tag_filter = "gpu"
main_resource = "gpu"

[pool_trees.gpu.pools.shared]
weight = 4

[pool_trees.gpu.pools.batch]
"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    for args in [
        &["pool", "list", "--tree", "nope"][..],
        &["pool", "create", "x", "--tree", "nope"],
        &["pool", "set", "shared", "--tree", "nope", "--config", "{}"],
        &["pool", "remove", "shared", "--tree", "nope"],
        &["pool", "apply", "--tree", "nope", file],
        &["tree", "show", "--tree", "nope"],
    ] {
        let err = cli_fails(&c.url, &[], args);
        assert!(
            err.contains("pool tree \"nope\" does not exist")
                && err.contains("trees: \"gpu\", \"physical\""),
            "{args:?}: {err}"
        );
    }
    assert_eq!(configs(&c), (physical.clone(), gpu.clone()));

    // Apply of the gpu tree from a pool-trees file: a dry run shows the difference and
    // changes nothing; the real one changes the gpu tree only (not the file's physical tree).
    let dry = c.cli(&["pool", "apply", "--tree", "gpu", "--dry-run", file]);
    for needle in [
        "+ batch",
        "~ shared: weight 2 -> 4",
        "tree gpu: 1 added, 0 removed, 1 changed; dry run, nothing applied",
    ] {
        assert!(dry.contains(needle), "no {needle:?} in {dry}");
    }
    assert_eq!(configs(&c), (physical.clone(), gpu.clone()));
    let applied = c.json(&["pool", "apply", "--tree", "gpu", file]);
    assert_eq!(
        (&applied["tree"], &applied["applied"], &applied["added"]),
        (&json!("gpu"), &json!(true), &json!(["batch"])),
        "{applied}"
    );
    let (physical_now, gpu) = configs(&c);
    assert_eq!(
        gpu["pools"],
        json!({"shared": {"weight": 4.0}, "batch": {}}),
        "{gpu}"
    );
    assert_eq!(physical_now, physical, "the default tree is not applied");
    wait_for("batch in the gpu tree's snapshot", LONG, || {
        c.json(&["tree", "show", "--tree", "gpu"])["snapshot"]["pools"]["batch"].is_object()
    });
    let events = c.json(&["events", "--kind", "tree_applied"]);
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
    assert_eq!(events[0]["tree"], "gpu", "{events}");
    // `tree list` takes no --tree.
    assert!(cli_fails(&c.url, &[], &["tree", "list", "--tree", "gpu"]).contains("--tree"));
    c.stop();
}
