//! The one task that owns the scheduling core. Handlers send it [`Command`]s with a oneshot for
//! the reply; after every change it commits what changed to the store (before replying) and
//! publishes a new [`View`] that GET handlers read without reaching the actor.

mod books;
mod events;
pub use events::SERVER_EVENT_NAMES;
#[cfg(test)]
mod events_tests;
mod fair_share;
mod history;
#[cfg(test)]
mod history_tests;
mod nodes;
mod operations;
mod pools;
mod publish;
#[cfg(test)]
mod publish_tests;
mod recovery;
#[cfg(test)]
mod recovery_tests;
mod staged;
mod writer;
#[cfg(test)]
mod writer_tests;

use crate::caller::Caller;
use crate::command::{Command, Reply, Request};
use crate::metrics::{self, ActorMetrics};
use crate::view::{OperationRecord, OperationRecords, ReadOnly, View};
use events::event_view;
use fairsched_api::{
    ApiError, EventView, JobInterrupt, JobState, OperationState, RegisterReply, codes,
};
use fairsched_core::{CoreError, NodeId, Scheduler};
use fairsched_store::{Store, StoreError, StoreRead};
use nodes::NodeRecord;
pub use nodes::no_such_node;
use publish::job_counts;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, mpsc, watch};
use writer::Done;

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn core_error(e: CoreError) -> ApiError {
    ApiError::new(e.code().unwrap_or(codes::GENERIC), e.message())
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
    writer: writer::Writer,
    done_rx: Option<mpsc::UnboundedReceiver<Done>>,
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
    store: writer::SharedStore,
    /// Reads the store on a connection of its own.
    reader: Box<dyn StoreRead>,
    incarnation: u64,
    /// The unfinished operations (shared with the published views).
    ops: OperationRecords,
    /// Operations and nodes whose records may show what changed since they were last
    /// refreshed (see `publish`).
    stale_ops: BTreeSet<String>,
    stale_nodes: BTreeSet<String>,
    /// Nodes lost (or left) since this server started, as `node list` shows them (state
    /// `lost`) until they register again; at most [`LOST_NODES_KEPT`].
    lost_nodes: BTreeMap<String, crate::view::NodeEntry>,
    /// Every registered node as the view shows it (shared with the published views).
    nodes: imbl::OrdMap<String, crate::view::NodeEntry>,
    /// A tree's pools or configuration changed: the next view takes a new snapshot whatever
    /// it costs (callers read the pools they made).
    trees_changed: bool,
    /// A reader asked for a fresh snapshot (`Command::Snapshot`): the next view takes one.
    snapshot_wanted: bool,
    /// [`SMALL_CLUSTER`] (tests lower it).
    small_cluster: usize,
    /// Job id → operation id (every job, also those of earlier incarnations).
    /// ... and the job's position among its operation's jobs (a hint, checked at every use:
    /// finding a job by id among an operation's jobs would cost O(jobs)).
    job_op: HashMap<String, (String, usize)>,
    /// The core's allocation → its job id, and back (running jobs only).
    alloc_job: HashMap<u64, String>,
    job_alloc: HashMap<String, u64>,
    /// Jobs changed since the last commit.
    dirty_jobs: BTreeSet<String>,
    /// Node → last heartbeat.
    seen: BTreeMap<String, Instant>,
    /// The agent of each node's last accepted registration (`RegisterNode::agent_id`).
    node_agents: BTreeMap<String, String>,
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
    batch: staged::Staged,
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
    /// Replies whose changes wait for the next batch's commit (see [`Actor::finish`]).
    deferred: Vec<DeferredReply>,
    /// Operations that finished in the batch being built or committed (see `stage_changes`).
    retiring: Vec<String>,
    /// Commits batches off the actor (see `writer`).
    writer: writer::Writer,
    /// The writer's reports (taken by [`Actor::run`]).
    done_rx: Option<mpsc::UnboundedReceiver<Done>>,
    /// The last view built (published once its batch is durable).
    view: Arc<View>,
    /// Each node's credential from its last registration (memory only).
    node_credentials: crate::auth::NodeCredentials,
    /// When the timer next prunes the store of what is older than the retention.
    prune_at: Instant,
    /// The fair-share update computed in the background (see `fair_share`).
    updates: fair_share::Background,
    /// When the last snapshot was taken, and how long building its view took (all its
    /// slices, when taken in slices).
    snapshot_taken_at: Instant,
    snapshot_cost: Duration,
    /// A snapshot being taken in slices between requests, and the actor's time on it so far
    /// (see [`Actor::snapshot_slice`]).
    slicing: Option<(fairsched_core::SnapshotInProgress, Duration)>,
    /// A snapshot taken in slices, for the next view.
    sliced: Option<fairsched_core::Snapshot>,
    /// Until when waiting requests go before the next slice (see [`Actor::slice_due`]).
    slices_rest_until: Instant,
}

