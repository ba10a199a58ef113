//! A server and one real agent on 127.0.0.1, for tests that run real jobs.

#![allow(dead_code)]

use fairsched_agent::{AgentConfig, MemoryEnforcement};
use fairsched_api::client::ApiClient;
use fairsched_api::{
    JobState, JobView, OperationState, OperationView, SubmitOperation, TaskSubmit, parse_resources,
};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Grows to about 200 MiB (GNU tail keeps a line without a newline in memory) and holds it
/// while `sleep` keeps the pipe open; everything stays in the job's process group.
pub const HOG: &str = "echo $$ > pid; (head -c 200M /dev/zero; sleep 30) | tail > /dev/null";
/// About 20 MiB for 1.5 s (several polls), then success.
pub const MODEST: &str = "(head -c 20M /dev/zero; sleep 1.5) | tail > /dev/null";

/// A running server and agent; [`Cluster::stop`] stops both.
pub struct Cluster {
    pub client: ApiClient,
    /// The agent's work directory.
    pub work_dir: std::path::PathBuf,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    agent: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

pub async fn start(memory: MemoryEnforcement) -> Cluster {
    start_with_retention(memory, None).await
}

/// [`start`] with the agent's `job_dir_retention`.
pub async fn start_with_retention(
    memory: MemoryEnforcement,
    job_dir_retention: Option<Duration>,
) -> Cluster {
    start_with_work_dir(memory, job_dir_retention, None).await
}

/// [`start_with_retention`] with the agent's work directory as given (default: `agent` in
/// the cluster's temporary directory).
pub async fn start_with_work_dir(
    memory: MemoryEnforcement,
    job_dir_retention: Option<Duration>,
    work_dir: Option<std::path::PathBuf>,
) -> Cluster {
    start_with_options(memory, job_dir_retention, work_dir, false).await
}

/// [`start_with_work_dir`], the agent running jobs as their users or not.
pub async fn start_with_options(
    memory: MemoryEnforcement,
    job_dir_retention: Option<Duration>,
    work_dir: Option<std::path::PathBuf>,
    run_as_users: bool,
) -> Cluster {
    start_with_server(memory, job_dir_retention, work_dir, run_as_users, |_| {}).await
}

/// [`start_with_options`], the server's configuration changed by `server`.
pub async fn start_with_server(
    memory: MemoryEnforcement,
    job_dir_retention: Option<Duration>,
    work_dir: Option<std::path::PathBuf>,
    run_as_users: bool,
    server: impl FnOnce(&mut fairsched_server::ServerConfig),
) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let work_dir = work_dir.unwrap_or_else(|| dir.path().join("agent"));
    let mut config = fairsched_server::ServerConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.path().join("store"),
        ..fairsched_server::ServerConfig::default()
    };
    server(&mut config);
    let server = fairsched_server::Server::bind(&config).await.unwrap();
    let url = format!("http://{}", server.local_addr().unwrap());
    let (stop, stopped) = watch::channel(false);
    let until = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let server = tokio::spawn(server.serve(until(stopped.clone())));
    let agent = AgentConfig {
        server: url.clone(),
        token: None,
        token_file: None,
        node_id: "n1".into(),
        resources: parse_resources("cpu=2,memory=4GiB,user_slots=8").unwrap(),
        tags: Vec::new(),
        work_dir: work_dir.clone(),
        kill_grace: Duration::from_millis(500),
        metrics_listen: None,
        job_dir_retention,
        keeper: Some(env!("CARGO_BIN_EXE_fairsched-job-keeper").into()),
        max_job_output: None,
        run_as_users,
    };
    let agent = tokio::spawn(fairsched_agent::run_with_memory_enforcement(
        agent,
        memory,
        until(stopped),
    ));
    Cluster {
        client: ApiClient::new(&url, None),
        work_dir,
        stop,
        server,
        agent,
        _dir: dir,
    }
}

impl Cluster {
    /// Submits one job of `sh -c script` asking for `memory`; the operation id.
    pub async fn submit(&self, memory: &str, script: &str) -> String {
        let op = SubmitOperation {
            tasks: vec![TaskSubmit {
                job_count: 1,
                resources: parse_resources(&format!("cpu=0.5,memory={memory}")).unwrap(),
                command: vec!["sh".into(), "-c".into(), script.into()],
                ..TaskSubmit::default()
            }],
            ..SubmitOperation::default()
        };
        self.client.submit(&op).await.unwrap().id
    }

    /// Waits (at most `limit`) for the operation's first job to end; the job and how long it
    /// took from now.
    pub async fn first_ended_job(&self, op: &str, limit: Duration) -> (JobView, Duration) {
        let start = Instant::now();
        loop {
            let view: OperationView = self.client.get_operation(op).await.unwrap();
            if let Some(j) = view.jobs.iter().find(|j| j.state != JobState::Running) {
                return (j.clone(), start.elapsed());
            }
            assert!(
                start.elapsed() < limit,
                "no job of {op} ended within {limit:?}: {view:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (at most 20 s) for the one-job operation `op` to complete, and checks its job
    /// exited 0 with no reason given; the job.
    pub async fn wait_completed_cleanly(&self, op: &str) -> JobView {
        let done = (self.wait_state(op, OperationState::Completed, Duration::from_secs(20))).await;
        let job = &done.jobs[0];
        assert_eq!(
            (job.state, job.exit_code, job.reason.as_deref()),
            (JobState::Completed, Some(0), None),
            "{done:?}"
        );
        job.clone()
    }

    /// Waits (at most `limit`) for the operation to reach `state`.
    pub async fn wait_state(
        &self,
        op: &str,
        state: OperationState,
        limit: Duration,
    ) -> OperationView {
        let start = Instant::now();
        loop {
            let view = self.client.get_operation(op).await.unwrap();
            if view.state == state {
                return view;
            }
            assert!(
                start.elapsed() < limit,
                "{op} is not {state} within {limit:?}: {view:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(10), self.agent)
            .await
            .expect("the agent stops within 10 s")
            .unwrap()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("the server stops within 10 s")
            .unwrap()
            .unwrap();
    }
}

impl Cluster {
    /// The process group of a job that wrote `$$` to `pid` in its directory.
    pub fn job_pgid(&self, op: &str, job: &str) -> i32 {
        let path = self.work_dir.join("jobs").join(op).join(job).join("pid");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .parse()
            .unwrap()
    }
}

/// Waits (at most `limit`) until no process of the group `pgid` is alive.
pub async fn wait_group_gone(pgid: i32, limit: Duration) {
    let start = Instant::now();
    loop {
        let left = live_group_members(pgid);
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "processes {left:?} of the job's group {pgid} still run after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every process of the machine: its PID and the fields of `/proc/PID/stat` after its name
/// (state first, then the parent, the process group, ...).
pub fn processes() -> Vec<(i32, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        out.push((pid, rest.split_whitespace().map(str::to_string).collect()));
    }
    out
}

/// The processes of the process group `pgid` still alive (not zombies).
pub fn live_group_members(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|(_, f)| f.get(2).and_then(|p| p.parse::<i32>().ok()) == Some(pgid) && f[0] != "Z")
        .map(|(pid, _)| pid)
        .collect()
}
