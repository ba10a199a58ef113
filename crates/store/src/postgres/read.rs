//! The PostgreSQL store's reads, on the store's connection or a reader's own.

use super::conn::{Conn, Session, Target};
use super::{FINISHED_SQL, big, lock};
use crate::{
    EventFilter, Loaded, OperationFilter, StoreError, StoreRead, StoredEvent, StoredJob,
    StoredNode, StoredOperation, StoredTree,
};
use postgres::Row;
use postgres::types::ToSql;
use std::sync::Mutex;

const OPERATION_COLUMNS: &str = "id, state, pool, user_name, finished_at, record";

const JOB_COLUMNS: &str = "id, operation, record, stdout_tail, stderr_tail";

fn stored_operation(r: &Row) -> StoredOperation {
    StoredOperation {
        id: r.get(0),
        state: r.get(1),
        pool: r.get(2),
        user: r.get(3),
        finished_at: r.get::<_, Option<i64>>(4).map(|t| t.max(0) as u64),
        record: r.get(5),
    }
}

/// Output tails are bytes of UTF-8 text (`bytea`, see the module's doc).
fn text(bytes: Option<Vec<u8>>) -> Option<String> {
    bytes.map(|b| {
        String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
    })
}

fn stored_job(r: &Row) -> StoredJob {
    StoredJob {
        id: r.get(0),
        operation: r.get(1),
        record: r.get(2),
        stdout_tail: text(r.get(3)),
        stderr_tail: text(r.get(4)),
    }
}

/// What the server restores, read in one snapshot of the database.
pub(super) fn load(s: &mut Session, incarnation: u64) -> Result<Loaded, StoreError> {
    s.transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", |s| {
        let trees = s
            .query(
                "SELECT tree, config, is_default FROM pool_trees ORDER BY tree",
                &[],
            )?
            .iter()
            .map(|r| StoredTree {
                name: r.get(0),
                config: r.get(1),
                is_default: r.get(2),
            })
            .collect();
        let operations = s
            .query(
                &format!(
                    "SELECT {OPERATION_COLUMNS} FROM operations
                         WHERE state <> ALL({FINISHED_SQL}) ORDER BY seq"
                ),
                &[],
            )?
            .iter()
            .map(stored_operation)
            .collect();
        let jobs = s
            .query(
                &format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE operation IN
                           (SELECT id FROM operations WHERE state <> ALL({FINISHED_SQL}))
                         ORDER BY seq"
                ),
                &[],
            )?
            .iter()
            .map(stored_job)
            .collect();
        let nodes = s
            .query("SELECT id, record FROM nodes ORDER BY id", &[])?
            .iter()
            .map(|r| StoredNode {
                id: r.get(0),
                record: r.get(1),
            })
            .collect();
        let last_event_seq: i64 = s
            .query_opt("SELECT COALESCE(MAX(seq), 0) FROM events", &[])?
            .map_or(0, |r| r.get(0));
        Ok(Loaded {
            trees,
            operations,
            jobs,
            nodes,
            incarnation,
            last_event_seq: last_event_seq.max(0) as u64,
        })
    })
}

pub(super) fn operation(
    s: &mut Session,
    id: &str,
) -> Result<Option<(StoredOperation, Vec<StoredJob>)>, StoreError> {
    let Some(op) = s.query_opt(
        &format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE id = $1"),
        &[&id],
    )?
    else {
        return Ok(None);
    };
    let jobs = s
        .query(
            &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE operation = $1 ORDER BY seq"),
            &[&id],
        )?
        .iter()
        .map(stored_job)
        .collect();
    Ok(Some((stored_operation(&op), jobs)))
}

pub(super) fn operation_state(s: &mut Session, id: &str) -> Result<Option<String>, StoreError> {
    Ok(
        s.query_opt("SELECT state FROM operations WHERE id = $1", &[&id])?
            .map(|r| r.get(0)),
    )
}

