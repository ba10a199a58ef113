//! Alibaba's GPU cluster trace (`alibaba/clusterdata`, `cluster-trace-gpu-v2023`).
//!
//! # Pods
//!
//! A CSV file with a header; columns are found by name, in any order, and extra columns are
//! ignored. The columns read (a missing one is an error naming it; `pod_phase` is not used):
//!
//! | column | used as |
//! |--------|---------|
//! | `name` | [`TraceJob::id`] |
//! | `cpu_milli` | cpu of the unit: `cpu_milli / 1000`, rounded **up** to the scheduler's 0.01 (counted in [`Trace::adjusted`] when that changes it) |
//! | `memory_mib` | memory of the unit, in bytes (`memory_mib × 2^20`) |
//! | `num_gpu` | gpu of the unit (a whole number) |
//! | `gpu_milli` | with `num_gpu` ≥ 1 and `0 < gpu_milli < 1000`, the pod shares a GPU: gpu is an integer resource, so it gets whole GPUs (counted in [`Trace::adjusted`]); ignored otherwise |
//! | `gpu_spec` | allowed GPU models, `A\|B` → [`TraceJob::tag_filter`] `A \| B` (each model must be a valid tag); only for pods with GPUs, as the trace's own tooling does |
//! | `qos` | [`TraceJob::user`] and [`TraceJob::group`], lowercased (`ls`, `be`, `burstable`, `guaranteed`; `?` if empty) |
//! | `creation_time` | [`TraceJob::submit_ms`] (seconds in the file) |
//! | `scheduled_time` | start in the trace: [`TraceJob::trace_wait_ms`] = scheduled − creation; empty: skipped "never scheduled" |
//! | `deletion_time` | end in the trace: [`TraceJob::duration_ms`] = deletion − scheduled; empty: skipped "still running at the end of the trace" |
//!
//! Every pod is one unit ([`TraceJob::width`] 1) without user slots. Numbers may be
//! decimals; negative numbers, `deletion_time < scheduled_time` and
//! `scheduled_time < creation_time` are errors naming line and column. An empty text column,
//! or `nan` (how pandas writes a missing value), means absent.
//!
//! Note that pods still running when the trace was cut have the trace's end as
//! `deletion_time`, so their durations are truncated there.
//!
//! # Nodes
//!
//! The node list (`sn,cpu_milli,memory_mib,gpu,model`; `sn` is not used) gives
//! [`Trace::machine`]: nodes with identical (cpu, memory, gpu, model) form one
//! [`MachineGroup`], in order of first appearance, tagged with the model when there is one
//! (it must be a valid tag: letters, digits and `_ - . / :`, as in tag filters; anything else is
//! an error rather than a silently renamed tag that `gpu_spec` filters would then miss). Node
//! cpu is rounded **down** to 0.01 (counted). Every node gets
//! [`NODE_USER_SLOTS`] user slots: Kubernetes does not limit pods by slots, so the number only
//! needs to be larger than any node's pod count.

use super::{MachineGroup, Trace, TraceError, TraceFormat, TraceJob, seconds_to_ms};
use fairsched_config::TagFilter;
use fairsched_resources::{ResourceKind, Resources};
use std::collections::{BTreeSet, HashMap};

/// User slots of every node of the node list (pods are not slot-limited in Kubernetes).
pub const NODE_USER_SLOTS: u32 = 256;

/// Skip reason: the pod has no `scheduled_time`.
pub const SKIP_NEVER_SCHEDULED: &str = "never scheduled";
/// Skip reason: the pod has no `deletion_time`.
pub const SKIP_STILL_RUNNING: &str = "still running at the end of the trace";
/// Adjustment: a pod sharing one GPU (`gpu_milli < 1000`) needs a whole GPU.
pub const ADJUST_FRACTIONAL_GPU: &str = "fractional GPU rounded up to 1";
/// Adjustment: a multi-GPU pod with `gpu_milli < 1000` gets whole GPUs.
pub const ADJUST_FRACTIONAL_GPUS: &str = "fractional GPUs of a multi-GPU pod rounded up";
/// Adjustment: pod cpu rounded up to 0.01.
pub const ADJUST_CPU_ROUNDED_UP: &str = "cpu rounded up to 0.01";
/// Adjustment: `gpu_spec` of a pod that needs no GPU ignored.
pub const ADJUST_GPU_SPEC_WITHOUT_GPU: &str = "gpu_spec of a pod without GPU ignored";
/// Adjustment: node cpu rounded down to 0.01.
pub const ADJUST_NODE_CPU_ROUNDED_DOWN: &str = "node cpu rounded down to 0.01";

