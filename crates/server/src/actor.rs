//! The one task that owns the scheduling core. Handlers send it [`Command`]s with a oneshot for
//! the reply; after every change it commits what changed to the store (before replying) and
//! publishes a new [`View`] that GET handlers read without reaching the actor.

use crate::caller::Caller;
use crate::command::{Command, HistoryQuery, LogsReply, LogsRequest, NodeAction, Reply, Request};
use crate::jobs::JobList;
use crate::metrics::{self, ActorMetrics};
use crate::view::{OperationRecord, ReadOnly, TreeView, View, unknown_tree};
use fairsched_api::{
    AlertView, ApiError, EventQuery, EventView, FinishedJob, Heartbeat, HeartbeatReply, JobCounts,
    JobInterrupt, JobLogs, JobStart, JobView, NodeView, OperationView, PoolTreeView, RegisterNode,
    RegisterReply, TreeApplyReply, UpdateOperation, codes,
};
use fairsched_config::{PoolConfig, PoolTreeConfig, PoolTrees};
use fairsched_core::{
    AllocationId, CoreError, Event, EventKind, FinishedAllocation, JobOutcome, NodeHeartbeat,
    NodeId, NodeSpec, OperationId, OperationSpec, Scheduler, Stage,
};
use fairsched_resources::Resources;
use fairsched_store::{
    Batch, EventFilter, JobExit, OperationFilter, Pruned, Store, StoredEvent, StoredJob,
    StoredNode, StoredOperation, StoredTree,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, mpsc, watch};

/// The stored record of a node: what it registered with and the operator's settings, which
/// survive re-registrations and server restarts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct NodeRecord {
    node_id: String,
    resources: Resources,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default = "enabled")]
    scheduler_jobs_enabled: bool,
    #[serde(default)]
    draining: bool,
}

fn enabled() -> bool {
    true
}

