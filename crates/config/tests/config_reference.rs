//! `docs/config-reference.md` is what the configuration types generate, byte for byte.
//!
//! On drift, regenerate it: `UPDATE_DOCS=1 cargo test -p fairsched-config --test
//! config_reference`.

use fairsched_config::reference::{UPDATE_COMMAND, json_schema, markdown};
use std::path::PathBuf;

fn reference_path() -> PathBuf {
    // Cargo sets CARGO_MANIFEST_DIR when it runs the test too; prefer that to the build's.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir.join("../../docs/config-reference.md")
}

#[test]
fn config_reference_is_up_to_date() {
    let generated = markdown();
    let path = reference_path();
    if std::env::var_os("UPDATE_DOCS").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &generated)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}\nGenerate it with: {UPDATE_COMMAND}",
            path.display()
        )
    });
    if checked_in != generated {
        let first_difference = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| checked_in.lines().count().min(generated.lines().count()));
        let line = |text: &str| text.lines().nth(first_difference).unwrap_or("").to_string();
        panic!(
            "docs/config-reference.md is out of date with the configuration types in \
             crates/config (first difference at line {}):\n  file:      {}\n  generated: {}\n\
             Update it with: {UPDATE_COMMAND}",
            first_difference + 1,
            line(&checked_in),
            line(&generated),
        );
    }
}

/// Every option of every group is in the schema with its default, and aliases are accepted.
#[test]
fn schema_documents_every_option_with_a_default() {
    let schema = json_schema();
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
    assert_eq!(markdown(), markdown());
}