/// Pod list columns, in the order of [`POD_COLUMNS`].
const NAME: usize = 0;
const CPU_MILLI: usize = 1;
const MEMORY_MIB: usize = 2;
const NUM_GPU: usize = 3;
const GPU_MILLI: usize = 4;
const GPU_SPEC: usize = 5;
const QOS: usize = 6;
const CREATION_TIME: usize = 7;
const DELETION_TIME: usize = 8;
const SCHEDULED_TIME: usize = 9;

/// The pod list columns read.
pub const POD_COLUMNS: [&str; 10] = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// The node list columns read, in this order.
pub const NODE_COLUMNS: [&str; 4] = ["cpu_milli", "memory_mib", "gpu", "model"];

/// Reads a pod list; `name` stands for the file in errors. `nodes`: the node list's text and
/// file name, if any (it gives [`Trace::machine`]).
pub fn parse_alibaba(
    pods: &str,
    name: &str,
    nodes: Option<(&str, &str)>,
) -> Result<Trace, TraceError> {
    let mut trace = Trace::new(TraceFormat::AlibabaGpu);
    let mut table = Table::new(pods, name, &POD_COLUMNS)?;
    while let Some(row) = table.next_row()? {
        let cpu_milli = row.number(CPU_MILLI)?;
        let memory_mib = row.number(MEMORY_MIB)?;
        let num_gpu = row.whole(NUM_GPU)?;
        let gpu_milli = row.number(GPU_MILLI)?;
        let creation = row
            .seconds(CREATION_TIME)?
            .ok_or_else(|| row.error(CREATION_TIME, "empty"))?;
        let scheduled = row.seconds(SCHEDULED_TIME)?;
        let deletion = row.seconds(DELETION_TIME)?;
        if let Some(scheduled) = scheduled {
            if scheduled < creation {
                return Err(row.error(SCHEDULED_TIME, "before creation_time"));
            }
            if deletion.is_some_and(|deletion| deletion < scheduled) {
                return Err(row.error(DELETION_TIME, "before scheduled_time"));
            }
        }
        let tag_filter = gpu_filter(row.text(GPU_SPEC)).map_err(|m| row.error(GPU_SPEC, m))?;

        let Some(scheduled) = scheduled else {
            trace.skip(SKIP_NEVER_SCHEDULED);
            continue;
        };
        let Some(deletion) = deletion else {
            trace.skip(SKIP_STILL_RUNNING);
            continue;
        };

        let mut unit = Resources::ZERO;
        let hundredths = cpu_milli / 10.0;
        if hundredths.ceil() != hundredths {
            trace.adjust(ADJUST_CPU_ROUNDED_UP);
        }
        unit.set_raw(
            ResourceKind::Cpu,
            row.fit(CPU_MILLI, ResourceKind::Cpu, hundredths.ceil())?,
        );
        unit.set_raw(
            ResourceKind::Memory,
            row.fit(
                MEMORY_MIB,
                ResourceKind::Memory,
                (memory_mib * 1048576.0).round(),
            )?,
        );
        unit.set_raw(
            ResourceKind::Gpu,
            row.fit(NUM_GPU, ResourceKind::Gpu, num_gpu)?,
        );
        if num_gpu >= 1.0 && gpu_milli > 0.0 && gpu_milli < 1000.0 {
            trace.adjust(if num_gpu == 1.0 {
                ADJUST_FRACTIONAL_GPU
            } else {
                ADJUST_FRACTIONAL_GPUS
            });
        }
        let tag_filter = match tag_filter {
            Some(_) if num_gpu == 0.0 => {
                trace.adjust(ADJUST_GPU_SPEC_WITHOUT_GPU);
                None
            }
            filter => filter,
        };
        let qos = match row.text(QOS) {
            "" => "?".to_string(),
            qos => qos.to_lowercase(),
        };
        trace.jobs.push(TraceJob {
            id: row.text(NAME).to_string(),
            line: row.line,
            submit_ms: creation,
            duration_ms: deletion - scheduled,
            user: qos.clone(),
            group: qos,
            width: 1,
            unit,
            trace_wait_ms: Some(scheduled - creation),
            time_limit_ms: None,
            tag_filter,
        });
    }
    if let Some((text, file)) = nodes {
        trace.machine = Some(parse_nodes(text, file, &mut trace)?);
    }
    trace.finish();
    Ok(trace)
}

