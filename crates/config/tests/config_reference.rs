//! `docs/config-reference.md` is what the configuration types generate, byte for byte.
//!
//! On drift, regenerate it: `UPDATE_DOCS=1 cargo test -p fairsched-config --test
//! config_reference`.

use fairsched_config::reference::{UPDATE_COMMAND, assert_file_up_to_date, pool_trees};
use std::path::PathBuf;

fn reference_path() -> PathBuf {
    // Cargo sets CARGO_MANIFEST_DIR when it runs the test too; prefer that to the build's.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir.join("../../docs/config-reference.md")
}

#[test]
fn config_reference_is_up_to_date() {
    assert_file_up_to_date(&reference_path(), &pool_trees().markdown(), UPDATE_COMMAND);
}

/// Every option of every group is in the schema with its default, and aliases are accepted.
#[test]
fn schema_documents_every_option_with_a_default() {
    let schema = pool_trees().json_schema();
    let definitions = schema["$defs"].as_object().expect("$defs");
    for (name, definition) in definitions {
        let Some(properties) = definition.get("properties").and_then(|p| p.as_object()) else {
            continue;
        };
        for (option, property) in properties {
            if property.get("x-alias-of").is_some() || name == "ResourceMap" {
                continue;
            }
            assert!(
                property.get("default").is_some(),
                "{name}.{option} has no default"
            );
            assert!(
                property.get("description").is_some(),
                "{name}.{option} has no doc comment"
            );
        }
    }
    let tree = &definitions["TreeConfig"]["properties"];
    assert_eq!(
        tree["fair_share_starvation_timeout_ms"]["x-aliases"],
        serde_json::json!(["fair_share_preemption_timeout_ms"])
    );
    assert_eq!(
        tree["fair_share_preemption_timeout_ms"]["x-alias-of"],
        "fair_share_starvation_timeout_ms"
    );
    assert_eq!(tree["fair_share_starvation_timeout_ms"]["default"], 30_000);
}

/// The reference is deterministic (it is compared byte for byte).
#[test]
fn markdown_is_deterministic() {
    assert_eq!(pool_trees().markdown(), pool_trees().markdown());
}
