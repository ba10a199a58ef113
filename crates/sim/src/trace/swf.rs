//! The Standard Workload Format (SWF) of the Parallel Workloads Archive.
//!
//! A file is text: lines starting with `;` are header comments, the others are jobs of 18
//! whitespace-separated numbers (integers or decimals; -1 means unknown), blank lines are
//! ignored. The fields, by their SWF names (used in errors):
//!
//! | # | field | used as |
//! |---|-------|---------|
//! | 1 | job number | [`TraceJob::id`] (as written) |
//! | 2 | submit time (s) | [`TraceJob::submit_ms`]; unknown: skipped "submit time unknown (-1)" |
//! | 3 | wait time (s) | [`TraceJob::trace_wait_ms`] (None when unknown) |
//! | 4 | run time (s) | [`TraceJob::duration_ms`] (0 is kept); unknown: skipped "run time unknown (-1)" |
//! | 5 | allocated processors | [`TraceJob::width`] when field 8 is unknown |
//! | 8 | requested processors | [`TraceJob::width`] when > 0; neither 5 nor 8 > 0: skipped "no processor count" |
//! | 9 | requested time (s) | [`TraceJob::time_limit_ms`] when > 0 (None when 0 or unknown) |
//! | 12 | user id | [`TraceJob::user`]: `u<id>`, `u?` when unknown |
//! | 13 | group id | [`TraceJob::group`]: `g<id>`, `g?` when unknown |
//!
//! The other fields (average CPU time, used memory, requested memory, status,
//! executable, queue, partition, preceding job, think time) must be numbers but are not used.
//! In particular the memory fields are left out: a unit is `cpu 1` and nothing else. A
//! fractional processor count is rounded up (counted in [`Trace::adjusted`]); times are
//! rounded to the nearest millisecond. A negative value counts as unknown.
//!
//! # The machine
//!
//! From the headers `; MaxNodes: N` and `; MaxProcs: P` (values that are not whole numbers are
//! errors; 0 and negative values count as unknown):
//!
//! * both known, `P % N == 0`: `N` nodes of `cpu = user_slots = P / N`;
//! * both known, not divisible: `N` nodes of `floor(P / N)` (counted in [`Trace::adjusted`]:
//!   the machine then has fewer processors than `P`); if `P < N`, `N` is ignored (see below);
//! * only `P`: `P` nodes of `cpu 1, user_slots 1`;
//! * otherwise (neither, or only `N`): unknown ([`Trace::machine`] is None).
//!
//! Jobs wider than the whole machine are kept; the replay decides what to do with them.

use super::{MachineGroup, Trace, TraceError, TraceFormat, TraceJob, seconds_to_ms};
use fairsched_resources::{ResourceKind, Resources};

/// Number of fields of a job line.
pub const FIELD_COUNT: usize = 18;

/// The SWF field names, in order (field `i + 1` is `FIELD_NAMES[i]`).
pub const FIELD_NAMES: [&str; FIELD_COUNT] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
];

const JOB_NUMBER: usize = 0;
const SUBMIT_TIME: usize = 1;
const WAIT_TIME: usize = 2;
const RUN_TIME: usize = 3;
const ALLOCATED_PROCESSORS: usize = 4;
const REQUESTED_PROCESSORS: usize = 7;
const REQUESTED_TIME: usize = 8;
const USER_ID: usize = 11;
const GROUP_ID: usize = 12;

/// Skip reason: the run time is unknown.
pub const SKIP_RUN_TIME_UNKNOWN: &str = "run time unknown (-1)";
/// Skip reason: the submit time is unknown.
pub const SKIP_SUBMIT_TIME_UNKNOWN: &str = "submit time unknown (-1)";
/// Skip reason: neither the requested nor the allocated processor count is > 0.
pub const SKIP_NO_PROCESSORS: &str = "no processor count";
/// Adjustment: a fractional processor count was rounded up.
pub const ADJUST_FRACTIONAL_PROCESSORS: &str = "fractional processor count rounded up";
/// A requested time over ten years (the scheduler's longest time limit) is taken as ten years.
pub const ADJUST_REQUESTED_TIME_CAPPED: &str = "requested time over ten years taken as ten years";
/// Adjustment: MaxProcs is not a multiple of MaxNodes, so cpu per node was rounded down.
pub const ADJUST_PROCS_NOT_DIVISIBLE: &str =
    "MaxProcs not divisible by MaxNodes: cpu per node rounded down";
/// Adjustment: MaxProcs < MaxNodes, so MaxNodes was ignored (MaxProcs nodes of 1 cpu).
pub const ADJUST_FEWER_PROCS_THAN_NODES: &str =
    "MaxProcs < MaxNodes: MaxNodes ignored, one node per processor";

