//! What `fairsched simulate` writes: `summary.json` (the replay in figures) and `jobs.csv`
//! (one row per trace job).

use super::{JobRecord, JobState, ReplayReport};
use crate::trace::{MachineGroup, Trace};
use fairsched_resources::{ResourceKind, Resources};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Distribution of a quantity over jobs (seconds, or a ratio).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    /// Nearest-rank percentiles of `values` (any order).
    pub fn of(mut values: Vec<f64>) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let rank = |p: f64| {
            let r = ((p * n as f64).ceil() as usize).clamp(1, n);
            values[r - 1]
        };
        Distribution {
            count: n as u64,
            mean: values.iter().sum::<f64>() / n as f64,
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: values[n - 1],
        }
    }
}

/// Bounded slowdown's lower bound on run time (s): jobs shorter than this count as this long,
/// so that very short jobs do not dominate (the usual 10 s of the literature).
pub const SLOWDOWN_BOUND_S: f64 = 10.0;

#[derive(Debug, Serialize)]
pub struct TraceSummary {
    pub file: String,
    pub format: &'static str,
    /// Records read as jobs.
    pub jobs: u64,
    /// Records the reader left out, by reason.
    pub skipped_by_reader: BTreeMap<String, u64>,
    /// Adjustments the reader made, by kind.
    pub adjusted: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
pub struct NodesSummary {
    pub count: u64,
    pub groups: Vec<NodeGroupSummary>,
    pub total_resources: Resources,
}

#[derive(Debug, Serialize)]
pub struct NodeGroupSummary {
    pub count: u32,
    pub resources: Resources,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct JobCounts {
    /// Jobs of the trace this replay covered (all, or the first `--limit`).
    pub replayed: u64,
    pub completed: u64,
    pub unfinished: u64,
    pub failed: u64,
    pub skipped: u64,
    pub skipped_by_reason: BTreeMap<String, u64>,
    pub failed_by_reason: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
pub struct GroupSummary {
    pub jobs: u64,
    pub completed: u64,
    pub wait_s: Distribution,
}

#[derive(Debug, Serialize)]
pub struct SchedulerSummary {
    pub placements: u64,
    pub preemptions: u64,
    pub heartbeats: u64,
    pub fair_share_updates: u64,
    pub fair_share_update_period_ms: u64,
    /// Instants of virtual time the replay visited.
    pub instants: u64,
}

/// `summary.json`.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub trace: TraceSummary,
    pub policy: String,
    /// `malleable` (a job's allocations start as nodes free up) or `rigid` (all at once).
    pub job_model: &'static str,
    pub nodes: NodesSummary,
    pub jobs: JobCounts,
    /// Submission to first start, completed jobs.
    pub wait_s: Distribution,
    /// Submission to finish, completed jobs.
    pub response_s: Distribution,
    /// `max(1, response / max(run time, 10 s))`, completed jobs.
    pub bounded_slowdown: Distribution,
    /// The wait times the trace itself records, for the same completed jobs.
    pub trace_wait_s: Distribution,
    /// Virtual time from the first submission to the last instant, s.
    pub makespan_s: f64,
    /// Share of the cluster's cpu (gpu when it has GPUs) that completed jobs used over the
    /// makespan (work lost to preemption not counted).
    pub utilization: f64,
    pub by_group: BTreeMap<String, GroupSummary>,
    pub scheduler: SchedulerSummary,
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Builds the summary of a replay of `trace` (read from `file`).
pub fn summary(trace: &Trace, file: &str, report: &ReplayReport) -> Summary {
    let mut counts = JobCounts {
        replayed: report.records.len() as u64,
        ..JobCounts::default()
    };
    let (mut waits, mut responses, mut slowdowns, mut trace_waits) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut groups: BTreeMap<String, (u64, u64, Vec<f64>)> = BTreeMap::new();
    let measured = if report.total_resources.raw_of(ResourceKind::Gpu) > 0 {
        ResourceKind::Gpu
    } else {
        ResourceKind::Cpu
    };
    let mut work = 0.0;
    for record in &report.records {
        let job = &trace.jobs[record.job];
        let group = groups.entry(job.group.clone()).or_default();
        group.0 += 1;
        match &record.state {
            JobState::Completed => counts.completed += 1,
            JobState::Unfinished => counts.unfinished += 1,
            JobState::Failed(reason) => {
                counts.failed += 1;
                *counts.failed_by_reason.entry(reason.clone()).or_default() += 1;
            }
            JobState::Skipped(reason) => {
                counts.skipped += 1;
                *counts.skipped_by_reason.entry(reason.clone()).or_default() += 1;
            }
        }
        if record.state != JobState::Completed {
            continue;
        }
        group.1 += 1;
        let (Some(start), Some(finish)) = (record.first_start_ms, record.finish_ms) else {
            continue;
        };
        let wait = seconds(start.saturating_sub(job.submit_ms));
        let response = seconds(finish.saturating_sub(job.submit_ms));
        let run = seconds(job.duration_ms);
        waits.push(wait);
        group.2.push(wait);
        responses.push(response);
        slowdowns.push((response / run.max(SLOWDOWN_BOUND_S)).max(1.0));
        if let Some(w) = job.trace_wait_ms {
            trace_waits.push(seconds(w));
        }
        work += job.unit.get(measured) * f64::from(job.width) * run;
    }
    let makespan_s = seconds(report.end_ms);
    let capacity = report.total_resources.get(measured) * makespan_s;
    Summary {
        trace: TraceSummary {
            file: file.to_string(),
            format: trace.format.name(),
            jobs: trace.jobs.len() as u64,
            skipped_by_reader: trace.skipped.clone(),
            adjusted: trace.adjusted.clone(),
        },
        policy: report.policy.clone(),
        job_model: report.job_model,
        nodes: NodesSummary {
            count: report.nodes.iter().map(|g| u64::from(g.count)).sum(),
            groups: report.nodes.iter().map(group_summary).collect(),
            total_resources: report.total_resources,
        },
        jobs: counts,
        wait_s: Distribution::of(waits),
        response_s: Distribution::of(responses),
        bounded_slowdown: Distribution::of(slowdowns),
        trace_wait_s: Distribution::of(trace_waits),
        makespan_s,
        utilization: if capacity > 0.0 { work / capacity } else { 0.0 },
        by_group: groups
            .into_iter()
            .map(|(name, (jobs, completed, waits))| {
                (
                    name,
                    GroupSummary {
                        jobs,
                        completed,
                        wait_s: Distribution::of(waits),
                    },
                )
            })
            .collect(),
        scheduler: SchedulerSummary {
            placements: report.stats.placements,
            preemptions: report.stats.preemptions,
            heartbeats: report.stats.heartbeats,
            fair_share_updates: report.stats.fair_share_updates,
            fair_share_update_period_ms: report.fair_share_update_period_ms,
            instants: report.stats.instants,
        },
    }
}

fn group_summary(g: &MachineGroup) -> NodeGroupSummary {
    NodeGroupSummary {
        count: g.count,
        resources: g.resources,
        tags: g.tags.clone(),
    }
}

/// One row of `jobs.csv`.
#[derive(Debug, Serialize)]
struct JobRow<'a> {
    id: &'a str,
    line: u64,
    user: &'a str,
    group: &'a str,
    pool: &'a str,
    submit_s: f64,
    width: u32,
    allocations: u32,
    run_s: f64,
    state: &'static str,
    first_start_s: Option<f64>,
    finish_s: Option<f64>,
    wait_s: Option<f64>,
    response_s: Option<f64>,
    trace_wait_s: Option<f64>,
    preemptions: u32,
    reason: &'a str,
}

/// `jobs.csv`, written as the replay goes: a row per job once its outcome is final (completed,
/// failed or skipped; the unfinished at the end), in that order. Rows go to
/// `jobs.csv.partial`, created at the first row, and [`JobsCsv::finish`] renames it to
/// `jobs.csv`: a replay stopped before the end leaves the jobs it had finished in
/// `jobs.csv.partial`, and never a `jobs.csv` that looks whole.
#[derive(Debug)]
pub struct JobsCsv {
    path: std::path::PathBuf,
    writer: Option<csv::Writer<std::fs::File>>,
    rows: u64,
}

impl JobsCsv {
    /// The name rows are written to until the replay ends.
    pub const PARTIAL: &'static str = "jobs.csv.partial";

