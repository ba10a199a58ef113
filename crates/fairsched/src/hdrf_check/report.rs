//! Results of a check and their two renderings: plain text and JSON (PRODUCT.md, interface 1).
//!
//! JSON: `{"cases":[{"id", "passed", "steps":[{"step","variant","update_ms"}] (with --time),
//! "assertions":[{"step","variant","element","attribute","comparison","expected","actual",
//! "passed"}], "notes":[...] (only when there are notes)}]}`.

use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// The whole report.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub cases: Vec<CaseReport>,
}

/// One case, over all its runs (variants).
#[derive(Debug, Serialize)]
pub struct CaseReport {
    pub id: String,
    pub passed: bool,
    /// Time of every update call (with `--time`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepTiming>>,
    pub assertions: Vec<Assertion>,
    /// Non-failing remarks: `--derived` mismatches, skipped implementation-specific assertions,
    /// remarks about the case itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
}

impl CaseReport {
    pub fn new(id: &str) -> CaseReport {
        CaseReport {
            id: id.to_string(),
            passed: true,
            steps: Some(Vec::new()),
            assertions: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Total time of the update calls, in milliseconds.
    pub fn update_ms(&self) -> f64 {
        self.steps
            .iter()
            .flatten()
            .map(|s| s.update_ms)
            .sum::<f64>()
    }
}

/// Time of one update call.
#[derive(Debug, Serialize)]
pub struct StepTiming {
    pub step: usize,
    pub variant: Value,
    pub update_ms: f64,
}

/// One checked expectation.
#[derive(Debug, Serialize)]
pub struct Assertion {
    /// Position of the step in the case's `steps`.
    pub step: usize,
    /// The parametrisation variant of the run (`null` when the case is not parametrised).
    pub variant: Value,
    pub element: Option<String>,
    pub attribute: Option<String>,
    pub comparison: String,
    pub expected: Value,
    /// What the implementation computed.
    pub actual: Value,
    pub passed: bool,
    /// Extra context (tolerance, option variants compared, panic message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A non-failing remark.
#[derive(Debug, Serialize)]
pub struct Note {
    /// `derived_fair_share`, `derived_errors`, `derived_unusable`, `implementation_specific`,
    /// `case`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    pub variant: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub expected: Value,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub actual: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Note {
    pub fn case(message: &str) -> Note {
        Note {
            kind: "case",
            step: None,
            variant: Value::Null,
            element: None,
            attribute: None,
            expected: Value::Null,
            actual: Value::Null,
            message: Some(message.to_string()),
        }
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "?".to_string())
}

/// Plain rendering: one line per case, failing assertions and notes indented below it, then
/// `N passed, N failed`.
pub fn render_plain(report: &Report, time: bool, derived: bool) -> String {
    let mut out = String::new();
    let mut passed = 0;
    let mut failed = 0;
    let mut derived_notes = 0;
    let mut cases_with_derived_notes = 0;
    for case in &report.cases {
        if case.passed {
            passed += 1;
        } else {
            failed += 1;
        }
        let _ = write!(
            out,
            "{} {}",
            if case.passed { "ok" } else { "FAIL" },
            case.id
        );
        if time {
            let _ = write!(out, " (update {:.3} ms)", case.update_ms());
        }
        out.push('\n');
        for a in case.assertions.iter().filter(|a| !a.passed) {
            let _ = write!(
                out,
                "    step={} variant={} element={} attribute={} comparison={}",
                a.step,
                compact(&a.variant),
                a.element.as_deref().unwrap_or("-"),
                a.attribute.as_deref().unwrap_or("-"),
                a.comparison,
            );
            if let Some(d) = &a.detail {
                let _ = write!(out, " ({d})");
            }
            let _ = writeln!(
                out,
                " expected={} actual={}",
                compact(&a.expected),
                compact(&a.actual)
            );
        }
        let mut counted = false;
        for n in &case.notes {
            if n.kind != "case" && !derived {
                continue;
            }
            if n.kind.starts_with("derived") {
                derived_notes += 1;
                counted = true;
            }
            let _ = write!(out, "    note[{}]", n.kind);
            if let Some(step) = n.step {
                let _ = write!(out, " step={step} variant={}", compact(&n.variant));
            }
            if let Some(e) = &n.element {
                let _ = write!(out, " element={e}");
            }
            if let Some(a) = &n.attribute {
                let _ = write!(out, " attribute={a}");
            }
            if !n.expected.is_null() {
                let _ = write!(out, " expected={}", compact(&n.expected));
            }
            if !n.actual.is_null() {
                let _ = write!(out, " actual={}", compact(&n.actual));
            }
            if let Some(m) = &n.message {
                let _ = write!(out, ": {m}");
            }
            out.push('\n');
        }
        if counted {
            cases_with_derived_notes += 1;
        }
    }
    if derived {
        let _ = writeln!(
            out,
            "derived (not asserted): {derived_notes} mismatches in {cases_with_derived_notes} cases"
        );
    }
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    out
}

/// JSON rendering (one document).
pub fn render_json(report: &Report) -> String {
    let mut s = serde_json::to_string_pretty(report)
        .unwrap_or_else(|e| format!("{{\"error\":{}}}", Value::from(e.to_string())));
    s.push('\n');
    s
}