/// The error for a node the scheduler does not have.
pub fn no_such_node(id: &str) -> ApiError {
    ApiError::new(codes::RESOLVE, format!("node {id:?} does not exist")).with_attribute("node", id)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn core_error(e: CoreError) -> ApiError {
    ApiError::new(e.code.unwrap_or(codes::GENERIC), e.message)
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(codes::INTERNAL, e.to_string())
}

/// Bytes of each output stream kept per job.
pub const LOG_TAIL_BYTES: usize = 64 * 1024;

/// What outlives a reload of the actor's state ([`Actor::reload`]): the channels that
/// handlers and streams hold, and the metrics the registry reads.
struct Shared {
    publish: watch::Sender<Arc<View>>,
    events: broadcast::Sender<Arc<EventView>>,
    metrics: ActorMetrics,
}

/// The actor's state.
pub struct Actor {
    /// What it was started with (a reload restores from the store with it).
    config: crate::ServerConfig,
    /// Set while the store cannot write: changes and heartbeats are refused, and the timer
    /// checks whether the store can write again.
    read_only: Option<ReadOnly>,
    /// Set when the actor cannot go on (its state could not be reloaded): it stops, and the
    /// server exits with the error.
    fatal: Option<String>,
    /// Added to allocation ids in new job ids (see [`Actor::restore`]).
    job_id_base: u64,
    sched: Scheduler,
    started: Instant,
    store: Box<dyn Store>,
    incarnation: u64,
    order: Vec<String>,
    ops: BTreeMap<String, OperationRecord>,
    /// Job id → operation id (every job, also those of earlier incarnations).
    /// ... and the job's position among its operation's jobs (a hint, checked at every use:
    /// finding a job by id among an operation's jobs would cost O(jobs)).
    job_op: BTreeMap<String, (String, usize)>,
    /// The core's allocation → its job id, and back (running jobs only).
    alloc_job: BTreeMap<u64, String>,
    job_alloc: BTreeMap<String, u64>,
    /// Jobs changed since the last commit.
    dirty_jobs: BTreeSet<String>,
    /// Node → last heartbeat.
    seen: BTreeMap<String, Instant>,
    /// Every node ever registered, with the operator's settings (stored).
    node_records: BTreeMap<String, NodeRecord>,
    /// Jobs each node must kill / interrupt at its next heartbeat.
    kill: BTreeMap<String, BTreeSet<String>>,
    interrupts: BTreeMap<String, Vec<JobInterrupt>>,
    /// The core's orders of the heartbeat being handled, queued with the others once its
    /// events are folded (the jobs they name may have started in the same heartbeat).
    heartbeat_orders: Vec<(NodeId, fairsched_core::NodeOrders)>,
    /// Jobs of allocations that ended since the core's orders were last queued (an order may
    /// name an allocation the fold just ended).
    ended_jobs: BTreeMap<u64, String>,
    next_id: u64,
    node_timeout: Duration,
    publish: watch::Sender<Arc<View>>,
    batch: Batch,
    /// Log tails reported with finished jobs (by job id), committed with the next batch.
    tails: BTreeMap<String, (String, String)>,
    /// The watched jobs' live output (memory only).
    live: crate::live::LiveOutput,
    metrics: ActorMetrics,
    /// The next event's sequence number.
    next_event_seq: u64,
    /// Operations changed by events, to be stored.
    touched: BTreeSet<String>,
    /// Events, once committed, for live streams.
    events: broadcast::Sender<Arc<EventView>>,
    /// Each tree's configuration as JSON, refreshed when it changes (see `save_tree`).
    tree_configs: BTreeMap<String, Arc<Value>>,
    /// More requests were waiting when the current one was taken: a heartbeat then leaves
    /// the published view to the last request of the queue (or the timer), since building
    /// it costs O(cluster) (see `finish_heartbeat`).
    queued: bool,
    /// Replies to heartbeats whose changes wait for the next commit (see `finish_heartbeat`).
    deferred: Vec<DeferredReply>,
    /// Each node's credential from its last registration (memory only).
    node_credentials: crate::auth::NodeCredentials,
    /// When the timer next prunes the store of what is older than the retention.
    prune_at: Instant,
}

/// A reply sent once the commit it waits for ends: with the commit's error if it failed.
type DeferredReply = Box<dyn FnOnce(Option<&ApiError>) + Send>;

/// At most this many heartbeats share a commit (bounds the wait of the first).
const MAX_DEFERRED: usize = 128;

/// At most this many operations (with their jobs) and events are pruned at a time (see
/// [`Actor::prune_history`]): a batch takes milliseconds, never a long pause of the actor.
const PRUNE_OPERATIONS: usize = 200;
const PRUNE_EVENTS: usize = 2000;

/// Events a live stream may fall behind by before it reads the store again.
const EVENT_BUFFER: usize = 4096;
/// Default and largest number of events `GET /api/v1/events` returns.
pub const EVENTS_DEFAULT_LIMIT: usize = 100;
pub const EVENTS_MAX_LIMIT: usize = 10_000;

impl std::fmt::Debug for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actor")
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

impl Actor {
    /// Builds the core from the store's pool trees and the configured trees it lacks (on the
    /// first start: the configured trees; see `start_trees`) and re-submits the
    /// operations that had not finished; completed jobs are not rerun. Jobs that were running
    /// are adopted where they ran: their nodes are restored (with the operator's settings) and
    /// have `node_timeout_ms` to heartbeat again, which reconciles them (jobs that ended
    /// meanwhile are reported with their exit codes, jobs the node no longer runs go back to
    /// pending); a node that does not come back loses them to pending like any lost node. A
    /// running job that cannot be adopted is marked aborted (`server_restart`) and runs again.
    pub fn new(
        config: &crate::ServerConfig,
        store: Box<dyn Store>,
    ) -> anyhow::Result<(Actor, watch::Receiver<Arc<View>>)> {
        let mut actor = Actor::restore(config, store, None, 0)?;
        actor
            .commit_batch()
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        actor.publish_view();
        let view = actor.publish.subscribe();
        Ok((actor, view))
    }

    /// The state as the store has it (see [`Actor::new`]), not committed yet: what recovery
    /// changed (trees saved, jobs that cannot be adopted aborted, adoption events) is in the
    /// batch. `shared`: the channels and metrics of the actor this one replaces (a reload),
    /// none at start; `job_id_base`: added to allocation ids in new job ids, so that a reload
    /// (whose core numbers allocations from 1 again) does not reuse this incarnation's ids.
    fn restore(
        config: &crate::ServerConfig,
        store: Box<dyn Store>,
        shared: Option<Shared>,
        job_id_base: u64,
    ) -> anyhow::Result<Actor> {
        let loaded = store.load()?;
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
        let sched = Scheduler::new(config.scheduler.clone(), validated)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let (Some(start), Some((_, source))) = (&start, &configured) {
            start.log(source);
        }
        let shared = shared.unwrap_or_else(|| Shared {
            publish: watch::channel(Arc::new(View {
                snapshot: sched.snapshot(0),
                operation_trees: BTreeMap::new(),
                trees: Vec::new(),
                operations: Vec::new(),
                nodes: Vec::new(),
                read_only: None,
            }))
            .0,
            events: broadcast::channel(EVENT_BUFFER).0,
            metrics: ActorMetrics::default(),
        });
        let mut actor = Actor {
            config: config.clone(),
            read_only: None,
            fatal: None,
            job_id_base,
            sched,
            started: Instant::now(),
            store,
            incarnation: loaded.incarnation,
            order: Vec::new(),
            ops: BTreeMap::new(),
            job_op: BTreeMap::new(),
            alloc_job: BTreeMap::new(),
            job_alloc: BTreeMap::new(),
            dirty_jobs: BTreeSet::new(),
            seen: BTreeMap::new(),
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
            batch: Batch::default(),
            tails: BTreeMap::new(),
            live: crate::live::LiveOutput::default(),
            metrics: shared.metrics,
            next_event_seq: loaded.last_event_seq + 1,
            touched: BTreeSet::new(),
            events: shared.events,
            tree_configs: BTreeMap::new(),
            queued: false,
            deferred: Vec::new(),
            node_credentials: crate::auth::NodeCredentials::new(config.agent_token.is_some()),
            prune_at: Instant::now(),
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
                if job.state == "running" {
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
            if !is_finished(&view.state) {
                let mut spec: OperationSpec = serde_json::from_value(view.spec.clone())?;
                for (t, task) in spec.tasks.iter_mut().enumerate() {
                    let done = op_jobs
                        .iter()
                        .filter(|j| j.task == t && j.state == "completed")
                        .count() as u32;
                    task.job_count = task.job_count.saturating_sub(done);
                }
                if let Err(e) = actor.sched.start_operation(0, spec) {
                    view.state = "failed".into();
                    view.reason = Some(format!("not restored after a restart: {}", e.message));
                    view.finished_at = Some(unix_ms());
                    // Finished: it leaves memory at the first commit.
                    actor.touched.insert(view.id.clone());
                }
                actor.dirty_op(&view);
            }
            actor.order.push(view.id.clone());
            actor
                .ops
                .insert(view.id.clone(), OperationRecord::new(view, op_jobs));
        }
        actor.adopt_running(running);
        actor.after_change();
        Ok(actor)
    }

    /// At start, after trees were added: warns of each known node that the added trees'
    /// filters give a second tree (it is refused when it registers, and not restored).
    fn warn_of_shared_nodes(&self, added: &[String]) {
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
    fn adopt_running(&mut self, running: Vec<(String, String, usize, String)>) {
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
                        self.seen.insert(node.clone(), Instant::now());
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
                        j.state = "aborted".into();
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

    /// Logs an event of the server's own (not the core's) in the event log.
    fn server_event(&mut self, record: Value) {
        // The core's events so far come first.
        self.take_core_events();
        let fields = self.server_fields(record);
        self.log_event(unix_ms(), fields);
    }

    /// A server event's fields: `t_ms`, then the record's.
    fn server_fields(&self, record: Value) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("t_ms".into(), json!(self.now()));
        if let Value::Object(m) = record {
            fields.extend(m);
        }
        fields
    }

    /// Numbers an event and queues it for the store (streams get it once it is committed).
    fn log_event(&mut self, unix_ms: u64, fields: Map<String, Value>) {
        let text = |k: &str| fields.get(k).and_then(Value::as_str).map(str::to_string);
        let event = StoredEvent {
            seq: self.next_event_seq,
            unix_ms,
            kind: text("event").unwrap_or_default(),
            operation: text("operation"),
            node: text("node"),
            job: text("job"),
            record: Value::Object(fields).to_string(),
        };
        self.next_event_seq += 1;
        self.batch.events.push(event);
    }

    /// A core event as the log keeps it: jobs named by their job id (not the core's allocation
    /// number), and a finished job's exit code.
    fn event_fields(&self, e: &Event) -> Map<String, Value> {
        let mut fields = match serde_json::to_value(e) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let job_of = |a: &Value| {
            a.as_u64().map(|a| {
                self.alloc_job
                    .get(&a)
                    .cloned()
                    .unwrap_or_else(|| self.new_job_id(a))
            })
        };
        if let Some(job) = fields.remove("allocation").as_ref().and_then(job_of) {
            if fields.get("event").and_then(Value::as_str) == Some("allocation_finished")
                && let Some(code) = self.job(&job).and_then(|j| j.exit_code)
            {
                fields.insert("exit_code".into(), json!(code));
            }
            fields.insert("job".into(), json!(job));
        }
        if let Some(Value::Object(p)) = fields.get_mut("preemptor")
            && let Some(job) = p.remove("allocation").as_ref().and_then(job_of)
        {
            p.insert("job".into(), json!(job));
        }
        fields
    }

    /// The event broadcast: subscribe for events as they are committed.
    pub fn events(&self) -> broadcast::Sender<Arc<EventView>> {
        self.events.clone()
    }

    fn read_events(&self, q: &EventQuery) -> Result<Vec<EventView>, ApiError> {
        let filter = EventFilter {
            operation: q.operation.clone(),
            node: q.node.clone(),
            job: q.job.clone(),
            kinds: q.kinds(),
            since_unix_ms: q.since,
            after_seq: q.after,
            limit: q
                .limit
                .unwrap_or(EVENTS_DEFAULT_LIMIT)
                .min(EVENTS_MAX_LIMIT),
        };
        Ok(self
            .store
            .events(&filter)
            .map_err(internal)?
            .iter()
            .map(event_view)
            .collect())
    }

    /// The counters and histograms this actor updates (shared: clones see the same values).
    pub fn metrics(&self) -> ActorMetrics {
        self.metrics.clone()
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs until every sender is dropped; an error when the actor cannot go on (its state
    /// could not be reloaded after a failed commit: see [`Actor::reload`]).
    pub async fn run(mut self, mut rx: mpsc::Receiver<Request>) -> anyhow::Result<()> {
        let period = self.sched.config.fair_share_update_period_ms.max(10);
        let mut timer = tokio::time::interval(Duration::from_millis(period));
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                req = rx.recv() => match req {
                    Some(req) => {
                        self.queued = !rx.is_empty();
                        self.authorize_and_handle(req);
                        if !self.queued && !self.deferred.is_empty() {
                            // The last request of a burst did not commit (a read, a refusal).
                            self.fold_changes();
                            let _ = self.commit();
                            self.publish_view();
                        }
                    }
                    None => break,
                },
                _ = timer.tick() => self.on_timer(),
            }
            if let Some(e) = self.fatal.take() {
                anyhow::bail!("{e}");
            }
        }
        Ok(())
    }

    fn on_timer(&mut self) {
        if self.read_only.is_some() {
            self.check_store();
            return;
        }
        let now = self.now();
        let updates = self.sched.stats.fair_share_updates;
        let started = Instant::now();
        self.sched.tick(now);
        if self.sched.stats.fair_share_updates != updates {
            // The operations that finished before this update leave the core too (the actor
            // let them go when it stored them).
            self.sched.forget_finished_operations();
            let took = started.elapsed();
            metrics::observe(&self.metrics.fair_share_update_duration, took);
            tracing::trace!(
                now_ms = now,
                took_us = took.as_micros() as u64,
                "fair-share update"
            );
        }
        let lost: Vec<String> = self
            .seen
            .iter()
            .filter(|(_, t)| t.elapsed() > self.node_timeout)
            .map(|(n, _)| n.clone())
            .collect();
        for node in lost {
            tracing::warn!(node, "node lost (no heartbeat); its jobs are rescheduled");
            self.server_event(json!({"event": "node_lost", "node": node}));
            self.seen.remove(&node);
            let _ = self.sched.remove_node(now, &NodeId(node.clone()));
            self.kill.remove(&node);
            self.interrupts.remove(&node);
        }
        self.fold_changes();
        let _ = self.commit();
        self.publish_view();
        self.prune_history();
    }

    /// While read-only: whether the store can write again (a test write). If it can, the
    /// changes the reload made (see [`Actor::restore`]) are committed and the server takes
    /// changes and heartbeats again; every node gets a full `node_timeout_ms` to heartbeat
    /// (their heartbeats were refused meanwhile).
    fn check_store(&mut self) {
        if let Err(e) = self.store.check_writable() {
            tracing::debug!("the store still cannot write: {e}");
            return;
        }
        match self.commit_batch() {
            Ok(()) => {
                let since = self.read_only.take().map_or(0, |r| r.since_unix_ms);
                let now = Instant::now();
                for seen in self.seen.values_mut() {
                    *seen = now;
                }
                tracing::warn!(
                    read_only_s = unix_ms().saturating_sub(since) as f64 / 1000.0,
                    "the store can write again: the server takes changes and heartbeats again"
                );
                self.publish_view();
            }
            Err(e) => {
                tracing::debug!("the store still cannot write: {}", e.message);
                // What the batch held is in memory only: start again from the store.
                self.reload();
            }
        }
    }

    /// Runs the request's command if its caller may (decided on the trees as they are now,
    /// so that a refused command changes nothing); refusals and changes are logged with the
    /// user.
    fn authorize_and_handle(&mut self, Request { caller, command }: Request) {
        if let Some(r) = &self.read_only
            && command.changes_state()
        {
            command.refuse(read_only_error(r));
            return;
        }
        if let Err(e) = crate::auth::authorize(&self.sched, &caller, &command) {
            tracing::warn!(
                user = caller.name(),
                command = command.name(),
                code = e.code,
                message = %e.message,
                "request refused"
            );
            command.refuse(e);
            return;
        }
        if command.is_users_change() && caller != Caller::Unchecked {
            tracing::info!(user = caller.name(), command = command.name(), "request");
        }
        self.handle(command);
    }

    fn handle(&mut self, cmd: Command) {
        let _span = tracing::debug_span!("command", kind = cmd.name()).entered();
        match cmd {
            Command::Submit(spec, wait_for_nodes, reply) => {
                let r = if wait_for_nodes {
                    Ok(())
                } else {
                    self.check_fits(&spec)
                };
                let r = r.and_then(|()| self.submit(spec));
                self.finish(reply, r);
            }
            Command::Abort(id, reply) => {
                let r = self.abort(&id);
                self.finish(reply, r);
            }
            Command::UpdateOperation(id, update, reply) => {
                let r = self.update_operation(&id, update);
                self.finish(reply, r);
            }
            Command::Logs(request, reply) => {
                let _ = reply.send(self.logs(request));
            }
            Command::CreatePool {
                tree,
                name,
                parent,
                config,
                reply,
            } => {
                let r = self.create_pool(tree.as_deref(), &name, parent.as_deref(), config);
                self.finish(reply, r);
            }
            Command::UpdatePool {
                tree,
                name,
                config,
                parent,
                reply,
            } => {
                let r = self.update_pool(tree.as_deref(), &name, config, parent.as_deref());
                self.finish(reply, r);
            }
            Command::RemovePool { tree, name, reply } => {
                let r = self.remove_pool(tree.as_deref(), &name);
                self.finish(reply, r);
            }
            Command::ApplyTree {
                tree,
                config,
                dry_run,
                reply,
            } => {
                let r = self.apply_tree(tree.as_deref(), config, dry_run);
                self.finish(reply, r);
            }
            Command::Node { id, action, reply } => {
                let r = self.node_action(&id, action);
                self.finish(reply, r);
            }
            Command::Register(node, reply) => {
                let id = node.node_id.clone();
                let r = self.register(node).and_then(|r| {
                    let node_credential = self.node_credentials.issue(&id)?;
                    Ok(RegisterReply {
                        node_credential,
                        ..r
                    })
                });
                self.finish_heartbeat(reply, r);
            }
            Command::Heartbeat(hb, reply) => {
                let r = self.heartbeat(hb);
                self.finish_heartbeat(reply, r);
            }
            Command::Events(q, reply) => {
                let _ = reply.send(self.read_events(&q));
            }
            Command::History(q) => self.history(q),
        }
    }

    /// Applies the events, commits, publishes, then replies (a commit failure is the reply,
    /// and the change is undone: see [`Actor::commit`]). Readers see a change only once it
    /// is committed.
    fn finish<T>(&mut self, reply: Reply<T>, result: Result<T, ApiError>) {
        self.fold_changes();
        let result = self.commit_result(result);
        self.publish_view();
        send_reply(reply, result);
    }

    /// [`Actor::finish`] for an agent's heartbeat or registration. While other requests wait
    /// (a burst, as when a whole cluster starts or under load), it neither publishes the view
    /// nor commits: the last request of the burst (or the timer) publishes once, and up to
    /// [`MAX_DEFERRED`] heartbeats share one commit, each replied to only after it. Building
    /// the view costs O(cluster) (a core snapshot, every node, every operation's summary);
    /// per heartbeat it made the actor spend most of its time on views nobody read (a burst of
    /// registrations rebuilt it once per node: quadratic in the nodes), and a commit per
    /// heartbeat spent most of the rest in SQLite's per-transaction work. A client that waits
    /// for its reply and then reads sees its change whenever the server is not busy; under
    /// load reads lag by at most the queue.
    fn finish_heartbeat<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T, ApiError>,
    ) {
        if self.queued && self.deferred.len() < MAX_DEFERRED {
            self.fold_changes();
            self.deferred
                .push(Box::new(move |failed: Option<&ApiError>| {
                    let result = match failed {
                        Some(e) => Err(e.clone()),
                        None => result,
                    };
                    if let Err(e) = &result {
                        tracing::debug!(code = e.code, message = %e.message, "request rejected");
                    }
                    let _ = reply.send(result);
                }));
            return;
        }
        self.fold_changes();
        let result = self.commit_result(result);
        if !self.queued {
            self.publish_view();
        }
        send_reply(reply, result);
    }

    /// Commits; a commit failure replaces `result`.
    fn commit_result<T>(&mut self, result: Result<T, ApiError>) -> Result<T, ApiError> {
        match self.commit() {
            Ok(()) => result,
            Err(e) => Err(e),
        }
    }

    /// The name of the tree a request names (`None`: the default tree), or an error naming
    /// the trees there are.
    fn resolve_tree(&self, tree: Option<&str>) -> Result<String, ApiError> {
        match tree {
            None => Ok(self.sched.tree().name.clone()),
            Some(name) if self.sched.tree_index(name).is_some() => Ok(name.to_string()),
            Some(name) => Err(unknown_tree(
                name,
                self.sched.trees().iter().map(|t| t.name.as_str()),
            )),
        }
    }

    fn create_pool(
        &mut self,
        tree: Option<&str>,
        name: &str,
        parent: Option<&str>,
        config: Map<String, Value>,
    ) -> Result<Vec<String>, ApiError> {
        let tree = self.resolve_tree(tree)?;
        let config = pool_config(name, config)?;
        let now = self.now();
        self.sched
            .create_pool_in(now, &tree, parent, name, config)
            .map_err(|e| core_error(e).with_attribute("tree", tree.as_str()))?;
        tracing::info!(tree, pool = name, parent, "pool created");
        self.save_tree(&tree);
        Ok(self.tree_warnings(&tree))
    }

    /// Replaces a pool's options and/or moves it: both or neither (a rejected move undoes the
    /// options' change).
    fn update_pool(
        &mut self,
        tree: Option<&str>,
        name: &str,
        config: Option<Map<String, Value>>,
        parent: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        let tree = self.resolve_tree(tree)?;
        let config = config.map(|c| pool_config(name, c)).transpose()?;
        let now = self.now();
        let t = self.sched.tree_index(&tree).expect("resolved above");
        let before = self.sched.trees()[t].validated.tree.clone();
        let r = (|| {
            if let Some(c) = config {
                self.sched.set_pool_in(now, &tree, name, c)?;
            }
            if let Some(p) = parent {
                self.sched.move_pool_in(now, &tree, name, Some(p))?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            if self.sched.trees()[t].validated.tree != before {
                // The options changed, the move was rejected: back to how it was.
                if let Err(undo) = self.sched.set_tree_config_in(now, &tree, before) {
                    tracing::error!(tree, pool = name, "cannot undo a pool change: {undo}");
                }
            }
            return Err(core_error(e).with_attribute("tree", tree.as_str()));
        }
        tracing::info!(tree, pool = name, "pool updated");
        self.save_tree(&tree);
        Ok(self.tree_warnings(&tree))
    }

    fn remove_pool(&mut self, tree: Option<&str>, name: &str) -> Result<Vec<String>, ApiError> {
        let tree = self.resolve_tree(tree)?;
        let now = self.now();
        self.sched
            .remove_pool_in(now, &tree, name)
            .map_err(|e| core_error(e).with_attribute("tree", tree.as_str()))?;
        tracing::info!(tree, pool = name, "pool removed");
        self.save_tree(&tree);
        Ok(self.tree_warnings(&tree))
    }

    /// What needs attention in tree `name` as it is now (after a change): its guarantees
    /// overcommit ([`Actor::overcommit_warning`]).
    fn tree_warnings(&self, name: &str) -> Vec<String> {
        let Some(t) = self.sched.tree_index(name) else {
            return Vec::new();
        };
        self.overcommit_warning(name, &self.sched.trees()[t].validated.tree)
            .into_iter()
            .collect()
    }

    /// `config` as tree `name`'s, against the tree's nodes now: when the strong guarantees
    /// (with flows or burst guarantees) of the root's pools exceed the cluster, says so
    /// (alert 29000). Such a tree is accepted, as in YTsaurus: the fair-share update scales
    /// the guarantees down proportionally and raises the alert. A tree without nodes yet is
    /// said to have none, not to overcommit a cluster of 0.
    fn overcommit_warning(&self, name: &str, config: &PoolTreeConfig) -> Option<String> {
        let t = self.sched.tree_index(name)?;
        let total = self
            .sched
            .nodes()
            .filter(|n| n.tree == Some(t) && n.scheduler_jobs_enabled)
            .fold(Resources::ZERO, |acc, n| acc.add(&n.resources));
        let alert = fairsched_config::guarantee_overcommit_alert(config, &total)?;
        Some(if total == Resources::ZERO {
            format!("pool tree {name:?}: {}", alert.message)
        } else {
            format!(
                "pool tree {name:?} overcommits its guarantees (alert {}): {}",
                alert.code, alert.message
            )
        })
    }

    /// Validates a new configuration of a tree (`None`: the default tree) as a whole and,
    /// unless `dry_run`, applies it at once (the other trees keep theirs).
    fn apply_tree(
        &mut self,
        tree: Option<&str>,
        config: Value,
        dry_run: bool,
    ) -> Result<TreeApplyReply, ApiError> {
        let name = self.resolve_tree(tree)?;
        let t = self.sched.tree_index(&name).expect("resolved above");
        let new: PoolTreeConfig = serde_json::from_value(config)
            .map_err(|e| ApiError::new(codes::BAD_REQUEST, format!("bad pool tree: {e}")))?;
        let update = fairsched_config::validate_update(&self.sched.trees()[t].validated.tree, &new)
            .map_err(|errors| {
                ApiError::new(codes::BAD_REQUEST, errors.to_string())
                    .with_attribute("tree", name.as_str())
            })?;
        let diff = &update.diff;
        let reply = TreeApplyReply {
            tree: name.clone(),
            added: diff.added.clone(),
            removed: diff.removed.clone(),
            changed: diff.changed.clone(),
            tree_config_changed: diff.tree_config_changed,
            applied: !dry_run,
            warnings: update
                .validated
                .warnings
                .iter()
                .map(|w| w.to_string())
                .chain(self.overcommit_warning(&name, &update.validated.tree))
                .collect(),
        };
        if dry_run || diff.is_empty() {
            return Ok(reply);
        }
        let trees = fairsched_config::ValidatedPoolTrees {
            trees: self
                .sched
                .trees()
                .iter()
                .map(|t| {
                    let validated = if t.name == name {
                        update.validated.clone()
                    } else {
                        t.validated.clone()
                    };
                    (t.name.clone(), validated)
                })
                .collect(),
            default_tree: Some(self.sched.tree().name.clone()),
            warnings: Vec::new(),
        };
        let now = self.now();
        self.sched
            .replace_tree_config(now, trees)
            .map_err(|e| core_error(e).with_attribute("tree", name.as_str()))?;
        self.save_tree(&name);
        tracing::info!(
            tree = name,
            added = reply.added.len(),
            removed = reply.removed.len(),
            changed = reply.changed.len(),
            "pool tree applied"
        );
        self.server_event(json!({
            "event": "tree_applied",
            "tree": name,
            "added": reply.added,
            "removed": reply.removed,
            "changed": reply.changed,
            "tree_config_changed": reply.tree_config_changed,
        }));
        Ok(reply)
    }

    /// Queues every tree for the store, with which one is the default.
    fn save_trees(&mut self) {
        let names: Vec<String> = self.sched.trees().iter().map(|t| t.name.clone()).collect();
        for name in names {
            self.save_tree(&name);
        }
    }

    /// Queues the tree named `name` (its configuration now) for the store.
    fn save_tree(&mut self, name: &str) {
        let Some(t) = self.sched.tree_index(name) else {
            return;
        };
        let tree = &self.sched.trees()[t];
        let Ok(config) = serde_json::to_string(&tree.validated.tree) else {
            return;
        };
        if let Ok(value) = serde_json::from_str(&config) {
            self.tree_configs.insert(tree.name.clone(), Arc::new(value));
        }
        let stored = StoredTree {
            name: tree.name.clone(),
            config,
            is_default: tree.name == self.sched.tree().name,
        };
        self.batch.trees.retain(|s| s.name != stored.name);
        self.batch.trees.push(stored);
    }

    /// Refuses an operation no node could ever run a job of (see
    /// [`crate::validate::fits_some_node`]).
    fn check_fits(&self, spec: &Value) -> Result<(), ApiError> {
        let trees = self.sched.trees();
        let nodes: Vec<crate::validate::NodeFit> = self
            .sched
            .nodes()
            .map(|n| crate::validate::NodeFit {
                id: n.id.0.clone(),
                tree: n.tree.map(|t| trees[t].name.clone()),
                tags: n.tags.iter().cloned().collect(),
                resources: n.resources,
            })
            .collect();
        crate::validate::fits_some_node(spec, &nodes, &self.sched.tree().name)
    }

    fn submit(&mut self, mut body: Value) -> Result<fairsched_api::SubmitReply, ApiError> {
        let obj = body
            .as_object_mut()
            .ok_or_else(|| ApiError::new(codes::BAD_REQUEST, "an operation must be an object"))?;
        let id = match obj.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(ApiError::new(codes::BAD_REQUEST, "id must be a string")),
            None => loop {
                let id = format!("op-{}-{}", self.incarnation, self.next_id);
                self.next_id += 1;
                if !self.operation_known(&id)? {
                    obj.insert("id".into(), Value::String(id.clone()));
                    break id;
                }
            },
        };
        if self.operation_known(&id)? {
            return Err(ApiError::new(
                codes::GENERIC,
                format!("operation {id:?} already exists"),
            ));
        }
        for (i, t) in obj
            .get("tasks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let empty = t
                .get("command")
                .and_then(Value::as_array)
                .is_none_or(|c| c.is_empty());
            if empty {
                return Err(ApiError::new(
                    codes::BAD_REQUEST,
                    format!("tasks[{i}].command must not be empty"),
                ));
            }
        }
        // The error names the field (`tasks[0].job_count: invalid value ...`).
        let spec: OperationSpec = serde_path_to_error::deserialize(body.clone()).map_err(|e| {
            ApiError::new(
                codes::BAD_REQUEST,
                format!(
                    "bad operation spec: {}: {}",
                    e.path(),
                    fairsched_config::user_words(&e.inner().to_string())
                ),
            )
        })?;
        let now = self.now();
        // Which pools exist now, to tell the submitter of a pool its submission creates.
        let ephemeral_before: Vec<BTreeSet<String>> = self
            .sched
            .trees()
            .iter()
            .map(|t| t.ephemeral.keys().cloned().collect())
            .collect();
        self.sched
            .start_operation(now, spec.clone())
            .map_err(core_error)?;
        let op = self.sched.operation(&spec.id).expect("just started");
        let mut created_pools = Vec::new();
        for placement in &op.trees {
            let tree = &self.sched.trees()[placement.tree];
            let Some(pool) = tree.ephemeral.get(&placement.pool) else {
                continue;
            };
            if ephemeral_before[placement.tree].contains(&placement.pool) {
                continue;
            }
            let configured = tree.validated.pools.iter().map(|p| p.name.as_str());
            created_pools.push(fairsched_api::CreatedPool {
                tree: tree.name.clone(),
                pool: placement.pool.clone(),
                parent: pool.parent.clone(),
                did_you_mean: fairsched_config::closest(&placement.pool, configured)
                    .map(str::to_string),
            });
        }
        let view = OperationView {
            id: id.clone(),
            state: op.state.name().into(),
            pool: op.pool.clone(),
            user: op.user.clone(),
            spec: body,
            submitted_at: unix_ms(),
            finished_at: None,
            reason: None,
            why: None,
            job_counts: JobCounts::default(),
            jobs: Vec::new(),
        };
        tracing::info!(
            operation = id,
            pool = view.pool,
            user = view.user,
            tasks = spec.tasks.len(),
            "operation submitted"
        );
        self.order.push(id.clone());
        self.ops
            .insert(id.clone(), OperationRecord::new(view, JobList::default()));
        Ok(fairsched_api::SubmitReply { id, created_pools })
    }

    fn abort(&mut self, id: &str) -> Result<OperationView, ApiError> {
        if !self.ops.contains_key(id) {
            return Err(self.not_in_memory(id, |state| format!("is already {state}")));
        }
        let now = self.now();
        self.sched
            .abort_operation(now, &OperationId(id.to_string()))
            .map_err(core_error)?;
        tracing::info!(operation = id, "operation aborted by request");
        self.after_change();
        Ok(self.ops[id].to_view(true))
    }

    /// Changes an operation's weight, limits or pool in the core, and in its stored spec (a
    /// restart submits that again).
    fn update_operation(
        &mut self,
        id: &str,
        update: UpdateOperation,
    ) -> Result<OperationView, ApiError> {
        let Some(record) = self.ops.get(id) else {
            return Err(self.not_in_memory(id, |state| format!("is {state} and cannot change")));
        };
        let view = &record.view;
        if is_finished(&view.state) {
            return Err(ApiError::new(
                codes::GENERIC,
                format!("operation {id:?} is {} and cannot change", view.state),
            )
            .with_attribute("operation", id));
        }
        let now = self.now();
        let op_id = OperationId(id.to_string());
        let per_tree = update
            .scheduling_options_per_pool_tree
            .iter()
            .map(|(tree, o)| {
                let options = fairsched_core::TreeSchedulingOptions {
                    pool: o.pool.clone(),
                    weight: o.weight,
                    resource_limits: o.resource_limits,
                };
                (tree.clone(), options)
            })
            .collect();
        self.sched
            .update_operation_with(
                now,
                &op_id,
                fairsched_core::OperationUpdate {
                    weight: update.weight,
                    resource_limits: update.resource_limits,
                    pool: update.pool.clone(),
                    per_tree,
                },
            )
            .map_err(core_error)?;
        // The stored spec follows the core's, which says where the operation runs now (a
        // restart resubmits it).
        let core_spec = self.sched.operation(&op_id).map(|op| {
            (
                op.pool.clone(),
                op.spec.weight,
                op.spec.resource_limits,
                op.spec.scheduling_options_per_pool_tree.clone(),
            )
        });
        let view = self.ops.get_mut(id).expect("checked above").view_mut();
        view.pool = core_spec
            .as_ref()
            .map_or(view.pool.clone(), |c| c.0.clone());
        if let (Value::Object(spec), Some((_, weight, limits, per_tree))) =
            (&mut view.spec, core_spec)
        {
            if update.pool.is_some() {
                spec.insert("pool".into(), json!(view.pool));
            }
            if let Some(w) = weight {
                spec.insert("weight".into(), json!(w));
            }
            if update.resource_limits.is_some() {
                spec.insert("resource_limits".into(), json!(limits));
            }
            if !per_tree.is_empty() {
                spec.insert(
                    "scheduling_options_per_pool_tree".into(),
                    serde_json::to_value(&per_tree).unwrap_or_default(),
                );
            }
        }
        tracing::info!(
            operation = id,
            weight = update.weight,
            pool = update.pool,
            "operation updated"
        );
        let mut record = serde_json::to_value(&update).unwrap_or_default();
        if let Value::Object(m) = &mut record {
            m.insert("event".into(), json!("operation_updated"));
            m.insert("operation".into(), json!(id));
        }
        self.server_event(record);
        self.touched.insert(id.to_string());
        self.after_change();
        Ok(self.ops[id].to_view(true))
    }

    /// The output of the jobs `request` names: a running job's from its live copy (the read
    /// watches it, so its node is asked for its output), a job that ended while watched from
    /// that copy up to its end, any other from its stored final tail.
    fn logs(&mut self, request: LogsRequest) -> Result<LogsReply, ApiError> {
        let id = &request.operation;
        let wanted = |job: &str| request.jobs.as_ref().is_none_or(|j| j.contains(job));
        let jobs: Vec<JobView> = match self.ops.get(id) {
            Some(op) => op.jobs.iter().filter(|j| wanted(&j.id)).cloned().collect(),
            None => {
                let (_, jobs) = self
                    .store
                    .operation(id)
                    .map_err(internal)?
                    .ok_or_else(|| no_such_operation(id))?;
                jobs.iter()
                    .filter_map(|j| serde_json::from_str::<JobView>(&j.record).ok())
                    .filter(|j| wanted(&j.id))
                    .collect()
            }
        };
        let now = Instant::now();
        let mut stored: Option<BTreeMap<String, (String, String)>> = None;
        let mut logs = Vec::with_capacity(jobs.len());
        for job in jobs {
            let from = request.from.get(&job.id).copied();
            let running = job.state == "running";
            if running {
                self.live.watch(&job.id, &job.node, now);
            }
            let live = if running || self.live.is_complete(&job.id) {
                self.live.read(&job.id, from)
            } else {
                None
            };
            let (stdout, stderr, live) = match live {
                Some(r) => (r.stdout, r.stderr, Some(r.live)),
                // Watched by too many readers' jobs already: nothing yet.
                None if running => (
                    String::new(),
                    String::new(),
                    Some(fairsched_api::LiveLogs {
                        waiting: true,
                        ..Default::default()
                    }),
                ),
                None => {
                    if stored.is_none() {
                        let rows = self.store.job_logs(id).map_err(internal)?;
                        stored = Some(rows.into_iter().map(|(j, o, e)| (j, (o, e))).collect());
                    }
                    let (o, e) = stored
                        .as_mut()
                        .and_then(|s| s.remove(&job.id))
                        .unwrap_or_default();
                    (o, e, None)
                }
            };
            logs.push(JobLogs {
                job: job.id,
                node: job.node,
                stdout,
                stderr,
                state: Some(job.state),
                live,
            });
        }
        Ok(LogsReply {
            logs,
            heartbeat_period: Duration::from_millis(self.sched.config.node_heartbeat_period_ms),
        })
    }

    fn register(&mut self, node: RegisterNode) -> Result<RegisterReply, ApiError> {
        let now = self.now();
        let id = NodeId(node.node_id.clone());
        if node.node_id.is_empty() {
            return Err(ApiError::new(
                codes::BAD_REQUEST,
                "node_id must not be empty",
            ));
        }
        self.check_usable(&node)?;
        // A node the scheduler still has (e.g. restored at a restart with its running jobs)
        // keeps its jobs: the agent's next heartbeat reconciles them.
        if self.sched.node(&id).is_some() {
            self.sched
                .set_node(
                    now,
                    &id,
                    Some(node.resources),
                    Some(node.tags.iter().cloned().collect()),
                    None,
                )
                .map_err(core_error)?;
            self.seen.insert(node.node_id.clone(), Instant::now());
            self.save_node(NodeRecord {
                node_id: node.node_id.clone(),
                resources: node.resources,
                tags: node.tags.clone(),
                ..self
                    .node_records
                    .get(&node.node_id)
                    .cloned()
                    .unwrap_or(NodeRecord {
                        node_id: node.node_id.clone(),
                        resources: node.resources,
                        tags: Vec::new(),
                        scheduler_jobs_enabled: true,
                        draining: false,
                    })
            })?;
            tracing::info!(
                node = node.node_id,
                "node registered again; its jobs are kept"
            );
            let kept = self.sched.node(&id).map_or(0, |n| n.allocations.len());
            self.server_event(
                json!({"event": "node_registered", "node": node.node_id, "kept_jobs": kept}),
            );
            return Ok(RegisterReply {
                heartbeat_period_ms: self.sched.config.node_heartbeat_period_ms,
                node_credential: String::new(),
            });
        }
        self.sched
            .add_node(
                now,
                NodeSpec {
                    id: id.clone(),
                    resources: node.resources,
                    tags: node.tags.iter().cloned().collect(),
                },
            )
            .map_err(core_error)?;
        self.kill.remove(&node.node_id);
        self.interrupts.remove(&node.node_id);
        self.seen.insert(node.node_id.clone(), Instant::now());
        // The operator's settings outlive registrations.
        let (enabled, draining) = self
            .node_records
            .get(&node.node_id)
            .map_or((true, false), |r| (r.scheduler_jobs_enabled, r.draining));
        if !enabled {
            self.sched
                .set_node(now, &id, None, None, Some(false))
                .map_err(core_error)?;
        }
        if draining {
            self.sched
                .set_node_draining(now, &id, true)
                .map_err(core_error)?;
        }
        self.save_node(NodeRecord {
            node_id: node.node_id.clone(),
            resources: node.resources,
            tags: node.tags.clone(),
            scheduler_jobs_enabled: enabled,
            draining,
        })?;
        tracing::info!(node = node.node_id, enabled, draining, "node registered");
        self.server_event(json!({"event": "node_registered", "node": node.node_id}));
        Ok(RegisterReply {
            heartbeat_period_ms: self.sched.config.node_heartbeat_period_ms,
            node_credential: String::new(),
        })
    }

    /// Refuses a node the scheduler could never run a job on, saying why and what to change.
    fn check_usable(&self, node: &RegisterNode) -> Result<(), ApiError> {
        use fairsched_resources::ResourceKind;
        let r = &node.resources;
        let why = if r.is_zero() {
            Some("it offers no resources at all".to_string())
        } else if self.sched.config.enable_allocation_abort_on_zero_user_slots
            && r.raw_of(ResourceKind::UserSlots) == 0
        {
            Some(
                "it offers no user slots, and the scheduler aborts every job on a node without \
                 user slots (scheduler.enable_allocation_abort_on_zero_user_slots)"
                    .to_string(),
            )
        } else {
            None
        };
        match why {
            Some(why) => Err(ApiError::new(
                codes::BAD_REQUEST,
                format!(
                    "node {:?} cannot run any job: {why}; offer some with `fairsched agent \
                     --resources` (e.g. user_slots=4,cpu=2,memory=4GiB; resources left out are \
                     detected)",
                    node.node_id
                ),
            )
            .with_attribute("node", node.node_id.as_str())),
            None => Ok(()),
        }
    }

    fn save_node(&mut self, record: NodeRecord) -> Result<(), ApiError> {
        self.batch.nodes.retain(|n| n.id != record.node_id);
        self.batch.nodes.push(StoredNode {
            id: record.node_id.clone(),
            record: serde_json::to_string(&record).map_err(internal)?,
        });
        self.node_records.insert(record.node_id.clone(), record);
        Ok(())
    }

    /// Disables, enables, drains or undrains a node; the setting is stored and outlives the
    /// node's re-registrations and server restarts.
    fn node_action(&mut self, id: &str, action: NodeAction) -> Result<NodeView, ApiError> {
        let now = self.now();
        let node = NodeId(id.to_string());
        if self.sched.node(&node).is_none() {
            return Err(no_such_node(id));
        }
        self.take_core_events();
        let r = match action {
            NodeAction::Disable => self.sched.set_node(now, &node, None, None, Some(false)),
            NodeAction::Enable => self.sched.set_node(now, &node, None, None, Some(true)),
            NodeAction::Drain => self.sched.set_node_draining(now, &node, true),
            NodeAction::Undrain => self.sched.set_node_draining(now, &node, false),
        };
        r.map_err(|e| core_error(e).with_attribute("node", id))?;
        let n = self.sched.node(&node).expect("checked above");
        let record = NodeRecord {
            node_id: id.to_string(),
            resources: n.resources,
            tags: n.tags.iter().cloned().collect(),
            scheduler_jobs_enabled: n.scheduler_jobs_enabled,
            draining: n.draining,
        };
        tracing::info!(
            node = id,
            action = action.name(),
            allocations = n.allocations.len(),
            "node changed by request"
        );
        self.save_node(record)?;
        let view = self.node_view(&node).expect("checked above");
        // Logged before what it caused (the aborts of a disabled node's jobs).
        let fields = self.server_fields(json!({"event": "node_changed", "node": id,
            "action": action.name(), "state": view.state}));
        self.log_event(unix_ms(), fields);
        self.after_change();
        Ok(view)
    }

    fn node_view(&self, id: &NodeId) -> Option<NodeView> {
        let n = self.sched.node(id)?;
        Some(NodeView {
            id: n.id.0.clone(),
            resources: n.resources,
            usage: n.usage,
            tags: n.tags.iter().cloned().collect(),
            allocation_count: n.allocations.len(),
            scheduler_jobs_enabled: n.scheduler_jobs_enabled,
            draining: n.draining,
            state: if !n.scheduler_jobs_enabled {
                "disabled"
            } else if n.draining {
                "draining"
            } else {
                "enabled"
            }
            .to_string(),
            last_heartbeat_ago_ms: self
                .seen
                .get(&n.id.0)
                .map(|t| t.elapsed().as_millis() as u64)
                .unwrap_or(0),
            tree: n.tree.map(|t| self.sched.trees()[t].name.clone()),
        })
    }

    fn heartbeat(&mut self, hb: Heartbeat) -> Result<HeartbeatReply, ApiError> {
        let now = self.now();
        let node = NodeId(hb.node_id.clone());
        if self.sched.node(&node).is_none() {
            return Err(ApiError::new(
                codes::NODE_NOT_REGISTERED,
                format!("node {:?} is not registered", hb.node_id),
            ));
        }
        self.node_credentials
            .check(&hb.node_id, hb.node_credential.as_deref())?;
        self.seen.insert(hb.node_id.clone(), Instant::now());
        // Output of watched jobs first: a job's end below leaves its copy complete.
        self.live.receive(&hb.node_id, &hb.output);
        for f in &hb.finished {
            self.live.ended(&hb.node_id, &f.job);
        }
        let mut finished = Vec::new();
        let mut reported: BTreeSet<&str> = hb.running.iter().map(String::as_str).collect();
        for f in &hb.finished {
            reported.insert(&f.job);
            // A node reports on its own jobs only.
            if self.job(&f.job).is_some_and(|j| j.node != hb.node_id) {
                tracing::warn!(
                    node = hb.node_id,
                    job = f.job,
                    "a heartbeat reported the end of another node's job; ignored"
                );
                continue;
            }
            self.record_exit(f);
            let Some(&allocation) = self.job_alloc.get(&f.job) else {
                continue;
            };
            let outcome = match f.outcome.as_str() {
                "completed" => JobOutcome::Completed,
                "failed" => JobOutcome::Failed,
                _ => JobOutcome::Aborted,
            };
            finished.push(FinishedAllocation {
                allocation: AllocationId(allocation),
                outcome,
            });
        }
        // Jobs the core has on this node that the node neither runs nor reports as ended are
        // lost (e.g. a start order whose reply never reached the agent): back to pending.
        let lost: Vec<(u64, String)> = self
            .sched
            .node(&node)
            .map(|n| n.allocations.iter().map(|a| a.0).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|a| self.alloc_job.get(&a).map(|j| (a, j.clone())))
            .filter(|(_, j)| !reported.contains(j.as_str()))
            .collect();
        for (allocation, job) in lost {
            tracing::warn!(
                node = hb.node_id,
                job,
                "job lost: the node neither runs it nor reported its end"
            );
            self.update_job(&job, |j| j.reason = Some("lost".into()));
            finished.push(FinishedAllocation {
                allocation: AllocationId(allocation),
                outcome: JobOutcome::Aborted,
            });
        }
        let started = Instant::now();
        let response = self
            .sched
            .process_heartbeat(now, &node, NodeHeartbeat { finished })
            .map_err(core_error);
        let took = started.elapsed();
        metrics::observe(&self.metrics.heartbeat_duration, took);
        let response = response?;
        tracing::debug!(
            node = hb.node_id,
            finished = hb.finished.len(),
            started = response.start.len(),
            took_us = took.as_micros() as u64,
            "heartbeat"
        );
        // Jobs the node runs that the core does not have there (e.g. ended while the node was
        // away): kill them.
        for job in &hb.running {
            let known = self
                .job_alloc
                .get(job)
                .and_then(|&a| self.sched.allocation(AllocationId(a)))
                .is_some_and(|x| x.node == node);
            if !known {
                tracing::info!(
                    node = hb.node_id,
                    job,
                    "unknown job on the node: killing it"
                );
                self.kill
                    .entry(hb.node_id.clone())
                    .or_default()
                    .insert(job.clone());
            }
        }
        // The events name the new jobs; the orders (this heartbeat's, and those of commands
        // since) are queued once they are folded. The view is published when the request
        // finishes.
        self.heartbeat_orders.push((
            node.clone(),
            fairsched_core::NodeOrders {
                interrupt: response.interrupt,
                abort: response.abort,
            },
        ));
        self.fold_changes();
        let mut reply = HeartbeatReply::default();
        for s in response.start {
            let task = self
                .sched
                .operation(&s.operation)
                .and_then(|op| op.spec.tasks.get(s.task))
                .cloned();
            let Some(task) = task else { continue };
            let Some(job) = self.alloc_job.get(&s.allocation.0).cloned() else {
                continue;
            };
            reply.start.push(JobStart {
                job,
                operation: s.operation.0.clone(),
                task: s.task,
                resources: s.resources,
                command: task.command.clone(),
                env: task.env.clone(),
            });
        }
        reply.interrupt = self.interrupts.remove(&hb.node_id).unwrap_or_default();
        reply.abort = self
            .kill
            .remove(&hb.node_id)
            .unwrap_or_default()
            .into_iter()
            .collect();
        reply.output = self.live.requests(&hb.node_id, Instant::now());
        Ok(reply)
    }

    /// A finished operation, once stored, leaves memory: its record, its jobs and their
    /// books. Reads find it in the store ([`Actor::history`]); the core forgets it at its next
    /// fair-share update (`Scheduler::forget_finished_operations`). So what requests,
    /// heartbeats and view builds walk does not grow with the operations ever run.
    fn retire(&mut self, id: &str) {
        let Some(record) = self.ops.remove(id) else {
            return;
        };
        for job in record.jobs.iter() {
            self.job_op.remove(&job.id);
            if let Some(a) = self.job_alloc.remove(&job.id) {
                self.alloc_job.remove(&a);
            }
        }
        if let Some(at) = self.order.iter().position(|o| o == id) {
            self.order.remove(at);
        }
    }

    /// Whether an operation of this id exists, in memory or in the store.
    fn operation_known(&self, id: &str) -> Result<bool, ApiError> {
        Ok(
            self.ops.contains_key(id)
                || self.store.operation_state(id).map_err(internal)?.is_some(),
        )
    }

    /// The error for a command on operation `id`, which is not in memory: it finished (the
    /// store has it; `finished` says what that means for the command) or does not exist.
    fn not_in_memory(&self, id: &str, finished: impl FnOnce(&str) -> String) -> ApiError {
        match self.store.operation_state(id) {
            Ok(Some(state)) => ApiError::new(
                codes::GENERIC,
                format!("operation {id:?} {}", finished(&state)),
            )
            .with_attribute("operation", id),
            Ok(None) => no_such_operation(id),
            Err(e) => internal(e),
        }
    }

    /// Answers a [`HistoryQuery`].
    fn history(&self, query: HistoryQuery) {
        match query {
            HistoryQuery::Operation(id, reply) => {
                let _ = reply.send(self.operation_view(&id));
            }
            HistoryQuery::List {
                filter,
                jobs,
                reply,
            } => {
                let _ = reply.send(self.operation_views(&filter, jobs));
            }
        }
    }

    /// Operation `id` with its jobs: from memory while unfinished, else from the store.
    fn operation_view(&self, id: &str) -> Result<OperationView, ApiError> {
        if let Some(r) = self.ops.get(id) {
            return Ok(r.to_view(true));
        }
        let (op, jobs) = self
            .store
            .operation(id)
            .map_err(internal)?
            .ok_or_else(|| no_such_operation(id))?;
        stored_view(&op, Some(&jobs))
    }

    /// The operations that pass `filter`, as the store lists them; the unfinished ones as
    /// memory has them.
    fn operation_views(
        &self,
        filter: &OperationFilter,
        jobs: bool,
    ) -> Result<Vec<OperationView>, ApiError> {
        if let Some(after) = filter.after.as_deref()
            && !after.is_empty()
            && !self.operation_known(after)?
        {
            return Err(ApiError::new(
                codes::NO_SUCH_OPERATION,
                format!("operation {after:?} (the cursor `after`) does not exist"),
            )
            .with_attribute("after", after));
        }
        let rows = self.store.operations(filter).map_err(internal)?;
        rows.iter()
            .map(|row| match self.ops.get(&row.id) {
                Some(r) => Ok(r.to_view(jobs)),
                None if jobs => {
                    let stored = self.store.operation(&row.id).map_err(internal)?;
                    let stored_jobs = stored.map(|(_, j)| j).unwrap_or_default();
                    stored_view(row, Some(&stored_jobs))
                }
                None => stored_view(row, None),
            })
            .collect()
    }

    /// Removes from the store, a small batch at a time, the operations (with their jobs and
    /// logs) that finished longer than `history_retention_ms` ago and the events older than
    /// that. Run by the timer: again at its next tick while a batch was full, else after a
    /// while (half the retention, at most a minute).
    fn prune_history(&mut self) {
        let retention = self.config.history_retention_ms;
        if retention == 0 || self.read_only.is_some() || Instant::now() < self.prune_at {
            return;
        }
        let before = unix_ms().saturating_sub(retention);
        let pause = Duration::from_millis((retention / 2).clamp(100, 60_000));
        match self.store.prune(before, PRUNE_OPERATIONS, PRUNE_EVENTS) {
            Ok(p) => {
                if p != Pruned::default() {
                    tracing::info!(
                        operations = p.operations,
                        jobs = p.jobs,
                        events = p.events,
                        "pruned what is older than the retention"
                    );
                }
                let full = p.operations >= PRUNE_OPERATIONS || p.events >= PRUNE_EVENTS;
                self.prune_at = Instant::now() + if full { Duration::ZERO } else { pause };
            }
            Err(e) => {
                tracing::warn!("cannot prune what is older than the retention: {e}");
                self.prune_at = Instant::now() + pause;
            }
        }
    }

    /// Keeps a finished job's exit code and output (also for a job that the scheduler had
    /// already given up, e.g. one that ended while its node was away).
    fn record_exit(&mut self, f: &FinishedJob) {
        let known = self.update_job(&f.job, |job| {
            if job.exit_code.is_none() {
                job.exit_code = f.exit_code;
            }
            if f.reason.is_some() {
                job.reason = f.reason.clone();
            }
        });
        if known.is_none() {
            // A job of an operation that left memory (it finished, e.g. aborted, before its
            // node reported the job's end): the stored job gets its end.
            self.batch.job_exits.push(JobExit {
                id: f.job.clone(),
                exit_code: f.exit_code,
                reason: f.reason.clone(),
                stdout_tail: f.stdout_tail.clone(),
                stderr_tail: f.stderr_tail.clone(),
            });
            return;
        }
        self.tails.insert(
            f.job.clone(),
            (f.stdout_tail.clone(), f.stderr_tail.clone()),
        );
        self.dirty_jobs.insert(f.job.clone());
    }

    fn job(&self, id: &str) -> Option<&JobView> {
        let (op, pos) = self.job_op.get(id)?;
        let jobs = &self.ops.get(op)?.jobs;
        jobs.get(jobs.find(*pos, id)?)
    }

    /// Changes job `id` with `f` (`None`: no such job).
    fn update_job<R>(&mut self, id: &str, f: impl FnOnce(&mut JobView) -> R) -> Option<R> {
        let (op, pos) = self.job_op.get(id)?;
        let jobs = &mut self.ops.get_mut(op)?.jobs;
        let at = jobs.find(*pos, id)?;
        jobs.update(at, f)
    }

    /// A new job's id: `<incarnation>.<allocation>` (the allocation counted on from the
    /// state before a reload: see [`Actor::restore`]).
    fn new_job_id(&self, allocation: u64) -> String {
        format!("{}.{}", self.incarnation, self.job_id_base + allocation)
    }

    /// Folds the core's events into the records, queues them for the store, publishes a view.
    /// (The published view waits for the commit: [`Actor::finish`].)
    fn after_change(&mut self) {
        self.fold_changes();
        self.build_view();
    }

    /// Folds the core's events into the records; the changed operations and jobs are queued
    /// for the store at the next commit ([`Actor::stage_changes`]).
    fn fold_changes(&mut self) {
        self.take_core_events();
    }

    /// Queues the operations and jobs changed since the last commit for the store, each once
    /// however often it changed (heartbeats committed together touch the same operations).
    ///
    /// A finished operation is stored with its final job counts and leaves memory (see
    /// [`Actor::retire`]).
    fn stage_changes(&mut self) {
        let mut finished = Vec::new();
        for id in std::mem::take(&mut self.touched) {
            // The stored operation leaves out its jobs (stored one by one).
            let Some(record) = self.ops.get_mut(&id) else {
                continue;
            };
            if is_finished(&record.view.state) {
                let counts = job_counts(&record.view, &record.jobs, 0);
                let view = record.view_mut();
                view.job_counts = counts;
                view.why = None;
                finished.push(id);
            }
            let view = Arc::clone(&record.view);
            self.dirty_op(&view);
        }
        self.save_jobs();
        for id in finished {
            self.retire(&id);
        }
    }

    /// Folds the core's new events into the records and logs them.
    fn take_core_events(&mut self) {
        let events = self.sched.take_events();
        let now_unix = unix_ms();
        let mut touched = std::mem::take(&mut self.touched);
        for e in &events {
            // Named before the event is applied (an ended job leaves the maps).
            let fields = self.event_fields(e);
            self.apply_event(e, now_unix, &mut touched);
            self.log_event(now_unix, fields);
        }
        self.touched = touched;
        self.queue_orders();
    }

    /// Queues the core's orders (a heartbeat's, and those of commands and fair-share
    /// updates) for their nodes' next heartbeat replies, by job id. The only source of what
    /// an agent must stop: the event log is not read for it.
    fn queue_orders(&mut self) {
        let mut orders = std::mem::take(&mut self.heartbeat_orders);
        orders.extend(self.sched.take_orders());
        for (node, o) in orders {
            for order in o.interrupt {
                let Some(job) = self.job_of(order.allocation.0) else {
                    continue;
                };
                self.interrupts
                    .entry(node.0.clone())
                    .or_default()
                    .push(JobInterrupt {
                        job,
                        signal: order.signal,
                        timeout_ms: order.timeout_ms,
                    });
            }
            for allocation in o.abort {
                if let Some(job) = self.job_of(allocation.0) {
                    self.kill.entry(node.0.clone()).or_default().insert(job);
                }
            }
        }
        self.ended_jobs.clear();
    }

    /// The job of an allocation, running or ended since the orders were last queued.
    fn job_of(&self, allocation: u64) -> Option<String> {
        self.alloc_job
            .get(&allocation)
            .or_else(|| self.ended_jobs.get(&allocation))
            .cloned()
    }

    fn apply_event(&mut self, e: &Event, now_unix: u64, touched: &mut BTreeSet<String>) {
        match &e.kind {
            EventKind::AllocationStarted {
                operation,
                allocation,
                node,
                stage,
                backfill,
            } => {
                self.metrics.placed(stage_name(*stage));
                if *backfill {
                    self.metrics.backfills.inc();
                }
                let task = self
                    .sched
                    .allocation(*allocation)
                    .map(|a| a.task)
                    .unwrap_or(0);
                let id = self.new_job_id(allocation.0);
                let job = JobView {
                    id: id.clone(),
                    task,
                    node: node.0.clone(),
                    state: "running".into(),
                    exit_code: None,
                    reason: None,
                    started_at: now_unix,
                    finished_at: None,
                };
                if let Some(record) = self.ops.get(&operation.0) {
                    let waited_ms = now_unix.saturating_sub(record.view.submitted_at);
                    self.metrics.job_wait.observe(waited_ms as f64 / 1000.0);
                }
                let pos = self.ops.get(&operation.0).map_or(0, |v| v.jobs.len());
                self.job_op.insert(id.clone(), (operation.0.clone(), pos));
                self.alloc_job.insert(allocation.0, id.clone());
                self.job_alloc.insert(id.clone(), allocation.0);
                self.dirty_jobs.insert(id);
                if let Some(record) = self.ops.get_mut(&operation.0) {
                    record.jobs.push(job);
                }
                touched.insert(operation.0.clone());
            }
            EventKind::AllocationFinished {
                operation,
                allocation,
                outcome,
                ..
            } => {
                self.end_job(allocation.0, outcome.name(), None, now_unix);
                touched.insert(operation.0.clone());
            }
            EventKind::AllocationPreempted {
                operation,
                allocation,
                node,
                reason,
                ..
            } => {
                let reason = reason.name();
                self.metrics.preempted(reason);
                tracing::info!(
                    operation = operation.0,
                    allocation = allocation.0,
                    node = node.0,
                    reason,
                    "allocation preempted"
                );
                self.end_job(allocation.0, "aborted", Some(reason), now_unix);
                touched.insert(operation.0.clone());
            }
            EventKind::AllocationInterrupted {
                operation,
                allocation,
                node,
                timeout_ms,
                reason,
                ..
            } => {
                let reason = reason.name();
                self.metrics.interrupted(reason);
                tracing::info!(
                    operation = operation.0,
                    allocation = allocation.0,
                    node = node.0,
                    reason,
                    timeout_ms,
                    "allocation interrupted"
                );
                if let Some(job) = self.alloc_job.get(&allocation.0).cloned() {
                    // The job keeps the reason however it ends (exits in time: completed).
                    if self
                        .update_job(&job, |j| j.reason = Some(reason.to_string()))
                        .is_some()
                    {
                        self.dirty_jobs.insert(job);
                    }
                }
            }
            EventKind::OperationState {
                operation,
                state,
                reason,
            } => {
                tracing::info!(
                    operation = operation.0,
                    state = state.name(),
                    reason = reason.as_deref(),
                    "operation state"
                );
                if let Some(record) = self.ops.get_mut(&operation.0) {
                    let view = record.view_mut();
                    view.state = state.name().to_string();
                    if reason.is_some() {
                        view.reason = reason.clone();
                    }
                    if state.is_finished() && view.finished_at.is_none() {
                        view.finished_at = Some(now_unix);
                        self.metrics.operation_finished(state.name());
                    }
                }
                touched.insert(operation.0.clone());
            }
            EventKind::Error { code, message } => {
                tracing::warn!(code, message, "core error event");
            }
            // In the event log and the counters (and the operation's `reserved_node` and
            // `why` in snapshots).
            EventKind::JobReserved { operation, .. } => {
                self.metrics.reservations.inc();
                touched.insert(operation.0.clone());
            }
            EventKind::GangAssembled { operation, .. } => {
                self.metrics.gangs_assembled.inc();
                touched.insert(operation.0.clone());
            }
            EventKind::ReservationReleased { operation, .. }
            | EventKind::GangReleased { operation, .. } => {
                touched.insert(operation.0.clone());
            }
        }
    }

    /// A running allocation ended: its job takes the state (and keeps a reason it has).
    fn end_job(&mut self, allocation: u64, state: &str, reason: Option<&str>, now_unix: u64) {
        let Some(id) = self.alloc_job.remove(&allocation) else {
            return;
        };
        self.ended_jobs.insert(allocation, id.clone());
        self.job_alloc.remove(&id);
        let ended = self.update_job(&id, |job| {
            if job.state != "running" {
                return false;
            }
            job.state = state.to_string();
            if let Some(r) = reason {
                job.reason = Some(r.to_string());
            }
            job.finished_at = Some(now_unix);
            true
        });
        if ended == Some(true) {
            self.metrics.job_finished(state);
            self.dirty_jobs.insert(id);
        }
    }

    /// Queues an operation (without its jobs: they are stored one by one) for the store.
    fn dirty_op(&mut self, view: &OperationView) {
        debug_assert!(view.jobs.is_empty(), "records keep their jobs apart");
        if let Ok(record) = serde_json::to_string(view) {
            self.batch.operations.retain(|o| o.id != view.id);
            self.batch.operations.push(StoredOperation {
                id: view.id.clone(),
                state: view.state.clone(),
                pool: view.pool.clone(),
                user: view.user.clone(),
                finished_at: is_finished(&view.state)
                    .then(|| view.finished_at.unwrap_or_else(unix_ms)),
                record,
            });
        }
    }

    /// Queues the changed jobs (with the output tails reported for them) for the store.
    fn save_jobs(&mut self) {
        for id in std::mem::take(&mut self.dirty_jobs) {
            let Some((op, pos)) = self.job_op.get(&id) else {
                continue;
            };
            let Some(job) = self
                .ops
                .get(op)
                .and_then(|v| v.jobs.get(v.jobs.find(*pos, &id)?))
            else {
                continue;
            };
            let tail = self.tails.remove(&id);
            if let Ok(record) = serde_json::to_string(job) {
                self.batch.jobs.retain(|j| j.id != id);
                self.batch.jobs.push(StoredJob {
                    id,
                    operation: op.clone(),
                    record,
                    stdout_tail: tail.as_ref().map(|t| t.0.clone()),
                    stderr_tail: tail.map(|t| t.1),
                });
            }
        }
    }

    /// Commits everything changed (see [`Actor::stage_changes`]), then sends the replies that
    /// waited for this commit (a failure is their reply too).
    ///
    /// A failed commit did not happen: the state is reloaded from the store as it was before
    /// (what the batch held is dropped from memory too, so no job it started is told to
    /// start and no reply says it happened), and the server is read-only until the store can
    /// write again ([`Actor::check_store`]).
    fn commit(&mut self) -> Result<(), ApiError> {
        let r = self.commit_batch();
        let r = match r {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = ApiError::new(
                    codes::READ_ONLY,
                    format!(
                        "the change was not made: the store cannot write ({}); the server is \
                         read-only until it can (free space on its disk, or make it writable)",
                        e.message
                    ),
                );
                tracing::error!(
                    "store commit failed: {}; its changes are undone and the server is \
                     read-only until the store can write",
                    e.message
                );
                self.read_only = Some(ReadOnly {
                    reason: e.message.clone(),
                    since_unix_ms: unix_ms(),
                });
                Err(e)
            }
        };
        for reply in std::mem::take(&mut self.deferred) {
            reply(r.as_ref().err());
        }
        if r.is_err() {
            self.reload();
        }
        r
    }

    /// Rebuilds the whole state from the store (as a restart does: see [`Actor::new`]),
    /// keeping the channels, the metrics and the read-only state. When the store cannot be
    /// read either, the actor stops ([`Actor::fatal`]): the server exits with the error, for
    /// its supervisor to restart it.
    fn reload(&mut self) {
        let store = std::mem::replace(&mut self.store, Box::new(Unavailable));
        let shared = Shared {
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

    fn commit_batch(&mut self) -> Result<(), ApiError> {
        self.stage_changes();
        let batch = std::mem::take(&mut self.batch);
        if batch.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let r = self
            .store
            .commit(&batch)
            .map_err(|e| ApiError::new(codes::INTERNAL, format!("not persisted: {e}")));
        metrics::observe(&self.metrics.store_commit_duration, started.elapsed());
        if r.is_ok() {
            for e in &batch.events {
                // No receiver (no stream open) is fine.
                let _ = self.events.send(Arc::new(event_view(e)));
            }
        }
        r
    }

    fn publish_view(&mut self) {
        let view = self.build_view();
        self.publish.send_replace(Arc::new(view));
    }

    /// The view of the state now; the operations' records get their job counts, why they
    /// wait and their pool.
    fn build_view(&mut self) -> View {
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
    fn tree_views(&self, default_tree: &str) -> Vec<TreeView> {
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

/// The pool trees as the store keeps them: every tree with its API changes, and the default
/// one. Errors name the tree.
fn stored_trees(stored: &[StoredTree]) -> anyhow::Result<PoolTrees> {
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

/// A stored event as the API shows it.
fn event_view(e: &StoredEvent) -> EventView {
    EventView {
        seq: e.seq,
        unix_ms: e.unix_ms,
        fields: serde_json::from_str(&e.record).unwrap_or_default(),
    }
}

fn stage_name(stage: Stage) -> &'static str {
    stage.name()
}

fn is_finished(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "aborted")
}

/// An operation's job counts: `pending` from the core, the others from its jobs.
fn job_counts(view: &OperationView, jobs: &JobList, pending: u32) -> JobCounts {
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

/// A stored operation as the API shows it (with `jobs`, its stored jobs).
fn stored_view(
    op: &StoredOperation,
    jobs: Option<&[StoredJob]>,
) -> Result<OperationView, ApiError> {
    let mut view: OperationView = serde_json::from_str(&op.record)
        .map_err(|e| internal(format!("operation {:?}: unreadable record: {e}", op.id)))?;
    if let Some(jobs) = jobs {
        view.jobs = jobs
            .iter()
            .filter_map(|j| serde_json::from_str::<JobView>(&j.record).ok())
            .collect();
    }
    Ok(view)
}

/// The error for an operation that does not exist.
fn no_such_operation(id: &str) -> ApiError {
    ApiError::new(
        codes::NO_SUCH_OPERATION,
        format!("operation {id:?} does not exist"),
    )
    .with_attribute("operation", id)
}

/// Pool `name`'s options from a request; an error names the pool and the option, in user
/// words (`pool "q": weight: invalid type: the string "heavy", expected a number`).
fn pool_config(name: &str, config: Map<String, Value>) -> Result<PoolConfig, ApiError> {
    serde_path_to_error::deserialize(Value::Object(config)).map_err(|e| {
        let path = e.path().to_string();
        let inner = fairsched_config::user_words(&e.inner().to_string());
        let message = if path == "." {
            format!("bad pool config: pool {name:?}: {inner}")
        } else {
            format!("bad pool config: pool {name:?}: {path}: {inner}")
        };
        ApiError::new(codes::BAD_REQUEST, message)
            .with_attribute("pool", name)
            .with_attribute("field", path)
    })
}

fn send_reply<T>(reply: Reply<T>, result: Result<T, ApiError>) {
    if let Err(e) = &result {
        tracing::debug!(code = e.code, message = %e.message, "request rejected");
    }
    let _ = reply.send(result);
}

/// The refusal of a change while the server is read-only.
fn read_only_error(r: &ReadOnly) -> ApiError {
    ApiError::new(
        codes::READ_ONLY,
        format!(
            "the server is read-only: its store cannot write ({}); nothing was changed; retry \
             once the store can write again (free space on its disk, or make it writable)",
            r.reason
        ),
    )
}

/// The store of an actor whose state is being reloaded: never used (the reload gives the
/// store back, or the actor stops).
struct Unavailable;

impl Store for Unavailable {
    fn load(&self) -> Result<fairsched_store::Loaded, fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn commit(&mut self, _: &Batch) -> Result<(), fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn job_logs(
        &self,
        _: &str,
    ) -> Result<Vec<(String, String, String)>, fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn events(&self, _: &EventFilter) -> Result<Vec<StoredEvent>, fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn check_writable(&mut self) -> Result<(), fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn operation(
        &self,
        _: &str,
    ) -> Result<Option<(StoredOperation, Vec<StoredJob>)>, fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn operation_state(&self, _: &str) -> Result<Option<String>, fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn operations(
        &self,
        _: &OperationFilter,
    ) -> Result<Vec<StoredOperation>, fairsched_store::StoreError> {
        Err(unavailable())
    }
    fn prune(&mut self, _: u64, _: usize, _: usize) -> Result<Pruned, fairsched_store::StoreError> {
        Err(unavailable())
    }
}

fn unavailable() -> fairsched_store::StoreError {
    fairsched_store::StoreError::Other("the store is being reopened".into())
}

#[cfg(test)]
mod history_tests {
    //! Finished operations leave memory and are read from the store; a restart loads only the
    //! unfinished ones; the retention prunes the store.

    use super::*;
    use fairsched_api::{FinishedJob, Heartbeat, RegisterNode};
    use tokio::sync::oneshot;

    const PERIOD_MS: u64 = 10;

    fn actor(dir: &std::path::Path, history_retention_ms: u64) -> Actor {
        let mut config = crate::ServerConfig {
            data_dir: dir.to_path_buf(),
            history_retention_ms,
            ..crate::ServerConfig::default()
        };
        config.scheduler.fair_share_update_period_ms = PERIOD_MS;
        let store = fairsched_store::SqliteStore::open(dir).unwrap();
        Actor::new(&config, Box::new(store)).unwrap().0
    }

    fn ask<T>(actor: &mut Actor, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, ApiError> {
        let (tx, mut rx) = oneshot::channel();
        actor.handle(make(tx));
        rx.try_recv().expect("answered at once")
    }

    /// Lets a fair-share update come due and runs the timer.
    fn tick(actor: &mut Actor) {
        std::thread::sleep(Duration::from_millis(PERIOD_MS + 5));
        actor.on_timer();
    }

    fn submit(actor: &mut Actor, id: &str) {
        let spec = json!({"id": id, "tasks": [{"job_count": 1, "resources": {"cpu": 1},
                          "command": ["true"]}]});
        ask(actor, |r| Command::Submit(spec, false, r)).unwrap();
    }

    fn heartbeat(actor: &mut Actor, finished: Vec<FinishedJob>) -> HeartbeatReply {
        let hb = Heartbeat {
            node_id: "n1".into(),
            node_credential: None,
            running: Vec::new(),
            finished,
            output: Vec::new(),
        };
        ask(actor, |r| Command::Heartbeat(hb, r)).unwrap()
    }

    fn completed(job: &str) -> FinishedJob {
        FinishedJob {
            job: job.into(),
            outcome: "completed".into(),
            exit_code: Some(0),
            signal: None,
            reason: None,
            stdout_tail: format!("out of {job}\n"),
            stderr_tail: String::new(),
        }
    }

    /// `done` runs to its end on n1, `live` keeps running there.
    fn setup(actor: &mut Actor) {
        let node = RegisterNode {
            node_id: "n1".into(),
            resources: fairsched_api::parse_resources("cpu=4,user_slots=4").unwrap(),
            tags: Vec::new(),
        };
        ask(actor, |r| Command::Register(node, r)).unwrap();
        submit(actor, "done");
        submit(actor, "live");
        tick(actor);
        let started = heartbeat(actor, Vec::new()).start;
        assert_eq!(started.len(), 2, "{started:?}");
        let done: Vec<FinishedJob> = started
            .iter()
            .filter(|s| s.operation == "done")
            .map(|s| completed(&s.job))
            .collect();
        heartbeat(actor, done);
    }

    fn ids(ops: &[OperationView]) -> Vec<&str> {
        ops.iter().map(|o| o.id.as_str()).collect()
    }

    #[test]
    fn a_finished_operation_leaves_memory_and_is_read_from_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = actor(dir.path(), 0);
        setup(&mut a);
        // Gone from what requests, heartbeats and views walk.
        assert!(!a.ops.contains_key("done"));
        assert_eq!(a.order, ["live"]);
        assert!(a.job_op.values().all(|(op, _)| op == "live"));
        let view = a.build_view();
        assert_eq!(
            view.operations
                .iter()
                .map(|o| o.view.id.as_str())
                .collect::<Vec<_>>(),
            ["live"]
        );
        // The core forgets it at the next fair-share update.
        tick(&mut a);
        assert!(a.sched.operation(&OperationId("done".into())).is_none());
        assert!(a.sched.operation(&OperationId("live".into())).is_some());
        // Read from the store: the record with its final counts, its job, its output.
        let done = a.operation_view("done").unwrap();
        assert_eq!(done.state, "completed");
        assert_eq!(done.job_counts.completed, 1, "{done:?}");
        assert_eq!(done.job_counts.total, 1);
        assert_eq!(done.jobs.len(), 1);
        assert_eq!(done.jobs[0].exit_code, Some(0));
        let logs = a.logs(LogsRequest::all("done")).unwrap().logs;
        assert_eq!(logs.len(), 1);
        assert_eq!(logs[0].node, "n1");
        assert!(logs[0].stdout.starts_with("out of "), "{logs:?}");
        let listed = a
            .operation_views(
                &OperationFilter {
                    limit: 10,
                    ..OperationFilter::default()
                },
                false,
            )
            .unwrap();
        assert_eq!(ids(&listed), ["done", "live"]);
        assert_eq!(listed[1].state, "running");
        // Commands on it say what it is.
        let e = ask(&mut a, |r| Command::Abort("done".into(), r)).unwrap_err();
        assert!(e.message.contains("is already completed"), "{e:?}");
        let spec = json!({"id": "done", "tasks": [{"job_count": 1, "command": ["true"]}]});
        let e = ask(&mut a, |r| Command::Submit(spec, false, r)).unwrap_err();
        assert!(e.message.contains("already exists"), "{e:?}");
        let e = a.operation_view("nope").unwrap_err();
        assert_eq!(e.code, codes::NO_SUCH_OPERATION);
    }

    #[test]
    fn a_restart_loads_only_unfinished_operations() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = actor(dir.path(), 0);
        setup(&mut a);
        drop(a);
        let b = actor(dir.path(), 0);
        assert_eq!(b.ops.keys().collect::<Vec<_>>(), ["live"]);
        assert!(b.sched.operation(&OperationId("done".into())).is_none());
        assert!(b.job_op.values().all(|(op, _)| op == "live"));
        assert_eq!(b.operation_view("done").unwrap().state, "completed");
    }

    #[test]
    fn the_retention_prunes_finished_operations_and_old_events() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = actor(dir.path(), 30);
        setup(&mut a);
        assert!(a.operation_view("done").is_ok());
        std::thread::sleep(Duration::from_millis(60));
        a.prune_at = Instant::now();
        a.prune_history();
        let e = a.operation_view("done").unwrap_err();
        assert_eq!(e.code, codes::NO_SUCH_OPERATION, "{e:?}");
        assert!(a.logs(LogsRequest::all("done")).is_err());
        // The unfinished operation stays; of the events, the newest.
        assert_eq!(a.operation_view("live").unwrap().state, "running");
        let events = a
            .read_events(&EventQuery {
                limit: Some(100),
                ..EventQuery::default()
            })
            .unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        // Without a retention nothing goes.
        let dir = tempfile::tempdir().unwrap();
        let mut a = actor(dir.path(), 0);
        setup(&mut a);
        a.prune_at = Instant::now();
        a.prune_history();
        assert!(a.operation_view("done").is_ok());
    }
}
