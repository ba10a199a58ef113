//! What an agent finds again after it was killed (SIGKILL, OOM kill, a crash): the jobs it
//! started and the ends it had not reported yet, in one append-only journal,
//! `<work_dir>/state/journal` (a JSON entry per line, each appended by one `write`):
//!
//! * `started` — written before a job's process starts (without a process group: a killed
//!   agent may have started it or not), then again once it started: its process group and
//!   the leader's start time (`/proc/PID/stat`, so that a reused PID is never taken for it);
//!   it stands until the job's `ended` entry.
//! * `ended` — the job's end as it is reported ([`FinishedJob`]), written when it ends; it
//!   stands until a `reported` entry (a heartbeat delivered it).
//!
//! The journal is rewritten with only what stands (a temporary file renamed over it) when it
//! is opened and whenever it holds four times more entries than stand: a job costs no file of
//! its own (creating and removing files per job was half of an agent's time on ext4). A
//! line cut short by a power cut is skipped. An agent of an older version kept one file per
//! record under `state/started/` and `state/ended/`: they are read once and removed.
//!
//! A job's processes die with the agent (its keeper kills them, see `keeper.rs`), but a
//! keeper itself may have been killed. So before it registers, a restarted agent waits for
//! the keepers of jobs still `started` to end, then kills every process group of a job still `started` that has a live process (for a job
//! recorded without its group: the groups of the processes whose environment names the job
//! and this node, `FAIRSCHED_JOB_ID` and `FAIRSCHED_NODE_ID`), waits until they are gone, and
//! reports those jobs as aborted: the server may then run them again elsewhere, never beside
//! a copy of their own. Ends not reported are reported as they were.

use fairsched_api::{FinishedJob, JobState};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Locks `path` for this process, writing who holds it; an error naming the holder if
/// another process has it.
fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    use std::io::{Read, Seek};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Err(std::io::Error::other(format!(
                "another agent uses this work directory ({}; {}): one agent per work \
                 directory, give each its own --work-dir",
                holder.trim(),
                path.display()
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "pid {}", std::process::id())?;
    Ok(file)
}

/// The agent id kept in `path`, made (32 random bytes, hex) if there is none.
fn agent_id(path: &Path) -> std::io::Result<String> {
    if let Ok(id) = std::fs::read_to_string(path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_string());
    }
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, &id)?;
    std::fs::rename(&tmp, path)?;
    Ok(id)
}

/// The reason of a job killed by a restarted agent.
pub const KILLED_AT_RESTART: &str = "agent_restarted: the job outlived its agent and was killed \
                                     before the agent registered again";

/// A started job as the journal keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Started {
    job: String,
    operation: String,
    /// The job's process group (its main process's PID); 0 while it is being started.
    pgid: i32,
    /// The main process's start time, in clock ticks since boot (`/proc/PID/stat` field 22).
    start_ticks: Option<u64>,
    /// The job's keeper (see `keeper`) and its start time; 0: none (an older agent's job).
    #[serde(default)]
    keeper: i32,
    #[serde(default)]
    keeper_ticks: Option<u64>,
}

/// One line of the journal.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    Started(Started),
    Ended(FinishedJob),
    Reported(String),
}

/// The agent's records, in `<work_dir>/state` (cloned handles share them).
#[derive(Clone, Debug)]
pub(crate) struct Records {
    dir: PathBuf,
    journal: Arc<Mutex<Journal>>,
    /// `state/agent.lock`, locked (`flock`) while the agent runs: one agent per work
    /// directory (a second one would take the first's jobs for a dead agent's and kill them).
    /// The OS releases it when the process ends, however it ends.
    _lock: Arc<std::fs::File>,
    /// Who this agent is to the server (`state/agent-id`, made on the first start).
    agent_id: String,
}

/// The journal file and what stands in it.
#[derive(Debug)]
struct Journal {
    path: PathBuf,
    file: std::fs::File,
    started: BTreeMap<String, Started>,
    ended: BTreeMap<String, FinishedJob>,
    /// Entries in the file.
    lines: usize,
}

/// Entries a journal holds at least before it is rewritten.
const COMPACT_AFTER: usize = 1000;

impl Journal {
    fn apply(&mut self, entry: Entry) {
        match entry {
            Entry::Started(s) => {
                self.started.insert(s.job.clone(), s);
            }
            Entry::Ended(f) => {
                self.started.remove(&f.job);
                self.ended.insert(f.job.clone(), f);
            }
            Entry::Reported(job) => {
                self.ended.remove(&job);
            }
        }
    }

    /// Appends `entry` (one `write`: a killed agent leaves it whole or absent), then
    /// rewrites the journal if it has grown four times what stands.
    fn append(&mut self, entry: Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.apply(entry);
        self.file.write_all(&line)?;
        self.lines += 1;
        let standing = self.started.len() + self.ended.len();
        if self.lines >= COMPACT_AFTER && self.lines >= 4 * standing {
            self.compact()?;
        }
        Ok(())
    }

