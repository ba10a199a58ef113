//! The Scheduling page in a real browser: headless Chromium (Debian's `chromium`) loads `/`
//! from a server with the seed 001 pool layout, nodes and operations; the DOM after the page's
//! JavaScript ran must show the pools, the operations, the nodes, the bars and the newest
//! events. A screenshot is kept as `target/test-artifacts/web_page.png`. With two pool trees,
//! tabs choose the tree: the gpu tab's link shows the gpu tree's pools and bars
//! (`web_page_gpu_tree.png`). Guarantees above the cluster show an alert banner while the
//! alert is active (`web_page_alert.png`).
//!
//! Chromium is required: without it this test fails (CI installs it, see `.ci/run`). Set
//! `FAIRSCHED_CHROMIUM` to use another binary.

mod common;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long one Chromium run may take before it is killed.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(90);

fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("FAIRSCHED_CHROMIUM") {
        return PathBuf::from(path);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "chromium is not installed: this test drives the web page in headless Chromium. \
         Install Debian's package (`apt-get install -y chromium`; .ci/run does it) or set \
         FAIRSCHED_CHROMIUM to a Chromium binary."
    );
}

/// Runs headless Chromium on `url` with `extra` arguments; its stdout. Killed (with its
/// process group) after `CHROMIUM_TIMEOUT`.
async fn run_chromium(chromium: &Path, url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0)
    .kill_on_drop(true);
    let child = cmd.spawn().expect("cannot start chromium");
    let pid = child.id();
    match tokio::time::timeout(CHROMIUM_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => {
            let out = out.expect("chromium failed");
            assert!(
                out.status.success(),
                "chromium exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        Err(_) => {
            if let Some(pid) = pid {
                // The whole group: the browser and its renderer processes.
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &format!("-{pid}")])
                    .status();
            }
            panic!("chromium did not finish within {CHROMIUM_TIMEOUT:?} on {url}");
        }
    }
}

