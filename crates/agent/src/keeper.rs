//! The job spawner and the job keepers: the processes between the agent and its jobs, so that
//! a job's whole process tree ends with the job, with an abort, with the agent, and when the
//! agent's lease runs out.
//!
//! * **The spawner** is one small process per agent (`fairsched-job-keeper __job-spawner ...`,
//!   or `fairsched __job-spawner ...`), started once by the agent. It has one thread, so for
//!   each job it forks a keeper without executing a program: a job costs a fork of a small
//!   process and the job's own exec, not the exec of a keeper program (about 0.7 ms of CPU per
//!   job on the machine of BENCHMARKS.md). The agent sends it [`Request`]s on its stdin (start
//!   a job, kill one, signal one); the spawner and its keepers write [`Report`]s on its
//!   stdout, one line each, prefixed with the job's key (the keeper's PID, the job's PID,
//!   `fenced`, why the job could not start, and from the spawner, which reaps the keepers, how
//!   each keeper exited). The spawner ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT; it exits
//!   at the end of its stdin (the agent exited, however), and then every keeper sees the end
//!   of its control pipe and kills its job.
//! * **A keeper** is a child subreaper (`PR_SET_CHILD_SUBREAPER`): every process the job leaves
//!   behind (a background child, one that called `setsid`, one whose parent exited) is
//!   reparented to it, so "the job's processes" are exactly its descendants, found through
//!   `/proc`. It runs the job's command as its child, in the job's directory, in a process
//!   group of its own (the job's `$$`, as before), and reports the child's PID.
//! * When the job's main process exits, when the agent says so (`k` on the keeper's control
//!   pipe), when the spawner is gone (the end of that pipe: the agent exited or was killed,
//!   however) or when the agent's lease has run out (below), the keeper sends SIGTERM to
//!   every descendant and SIGKILL to every one left after the grace period, until none is
//!   left; then it exits as the job's main process did (its exit code, or the same signal),
//!   which is what the spawner reports.
//! * The lease (self-fencing): after each heartbeat the server accepted, the agent writes to
//!   `<work dir>/state/lease` when its jobs must be killed if no later heartbeat is accepted
//!   (times on `CLOCK_BOOTTIME`, which every process of the machine shares and which counts a
//!   suspended machine's time; see [`Lease`]). A keeper reads it every [`LEASE_CHECK`]; past its
//!   time it reports `fenced` and kills the job's tree, SIGKILL by the lease's kill
//!   time. The agent sets both well before the server's `node_timeout_ms` runs out since the
//!   heartbeat's sending: a stopped, hung or cut-off agent's jobs are dead before the server
//!   can run them again elsewhere. It runs in the keeper, not in the agent, because a stopped
//!   agent cannot act.
//! * Interruptions: `s N` on the control pipe sends signal N to the job's process group.
//! * Output: the job's stdout and stderr go through pipes to the keeper, which writes them to
//!   the job's files, at most `max_output` bytes each (the first ones); past that it writes a
//!   line saying so and reads on, discarding the rest: the job is not stopped for it.
//!
//! Keepers ignore the signals the spawner ignores (a unit's stop, a terminal's Ctrl-C: the
//! agent's end tells them to clean up); the job's command starts with the default dispositions
//! and an empty signal mask.
//!
//! `__job-keeper` runs one keeper on its own, its control on its stdin and its reports
//! without a key on its stdout: the way agents before the spawner ran each job, kept so that
//! such an agent still running when this version's programs are installed over its own goes
//! on starting jobs until it is restarted.

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, killpg, signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::{ForkResult, Pid};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The first argument that makes `fairsched` (or `fairsched-job-keeper`) an agent's job
/// spawner: `PROGRAM __job-spawner LEASE GRACE_MS MAX_OUTPUT` (see [`spawner_args`]).
pub const SPAWNER_ARG: &str = "__job-spawner";

/// The first argument that makes `fairsched` (or `fairsched-job-keeper`) one job's keeper on
/// its own: `PROGRAM __job-keeper LEASE GRACE_MS STDOUT STDERR MAX_OUTPUT -- COMMAND...`
/// (what agents before the spawner ran for each job).
pub const KEEPER_ARG: &str = "__job-keeper";

/// The keeper's own program, installed beside `fairsched` (agents prefer it: it starts
/// faster).
pub const KEEPER_PROGRAM: &str = "fairsched-job-keeper";

/// How often a keeper reads the lease.
pub const LEASE_CHECK: Duration = Duration::from_millis(100);

/// Signals the keeper ignores (and its job's command gets back at their defaults).
const IGNORED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Nanoseconds of `CLOCK_BOOTTIME`.
pub fn boottime_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// When a node's jobs are killed unless a heartbeat is accepted again, on `CLOCK_BOOTTIME`
/// ([`boottime_ns`]): SIGTERM at `term_ns`, SIGKILL at `kill_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub term_ns: u64,
    pub kill_ns: u64,
}

