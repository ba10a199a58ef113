//! Running a checked case: one run per variant, each on a fresh tree; steps in order.
//!
//! * `update`: one fair-share update of the run's tree (its integral state carries over to
//!   later steps), then the step's expectations against its output.
//! * `compare_variants`: the same, but on a clone of the tree, so the persistent state is not
//!   disturbed.
//! * `mutate` / `add_element`: change the tree.
//! * `equal_across_option_variants` (in either update step) runs clones of the tree as it is
//!   before the step's update, once per option variant, and compares across them.
//!
//! Every update runs under `catch_unwind`: a panic is a failure of the case, not of the tool.

use super::attribute::{Actual, AttrExpr, Source};
use super::build::{self, Action, CasePlan, Check, DerivedPlan, Names, Variant};
use super::compare;
use super::format::{ComparisonKind, OptionsPatch};
use super::report::{Assertion, CaseReport, Note, StepTiming};
use fairsched_hdrf::{NoClock, Tree, UpdateError, UpdateInput, UpdateOptions, UpdateOutput};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

/// What to run and report besides the assertions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags {
    /// Report the time of every update call.
    pub time: bool,
    /// Compare against `derived_not_asserted` and show implementation-specific assertions, as
    /// notes.
    pub derived: bool,
}

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs a panic hook that records panics inside [`guarded_update`] instead of printing them
/// (they are reported as failures); any other panic goes to the previous hook.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if CAPTURING.with(Cell::get) {
            let message = info.to_string().replace('\n', " ");
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(message));
        } else {
            previous(info);
        }
    }));
}

/// Result of one update call.
#[derive(Debug)]
struct Outcome {
    output: Result<UpdateOutput, String>,
    elapsed: Duration,
}

fn guarded_update(tree: &mut Tree, input: &UpdateInput) -> Outcome {
    // Only the whole call is timed (with `Instant`, here in the binary); phase timings are not
    // reported, so the library gets no clock and spends nothing on reading one.
    CAPTURING.with(|c| c.set(true));
    let start = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fairsched_hdrf::update(tree, input, &NoClock)
    }));
    let elapsed = start.elapsed();
    CAPTURING.with(|c| c.set(false));
    let output = result.map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panicked".to_string())
    });
    Outcome { output, elapsed }
}

/// Runs every variant of a case.
pub fn run_case(case: &CasePlan, flags: Flags) -> CaseReport {
    let mut report = CaseReport::new(&case.id);
    for note in &case.notes {
        report.notes.push(Note::case(note));
    }
    for variant in &case.variants {
        run_variant(case, variant, flags, &mut report);
    }
    report.passed = report.assertions.iter().all(|a| a.passed);
    if !flags.time {
        report.steps = None;
    }
    report
}

fn failure(step: usize, variant: &Value, comparison: &str, actual: String) -> Assertion {
    Assertion {
        step,
        variant: variant.clone(),
        element: None,
        attribute: None,
        comparison: comparison.to_string(),
        expected: Value::Null,
        actual: Value::from(actual),
        passed: false,
        detail: None,
    }
}

