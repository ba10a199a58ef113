//! Runs a scenario given as JSON through `fairsched scenario`'s entry point.

use fairsched_sim::scenario::cli::{self, EXIT_OK, Options};
use serde_json::Value;

/// The output lines of `scenario` (which must run: exit status 0), as JSON.
pub fn run(scenario: &Value) -> Vec<Value> {
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
    assert_eq!(
        code,
        EXIT_OK,
        "{}: {}",
        scenario["name"],
        String::from_utf8_lossy(&stderr)
    );
    String::from_utf8(stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
