//! End to end, with real processes on 127.0.0.1: `fairsched server` with a pool tree and
//! `fairsched agent`s (started by the test, stopped by PID), jobs that are real shell scripts,
//! everything driven and observed through the CLI (`op`, `pool`, `tree`, `events`).
//!
//! * Preemption with the interruption signal: a guaranteed pool's operation reclaims a full
//!   cluster; jobs that handle SIGINT exit by themselves (completed, reason `preemption`, the
//!   preemptor named in the event log), a job that ignores it is killed after its
//!   interruption timeout, and the guaranteed operation's jobs run.
//! * Graceful preemption: a `graceful` operation above its fair share has exactly its excess
//!   jobs interrupted (`graceful_preemption`) once another operation needs the share.
//! * A pool change under load: with short jobs churning, a pool's weight changes (`pool set`),
//!   then another pool gets a guarantee (`pool apply` of a whole tree file), then an operation
//!   moves to another pool and gets a weight (`op update`); the fair shares in `tree show`
//!   follow, and so do the jobs.
//!
//! Every wait is bounded and generous (the machine may be loaded); nothing asserts on a sleep.

mod common;

use common::{Cluster, process_gone, wait_for};
use serde_json::Value;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);

/// The events of `kind` among `events`.
fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// A shell loop that waits until file `path` exists (a job the test lets end by creating it).
fn until_exists(path: &std::path::Path) -> String {
    format!("while [ ! -e {} ]; do sleep 0.1; done", path.display())
}

