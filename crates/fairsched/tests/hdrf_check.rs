//! `fairsched hdrf check`, run as a user runs it: the built binary on files under `tests/data/`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Result of one run of the binary.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `fairsched hdrf check ARGS...` (relative paths are under `tests/data/`).
fn check(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_fairsched"))
        .current_dir(data_dir())
        .args(["hdrf", "check"])
        .args(args)
        .output()
        .expect("the fairsched binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The project's `shared/` directory: `FAIRSCHED_SHARED_DIR`, else `../../../shared` from this
/// crate (the checkout's sibling) if it exists. For running the shared conformance vectors.
fn shared_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FAIRSCHED_SHARED_DIR") {
        return Some(PathBuf::from(dir));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    dir.is_dir().then_some(dir)
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}", run.stdout))
}

#[test]
fn malformed_files_exit_2_naming_the_file_and_the_json_path() {
    // (file under tests/data/malformed, what the message must contain)
    let cases: &[(&str, &[&str])] = &[
        ("truncated_json.json", &["invalid JSON", "line"]),
        (
            "unknown_element_type.json",
            &["cases.1.elements.1.type", "unknown variant `pol`"],
        ),
        (
            "unknown_parent.json",
            &["cases.1.elements.3.parent", "`PoolZ`"],
        ),
        (
            "unknown_step_type.json",
            &["cases.1.steps.1.type", "unknown variant `mutat`"],
        ),
        (
            "unknown_set_key.json",
            &["cases.1.steps.1.set.weigth", "unknown field"],
        ),
        (
            "unknown_attribute.json",
            &["cases.1.steps.0.expect.1.attribute", "`fair_share.totl`"],
        ),
        (
            "unknown_comparison.json",
            &["cases.1.steps.0.expect.1.comparison", "`approximately`"],
        ),
        (
            "unknown_option.json",
            &["cases.1.steps.0.options.enable_magic", "unknown field"],
        ),
        (
            "wrong_value_type.json",
            &["cases.1.elements.1.weight", "invalid type"],
        ),
        (
            "unknown_element_reference.json",
            &["cases.1.steps.3.expect.0.element", "`Ghost`"],
        ),
        (
            "bad_limit.json",
            &["cases.1.elements.2.resource_limits.cpu", "\"inf\""],
        ),
        (
            "wrong_vector_length.json",
            &["cases.1.steps.0.expect.0.value", "5 numbers"],
        ),
        (
            "pool_field_on_operation.json",
            &["cases.1.elements.3.mode", "not applicable"],
        ),
    ];
    for (file, needles) in cases {
        let path = format!("malformed/{file}");
        for extra in [&[][..], &["--json"][..]] {
            let mut args = vec![path.as_str()];
            args.extend_from_slice(extra);
            let run = check(&args);
            assert_eq!(run.code, 2, "{file} {extra:?}: {run:?}");
            assert!(
                run.stderr.contains(&path),
                "{file}: names the file: {run:?}"
            );
            for needle in *needles {
                assert!(run.stderr.contains(needle), "{file}: `{needle}` in {run:?}");
            }
        }
    }
}

