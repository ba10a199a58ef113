//! The job keeper: a small process between the agent and each job (the same binary, run as
//! `fairsched __job-keeper ...`), so that a job's whole process tree ends with the job, with
//! an abort, with the agent, and when the agent's lease runs out.
//!
//! * It is a child subreaper (`PR_SET_CHILD_SUBREAPER`): every process the job leaves behind
//!   (a background child, one that called `setsid`, one whose parent exited) is reparented to
//!   it, so "the job's processes" are exactly its descendants, found through `/proc`.
//! * It runs the job's command as its child, in a process group of its own (the job's
//!   `$$`, as before), and tells the agent the child's PID on its stdout (`pid N`).
//! * When the job's main process exits, when the agent says so (`k` on the keeper's stdin),
//!   when the agent is gone (end of file on its stdin: the agent exited or was killed, however)
//!   or when the agent's lease has run out (below), it sends SIGTERM to every descendant and
//!   SIGKILL to every one left after the grace period, until none is left; then it exits as
//!   the job's main process did (its exit code, or the same signal), which is what the agent
//!   reports.
//! * The lease (self-fencing): after each heartbeat the server accepted, the agent writes to
//!   `<work dir>/state/lease` when its jobs must be killed if no later heartbeat is accepted
//!   (times on `CLOCK_BOOTTIME`, which every process of the machine shares and which counts a
//!   suspended machine's time; see [`Lease`]). A keeper reads it every [`LEASE_CHECK`]; past its
//!   time it says `fenced` to the agent and kills the job's tree, SIGKILL by the lease's kill
//!   time. The agent sets both well before the server's `node_timeout_ms` runs out since the
//!   heartbeat's sending: a stopped, hung or cut-off agent's jobs are dead before the server
//!   can run them again elsewhere. It runs in the keeper, not in the agent, because a stopped
//!   agent cannot act.
//! * Interruptions: `s N` on its stdin sends signal N to the job's process group.
//! * Output: the job's stdout and stderr go through pipes to the keeper, which writes them to
//!   the job's files, at most `max_output` bytes each (the first ones); past that it writes a
//!   line saying so and reads on, discarding the rest: the job is not stopped for it.
//!
//! The keeper ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT (a unit's stop, a terminal's Ctrl-C:
//! the agent's end of file tells it to clean up); the job's command starts with the default
//! dispositions and an empty signal mask.

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, killpg, signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The first argument that makes `fairsched` a job keeper.
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

/// What the keeper was asked to do (its arguments after [`KEEPER_ARG`]):
/// `LEASE GRACE_MS STDOUT STDERR MAX_OUTPUT -- PROGRAM ARGS...` (`LEASE` `-`: none;
/// `MAX_OUTPUT` 0: unbounded).
#[derive(Debug)]
struct Args {
    lease: Option<PathBuf>,
    grace: Duration,
    stdout: PathBuf,
    stderr: PathBuf,
    max_output: u64,
    command: Vec<OsString>,
}

/// The keeper's arguments for a job (after the program).
pub(crate) fn args(
    lease: Option<&Path>,
    grace: Duration,
    dir: &Path,
    max_output: Option<u64>,
    command: impl IntoIterator<Item = OsString>,
) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec![
        KEEPER_ARG.into(),
        lease.map_or("-".into(), |p| p.as_os_str().to_owned()),
        grace.as_millis().to_string().into(),
        dir.join("stdout").into(),
        dir.join("stderr").into(),
        max_output.unwrap_or(0).to_string().into(),
        "--".into(),
    ];
    out.extend(command);
    out
}

