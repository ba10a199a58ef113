//! `fairsched simulate` as a user runs it: a small SWF trace (gzip-compressed, as the Parallel
//! Workloads Archive ships them) replayed into an output directory, and bad input refused with
//! exit status 2 and a message naming what is wrong, writing nothing.

use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_fairsched");

/// Four jobs on two 4-processor nodes: two groups, one job wider than a node.
const TRACE: &str = "; MaxNodes: 2\n; MaxProcs: 8\n\
1 0 5 100 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1\n\
2 0 7 50 8 -1 -1 8 -1 -1 1 2 2 -1 -1 -1 -1 -1\n\
3 20 0 30 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1\n\
4 40 0 10 1 -1 -1 1 -1 -1 1 3 2 -1 -1 -1 -1 -1\n";

fn simulate(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("simulate")
        .args(args)
        .output()
        .expect("fairsched runs")
}

fn write_gz(path: &Path, text: &str) {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    std::fs::write(path, encoder.finish().unwrap()).unwrap();
}

#[test]
fn simulate_writes_summary_jobs_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.swf.gz");
    write_gz(&trace, TRACE);
    let out = dir.path().join("out");
    for policy in [
        "fair-share",
        "fifo",
        "drf",
        "fcfs",
        "easy",
        "conservative",
        "fair-share+reservation",
        "fair-share+nopreemption",
        "drf+reservation+nopreemption",
    ] {
        let output = simulate(&[
            "--trace",
            trace.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--policy",
            policy,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{policy}: {stderr}");
        assert!(stderr.contains("4 jobs (4 completed"), "{policy}: {stderr}");

        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["policy"], policy);
        assert_eq!(summary["trace"]["format"], "swf");
        assert_eq!(summary["nodes"]["count"], 2);
        assert_eq!(summary["jobs"]["completed"], 4);
        assert_eq!(summary["trace_wait_s"]["max"], 7.0);
        assert!(
            summary["makespan_s"].as_f64().unwrap() >= 100.0,
            "{summary}"
        );
        assert_eq!(summary["by_group"]["g2"]["jobs"], 2);

        let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
        let lines: Vec<&str> = jobs.lines().collect();
        assert_eq!(lines.len(), 5, "{jobs}");
        assert!(lines[0].starts_with("id,line,user,group,pool,submit_s,width"));
        // Rows in the order jobs ended; the id and the trace's line name each.
        let row = |id: &str| {
            let rows: Vec<&&str> = lines.iter().filter(|l| l.starts_with(id)).collect();
            assert_eq!(rows.len(), 1, "{policy}: one row of job {id}: {jobs}");
            rows[0].to_string()
        };
        assert!(row("1,3,u1,g1,").contains(",completed,"), "{jobs}");
        assert!(
            row("2,4,").contains(",8,2,"),
            "job 2: 8 processors in 2 allocations: {jobs}"
        );
        let finishes: Vec<f64> = lines[1..]
            .iter()
            .map(|l| l.split(',').nth(11).unwrap().parse().unwrap())
            .collect();
        assert!(
            finishes.is_sorted(),
            "{policy}: rows in the order jobs ended: {jobs}"
        );
        assert!(!out.join("jobs.csv.partial").exists(), "{policy}");

        assert!(
            stderr.contains("utilization.svg, queue.svg, wait_cdf.svg"),
            "{policy}: {stderr}"
        );
        for plot in ["utilization.svg", "queue.svg", "wait_cdf.svg"] {
            let svg = std::fs::read_to_string(out.join(plot)).unwrap();
            assert!(svg.starts_with("<svg"), "{policy}: {plot}");
            assert!(
                svg.contains(&format!("{policy}, rigid jobs, small.swf.gz")),
                "{policy}: {plot} names the policy, the job model and the trace"
            );
        }
    }
}