fn job_ids(events: &[&Value]) -> Vec<String> {
    let mut ids: Vec<String> = events
        .iter()
        .map(|e| e["job"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// A job that exits 0 when interrupted with SIGINT (and stops its child); writes its PID to
/// `pid` once the trap is set.
const HANDLES_SIGINT: &str =
    "trap 'echo got-int; kill $p; exit 0' INT; sleep 600 & p=$!; echo $$ > pid; wait";

/// A job that notes SIGINT and keeps running.
const IGNORES_SIGINT: &str =
    "trap 'echo ignored-int' INT; echo $$ > pid; while :; do sleep 1; done";

const SMALL: [&str; 4] = ["--cpu", "0.5", "--memory", "64MiB"];

#[test]
fn preemption_interrupts_real_jobs_with_their_signal() {
    let c = Cluster::start(
        r#"
[scheduler]
fair_share_update_period_ms = 100

[pool_trees]
default_tree = "default"

[pool_trees.pool_trees.default.config]
fair_share_starvation_timeout_ms = 500
preemptive_scheduling_backoff_ms = 0
min_spare_allocation_resources_on_node = {}

[pool_trees.pool_trees.default.pools.guaranteed]
strong_guarantee_resources = { cpu = 2 }

[pool_trees.pool_trees.default.pools.batch]
"#,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=8"),
            ("n2", "cpu=1,memory=1GiB,user_slots=8"),
        ],
    );
    // Four long jobs of two operations fill both nodes.
    let batch = |more: &[&'static str]| {
        let mut args = vec!["--pool", "batch", "--jobs", "2"];
        args.extend_from_slice(&SMALL);
        args.extend_from_slice(&["--interruption-signal", "SIGINT"]);
        args.extend_from_slice(more);
        args
    };
    c.submit(
        "handles",
        &batch(&["--interruption-timeout", "60s"]),
        HANDLES_SIGINT,
    );
    c.submit(
        "ignores",
        &batch(&["--interruption-timeout", "2s"]),
        IGNORES_SIGINT,
    );
    wait_for("4 jobs to run", LONG, || {
        c.job_pids("handles").len() == 2 && c.job_pids("ignores").len() == 2
    });
    let ignoring_pids = c.job_pids("ignores");
    assert_eq!(c.op("handles")["spec"]["interruption_signal"], "SIGINT");
    assert_eq!(c.op("ignores")["spec"]["interruption_timeout_ms"], 2000);

    // The guaranteed pool's operation needs the whole cluster. Its jobs note any ignoring
    // job still alive on their node when they start: the server counts an interrupted job's
    // resources free at once, but the node starts the preemptor only once the interrupted
    // jobs have exited (else the node runs more than it has).
    let op = c.op("ignores");
    let node_of = |job: &str| {
        op["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == job)
            .unwrap()["node"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut check = String::from("case $FAIRSCHED_NODE_ID in ");
    for node in ["n1", "n2"] {
        let pids: Vec<&str> = ignoring_pids
            .iter()
            .filter(|(job, _)| node_of(job) == node)
            .map(|(_, pid)| pid.as_str())
            .collect();
        check.push_str(&format!("{node}) P='{}';; ", pids.join(" ")));
    }
    check.push_str("esac; for p in $P; do kill -0 $p 2>/dev/null && echo overlap-$p; done; ");
    // Each of its two jobs takes a whole node, so it may start only once both of the node's
    // jobs have exited.
    let args = [
        "--pool",
        "guaranteed",
        "--jobs",
        "2",
        "--cpu",
        "1",
        "--memory",
        "64MiB",
    ];
    c.submit("B", &args, &format!("{check}echo b-ran; sleep 2"));
    wait_for("B to complete", LONG, || c.op("B")["state"] == "completed");
    let b_events = c.events("B");
    let b_jobs = job_ids(&of(&b_events, "allocation_started"));
    assert_eq!(b_jobs.len(), 2, "{b_events:?}");
    let logs = c.json(&["op", "logs", "B"]);
    assert_eq!(logs.as_array().unwrap().len(), 2, "{logs}");
    for l in logs.as_array().unwrap() {
        assert_eq!(l["stdout"], "b-ran\n", "{logs}");
    }
    let b = c.op("B");
    assert!(
        b["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["state"] == "completed" && j["exit_code"] == 0),
        "{b}"
    );

    // The jobs that handle SIGINT got it, exited 0 in time and count as completed; the
    // interruption names its reason and the preemptor.
    wait_for("the interrupted operation to complete", LONG, || {
        c.op("handles")["state"] == "completed"
    });
    let events = c.events("handles");
    let interrupted = of(&events, "allocation_interrupted");
    assert_eq!(interrupted.len(), 2, "{events:?}");
    for e in &interrupted {
        assert_eq!(e["reason"], "preemption", "{e}");
        assert_eq!(e["timeout_ms"], 60_000, "{e}");
        assert_eq!(e["preemptor"]["operation"], "B", "{e}");
        let by = e["preemptor"]["job"].as_str().unwrap_or_default();
        assert!(b_jobs.iter().any(|j| j == by), "{e} vs B's jobs {b_jobs:?}");
    }
    let finished = of(&events, "allocation_finished");
    assert_eq!(job_ids(&finished), job_ids(&interrupted), "{events:?}");
    assert!(finished.iter().all(|e| e["exit_code"] == 0), "{events:?}");
    assert!(of(&events, "allocation_preempted").is_empty(), "{events:?}");
    let op = c.op("handles");
    for j in op["jobs"].as_array().unwrap() {
        assert_eq!(
            (&j["state"], &j["exit_code"], &j["reason"]),
            (&"completed".into(), &0.into(), &"preemption".into()),
            "{op}"
        );
    }
    let logs = c.json(&["op", "logs", "handles"]);
    assert_eq!(logs.as_array().unwrap().len(), 2, "{logs}");
    for l in logs.as_array().unwrap() {
        assert_eq!(l["stdout"], "got-int\n", "{logs}");
    }
    let text = c.cli(&["op", "show", "handles", "--all-jobs"]);
    assert!(text.contains("completed (exit 0): preemption"), "{text}");

    // The jobs that ignore it got it too, and were killed once their 2 s were up.
    wait_for("the ignoring jobs' processes to be killed", LONG, || {
        ignoring_pids.iter().all(|(_, pid)| process_gone(pid))
    });
    let events = c.events("ignores");
    let interrupted = of(&events, "allocation_interrupted");
    let first_jobs: Vec<String> = ignoring_pids.iter().map(|(j, _)| j.clone()).collect();
    assert_eq!(job_ids(&interrupted), first_jobs, "{events:?}");
    let preempted = of(&events, "allocation_preempted");
    assert_eq!(job_ids(&preempted), first_jobs, "{events:?}");
    for p in &preempted {
        let i = interrupted.iter().find(|i| i["job"] == p["job"]).unwrap();
        assert_eq!(p["reason"], "preemption", "{p}");
        assert_eq!(p["preemptor"]["operation"], "B", "{p}");
        let waited = p["unix_ms"].as_u64().unwrap() - i["unix_ms"].as_u64().unwrap();
        assert!(
            waited >= 1_900,
            "killed {waited} ms after the interruption, before its 2 s timeout: {events:?}"
        );
    }
    let op = c.op("ignores");
    for job in &first_jobs {
        let j = op["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == job.as_str())
            .unwrap();
        assert_eq!(
            (&j["state"], &j["reason"]),
            (&"aborted".into(), &"preemption".into())
        );
    }
    // Each job's output comes with its end's report, once its keeper has seen every process
    // of the job gone (the `sleep` its shell waits on dies only at the kill grace's SIGKILL):
    // possibly after its main process is gone.
    let got_int = |logs: &serde_json::Value| {
        first_jobs.iter().all(|job| {
            logs.as_array().unwrap().iter().any(|l| {
                l["job"] == job.as_str()
                    && l["stdout"].as_str().unwrap_or("").contains("ignored-int")
            })
        })
    };
    wait_for("the ignoring jobs' output", LONG, || {
        got_int(&c.json(&["op", "logs", "ignores"]))
    });

    // The killed jobs went back to pending and run again once B is done.
    wait_for("the ignoring operation to run again", LONG, || {
        c.op("ignores")["job_counts"]["running"] == 2
    });
    c.cli(&["op", "abort", "ignores"]);
    c.stop();
}

/// A gang (`op run --gang`) in a tree with `gang_placement` is preempted whole: the
/// guaranteed pool's operation needs both nodes the gang fills (so the gang's fair share is
/// nothing; were it any, the gang would keep running: nothing of a gang is taken while any
/// of it is within its fair share), and both of the gang's jobs are killed for its first job
/// (one for it, the other with it: `gang_member_preempted`); once the guaranteed operation is
/// done, the gang starts again, whole, and completes.
#[test]
fn a_gang_is_preempted_whole_and_runs_again_whole() {
    let c = Cluster::start(
        r#"
[scheduler]
fair_share_update_period_ms = 100

[pool_trees]
default_tree = "default"

[pool_trees.pool_trees.default.config]
fair_share_starvation_timeout_ms = 500
preemptive_scheduling_backoff_ms = 0
min_spare_allocation_resources_on_node = {}
gang_placement = { enable = true }

[pool_trees.pool_trees.default.pools.guaranteed]
strong_guarantee_resources = { cpu = 2 }

[pool_trees.pool_trees.default.pools.batch]
"#,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=8"),
            ("n2", "cpu=1,memory=1GiB,user_slots=8"),
        ],
    );
    // The gang's jobs run until the test lets them end.
    let go = c.dir.path().join("go");
    let gang_script = format!("echo $$ > pid; {}; echo gang-done", until_exists(&go));
    let args = [
        "--pool", "batch", "--jobs", "2", "--cpu", "1", "--memory", "64MiB", "--gang",
    ];
    c.submit("G", &args, &gang_script);
    wait_for("the gang's 2 jobs to run", LONG, || {
        c.job_pids("G").len() == 2
    });
    let first_pids = c.job_pids("G");

    let args = [
        "--pool",
        "guaranteed",
        "--jobs",
        "2",
        "--cpu",
        "1",
        "--memory",
        "64MiB",
    ];
    c.submit("B", &args, "sleep 1; echo b-ran");
    wait_for("B to complete", LONG, || c.op("B")["state"] == "completed");
    wait_for(
        "the gang's first jobs' processes to be killed",
        LONG,
        || first_pids.iter().all(|(_, pid)| process_gone(pid)),
    );
    let events = c.events("G");
    let preempted = of(&events, "allocation_preempted");
    let mut reasons: Vec<&str> = preempted
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        ["gang_member_preempted", "preemption"],
        "{events:?}"
    );
    for e in &preempted {
        assert_eq!(e["preemptor"]["operation"], "B", "{e}");
    }
    let first_jobs: Vec<String> = first_pids.iter().map(|(j, _)| j.clone()).collect();
    assert_eq!(job_ids(&preempted), first_jobs, "{events:?}");

    // Then the gang runs again, both jobs at once, and completes.
    wait_for("the gang to run again", LONG, || {
        c.op("G")["job_counts"]["running"] == 2
    });
    std::fs::write(&go, "").unwrap();
    wait_for("the gang to complete", LONG, || {
        c.op("G")["state"] == "completed"
    });
    let events = c.events("G");
    let started = of(&events, "allocation_started");
    assert_eq!(started.len(), 4, "{events:?}");
    let finished = of(&events, "allocation_finished");
    assert_eq!(finished.len(), 2, "{events:?}");
    assert!(finished.iter().all(|e| e["exit_code"] == 0), "{events:?}");
    let text = c.cli(&["op", "show", "G"]);
    assert!(text.contains("gang_member_preempted 1"), "{text}");
}

#[test]
fn graceful_operation_above_its_fair_share_is_interrupted() {
    let c = Cluster::start(
        r#"
[scheduler]
fair_share_update_period_ms = 100

[pool_trees]
default_tree = "default"

[pool_trees.pool_trees.default.config]
allocation_graceful_preemption_timeout_ms = 30000
min_spare_allocation_resources_on_node = {}

[pool_trees.pool_trees.default.pools.a]
[pool_trees.pool_trees.default.pools.b]
"#,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=8"),
            ("n2", "cpu=1,memory=1GiB,user_slots=8"),
        ],
    );
    let mut args = vec!["--pool", "a", "--jobs", "4"];
    args.extend_from_slice(&SMALL);
    args.extend_from_slice(&[
        "--preemption-mode",
        "graceful",
        "--interruption-signal",
        "INT",
    ]);
    c.submit("G", &args, HANDLES_SIGINT);
    wait_for("G's 4 jobs to run", LONG, || c.job_pids("G").len() == 4);
    // Alone, G's fair share is its whole demand: nothing of it is interrupted.
    assert_eq!(c.op("G")["job_counts"]["running"], 4);
    assert_eq!(c.op("G")["spec"]["preemption_mode"], "graceful");
    assert!(
        of(&c.events("G"), "allocation_interrupted").is_empty(),
        "{:?}",
        c.events("G")
    );

    // H needs half the cluster: G's fair share drops to half, and its excess two jobs are
    // interrupted (the newest two), exit by themselves, and H runs.
    let mut args = vec!["--pool", "b", "--jobs", "2"];
    args.extend_from_slice(&SMALL);
    c.submit("H", &args, HANDLES_SIGINT);
    wait_for("H's 2 jobs to run", LONG, || {
        c.op("H")["job_counts"]["running"] == 2
    });
    wait_for("G's interrupted jobs to end", LONG, || {
        c.op("G")["job_counts"]["completed"] == 2
    });
    let events = c.events("G");
    let interrupted = of(&events, "allocation_interrupted");
    assert_eq!(interrupted.len(), 2, "{events:?}");
    for e in &interrupted {
        assert_eq!(e["reason"], "graceful_preemption", "{e}");
        assert_eq!(e["timeout_ms"], 30_000, "{e}");
    }
    let started = of(&events, "allocation_started");
    assert_eq!(
        job_ids(&interrupted),
        job_ids(&started[2..]),
        "the newest jobs are the ones above the fair share: {events:?}"
    );
    assert!(of(&events, "allocation_preempted").is_empty(), "{events:?}");
    let g = c.op("G");
    assert_eq!(g["job_counts"]["running"], 2, "{g}");
    for j in g["jobs"].as_array().unwrap() {
        if j["state"] == "completed" {
            assert_eq!(
                (&j["exit_code"], &j["reason"]),
                (&0.into(), &"graceful_preemption".into()),
                "{g}"
            );
        }
    }
    let logs = c.json(&["op", "logs", "G"]);
    let interrupted_jobs = job_ids(&interrupted);
    for l in logs.as_array().unwrap() {
        if interrupted_jobs.iter().any(|j| l["job"] == j.as_str()) {
            assert_eq!(l["stdout"], "got-int\n", "{logs}");
        }
    }
    // Each now runs at its fair share (half the cluster).
    let tree = c.json(&["tree", "show"]);
    for (pool, op) in [("a", "G"), ("b", "H")] {
        let fair = tree["snapshot"]["pools"][pool]["fair_share_ratio"]
            .as_f64()
            .unwrap();
        assert!((fair - 0.5).abs() < 0.02, "{pool}: {fair} in {tree}");
        assert_eq!(
            tree["snapshot"]["operations"][op]["running_job_count"], 2,
            "{tree}"
        );
    }
    c.cli(&["op", "abort", "G"]);
    c.cli(&["op", "abort", "H"]);
    c.stop();
}

/// Running jobs of each operation in one snapshot.
fn running(c: &Cluster, ops: [&str; 2]) -> [u64; 2] {
    let tree = c.json(&["tree", "show"]);
    ops.map(|op| {
        tree["snapshot"]["operations"][op]["running_job_count"]
            .as_u64()
            .unwrap_or(0)
    })
}

fn fair_share(c: &Cluster, pool: &str) -> f64 {
    c.json(&["tree", "show"])["snapshot"]["pools"][pool]["fair_share_ratio"]
        .as_f64()
        .unwrap()
}

/// Waits until the fair shares of `left` and `right` are near the given values.
fn wait_for_shares(c: &Cluster, left: f64, right: f64) {
    wait_for(
        &format!("fair shares left {left}, right {right}"),
        LONG,
        || {
            (fair_share(c, "left") - left).abs() < 0.02
                && (fair_share(c, "right") - right).abs() < 0.02
        },
    );
}

/// After `converged` was seen, `holds` must hold in each of 10 snapshots in a row.
fn stays(c: &Cluster, what: &str, holds: impl Fn([u64; 2]) -> bool) {
    for _ in 0..10 {
        let now = running(c, ["L", "R"]);
        assert!(holds(now), "{what}: running L, R = {now:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn pool_changes_under_load_move_shares_and_jobs() {
    let c = Cluster::start(
        r#"
[scheduler]
fair_share_update_period_ms = 100

[pool_trees]
default_tree = "default"

[pool_trees.pool_trees.default.config]
min_spare_allocation_resources_on_node = {}

[pool_trees.pool_trees.default.pools.left]
[pool_trees.pool_trees.default.pools.right]
"#,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=8"),
            ("n2", "cpu=1,memory=1GiB,user_slots=8"),
        ],
    );
    // Two operations of many one-second jobs: 4 slots of 0.5 cpu keep changing hands.
    for (id, pool) in [("L", "left"), ("R", "right")] {
        let mut args = vec!["--pool", pool, "--jobs", "500"];
        args.extend_from_slice(&SMALL);
        c.submit(id, &args, "sleep 1");
    }
    wait_for_shares(&c, 0.5, 0.5);
    wait_for("both to run 2 jobs", LONG, || {
        running(&c, ["L", "R"]) == [2, 2]
    });

    // Weight 3 for left: it gets three quarters, and the slots that free go to L.
    c.cli(&["pool", "set", "left", "--config", r#"{"weight": 3}"#]);
    wait_for("left's weight 3 in pool list", LONG, || {
        c.json(&["pool", "list"])["left"]["weight"] == 3.0
    });
    wait_for_shares(&c, 0.75, 0.25);
    wait_for("L to run 3 jobs and R 1", LONG, || {
        running(&c, ["L", "R"]) == [3, 1]
    });
    stays(&c, "R stays at its quarter", |[_, r]| r <= 1);

    // The whole tree applied from a file: left keeps weight 3, right gets a strong guarantee
    // of 1.5 cpu (of 2); now R gets three quarters.
    let file = c.dir.path().join("tree.toml");
    std::fs::write(
        &file,
        r#"
[config]
min_spare_allocation_resources_on_node = {}

[pools.left]
weight = 3

[pools.right]
strong_guarantee_resources = { cpu = 1.5 }
"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let dry = c.cli(&["pool", "apply", "--dry-run", file]);
    assert!(
        dry.contains("~ right: strong_guarantee_resources unset -> {\"cpu\":1.5}"),
        "{dry}"
    );
    assert!(dry.contains("dry run, nothing applied"), "{dry}");
    assert!(fair_share(&c, "right") < 0.5, "a dry run changes nothing");
    let applied = c.cli(&["pool", "apply", file]);
    assert!(
        applied.contains("0 added, 0 removed, 1 changed; applied"),
        "{applied}"
    );
    wait_for("right's fair share to cover its guarantee", LONG, || {
        fair_share(&c, "right") >= 0.75 - 1e-6 && fair_share(&c, "left") <= 0.25 + 1e-6
    });
    let tree = c.json(&["tree", "show"]);
    let guarantee = &tree["snapshot"]["pools"]["right"]["effective_strong_guarantee_resources"];
    assert_eq!(guarantee["cpu"].as_f64(), Some(1.5), "{tree}");
    wait_for("R to run 3 jobs and L 1", LONG, || {
        running(&c, ["L", "R"]) == [1, 3]
    });
    stays(&c, "L stays at its quarter", |[l, _]| l <= 1);

    // L moves into right: left has nothing to run, the two halve right's share.
    let moved = c.json(&["op", "update", "L", "--pool", "right"]);
    assert_eq!(moved["pool"], "right", "{moved}");
    assert_eq!(c.op("L")["spec"]["pool"], "right");
    wait_for("right to hold both operations", LONG, || {
        let tree = c.json(&["tree", "show"]);
        let pools = &tree["snapshot"]["pools"];
        pools["right"]["operation_count"] == 2 && pools["left"]["operation_count"] == 0
    });
    wait_for("L and R to run 2 jobs each", LONG, || {
        running(&c, ["L", "R"]) == [2, 2]
    });
    // Then weight 3 for L inside right: three quarters for L.
    c.cli(&["op", "update", "L", "--weight", "3"]);
    assert_eq!(c.op("L")["spec"]["weight"], 3.0);
    wait_for("L to run 3 jobs and R 1", LONG, || {
        running(&c, ["L", "R"]) == [3, 1]
    });
    stays(&c, "R stays at its quarter", |[_, r]| r <= 1);
    let updates = c.json(&["events", "--operation", "L", "--kind", "operation_updated"]);
    assert_eq!(updates[0]["pool"], "right", "{updates}");
    assert_eq!(updates[1]["weight"], 3.0, "{updates}");

    // Jobs really ran all along: completed ones of both, from both nodes.
    for op in ["L", "R"] {
        let o = c.op(op);
        assert!(o["job_counts"]["completed"].as_u64().unwrap() > 0, "{o}");
        assert_eq!(o["job_counts"]["failed"], 0, "{o}");
    }
    c.cli(&["op", "abort", "L"]);
    c.cli(&["op", "abort", "R"]);
    c.stop();
}

#[test]
fn the_cli_finds_the_server_through_flag_env_or_config_file() {
    let c = Cluster::start("", &[]);
    let dir = c.dir.path();
    let nowhere = "http://127.0.0.1:1";
    let write = |path: &std::path::Path, server: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("server = {server:?}\ntoken = \"t\"\n")).unwrap();
    };
    // Runs `fairsched tree show --json` with exactly these variables (and `extra` flags).
    let run = |env: &[(&str, &std::ffi::OsStr)], extra: &[&str]| {
        let mut cmd = std::process::Command::new(common::BIN);
        cmd.args(["tree", "show", "--json"]).args(extra);
        for k in [
            "FAIRSCHED_SERVER",
            "FAIRSCHED_TOKEN",
            "FAIRSCHED_CONFIG",
            "XDG_CONFIG_HOME",
        ] {
            cmd.env_remove(k);
        }
        cmd.env("HOME", dir.join("nohome"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tree: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(tree["tree"], "default");
    };
    let good = dir.join("good.toml");
    let bad = dir.join("bad.toml");
    write(&good, &c.url);
    write(&bad, nowhere);

    // FAIRSCHED_CONFIG names the file.
    ok(run(&[("FAIRSCHED_CONFIG", good.as_os_str())], &[]));
    // ~/.config/fairsched/config.toml, or under XDG_CONFIG_HOME.
    let home = dir.join("home");
    write(&home.join(".config/fairsched/config.toml"), &c.url);
    ok(run(&[("HOME", home.as_os_str())], &[]));
    let xdg = dir.join("xdg");
    write(&xdg.join("fairsched/config.toml"), &c.url);
    ok(run(&[("XDG_CONFIG_HOME", xdg.as_os_str())], &[]));
    // The environment beats the file; the flag beats both.
    let url = std::ffi::OsString::from(&c.url);
    ok(run(
        &[
            ("FAIRSCHED_CONFIG", bad.as_os_str()),
            ("FAIRSCHED_SERVER", &url),
        ],
        &[],
    ));
    ok(run(
        &[
            ("FAIRSCHED_CONFIG", bad.as_os_str()),
            ("FAIRSCHED_SERVER", std::ffi::OsStr::new(nowhere)),
        ],
        &["--server", &c.url],
    ));
    // The file alone, pointing nowhere: the CLI went there.
    let out = run(&[("FAIRSCHED_CONFIG", bad.as_os_str())], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect to the server at"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A missing FAIRSCHED_CONFIG, or an unknown key, is an error naming the file.
    let missing = dir.join("missing.toml");
    let out = run(&[("FAIRSCHED_CONFIG", missing.as_os_str())], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("missing.toml"),
        "{err}"
    );
    std::fs::write(&bad, "servr = \"x\"\n").unwrap();
    let out = run(
        &[("FAIRSCHED_CONFIG", bad.as_os_str())],
        &["--server", &c.url],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("bad.toml") && err.contains("servr"),
        "{err}"
    );
    c.stop();
}

/// A gang that has gathered every node sooner than it expected waits for the node it lent
/// and starts whole (before, it started on the nodes it had at once, and on the lent one
/// whenever that was free). Three 1-cpu nodes: `R` (limit 10 min) runs on one; gang `G` (3
/// jobs) holds the two others and lends one to `S` (limit 1 min, ends by G's expected start);
/// R ends early, so G holds all three while S still runs. G says so, starts nothing until S
/// has ended, then runs its three jobs.
#[test]
fn a_gang_that_gathered_early_waits_for_what_it_lent_and_starts_whole() {
    let c = Cluster::start(
        r#"
[scheduler]
fair_share_update_period_ms = 100

[pool_trees]
default_tree = "default"

[pool_trees.pool_trees.default.config]
min_spare_allocation_resources_on_node = {}
gang_placement = { enable = true, assembly_timeout_ms = 600000 }

[pool_trees.pool_trees.default.pools.q]
mode = "fifo"
"#,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=8"),
            ("n2", "cpu=1,memory=1GiB,user_slots=8"),
            ("n3", "cpu=1,memory=1GiB,user_slots=8"),
        ],
    );
    let until = |file: &str| until_exists(&c.dir.path().join(file));
    let job = ["--pool", "q", "--cpu", "1", "--memory", "64MiB"];
    let with =
        |more: &[&'static str]| -> Vec<&'static str> { job.iter().chain(more).copied().collect() };
    c.submit("R", &with(&["--time-limit", "10m"]), &until("r-go"));
    wait_for("R to run", LONG, || c.op("R")["job_counts"]["running"] == 1);
    c.submit(
        "G",
        &with(&["--gang", "--jobs", "3", "--time-limit", "1m"]),
        "echo g-ran",
    );
    wait_for("G to hold two nodes", LONG, || {
        c.cli(&["op", "show", "G"])
            .contains("2 of its 3 pending jobs held on 2 nodes")
    });
    c.submit("S", &with(&["--time-limit", "1m"]), &until("s-go"));
    wait_for("S to run on a node G holds", LONG, || {
        c.op("S")["job_counts"]["running"] == 1
    });
    std::fs::write(c.dir.path().join("r-go"), "").unwrap();
    wait_for("R to complete", LONG, || c.op("R")["state"] == "completed");
    wait_for("G to hold all three, waiting for S's node", LONG, || {
        c.cli(&["op", "show", "G"]).contains(
            "all its 3 pending jobs are held on 3 nodes; they start together once what it lent",
        )
    });
    assert_eq!(c.op("G")["job_counts"]["running"], 0, "G started in parts");
    std::fs::write(c.dir.path().join("s-go"), "").unwrap();
    wait_for("G to complete", LONG, || c.op("G")["state"] == "completed");
    let log = c.json(&["events", "--limit", "10000"]);
    let log = log.as_array().unwrap();
    let at = |op: &str, kind: &str| -> Vec<usize> {
        (log.iter().enumerate())
            .filter(|(_, e)| e["operation"] == op && e["event"] == kind)
            .map(|(i, _)| i)
            .collect()
    };
    let s_end = at("S", "allocation_finished");
    let g_starts = at("G", "allocation_started");
    assert_eq!(s_end.len(), 1, "{log:?}");
    assert_eq!(g_starts.len(), 3, "{log:?}");
    assert!(
        g_starts.iter().all(|&g| g > s_end[0]),
        "a job of G started before S ended: {log:?}"
    );
}

/// A gang whose node is lost does not run on in part: its job on another node is aborted
/// (`gang_member_lost`, its process killed) and the gang runs again, whole, on the nodes left.
/// Three 1-cpu nodes; gang `G` (2 jobs) runs on two; the agent of one is killed (SIGKILL) and
/// the server takes its node for lost after `node_timeout_ms`.
#[test]
fn a_gang_whose_node_is_lost_is_aborted_whole_and_runs_again_whole() {
    let mut c = Cluster::start(
        r#"node_timeout_ms = 1500

[scheduler]
fair_share_update_period_ms = 100
node_heartbeat_period_ms = 100

[pool_trees]
default_tree = "default"

[pool_trees.pool_trees.default.config]
min_spare_allocation_resources_on_node = {}
gang_placement = { enable = true }

[pool_trees.pool_trees.default.pools.q]
"#,
        &[
            ("n1", "cpu=1,memory=1GiB,user_slots=8"),
            ("n2", "cpu=1,memory=1GiB,user_slots=8"),
            ("n3", "cpu=1,memory=1GiB,user_slots=8"),
        ],
    );
    let go = c.dir.path().join("go");
    let script = format!("echo $$ > pid; {}; echo done", until_exists(&go));
    let args = [
        "--pool", "q", "--jobs", "2", "--cpu", "1", "--memory", "64MiB", "--gang",
    ];
    c.submit("G", &args, &script);
    wait_for("G's 2 jobs to run", LONG, || c.job_pids("G").len() == 2);
    let events = c.events("G");
    let started = of(&events, "allocation_started");
    assert_eq!(started.len(), 2, "{events:?}");
    let lost_node = started[0]["node"].as_str().unwrap().to_string();
    let sibling = started[1]["job"].as_str().unwrap().to_string();
    let sibling_pid = (c.job_pids("G").into_iter())
        .find(|(job, _)| *job == sibling)
        .map(|(_, pid)| pid)
        .expect("the sibling's pid");
    c.kill_agent(&lost_node);
    wait_for("the sibling to be aborted with the gang", LONG, || {
        let events = c.events("G");
        of(&events, "allocation_preempted")
            .iter()
            .any(|e| e["job"] == sibling.as_str() && e["reason"] == "gang_member_lost")
    });
    wait_for("the sibling's process to be killed", LONG, || {
        process_gone(&sibling_pid)
    });
    wait_for("G to run again, whole", LONG, || {
        c.op("G")["job_counts"]["running"] == 2
    });
    std::fs::write(&go, "").unwrap();
    wait_for("G to complete", LONG, || c.op("G")["state"] == "completed");
    let text = c.cli(&["op", "show", "G"]);
    assert!(text.contains("gang_member_lost 1"), "{text}");
}