/// A reply sent once the commit it waits for ends: with the commit's error if it failed.
type DeferredReply = Box<dyn FnOnce(Option<&ApiError>) + Send>;

/// Snapshots take at most 1 / this of the actor's time ...
const VIEW_COST_SHARE: u32 = 10;

/// ... unless they are this cheap (a small cluster): then every view takes one.
const CHEAP_VIEW: Duration = Duration::from_millis(1);

/// After a slice, requests have this many times its time before the next slice goes first.
const SLICE_REST: u32 = 3;

/// A snapshot of a large cluster is taken this many operations at a time, between requests
/// (a slice takes a few milliseconds: heartbeats never wait for a whole snapshot).
const SNAPSHOT_SLICE: usize = 500;

/// Up to this many operations and nodes, a user's command always takes a new snapshot.
const SMALL_CLUSTER: usize = 1000;

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

/// The most lost nodes `node list` shows.
const LOST_NODES_KEPT: usize = 1000;

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
        let store: writer::SharedStore = Arc::new(std::sync::Mutex::new(store));
        let mut actor = Actor::restore(config, store, None, 0)?;
        actor
            .commit_now()
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        actor.publish_view();
        let view = actor.publish.subscribe();
        Ok((actor, view))
    }

    /// The event broadcast: subscribe for events as they are committed.
    pub fn events(&self) -> broadcast::Sender<Arc<EventView>> {
        self.events.clone()
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
    ///
    /// After each request, tick, computed update or finished commit, what changed is handed
    /// to the writer as one batch if it is idle ([`Actor::flush`]); else it waits for the
    /// commit in progress, gathering what the next requests change.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Request>) -> anyhow::Result<()> {
        let mut timer = tokio::time::interval(timer_period(&self.sched.config));
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (update_tx, mut update_rx) = mpsc::unbounded_channel();
        let mut done_rx = self
            .done_rx
            .take()
            .ok_or_else(|| anyhow::anyhow!("the actor runs once"))?;
        loop {
            // (Again after a reload, which builds a new actor.)
            if self.updates.tx.is_none() {
                self.updates.tx = Some(update_tx.clone());
            }
            // In this order: a slice whose turn it is (see `Actor::slice_due`), then the rare
            // events, then requests, then a slice while nothing else waits. Requests are not
            // held up behind slices back to back (with the branches picked at random, half
            // the turns went to slices: a heartbeat queued behind ten of them).
            let slicing = self.slicing.is_some() || self.updates.preparing.is_some();
            tokio::select! {
                biased;
                _ = std::future::ready(()), if slicing && self.slice_due() => self.slice(),
                Some(computed) = update_rx.recv() => self.on_fair_share_computed(computed),
                done = done_rx.recv() => match done {
                    Some(done) => self.on_done(done),
                    None => anyhow::bail!("the store's writer stopped"),
                },
                _ = timer.tick() => self.on_timer(),
                req = rx.recv() => match req {
                    Some(req) => self.authorize_and_handle(req),
                    None => break,
                },
                _ = std::future::ready(()), if slicing => self.slice(),
            }
            if self.read_only.is_none() {
                self.start_update_for_arrivals();
            }
            self.flush(false);
            if let Some(e) = self.fatal.take() {
                anyhow::bail!("{e}");
            }
        }
        // What was answered is durable; what waits for a commit is committed (and answered)
        // before the actor ends.
        while self.writer.busy {
            match done_rx.recv().await {
                Some(done) => self.on_done(done),
                None => break,
            }
            self.flush(false);
        }
        Ok(())
    }

    /// Removes a lost (or left) node (listed as `lost` until it registers again): its jobs still there go back to pending, and nothing
    /// is kept to tell it.
    fn forget_node(&mut self, now: fairsched_core::Millis, node: &str) {
        if let Some(mut entry) = self.node_entry(node) {
            let view = std::sync::Arc::make_mut(&mut entry.view);
            view.state = Some(fairsched_api::NodeState::Lost);
            view.usage = fairsched_resources::Resources::default();
            view.allocation_count = 0;
            if self.lost_nodes.len() >= LOST_NODES_KEPT {
                // The one heard from longest ago makes room.
                let oldest = self
                    .lost_nodes
                    .iter()
                    .min_by_key(|(_, e)| e.last_heartbeat)
                    .map(|(id, _)| id.clone());
                if let Some(id) = oldest {
                    self.lost_nodes.remove(&id);
                    self.stale_nodes.insert(id);
                }
            }
            self.lost_nodes.insert(node.to_string(), entry);
        }
        self.seen.remove(node);
        self.stale_nodes.insert(node.to_string());
        let _ = self.sched.remove_node(now, &NodeId(node.to_string()));
        self.kill.remove(node);
        self.interrupts.remove(node);
    }

    fn on_timer(&mut self) {
        if self.read_only.is_some() {
            self.check_store();
            return;
        }
        let now = self.now();
        self.start_fair_share_update(now);
        self.sched.check_hung_operations(now);
        let lost: Vec<String> = self
            .seen
            .iter()
            .filter(|(_, t)| t.elapsed() > self.node_timeout)
            .map(|(n, _)| n.clone())
            .collect();
        for node in lost {
            tracing::warn!(node, "node lost (no heartbeat); its jobs are rescheduled");
            self.server_event(json!({"event": "node_lost", "node": node}));
            self.forget_node(now, &node);
        }
        self.fold_changes();
        self.flush(true);
        self.prune_history();
    }

    /// While read-only: whether the store can write again (a test write). If it can, the
    /// changes the reload made (see [`Actor::restore`]) are committed and the server takes
    /// changes and heartbeats again; every node gets a full `node_timeout_ms` to heartbeat
    /// (their heartbeats were refused meanwhile).
    fn check_store(&mut self) {
        if self.writer.busy {
            return;
        }
        let checked = writer::lock(&self.store).check_writable();
        if let Err(e) = checked {
            if matches!(e, StoreError::NotLeader { .. }) {
                self.lose_leadership(&e.to_string());
            }
            tracing::debug!("the store still cannot write: {e}");
            return;
        }
        match self.commit_now() {
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
            Err(e) if e.code == codes::NOT_LEADER => self.lose_leadership(&e.message),
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
            Command::Submit(submission, wait_for_nodes, reply) => {
                let r = if wait_for_nodes {
                    Ok(())
                } else {
                    self.check_fits(&submission.spec)
                };
                let r = r.and_then(|()| self.submit(*submission));
                if r.is_ok() {
                    self.on_arrival();
                }
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
                self.trees_changed = true;
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
                self.trees_changed = true;
                self.finish(reply, r);
            }
            Command::RemovePool { tree, name, reply } => {
                let r = self.remove_pool(tree.as_deref(), &name);
                self.trees_changed = true;
                self.finish(reply, r);
            }
            Command::ApplyTree {
                tree,
                config,
                dry_run,
                reply,
            } => {
                let r = self.apply_tree(tree.as_deref(), config, dry_run);
                self.trees_changed = true;
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
                self.finish(reply, r);
            }
            Command::Heartbeat(hb, reply) => {
                let r = self.heartbeat(hb);
                self.finish(reply, r);
            }
            Command::Events(q, reply) => {
                let _ = reply.send(self.read_events(&q));
            }
            Command::History(q) => self.history(q),
            Command::Snapshot(reply) => {
                // While read-only nothing is published (the state may hold what the store
                // refused): the reader keeps the last view.
                if self.read_only.is_some() {
                    let _ = reply.send(Ok(()));
                    return;
                }
                // A view built since the reader looked may be fresh already.
                self.snapshot_wanted |= self.view.refresh_on_read;
                self.finish(reply, Ok(()));
            }
        }
    }

    /// Folds what the command changed into the records; the reply waits for the commit of
    /// the batch that holds the change (a commit failure is the reply, and the change is
    /// undone: see [`Actor::on_done`]). Readers see a change only once it is committed.
    fn finish<T: Send + 'static>(&mut self, reply: Reply<T>, result: Result<T, ApiError>) {
        self.fold_changes();
        self.deferred
            .push(Box::new(move |failed: Option<&ApiError>| {
                let result = match failed {
                    Some(e) => Err(e.clone()),
                    None => result,
                };
                send_reply(reply, result);
            }));
    }

    /// Folds the core's events into the records (the view and the store get them with the
    /// commit: [`Actor::finish`]).
    fn after_change(&mut self) {
        self.fold_changes();
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
        // The stored records show their job counts as they are.
        self.refresh_records();
        let mut finished = Vec::new();
        for id in std::mem::take(&mut self.touched) {
            // The stored operation leaves out its jobs (stored one by one).
            let Some(record) = self.ops.get_mut(&id) else {
                continue;
            };
            if record.view.state.is_finished() {
                record.counts = job_counts(&record.view, &record.jobs, 0);
                record.view_mut().why = None;
                finished.push(id);
            }
            if record.view.job_counts != record.counts {
                record.view_mut().job_counts = record.counts;
            }
            let view = Arc::clone(&record.view);
            self.dirty_op(&view);
        }
        self.save_jobs();
        // They leave memory once the batch is durable (reads find them in the store then).
        self.retiring.extend(finished);
    }

    /// Hands what changed since the last batch (see [`Actor::stage_changes`]) to the writer
    /// with the replies that wait for it and the view to publish once it is durable, unless a
    /// batch is being committed (then the writer's [`Done`] flushes again). With nothing to
    /// commit, the view (if anything it shows changed, or `force_view`) is published and the
    /// replies sent at once. While read-only nothing is committed (the reload's changes wait
    /// for [`Actor::check_store`]).
    fn flush(&mut self, force_view: bool) {
        if self.writer.busy || self.read_only.is_some() {
            return;
        }
        self.fold_changes();
        let records_changed = !self.stale_ops.is_empty() || !self.stale_nodes.is_empty();
        self.stage_changes();
        let replies = std::mem::take(&mut self.deferred);
        if self.batch.is_empty() {
            if records_changed || force_view || !replies.is_empty() {
                let view = self.next_view(records_changed || force_view);
                self.publish.send_replace(view);
            }
            for reply in replies {
                reply(None);
            }
            for id in std::mem::take(&mut self.retiring) {
                self.retire(&id);
            }
            return;
        }
        let view = self.next_view(true);
        self.writer.send(writer::Unit {
            batch: self.batch.take(),
            replies,
            view: Some(view),
            retire: std::mem::take(&mut self.retiring),
        });
    }

    /// The writer finished a batch. Committed: the operations that finished in it leave
    /// memory. Failed: the change did not happen. Its replies said so; the state is reloaded
    /// from the store as it was before (what the batch held, and what the requests since
    /// changed on top of it, is dropped from memory too, and their replies get the error, so no
    /// job it started is told to start and no reply says it happened), and the server is
    /// read-only until the store can write again ([`Actor::check_store`]).
    fn on_done(&mut self, done: Done) {
        self.writer.busy = false;
        match done {
            Done::Panicked(payload) => std::panic::resume_unwind(payload),
            Done::Committed {
                result: Ok(()),
                retire,
            } => {
                // Their jobs changed since (a late end reported with its output) go into the
                // next batch before their books leave.
                self.save_jobs();
                for id in retire {
                    self.retire(&id);
                }
            }
            Done::Committed { result: Err(e), .. } if e.code == codes::NOT_LEADER => {
                // Another server leads: this one stops (never read-only: it must not serve).
                for reply in std::mem::take(&mut self.deferred) {
                    reply(Some(&e));
                }
                self.lose_leadership(&e.message);
            }
            Done::Committed { result: Err(e), .. } => {
                tracing::error!(
                    "store commit failed: {}; its changes are undone and the server is \
                     read-only until the store can write",
                    e.message
                );
                // As the writer published it.
                let published = self.publish.borrow().read_only.clone();
                self.read_only = Some(published.unwrap_or_else(|| ReadOnly {
                    reason: e.message.clone(),
                    since_unix_ms: unix_ms(),
                }));
                for reply in std::mem::take(&mut self.deferred) {
                    reply(Some(&e));
                }
                self.reload();
            }
        }
    }

    /// Commits what changed here and now (at start, and when the store can write again: the
    /// writer is idle then) and sends the replies that waited.
    fn commit_now(&mut self) -> Result<(), ApiError> {
        debug_assert!(!self.writer.busy);
        self.fold_changes();
        self.stage_changes();
        let batch = self.batch.take();
        let r = if batch.is_empty() {
            Ok(())
        } else {
            let started = Instant::now();
            let r = writer::lock(&self.store)
                .commit(&batch)
                .map_err(|e| match e {
                    StoreError::NotLeader { .. } => writer::not_leader(&e),
                    e => writer::commit_failed(&e.to_string()),
                });
            metrics::observe(&self.metrics.store_commit_duration, started.elapsed());
            r
        };
        if r.is_ok() {
            for e in &batch.events {
                let _ = self.events.send(Arc::new(event_view(e)));
            }
            for id in std::mem::take(&mut self.retiring) {
                self.retire(&id);
            }
        }
        for reply in std::mem::take(&mut self.deferred) {
            reply(r.as_ref().err());
        }
        r
    }

    /// The store refused a write because another server was elected leader: the actor stops
    /// (its run ends with an error starting with [`crate::LOST_LEADERSHIP`]), so that the
    /// server stops serving and exits.
    pub(super) fn lose_leadership(&mut self, why: &str) {
        if self.fatal.is_none() {
            self.fatal = Some(format!("{}: {why}", crate::LOST_LEADERSHIP));
        }
    }

    /// Runs what waits (flushes and the commits of the writer) until nothing does, as the
    /// loop of [`Actor::run`] would: tests drive the actor by hand.
    #[cfg(test)]
    pub(super) fn settle(&mut self) {
        loop {
            self.flush(false);
            if !self.writer.busy {
                return;
            }
            let done = self.done_rx.as_mut().expect("not running").blocking_recv();
            self.on_done(done.expect("the writer runs"));
        }
    }

    /// The store's reader (it reads what is committed, while the writer commits).
    fn store(&self) -> &dyn StoreRead {
        self.reader.as_ref()
    }

    /// A heartbeat (or registration) of `node` now.
    fn saw(&mut self, node: &str) {
        self.seen.insert(node.to_string(), Instant::now());
        self.stale_nodes.insert(node.to_string());
    }

    /// Record `r` as the API shows it (why its jobs wait as the last snapshot says).
    fn shown(&self, r: &OperationRecord, jobs: bool) -> fairsched_api::OperationView {
        r.to_view(jobs, &self.view.snapshot)
    }

    /// Publishes a whole view, its snapshot taken now (nothing waits for a commit: at start,
    /// after a reload, when the store can write again).
    fn publish_view(&mut self) {
        let view = self.take_snapshot();
        self.publish.send_replace(view);
    }

    /// A whole view, its snapshot taken now (at once: one taken in slices is dropped).
    fn take_snapshot(&mut self) -> Arc<View> {
        let building = Instant::now();
        self.slicing = None;
        self.sliced = None;
        let snapshot = self.sched.snapshot(self.now());
        self.view = Arc::new(self.build_view(snapshot));
        self.trees_changed = false;
        self.snapshot_taken_at = Instant::now();
        self.snapshot_cost = self.snapshot_taken_at - building;
        self.metrics.paused("snapshot", self.snapshot_cost);
        self.view.clone()
    }

    /// Whether a slice of work taken in slices may go before waiting requests: once the
    /// requests have had three times the last slice's time (slices then take at most a
    /// quarter of a busy actor; an idle one runs them back to back).
    fn slice_due(&self) -> bool {
        Instant::now() >= self.slices_rest_until
    }

    /// One slice of what is taken in slices: the fair-share update being prepared first (the
    /// shares must move on), else the snapshot.
    fn slice(&mut self) {
        let started = Instant::now();
        if self.updates.preparing.is_some() {
            self.prepare_slice();
        } else {
            self.snapshot_slice();
        }
        let took = started.elapsed();
        self.slices_rest_until = Instant::now() + took * SLICE_REST;
    }

    /// One slice of the snapshot being taken (run between requests); the last one leaves
    /// the snapshot for the next view and publishes it when nothing waits for a commit.
    fn snapshot_slice(&mut self) {
        let Some((mut snapshot, mut cost)) = self.slicing.take() else {
            return;
        };
        let started = Instant::now();
        let done = self.sched.continue_snapshot(&mut snapshot, SNAPSHOT_SLICE);
        if !done {
            let slice = started.elapsed();
            self.metrics.paused("snapshot", slice);
            self.slicing = Some((snapshot, cost + slice));
            return;
        }
        self.sliced = Some(self.sched.finish_snapshot(snapshot));
        let slice = started.elapsed();
        self.metrics.paused("snapshot", slice);
        cost += slice;
        self.snapshot_cost = cost;
        self.snapshot_taken_at = Instant::now();
        self.flush(true);
    }

    /// The view of the records as they are now (what changed since the last view: callers
    /// read the operations and nodes they changed) and a snapshot that costs the actor at
    /// most a tenth of its time.
    ///
    /// - A change of a tree's pools or configuration takes a new one at once, and so does a
    ///   reader's request ([`Command::Snapshot`]).
    /// - In a small cluster (a snapshot costs less than [`CHEAP_VIEW`], or at most
    ///   [`SMALL_CLUSTER`] operations and nodes) none is taken until a reader asks: the view
    ///   says so ([`View::refresh_on_read`]), and handlers that read the snapshot ask first,
    ///   so that a caller reads what it did in the orchid too, however busy the machine.
    /// - Otherwise one is taken in slices of [`SNAPSHOT_SLICE`] operations between requests
    ///   ([`Actor::snapshot_slice`]), started once the last one is ten times its cost old; the
    ///   views meanwhile show the previous one. The snapshot (fair shares, usages, why jobs
    ///   wait) then lags by at most about ten times its cost and the time its slices take.
    ///
    /// `changed`: anything may have changed since the last view (not only replies to send).
    fn next_view(&mut self, changed: bool) -> Arc<View> {
        if self.trees_changed || std::mem::take(&mut self.snapshot_wanted) {
            return self.take_snapshot();
        }
        if let Some(snapshot) = self.sliced.take() {
            self.view = Arc::new(self.build_view(snapshot));
            return self.view.clone();
        }
        let last = self.view.clone();
        if self.snapshot_cost < CHEAP_VIEW
            || self.ops.len() + self.nodes.len() <= self.small_cluster
        {
            let stale = changed || last.refresh_on_read;
            self.view = Arc::new(self.build_records_view(&last, stale));
            return self.view.clone();
        }
        if self.slicing.is_none()
            && self.snapshot_taken_at.elapsed() >= self.snapshot_cost * VIEW_COST_SHARE
        {
            let snapshot = self.sched.begin_snapshot(self.now());
            self.slicing = Some((snapshot, Duration::ZERO));
        }
        self.view = Arc::new(self.build_records_view(&last, false));
        self.view.clone()
    }
}

