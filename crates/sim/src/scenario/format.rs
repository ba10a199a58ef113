//! The scenario file: its types and loading. Loading checks everything that can be checked
//! without running (syntax, every field name and type, resource amounts, pool trees, times);
//! what only the core can decide (a duplicate operation id, an unknown node, ...) is left to the
//! run, where it becomes an `error` line.

use super::operation::StartOperation;
use fairsched_config::{
    ConfigError, PoolConfig, PoolTreeConfig, PoolTrees, TreeConfig, ValidatedPoolTrees,
    validate_pool_trees,
};
use fairsched_core::{Millis, NodeId, OperationId, Scheduler, SchedulerConfig};
use fairsched_resources::{PartialResources, Resources};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// Name of the tree a scenario gets when it has no `pool_trees`.
pub const DEFAULT_TREE_NAME: &str = "default";

/// Default prefix of node ids (`node-0`, `node-1`, ...).
pub const DEFAULT_NODE_ID_PREFIX: &str = "node";

/// The event kinds, in the order docs/scenario-format.md lists them.
pub const EVENT_KINDS: [&str; 11] = [
    "start_operation",
    "abort_operation",
    "update_operation",
    "create_pool",
    "set_pool",
    "remove_pool",
    "set_tree",
    "add_nodes",
    "set_node",
    "remove_node",
    "snapshot",
];

/// A loaded scenario, ready to run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// `name`, if given.
    pub name: Option<String>,
    /// `description`, if given.
    pub description: Option<String>,
    /// The nodes present from time 0, in file order.
    pub nodes: Vec<NodeGroup>,
    /// The `scheduler` block.
    pub scheduler: SchedulerConfig,
    /// The pool trees as written (`default_tree` + `pool_trees`); one tree named
    /// [`DEFAULT_TREE_NAME`] with default options when the file has none.
    pub pool_trees: PoolTrees,
    /// `pool_trees`, validated.
    pub validated_trees: ValidatedPoolTrees,
    /// The events sorted by `at_ms`; events with equal times keep their file order.
    pub events: Vec<TimedEvent>,
    /// Virtual time at which the run stops (the time point itself is processed).
    pub until_ms: Millis,
    /// Problems that do not reject the file (the configuration crate's warnings).
    pub warnings: Vec<String>,
}

/// One entry of `nodes` (and the body of `add_nodes`): `count` identical nodes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    pub count: u32,
    /// A resource left out is 0.
    pub resources: Resources,
    #[serde(default)]
    pub tags: BTreeSet<String>,
    /// Ids are `<id_prefix>-<n>`, `n` counting from 0 per prefix over the whole run
    /// (default prefix `node`).
    #[serde(default)]
    pub id_prefix: Option<String>,
}

/// An event with its time and its position in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedEvent {
    pub at_ms: Millis,
    /// Index in the file's `events` array.
    pub index: usize,
    pub command: Command,
}

/// What an event does.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    StartOperation(Box<StartOperation>),
    AbortOperation {
        id: OperationId,
    },
    UpdateOperation(UpdateOperation),
    /// Boxed: a pool's options are large.
    CreatePool(Box<CreatePool>),
    SetPool(SetPool),
    RemovePool(RemovePool),
    SetTree(SetTree),
    AddNodes(NodeGroup),
    SetNode(SetNode),
    RemoveNode {
        id: NodeId,
    },
    /// Takes a snapshot with this label.
    Snapshot(String),
}

impl Command {
    /// The event kind as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::StartOperation(_) => "start_operation",
            Command::AbortOperation { .. } => "abort_operation",
            Command::UpdateOperation(_) => "update_operation",
            Command::CreatePool(_) => "create_pool",
            Command::SetPool(_) => "set_pool",
            Command::RemovePool(_) => "remove_pool",
            Command::SetTree(_) => "set_tree",
            Command::AddNodes(_) => "add_nodes",
            Command::SetNode(_) => "set_node",
            Command::RemoveNode { .. } => "remove_node",
            Command::Snapshot(_) => "snapshot",
        }
    }
}

