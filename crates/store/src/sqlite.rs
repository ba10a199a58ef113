//! [`SqliteStore`]: the store in one SQLite file (WAL journal, `schema_version` table,
//! migrations as SQL strings, an OS lock for one process per store).

use crate::{
    Batch, EventFilter, Loaded, OperationFilter, Pruned, Store, StoreError, StoreRead, StoredEvent,
    StoredJob, StoredNode, StoredOperation, StoredTree,
};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;

/// When a commit is durable, SQLite's `synchronous` setting (the journal is WAL in both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Every commit is flushed to the disk (`fsync` of the WAL) before it returns: a commit
    /// survives a process crash and a power cut.
    #[default]
    Full,
    /// Commits are written to the OS (they survive a crash of the process) and flushed to the
    /// disk at checkpoints: a power cut or an OS crash may lose the last commits (the database
    /// stays consistent). Faster: no flush per commit.
    Normal,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// The writing connection's page cache: 64 MiB (SQLite's `cache_size` takes KiB negated).
const WRITER_CACHE_KIB: i64 = -64 * 1024;

/// Pages in the WAL (4 KiB each: 64 MiB) after which a commit checkpoints it.
const WAL_CHECKPOINT_PAGES: i64 = 16 * 1024;

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
    // 2: the event log gets filter columns (filled in from the records) and indexes.
    "ALTER TABLE events ADD COLUMN kind TEXT NOT NULL DEFAULT '';
     ALTER TABLE events ADD COLUMN operation TEXT;
     ALTER TABLE events ADD COLUMN node TEXT;
     ALTER TABLE events ADD COLUMN job TEXT;
     UPDATE events SET
         kind = COALESCE(json_extract(record, '$.event'), ''),
         operation = json_extract(record, '$.operation'),
         node = json_extract(record, '$.node'),
         job = json_extract(record, '$.job')
       WHERE json_valid(record);
     CREATE INDEX events_by_operation ON events (operation, seq);
     CREATE INDEX events_by_node ON events (node, seq);
     CREATE INDEX events_by_job ON events (job, seq);
     CREATE INDEX events_by_time ON events (unix_ms);",
    // 3: several pool trees: which one is the default. Earlier versions stored one tree (the
    // default one), which becomes the default.
    "ALTER TABLE pool_trees ADD COLUMN is_default INTEGER NOT NULL DEFAULT 0;
     UPDATE pool_trees SET is_default = 1 WHERE (SELECT COUNT(*) FROM pool_trees) = 1;",
    // 4: finished operations stay in the store only: lists filter and page there, and the
    // retention prunes by finish time.
    "ALTER TABLE operations ADD COLUMN pool TEXT NOT NULL DEFAULT '';
     ALTER TABLE operations ADD COLUMN user TEXT NOT NULL DEFAULT '';
     ALTER TABLE operations ADD COLUMN finished_at INTEGER;
     UPDATE operations SET
         pool = COALESCE(json_extract(record, '$.pool'), ''),
         user = COALESCE(json_extract(record, '$.user'), ''),
         finished_at = CASE WHEN state IN ('completed', 'failed', 'aborted')
             THEN COALESCE(json_extract(record, '$.finished_at'), 0) END
       WHERE json_valid(record);
     CREATE INDEX operations_by_state ON operations (state, seq);
     CREATE INDEX operations_by_pool ON operations (pool, seq);
     CREATE INDEX operations_by_user ON operations (user, seq);
     CREATE INDEX operations_by_finish ON operations (finished_at) WHERE finished_at IS NOT NULL;",
];

/// The SQL list of [`FINISHED_STATES`].
const FINISHED_SQL: &str = "('completed', 'failed', 'aborted')";