fn run_variant(case: &CasePlan, variant: &Variant, flags: Flags, report: &mut CaseReport) {
    let label = &variant.label;
    let (mut tree, mut names) = match build::build_tree(case) {
        Ok(built) => built,
        Err(m) => {
            report.assertions.push(failure(0, label, "build_tree", m));
            return;
        }
    };
    for (i, step) in case.steps.iter().enumerate() {
        let spec = match &step.action {
            Action::Mutate { element, fields } => {
                if let Some(&index) = names.get(element) {
                    build::apply_fields(&mut tree, index, fields);
                }
                continue;
            }
            Action::AddElement(def) => {
                if let Err(m) = build::add_element(&mut tree, &mut names, def) {
                    report.assertions.push(failure(i, label, "add_element", m));
                    return;
                }
                continue;
            }
            Action::Update(spec) | Action::CompareVariants(spec) => spec,
        };
        let persistent = matches!(step.action, Action::Update(_));
        let mut options = variant.options.clone();
        spec.options.apply(&mut options);
        let input = UpdateInput {
            total_resources: spec.total.unwrap_or(case.total),
            now_seconds: spec.now_seconds,
            previous_update_seconds: spec.previous_update_seconds,
            options,
        };

        // Option variants run on clones of the tree as it is before this step's update.
        let across: Vec<Option<Vec<Assertion>>> = step
            .checks
            .iter()
            .map(|c| match c {
                Check::EqualAcross {
                    elements,
                    attribute,
                    tolerance,
                    variants,
                } => Some(equal_across(
                    &tree, &names, &input, i, label, elements, attribute, *tolerance, variants,
                )),
                _ => None,
            })
            .collect();

        let mut scratch;
        let target: &mut Tree = if persistent {
            &mut tree
        } else {
            scratch = tree.clone();
            &mut scratch
        };
        let outcome = guarded_update(target, &input);
        report.steps.get_or_insert_with(Vec::new).push(StepTiming {
            step: i,
            variant: label.clone(),
            update_ms: outcome.elapsed.as_secs_f64() * 1e3,
        });
        let output = match outcome.output {
            Ok(output) => output,
            Err(message) => {
                let mut a = failure(i, label, "no_panic", message);
                a.expected = Value::from("the update returns");
                report.assertions.push(a);
                if persistent {
                    report.notes.push(Note {
                        message: Some(format!(
                            "the update of step {i} panicked; the remaining steps of this run were not run"
                        )),
                        step: Some(i),
                        variant: label.clone(),
                        ..Note::case("")
                    });
                    return;
                }
                continue;
            }
        };
        let ctx = Ctx {
            tree: target,
            names: &names,
            output: &output,
            step: i,
            variant: label,
        };
        for (check, across) in step.checks.iter().zip(across) {
            match across {
                Some(assertions) => report.assertions.extend(assertions),
                None => report.assertions.extend(ctx.evaluate(check)),
            }
        }
        if flags.derived {
            for check in &step.implementation_specific {
                for a in ctx.evaluate(check) {
                    report.notes.push(Note {
                        kind: "implementation_specific",
                        step: Some(i),
                        variant: label.clone(),
                        element: a.element,
                        attribute: a.attribute,
                        expected: a.expected,
                        actual: a.actual,
                        message: Some(format!(
                            "upstream `{}` assertion, implementation-specific, not asserted; it would {}",
                            a.comparison,
                            if a.passed { "pass" } else { "fail" }
                        )),
                    });
                }
            }
            if let Some(derived) = &step.derived {
                ctx.derived_notes(derived, &mut report.notes);
            }
        }
    }
}

/// What checks read after an update.
struct Ctx<'a> {
    tree: &'a Tree,
    names: &'a Names,
    output: &'a UpdateOutput,
    step: usize,
    variant: &'a Value,
}