/// `update_operation`: `{"id": .., "weight": .., "resource_limits": .., "pool": ..,
/// "scheduling_options_per_pool_tree": {tree: {pool, weight, resource_limits}}}` (the
/// core's `update_operation_with`: all of it applies, or nothing).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateOperation {
    pub id: OperationId,
    #[serde(default)]
    pub weight: Option<f64>,
    /// Replaces the operation's limits; a resource left out is unlimited.
    #[serde(default)]
    pub resource_limits: Option<PartialResources>,
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub scheduling_options_per_pool_tree: BTreeMap<String, fairsched_core::TreeSchedulingOptions>,
}

/// `create_pool`: `{"tree"?, "name", "parent"?, ...pool options}`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreatePool {
    /// Default: the default tree.
    pub tree: Option<String>,
    pub name: String,
    /// Default (or `"<Root>"`): a child of the root.
    pub parent: Option<String>,
    pub config: PoolConfig,
}

/// `set_pool`: `{"tree"?, "name", "parent"?, ...pool options}`. The options given replace
/// those options of the pool; options not given keep their values. `parent` moves the pool
/// (with its children).
#[derive(Clone, Debug, PartialEq)]
pub struct SetPool {
    pub tree: Option<String>,
    pub name: String,
    pub parent: Option<String>,
    /// The options as written (already checked against the pool options' names and types).
    pub options: Map<String, Value>,
}

/// `remove_pool`: `{"tree"?, "name"}`. A pool with child pools cannot be removed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemovePool {
    #[serde(default)]
    pub tree: Option<String>,
    pub name: String,
}

/// `set_tree`: `{"tree"?, "config": {...tree options}}`. The options given replace those
/// options; options not given keep their values.
#[derive(Clone, Debug, PartialEq)]
pub struct SetTree {
    pub tree: Option<String>,
    /// The options as written (already checked against the tree options' names and types).
    pub options: Map<String, Value>,
}

/// `set_node`: `{"id", "resources"?, "tags"?, "scheduler_jobs_enabled"?}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetNode {
    pub id: NodeId,
    #[serde(default)]
    pub resources: Option<Resources>,
    #[serde(default)]
    pub tags: Option<BTreeSet<String>>,
    #[serde(default)]
    pub scheduler_jobs_enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArg<T> {
    id: T,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetTreeArgs {
    #[serde(default)]
    tree: Option<String>,
    config: Map<String, Value>,
}

/// The file as written; `events` are parsed one by one afterwards.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    nodes: Vec<NodeGroup>,
    #[serde(default)]
    scheduler: SchedulerConfig,
    #[serde(default)]
    default_tree: Option<String>,
    #[serde(default)]
    pool_trees: Option<BTreeMap<String, PoolTreeConfig>>,
    #[serde(default)]
    events: Vec<Value>,
    until_ms: Millis,
}

/// One thing wrong with a file: where (a JSON path such as
/// `events[3].start_operation.tasks[0].job_cont`, empty for the file as a whole) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A scenario file that cannot be run. Displayed as one line per problem:
/// `FILE: PATH: MESSAGE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file as given on the command line (or a label for text).
    pub file: String,
    /// Never empty.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: {p}", self.file)?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Reads and checks a scenario file.
pub fn load_file(path: &Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        problems: vec![Problem::new("", format!("cannot read the file: {e}"))],
    })?;
    parse_str(&text, &file)
}

/// Parses and checks a scenario; `file` names it in errors.
pub fn parse_str(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    parse(text).map_err(|problems| ScenarioError {
        file: file.to_string(),
        problems,
    })
}

