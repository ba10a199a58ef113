//! Renders a reference schema ([`super::Reference::json_schema`]) as Markdown: one section
//! per option group (a struct of the configuration), reached depth-first from the top of the
//! file in declaration order, each a table of its options; then the value types (resource maps
//! and enumerations). Groups documented on a linked page are linked, not repeated.

use super::{LinkedPage, Page, SectionStyle};
use fairsched_resources::{PartialResources, ResourceKind, format_amount};
use serde_json::{Map, Value};
use std::fmt::Write as _;

const RESOURCE_MAP: &str = "ResourceMap";
const RESOURCE_NAME: &str = "ResourceName";
const RESOURCE_MAPS_TITLE: &str = "Resource maps";

/// The page of a reference schema.
pub(super) fn render(schema: Value, page: &Page) -> String {
    Renderer::new(schema, page).render()
}

struct Section {
    name: String,
    /// Where the group appears in a file, first the path it was reached by.
    paths: Vec<String>,
}

/// Where a struct is documented.
enum Home<'a> {
    /// In a section of this page.
    Here(&'a str),
    /// In a section of a linked page.
    There(&'a LinkedPage, &'a str),
}

struct Renderer<'a> {
    page: &'a Page,
    definitions: Map<String, Value>,
    sections: Vec<Section>,
    enums: Vec<String>,
    resource_maps: bool,
}

impl<'a> Renderer<'a> {
    fn new(schema: Value, page: &'a Page) -> Renderer<'a> {
        let definitions = match schema.get("$defs") {
            Some(Value::Object(definitions)) => definitions.clone(),
            _ => panic!("the reference schema has no $defs"),
        };
        let root = ref_name(&schema).expect("the reference schema's root is a $ref");
        let mut renderer = Renderer {
            page,
            definitions,
            sections: Vec::new(),
            enums: Vec::new(),
            resource_maps: false,
        };
        renderer.visit(&root, String::new());
        renderer
    }

    /// Depth-first walk from a struct, in declaration order, collecting sections and enums.
    fn visit(&mut self, name: &str, path: String) {
        if let Some(section) = self.sections.iter_mut().find(|s| s.name == name) {
            if !section.paths.contains(&path) {
                section.paths.push(path);
            }
            return;
        }
        self.sections.push(Section {
            name: name.to_string(),
            paths: vec![path.clone()],
        });
        let definition = self.definition(name).clone();
        for (option, schema) in options(&definition) {
            let mut child_path = join(&path, option);
            let mut target = schema;
            // Unwrap maps, lists and optional values down to the type they hold.
            loop {
                let inner = non_null(target);
                if let Some(Value::Object(_)) = inner.get("additionalProperties") {
                    let value = &inner["additionalProperties"];
                    let placeholder = ref_name(value)
                        .map(|n| self.placeholder(&n))
                        .unwrap_or("name");
                    child_path = format!("{child_path}.<{placeholder}>");
                    target = value;
                } else if let Some(items) = inner.get("items") {
                    child_path = format!("{child_path}[]");
                    target = items;
                } else {
                    target = inner;
                    break;
                }
            }
            let Some(referenced) = ref_name(target) else {
                continue;
            };
            let referenced_definition = self.definition(&referenced);
            if referenced == RESOURCE_MAP {
                self.resource_maps = true;
            } else if is_struct(referenced_definition) {
                // Groups of a linked page are only linked to.
                if matches!(self.home(&referenced), Home::Here(_)) {
                    self.visit(&referenced, child_path);
                }
            } else if is_enum(referenced_definition)
                && referenced != RESOURCE_NAME
                && !self.enums.contains(&referenced)
            {
                self.enums.push(referenced);
            }
        }
    }

    fn definition(&self, name: &str) -> &Value {
        self.definitions
            .get(name)
            .unwrap_or_else(|| panic!("the reference schema has no definition {name}"))
    }

    /// Where a struct (by schema name) is documented: a section of a linked page if one has
    /// it and this page does not, else here.
    fn home<'n>(&self, name: &'n str) -> Home<'n>
    where
        'a: 'n,
    {
        if self.page.sections.iter().any(|s| s.type_name == name) {
            return Home::Here(name);
        }
        for linked in &self.page.linked {
            if linked.sections.iter().any(|s| s.type_name == name) {
                return Home::There(linked, name);
            }
        }
        Home::Here(name)
    }

