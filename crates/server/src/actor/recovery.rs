//! Recovery: the actor's state restored from the store at start (trees, nodes, unfinished
//! operations, running jobs adopted on their nodes) and reloaded after a failed commit.

use super::nodes::NodeRecord;
use super::writer::{self, SharedStore, Writer};
use super::{Actor, EVENT_BUFFER, Shared, unix_ms};
use crate::jobs::JobList;
use crate::metrics::ActorMetrics;
use crate::view::{OperationRecord, OperationRecords, View};
use fairsched_api::{JobState, JobView, OperationState, OperationView};
use fairsched_config::{PoolTreeConfig, PoolTrees};
use fairsched_core::{NodeId, NodeSpec, OperationId, Scheduler};
use fairsched_store::StoredTree;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

/// The pool trees as the store keeps them: every tree with its API changes, and the default
/// one. Errors name the tree.
pub(super) fn stored_trees(stored: &[StoredTree]) -> anyhow::Result<PoolTrees> {
    let mut trees = PoolTrees::default();
    for t in stored {
        let tree: PoolTreeConfig = serde_json::from_str(&t.config)
            .map_err(|e| anyhow::anyhow!("the stored pool tree {:?} is unreadable: {e}", t.name))?;
        trees.pool_trees.insert(t.name.clone(), tree);
        if t.is_default {
            trees.default_tree = Some(t.name.clone());
        }
    }
    if trees.default_tree_name().is_none() {
        anyhow::bail!(
            "the store holds pool trees {:?} and none is marked the default",
            trees.pool_trees.keys().collect::<Vec<_>>()
        );
    }
    Ok(trees)
}

