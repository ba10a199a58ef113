//! What GET handlers read: the [`View`] the actor publishes after every change (a leaf: the
//! actor builds it, `http`, `auth` and `metrics` read it).
//!
//! A view has two parts. The records (operations and nodes) are persistent maps the actor
//! changes in place: publishing them copies only what changed since the last view, so every
//! change publishes them at once. The scheduler's snapshot (fair shares, usages, why jobs
//! wait; `orchid`) costs O(cluster) to build and is rebuilt at most as often as the actor can
//! afford (`Actor::publish_view_throttled`); views between share the last one.

use crate::jobs::JobList;
use crate::submit::JobCommand;
use fairsched_api::{ApiError, NodeView, OperationView, PoolTreeView, codes};
use fairsched_core::Snapshot;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// What GET handlers read: the last published state.
#[derive(Clone, Debug)]
pub struct View {
    /// Every tree (the default one at the top, the others under `pool_trees`). An operation's
    /// fields are of its first tree ([`View::operation_trees`]), its other trees' under its
    /// `pool_trees`. May be older than the records (see the module's comment); its `t_ms`
    /// says when it was taken.
    pub snapshot: Arc<Snapshot>,
    /// The first tree of each operation in the snapshot (the default tree if it runs there).
    pub operation_trees: Arc<BTreeMap<String, String>>,
    /// Every tree, sorted by name.
    pub trees: Vec<TreeView>,
    /// The unfinished operations.
    pub operations: OperationRecords,
    /// Every registered node, by id.
    pub nodes: imbl::OrdMap<String, NodeEntry>,
    /// Set while the store cannot write (the server refuses changes).
    pub read_only: Option<ReadOnly>,
    /// The snapshot (and `trees`) may be older than the records, and the actor takes a new
    /// one when a reader asks (`Command::Snapshot`): set in a small cluster, where a
    /// snapshot costs little, so that nothing takes one until someone reads it. Handlers
    /// that read the snapshot use `AppState::fresh_view`, so a caller reads what it did.
    /// In a large cluster it is not set, and the snapshot lags (`Actor::next_view`).
    pub refresh_on_read: bool,
}

/// An operation as the actor keeps it and the [`View`] shows it: its record (with `jobs`
/// always empty) and its jobs apart. Both are shared with the published views and copied only
/// where they change, so publishing costs O(operations), not O(jobs ever run).
#[derive(Clone, Debug)]
pub struct OperationRecord {
    /// Its record, without `jobs` and `why` (filled in by [`OperationRecord::to_view`]), and
    /// with `job_counts` as last stored (see `counts`).
    pub view: Arc<OperationView>,
    /// Its job counts now (kept apart: they change with every job, the record rarely).
    pub counts: fairsched_api::JobCounts,
    pub jobs: JobList,
    /// Its trees with its pool in each, the first tree first (the one of `view.pool`).
    pub placements: Arc<[(String, String)]>,
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
            counts: view.job_counts,
            view: Arc::new(OperationView {
                jobs: Vec::new(),
                ..view
            }),
            jobs,
            placements: Arc::new([]),
            commands: commands.into(),
        }
    }

    /// The operation as the API shows it, with its jobs or without, and why its jobs wait
    /// as `snapshot` says.
    pub fn to_view(&self, with_jobs: bool, snapshot: &Snapshot) -> OperationView {
        let mut view = (*self.view).clone();
        view.job_counts = self.counts;
        if with_jobs {
            view.jobs = self.jobs.to_vec();
        }
        view.why = snapshot
            .operations
            .get(&view.id)
            .and_then(|o| o.why.clone());
        view
    }

    /// The record to change (copied first if a published view shares it).
    pub(crate) fn view_mut(&mut self) -> &mut OperationView {
        Arc::make_mut(&mut self.view)
    }
}