/// Reads the node list into groups of identical nodes, in order of first appearance.
fn parse_nodes(text: &str, name: &str, trace: &mut Trace) -> Result<Vec<MachineGroup>, TraceError> {
    let mut groups: Vec<MachineGroup> = Vec::new();
    let mut index: HashMap<(Resources, Vec<String>), usize> = HashMap::new();
    let mut table = Table::new(text, name, &NODE_COLUMNS)?;
    while let Some(row) = table.next_row()? {
        let cpu_milli = row.number(0)?;
        let memory_mib = row.number(1)?;
        let gpu = row.whole(2)?;
        let model = row.text(3);
        let mut resources = Resources::ZERO;
        let hundredths = cpu_milli / 10.0;
        if hundredths.floor() != hundredths {
            trace.adjust(ADJUST_NODE_CPU_ROUNDED_DOWN);
        }
        resources.set_raw(
            ResourceKind::Cpu,
            row.fit(0, ResourceKind::Cpu, hundredths.floor())?,
        );
        resources.set_raw(
            ResourceKind::Memory,
            row.fit(1, ResourceKind::Memory, (memory_mib * 1048576.0).floor())?,
        );
        resources.set_raw(ResourceKind::Gpu, row.fit(2, ResourceKind::Gpu, gpu)?);
        resources.set_raw(ResourceKind::UserSlots, i64::from(NODE_USER_SLOTS));
        let tags = if model.is_empty() {
            Vec::new()
        } else if is_tag(model) {
            vec![model.to_string()]
        } else {
            return Err(row.error(
                3,
                format!("GPU model {model:?} is not a valid tag ({TAG_SYNTAX})"),
            ));
        };
        let key = (resources, tags);
        match index.get(&key) {
            Some(&i) => {
                groups[i].count = groups[i].count.checked_add(1).ok_or_else(|| {
                    TraceError::file(name, "more than 4294967295 identical nodes")
                })?;
            }
            None => {
                index.insert(key.clone(), groups.len());
                groups.push(MachineGroup {
                    count: 1,
                    resources: key.0,
                    tags: key.1,
                });
            }
        }
    }
    if groups.is_empty() {
        return Err(TraceError::file(name, "the node list has no nodes"));
    }
    Ok(groups)
}

/// What a tag may contain, for messages.
const TAG_SYNTAX: &str = "tags are words of letters, digits and _ - . / :";

/// Whether `text` is one tag as tag filters accept it: it parses as a filter that matches a
/// node with exactly that tag and no node without tags (so not `!a`, `a|b`, `(a)`, ...).
fn is_tag(text: &str) -> bool {
    TagFilter::parse(text).is_ok_and(|f| {
        f.matches(&BTreeSet::from([text.to_string()])) && !f.matches(&BTreeSet::new())
    })
}

/// The tag filter of a `gpu_spec` (`"A|B"` → `"A | B"`; empty → None). Empty alternatives are
/// dropped (`"A||B"` is `A | B`); every model must be a valid tag.
fn gpu_filter(spec: &str) -> Result<Option<String>, String> {
    let models: Vec<&str> = spec
        .split('|')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    if models.is_empty() {
        return Ok(None);
    }
    if let Some(bad) = models.iter().find(|m| !is_tag(m)) {
        return Err(format!(
            "GPU model {bad:?} is not a valid tag ({TAG_SYNTAX})"
        ));
    }
    let filter = models.join(" | ");
    TagFilter::parse(&filter).map_err(|e| e.to_string())?;
    Ok(Some(filter))
}

/// A CSV file read row by row, with the wanted columns located by header name.
struct Table<'a> {
    reader: csv::Reader<&'a [u8]>,
    file: &'a str,
    /// Position of each wanted column in a record.
    positions: Vec<usize>,
    names: &'a [&'a str],
    record: csv::StringRecord,
}

