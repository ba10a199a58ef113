//! What the CLI says when it cannot do what it was asked (issue 18): one clear line naming
//! the cause, exit status 1, never a panic. Cases as data, no server needed.

mod common;

use common::run_cli;

/// (arguments, words stderr must have).
const CASES: &[(&[&str], &[&str])] = &[
    // A server address without a scheme means http.
    (
        &["op", "list", "--server", "127.0.0.1:1"],
        &[
            "cannot connect to the server at http://127.0.0.1:1",
            "is it running there?",
        ],
    ),
    (
        &["op", "list", "--server", "http://127.0.0.1:1/"],
        &[
            "cannot connect to the server at http://127.0.0.1:1",
            "Connection refused",
        ],
    ),
    (
        &["op", "list", "--server", "http://exa mple"],
        &["bad server address"],
    ),
    // A negative amount is refused as such (not as an unknown flag).
    (
        &["op", "run", "--cpu", "-1", "--", "true"],
        &["--cpu: -1 is negative"],
    ),
    // Ids that can name nothing are refused before anything is sent.
    (&["op", "show", ""], &["\"\" is not a valid id"]),
    (&["op", "abort", ".."], &["\"..\" is not a valid id"]),
    // The file is read before the server is asked: its error is the one shown.
    (
        &[
            "pool",
            "apply",
            "/nonexistent/pools.toml",
            "--server",
            "http://127.0.0.1:1",
        ],
        &["/nonexistent/pools.toml"],
    ),
];

#[test]
fn cli_errors_name_their_cause() {
    for (args, words) in CASES {
        let out = run_cli("http://127.0.0.1:1", &[], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "{args:?}: one line: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        for w in *words {
            assert!(stderr.contains(w), "{args:?}: {w:?} not in {stderr}");
        }
        // reqwest's message repeated itself ("error sending request ...: error sending ...").
        assert!(
            !stderr.contains("error sending request"),
            "{args:?}: {stderr}"
        );
    }
}

/// Ids with `/`, `..` or spaces name an operation, never another route of the API.
#[test]
fn odd_ids_name_an_operation_not_a_route() {
    let c = common::Cluster::start("", &[]);
    for (args, words) in [
        (
            &["op", "show", "../x"][..],
            "operation \"../x\" does not exist",
        ),
        (
            &["op", "logs", "a/b"][..],
            "operation \"a/b\" does not exist",
        ),
        (
            &["op", "abort", "a b"][..],
            "operation \"a b\" does not exist",
        ),
        (
            &["op", "show", "%2e%2e"][..],
            "operation \"%2e%2e\" does not exist",
        ),
    ] {
        let out = run_cli(&c.url, &[], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(words),
            "{args:?}: {words:?} not in {stderr}"
        );
    }
    c.stop();
}

/// A closed standard output ends the command quietly (status 141, as a process killed by
/// SIGPIPE), never with a panic message (Rust ignores SIGPIPE, so printing panicked).
#[test]
fn a_closed_pipe_ends_the_cli_quietly() {
    let c = common::Cluster::start("", &[]);
    let big = format!("PADDING={}", "x".repeat(100_000));
    for i in 0..3 {
        let id = format!("big-{i}");
        let out = run_cli(
            &c.url,
            &[],
            &["op", "run", "--id", &id, "--env", &big, "--", "true"],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = std::process::Command::new("bash")
        .args([
            "-c",
            "set -o pipefail; \"$0\" op list --json | head -c 1 >/dev/null",
        ])
        .arg(common::BIN)
        .env("FAIRSCHED_SERVER", &c.url)
        .env_remove("FAIRSCHED_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.trim().is_empty(), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    c.stop();
}

/// Values clap refuses before anything is sent (exit status 2), naming the flag: a weight
/// that is not a positive finite number would reach the server as JSON `null` ("unchanged").
#[test]
fn bad_values_are_refused_naming_the_flag() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["op", "update", "x", "--weight", "NaN"],
            &["--weight", "a weight is a positive number"],
        ),
        (
            &["op", "update", "x", "--weight", "inf"],
            &["--weight", "a weight is a positive number"],
        ),
        (
            &["op", "run", "--weight", "0", "--", "true"],
            &["--weight", "a weight is a positive number"],
        ),
        (
            &["op", "run", "--weight", "-2", "--", "true"],
            &["--weight", "a weight is a positive number"],
        ),
        (
            &["op", "wait", "x", "--timeout", "30s1m"],
            &["--timeout", "1h30m"],
        ),
    ];
    for (args, words) in cases {
        let out = run_cli("http://127.0.0.1:1", &[], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for w in *words {
            assert!(stderr.contains(w), "{args:?}: {w:?} not in {stderr}");
        }
    }
}
