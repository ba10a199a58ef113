//! Test support: runs a scenario given as JSON through `fairsched scenario`'s entry point;
//! [`reference`] FCFS and backfilling to check the simulator's policies against.

use fairsched_sim::scenario::cli::{self, EXIT_OK, Options};
use serde_json::Value;

/// Runs `scenario` through the command's entry point: (exit code, stdout, stderr).
pub fn run_raw(scenario: &Value) -> (u8, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("case.json");
    std::fs::write(&file, scenario.to_string()).expect("write");
    let options = Options {
        file,
        out: None,
        stats: false,
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let code = cli::main(&options, &mut stdout, &mut stderr);
    let text = |b: Vec<u8>| String::from_utf8(b).expect("UTF-8");
    (code, text(stdout), text(stderr))
}

/// The output lines of `scenario` (which must run: exit status 0), as JSON.
#[allow(dead_code)]
pub fn run(scenario: &Value) -> Vec<Value> {
    let (code, stdout, stderr) = run_raw(scenario);
    assert_eq!(code, EXIT_OK, "{}: {stderr}", scenario["name"]);
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The reference FCFS, EASY and conservative backfilling the simulator's policies are checked
/// against (not every test file uses every item).
#[allow(dead_code)]
pub mod reference;

/// Hand-worked cases of the three policies, with every job's start (not every test file uses
/// them).
#[allow(dead_code)]
pub mod cases;

/// A file of the project's `shared/` directory (`FAIRSCHED_SHARED_DIR`, else the checkout's
/// sibling `../../../shared` from this crate), if it is there.
#[allow(dead_code)]
pub fn shared_file(relative: &str) -> Option<std::path::PathBuf> {
    let dir = match std::env::var_os("FAIRSCHED_SHARED_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    Some(dir.join(relative)).filter(|f| f.is_file())
}
