//! Configuration references, generated from the configuration types.
//!
//! A [`Reference`] documents one kind of file from its root type. [`Reference::json_schema`]
//! is the JSON schema (draft 2020-12) of the file as schemars derives it from the types:
//! option names and types from serde, descriptions from the doc comments, defaults from the
//! `Default` impls. Two things schemars does not record are added from the types' serde impls
//! (see `probe`, which works on any type with a derived `Deserialize`): each option's aliases
//! (`x-aliases` on the option; the aliases are also accepted as properties, marked
//! `x-alias-of`, so the schema validates files that use them) and the declaration order of
//! the options (`x-order`). [`Reference::markdown`] renders that schema as a page of `docs/`
//! ([`Page`] says how: title, introduction, section titles, and the types documented on
//! another page, which are linked instead of repeated).
//!
//! [`pool_trees`] is the reference of a pool-trees file (`docs/config-reference.md`). Crates
//! that embed pool trees in their own files build theirs from its parts ([`pool_trees_types`],
//! [`POOL_TREES_LINK`]): the server's file is documented by `fairsched_server::reference`.
//! `fairsched config reference` prints them, and drift tests ([`assert_file_up_to_date`]) fail
//! when a checked-in page differs from what the code generates.

mod markdown;
mod probe;

use crate::common::{
    AceAction, FifoPoolSchedulingOrder, FifoSortParameter, IntegralGuaranteeType, Permission,
    PreemptionPriorityScope, SchedulingMode,
};
use crate::{
    AccessControlEntry, EphemeralSubpoolConfig, GangHold, GangPlacementConfig,
    JobReservationConfig, PoolIntegralGuaranteesConfig, PoolNode, PoolPresetConfig, PoolTreeConfig,
    PoolTrees, SsdPriorityPreemptionConfig, TreeConfig, TreeIntegralGuaranteesConfig,
};
use fairsched_resources::ResourceKind;
use probe::SerdeName;
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::path::Path;

/// The command that rewrites `docs/config-reference.md`.
pub const UPDATE_COMMAND: &str =
    "UPDATE_DOCS=1 cargo test -p fairsched-config --test config_reference";

/// The reference of one kind of configuration file: its root type, every struct and enum the
/// root reaches (whose serde names are probed), and the page it renders to.
#[derive(Debug)]
pub struct Reference {
    root: fn(&mut SchemaGenerator) -> Schema,
    root_name: String,
    /// The JSON schema's `title`.
    pub schema_title: &'static str,
    /// The JSON schema's `description`.
    pub schema_description: &'static str,
    /// Every struct and enum of the file. [`Reference::json_schema`] panics when the schema
    /// holds a type that is not listed, so a new nested type cannot be left without its
    /// aliases.
    pub types: Vec<Described>,
    /// How the Markdown page looks.
    pub page: Page,
}

impl Reference {
    /// The reference of files whose top level is `Root`.
    pub fn new<Root: JsonSchema>(
        schema_title: &'static str,
        schema_description: &'static str,
        types: Vec<Described>,
        page: Page,
    ) -> Reference {
        Reference {
            root: |generator| generator.subschema_for::<Root>(),
            root_name: Root::schema_name().into_owned(),
            schema_title,
            schema_description,
            types,
            page,
        }
    }

    /// The schema name of the root type (`PoolTrees`).
    pub fn root_name(&self) -> &str {
        &self.root_name
    }

    /// The JSON schema of the file, with aliases and option order (see the module docs).
    pub fn json_schema(&self) -> Value {
        let mut generator = SchemaSettings::draft2020_12()
            .for_deserialize()
            .into_generator();
        let root = (self.root)(&mut generator);
        let mut definitions = generator.take_definitions(true);
        for described in &self.types {
            let Some(Value::Object(definition)) = definitions.get_mut(&described.schema_name)
            else {
                panic!(
                    "{} is listed in the reference's types but is not in the schema of {}",
                    described.schema_name, self.root_name
                );
            };
            match described.kind {
                Kind::Struct(fields) => {
                    add_struct_names(&described.schema_name, definition, &fields())
                }
                Kind::Enum(variants) => add_enum_aliases(definition, &variants()),
            }
        }
        for name in definitions.keys() {
            let custom = [ResourceMap::schema_name(), ResourceName::schema_name()];
            assert!(
                self.types.iter().any(|d| &d.schema_name == name)
                    || custom.contains(&Cow::Borrowed(name.as_str())),
                "{name} is in the schema of {} but not listed in the reference's types: add it \
                 there",
                self.root_name
            );
        }
        let mut schema = Map::new();
        schema.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        schema.insert("title".into(), json!(self.schema_title));
        schema.insert("description".into(), json!(self.schema_description));
        schema.extend(root.to_value().as_object().cloned().unwrap_or_default());
        schema.insert("$defs".into(), Value::Object(definitions));
        Value::Object(schema)
    }

