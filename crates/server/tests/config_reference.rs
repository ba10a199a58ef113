//! `docs/server-config-reference.md` is what the server's configuration types generate, byte
//! for byte, and its defaults are the code's (`ServerConfig::default()`).
//!
//! On drift, regenerate it: `UPDATE_DOCS=1 cargo test -p fairsched-server --test
//! config_reference`.

use fairsched_config::reference::assert_file_up_to_date;
use fairsched_core::SchedulerConfig;
use fairsched_server::ServerConfig;
use fairsched_server::reference::{UPDATE_COMMAND, server_config};
use serde_json::{Map, Value, json};
use std::path::PathBuf;

fn reference_path() -> PathBuf {
    // Cargo sets CARGO_MANIFEST_DIR when it runs the test too; prefer that to the build's.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir.join("../../docs/server-config-reference.md")
}

#[test]
fn server_config_reference_is_up_to_date() {
    assert_file_up_to_date(
        &reference_path(),
        &server_config().markdown(),
        UPDATE_COMMAND,
    );
}

#[test]
fn markdown_is_deterministic() {
    assert_eq!(server_config().markdown(), server_config().markdown());
}

/// The documented defaults of a struct of the schema, as an object of option → default.
fn documented_defaults(schema: &Value, type_name: &str) -> Map<String, Value> {
    let definition = &schema["$defs"][type_name];
    let properties = definition["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{type_name} has no properties"));
    let mut defaults = Map::new();
    for (option, property) in properties {
        // An alias is documented by the option it names.
        if property.get("x-alias-of").is_some() {
            continue;
        }
        assert!(
            property.get("description").is_some(),
            "{type_name}.{option} has no doc comment"
        );
        let default = property
            .get("default")
            .unwrap_or_else(|| panic!("{type_name}.{option} has no default"));
        defaults.insert(option.clone(), default.clone());
    }
    defaults
}

/// Every option of the server's file and of `[scheduler]` is documented with a default, and
/// those defaults are the code's: a file holding exactly the documented defaults parses to
/// `ServerConfig::default()`.
#[test]
fn documented_defaults_are_the_defaults() {
    let schema = server_config().json_schema();
    assert_eq!(schema["$ref"], "#/$defs/ServerConfig");

    let scheduler = documented_defaults(&schema, "SchedulerConfig");
    let parsed: SchedulerConfig = serde_json::from_value(Value::Object(scheduler.clone()))
        .expect("the documented scheduler defaults parse");
    assert_eq!(parsed, SchedulerConfig::default());

    let mut server = documented_defaults(&schema, "ServerConfig");
    assert_eq!(server["scheduler"], Value::Object(scheduler));
    // An unset option is left out of a file.
    server.retain(|_, v| !v.is_null());
    let parsed: ServerConfig =
        serde_json::from_value(Value::Object(server)).expect("the documented defaults parse");
    assert_eq!(parsed, ServerConfig::default());
}

/// The JSON schema accepts what the server accepts: it is complete down to the inline pool
/// trees, with their aliases.
#[test]
fn schema_is_complete_with_inline_pool_trees() {
    let schema = server_config().json_schema();
    let definitions = schema["$defs"].as_object().expect("$defs");
    for name in [
        "ServerConfig",
        "SchedulerConfig",
        "PoolTrees",
        "TreeConfig",
        "PoolNode",
    ] {
        assert!(
            definitions.contains_key(name),
            "{name} is not in the schema"
        );
    }
    assert_eq!(
        definitions["TreeConfig"]["properties"]["fair_share_preemption_timeout_ms"]["x-alias-of"],
        json!("fair_share_starvation_timeout_ms")
    );
    assert_eq!(
        definitions["ServerConfig"]["x-order"],
        json!([
            "listen",
            "advertise_url",
            "data_dir",
            "agent_token",
            "agent_token_file",
            "pool_trees_file",
            "pool_trees",
            "scheduler",
            "node_timeout_ms",
            "history_retention_ms",
            "auth",
            "store"
        ])
    );
}

/// The page documents the server's options and `[scheduler]` here and links the pool-tree
/// options to their own page instead of repeating them.
#[test]
fn page_links_the_pool_trees_reference() {
    let page = server_config().markdown();
    assert!(page.contains("## Server file"));
    assert!(page.contains("## Scheduler\n\n**Where:** `scheduler`."));
    assert!(page.contains("`fair_share_update_period_ms` | integer (milliseconds) | `200` |"));
    assert!(page.contains("(config-reference.md#file-layout)"));
    assert!(
        !page.contains("## Tree options"),
        "pool-tree sections are repeated"
    );
}