impl Lease {
    /// The lease of a heartbeat sent at `sent_ns` that the server accepted, for a server
    /// that loses a silent node after `node_timeout` and jobs given `grace` between SIGTERM
    /// and SIGKILL: everything is killed by nine tenths of the node timeout since the
    /// heartbeat was sent (the server saw it later, so it waits longer), and SIGTERM comes
    /// the grace period before that, but at most a tenth of the timeout before (a fenced job
    /// gets a shorter grace rather than an agent whose heartbeats are slow for a moment
    /// losing its jobs).
    pub fn after(sent_ns: u64, node_timeout: Duration, grace: Duration) -> Lease {
        let timeout = node_timeout.as_nanos() as u64;
        let kill_ns = sent_ns + timeout / 10 * 9;
        let term_ns = kill_ns - (grace.as_nanos() as u64).min(timeout / 10);
        Lease { term_ns, kill_ns }
    }

    /// The file's text: both times twice, fixed width, so that a reader that catches a write
    /// halfway sees the halves differ and keeps what it had.
    fn text(lease: Option<Lease>) -> String {
        match lease {
            Some(l) => format!(
                "{:020} {:020} {:020} {:020}\n",
                l.term_ns, l.kill_ns, l.term_ns, l.kill_ns
            ),
            None => format!("{:83}\n", "none"),
        }
    }

    /// What a lease file says: `Some(None)` no lease (the server does not say its node
    /// timeout), `None` unreadable.
    fn parse(text: &str) -> Option<Option<Lease>> {
        if text.trim() == "none" {
            return Some(None);
        }
        let n: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse().ok())
            .collect::<Option<_>>()?;
        match n.as_slice() {
            [t, k, t2, k2] if t == t2 && k == k2 => Some(Some(Lease {
                term_ns: *t,
                kill_ns: *k,
            })),
            _ => None,
        }
    }
}

/// The agent's end of the lease: `<work dir>/state/lease`, written in place (no new block
/// needed on a full disk).
#[derive(Debug)]
pub(crate) struct LeaseFile {
    path: PathBuf,
    file: std::fs::File,
}

impl LeaseFile {
    /// Opens (creates) the lease file and writes "no lease" to it until a registration says
    /// otherwise.
    pub(crate) fn open(path: &Path) -> std::io::Result<LeaseFile> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut lease = LeaseFile {
            path: path.to_path_buf(),
            file,
        };
        lease.write(None)?;
        Ok(lease)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn write(&mut self, lease: Option<Lease>) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(Lease::text(lease).as_bytes(), 0)
    }
}

/// What every keeper of an agent is given (the spawner's arguments after [`SPAWNER_ARG`]):
/// `LEASE GRACE_MS MAX_OUTPUT` (`LEASE` `-`: none; `MAX_OUTPUT` 0: unbounded).
#[derive(Clone, Debug)]
struct Setup {
    lease: Option<PathBuf>,
    grace: Duration,
    max_output: u64,
}

/// The spawner's arguments (after the program) for an agent whose lease is at `lease`.
pub(crate) fn spawner_args(
    lease: Option<&Path>,
    grace: Duration,
    max_output: Option<u64>,
) -> Vec<OsString> {
    vec![
        SPAWNER_ARG.into(),
        lease.map_or("-".into(), |p| p.as_os_str().to_owned()),
        grace.as_millis().to_string().into(),
        max_output.unwrap_or(0).to_string().into(),
    ]
}

fn number(s: &OsString) -> Option<u64> {
    s.to_str().and_then(|s| s.parse::<u64>().ok())
}

fn parse_setup(lease: &OsString, grace: &OsString, max_output: &OsString) -> Option<Setup> {
    Some(Setup {
        lease: (lease != "-").then(|| PathBuf::from(lease)),
        grace: Duration::from_millis(number(grace)?),
        max_output: number(max_output)?,
    })
}

/// One job for a keeper to run.
#[derive(Debug)]
struct Job {
    stdout: PathBuf,
    stderr: PathBuf,
    /// Its working directory (none: the keeper's).
    dir: Option<PathBuf>,
    command: Vec<OsString>,
    /// Set in its environment, over the spawner's.
    env: Vec<(OsString, OsString)>,
    /// The account it runs as (none: the keeper's).
    user: Option<RunAs>,
}

/// The account a job runs as (`fairsched agent --run-jobs-as-users`): its name (for its
/// groups), user id and group id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunAs {
    pub name: OsString,
    pub uid: u32,
    pub gid: u32,
}

/// What the agent asks of its spawner, on the spawner's stdin: fields each ended by a NUL
/// byte (no field can hold one: see [`Request::encode`]), the first naming the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Run a job under a new keeper, known as `key` from then on, in `dir` (which exists),
    /// its output in `dir/stdout` and `dir/stderr`.
    Start {
        key: u64,
        dir: PathBuf,
        command: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        /// None: the spawner's own user.
        user: Option<RunAs>,
    },
    /// Kill the job's processes (SIGTERM, SIGKILL after the grace period).
    Kill { key: u64 },
    /// Send `signal` to the job's process group.
    Signal { key: u64, signal: i32 },
}

