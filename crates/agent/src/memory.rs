//! Memory enforcement: a job that asked for `memory` (bytes; 0 = not limited) may not use more.
//!
//! * **cgroup v2** (when usable): each limited job runs in its own cgroup
//!   `<base>/job-<job id>` with `memory.max` = its memory, `memory.swap.max` = 0 and
//!   `memory.oom.group` = 1 (where the files exist). The process enters it before `exec`:
//!   the job starts as `/bin/sh -c 'echo $$ > <cgroup>/cgroup.procs; exec "$@"' CMD...`, so
//!   nothing it allocates is charged elsewhere. The kernel OOM-kills the whole cgroup when the
//!   job needs more; the agent sees it in `memory.events` (`oom_kill`) and reports the job as
//!   failed, `memory limit exceeded: ...`. When the job ends, processes left in its cgroup are
//!   killed and the cgroup is removed.
//!
//!   `<base>` is the agent's own cgroup (from `/proc/self/cgroup`, under the cgroup2 mount
//!   from `/proc/self/mountinfo`). cgroup v2 lets only a cgroup without processes enable
//!   controllers for its children, so the agent first moves its own process into the leaf
//!   `<base>/agent`, then writes `+memory` to `<base>/cgroup.subtree_control`. That works
//!   when the agent runs alone in a cgroup it may write (a systemd service with
//!   `Delegate=yes`, a container with a writable cgroup2 mount); otherwise it moves back.
//! * **RSS polling** (otherwise): every 500 ms the agent sums `VmRSS` of the processes of
//!   each limited job's process group (`/proc/<pid>/status`) and kills the group (SIGTERM,
//!   SIGKILL after the grace period) when the sum exceeds the job's memory, reporting the same
//!   failure reason. Processes that leave the job's process group are not counted.
//!
//! [`MemoryEnforcement`] chooses (`FAIRSCHED_MEMORY_ENFORCEMENT=auto|cgroup|poll`): `auto`
//! uses cgroup v2 when usable and says once, at startup, why not when it is not.

use crate::JobState;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that chooses the [`MemoryEnforcement`] of [`crate::run`].
pub const MEMORY_ENFORCEMENT_ENV: &str = "FAIRSCHED_MEMORY_ENFORCEMENT";

/// How often the RSS of limited jobs is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How the agent keeps jobs within their memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryEnforcement {
    /// cgroup v2 when usable, else RSS polling (saying why once, at startup).
    #[default]
    Auto,
    /// cgroup v2 only: the agent does not start when it is not usable.
    Cgroup,
    /// RSS polling of each job's process group, whatever the machine offers.
    Poll,
}

impl MemoryEnforcement {
    pub fn name(self) -> &'static str {
        match self {
            MemoryEnforcement::Auto => "auto",
            MemoryEnforcement::Cgroup => "cgroup",
            MemoryEnforcement::Poll => "poll",
        }
    }

    /// From [`MEMORY_ENFORCEMENT_ENV`]; unset or empty: `auto`.
    pub fn from_env() -> Result<MemoryEnforcement, String> {
        match std::env::var(MEMORY_ENFORCEMENT_ENV) {
            Ok(v) if !v.trim().is_empty() => v
                .parse()
                .map_err(|e: String| format!("{MEMORY_ENFORCEMENT_ENV}: {e}")),
            _ => Ok(MemoryEnforcement::Auto),
        }
    }
}

impl FromStr for MemoryEnforcement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(MemoryEnforcement::Auto),
            "cgroup" => Ok(MemoryEnforcement::Cgroup),
            "poll" => Ok(MemoryEnforcement::Poll),
            other => Err(format!("{other:?}: expected auto, cgroup or poll")),
        }
    }
}

/// What an agent enforces memory with, once decided.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Enforcer {
    Cgroup(&'static CgroupBase),
    Poll,
}

/// Logged once per process, however many agents it runs.
static ANNOUNCED: AtomicBool = AtomicBool::new(false);