    /// Rewrites the file with what stands (a temporary file renamed over it).
    fn compact(&mut self) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        let started = self.started.values().cloned().map(Entry::Started);
        let ended = self.ended.values().cloned().map(Entry::Ended);
        let mut lines = 0;
        for entry in started.chain(ended) {
            serde_json::to_writer(&mut bytes, &entry).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            lines += 1;
        }
        write_atomically(&self.path, &bytes)?;
        self.file = append_to(&self.path)?;
        self.lines = lines;
        Ok(())
    }
}

/// `path` opened for appending (created if missing).
fn append_to(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Writes `bytes` to `path` whole or not at all (a temporary file renamed over it).
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

impl Records {
    /// The records under `work_dir` (the directory and the journal created; the journal
    /// read, records of an older agent taken in, and rewritten with what stands).
    pub(crate) fn open(work_dir: &Path) -> std::io::Result<Records> {
        let dir = work_dir.join("state");
        std::fs::create_dir_all(&dir)?;
        let lock = lock(&dir.join("agent.lock"))?;
        let agent_id = agent_id(&dir.join("agent-id"))?;
        let path = dir.join("journal");
        let mut journal = Journal {
            file: append_to(&path)?,
            path,
            started: BTreeMap::new(),
            ended: BTreeMap::new(),
            lines: 0,
        };
        let text = std::fs::read(&journal.path)?;
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Entry>(line) {
                Ok(entry) => journal.apply(entry),
                Err(e) => tracing::warn!(
                    journal = %journal.path.display(),
                    "an unreadable line of the job journal is skipped ({e}): the end of one \
                     cut short by a crash of the machine"
                ),
            }
        }
        // An older agent's files, one per record.
        let legacy: Vec<PathBuf> = ["started", "ended"]
            .iter()
            .map(|d| dir.join(d))
            .filter(|d| d.is_dir())
            .collect();
        for d in &legacy {
            let ended = d.ends_with("ended");
            for path in entries(d) {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let entry = if ended {
                    serde_json::from_slice(&bytes).ok().map(Entry::Ended)
                } else {
                    serde_json::from_slice(&bytes).ok().map(Entry::Started)
                };
                match entry {
                    Some(entry) => journal.apply(entry),
                    None => {
                        tracing::warn!(file = %path.display(), "unreadable job record; removed")
                    }
                }
            }
        }
        journal.compact()?;
        for d in legacy {
            std::fs::remove_dir_all(&d)?;
        }
        Ok(Records {
            dir,
            journal: Arc::new(Mutex::new(journal)),
            _lock: Arc::new(lock),
            agent_id,
        })
    }

    /// Who this agent is to the server: the same after a restart on this work directory.
    pub(crate) fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Appends `entry`; a failure is logged with what it means (`what`).
    fn record(&self, entry: Entry, job: &str, what: &str) {
        let mut journal = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = journal.append(entry) {
            tracing::warn!(job, "cannot record {what} in {}: {e}", self.dir.display());
        }
    }

    /// A job is about to start (its process group is not known yet: see
    /// [`Records::recover`]).
    pub(crate) fn starting(&self, job: &str, operation: &str) {
        self.started(job, operation, 0, 0);
    }

    /// A job's keeper started (`keeper`), and once it says so its process: its group is
    /// `pgid` (0: not yet known).
    pub(crate) fn started(&self, job: &str, operation: &str, pgid: i32, keeper: i32) {
        let record = Started {
            job: job.to_string(),
            operation: operation.to_string(),
            pgid,
            start_ticks: start_ticks(pgid),
            keeper,
            keeper_ticks: start_ticks(keeper),
        };
        self.record(
            Entry::Started(record),
            job,
            "the job (if this agent is killed, a restarted agent will not find it)",
        );
    }

    /// A job ended: its end is kept until a heartbeat delivered it.
    pub(crate) fn ended(&self, f: &FinishedJob) {
        self.record(Entry::Ended(f.clone()), &f.job, "the job's end");
    }

    /// A heartbeat delivered the job's end.
    pub(crate) fn reported(&self, job: &str) {
        self.record(
            Entry::Reported(job.to_string()),
            job,
            "that the job's end was reported",
        );
    }

    /// Before registering: kills the process groups of jobs a previous agent started that
    /// still have live processes (and waits, at most `limit`, until they are gone); returns
    /// the ends to report: those a previous agent recorded, and the killed or vanished jobs as
    /// aborted.
    pub(crate) async fn recover(&self, node: &str, limit: Duration) -> Vec<FinishedJob> {
        let (started, mut ends): (Vec<Started>, Vec<FinishedJob>) = {
            let journal = self.journal.lock().unwrap_or_else(|e| e.into_inner());
            (
                journal.started.values().cloned().collect(),
                journal.ended.values().cloned().collect(),
            )
        };
        for started in started {
            // The job's keeper, alive, is killing the job's processes (it saw the agent go):
            // it is waited for, so that nothing of the job outlives it.
            let keeper_alive = || {
                started.keeper > 0
                    && stat_fields(started.keeper).is_some_and(|f| {
                        f.first().is_some_and(|s| s != "Z" && s != "X")
                            && f.get(19).and_then(|t| t.parse().ok()) == started.keeper_ticks
                    })
            };
            if keeper_alive() {
                tracing::warn!(
                    job = started.job,
                    keeper = started.keeper,
                    "waiting for the keeper of a job of the previous agent to kill its processes"
                );
                let deadline = tokio::time::Instant::now() + limit;
                while keeper_alive() && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            let groups: Vec<i32> = if started.pgid > 0 {
                let pgid = started.pgid;
                // The group is this job's unless its leader's PID now belongs to another
                // process (a live leader with another start time; while any member of the
                // group lives, the kernel does not give its id to a new process).
                let leader = start_ticks(pgid);
                let ours = leader.is_none() || leader == started.start_ticks;
                if ours { vec![pgid] } else { Vec::new() }
            } else {
                // Killed while starting it: whatever runs under its name on this node.
                groups_of(&started.job, node)
            };
            for pgid in groups {
                if !group_alive(pgid) {
                    continue;
                }
                tracing::warn!(
                    job = started.job,
                    operation = started.operation,
                    pgid,
                    "a job of the previous agent still runs: killing its process group before \
                     registering, so that it never runs beside a copy of itself"
                );
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                let deadline = tokio::time::Instant::now() + limit;
                while group_alive(pgid) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if group_alive(pgid) {
                    tracing::error!(
                        job = started.job,
                        pgid,
                        "the job's processes did not die within {limit:?}"
                    );
                }
            }
            let f = FinishedJob {
                job: started.job.clone(),
                outcome: JobState::Aborted,
                exit_code: None,
                signal: None,
                reason: Some(KILLED_AT_RESTART.into()),
                stdout_tail: String::new(),
                stderr_tail: String::new(),
            };
            self.ended(&f);
            ends.push(f);
        }
        ends
    }
}

/// The files of `dir` (no temporary ones), sorted.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_none())
        .collect();
    paths.sort();
    paths
}

