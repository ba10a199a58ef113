//! The configuration reference, generated from the configuration types.
//!
//! [`json_schema`] is the JSON schema (draft 2020-12) of a pool-trees file ([`PoolTrees`]) as
//! schemars derives it from the types: option names and types from serde, descriptions from
//! the doc comments, defaults from the `Default` impls. Two things schemars does not record
//! are added from the types' serde impls (see `probe`): each option's aliases (`x-aliases` on
//! the option; the aliases are also accepted as properties, marked `x-alias-of`, so the schema
//! validates files that use them) and the declaration order of the options (`x-order`).
//!
//! [`markdown`] renders that schema as `docs/config-reference.md`; `fairsched config
//! reference` prints either, and `tests/config_reference.rs` fails when the checked-in file
//! differs from what the code generates.

mod markdown;
mod probe;

pub use markdown::{UPDATE_COMMAND, markdown};

use crate::common::{
    AceAction, FifoPoolSchedulingOrder, FifoSortParameter, IntegralGuaranteeType, Permission,
    PreemptionPriorityScope, SchedulingMode,
};
use crate::{
    AccessControlEntry, EphemeralSubpoolConfig, PoolIntegralGuaranteesConfig, PoolNode,
    PoolPresetConfig, PoolTreeConfig, PoolTrees, SsdPriorityPreemptionConfig, TreeConfig,
    TreeIntegralGuaranteesConfig,
};
use fairsched_resources::ResourceKind;
use probe::SerdeName;
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// The JSON schema of a pool-trees file, with aliases and option order (see the module docs).
pub fn json_schema() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let root = generator.subschema_for::<PoolTrees>();
    let mut definitions = generator.take_definitions(true);
    for described in described_types() {
        let Some(Value::Object(definition)) = definitions.get_mut(&described.schema_name) else {
            panic!(
                "{} is listed in reference::described_types but is not in the schema",
                described.schema_name
            );
        };
        match described.kind {
            Kind::Struct(fields) => add_struct_names(&described.schema_name, definition, &fields()),
            Kind::Enum(variants) => add_enum_aliases(definition, &variants()),
        }
    }
    let described: Vec<String> = described_types()
        .into_iter()
        .map(|d| d.schema_name)
        .collect();
    for name in definitions.keys() {
        let custom = [ResourceMap::schema_name(), ResourceName::schema_name()];
        assert!(
            described.contains(name) || custom.contains(&Cow::Borrowed(name.as_str())),
            "{name} is in the schema but not listed in reference::described_types: add it there"
        );
    }
    let mut schema = Map::new();
    schema.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    schema.insert("title".into(), json!("fairsched pool trees"));
    schema.insert(
        "description".into(),
        json!(
            "A set of pool trees: the file layout of `fairsched_config::PoolTrees` (TOML or JSON)."
        ),
    );
    schema.extend(root.to_value().as_object().cloned().unwrap_or_default());
    schema.insert("$defs".into(), Value::Object(definitions));
    Value::Object(schema)
}

/// A configuration type whose serde names the reference reads from its `Deserialize` impl.
struct Described {
    schema_name: String,
    kind: Kind,
}

enum Kind {
    Struct(fn() -> Vec<SerdeName>),
    Enum(fn() -> Vec<SerdeName>),
}

fn structure<T: JsonSchema + DeserializeOwned>() -> Described {
    Described {
        schema_name: T::schema_name().into_owned(),
        kind: Kind::Struct(probe::struct_fields::<T>),
    }
}

fn enumeration<T: JsonSchema + DeserializeOwned + Serialize>() -> Described {
    Described {
        schema_name: T::schema_name().into_owned(),
        kind: Kind::Enum(probe::enum_variants::<T>),
    }
}

/// Every struct and enum of the configuration. [`json_schema`] panics when the schema holds a
/// type that is not listed here, so a new nested type cannot be left without its aliases.
fn described_types() -> Vec<Described> {
    vec![
        structure::<PoolTrees>(),
        structure::<PoolTreeConfig>(),
        structure::<TreeConfig>(),
        structure::<TreeIntegralGuaranteesConfig>(),
        structure::<SsdPriorityPreemptionConfig>(),
        structure::<PoolPresetConfig>(),
        structure::<PoolNode>(),
        structure::<PoolIntegralGuaranteesConfig>(),
        structure::<EphemeralSubpoolConfig>(),
        structure::<AccessControlEntry>(),
        enumeration::<SchedulingMode>(),
        enumeration::<FifoSortParameter>(),
        enumeration::<FifoPoolSchedulingOrder>(),
        enumeration::<IntegralGuaranteeType>(),
        enumeration::<PreemptionPriorityScope>(),
        enumeration::<AceAction>(),
        enumeration::<Permission>(),
    ]
}