impl Enforcer {
    /// Decides (setting cgroup v2 up when `mode` allows it) and says so once per process.
    pub(crate) fn start(mode: MemoryEnforcement) -> anyhow::Result<Enforcer> {
        let first = !ANNOUNCED.swap(true, Ordering::SeqCst);
        let interval_ms = POLL_INTERVAL.as_millis();
        match mode {
            MemoryEnforcement::Poll => {
                if first {
                    tracing::info!(
                        "memory enforcement: RSS polling of each job's process group every \
                         {interval_ms} ms ({MEMORY_ENFORCEMENT_ENV}=poll)"
                    );
                }
                Ok(Enforcer::Poll)
            }
            MemoryEnforcement::Cgroup | MemoryEnforcement::Auto => match cgroup_v2() {
                Ok(base) => {
                    if first {
                        tracing::info!(
                            base = %base.dir.display(),
                            "memory enforcement: cgroup v2, one cgroup per job with memory.max"
                        );
                    }
                    Ok(Enforcer::Cgroup(base))
                }
                Err(why) if mode == MemoryEnforcement::Cgroup => Err(anyhow::anyhow!(
                    "{MEMORY_ENFORCEMENT_ENV}=cgroup, but cgroup v2 memory enforcement is not \
                     usable here: {why}"
                )),
                Err(why) => {
                    if first {
                        tracing::warn!(
                            "memory enforcement: cgroup v2 is not usable ({why}); enforcing \
                             jobs' memory by polling the RSS of their process groups every \
                             {interval_ms} ms instead (a job is killed once it is seen above \
                             its limit; set {MEMORY_ENFORCEMENT_ENV}=poll to skip this check)"
                        );
                    }
                    Ok(Enforcer::Poll)
                }
            },
        }
    }
}

// ---- cgroup v2 ----------------------------------------------------------------------------

/// The cgroup v2 directory that jobs' cgroups go under, with the memory controller enabled
/// for its children.
#[derive(Debug)]
pub struct CgroupBase {
    dir: PathBuf,
}

impl CgroupBase {
    /// The directory (`<agent's own cgroup>`; the agent itself is in `<dir>/agent`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the job's cgroup with its memory limit (bytes).
    pub(crate) fn create_job(&self, job: &str, limit: u64) -> io::Result<JobCgroup> {
        let name: String = job
            .chars()
            .map(|c| if c == '/' || c.is_control() { '_' } else { c })
            .collect();
        let dir = self.dir.join(format!("job-{name}"));
        if let Err(e) = std::fs::create_dir(&dir) {
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
            // Left over from an agent that died: it can go when it is empty.
            std::fs::remove_dir(&dir)?;
            std::fs::create_dir(&dir)?;
        }
        let cgroup = JobCgroup { dir };
        let setup = || -> io::Result<()> {
            write(&cgroup.dir.join("memory.max"), &limit.to_string())?;
            for (file, value) in [("memory.swap.max", "0"), ("memory.oom.group", "1")] {
                let path = cgroup.dir.join(file);
                if path.exists() {
                    write(&path, value)?;
                }
            }
            Ok(())
        };
        if let Err(e) = setup() {
            let _ = std::fs::remove_dir(&cgroup.dir);
            return Err(e);
        }
        Ok(cgroup)
    }
}

/// One job's cgroup.
#[derive(Debug)]
pub(crate) struct JobCgroup {
    dir: PathBuf,
}

/// Puts the job's shell into the cgroup (`$0`), then runs the job's command (`$@`) in its
/// place: the job is in its cgroup before it runs.
pub(crate) const CGROUP_WRAPPER: &str = "echo $$ > \"$0\" || { echo \"fairsched agent: cannot \
     move the job into its cgroup ($0)\" >&2; exit 125; }; exec \"$@\"";