    /// The style of a struct's section, on this page or a linked one.
    fn style(&self, name: &str) -> Option<&'a SectionStyle> {
        self.page
            .sections
            .iter()
            .chain(self.page.linked.iter().flat_map(|l| l.sections))
            .find(|s| s.type_name == name)
    }

    /// The section title of a struct (its schema name when it has none).
    fn title<'n>(&self, name: &'n str) -> &'n str
    where
        'a: 'n,
    {
        self.style(name).map_or(name, |s| s.title)
    }

    /// The placeholder of map keys whose values are of this type.
    fn placeholder(&self, name: &str) -> &'static str {
        self.style(name).map_or("name", |s| s.placeholder)
    }

    /// A link to a struct's section (`#tree-options`, `config-reference.md#tree-options`).
    fn section_link(&self, name: &str) -> String {
        match self.home(name) {
            Home::Here(name) => format!("#{}", slug(self.title(name))),
            Home::There(linked, name) => format!("{}#{}", linked.file, slug(self.title(name))),
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        self.intro(&mut out);
        for section in &self.sections {
            self.struct_section(&mut out, section);
        }
        if self.resource_maps || !self.enums.is_empty() {
            out.push_str("## Value types\n\n");
        }
        if self.resource_maps {
            self.resource_maps(&mut out);
        }
        for name in &self.enums {
            self.enum_section(&mut out, name);
        }
        // One newline at the end of the file.
        while out.ends_with("\n\n") {
            out.pop();
        }
        out
    }

    fn intro(&self, out: &mut String) {
        let page = self.page;
        let _ = write!(
            out,
            "# {}\n\n\
             <!-- Generated from {} by `{}`; do not edit. To update: {} -->\n\n\
             {}\n\n\
             Sections:\n\n",
            page.title,
            page.source,
            page.command,
            page.update_command,
            page.intro.trim(),
        );
        for section in &self.sections {
            let title = self.title(&section.name);
            let _ = writeln!(
                out,
                "- [{title}](#{}) — {}",
                slug(title),
                self.where_text(section)
            );
        }
        let mut value_types = Vec::new();
        if self.resource_maps {
            value_types.push(format!(
                "[{RESOURCE_MAPS_TITLE}](#{})",
                slug(RESOURCE_MAPS_TITLE)
            ));
        }
        value_types.extend(
            self.enums
                .iter()
                .map(|name| format!("[{name}](#{})", slug(name))),
        );
        if !value_types.is_empty() {
            let _ = writeln!(
                out,
                "- [Value types](#value-types): {}",
                value_types.join(", ")
            );
        }
        out.push('\n');
    }

    fn where_text(&self, section: &Section) -> String {
        let paths: Vec<String> = section
            .paths
            .iter()
            .map(|p| {
                if p.is_empty() {
                    "the top level of the file".to_string()
                } else {
                    format!("`{p}`")
                }
            })
            .collect();
        paths.join(", ")
    }

    fn struct_section(&self, out: &mut String, section: &Section) {
        let title = self.title(&section.name);
        let definition = self.definition(&section.name);
        let _ = write!(
            out,
            "## {title}\n\n**Where:** {}. **Rust type:** `{}`.\n\n",
            self.where_text(section),
            section.name
        );
        if let Some(description) = definition.get("description").and_then(Value::as_str) {
            out.push_str(&self.doc_text(description));
            out.push_str("\n\n");
        }
        out.push_str("| option | type | default | description |\n|---|---|---|---|\n");
        for (option, schema) in options(definition) {
            let mut name_cell =
                format!("<a id=\"{}\"></a>`{option}`", option_anchor(title, option));
            if let Some(Value::Array(aliases)) = schema.get("x-aliases") {
                let aliases: Vec<String> = aliases
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|a| format!("`{a}`"))
                    .collect();
                let _ = write!(name_cell, "<br>alias {}", aliases.join(", "));
            }
            let default = match schema.get("default") {
                Some(value) => self.default_text(schema, value),
                None => panic!(
                    "{}.{option} has no default in the schema: add \
                     #[schemars(!skip_serializing_if)] to the field",
                    section.name
                ),
            };
            let description = schema
                .get("description")
                .and_then(Value::as_str)
                .map(|d| cell(&self.doc_text(d)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| {name_cell} | {} | {default} | {description} |",
                self.type_text(option, schema)
            );
        }
        out.push('\n');
    }

    /// The type of an option, in words, with links to the sections of structs and enums.
    fn type_text(&self, option: &str, schema: &Value) -> String {
        let schema = non_null(schema);
        if let Some(name) = ref_name(schema) {
            let definition = self.definition(&name);
            return if name == RESOURCE_MAP {
                format!("[resources](#{})", slug(RESOURCE_MAPS_TITLE))
            } else if name == RESOURCE_NAME {
                format!("resource name: {}", or_list(&enum_values(definition)))
            } else if is_enum(definition) {
                format!(
                    "{} ([{name}](#{}))",
                    or_list(&enum_values(definition)),
                    slug(&name)
                )
            } else {
                let title = self.title(&name);
                let link = self.section_link(&name);
                match self.home(&name) {
                    Home::Here(_) => format!("object ([{title}]({link}))"),
                    Home::There(linked, _) => {
                        format!("object ([{title}]({link}) in {})", linked.name)
                    }
                }
            };
        }
        if let Some(items) = schema.get("items") {
            let item = self.type_text("", items);
            return match item.split_once(' ') {
                Some(("object", rest)) => format!("list of objects {rest}"),
                None if !item.contains('`') => format!("list of {item}s"),
                _ => format!("list of {item}"),
            };
        }
        if let Some(values @ Value::Object(_)) = schema.get("additionalProperties") {
            let placeholder = ref_name(values)
                .map(|n| self.placeholder(&n))
                .unwrap_or("name");
            return format!("map: `<{placeholder}>` → {}", self.type_text("", values));
        }
        let base = match schema.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(types)) => types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "any".to_string(),
        };
        if base == "integer" && option.ends_with("_ms") {
            "integer (milliseconds)".to_string()
        } else {
            base
        }
    }

    fn default_text(&self, schema: &Value, value: &Value) -> String {
        if value.is_null() {
            return "unset".to_string();
        }
        match ref_name(non_null(schema)) {
            Some(name) if name == RESOURCE_MAP => return format!("`{}`", resources_text(value)),
            Some(name) if is_struct(self.definition(&name)) => {
                return format!("[its options' defaults]({})", self.section_link(&name));
            }
            _ => {}
        }
        format!("`{}`", cell(&value_text(value)))
    }

    fn resource_maps(&self, out: &mut String) {
        let definition = self.definition(RESOURCE_MAP);
        let _ = write!(out, "### {RESOURCE_MAPS_TITLE}\n\n");
        if let Some(description) = definition.get("description").and_then(Value::as_str) {
            out.push_str(&self.doc_text(description));
            out.push_str("\n\n");
        }
        out.push_str("| resource | amount |\n|---|---|\n");
        for (name, schema) in options(definition) {
            let description = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let _ = writeln!(out, "| `{name}` | {} |", cell(&self.doc_text(description)));
        }
        out.push('\n');
    }

    fn enum_section(&self, out: &mut String, name: &str) {
        let definition = self.definition(name);
        let _ = write!(out, "### {name}\n\n");
        if let Some(description) = definition.get("description").and_then(Value::as_str) {
            out.push_str(&self.doc_text(description));
            out.push_str("\n\n");
        }
        let aliases = |value: &str| -> Vec<String> {
            match definition.get("x-aliases") {
                Some(Value::Object(aliases)) => aliases
                    .iter()
                    .filter(|(_, of)| of.as_str() == Some(value))
                    .map(|(alias, _)| format!("`{alias}`"))
                    .collect(),
                _ => Vec::new(),
            }
        };
        match definition.get("oneOf") {
            Some(Value::Array(variants)) => {
                out.push_str("| value | meaning |\n|---|---|\n");
                for variant in variants {
                    let value = variant_value(variant);
                    let mut value_cell = format!("`{value}`");
                    let aliases = aliases(&value);
                    if !aliases.is_empty() {
                        let _ = write!(value_cell, "<br>alias {}", aliases.join(", "));
                    }
                    let description = variant
                        .get("description")
                        .and_then(Value::as_str)
                        .map(|d| cell(&self.doc_text(d)))
                        .unwrap_or_default();
                    let _ = writeln!(out, "| {value_cell} | {description} |");
                }
            }
            _ => {
                let values = enum_values(definition);
                let _ = writeln!(out, "Values: {}.", or_list(&values));
            }
        }
        out.push('\n');
    }

    /// A doc comment as Markdown: intra-doc links (`[`PoolConfig::weight`]`) become links to
    /// the option (or plain code when the target is not in the reference).
    fn doc_text(&self, doc: &str) -> String {
        let mut out = String::new();
        let mut rest = doc;
        while let Some(start) = rest.find("[`") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("`]") else {
                break;
            };
            let target = &after[..end];
            let is_link = after[end + 2..].starts_with('(');
            let is_path = !target.is_empty()
                && target
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == ':');
            if is_link || !is_path {
                out.push_str(&rest[..start + 2]);
                rest = after;
                continue;
            }
            out.push_str(&rest[..start]);
            out.push_str(&self.intra_doc_link(target));
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    }

    fn intra_doc_link(&self, target: &str) -> String {
        // `Type::option`, or a type alone (members are snake case, types camel case).
        let (type_name, member) = match target.rsplit_once("::") {
            Some((_, last)) if last.starts_with(char::is_uppercase) => (last, None),
            Some((type_name, member)) => (type_name, Some(member)),
            None => (target, None),
        };
        // A path (`fairsched_config::TreeConfig`) names the type by its last segment.
        let type_name = type_name.rsplit("::").next().unwrap_or(type_name);
        // Other names of a section's type apply to its members only: `[`PoolConfig`]` itself
        // is not the section `PoolNode`.
        let type_name = match member {
            Some(_) => self
                .page
                .type_aliases
                .iter()
                .chain(self.page.linked.iter().flat_map(|l| l.type_aliases))
                .find(|(alias, _)| *alias == type_name)
                .map_or(type_name, |(_, name)| *name),
            None => type_name,
        };
        let known =
            self.style(type_name).is_some() || self.sections.iter().any(|s| s.name == type_name);
        if !known {
            return format!("`{target}`");
        }
        let title = self.title(type_name);
        let link = self.section_link(type_name);
        match member {
            Some(member) => {
                let (file, _) = link.split_once('#').unwrap_or(("", ""));
                format!("[`{member}`]({file}#{})", option_anchor(title, member))
            }
            None => format!("[{title}]({link})"),
        }
    }
}

