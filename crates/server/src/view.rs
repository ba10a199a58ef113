//! What GET handlers read: the [`View`] the actor publishes after every change (a leaf: the
//! actor builds it, `http`, `auth` and `metrics` read it).

use crate::jobs::JobList;
use crate::submit::JobCommand;
use fairsched_api::{ApiError, NodeView, OperationView, PoolTreeView, codes};
use fairsched_core::Snapshot;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What GET handlers read: the last published state.
#[derive(Debug)]
pub struct View {
    /// Every tree (the default one at the top, the others under `pool_trees`). An operation's
    /// fields are of its first tree ([`View::operation_trees`]), its other trees' under its
    /// `pool_trees`.
    pub snapshot: Snapshot,
    /// The first tree of each operation in the snapshot (the default tree if it runs there).
    pub operation_trees: BTreeMap<String, String>,
    /// Every tree, sorted by name.
    pub trees: Vec<TreeView>,
    /// In submission order.
    pub operations: Vec<OperationRecord>,
    pub nodes: Vec<NodeView>,
    /// Set while the store cannot write (the server refuses changes).
    pub read_only: Option<ReadOnly>,
}

/// An operation as the actor keeps it and the [`View`] shows it: its record (with `jobs`
/// always empty) and its jobs apart. Both are shared with the published views and copied only
/// where they change, so publishing costs O(operations), not O(jobs ever run).
#[derive(Clone, Debug)]
pub struct OperationRecord {
    pub view: Arc<OperationView>,
    pub jobs: JobList,
    /// What its jobs run, by task (the core does not keep it): sent to the agents with each
    /// start.
    pub(crate) commands: Arc<[JobCommand]>,
}

impl OperationRecord {
    pub(crate) fn new(
        view: OperationView,
        jobs: JobList,
        commands: Vec<JobCommand>,
    ) -> OperationRecord {
        OperationRecord {
            view: Arc::new(OperationView {
                jobs: Vec::new(),
                ..view
            }),
            jobs,
            commands: commands.into(),
        }
    }

    /// The operation as the API shows it, with its jobs or without.
    pub fn to_view(&self, with_jobs: bool) -> OperationView {
        let mut view = (*self.view).clone();
        if with_jobs {
            view.jobs = self.jobs.to_vec();
        }
        view
    }

    /// The record to change (copied first if a published view shares it).
    pub(crate) fn view_mut(&mut self) -> &mut OperationView {
        Arc::make_mut(&mut self.view)
    }
}

/// One pool tree in the [`View`].
#[derive(Debug)]
pub struct TreeView {
    pub info: PoolTreeView,
    /// Its configuration as stored (`config` and `pools`).
    pub config: Arc<Value>,
}

impl View {
    /// The tree named `name`.
    pub fn tree(&self, name: &str) -> Option<&TreeView> {
        self.trees.iter().find(|t| t.info.name == name)
    }

    /// The default tree's configuration.
    pub fn default_config(&self) -> &Value {
        self.tree(&self.snapshot.tree)
            .map_or(&Value::Null, |t| t.config.as_ref())
    }

    /// The tree a request names (`None`: the default tree); an unknown one is an error naming
    /// the trees there are.
    pub fn resolve_tree(&self, tree: Option<&str>) -> Result<&TreeView, ApiError> {
        let name = tree.unwrap_or(&self.snapshot.tree);
        self.tree(name)
            .ok_or_else(|| unknown_tree(name, self.trees.iter().map(|t| t.info.name.as_str())))
    }
}

/// The error for a pool tree the server does not run.
pub fn unknown_tree<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> ApiError {
    let known: Vec<String> = known.map(|t| format!("{t:?}")).collect();
    ApiError::new(
        codes::RESOLVE,
        format!(
            "pool tree {name:?} does not exist (trees: {})",
            known.join(", ")
        ),
    )
    .with_attribute("tree", name)
}

/// Why the server is read-only, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOnly {
    /// The store's error.
    pub reason: String,
    pub since_unix_ms: u64,
}