impl Request {
    /// The request's bytes; an error naming the field when one holds a NUL byte (which a
    /// program's arguments, environment and paths cannot hold).
    pub(crate) fn encode(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut field = |what: &str, f: &[u8]| {
            if f.contains(&0) {
                return Err(format!("{what} holds a NUL byte"));
            }
            out.extend_from_slice(f);
            out.push(0);
            Ok(())
        };
        match self {
            Request::Start {
                key,
                dir,
                command,
                env,
                user,
            } => {
                field("", b"start")?;
                field("", key.to_string().as_bytes())?;
                field("the job's directory", dir.as_os_str().as_bytes())?;
                field("", command.len().to_string().as_bytes())?;
                for a in command {
                    field("the command", a.as_bytes())?;
                }
                field("", env.len().to_string().as_bytes())?;
                for (k, v) in env {
                    field("the environment", k.as_bytes())?;
                    field("the environment", v.as_bytes())?;
                }
                match user {
                    None => field("", b"0")?,
                    Some(u) => {
                        field("", b"1")?;
                        field("the user", u.name.as_bytes())?;
                        field("", u.uid.to_string().as_bytes())?;
                        field("", u.gid.to_string().as_bytes())?;
                    }
                }
            }
            Request::Kill { key } => {
                field("", b"kill")?;
                field("", key.to_string().as_bytes())?;
            }
            Request::Signal { key, signal } => {
                field("", b"signal")?;
                field("", key.to_string().as_bytes())?;
                field("", signal.to_string().as_bytes())?;
            }
        }
        Ok(out)
    }

    /// The first request in `buf` and how many bytes it takes; `Ok(None)` while it is not
    /// all there.
    fn decode(buf: &[u8]) -> Result<Option<(Request, usize)>, String> {
        let mut at = 0;
        // The next field, or `return Ok(None)` when it is not all there.
        macro_rules! field {
            () => {{
                let Some(len) = buf[at..].iter().position(|&b| b == 0) else {
                    return Ok(None);
                };
                let f = &buf[at..at + len];
                at += len + 1;
                f
            }};
        }
        let bad = |what: &str, f: &[u8]| {
            format!(
                "bad request from the agent: {what} {:?}",
                String::from_utf8_lossy(f)
            )
        };
        macro_rules! number {
            ($what:expr) => {{
                let f = field!();
                std::str::from_utf8(f)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad($what, f))?
            }};
        }
        let verb = field!();
        let request = match verb {
            b"start" => {
                let key = number!("key");
                let dir = PathBuf::from(OsString::from_vec(field!().to_vec()));
                let n: usize = number!("argument count");
                let mut command = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    command.push(OsString::from_vec(field!().to_vec()));
                }
                let n: usize = number!("variable count");
                let mut env = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let k = OsString::from_vec(field!().to_vec());
                    env.push((k, OsString::from_vec(field!().to_vec())));
                }
                let users: u8 = number!("user count");
                let user = match users {
                    0 => None,
                    1 => Some(RunAs {
                        name: OsString::from_vec(field!().to_vec()),
                        uid: number!("user id"),
                        gid: number!("group id"),
                    }),
                    _ => return Err(bad("user count", users.to_string().as_bytes())),
                };
                Request::Start {
                    key,
                    dir,
                    command,
                    env,
                    user,
                }
            }
            b"kill" => Request::Kill {
                key: number!("key"),
            },
            b"signal" => Request::Signal {
                key: number!("key"),
                signal: number!("signal"),
            },
            other => return Err(bad("request", other)),
        };
        Ok(Some((request, at)))
    }
}

