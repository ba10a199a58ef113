//! Durable state of the fairsched server.
//!
//! [`Store`] is what the server needs: load everything at start, and commit one batch of
//! changes (pool tree, operations, jobs, nodes, events) atomically before it replies.
//! [`SqliteStore`] keeps it in one SQLite file (WAL journal, `schema_version` table, migrations
//! as SQL strings). Records are JSON documents with a few indexed columns, so the server owns
//! their shape and the schema changes only for new tables or indexes.

use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;

/// A stored operation: its id, state and the server's JSON record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredOperation {
    pub id: String,
    pub state: String,
    pub record: String,
}

/// A stored job (one allocation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredJob {
    pub id: String,
    pub operation: String,
    pub record: String,
    /// The last bytes of its stdout and stderr, once it ended.
    pub stdout_tail: Option<String>,
    pub stderr_tail: Option<String>,
}

/// A stored node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredNode {
    pub id: String,
    pub record: String,
}

/// One event-log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Unix time in milliseconds.
    pub unix_ms: u64,
    pub record: String,
}

/// Changes committed together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// The pool tree configuration (JSON), keyed by tree name.
    pub trees: Vec<(String, String)>,
    pub operations: Vec<StoredOperation>,
    pub jobs: Vec<StoredJob>,
    pub nodes: Vec<StoredNode>,
    pub events: Vec<StoredEvent>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
            && self.operations.is_empty()
            && self.jobs.is_empty()
            && self.nodes.is_empty()
            && self.events.is_empty()
    }
}

/// Everything the server restores at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    pub trees: Vec<(String, String)>,
    /// In submission order.
    pub operations: Vec<StoredOperation>,
    pub jobs: Vec<StoredJob>,
    pub nodes: Vec<StoredNode>,
    /// How many times the store was opened before (0 on a new store).
    pub incarnation: u64,
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store: schema version {found} is newer than this binary knows ({known})")]
    TooNew { found: i64, known: i64 },
}

/// The server's durable state.
pub trait Store: Send {
    /// Everything stored.
    fn load(&self) -> Result<Loaded, StoreError>;
    /// Commits a batch atomically (all or nothing).
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError>;
    /// The captured output of one operation's jobs: `(job id, stdout, stderr)`.
    fn job_logs(&self, operation: &str) -> Result<Vec<(String, String, String)>, StoreError>;
    /// The newest `limit` events, oldest first.
    fn recent_events(&self, limit: usize) -> Result<Vec<StoredEvent>, StoreError>;
}

/// Migrations: the schema after migration `i` has version `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE pool_trees (tree TEXT PRIMARY KEY, config TEXT NOT NULL);
     CREATE TABLE operations (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         id TEXT NOT NULL UNIQUE,
         state TEXT NOT NULL,
         record TEXT NOT NULL);
     CREATE TABLE jobs (
         id TEXT PRIMARY KEY,
         operation TEXT NOT NULL,
         record TEXT NOT NULL,
         stdout_tail TEXT,
         stderr_tail TEXT);
     CREATE INDEX jobs_by_operation ON jobs (operation);
     CREATE TABLE nodes (id TEXT PRIMARY KEY, record TEXT NOT NULL);
     CREATE TABLE events (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         unix_ms INTEGER NOT NULL,
         record TEXT NOT NULL);",
];

/// [`Store`] in one SQLite database file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    incarnation: u64,
}

