//! End to end, with real processes on 127.0.0.1: `op list` shows the newest `--limit`
//! operations, or `--all` of them, in submission order.

mod common;

use common::Cluster;
use serde_json::Value;

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect()
}

#[test]
fn op_list_shows_the_newest_or_all() {
    let c = Cluster::start("[scheduler]\nfair_share_update_period_ms = 100\n", &[]);
    for id in ["o1", "o2", "o3"] {
        c.cli(&["op", "run", "--id", id, "--jobs", "1", "--", "true"]);
    }
    assert_eq!(ids(&c.json(&["op", "list"])), ["o1", "o2", "o3"]);
    assert_eq!(ids(&c.json(&["op", "list", "--limit", "2"])), ["o2", "o3"]);
    assert_eq!(ids(&c.json(&["op", "list", "--all"])), ["o1", "o2", "o3"]);
    let table = c.cli(&["op", "list", "--limit", "1"]);
    assert!(table.contains("o3") && !table.contains("o2"), "{table}");
    c.stop();
}
