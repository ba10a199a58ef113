//! A real full disk on the operator's path: `fairsched server` (its own process, its config
//! file) keeps its store on an 8 MiB tmpfs mounted in its own mount namespace (`unshare
//! --mount`, so nothing outside the test sees it), a `fairsched agent` runs jobs, users go
//! through the CLI and the HTTP API. The test fills that disk through `/proc/PID/root`, then
//! frees it. Needs the right to mount (root, or a user namespace); says why it skips where it
//! cannot.

mod common;

use common::{BIN, Proc, wait_for};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether this machine lets the test mount a tmpfs in a mount namespace of its own.
fn can_mount(dir: &Path) -> Result<(), String> {
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs -o size=1m tmpfs \"$1\"")
        .arg("sh")
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run unshare: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// One HTTP request to `url` (`http://host:port`): status and JSON body.
fn http(url: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Writes to `path` until the disk is full; the bytes written.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(nix::libc::ENOSPC), "{e}");
                break;
            }
        }
    }
    let _ = f.sync_all();
    written
}

/// An operation whose record takes about 300 KB (its environment: three variables of 100 KB,
/// each within what `exec` takes), so that committing it needs new disk space.
fn big_operation(id: &str) -> Value {
    let env: serde_json::Map<String, Value> = (0..3)
        .map(|i| (format!("PADDING{i}"), json!("x".repeat(100_000))))
        .collect();
    json!({"id": id, "tasks": [{"job_count": 1, "resources": {"cpu": 1},
        "command": ["true"], "env": env}]})
}

#[test]
fn a_full_disk_makes_the_server_read_only_and_nothing_refused_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    if let Err(why) = can_mount(&data) {
        eprintln!("skipped: cannot mount a tmpfs in a mount namespace here ({why})");
        return;
    }
    let config = dir.path().join("server.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = {data:?}\n\n[scheduler]\n\
             fair_share_update_period_ms = 100\nnode_heartbeat_period_ms = 100\n"
        ),
    )
    .unwrap();
    let (server, url) = common::spawn_server(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tmpfs -o size=8m tmpfs \"$1\" && exec \"$2\" server --config \"$3\"")
            .arg("sh")
            .arg(&data)
            .arg(BIN)
            .arg(&config)
            .env("FAIRSCHED_LOG", "info")
            .stderr(std::fs::File::create(dir.path().join("server.log")).unwrap()),
    );
    // `exec`: this PID is the server's, and /proc/PID/root sees its mounts.
    let pid = server.0.id();
    let work = dir.path().join("n1");
    let agent_log = dir.path().join("n1.log");
    let agent = Proc(
        Command::new(BIN)
            .args(["agent", "--server", &url, "--node-id", "n1"])
            .args(["--resources", "cpu=2,memory=1GiB,user_slots=4"])
            .arg("--work-dir")
            .arg(&work)
            .env("FAIRSCHED_LOG", "fairsched_agent=info")
            .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&agent_log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the node to register", Duration::from_secs(30), || {
        common::json(&url, &["node", "list"])
            .as_array()
            .unwrap()
            .len()
            == 1
    });
    let run = |id: &str| {
        common::run_cli(
            &url,
            &[],
            &["op", "run", "--id", id, "--cpu", "1", "--", "true"],
        )
    };
    assert!(run("before").status.success());
    wait_for(
        "the first operation to complete",
        Duration::from_secs(30),
        || common::json(&url, &["op", "show", "before"])["state"] == "completed",
    );

    // The disk fills up: the first commit that needs space fails, and is undone.
    let filler: PathBuf = PathBuf::from(format!("/proc/{pid}/root"))
        .join(data.strip_prefix("/").unwrap())
        .join("filler");
    assert!(fill(&filler) > 0);
    let mut refused = None;
    for i in 0..40 {
        let id = format!("big-{i}");
        let (status, body) = http(
            &url,
            "POST",
            "/api/v1/operations",
            Some(&big_operation(&id)),
        );
        if status == 503 {
            refused = Some((id, body));
            break;
        }
        assert_eq!(status, 200, "{body}");
    }
    let (refused_id, body) = refused.expect("a commit failed on the full disk");
    assert_eq!(body["code"], 100_503, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("store cannot write"), "{message}");
    assert!(message.contains("full"), "{message}");

    // The server says so, refuses changes with a message that says what to do, serves reads.
    let (_, status) = http(&url, "GET", "/api/v1/status", None);
    assert_eq!(status["read_only"], json!(true), "{status}");
    let out = run("during");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("read-only") && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    let listed: Vec<String> = common::json(&url, &["op", "list", "--all"])
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!listed.contains(&refused_id), "{listed:?}");
    assert!(!listed.contains(&"during".to_string()), "{listed:?}");
    // No job of a refused operation starts.
    std::thread::sleep(Duration::from_secs(1));
    for id in [refused_id.as_str(), "during"] {
        assert!(!work.join("jobs").join(id).exists(), "a job of {id} ran");
    }
    let log = std::fs::read_to_string(&agent_log).unwrap();
    assert!(log.contains("the server refused it"), "{log}");
    assert!(!log.contains("unreachable"), "{log}");

    // Space again: the server resumes by itself, the agent's heartbeats are taken again.
    std::fs::remove_file(&filler).unwrap();
    wait_for(
        "the server to leave read-only",
        Duration::from_secs(10),
        || http(&url, "GET", "/api/v1/status", None).1["read_only"] == json!(false),
    );
    assert!(run("after").status.success());
    wait_for(
        "an operation after the outage to complete",
        Duration::from_secs(30),
        || common::json(&url, &["op", "show", "after"])["state"] == "completed",
    );
    let after: Vec<String> = common::json(&url, &["op", "list", "--all"])
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!after.contains(&refused_id), "{after:?}");
    let server_log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(
        server_log.contains("the store can write again"),
        "{server_log}"
    );

    for p in [agent, server] {
        p.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(p.wait(Duration::from_secs(20)), "a process stops cleanly");
    }
}