fn parse(text: &str) -> Result<Scenario, Vec<Problem>> {
    // Serde would also read the top-level struct from an array.
    if !text.trim_start().starts_with('{') {
        return Err(vec![match serde_json::from_str::<Value>(text) {
            Err(e) => json_problem("", &e),
            Ok(v) => Problem::new(
                "",
                format!(
                    "expected a scenario object at the top level, found {}",
                    value_kind(&v)
                ),
            ),
        }]);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let raw: ScenarioFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        vec![json_problem(&path, &e.into_inner())]
    })?;
    de.end().map_err(|e| vec![json_problem("", &e)])?;

    let mut problems = Vec::new();
    let scheduler = raw.scheduler;
    if scheduler.node_heartbeat_period_ms == 0 {
        problems.push(Problem::new(
            "scheduler.node_heartbeat_period_ms",
            "must be > 0",
        ));
    }
    if scheduler.fair_share_update_period_ms == 0 {
        problems.push(Problem::new(
            "scheduler.fair_share_update_period_ms",
            "must be > 0",
        ));
    }
    for (i, group) in raw.nodes.iter().enumerate() {
        check_node_group(&format!("nodes[{i}]"), group, &mut problems);
    }

    let pool_trees = PoolTrees {
        default_tree: raw.default_tree,
        pool_trees: raw.pool_trees.unwrap_or_else(|| {
            BTreeMap::from([(DEFAULT_TREE_NAME.to_string(), PoolTreeConfig::default())])
        }),
    };
    let validated_trees = match validate_pool_trees(&pool_trees) {
        Ok(v) => {
            if let Err(e) = Scheduler::new(scheduler.clone(), v.clone()) {
                problems.push(Problem::new("pool_trees", e.message().to_string()));
            }
            Some(v)
        }
        Err(errors) => {
            problems.extend(errors.errors().iter().map(config_problem));
            None
        }
    };

    let mut events = Vec::with_capacity(raw.events.len());
    for (index, value) in raw.events.iter().enumerate() {
        match parse_event(index, value) {
            Ok(event) => {
                if event.at_ms > raw.until_ms {
                    problems.push(Problem::new(
                        format!("events[{index}].at_ms"),
                        format!(
                            "{} is after until_ms ({}); the event would never run",
                            event.at_ms, raw.until_ms
                        ),
                    ));
                }
                if let Command::AddNodes(group) = &event.command {
                    check_node_group(&format!("events[{index}].add_nodes"), group, &mut problems);
                }
                events.push(event);
            }
            Err(p) => problems.push(p),
        }
    }

    let Some(validated_trees) = validated_trees.filter(|_| problems.is_empty()) else {
        return Err(problems);
    };
    // Stable: events at the same time keep their file order.
    events.sort_by_key(|e| e.at_ms);
    let warnings = validated_trees
        .warnings
        .iter()
        .map(|w| format!("{}: {w}", config_path(w)))
        .collect();
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        nodes: raw.nodes,
        scheduler,
        pool_trees,
        validated_trees,
        events,
        until_ms: raw.until_ms,
        warnings,
    })
}

fn check_node_group(path: &str, group: &NodeGroup, problems: &mut Vec<Problem>) {
    if let Some(prefix) = &group.id_prefix
        && prefix.is_empty()
    {
        problems.push(Problem::new(
            format!("{path}.id_prefix"),
            "must not be empty",
        ));
    }
}