/// The unfinished operations in submission order, found by id in O(log n); a copy costs O(1)
/// and shares everything with the original until either changes.
#[derive(Clone, Debug, Default)]
pub struct OperationRecords {
    by_seq: imbl::OrdMap<u64, OperationRecord>,
    // Hashed: ids share long prefixes (`bench-op-1234`), and a lookup by comparisons was 5 %
    // of the server's CPU at 3,000 agents.
    seq_of: imbl::HashMap<String, u64>,
    next_seq: u64,
}

impl OperationRecords {
    pub fn get(&self, id: &str) -> Option<&OperationRecord> {
        self.by_seq.get(self.seq_of.get(id)?)
    }

    /// The record to change (copied first, with the map's path to it, if a published view
    /// shares it).
    pub fn get_mut(&mut self, id: &str) -> Option<&mut OperationRecord> {
        let seq = *self.seq_of.get(id)?;
        self.by_seq.get_mut(&seq)
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.seq_of.contains_key(id)
    }

    /// Adds an operation after the others (replacing one of the same id, in its place).
    pub fn push(&mut self, record: OperationRecord) {
        if let Some(old) = self.get_mut(&record.view.id) {
            *old = record;
            return;
        }
        self.seq_of.insert(record.view.id.clone(), self.next_seq);
        self.by_seq.insert(self.next_seq, record);
        self.next_seq += 1;
    }

    pub fn remove(&mut self, id: &str) -> Option<OperationRecord> {
        let seq = self.seq_of.remove(id)?;
        self.by_seq.remove(&seq)
    }

    /// In submission order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &OperationRecord> {
        self.by_seq.values()
    }

    /// The ids in submission order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|r| r.view.id.as_str())
    }

    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }
}

/// A node as the [`View`] keeps it: its view without `last_heartbeat_ago_ms`, which is
/// computed when read. Its view is shared: every heartbeat changes `last_heartbeat`, and the
/// map's leaf it is in is copied (with every entry in it) when a published view shares it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeEntry {
    pub view: Arc<NodeView>,
    pub last_heartbeat: Option<Instant>,
}

impl NodeEntry {
    /// The node as the API shows it now.
    pub fn to_view(&self) -> NodeView {
        NodeView {
            last_heartbeat_ago_ms: self
                .last_heartbeat
                .map_or(0, |t| t.elapsed().as_millis() as u64),
            ..NodeView::clone(&self.view)
        }
    }
}

/// One pool tree in the [`View`].
#[derive(Clone, Debug)]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, user: &str) -> OperationRecord {
        let view: OperationView = serde_json::from_value(serde_json::json!({
            "id": id, "state": "pending", "pool": "root", "user": user, "spec": {},
            "submitted_at": 0, "job_counts": {"total": 0, "pending": 0, "running": 0,
            "completed": 0, "failed": 0, "aborted": 0}
        }))
        .unwrap();
        OperationRecord::new(view, JobList::default(), Vec::new())
    }

    #[test]
    fn records_keep_submission_order_and_copies_keep_what_they_saw() {
        let mut ops = OperationRecords::default();
        for id in ["c", "a", "b"] {
            ops.push(record(id, "u"));
        }
        let published = ops.clone();
        assert!(ops.remove("a").is_some());
        assert!(ops.remove("a").is_none());
        ops.push(record("d", "u"));
        // The same id again replaces the record in its place.
        ops.push(record("c", "v"));
        assert_eq!(ops.ids().collect::<Vec<_>>(), ["c", "b", "d"]);
        assert_eq!(ops.get("c").unwrap().view.user, "v");
        assert_eq!(ops.len(), 3);
        assert!(!ops.contains_key("a"));
        assert_eq!(published.ids().collect::<Vec<_>>(), ["c", "a", "b"]);
        assert_eq!(published.get("c").unwrap().view.user, "u");
        ops.get_mut("b").unwrap().view_mut().user = "w".into();
        assert_eq!(published.get("b").unwrap().view.user, "u");
    }
}