/// What the spawner and the keepers tell the agent, on the spawner's stdout: a line each,
/// `KEY WHAT ...`, written by one `write` (so lines of different writers never mix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// The job's keeper runs, with this PID.
    Keeper(i32),
    /// The job's main process runs, with this PID (its process group).
    Pid(i32),
    /// The lease ran out: the keeper kills the job.
    Fenced,
    /// The job could not start, and why.
    Error(String),
    /// The keeper exited (its job's processes are gone): as the job's main process did, an
    /// exit code or a signal (neither: the spawner could not start the keeper).
    Exit {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// The longest [`Report::Error`] text, so that a line stays under `PIPE_BUF` (4096 bytes):
/// written at once, it never mixes with another writer's.
const REPORT_TEXT_MAX: usize = 3000;

impl Report {
    /// The report's line: `KEY WHAT ...` (no key: `WHAT ...`, the lone keeper's).
    fn line(&self, key: Option<u64>) -> Vec<u8> {
        let what = match self {
            Report::Keeper(pid) => format!("keeper {pid}"),
            Report::Pid(pid) => format!("pid {pid}"),
            Report::Fenced => "fenced".to_string(),
            Report::Error(e) => {
                let mut e = e.replace(['\n', '\r'], " ");
                if e.len() > REPORT_TEXT_MAX {
                    let mut cut = REPORT_TEXT_MAX;
                    while !e.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    e.truncate(cut);
                    e.push_str("...");
                }
                format!("error {e}")
            }
            Report::Exit {
                code: Some(c),
                signal: _,
            } => format!("exit code {c}"),
            Report::Exit {
                code: None,
                signal: Some(s),
            } => format!("exit signal {s}"),
            Report::Exit {
                code: None,
                signal: None,
            } => "exit none".to_string(),
        };
        match key {
            Some(k) => format!("{k} {what}\n").into_bytes(),
            None => format!("{what}\n").into_bytes(),
        }
    }

    /// A line of the spawner's stdout: the job's key and what it says.
    pub(crate) fn parse(line: &str) -> Option<(u64, Report)> {
        let (key, what) = line.split_once(' ')?;
        let key = key.parse().ok()?;
        let (word, rest) = what.split_once(' ').unwrap_or((what, ""));
        let report = match (word, rest) {
            ("keeper", pid) => Report::Keeper(pid.parse().ok()?),
            ("pid", pid) => Report::Pid(pid.parse().ok()?),
            ("fenced", "") => Report::Fenced,
            ("error", e) => Report::Error(e.to_string()),
            ("exit", how) => match how.split_once(' ') {
                Some(("code", c)) => Report::Exit {
                    code: Some(c.parse().ok()?),
                    signal: None,
                },
                Some(("signal", s)) => Report::Exit {
                    code: None,
                    signal: Some(s.parse().ok()?),
                },
                None if how == "none" => Report::Exit {
                    code: None,
                    signal: None,
                },
                _ => return None,
            },
            _ => return None,
        };
        Some((key, report))
    }
}

/// Writes `report` to this process's stdout (the agent's pipe) in one `write`; a gone agent
/// is no error.
fn say(key: Option<u64>, report: &Report) {
    let line = report.line(key);
    let mut written = 0;
    while written < line.len() {
        match nix::unistd::write(std::io::stdout().as_fd(), &line[written..]) {
            Ok(n) => written += n,
            Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// Ignores [`IGNORED`] and blocks SIGCHLD (for a signalfd, returned).
fn ignore_signals_and_watch_children() -> Result<SignalFd, String> {
    for s in IGNORED {
        // SAFETY: ignoring installs no handler.
        #[allow(unsafe_code)]
        unsafe {
            signal(s, SigHandler::SigIgn).map_err(|e| format!("signal: {e}"))?;
        }
    }
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    chld.thread_block().map_err(|e| format!("sigmask: {e}"))?;
    SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("signalfd: {e}"))
}

/// The `main` of a program that is only a spawner or keeper (`fairsched-job-keeper`): runs
/// as its first argument says, or says how it is run.
pub fn binary_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().collect();
    match args.get(1) {
        Some(a) if a == SPAWNER_ARG => spawner_main(&args[2..]),
        Some(a) if a == KEEPER_ARG => main(&args[2..]),
        _ => {
            eprintln!("usage: fairsched-job-keeper {SPAWNER_ARG} ... (run by an agent)");
            std::process::exit(2)
        }
    }
}

/// Runs the spawner with `args` (those after [`SPAWNER_ARG`]) until the end of its stdin.
pub fn spawner_main(args: &[OsString]) -> ! {
    match spawner(args) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("fairsched job spawner: {e}");
            std::process::exit(1)
        }
    }
}

/// A keeper the spawner started.
#[derive(Debug)]
struct Kept {
    key: u64,
    /// The write end of its control pipe.
    control: OwnedFd,
}