/// Parses `events[index]`: an object with `at_ms` and exactly one event kind.
fn parse_event(index: usize, value: &Value) -> Result<TimedEvent, Problem> {
    let base = format!("events[{index}]");
    let Value::Object(object) = value else {
        return Err(Problem::new(
            base,
            format!(
                "expected an event object such as {{\"at_ms\": 0, \"snapshot\": \"label\"}}, found {}",
                value_kind(value)
            ),
        ));
    };
    let mut at_ms = None;
    let mut kind: Option<(&str, &Value)> = None;
    for (key, v) in object {
        if key == "at_ms" {
            at_ms = Some(from_value::<Millis>(&format!("{base}.at_ms"), v)?);
        } else if EVENT_KINDS.contains(&key.as_str()) {
            if let Some((first, _)) = kind {
                return Err(Problem::new(
                    base,
                    format!("has two event kinds, `{first}` and `{key}`; write one per event"),
                ));
            }
            kind = Some((key, v));
        } else {
            return Err(Problem::new(
                format!("{base}.{key}"),
                format!(
                    "unknown event kind `{key}`{}",
                    suggestion(key, &EVENT_KINDS)
                ),
            ));
        }
    }
    let Some(at_ms) = at_ms else {
        return Err(Problem::new(base, "missing field `at_ms`"));
    };
    let Some((kind, v)) = kind else {
        return Err(Problem::new(
            base,
            format!(
                "has no event kind (expected one of {})",
                EVENT_KINDS.join(", ")
            ),
        ));
    };
    let path = format!("{base}.{kind}");
    let command = match kind {
        "start_operation" => Command::StartOperation(from_value(&path, v)?),
        "abort_operation" => Command::AbortOperation {
            id: from_value::<IdArg<OperationId>>(&path, v)?.id,
        },
        "update_operation" => Command::UpdateOperation(from_value(&path, v)?),
        "create_pool" => {
            let (args, options) = pool_args(&path, v)?;
            let config = from_value::<PoolConfig>(&path, &Value::Object(options))?;
            Command::CreatePool(Box::new(CreatePool {
                tree: args.tree,
                name: args.name,
                parent: args.parent,
                config,
            }))
        }
        "set_pool" => {
            let (args, options) = pool_args(&path, v)?;
            let value = Value::Object(options);
            from_value::<PoolConfig>(&path, &value)?;
            let Value::Object(options) = value else {
                unreachable!("built as an object above")
            };
            Command::SetPool(SetPool {
                tree: args.tree,
                name: args.name,
                parent: args.parent,
                options,
            })
        }
        "remove_pool" => Command::RemovePool(from_value(&path, v)?),
        "set_tree" => {
            let args: SetTreeArgs = from_value(&path, v)?;
            let value = Value::Object(args.config);
            from_value::<TreeConfig>(&format!("{path}.config"), &value)?;
            let Value::Object(options) = value else {
                unreachable!("built as an object above")
            };
            Command::SetTree(SetTree {
                tree: args.tree,
                options,
            })
        }
        "add_nodes" => Command::AddNodes(from_value(&path, v)?),
        "set_node" => Command::SetNode(from_value(&path, v)?),
        "remove_node" => Command::RemoveNode {
            id: from_value::<IdArg<NodeId>>(&path, v)?.id,
        },
        "snapshot" => Command::Snapshot(from_value(&path, v)?),
        _ => unreachable!("kind is one of EVENT_KINDS"),
    };
    Ok(TimedEvent {
        at_ms,
        index,
        command,
    })
}

/// `tree`, `name` and `parent` of a pool event.
struct PoolArgs {
    tree: Option<String>,
    name: String,
    parent: Option<String>,
}

/// Splits a pool event's object into its arguments and the pool options beside them.
fn pool_args(path: &str, value: &Value) -> Result<(PoolArgs, Map<String, Value>), Problem> {
    let Value::Object(object) = value else {
        return Err(Problem::new(
            path,
            format!(
                "expected an object with `name` and pool options, found {}",
                value_kind(value)
            ),
        ));
    };
    let mut options = object.clone();
    let mut take = |key: &str| -> Result<Option<String>, Problem> {
        match options.remove(key) {
            None => Ok(None),
            Some(v) => from_value::<String>(&format!("{path}.{key}"), &v).map(Some),
        }
    };
    let tree = take("tree")?;
    let name = take("name")?.ok_or_else(|| Problem::new(path, "missing field `name`"))?;
    let parent = take("parent")?;
    Ok((PoolArgs { tree, name, parent }, options))
}

/// Deserializes a JSON value, naming problems by their path below `prefix`.
fn from_value<T: DeserializeOwned>(prefix: &str, value: &Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = join_path(prefix, &inner);
        json_problem(&path, &e.into_inner())
    })
}

/// `prefix` + a serde path (`.` for the value itself, `[0].x` or `x.y` below it).
fn join_path(prefix: &str, inner: &str) -> String {
    if inner == "." || inner.is_empty() {
        prefix.to_string()
    } else if prefix.is_empty() || inner.starts_with('[') {
        format!("{prefix}{inner}")
    } else {
        format!("{prefix}.{inner}")
    }
}

