//! [`PostgresStore`]: the store in a PostgreSQL database, for servers that share one store
//! (one leader writes, the others stand by: `leader.rs`).
//!
//! The same tables and semantics as the SQLite store (the conformance suite in
//! `tests/conformance/` holds both to it): records are JSON text with a few indexed columns,
//! a batch is one transaction, a reader has a connection of its own. Its schema starts at the
//! SQLite store's version 4 (the same tables and columns) and a migration of either store
//! keeps the same number for the same change; a database of a newer schema is refused.
//! Output tails are `bytea` (PostgreSQL's text cannot hold a NUL byte; a program's output
//! can).

pub(crate) mod conn;
mod leader;
mod read;

pub use leader::Leader;

use crate::{Batch, Loaded, Pruned, Store, StoreError, StoreRead, StoredJob, StoredOperation};
use conn::{Conn, Session, Target};
use std::collections::HashMap;
use std::sync::Mutex;

/// The schema versions: each with the SQL that brings the one before to it. The first
/// PostgreSQL schema is the SQLite store's version 4.
const MIGRATIONS: &[(i64, &str)] = &[(
    4,
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE pool_trees (
         tree TEXT PRIMARY KEY,
         config TEXT NOT NULL,
         is_default BOOLEAN NOT NULL DEFAULT FALSE);
     CREATE TABLE operations (
         seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
         id TEXT NOT NULL UNIQUE,
         state TEXT NOT NULL,
         pool TEXT NOT NULL DEFAULT '',
         user_name TEXT NOT NULL DEFAULT '',
         finished_at BIGINT,
         record TEXT NOT NULL);
     CREATE INDEX operations_by_state ON operations (state, seq);
     CREATE INDEX operations_by_pool ON operations (pool, seq);
     CREATE INDEX operations_by_user ON operations (user_name, seq);
     CREATE INDEX operations_by_finish ON operations (finished_at)
         WHERE finished_at IS NOT NULL;
     CREATE TABLE jobs (
         seq BIGINT GENERATED ALWAYS AS IDENTITY,
         id TEXT PRIMARY KEY,
         operation TEXT NOT NULL,
         record TEXT NOT NULL,
         stdout_tail BYTEA,
         stderr_tail BYTEA);
     CREATE INDEX jobs_by_operation ON jobs (operation, seq);
     CREATE TABLE nodes (id TEXT PRIMARY KEY, record TEXT NOT NULL);
     CREATE TABLE events (
         seq BIGINT PRIMARY KEY,
         unix_ms BIGINT NOT NULL,
         kind TEXT NOT NULL DEFAULT '',
         operation TEXT,
         node TEXT,
         job TEXT,
         record TEXT NOT NULL);
     CREATE INDEX events_by_operation ON events (operation, seq);
     CREATE INDEX events_by_node ON events (node, seq);
     CREATE INDEX events_by_job ON events (job, seq);
     CREATE INDEX events_by_time ON events (unix_ms);
     CREATE TABLE leader (
         one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
         epoch BIGINT NOT NULL,
         holder TEXT NOT NULL,
         expires_at TIMESTAMPTZ NOT NULL);
     INSERT INTO leader (epoch, holder, expires_at) VALUES (0, '', '-infinity');",
)];

/// The advisory lock that makes servers opening one new database create its schema one at
/// a time.
const MIGRATION_LOCK: i64 = 0x6661_6972_7363_6864; // "fairschd"

/// The SQL array of [`crate::FINISHED_STATES`].
const FINISHED_SQL: &str = "ARRAY['completed', 'failed', 'aborted']";

/// [`Store`] in a PostgreSQL database.
#[derive(Debug)]
pub struct PostgresStore {
    /// Its connection (also for its reads: `&self` methods lock it).
    conn: Mutex<Conn>,
    incarnation: u64,
    /// The epoch this store was elected leader for: every write checks, in its transaction,
    /// that the store is still at it (`None`: not elected, writes unchecked).
    epoch: Option<u64>,
}

/// Locks a connection (a panic while it was held leaves it usable: every request is whole).
fn lock(conn: &Mutex<Conn>) -> std::sync::MutexGuard<'_, Conn> {
    conn.lock().unwrap_or_else(|e| e.into_inner())
}