#[test]
fn a_missing_file_exits_2() {
    let run = check(&["no_such_file.json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("no_such_file.json"), "{run:?}");
    assert!(run.stderr.contains("cannot read"), "{run:?}");
}

#[test]
fn good_files_still_run_next_to_a_malformed_one() {
    let run = check(&["malformed/unknown_parent.json", "passing.json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.contains("ok OneSmallOperation"), "{run:?}");
}

#[test]
fn plain_output_has_one_line_per_case_and_a_closing_count() {
    // (args, exit code, lines that must appear, closing line)
    let cases: &[(&[&str], i32, &[&str], &str)] = &[
        (
            &["passing.json"],
            0,
            &["ok EmptyTree", "ok OneSmallOperation"],
            "2 passed, 0 failed",
        ),
        (
            &["failing.json"],
            1,
            &[
                "FAIL EmptyTreeWrongExpectation",
                "step=0 variant={\"enable_improved_fair_share_by_fit_factor_computation\":true} element=<Root> attribute=fair_share.total comparison=exact (tolerance 1e-12) expected=[0.5,0.5,0.0,0.5,0.0] actual=[0.0,0.0,0.0,0.0,0.0]",
            ],
            "0 passed, 1 failed",
        ),
        (
            &["passing.json", "failing.json"],
            1,
            &["ok EmptyTree", "FAIL EmptyTreeWrongExpectation"],
            "2 passed, 1 failed",
        ),
        (
            &["--time", "passing.json"],
            0,
            &["ok EmptyTree (update "],
            "2 passed, 0 failed",
        ),
    ];
    for (args, code, lines, closing) in cases {
        let run = check(args);
        assert_eq!(run.code, *code, "{args:?}: {run:?}");
        for line in *lines {
            assert!(
                run.stdout.lines().any(|l| l.trim_start().starts_with(line)),
                "{args:?}: `{line}` in {run:?}"
            );
        }
        assert_eq!(
            run.stdout.lines().last(),
            Some(*closing),
            "{args:?}: {run:?}"
        );
    }
}

#[test]
fn json_output_has_the_documented_shape() {
    let run = check(&["--json", "--time", "passing.json", "failing.json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let report = json(&run);
    let cases = report["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 3);
    for case in cases {
        let keys: Vec<&str> = case
            .as_object()
            .expect("case")
            .keys()
            .map(String::as_str)
            .collect();
        for key in ["id", "passed", "steps", "assertions"] {
            assert!(keys.contains(&key), "case has `{key}`: {case}");
        }
        for step in case["steps"].as_array().expect("steps") {
            assert!(step["step"].is_u64(), "{step}");
            assert!(step["update_ms"].is_f64(), "{step}");
        }
        for a in case["assertions"].as_array().expect("assertions") {
            let keys: Vec<&str> = a
                .as_object()
                .expect("assertion")
                .keys()
                .map(String::as_str)
                .collect();
            for key in [
                "step",
                "variant",
                "element",
                "attribute",
                "comparison",
                "expected",
                "actual",
                "passed",
            ] {
                assert!(keys.contains(&key), "assertion has `{key}`: {a}");
            }
            let attribute = a["attribute"].as_str().unwrap_or_default();
            if attribute.ends_with("share") || attribute.starts_with("fair_share.") {
                let actual = a["actual"].as_array().expect("a share is an array");
                assert_eq!(actual.len(), 5, "{a}");
            }
        }
    }
    let failing = &cases[2];
    assert_eq!(failing["id"], "EmptyTreeWrongExpectation");
    assert_eq!(failing["passed"], false);
    let failed: Vec<&Value> = failing["assertions"]
        .as_array()
        .expect("assertions")
        .iter()
        .filter(|a| a["passed"] == false)
        .collect();
    assert_eq!(failed.len(), 2, "one per parametrisation variant");
    assert_eq!(failed[0]["step"], 0);
    assert_eq!(
        failed[0]["variant"],
        serde_json::json!({"enable_improved_fair_share_by_fit_factor_computation": false})
    );
    assert_eq!(failed[0]["element"], "<Root>");
    assert_eq!(failed[0]["comparison"], "exact");
    assert_eq!(
        failed[0]["expected"],
        serde_json::json!([0.5, 0.5, 0.0, 0.5, 0.0])
    );
    assert_eq!(
        failed[0]["actual"],
        serde_json::json!([0.0, 0.0, 0.0, 0.0, 0.0])
    );

    let passing = &cases[1];
    assert_eq!(passing["passed"], true);
    let comparisons: Vec<&str> = passing["assertions"]
        .as_array()
        .expect("assertions")
        .iter()
        .filter_map(|a| a["comparison"].as_str())
        .collect();
    for c in [
        "exact",
        "near",
        "dominates",
        "not_dominated_by",
        "equal_across_option_variants",
    ] {
        assert!(
            comparisons.contains(&c),
            "`{c}` was checked: {comparisons:?}"
        );
    }
    let fifo_index = passing["assertions"]
        .as_array()
        .expect("assertions")
        .iter()
        .find(|a| a["element"] == "Operation1" && a["attribute"] == "fifo_index")
        .expect("fifo_index assertion");
    assert_eq!(fifo_index["actual"], 0);
}

#[test]
fn names_the_conventions_define_but_the_tool_lacks_fail_instead_of_rejecting_the_file() {
    let run = check(&["defined_unimplemented.json"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("FAIL DefinedButUnimplemented"),
        "{run:?}"
    );
    for needle in [
        "comparison=has_error",
        "attribute=satisfaction_ratio",
        "not implemented by this tool",
    ] {
        assert!(run.stdout.contains(needle), "`{needle}` in {run:?}");
    }
    assert!(run.stderr.contains("warning:"), "{run:?}");
    let report = json(&check(&["--json", "defined_unimplemented.json"]));
    let assertions = report["cases"][0]["assertions"]
        .as_array()
        .expect("assertions");
    // The implemented expectation still runs and passes.
    assert!(
        assertions
            .iter()
            .any(|a| a["attribute"] == "fair_share.total" && a["passed"] == true),
        "{assertions:?}"
    );
}

#[test]
fn without_time_there_are_no_step_timings() {
    let run = check(&["--json", "passing.json"]);
    assert_eq!(run.code, 0, "{run:?}");
    for case in json(&run)["cases"].as_array().expect("cases") {
        assert!(case.get("steps").is_none(), "{case}");
    }
}

#[test]
fn derived_values_are_notes_not_failures() {
    let plain = check(&["derived_mismatch.json"]);
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(
        !plain.stdout.contains("note["),
        "notes only with --derived: {plain:?}"
    );

    let derived = check(&["--derived", "derived_mismatch.json"]);
    assert_eq!(derived.code, 0, "{derived:?}");
    assert!(derived.stdout.contains("ok DerivedMismatch"), "{derived:?}");
    let note = derived
        .stdout
        .lines()
        .find(|l| l.contains("note[derived_fair_share]"))
        .unwrap_or_else(|| panic!("a derived note: {derived:?}"));
    for part in [
        "step=0",
        "variant=null",
        "element=Operation0",
        "attribute=fair_share.total",
        "expected=[0.25,0.25,0.0,0.25,0.0]",
        "actual=[0.3,0.3,0.0,0.3,0.0]",
    ] {
        assert!(note.contains(part), "`{part}` in `{note}`");
    }
    assert!(
        derived.stdout.contains("note[implementation_specific]"),
        "{derived:?}"
    );
    assert_eq!(derived.stdout.lines().last(), Some("1 passed, 0 failed"));

    let as_json = json(&check(&["--json", "--derived", "derived_mismatch.json"]));
    let notes = as_json["cases"][0]["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n["kind"] == "derived_fair_share"
            && n["element"] == "Operation0"
            && n["expected"] == serde_json::json!([0.25, 0.25, 0.0, 0.25, 0.0])),
        "{notes:?}"
    );
}

/// Every case of the shared conformance vectors passes, under every parametrisation (exit 0).
/// Skipped (with a message) only when `shared/` is not next to the checkout.
#[test]
fn shared_conformance_cases_all_pass() {
    let Some(shared) = shared_dir() else {
        eprintln!("shared/ not found next to the checkout; skipped");
        return;
    };
    let file = shared.join("conformance/vector_hdrf_cases.json");
    assert!(file.is_file(), "{} is missing", file.display());
    let file = file.to_string_lossy().into_owned();
    let run = check(&["--json", &file]);
    let report = json(&run);
    let cases = report["cases"].as_array().expect("cases");
    assert!(
        cases.len() >= 30,
        "expected the 30 public cases, got {}",
        cases.len()
    );
    let failing: Vec<&Value> = cases.iter().filter(|c| c["passed"] != true).collect();
    assert!(failing.is_empty(), "failing cases: {failing:#?}");
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// The rest of the upstream unit tests (`fair_share_update_ut.cpp` at 091bad96), translated
/// by us into the same format: every test the public file does not carry (part A: pools,
/// guarantees, gangs; part B: FIFO reordering and the fast FIFO path). Their expected values
/// come from the upstream assertions, never from this implementation.
#[test]
fn translated_upstream_cases_all_pass() {
    let files = ["upstream/part_a.json", "upstream/part_b.json"];
    let run = check(&[&["--json"][..], &files[..]].concat());
    let report = json(&run);
    let cases = report["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 30, "16 cases in part A and 14 in part B");
    let failing: Vec<&Value> = cases.iter().filter(|c| c["passed"] != true).collect();
    assert!(failing.is_empty(), "failing cases: {failing:#?}");
    let asserted = cases
        .iter()
        .flat_map(|c| c["assertions"].as_array().cloned().unwrap_or_default())
        .count();
    assert!(asserted > 150, "only {asserted} assertions ran");
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// The worked examples the README's main command runs all pass.
#[test]
fn readme_examples_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hdrf");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples/hdrf exists")
        .map(|e| e.expect("dir entry").path().to_string_lossy().into_owned())
        .filter(|p| p.ends_with(".json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let run = check(&args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .ends_with(&format!("{} passed, 0 failed\n", files.len())),
        "{}",
        run.stdout
    );
}