impl Ctx<'_> {
    fn read(&self, element: &str, attribute: &AttrExpr) -> Result<Actual, String> {
        read(self.tree, self.names, self.output, element, attribute)
    }

    fn assertion(
        &self,
        element: Option<&str>,
        attribute: Option<&str>,
        comparison: ComparisonKind,
        expected: Value,
        actual: Value,
        passed: bool,
    ) -> Assertion {
        Assertion {
            step: self.step,
            variant: self.variant.clone(),
            element: element.map(str::to_string),
            attribute: attribute.map(str::to_string),
            comparison: comparison.name().to_string(),
            expected,
            actual,
            passed,
            detail: None,
        }
    }

    fn evaluate(&self, check: &Check) -> Vec<Assertion> {
        match check {
            Check::Value {
                element,
                attribute,
                comparison,
                tolerance,
                expected,
            } => {
                let (actual, passed, detail) = match self.read(element, attribute) {
                    Ok(actual) => {
                        let passed = match comparison {
                            ComparisonKind::Near => compare::near(&actual, expected, *tolerance),
                            ComparisonKind::Exact => compare::exact(&actual, expected),
                            ComparisonKind::NotDominatedBy => {
                                compare::not_dominated_by(&actual, expected)
                            }
                            ComparisonKind::Dominates => compare::dominates(&actual, expected),
                            ComparisonKind::EqualAcrossOptionVariants
                            | ComparisonKind::NoFailure => false,
                        };
                        let detail = match comparison {
                            ComparisonKind::Near => Some(format!("tolerance {tolerance:e}")),
                            ComparisonKind::Exact if compare::EXACT_TOLERANCE > 0.0 => {
                                Some(format!("tolerance {:e}", compare::EXACT_TOLERANCE))
                            }
                            _ => None,
                        };
                        (actual.to_json(), passed, detail)
                    }
                    Err(m) => (Value::Null, false, Some(m)),
                };
                let mut a = self.assertion(
                    Some(element),
                    Some(&attribute.text),
                    *comparison,
                    expected.to_json(),
                    actual,
                    passed,
                );
                a.detail = detail;
                vec![a]
            }
            Check::Dominates { element, lhs, rhs } => {
                let (l, r) = (self.read(element, lhs), self.read(element, rhs));
                let mut a = match (&l, &r) {
                    (Ok(l), Ok(r)) => self.assertion(
                        Some(element),
                        Some(&lhs.text),
                        ComparisonKind::Dominates,
                        r.to_json(),
                        l.to_json(),
                        compare::dominates(l, r),
                    ),
                    _ => {
                        let mut a = self.assertion(
                            Some(element),
                            Some(&lhs.text),
                            ComparisonKind::Dominates,
                            Value::Null,
                            Value::Null,
                            false,
                        );
                        a.detail = l.err().or(r.err());
                        return vec![a];
                    }
                };
                a.detail = Some(format!(
                    "actual is `{}`, expected is `{}`; passes when actual >= expected on every component",
                    lhs.text, rhs.text
                ));
                vec![a]
            }
            Check::NoFailure => {
                let warnings: Vec<Value> = self
                    .output
                    .warnings
                    .iter()
                    .map(|w| Value::from(format!("{}: {}", w.element, w.message)))
                    .collect();
                let passed = warnings.is_empty();
                let mut a = self.assertion(
                    None,
                    None,
                    ComparisonKind::NoFailure,
                    Value::Array(Vec::new()),
                    Value::Array(warnings),
                    passed,
                );
                a.detail = Some("warnings of the update".to_string());
                vec![a]
            }
            Check::Unsupported {
                element,
                attribute,
                comparison,
                expected,
                reason,
            } => vec![Assertion {
                step: self.step,
                variant: self.variant.clone(),
                element: element.clone(),
                attribute: attribute.clone(),
                comparison: comparison.clone(),
                expected: expected.clone(),
                actual: Value::Null,
                passed: false,
                detail: Some(reason.clone()),
            }],
            // Evaluated before the update, in `equal_across`.
            Check::EqualAcross { .. } => Vec::new(),
        }
    }

    fn derived_notes(&self, derived: &DerivedPlan, notes: &mut Vec<Note>) {
        let note = |kind, element: Option<&str>, attribute: Option<&str>| Note {
            kind,
            step: Some(self.step),
            variant: self.variant.clone(),
            element: element.map(str::to_string),
            attribute: attribute.map(str::to_string),
            expected: Value::Null,
            actual: Value::Null,
            message: None,
        };
        // In tree order, so that the notes read top-down.
        let mut values: Vec<_> = derived.values.iter().collect();
        values.sort_by_key(|v| self.names.get(&v.element).copied().unwrap_or(usize::MAX));
        for v in values {
            match self.read(&v.element, &v.attribute) {
                Ok(actual) => {
                    if !compare::near(&actual, &v.expected, compare::DERIVED_TOLERANCE) {
                        let mut n = note(
                            "derived_fair_share",
                            Some(&v.element),
                            Some(&v.attribute.text),
                        );
                        n.expected = v.expected.to_json();
                        n.actual = actual.to_json();
                        n.message = compare::max_difference(&actual, &v.expected)
                            .map(|d| format!("max difference {d:.3e}"));
                        notes.push(n);
                    }
                }
                Err(m) => {
                    let mut n = note(
                        "derived_unusable",
                        Some(&v.element),
                        Some(&v.attribute.text),
                    );
                    n.message = Some(m);
                    notes.push(n);
                }
            }
        }
        if let Some(expected) = &derived.errors {
            let mut expected = expected.clone();
            expected.sort();
            let mut actual: Vec<String> = self.output.errors.iter().map(error_label).collect();
            actual.sort();
            if expected != actual {
                let mut n = note("derived_errors", None, None);
                n.expected = Value::from(expected);
                n.actual = Value::from(actual);
                n.message = Some("errors of the update differ".to_string());
                notes.push(n);
            }
        }
        for p in &derived.problems {
            let mut n = note("derived_unusable", None, None);
            n.message = Some(p.clone());
            notes.push(n);
        }
    }
}

