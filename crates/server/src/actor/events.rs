//! The event log: the core's events folded into operation and job records (with job ids and
//! exit codes), the server's own events, numbering, and reads of the log.

use super::{
    Actor, EVENTS_DEFAULT_LIMIT, EVENTS_MAX_LIMIT, internal, job_state, operation_state, unix_ms,
};
use fairsched_api::{ApiError, EventQuery, EventView, JobState, JobView};
use fairsched_core::{Event, EventKind, Stage};
use fairsched_store::{EventFilter, StoredEvent};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// A stored event as the API shows it.
pub(super) fn event_view(e: &StoredEvent) -> EventView {
    EventView {
        seq: e.seq,
        unix_ms: e.unix_ms,
        fields: serde_json::from_str(&e.record).unwrap_or_default(),
    }
}

/// Appends `"key":value,` (the value as JSON).
fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, key: &str, value: &T) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    // Writing JSON into a vector cannot fail (these values serialize).
    let _ = serde_json::to_writer(&mut *out, value);
    out.push(b',');
}

pub(super) fn stage_name(stage: Stage) -> &'static str {
    stage.name()
}

/// The names of the events the server logs itself, besides the core's
/// ([`fairsched_core::EventKind::NAMES`]).
pub const SERVER_EVENT_NAMES: [&str; 6] = [
    "operation_updated",
    "node_registered",
    "node_changed",
    "node_lost",
    "job_adopted",
    "tree_applied",
];

impl Actor {
    /// Logs an event of the server's own (not the core's) in the event log.
    pub(super) fn server_event(&mut self, record: Value) {
        // The core's events so far come first.
        self.take_core_events();
        let fields = self.server_fields(record);
        self.log_event(unix_ms(), fields);
    }