/// i64 for PostgreSQL's `bigint` (larger values saturate).
fn big(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl PostgresStore {
    /// Opens the store at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`; the
    /// database must exist), creates or migrates its schema and counts this opening. A store
    /// opened so writes without a leader's check: see [`PostgresStore::acquire_leadership`].
    pub fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let mut conn = Conn::open(Target::parse(url)?, false)?;
        conn.run(migrate)?;
        let incarnation = conn.run(|s| {
            let row = s.query_opt(
                "INSERT INTO meta (key, value) VALUES ('incarnation', '1')
                 ON CONFLICT (key) DO UPDATE SET value = (meta.value::BIGINT + 1)::TEXT
                 RETURNING value::BIGINT",
                &[],
            )?;
            Ok(row.map_or(1, |r| r.get::<_, i64>(0)))
        })?;
        Ok(PostgresStore {
            conn: Mutex::new(conn),
            incarnation: (incarnation - 1).max(0) as u64,
            epoch: None,
        })
    }

    /// The schema version this binary writes (the SQLite store's, see [`crate::SqliteStore`]).
    pub fn schema_version() -> i64 {
        MIGRATIONS.last().map_or(0, |m| m.0)
    }

    /// Runs `f` in a read-write transaction that first checks this store's epoch, if it was
    /// elected: the check holds the leader row (`FOR SHARE`) until the commit, so no other
    /// server is elected while the transaction writes, and none of its writes land after one
    /// was.
    fn write<T: Send>(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        let epoch = self.epoch;
        lock(&self.conn).run(|s| {
            s.transaction("BEGIN", |s| {
                if let Some(epoch) = epoch {
                    leader::check_epoch(s, epoch)?;
                }
                f(s)
            })
        })
    }
}

/// Creates the schema or brings it to this binary's version; refuses a newer one.
fn migrate(s: &mut Session) -> Result<(), StoreError> {
    s.transaction("BEGIN", |s| {
        s.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        s.batch("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")?;
        let current: i64 = s
            .query_opt("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])?
            .map_or(0, |r| r.get(0));
        let known = PostgresStore::schema_version();
        if current > known {
            return Err(StoreError::TooNew {
                found: current,
                known,
            });
        }
        let first = MIGRATIONS[0].0;
        if current != 0 && current < first {
            return Err(StoreError::Other(format!(
                "the database's schema version {current} was never written by a PostgreSQL \
                 store (their first is {first}): is it the database of something else?"
            )));
        }
        for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            s.batch(sql)?;
            s.execute(
                "INSERT INTO schema_version (version) VALUES ($1)",
                &[version],
            )?;
        }
        Ok(())
    })
}

/// The batch's rows of one table as they end after it is applied row by row: a row given
/// again replaces the earlier one in the earlier one's place (`merge(earlier, later)`).
fn last_of_each<T: Clone>(rows: &[T], id: fn(&T) -> &str, merge: impl Fn(&T, &T) -> T) -> Vec<T> {
    let mut at: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
    let mut out: Vec<T> = Vec::with_capacity(rows.len());
    for row in rows {
        match at.get(id(row)) {
            Some(&i) => out[i] = merge(&out[i], row),
            None => {
                at.insert(id(row), out.len());
                out.push(row.clone());
            }
        }
    }
    out
}