/// A query's conditions and their arguments, numbered as they are added.
#[derive(Default)]
struct Query {
    sql: String,
    args: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Query {
    /// Adds ` AND {clause}` with `$` standing for the argument `v`.
    fn and(&mut self, clause: &str, v: impl ToSql + Sync + Send + 'static) {
        self.args.push(Box::new(v));
        self.sql.push_str(" AND ");
        self.sql
            .push_str(&clause.replace('$', &format!("${}", self.args.len())));
    }

    fn run(self, s: &mut Session) -> Result<Vec<Row>, StoreError> {
        let args: Vec<&(dyn ToSql + Sync)> = self
            .args
            .iter()
            .map(|a| a.as_ref() as &(dyn ToSql + Sync))
            .collect();
        s.query(&self.sql, &args)
    }
}

pub(super) fn operations(
    s: &mut Session,
    filter: &OperationFilter,
) -> Result<Vec<StoredOperation>, StoreError> {
    let mut q = Query {
        sql: format!("SELECT {OPERATION_COLUMNS} FROM operations WHERE TRUE"),
        ..Query::default()
    };
    if !filter.states.is_empty() {
        q.and("state = ANY($)", filter.states.clone());
    }
    if let Some(pools) = &filter.pools {
        q.and("pool = ANY($)", pools.clone());
    }
    if let Some(user) = &filter.user {
        q.and("user_name = $", user.clone());
    }
    match filter.after.as_deref() {
        None | Some("") => {}
        Some(after) => {
            let Some(row) = s.query_opt("SELECT seq FROM operations WHERE id = $1", &[&after])?
            else {
                return Err(StoreError::Other(format!(
                    "operation {after:?} (the cursor `after`) does not exist"
                )));
            };
            q.and("seq > $", row.get::<_, i64>(0));
        }
    }
    let newest = filter.after.is_none();
    q.sql.push_str(if newest {
        " ORDER BY seq DESC"
    } else {
        " ORDER BY seq"
    });
    q.args.push(Box::new(big(filter.limit as u64)));
    q.sql.push_str(&format!(" LIMIT ${}", q.args.len()));
    let mut rows: Vec<StoredOperation> = q.run(s)?.iter().map(stored_operation).collect();
    if newest {
        rows.reverse();
    }
    Ok(rows)
}

pub(super) fn job_logs(
    s: &mut Session,
    operation: &str,
) -> Result<Vec<(String, String, String)>, StoreError> {
    Ok(s.query(
        "SELECT id, stdout_tail, stderr_tail FROM jobs WHERE operation = $1 ORDER BY seq",
        &[&operation],
    )?
    .iter()
    .map(|r| {
        (
            r.get(0),
            text(r.get(1)).unwrap_or_default(),
            text(r.get(2)).unwrap_or_default(),
        )
    })
    .collect())
}

pub(super) fn events(
    s: &mut Session,
    filter: &EventFilter,
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut q = Query {
        sql: "SELECT seq, unix_ms, kind, operation, node, job, record FROM events WHERE TRUE"
            .into(),
        ..Query::default()
    };
    if let Some(op) = &filter.operation {
        q.and("operation = $", op.clone());
    }
    if let Some(node) = &filter.node {
        q.and("node = $", node.clone());
    }
    if let Some(job) = &filter.job {
        q.and("job = $", job.clone());
    }
    if !filter.kinds.is_empty() {
        q.and("kind = ANY($)", filter.kinds.clone());
    }
    if let Some(t) = filter.since_unix_ms {
        q.and("unix_ms >= $", big(t));
    }
    if let Some(seq) = filter.after_seq {
        q.and("seq > $", big(seq));
    }
    let newest = filter.since_unix_ms.is_none() && filter.after_seq.is_none();
    q.sql.push_str(if newest {
        " ORDER BY seq DESC"
    } else {
        " ORDER BY seq"
    });
    q.args.push(Box::new(big(filter.limit as u64)));
    q.sql.push_str(&format!(" LIMIT ${}", q.args.len()));
    let mut rows: Vec<StoredEvent> = q
        .run(s)?
        .iter()
        .map(|r| StoredEvent {
            seq: r.get::<_, i64>(0).max(0) as u64,
            unix_ms: r.get::<_, i64>(1).max(0) as u64,
            kind: r.get(2),
            operation: r.get(3),
            node: r.get(4),
            job: r.get(5),
            record: r.get(6),
        })
        .collect();
    if newest {
        rows.reverse();
    }
    Ok(rows)
}

/// A [`crate::PostgresStore`]'s reader: a read-only connection of its own.
#[derive(Debug)]
pub(super) struct Reader {
    conn: Mutex<Conn>,
}

impl Reader {
    pub fn open(target: Target) -> Result<Reader, StoreError> {
        Ok(Reader {
            conn: Mutex::new(Conn::open(target, true)?),
        })
    }
}

impl StoreRead for Reader {
    fn operation(&self, id: &str) -> Result<Option<(StoredOperation, Vec<StoredJob>)>, StoreError> {
        lock(&self.conn).read(|s| operation(s, id))
    }

    fn operation_state(&self, id: &str) -> Result<Option<String>, StoreError> {
        lock(&self.conn).read(|s| operation_state(s, id))
    }

    fn operations(&self, filter: &OperationFilter) -> Result<Vec<StoredOperation>, StoreError> {
        lock(&self.conn).read(|s| operations(s, filter))
    }

    fn job_logs(&self, operation: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        lock(&self.conn).read(|s| job_logs(s, operation))
    }

    fn events(&self, filter: &EventFilter) -> Result<Vec<StoredEvent>, StoreError> {
        lock(&self.conn).read(|s| events(s, filter))
    }
}