fn read(
    tree: &Tree,
    names: &Names,
    output: &UpdateOutput,
    element: &str,
    attribute: &AttrExpr,
) -> Result<Actual, String> {
    let index = *names
        .get(element)
        .ok_or_else(|| format!("element `{element}` is not in the tree"))?;
    let attributes = output.attributes.get(index).ok_or_else(|| {
        format!(
            "the update returned {} attribute records for {} elements",
            output.attributes.len(),
            tree.len()
        )
    })?;
    Ok(attribute.read(&Source {
        attributes,
        element: tree.element(index),
    }))
}

/// The error descriptions the conformance file uses in `derived_not_asserted.errors`.
pub fn error_label(e: &UpdateError) -> String {
    match e {
        UpdateError::PoolTreeGuaranteesOvercommitFlows { .. } => {
            "PoolTreeGuaranteesOvercommit (strong guarantees + resource flows exceed cluster)"
                .to_string()
        }
        UpdateError::PoolTreeGuaranteesOvercommitBurst { .. } => {
            "PoolTreeGuaranteesOvercommit (strong guarantees + burst guarantees exceed cluster)"
                .to_string()
        }
        other => other.name().to_string(),
    }
}

/// Runs clones of `tree` under each option variant (on top of `input.options`) and compares the
/// attribute of every element with its value under the first variant.
#[allow(clippy::too_many_arguments)]
fn equal_across(
    tree: &Tree,
    names: &Names,
    input: &UpdateInput,
    step: usize,
    label: &Value,
    elements: &[String],
    attribute: &AttrExpr,
    tolerance: f64,
    variants: &[OptionsPatch],
) -> Vec<Assertion> {
    let runs: Vec<Result<Vec<Actual>, String>> = variants
        .iter()
        .map(|patch| {
            let mut options: UpdateOptions = input.options.clone();
            patch.apply(&mut options);
            let input = UpdateInput {
                options,
                ..input.clone()
            };
            let mut clone = tree.clone();
            let outcome = guarded_update(&mut clone, &input);
            let output = outcome
                .output
                .map_err(|m| format!("update panicked: {m}"))?;
            elements
                .iter()
                .map(|e| read(&clone, names, &output, e, attribute))
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    for (j, element) in elements.iter().enumerate() {
        for (k, run) in runs.iter().enumerate().skip(1) {
            let first = runs[0].as_ref().map(|r| &r[j]);
            let this = run.as_ref().map(|r| &r[j]);
            let (expected, actual, passed, problem) = match (first, this) {
                (Ok(f), Ok(t)) => (
                    f.to_json(),
                    t.to_json(),
                    compare::near(t, f, tolerance),
                    None,
                ),
                (f, t) => (
                    f.map_or(Value::Null, Actual::to_json),
                    t.map_or(Value::Null, Actual::to_json),
                    false,
                    f.err().or(t.err()).cloned(),
                ),
            };
            let mut detail = format!(
                "expected under options {}, actual under options {}, tolerance {tolerance:e}",
                variants[0].to_json(),
                variants[k].to_json()
            );
            if let Some(p) = problem {
                detail = format!("{detail}: {p}");
            }
            out.push(Assertion {
                step,
                variant: label.clone(),
                element: Some(element.clone()),
                attribute: Some(attribute.text.clone()),
                comparison: ComparisonKind::EqualAcrossOptionVariants.name().to_string(),
                expected,
                actual,
                passed,
                detail: Some(detail),
            });
        }
    }
    out
}