impl Actor {
    /// The state as the store has it (see [`Actor::new`]), not committed yet: what recovery
    /// changed (trees saved, jobs that cannot be adopted aborted, adoption events) is in the
    /// batch. `shared`: the channels and metrics of the actor this one replaces (a reload),
    /// none at start; `job_id_base`: added to allocation ids in new job ids, so that a reload
    /// (whose core numbers allocations from 1 again) does not reuse this incarnation's ids.
    pub(super) fn restore(
        config: &crate::ServerConfig,
        store: SharedStore,
        shared: Option<Shared>,
        job_id_base: u64,
    ) -> anyhow::Result<Actor> {
        let (loaded, reader) = {
            let store = writer::lock(&store);
            (store.load()?, store.reader()?)
        };
        let configured = crate::start_trees::configured(config)?;
        // The first start takes the configured trees; later ones the stored trees and the
        // configured trees the store does not have yet (see `start_trees`).
        let (trees, start) = if loaded.trees.is_empty() {
            let trees = configured
                .as_ref()
                .map(|(trees, _)| trees.clone())
                .unwrap_or_else(|| PoolTrees::single("default", PoolTreeConfig::default()));
            (trees, None)
        } else {
            let start = crate::start_trees::merge(
                stored_trees(&loaded.trees)?,
                configured.as_ref().map(|(trees, _)| trees),
            );
            (start.trees.clone(), Some(start))
        };
        let validated = fairsched_config::validate_pool_trees(&trees).map_err(|e| {
            match (&start, &configured) {
                (Some(start), Some((_, source))) if !start.added.is_empty() => anyhow::anyhow!(
                    "pool trees: the stored trees and the ones {source} adds ({}) are not valid \
                     together: {e}\nThe stored trees win over their versions in {source}: to \
                     change a stored tree, start without the new trees and apply it with \
                     `fairsched pool apply --tree NAME FILE` first. Nothing was changed.",
                    crate::start_trees::quoted(&start.added)
                ),
                _ => anyhow::anyhow!("pool trees: {e}"),
            }
        })?;
        let mut sched = Scheduler::new(config.scheduler.clone(), validated)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        // The core's clock is this process's uptime: `why` says times from now.
        sched.set_why_times(fairsched_core::WhyTimes::FromNow);
        if let (Some(start), Some((_, source))) = (&start, &configured) {
            start.log(source);
        }
        let shared = match shared {
            Some(shared) => shared,
            None => {
                let publish = watch::channel(Arc::new(View {
                    snapshot: Arc::new(sched.snapshot(0)),
                    operation_trees: Arc::default(),
                    trees: Vec::new(),
                    operations: OperationRecords::default(),
                    nodes: imbl::OrdMap::new(),
                    read_only: None,
                    refresh_on_read: false,
                }))
                .0;
                let events = broadcast::channel(EVENT_BUFFER).0;
                let metrics = ActorMetrics::default();
                let (done, done_rx) = tokio::sync::mpsc::unbounded_channel();
                let writer = Writer::spawn(
                    store.clone(),
                    writer::Outlets {
                        publish: publish.clone(),
                        events: events.clone(),
                        metrics: metrics.clone(),
                        done,
                    },
                )
                .map_err(|e| anyhow::anyhow!("cannot start the store's writer thread: {e}"))?;
                Shared {
                    publish,
                    events,
                    metrics,
                    writer,
                    done_rx: Some(done_rx),
                }
            }
        };
        let view = shared.publish.borrow().clone();
        let mut actor = Actor {
            config: config.clone(),
            read_only: None,
            fatal: None,
            job_id_base,
            sched,
            started: Instant::now(),
            store,
            reader,
            incarnation: loaded.incarnation,
            ops: OperationRecords::default(),
            stale_ops: BTreeSet::new(),
            stale_nodes: BTreeSet::new(),
            lost_nodes: BTreeMap::new(),
            nodes: imbl::OrdMap::new(),
            // The first view refreshes every record restored.
            trees_changed: true,
            snapshot_wanted: false,
            small_cluster: super::SMALL_CLUSTER,
            job_op: HashMap::new(),
            alloc_job: HashMap::new(),
            job_alloc: HashMap::new(),
            dirty_jobs: BTreeSet::new(),
            seen: BTreeMap::new(),
            node_agents: BTreeMap::new(),
            node_records: loaded
                .nodes
                .iter()
                .filter_map(|n| serde_json::from_str::<NodeRecord>(&n.record).ok())
                .map(|r| (r.node_id.clone(), r))
                .collect(),
            kill: BTreeMap::new(),
            interrupts: BTreeMap::new(),
            heartbeat_orders: Vec::new(),
            ended_jobs: BTreeMap::new(),
            next_id: 1,
            node_timeout: Duration::from_millis(config.node_timeout_ms),
            publish: shared.publish,
            batch: Default::default(),
            tails: BTreeMap::new(),
            live: crate::live::LiveOutput::default(),
            metrics: shared.metrics,
            next_event_seq: loaded.last_event_seq + 1,
            touched: BTreeSet::new(),
            events: shared.events,
            tree_configs: BTreeMap::new(),
            deferred: Vec::new(),
            retiring: Vec::new(),
            writer: shared.writer,
            done_rx: shared.done_rx,
            view,
            node_credentials: crate::auth::NodeCredentials::new(config.agent_token.is_some()),
            prune_at: Instant::now(),
            updates: super::fair_share::Background::new(),
            snapshot_taken_at: Instant::now(),
            snapshot_cost: Duration::ZERO,
            slicing: None,
            sliced: None,
            slices_rest_until: Instant::now(),
        };
        actor.save_trees();
        if let Some(start) = &start {
            actor.warn_of_shared_nodes(&start.added);
        }
        let mut jobs: BTreeMap<String, JobList> = BTreeMap::new();
        // Running jobs in store order: (job, operation, task, node).
        let mut running: Vec<(String, String, usize, String)> = Vec::new();
        for j in &loaded.jobs {
            if let Ok(job) = serde_json::from_str::<JobView>(&j.record) {
                let pos = jobs.get(&j.operation).map_or(0, JobList::len);
                actor
                    .job_op
                    .insert(job.id.clone(), (j.operation.clone(), pos));
                if job.state == JobState::Running {
                    running.push((
                        job.id.clone(),
                        j.operation.clone(),
                        job.task,
                        job.node.clone(),
                    ));
                }
                jobs.entry(j.operation.clone()).or_default().push(job);
            }
        }
        for stored in &loaded.operations {
            let mut view: OperationView = serde_json::from_str(&stored.record)?;
            let op_jobs = jobs.remove(&view.id).unwrap_or_default();
            // A finished operation starts no more jobs (and leaves memory at the first commit).
            let mut commands = Vec::new();
            if !view.state.is_finished() {
                let submitted = crate::submit::stored_spec(&view.spec)?;
                let id = submitted.id.clone().unwrap_or_else(|| view.id.clone());
                let mut spec = crate::submit::core_spec(&id, &submitted);
                commands = crate::submit::job_commands(&submitted);
                for (t, task) in spec.tasks.iter_mut().enumerate() {
                    let done = op_jobs
                        .iter()
                        .filter(|j| j.task == t && j.state == JobState::Completed)
                        .count() as u32;
                    task.job_count = task.job_count.saturating_sub(done);
                }
                let started = crate::submit::check_durations(&id, &submitted)
                    .and_then(|()| actor.sched.start_operation(0, spec));
                if let Err(e) = started {
                    view.state = OperationState::Failed;
                    view.reason = Some(format!("not restored after a restart: {}", e.message()));
                    view.finished_at = Some(unix_ms());
                    // Finished: it leaves memory at the first commit.
                    actor.touched.insert(view.id.clone());
                }
                actor.dirty_op(&view);
            }
            actor
                .ops
                .push(OperationRecord::new(view, op_jobs, commands));
        }
        actor.adopt_running(running);
        actor.after_change();
        Ok(actor)
    }

