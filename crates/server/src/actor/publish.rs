//! Building the published [`View`]: unfinished operations, nodes and every tree.

/// An operation's trees with its pool in each (see `OperationRecord::placements`).
type Placements = Arc<[(String, String)]>;

use super::Actor;
use crate::jobs::JobList;
use crate::view::{NodeEntry, TreeView, View};
use fairsched_api::{AlertView, JobCounts, NodeView, OperationView, PoolTreeView};
use fairsched_core::{NodeId, OperationId};
use fairsched_resources::Resources;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// An operation's job counts: `pending` from the core, the others from its jobs.
pub(super) fn job_counts(view: &OperationView, jobs: &JobList, pending: u32) -> JobCounts {
    let by_state = jobs.counts();
    JobCounts {
        total: view
            .spec
            .get("tasks")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| t.get("job_count").and_then(Value::as_u64))
                    .fold(0u32, |sum, n| {
                        sum.saturating_add(u32::try_from(n).unwrap_or(u32::MAX))
                    })
            })
            .unwrap_or(0),
        pending,
        running: by_state.running,
        completed: by_state.completed,
        failed: by_state.failed,
        aborted: by_state.aborted,
    }
}

impl Actor {
    /// Brings the records of the operations and nodes changed since the last call up to
    /// date (O(what changed)); see [`Actor::refresh_all_records`] for the whole walk.
    pub(super) fn refresh_records(&mut self) {
        for id in std::mem::take(&mut self.stale_ops) {
            self.refresh_operation(&id);
        }
        for id in std::mem::take(&mut self.stale_nodes) {
            self.refresh_node(&id);
        }
    }

    /// Every record brought up to date, changed or not (with a new snapshot: a change a
    /// record was not marked for, e.g. a tree's new configuration moving operations and
    /// nodes, shows no later than the snapshot does).
    fn refresh_all_records(&mut self) {
        self.stale_ops.clear();
        self.stale_nodes.clear();
        let ids: Vec<String> = self.ops.ids().map(str::to_string).collect();
        for id in ids {
            self.refresh_operation(&id);
        }
        let mut gone: BTreeSet<String> = self.nodes.keys().cloned().collect();
        let ids: Vec<String> = self.sched.nodes().map(|n| n.id.0.clone()).collect();
        let lost: Vec<String> = self.lost_nodes.keys().cloned().collect();
        for id in ids.into_iter().chain(lost) {
            gone.remove(&id);
            self.refresh_node(&id);
        }
        for id in gone {
            self.nodes.remove(&id);
        }
    }

    /// What the core says of operation `id` that its record shows: job counts, pool and
    /// trees.
    fn operation_fields(&self, id: &str) -> Option<(JobCounts, Option<String>, Placements)> {
        let record = self.ops.get(id)?;
        let core = self.sched.operation(&OperationId(id.to_string()));
        let pending = core
            .filter(|op| !op.state.is_finished())
            .map(|op| op.pending_job_count())
            .unwrap_or(0);
        let counts = job_counts(&record.view, &record.jobs, pending);
        let pool = core.map(|op| op.pool.clone());
        let trees = self.sched.trees();
        let placements = match core {
            Some(op)
                if op.trees.len() != record.placements.len()
                    || op.trees.iter().zip(record.placements.iter()).any(
                        |(o, (tree, pool))| trees[o.tree].name != *tree || o.pool != *pool,
                    ) =>
            {
                op.trees
                    .iter()
                    .map(|o| (trees[o.tree].name.clone(), o.pool.clone()))
                    .collect()
            }
            _ => record.placements.clone(),
        };
        Some((counts, pool, placements))
    }

    /// Operation `id`'s record as the core says it is now (copied, if a published view shares
    /// it, only when something it shows changed).
    fn refresh_operation(&mut self, id: &str) {
        let Some((counts, pool, placements)) = self.operation_fields(id) else {
            return;
        };
        let Some(record) = self.ops.get_mut(id) else {
            return;
        };
        record.counts = counts;
        if let Some(p) = pool.filter(|p| *p != record.view.pool) {
            record.view_mut().pool = p;
        }
        if !Arc::ptr_eq(&record.placements, &placements) {
            record.placements = placements;
        }
    }

    /// Node `id`'s entry as the core says it is now (removed if the core has no such node).
    fn refresh_node(&mut self, id: &str) {
        match self.node_entry(id) {
            Some(mut entry) => match self.nodes.get(id) {
                Some(old) if *old == entry => {}
                old => {
                    // A heartbeat changes the time alone: the view stays shared.
                    if let Some(old) = old.filter(|old| old.view == entry.view) {
                        entry.view = Arc::clone(&old.view);
                    }
                    self.nodes.insert(id.to_string(), entry);
                }
            },
            None => {
                self.nodes.remove(id);
            }
        }
    }