impl<'a> Table<'a> {
    /// Reads the header; every one of `names` must be in it.
    fn new(text: &'a str, file: &'a str, names: &'a [&'a str]) -> Result<Table<'a>, TraceError> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let header = reader.headers().map_err(|e| csv_error(file, e))?.clone();
        if header.iter().all(str::is_empty) {
            return Err(TraceError::file(
                file,
                format!("empty file (expected a header: {})", names.join(",")),
            ));
        }
        let positions: Vec<Option<usize>> = names
            .iter()
            .map(|&wanted| header.iter().position(|h| h == wanted))
            .collect();
        let missing: Vec<&str> = names
            .iter()
            .zip(&positions)
            .filter(|(_, p)| p.is_none())
            .map(|(&n, _)| n)
            .collect();
        if !missing.is_empty() {
            let found: Vec<&str> = header.iter().collect();
            return Err(TraceError::at(
                file,
                1,
                None,
                format!(
                    "missing column{} {} (the header has: {})",
                    if missing.len() > 1 { "s" } else { "" },
                    missing.join(", "),
                    found.join(", ")
                ),
            ));
        }
        let positions = positions.into_iter().flatten().collect();
        Ok(Table {
            reader,
            file,
            positions,
            names,
            record: csv::StringRecord::new(),
        })
    }

    /// The next row, None at the end.
    fn next_row(&mut self) -> Result<Option<Row<'_, 'a>>, TraceError> {
        if !self
            .reader
            .read_record(&mut self.record)
            .map_err(|e| csv_error(self.file, e))?
        {
            return Ok(None);
        }
        let line = self.record.position().map_or(0, |p| p.line());
        Ok(Some(Row { table: self, line }))
    }
}

/// One CSV row; columns are indexes into the table's wanted names.
struct Row<'t, 'a> {
    table: &'t Table<'a>,
    line: u64,
}

impl Row<'_, '_> {
    /// An error about `column` on this row.
    fn error(&self, column: usize, message: impl Into<String>) -> TraceError {
        TraceError::at(
            self.table.file,
            self.line,
            Some(self.table.names[column]),
            message,
        )
    }

    /// The text of `column`, trimmed; `nan` (pandas' missing value) reads as empty.
    fn text(&self, column: usize) -> &str {
        let text = self
            .table
            .record
            .get(self.table.positions[column])
            .unwrap_or("");
        if text.eq_ignore_ascii_case("nan") {
            ""
        } else {
            text
        }
    }

    /// A number ≥ 0, None when empty.
    fn optional_number(&self, column: usize) -> Result<Option<f64>, TraceError> {
        let text = self.text(column);
        if text.is_empty() {
            return Ok(None);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            Ok(v) if v < 0.0 => Err(self.error(column, format!("{text} is negative"))),
            _ => Err(self.error(column, format!("{text:?} is not a number"))),
        }
    }

    /// A number ≥ 0, required.
    fn number(&self, column: usize) -> Result<f64, TraceError> {
        self.optional_number(column)?
            .ok_or_else(|| self.error(column, "empty"))
    }

    /// A whole number ≥ 0, required.
    fn whole(&self, column: usize) -> Result<f64, TraceError> {
        let v = self.number(column)?;
        if v.fract() != 0.0 {
            return Err(self.error(column, format!("{v} is not a whole number")));
        }
        Ok(v)
    }

    /// Seconds as ms, None when empty.
    fn seconds(&self, column: usize) -> Result<Option<u64>, TraceError> {
        self.optional_number(column)?
            .map(|s| {
                seconds_to_ms(s).ok_or_else(|| self.error(column, format!("{s} s is too large")))
            })
            .transpose()
    }

    /// A raw amount of `kind` computed from `column`, if the scheduler can hold it.
    fn fit(&self, column: usize, kind: ResourceKind, raw: f64) -> Result<i64, TraceError> {
        let max = Resources::infinite().raw_of(kind);
        if raw > max as f64 {
            return Err(self.error(column, format!("{} is too large", self.text(column))));
        }
        Ok(raw as i64)
    }
}

/// A CSV reading error (uneven rows, bad UTF-8) with its line.
fn csv_error(file: &str, e: csv::Error) -> TraceError {
    let line = e.position().map(|p| p.line());
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("the header has {expected_len} columns, this row has {len}"),
        csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8 text: {err}"),
        _ => e.to_string(),
    };
    TraceError {
        file: file.to_string(),
        line,
        field: None,
        message,
    }
}
