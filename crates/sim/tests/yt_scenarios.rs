//! YTsaurus integration behaviours (`shared/conformance/yt_scenarios.json`, ids `YT-S*`) as
//! scenario files under `scenarios/yt/`, run through `fairsched scenario` in process and checked
//! against the YTsaurus expectations.
//!
//! One check helper ([`check`]); every case is data: a file and a list of [`Expect`]ations on
//! its output (event lines and labelled snapshots). Each file's `description` states the
//! concrete timeline chosen for the informal YTsaurus one. Cases the core cannot pass yet are
//! `#[ignore]`d with the missing feature or the core bug, so the list documents coverage.

use fairsched_sim::scenario::cli::{self, EXIT_BAD_FILE, EXIT_OK, Options};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Directory of the YT scenario files, relative to the repository root.
const DIR: &str = "scenarios/yt";

/// Every behaviour of `yt_scenarios.json`, then the behaviours the scheduler spec
/// (`shared/spec/ytsaurus_scheduler.md`) names by an id of its own; each has at least one file
/// `<id>_*.json`.
const IDS: &[&str] = &[
    "YT-S1", "YT-S2", "YT-S4", "YT-S5", "YT-S14", "YT-S17", "YT-S19", "YT-S23", "YT-S25", "YT-S31",
    "YT-S32", "YT-S34", "YT-S36", "YT-S37", "YT-S40",
    // From the spec's text (§1.1, §1.4, §2.4–§2.7).
    "YT-S3", "YT-S6", "YT-S9", "YT-S10", "YT-S21", "YT-S39",
    // Upstream audits: one file per audited YTsaurus test, `YT-UP-<test>.json` for
    // test_scheduler_preemption.py, `YT-UP2-<test>.json` for the pool and operation classes.
    "YT-UP", "YT-UP2",
    // `YT-UP3-<test>.json`: test_scheduler_strategy.py (operation limits, resource limits).
    "YT-UP3",
];

/// The behaviour id of a scenario file: the longest id of [`IDS`] its name starts with,
/// followed by `_` or `-` (`YT-S1_x.json` -> `YT-S1`, `YT-UP2-x.json` -> `YT-UP2`); empty when
/// none.
fn file_id(file: &str) -> &'static str {
    IDS.iter()
        .copied()
        .filter(|id| {
            file.strip_prefix(id)
                .is_some_and(|rest| rest.starts_with(['_', '-']))
        })
        .max_by_key(|id| id.len())
        .unwrap_or_default()
}

// ---- the expectation language ---------------------------------------------------------------

/// Which event lines an expectation looks at.
#[derive(Clone, Copy, Debug)]
struct Lines {
    /// The `event` field (`allocation_started`, `allocation_preempted`, `error`, ...).
    event: &'static str,
    /// `(path, value)` pairs every line must match. `path` is a JSON pointer without the
    /// leading `/` (`operation`, `preemptor/operation`); `value` is compared with a string
    /// field as text, with a number field as a number; `~text` means "contains text".
    with: &'static [(&'static str, &'static str)],
    /// Only lines with `from <= t_ms <= to`.
    from: u64,
    to: u64,
}

/// Lines of kind `event` matching `with`, at any time.
const fn ev(event: &'static str, with: &'static [(&'static str, &'static str)]) -> Lines {
    Lines {
        event,
        with,
        from: 0,
        to: u64::MAX,
    }
}

impl Lines {
    /// Only lines with `from <= t_ms <= to`.
    const fn during(self, from: u64, to: u64) -> Lines {
        Lines { from, to, ..self }
    }

    fn matches(&self, line: &Value) -> bool {
        let t = line["t_ms"].as_u64().unwrap_or(u64::MAX);
        line["event"] == self.event
            && (self.from..=self.to).contains(&t)
            && self.with.iter().all(|(path, want)| {
                let got = line.pointer(&format!("/{path}"));
                match (got, want.strip_prefix('~')) {
                    (Some(Value::String(s)), Some(part)) => s.contains(part),
                    (Some(Value::String(s)), None) => s == want,
                    (Some(Value::Number(n)), None) => n
                        .as_f64()
                        .zip(want.parse::<f64>().ok())
                        .is_some_and(|(a, b)| a == b),
                    (Some(Value::Bool(b)), None) => b.to_string() == *want,
                    _ => false,
                }
            })
    }
}

