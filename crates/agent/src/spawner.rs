//! The agent's end of its job spawner (the process is in `keeper.rs`): starts it, sends it
//! [`Request`]s, and hands each job's [`Report`]s to that job's task, in the order they
//! were written.
//!
//! The spawner is started with the agent. If it ends while the agent runs (killed by hand, by
//! the OOM killer), its keepers see the end of their control pipes and kill their jobs; once
//! the last of them has exited (the end of the reports' pipe, which every keeper holds), the
//! tasks of their jobs see their channels close and report the jobs aborted. The next job
//! starts a new spawner.

use crate::keeper::{Report, Request, RunAs};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Where each job's reports go, by key.
type Routes = Arc<Mutex<BTreeMap<u64, mpsc::UnboundedSender<Report>>>>;

/// A running spawner.
#[derive(Debug)]
struct Live {
    /// Its stdin (blocking writes: requests are small, and it reads them at once).
    requests: std::fs::File,
    routes: Routes,
    /// Set when the process has exited.
    ended: Arc<AtomicBool>,
}

#[derive(Debug)]
pub(crate) struct Spawner {
    program: PathBuf,
    args: Vec<OsString>,
    /// Variables of the agent's environment the spawner (so the jobs) does not get.
    removed_env: &'static [&'static str],
    live: Option<Live>,
    next_key: u64,
}

impl Spawner {
    /// Starts `program args...` as the spawner.
    pub(crate) fn start(
        program: PathBuf,
        args: Vec<OsString>,
        removed_env: &'static [&'static str],
    ) -> std::io::Result<Spawner> {
        let mut s = Spawner {
            program,
            args,
            removed_env,
            live: None,
            next_key: 1,
        };
        s.live = Some(s.spawn()?);
        Ok(s)
    }

    fn spawn(&self) -> std::io::Result<Live> {
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own group: a terminal's Ctrl-C reaches the agent, which then stops its
            // jobs itself (the keepers' grace periods).
            .process_group(0);
        for k in self.removed_env {
            cmd.env_remove(k);
        }
        let mut child = cmd.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "cannot start the job spawner {}: {e}",
                    self.program.display()
                ),
            )
        })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let requests = std::fs::File::from(stdin.into_owned_fd()?);
        let routes: Routes = Arc::default();
        let ended = Arc::new(AtomicBool::new(false));
        let pid = child.id().unwrap_or(0);
        {
            let ended = ended.clone();
            tokio::spawn(async move {
                let status = child.wait().await;
                ended.store(true, Ordering::SeqCst);
                let how = match status {
                    Ok(s) if s.success() => return,
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                };
                tracing::error!(
                    pid,
                    "the job spawner ended ({how}): its jobs' keepers kill them, and they are \
                     reported aborted (spawner_lost); the next job starts a new spawner"
                );
            });
        }
        {
            let routes = routes.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let Some((key, report)) = Report::parse(&line) else {
                        tracing::warn!(line, "unexpected line from the job spawner");
                        continue;
                    };
                    let mut routes = routes.lock().unwrap_or_else(|e| e.into_inner());
                    let last = matches!(report, Report::Exit { .. });
                    if let Some(tx) = routes.get(&key) {
                        let _ = tx.send(report);
                    }
                    if last {
                        routes.remove(&key);
                    }
                }
                // The spawner and every keeper are gone: the jobs still waiting for their
                // ends get none (their channels close).
                routes.lock().unwrap_or_else(|e| e.into_inner()).clear();
            });
        }
        Ok(Live {
            requests,
            routes,
            ended,
        })
    }

    /// Starts a job (in `dir`, which exists; as `user`, none: as the spawner's): its key and
    /// its reports, the last an
    /// [`Report::Exit`] (a channel that closes before it: the keeper was lost with its
    /// spawner, and has killed the job).
    pub(crate) fn run(
        &mut self,
        dir: PathBuf,
        command: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        user: Option<RunAs>,
    ) -> std::io::Result<(u64, mpsc::UnboundedReceiver<Report>)> {
        let key = self.next_key;
        self.next_key += 1;
        let request = Request::Start {
            key,
            dir,
            command,
            env,
            user,
        }
        .encode()
        .map_err(std::io::Error::other)?;
        let (tx, rx) = mpsc::unbounded_channel();
        if self
            .live
            .as_ref()
            .is_none_or(|l| l.ended.load(Ordering::SeqCst))
        {
            self.live = Some(self.spawn()?);
        }
        if self.send_start(key, &tx, &request).is_err() {
            // It ended just now: once more with a new one.
            self.live = Some(self.spawn()?);
            self.send_start(key, &tx, &request).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot reach the job spawner: {e}"))
            })?;
        }
        Ok((key, rx))
    }

    fn send_start(
        &mut self,
        key: u64,
        tx: &mpsc::UnboundedSender<Report>,
        request: &[u8],
    ) -> std::io::Result<()> {
        let live = self.live.as_mut().expect("started");
        let route = |add: bool| {
            let mut routes = live.routes.lock().unwrap_or_else(|e| e.into_inner());
            if add {
                routes.insert(key, tx.clone());
            } else {
                routes.remove(&key);
            }
        };
        // Routed before it is sent: its first report may come at once.
        route(true);
        let sent = live.requests.write_all(request);
        if sent.is_err() {
            route(false);
        }
        sent
    }

    /// Sends a request about a running job (a job whose keeper ended: nothing to do).
    pub(crate) fn tell(&mut self, request: &Request) {
        if let (Some(live), Ok(bytes)) = (self.live.as_mut(), request.encode()) {
            let _ = live.requests.write_all(&bytes);
        }
    }
}