/// The options of a struct definition in declaration order (`x-order`), aliases left out.
fn options(definition: &Value) -> Vec<(&str, &Value)> {
    let properties = definition.get("properties").and_then(Value::as_object);
    let order = definition.get("x-order").and_then(Value::as_array);
    match (properties, order) {
        (Some(properties), Some(order)) => order
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|name| properties.get(name).map(|schema| (name, schema)))
            .collect(),
        _ => Vec::new(),
    }
}

fn is_struct(definition: &Value) -> bool {
    definition.get("properties").is_some()
}

fn is_enum(definition: &Value) -> bool {
    definition.get("enum").is_some() || definition.get("oneOf").is_some()
}

/// The name a `$ref` points to (`#/$defs/TreeConfig` → `TreeConfig`).
fn ref_name(schema: &Value) -> Option<String> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(str::to_string)
}

/// The schema without its "or null" (`Option`): `anyOf [X, null]` → X.
fn non_null(schema: &Value) -> &Value {
    if let Some(Value::Array(any_of)) = schema.get("anyOf") {
        let not_null: Vec<&Value> = any_of
            .iter()
            .filter(|s| s.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if let [only] = not_null.as_slice() {
            return only;
        }
    }
    schema
}

/// An enum's values in declaration order, without aliases.
fn enum_values(definition: &Value) -> Vec<String> {
    let aliases = definition.get("x-aliases").and_then(Value::as_object);
    if let Some(Value::Array(variants)) = definition.get("oneOf") {
        return variants.iter().map(variant_value).collect();
    }
    match definition.get("enum") {
        Some(Value::Array(values)) => values
            .iter()
            .filter_map(Value::as_str)
            .filter(|v| !aliases.is_some_and(|a| a.contains_key(*v)))
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

fn variant_value(variant: &Value) -> String {
    variant
        .get("const")
        .or_else(|| variant.get("enum").and_then(|e| e.get(0)))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// "`a`, `b` or `c`".
fn or_list(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

fn join(path: &str, option: &str) -> String {
    if path.is_empty() {
        option.to_string()
    } else {
        format!("{path}.{option}")
    }
}

/// A GitHub heading anchor: lower case, punctuation dropped, spaces as hyphens.
fn slug(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn option_anchor(section_title: &str, option: &str) -> String {
    format!("{}.{option}", slug(section_title))
}

/// Text for one table cell: lines joined, paragraphs separated by `<br><br>`, `|` escaped.
fn cell(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("<br><br>")
        .replace('|', "\\|")
}

/// A JSON value written compactly, with a space after `,` and `:`.
fn value_text(value: &Value) -> String {
    match value {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_text).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), value_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// A resource map in canonical resource order, amounts as a user writes them
/// (`{"user_slots": 1, "cpu": 1, "memory": "256MiB"}`).
fn resources_text(value: &Value) -> String {
    let resources: PartialResources = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("default {value} is not a resource map: {e}"));
    let parts: Vec<String> = ResourceKind::ALL
        .into_iter()
        .zip(resources.raw())
        .filter_map(|(kind, raw)| {
            let raw = raw?;
            let text = format_amount(kind, raw);
            let amount = if text.parse::<f64>().is_ok() {
                text
            } else {
                format!("\"{text}\"")
            };
            Some(format!("\"{}\": {amount}", kind.name()))
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intra_doc_links_point_at_options() {
        let reference = crate::reference::pool_trees();
        let renderer = Renderer::new(reference.json_schema(), &reference.page);
        assert_eq!(
            renderer.doc_text("See [`PoolConfig::weight`]; [`Foo`] and [`x`](y) stay."),
            "See [`weight`](#pool-options.weight); `Foo` and [`x`](y) stay."
        );
    }

    #[test]
    fn links_to_a_linked_page() {
        let reference = crate::reference::pool_trees();
        let page = Page {
            sections: &[],
            type_aliases: &[],
            linked: vec![crate::reference::POOL_TREES_LINK],
            ..reference.page.clone()
        };
        let renderer = Renderer::new(reference.json_schema(), &page);
        assert_eq!(
            renderer.doc_text(
                "[`fairsched_config::TreeConfig::enable_limiting_ancestor_check`], \
                 [`fairsched_config::PoolTrees`]"
            ),
            "[`enable_limiting_ancestor_check`](config-reference.md#tree-options.\
             enable_limiting_ancestor_check), [File layout](config-reference.md#file-layout)"
        );
        // Nothing of the linked page is repeated: the root is the only section.
        assert_eq!(renderer.sections.len(), 1);
        assert!(!renderer.resource_maps && renderer.enums.is_empty());
    }

    #[test]
    fn cells_join_lines_and_escape_pipes() {
        assert_eq!(cell("a\nb | c\n\nd"), "a b \\| c<br><br>d");
    }

    #[test]
    fn resource_defaults_in_canonical_order_with_units() {
        let value = serde_json::json!({"memory": 268435456, "cpu": 1.5, "user_slots": 1});
        assert_eq!(
            resources_text(&value),
            r#"{"user_slots": 1, "cpu": 1.5, "memory": "256MiB"}"#
        );
    }

    #[test]
    fn slugs_like_github() {
        assert_eq!(slug("Access-control entries"), "access-control-entries");
        assert_eq!(slug("SSD priority preemption"), "ssd-priority-preemption");
    }
}