/// One assertion on a run.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The command exits with this status and its stderr contains the text (without this, the
    /// run must exit 0).
    Exit(u8, &'static str),
    /// The number of matching event lines is in `[min, max]`.
    Count(Lines, u64, u64),
    /// A matching line exists and the first one's `t_ms` is in `[min, max]`.
    First(Lines, u64, u64),
    /// The first line matching the second query comes `min..=max` ms after the first line
    /// matching the first.
    Gap(Lines, Lines, u64, u64),
    /// In the snapshot labelled `.0`, the value at JSON pointer `.1` is a number in
    /// `[.2, .3]`.
    Num(&'static str, &'static str, f64, f64),
    /// In the snapshot labelled `.0`, the value at JSON pointer `.1` equals the JSON text `.2`.
    Is(&'static str, &'static str, &'static str),
    /// In the snapshot labelled `.0`, the value at JSON pointer `.1` is the string `.2`.
    Text(&'static str, &'static str, &'static str),
    /// The snapshot labelled `.0` has nothing at JSON pointer `.1`.
    Absent(&'static str, &'static str),
}

use Expect::{Absent, Count, Exit, First, Gap, Is, Num, Text};

/// Exactly `n` matching lines.
const fn count(lines: Lines, n: u64) -> Expect {
    Count(lines, n, n)
}

/// No matching line.
const fn none(lines: Lines) -> Expect {
    Count(lines, 0, 0)
}

/// A number equal to `v` (up to rounding).
const fn num(label: &'static str, pointer: &'static str, v: f64) -> Expect {
    Num(label, pointer, v - 1e-6, v + 1e-6)
}

/// The string `s`.
const fn text(label: &'static str, pointer: &'static str, s: &'static str) -> Expect {
    Text(label, pointer, s)
}

/// One run's output.
struct Run {
    code: u8,
    stdout: String,
    stderr: String,
    lines: Vec<Value>,
}

impl Run {
    fn events<'a>(&'a self, q: &'a Lines) -> impl Iterator<Item = &'a Value> + 'a {
        self.lines.iter().filter(move |l| q.matches(l))
    }

    fn first_t(&self, q: &Lines) -> Result<u64, String> {
        self.events(q)
            .next()
            .and_then(|l| l["t_ms"].as_u64())
            .ok_or_else(|| "no matching event line".to_string())
    }

    fn at(&self, label: &str, pointer: &str) -> Result<Option<&Value>, String> {
        let snapshot = self
            .lines
            .iter()
            .find(|l| l["snapshot"] == label)
            .ok_or_else(|| format!("no snapshot {label:?}"))?;
        Ok(snapshot.pointer(pointer))
    }
}

impl Expect {
    /// `Ok` if the expectation holds, else what was found instead.
    fn holds(&self, run: &Run) -> Result<(), String> {
        let within = |v: u64, min: u64, max: u64, what: &str| {
            if (min..=max).contains(&v) {
                Ok(())
            } else {
                Err(format!("{what} is {v}"))
            }
        };
        match *self {
            Exit(code, needle) => {
                if run.code == code && run.stderr.contains(needle) {
                    Ok(())
                } else {
                    Err(format!("exit {} with stderr {:?}", run.code, run.stderr))
                }
            }
            Count(q, min, max) => within(run.events(&q).count() as u64, min, max, "the count"),
            First(q, min, max) => within(run.first_t(&q)?, min, max, "t_ms of the first"),
            Gap(a, b, min, max) => {
                let (ta, tb) = (run.first_t(&a)?, run.first_t(&b)?);
                let gap = tb
                    .checked_sub(ta)
                    .ok_or_else(|| format!("the second comes first ({tb} < {ta})"))?;
                within(gap, min, max, "the gap")
            }
            Num(label, pointer, min, max) => match run.at(label, pointer)? {
                Some(v) if v.as_f64().is_some_and(|x| x >= min && x <= max) => Ok(()),
                other => Err(format!("found {other:?}")),
            },
            Is(label, pointer, json) => {
                let want: Value = serde_json::from_str(json).expect("expectation is JSON");
                match run.at(label, pointer)? {
                    Some(v) if *v == want => Ok(()),
                    other => Err(format!("found {other:?}")),
                }
            }
            Text(label, pointer, want) => match run.at(label, pointer)? {
                Some(Value::String(s)) if s == want => Ok(()),
                other => Err(format!("found {other:?}")),
            },
            Absent(label, pointer) => match run.at(label, pointer)? {
                None => Ok(()),
                Some(v) => Err(format!("found {v}")),
            },
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `fairsched scenario scenarios/yt/FILE` in process.
fn run(file: &str) -> Run {
    let options = Options {
        file: repo_root().join(DIR).join(file),
        out: None,
        stats: false,
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let code = cli::main(&options, &mut stdout, &mut stderr);
    let stdout = String::from_utf8(stdout).expect("stdout is UTF-8");
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Run {
        code,
        stdout,
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
        lines,
    }
}

/// The one check: runs the file and asserts every expectation, reporting all that fail.
fn check(file: &str, expect: &[Expect]) {
    let run = run(file);
    let mut failures = Vec::new();
    if !expect.iter().any(|e| matches!(e, Exit(..))) && run.code != EXIT_OK {
        failures.push(format!("exit status {}: {}", run.code, run.stderr));
    }
    for e in expect {
        if let Err(found) = e.holds(&run) {
            failures.push(format!("{e:?}\n    -> {found}"));
        }
    }
    if !failures.is_empty() {
        let events: Vec<&str> = run
            .stdout
            .lines()
            .filter(|l| !l.contains("\"snapshot\":"))
            .take(80)
            .collect();
        panic!(
            "{DIR}/{file}: {} expectation(s) failed:\n  {}\n--- event lines (first 80) ---\n{}",
            failures.len(),
            failures.join("\n  "),
            events.join("\n")
        );
    }
}

// ---- the cases --------------------------------------------------------------------------------

/// Declares one `#[test]` per case (attributes such as `#[ignore]` pass through) and the list
/// of files the cases use.
macro_rules! cases {
    ($( $(#[$attr:meta])* $name:ident: $file:literal => [$($e:expr),* $(,)?]; )*) => {
        $(
            $(#[$attr])*
            #[test]
            fn $name() {
                check($file, &[$($e),*]);
            }
        )*
        /// Every file some case runs.
        const CASE_FILES: &[&str] = &[$($file),*];
    };
}

cases! {
    // YT-S1: fake_pool owns the cluster; test_pool takes it back by preemption, and only after
    // its starvation timeout (op2 starts at 2000 ms, timeout 1000 ms).
    yt_s1_guaranteed_pool_reclaims_cluster: "YT-S1_guaranteed_pool_reclaims_cluster.json" => [
        Num("after-op1", "/pools/fake_pool/fair_share_ratio", 0.999, 1.0 + 1e-9),
        Num("after-op1", "/pools/fake_pool/usage_ratio", 0.999, 1.0 + 1e-9),
        Is("after-op1", "/pools/fake_pool/is_ephemeral", "true"),
        text("before-timeout", "/pools/test_pool/scheduling_status", "below_fair_share"),
        text("before-timeout", "/pools/test_pool/starvation_status", "non_starving"),
        text("starving", "/pools/test_pool/starvation_status", "starving"),
        none(ev("allocation_preempted", &[]).during(0, 3000)),
        First(ev("allocation_preempted", &[("operation", "op1")]), 3001, 3300),
        count(ev("allocation_preempted", &[]), 3),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "preemption"), ("preemptor/operation", "op2"),
        ]), 3),
        count(ev("allocation_started", &[("operation", "op2"), ("stage", "preemptive")]), 3),
        Is("after-timeout", "/operations/op2/running_job_count", "3"),
        count(ev("operation_state", &[("operation", "op2"), ("state", "completed")]), 1),
    ];

    // YT-S2, interruptible=True: the preempted job is interrupted and completes; no abort, no
    // rerun.
    yt_s2_interruptible_job_completes: "YT-S2_interruptible_job_preempted.json" => [
        Num("after-op1", "/pools/fake_pool/fair_share_ratio", 0.999, 1.0 + 1e-9),
        Num("after-op1", "/pools/fake_pool/usage_ratio", 0.999, 1.0 + 1e-9),
        none(ev("allocation_interrupted", &[]).during(0, 1100)),
        First(ev("allocation_interrupted", &[("operation", "op1")]), 1101, 1300),
        count(ev("allocation_interrupted", &[
            ("operation", "op1"), ("reason", "preemption"), ("preemptor/operation", "op2"),
        ]), 1),
        Gap(
            ev("allocation_interrupted", &[("operation", "op1")]),
            ev("allocation_finished", &[("operation", "op1"), ("outcome", "completed")]),
            200, 200,
        ),
        none(ev("allocation_preempted", &[])),
        count(ev("allocation_started", &[("operation", "op1")]), 3),
        count(ev("allocation_finished", &[("operation", "op1"), ("outcome", "completed")]), 3),
        count(ev("operation_state", &[("operation", "op1"), ("state", "completed")]), 1),
        count(ev("operation_state", &[("operation", "op2"), ("state", "completed")]), 1),
    ];

    // YT-S2, interruptible=False: the preempted job is aborted at once and rerun.
    yt_s2_not_interruptible_job_aborted: "YT-S2_not_interruptible_job_preempted.json" => [
        Num("after-op1", "/pools/fake_pool/fair_share_ratio", 0.999, 1.0 + 1e-9),
        Num("after-op1", "/pools/fake_pool/usage_ratio", 0.999, 1.0 + 1e-9),
        none(ev("allocation_interrupted", &[])),
        none(ev("allocation_preempted", &[]).during(0, 1100)),
        First(ev("allocation_preempted", &[("operation", "op1")]), 1101, 1300),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "preemption"), ("preemptor/operation", "op2"),
        ]), 1),
        count(ev("allocation_started", &[("operation", "op1")]), 4),
        count(ev("allocation_finished", &[("operation", "op1"), ("outcome", "completed")]), 3),
        count(ev("operation_state", &[("operation", "op1"), ("state", "completed")]), 1),
        count(ev("operation_state", &[("operation", "op2"), ("state", "completed")]), 1),
    ];

    // YT-S2 variant: the operation sends SIGINT but its jobs ignore it: aborted at the
    // interruption deadline (1000 ms), not earlier, and rerun.
    yt_s2_ignored_interrupt_aborted_at_deadline: "YT-S2_interrupt_ignored_job_preempted.json" => [
        count(ev("allocation_interrupted", &[
            ("operation", "op1"), ("reason", "preemption"), ("timeout_ms", "1000"),
            ("preemptor/operation", "op2"),
        ]), 1),
        Gap(
            ev("allocation_interrupted", &[("operation", "op1")]),
            ev("allocation_preempted", &[("operation", "op1"), ("reason", "preemption")]),
            1000, 1000,
        ),
        count(ev("allocation_preempted", &[]), 1),
        count(ev("allocation_started", &[("operation", "op1")]), 4),
        count(ev("allocation_finished", &[("operation", "op1"), ("outcome", "completed")]), 3),
        count(ev("operation_state", &[("operation", "op1"), ("state", "completed")]), 1),
    ];

    // The abort at the deadline should still name who the allocation was preempted for.
    yt_s2_deadline_abort_names_preemptor: "YT-S2_interrupt_ignored_job_preempted.json" => [
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "preemption"), ("preemptor/operation", "op2"),
        ]), 1),
    ];

    // YT-S4: graceful operation shrunk to 0 slots: interrupted with the graceful timeout and
    // aborted exactly 10 s later, not earlier; total 1 job, 1 aborted, none completed.
    yt_s4_graceful_preemption_timeout: "YT-S4_graceful_preemption_timeout.json" => [
        Is("running", "/operations/op/running_job_count", "1"),
        count(ev("allocation_interrupted", &[
            ("operation", "op"), ("reason", "graceful_preemption"), ("timeout_ms", "10000"),
        ]), 1),
        First(ev("allocation_interrupted", &[("operation", "op")]), 1000, 1100),
        none(ev("allocation_preempted", &[]).during(0, 10999)),
        Gap(
            ev("allocation_interrupted", &[("operation", "op")]),
            ev("allocation_preempted", &[("operation", "op"), ("reason", "graceful_preemption")]),
            10000, 10000,
        ),
        count(ev("allocation_preempted", &[]), 1),
        none(ev("allocation_finished", &[])),
        count(ev("allocation_started", &[("operation", "op")]), 1),
        Is("after-timeout", "/operations/op/running_job_count", "0"),
        Is("after-timeout", "/operations/op/completed_job_count", "0"),
        text("after-timeout", "/operations/op/state", "running"),
    ];

    // YT-S5: tolerances inherited down the tree, seen through scheduling and starvation
    // statuses at usage / fair share = 0.7 (demand above fair share: no raise to 1.0).
    yt_s5_starvation_tolerance_inherited: "YT-S5_starvation_tolerance_inherited.json" => [
        Is("limited", "/operations/op1/running_job_count", "5"),
        Is("limited", "/operations/op4/running_job_count", "5"),
        Is("limited", "/operations/op2/running_job_count", "10"),
        Is("limited", "/operations/filler/running_job_count", "10"),
        num("below", "/operations/op1/fair_share_ratio", 5.0 / 21.0),
        num("below", "/operations/op1/usage_ratio", 5.0 / 30.0),
        num("below", "/operations/op1/demand_ratio", 10.0 / 30.0),
        num("below", "/operations/op2/fair_share_ratio", 10.0 / 21.0),
        num("below", "/operations/op2/demand_ratio", 20.0 / 30.0),
        // 0.6 (p1, inherited by p2 and op1): normal.
        text("below", "/pools/p1/scheduling_status", "normal"),
        text("below", "/pools/p2/scheduling_status", "normal"),
        text("below", "/operations/op1/scheduling_status", "normal"),
        // 0.9 (p4 overrides p1): below.
        text("below", "/pools/p4/scheduling_status", "below_fair_share"),
        text("below", "/operations/op4/scheduling_status", "below_fair_share"),
        // 0.8 (p5, inherited by p6 and op2): below.
        text("below", "/pools/p5/scheduling_status", "below_fair_share"),
        text("below", "/pools/p6/scheduling_status", "below_fair_share"),
        text("below", "/operations/op2/scheduling_status", "below_fair_share"),
        text("below", "/operations/op2/starvation_status", "non_starving"),
        // After the 1000 ms timeout: the below ones starve, the others do not.
        text("starving", "/operations/op2/starvation_status", "starving"),
        text("starving", "/operations/op4/starvation_status", "starving"),
        text("starving", "/pools/p5/starvation_status", "starving"),
        text("starving", "/pools/p1/starvation_status", "non_starving"),
        text("starving", "/operations/op1/starvation_status", "non_starving"),
        none(ev("allocation_preempted", &[])),
        none(ev("allocation_started", &[]).during(1, u64::MAX)),
    ];

    // YT-S5 as YTsaurus checks it: the orchid's effective tolerance of pools and operations.
    yt_s5_effective_tolerance_in_snapshot: "YT-S5_starvation_tolerance_inherited.json" => [
        num("limited", "/pools/p1/effective_fair_share_starvation_tolerance", 0.6),
        num("limited", "/pools/p2/effective_fair_share_starvation_tolerance", 0.6),
        num("limited", "/pools/p3/effective_fair_share_starvation_tolerance", 0.5),
        num("limited", "/pools/p4/effective_fair_share_starvation_tolerance", 0.9),
        num("limited", "/pools/p5/effective_fair_share_starvation_tolerance", 0.8),
        num("limited", "/pools/p6/effective_fair_share_starvation_tolerance", 0.8),
        num("limited", "/operations/op1/effective_fair_share_starvation_tolerance", 0.6),
        num("limited", "/operations/op2/effective_fair_share_starvation_tolerance", 0.8),
    ];

    // YT-S10 (spec §2.4: "sibling in a starving pool takes resources from its over-served
    // sibling while an unrelated guaranteed pool is untouched"): starving_op takes one of
    // donor_op's allocations, conditionally preemptible for operations inside the starving
    // guaranteed_pool; blocking_pool keeps its 1.5 cpu.
    yt_s10_conditional_preemption: "YT-S10_conditional_preemption.json" => [
        text("donor-starving", "/operations/donor_op/starvation_status", "starving"),
        text("donor-starving", "/pools/guaranteed_pool/starvation_status", "starving"),
        num("donor-starving", "/operations/donor_op/resource_usage/cpu", 1.5),
        none(ev("allocation_preempted", &[]).during(0, 3099)),
        count(ev("allocation_preempted", &[
            ("operation", "donor_op"), ("reason", "preemption"),
            ("preemptor/operation", "starving_op"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
        none(ev("allocation_preempted", &[("operation", "~blocking_op")])),
        num("after", "/operations/starving_op/resource_usage/cpu", 0.5),
        num("after", "/operations/donor_op/resource_usage/cpu", 1.0),
        num("after", "/pools/blocking_pool/resource_usage/cpu", 1.5),
        text("after", "/operations/donor_op/starvation_status", "non_starving"),
    ];

    // YT-S10 with enable_conditional_preemption off: the starving guaranteed_pool, found by the
    // blocking checks above donor_op, protects it from everyone, so nothing is preempted (the
    // upstream test asserts the statuses for 3 s before it turns the option on).
    yt_s10_conditional_preemption_off: "YT-S10_conditional_preemption_off.json" => [
        none(ev("allocation_preempted", &[])),
        num("after", "/operations/starving_op/resource_usage/cpu", 0.0),
        num("after", "/operations/donor_op/resource_usage/cpu", 1.5),
        num("after", "/pools/blocking_pool/resource_usage/cpu", 1.5),
        text("after", "/operations/donor_op/starvation_status", "non_starving"),
        text("after", "/operations/starving_op/starvation_status", "starving"),
        text("after", "/pools/guaranteed_pool/starvation_status", "starving"),
    ];

    // YT-S14: (preemptible, aggressively preemptible) allocation counts per setting of
    // max_unpreemptible_running_allocation_count / non_preemptible_resource_usage_threshold.
    yt_s14_max_unpreemptible_allocation_count: "YT-S14_max_unpreemptible_allocation_count.json" => [
        Is("step1", "/operations/op/running_job_count", "10"),
        num("step1", "/operations/op/fair_share_ratio", 1.0),
        num("step1", "/operations/op/demand_ratio", 1.5),
        Is("step1", "/operations/op/preemptible_allocation_count", "1"),
        Is("step1", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step2", "/operations/op/preemptible_allocation_count", "1"),
        Is("step2", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step3", "/operations/op/preemptible_allocation_count", "1"),
        Is("step3", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step4", "/operations/op/preemptible_allocation_count", "1"),
        Is("step4", "/operations/op/aggressively_preemptible_allocation_count", "2"),
        Is("step5", "/operations/op/preemptible_allocation_count", "0"),
        Is("step5", "/operations/op/aggressively_preemptible_allocation_count", "0"),
        Is("step6", "/operations/op/preemptible_allocation_count", "1"),
        Is("step6", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step7", "/operations/op/preemptible_allocation_count", "1"),
        Is("step7", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        none(ev("error", &[])),
    ];

    // YT-S14 step 8: a null threshold is rejected (here when the file is loaded).
    yt_s14_null_threshold_rejected: "YT-S14_null_threshold_rejected.json" => [
        Exit(
            EXIT_BAD_FILE,
            "events[1].set_tree.config.non_preemptible_resource_usage_threshold: \
             invalid type: null",
        ),
    ];

    // YT-S17: the graceful operation gets its second allocation as soon as the placeholder
    // ends (fair share = demand: tolerance 1.0), and not before.
    yt_s17_graceful_operation_keeps_scheduling:
        "YT-S17_graceful_operation_keeps_scheduling.json" => [
        Is("one-running", "/operations/op/running_job_count", "1"),
        num("one-running", "/operations/op/fair_share_ratio", 0.5),
        count(ev("allocation_started", &[("operation", "op")]).during(0, 3000), 1),
        Gap(
            ev("allocation_finished", &[("operation", "placeholder")]),
            ev("allocation_started", &[("operation", "op")]).during(501, u64::MAX),
            1, 200,
        ),
        Is("after-placeholder", "/operations/op/running_job_count", "2"),
        count(ev("operation_state", &[("operation", "op"), ("state", "completed")]), 1),
        none(ev("allocation_interrupted", &[])),
        none(ev("allocation_preempted", &[])),
    ];

    // YT-S19: both jobs run on node-1 while node-0 is disabled; disabling node-1 aborts them
    // at once and they restart on node-0.
    yt_s19_disabled_node_aborts_allocations: "YT-S19_disabled_node_aborts_allocations.json" => [
        count(ev("allocation_started", &[]).during(0, 999), 2),
        count(ev("allocation_started", &[("node", "node-1")]).during(0, 999), 2),
        num("on-node-1", "/total_resources/user_slots", 2.0),
        Is("on-node-1", "/operations/op1/running_job_count", "1"),
        Is("on-node-1", "/operations/op2/running_job_count", "1"),
        none(ev("allocation_preempted", &[]).during(0, 999)),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("node", "node-1"), ("reason", "node_disabled"),
        ]).during(1000, 1000), 1),
        count(ev("allocation_preempted", &[
            ("operation", "op2"), ("node", "node-1"), ("reason", "node_disabled"),
        ]).during(1000, 1000), 1),
        count(ev("allocation_preempted", &[]), 2),
        count(ev("allocation_started", &[
            ("operation", "op1"), ("node", "node-0"),
        ]).during(1000, 1100), 1),
        count(ev("allocation_started", &[
            ("operation", "op2"), ("node", "node-0"),
        ]).during(1000, 1100), 1),
        count(ev("allocation_started", &[]).during(1000, u64::MAX), 2),
        Is("moved", "/operations/op1/running_job_count", "1"),
        Is("moved", "/operations/op2/running_job_count", "1"),
    ];

    // YT-S21 (spec §1.1: "if resource_limits.user_slots == 0 and
    // enable_allocation_abort_on_zero_user_slots (true) → all allocations on the node are
    // aborted"): node-0's two allocations are aborted at its first heartbeat without slots.
    yt_s21_zero_user_slots_aborts_allocations: "YT-S21_zero_user_slots_aborts_allocations.json" => [
        Is("before", "/operations/op1/running_job_count", "4"),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("node", "node-0"), ("reason", "node_without_user_slots"),
        ]), 2),
        count(ev("allocation_preempted", &[]), 2),
        First(ev("allocation_preempted", &[]), 1000, 1000),
        Is("zero-slots", "/operations/op1/running_job_count", "2"),
        none(ev("allocation_started", &[]).during(1, 1999)),
        count(ev("allocation_started", &[("node", "node-0")]).during(2000, 2000), 2),
        Is("restored", "/operations/op1/running_job_count", "4"),
    ];

    // YT-S21 control: the option off, the allocations stay; the node overcommit rule takes
    // them after its 2000 ms.
    yt_s21_zero_user_slots_abort_disabled: "YT-S21_zero_user_slots_abort_disabled.json" => [
        none(ev("allocation_preempted", &[("reason", "node_without_user_slots")])),
        Is("zero-slots", "/operations/op1/running_job_count", "4"),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("node", "node-0"), ("reason", "resource_overcommit"),
        ]), 2),
        First(ev("allocation_preempted", &[]), 3000, 3000),
        Is("overcommit", "/operations/op1/running_job_count", "2"),
    ];

    // YT-S23 (operation): fair share = demand: tolerance 1.0, so 8/9 starves and stays
    // starving for 3 s; the pool keeps 0.8; regular_op's straddling allocation is safe.
    yt_s23_tolerance_raised_for_operation: "YT-S23_tolerance_raised_for_operation.json" => [
        num("after-3s", "/operations/regular_op/resource_usage/cpu", 2.0),
        num("after-3s", "/operations/starving_op/resource_usage/cpu", 8.0),
        num("after-3s", "/operations/starving_op/fair_share_ratio", 0.9),
        num("after-3s", "/operations/starving_op/demand_ratio", 0.9),
        text("after-1s", "/operations/starving_op/starvation_status", "starving"),
        text("after-3s", "/operations/starving_op/starvation_status", "starving"),
        text("after-3s", "/operations/starving_op/scheduling_status", "below_fair_share"),
        text("after-3s", "/pools/starving_pool/starvation_status", "non_starving"),
        text("after-3s", "/pools/starving_pool/scheduling_status", "normal"),
        Is("after-3s", "/operations/regular_op/preemptible_allocation_count", "0"),
        none(ev("allocation_preempted", &[])),
    ];

    // YT-S23 (pool): the raise is for operations only: the pool at 0.9 is not starving.
    yt_s23_tolerance_not_raised_for_pool: "YT-S23_tolerance_not_raised_for_pool.json" => [
        num("after-3s", "/operations/regular_op/resource_usage/cpu", 9.0),
        num("after-3s", "/operations/starving_op/resource_usage/cpu", 0.0),
        num("after-3s", "/pools/pool/fair_share_ratio", 1.0),
        num("after-3s", "/pools/pool/usage_ratio", 0.9),
        text("after-1s", "/operations/starving_op/starvation_status", "starving"),
        text("after-3s", "/operations/starving_op/starvation_status", "starving"),
        text("after-1s", "/pools/pool/starvation_status", "non_starving"),
        text("after-3s", "/pools/pool/starvation_status", "non_starving"),
        text("after-3s", "/pools/pool/scheduling_status", "normal"),
        none(ev("allocation_preempted", &[])),
    ];

    // YT-S25: protected's regular jobs stay off the SSD nodes (allow_regular_jobs_on_ssd_nodes
    // false); regular_op takes them; protected's SSD job (medium ssd_slots) runs on one.
    yt_s25_regular_jobs_off_ssd_nodes: "YT-S25_regular_jobs_off_ssd_nodes.json" => [
        count(ev("allocation_started", &[("operation", "protected_op")]), 4),
        none(ev("allocation_started", &[("operation", "protected_op"), ("node", "node-0")])),
        none(ev("allocation_started", &[("operation", "protected_op"), ("node", "node-1")])),
        count(ev("allocation_started", &[("operation", "regular_op")]), 4),
        none(ev("allocation_started", &[("operation", "regular_op"), ("node", "node-2")])),
        none(ev("allocation_started", &[("operation", "regular_op"), ("node", "node-3")])),
        num("ssd", "/operations/ssd_op/resource_usage/cpu", 1.0),
        none(ev("allocation_started", &[("operation", "ssd_op"), ("node", "node-2")])),
        none(ev("allocation_started", &[("operation", "ssd_op"), ("node", "node-3")])),
    ];

    // YT-S25 (SSD priority preemption, spec §1.3): disabled, the starving SSD operation gets
    // nothing (no preemptible allocation on the SSD nodes; SSD jobs fit nowhere else); enabled
    // at 3000 ms, the ssd_preemptive stage takes blocking_op's non-preemptible and aggressively
    // preemptible allocations on the SSD nodes, one start per node heartbeat.
    yt_s25_ssd_priority_preemption: "YT-S25_ssd_priority_preemption.json" => [
        Is("blocking", "/operations/blocking_op/running_job_count", "8"),
        text("disabled", "/operations/ssd_op/starvation_status", "starving"),
        Is("disabled", "/operations/ssd_op/running_job_count", "0"),
        none(ev("allocation_preempted", &[]).during(0, 2999)),
        none(ev("allocation_interrupted", &[])),
        count(ev("allocation_preempted", &[
            ("operation", "blocking_op"), ("reason", "ssd_preemption"),
            ("preemptor/operation", "ssd_op"),
        ]), 4),
        count(ev("allocation_preempted", &[]), 4),
        none(ev("allocation_preempted", &[("node", "node-2")])),
        none(ev("allocation_preempted", &[("node", "node-3")])),
        First(ev("allocation_preempted", &[]), 3000, 3100),
        count(ev("allocation_started", &[("operation", "ssd_op"), ("stage", "ssd_preemptive")]), 4),
        // One preemptive start per node heartbeat: two heartbeats per SSD node.
        count(ev("allocation_started", &[("operation", "ssd_op"), ("node", "node-0")])
            .during(3000, 3000), 1),
        num("enabled", "/operations/ssd_op/resource_usage/cpu", 4.0),
        num("enabled", "/operations/blocking_op/resource_usage/cpu", 4.0),
    ];

    // YT-S25 (levels): blocking_op's SSD allocations are ssd_non_preemptible and
    // ssd_aggressively_preemptible, below what the aggressive stage may take; once the feature
    // is off they are plain levels again and the aggressive stage takes one.
    yt_s25_ssd_jobs_protected_from_aggressive_preemption:
        "YT-S25_ssd_jobs_protected_from_aggressive_preemption.json" => [
        num("blocking", "/operations/blocking_op/resource_usage/cpu", 4.0),
        text("protected", "/operations/op/starvation_status", "aggressively_starving"),
        Is("protected", "/operations/op/running_job_count", "0"),
        none(ev("allocation_preempted", &[]).during(0, 3499)),
        count(ev("allocation_preempted", &[
            ("operation", "blocking_op"), ("reason", "aggressive_preemption"),
            ("preemptor/operation", "op"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
        First(ev("allocation_started", &[("operation", "op"), ("stage", "aggressive")]), 3500, 3600),
        num("disabled", "/operations/op/resource_usage/cpu", 1.0),
    ];

    // YT-S25 (ssd_aggressive stage): an aggressively starving SSD operation takes an
    // aggressively preemptible SSD allocation; while only starving (ssd_normal) it cannot.
    yt_s25_ssd_aggressive_preemption_of_ssd_jobs:
        "YT-S25_ssd_aggressive_preemption_of_ssd_jobs.json" => [
        count(ev("allocation_preempted", &[
            ("operation", "blocking_op"), ("reason", "ssd_aggressive_preemption"),
            ("preemptor/operation", "op"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
        // Starving from about 600 ms, aggressively starving from about 700 ms.
        First(ev("allocation_preempted", &[]), 700, 900),
        count(ev("allocation_started", &[("operation", "op"), ("stage", "ssd_aggressive")]), 1),
        num("after", "/operations/op/resource_usage/cpu", 1.0),
        num("after", "/operations/blocking_op/resource_usage/cpu", 3.0),
    ];

    // YT-S25 (plainly preemptible SSD allocations): the normal stage preempts them; blocking_op
    // keeps its 2 cpu fair share.
    yt_s25_regular_preemption_of_ssd_jobs: "YT-S25_regular_preemption_of_ssd_jobs.json" => [
        count(ev("allocation_preempted", &[
            ("operation", "blocking_op"), ("reason", "preemption"),
            ("preemptor/operation", "second_op"),
        ]), 2),
        count(ev("allocation_preempted", &[]), 2),
        num("after", "/operations/blocking_op/resource_usage/cpu", 2.0),
        num("after", "/operations/second_op/resource_usage/cpu", 6.0),
    ];

    // YT-S25 (spec §2.4: "SSD stages ignore the blocking ancestor for non-SSD victims"):
    // blocking_op is starving and unsatisfied, yet the ssd_preemptive stage takes one of its
    // jobs on an SSD node.
    yt_s25_ssd_ignores_blocking_ancestor: "YT-S25_ssd_ignores_blocking_ancestor.json" => [
        num("blocking", "/operations/blocking_op/resource_usage/cpu", 6.0),
        Num("blocking", "/operations/blocking_op/satisfaction_ratio", 0.79, 0.81),
        count(ev("allocation_preempted", &[
            ("operation", "blocking_op"), ("reason", "ssd_preemption"),
            ("preemptor/operation", "ssd_op"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
        num("after", "/operations/ssd_op/resource_usage/cpu", 1.0),
        num("after", "/operations/blocking_op/resource_usage/cpu", 4.5),
    ];

    // YT-S31: lightweight operations run beyond the root's running limit; the 6th operation is
    // rejected with 202; the counts.
    yt_s31_lightweight_operations: "YT-S31_lightweight_operations.json" => [
        text("four-running", "/operations/light1/state", "running"),
        text("four-running", "/operations/light2/state", "running"),
        text("four-running", "/operations/light3/state", "running"),
        text("four-running", "/operations/light4/state", "running"),
        Is("four-running", "/operations/light4/lightweight", "true"),
        Is("four-running", "/operations/light1/lightweight", "true"),
        Is("four-running", "/operations/blocking_op/lightweight", "false"),
        count(ev("error", &[("code", "202"), ("message", "~\"<Root>\"")]).during(500, 500), 1),
        count(ev("error", &[]), 1),
        Absent("after-rejection", "/operations/light5"),
        Is("after-rejection", "/pools/pool/operation_count", "1"),
        Is("after-rejection", "/pools/pool/running_operation_count", "1"),
        Is("after-rejection", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("after-rejection", "/pools/lightweight_pool/operation_count", "4"),
        Is("after-rejection", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("after-rejection", "/pools/lightweight_pool/lightweight_running_operation_count", "4"),
        Is("after-rejection", "/pools/<Root>/operation_count", "5"),
        Is("after-rejection", "/pools/<Root>/running_operation_count", "1"),
        Is("after-rejection", "/pools/<Root>/lightweight_running_operation_count", "4"),
    ];

    // YT-S31 (eligibility): map operations count normally; a vanilla one is lightweight.
    yt_s31_lightweight_eligibility: "YT-S31_lightweight_eligibility.json" => [
        text("maps", "/operations/map1/state", "running"),
        text("maps", "/operations/map2/state", "pending"),
        Is("maps", "/operations/map1/lightweight", "false"),
        Is("maps", "/pools/pool/operation_count", "1"),
        Is("maps", "/pools/pool/running_operation_count", "1"),
        Is("maps", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("maps", "/pools/lightweight_pool/operation_count", "2"),
        Is("maps", "/pools/lightweight_pool/running_operation_count", "1"),
        Is("maps", "/pools/lightweight_pool/lightweight_running_operation_count", "0"),
        text("vanilla", "/operations/vanilla/state", "running"),
        Is("vanilla", "/operations/vanilla/lightweight", "true"),
        text("vanilla", "/operations/map2/state", "pending"),
        Is("vanilla", "/pools/lightweight_pool/operation_count", "3"),
        Is("vanilla", "/pools/lightweight_pool/running_operation_count", "1"),
        Is("vanilla", "/pools/lightweight_pool/lightweight_running_operation_count", "1"),
    ];

    // YT-S32 (default parent): ephemeral pools go under default_pool and are flagged.
    yt_s32_default_parent_pool: "YT-S32_default_parent_pool.json" => [
        text("ephemeral", "/operations/op1/pool", "root"),
        text("ephemeral", "/operations/op2/pool", "my_pool"),
        text("ephemeral", "/pools/root/parent", "default_pool"),
        text("ephemeral", "/pools/my_pool/parent", "default_pool"),
        Is("ephemeral", "/pools/root/is_ephemeral", "true"),
        Is("ephemeral", "/pools/my_pool/is_ephemeral", "true"),
        Is("ephemeral", "/pools/default_pool/is_ephemeral", "false"),
        Is("ephemeral", "/pools/<Root>/is_ephemeral", "false"),
        none(ev("error", &[])),
    ];

    // YT-S32 (limit): the 4th ephemeral pool of a user is refused.
    yt_s32_ephemeral_pools_limit: "YT-S32_ephemeral_pools_limit.json" => [
        count(ev("error", &[
            ("message", "~events[3].start_operation: cannot create new ephemeral pool \"pool4\""),
        ]).during(200, 200), 1),
        count(ev("error", &[("message", "~the limit of 3 ephemeral pools per user")]), 1),
        count(ev("error", &[]), 1),
        text("limit", "/pools/pool1/parent", "default_pool"),
        text("limit", "/pools/pool2/parent", "default_pool"),
        text("limit", "/pools/pool3/parent", "default_pool"),
        Is("limit", "/pools/pool3/is_ephemeral", "true"),
        Absent("limit", "/pools/pool4"),
        Absent("limit", "/operations/op4"),
        text("limit", "/operations/op3/state", "running"),
    ];

    // YT-S32 (explicit): configuring an ephemeral pool makes it explicit, under the root.
    yt_s32_ephemeral_becomes_explicit: "YT-S32_ephemeral_becomes_explicit.json" => [
        text("ephemeral", "/pools/test_pool/parent", "default_pool"),
        Is("ephemeral", "/pools/test_pool/is_ephemeral", "true"),
        text("explicit", "/pools/test_pool/parent", "<Root>"),
        Is("explicit", "/pools/test_pool/is_ephemeral", "false"),
        text("explicit", "/operations/op/pool", "test_pool"),
        text("explicit", "/operations/op/state", "running"),
        none(ev("error", &[])),
    ];

    // YT-S32 (no default parent): the pool is named after the user, under the root.
    yt_s32_no_default_parent: "YT-S32_no_default_parent.json" => [
        text("ephemeral", "/operations/op/pool", "u"),
        text("ephemeral", "/pools/u/parent", "<Root>"),
        Is("ephemeral", "/pools/u/is_ephemeral", "true"),
    ];

    // YT-S34 (no successful scheduling): failed as hung after the safe timeout, not before.
    yt_s34_hung_no_successful_scheduling: "YT-S34_hung_no_successful_scheduling.json" => [
        text("waiting", "/operations/op/state", "running"),
        text("waiting", "/operations/op/starvation_status", "starving"),
        count(ev("operation_state", &[
            ("operation", "op"), ("state", "failed"), ("reason", "~scheduling hung"),
        ]), 1),
        count(ev("operation_state", &[
            ("operation", "op"), ("reason", "~no successful scheduled allocations"),
        ]), 1),
        First(ev("operation_state", &[("operation", "op"), ("state", "failed")]), 5500, 7000),
        count(ev("operation_state", &[("state", "failed")]), 1),
        none(ev("allocation_preempted", &[])),
        none(ev("allocation_started", &[("operation", "op")])),
    ];

    // YT-S34 (limiting ancestor): failed after 5 s naming the limiting pool.
    yt_s34_hung_limiting_ancestor: "YT-S34_hung_limiting_ancestor.json" => [
        text("before-timeout", "/operations/op/state", "running"),
        count(ev("operation_state", &[
            ("operation", "op"), ("state", "failed"), ("reason", "~scheduling hung"),
        ]), 1),
        count(ev("operation_state", &[("operation", "op"), ("reason", "~limiting_ancestor")]), 1),
        count(ev("operation_state", &[("operation", "op"), ("reason", "~limiting_pool")]), 1),
        First(ev("operation_state", &[("operation", "op"), ("state", "failed")]), 5000, 5200),
        none(ev("allocation_started", &[])),
    ];

    // The failure reason prints the pool's limits with its unset components as sentinel
    // numbers instead of only what is specified ({cpu: 1}).
    yt_s34_limiting_ancestor_reason_shows_specified_limits:
        "YT-S34_hung_limiting_ancestor.json" => [
        count(ev("operation_state", &[
            ("operation", "op"), ("reason", "~resource limits {cpu: 1} are too small"),
        ]), 1),
        none(ev("operation_state", &[("reason", "~2305843009213693951")])),
    ];

    // YT-S34 (check disabled): not failed during 10 s; completes once the limit is removed.
    yt_s34_limiting_ancestor_check_disabled: "YT-S34_limiting_ancestor_check_disabled.json" => [
        text("after-10s", "/operations/op/state", "running"),
        Is("after-10s", "/operations/op/running_job_count", "0"),
        none(ev("operation_state", &[("state", "failed")])),
        none(ev("allocation_started", &[]).during(0, 9999)),
        count(ev("allocation_started", &[("operation", "op")]), 10),
        count(ev("operation_state", &[("operation", "op"), ("state", "completed")]), 1),
    ];

    // YT-S34 (node shortage): no nodes for 10 s: not failed; completes when the node returns.
    yt_s34_node_shortage: "YT-S34_node_shortage.json" => [
        num("no-nodes", "/total_resources/cpu", 0.0),
        text("no-nodes", "/operations/op/state", "running"),
        none(ev("operation_state", &[("state", "failed")])),
        none(ev("allocation_started", &[]).during(0, 10099)),
        count(ev("operation_state", &[("operation", "op"), ("state", "completed")]), 1),
    ];

    // YT-S36 (explicit): effective guarantees and the operations' fair shares.
    yt_s36_explicit_guarantees: "YT-S36_explicit_guarantees.json" => [
        num("pools", "/pools/pool/effective_strong_guarantee_resources/cpu", 30.0),
        num("pools", "/pools/pool/effective_strong_guarantee_resources/user_slots", 30.0),
        num("pools", "/pools/pool/effective_strong_guarantee_resources/network", 300.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/cpu", 10.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/user_slots", 20.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/network", 100.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/cpu", 20.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/user_slots", 10.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/network", 200.0),
        num("ops", "/operations/op_sub1/detailed_fair_share/total/cpu", 1.0 / 3.0),
        num("ops", "/operations/op_sub1/detailed_fair_share/total/user_slots", 2.0 / 3.0),
        num("ops", "/operations/op_sub2/detailed_fair_share/total/cpu", 2.0 / 3.0),
        num("ops", "/operations/op_sub2/detailed_fair_share/total/user_slots", 1.0 / 3.0),
    ];

    // YT-S36 (partially explicit, no scaling).
    yt_s36_partial_guarantees_no_scaling: "YT-S36_partial_guarantees_no_scaling.json" => [
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/cpu", 10.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/user_slots", 15.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/network", 100.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/cpu", 5.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/user_slots", 5.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/network", 50.0),
        num("pools", "/pools/subpool3/effective_strong_guarantee_resources/cpu", 10.0),
        num("pools", "/pools/subpool3/effective_strong_guarantee_resources/user_slots", 10.0),
        num("pools", "/pools/subpool3/effective_strong_guarantee_resources/network", 100.0),
    ];

    // YT-S36 (partially explicit, with scaling): the YT-observed 1 and 3 slots.
    yt_s36_partial_guarantees_scaling: "YT-S36_partial_guarantees_scaling.json" => [
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/cpu", 10.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/user_slots", 25.0),
        num("pools", "/pools/subpool1/effective_strong_guarantee_resources/network", 100.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/cpu", 5.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/user_slots", 1.0),
        num("pools", "/pools/subpool2/effective_strong_guarantee_resources/network", 50.0),
        num("pools", "/pools/subpool3/effective_strong_guarantee_resources/cpu", 10.0),
        num("pools", "/pools/subpool3/effective_strong_guarantee_resources/user_slots", 3.0),
        num("pools", "/pools/subpool3/effective_strong_guarantee_resources/network", 100.0),
    ];

    // YT-S36 (overcommit): shares pool1 {3/8, 1/2, 3/8}, pool2 {1/2, 1/2, 1/2} of {30, 30,
    // 300} (network is an integer amount: 112.5 may round either way).
    yt_s36_guarantee_overcommit_shares: "YT-S36_guarantee_overcommit.json" => [
        num("pools", "/pools/pool1/effective_strong_guarantee_resources/cpu", 30.0 * 3.0 / 8.0),
        num("pools", "/pools/pool1/effective_strong_guarantee_resources/user_slots", 15.0),
        Num("pools", "/pools/pool1/effective_strong_guarantee_resources/network", 112.0, 113.0),
        num("pools", "/pools/pool2/effective_strong_guarantee_resources/cpu", 15.0),
        num("pools", "/pools/pool2/effective_strong_guarantee_resources/user_slots", 15.0),
        num("pools", "/pools/pool2/effective_strong_guarantee_resources/network", 150.0),
    ];

    yt_s36_guarantee_overcommit_alert: "YT-S36_guarantee_overcommit.json" => [
        count(ev("error", &[("code", "29000")]), 1),
    ];

    // YT-S36 (single pool larger than the cluster): share 1 on every resource.
    yt_s36_single_pool_over_cluster_shares: "YT-S36_single_pool_over_cluster.json" => [
        num("pools", "/pools/pool/effective_strong_guarantee_resources/cpu", 30.0),
        num("pools", "/pools/pool/effective_strong_guarantee_resources/user_slots", 30.0),
        num("pools", "/pools/pool/effective_strong_guarantee_resources/network", 300.0),
    ];

    yt_s36_single_pool_over_cluster_alert: "YT-S36_single_pool_over_cluster.json" => [
        count(ev("error", &[("code", "29000")]), 1),
    ];

    // YT-S36 (zero cluster): everything 0.
    yt_s36_zero_cluster_shares: "YT-S36_zero_cluster.json" => [
        num("pools", "/total_resources/cpu", 0.0),
        num("pools", "/pools/pool1/effective_strong_guarantee_resources/cpu", 0.0),
        num("pools", "/pools/pool2/effective_strong_guarantee_resources/cpu", 0.0),
        num("pools", "/pools/pool1/detailed_fair_share/strong_guarantee/cpu", 0.0),
        num("pools", "/pools/pool1/fair_share_ratio", 0.0),
    ];

    yt_s36_zero_cluster_alert: "YT-S36_zero_cluster.json" => [
        count(ev("error", &[("code", "29000")]), 1),
    ];

    // YT-S37: weights inferred from guarantees (multiplier 10).
    yt_s37_weights_from_strong_guarantees: "YT-S37_weights_from_strong_guarantees.json" => [
        num("weights", "/pools/test_pool1/weight", 30.0 / 7.0),
        num("weights", "/pools/test_pool2/weight", 40.0 / 7.0),
        num("weights", "/pools/test_pool3/weight", 1.0),
        num("weights", "/pools/subpool1/weight", 3.0),
        num("weights", "/pools/subpool2/weight", 4.0),
    ];

    yt_s37_weights_from_resource_flow: "YT-S37_weights_from_resource_flow.json" => [
        num("weights", "/pools/test_pool1/weight", 30.0 / 7.0),
        num("weights", "/pools/test_pool2/weight", 40.0 / 7.0),
        num("weights", "/pools/test_pool3/weight", 1.0),
        num("weights", "/pools/subpool1/weight", 4.0),
        num("weights", "/pools/subpool2/weight", 6.0),
    ];

    yt_s37_weights_from_both_guarantees: "YT-S37_weights_from_both_guarantees.json" => [
        num("weights", "/pools/test_pool1/weight", 4.0),
        num("weights", "/pools/test_pool2/weight", 6.0),
        num("weights", "/pools/test_pool3/weight", 1.0),
    ];

    // YT-S9 (spec §2.6: "if the preempted job keeps resources longer, the *new* job is
    // aborted"): waiting timeout 1000 ms < interruption window 3000 ms: op2's preemptor is
    // aborted with reason waiting_timeout 1000 ms after it started; the victim keeps its
    // interruption until its deadline.
    yt_s9_waiting_timeout_aborts_new_job: "YT-S9_waiting_job_timeout_aborts_new_job.json" => [
        Is("waiting", "/operations/op2/running_job_count", "1"),
        count(ev("allocation_started", &[("operation", "op2"), ("stage", "preemptive")]), 1),
        First(ev("allocation_started", &[("operation", "op2")]), 1200, 1200),
        count(ev("allocation_preempted", &[("reason", "waiting_timeout")]), 1),
        count(ev("allocation_preempted", &[
            ("operation", "op2"), ("allocation", "4"), ("reason", "waiting_timeout"),
        ]), 1),
        Gap(
            ev("allocation_started", &[("operation", "op2")]),
            ev("allocation_preempted", &[("operation", "op2"), ("reason", "waiting_timeout")]),
            1000, 1000,
        ),
        // The victim is not touched by the new job's abort: aborted at its own deadline.
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "preemption"), ("preemptor/operation", "op2"),
        ]), 1),
        Gap(
            ev("allocation_interrupted", &[("operation", "op1")]),
            ev("allocation_preempted", &[("operation", "op1")]),
            3000, 3000,
        ),
        count(ev("allocation_started", &[("operation", "op2")]), 2),
        count(ev("operation_state", &[("operation", "op2"), ("state", "completed")]), 1),
        count(ev("operation_state", &[("operation", "op1"), ("state", "completed")]), 1),
    ];

    // YT-S9, waiting timeout 5000 ms > interruption window 3000 ms: the new job waits for the
    // victim (aborted at its deadline, 4200 ms), then runs its 500 ms; nothing is aborted for
    // waiting.
    yt_s9_waiting_timeout_longer_lets_new_job_run:
        "YT-S9_waiting_job_timeout_longer_than_interruption.json" => [
        none(ev("allocation_preempted", &[("reason", "waiting_timeout")])),
        count(ev("allocation_started", &[("operation", "op2")]), 1),
        count(ev("allocation_started", &[("operation", "op2"), ("stage", "preemptive")]), 1),
        First(ev("allocation_preempted", &[("operation", "op1"), ("reason", "preemption")]),
            4200, 4200),
        // The simulated job progresses only once the victim has left the node.
        Gap(
            ev("allocation_started", &[("operation", "op2")]),
            ev("allocation_finished", &[("operation", "op2"), ("outcome", "completed")]),
            3500, 3500,
        ),
        count(ev("operation_state", &[("operation", "op2"), ("state", "completed")]), 1),
    ];

    // YT-S39 (spec §1.4: "the pool's satisfaction is min(best child's satisfaction, the pool's
    // own local satisfaction)"): A (own 0.86) beats B (1.14) although its only runnable child
    // a2_op is at 1.71, so node-2's one cpu goes to a2_op.
    yt_s39_pool_satisfaction_for_scheduling: "YT-S39_pool_satisfaction_for_scheduling.json" => [
        Is("before", "/operations/a2_op/running_job_count", "3"),
        Is("before", "/operations/b_op/running_job_count", "4"),
        Num("before", "/pools/A/satisfaction_ratio", 0.85, 0.86),
        Num("before", "/pools/a2/satisfaction_ratio", 1.71, 1.72),
        Num("before", "/pools/B/satisfaction_ratio", 1.14, 1.15),
        count(ev("allocation_started", &[("node", "node-2")]), 1),
        count(ev("allocation_started", &[("node", "node-2"), ("operation", "a2_op")]), 1),
        Is("after", "/operations/a2_op/running_job_count", "4"),
        Is("after", "/operations/b_op/running_job_count", "4"),
        none(ev("allocation_started", &[("operation", "a1_op")])),
    ];

    // YT-S39 control: the option off, A competes with a2_op's 1.71 and B wins node-2.
    yt_s39_pool_satisfaction_off: "YT-S39_pool_satisfaction_off.json" => [
        Is("before", "/operations/a2_op/running_job_count", "3"),
        Is("before", "/operations/b_op/running_job_count", "4"),
        count(ev("allocation_started", &[("node", "node-2")]), 1),
        count(ev("allocation_started", &[("node", "node-2"), ("operation", "b_op")]), 1),
        Is("after", "/operations/a2_op/running_job_count", "3"),
        Is("after", "/operations/b_op/running_job_count", "5"),
    ];

    // YT-S3 (spec §2.7: "every heartbeat, all of its allocations currently classified
    // preemptible are preempted with the graceful timeout"): op1's fair share drops to 0 when
    // test_pool takes the cluster; its 3 allocations are interrupted gracefully at once (no
    // starvation, no preemptor), never by a preemptive stage.
    yt_s3_graceful_preemption_shrinks_operation:
        "YT-S3_graceful_preemption_shrinks_operation.json" => [
        count(ev("allocation_interrupted", &[
            ("operation", "op1"), ("reason", "graceful_preemption"), ("timeout_ms", "10000"),
        ]), 3),
        First(ev("allocation_interrupted", &[("operation", "op1")]), 1000, 1000),
        none(ev("allocation_interrupted", &[("reason", "preemption")])),
        none(ev("allocation_preempted", &[])),
        none(ev("allocation_started", &[("stage", "preemptive")])),
        count(ev("allocation_finished", &[("operation", "op1"), ("outcome", "completed")]), 3),
        count(ev("allocation_started", &[("operation", "op2"), ("stage", "regular")]), 3),
        count(ev("operation_state", &[("operation", "op2"), ("state", "completed")]), 1),
    ];

    // YT-S6 (spec §2.5 step 5: lowered limits make the excess allocations preemptible and the
    // normal stage trims them, reason resource_limits_violated): 3 cpu -> limit 1 cpu.
    yt_s6_lowered_limits_preempt_excess: "YT-S6_lowered_limits_preempt_excess.json" => [
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "resource_limits_violated"),
        ]), 2),
        First(ev("allocation_preempted", &[("operation", "op1")]), 1000, 1100),
        none(ev("allocation_preempted", &[("operation", "op1"), ("allocation", "1")])),
        count(ev("allocation_started", &[("operation", "op1")]), 3),
        num("limited", "/operations/op1/resource_usage/cpu", 1.0),
        Is("limited", "/operations/op1/running_job_count", "1"),
    ];

    // YT-S40: prod (below its promised guarantee) is served first: 1 slot, then both jobs.
    yt_s40_guarantee_priority_scheduling: "YT-S40_guarantee_priority_scheduling.json" => [
        Is("blocked", "/operations/prod_op/running_job_count", "0"),
        Is("blocked", "/operations/research_op/running_job_count", "0"),
        num("one-slot", "/operations/prod_op/resource_usage/user_slots", 1.0),
        num("one-slot", "/operations/research_op/resource_usage/user_slots", 0.0),
        num("unlimited", "/operations/prod_op/resource_usage/user_slots", 2.0),
        num("unlimited", "/operations/research_op/resource_usage/user_slots", 0.0),
    ];

    // ---- upstream audit: pools and operations ----

    // TestLightweightOperations::test_change_operation_pool: lightweight-ness follows the
    // operation's pool; a move that would exceed the root pool's running limit is refused.
    yt_up2_lightweight_change_operation_pool: "YT-UP2-lightweight_change_operation_pool.json" => [
        Is("three-light", "/pools/lightweight_pool/operation_count", "3"),
        Is("three-light", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("three-light", "/pools/lightweight_pool/lightweight_running_operation_count", "3"),
        Is("two-moved", "/pools/pool/operation_count", "2"),
        Is("two-moved", "/pools/pool/running_operation_count", "2"),
        Is("two-moved", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("two-moved", "/pools/lightweight_pool/operation_count", "1"),
        Is("two-moved", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("two-moved", "/pools/lightweight_pool/lightweight_running_operation_count", "1"),
        Is("two-moved", "/operations/light1/lightweight", "false"),
        Is("two-moved", "/operations/light3/lightweight", "true"),
        count(ev("error", &[("message", "~light3")]).during(600, 600), 1),
        count(ev("error", &[]), 1),
        text("rejected", "/operations/light3/pool", "lightweight_pool"),
        Is("rejected", "/operations/light3/lightweight", "true"),
        Is("final", "/pools/pool/operation_count", "2"),
        Is("final", "/pools/pool/running_operation_count", "2"),
        Is("final", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("final", "/pools/lightweight_pool/operation_count", "3"),
        Is("final", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("final", "/pools/lightweight_pool/lightweight_running_operation_count", "3"),
        Is("final", "/operations/light1/lightweight", "true"),
        Is("final", "/operations/light2/lightweight", "true"),
        text("final", "/operations/p1/state", "running"),
        text("final", "/operations/p2/state", "running"),
    ];

    // TestLightweightOperations::test_change_pool_config: the pool's options decide, for
    // running operations too.
    yt_up2_lightweight_change_pool_config: "YT-UP2-lightweight_change_pool_config.json" => [
        Is("initial", "/pools/pool/operation_count", "2"),
        Is("initial", "/pools/pool/running_operation_count", "2"),
        Is("initial", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/operation_count", "3"),
        Is("initial", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/lightweight_running_operation_count", "3"),
        Is("disabled", "/pools/pool/operation_count", "2"),
        Is("disabled", "/pools/pool/running_operation_count", "2"),
        Is("disabled", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("disabled", "/pools/lightweight_pool/operation_count", "3"),
        Is("disabled", "/pools/lightweight_pool/running_operation_count", "3"),
        Is("disabled", "/pools/lightweight_pool/lightweight_running_operation_count", "0"),
        Is("disabled", "/operations/light1/lightweight", "false"),
        text("disabled", "/operations/light1/state", "running"),
        Is("disabled", "/pools/root/running_operation_count", "5"),
        Is("fair-share", "/pools/lightweight_pool/operation_count", "3"),
        Is("fair-share", "/pools/lightweight_pool/running_operation_count", "3"),
        Is("fair-share", "/pools/lightweight_pool/lightweight_running_operation_count", "0"),
        Is("enabled-not-fifo", "/pools/lightweight_pool/operation_count", "3"),
        Is("enabled-not-fifo", "/pools/lightweight_pool/running_operation_count", "3"),
        Is("enabled-not-fifo", "/pools/lightweight_pool/lightweight_running_operation_count", "0"),
        Is("fifo", "/pools/pool/operation_count", "2"),
        Is("fifo", "/pools/pool/running_operation_count", "2"),
        Is("fifo", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("fifo", "/pools/lightweight_pool/operation_count", "3"),
        Is("fifo", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("fifo", "/pools/lightweight_pool/lightweight_running_operation_count", "3"),
        Is("fifo", "/operations/light3/lightweight", "true"),
        none(ev("error", &[])),
    ];

    // TestLightweightOperations::test_move_pool.
    yt_up2_lightweight_move_pool: "YT-UP2-lightweight_move_pool.json" => [
        Is("initial", "/pools/pool/operation_count", "2"),
        Is("initial", "/pools/pool/running_operation_count", "2"),
        Is("initial", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/operation_count", "3"),
        Is("initial", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/lightweight_running_operation_count", "3"),
        Is("moved", "/pools/pool/operation_count", "5"),
        Is("moved", "/pools/pool/running_operation_count", "2"),
        Is("moved", "/pools/pool/lightweight_running_operation_count", "3"),
        Is("moved", "/pools/lightweight_pool/operation_count", "3"),
        Is("moved", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("moved", "/pools/lightweight_pool/lightweight_running_operation_count", "3"),
        text("moved", "/pools/lightweight_pool/parent", "pool"),
        Is("moved", "/operations/light1/lightweight", "true"),
    ];

    // TestLightweightOperations::test_pending_operation_becomes_lightweight.
    yt_up2_lightweight_pending_becomes_lightweight: "YT-UP2-lightweight_pending_becomes_lightweight.json" => [
        Is("initial", "/pools/pool/operation_count", "4"),
        Is("initial", "/pools/pool/running_operation_count", "2"),
        Is("initial", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("initial", "/pools/lightweight_pool/lightweight_running_operation_count", "0"),
        text("initial", "/operations/q1/state", "pending"),
        text("initial", "/operations/q2/state", "pending"),
        Is("moved", "/pools/pool/operation_count", "3"),
        Is("moved", "/pools/pool/running_operation_count", "2"),
        Is("moved", "/pools/pool/lightweight_running_operation_count", "0"),
        Is("moved", "/pools/lightweight_pool/operation_count", "1"),
        Is("moved", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("moved", "/pools/lightweight_pool/lightweight_running_operation_count", "1"),
        Is("moved", "/operations/q1/lightweight", "true"),
        text("moved", "/operations/q1/state", "running"),
        text("moved", "/operations/q2/state", "pending"),
        Is("pool-lightweight", "/pools/pool/operation_count", "3"),
        Is("pool-lightweight", "/pools/pool/running_operation_count", "0"),
        Is("pool-lightweight", "/pools/pool/lightweight_running_operation_count", "3"),
        Is("pool-lightweight", "/pools/lightweight_pool/operation_count", "1"),
        Is("pool-lightweight", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("pool-lightweight", "/pools/lightweight_pool/lightweight_running_operation_count", "1"),
        Is("pool-lightweight", "/operations/q2/lightweight", "true"),
        text("pool-lightweight", "/operations/q2/state", "running"),
    ];

    // TestLightweightOperations::
    // test_pending_operation_becomes_running_after_other_running_operation_becomes_lightweight.
    yt_up2_lightweight_pending_runs_when_other_becomes_lightweight: "YT-UP2-lightweight_pending_runs_when_other_becomes_lightweight.json" => [
        text("pending", "/operations/o1/state", "running"),
        text("pending", "/operations/o2/state", "pending"),
        Is("pending", "/operations/blocking_op/lightweight", "false"),
        Is("after", "/operations/blocking_op/lightweight", "true"),
        Is("after", "/operations/o1/lightweight", "false"),
        Is("after", "/operations/o2/lightweight", "false"),
        text("after", "/operations/o2/state", "running"),
        count(ev("operation_state", &[("operation", "o2"), ("state", "running")]).during(500, 500), 1),
    ];

    // TestLightweightOperations::test_only_eligible_pending_operation_becomes_running.
    yt_up2_lightweight_only_eligible_pending_runs: "YT-UP2-lightweight_only_eligible_pending_runs.json" => [
        text("pending", "/operations/vanilla_op/state", "pending"),
        text("pending", "/operations/map_op/state", "pending"),
        text("after", "/operations/vanilla_op/state", "running"),
        Is("after", "/operations/vanilla_op/lightweight", "true"),
        text("after", "/operations/map_op/state", "pending"),
        Is("after", "/operations/map_op/lightweight", "false"),
        Is("after", "/pools/lightweight_pool/operation_count", "2"),
        Is("after", "/pools/lightweight_pool/running_operation_count", "0"),
        Is("after", "/pools/lightweight_pool/lightweight_running_operation_count", "1"),
    ];

    // TestEphemeralPools::test_ephemeral_pool_in_custom_pool_simple /
    // test_custom_ephemeral_pool_persists_after_pool_update.
    yt_up2_ephemeral_subpools_of_custom_pool: "YT-UP2-ephemeral_subpools_of_custom_pool.json" => [
        text("created", "/operations/op/pool", "custom_pool$root"),
        text("created", "/pools/custom_pool$root/parent", "custom_pool"),
        text("created", "/pools/custom_pool$root/mode", "fair_share"),
        Is("created", "/pools/custom_pool$root/is_ephemeral", "true"),
        text("after-update", "/pools/custom_pool$root/parent", "custom_pool"),
        text("after-update", "/operations/op/pool", "custom_pool$root"),
    ];

    // TestEphemeralPools::test_custom_ephemeral_pool_scheduling_mode / _max_operation_count /
    // _resource_limits (the limits seen through usage: the snapshot has no resource_limits).
    yt_up2_ephemeral_subpool_config_mode_and_limits:
        "YT-UP2-ephemeral_subpool_config_mode_and_limits.json" => [
        text("running", "/pools/custom_pool_fifo$root/mode", "fifo"),
        text("running", "/pools/custom_pool_fifo$root/parent", "custom_pool_fifo"),
        text("running", "/operations/op1/pool", "custom_pool$root"),
        num("running", "/operations/op1/resource_usage/cpu", 1.0),
        Is("running", "/operations/op1/running_job_count", "1"),
        count(ev("error", &[("code", "202"), ("message", "~custom_pool$root")]), 1),
        Absent("after", "/operations/op2"),
    ];

    // TestEphemeralPools::test_ephemeral_pool_parent_is_removed_after_operation_complete.
    yt_up2_ephemeral_parent_removed_after_operation_complete:
        "YT-UP2-ephemeral_parent_removed_after_operation_complete.json" => [
        none(ev("error", &[])),
        text("removed", "/pools/custom_pool$root/parent", "custom_pool"),
        Absent("done", "/pools/custom_pool"),
        Absent("done", "/pools/custom_pool$root"),
    ];

    // TestEphemeralPools::test_move_last_operation_from_ephemeral_pool /
    // test_move_to_ephemeral_hub_via_common_option / _via_per_pool_tree_option.
    yt_up2_ephemeral_move_operations: "YT-UP2-ephemeral_move_operations.json" => [
        Is("before", "/pools/ephemeral/is_ephemeral", "true"),
        text("moved", "/operations/op1/pool", "real"),
        Absent("moved", "/pools/ephemeral"),
        text("moved", "/operations/op2/pool", "ephemeral_hub$root"),
        text("moved", "/operations/op3/pool", "ephemeral_hub$root"),
        none(ev("error", &[])),
    ];

    // TestEphemeralPools::test_fifo_pool_cannot_create_ephemeral_subpools.
    yt_up2_ephemeral_fifo_pool_cannot_create_subpools:
        "YT-UP2-ephemeral_fifo_pool_cannot_create_subpools.json" => [
        count(ev("error", &[("message", "~a FIFO pool cannot create ephemeral subpools")]), 2),
        text("after", "/pools/fifo_pool/mode", "fifo"),
        text("after", "/pools/ephemeral_hub/mode", "fair_share"),
        text("after", "/operations/op/pool", "ephemeral_hub$root"),
    ];

    // TestEphemeralPools::test_default_ephemeral_hub_applies_ephemeral_subpool_config.
    yt_up2_ephemeral_default_hub_applies_subpool_config:
        "YT-UP2-ephemeral_default_hub_applies_subpool_config.json" => [
        text("running", "/pools/ephemeral/parent", "research"),
        text("running", "/pools/ephemeral/mode", "fifo"),
        Is("running", "/pools/ephemeral/is_ephemeral", "true"),
        num("running", "/operations/op/resource_usage/cpu", 1.0),
        count(ev("error", &[("code", "202"), ("message", "~\"ephemeral\"")]), 1),
    ];

    // ---- upstream audit: test_scheduler_preemption.py ----
    // One file per upstream test not covered above (`YT-UP-<test>.json`), asserting what the
    // YTsaurus test asserts, translated to event lines and snapshots.

    // test_graceful_preemption: shrunk to 0 slots, the job handles the interruption and
    // completes: 1 job in total, 1 completed, none aborted.
    yt_up_graceful_preemption: "YT-UP-graceful_preemption.json" => [
        Is("running", "/operations/op/running_job_count", "1"),
        count(ev("allocation_interrupted", &[
            ("operation", "op"), ("reason", "graceful_preemption"), ("timeout_ms", "10000"),
        ]), 1),
        First(ev("allocation_interrupted", &[("operation", "op")]), 1000, 1100),
        Gap(
            ev("allocation_interrupted", &[("operation", "op")]),
            ev("allocation_finished", &[("operation", "op"), ("outcome", "completed")]),
            1000, 1000,
        ),
        none(ev("allocation_preempted", &[])),
        count(ev("allocation_started", &[("operation", "op")]), 1),
        count(ev("operation_state", &[("operation", "op"), ("state", "completed")]), 1),
    ];

    // test_preemption_of_jobs_excessing_resource_limits: user_slots 3 -> 1 -> 0.
    yt_up_preemption_of_jobs_excessing_resource_limits:
        "YT-UP-preemption_of_jobs_excessing_resource_limits.json" => [
        Is("running", "/operations/op/running_job_count", "3"),
        count(ev("allocation_preempted", &[
            ("operation", "op"), ("reason", "resource_limits_violated"),
        ]).during(1000, 1100), 2),
        Is("one-slot", "/operations/op/running_job_count", "1"),
        count(ev("allocation_preempted", &[
            ("operation", "op"), ("reason", "resource_limits_violated"),
        ]).during(2000, 2100), 1),
        Is("zero-slots", "/operations/op/running_job_count", "0"),
        count(ev("allocation_preempted", &[]), 3),
        count(ev("allocation_started", &[("operation", "op")]), 3),
    ];

    // test_preemptor_event_log: preempted_for names op1 and its started allocation.
    yt_up_preemptor_event_log: "YT-UP-preemptor_event_log.json" => [
        count(ev("allocation_started", &[
            ("operation", "op1"), ("allocation", "4"), ("stage", "preemptive"),
        ]), 1),
        count(ev("allocation_preempted", &[
            ("operation", "op0"), ("reason", "preemption"),
            ("preemptor/operation", "op1"), ("preemptor/allocation", "4"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
    ];

    // test_waiting_job_timeout: waiting 10 s > interruption 5 s: op1 completes its one job,
    // none aborted.
    yt_up_waiting_job_timeout: "YT-UP-waiting_job_timeout.json" => [
        count(ev("allocation_interrupted", &[
            ("operation", "op2"), ("timeout_ms", "5000"), ("preemptor/operation", "op1"),
        ]), 1),
        Gap(
            ev("allocation_interrupted", &[("operation", "op2")]),
            ev("allocation_preempted", &[("operation", "op2"), ("reason", "preemption")]),
            5000, 5000,
        ),
        none(ev("allocation_preempted", &[("operation", "op1")])),
        count(ev("allocation_started", &[("operation", "op1")]), 1),
        count(ev("allocation_finished", &[("operation", "op1"), ("outcome", "completed")]), 1),
        count(ev("operation_state", &[("operation", "op1"), ("state", "completed")]), 1),
    ];

    // test_inconsistent_waiting_job_timeout: waiting 5 s < interruption 15 s: op1's job is
    // aborted after waiting 5 s.
    yt_up_inconsistent_waiting_job_timeout: "YT-UP-inconsistent_waiting_job_timeout.json" => [
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "waiting_timeout"),
        ]), 1),
        Gap(
            ev("allocation_started", &[("operation", "op1")]),
            ev("allocation_preempted", &[("operation", "op1"), ("reason", "waiting_timeout")]),
            5000, 5000,
        ),
    ];

    // test_usage_overcommit_due_to_interruption (xfail in YTsaurus, YT-14804): the root's cpu
    // usage stays within the cluster while the preempted job is still being interrupted.
    yt_up_usage_overcommit_due_to_interruption:
        "YT-UP-usage_overcommit_due_to_interruption.json" => [
        count(ev("allocation_interrupted", &[("operation", "op2"), ("preemptor/operation", "op1")]), 1),
        none(ev("allocation_preempted", &[])),
        Num("t1", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t2", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t3", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t4", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t5", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t6", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t7", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t8", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t9", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
        Num("t10", "/pools/<Root>/resource_usage/cpu", 0.0, 3.0),
    ];

    // test_pass_preemption_reason_to_node: reason preemption, for op2's started allocation.
    yt_up_pass_preemption_reason_to_node: "YT-UP-pass_preemption_reason_to_node.json" => [
        count(ev("allocation_started", &[
            ("operation", "op2"), ("allocation", "4"), ("stage", "preemptive"),
        ]), 1),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("reason", "preemption"),
            ("preemptor/operation", "op2"), ("preemptor/allocation", "4"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
    ];

    // test_job_preemption_order: only op1's newest allocation (on node-2) is preemptible; op2
    // on node-0 gets nothing, op3 on node-2 takes the newest, the earlier one stays.
    yt_up_job_preemption_order: "YT-UP-job_preemption_order.json" => [
        Is("filled", "/operations/op1/running_job_count", "6"),
        Is("op2-started", "/operations/op1/preemptible_allocation_count", "1"),
        num("op2-started", "/operations/op2/resource_usage/cpu", 0.0),
        num("op2-waits", "/operations/op2/resource_usage/cpu", 0.0),
        none(ev("allocation_preempted", &[]).during(0, 4499)),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("allocation", "6"), ("node", "node-2"),
            ("preemptor/operation", "op3"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 1),
        Is("after", "/operations/op1/running_job_count", "5"),
        num("after", "/operations/op3/resource_usage/cpu", 0.5),
    ];

    // TestNonPreemptibleResourceUsageThreshold::test_non_preemptible_resource_usage_threshold:
    // (preemptible, aggressively preemptible) per tree threshold.
    yt_up_non_preemptible_resource_usage_threshold:
        "YT-UP-non_preemptible_resource_usage_threshold.json" => [
        Is("step0", "/operations/op/running_job_count", "10"),
        Is("step0", "/operations/op/preemptible_allocation_count", "1"),
        Is("step0", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step1", "/operations/op/preemptible_allocation_count", "1"),
        Is("step1", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step2", "/operations/op/preemptible_allocation_count", "1"),
        Is("step2", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step3", "/operations/op/preemptible_allocation_count", "1"),
        Is("step3", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step4", "/operations/op/preemptible_allocation_count", "1"),
        Is("step4", "/operations/op/aggressively_preemptible_allocation_count", "4"),
        Is("step5", "/operations/op/preemptible_allocation_count", "1"),
        Is("step5", "/operations/op/aggressively_preemptible_allocation_count", "2"),
        Is("step6", "/operations/op/preemptible_allocation_count", "0"),
        Is("step6", "/operations/op/aggressively_preemptible_allocation_count", "0"),
        none(ev("error", &[])),
    ];

    // test_pool_config_overrides_tree_config: the pool's {user_slots 7} beats the tree's 1
    // and 10.
    yt_up_pool_config_overrides_tree_config: "YT-UP-pool_config_overrides_tree_config.json" => [
        Is("step0", "/operations/op/preemptible_allocation_count", "1"),
        Is("step0", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step1", "/operations/op/preemptible_allocation_count", "1"),
        Is("step1", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step2", "/operations/op/preemptible_allocation_count", "1"),
        Is("step2", "/operations/op/aggressively_preemptible_allocation_count", "2"),
        Is("step3", "/operations/op/preemptible_allocation_count", "1"),
        Is("step3", "/operations/op/aggressively_preemptible_allocation_count", "2"),
        none(ev("error", &[])),
    ];

    // test_operation_max_unpreemptible_running_job_count: the operation's count caps the
    // tree's user_slots threshold (min of both).
    yt_up_operation_max_unpreemptible_running_job_count:
        "YT-UP-operation_max_unpreemptible_running_job_count.json" => [
        Is("step0", "/operations/op/preemptible_allocation_count", "1"),
        Is("step0", "/operations/op/aggressively_preemptible_allocation_count", "2"),
        Is("step1", "/operations/op/preemptible_allocation_count", "1"),
        Is("step1", "/operations/op/aggressively_preemptible_allocation_count", "5"),
        Is("step2", "/operations/op/preemptible_allocation_count", "1"),
        Is("step2", "/operations/op/aggressively_preemptible_allocation_count", "2"),
    ];

    // TestPreemptionPriorityScope: operation_only keeps greedy_op (not starving itself) at
    // 4 cpu for 3 s; operation_and_ancestors lets it preempt up to 6 cpu.
    yt_up_preemption_priority_scope: "YT-UP-preemption_priority_scope.json" => [
        Num("greedy", "/operations/greedy_op/detailed_fair_share/total/cpu", 0.409, 0.411),
        num("greedy", "/operations/greedy_op/resource_usage/cpu", 4.0),
        num("operation-only", "/operations/greedy_op/resource_usage/cpu", 4.0),
        text("operation-only", "/operations/greedy_op/starvation_status", "non_starving"),
        text("operation-only", "/operations/starving_op/starvation_status", "starving"),
        text("operation-only", "/pools/second/starvation_status", "starving"),
        none(ev("allocation_preempted", &[]).during(0, 4499)),
        First(ev("allocation_preempted", &[
            ("operation", "normal_op"), ("preemptor/operation", "greedy_op"),
        ]), 4500, 4600),
        num("ancestors", "/operations/greedy_op/resource_usage/cpu", 6.0),
    ];

    // TestResourceLimitsOverdraftPreemption::test_scheduler_preempt_overdraft_resources:
    // node-1's cpu drops to 0: both allocations aborted after the 1000 ms overcommit duration,
    // both jobs run again on node-0.
    yt_up_scheduler_preempt_overdraft_resources:
        "YT-UP-scheduler_preempt_overdraft_resources.json" => [
        count(ev("allocation_started", &[("node", "node-1")]).during(0, 999), 2),
        count(ev("allocation_preempted", &[
            ("operation", "op1"), ("node", "node-1"), ("reason", "resource_overcommit"),
        ]), 1),
        count(ev("allocation_preempted", &[
            ("operation", "op2"), ("node", "node-1"), ("reason", "resource_overcommit"),
        ]), 1),
        count(ev("allocation_preempted", &[]), 2),
        First(ev("allocation_preempted", &[]), 2000, 2000),
        count(ev("allocation_started", &[("node", "node-0")]).during(2000, 2200), 2),
        Is("moved", "/operations/op1/running_job_count", "1"),
        Is("moved", "/operations/op2/running_job_count", "1"),
    ];

    // TestSchedulerAggressivePreemption::test_aggressive_preemption.
    yt_up_aggressive_preemption: "YT-UP-aggressive_preemption.json" => [
        num("filled", "/operations/op0/fair_share_ratio", 0.5),
        num("filled", "/operations/op0/usage_ratio", 0.5),
        num("filled", "/operations/op1/fair_share_ratio", 0.5),
        num("filled", "/operations/op1/usage_ratio", 0.5),
        Is("filled", "/operations/op0/running_job_count", "4"),
        Is("filled", "/operations/op1/running_job_count", "4"),
        num("starting", "/operations/op/fair_share_ratio", 0.25),
        num("after-3s", "/operations/op/usage_ratio", 0.0),
        none(ev("allocation_preempted", &[]).during(0, 3999)),
        count(ev("allocation_preempted", &[
            ("reason", "aggressive_preemption"), ("preemptor/operation", "op"),
        ]), 2),
        num("aggressive", "/operations/op/usage_ratio", 0.25),
        Is("aggressive", "/operations/op/running_job_count", "1"),
    ];

    // TestSchedulerAggressivePreemption::
    // test_no_aggressive_preemption_for_non_aggressively_starving_operation.
    yt_up_no_aggressive_preemption_for_non_aggressively_starving_operation:
        "YT-UP-no_aggressive_preemption_for_non_aggressively_starving_operation.json" => [
        num("filled", "/operations/bad_op/fair_share_ratio", 1.0),
        num("filled", "/operations/bad_op/usage_ratio", 1.0),
        Is("filled", "/operations/bad_op/running_job_count", "8"),
        num("op1-one-job", "/operations/op1/fair_share_ratio", 2.0 / 12.0),
        num("op1-one-job", "/operations/op1/usage_ratio", 1.0 / 8.0),
        Is("op1-one-job", "/operations/op1/running_job_count", "1"),
        num("op1-after-3s", "/operations/op1/usage_ratio", 1.0 / 8.0),
        Is("op1-after-3s", "/operations/op1/running_job_count", "1"),
        text("op2-starving", "/operations/op2/starvation_status", "starving"),
        num("op2-starving", "/operations/op2/fair_share_ratio", 1.0 / 13.0),
        num("op2-starving", "/operations/op2/usage_ratio", 0.0),
        num("op2-after-3s", "/operations/op2/usage_ratio", 0.0),
        Is("op2-after-3s", "/operations/op2/running_job_count", "0"),
        text("op2-after-3s", "/operations/op1/starvation_status", "starving"),
        none(ev("allocation_preempted", &[]).during(1300, 7999)),
        num("aggressive", "/operations/op1/usage_ratio", 2.0 / 8.0),
        Is("aggressive", "/operations/op1/running_job_count", "2"),
        text("aggressive", "/operations/op1/starvation_status", "non_starving"),
    ];

    // TestSchedulerAggressivePreemption::test_aggressive_preemption_for_gang_operations: the
    // gangs are safe from aggressive preemption while the option is false.
    yt_up_aggressive_preemption_for_gang_operations:
        "YT-UP-aggressive_preemption_for_gang_operations.json" => [
        num("filled", "/operations/gang0/fair_share_ratio", 0.5),
        num("filled", "/operations/gang0/usage_ratio", 0.5),
        num("filled", "/operations/gang1/fair_share_ratio", 0.5),
        num("filled", "/operations/gang1/usage_ratio", 0.5),
        Is("filled", "/operations/gang0/running_job_count", "4"),
        Is("filled", "/operations/gang1/running_job_count", "4"),
        num("starting", "/operations/starving_op/fair_share_ratio", 0.25),
        num("after-3s", "/operations/starving_op/usage_ratio", 0.0),
        none(ev("allocation_preempted", &[]).during(0, 3999)),
        num("allowed", "/operations/starving_op/fair_share_ratio", 0.25),
    ];

    // TestSchedulerAggressivePreemption2::test_allow_aggressive_starvation_preemption_operation.
    yt_up_allow_aggressive_starvation_preemption_operation:
        "YT-UP-allow_aggressive_starvation_preemption_operation.json" => [
        num("dishonest", "/operations/op_dishonest/fair_share_ratio", 0.4),
        num("dishonest", "/operations/op_dishonest/usage_ratio", 0.4),
        num("small", "/operations/op_honest_small/fair_share_ratio", 0.2),
        num("small", "/operations/op_honest_small/usage_ratio", 0.2),
        num("before", "/operations/op_honest_big/fair_share_ratio", 0.6),
        num("before", "/operations/op_honest_big/usage_ratio", 0.4),
        num("after", "/operations/op_special/fair_share_ratio", 0.4),
        num("after", "/operations/op_special/usage_ratio", 0.08),
        num("after", "/operations/op_honest_big/fair_share_ratio", 0.4),
        num("after", "/operations/op_honest_big/usage_ratio", 0.32),
    ];

    // TestSchedulerAggressivePreemption2::test_allow_aggressive_starvation_preemption_ancestor
    // (skipped upstream as a near duplicate): the same with the flag on honest_pool.
    yt_up_allow_aggressive_starvation_preemption_ancestor:
        "YT-UP-allow_aggressive_starvation_preemption_ancestor.json" => [
        num("dishonest", "/operations/op_dishonest/fair_share_ratio", 0.4),
        num("small", "/operations/op_honest_small/usage_ratio", 0.2),
        num("before", "/operations/op_honest_big/fair_share_ratio", 0.6),
        num("before", "/operations/op_honest_big/usage_ratio", 0.4),
        num("after", "/operations/op_special/fair_share_ratio", 0.4),
        num("after", "/operations/op_honest_big/fair_share_ratio", 0.4),
        num("after", "/operations/op_special/usage_ratio", 0.08),
        num("after", "/operations/op_honest_big/usage_ratio", 0.32),
    ];

    // TestSsdPriorityPreemption::test_regular_ssd_priority_preemption_many_operations.
    yt_up_regular_ssd_priority_preemption_many_operations:
        "YT-UP-regular_ssd_priority_preemption_many_operations.json" => [
        num("blocking", "/operations/blocking0/resource_usage/cpu", 2.0),
        num("blocking", "/operations/blocking3/resource_usage/cpu", 2.0),
        text("starving", "/operations/ssd_op/starvation_status", "starving"),
        Is("disabled", "/operations/ssd_op/running_job_count", "0"),
        none(ev("allocation_started", &[("operation", "ssd_op")]).during(0, 3499)),
        none(ev("allocation_preempted", &[]).during(0, 3499)),
        count(ev("allocation_preempted", &[
            ("reason", "ssd_preemption"), ("preemptor/operation", "ssd_op"),
        ]), 4),
        num("enabled", "/operations/ssd_op/resource_usage/cpu", 4.0),
    ];

    // TestSsdPriorityPreemption::test_config (last step): enable with an empty
    // node_tag_filter is rejected; the earlier changes are accepted.
    yt_up_ssd_config: "YT-UP-ssd_config.json" => [
        count(ev("error", &[("message", "~ssd_priority_preemption.node_tag_filter")])
            .during(300, 300), 1),
        count(ev("error", &[]), 1),
    ];
    // ---- upstream audit: test_scheduler_strategy.py ----
    // TestSchedulerOperationLimits (tree: max_running_operation_count_per_pool 1,
    // default_parent_pool default_pool), one file per test (`YT-UP3-<test>.json`).

    // test_operations_pool_limit: op2 waits for op1 in test_pool_1; op3 runs beside.
    yt_up3_operations_pool_limit: "YT-UP3-operations_pool_limit.json" => [
        text("pending", "/operations/op1/state", "running"),
        text("pending", "/operations/op2/state", "pending"),
        text("pending", "/operations/op3/state", "running"),
        none(ev("operation_state", &[("operation", "op2"), ("state", "running")]).during(0, 1499)),
        count(ev("operation_state", &[("state", "completed")]), 3),
        text("done", "/operations/op2/state", "completed"),
        none(ev("error", &[])),
    ];

    // test_operations_recursive_pool_limit: the same under research (max running 2).
    yt_up3_operations_recursive_pool_limit: "YT-UP3-operations_recursive_pool_limit.json" => [
        text("pending", "/operations/op1/state", "running"),
        text("pending", "/operations/op2/state", "pending"),
        text("pending", "/operations/op3/state", "running"),
        Is("pending", "/pools/research/operation_count", "3"),
        Is("pending", "/pools/research/running_operation_count", "2"),
        none(ev("operation_state", &[("operation", "op2"), ("state", "running")]).during(0, 1499)),
        count(ev("operation_state", &[("state", "completed")]), 3),
        none(ev("error", &[])),
    ];

    // test_operation_count: research counts the operations of other_subpool, two levels down.
    yt_up3_operation_count: "YT-UP3-operation_count.json" => [
        Is("counted", "/pools/research/operation_count", "3"),
        Is("counted", "/pools/research/running_operation_count", "3"),
        none(ev("error", &[])),
    ];

    // test_abort_of_pending_operation: op2 aborted while pending; op1 and op3 complete.
    yt_up3_abort_of_pending_operation: "YT-UP3-abort_of_pending_operation.json" => [
        text("pending", "/operations/op1/state", "running"),
        text("pending", "/operations/op2/state", "pending"),
        text("pending", "/operations/op3/state", "pending"),
        count(ev("operation_state", &[("operation", "op2"), ("state", "aborted")]).during(1100, 1100), 1),
        none(ev("operation_state", &[("operation", "op2"), ("state", "running")])),
        none(ev("allocation_started", &[("operation", "op2")])),
        text("done", "/operations/op1/state", "completed"),
        text("done", "/operations/op2/state", "aborted"),
        text("done", "/operations/op3/state", "completed"),
        none(ev("error", &[])),
    ];

    // test_reconfigured_pools_operations_limit: test_pool_1, removed and created again under
    // test_pool_2 while op1 runs in it, makes op2 in test_pool_2 wait.
    yt_up3_reconfigured_pools_operations_limit: "YT-UP3-reconfigured_pools_operations_limit.json" => [
        none(ev("error", &[])),
        text("pending", "/pools/test_pool_1/parent", "test_pool_2"),
        text("pending", "/operations/op1/state", "running"),
        text("pending", "/operations/op2/state", "pending"),
        First(ev("operation_state", &[("operation", "op2"), ("state", "running")]), 2000, 2100),
        text("done", "/operations/op1/state", "completed"),
        text("done", "/operations/op2/state", "completed"),
    ];

    // test_total_operations_limit: research's max_operation_count 3 rejects more in research
    // and in research_subpool (error 202); production accepts.
    yt_up3_total_operations_limit: "YT-UP3-total_operations_limit.json" => [
        count(ev("error", &[("code", "202")]).during(100, 300), 6),
        count(ev("error", &[]), 6),
        none(ev("operation_state", &[("operation", "~r")])),
        none(ev("operation_state", &[("operation", "~s")])),
        none(ev("operation_state", &[("operation", "~t")])),
        Is("counted", "/pools/production/running_operation_count", "1"),
        Is("counted", "/pools/production/operation_count", "2"),
        Is("counted", "/pools/research/running_operation_count", "1"),
        Is("counted", "/pools/research/operation_count", "3"),
        Is("counted", "/pools/<Root>/running_operation_count", "2"),
        Is("counted", "/pools/<Root>/operation_count", "5"),
    ];

    // test_pool_changes: moving subpool from research to production moves its counts.
    yt_up3_pool_changes: "YT-UP3-pool_changes.json" => [
        Is("before", "/pools/subpool/running_operation_count", "1"),
        Is("before", "/pools/subpool/operation_count", "3"),
        Is("before", "/pools/research/running_operation_count", "1"),
        Is("before", "/pools/research/operation_count", "3"),
        Is("before", "/pools/production/running_operation_count", "0"),
        Is("before", "/pools/production/operation_count", "0"),
        text("after", "/pools/subpool/parent", "production"),
        Is("after", "/pools/subpool/running_operation_count", "1"),
        Is("after", "/pools/subpool/operation_count", "3"),
        Is("after", "/pools/research/running_operation_count", "0"),
        Is("after", "/pools/research/operation_count", "0"),
        Is("after", "/pools/production/running_operation_count", "1"),
        Is("after", "/pools/production/operation_count", "3"),
        none(ev("error", &[])),
    ];

    // test_forbid_immediate_operations: refused in p1; allowed in its child p2 and in an
    // ephemeral pool under the forbidding default_pool.
    yt_up3_forbid_immediate_operations: "YT-UP3-forbid_immediate_operations.json" => [
        count(ev("error", &[("message", "~p1")]).during(0, 0), 1),
        count(ev("error", &[]), 1),
        none(ev("operation_state", &[("operation", "op_p1")])),
        count(ev("operation_state", &[("operation", "op_p2"), ("state", "completed")]), 1),
        text("p3", "/pools/p3/parent", "default_pool"),
        Is("p3", "/pools/p3/is_ephemeral", "true"),
        count(ev("operation_state", &[("operation", "op_p3"), ("state", "completed")]), 1),
    ];
    // TestResourceUsage, resource-limits tests (3 nodes x (1 cpu, 1 slot); jobs of 1 cpu).

    // test_resource_limits: the pool's limits, then the operation's own, allow one job.
    yt_up3_resource_limits: "YT-UP3-resource_limits.json" => [
        Is("pool-limit", "/operations/op1/running_job_count", "1"),
        count(ev("allocation_started", &[("operation", "op1")]), 1),
        Is("op-limit", "/operations/op2/running_job_count", "1"),
        count(ev("allocation_started", &[("operation", "op2")]), 1),
        none(ev("error", &[])),
    ];

    // test_resource_limits_preemption[pool]: pool cpu limit 2 -> 2 running jobs.
    yt_up3_resource_limits_preemption_pool: "YT-UP3-resource_limits_preemption_pool.json" => [
        Is("running", "/operations/op/running_job_count", "3"),
        count(ev("allocation_preempted", &[("operation", "op")]), 1),
        Is("limited", "/operations/op/running_job_count", "2"),
        none(ev("error", &[])),
    ];

    // test_resource_limits_preemption[operation]: operation user_slots limit 2 -> 2 running.
    yt_up3_resource_limits_preemption_operation:
        "YT-UP3-resource_limits_preemption_operation.json" => [
        Is("running", "/operations/op/running_job_count", "3"),
        count(ev("allocation_preempted", &[("operation", "op")]), 1),
        Is("limited", "/operations/op/running_job_count", "2"),
        none(ev("error", &[])),
    ];

    // test_resource_limits_runtime: user_slots limit 1, then 2.
    yt_up3_resource_limits_runtime: "YT-UP3-resource_limits_runtime.json" => [
        Is("one", "/operations/op/running_job_count", "1"),
        count(ev("allocation_started", &[("operation", "op")]).during(0, 1999), 1),
        Is("two", "/operations/op/running_job_count", "2"),
        none(ev("error", &[])),
    ];

    // test_max_possible_resource_usage: total fair shares per resource under pool limits.
    yt_up3_max_possible_resource_usage: "YT-UP3-max_possible_resource_usage.json" => [
        num("two-ops", "/pools/subpool_1/detailed_fair_share/total/cpu", 1.0 / 3.0),
        num("two-ops", "/pools/subpool_1/detailed_fair_share/total/user_slots", 1.0 / 3.0),
        num("two-ops", "/pools/subpool_2/detailed_fair_share/total/cpu", 0.0),
        num("two-ops", "/pools/subpool_2/detailed_fair_share/total/user_slots", 0.0),
        num("two-ops", "/pools/low_cpu_pool/detailed_fair_share/total/cpu", 1.0 / 3.0),
        num("two-ops", "/pools/low_cpu_pool/detailed_fair_share/total/user_slots", 1.0 / 3.0),
        num("two-ops", "/pools/high_cpu_pool/detailed_fair_share/total/cpu", 2.0 / 3.0),
        num("two-ops", "/pools/high_cpu_pool/detailed_fair_share/total/user_slots", 2.0 / 3.0),
        num("three-ops", "/pools/subpool_1/detailed_fair_share/total/user_slots", 0.25),
        num("three-ops", "/pools/subpool_2/detailed_fair_share/total/user_slots", 0.25),
        num("three-ops", "/pools/low_cpu_pool/detailed_fair_share/total/user_slots", 0.5),
        num("three-ops", "/pools/high_cpu_pool/detailed_fair_share/total/user_slots", 0.5),
        num("three-ops", "/pools/subpool_1/detailed_fair_share/total/cpu", 0.25),
        num("three-ops", "/pools/subpool_2/detailed_fair_share/total/cpu", 0.0),
        num("three-ops", "/pools/low_cpu_pool/detailed_fair_share/total/cpu", 0.25),
        num("three-ops", "/pools/high_cpu_pool/detailed_fair_share/total/cpu", 0.5),
    ];

    // test_pool_change_with_resource_limits: the operation survives the move and completes.
    yt_up3_pool_change_with_resource_limits: "YT-UP3-pool_change_with_resource_limits.json" => [
        text("moved", "/pools/source_pool/parent", "destination_pool"),
        count(ev("operation_state", &[("operation", "op"), ("state", "completed")]), 1),
        none(ev("error", &[])),
    ];

    // test_move_does_not_lose_resource_usage_in_source_ancestor: op2 gets a job in
    // pool_with_limits once op1's pool has moved out of it.
    yt_up3_move_does_not_lose_resource_usage_in_source_ancestor:
        "YT-UP3-move_does_not_lose_resource_usage_in_source_ancestor.json" => [
        text("after", "/pools/pool_without_limits/parent", "<Root>"),
        num("after", "/pools/pool_with_limits/resource_usage/cpu", 1.0),
        Is("after", "/operations/op2/running_job_count", "1"),
        Is("after", "/operations/op1/running_job_count", "1"),
        none(ev("error", &[])),
    ];
}

// ---- coverage ----------------------------------------------------------------------------------

/// `.json` files under `scenarios/yt/`, sorted.
fn yt_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo_root().join(DIR))
        .unwrap_or_else(|e| panic!("{DIR}: {e}"))
        .map(|entry| entry.expect("directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_behaviour_has_a_file_and_every_file_a_case() {
    let files = yt_files();
    let used: BTreeSet<&str> = CASE_FILES.iter().copied().collect();
    for file in &files {
        assert!(used.contains(file.as_str()), "{DIR}/{file} has no case");
        let id = file_id(file);
        assert!(
            IDS.contains(&id),
            "{DIR}/{file}: {id:?} is not a behaviour id"
        );
        // Each file names its behaviour and states the concrete timeline it chose.
        let text = std::fs::read_to_string(repo_root().join(DIR).join(file)).expect("readable");
        let json: Value = serde_json::from_str(&text).expect("JSON");
        let name = json["name"].as_str().unwrap_or_default();
        assert!(
            name.starts_with(id),
            "{file}: name {name:?} should start with {id}"
        );
        assert!(
            json["description"].as_str().is_some_and(|d| d.len() > 80),
            "{file}: description missing or too short"
        );
    }
    for file in CASE_FILES {
        assert!(files.iter().any(|f| f == file), "case file {file} missing");
    }
    for id in IDS {
        assert!(
            files.iter().any(|f| file_id(f) == *id),
            "no scenario file for {id}"
        );
    }
}

#[test]
fn every_yt_scenario_is_deterministic() {
    for file in yt_files() {
        let (a, b) = (run(&file), run(&file));
        assert_eq!(a.code, b.code, "{file}");
        assert_eq!(a.stdout, b.stdout, "{file}: output differs between runs");
    }
}
