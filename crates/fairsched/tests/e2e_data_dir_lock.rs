//! One server per data directory (issue 18): a second `fairsched server`, or `fairsched up`,
//! on a data directory a running server uses refuses to start and names the holder; after the
//! holder is killed (SIGKILL: no clean-up, no pid file to go stale) a new server starts there.

mod common;

use common::{BIN, Proc};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `fairsched server --listen 127.0.0.1:0 --data-dir DIR`, waiting for its address line.
fn server(data: &Path) -> Proc {
    common::spawn_server(
        Command::new(BIN)
            .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .stderr(Stdio::null()),
    )
    .0
}

/// Runs `args` (which must fail at once); its exit code and standard error.
fn refused(args: &[&str], data: &Path) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg(data)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_data_directory_in_use_is_refused_naming_its_holder_until_the_holder_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let first = server(&data);
    let pid = first.0.id();

    let (code, stderr) = refused(&["server", "--listen", "127.0.0.1:0", "--data-dir"], &data);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("is in use by another fairsched server")
            && stderr.contains(&format!("pid {pid}"))
            && stderr.contains("--data-dir"),
        "{stderr}"
    );
    // `fairsched up --data-dir D` keeps its store in D/store.
    let (code, stderr) = refused(
        &["up", "--nodes", "1", "--port", "0", "--data-dir"],
        dir.path(),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&format!("pid {pid}")), "{stderr}");

    first.signal(nix::sys::signal::Signal::SIGKILL);
    first.wait(Duration::from_secs(10));
    let second = server(&data);
    second.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        second.wait(Duration::from_secs(20)),
        "the second server stops cleanly"
    );
}
