//! Agents and the CLI take a list of servers (`--server a,b`, `FAIRSCHED_SERVER`), as given
//! for a cluster whose servers stand by for each other (issue 22): a server that cannot be
//! reached is passed for the next one, and a job runs through the one that answers.

mod common;

use common::{Cluster, wait_for};
use std::time::Duration;

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn agents_and_the_cli_pass_a_server_that_cannot_be_reached() {
    let dead = format!("http://127.0.0.1:{}", closed_port());
    let mut c = Cluster::start("[scheduler]\nnode_heartbeat_period_ms = 100\n", &[]);
    let servers = format!("{dead},{}", c.url);
    c.start_agent_at("n1", "cpu=1", &servers);
    wait_for("the agent to register", Duration::from_secs(30), || {
        common::json(&servers, &["node", "list"])
            .as_array()
            .unwrap()
            .len()
            == 1
    });
    let id = common::cli(
        &servers,
        &["op", "run", "--id", "listed", "--cpu", "1", "--", "true"],
    );
    assert_eq!(id.trim(), "listed");
    wait_for("the job to complete", Duration::from_secs(30), || {
        common::json(&servers, &["op", "show", "listed"])["state"] == "completed"
    });

    // Nothing reachable: the error says so, naming a server.
    let other = format!("http://127.0.0.1:{}", closed_port());
    let error = common::cli_fails(&format!("{dead},{other}"), &[], &["node", "list"]);
    assert!(error.contains("cannot connect to the server at"), "{error}");
    c.stop();
}
