//! The server's file (`ServerConfig`): the default survives being written and read back, an
//! empty file is the default, and a misspelt option is an error that names it.

use fairsched_server::ServerConfig;

#[test]
fn default_round_trips_through_toml() {
    let written = toml::to_string(&ServerConfig::default()).expect("default as TOML");
    let read = ServerConfig::from_toml(&written).expect("default TOML parses back");
    assert_eq!(read, ServerConfig::default());
    assert_eq!(
        ServerConfig::from_toml("").expect("empty file"),
        ServerConfig::default()
    );
}

/// A misspelt option, at the top or in `[scheduler]`, is an error naming it (with its path
/// and line), not silently ignored.
#[test]
fn misspelt_options_are_errors_naming_them() {
    let error = ServerConfig::from_toml("listen = \"127.0.0.1:0\"\nnode_timeout = 100\n")
        .expect_err("unknown top-level option")
        .to_string();
    assert!(error.contains("node_timeout"), "{error}");
    assert!(error.contains(":2:1:"), "{error}");

    let error = ServerConfig::from_toml(
        "[scheduler]\nfair_share_update_period_ms = 100\nfair_share_update_perod_ms = 50\n",
    )
    .expect_err("unknown scheduler option")
    .to_string();
    assert!(error.contains("fair_share_update_perod_ms"), "{error}");
    assert!(
        error.contains("scheduler.fair_share_update_perod_ms"),
        "{error}"
    );
    assert!(error.contains(":3:1:"), "{error}");

    let error = ServerConfig::from_toml("[pool_trees.pool_trees.default.pools.a]\nweigth = 2\n")
        .expect_err("unknown pool option")
        .to_string();
    assert!(error.contains("weigth"), "{error}");

    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("fairsched.toml");
    std::fs::write(&path, "[scheduler]\nnode_heartbeat_period = 100\n").expect("write");
    let error = ServerConfig::from_file(&path)
        .expect_err("unknown option in a file")
        .to_string();
    assert!(error.contains("fairsched.toml:2:1:"), "{error}");
    assert!(error.contains("node_heartbeat_period"), "{error}");
}

/// `[auth]` is checked at load: each case is a section and a piece of the error, which names
/// the option; no error prints a token.
#[test]
fn auth_errors_name_the_option() {
    let user = |name: &str, token: &str| {
        format!("[[auth.users]]\nname = \"{name}\"\ntoken = \"{token}\"\n")
    };
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{}{}", user("alice", "tok-a"), user("bob", "tok-a")),
            "auth.users[1].token: the same token as auth.users[0] (\"alice\")",
        ),
        (
            format!("{}{}", user("alice", "tok-a"), user("alice", "tok-b")),
            "auth.users[1].name: user \"alice\" is already auth.users[0]",
        ),
        (user("alice", ""), "auth.users[0].token: the token is empty"),
        (
            user("alice", "  "),
            "auth.users[0].token: the token is empty",
        ),
        (
            "[[auth.users]]\nname = \"alice\"\n".to_string(),
            "auth.users[0]: user \"alice\" needs a token or token_file",
        ),
        (
            "[[auth.users]]\ntoken = \"tok-a\"\n".to_string(),
            "auth.users[0].name: a user needs a name",
        ),
        (
            user("everyone", "tok-a"),
            "auth.users[0].name: \"everyone\" is reserved",
        ),
        (
            format!(
                "[auth]\nsuperusers = [\"root\"]\n{}",
                user("alice", "tok-a")
            ),
            "auth.superusers[0]: \"root\" is not a user",
        ),
        (
            "[auth]\nsuperusers = [\"root\"]\n".to_string(),
            "auth.superusers[0]: \"root\" is not a user",
        ),
        (
            "[auth]\nauthenticate_reads = true\n".to_string(),
            "auth.authenticate_reads: needs auth.users",
        ),
        (
            format!("agent_token = \"tok-a\"\n{}", user("alice", "tok-a")),
            "auth.users[0].token: the same token as agent_token",
        ),
        (
            "[[auth.users]]\nname = \"alice\"\ntoken = \"tok-a\"\ntoken_file = \"/x\"\n"
                .to_string(),
            "auth.users[0]: give either token or token_file, not both",
        ),
        (
            "[[auth.users]]\nname = \"alice\"\ntoken_file = \"/nonexistent/alice.token\"\n"
                .to_string(),
            "auth.users[0].token_file: cannot read /nonexistent/alice.token",
        ),
        (
            "[[auth.users]]\nname = \"alice\"\ntokn = \"tok-a\"\n".to_string(),
            "tokn",
        ),
        ("[auth]\nsuperuser = []\n".to_string(), "superuser"),
        (
            user("alice", "tok-a"),
            "agent_token: required when [auth] has users",
        ),
        (
            format!("agent_token = \" \"\n{}", user("alice", "tok-a")),
            "agent_token: the token is empty",
        ),
        (
            "agent_token = \"\"\n".to_string(),
            "agent_token: the token is empty",
        ),
        (
            "agent_token = \"REPLACE-WITH-A-RANDOM-SECRET\"\n".to_string(),
            "agent_token: still the example's placeholder",
        ),
        (
            user("alice", "tok a"),
            "auth.users[0].token: the token has a space or a line break inside",
        ),
        (
            "agent_token = \"tok-b\"\nagent_token_file = \"/x\"\n".to_string(),
            "give either agent_token or agent_token_file, not both",
        ),
        (
            "agent_token_file = \"/nonexistent/agent-token\"\n".to_string(),
            "agent_token_file: cannot read /nonexistent/agent-token",
        ),
        (
            "listen = \"not-an-addr\"\n".to_string(),
            "listen: \"not-an-addr\" is not HOST:PORT",
        ),
        (
            "listen = \"127.0.0.1:99999\"\n".to_string(),
            "listen: \"127.0.0.1:99999\": the port must be a number from 0 to 65535",
        ),
        (
            "listen = \":9090\"\n".to_string(),
            "listen: \":9090\" is not HOST:PORT",
        ),
    ];
    for (text, expected) in cases {
        let error = ServerConfig::from_toml(&text).expect_err(&text).to_string();
        assert!(error.contains(expected), "{text}\n---\n{error}");
        assert!(
            !error.contains("tok-a\""),
            "an error shows a token: {error}"
        );
    }
}

