//! Issue 17's bar, as an operator's fault drill: `fairsched server` is killed (SIGKILL, by PID)
//! 20 times and agents 10 times while a client keeps submitting one-job operations and the
//! agents run them. Afterwards: every acknowledged operation exists and completed, no job ran
//! twice at once, and no operation completed more jobs than it has.
//!
//! Each job detects a copy of itself running at the same time: under a per-operation `flock`
//! it looks for any live process of its operation that belongs to another job (by the
//! `FAIRSCHED_OPERATION_ID` and `FAIRSCHED_JOB_ID` in `/proc/PID/environ`, so a background
//! child an earlier copy left behind counts too) and writes a `DOUBLE` line if there is one.

mod common;

use common::{BIN, Proc, run_cli, wait_for};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SERVER_KILLS: usize = 20;
const AGENT_KILLS: usize = 10;
const NODES: [&str; 3] = ["n1", "n2", "n3"];
const RESOURCES: &str = "cpu=2,memory=1GiB,user_slots=2";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `fairsched server` on `port` with its store in `dir/data`; waits for its address line.
fn server(port: u16, dir: &Path) -> Proc {
    let config = dir.join("server.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndata_dir = {:?}\n\n[scheduler]\n\
             fair_share_update_period_ms = 100\nnode_heartbeat_period_ms = 100\n",
            dir.join("data")
        ),
    )
    .unwrap();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    common::spawn_server(
        Command::new(BIN)
            .args(["server", "--config"])
            .arg(&config)
            .env("FAIRSCHED_LOG", "info")
            .stderr(log),
    )
    .0
}

fn agent(url: &str, node: &str, dir: &Path) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{node}.log")))
        .unwrap();
    Proc(
        Command::new(BIN)
            .args(["agent", "--server", url, "--node-id", node])
            .args([
                "--resources",
                RESOURCES,
                "--kill-grace-ms",
                "500",
                "--work-dir",
            ])
            .arg(dir.join(node))
            .env("FAIRSCHED_LOG", "fairsched_agent=info")
            .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// The job: detect a live copy of itself (any process of the same operation but of another
/// job, including what an earlier copy left in the background), record its PID, run a little
/// (in the background, as work that outlives a killed shell would), record its end.
fn script(locks: &Path) -> String {
    format!(
        "L={locks}/$FAIRSCHED_OPERATION_ID
exec 9>\"$L.lock\"; flock 9
for f in $(grep -lzx \"FAIRSCHED_OPERATION_ID=$FAIRSCHED_OPERATION_ID\" /proc/[0-9]*/environ 2>/dev/null); do
  if ! grep -qzx \"FAIRSCHED_JOB_ID=$FAIRSCHED_JOB_ID\" \"$f\" 2>/dev/null \\
     && grep -qzx \"FAIRSCHED_OPERATION_ID=$FAIRSCHED_OPERATION_ID\" \"$f\" 2>/dev/null; then
    echo \"DOUBLE $FAIRSCHED_OPERATION_ID $FAIRSCHED_JOB_ID $f\" >> {locks}/doubles
  fi
done
exec 9>&-
sleep 0.4 &
wait
echo \"$FAIRSCHED_JOB_ID\" >> \"$L.ended\"",
        locks = locks.display()
    )
}

#[test]
fn kill_9_of_the_server_and_of_agents_under_load_loses_and_doubles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().to_path_buf();
    let locks = root.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut srv = server(port, &root);
    let mut agents: Vec<Proc> = NODES.iter().map(|n| agent(&url, n, &root)).collect();
    wait_for("the nodes to register", Duration::from_secs(30), || {
        common::json(&url, &["node", "list"])
            .as_array()
            .unwrap()
            .len()
            == NODES.len()
    });

    // The client: one-job operations, one after another; what was acknowledged is kept.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let (acknowledged, stop, url, script) = (
            acknowledged.clone(),
            stop.clone(),
            url.clone(),
            script(&locks),
        );
        // Ids no other test's jobs have (the jobs look for processes of their operation).
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let id = format!("chaos{port}-{n}");
                let out = run_cli(
                    &url,
                    &[],
                    &[
                        "op", "run", "--id", &id, "--cpu", "0.5", "--", "sh", "-c", &script,
                    ],
                );
                let stderr = String::from_utf8_lossy(&out.stderr);
                if out.status.success() || stderr.contains("already exists") {
                    acknowledged.lock().unwrap().insert(id);
                    n += 1;
                } else {
                    // Not acknowledged (the server is down): the same id again.
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        })
    };

    let started = Instant::now();
    for k in 0..SERVER_KILLS {
        std::thread::sleep(Duration::from_millis(700));
        srv.signal(nix::sys::signal::Signal::SIGKILL);
        drop(srv);
        if k % 2 == 0 {
            let a = (k / 2) % NODES.len();
            agents[a].signal(nix::sys::signal::Signal::SIGKILL);
            std::thread::sleep(Duration::from_millis(100));
            agents[a] = agent(&url, NODES[a], &root);
        }
        srv = server(port, &root);
    }
    assert_eq!(SERVER_KILLS / 2, AGENT_KILLS);
    stop.store(true, Ordering::SeqCst);
    client.join().unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 20,
        "only {} submitted",
        acknowledged.len()
    );
    eprintln!(
        "{} operations acknowledged during {} server and {} agent kills in {:.1} s",
        acknowledged.len(),
        SERVER_KILLS,
        AGENT_KILLS,
        started.elapsed().as_secs_f64()
    );

    // Everything acknowledged runs to completion, exactly once.
    wait_for(
        "every acknowledged operation to complete",
        Duration::from_secs(120),
        || {
            let ops = common::json(&url, &["op", "list", "--all"]);
            let completed: BTreeSet<String> = ops
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["state"] == "completed")
                .map(|o| o["id"].as_str().unwrap().to_string())
                .collect();
            acknowledged.is_subset(&completed)
        },
    );
    let ops = common::json(&url, &["op", "list", "--all"]);
    for op in ops.as_array().unwrap() {
        let id = op["id"].as_str().unwrap();
        let counts: &Value = &op["job_counts"];
        assert!(
            counts["completed"].as_u64() <= counts["total"].as_u64(),
            "{id} completed more jobs than it has: {counts}"
        );
        if acknowledged.contains(id) {
            assert_eq!(counts["completed"], 1, "{id}: {counts}");
        }
    }
    let doubles = std::fs::read_to_string(locks.join("doubles")).unwrap_or_default();
    assert!(doubles.is_empty(), "jobs ran twice at once:\n{doubles}");
    drop(agents);
    drop(srv);
}