fn seed001_trees() -> serde_json::Value {
    let tree: serde_json::Value = serde_json::from_str(include_str!(
        "../../config/examples/seed001_project_root.json"
    ))
    .unwrap();
    json!({"pool_trees": {"default": tree}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_page_in_headless_chromium() {
    // Fail first, and clearly, when the browser is missing.
    let chromium = chromium();
    let server = common::start(seed001_trees(), json!({"fair_share_update_period_ms": 100})).await;
    // 3 nodes: 120 cores in all, the project's 100-core quota fits.
    for (i, tag) in ["ssd", "ssd", "hdd"].iter().enumerate() {
        server
            .post(
                "/api/v1/agent/register",
                json!({"node_id": format!("node-{}", i + 1),
                       "resources": {"cpu": 40, "memory": "128GiB", "user_slots": 40},
                       "tags": [tag]}),
            )
            .await;
    }
    let op = |id: &str, user: &str, pool: &str, jobs: u32, cpu: u32| {
        json!({"id": id, "user": user, "pool": pool,
               "tasks": [{"job_count": jobs, "resources": {"cpu": cpu, "memory": "2GiB", "user_slots": 1},
                          "command": ["sleep", "600"]}]})
    };
    // More demand than the 120 cores; the third backup operation waits for a running slot
    // (project-backup runs at most 2).
    for (id, user, pool, jobs, cpu) in [
        ("nightly-etl", "robot-etl", "project-batch", 40, 2),
        // (Operation ids are plain; user names may hold anything.)
        ("adhoc-query", "alice-<b>query</b>", "project-adhoc", 10, 3),
        ("backup-snapshot", "robot-backup", "project-backup", 4, 5),
        ("backup-verify", "robot-backup", "project-backup", 2, 5),
        ("backup-archive", "robot-backup", "project-backup", 2, 5),
    ] {
        server
            .post("/api/v1/operations", op(id, user, pool, jobs, cpu))
            .await;
    }
    // Place what fits: a few heartbeats of every node.
    let mut running = vec![Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..3 {
        for (n, jobs) in ["node-1", "node-2", "node-3"].iter().zip(&mut running) {
            server.heartbeat_running(n, jobs).await;
        }
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let ops = server.get("/api/v1/operations").await;
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .any(|o| o["job_counts"]["running"].as_u64() > Some(0)),
        "nothing runs: {ops}"
    );

    let events = server.get("/api/v1/events?limit=1").await;
    let newest_before = events[0]["seq"].as_u64().expect("events");

    let url = format!("{}/", server.url);
    let dom = run_chromium(&chromium, &url, &["--dump-dom"]).await;
    let artifacts = common::artifacts_dir();
    std::fs::write(artifacts.join("web_page.html"), &dom).unwrap();
    for needle in [
        "project-root",
        "project-adhoc",
        "project-batch",
        "project-backup",
        "nightly-etl",
        "backup-snapshot",
        "backup-archive",
        "node-1",
        "node-3",
        "class=\"bar\"",
        "class=\"fair\"",
        "class=\"usage\"",
        "class=\"guarantee\"",
        "data-state=\"live\"",
        // The Events panel: the newest events, newest first.
        "id=\"events\"",
        "data-event=\"",
        "allocation_started",
    ] {
        assert!(
            dom.contains(needle),
            "the rendered page has no {needle:?} (DOM kept in {}):\n{dom}",
            artifacts.join("web_page.html").display()
        );
    }
    // The Events panel shows the events the API has, the newest first.
    let first_row: u64 = dom
        .find("data-event=\"")
        .map(|i| &dom[i + 12..])
        .and_then(|rest| rest.split('"').next())
        .and_then(|seq| seq.parse().ok())
        .unwrap();
    assert!(
        first_row >= newest_before,
        "the newest event first: row {first_row}, newest before the page loaded {newest_before}"
    );
    // The project's guarantees fit the cluster: no alert banner.
    let alerts = tag_with(&dom, "id=\"alerts\"");
    assert!(alerts.contains("hidden"), "no alert: {alerts}");
    // One tree: no tree tabs.
    let nav = tag_with(&dom, "id=\"tree-tabs\"");
    assert!(nav.contains("hidden"), "one tree, no tabs: {nav}");
    // User strings are text, never markup.
    assert!(dom.contains("alice-&lt;b&gt;query&lt;/b&gt;"), "{dom}");
    assert!(!dom.contains("<b>query</b>"), "{dom}");

    let shot = artifacts.join("web_page.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &chromium,
        &url,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,1000",
        ],
    )
    .await;
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {shot:?}: {e}"));
    assert!(png.starts_with(b"\x89PNG"), "not a PNG: {shot:?}");
    assert!(
        png.len() > 20_000,
        "suspiciously small screenshot: {} bytes",
        png.len()
    );
}

/// The opening tag of the element that has `attr` (e.g. `data-tree="gpu"`) in a dumped DOM.
fn tag_with<'a>(dom: &'a str, attr: &str) -> &'a str {
    let at = dom
        .find(attr)
        .unwrap_or_else(|| panic!("no element with {attr} in:\n{dom}"));
    let start = dom[..at].rfind('<').unwrap();
    let end = at + dom[at..].find('>').unwrap();
    &dom[start..=end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_tree_can_be_selected() {
    let chromium = chromium();
    let trees = json!({"default_tree": "physical", "pool_trees": {
        "physical": {"config": {"node_tag_filter": "physical"},
                     "pools": {"prod": {}, "dev": {}}},
        "gpu": {"config": {"node_tag_filter": "gpu", "main_resource": "gpu"},
                "pools": {"shared": {"strong_guarantee_resources": {"gpu": 2}}, "training": {}}},
    }});
    let server = common::start(trees, json!({"fair_share_update_period_ms": 100})).await;
    for (node, tag, resources) in [
        ("p1", "physical", json!({"cpu": 8, "user_slots": 8})),
        ("g1", "gpu", json!({"cpu": 8, "gpu": 4, "user_slots": 8})),
    ] {
        server
            .post(
                "/api/v1/agent/register",
                json!({"node_id": node, "resources": resources, "tags": [tag]}),
            )
            .await;
    }
    for (id, pool, trees, resources) in [
        (
            "web-prod",
            "prod",
            json!(["physical"]),
            json!({"cpu": 1, "user_slots": 1}),
        ),
        (
            "gpu-train",
            "training",
            json!(["gpu"]),
            json!({"cpu": 1, "gpu": 1, "user_slots": 1}),
        ),
    ] {
        server
            .post(
                "/api/v1/operations",
                json!({"id": id, "pool": pool, "pool_trees": trees,
                       "tasks": [{"job_count": 2, "resources": resources,
                                  "command": ["sleep", "600"]}]}),
            )
            .await;
    }
    server.heartbeat_until_started("p1", 2).await;
    server.heartbeat_until_started("g1", 2).await;
    server
        .wait_for(
            "the gpu tree's usage in its snapshot",
            Duration::from_secs(10),
            || async {
                let tree = server.get("/api/v1/tree?tree=gpu").await;
                tree["snapshot"]["pools"]["training"]["resource_usage"]["gpu"] == 2
            },
        )
        .await;
    let artifacts = common::artifacts_dir();

    // The default tree first, with a tab per tree.
    let url = format!("{}/", server.url);
    let dom = run_chromium(&chromium, &url, &["--dump-dom"]).await;
    std::fs::write(artifacts.join("web_page_trees_default.html"), &dom).unwrap();
    let nav = tag_with(&dom, "id=\"tree-tabs\"");
    assert!(!nav.contains("hidden"), "the tabs are shown: {nav}");
    let physical_tab = tag_with(&dom, "data-tree=\"physical\"");
    assert!(
        physical_tab.contains("aria-selected=\"true\""),
        "{physical_tab}"
    );
    let gpu_tab = tag_with(&dom, "data-tree=\"gpu\"");
    assert!(gpu_tab.contains("aria-selected=\"false\""), "{gpu_tab}");
    assert!(dom.contains("data-pool=\"prod\""), "{dom}");
    assert!(!dom.contains("data-pool=\"training\""), "{dom}");
    assert!(dom.contains("pool tree “physical”"), "{dom}");

    // Selecting the gpu tab shows the gpu tree: its pools, bars and the operation's pool there.
    let href = gpu_tab
        .split("href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the gpu tab has no link: {gpu_tab}"));
    assert_eq!(href, "?tree=gpu");
    let gpu_url = format!("{}/{href}", server.url);
    let dom = run_chromium(&chromium, &gpu_url, &["--dump-dom"]).await;
    std::fs::write(artifacts.join("web_page_trees_gpu.html"), &dom).unwrap();
    let gpu_tab = tag_with(&dom, "data-tree=\"gpu\"");
    assert!(gpu_tab.contains("aria-selected=\"true\""), "{gpu_tab}");
    for needle in [
        "pool tree “gpu”",
        "data-pool=\"training\"",
        "data-pool=\"shared\"",
        "class=\"usage\"",
        "class=\"guarantee\"",
        "data-state=\"live\"",
    ] {
        assert!(
            dom.contains(needle),
            "no {needle:?} in the gpu tree's page:\n{dom}"
        );
    }
    assert!(!dom.contains("data-pool=\"prod\""), "{dom}");
    let row = &dom[dom.find("data-operation=\"gpu-train\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<td>training</td>"), "{row}");

    // An unknown tree: the default tree, and a notice naming the tree asked for.
    let dom = run_chromium(
        &chromium,
        &format!("{}/?tree=nope", server.url),
        &["--dump-dom"],
    )
    .await;
    assert!(dom.contains("There is no pool tree “nope”"), "{dom}");
    assert!(dom.contains("data-pool=\"prod\""), "{dom}");

    let shot = artifacts.join("web_page_gpu_tree.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &chromium,
        &gpu_url,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,900",
        ],
    )
    .await;
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {shot:?}: {e}"));
    assert!(png.starts_with(b"\x89PNG"), "not a PNG: {shot:?}");
}

/// Guarantees above the cluster (alert 29000): a banner names the code, the tree and the
/// resources while the alert is active, and is gone once a node joins and they fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_banner_shows_while_guarantees_overcommit() {
    let chromium = chromium();
    let trees = json!({"pool_trees": {"default": {"pools": {
        "a": {"strong_guarantee_resources": {"cpu": 4}},
        "b": {"strong_guarantee_resources": {"cpu": 8}},
    }}}});
    let server = common::start(trees, json!({"fair_share_update_period_ms": 100})).await;
    let url = format!("{}/", server.url);
    let artifacts = common::artifacts_dir();
    // (nodes that join first, whether the banner shows)
    for (nodes, shown) in [(&["node-1"][..], true), (&["node-2"][..], false)] {
        for node in nodes {
            server
                .register(node, json!({"cpu": 8, "user_slots": 8}))
                .await;
        }
        server
            .wait_for(
                "the alert in the status",
                Duration::from_secs(10),
                || async {
                    let status = server.get("/api/v1/status").await;
                    status["alerts"]
                        .as_array()
                        .is_some_and(|a| a.is_empty() != shown)
                },
            )
            .await;
        let dom = run_chromium(&chromium, &url, &["--dump-dom"]).await;
        std::fs::write(artifacts.join("web_page_alert.html"), &dom).unwrap();
        assert!(dom.contains("data-state=\"live\""), "{dom}");
        let banner = tag_with(&dom, "id=\"alerts\"");
        assert_eq!(!banner.contains("hidden"), shown, "{banner}");
        // The banner's part of the page (the events below also have the message: the
        // core logs an error event when the alert appears).
        let start = dom.find("id=\"alerts\"").unwrap();
        let section = &dom[start..start + dom[start..].find("id=\"tree-tabs\"").unwrap()];
        for needle in [
            "data-alert-code=\"29000\"",
            "data-alert-tree=\"default\"",
            "Alert 29000",
            "pool tree “default”:",
            "cpu: guarantees 12 &gt; cluster 8",
            "scaled down proportionally",
        ] {
            assert_eq!(
                section.contains(needle),
                shown,
                "{needle:?} (shown: {shown}):\n{section}"
            );
        }
        if shown {
            let shot = artifacts.join("web_page_alert.png");
            let _ = std::fs::remove_file(&shot);
            run_chromium(
                &chromium,
                &url,
                &[
                    &format!("--screenshot={}", shot.display()),
                    "--window-size=1400,700",
                ],
            )
            .await;
            assert!(std::fs::read(&shot).is_ok_and(|png| png.starts_with(b"\x89PNG")));
        }
    }
}