fn stored_operation(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredOperation> {
    Ok(StoredOperation {
        id: r.get(0)?,
        state: r.get(1)?,
        pool: r.get(2)?,
        user: r.get(3)?,
        finished_at: r.get::<_, Option<i64>>(4)?.map(|t| t.max(0) as u64),
        record: r.get(5)?,
    })
}

const OPERATION_COLUMNS: &str = "id, state, pool, user, finished_at, record";

fn stored_job(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredJob> {
    Ok(StoredJob {
        id: r.get(0)?,
        operation: r.get(1)?,
        record: r.get(2)?,
        stdout_tail: r.get(3)?,
        stderr_tail: r.get(4)?,
    })
}

/// [`Store`] in one SQLite database file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    incarnation: u64,
    /// `fairsched.lock`, locked (`flock`) while the store is open: one process per store. The
    /// OS releases it when the process ends, however it ends. (A [`Store::reader`] has none.)
    _lock: Option<std::fs::File>,
    /// `fairsched.db`.
    path: std::path::PathBuf,
}

/// A failure to open the store in `dir`, naming the directory, and for the errors a full or
/// read-only disk gives (SQLite says "disk I/O error ... xShmMap" for a full one) what to
/// check.
fn opening_failed(dir: &Path, e: StoreError) -> StoreError {
    use rusqlite::ErrorCode;
    let StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) = &e else {
        return e;
    };
    let hint = match f.code {
        ErrorCode::DiskFull | ErrorCode::SystemIoFailure => {
            "; is its disk full or read-only? (`df -h`, `mount`)"
        }
        ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen => {
            "; may the server's user write there, and is the disk writable?"
        }
        _ => "",
    };
    StoreError::Other(format!(
        "cannot open {} (data_dir): {}{hint}",
        dir.display(),
        e.to_string().trim_start_matches("store: ")
    ))
}

