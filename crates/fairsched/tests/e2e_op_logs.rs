//! `op logs` of running jobs and `op logs --follow` (issue 18): a running job's output so far
//! comes from its node through the heartbeats, marked running; `--follow` prints new output
//! as it comes and ends with the operation; a job writing much more than the server keeps
//! gets a bounded tail and a line saying how much was skipped.

mod common;

use common::{BIN, Cluster, wait_for};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str =
    "[scheduler]\nnode_heartbeat_period_ms = 100\nfair_share_update_period_ms = 100\n";

fn running_job(c: &Cluster, op: &str) -> String {
    let mut job = String::new();
    wait_for("its job to run", Duration::from_secs(30), || {
        let o = c.op(op);
        match o["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["state"] == "running")
        {
            Some(j) => {
                job = j["id"].as_str().unwrap().to_string();
                true
            }
            None => false,
        }
    });
    job
}

#[test]
fn op_logs_shows_running_output_and_follow_streams_it_to_the_end() {
    let c = Cluster::start(CONFIG, &[("n1", "cpu=2,memory=1GiB,user_slots=4")]);
    // The job prints a line, waits for the test's go (at most 60 s), prints another, ends.
    let go = c.dir.path().join("go");
    c.submit(
        "talk",
        &[],
        &format!(
            "echo 'first line'; for i in $(seq 600); do [ -e {go:?} ] && break; sleep 0.1; \
             done; echo 'second line'; echo 'on stderr' >&2"
        ),
    );
    let job = running_job(&c, "talk");

    // While it runs: its output so far, marked running, with its id and node.
    let mut shown = String::new();
    wait_for(
        "op logs to show the first line",
        Duration::from_secs(10),
        || {
            shown = c.cli(&["op", "logs", "talk"]);
            shown.contains("first line")
        },
    );
    assert!(
        shown.contains(&format!("== job {job} on n1 (running) ==")),
        "{shown}"
    );
    assert!(!shown.contains("second line"), "{shown}");
    let live = c.json(&["op", "logs", "talk"]);
    assert_eq!(live[0]["state"], "running", "{live}");
    assert_eq!(live[0]["live"]["stdout"]["end"], 11, "{live}");

    // --follow prints the first line, then (after the go) the rest, and ends with the job.
    let mut follow = Command::new(BIN)
        .args(["op", "logs", "--follow", "talk"])
        .env("FAIRSCHED_SERVER", &c.url)
        .env_remove("FAIRSCHED_CONFIG")
        .env_remove("FAIRSCHED_TOKEN")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !lines.iter().any(|l: &String| l == "first line") {
        let left = deadline.saturating_duration_since(Instant::now());
        lines.push(
            rx.recv_timeout(left)
                .expect("--follow prints the first line"),
        );
    }
    assert!(!lines.iter().any(|l| l == "second line"), "{lines:?}");
    std::fs::write(&go, "").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = follow.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "--follow did not end with the operation: {lines:?}"
        );
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The rest of what it printed.
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(l);
    }
    assert!(status.success(), "{status:?}: {lines:?}");
    assert_eq!(c.op("talk")["state"], "completed");
    let at = |text: &str| {
        let found: Vec<usize> = (0..lines.len()).filter(|&i| lines[i] == text).collect();
        assert_eq!(found.len(), 1, "{text:?} once: {lines:?}");
        found[0]
    };
    assert!(at("first line") < at("second line"), "{lines:?}");
    assert!(at("second line") < at("on stderr"), "{lines:?}");
    assert_eq!(
        at(&format!("== job {job} on n1 (running) ==")),
        0,
        "{lines:?}"
    );
    // (running or completed, as it was when read)
    let stderr_heading = lines
        .iter()
        .position(|l| {
            l.starts_with(&format!("== job {job} on n1 (")) && l.ends_with("): stderr ==")
        })
        .unwrap_or_else(|| panic!("no stderr heading: {lines:?}"));
    assert!(stderr_heading < at("on stderr"), "{lines:?}");
    assert_eq!(
        lines.last().unwrap(),
        &format!("== job {job} on n1: completed =="),
        "{lines:?}"
    );

    // A finished operation: --follow prints its output and ends at once.
    let out = c.cli(&["op", "logs", "--follow", "talk"]);
    assert!(
        out.contains("first line\nsecond line\n") && out.contains("on stderr"),
        "{out}"
    );
    c.stop();
}

