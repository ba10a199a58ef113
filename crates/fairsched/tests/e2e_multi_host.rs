//! Separate machines, as far as the network goes (issue 18): the server and two agents each
//! in a Linux network namespace of their own, every agent reaching the server over its own
//! veth pair (10.77.N.2 → 10.77.N.1), as an agent on another machine would. The test starts
//! and stops everything itself (processes by PID, namespaces by name) and runs an operation
//! through the loss of an agent (SIGKILL: its jobs are `node_lost` and run on the other
//! machine) and a server restart (SIGKILL; the agents' running jobs are adopted). It needs
//! the right to create network namespaces (root); it says why it skips where it cannot.

mod common;

use common::{BIN, Proc, wait_for};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The namespaces and links of one test run; removed when dropped.
struct Network {
    names: Vec<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Network {
    /// A server namespace and one per agent, each agent linked to the server by a veth pair
    /// on 10.77.<agent>.0/24.
    fn new(agents: usize) -> Result<Network, String> {
        let tag = std::process::id();
        let server = format!("fs{tag}-srv");
        let mut net = Network { names: Vec::new() };
        ip(&["netns", "add", &server])?;
        net.names.push(server.clone());
        ip(&["-n", &server, "link", "set", "lo", "up"])?;
        for a in 1..=agents {
            let ns = format!("fs{tag}-a{a}");
            ip(&["netns", "add", &ns])?;
            net.names.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let (s_if, a_if) = (format!("fs{tag}s{a}"), format!("fs{tag}a{a}"));
            ip(&[
                "link", "add", &s_if, "netns", &server, "type", "veth", "peer", "name", &a_if,
                "netns", &ns,
            ])?;
            ip(&[
                "-n",
                &server,
                "addr",
                "add",
                &format!("10.77.{a}.1/24"),
                "dev",
                &s_if,
            ])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.77.{a}.2/24"),
                "dev",
                &a_if,
            ])?;
            ip(&["-n", &server, "link", "set", &s_if, "up"])?;
            ip(&["-n", &ns, "link", "set", &a_if, "up"])?;
        }
        Ok(net)
    }

    fn server(&self) -> &str {
        &self.names[0]
    }

    fn agent(&self, a: usize) -> &str {
        &self.names[a]
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of each veth pair, and so the pair.
        for ns in &self.names {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// `BIN args...` inside namespace `ns` (`ip netns exec` execs it: the PID is the process's).
fn in_ns(ns: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, BIN]);
    cmd
}

fn server(net: &Network, dir: &Path) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    common::spawn_server(
        in_ns(net.server())
            .args(["server", "--config"])
            .arg(dir.join("server.toml"))
            .env("FAIRSCHED_LOG", "info")
            .stderr(log),
    )
    .0
}

fn agent(net: &Network, a: usize, dir: &Path) -> Proc {
    let node = format!("host{a}");
    let log = std::fs::File::create(dir.join(format!("{node}.log"))).unwrap();
    Proc(
        in_ns(net.agent(a))
            .args([
                "agent",
                "--server",
                &format!("10.77.{a}.1:9090"),
                "--node-id",
                &node,
            ])
            .args([
                "--resources",
                "cpu=2,memory=1GiB,user_slots=2",
                "--token",
                "multi-host",
            ])
            .arg("--work-dir")
            .arg(dir.join(&node))
            .env("FAIRSCHED_LOG", "fairsched_agent=info")
            .env("FAIRSCHED_MEMORY_ENFORCEMENT", "poll")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// The CLI, run in the server's namespace against its loopback address.
fn cli(net: &Network, args: &[&str]) -> Value {
    let out = in_ns(net.server())
        .args(args)
        .arg("--json")
        .env("FAIRSCHED_SERVER", "127.0.0.1:9090")
        .env_remove("FAIRSCHED_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fairsched {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_cluster_on_separate_network_hosts_survives_agent_loss_and_a_server_restart() {
    let net = match Network::new(2) {
        Ok(net) => net,
        Err(why) => {
            eprintln!("skipped: cannot create network namespaces here ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("server.toml"),
        format!(
            "listen = \"0.0.0.0:9090\"\ndata_dir = {:?}\nagent_token = \"multi-host\"\n\
             node_timeout_ms = 2000\n\n[scheduler]\nfair_share_update_period_ms = 100\n\
             node_heartbeat_period_ms = 100\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let mut srv = server(&net, dir.path());
    let mut agents = vec![agent(&net, 1, dir.path()), agent(&net, 2, dir.path())];
    wait_for("both hosts to register", Duration::from_secs(30), || {
        cli(&net, &["node", "list"]).as_array().unwrap().len() == 2
    });
    // Four jobs of 4 s: two on each host.
    let out = in_ns(net.server())
        .args([
            "op", "run", "--id", "work", "--jobs", "4", "--cpu", "1", "--", "sleep", "4",
        ])
        .env("FAIRSCHED_SERVER", "127.0.0.1:9090")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let on = |node: &str| {
        cli(&net, &["op", "show", "work"])["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["node"] == node && j["state"] == "running")
            .count()
    };
    wait_for("jobs on both hosts", Duration::from_secs(30), || {
        on("host1") == 2 && on("host2") == 2
    });

    // Host 1's agent dies: its jobs are node_lost and run again on host 2.
    agents.remove(0).signal(nix::sys::signal::Signal::SIGKILL);
    wait_for(
        "host 1's jobs to be node_lost",
        Duration::from_secs(30),
        || {
            let op = cli(&net, &["op", "show", "work"]);
            op["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|j| j["node"] == "host1" && j["reason"] == "node_lost")
                .count()
                == 2
        },
    );
    // The server dies and comes back while host 2 runs jobs: they are adopted, not rerun.
    srv.signal(nix::sys::signal::Signal::SIGKILL);
    drop(srv);
    srv = server(&net, dir.path());
    wait_for("every job to complete", Duration::from_secs(60), || {
        cli(&net, &["op", "show", "work"])["state"] == "completed"
    });
    let op = cli(&net, &["op", "show", "work"]);
    let jobs = op["jobs"].as_array().unwrap();
    let completed: Vec<&Value> = jobs.iter().filter(|j| j["state"] == "completed").collect();
    assert_eq!(completed.len(), 4, "{op}");
    assert!(completed.iter().all(|j| j["node"] == "host2"), "{op}");
    let events = cli(&net, &["events", "--operation", "work", "--limit", "1000"]);
    let adopted = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "job_adopted")
        .count();
    assert!(adopted >= 1, "no job adopted across the restart: {events}");
    srv.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        srv.wait(Duration::from_secs(20)),
        "the server stops cleanly"
    );
    drop(agents);
}
