//! Tests only (feature `testkit`): a real PostgreSQL server of their own.
//!
//! [`TempPostgres::start`] runs Debian's `initdb` into a temporary directory and starts
//! `postgres` there, listening on 127.0.0.1 on a free port (its Unix socket in the same
//! directory), and waits until it accepts connections; dropping it stops the server by its
//! PID (SIGTERM, then SIGKILL) and removes the directory, also when a test panics; should the
//! test process die without unwinding, the server gets SIGKILL (`setpriv --pdeathsig`), as it
//! does when the thread that started it ends: keep a server in the thread that started it.
//! PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user (which
//! Debian's package creates). The binaries are the newest of `/usr/lib/postgresql/*/bin`, or those in
//! `$FAIRSCHED_POSTGRES_BIN`.

use crate::postgres::conn::describe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The server's superuser, trusted on 127.0.0.1; every other role logs in with a password.
pub const SUPERUSER: &str = "fairsched";

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long it may take to stop after SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL server started for a test; stopped when dropped.
#[derive(Debug)]
pub struct TempPostgres {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    databases: AtomicU32,
}

/// The directory of the PostgreSQL binaries to run.
fn binaries() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("FAIRSCHED_POSTGRES_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let root = Path::new("/usr/lib/postgresql");
    let newest = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("postgres").is_file() && bin.join("initdb").is_file())
                .then_some((version, bin))
        })
        .max();
    newest.map(|(_, bin)| bin).ok_or_else(|| {
        "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: install Debian's \
         `postgresql` package (scripts/test.sh does), or set FAIRSCHED_POSTGRES_BIN"
            .to_string()
    })
}

/// Who runs the server: `None` for this process's user, the `postgres` user as root.
fn server_user() -> Result<Option<nix::unistd::User>, String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("postgres") {
        Ok(Some(user)) => Ok(Some(user)),
        Ok(None) => Err(
            "PostgreSQL refuses to run as root and there is no `postgres` user \
                         to run it as (Debian's postgresql package creates it)"
                .into(),
        ),
        Err(e) => Err(format!("cannot look up the `postgres` user: {e}")),
    }
}

/// A command run as `user` (this process's user when `None`) through `setpriv`, which also
/// has it killed if this thread ends first (a test process that aborts runs no destructor).
fn command(bin: &Path, user: Option<&nix::unistd::User>) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--pdeathsig", "KILL"]);
    if let Some(user) = user {
        c.arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .arg("--init-groups");
    }
    c.arg("--").arg(bin).stdin(Stdio::null());
    c
}

fn chown(path: &Path, user: Option<&nix::unistd::User>) -> Result<(), String> {
    match user {
        Some(u) => std::os::unix::fs::chown(path, Some(u.uid.as_raw()), Some(u.gid.as_raw()))
            .map_err(|e| format!("cannot give {} to {}: {e}", path.display(), u.name)),
        None => Ok(()),
    }
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

/// The last lines of the server's log, for an error.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn url(port: u16, db: &str) -> String {
    format!("postgres://{SUPERUSER}@127.0.0.1:{port}/{db}")
}

/// Waits until the server accepts connections.
fn wait_ready(child: &mut Child, port: u16, log: &Path) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "postgres exited ({status}) before it accepted connections:\n{}",
                log_tail(log)
            ));
        }
        if postgres::Client::connect(&url(port, "postgres"), postgres::NoTls).is_ok() {
            return Ok(());
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(format!(
                "postgres did not accept connections within {START_TIMEOUT:?}:\n{}",
                log_tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the server by its PID: SIGTERM, and SIGKILL if it has not exited in time.
fn stop(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl TempPostgres {
    /// Creates a cluster in a temporary directory and starts its server (see the module).
    pub fn start() -> Result<TempPostgres, String> {
        let bin = binaries()?;
        let user = server_user()?;
        let dir = tempfile::Builder::new()
            .prefix("fairsched-postgres-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        chown(dir.path(), user.as_ref())?;
        let data = dir.path().join("data");
        let initdb = command(&bin.join("initdb"), user.as_ref())
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale"])
            .args(["--no-sync", "--no-instructions"])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.join("initdb").display()))?;
        if !initdb.status.success() {
            return Err(format!(
                "initdb failed ({}): {}{}",
                initdb.status,
                String::from_utf8_lossy(&initdb.stdout),
                String::from_utf8_lossy(&initdb.stderr)
            ));
        }
        let hba = data.join("pg_hba.conf");
        std::fs::write(
            &hba,
            format!(
                "local all all trust\nhost all {SUPERUSER} 127.0.0.1/32 trust\n\
                 host all all 127.0.0.1/32 scram-sha-256\n"
            ),
        )
        .map_err(|e| format!("cannot write {}: {e}", hba.display()))?;
        chown(&hba, user.as_ref())?;
        let log = dir.path().join("postgres.log");
        let mut last_error = String::new();
        // A free port may be taken before the server binds it: then another one.
        for _ in 0..3 {
            let port = free_port()?;
            let log_file = std::fs::File::create(&log)
                .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
            chown(&log, user.as_ref())?;
            let err_file = log_file
                .try_clone()
                .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
            let mut child = command(&bin.join("postgres"), user.as_ref())
                .arg("-D")
                .arg(&data)
                .arg("-p")
                .arg(port.to_string())
                .arg("-k")
                .arg(dir.path())
                .args(["-c", "listen_addresses=127.0.0.1"])
                // A test's data need not survive a crash of the machine.
                .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
                .args(["-c", "full_page_writes=off", "-c", "shared_buffers=16MB"])
                .args(["-c", "max_connections=50"])
                .stdout(log_file)
                .stderr(err_file)
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", bin.join("postgres").display()))?;
            match wait_ready(&mut child, port, &log) {
                Ok(()) => {
                    return Ok(TempPostgres {
                        child,
                        port,
                        dir,
                        databases: AtomicU32::new(0),
                    });
                }
                Err(e) => {
                    stop(&mut child);
                    last_error = e;
                    if !log_tail(&log).contains("could not bind") {
                        break;
                    }
                }
            }
        }
        Err(last_error)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The URL of database `db` for the superuser.
    pub fn url(&self, db: &str) -> String {
        url(self.port, db)
    }

    /// The temporary directory (the cluster's data is in `data/`, its log `postgres.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A connection to database `db` as the superuser.
    pub fn client(&self, db: &str) -> Result<postgres::Client, String> {
        postgres::Client::connect(&self.url(db), postgres::NoTls).map_err(|e| describe(&e))
    }

    /// Runs `sql` (statements without results) in database `db` as the superuser.
    pub fn execute(&self, db: &str, sql: &str) -> Result<(), String> {
        self.client(db)?
            .batch_execute(sql)
            .map_err(|e| format!("{sql}: {}", describe(&e)))
    }

    /// Creates a new, empty database and returns its name.
    pub fn create_database(&self) -> Result<String, String> {
        let n = self.databases.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("test{n}");
        self.execute("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(name)
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