    /// A server event's fields: `t_ms`, then the record's.
    pub(super) fn server_fields(&self, record: Value) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("t_ms".into(), json!(self.now()));
        if let Value::Object(m) = record {
            fields.extend(m);
        }
        fields
    }

    /// Numbers an event and queues it for the store (streams get it once it is committed).
    pub(super) fn log_event(&mut self, unix_ms: u64, fields: Map<String, Value>) {
        let text = |k: &str| fields.get(k).and_then(Value::as_str).map(str::to_string);
        let event = StoredEvent {
            seq: 0,
            unix_ms,
            kind: text("event").unwrap_or_default(),
            operation: text("operation"),
            node: text("node"),
            job: text("job"),
            record: Value::Object(fields).to_string(),
        };
        self.log_stored(event);
    }

    /// [`Actor::log_event`] of an event already written as stored (its `seq` is set here).
    fn log_stored(&mut self, mut event: StoredEvent) {
        // Every kind is one the event filter knows (`GET /events?kind=` refuses others).
        debug_assert!(
            fairsched_core::EventKind::NAMES.contains(&event.kind.as_str())
                || SERVER_EVENT_NAMES.contains(&event.kind.as_str()),
            "event kind {:?} is in EventKind::NAMES or SERVER_EVENT_NAMES",
            event.kind
        );
        event.seq = self.next_event_seq;
        self.next_event_seq += 1;
        self.batch.event(event);
    }

    /// A job's start or end as stored, written straight: byte for byte what
    /// [`Actor::event_fields`] and [`Actor::log_event`] make of it (keys in order), without
    /// their map of JSON values (two of these per job were 4 % of the server's CPU per
    /// heartbeat). `None` for the other events.
    pub(super) fn job_event(&self, e: &Event, unix_ms: u64) -> Option<StoredEvent> {
        // Every field named (no `..`): a field the core adds to these events must be added
        // here too, or the record would leave it out.
        let (operation, allocation, node, backfill, last) = match &e.kind {
            EventKind::AllocationStarted {
                operation,
                allocation,
                node,
                stage,
                backfill,
            } => (
                operation,
                allocation,
                node,
                *backfill,
                ("stage", serde_json::to_value(stage)),
            ),
            EventKind::AllocationFinished {
                operation,
                allocation,
                node,
                outcome,
            } => (
                operation,
                allocation,
                node,
                false,
                ("outcome", serde_json::to_value(outcome)),
            ),
            _ => return None,
        };
        let kind = e.kind.name();
        let job = self
            .alloc_job
            .get(&allocation.0)
            .cloned()
            .unwrap_or_else(|| self.new_job_id(allocation.0));
        let mut r = Vec::with_capacity(160);
        r.push(b'{');
        if backfill {
            put(&mut r, "backfill", &true);
        }
        put(&mut r, "event", kind);
        if matches!(e.kind, EventKind::AllocationFinished { .. })
            && let Some(code) = self.job(&job).and_then(|j| j.exit_code)
        {
            put(&mut r, "exit_code", &code);
        }
        put(&mut r, "job", &job);
        put(&mut r, "node", &node.0);
        put(&mut r, "operation", &operation.0);
        if let (key, Ok(value)) = last {
            put(&mut r, key, &value);
        }
        put(&mut r, "t_ms", &e.t_ms);
        // The last comma closes the object.
        r.pop();
        r.push(b'}');
        Some(StoredEvent {
            seq: 0,
            unix_ms,
            kind: kind.to_string(),
            operation: Some(operation.0.clone()),
            node: Some(node.0.clone()),
            job: Some(job),
            record: String::from_utf8(r).unwrap_or_default(),
        })
    }

    /// A core event as the log keeps it: jobs named by their job id (not the core's allocation
    /// number), and a finished job's exit code.
    pub(super) fn event_fields(&self, e: &Event) -> Map<String, Value> {
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
            if matches!(e.kind, fairsched_core::EventKind::AllocationFinished { .. })
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

    pub(super) fn read_events(&self, q: &EventQuery) -> Result<Vec<EventView>, ApiError> {
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
            .store()
            .events(&filter)
            .map_err(internal)?
            .iter()
            .map(event_view)
            .collect())
    }

    /// Folds the core's new events into the records and logs them.
    pub(super) fn take_core_events(&mut self) {
        let events = self.sched.take_events();
        let now_unix = unix_ms();
        // Operations whose stored record changes, and those whose jobs alone changed (their
        // records show new counts; the store keeps the jobs, and an operation's counts are
        // stored with its end: recovery counts them from the jobs).
        let mut touched = BTreeSet::new();
        let mut recounted = BTreeSet::new();
        for e in &events {
            // Named before the event is applied (an ended job leaves the maps).
            let record = match self.job_event(e, now_unix) {
                Some(stored) => Ok(stored),
                None => Err(self.event_fields(e)),
            };
            self.apply_event(e, now_unix, &mut touched, &mut recounted);
            if let Some(node) = e.kind.node() {
                self.stale_nodes.insert(node.0.clone());
            }
            match record {
                Ok(stored) => self.log_stored(stored),
                Err(fields) => self.log_event(now_unix, fields),
            }
        }
        self.stale_ops.extend(touched.iter().cloned());
        self.stale_ops.extend(recounted);
        self.touched.extend(touched);
        self.queue_orders();
    }

    pub(super) fn apply_event(
        &mut self,
        e: &Event,
        now_unix: u64,
        touched: &mut BTreeSet<String>,
        recounted: &mut BTreeSet<String>,
    ) {
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
                    state: JobState::Running,
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
                recounted.insert(operation.0.clone());
            }
            EventKind::AllocationFinished {
                operation,
                allocation,
                outcome,
                ..
            } => {
                self.end_job(allocation.0, job_state(*outcome), None, now_unix);
                recounted.insert(operation.0.clone());
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
                self.end_job(allocation.0, JobState::Aborted, Some(reason), now_unix);
                recounted.insert(operation.0.clone());
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
                    view.state = operation_state(*state);
                    if reason.is_some() {
                        view.reason = reason.clone();
                    }
                    if state.is_finished() && view.finished_at.is_none() {
                        view.finished_at = Some(now_unix);
                        self.metrics.operation_finished(operation_state(*state));
                    }
                }
                touched.insert(operation.0.clone());
            }
            EventKind::Error { code, message } => {
                // Before any agent registered, guarantees always exceed the empty cluster:
                // expected at every start, not a warning.
                if self.sched.nodes().next().is_none() {
                    tracing::info!(code, message, "core error event (no nodes yet)");
                } else {
                    tracing::warn!(code, message, "core error event");
                }
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
}