fn commit_batch(s: &mut Session, batch: &Batch) -> Result<(), StoreError> {
    for tree in &batch.trees {
        if tree.is_default {
            s.execute(
                "UPDATE pool_trees SET is_default = FALSE WHERE tree <> $1 AND is_default",
                &[&tree.name],
            )?;
        }
        s.execute(
            "INSERT INTO pool_trees (tree, config, is_default) VALUES ($1, $2, $3)
             ON CONFLICT (tree) DO UPDATE SET config = excluded.config,
               is_default = excluded.is_default",
            &[&tree.name, &tree.config, &tree.is_default],
        )?;
    }
    // One statement per table, its rows as arrays: a round trip per table, not per row.
    if !batch.operations.is_empty() {
        let ops = last_of_each(
            &batch.operations,
            |o| o.id.as_str(),
            |_, later| later.clone(),
        );
        let col = |f: fn(&StoredOperation) -> &str| ops.iter().map(f).collect::<Vec<_>>();
        let finished: Vec<Option<i64>> = ops.iter().map(|o| o.finished_at.map(big)).collect();
        s.execute(
            "INSERT INTO operations (id, state, pool, user_name, finished_at, record)
             SELECT id, state, pool, user_name, finished_at, record
             FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[],
                         $6::TEXT[])
               WITH ORDINALITY AS u(id, state, pool, user_name, finished_at, record, n)
             ORDER BY n
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, pool = excluded.pool,
               user_name = excluded.user_name, finished_at = excluded.finished_at,
               record = excluded.record",
            &[
                &col(|o| &o.id),
                &col(|o| &o.state),
                &col(|o| &o.pool),
                &col(|o| &o.user),
                &finished,
                &col(|o| &o.record),
            ],
        )?;
    }
    if !batch.jobs.is_empty() {
        // A job keeps its operation and its tails until new ones are given.
        let jobs = last_of_each(
            &batch.jobs,
            |j| j.id.as_str(),
            |earlier, later| StoredJob {
                id: earlier.id.clone(),
                operation: earlier.operation.clone(),
                record: later.record.clone(),
                stdout_tail: later.stdout_tail.clone().or(earlier.stdout_tail.clone()),
                stderr_tail: later.stderr_tail.clone().or(earlier.stderr_tail.clone()),
            },
        );
        let col = |f: fn(&StoredJob) -> &str| jobs.iter().map(f).collect::<Vec<_>>();
        let tail = |f: fn(&StoredJob) -> &Option<String>| {
            jobs.iter()
                .map(|j| f(j).as_ref().map(|t| t.as_bytes()))
                .collect::<Vec<_>>()
        };
        s.execute(
            "INSERT INTO jobs (id, operation, record, stdout_tail, stderr_tail)
             SELECT id, operation, record, stdout_tail, stderr_tail
             FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::BYTEA[], $5::BYTEA[])
               WITH ORDINALITY AS u(id, operation, record, stdout_tail, stderr_tail, n)
             ORDER BY n
             ON CONFLICT (id) DO UPDATE SET record = excluded.record,
               stdout_tail = COALESCE(excluded.stdout_tail, jobs.stdout_tail),
               stderr_tail = COALESCE(excluded.stderr_tail, jobs.stderr_tail)",
            &[
                &col(|j| &j.id),
                &col(|j| &j.operation),
                &col(|j| &j.record),
                &tail(|j| &j.stdout_tail),
                &tail(|j| &j.stderr_tail),
            ],
        )?;
    }
    for exit in &batch.job_exits {
        let Some(row) = s.query_opt(
            "SELECT record FROM jobs WHERE id = $1 FOR UPDATE",
            &[&exit.id],
        )?
        else {
            continue;
        };
        let record: String = row.get(0);
        let record = with_exit(&record, exit.exit_code, exit.reason.as_deref());
        s.execute(
            "UPDATE jobs SET record = $2, stdout_tail = $3, stderr_tail = $4 WHERE id = $1",
            &[
                &exit.id,
                &record,
                &exit.stdout_tail.as_bytes(),
                &exit.stderr_tail.as_bytes(),
            ],
        )?;
    }
    if !batch.nodes.is_empty() {
        let nodes = last_of_each(&batch.nodes, |n| n.id.as_str(), |_, later| later.clone());
        let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
        let records: Vec<&str> = nodes.iter().map(|n| n.record.as_str()).collect();
        s.execute(
            "INSERT INTO nodes (id, record) SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[])
             ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            &[&ids, &records],
        )?;
    }
    if !batch.events.is_empty() {
        let e = &batch.events;
        let seqs: Vec<i64> = e.iter().map(|e| big(e.seq)).collect();
        let times: Vec<i64> = e.iter().map(|e| big(e.unix_ms)).collect();
        let kinds: Vec<&str> = e.iter().map(|e| e.kind.as_str()).collect();
        let opt = |f: fn(&crate::StoredEvent) -> &Option<String>| {
            e.iter().map(|e| f(e).as_deref()).collect::<Vec<_>>()
        };
        let records: Vec<&str> = e.iter().map(|e| e.record.as_str()).collect();
        s.execute(
            "INSERT INTO events (seq, unix_ms, kind, operation, node, job, record)
             SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[],
                                  $5::TEXT[], $6::TEXT[], $7::TEXT[])",
            &[
                &seqs,
                &times,
                &kinds,
                &opt(|e| &e.operation),
                &opt(|e| &e.node),
                &opt(|e| &e.job),
                &records,
            ],
        )?;
    }
    Ok(())
}

