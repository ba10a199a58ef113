//! End to end: `fairsched up` on 127.0.0.1 with real processes, driven by the CLI.

mod common;

use common::{BIN, Proc, cli, json, wait_for};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pid_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            pid_files(&path, out);
        } else if path.file_name().is_some_and(|n| n == "pid") {
            out.push(path);
        }
    }
}

/// Starts `fairsched up --nodes 2 --port 0` with `extra` arguments on `data`, its stderr to
/// `stderr`; the process and its standard output, line by line.
fn spawn_up(
    extra: &[&str],
    data: &Path,
    stderr: Stdio,
) -> (Proc, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["up", "--nodes", "2", "--port", "0"])
        .args(extra)
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start fairsched up");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (Proc(child), rx)
}

/// The URL in `up`'s first line, without the trailing `/`.
fn url_in(first: &str) -> String {
    first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .trim_end_matches('/')
        .to_string()
}

#[test]
fn up_runs_completes_aborts_and_stops() {
    let data = tempfile::tempdir().unwrap();
    let err_dir = tempfile::tempdir().unwrap();
    let err_path = err_dir.path().join("stderr");
    let (up, rx) = spawn_up(
        &[],
        data.path(),
        std::fs::File::create(&err_path).unwrap().into(),
    );
    let first = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("fairsched up prints its URL");
    let url = url_in(&first);

    // Both nodes register.
    wait_for("2 nodes", Duration::from_secs(10), || {
        json(&url, &["node", "list"]).as_array().unwrap().len() == 2
    });

    // Submit, run, complete.
    let id = cli(
        &url,
        &[
            "op",
            "run",
            "--jobs",
            "5",
            "--cpu",
            "0.1",
            "--memory",
            "64MiB",
            "--",
            "sh",
            "-c",
            "echo \"hi from $FAIRSCHED_JOB_ID\"; sleep 0.2",
        ],
    )
    .trim()
    .to_string();
    wait_for("the operation to complete", Duration::from_secs(30), || {
        json(&url, &["op", "show", &id])["state"] == "completed"
    });
    let op = json(&url, &["op", "show", &id]);
    let jobs = op["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 5, "{op}");
    assert!(
        jobs.iter()
            .all(|j| j["state"] == "completed" && j["exit_code"] == 0),
        "{op}"
    );
    assert_eq!(op["job_counts"]["completed"], 5);
    let logs = json(&url, &["op", "logs", &id]);
    let logs = logs.as_array().unwrap();
    assert_eq!(logs.len(), 5);
    // One job id everywhere: the API and CLI, FAIRSCHED_JOB_ID, the job's directory.
    let mut shown: Vec<&str> = jobs.iter().map(|j| j["id"].as_str().unwrap()).collect();
    let mut logged: Vec<&str> = logs.iter().map(|l| l["job"].as_str().unwrap()).collect();
    shown.sort();
    logged.sort();
    assert_eq!(shown, logged);
    for l in logs {
        let job = l["job"].as_str().unwrap();
        assert_eq!(l["stdout"], format!("hi from {job}\n"), "{logs:?}");
        let node = l["node"].as_str().unwrap();
        let dir = data.path().join(node).join("jobs").join(&id).join(job);
        assert!(dir.join("stdout").is_file(), "no {}", dir.display());
    }
    let text = cli(&url, &["op", "show", &id, "--all-jobs"]);
    assert!(text.contains(&format!("job {} on", shown[0])), "{text}");
    let list = json(&url, &["op", "list"]);
    assert_eq!(list[0]["id"], id.as_str());
    let listed = json(&url, &["op", "list", "--state", "completed"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert!(
        cli(&url, &["op", "list", "--state", "running"])
            .lines()
            .count()
            == 1
    );

    // The event log: every job's start and end, with its exit code.
    let events = json(&url, &["events", "--operation", &id]);
    let of = |kind: &str| -> Vec<Value> {
        events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == kind)
            .cloned()
            .collect()
    };
    assert_eq!(of("allocation_started").len(), 5, "{events}");
    let finished = of("allocation_finished");
    assert_eq!(finished.len(), 5, "{events}");
    assert!(finished.iter().all(|e| e["exit_code"] == 0), "{events}");
    let text = cli(
        &url,
        &["events", "--operation", &id, "--kind", "operation_state"],
    );
    assert!(text.contains("state=completed"), "{text}");

    // Follow the log while the next operation starts and is aborted: from the newest event
    // now (`--after`, so that events before the follower's connection are replayed: it may
    // connect after the jobs start).
    let newest = json(&url, &["events", "--limit", "1"]);
    let after = newest[0]["seq"]
        .as_u64()
        .expect("a newest event")
        .to_string();
    let mut follower = Proc(
        Command::new(BIN)
            .args([
                "events",
                "--follow",
                "--json",
                "--kind",
                "allocation_started,allocation_preempted",
                "--after",
                &after,
            ])
            .env("FAIRSCHED_SERVER", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fairsched events --follow"),
    );
    let follow_out = follower.0.stdout.take().unwrap();
    let (follow_tx, followed) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(follow_out).lines().map_while(Result::ok) {
            let _ = follow_tx.send(serde_json::from_str(&line).expect("a JSON line"));
        }
    });

    // Abort kills the processes.
    let long = cli(
        &url,
        &[
            "op",
            "run",
            "--jobs",
            "2",
            "--cpu",
            "0.1",
            "--",
            "sh",
            "-c",
            "echo $$ > pid; exec sleep 100",
        ],
    )
    .trim()
    .to_string();
    let mut pids = Vec::new();
    wait_for("2 running jobs", Duration::from_secs(20), || {
        pids.clear();
        pid_files(data.path(), &mut pids);
        pids.len() == 2
            && pids
                .iter()
                .all(|p| std::fs::read_to_string(p).is_ok_and(|s| s.ends_with('\n')))
    });
    let pids: Vec<String> = pids
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap().trim().to_string())
        .collect();
    assert!(
        pids.iter()
            .all(|p| Path::new(&format!("/proc/{p}")).exists())
    );
    let aborted = json(&url, &["op", "abort", &long]);
    assert_eq!(aborted["state"], "aborted");
    // The follower saw both jobs start and be preempted by the abort.
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let e = followed
            .recv_timeout(Duration::from_secs(10))
            .expect("the follower prints the events within 10 s");
        assert_eq!(e["operation"], long.as_str(), "{e}");
        seen.push(e);
    }
    assert_eq!(seen[0]["event"], "allocation_started");
    assert_eq!(seen[1]["event"], "allocation_started");
    assert!(
        seen[2..]
            .iter()
            .all(|e| e["event"] == "allocation_preempted" && e["reason"] == "operation_aborted"),
        "{seen:?}"
    );
    drop(follower);
    wait_for(
        "the jobs' processes to end",
        Duration::from_secs(10),
        || {
            pids.iter().all(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true)
            })
        },
    );
    let err = Command::new(BIN)
        .args(["op", "abort", "no-such-op"])
        .env("FAIRSCHED_SERVER", &url)
        .output()
        .unwrap();
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("1915"));

    // SIGTERM stops everything cleanly.
    let mut up = up;
    let pid = nix::unistd::Pid::from_raw(up.0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = up.exit_status(
        Instant::now(),
        Duration::from_secs(15),
        "fairsched up did not stop",
    );
    assert!(status.success(), "{status:?}");
    // The agents stopped before the server, so each could tell it that its node left.
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(!err.contains("could not tell the server"), "{err}");
    assert!(!err.contains("ERROR"), "{err}");
}

