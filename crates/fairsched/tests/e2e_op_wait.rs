//! `op wait` and `op run --wait` (issue 18): the command ends when the operation does, with
//! status 0 only if it completed; `--timeout` bounds the wait. Zero jobs are refused by name.

mod common;

use common::{Cluster, run_cli};

/// (arguments, exit code, words of stdout, words of stderr).
type Case = (
    &'static [&'static str],
    i32,
    &'static [&'static str],
    &'static [&'static str],
);

#[test]
fn op_wait_ends_with_the_operation_and_says_how() {
    let c = Cluster::start(
        "[scheduler]\nnode_heartbeat_period_ms = 100\nfair_share_update_period_ms = 100\n",
        &[("n1", "cpu=2,memory=1GiB,user_slots=4")],
    );
    let cases: &[Case] = &[
        (
            &["op", "run", "--id", "ok", "--wait", "--", "true"],
            0,
            &[
                "ok\n",
                "operation ok completed: 1 of 1 jobs completed; runs that failed: 0, aborted: 0",
            ],
            &[],
        ),
        (
            &["op", "run", "--id", "bad", "--wait", "--", "false"],
            1,
            &["operation bad failed"],
            &["operation \"bad\" failed"],
        ),
        (
            &["op", "run", "--id", "slow", "--", "sleep", "100"],
            0,
            &["slow\n"],
            &[],
        ),
        (
            &["op", "wait", "slow", "--timeout", "1s"],
            1,
            &[],
            &["operation \"slow\" is still running after 1s"],
        ),
        (
            &["op", "run", "--id", "none", "--jobs", "0", "--", "true"],
            1,
            &[],
            &["tasks[0].job_count", "from 1"],
        ),
    ];
    for (args, code, out_words, err_words) in cases {
        let out = run_cli(&c.url, &[], args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(*code),
            "{args:?}: {stdout} {stderr}"
        );
        for w in *out_words {
            assert!(stdout.contains(w), "{args:?}: {w:?} not in {stdout}");
        }
        for w in *err_words {
            assert!(stderr.contains(w), "{args:?}: {w:?} not in {stderr}");
        }
    }
    c.cli(&["op", "abort", "slow"]);
    let out = run_cli(&c.url, &[], &["op", "wait", "slow"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("operation slow aborted"));
    c.stop();
}

/// `op show` summarises: counts with aborted jobs by reason, the running jobs, the last failed
/// ones; `--all-jobs` lists every job (issue 18).
#[test]
fn op_show_summarises_and_lists_every_job_on_request() {
    let mut c = Cluster::start(
        "node_timeout_ms = 1500\n\n[scheduler]\nnode_heartbeat_period_ms = 100\nfair_share_update_period_ms = 100\n",
        &[("n1", "cpu=1,memory=1GiB,user_slots=1")],
    );
    // A job that runs while its node is lost (node_lost), then again elsewhere.
    c.submit("lost", &["--cpu", "1"], "sleep 100");
    common::wait_for("lost to run", std::time::Duration::from_secs(30), || {
        c.op("lost")["job_counts"]["running"] == 1
    });
    c.kill_agent("n1");
    c.start_agent("n2", "cpu=1,memory=1GiB,user_slots=1");
    common::wait_for(
        "lost to run on n2",
        std::time::Duration::from_secs(30),
        || {
            c.op("lost")["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["node"] == "n2" && j["state"] == "running")
        },
    );
    let text = c.cli(&["op", "show", "lost"]);
    assert!(
        text.contains(
            "jobs: 1 total: 0 pending, 1 running, 0 completed; runs that failed: 0, aborted: 1 (node_lost 1)"
        ),
        "{text}"
    );
    assert!(text.contains("running:\n  job "), "{text}");
    assert!(
        text.contains("(1 other job not listed: `op show lost --all-jobs` lists every job)"),
        "{text}"
    );
    let all = c.cli(&["op", "show", "lost", "--all-jobs"]);
    assert!(all.contains("aborted: node_lost"), "{all}");
    c.cli(&["op", "abort", "lost"]);
    c.stop();
}