    /// Node `id` as the view keeps it.
    pub(super) fn node_entry(&self, id: &str) -> Option<NodeEntry> {
        if self.sched.node(&NodeId(id.to_string())).is_none() {
            return self.lost_nodes.get(id).cloned();
        }
        Some(NodeEntry {
            view: Arc::new(NodeView {
                // Computed when read, from `last_heartbeat`.
                last_heartbeat_ago_ms: 0,
                ..self.node_view(&NodeId(id.to_string()))?
            }),
            last_heartbeat: self.seen.get(id).copied(),
        })
    }

    /// In debug builds: every record is what a full walk would make it (no change went
    /// unmarked), so that a view built from changed records alone shows what the state is.
    fn check_records(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        for record in self.ops.iter() {
            let id = &record.view.id;
            let (counts, pool, placements) = self.operation_fields(id).expect("a record");
            assert_eq!(record.counts, counts, "job counts of {id}");
            if let Some(pool) = pool {
                assert_eq!(record.view.pool, pool, "pool of {id}");
            }
            assert_eq!(record.placements, placements, "trees of {id}");
        }
        assert_eq!(
            self.nodes.len(),
            self.sched.nodes().count() + self.lost_nodes.len(),
            "nodes"
        );
        for n in self.sched.nodes() {
            assert_eq!(
                self.nodes.get(&n.id.0),
                self.node_entry(&n.id.0).as_ref(),
                "node {}",
                n.id.0
            );
        }
    }

    /// The view of the state now with `snapshot` (the trees taken now): O(cluster).
    pub(super) fn build_view(&mut self, snapshot: fairsched_core::Snapshot) -> View {
        // Records follow what was marked as changed; only a tree's new configuration (which
        // may move operations and nodes without marking them) refreshes them all.
        if self.trees_changed {
            self.refresh_all_records();
        } else {
            self.refresh_records();
            self.check_records();
        }
        let trees = self.tree_views(&snapshot.tree);
        let operation_trees = self
            .sched
            .operations()
            .filter_map(|op| {
                let first = op.trees.first()?.tree;
                Some((op.spec.id.0.clone(), self.sched.trees()[first].name.clone()))
            })
            .collect();
        View {
            snapshot: Arc::new(snapshot),
            operation_trees: Arc::new(operation_trees),
            trees,
            operations: self.ops.clone(),
            nodes: self.nodes.clone(),
            read_only: self.read_only.clone(),
            refresh_on_read: false,
        }
    }

    /// The view with the records as they are now and the snapshot (and trees) of `last`:
    /// O(what changed since the records were last refreshed). `refresh_on_read`: see
    /// [`View::refresh_on_read`].
    pub(super) fn build_records_view(&mut self, last: &View, refresh_on_read: bool) -> View {
        self.refresh_records();
        self.check_records();
        View {
            snapshot: last.snapshot.clone(),
            operation_trees: last.operation_trees.clone(),
            trees: last.trees.clone(),
            operations: self.ops.clone(),
            nodes: self.nodes.clone(),
            read_only: self.read_only.clone(),
            refresh_on_read,
        }
    }

    /// Every tree's summary and configuration.
    pub(super) fn tree_views(&self, default_tree: &str) -> Vec<TreeView> {
        let trees = self.sched.trees();
        let mut nodes = vec![0usize; trees.len()];
        let mut totals = vec![Resources::ZERO; trees.len()];
        for n in self.sched.nodes() {
            if let Some(t) = n.tree {
                nodes[t] += 1;
                if n.scheduler_jobs_enabled {
                    totals[t] = totals[t].add(&n.resources);
                }
            }
        }
        let mut operations = vec![0usize; trees.len()];
        for op in self.sched.operations() {
            if !op.state.is_finished() {
                for o in &op.trees {
                    operations[o.tree] += 1;
                }
            }
        }
        trees
            .iter()
            .enumerate()
            .map(|(t, tree)| TreeView {
                info: PoolTreeView {
                    name: tree.name.clone(),
                    is_default: tree.name == default_tree,
                    node_tag_filter: tree.validated.config().node_tag_filter.clone(),
                    pool_count: tree.validated.pools.len(),
                    ephemeral_pool_count: tree.ephemeral.len(),
                    node_count: nodes[t],
                    operation_count: operations[t],
                    total_resources: totals[t],
                    alerts: tree
                        .alerts()
                        .iter()
                        .map(|(code, message)| AlertView {
                            tree: tree.name.clone(),
                            code: *code,
                            message: message.clone(),
                        })
                        .collect(),
                },
                config: self
                    .tree_configs
                    .get(&tree.name)
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect()
    }
}
