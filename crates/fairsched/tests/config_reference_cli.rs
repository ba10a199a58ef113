//! `fairsched config reference` prints the checked-in references (their drift tests live in
//! fairsched-server and fairsched-config): the server's file by default, the pool-trees file
//! with `--for pool-trees`, and either as a JSON schema.

use std::path::PathBuf;
use std::process::Command;

fn fairsched(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_fairsched"))
        .args(args)
        .output()
        .expect("run fairsched");
    assert!(
        output.status.success(),
        "fairsched {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn doc(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn prints_the_server_reference_by_default() {
    let printed = fairsched(&["config", "reference"]);
    assert_eq!(printed, doc("server-config-reference.md"));
    assert_eq!(
        fairsched(&["config", "reference", "--for", "server"]),
        printed
    );
}

#[test]
fn prints_the_pool_trees_reference() {
    assert_eq!(
        fairsched(&["config", "reference", "--for", "pool-trees"]),
        doc("config-reference.md")
    );
}

#[test]
fn prints_json_schemas() {
    let server: serde_json::Value = serde_json::from_str(&fairsched(&[
        "config",
        "reference",
        "--format",
        "json-schema",
    ]))
    .expect("JSON");
    assert_eq!(server["title"], "fairsched server configuration");
    assert!(
        server["$defs"]["SchedulerConfig"]["properties"]["node_heartbeat_period_ms"].is_object()
    );
    assert!(server["$defs"]["PoolNode"].is_object());
    let trees: serde_json::Value = serde_json::from_str(&fairsched(&[
        "config",
        "reference",
        "--for",
        "pool-trees",
        "--format",
        "json-schema",
    ]))
    .expect("JSON");
    assert_eq!(trees["title"], "fairsched pool trees");
    assert!(trees["$defs"].get("ServerConfig").is_none());
}