impl JobCgroup {
    pub(crate) fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// OOM kills in the cgroup so far (`memory.events`).
    pub(crate) fn oom_kills(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("memory.events"))
            .map(|t| oom_kills(&t))
            .unwrap_or(0)
    }

    /// Kills what is left in the cgroup and removes it (retrying for about a second while
    /// the processes exit).
    pub(crate) async fn remove(self) {
        for attempt in 0..50 {
            let left = pids(&self.procs());
            if left.is_empty() {
                match std::fs::remove_dir(&self.dir) {
                    Ok(()) => return,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                    Err(_) => {}
                }
            } else if attempt == 0 || attempt % 10 == 0 {
                let kill_file = self.dir.join("cgroup.kill");
                if !(kill_file.exists() && write(&kill_file, "1").is_ok()) {
                    for pid in left {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(cgroup = %self.dir.display(), "cannot remove the job's cgroup");
    }
}

/// `oom_kill` (and `oom_group_kill`) of a `memory.events` file.
fn oom_kills(events: &str) -> u64 {
    events
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| *k == "oom_kill" || *k == "oom_group_kill")
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// The reason a job OOM-killed in its cgroup is reported with.
pub(crate) fn cgroup_reason(limit: u64) -> String {
    format!(
        "memory limit exceeded: the job needed more than its {} (cgroup v2 memory.max; killed \
         by the kernel's OOM killer)",
        human_bytes(limit)
    )
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn pids(procs: &Path) -> Vec<i32> {
    std::fs::read_to_string(procs)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

static CGROUP: OnceLock<Result<CgroupBase, String>> = OnceLock::new();

/// cgroup v2 memory enforcement for this process: set up the first time it is asked (which
/// moves this process into `<own cgroup>/agent` and enables the memory controller for the
/// children of its cgroup), the same answer afterwards. `Err`: why it is not usable.
pub fn cgroup_v2() -> Result<&'static CgroupBase, &'static str> {
    CGROUP
        .get_or_init(setup_cgroup_v2)
        .as_ref()
        .map_err(String::as_str)
}

fn setup_cgroup_v2() -> Result<CgroupBase, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let dir = own_cgroup_dir(&mountinfo, &own)?;
    enable_memory(&dir, std::process::id(), &mountinfo)
}

/// One line of `/proc/self/mountinfo`: root, mount point, file system type, super options.
struct Mount<'a> {
    root: &'a str,
    point: &'a str,
    fstype: &'a str,
    options: &'a str,
}

fn mounts(mountinfo: &str) -> impl Iterator<Item = Mount<'_>> {
    mountinfo.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut b = before.split(' ');
        let root = b.nth(3)?;
        let point = b.next()?;
        let mut a = after.split(' ');
        let fstype = a.next()?;
        let options = a.nth(1).unwrap_or("");
        Some(Mount {
            root,
            point,
            fstype,
            options,
        })
    })
}

/// Where cgroup v1 has the memory controller, if it does.
fn v1_memory(mountinfo: &str) -> Option<&str> {
    mounts(mountinfo)
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "memory"))
        .map(|m| m.point)
}

/// The directory of this process' cgroup v2 (`/proc/self/cgroup` line `0::PATH` under the
/// cgroup2 mount, `/sys/fs/cgroup` preferred).
fn own_cgroup_dir(mountinfo: &str, proc_self_cgroup: &str) -> Result<PathBuf, String> {
    let cgroup2: Vec<Mount> = mounts(mountinfo)
        .filter(|m| m.fstype == "cgroup2")
        .collect();
    let Some(mount) = cgroup2
        .iter()
        .find(|m| m.point == "/sys/fs/cgroup")
        .or(cgroup2.first())
    else {
        let what = match mounts(mountinfo)
            .filter(|m| m.point == "/sys/fs/cgroup")
            .last()
        {
            Some(m) => format!("/sys/fs/cgroup is {}", m.fstype),
            None => "nothing is mounted at /sys/fs/cgroup".to_string(),
        };
        return Err(format!(
            "no cgroup2 file system is mounted ({what}; cgroup v1 only)"
        ));
    };
    let path = proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("the agent is in no cgroup v2 (no `0::` line in /proc/self/cgroup)")?
        .trim();
    let rel = path
        .strip_prefix(mount.root)
        .filter(|r| r.is_empty() || r.starts_with('/') || mount.root.ends_with('/'))
        .filter(|r| !r.split('/').any(|c| c == ".."))
        .ok_or_else(|| {
            format!(
                "the agent's cgroup {path} is outside the cgroup2 mount at {} (root {})",
                mount.point, mount.root
            )
        })?;
    let rel = rel.trim_start_matches('/');
    Ok(if rel.is_empty() {
        PathBuf::from(mount.point)
    } else {
        Path::new(mount.point).join(rel)
    })
}

