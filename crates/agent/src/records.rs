//! What an agent finds again after it was killed (SIGKILL, OOM kill, a crash): the jobs it
//! started and the ends it had not reported yet, as small files under `<work_dir>/state/`.
//!
//! * `started/<job>` — written before a job's process starts (without a process group: a
//!   killed agent may have started it or not), then again once it started: its process group
//!   and the leader's start time (`/proc/PID/stat`, so that a reused PID is never taken for
//!   it); removed when the job ends.
//! * `ended/<job>` — the job's end as it is reported ([`FinishedJob`]), written when it ends;
//!   removed once a heartbeat delivered it.
//!
//! A job's main process dies with the agent (`setpriv --pdeathsig KILL`, see `lib.rs`), but
//! what it started in its process group may not. So before it registers, a restarted agent
//! kills every process group it finds in `started/` that still has a live process (for a job
//! recorded without its group: the groups of the processes whose environment names the job
//! and this node, `FAIRSCHED_JOB_ID` and `FAIRSCHED_NODE_ID`), waits until they are gone, and
//! reports those jobs as aborted: the server may then run them again elsewhere, never beside
//! a copy of their own. Ends found in `ended/` are reported as they
//! were.
//!
//! File names are the job ids, hex-encoded (ids come from the server; no id can name a path
//! outside the directory).

use fairsched_api::{FinishedJob, JobState};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The reason of a job killed by a restarted agent.
pub const KILLED_AT_RESTART: &str = "agent_restarted: the job outlived its agent and was killed \
                                     before the agent registered again";

/// A started job as `started/<job>` keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct Started {
    job: String,
    operation: String,
    /// The job's process group (its main process's PID); 0 while it is being started.
    pgid: i32,
    /// The main process's start time, in clock ticks since boot (`/proc/PID/stat` field 22).
    start_ticks: Option<u64>,
}

/// The agent's records, in `<work_dir>/state`.
#[derive(Clone, Debug)]
pub(crate) struct Records {
    dir: PathBuf,
}

fn file_name(job: &str) -> String {
    job.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` whole or not at all (a temporary file renamed over it).
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

impl Records {
    /// The records under `work_dir` (directories created).
    pub(crate) fn open(work_dir: &Path) -> std::io::Result<Records> {
        let dir = work_dir.join("state");
        std::fs::create_dir_all(dir.join("started"))?;
        std::fs::create_dir_all(dir.join("ended"))?;
        Ok(Records { dir })
    }

    fn started_path(&self, job: &str) -> PathBuf {
        self.dir.join("started").join(file_name(job))
    }

    fn ended_path(&self, job: &str) -> PathBuf {
        self.dir.join("ended").join(file_name(job))
    }

    /// A job is about to start (its process group is not known yet: see
    /// [`Records::recover`]).
    pub(crate) fn starting(&self, job: &str, operation: &str) {
        self.started(job, operation, 0);
    }

    /// A job's process started: its group is `pgid`.
    pub(crate) fn started(&self, job: &str, operation: &str, pgid: i32) {
        let record = Started {
            job: job.to_string(),
            operation: operation.to_string(),
            pgid,
            start_ticks: start_ticks(pgid),
        };
        let r = serde_json::to_vec(&record)
            .map_err(std::io::Error::other)
            .and_then(|b| write_atomically(&self.started_path(job), &b));
        if let Err(e) = r {
            tracing::warn!(
                job,
                "cannot record the job in {}: {e}; if this agent is killed, a restarted agent \
                 will not find it",
                self.dir.display()
            );
        }
    }

    /// A job ended: its end is kept until a heartbeat delivered it.
    pub(crate) fn ended(&self, f: &FinishedJob) {
        let r = serde_json::to_vec(f)
            .map_err(std::io::Error::other)
            .and_then(|b| write_atomically(&self.ended_path(&f.job), &b));
        if let Err(e) = r {
            tracing::warn!(job = f.job, "cannot record the job's end: {e}");
        }
        let _ = std::fs::remove_file(self.started_path(&f.job));
    }

    /// A heartbeat delivered the job's end.
    pub(crate) fn reported(&self, job: &str) {
        let _ = std::fs::remove_file(self.ended_path(job));
    }

    /// Before registering: kills the process groups of jobs a previous agent started that
    /// still have live processes (and waits, at most `limit`, until they are gone); returns
    /// the ends to report: those a previous agent recorded, and the killed or vanished jobs as
    /// aborted.
    pub(crate) async fn recover(&self, node: &str, limit: Duration) -> Vec<FinishedJob> {
        let mut ends = Vec::new();
        for path in entries(&self.dir.join("ended")) {
            match std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<FinishedJob>(&b).ok())
            {
                Some(f) => ends.push(f),
                None => {
                    tracing::warn!(file = %path.display(), "unreadable job record; removed");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        for path in entries(&self.dir.join("started")) {
            let Some(started) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Started>(&b).ok())
            else {
                tracing::warn!(file = %path.display(), "unreadable job record; removed");
                let _ = std::fs::remove_file(&path);
                continue;
            };
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
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

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