    /// At start, after trees were added: warns of each known node that the added trees'
    /// filters give a second tree (it is refused when it registers, and not restored).
    pub(super) fn warn_of_shared_nodes(&self, added: &[String]) {
        if added.is_empty() {
            return;
        }
        for r in self.node_records.values() {
            let tags: BTreeSet<String> = r.tags.iter().cloned().collect();
            let matching: Vec<String> = self
                .sched
                .trees()
                .iter()
                .filter(|t| t.node_filter.matches(&tags))
                .map(|t| t.name.clone())
                .collect();
            if matching.len() > 1 && matching.iter().any(|t| added.contains(t)) {
                tracing::warn!(
                    node = r.node_id,
                    "node {:?} (tags {:?}) matches the node_tag_filter of pool trees {}; trees \
                     must not share nodes, so it is refused until its tags or a tree's filter \
                     change (`fairsched pool apply --tree NAME FILE`)",
                    r.node_id,
                    r.tags,
                    crate::start_trees::quoted(&matching)
                );
            }
        }
    }

    /// At start: restores the nodes that ran jobs and adopts those jobs there (see
    /// [`Actor::new`]).
    pub(super) fn adopt_running(&mut self, running: Vec<(String, String, usize, String)>) {
        let now = self.now();
        let mut restored: BTreeSet<String> = BTreeSet::new();
        let mut refused: BTreeSet<String> = BTreeSet::new();
        for (job, op, task, node) in running {
            let id = NodeId(node.clone());
            if self.sched.node(&id).is_none()
                && !refused.contains(&node)
                && let Some(r) = self.node_records.get(&node)
            {
                // Its tree follows from its tags and the trees now (an added tree may take it).
                let spec = NodeSpec {
                    id: id.clone(),
                    resources: r.resources,
                    tags: r.tags.iter().cloned().collect(),
                };
                match self.sched.add_node(now, spec) {
                    Ok(()) => {
                        self.saw(&node);
                        restored.insert(node.clone());
                    }
                    Err(e) => {
                        tracing::warn!(node, "node not restored: {e}");
                        refused.insert(node.clone());
                    }
                }
            }
            match self
                .sched
                .adopt_allocation(now, &OperationId(op.clone()), task, &id)
            {
                Ok(allocation) => {
                    tracing::info!(job, operation = op, node, "running job adopted");
                    self.alloc_job.insert(allocation.0, job.clone());
                    self.job_alloc.insert(job.clone(), allocation.0);
                    self.server_event(json!({"event": "job_adopted", "operation": op,
                        "job": job, "node": node}));
                }
                Err(e) => {
                    tracing::warn!(job, operation = op, node, "running job not adopted: {e}");
                    self.update_job(&job, |j| {
                        j.state = JobState::Aborted;
                        j.reason = Some("server_restart".into());
                        j.finished_at = Some(unix_ms());
                    });
                    self.dirty_jobs.insert(job);
                }
            }
        }
        // The operator's settings (a disabled node's jobs are aborted).
        for node in restored {
            let Some(r) = self.node_records.get(&node).cloned() else {
                continue;
            };
            let id = NodeId(node.clone());
            if !r.scheduler_jobs_enabled {
                let _ = self.sched.set_node(now, &id, None, None, Some(false));
            }
            if r.draining {
                let _ = self.sched.set_node_draining(now, &id, true);
            }
            tracing::info!(node, "node restored; waiting for its heartbeat");
        }
    }

    /// Rebuilds the whole state from the store (as a restart does: see [`Actor::new`]),
    /// keeping the channels, the metrics and the read-only state. When the store cannot be
    /// read either, the actor stops ([`Actor::fatal`]): the server exits with the error, for
    /// its supervisor to restart it.
    pub(super) fn reload(&mut self) {
        let store = self.store.clone();
        let shared = Shared {
            writer: std::mem::replace(&mut self.writer, Writer::closed()),
            done_rx: self.done_rx.take(),
            publish: self.publish.clone(),
            events: self.events.clone(),
            metrics: self.metrics.clone(),
        };
        let base = self.job_id_base + self.sched.next_allocation_id();
        match Actor::restore(&self.config, store, Some(shared), base) {
            Ok(mut fresh) => {
                fresh.read_only = self.read_only.take();
                fresh.next_id = self.next_id;
                // Nodes the reload restores keep their registration's credential.
                std::mem::swap(&mut fresh.node_credentials, &mut self.node_credentials);
                *self = fresh;
                tracing::warn!("state reloaded from the store");
                self.publish_view();
            }
            Err(e) => {
                tracing::error!("cannot reload the state from the store: {e:#}");
                self.fatal = Some(format!(
                    "the store failed a commit and its state cannot be read back: {e:#}"
                ));
            }
        }
    }
}