fn spawner(args: &[OsString]) -> Result<(), String> {
    let setup = match args {
        [lease, grace, max_output] => parse_setup(lease, grace, max_output),
        _ => None,
    }
    .ok_or_else(|| format!("bad spawner arguments: {args:?}"))?;
    let sigfd = ignore_signals_and_watch_children()?;
    let stdin = std::io::stdin();
    let mut kept: BTreeMap<i32, Kept> = BTreeMap::new();
    let mut by_key: BTreeMap<u64, i32> = BTreeMap::new();
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        let [agent, chld] = fds.map(|f| {
            f.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        });
        if chld {
            while let Ok(Some(_)) = sigfd.read_signal() {}
            loop {
                let (pid, code, signal) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(pid, code)) => (pid, Some(code), None),
                    Ok(WaitStatus::Signaled(pid, sig, _)) => (pid, None, Some(sig as i32)),
                    Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                    Ok(_) | Err(Errno::EINTR) => continue,
                    Err(e) => return Err(format!("waitpid: {e}")),
                };
                if let Some(k) = kept.remove(&pid.as_raw()) {
                    by_key.remove(&k.key);
                    say(Some(k.key), &Report::Exit { code, signal });
                }
            }
        }
        if agent {
            let mut chunk = [0u8; 64 * 1024];
            match nix::unistd::read(stdin.as_raw_fd(), &mut chunk) {
                // The agent is gone: exiting closes every control pipe, and each keeper kills
                // its job.
                Ok(0) => return Ok(()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(Errno::EINTR) | Err(Errno::EAGAIN) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
            let mut used = 0;
            while let Some((request, n)) = Request::decode(&buf[used..])? {
                used += n;
                match request {
                    Request::Start {
                        key,
                        dir,
                        command,
                        env,
                        user,
                    } => {
                        let job = Job {
                            stdout: dir.join("stdout"),
                            stderr: dir.join("stderr"),
                            dir: Some(dir),
                            command,
                            env,
                            user,
                        };
                        match fork_keeper(&setup, key, job, &kept, &sigfd) {
                            Ok(control) => {
                                let pid = control.0;
                                by_key.insert(key, pid);
                                kept.insert(
                                    pid,
                                    Kept {
                                        key,
                                        control: control.1,
                                    },
                                );
                                say(Some(key), &Report::Keeper(pid));
                            }
                            Err(e) => {
                                say(Some(key), &Report::Error(e));
                                say(
                                    Some(key),
                                    &Report::Exit {
                                        code: None,
                                        signal: None,
                                    },
                                );
                            }
                        }
                    }
                    Request::Kill { key } | Request::Signal { key, .. } => {
                        let command = match request {
                            Request::Signal { signal, .. } => format!("s {signal}\n"),
                            _ => "k\n".to_string(),
                        };
                        // A keeper that ended meanwhile: nothing to do.
                        if let Some(k) = by_key.get(&key).and_then(|pid| kept.get(pid)) {
                            let _ = nix::unistd::write(&k.control, command.as_bytes());
                        }
                    }
                }
            }
            buf.drain(..used);
        }
    }
}

/// Forks a keeper for `job`: its PID and the write end of its control pipe.
fn fork_keeper(
    setup: &Setup,
    key: u64,
    job: Job,
    kept: &BTreeMap<i32, Kept>,
    sigfd: &SignalFd,
) -> Result<(i32, OwnedFd), String> {
    let (control_read, control_write) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    // SAFETY: the spawner has a single thread, so its child may do whatever it could.
    #[allow(unsafe_code)]
    match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Child) => {
            // Only its own end of its own pipe: another keeper's pipe must end when the
            // spawner does, and the agent's requests are the spawner's.
            for k in kept.values() {
                let _ = nix::unistd::close(k.control.as_raw_fd());
            }
            let _ = nix::unistd::close(control_write.as_raw_fd());
            let _ = nix::unistd::close(sigfd.as_raw_fd());
            let _ = nix::unistd::dup2(null.as_raw_fd(), 0);
            let _ = nix::unistd::close(null.as_raw_fd());
            // `ps -o comm`, `top`: the keeper, not a second spawner (its arguments stay the
            // spawner's).
            let _ = nix::sys::prctl::set_name(c"job-keeper");
            exit_as(keep(setup, job, control_read.as_fd(), Some(key)), Some(key))
        }
        Ok(ForkResult::Parent { child }) => Ok((child.as_raw(), control_write)),
        Err(e) => Err(format!("cannot fork the job's keeper: {e}")),
    }
}

/// Ends a keeper: as its job's main process ended, or, when the job could not start, with
/// status 127 after reporting why.
fn exit_as(result: Result<End, String>, key: Option<u64>) -> ! {
    match result {
        Ok(end) => end.exit(),
        Err(e) => {
            say(key, &Report::Error(e));
            std::process::exit(127)
        }
    }
}

/// Runs one keeper on its own with `args` (those after [`KEEPER_ARG`]: `LEASE GRACE_MS
/// STDOUT STDERR MAX_OUTPUT -- PROGRAM ARGS...`), controlled through its stdin, and exits as
/// the job did.
pub fn main(args: &[OsString]) -> ! {
    let parsed = match args {
        [
            lease,
            grace,
            stdout,
            stderr,
            max_output,
            dashes,
            command @ ..,
        ] if dashes == "--" && !command.is_empty() => {
            parse_setup(lease, grace, max_output).map(|setup| {
                let job = Job {
                    stdout: stdout.into(),
                    stderr: stderr.into(),
                    dir: None,
                    command: command.to_vec(),
                    env: Vec::new(),
                    user: None,
                };
                (setup, job)
            })
        }
        _ => None,
    };
    let result = match parsed {
        Some((setup, job)) => keep(&setup, job, std::io::stdin().as_fd(), None),
        None => Err(format!("bad keeper arguments: {args:?}")),
    };
    exit_as(result, None)
}

/// How the job's main process ended.
#[derive(Clone, Copy, Debug)]
enum End {
    Code(i32),
    Signal(Signal),
}

impl End {
    fn exit(self) -> ! {
        match self {
            End::Code(c) => std::process::exit(c),
            End::Signal(s) => {
                // The same signal, without a core dump of the keeper.
                let _ = nix::sys::prctl::set_dumpable(false);
                let _ =
                    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
                let _ = unsafe_free_default(s);
                let mut set = SigSet::empty();
                set.add(s);
                let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
                let _ = nix::sys::signal::raise(s);
                std::process::exit(128 + s as i32)
            }
        }
    }
}

