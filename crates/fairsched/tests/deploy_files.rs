//! The deployment files in `deploy/` stay true (issue 18): the sample server file and pool
//! trees pass `fairsched config check` (with their /etc paths moved into a temporary
//! directory), the systemd units start what exists, and `config check` refuses a bad file by
//! name and line with exit status 2.

mod common;

use common::BIN;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn check(args: &[&str], file: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(["config", "check"])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_sample_server_file_and_pool_trees_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let server = std::fs::read_to_string(deploy().join("server.toml"))
        .unwrap()
        .replace("/etc/fairsched/", &format!("{}/", etc.display()));
    std::fs::write(etc.join("server.toml"), server).unwrap();
    std::fs::copy(deploy().join("pools.toml"), etc.join("pools.toml")).unwrap();
    for user in ["admin", "alice", "agent"] {
        let token = match user {
            "agent" => etc.join("agent-token"),
            _ => etc.join(format!("{user}.token")),
        };
        std::fs::write(&token, format!("{user}-secret-token\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let (code, stdout, stderr) = check(&[], &etc.join("server.toml"));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("a valid server file"), "{stdout}");
    assert!(stdout.contains("default: 2 pools"), "{stdout}");
    assert!(stdout.contains("2 [auth] users"), "{stdout}");
    let (code, stdout, stderr) = check(&[], &deploy().join("pools.toml"));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("default (default): 2 pools"), "{stdout}");
}

#[test]
fn the_systemd_units_run_the_commands_they_name() {
    let server = std::fs::read_to_string(deploy().join("fairsched-server.service")).unwrap();
    assert!(
        server.contains(
            "ExecStart=/usr/local/bin/fairsched server --config /etc/fairsched/server.toml"
        )
    );
    assert!(server.contains("ExecStartPre=/usr/local/bin/fairsched config check --for server"));
    assert!(server.contains("Restart=on-failure"));
    let agent = std::fs::read_to_string(deploy().join("fairsched-agent.service")).unwrap();
    assert!(agent.contains("ExecStart=/usr/local/bin/fairsched agent --server "));
    assert!(
        agent.contains("--token-file /etc/fairsched/agent-token") && !agent.contains("TOKEN="),
        "the agent's token comes from a file, not from the environment"
    );
    assert!(
        agent.contains("Delegate=yes"),
        "memory cgroups need a delegated subtree"
    );
    assert!(agent.contains("KillMode=mixed"));
    // The options the units pass exist (clap refuses unknown ones before anything else).
    for args in [
        &["config", "check", "--help"][..],
        &["server", "--config", "/x", "--help"][..],
        &[
            "agent",
            "--server",
            "http://x",
            "--token-file",
            "/x",
            "--work-dir",
            "/x",
            "--help",
        ][..],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn config_check_refuses_a_bad_file_naming_line_and_option() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(
        &file,
        "listen = \"0.0.0.0:9090\"\n[scheduler]\nfair_share_update_perod_ms = 5\n",
    )
    .unwrap();
    let (code, _, stderr) = check(&[], &file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("server.toml")
            && stderr.contains(":3")
            && stderr.contains("fair_share_update_perod_ms"),
        "{stderr}"
    );
    let pools = dir.path().join("pools.toml");
    std::fs::write(&pools, "[pool_trees.default.pools.a]\nweight = 1e-300\n").unwrap();
    let (code, _, stderr) = check(&[], &pools);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("weight") && stderr.contains("\"a\""),
        "{stderr}"
    );
}

/// The scenario format page's example runs as it is (the page stays true), and the CLI's help
/// points to the page, which the repository has.
#[test]
fn the_scenario_format_page_example_runs() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenario-format.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let example = text
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a JSON example on the page");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("example.json");
    std::fs::write(&file, example).unwrap();
    let out = Command::new(BIN)
        .arg("scenario")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"snapshot\":\"after-op2\""), "{stdout}");
    let help = Command::new(BIN)
        .args(["scenario", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("docs/scenario-format.md"));
}

/// A server file for servers sharing PostgreSQL: `config check` shows the store (without the
/// password, and without connecting: the host does not exist) and refuses a wildcard `listen`
/// without `advertise_url`, naming the option.
#[test]
fn config_check_shows_a_postgresql_store_and_wants_advertise_url() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(
        &file,
        "listen = \"0.0.0.0:9090\"\nadvertise_url = \"http://sched1.invalid:9090\"\n\
         [store]\nurl = \"postgres://fs:hunter2@db.invalid:5432/fs\"\nlease_ms = 3000\n",
    )
    .unwrap();
    let (code, stdout, stderr) = check(&[], &file);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("advertised as http://sched1.invalid:9090"),
        "{stdout}"
    );
    assert!(
        stdout.contains("store: PostgreSQL postgres://fs:***@db.invalid:5432/fs"),
        "{stdout}"
    );
    assert!(stdout.contains("lease 3000 ms"), "{stdout}");
    assert!(!stdout.contains("hunter2"), "{stdout}");

    std::fs::write(
        &file,
        "listen = \"0.0.0.0:9090\"\n[store]\nurl = \"postgres://fs@db.invalid/fs\"\n",
    )
    .unwrap();
    let (code, _, stderr) = check(&[], &file);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("advertise_url: required"), "{stderr}");
}

/// `fairsched server --store` is checked as `[store] url` is, before anything starts.
#[test]
fn server_refuses_a_store_flag_that_is_not_a_postgresql_url() {
    let (ok, _, stderr) = common::run(
        &[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "mysql://fs@db/fs",
        ],
        std::time::Duration::from_secs(30),
    );
    assert!(!ok);
    assert!(stderr.contains("store.url:"), "{stderr}");
    assert!(stderr.contains("not a PostgreSQL URL"), "{stderr}");
}

/// `config check` shows what the server would warn about at its start: a token file that
/// other users may read (the file is still valid: exit 0).
#[test]
fn config_check_warns_of_a_token_file_others_may_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("agent-token");
    std::fs::write(&token, "a-long-random-agent-token\n").unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(
        &file,
        format!("agent_token_file = {:?}\n", token.display().to_string()),
    )
    .unwrap();
    for (mode, warned) in [(0o644, true), (0o600, false)] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        let (code, out, err) = check(&[], &file);
        assert_eq!(code, Some(0), "{out}{err}");
        assert_eq!(
            err.contains("the agent token file may be read by other users"),
            warned,
            "mode {mode:o}: {err}"
        );
    }
}