/// With `authenticate_reads`, the page asks for a token (and says when one is refused); a
/// token given once in the address as `#token=` shows the scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_needs_a_token_asks_for_it() {
    let chromium = chromium();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_config(
        dir.path(),
        json!({
            "pool_trees": {"pool_trees": {"default": {"pools": {"research-pool": {}}}}},
            "agent_token": "page-agent-token",
            "auth": {"authenticate_reads": true,
                     "users": [{"name": "alice", "token": "page-token-1"}]},
            "scheduler": {"fair_share_update_period_ms": 100}
        }),
    )
    .await;
    let (status, _) = server.call("GET", "/api/v1/pool_trees", None).await;
    assert_eq!(status, 401, "reads need a token");
    let cases = [
        // (address suffix, token form shown, pools shown, refusal shown)
        ("/", true, false, false),
        ("/#token=wrong-token", true, false, true),
        ("/#token=page-token-1", false, true, false),
    ];
    for (suffix, form_shown, pools_shown, refused) in cases {
        let dom = run_chromium(
            &chromium,
            &format!("{}{suffix}", server.url),
            &["--dump-dom"],
        )
        .await;
        let form = tag_with(&dom, "id=\"token-form\"");
        assert_eq!(!form.contains("hidden"), form_shown, "{suffix}: {form}");
        assert_eq!(
            dom.contains("research-pool"),
            pools_shown,
            "{suffix}:\n{dom}"
        );
        assert_eq!(
            dom.contains("did not accept that token"),
            refused,
            "{suffix}:\n{dom}"
        );
        assert!(
            !dom.contains("page-token-1\""),
            "the token is not in the page"
        );
    }
    server.stop().await;
}