    /// The reference as a Markdown page.
    pub fn markdown(&self) -> String {
        markdown::render(self.json_schema(), &self.page)
    }
}

/// How a reference renders as Markdown.
#[derive(Clone, Debug)]
pub struct Page {
    /// The page's heading.
    pub title: &'static str,
    /// What the page is generated from, for the "do not edit" comment ("the configuration
    /// types in crates/config").
    pub source: &'static str,
    /// The command that prints the page.
    pub command: &'static str,
    /// The command that rewrites the checked-in page.
    pub update_command: &'static str,
    /// Markdown between the "do not edit" comment and the list of sections.
    pub intro: String,
    /// Section titles of the structs this page documents (others get their schema name).
    pub sections: &'static [SectionStyle],
    /// Other names the doc comments use for a section's type (`[`PoolConfig::weight`]` is
    /// an option of `PoolNode`).
    pub type_aliases: &'static [(&'static str, &'static str)],
    /// Pages that document some of the types this one reaches: options of those types link
    /// there, and the page does not repeat their sections.
    pub linked: Vec<LinkedPage>,
}

/// How one struct is presented: its schema name, section title, and the placeholder that
/// names a map key whose value is of this type (`pool_trees.<tree>`).
#[derive(Clone, Copy, Debug)]
pub struct SectionStyle {
    pub type_name: &'static str,
    pub title: &'static str,
    pub placeholder: &'static str,
}

/// Another generated page, which documents the types of its sections.
#[derive(Clone, Copy, Debug)]
pub struct LinkedPage {
    /// The page's file, relative to the linking page (both live in `docs/`).
    pub file: &'static str,
    /// How links name the page ("the pool-trees reference").
    pub name: &'static str,
    pub sections: &'static [SectionStyle],
    pub type_aliases: &'static [(&'static str, &'static str)],
}

/// The sections of the pool-trees reference.
pub const POOL_TREES_SECTIONS: &[SectionStyle] = &[
    section("PoolTrees", "File layout", "name"),
    section("PoolTreeConfig", "Pool trees", "tree"),
    section("TreeConfig", "Tree options", "name"),
    section(
        "TreeIntegralGuaranteesConfig",
        "Tree integral guarantees",
        "name",
    ),
    section("PoolPresetConfig", "Pool presets", "preset"),
    section(
        "SsdPriorityPreemptionConfig",
        "SSD priority preemption",
        "name",
    ),
    section("JobReservationConfig", "Job reservation", "name"),
    section("GangPlacementConfig", "Gang placement", "name"),
    section("PoolNode", "Pool options", "pool"),
    section(
        "PoolIntegralGuaranteesConfig",
        "Pool integral guarantees",
        "name",
    ),
    section("EphemeralSubpoolConfig", "Ephemeral subpools", "name"),
    section("AccessControlEntry", "Access-control entries", "name"),
];

/// Other names the pool-tree types' doc comments use.
pub const POOL_TREES_TYPE_ALIASES: &[(&str, &str)] = &[("PoolConfig", "PoolNode")];

/// The pool-trees reference (`docs/config-reference.md`) as a page other pages link to.
pub const POOL_TREES_LINK: LinkedPage = LinkedPage {
    file: "config-reference.md",
    name: "the pool-trees reference",
    sections: POOL_TREES_SECTIONS,
    type_aliases: POOL_TREES_TYPE_ALIASES,
};

const fn section(
    type_name: &'static str,
    title: &'static str,
    placeholder: &'static str,
) -> SectionStyle {
    SectionStyle {
        type_name,
        title,
        placeholder,
    }
}

