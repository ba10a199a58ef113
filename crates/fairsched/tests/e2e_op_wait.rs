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
                "operation ok completed: 1 completed, 0 failed, 0 aborted of 1 jobs",
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