/// `up --demo`: the batch operation fills the cluster with the whole fair share, then the
/// guaranteed adhoc operation starves and preempts batch jobs; the cluster stays up.
#[test]
fn up_demo_shows_fair_share_and_preemption() {
    let data = tempfile::tempdir().unwrap();
    let (up, rx) = spawn_up(&["--demo"], data.path(), Stdio::inherit());
    let mut lines: Vec<String> = Vec::new();
    let start = Instant::now();
    while !lines.iter().any(|l| l.starts_with("[demo] done")) {
        let left = Duration::from_secs(120).saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                assert!(!line.contains("[demo] failed"), "{line}\n{lines:#?}");
                lines.push(line);
            }
            Err(_) => panic!("the demo did not finish in 120 s:\n{lines:#?}"),
        }
    }
    let url = url_in(&lines[0]);
    assert!(
        lines
            .iter()
            .any(|l| l == &format!("  export FAIRSCHED_SERVER={url}")),
        "up tells the user what to set:\n{lines:#?}"
    );
    // Batch alone has the whole cluster; after adhoc arrives it keeps only part of it.
    let batch_shares: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("project-batch   fair share"))
        .collect();
    assert_eq!(batch_shares.len(), 2, "{lines:#?}");
    assert!(batch_shares[0].contains("fair share 100.0 %"), "{lines:#?}");
    assert!(
        !batch_shares[1].contains("fair share 100.0 %"),
        "{lines:#?}"
    );
    let preempted = lines
        .iter()
        .filter(|l| l.starts_with("[demo] preempted job"))
        .count();
    assert!(preempted > 0, "{lines:#?}");

    // The API agrees: batch jobs ended by preemption, adhoc running or done.
    let ops = json(&url, &["op", "list"]);
    let ops = ops.as_array().unwrap();
    let in_pool = |pool: &str| {
        let id = ops.iter().find(|o| o["pool"] == pool).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        json(&url, &["op", "show", &id])
    };
    let batch = in_pool("project-batch");
    let preempted_jobs = batch["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| {
            j["reason"]
                .as_str()
                .is_some_and(|r| r.contains("preemption"))
        })
        .count();
    // The cluster runs on after the demo is done: more preemptions may follow its last line.
    assert!(preempted_jobs >= preempted, "{preempted} told, {batch:#}");
    let adhoc = in_pool("project-adhoc");
    assert!(
        adhoc["job_counts"]["running"].as_u64().unwrap()
            + adhoc["job_counts"]["completed"].as_u64().unwrap()
            >= 1,
        "{adhoc:#}"
    );

    up.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        up.wait(Duration::from_secs(15)),
        "fairsched up stops cleanly"
    );
}

/// `fairsched up --data-dir` on a `fairsched server`'s data directory refuses to start (it
/// would start an empty cluster in its own `store/` beside the server's store), saying why.
#[test]
fn up_refuses_a_server_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fairsched.lock"), "pid 1, fairsched").unwrap();
    let out = Command::new(BIN)
        .args(["up", "--port", "0", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("fairsched up runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("is a `fairsched server` data directory")
            && stderr.contains("give up another --data-dir"),
        "{stderr}"
    );
    assert!(!dir.path().join("store").exists(), "nothing was created");
}
