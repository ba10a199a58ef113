//! End to end, with real processes on 127.0.0.1: `fairsched server` with `[auth]` users and a
//! pool ACL, driven through the CLI with `FAIRSCHED_TOKEN`, `--token` and the CLI's config
//! file. A refused action exits 1 with a message that says who may not do what and why (and
//! never shows a token); the server's log names the users, not their tokens.

mod common;

use common::{Cluster, cli_fails, run_cli, wait_for};
use std::time::Duration;

const CONFIG: &str = r#"
agent_token = "tok-agent-1234"

[auth]
superusers = ["root"]

[[auth.users]]
name = "root"
token = "tok-root-1234"

[[auth.users]]
name = "alice"
token = "tok-alice-1234"
groups = ["ml"]

[[auth.users]]
name = "bob"
token = "tok-bob-1234"

[pool_trees.pool_trees.default.pools.research]
acl = [
  { action = "allow", subjects = ["ml"], permissions = ["use"] },
  { action = "allow", subjects = ["alice"], permissions = ["administer", "manage"] },
]
"#;

/// As `token` (`FAIRSCHED_TOKEN`): its stdout; the command must succeed.
fn ok(url: &str, token: &str, args: &[&str]) -> String {
    let out = run_cli(url, &[("FAIRSCHED_TOKEN", token)], args);
    assert!(
        out.status.success(),
        "fairsched {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn tokens_and_acls_through_the_cli() {
    // One agent, with the file's agent_token (and then its node's credential).
    let c = Cluster::start(CONFIG, &[("n1", "cpu=1,memory=1GiB,user_slots=4")]);
    let url = c.url.as_str();
    let submit = |id: &'static str| {
        [
            "op", "run", "--id", id, "--pool", "research", "--", "sleep", "60",
        ]
    };

    // Alice may use research (her group); the operation is hers, whatever her login name
    // (with a token the CLI sends no $USER).
    let out = run_cli(
        url,
        &[("FAIRSCHED_TOKEN", "tok-alice-1234"), ("USER", "mallory")],
        &submit("a1"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "a1");
    assert_eq!(c.op("a1")["user"], "alice");

    // Bob may not abort it: a clear message, exit 1, nothing changes.
    let err = cli_fails(
        url,
        &[("FAIRSCHED_TOKEN", "tok-bob-1234")],
        &["op", "abort", "a1"],
    );
    assert!(
        err.contains(
            r#"not permitted (code 901): user "bob" may not abort operation "a1" of user "alice": no manage permission on pool "research" in tree "default""#
        ),
        "{err}"
    );
    assert!(err.contains(r#"permission: "manage""#), "{err}");
    assert_ne!(c.op("a1")["state"], "aborted");

    // Nor run there, nor create a top-level pool.
    let err = cli_fails(url, &[("FAIRSCHED_TOKEN", "tok-bob-1234")], &submit("b1"));
    assert!(
        err.contains(
            r#"not permitted (code 901): user "bob" has no use permission on pool "research""#
        ),
        "{err}"
    );
    let err = cli_fails(
        url,
        &[("FAIRSCHED_TOKEN", "tok-bob-1234")],
        &["pool", "create", "bobs"],
    );
    assert!(
        err.contains(r#"user "bob" may not create the top-level pool "bobs": only superusers"#),
        "{err}"
    );

    // No token, or a wrong one (never shown back).
    let err = cli_fails(url, &[], &submit("x1"));
    assert!(
        err.contains("authentication failed (code 109): authentication required")
            && err.contains("Authorization: Bearer"),
        "{err}"
    );
    let err = cli_fails(
        url,
        &[],
        &["op", "abort", "a1", "--token", "tok-wrong-9876"],
    );
    assert!(
        err.contains("authentication failed (code 109): the token is not valid"),
        "{err}"
    );
    assert!(!err.contains("tok-wrong-9876"), "{err}");

    // Reads need no token (authenticate_reads is off).
    assert!(c.cli(&["op", "list"]).contains("a1"));

    // The root superuser creates a top-level pool; the CLI's config file carries a token.
    assert_eq!(
        ok(url, "tok-root-1234", &["pool", "create", "scratch"]).trim(),
        "ok"
    );
    let file = c.dir.path().join("cli.toml");
    std::fs::write(&file, "token = \"tok-alice-1234\"\n").unwrap();
    let out = run_cli(
        url,
        &[("FAIRSCHED_CONFIG", file.to_str().unwrap())],
        &["op", "abort", "a1"],
    );
    assert!(
        out.status.success(),
        "alice aborts her operation: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.op("a1")["state"], "aborted");

    // The log says who did what, never with a token.
    let log = std::fs::read_to_string(c.dir.path().join("server.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("request refused") && l.contains("bob")),
        "{log}"
    );
    assert!(!log.contains("tok-"), "a token in the server's log: {log}");

    // The agent runs jobs with its token and its node's credential.
    let run = [
        "op", "run", "--id", "a2", "--pool", "research", "--", "sh", "-c", "echo ran",
    ];
    assert_eq!(ok(url, "tok-alice-1234", &run).trim(), "a2");
    wait_for("a2 to complete", Duration::from_secs(30), || {
        c.op("a2")["state"] == "completed"
    });
    let logs = ok(url, "tok-alice-1234", &["op", "logs", "a2"]);
    assert!(logs.contains("ran"), "{logs}");
    c.stop();
}