/// Moves `pid` into `<dir>/agent` and enables the memory controller for `dir`'s children
/// (unless it is already enabled).
fn enable_memory(dir: &Path, pid: u32, mountinfo: &str) -> Result<CgroupBase, String> {
    let at = dir.display();
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers"))
        .map_err(|e| format!("cannot read {at}/cgroup.controllers: {e}"))?;
    if !controllers.split_whitespace().any(|c| c == "memory") {
        let v1 = match v1_memory(mountinfo) {
            Some(p) => format!("; the memory controller is cgroup v1's here, mounted at {p}"),
            None => String::new(),
        };
        return Err(format!(
            "cgroup2 is mounted, but the memory controller is not available to the agent's \
             cgroup {at} (its cgroup.controllers: {:?}){v1}",
            controllers.trim()
        ));
    }
    let subtree = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
        .map_err(|e| format!("cannot read {at}/cgroup.subtree_control: {e}"))?;
    if subtree.split_whitespace().any(|c| c == "memory") {
        return probe(dir);
    }
    let leaf = dir.join("agent");
    if let Err(e) = std::fs::create_dir(&leaf)
        && e.kind() != io::ErrorKind::AlreadyExists
    {
        return Err(format!(
            "cannot create a cgroup under the agent's cgroup {at}: {e} (not delegated to this \
             user, or mounted read-only)"
        ));
    }
    if let Err(e) = write(&leaf.join("cgroup.procs"), &pid.to_string()) {
        let _ = std::fs::remove_dir(&leaf);
        return Err(format!(
            "cannot move the agent into {}: {e}",
            leaf.display()
        ));
    }
    if let Err(e) = write(&dir.join("cgroup.subtree_control"), "+memory") {
        let others = pids(&dir.join("cgroup.procs")).len();
        // Back where it was, and tidy.
        let _ = write(&dir.join("cgroup.procs"), &pid.to_string());
        let _ = std::fs::remove_dir(&leaf);
        let why = if others > 0 {
            format!(
                "; {others} other process(es) share the agent's cgroup, and cgroup v2 lets only \
                 a cgroup without processes give its children controllers (run the agent alone \
                 in its cgroup, e.g. a systemd service with Delegate=yes)"
            )
        } else {
            String::new()
        };
        return Err(format!(
            "cannot enable the memory controller for the children of {at}: {e}{why}"
        ));
    }
    probe(dir)
}

