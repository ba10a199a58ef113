//! `pool set` merges the options it is given into the pool's (issue 18): the others keep their
//! values, `null` unsets one, `--replace` keeps only the given ones; it prints what changed as
//! `pool apply` does.

mod common;

use common::Cluster;
use serde_json::{Value, json};

fn pool(c: &Cluster, name: &str) -> Value {
    c.json(&["tree", "show"])["config"]["pools"][name].clone()
}

#[test]
fn pool_set_merges_and_prints_what_changed() {
    let c = Cluster::start("", &[]);
    c.cli(&[
        "pool",
        "create",
        "p",
        "--config",
        r#"{"weight": 2, "strong_guarantee_resources": {"cpu": 1}}"#,
    ]);
    // (--config, --replace, what it prints, the pool's options after)
    let cases: &[(&str, bool, &str, Value)] = &[
        (
            r#"{"weight": 3}"#,
            false,
            "~ p: weight 2 -> 3\n",
            json!({"weight": 3.0, "strong_guarantee_resources": {"cpu": 1.0}}),
        ),
        (
            r#"{"weight": 3}"#,
            false,
            "no change\n",
            json!({"weight": 3.0, "strong_guarantee_resources": {"cpu": 1.0}}),
        ),
        (
            r#"{"weight": null}"#,
            false,
            "~ p: weight 3 -> unset\n",
            json!({"strong_guarantee_resources": {"cpu": 1.0}}),
        ),
        (
            r#"{"weight": 5}"#,
            true,
            "~ p: strong_guarantee_resources {\"cpu\":1} -> unset, weight unset -> 5\n",
            json!({"weight": 5.0}),
        ),
    ];
    for (config, replace, printed, after) in cases {
        let mut args = vec!["pool", "set", "p", "--config", config];
        if *replace {
            args.push("--replace");
        }
        assert_eq!(c.cli(&args), *printed, "{args:?}");
        let mut now = pool(&c, "p");
        if let Some(o) = now.as_object_mut() {
            o.remove("pools");
        }
        assert_eq!(&now, after, "{args:?}");
    }
    c.stop();
}

/// A submission to a pool the tree does not have says that it created it (an ephemeral pool,
/// as in YTsaurus), with "did you mean" when a configured pool's name is close (issue 18).
#[test]
fn a_submission_that_creates_a_pool_says_so() {
    let c = Cluster::start(
        "[pool_trees.pool_trees.default.pools.research]\n",
        &[("n1", "cpu=2,memory=1GiB,user_slots=4")],
    );
    // The jobs run on past the last submission: an ephemeral pool is removed once it has no
    // operation left, and a second submission would create it again (a slow machine).
    let run = |id: &str, pool: &str| {
        common::run_cli(
            &c.url,
            &[],
            &["op", "run", "--id", id, "--pool", pool, "--", "sleep", "60"],
        )
    };
    let out = run("typo", "reserch");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "note: pool \"reserch\" did not exist in tree \"default\": created it as an ephemeral pool"
        ) && stderr.contains("did you mean \"research\"? pass --pool research"),
        "{stderr}"
    );
    // The second submission there creates nothing; a configured pool is no news either.
    for (id, pool) in [("again", "reserch"), ("right", "research")] {
        let out = run(id, pool);
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{id}");
    }
    c.stop();
}

/// `pool create`, `set` and `apply` leave a tree whose root guarantees exceed its nodes
/// (YTsaurus alert 29000): the change is made, and the CLI says so on stderr, naming the tree
/// and the resource (issue 18).
#[test]
fn pool_changes_warn_of_guarantee_overcommit() {
    let c = Cluster::start("", &[("n1", "cpu=4,memory=1GiB,user_slots=4")]);
    let file = c.dir.path().join("tree.toml");
    std::fs::write(
        &file,
        "[pools.a]\nstrong_guarantee_resources = { cpu = 3 }\n\
         [pools.b]\nstrong_guarantee_resources = { cpu = 3 }\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let overcommit = |sum: &str| {
        format!(
            "warning: pool tree \"default\" overcommits its guarantees (alert 29000): Strong \
             guarantees of the root's pools exceed the cluster's resources (cpu: guarantees \
             {sum} > cluster 4); guarantees are scaled down proportionally to fit\n"
        )
    };
    // (arguments, what it prints on stderr)
    let cases: &[(&[&str], String)] = &[
        (
            &[
                "pool",
                "create",
                "a",
                "--config",
                r#"{"strong_guarantee_resources": {"cpu": 2}}"#,
            ],
            String::new(),
        ),
        (
            &[
                "pool",
                "create",
                "b",
                "--config",
                r#"{"strong_guarantee_resources": {"cpu": 4}}"#,
            ],
            overcommit("6"),
        ),
        (
            &[
                "pool",
                "set",
                "b",
                "--config",
                r#"{"strong_guarantee_resources": {"cpu": 1}}"#,
            ],
            String::new(),
        ),
        (&["pool", "apply", file], overcommit("6")),
        (&["pool", "remove", "b"], String::new()),
    ];
    for (args, stderr) in cases {
        let out = common::run_cli(&c.url, &[], args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), *stderr, "{args:?}");
    }
    // Applied all the same.
    assert_eq!(
        pool(&c, "a")["strong_guarantee_resources"]["cpu"],
        json!(3.0)
    );
    c.stop();
}