/// Sets `s` to its default disposition.
fn unsafe_free_default(s: Signal) -> nix::Result<SigHandler> {
    // SAFETY: setting a default disposition installs no handler.
    #[allow(unsafe_code)]
    unsafe {
        signal(s, SigHandler::SigDfl)
    }
}

/// The PIDs of this process's descendants (from `/proc`: each process's parent).
fn descendants() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == p)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn signal_descendants(sig: Signal) {
    for pid in descendants() {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// The job's output: a pipe read into a file, at most `max` bytes (0: unbounded).
struct Output {
    pipe: Option<std::fs::File>,
    file: std::fs::File,
    written: u64,
    max: u64,
    discarded: u64,
    name: &'static str,
}

impl Output {
    /// Reads what the pipe has; false at its end.
    fn pump(&mut self) -> bool {
        let Some(pipe) = self.pipe.as_mut() else {
            return false;
        };
        let mut buf = [0u8; 64 * 1024];
        match pipe.read(&mut buf) {
            Ok(0) => {
                self.pipe = None;
                false
            }
            Ok(n) => {
                let room = if self.max == 0 {
                    n as u64
                } else {
                    self.max.saturating_sub(self.written).min(n as u64)
                };
                if room > 0 {
                    let _ = self.file.write_all(&buf[..room as usize]);
                    self.written += room;
                }
                let rest = n as u64 - room;
                if rest > 0 {
                    if self.discarded == 0 {
                        let _ = write!(
                            self.file,
                            "\n[fairsched: {} truncated here: the job wrote more than the node's \
                             limit of {} bytes per stream (fairsched agent --max-job-output); the \
                             rest is discarded]\n",
                            self.name, self.max
                        );
                    }
                    self.discarded += rest;
                }
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
            Err(_) => {
                self.pipe = None;
                false
            }
        }
    }
}

/// Keeps `job`: runs it, reports its PID, and kills its processes as the module's doc says;
/// `control` is the agent's (or the spawner's) end: `k`, `s N`, or its end.
fn keep(setup: &Setup, job: Job, control: BorrowedFd<'_>, key: Option<u64>) -> Result<End, String> {
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("subreaper: {e}"))?;
    let sigfd = ignore_signals_and_watch_children()?;

    let create = |p: &Path| {
        std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let (out_file, err_file) = (create(&job.stdout)?, create(&job.stderr)?);
    let (out_read, out_write) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let (err_read, err_write) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let mut outputs = [
        Output {
            pipe: Some(std::fs::File::from(std::os::fd::OwnedFd::from(out_read))),
            file: out_file,
            written: 0,
            max: setup.max_output,
            discarded: 0,
            name: "stdout",
        },
        Output {
            pipe: Some(std::fs::File::from(std::os::fd::OwnedFd::from(err_read))),
            file: err_file,
            written: 0,
            max: setup.max_output,
            discarded: 0,
            name: "stderr",
        },
    ];

    let (program, rest) = job
        .command
        .split_first()
        .ok_or_else(|| "no command".to_string())?;
    let mut cmd = std::process::Command::new(program);
    if let Some(dir) = &job.dir {
        cmd.current_dir(dir);
    }
    cmd.args(rest)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out_write)
        .stderr(err_write)
        .process_group(0);
    // Its account: groups, group and user set in the child (after its `chdir`, done as the
    // keeper, so that the job's user needs no way through the agent's private `jobs/`).
    let user = match &job.user {
        Some(u) => Some((
            std::ffi::CString::new(u.name.as_bytes())
                .map_err(|_| format!("bad user name {:?}", u.name))?,
            nix::unistd::Gid::from_raw(u.gid),
            nix::unistd::Uid::from_raw(u.uid),
        )),
        None => None,
    };
    // SAFETY: the keeper has one thread, so its forked child may call what it could.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            for s in IGNORED {
                signal(s, SigHandler::SigDfl)?;
            }
            nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            if let Some((name, gid, uid)) = &user {
                nix::unistd::initgroups(name, *gid)?;
                nix::unistd::setgid(*gid)?;
                nix::unistd::setuid(*uid)?;
            }
            // The keeper killed (only SIGKILL can): its job's main process dies with it.
            // After `setuid`, which clears it.
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", job.command))?;
    // Only the child holds the pipes' write ends now.
    drop(cmd);
    let child_pid = child.id() as i32;
    say(key, &Report::Pid(child_pid));

    let mut agent_open = true;
    let mut commands: Vec<u8> = Vec::new();
    let mut end: Option<End> = None;
    // Once killing: when SIGKILL goes to whatever is left (boottime ns).
    let mut kill_at: Option<u64> = None;
    let mut lease: Option<Lease> = None;
    let mut next_lease_check = 0u64;
    let grace_ns = setup.grace.as_nanos() as u64;
    let start_kill = |kill_at: &mut Option<u64>, by: u64| {
        if kill_at.is_none() {
            signal_descendants(Signal::SIGTERM);
        }
        *kill_at = Some(kill_at.map_or(by, |k| k.min(by)));
    };
    loop {
        // Reap: the main process (its end), orphans the job left (nothing).
        let mut no_children = false;
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == child_pid => {
                    end = Some(End::Code(code))
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == child_pid => {
                    end = Some(End::Signal(sig))
                }
                Ok(_) => {}
                Err(Errno::EINTR) => {}
                Err(Errno::ECHILD) => {
                    no_children = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let now = boottime_ns();
        if end.is_some() {
            if no_children {
                // Whatever is still in the pipes (written by now-dead processes).
                for o in &mut outputs {
                    while o.pump() {}
                    if o.discarded > 0 {
                        let _ = writeln!(
                            o.file,
                            "[fairsched: {} more bytes of {} were discarded]",
                            o.discarded, o.name
                        );
                    }
                }
                break;
            }
            start_kill(&mut kill_at, now + grace_ns);
        }
        if let Some(path) = &setup.lease
            && now >= next_lease_check
        {
            next_lease_check = now + LEASE_CHECK.as_nanos() as u64;
            if let Some(read) = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| Lease::parse(&t))
            {
                lease = read;
            }
            if let Some(l) = lease
                && now >= l.term_ns
            {
                // The kill first: the report goes into a pipe the (stopped) agent may not
                // read, and must not hold the kill up.
                let first = kill_at.is_none();
                start_kill(&mut kill_at, l.kill_ns);
                if first {
                    say(key, &Report::Fenced);
                }
            }
        }
        if let Some(k) = kill_at
            && now >= k
        {
            signal_descendants(Signal::SIGKILL);
        }
        // Wait for: a child's end, a command or the agent's end, output, the next deadline.
        let mut wake = u64::MAX;
        if setup.lease.is_some() {
            wake = wake.min(next_lease_check);
        }
        if let Some(k) = kill_at {
            // Past it: look again soon (processes may take a moment to die).
            wake = wake.min(k.max(now + 20_000_000));
        }
        let timeout = if wake == u64::MAX {
            PollTimeout::NONE
        } else {
            let ms = (wake.saturating_sub(now) / 1_000_000 + 1).min(1000);
            PollTimeout::from(ms as u16)
        };
        let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        if agent_open {
            fds.push(PollFd::new(control, PollFlags::POLLIN));
        }
        let pipes: Vec<usize> = (0..2).filter(|&i| outputs[i].pipe.is_some()).collect();
        for &i in &pipes {
            fds.push(PollFd::new(
                outputs[i].pipe.as_ref().unwrap().as_fd(),
                PollFlags::POLLIN,
            ));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        let ready = |f: &PollFd| {
            f.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        let ready: Vec<bool> = fds.iter().map(ready).collect();
        drop(fds);
        if ready[0] {
            while let Ok(Some(_)) = sigfd.read_signal() {}
        }
        let mut at = 1;
        if agent_open {
            if ready[at] {
                let mut buf = [0u8; 256];
                match nix::unistd::read(control.as_raw_fd(), &mut buf) {
                    Ok(0) | Err(Errno::EBADF) => {
                        // The agent (or the spawner) is gone: its jobs go with it.
                        agent_open = false;
                        start_kill(&mut kill_at, boottime_ns() + grace_ns);
                    }
                    Ok(n) => commands.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
                while let Some(i) = commands.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = commands.drain(..=i).collect();
                    let line = String::from_utf8_lossy(&line[..i]).into_owned();
                    if line == "k" {
                        start_kill(&mut kill_at, boottime_ns() + grace_ns);
                    } else if let Some(n) = line.strip_prefix("s ")
                        && let Some(sig) =
                            n.parse::<i32>().ok().and_then(|n| Signal::try_from(n).ok())
                        && end.is_none()
                    {
                        let _ = killpg(Pid::from_raw(child_pid), sig);
                    }
                }
            }
            at += 1;
        }
        for (k, &i) in pipes.iter().enumerate() {
            if ready[at + k] {
                outputs[i].pump();
            }
        }
    }
    Ok(end.expect("the main process ended"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_read_back_or_refused_when_torn() {
        let l = Lease::after(
            1_000_000_000,
            Duration::from_secs(15),
            Duration::from_secs(2),
        );
        assert_eq!(l.kill_ns, 1_000_000_000 + 13_500_000_000);
        assert_eq!(
            l.term_ns,
            l.kill_ns - 1_500_000_000,
            "a tenth of the timeout at most"
        );
        let long = Lease::after(0, Duration::from_secs(60), Duration::from_secs(2));
        assert_eq!(
            long.kill_ns - long.term_ns,
            2_000_000_000,
            "the grace period"
        );
        assert_eq!(Lease::parse(&Lease::text(Some(l))), Some(Some(l)));
        assert_eq!(Lease::parse(&Lease::text(None)), Some(None));
        assert_eq!(Lease::text(None).len(), Lease::text(Some(l)).len());
        let mut torn = Lease::text(Some(l));
        torn.replace_range(0..3, "999");
        assert_eq!(Lease::parse(&torn), None);
    }

    fn os(b: &[u8]) -> OsString {
        OsString::from_vec(b.to_vec())
    }

    proptest::proptest! {
        /// Whatever a request holds (spaces, line breaks, empty arguments, bytes that are not
        /// UTF-8), the spawner reads back the same request, and waits while it is cut short.
        #[test]
        fn a_request_is_read_back_whole_and_not_before(
            key in proptest::prelude::any::<u64>(),
            dir in proptest::collection::vec(1u8.., 0..20),
            command in proptest::collection::vec(proptest::collection::vec(1u8.., 0..12), 0..5),
            env in proptest::collection::vec(
                (proptest::collection::vec(1u8.., 0..8), proptest::collection::vec(1u8.., 0..8)),
                0..4,
            ),
            signal in proptest::prelude::any::<i32>(),
            user in proptest::option::of((
                proptest::collection::vec(1u8.., 1..8),
                proptest::prelude::any::<u32>(),
                proptest::prelude::any::<u32>(),
            )),
        ) {
            let requests = [
                Request::Start {
                    key,
                    dir: PathBuf::from(os(&dir)),
                    command: command.iter().map(|a| os(a)).collect(),
                    env: env.iter().map(|(k, v)| (os(k), os(v))).collect(),
                    user: user.map(|(name, uid, gid)| RunAs { name: os(&name), uid, gid }),
                },
                Request::Kill { key },
                Request::Signal { key, signal },
            ];
            let mut stream = Vec::new();
            for r in &requests {
                stream.extend(r.encode().unwrap());
            }
            let mut at = 0;
            for r in &requests {
                let (read, n) = Request::decode(&stream[at..]).unwrap().unwrap();
                proptest::prop_assert_eq!(&read, r);
                for cut in 0..n {
                    proptest::prop_assert_eq!(Request::decode(&stream[at..at + cut]), Ok(None));
                }
                at += n;
            }
            proptest::prop_assert_eq!(at, stream.len());
        }
    }

    #[test]
    fn a_request_holding_a_nul_byte_is_refused_and_a_bad_one_named() {
        let start = |command: &[u8]| Request::Start {
            key: 1,
            dir: "/tmp/x".into(),
            command: vec![os(command)],
            env: Vec::new(),
            user: None,
        };
        assert_eq!(
            start(b"a\0b").encode(),
            Err("the command holds a NUL byte".to_string())
        );
        assert!(start(b"ab").encode().is_ok());
        assert_eq!(
            Request::decode(b"stop\0\x31\0"),
            Err("bad request from the agent: request \"stop\"".to_string())
        );
        assert_eq!(
            Request::decode(b"kill\0x\0"),
            Err("bad request from the agent: key \"x\"".to_string())
        );
    }

    #[test]
    fn reports_are_read_back_on_one_line_each() {
        let long = "é".repeat(4000);
        let cases = [
            (Report::Keeper(12), "7 keeper 12\n", Report::Keeper(12)),
            (Report::Pid(13), "7 pid 13\n", Report::Pid(13)),
            (Report::Fenced, "7 fenced\n", Report::Fenced),
            (
                Report::Error("cannot start:\nno such file".into()),
                "7 error cannot start: no such file\n",
                Report::Error("cannot start: no such file".into()),
            ),
            (
                Report::Exit {
                    code: Some(3),
                    signal: None,
                },
                "7 exit code 3\n",
                Report::Exit {
                    code: Some(3),
                    signal: None,
                },
            ),
            (
                Report::Exit {
                    code: None,
                    signal: Some(9),
                },
                "7 exit signal 9\n",
                Report::Exit {
                    code: None,
                    signal: Some(9),
                },
            ),
            (
                Report::Exit {
                    code: None,
                    signal: None,
                },
                "7 exit none\n",
                Report::Exit {
                    code: None,
                    signal: None,
                },
            ),
        ];
        for (report, line, back) in cases {
            let written = String::from_utf8(report.line(Some(7))).unwrap();
            assert_eq!(written, line);
            assert_eq!(Report::parse(written.trim_end()), Some((7, back)));
        }
        // A long error stays under PIPE_BUF, so that its line is written at once.
        let written = Report::Error(long).line(Some(u64::MAX));
        assert!(written.len() < 4096, "{}", written.len());
        assert!(matches!(
            Report::parse(std::str::from_utf8(&written).unwrap().trim_end()),
            Some((u64::MAX, Report::Error(e))) if e.ends_with("...")
        ));
        // The lone keeper's lines have no key.
        assert_eq!(Report::Pid(5).line(None), b"pid 5\n");
        for bad in [
            "",
            "7",
            "x pid 1",
            "7 pid x",
            "7 exit code",
            "7 exit 3",
            "7 what 1",
        ] {
            assert_eq!(Report::parse(bad), None, "{bad:?}");
        }
    }
}