impl SqliteStore {
    /// Opens (creating if needed) `dir/fairsched.db`, migrates it and counts this opening.
    pub fn open(dir: &Path) -> Result<SqliteStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            rusqlite::Error::ToSqlConversionFailure(Box::new(std::io::Error::new(
                e.kind(),
                format!("cannot create {}: {e}", dir.display()),
            )))
        })?;
        let conn = Connection::open(dir.join("fairsched.db"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut store = SqliteStore {
            conn,
            incarnation: 0,
        };
        store.migrate()?;
        let tx = store.conn.transaction()?;
        let previous: Option<String> = tx
            .query_row(
                "SELECT value FROM meta WHERE key = 'incarnation'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let incarnation = previous.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('incarnation', ?1)",
            params![(incarnation + 1).to_string()],
        )?;
        tx.commit()?;
        store.incarnation = incarnation;
        Ok(store)
    }

    /// The schema version this binary writes.
    pub fn schema_version() -> i64 {
        MIGRATIONS.len() as i64
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
            [],
        )?;
        let current: i64 = tx
            .query_row("SELECT MAX(version) FROM schema_version", [], |r| {
                r.get::<_, Option<i64>>(0)
            })?
            .unwrap_or(0);
        let known = Self::schema_version();
        if current > known {
            return Err(StoreError::TooNew {
                found: current,
                known,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                params![i as i64 + 1],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}

impl Store for SqliteStore {
    fn load(&self) -> Result<Loaded, StoreError> {
        let c = &self.conn;
        let trees = c
            .prepare("SELECT tree, config FROM pool_trees ORDER BY tree")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let operations = c
            .prepare("SELECT id, state, record FROM operations ORDER BY seq")?
            .query_map([], |r| {
                Ok(StoredOperation {
                    id: r.get(0)?,
                    state: r.get(1)?,
                    record: r.get(2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        let jobs = c
            .prepare(
                "SELECT id, operation, record, stdout_tail, stderr_tail FROM jobs ORDER BY rowid",
            )?
            .query_map([], |r| {
                Ok(StoredJob {
                    id: r.get(0)?,
                    operation: r.get(1)?,
                    record: r.get(2)?,
                    stdout_tail: r.get(3)?,
                    stderr_tail: r.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        let nodes = c
            .prepare("SELECT id, record FROM nodes ORDER BY id")?
            .query_map([], |r| {
                Ok(StoredNode {
                    id: r.get(0)?,
                    record: r.get(1)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(Loaded {
            trees,
            operations,
            jobs,
            nodes,
            incarnation: self.incarnation,
        })
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        for (tree, config) in &batch.trees {
            tx.execute(
                "INSERT OR REPLACE INTO pool_trees (tree, config) VALUES (?1, ?2)",
                params![tree, config],
            )?;
        }
        for op in &batch.operations {
            tx.execute(
                "INSERT INTO operations (id, state, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, record = excluded.record",
                params![op.id, op.state, op.record],
            )?;
        }
        for job in &batch.jobs {
            tx.execute(
                "INSERT INTO jobs (id, operation, record, stdout_tail, stderr_tail)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record,
                   stdout_tail = COALESCE(excluded.stdout_tail, jobs.stdout_tail),
                   stderr_tail = COALESCE(excluded.stderr_tail, jobs.stderr_tail)",
                params![
                    job.id,
                    job.operation,
                    job.record,
                    job.stdout_tail,
                    job.stderr_tail
                ],
            )?;
        }
        for node in &batch.nodes {
            tx.execute(
                "INSERT OR REPLACE INTO nodes (id, record) VALUES (?1, ?2)",
                params![node.id, node.record],
            )?;
        }
        for e in &batch.events {
            tx.execute(
                "INSERT INTO events (unix_ms, record) VALUES (?1, ?2)",
                params![e.unix_ms as i64, e.record],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn job_logs(&self, operation: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = self
            .conn
            .prepare(
                "SELECT id, COALESCE(stdout_tail, ''), COALESCE(stderr_tail, '') FROM jobs
                 WHERE operation = ?1 ORDER BY rowid",
            )?
            .query_map(params![operation], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    fn recent_events(&self, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let mut rows: Vec<StoredEvent> = self
            .conn
            .prepare("SELECT unix_ms, record FROM events ORDER BY seq DESC LIMIT ?1")?
            .query_map(params![limit as i64], |r| {
                Ok(StoredEvent {
                    unix_ms: r.get::<_, i64>(0)? as u64,
                    record: r.get(1)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        rows.reverse();
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: &str, state: &str) -> StoredOperation {
        StoredOperation {
            id: id.into(),
            state: state.into(),
            record: format!("{{\"id\":\"{id}\"}}"),
        }
    }

    #[test]
    fn round_trip_and_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = SqliteStore::open(dir.path()).unwrap();
            assert_eq!(s.load().unwrap().incarnation, 0);
            s.commit(&Batch {
                trees: vec![("default".into(), "{}".into())],
                operations: vec![op("b", "running"), op("a", "running")],
                jobs: vec![StoredJob {
                    id: "0.1".into(),
                    operation: "b".into(),
                    record: "{}".into(),
                    stdout_tail: None,
                    stderr_tail: None,
                }],
                nodes: vec![StoredNode {
                    id: "n1".into(),
                    record: "{}".into(),
                }],
                events: vec![StoredEvent {
                    unix_ms: 5,
                    record: "{}".into(),
                }],
            })
            .unwrap();
            // An update keeps the submission order and earlier logs.
            s.commit(&Batch {
                operations: vec![op("b", "completed")],
                jobs: vec![StoredJob {
                    id: "0.1".into(),
                    operation: "b".into(),
                    record: "{\"done\":true}".into(),
                    stdout_tail: Some("hi\n".into()),
                    stderr_tail: Some(String::new()),
                }],
                ..Batch::default()
            })
            .unwrap();
        }
        let s = SqliteStore::open(dir.path()).unwrap();
        let loaded = s.load().unwrap();
        assert_eq!(loaded.incarnation, 1);
        assert_eq!(loaded.trees, vec![("default".into(), "{}".into())]);
        let ids: Vec<_> = loaded
            .operations
            .iter()
            .map(|o| (o.id.as_str(), o.state.as_str()))
            .collect();
        assert_eq!(ids, vec![("b", "completed"), ("a", "running")]);
        assert_eq!(loaded.jobs[0].record, "{\"done\":true}");
        assert_eq!(
            s.job_logs("b").unwrap(),
            vec![("0.1".into(), "hi\n".into(), String::new())]
        );
        assert_eq!(s.recent_events(10).unwrap().len(), 1);
        assert_eq!(loaded.nodes.len(), 1);
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        drop(SqliteStore::open(dir.path()).unwrap());
        let conn = Connection::open(dir.path().join("fairsched.db")).unwrap();
        conn.execute("INSERT INTO schema_version (version) VALUES (99)", [])
            .unwrap();
        drop(conn);
        let err = SqliteStore::open(dir.path()).unwrap_err();
        assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    }
}