#[test]
fn simulate_refuses_bad_input_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.swf");
    std::fs::write(&good, TRACE).unwrap();
    let bad = dir.path().join("bad.swf");
    std::fs::write(&bad, TRACE.replace("3 20 0 30", "3 20 0 x30")).unwrap();
    let no_machine = dir.path().join("no_machine.swf");
    std::fs::write(&no_machine, TRACE.replace("; Max", "; Not")).unwrap();
    let out = dir.path().join("out");
    let missing = dir.path().join("missing.swf");
    let good = good.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 14] = [
        (
            vec!["--trace", bad.to_str().unwrap()],
            "bad.swf:5: field run time",
        ),
        (vec!["--trace", missing.to_str().unwrap()], "missing.swf"),
        (vec!["--trace", good, "--format", "csv"], "--format"),
        (vec!["--trace", good, "--nodes", "two"], "--nodes"),
        (vec!["--trace", good, "--policy", "fastest"], "--policy"),
        (vec!["--trace", no_machine.to_str().unwrap()], "--nodes"),
        (
            vec!["--trace", good, "--job-model", "elastic"],
            "--job-model",
        ),
        (
            vec![
                "--trace",
                good,
                "--policy",
                "easy",
                "--job-model",
                "malleable",
            ],
            "--policy easy starts every job whole",
        ),
        (
            vec!["--trace", good, "--rigid", "--job-model", "malleable"],
            "contradict",
        ),
        (
            vec!["--trace", good, "--policy", "easy+reservation"],
            "easy already reserves",
        ),
        (
            vec!["--trace", good, "--policy", "conservative+nopreemption"],
            "conservative never preempts",
        ),
        (
            vec![
                "--trace",
                good,
                "--policy",
                "fifo+reservation",
                "--job-model",
                "malleable",
            ],
            "a reservation holds resources for a rigid job",
        ),
        // Was an attempt to allocate hundreds of terabytes (the first update came at ~2^64 ms).
        (
            vec![
                "--trace",
                good,
                "--fair-share-update-period-ms",
                "18446744073709551615",
            ],
            "--fair-share-update-period-ms: 18446744073709551615 ms is longer than a week",
        ),
        (
            vec!["--trace", good, "--policy", "fcfs,easy"],
            "fairsched simulate compare --trace T --policy fcfs,easy",
        ),
    ];
    for (args, expected) in cases {
        let mut args = args;
        args.extend(["--out", out.to_str().unwrap()]);
        let output = simulate(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !out.join("summary.json").exists() && !out.join("utilization.svg").exists(),
            "{args:?} wrote a summary or plots"
        );
    }
    // The nodes can be given when the trace does not describe them.
    let output = simulate(&[
        "--trace",
        no_machine.to_str().unwrap(),
        "--nodes",
        "3:cpu=4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn compare_writes_one_report_of_every_policy_and_their_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.swf");
    std::fs::write(&trace, TRACE).unwrap();
    let out = dir.path().join("cmp");
    let output = simulate(&[
        "compare",
        "--trace",
        trace.to_str().unwrap(),
        "--policy",
        "fifo,fair-share",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("2 policies on small.swf"), "{stderr}");
    for policy in ["1-fifo", "2-fair-share"] {
        for file in ["summary.json", "jobs.csv", "utilization.svg", "queue.svg"] {
            assert!(out.join(policy).join(file).exists(), "{policy}/{file}");
        }
    }
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.starts_with("# small.swf: 2 policies compared"), "{md}");
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 3, "a header and a row per policy: {md}");
    assert!(rows[0].contains("| wait p95 |") && rows[0].contains("Jain's index (users)"));
    assert!(
        rows[1].starts_with("| fifo (rigid jobs) | 4 of 4 |"),
        "{}",
        rows[1]
    );
    assert!(rows[2].starts_with("| fair-share (rigid jobs) | 4 of 4 |"));
    // Jobs 1 and 2 need more than a quarter of the 8 processors (4 and 8): the big jobs.
    assert!(rows[1].split(" | ").nth(11) == Some("2"), "{}", rows[1]);

    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(html.contains("<title>small.swf: 2 policies compared</title>"));
    assert_eq!(html.matches("<tr>").count(), 3);
    // Three kinds of plot, each with both policies side by side, inline.
    assert_eq!(html.matches("<div class=\"plots\">").count(), 3);
    assert_eq!(html.matches("<svg").count(), 6);
    assert!(html.contains("Queue: fair-share, rigid jobs, small.swf"));
}

#[test]
fn compare_refuses_bad_input_before_replaying_anything() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.swf");
    std::fs::write(&trace, TRACE).unwrap();
    let out = dir.path().join("cmp");
    let trace = trace.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec!["--trace", trace, "--policy", "fifo,fastest"],
            "--policy: \"fastest\" is neither",
        ),
        (vec!["--policy", "fifo"], "--trace FILE is required"),
        (
            vec!["--trace", trace, "--policy", ","],
            "--policy: no policy given",
        ),
    ];
    for (args, expected) in cases {
        let mut args = args;
        args.extend(["--out", out.to_str().unwrap()]);
        let mut all = vec!["compare"];
        all.extend(args.iter().copied());
        let output = simulate(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

/// A long replay, as in a batch job (stderr a file, not a terminal), stopped with SIGKILL:
/// it printed progress lines meanwhile, and the jobs that had ended are in
/// `jobs.csv.partial` (never a `jobs.csv` that looks whole).
#[test]
fn a_stopped_replay_leaves_progress_lines_and_the_jobs_that_ended() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("long.swf.gz");
    // 300,000 one-processor jobs of 10 s on 8 processors, one a second: far longer than the
    // test waits.
    let mut text = String::from("; MaxNodes: 2\n; MaxProcs: 8\n");
    for i in 1..=300_000u64 {
        text.push_str(&format!(
            "{i} {i} -1 10 1 -1 -1 1 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
        ));
    }
    write_gz(&trace, &text);
    let out = dir.path().join("out");
    let stderr_path = dir.path().join("stderr");
    let mut child = Command::new(BIN)
        .args(["simulate", "--policy", "fifo", "--trace"])
        .arg(&trace)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("fairsched runs");
    let partial = out.join("jobs.csv.partial");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let seen = loop {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let rows = std::fs::read_to_string(&partial)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if stderr.contains(" jobs finished, ") && rows > 1000 {
            break Some(stderr);
        }
        if std::time::Instant::now() > deadline
            || child.try_wait().expect("the child's status").is_some()
        {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    child.kill().expect("the replay is stopped");
    child.wait().unwrap();
    let stderr = seen.unwrap_or_else(|| {
        panic!(
            "no progress line and rows in 120 s: {}",
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        )
    });
    let line = stderr
        .lines()
        .find(|l| l.contains(" jobs finished, "))
        .unwrap();
    assert!(
        line.starts_with("fairsched simulate: ") && line.contains(" of 300000 jobs finished, "),
        "{line}"
    );
    assert!(
        !stderr.contains('\r'),
        "no bar drawn off a terminal: {stderr:?}"
    );
    let text = std::fs::read_to_string(&partial).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("id,line,user,"));
    // Every whole row is a completed job (the last may have been cut by the kill).
    let rows: Vec<&str> = lines.collect();
    for row in &rows[..rows.len() - 1] {
        assert!(row.contains(",completed,"), "{row}");
    }
    assert!(!out.join("jobs.csv").exists());
    assert!(!out.join("summary.json").exists());
}
