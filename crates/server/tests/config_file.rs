//! The server's file (`ServerConfig`): the default survives being written and read back, an
//! empty file is the default, and a misspelt option is an error that names it.

use fairsched_server::ServerConfig;

#[test]
fn default_round_trips_through_toml() {
    let written = toml::to_string(&ServerConfig::default()).expect("default as TOML");
    let read = ServerConfig::from_toml(&written).expect("default TOML parses back");
    assert_eq!(read, ServerConfig::default());
    assert_eq!(
        ServerConfig::from_toml("").expect("empty file"),
        ServerConfig::default()
    );
}

/// A misspelt option, at the top or in `[scheduler]`, is an error naming it (with its path
/// and line), not silently ignored.
#[test]
fn misspelt_options_are_errors_naming_them() {
    let error = ServerConfig::from_toml("listen = \"127.0.0.1:0\"\nnode_timeout = 100\n")
        .expect_err("unknown top-level option")
        .to_string();
    assert!(error.contains("node_timeout"), "{error}");
    assert!(error.contains(":2:1:"), "{error}");

    let error = ServerConfig::from_toml(
        "[scheduler]\nfair_share_update_period_ms = 100\nfair_share_update_perod_ms = 50\n",
    )
    .expect_err("unknown scheduler option")
    .to_string();
    assert!(error.contains("fair_share_update_perod_ms"), "{error}");
    assert!(
        error.contains("scheduler.fair_share_update_perod_ms"),
        "{error}"
    );
    assert!(error.contains(":3:1:"), "{error}");

    let error = ServerConfig::from_toml("[pool_trees.pool_trees.default.pools.a]\nweigth = 2\n")
        .expect_err("unknown pool option")
        .to_string();
    assert!(error.contains("weigth"), "{error}");

    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("fairsched.toml");
    std::fs::write(&path, "[scheduler]\nnode_heartbeat_period = 100\n").expect("write");
    let error = ServerConfig::from_file(&path)
        .expect_err("unknown option in a file")
        .to_string();
    assert!(error.contains("fairsched.toml:2:1:"), "{error}");
    assert!(error.contains("node_heartbeat_period"), "{error}");
}
