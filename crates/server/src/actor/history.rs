//! Reads of operations that may have left memory (finished ones are in the store only), and
//! the pruning of the store after `history_retention_ms`.

use super::{Actor, PRUNE_EVENTS, PRUNE_OPERATIONS, internal, no_such_operation, unix_ms};
use crate::command::HistoryQuery;
use fairsched_api::{ApiError, JobView, OperationView, codes};
use fairsched_store::{OperationFilter, Pruned, StoredJob, StoredOperation};
use std::time::{Duration, Instant};

/// A stored operation as the API shows it (with `jobs`, its stored jobs).
pub(super) fn stored_view(
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

impl Actor {
    /// Whether an operation of this id exists, in memory or in the store.
    pub(super) fn operation_known(&self, id: &str) -> Result<bool, ApiError> {
        Ok(self.ops.contains_key(id)
            || self
                .store()
                .operation_state(id)
                .map_err(internal)?
                .is_some())
    }

    /// The error for a command on operation `id`, which is not in memory: it finished (the
    /// store has it; `finished` says what that means for the command) or does not exist.
    pub(super) fn not_in_memory(
        &self,
        id: &str,
        finished: impl FnOnce(&str) -> String,
    ) -> ApiError {
        let state = self.store().operation_state(id);
        match state {
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
    pub(super) fn history(&self, query: HistoryQuery) {
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
    pub(super) fn operation_view(&self, id: &str) -> Result<OperationView, ApiError> {
        if let Some(r) = self.ops.get(id) {
            return Ok(self.shown(r, true));
        }
        let (op, jobs) = self
            .store()
            .operation(id)
            .map_err(internal)?
            .ok_or_else(|| no_such_operation(id))?;
        stored_view(&op, Some(&jobs))
    }

    /// The operations that pass `filter`, as the store lists them; the unfinished ones as
    /// memory has them.
    pub(super) fn operation_views(
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
        let rows = self.store().operations(filter).map_err(internal)?;
        rows.iter()
            .map(|row| match self.ops.get(&row.id) {
                Some(r) => Ok(self.shown(r, jobs)),
                None if jobs => {
                    let stored = self.store().operation(&row.id).map_err(internal)?;
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
    pub(super) fn prune_history(&mut self) {
        let retention = self.config.history_retention_ms;
        if retention == 0 || self.read_only.is_some() || Instant::now() < self.prune_at {
            return;
        }
        let before = unix_ms().saturating_sub(retention);
        let pause = Duration::from_millis((retention / 2).clamp(100, 60_000));
        let pruned = super::writer::lock(&self.store).prune(before, PRUNE_OPERATIONS, PRUNE_EVENTS);
        match pruned {
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
            Err(e @ fairsched_store::StoreError::NotLeader { .. }) => {
                self.lose_leadership(&e.to_string());
            }
            Err(e) => {
                tracing::warn!("cannot prune what is older than the retention: {e}");
                self.prune_at = Instant::now() + pause;
            }
        }
    }
}