/// The reference of a pool-trees file ([`PoolTrees`]): `docs/config-reference.md`.
pub fn pool_trees() -> Reference {
    Reference::new::<PoolTrees>(
        "fairsched pool trees",
        "A set of pool trees: the file layout of `fairsched_config::PoolTrees` (TOML or JSON).",
        pool_trees_types(),
        Page {
            title: "Configuration reference",
            source: "the configuration types in crates/config",
            command: "fairsched config reference --for pool-trees",
            update_command: UPDATE_COMMAND,
            intro: format!(
                "Every option of a pool-trees file: its name as written in the file, the \
                 aliases also accepted, its type, its default (what it is when left out) and \
                 its documentation. A pool-trees file is what the server's `pool_trees_file` \
                 names (or its inline `pool_trees`) and what `fairsched pool apply` takes (it \
                 also takes a single tree: the layout of [Pool trees](#pool-trees)); the \
                 server's own file (`fairsched server --config`, with its `[scheduler]` \
                 block) is in the [server configuration \
                 reference](server-config-reference.md).\n\n\
                 This page is generated from the configuration types in `crates/config` (their \
                 doc comments, serde names and aliases, and `Default` impls); `fairsched config \
                 reference --for pool-trees` prints it, and `fairsched config reference --for \
                 pool-trees --format json-schema` prints the JSON schema it is rendered from. A \
                 test fails when the page and the code disagree; `{UPDATE_COMMAND}` rewrites \
                 it.\n\n\
                 Conventions:\n\n\
                 - A file is TOML or JSON, with the same shape in both. Option names are the \
                 YTsaurus names; an unknown name is an error that names the pool and the \
                 field.\n\
                 - Durations are the YTsaurus name plus `_ms`, in milliseconds.\n\
                 - Resource amounts are [resource maps](#resource-maps) such as `{{\"cpu\": 4, \
                 \"memory\": \"4GiB\"}}`.\n\
                 - *unset* is the default of an option that may be left out without a value of \
                 its own; its documentation says what applies then (the parent's value, the \
                 tree's default, ...).\n\
                 - `<tree>`, `<pool>`, `<preset>` in a path stand for names you choose."
            ),
            sections: POOL_TREES_SECTIONS,
            type_aliases: POOL_TREES_TYPE_ALIASES,
            linked: Vec::new(),
        },
    )
}

/// Fails (panics, for a test) when the checked-in generated file at `path` differs from
/// `generated`, naming the first different line and `update_command`; when the environment
/// variable `UPDATE_DOCS` is set (and not `0`), writes the file instead.
pub fn assert_file_up_to_date(path: &Path, generated: &str, update_command: &str) {
    if std::env::var_os("UPDATE_DOCS").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(path, generated)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}\nGenerate it with: {update_command}",
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
            "{} is out of date with the types it is generated from (first difference at line \
             {}):\n  file:      {}\n  generated: {}\nUpdate it with: {update_command}",
            path.display(),
            first_difference + 1,
            line(&checked_in),
            line(generated),
        );
    }
}

/// A configuration type whose serde names the reference reads from its `Deserialize` impl.
#[derive(Debug)]
pub struct Described {
    schema_name: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Struct(fn() -> Vec<SerdeName>),
    Enum(fn() -> Vec<SerdeName>),
}

impl Described {
    /// A struct with derived `JsonSchema` and `Deserialize`: its options' aliases and order.
    pub fn structure<T: JsonSchema + DeserializeOwned>() -> Described {
        Described {
            schema_name: T::schema_name().into_owned(),
            kind: Kind::Struct(probe::struct_fields::<T>),
        }
    }

    /// A unit enum with derived `JsonSchema`, `Deserialize` and `Serialize`: its values'
    /// aliases.
    pub fn enumeration<T: JsonSchema + DeserializeOwned + Serialize>() -> Described {
        Described {
            schema_name: T::schema_name().into_owned(),
            kind: Kind::Enum(probe::enum_variants::<T>),
        }
    }

    /// The type's name in the schema.
    pub fn schema_name(&self) -> &str {
        &self.schema_name
    }
}

/// Every struct and enum of a pool-trees file.
pub fn pool_trees_types() -> Vec<Described> {
    vec![
        Described::structure::<PoolTrees>(),
        Described::structure::<PoolTreeConfig>(),
        Described::structure::<TreeConfig>(),
        Described::structure::<TreeIntegralGuaranteesConfig>(),
        Described::structure::<SsdPriorityPreemptionConfig>(),
        Described::structure::<JobReservationConfig>(),
        Described::structure::<GangPlacementConfig>(),
        Described::structure::<PoolPresetConfig>(),
        Described::structure::<PoolNode>(),
        Described::structure::<PoolIntegralGuaranteesConfig>(),
        Described::structure::<EphemeralSubpoolConfig>(),
        Described::structure::<AccessControlEntry>(),
        Described::enumeration::<SchedulingMode>(),
        Described::enumeration::<FifoSortParameter>(),
        Described::enumeration::<FifoPoolSchedulingOrder>(),
        Described::enumeration::<GangHold>(),
        Described::enumeration::<IntegralGuaranteeType>(),
        Described::enumeration::<PreemptionPriorityScope>(),
        Described::enumeration::<AceAction>(),
        Described::enumeration::<Permission>(),
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