/// `/proc/PID/stat` split after the command name: state is `[0]`, the process group `[2]`,
/// the start time `[19]`.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The process's start time in clock ticks since boot (`None`: no such process).
fn start_ticks(pid: i32) -> Option<u64> {
    if pid <= 0 {
        return None;
    }
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The process groups of the processes whose environment names job `job` of node `node`
/// (`FAIRSCHED_JOB_ID`, `FAIRSCHED_NODE_ID`; processes whose environment cannot be read are
/// not found).
fn groups_of(job: &str, node: &str) -> Vec<i32> {
    let job_var = format!("FAIRSCHED_JOB_ID={job}");
    let node_var = format!("FAIRSCHED_NODE_ID={node}");
    let mut groups: Vec<i32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                let mut vars = env.split(|&b| b == 0);
                let (mut has_job, mut has_node) = (false, false);
                for v in &mut vars {
                    has_job |= v == job_var.as_bytes();
                    has_node |= v == node_var.as_bytes();
                }
                has_job && has_node
            })
        })
        .filter_map(|pid| stat_fields(pid)?.get(2)?.parse::<i32>().ok())
        .filter(|&pgid| pgid > 0)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// Whether a live (not zombie) process is in group `pgid`.
fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat_fields)
        .any(|f| {
            f.first().is_some_and(|state| state != "Z" && state != "X")
                && f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
}

#[cfg(test)]
impl Records {
    /// The jobs standing as started and as ended, by id.
    fn standing(&self) -> (Vec<String>, Vec<String>) {
        let journal = self.journal.lock().unwrap();
        (
            journal.started.keys().cloned().collect(),
            journal.ended.keys().cloned().collect(),
        )
    }

    /// Entries in the journal file.
    fn lines(&self) -> usize {
        let path = self.journal.lock().unwrap().path.clone();
        std::fs::read_to_string(path).unwrap().lines().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// One agent per work directory (a second one is refused, naming the first's PID); the
    /// agent id survives a restart there and differs elsewhere.
    #[test]
    fn one_agent_per_work_directory_with_an_id_that_stays() {
        let dir = tempfile::tempdir().unwrap();
        let first = Records::open(dir.path()).unwrap();
        let second = Records::open(dir.path())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            second.contains("another agent uses this work directory")
                && second.contains(&format!("pid {}", std::process::id())),
            "{second}"
        );
        let id = first.agent_id().to_string();
        assert_eq!(id.len(), 32, "{id}");
        drop(first);
        // A child another test of this process forks meanwhile shares the lock's open file
        // until it execs (the file is close-on-exec), so the lock may stay taken for that
        // instant: try again for a while before calling it held.
        let mut again = Records::open(dir.path());
        for _ in 0..100 {
            if again.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            again = Records::open(dir.path());
        }
        assert_eq!(again.unwrap().agent_id(), id);
        let elsewhere = tempfile::tempdir().unwrap();
        assert_ne!(Records::open(elsewhere.path()).unwrap().agent_id(), id);
    }

    fn end(job: &str) -> FinishedJob {
        FinishedJob::completed(job)
    }

    /// What stands is found again by the next agent; the journal is rewritten as it grows
    /// (and when opened) so that it holds about what stands; a line cut short is skipped.
    #[test]
    fn the_journal_keeps_what_stands_across_restarts_and_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::open(dir.path()).unwrap();
        records.starting("1.1", "op");
        records.started("1.1", "op", 0, 0);
        records.starting("1.2", "op");
        records.ended(&end("1.2"));
        records.starting("1.3", "op");
        records.ended(&end("1.3"));
        records.reported("1.3");
        assert_eq!(records.standing(), (vec!["1.1".into()], vec!["1.2".into()]));
        drop(records);
        // A crash of the machine cut the last line short.
        let path = dir.path().join("state/journal");
        let mut file = append_to(&path).unwrap();
        file.write_all(br#"{"ended":{"job":"1.9","outc"#).unwrap();
        let records = Records::open(dir.path()).unwrap();
        assert_eq!(records.standing(), (vec!["1.1".into()], vec!["1.2".into()]));
        assert_eq!(records.lines(), 2, "rewritten with what stands when opened");
        // Thousands of jobs later the journal holds about what stands.
        for i in 0..2000 {
            let job = format!("2.{i}");
            records.starting(&job, "op");
            records.started(&job, "op", 0, 0);
            records.ended(&end(&job));
            records.reported(&job);
        }
        assert!(records.lines() < COMPACT_AFTER, "{} lines", records.lines());
        assert_eq!(records.standing(), (vec!["1.1".into()], vec!["1.2".into()]));
    }

    /// An agent of an older version kept a file per record: they are taken in and removed.
    #[test]
    fn the_records_of_an_older_agent_are_taken_in() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir_all(state.join("started")).unwrap();
        std::fs::create_dir_all(state.join("ended")).unwrap();
        let hex = |job: &str| job.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        std::fs::write(
            state.join("started").join(hex("3.1")),
            r#"{"job":"3.1","operation":"op","pgid":0,"start_ticks":null}"#,
        )
        .unwrap();
        std::fs::write(
            state.join("ended").join(hex("3.2")),
            serde_json::to_vec(&end("3.2")).unwrap(),
        )
        .unwrap();
        std::fs::write(state.join("ended").join(hex("3.3")), "not json").unwrap();
        let records = Records::open(dir.path()).unwrap();
        assert_eq!(records.standing(), (vec!["3.1".into()], vec!["3.2".into()]));
        assert!(!state.join("started").exists() && !state.join("ended").exists());
        drop(records);
        let records = Records::open(dir.path()).unwrap();
        assert_eq!(records.standing(), (vec!["3.1".into()], vec!["3.2".into()]));
    }

    /// `sleep 30` in a process group of its own, with the job and node variables.
    fn job_process(job: &str, node: &str) -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .env("FAIRSCHED_JOB_ID", job)
            .env("FAIRSCHED_NODE_ID", node)
            .process_group(0)
            .spawn()
            .expect("start sleep")
    }

    /// An agent killed after recording a job as starting but before recording its process
    /// group: the restarted agent finds the job's processes by their environment, kills them
    /// and reports the job aborted; another node's job of the same id is left alone.
    #[tokio::test]
    async fn a_job_killed_while_starting_is_found_by_its_environment() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::open(dir.path()).unwrap();
        records.starting("7.3", "op");
        let mut ours = job_process("7.3", "n1");
        let mut other = job_process("7.3", "n2");
        let pgid = ours.id() as i32;
        assert!(group_alive(pgid));

        let ends = records.recover("n1", Duration::from_secs(5)).await;
        assert_eq!(ends.len(), 1);
        assert_eq!(ends[0].job, "7.3");
        assert_eq!(ends[0].outcome, JobState::Aborted);
        let _ = ours.wait();
        assert!(!group_alive(pgid), "the job's group was killed");
        assert!(
            other.try_wait().unwrap().is_none(),
            "another node's job keeps running"
        );
        let _ = other.kill();
        let _ = other.wait();
    }
}
