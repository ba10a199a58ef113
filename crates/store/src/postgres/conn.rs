//! One connection to PostgreSQL: opened from the store's URL, opened again after it was lost,
//! statements prepared once per connection, transactions, and errors in user words.

use crate::StoreError;
use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};
use std::collections::HashMap;
use std::time::Duration;

/// How long opening a connection may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a session of the store may sit in an open transaction between two statements
/// before PostgreSQL ends it (`idle_in_transaction_session_timeout`), when the URL does not set
/// it. A write's transaction holds the leader row until it ends, which holds off an election:
/// a leader frozen mid-transaction (a paused process, a machine that stopped) would otherwise
/// keep every standby from being elected for as long as its connection stays open. Its
/// transaction is rolled back, and it is deposed like any leader whose lease ran out.
pub(super) const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a store is: its connection settings and the URL without the password, for messages.
#[derive(Clone)]
pub(super) struct Target {
    pub config: postgres::Config,
    /// `postgres://user@host:port/db`.
    pub shown: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Target {
    /// Reads a `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` URL (or a key=value string).
    pub fn parse(url: &str) -> Result<Target, StoreError> {
        let mut config: postgres::Config =
            url.parse()
                .map_err(|e: postgres::Error| StoreError::BadUrl {
                    reason: e.to_string(),
                })?;
        if config.get_hosts().is_empty() {
            return Err(StoreError::BadUrl {
                reason: "it names no host".into(),
            });
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("fairsched");
        }
        let options = config.get_options().unwrap_or("").to_string();
        if !options.contains("idle_in_transaction_session_timeout") {
            config.options(
                format!(
                    "{options} -c idle_in_transaction_session_timeout={}",
                    IDLE_IN_TRANSACTION_TIMEOUT.as_millis()
                )
                .trim(),
            );
        }
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(host, port)| match host {
                postgres::config::Host::Tcp(h) => format!("{h}:{port}"),
                postgres::config::Host::Unix(p) => format!("{}:{port}", p.display()),
            })
            .collect();
        let shown = format!(
            "postgres://{}@{}/{}",
            config.get_user().unwrap_or(""),
            hosts.join(","),
            config.get_dbname().unwrap_or("")
        );
        Ok(Target { config, shown })
    }
}

/// What went wrong with a request, in user words.
pub(crate) fn describe(e: &postgres::Error) -> String {
    use postgres::error::SqlState;
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            return format!(
                "authentication failed ({}): check the user and password in the URL, and the \
                 server's pg_hba.conf",
                db.message()
            );
        }
        if *code == SqlState::INVALID_CATALOG_NAME {
            return format!("{} (create it first: createdb)", db.message());
        }
        if *code == SqlState::TOO_MANY_CONNECTIONS {
            return format!("the server has no connection left: {}", db.message());
        }
        return format!("{} (SQLSTATE {})", db.message(), code.code());
    }
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    if let Some(io) = io {
        return match io.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "the connection was refused: is PostgreSQL running and listening there?".into()
            }
            std::io::ErrorKind::TimedOut => {
                "no answer in time: is the address right and the server reachable?".into()
            }
            _ => format!("{e}: {io}"),
        };
    }
    if e.is_closed() {
        return "the connection to PostgreSQL was lost".into();
    }
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> StoreError {
        StoreError::Postgres(describe(&e))
    }
}

/// Runs `f` where the synchronous client may block: the client runs a runtime of its own,
/// which cannot start on a thread that drives an async runtime (the server's actor), so there
/// it runs on a scoped thread of its own.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// How long a connection may take to answer the probe after a failed request.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// An open connection and the statements prepared on it.
pub(super) struct Session {
    client: Client,
    statements: HashMap<String, Statement>,
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl Session {
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        let s = self.statement(sql)?;
        Ok(self.client.query(&s, params)?)
    }

    pub fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>, StoreError> {
        let s = self.statement(sql)?;
        Ok(self.client.query_opt(&s, params)?)
    }

    pub fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let s = self.statement(sql)?;
        Ok(self.client.execute(&s, params)?)
    }

    /// Statements without parameters or results (several, `;`-separated).
    pub fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        Ok(self.client.batch_execute(sql)?)
    }

    /// Runs `f` in a transaction (`begin`: `BEGIN` and its modes): committed when `f`
    /// returns `Ok`, rolled back otherwise.
    pub fn transaction<T>(
        &mut self,
        begin: &str,
        f: impl FnOnce(&mut Session) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.batch(begin)?;
        match f(self) {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                // A lost connection has no transaction left to roll back.
                let _ = self.client.batch_execute("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// A connection to the store's database, opened again when it was lost.
pub(super) struct Conn {
    target: Target,
    /// Sessions of this connection are read-only (a store's reader).
    read_only: bool,
    session: Option<Session>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("target", &self.target)
            .field("read_only", &self.read_only)
            .field("open", &self.session.is_some())
            .finish()
    }
}

impl Drop for Conn {
    /// Closing a connection blocks too (it says goodbye to the server): off the runtime.
    fn drop(&mut self) {
        let session = self.session.take();
        off_runtime(move || drop(session));
    }
}

impl Conn {
    /// Connects now (an unreachable server, a wrong password or a missing database is an
    /// error here, not at the first request).
    pub fn open(target: Target, read_only: bool) -> Result<Conn, StoreError> {
        let mut conn = Conn {
            target,
            read_only,
            session: None,
        };
        conn.run(|_| Ok(()))?;
        Ok(conn)
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs the read `f` as [`Conn::run`] does, and once more on a new connection if the one
    /// it found was lost (a server restart, a failover, an idle connection closed): a read
    /// is safe to repeat, a write is not (it may have committed before the loss).
    pub fn read<T: Send>(
        &mut self,
        f: impl Fn(&mut Session) -> Result<T, StoreError> + Sync,
    ) -> Result<T, StoreError> {
        let had_session = self.session.is_some();
        match self.run(&f) {
            Err(StoreError::Postgres(_)) if had_session && self.session.is_none() => self.run(&f),
            result => result,
        }
    }

    /// Runs `f` on the session, connecting first if there is none (the last one was lost).
    pub fn run<T: Send>(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        let Conn {
            target,
            read_only,
            session,
        } = self;
        let read_only = *read_only;
        off_runtime(move || {
            if session.as_ref().is_some_and(|s| s.client.is_closed()) {
                *session = None;
            }
            if session.is_none() {
                let mut client = target
                    .config
                    .connect(NoTls)
                    .map_err(|e| StoreError::Connect {
                        target: target.shown.clone(),
                        reason: describe(&e),
                    })?;
                if read_only {
                    client.batch_execute("SET default_transaction_read_only = on")?;
                }
                *session = Some(Session {
                    client,
                    statements: HashMap::new(),
                });
            }
            let s = session.as_mut().expect("connected above");
            let result = f(s);
            // A connection the server ended may not look closed yet when the request that
            // met the end fails (the next request would then fail too): after an error, one
            // that does not answer a probe is dropped, for the next request to reconnect.
            if s.client.is_closed()
                || (result.is_err() && s.client.is_valid(PROBE_TIMEOUT).is_err())
            {
                *session = None;
            }
            result
        })
    }
}
