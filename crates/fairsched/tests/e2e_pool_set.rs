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
            "~ p: weight 2.0 -> 3.0\n",
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
            "~ p: weight 3.0 -> unset\n",
            json!({"strong_guarantee_resources": {"cpu": 1.0}}),
        ),
        (
            r#"{"weight": 5}"#,
            true,
            "~ p: strong_guarantee_resources {\"cpu\":1.0} -> unset, weight unset -> 5.0\n",
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