/// Reads SWF text; `name` stands for the file in errors.
pub fn parse_swf(text: &str, name: &str) -> Result<Trace, TraceError> {
    let mut trace = Trace::new(TraceFormat::Swf);
    let mut max_nodes: Option<u64> = None;
    let mut max_procs: Option<u64> = None;
    let mut values = [0.0f64; FIELD_COUNT];
    for (index, raw_line) in text.lines().enumerate() {
        let line = index as u64 + 1;
        let content = raw_line.trim();
        if content.is_empty() {
            continue;
        }
        if let Some(comment) = content.strip_prefix(';') {
            if let Some((key, value)) = comment.split_once(':') {
                let key = key.trim();
                let slot = match key {
                    "MaxNodes" => &mut max_nodes,
                    "MaxProcs" => &mut max_procs,
                    _ => continue,
                };
                *slot = header_count(value.trim())
                    .map_err(|message| TraceError::at(name, line, Some(key), message))?;
            }
            continue;
        }
        let tokens: Vec<&str> = content.split_whitespace().collect();
        if tokens.len() != FIELD_COUNT {
            return Err(TraceError::at(
                name,
                line,
                None,
                format!(
                    "a job line has {FIELD_COUNT} fields, this one has {}",
                    tokens.len()
                ),
            ));
        }
        for (i, token) in tokens.iter().enumerate() {
            values[i] = token
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    TraceError::at(
                        name,
                        line,
                        Some(FIELD_NAMES[i]),
                        format!("{token:?} is not a number"),
                    )
                })?;
        }
        let time = |i: usize| -> Result<Option<u64>, TraceError> {
            if values[i] < 0.0 {
                return Ok(None);
            }
            seconds_to_ms(values[i]).map(Some).ok_or_else(|| {
                TraceError::at(
                    name,
                    line,
                    Some(FIELD_NAMES[i]),
                    format!("{} s is too large", tokens[i]),
                )
            })
        };
        let (submit, wait, run) = (time(SUBMIT_TIME)?, time(WAIT_TIME)?, time(RUN_TIME)?);
        let mut time_limit_ms = time(REQUESTED_TIME)?.filter(|&ms| ms > 0);
        // Some traces write "unlimited" as 2^31 - 1 s; the scheduler takes at most ten years.
        if let Some(t) = time_limit_ms.filter(|&t| t > fairsched_core::MAX_DURATION_MS) {
            time_limit_ms = Some(t.min(fairsched_core::MAX_DURATION_MS));
            trace.adjust(ADJUST_REQUESTED_TIME_CAPPED);
        }
        let Some(duration_ms) = run else {
            trace.skip(SKIP_RUN_TIME_UNKNOWN);
            continue;
        };
        let Some(submit_ms) = submit else {
            trace.skip(SKIP_SUBMIT_TIME_UNKNOWN);
            continue;
        };
        let processors = [REQUESTED_PROCESSORS, ALLOCATED_PROCESSORS]
            .into_iter()
            .find(|&i| values[i] > 0.0);
        let Some(processors) = processors else {
            trace.skip(SKIP_NO_PROCESSORS);
            continue;
        };
        let count = values[processors].ceil();
        if count > f64::from(u32::MAX) {
            return Err(TraceError::at(
                name,
                line,
                Some(FIELD_NAMES[processors]),
                format!("{} processors is too many", tokens[processors]),
            ));
        }
        if count != values[processors] {
            trace.adjust(ADJUST_FRACTIONAL_PROCESSORS);
        }
        trace.jobs.push(TraceJob {
            id: tokens[JOB_NUMBER].to_string(),
            line,
            submit_ms,
            duration_ms,
            user: id_name('u', values[USER_ID], tokens[USER_ID]),
            group: id_name('g', values[GROUP_ID], tokens[GROUP_ID]),
            width: count as u32,
            unit: Resources::ZERO.with(ResourceKind::Cpu, 1.0),
            trace_wait_ms: wait,
            time_limit_ms,
            tag_filter: None,
        });
    }
    trace.machine = machine(max_nodes, max_procs, &mut trace);
    trace.finish();
    Ok(trace)
}

/// A MaxNodes/MaxProcs value: a whole number; 0 or negative mean unknown (`Ok(None)`).
fn header_count(value: &str) -> Result<Option<u64>, String> {
    let n: i64 = value
        .parse()
        .map_err(|_| format!("header value {value:?} is not a whole number"))?;
    if n > i64::from(u32::MAX) {
        return Err(format!("header value {value} is too large"));
    }
    Ok(u64::try_from(n).ok().filter(|&n| n > 0))
}

/// `u12`, `g7`; `u?` when the id is unknown (negative). A whole id is written without decimals
/// (`12.0` → `u12`); another one as in the file.
fn id_name(prefix: char, value: f64, token: &str) -> String {
    if value < 0.0 {
        format!("{prefix}?")
    } else if value.fract() == 0.0 && value < 1e15 {
        format!("{prefix}{}", value as u64)
    } else {
        format!("{prefix}{token}")
    }
}

/// The machine the headers describe (see the module documentation).
fn machine(nodes: Option<u64>, procs: Option<u64>, trace: &mut Trace) -> Option<Vec<MachineGroup>> {
    let procs = procs?;
    let group = |count: u64, cpus: u64| -> Option<Vec<MachineGroup>> {
        Some(vec![MachineGroup {
            // Both header values are at most u32::MAX (checked when read).
            count: u32::try_from(count).ok()?,
            resources: Resources::ZERO
                .with(ResourceKind::Cpu, cpus as f64)
                .with(ResourceKind::UserSlots, cpus as f64),
            tags: Vec::new(),
        }])
    };
    match nodes {
        Some(nodes) if procs >= nodes => {
            if procs % nodes != 0 {
                trace.adjust(ADJUST_PROCS_NOT_DIVISIBLE);
            }
            group(nodes, procs / nodes)
        }
        Some(_) => {
            trace.adjust(ADJUST_FEWER_PROCS_THAN_NODES);
            group(procs, 1)
        }
        None => group(procs, 1),
    }
}