/// A job that writes far more than a heartbeat carries or the server keeps: `op logs` shows
/// its newest bytes with a line saying how many were skipped; non-UTF-8 bytes are shown as
/// U+FFFD; nothing fails.
#[test]
fn a_job_with_much_output_gets_a_bounded_tail() {
    let c = Cluster::start(CONFIG, &[("n1", "cpu=2,memory=1GiB,user_slots=4")]);
    const MB: usize = 20;
    c.submit(
        "big",
        &[],
        &format!(
            "head -c {} /dev/zero | tr '\\0' x; echo; printf 'bad \\377\\376 bytes\\n'; \
             echo 'the end'; sleep 60",
            MB << 20
        ),
    );
    running_job(&c, "big");
    let mut shown = String::new();
    wait_for("op logs to show the end", Duration::from_secs(20), || {
        shown = c.cli(&["op", "logs", "big"]);
        shown.contains("the end")
    });
    assert!(shown.len() < 128 * 1024, "{} bytes shown", shown.len());
    assert!(
        shown.contains("bad \u{FFFD}\u{FFFD} bytes\n"),
        "{}",
        &shown[shown.len() - 200..]
    );
    let skipped_line = shown
        .lines()
        .find(|l| l.starts_with("... ") && l.ends_with(" bytes skipped ..."))
        .unwrap_or_else(|| panic!("no skipped line: {}", &shown[..200]));
    let skipped: u64 = skipped_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let total = (MB << 20) as u64 + "\nbad \u{FFFD}\u{FFFD} bytes\nthe end\n".len() as u64 - 4;
    assert!(
        skipped > total - 128 * 1024 && skipped < total,
        "{skipped} of {total}"
    );
    let live = c.json(&["op", "logs", "big"]);
    assert_eq!(
        live[0]["live"]["stdout"]["end"], total,
        "{}",
        live[0]["live"]
    );
    // The server and the agent are fine: the operation is aborted as usual.
    c.cli(&["op", "abort", "big"]);
    c.stop();
}

/// A job's output is bounded on its node (`--max-job-output`): the first bytes of each
/// stream are kept, then a line says the rest was discarded and how much; the job is not
/// stopped for it and ends as it would have.
#[test]
fn a_jobs_output_files_are_capped_on_its_node() {
    let mut c = Cluster::start(CONFIG, &[]);
    let url = c.url.clone();
    c.start_agent_with(
        "n1",
        "cpu=1,memory=1GiB,user_slots=2",
        &url,
        &["--max-job-output", "1MiB"],
    );
    common::wait_for("the node to register", Duration::from_secs(30), || {
        c.json(&["node", "list"]).as_array().unwrap().len() == 1
    });
    c.submit(
        "loud",
        &["--cpu", "1"],
        "head -c 3000000 /dev/zero | tr '\\0' a; echo last; echo err-ok >&2",
    );
    common::wait_for("the job to complete", Duration::from_secs(60), || {
        c.op("loud")["state"] == "completed"
    });
    let dir = c.dir.path().join("n1").join("jobs").join("loud");
    let dir = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let stdout = std::fs::read(dir.join("stdout")).unwrap();
    assert!(stdout.len() < (1 << 20) + 1000, "{} bytes", stdout.len());
    assert!(
        stdout[..1 << 20].iter().all(|&b| b == b'a'),
        "the first bytes"
    );
    let note = String::from_utf8_lossy(&stdout[1 << 20..]).into_owned();
    assert!(note.contains("stdout truncated here"), "{note}");
    assert!(
        note.contains(&format!(
            "{} more bytes of stdout were discarded",
            3_000_005 - (1 << 20)
        )),
        "{note}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("stderr")).unwrap(),
        "err-ok\n"
    );
    c.stop();
}