/// Adds `x-order` (declaration order), `x-aliases` on each option that has aliases, and one
/// property per alias (marked `x-alias-of`) so that the schema accepts what serde accepts.
fn add_struct_names(type_name: &str, definition: &mut Map<String, Value>, fields: &[SerdeName]) {
    let Some(Value::Object(properties)) = definition.get_mut("properties") else {
        panic!("{type_name}: the schema has no properties");
    };
    let mut schema_names: Vec<&String> = properties.keys().collect();
    let mut serde_names: Vec<&String> = fields.iter().map(|f| &f.name).collect();
    schema_names.sort();
    serde_names.sort();
    assert_eq!(
        schema_names, serde_names,
        "{type_name}: the schema's properties and serde's field names differ"
    );
    for field in fields.iter().filter(|f| !f.aliases.is_empty()) {
        let Some(Value::Object(property)) = properties.get_mut(&field.name) else {
            unreachable!("checked above");
        };
        property.insert("x-aliases".into(), json!(field.aliases));
        let mut alias = property.clone();
        for key in ["description", "default", "x-aliases", "title"] {
            alias.remove(key);
        }
        alias.insert(
            "description".into(),
            json!(format!("Alias of `{}`.", field.name)),
        );
        alias.insert("x-alias-of".into(), json!(field.name));
        for name in &field.aliases {
            properties.insert(name.clone(), Value::Object(alias.clone()));
        }
    }
    let order: Vec<&String> = fields.iter().map(|f| &f.name).collect();
    definition.insert("x-order".into(), json!(order));
}

/// Adds enum variants' aliases: accepted values, and `x-aliases` (alias → variant).
fn add_enum_aliases(definition: &mut Map<String, Value>, variants: &[SerdeName]) {
    let mut aliases = Map::new();
    for variant in variants {
        for alias in &variant.aliases {
            aliases.insert(alias.clone(), json!(variant.name));
        }
        if variant.aliases.is_empty() {
            continue;
        }
        if let Some(Value::Array(values)) = definition.get_mut("enum") {
            values.extend(variant.aliases.iter().map(|a| json!(a)));
        } else if let Some(Value::Array(one_of)) = definition.get_mut("oneOf") {
            for schema in one_of.iter_mut() {
                if schema.get("const") == Some(&json!(variant.name))
                    && let Some(schema) = schema.as_object_mut()
                {
                    schema.remove("const");
                    let mut values = vec![json!(variant.name)];
                    values.extend(variant.aliases.iter().map(|a| json!(a)));
                    schema.insert("enum".into(), Value::Array(values));
                }
            }
        }
    }
    if !aliases.is_empty() {
        definition.insert("x-aliases".into(), Value::Object(aliases));
    }
}

/// Schema of a resource map (`PartialResources` in the code): `{"cpu": 4, "memory": "4GiB"}`.
/// Used through `#[schemars(with = "crate::reference::ResourceMap")]`.
#[derive(Debug)]
pub struct ResourceMap;

impl JsonSchema for ResourceMap {
    fn schema_name() -> Cow<'static, str> {
        "ResourceMap".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut properties = Map::new();
        for kind in ResourceKind::ALL {
            properties.insert(
                kind.name().into(),
                json!({
                    "type": ["number", "string"],
                    "minimum": 0,
                    "description": resource_description(kind),
                }),
            );
        }
        let order: Vec<&str> = ResourceKind::ALL.iter().map(|k| k.name()).collect();
        json_schema!({
            "type": "object",
            "description": "Resource amounts by resource name; a resource left out is unset \
                (what unset means is said by each option). An amount is a number or a string \
                with a unit: binary units `KiB`, `MiB`, `GiB`, `TiB`, `PiB` (also `Ki`, `Mi`, \
                ...) are powers of 1024, decimal units `K`/`KB`/`k`, `M`/`MB`, `G`/`GB`, \
                `T`/`TB`, `P`/`PB` powers of 1000, `B` is bytes. Units are accepted for every \
                resource, though they mostly make sense for `memory`. Amounts must be >= 0. \
                Example: `{\"cpu\": 4, \"memory\": \"4GiB\"}`.",
            "properties": properties,
            "additionalProperties": false,
            "x-order": order,
        })
    }
}

fn resource_description(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::UserSlots => "Job slots: an integer.",
        ResourceKind::Cpu => "Cores, fixed point with two decimals (`1.5`, `0.25`).",
        ResourceKind::Gpu => "GPUs: an integer.",
        ResourceKind::Memory => "Bytes: an integer, or a string with a unit (`\"256MiB\"`).",
        ResourceKind::Network => "Network bandwidth units: an integer.",
    }
}

/// Schema of a resource name (`ResourceKind` in the code): `"cpu"`, `"memory"`, ...
#[derive(Debug)]
pub struct ResourceName;

impl JsonSchema for ResourceName {
    fn schema_name() -> Cow<'static, str> {
        "ResourceName".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = ResourceKind::ALL.iter().map(|k| k.name()).collect();
        json_schema!({
            "type": "string",
            "description": "A resource name, as in resource maps.",
            "enum": names,
        })
    }
}