/// Locks `dir/fairsched.lock` for this process and writes who holds it (for the error a
/// second process gets).
fn lock_dir(dir: &Path) -> Result<std::fs::File, StoreError> {
    use std::io::{Read, Seek, Write};
    let path = dir.join(LOCK_FILE);
    let lock_error = |e: &dyn std::fmt::Display| StoreError::Lock {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| lock_error(&e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(StoreError::Locked {
                dir: dir.display().to_string(),
                holder: if holder.is_empty() {
                    "a process that has not said who it is".into()
                } else {
                    holder.to_string()
                },
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(lock_error(&e)),
    }
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let holder = format!("pid {}, {exe}", std::process::id());
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(holder.as_bytes()));
    if let Err(e) = written {
        return Err(lock_error(&e));
    }
    Ok(file)
}

/// The lock file of a store's directory (see [`SqliteStore::used_by_a_server`]).
pub const LOCK_FILE: &str = "fairsched.lock";

impl SqliteStore {
    /// Whether a server ever opened a store in `dir`: the lock file is made first and stays
    /// (after its database is deleted, too).
    pub fn used_by_a_server(dir: &Path) -> bool {
        dir.join(LOCK_FILE).is_file()
    }

    /// Whether `dir` holds a store (`dir/fairsched.db`), that is whether [`SqliteStore::open`]
    /// opens an existing one rather than creating it.
    pub fn exists(dir: &Path) -> bool {
        dir.join("fairsched.db").is_file()
    }

    /// Opens (creating if needed) `dir/fairsched.db`, migrates it and counts this opening;
    /// commits are durable as [`Synchronous::Full`] says.
    pub fn open(dir: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(dir, Synchronous::default())
    }

    /// [`SqliteStore::open`] with commits durable as `synchronous` says.
    pub fn open_with(dir: &Path, synchronous: Synchronous) -> Result<SqliteStore, StoreError> {
        if dir.exists() && !dir.is_dir() {
            return Err(StoreError::NotADirectory {
                dir: dir.display().to_string(),
            });
        }
        // A lock file without a database: the database was deleted (see `StoreError::Missing`).
        if Self::used_by_a_server(dir) && !Self::exists(dir) {
            return Err(StoreError::Missing {
                dir: dir.display().to_string(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            rusqlite::Error::ToSqlConversionFailure(Box::new(std::io::Error::new(
                e.kind(),
                format!("cannot create {}: {e}", dir.display()),
            )))
        })?;
        let lock = lock_dir(dir)?;
        Self::open_locked(dir, lock, synchronous).map_err(|e| opening_failed(dir, e))
    }

    /// [`SqliteStore::open_with`] once `dir` is locked (`lock`).
    fn open_locked(
        dir: &Path,
        lock: std::fs::File,
        synchronous: Synchronous,
    ) -> Result<SqliteStore, StoreError> {
        let path = dir.join("fairsched.db");
        let conn = Connection::open(&path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", synchronous.pragma())?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // The page cache holds a large batch's dirty pages and the indexes' hot pages: with
        // SQLite's default (2 MiB) a batch of a few hundred heartbeats spilled dirty pages to
        // the WAL before its commit and read evicted index pages again.
        conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
        // A checkpoint copies every page the WAL holds back to the database: the fewer
        // checkpoints, the more often a page changed by many commits (the event log's and the
        // indexes' hot pages) is copied once. With the default (1,000 pages) checkpoints took
        // a quarter of the store's CPU per heartbeat.
        conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
        let mut store = SqliteStore {
            conn,
            incarnation: 0,
            _lock: Some(lock),
            path,
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
            .prepare("SELECT tree, config, is_default FROM pool_trees ORDER BY tree")?
            .query_map([], |r| {
                Ok(StoredTree {
                    name: r.get(0)?,
                    config: r.get(1)?,
                    is_default: r.get::<_, i64>(2)? != 0,
                })
            })?
            .collect::<Result<_, _>>()?;
        let operations = c
            .prepare(&format!(
                "SELECT {OPERATION_COLUMNS} FROM operations WHERE state NOT IN {FINISHED_SQL}
                 ORDER BY seq"
            ))?
            .query_map([], stored_operation)?
            .collect::<Result<_, _>>()?;
        let jobs = c
            .prepare(&format!(
                "SELECT id, operation, record, stdout_tail, stderr_tail FROM jobs
                 WHERE operation IN (SELECT id FROM operations WHERE state NOT IN {FINISHED_SQL})
                 ORDER BY rowid"
            ))?
            .query_map([], stored_job)?
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
        let last_event_seq: i64 =
            c.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))?;
        Ok(Loaded {
            trees,
            operations,
            jobs,
            nodes,
            incarnation: self.incarnation,
            last_event_seq: last_event_seq as u64,
        })
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        for tree in &batch.trees {
            if tree.is_default {
                tx.execute(
                    "UPDATE pool_trees SET is_default = 0 WHERE tree <> ?1",
                    params![tree.name],
                )?;
            }
            tx.execute(
                "INSERT INTO pool_trees (tree, config, is_default) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tree) DO UPDATE SET config = excluded.config,
                   is_default = excluded.is_default",
                params![tree.name, tree.config, i64::from(tree.is_default)],
            )?;
        }
        // Each statement is prepared once per commit (and cached across commits), not once
        // per row: parsing the SQL was a good part of a heartbeat's commit.
        if !batch.operations.is_empty() {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO operations (id, state, pool, user, finished_at, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state, pool = excluded.pool,
                   user = excluded.user, finished_at = excluded.finished_at,
                   record = excluded.record",
            )?;
            for op in &batch.operations {
                stmt.execute(params![
                    op.id,
                    op.state,
                    op.pool,
                    op.user,
                    op.finished_at.map(|t| t.min(i64::MAX as u64) as i64),
                    op.record
                ])?;
            }
        }
        if !batch.jobs.is_empty() {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO jobs (id, operation, record, stdout_tail, stderr_tail)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET record = excluded.record,
                   stdout_tail = COALESCE(excluded.stdout_tail, jobs.stdout_tail),
                   stderr_tail = COALESCE(excluded.stderr_tail, jobs.stderr_tail)",
            )?;
            for job in &batch.jobs {
                stmt.execute(params![
                    job.id,
                    job.operation,
                    job.record,
                    job.stdout_tail,
                    job.stderr_tail
                ])?;
            }
        }
        if !batch.job_exits.is_empty() {
            let mut stmt = tx.prepare_cached(
                "UPDATE jobs SET
                   record = CASE WHEN json_valid(record) THEN json_set(record,
                       '$.exit_code', COALESCE(json_extract(record, '$.exit_code'), ?2),
                       '$.reason', COALESCE(?3, json_extract(record, '$.reason')))
                     ELSE record END,
                   stdout_tail = ?4, stderr_tail = ?5
                 WHERE id = ?1",
            )?;
            for e in &batch.job_exits {
                stmt.execute(params![
                    e.id,
                    e.exit_code,
                    e.reason,
                    e.stdout_tail,
                    e.stderr_tail
                ])?;
            }
        }
        if !batch.nodes.is_empty() {
            let mut stmt =
                tx.prepare_cached("INSERT OR REPLACE INTO nodes (id, record) VALUES (?1, ?2)")?;
            for node in &batch.nodes {
                stmt.execute(params![node.id, node.record])?;
            }
        }
        if !batch.events.is_empty() {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO events (seq, unix_ms, kind, operation, node, job, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for e in &batch.events {
                stmt.execute(params![
                    e.seq as i64,
                    e.unix_ms as i64,
                    e.kind,
                    e.operation,
                    e.node,
                    e.job,
                    e.record
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn check_writable(&mut self) -> Result<(), StoreError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('write_check', \
             CAST((SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) + 1 FROM meta \
             WHERE key = 'write_check') AS TEXT))",
            [],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn prune(
        &mut self,
        before_unix_ms: u64,
        max_operations: usize,
        max_events: usize,
    ) -> Result<Pruned, StoreError> {
        let before = before_unix_ms.min(i64::MAX as u64) as i64;
        let tx = self.conn.transaction()?;
        let ids: Vec<String> = tx
            .prepare_cached(&format!(
                "SELECT id FROM operations WHERE finished_at IS NOT NULL AND finished_at < ?1
                   AND state IN {FINISHED_SQL}
                 ORDER BY finished_at LIMIT ?2"
            ))?
            .query_map(params![before, max_operations as i64], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut pruned = Pruned::default();
        for id in &ids {
            pruned.jobs += tx
                .prepare_cached("DELETE FROM jobs WHERE operation = ?1")?
                .execute(params![id])?;
            pruned.operations += tx
                .prepare_cached("DELETE FROM operations WHERE id = ?1")?
                .execute(params![id])?;
        }
        pruned.events = tx
            .prepare_cached(
                "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE unix_ms < ?1
                   AND seq < (SELECT MAX(seq) FROM events) ORDER BY seq LIMIT ?2)",
            )?
            .execute(params![before, max_events as i64])?;
        tx.commit()?;
        Ok(pruned)
    }

    fn reader(&self) -> Result<Box<dyn StoreRead>, StoreError> {
        let conn = Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        Ok(Box::new(SqliteStore {
            conn,
            incarnation: self.incarnation,
            path: self.path.clone(),
            _lock: None,
        }))
    }
}

impl StoreRead for SqliteStore {
    fn operation(&self, id: &str) -> Result<Option<(StoredOperation, Vec<StoredJob>)>, StoreError> {
        let op = self
            .conn
            .prepare_cached(&format!(
                "SELECT {OPERATION_COLUMNS} FROM operations WHERE id = ?1"
            ))?
            .query_row(params![id], stored_operation)
            .optional()?;
        let Some(op) = op else {
            return Ok(None);
        };
        let jobs = self
            .conn
            .prepare_cached(
                "SELECT id, operation, record, stdout_tail, stderr_tail FROM jobs
                 WHERE operation = ?1 ORDER BY rowid",
            )?
            .query_map(params![id], stored_job)?
            .collect::<Result<_, _>>()?;
        Ok(Some((op, jobs)))
    }

    fn operation_state(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT state FROM operations WHERE id = ?1")?
            .query_row(params![id], |r| r.get(0))
            .optional()?)
    }

    fn operations(&self, filter: &OperationFilter) -> Result<Vec<StoredOperation>, StoreError> {
        use rusqlite::types::Value as V;
        let mut sql = format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE 1");
        let mut args: Vec<V> = Vec::new();
        let mut list = |sql: &mut String, column: &str, values: &[String]| {
            sql.push_str(&format!(" AND {column} IN ("));
            for (i, v) in values.iter().enumerate() {
                args.push(V::Text(v.clone()));
                sql.push_str(&format!("{}?{}", if i > 0 { "," } else { "" }, args.len()));
            }
            sql.push(')');
        };
        if !filter.states.is_empty() {
            list(&mut sql, "state", &filter.states);
        }
        if let Some(pools) = &filter.pools {
            list(&mut sql, "pool", pools);
        }
        if let Some(user) = &filter.user {
            args.push(V::Text(user.clone()));
            sql.push_str(&format!(" AND user = ?{}", args.len()));
        }
        match filter.after.as_deref() {
            None | Some("") => {}
            Some(after) => {
                let seq: Option<i64> = self
                    .conn
                    .query_row(
                        "SELECT seq FROM operations WHERE id = ?1",
                        params![after],
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(seq) = seq else {
                    return Err(StoreError::Other(format!(
                        "operation {after:?} (the cursor `after`) does not exist"
                    )));
                };
                args.push(V::Integer(seq));
                sql.push_str(&format!(" AND seq > ?{}", args.len()));
            }
        }
        let newest = filter.after.is_none();
        sql.push_str(if newest {
            " ORDER BY seq DESC"
        } else {
            " ORDER BY seq"
        });
        args.push(V::Integer(filter.limit.min(i64::MAX as usize) as i64));
        sql.push_str(&format!(" LIMIT ?{}", args.len()));
        let mut rows: Vec<StoredOperation> = self
            .conn
            .prepare_cached(&sql)?
            .query_map(rusqlite::params_from_iter(args), stored_operation)?
            .collect::<Result<_, _>>()?;
        if newest {
            rows.reverse();
        }
        Ok(rows)
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

    fn events(&self, filter: &EventFilter) -> Result<Vec<StoredEvent>, StoreError> {
        let mut sql = String::from(
            "SELECT seq, unix_ms, kind, operation, node, job, record FROM events WHERE 1",
        );
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut arg = |sql: &mut String, clause: &str, v: rusqlite::types::Value| {
            args.push(v);
            sql.push_str(&clause.replace('?', &format!("?{}", args.len())));
        };
        use rusqlite::types::Value as V;
        if let Some(op) = &filter.operation {
            arg(&mut sql, " AND operation = ?", V::Text(op.clone()));
        }
        if let Some(node) = &filter.node {
            arg(&mut sql, " AND node = ?", V::Text(node.clone()));
        }
        if let Some(job) = &filter.job {
            arg(&mut sql, " AND job = ?", V::Text(job.clone()));
        }
        if !filter.kinds.is_empty() {
            sql.push_str(" AND kind IN (");
            for (i, k) in filter.kinds.iter().enumerate() {
                if i > 0 {
                    sql.push(',');
                }
                arg(&mut sql, "?", V::Text(k.clone()));
            }
            sql.push(')');
        }
        if let Some(t) = filter.since_unix_ms {
            arg(&mut sql, " AND unix_ms >= ?", V::Integer(t as i64));
        }
        if let Some(seq) = filter.after_seq {
            arg(&mut sql, " AND seq > ?", V::Integer(seq as i64));
        }
        let newest = filter.since_unix_ms.is_none() && filter.after_seq.is_none();
        sql.push_str(if newest {
            " ORDER BY seq DESC"
        } else {
            " ORDER BY seq"
        });
        arg(&mut sql, " LIMIT ?", V::Integer(filter.limit as i64));
        let mut rows: Vec<StoredEvent> = self
            .conn
            .prepare(&sql)?
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok(StoredEvent {
                    seq: r.get::<_, i64>(0)? as u64,
                    unix_ms: r.get::<_, i64>(1)? as u64,
                    kind: r.get(2)?,
                    operation: r.get(3)?,
                    node: r.get(4)?,
                    job: r.get(5)?,
                    record: r.get(6)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        if newest {
            rows.reverse();
        }
        Ok(rows)
    }
}

/// SQLite only: the lock file and migrations from older SQLite stores. What every store does is
/// checked against this one and the others by the conformance suite (`tests/conformance/`).
#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str, config: &str, is_default: bool) -> StoredTree {
        StoredTree {
            name: name.into(),
            config: config.into(),
            is_default,
        }
    }

    /// One process per store: a second open is refused, naming the holder, until the first
    /// store is closed (the OS lock goes with it, so a killed server leaves no stale lock).
    /// The writing connection's tuning (see `open_with`): a large page cache and rare
    /// checkpoints.
    #[test]
    fn the_writing_connection_has_a_large_cache_and_rare_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let pragma = |name: &str| -> i64 {
            store
                .conn
                .pragma_query_value(None, name, |r| r.get(0))
                .unwrap()
        };
        assert_eq!(pragma("cache_size"), WRITER_CACHE_KIB);
        assert_eq!(pragma("wal_autocheckpoint"), WAL_CHECKPOINT_PAGES);
    }

    #[test]
    fn a_store_in_use_is_not_opened_twice() {
        let dir = tempfile::tempdir().unwrap();
        let first = SqliteStore::open(dir.path()).unwrap();
        let e = SqliteStore::open(dir.path()).unwrap_err();
        let message = e.to_string();
        assert!(matches!(e, StoreError::Locked { .. }), "{message}");
        assert!(
            message.contains("in use by another fairsched server")
                && message.contains(&format!("pid {}", std::process::id()))
                && message.contains("--data-dir"),
            "{message}"
        );
        drop(first);
        let again = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(again.load().unwrap().incarnation, 1);
    }

    /// A data directory whose database was deleted while its server was stopped is not
    /// started empty (that would kill every running job as unknown and reuse ids); one whose
    /// lock file is removed too is a new store. A file as the data directory is named so.
    #[test]
    fn a_deleted_database_is_not_replaced_by_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        drop(SqliteStore::open(dir.path()).unwrap());
        for f in ["fairsched.db", "fairsched.db-wal", "fairsched.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(f));
        }
        let e = SqliteStore::open(dir.path()).unwrap_err();
        let message = e.to_string();
        assert!(matches!(e, StoreError::Missing { .. }), "{message}");
        assert!(
            message.contains("fairsched.db is missing")
                && message.contains("restore")
                && message.contains("fairsched.lock"),
            "{message}"
        );
        assert!(!SqliteStore::exists(dir.path()), "nothing was created");
        std::fs::remove_file(dir.path().join("fairsched.lock")).unwrap();
        assert_eq!(
            SqliteStore::open(dir.path())
                .unwrap()
                .load()
                .unwrap()
                .incarnation,
            0
        );

        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = SqliteStore::open(&file).unwrap_err();
        assert!(matches!(e, StoreError::NotADirectory { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "the data directory {} is not a directory: give data_dir (--data-dir) a directory",
                file.display()
            )
        );
    }

    /// Opening on a full disk names the directory, the option and what to check (SQLite's
    /// own words for it are "disk I/O error").
    #[test]
    fn an_open_that_fails_names_the_data_dir() {
        let full = StoreError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_SHMMAP),
            Some("disk I/O error".into()),
        ));
        let e = opening_failed(Path::new("/var/lib/fairsched"), full).to_string();
        assert_eq!(
            e,
            "store: cannot open /var/lib/fairsched (data_dir): disk I/O error; is its disk \
             full or read-only? (`df -h`, `mount`)"
        );
        let other = StoreError::TooNew { found: 9, known: 5 };
        assert!(
            opening_failed(Path::new("/x"), other)
                .to_string()
                .starts_with("store: schema")
        );
    }

    #[test]
    fn migrates_version_1_events() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A store as version 1 left it.
            let conn = Connection::open(dir.path().join("fairsched.db")).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version (version) VALUES (1);",
            )
            .unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute(
                "INSERT INTO events (unix_ms, record) VALUES (7, ?1)",
                params![r#"{"t_ms":1,"event":"allocation_started","operation":"a","node":"n1","allocation":3}"#],
            )
            .unwrap();
        }
        let s = SqliteStore::open(dir.path()).unwrap();
        let events = s
            .events(&EventFilter {
                operation: Some("a".into()),
                limit: 10,
                ..EventFilter::default()
            })
            .unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, "allocation_started");
        assert_eq!(events[0].node.as_deref(), Some("n1"));
        assert_eq!(events[0].seq, 1);
        assert_eq!(s.load().unwrap().last_event_seq, 1);
    }

    #[test]
    fn migrates_a_version_2_tree_to_the_default() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A store as version 2 left it: one tree, the server's default one.
            let conn = Connection::open(dir.path().join("fairsched.db")).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version (version) VALUES (1), (2);",
            )
            .unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.execute(
                "INSERT INTO pool_trees (tree, config) VALUES ('main', '{}')",
                [],
            )
            .unwrap();
        }
        let s = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(s.load().unwrap().trees, vec![tree("main", "{}", true)]);
        // An empty version-2 store migrates too.
        let empty = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(empty.path().join("fairsched.db")).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version (version) VALUES (1), (2);",
            )
            .unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
        }
        let s = SqliteStore::open(empty.path()).unwrap();
        assert_eq!(s.load().unwrap().trees, vec![]);
        assert_eq!(SqliteStore::schema_version(), 4);
    }

    #[test]
    fn migrates_version_3_operations_with_their_filter_columns() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join("fairsched.db")).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version (version) VALUES (1), (2), (3);",
            )
            .unwrap();
            for m in &MIGRATIONS[..3] {
                conn.execute_batch(m).unwrap();
            }
            conn.execute(
                "INSERT INTO operations (id, state, record) VALUES ('x', 'completed', ?1),
                   ('y', 'running', ?2)",
                params![
                    r#"{"id":"x","pool":"p","user":"u","finished_at":77}"#,
                    r#"{"id":"y","pool":"q","user":"v","finished_at":null}"#
                ],
            )
            .unwrap();
        }
        let s = SqliteStore::open(dir.path()).unwrap();
        let (x, _) = s.operation("x").unwrap().unwrap();
        assert_eq!(
            (x.pool.as_str(), x.user.as_str(), x.finished_at),
            ("p", "u", Some(77))
        );
        let loaded = s.load().unwrap();
        assert_eq!(loaded.operations.len(), 1);
        assert_eq!(loaded.operations[0].pool, "q");
        assert_eq!(loaded.operations[0].finished_at, None);
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