/// A serde_json error at `path` as a problem.
fn json_problem(path: &str, e: &serde_json::Error) -> Problem {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let (message, position) = match full.strip_suffix(&suffix) {
        Some(m) => (m.to_string(), suffix),
        None => (full, String::new()),
    };
    if e.is_syntax() || e.is_eof() {
        return Problem::new("", format!("invalid JSON: {message}{position}"));
    }
    let path = if path == "." { "" } else { path };
    let mut message = tidy_message(&message);
    let mut path = path.to_string();
    // "unknown field `x`": name the field in the path.
    if let Some(field) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
        && !path.ends_with(&format!(".{field}"))
        && path != field
    {
        path = join_path(&path, field);
    }
    message.push_str(&position);
    Problem::new(path, message)
}

/// Shortens serde's messages: "unknown field `x`, expected one of `a`, `b`, ..." becomes
/// "unknown field `x` (did you mean `a`?)" or lists the fields when there are few;
/// Rust type names become user words ("expected struct Name": "expected an object").
fn tidy_message(message: &str) -> String {
    let message = fairsched_config::user_words(message);
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message;
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return message;
    };
    let candidates: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| !c.is_empty())
        .collect();
    let hint = suggestion(field, &candidates);
    if !hint.is_empty() || candidates.is_empty() {
        format!("unknown field `{field}`{hint}")
    } else if candidates.len() <= 12 {
        format!(
            "unknown field `{field}` (expected one of {})",
            candidates.join(", ")
        )
    } else {
        format!("unknown field `{field}`")
    }
}

/// " (did you mean `x`?)" when a candidate is close to `word`, else "".
fn suggestion(word: &str, candidates: &[&str]) -> String {
    let best = candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .min();
    // A close name, or one that the word starts (`until` for `until_ms`).
    let prefix_of = || {
        candidates
            .iter()
            .find(|c| word.len() >= 3 && c.starts_with(word))
            .copied()
    };
    match best {
        Some((d, name)) if d <= 2.max(word.len() / 3) => format!(" (did you mean `{name}`?)"),
        _ => prefix_of()
            .map(|name| format!(" (did you mean `{name}`?)"))
            .unwrap_or_default(),
    }
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The JSON path in a scenario file of what a configuration error is about.
pub(crate) fn config_path(e: &ConfigError) -> String {
    let mut path = String::new();
    if let Some(tree) = &e.tree {
        path = format!("pool_trees.{tree}");
    }
    if let Some(pool) = &e.pool {
        for part in pool.split('/') {
            path = join_path(&path, &format!("pools.{part}"));
        }
    }
    let tree_name_error = e.pool.is_none() && e.tree.is_some() && e.field == "name";
    if !e.field.is_empty() && !tree_name_error {
        path = join_path(&path, &e.field);
    }
    path
}

fn config_problem(e: &ConfigError) -> Problem {
    Problem::new(config_path(e), e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_shortened() {
        assert_eq!(
            tidy_message("unknown field `job_cont`, expected one of `job_count`, `resources`"),
            "unknown field `job_cont` (did you mean `job_count`?)"
        );
        assert_eq!(
            tidy_message("unknown field `zzz`, expected `id`"),
            "unknown field `zzz` (expected one of id)"
        );
        assert_eq!(
            tidy_message("invalid type: sequence, expected struct ScenarioFile"),
            "invalid type: a list, expected an object"
        );
    }

    #[test]
    fn paths_join() {
        assert_eq!(join_path("events[1].x", "."), "events[1].x");
        assert_eq!(
            join_path("events[1].x", "tasks[0].y"),
            "events[1].x.tasks[0].y"
        );
        assert_eq!(join_path("", "a.b"), "a.b");
        assert_eq!(join_path("events", "[2]"), "events[2]");
    }

    #[test]
    fn config_errors_point_into_the_file() {
        let e = ConfigError::pool("a/b", "weight", "must be > 0").in_tree("t");
        assert_eq!(config_path(&e), "pool_trees.t.pools.a.pools.b.weight");
        let e = ConfigError::tree_level("config.max_operation_count", "x").in_tree("t");
        assert_eq!(config_path(&e), "pool_trees.t.config.max_operation_count");
        let e = ConfigError::tree_level("default_tree", "x");
        assert_eq!(config_path(&e), "default_tree");
    }
}