/// A node timeout shorter than two heartbeat periods is refused, naming both options: nodes
/// that heartbeat on time would be lost and their jobs run again while they still run.
#[test]
fn a_node_timeout_shorter_than_two_heartbeats_is_refused() {
    let cases: [(&str, Option<&str>); 5] = [
        (
            "node_timeout_ms = 1000\n[scheduler]\nnode_heartbeat_period_ms = 20000\n",
            Some(
                "node_timeout_ms: 1000 ms is shorter than two heartbeat periods (scheduler.node_heartbeat_period_ms = 20000 ms)",
            ),
        ),
        (
            "node_timeout_ms = 0\n",
            Some("node_timeout_ms: 0 ms is shorter than two heartbeat periods"),
        ),
        // Agents heartbeat at least 10 ms apart.
        (
            "node_timeout_ms = 19\n[scheduler]\nnode_heartbeat_period_ms = 0\n",
            Some("node_timeout_ms: 19 ms"),
        ),
        ("node_timeout_ms = 200\n", None),
        (
            "node_timeout_ms = 20\n[scheduler]\nnode_heartbeat_period_ms = 1\n",
            None,
        ),
    ];
    for (text, expected) in cases {
        match (ServerConfig::from_toml(text), expected) {
            (Ok(_), None) => {}
            (Err(e), Some(expected)) => {
                let error = e.to_string();
                assert!(error.contains(expected), "{text}\n---\n{error}");
            }
            (r, _) => panic!("{text}: {:?}", r.map(|_| ())),
        }
    }
}

/// A token in a file (only its surrounding whitespace is dropped). A file others may read
/// loads too (the server warns about it when it starts).
#[test]
fn tokens_from_files() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let token = dir.path().join("alice.token");
    std::fs::write(&token, "s3cret-alice\n").expect("write");
    let path = dir.path().join("fairsched.toml");
    std::fs::write(
        &path,
        format!(
            "agent_token = \"agent-secret\"\n[auth]\nsuperusers = [\"alice\"]\n[[auth.users]]\nname = \"alice\"\ntoken_file = {:?}\ngroups = [\"ml\"]\n",
            token.display().to_string()
        ),
    )
    .expect("write");
    let config = ServerConfig::from_file(&path).expect("loads");
    let auth = fairsched_server::auth::Auth::from_config(&config).expect("resolves");
    let alice = auth.identify("s3cret-alice").expect("alice's token");
    assert_eq!(alice.name, "alice");
    assert!(alice.superuser);
    assert_eq!(alice.groups, ["ml"]);
    assert!(auth.identify("s3cret-alice\n").is_none());
    assert!(auth.identify("s3cret-alic").is_none());
    assert!(!format!("{auth:?} {config:?}").contains("s3cret"));
}