fn parse_args(args: &[OsString]) -> Result<Args, String> {
    let bad = || format!("bad keeper arguments: {args:?}");
    let [
        lease,
        grace,
        stdout,
        stderr,
        max_output,
        dashes,
        command @ ..,
    ] = args
    else {
        return Err(bad());
    };
    if dashes != "--" || command.is_empty() {
        return Err(bad());
    }
    let number = |s: &OsString| {
        s.to_str()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(bad)
    };
    Ok(Args {
        lease: (lease != "-").then(|| PathBuf::from(lease)),
        grace: Duration::from_millis(number(grace)?),
        stdout: stdout.into(),
        stderr: stderr.into(),
        max_output: number(max_output)?,
        command: command.to_vec(),
    })
}

/// Says `line` to the agent (the keeper's stdout); a gone agent is no error.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The `main` of a program that is only a keeper (`fairsched-job-keeper __job-keeper ...`):
/// runs the keeper with this process's arguments, or says how it is run.
pub fn binary_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().collect();
    match args.get(1) {
        Some(a) if a == KEEPER_ARG => main(&args[2..]),
        _ => {
            eprintln!("usage: fairsched-job-keeper {KEEPER_ARG} ... (run by an agent)");
            std::process::exit(2)
        }
    }
}

/// Runs the keeper with `args` (those after [`KEEPER_ARG`]) and exits as the job did.
pub fn main(args: &[OsString]) -> ! {
    match run(args) {
        Ok(end) => end.exit(),
        Err(e) => {
            say(&format!("error {e}"));
            std::process::exit(127)
        }
    }
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

fn run(args: &[OsString]) -> Result<End, String> {
    let args = parse_args(args)?;
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("subreaper: {e}"))?;
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
    let sigfd = SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("signalfd: {e}"))?;

    let create = |p: &Path| {
        std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let (out_file, err_file) = (create(&args.stdout)?, create(&args.stderr)?);
    let (out_read, out_write) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let (err_read, err_write) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let mut outputs = [
        Output {
            pipe: Some(std::fs::File::from(std::os::fd::OwnedFd::from(out_read))),
            file: out_file,
            written: 0,
            max: args.max_output,
            discarded: 0,
            name: "stdout",
        },
        Output {
            pipe: Some(std::fs::File::from(std::os::fd::OwnedFd::from(err_read))),
            file: err_file,
            written: 0,
            max: args.max_output,
            discarded: 0,
            name: "stderr",
        },
    ];

    let (program, rest) = args.command.split_first().expect("checked");
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(out_write)
        .stderr(err_write)
        .process_group(0);
    // SAFETY: the keeper has one thread; these are system calls only.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            for s in IGNORED {
                signal(s, SigHandler::SigDfl)?;
            }
            nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
            // The keeper killed (only SIGKILL can): its job's main process dies with it.
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", args.command))?;
    // Only the child holds the pipes' write ends now.
    drop(cmd);
    let child_pid = child.id() as i32;
    say(&format!("pid {child_pid}"));

    let stdin = std::io::stdin();
    let mut agent_open = true;
    let mut commands: Vec<u8> = Vec::new();
    let mut end: Option<End> = None;
    // Once killing: when SIGKILL goes to whatever is left (boottime ns).
    let mut kill_at: Option<u64> = None;
    let mut lease: Option<Lease> = None;
    let mut next_lease_check = 0u64;
    let grace_ns = args.grace.as_nanos() as u64;
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
        if let Some(path) = &args.lease
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
                if kill_at.is_none() {
                    say("fenced");
                }
                start_kill(&mut kill_at, l.kill_ns);
            }
        }
        if let Some(k) = kill_at
            && now >= k
        {
            signal_descendants(Signal::SIGKILL);
        }
        // Wait for: a child's end, a command or the agent's end, output, the next deadline.
        let mut wake = u64::MAX;
        if args.lease.is_some() {
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
        let stdin_fd = stdin.as_fd();
        let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        if agent_open {
            fds.push(PollFd::new(stdin_fd, PollFlags::POLLIN));
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
                match nix::unistd::read(stdin.as_raw_fd(), &mut buf) {
                    Ok(0) | Err(Errno::EBADF) => {
                        // The agent is gone: its jobs go with it.
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
}
