//! Building the published [`View`]: unfinished operations, nodes and every tree.

use super::Actor;
use crate::jobs::JobList;
use crate::view::{TreeView, View};
use fairsched_api::{AlertView, JobCounts, OperationView, PoolTreeView};
use fairsched_core::OperationId;
use fairsched_resources::Resources;
use serde_json::Value;

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
    /// The view of the state now; the operations' records get their job counts, why they
    /// wait and their pool.
    pub(super) fn build_view(&mut self) -> View {
        let now = self.now();
        let snapshot = self.sched.snapshot(now);
        for (id, record) in self.ops.iter_mut() {
            let core = self.sched.operation(&OperationId(id.clone()));
            let pending = core
                .filter(|op| !op.state.is_finished())
                .map(|op| op.pending_job_count())
                .unwrap_or(0);
            let counts = job_counts(&record.view, &record.jobs, pending);
            let why = snapshot.operations.get(id).and_then(|o| o.why.as_ref());
            let pool = core.map(|op| &op.pool);
            let view = &record.view;
            // Copied (if a published view shares it) only when something shown changed.
            if view.job_counts != counts
                || view.why.as_ref() != why
                || pool.is_some_and(|p| *p != view.pool)
            {
                let view = record.view_mut();
                view.job_counts = counts;
                view.why = why.cloned();
                if let Some(p) = pool {
                    view.pool = p.clone();
                }
            }
        }
        let nodes = self
            .sched
            .nodes()
            .filter_map(|n| self.node_view(&n.id))
            .collect();
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
            snapshot,
            operation_trees,
            trees,
            operations: self
                .order
                .iter()
                .filter_map(|id| self.ops.get(id).cloned())
                .collect(),
            nodes,
            read_only: self.read_only.clone(),
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