/// `[store] url`, `lease_ms` and `advertise_url`: SQLite stays the default; a PostgreSQL URL
/// is checked without connecting; bad values are errors naming the option.
#[test]
fn store_url_lease_and_advertise_url() {
    let default = ServerConfig::default();
    assert_eq!(default.store.url, None);
    assert_eq!(default.store.lease_ms, 5000);
    assert_eq!(default.advertise_url, None);

    let config = ServerConfig::from_toml(
        "listen = \"127.0.0.1:9090\"\n[store]\nurl = \"postgres://fs@db:5432/fs\"\nlease_ms = 2000\n",
    )
    .expect("a PostgreSQL store");
    assert_eq!(
        config.store.url.as_deref(),
        Some("postgres://fs@db:5432/fs")
    );
    assert_eq!(config.store.lease(), std::time::Duration::from_secs(2));
    let bound = "127.0.0.1:9090".parse().unwrap();
    assert_eq!(config.advertised(bound), "http://127.0.0.1:9090");
    let config = ServerConfig::from_toml(
        "listen = \"0.0.0.0:9090\"\nadvertise_url = \"http://sched1:9090/\"\n[store]\nurl = \"postgres://fs@db/fs\"\n",
    )
    .expect("a wildcard address with advertise_url");
    assert_eq!(config.advertised(bound), "http://sched1:9090");
    // A wildcard address is fine with SQLite, where nobody is named to clients.
    ServerConfig::from_toml("listen = \"0.0.0.0:9090\"\n").expect("SQLite on 0.0.0.0");

    let cases: &[(&str, &[&str])] = &[
        (
            "listen = \"0.0.0.0:9090\"\n[store]\nurl = \"postgres://fs@db/fs\"\n",
            &["advertise_url: required", "wildcard"],
        ),
        (
            "listen = \"[::]:9090\"\n[store]\nurl = \"postgres://fs@db/fs\"\n",
            &["advertise_url: required"],
        ),
        (
            "[store]\nurl = \"mysql://fs@db/fs\"\n",
            &["store.url:", "not a PostgreSQL URL"],
        ),
        (
            "[store]\nurl = \"postgres://fs@db:port/fs\"\n",
            &["store.url:", "postgres://USER"],
        ),
        (
            "[store]\nlease_ms = 100\n",
            &["store.lease_ms:", "too short"],
        ),
        (
            "[store]\nlease_ms = 86400000\n",
            &["store.lease_ms:", "longer than an hour"],
        ),
        (
            "advertise_url = \"sched1:9090\"\n",
            &["advertise_url:", "http://HOST:PORT"],
        ),
        (
            "advertise_url = \"http://0.0.0.0:9090\"\n",
            &["advertise_url:", "wildcard"],
        ),
        ("[store]\nlease = 100\n", &["lease"]),
    ];
    for (text, expected) in cases {
        let error = ServerConfig::from_toml(text).expect_err(text).to_string();
        for piece in *expected {
            assert!(error.contains(piece), "{text}: {error}");
        }
    }
}

/// Tokens in files: the agents' from `agent_token_file`, a user's from `token_file`; a file
/// with two lines (a token no client could send) or an empty one is refused naming it.
#[test]
fn token_files_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let agent = file("agent-token", "  agent-secret-1\n");
    let config = ServerConfig::from_toml(&format!("agent_token_file = \"{agent}\"\n")).unwrap();
    assert_eq!(config.agent_token.as_deref(), Some("agent-secret-1"));

    let two_lines = file("two", "tok-two\nlines-here\n");
    let empty = file("empty", " \n");
    let cases = [
        (
            format!("agent_token_file = \"{two_lines}\"\n"),
            "agent_token_file: the token has a space or a line break inside".to_string(),
        ),
        (
            format!("agent_token_file = \"{empty}\"\n"),
            format!("agent_token_file: {empty} is empty"),
        ),
        (
            format!(
                "agent_token_file = \"{agent}\"\n[[auth.users]]\nname = \"alice\"\ntoken_file = \"{two_lines}\"\n"
            ),
            format!(
                "auth.users[0].token_file ({two_lines}): the token has a space or a line break inside"
            ),
        ),
    ];
    for (text, expected) in cases {
        let error = ServerConfig::from_toml(&text).expect_err(&text).to_string();
        assert!(error.contains(&expected), "{text}\n---\n{error}");
        assert!(
            !error.contains("lines-here"),
            "an error shows a token: {error}"
        );
    }
}
