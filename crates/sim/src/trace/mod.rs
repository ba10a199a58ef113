//! Workload traces to replay (`fairsched simulate --trace FILE [--format swf|alibaba-gpu]`):
//! reading them into jobs in submission order, plus what the trace says about the machine.
//!
//! * [`TraceFormat::Swf`]: the Standard Workload Format of the Parallel Workloads Archive
//!   (`*.swf`, or gzip-compressed `*.swf.gz`), read by [`parse_swf`]; see [`swf`] for the field
//!   mapping.
//! * [`TraceFormat::AlibabaGpu`]: the pod list of Alibaba's GPU cluster trace
//!   (`cluster-trace-gpu-v2023`, `openb_pod_list_*.csv`), with the node list
//!   `openb_node_list_all_node.csv` when it lies beside the pod file, read by
//!   [`parse_alibaba`]; see [`alibaba`] for the column mapping.
//!
//! [`load`] reads a file (gzip-compressed content is recognised by its first bytes, whatever
//! the name) and picks the format from the file name unless one is given. Every trace becomes
//! a [`Trace`]: the replayable jobs sorted by submission time (ties in file order), with times
//! in milliseconds relative to the first submission, and counts of the records left out
//! ([`Trace::skipped`]) and of the values changed to fit the scheduler's resource model
//! ([`Trace::adjusted`]), by reason, so that a summary can say what was not replayed as is.
//! A record that cannot be read at all is an error ([`TraceError`]) naming file, line and field.

pub mod alibaba;
pub mod swf;

pub use alibaba::parse_alibaba;
pub use swf::parse_swf;

use fairsched_resources::Resources;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

/// Trace file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Standard Workload Format (Parallel Workloads Archive), optionally gzip-compressed.
    Swf,
    /// Alibaba GPU cluster trace (`cluster-trace-gpu-v2023`): pod list CSV, node list beside it.
    AlibabaGpu,
}

impl TraceFormat {
    /// Every format, in the order they are listed to users.
    pub const ALL: [TraceFormat; 2] = [TraceFormat::Swf, TraceFormat::AlibabaGpu];

    /// The name accepted by [`FromStr`] (`--format`): `swf`, `alibaba-gpu`.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Swf => "swf",
            TraceFormat::AlibabaGpu => "alibaba-gpu",
        }
    }

    /// The format a file name implies: `*.swf` and `*.swf.gz` are SWF, `*.csv` is the Alibaba
    /// GPU trace (case-insensitive); anything else is `None`.
    pub fn detect(path: &Path) -> Option<TraceFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".swf") || name.ends_with(".swf.gz") {
            Some(TraceFormat::Swf)
        } else if name.ends_with(".csv") {
            Some(TraceFormat::AlibabaGpu)
        } else {
            None
        }
    }

    /// The accepted names, for messages: `swf, alibaba-gpu`.
    fn names() -> String {
        TraceFormat::ALL.map(TraceFormat::name).join(", ")
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    /// A message naming the value and listing the accepted names.
    type Err = String;

    fn from_str(s: &str) -> Result<TraceFormat, String> {
        TraceFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown trace format {s:?} (accepted: {})",
                    TraceFormat::names()
                )
            })
    }
}

/// A trace read into replayable jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The format it was read as.
    pub format: TraceFormat,
    /// Jobs in submission order (by submit_ms, ties in file order).
    pub jobs: Vec<TraceJob>,
    /// Records not replayed, by reason (e.g. "run time unknown (-1)": 12), so a summary can say
    /// what was left out.
    pub skipped: BTreeMap<String, u64>,
    /// Adjustments made while reading, by kind (e.g. "fractional GPU rounded up to 1": 310).
    pub adjusted: BTreeMap<String, u64>,
    /// What the trace says about the machine, if anything (None: the user must give --nodes).
    pub machine: Option<Vec<MachineGroup>>,
}

impl Trace {
    /// An empty trace of `format`, to fill while reading.
    fn new(format: TraceFormat) -> Trace {
        Trace {
            format,
            jobs: Vec::new(),
            skipped: BTreeMap::new(),
            adjusted: BTreeMap::new(),
            machine: None,
        }
    }

    /// Counts one record left out for `reason`.
    fn skip(&mut self, reason: &str) {
        *self.skipped.entry(reason.to_string()).or_default() += 1;
    }

    /// Counts one adjustment of `kind`.
    fn adjust(&mut self, kind: &str) {
        *self.adjusted.entry(kind.to_string()).or_default() += 1;
    }

    /// Number of records left out, all reasons together.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }

    /// Sorts the jobs by submission time (stable: ties keep file order) and makes the times
    /// relative to the earliest submission, which the readers store as absolute ms.
    fn finish(&mut self) {
        self.jobs.sort_by_key(|j| j.submit_ms);
        if let Some(first) = self.jobs.first().map(|j| j.submit_ms) {
            for job in &mut self.jobs {
                job.submit_ms -= first;
            }
        }
    }
}

/// `count` identical nodes of the traced machine.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineGroup {
    /// Number of nodes.
    pub count: u32,
    /// Resources of one node.
    pub resources: Resources,
    /// Tags of every node of the group.
    pub tags: Vec<String>,
}