    /// `jobs.csv` in `dir` (created with the first row if it does not exist).
    pub fn new(dir: &Path) -> JobsCsv {
        JobsCsv {
            path: dir.to_path_buf(),
            writer: None,
            rows: 0,
        }
    }

    /// The file rows are written to while the replay goes on.
    pub fn partial_path(&self) -> std::path::PathBuf {
        self.path.join(Self::PARTIAL)
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes `record`'s row.
    pub fn write(&mut self, trace: &Trace, record: &JobRecord) -> Result<(), String> {
        let partial = self.partial_path();
        let failed = |e: &dyn std::fmt::Display| format!("{}: {e}", partial.display());
        let writer = match &mut self.writer {
            Some(w) => w,
            None => {
                std::fs::create_dir_all(&self.path)
                    .map_err(|e| format!("{}: {e}", self.path.display()))?;
                self.writer
                    .insert(csv::Writer::from_path(&partial).map_err(|e| failed(&e))?)
            }
        };
        writer
            .serialize(job_row(trace, record))
            .map_err(|e| failed(&e))?;
        self.rows += 1;
        Ok(())
    }

    /// Writes out what is buffered, so a replay stopped now leaves its rows so far.
    pub fn flush(&mut self) -> Result<(), String> {
        match &mut self.writer {
            Some(w) => w
                .flush()
                .map_err(|e| format!("{}: {e}", self.partial_path().display())),
            None => Ok(()),
        }
    }

    /// Flushes the rows and renames the file to `jobs.csv` (written with its header only when
    /// the replay had no job).
    pub fn finish(mut self) -> Result<std::path::PathBuf, String> {
        let partial = self.partial_path();
        let done = self.path.join("jobs.csv");
        match self.writer.take() {
            Some(mut w) => w
                .flush()
                .map_err(|e| format!("{}: {e}", partial.display()))?,
            None => {
                std::fs::create_dir_all(&self.path)
                    .map_err(|e| format!("{}: {e}", self.path.display()))?;
                std::fs::write(&partial, format!("{}\n", JOBS_CSV_HEADER))
                    .map_err(|e| format!("{}: {e}", partial.display()))?;
            }
        }
        std::fs::rename(&partial, &done)
            .map_err(|e| format!("{} -> {}: {e}", partial.display(), done.display()))?;
        Ok(done)
    }
}

/// `jobs.csv`'s first line (the fields of [`JobRow`]).
const JOBS_CSV_HEADER: &str = "id,line,user,group,pool,submit_s,width,allocations,run_s,state,\
first_start_s,finish_s,wait_s,response_s,trace_wait_s,preemptions,reason";

fn job_row<'a>(trace: &'a Trace, record: &'a JobRecord) -> JobRow<'a> {
    let job = &trace.jobs[record.job];
    let reason = match &record.state {
        JobState::Failed(r) | JobState::Skipped(r) => r.as_str(),
        _ => "",
    };
    JobRow {
        id: &job.id,
        line: job.line,
        user: &job.user,
        group: &job.group,
        pool: record.pool.as_deref().unwrap_or(""),
        submit_s: seconds(job.submit_ms),
        width: job.width,
        allocations: record.allocations,
        run_s: seconds(job.duration_ms),
        state: record.state.name(),
        first_start_s: record.first_start_ms.map(seconds),
        finish_s: record.finish_ms.map(seconds),
        wait_s: record.wait_ms(job.submit_ms).map(seconds),
        response_s: record
            .finish_ms
            .map(|f| seconds(f.saturating_sub(job.submit_ms))),
        trace_wait_s: job.trace_wait_ms.map(seconds),
        preemptions: record.preemptions,
        reason,
    }
}

/// Writes `summary.json` (pretty, with a final newline).
pub fn write_summary(summary: &Summary, path: &Path) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(summary).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