/// Creates and removes a cgroup with a memory limit under `dir`.
fn probe(dir: &Path) -> Result<CgroupBase, String> {
    let base = CgroupBase {
        dir: dir.to_path_buf(),
    };
    let probe = format!("probe-{}", std::process::id());
    let cgroup = base.create_job(&probe, 1 << 40).map_err(|e| {
        format!(
            "cannot create a job cgroup with memory.max under {}: {e}",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_dir(&cgroup.dir);
    Ok(base)
}

// ---- RSS polling --------------------------------------------------------------------------

/// A job the poller watches.
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) pgid: i32,
    /// Bytes.
    pub(crate) limit: u64,
    pub(crate) state: Arc<JobState>,
}

/// Jobs (by id) whose process groups' RSS is polled.
pub(crate) type Watches = Arc<Mutex<BTreeMap<String, Watch>>>;

/// Every [`POLL_INTERVAL`]: sums the RSS of each watched job's process group and kills the
/// groups above their limits (SIGTERM, SIGKILL after `grace`). Runs until aborted.
pub(crate) async fn poll_rss(watches: Watches, grace: Duration) {
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let watched: Vec<(String, i32, u64, Arc<JobState>)> = {
            let mut w = watches.lock().unwrap_or_else(|e| e.into_inner());
            w.retain(|_, x| !x.state.done.load(Ordering::SeqCst));
            w.iter()
                .filter(|(_, x)| x.state.over_limit.get().is_none())
                .map(|(id, x)| (id.clone(), x.pgid, x.limit, x.state.clone()))
                .collect()
        };
        if watched.is_empty() {
            continue;
        }
        let groups: BTreeSet<i32> = watched.iter().map(|w| w.1).collect();
        let Ok(rss) = tokio::task::spawn_blocking(move || group_rss(&groups)).await else {
            continue;
        };
        for (job, pgid, limit, state) in watched {
            let used = rss.get(&pgid).copied().unwrap_or(0);
            if used <= limit || state.done.load(Ordering::SeqCst) {
                continue;
            }
            let reason = poll_reason(used, limit);
            tracing::warn!(job, pgid, used, limit, "{reason}: killing the job");
            state.kill_over_limit(reason, pgid, grace);
        }
    }
}

/// The reason a job killed by the poller is reported with.
fn poll_reason(used: u64, limit: u64) -> String {
    format!(
        "memory limit exceeded: the job's processes used {} (RSS), more than its {}",
        human_bytes(used),
        human_bytes(limit)
    )
}

/// The summed RSS (bytes) of the processes of each process group in `groups`.
pub fn group_rss(groups: &BTreeSet<i32>) -> BTreeMap<i32, u64> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(pgrp) = stat_pgrp(&stat) else {
            continue;
        };
        if !groups.contains(&pgrp) {
            continue;
        }
        let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| status_rss(&s))
            .unwrap_or(0);
        *out.entry(pgrp).or_insert(0) += rss;
    }
    out
}