/// The period of the actor's timer: the fair-share update's, but at least 10 ms and at most
/// [`MAX_TICK`], since the same ticks find lost nodes and hung operations (an update starts
/// only once it is due: [`Actor::start_fair_share_update`]).
fn timer_period(config: &fairsched_core::SchedulerConfig) -> Duration {
    Duration::from_millis(config.fair_share_update_period_ms.max(10)).min(MAX_TICK)
}

/// The longest time between two ticks of the actor's timer.
const MAX_TICK: Duration = Duration::from_secs(1);

/// The API's name for a state of the core's.
fn operation_state(state: fairsched_core::OperationState) -> OperationState {
    use fairsched_core::OperationState as Core;
    match state {
        Core::Pending => OperationState::Pending,
        Core::Running => OperationState::Running,
        Core::Completed => OperationState::Completed,
        Core::Failed => OperationState::Failed,
        Core::Aborted => OperationState::Aborted,
    }
}

/// How a job ended, as the API names it.
fn job_state(outcome: fairsched_core::JobOutcome) -> JobState {
    use fairsched_core::JobOutcome as Core;
    match outcome {
        Core::Completed => JobState::Completed,
        Core::Failed => JobState::Failed,
        Core::Aborted => JobState::Aborted,
    }
}

/// The error for an operation that does not exist.
fn no_such_operation(id: &str) -> ApiError {
    ApiError::new(
        codes::NO_SUCH_OPERATION,
        format!("operation {id:?} does not exist"),
    )
    .with_attribute("operation", id)
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
