//! `fairsched-job-keeper __job-keeper ...`: one job's keeper on its own, as agents before the
//! job spawner ran it for each job. Such an agent, still running when this version's programs
//! are installed over its own, goes on starting jobs.

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_lone_keeper_runs_its_job_and_exits_as_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut keeper = Command::new(env!("CARGO_BIN_EXE_fairsched-job-keeper"))
        .args(["__job-keeper", "-", "500"])
        .arg(&out)
        .arg(&err)
        .args(["0", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    keeper
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    let status = keeper.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(
        said.starts_with("pid ") && said.lines().count() == 1,
        "{said:?}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hi\n");
    assert_eq!(std::fs::read_to_string(&err).unwrap(), "oops\n");
}

#[test]
fn a_keeper_run_wrongly_says_how_it_is_run() {
    let run = Command::new(env!("CARGO_BIN_EXE_fairsched-job-keeper"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("__job-spawner"),
        "{run:?}"
    );
    let run = Command::new(env!("CARGO_BIN_EXE_fairsched-job-keeper"))
        .args(["__job-spawner", "nonsense"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("bad spawner arguments"),
        "{run:?}"
    );
}