/// The process group in `/proc/<pid>/stat` (the third field after the command's `)`).
fn stat_pgrp(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// `VmRSS` of `/proc/<pid>/status`, in bytes (none for kernel threads and zombies).
fn status_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `50MiB`, `203.4MiB`, `1.5GiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, size) in UNITS {
        if bytes >= size {
            let whole = bytes / size;
            let tenths = (bytes % size) * 10 / size;
            return if bytes.is_multiple_of(size) {
                format!("{whole}{name}")
            } else {
                format!("{whole}.{tenths}{name}")
            };
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout when the tests were written: cgroup v1 with the memory
    /// controller, cgroup2 (hugetlb only) at /sys/fs/cgroup/unified.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";
    const V2: &str = "\
22 1 0:20 / / rw - ext4 /dev/sda1 rw
30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn finds_the_own_cgroup_directory() {
        let own = "0::/system.slice/fairsched-agent.service\n";
        assert_eq!(
            own_cgroup_dir(V2, own).unwrap(),
            Path::new("/sys/fs/cgroup/system.slice/fairsched-agent.service")
        );
        assert_eq!(
            own_cgroup_dir(V2, "0::/\n").unwrap(),
            Path::new("/sys/fs/cgroup")
        );
        assert_eq!(
            own_cgroup_dir(HYBRID, "4:memory:/x\n0::/\n").unwrap(),
            Path::new("/sys/fs/cgroup/unified")
        );
        let e = own_cgroup_dir(V1, "4:memory:/x\n").unwrap_err();
        assert!(
            e.contains("no cgroup2") && e.contains("/sys/fs/cgroup is tmpfs"),
            "{e}"
        );
        let e = own_cgroup_dir(V2, "4:memory:/x\n").unwrap_err();
        assert!(e.contains("no cgroup v2"), "{e}");
        let e = own_cgroup_dir(V2, "0::/../elsewhere\n").unwrap_err();
        assert!(e.contains("outside"), "{e}");
        assert_eq!(v1_memory(HYBRID), Some("/sys/fs/cgroup/memory"));
        assert_eq!(v1_memory(V2), None);
    }

    /// The setup's file writes, on a plain directory standing in for a cgroup.
    #[test]
    fn enables_memory_from_a_leaf_and_probes() {
        let tmp = std::env::temp_dir().join(format!("fairsched-cg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("cgroup.controllers"), "cpu io hugetlb\n").unwrap();
        std::fs::write(tmp.join("cgroup.subtree_control"), "").unwrap();
        let e = enable_memory(&tmp, 42, HYBRID).unwrap_err();
        assert!(
            e.contains("memory controller is not available") && e.contains("cgroup v1"),
            "{e}"
        );
        std::fs::write(tmp.join("cgroup.controllers"), "cpu memory\n").unwrap();
        let base = enable_memory(&tmp, 42, V2).unwrap();
        assert_eq!(base.dir(), tmp);
        assert_eq!(
            std::fs::read_to_string(tmp.join("agent/cgroup.procs")).unwrap(),
            "42"
        );
        assert_eq!(
            std::fs::read_to_string(tmp.join("cgroup.subtree_control")).unwrap(),
            "+memory"
        );
        let job = base.create_job("0.7", 50 << 20).unwrap();
        assert_eq!(job.dir, tmp.join("job-0.7"));
        assert_eq!(
            std::fs::read_to_string(job.dir.join("memory.max")).unwrap(),
            "52428800"
        );
        assert_eq!(job.oom_kills(), 0);
        std::fs::write(
            job.dir.join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n",
        )
        .unwrap();
        assert_eq!(job.oom_kills(), 1);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn parses_proc_files() {
        let stat = "1234 (a (weird) name) S 1 1230 1230 0 -1 4194560 100";
        assert_eq!(stat_pgrp(stat), Some(1230));
        let status = "Name:\ttail\nVmPeak:\t  210000 kB\nVmRSS:\t  204800 kB\nThreads:\t1\n";
        assert_eq!(status_rss(status), Some(200 << 20));
        assert_eq!(status_rss("Name:\tkworker\n"), None);
        assert_eq!(human_bytes(50 << 20), "50MiB");
        assert_eq!(human_bytes((200 << 20) + (1 << 19)), "200.5MiB");
        assert_eq!(human_bytes(512), "512B");
        assert_eq!(oom_kills("oom 0\noom_kill 0\n"), 0);
    }

    /// The job's shell writes its pid (the job's, after `exec`) where `$0` says, then runs
    /// the command with its arguments untouched.
    #[test]
    fn the_wrapper_enters_the_cgroup_before_running_the_job() {
        let tmp = std::env::temp_dir().join(format!("fairsched-wrap-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let procs = tmp.join("cgroup.procs");
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(CGROUP_WRAPPER)
            .arg(&procs)
            .args(["sh", "-c", "echo $$ \"$1\"", "job", "two words"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let pid = std::fs::read_to_string(&procs).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{} two words\n", pid.trim())
        );
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(CGROUP_WRAPPER)
            .arg(tmp.join("missing/cgroup.procs"))
            .args(["true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("cannot move the job into its cgroup")
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn parses_the_mode() {
        assert_eq!("poll".parse(), Ok(MemoryEnforcement::Poll));
        assert_eq!(" cgroup ".parse(), Ok(MemoryEnforcement::Cgroup));
        assert_eq!("auto".parse(), Ok(MemoryEnforcement::Auto));
        assert!("rss".parse::<MemoryEnforcement>().is_err());
    }

    /// The poller sees this test process' own group.
    #[test]
    fn sums_the_rss_of_a_group() {
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        let pgrp = stat_pgrp(&me).unwrap();
        let rss = group_rss(&BTreeSet::from([pgrp]));
        assert!(rss.get(&pgrp).copied().unwrap_or(0) > 1 << 20, "{rss:?}");
    }
}