/// One job of a trace, ready to replay.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    /// The trace's own id: SWF job number ("1234"), Alibaba pod name.
    pub id: String,
    /// 1-based line of the record in the file.
    pub line: u64,
    /// Submission time in ms, relative to the earliest submission in the trace (so the first job
    /// is at 0).
    pub submit_ms: u64,
    /// How long the job ran in the trace, ms.
    pub duration_ms: u64,
    /// SWF: `u<user id>` (`u?` when -1); Alibaba: the pod's qos lowercased ("ls", "be", ...).
    pub user: String,
    /// SWF: `g<group id>` (`g?` when -1); Alibaba: the qos as well.
    pub group: String,
    /// Number of identical units the job needs at once: SWF processors; Alibaba 1.
    pub width: u32,
    /// Resources of one unit. SWF: `cpu 1` and nothing else (the SWF memory fields are left
    /// out: they are per processor, often unknown, and in KB of uncertain meaning). Alibaba: the
    /// pod's cpu, memory and gpu (see [`alibaba`]).
    pub unit: Resources,
    /// How long the job waited in the trace (SWF wait time; Alibaba scheduled_time −
    /// creation_time), for comparison; None when unknown.
    pub trace_wait_ms: Option<u64>,
    /// The job's time limit as its user requested it (SWF requested time, when > 0); the
    /// replay passes it to the scheduler for backfill. None when unknown (Alibaba).
    pub time_limit_ms: Option<u64>,
    /// Tag expression a node must match (Alibaba gpu_spec: allowed GPU models, "A|B" → the
    /// filter "A | B"); None otherwise.
    pub tag_filter: Option<String>,
}

/// Why a trace could not be read: `FILE:LINE: field NAME: MESSAGE`, the parts present only
/// when known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct TraceError {
    /// The file (as given, or the name passed to the `parse_*` functions).
    pub file: String,
    /// 1-based line, when the problem is on one line.
    pub line: Option<u64>,
    /// The field or column (SWF field name such as "run time", CSV column, header key).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl TraceError {
    /// An error about the whole file.
    fn file(file: &str, message: impl Into<String>) -> TraceError {
        TraceError {
            file: file.to_string(),
            line: None,
            field: None,
            message: message.into(),
        }
    }

    /// An error on one line, about one field if given.
    fn at(file: &str, line: u64, field: Option<&str>, message: impl Into<String>) -> TraceError {
        TraceError {
            file: file.to_string(),
            line: Some(line),
            field: field.map(str::to_string),
            message: message.into(),
        }
    }

    fn render(&self) -> String {
        let mut s = self.file.clone();
        if let Some(line) = self.line {
            s.push_str(&format!(":{line}"));
        }
        s.push_str(": ");
        if let Some(field) = &self.field {
            s.push_str(&format!("field {field}: "));
        }
        s.push_str(&self.message);
        s
    }
}

/// Name of the node list `load` looks for beside an Alibaba pod file.
pub const ALIBABA_NODE_LIST: &str = "openb_node_list_all_node.csv";

/// Reads a trace. `format` None: detected from the file name, error if it cannot be.
///
/// gzip-compressed content (recognised by its magic bytes) is decompressed first, for either
/// format. For the Alibaba format, the node list [`ALIBABA_NODE_LIST`] is read from the pod
/// file's directory when it exists (it gives [`Trace::machine`]); otherwise the machine is
/// unknown.
pub fn load(path: &Path, format: Option<TraceFormat>) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let format = match format.or_else(|| TraceFormat::detect(path)) {
        Some(f) => f,
        None => {
            return Err(TraceError::file(
                &name,
                format!(
                    "cannot tell the trace format from the file name (*.swf, *.swf.gz: swf; \
                     *.csv: alibaba-gpu); give the format ({})",
                    TraceFormat::names()
                ),
            ));
        }
    };
    let text = read_text(path)?;
    match format {
        TraceFormat::Swf => parse_swf(&text, &name),
        TraceFormat::AlibabaGpu => {
            let nodes_path = path.parent().map_or_else(
                || Path::new(ALIBABA_NODE_LIST).to_path_buf(),
                |dir| dir.join(ALIBABA_NODE_LIST),
            );
            let nodes = if nodes_path.is_file() && !same_file(path, &nodes_path) {
                Some((read_text(&nodes_path)?, nodes_path.display().to_string()))
            } else {
                None
            };
            parse_alibaba(
                &text,
                &name,
                nodes.as_ref().map(|(t, n)| (t.as_str(), n.as_str())),
            )
        }
    }
}

/// Whether two paths name the same file (so that the node list given as the trace is not read
/// twice as its own node list).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The whole file as text, gunzipped if it starts with the gzip magic bytes. Bytes that are not
/// UTF-8 (a comment in Latin-1) become U+FFFD rather than an error.
fn read_text(path: &Path) -> Result<String, TraceError> {
    let name = path.display().to_string();
    let io = |e: std::io::Error| TraceError::file(&name, format!("cannot read: {e}"));
    let raw = std::fs::read(path).map_err(io)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 8);
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| TraceError::file(&name, format!("cannot decompress (gzip): {e}")))?;
        out
    } else {
        raw
    };
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Converts seconds (possibly fractional) to whole milliseconds, rounding to the nearest;
/// None when negative, not finite, or too large to be a time.
fn seconds_to_ms(seconds: f64) -> Option<u64> {
    // 2^53 ms is about 285,000 years: beyond it a trace is corrupt, not long.
    const MAX_MS: f64 = 9_007_199_254_740_992.0;
    let ms = (seconds * 1000.0).round();
    (ms.is_finite() && (0.0..=MAX_MS).contains(&ms)).then_some(ms as u64)
}