/// A job's record with a late exit: its exit code when it has none, the reason when one is
/// given (a record that is not a JSON object stays as it is).
fn with_exit(record: &str, exit_code: Option<i32>, reason: Option<&str>) -> String {
    let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(record) else {
        return record.to_string();
    };
    let code = match fields.get("exit_code") {
        Some(v) if !v.is_null() => v.clone(),
        _ => serde_json::json!(exit_code),
    };
    fields.insert("exit_code".into(), code);
    let reason = match reason {
        Some(r) => serde_json::json!(r),
        None => fields
            .get("reason")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    };
    fields.insert("reason".into(), reason);
    serde_json::Value::Object(fields).to_string()
}

impl Store for PostgresStore {
    fn load(&self) -> Result<Loaded, StoreError> {
        let incarnation = self.incarnation;
        lock(&self.conn).read(|s| read::load(s, incarnation))
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.write(|s| commit_batch(s, batch))
    }

    fn check_writable(&mut self) -> Result<(), StoreError> {
        self.write(|s| {
            s.execute(
                "INSERT INTO meta (key, value) VALUES ('write_check', '1')
                 ON CONFLICT (key) DO UPDATE SET value = (meta.value::BIGINT + 1)::TEXT",
                &[],
            )?;
            Ok(())
        })
    }

    fn prune(
        &mut self,
        before_unix_ms: u64,
        max_operations: usize,
        max_events: usize,
    ) -> Result<Pruned, StoreError> {
        let before = big(before_unix_ms);
        let (max_operations, max_events) = (big(max_operations as u64), big(max_events as u64));
        self.write(|s| {
            let ids: Vec<String> = s
                .query(
                    &format!(
                        "SELECT id FROM operations WHERE finished_at IS NOT NULL
                           AND finished_at < $1 AND state = ANY({FINISHED_SQL})
                         ORDER BY finished_at, seq LIMIT $2"
                    ),
                    &[&before, &max_operations],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let jobs = s.execute("DELETE FROM jobs WHERE operation = ANY($1)", &[&ids])?;
            let operations = s.execute("DELETE FROM operations WHERE id = ANY($1)", &[&ids])?;
            let events = s.execute(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE unix_ms < $1
                   AND seq < (SELECT MAX(seq) FROM events) ORDER BY seq LIMIT $2)",
                &[&before, &max_events],
            )?;
            Ok(Pruned {
                operations: operations as usize,
                jobs: jobs as usize,
                events: events as usize,
            })
        })
    }

    fn reader(&self) -> Result<Box<dyn StoreRead>, StoreError> {
        let target = lock(&self.conn).target().clone();
        Ok(Box::new(read::Reader::open(target)?))
    }
}

impl StoreRead for PostgresStore {
    fn operation(&self, id: &str) -> Result<Option<(StoredOperation, Vec<StoredJob>)>, StoreError> {
        lock(&self.conn).read(|s| read::operation(s, id))
    }

    fn operation_state(&self, id: &str) -> Result<Option<String>, StoreError> {
        lock(&self.conn).read(|s| read::operation_state(s, id))
    }

    fn operations(
        &self,
        filter: &crate::OperationFilter,
    ) -> Result<Vec<StoredOperation>, StoreError> {
        lock(&self.conn).read(|s| read::operations(s, filter))
    }

    fn job_logs(&self, operation: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        lock(&self.conn).read(|s| read::job_logs(s, operation))
    }

    fn events(&self, filter: &crate::EventFilter) -> Result<Vec<crate::StoredEvent>, StoreError> {
        lock(&self.conn).read(|s| read::events(s, filter))
    }
}
