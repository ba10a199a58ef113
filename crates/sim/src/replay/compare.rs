//! `fairsched simulate compare`: one trace replayed under several policies, one report: a
//! table of every metric per policy ([`Row`]) as Markdown and as a self-contained HTML page
//! with each policy's plots side by side.
//!
//! The metrics, over the replayed jobs (completed ones for times):
//! - wait (first start − submission) mean, p50, p95, max; bounded slowdown
//!   `max(1, response / max(run, 10 s))` mean and p95;
//! - utilization: the completed jobs' work over the cluster's capacity for the makespan (as
//!   `summary.json`), and busy: what jobs held, completed or not, over the same;
//! - big jobs: those needing more than a quarter of the cluster's measured resource (cpu, or
//!   gpu on a cluster with GPUs): how many, p95 and max wait;
//! - Jain's fairness index between users of their mean bounded slowdown,
//!   `(Σx)² / (n·Σx²)`: 1 when every user's jobs are slowed alike, 1/n when one user bears it
//!   all;
//! - preemptions, and lost work: what jobs held beyond the work of the completed jobs, in
//!   resource-hours of the measured resource (work preempted and run again, and what
//!   unfinished jobs held).

use super::output::Summary;
use super::{JobState, ReplayReport};
use crate::trace::Trace;
use std::collections::BTreeMap;

/// Share of the cluster's measured resource above which a job is big.
pub const BIG_JOB_SHARE: f64 = 0.25;

/// One policy's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub policy: String,
    pub job_model: &'static str,
    pub jobs: u64,
    pub completed: u64,
    pub wait_mean_s: f64,
    pub wait_p50_s: f64,
    pub wait_p95_s: f64,
    pub wait_max_s: f64,
    pub slowdown_mean: f64,
    pub slowdown_p95: f64,
    pub utilization: f64,
    pub busy: f64,
    pub makespan_s: f64,
    pub big_jobs: u64,
    pub big_wait_p95_s: f64,
    pub big_wait_max_s: f64,
    pub jain_users: f64,
    pub preemptions: u64,
    pub lost_work_h: f64,
}

/// Nearest-rank percentile `p` of sorted `values` (0 when empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// Jain's fairness index of `values` (1 when there are none or all are zero).
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if values.is_empty() || squares == 0.0 {
        1.0
    } else {
        sum * sum / (values.len() as f64 * squares)
    }
}

/// The figures of `report` (a replay of `trace`, summed up as `summary`).
pub fn row(trace: &Trace, report: &ReplayReport, summary: &Summary) -> Row {
    let measured = report.measured;
    let total = report.total_resources.raw_of(measured) as f64;
    let mut waits = Vec::new();
    let mut slowdowns = Vec::new();
    let mut big_waits = Vec::new();
    let mut big_jobs = 0;
    let mut by_user: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
    for r in &report.records {
        let job = &trace.jobs[r.job];
        let need = job.unit.raw_of(measured) as f64 * f64::from(job.width);
        let big = total > 0.0 && need > BIG_JOB_SHARE * total;
        big_jobs += u64::from(big);
        if r.state != JobState::Completed {
            continue;
        }
        let (Some(start), Some(finish)) = (r.first_start_ms, r.finish_ms) else {
            continue;
        };
        let wait = start.saturating_sub(job.submit_ms) as f64 / 1000.0;
        let response = finish.saturating_sub(job.submit_ms) as f64 / 1000.0;
        let run = job.duration_ms as f64 / 1000.0;
        let slowdown = (response / run.max(10.0)).max(1.0);
        waits.push(wait);
        slowdowns.push(slowdown);
        if big {
            big_waits.push(wait);
        }
        let user = by_user.entry(job.user.as_str()).or_default();
        user.0 += slowdown;
        user.1 += 1;
    }
    let user_means: Vec<f64> = by_user.values().map(|(s, n)| s / *n as f64).collect();
    let waits = sorted(waits);
    let slowdowns = sorted(slowdowns);
    let big_waits = sorted(big_waits);
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    // What jobs held (raw units × ms) against the completed jobs' work.
    let held: f64 = report.usage.used_ms.iter().sum();
    let capacity = total * report.end_ms as f64;
    let work: f64 = summary.utilization * capacity;
    let unit = fairsched_resources::Resources::ZERO
        .with(measured, 1.0)
        .raw_of(measured) as f64;
    Row {
        policy: report.policy.clone(),
        job_model: report.job_model,
        jobs: summary.jobs.replayed,
        completed: summary.jobs.completed,
        wait_mean_s: mean(&waits),
        wait_p50_s: percentile(&waits, 0.5),
        wait_p95_s: percentile(&waits, 0.95),
        wait_max_s: waits.last().copied().unwrap_or(0.0),
        slowdown_mean: mean(&slowdowns),
        slowdown_p95: percentile(&slowdowns, 0.95),
        utilization: summary.utilization,
        busy: if capacity > 0.0 { held / capacity } else { 0.0 },
        makespan_s: summary.makespan_s,
        big_jobs,
        big_wait_p95_s: percentile(&big_waits, 0.95),
        big_wait_max_s: big_waits.last().copied().unwrap_or(0.0),
        jain_users: jain(&user_means),
        preemptions: report.stats.preemptions,
        lost_work_h: ((held - work).max(0.0) / unit / 3_600_000.0).max(0.0),
    }
}

/// A duration in seconds as it reads best: `42 s`, `3.5 min`, `2.1 h`, `1.3 d`.
pub fn duration(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.0} s")
    } else if s < 3_600.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 86_400.0 {
        format!("{:.1} h", s / 3_600.0)
    } else {
        format!("{:.1} d", s / 86_400.0)
    }
}

/// The table's columns: a header and how a row shows in it.
type Column = (&'static str, fn(&Row) -> String);

const COLUMNS: [Column; 17] = [
    ("policy", |r| format!("{} ({} jobs)", r.policy, r.job_model)),
    ("completed", |r| format!("{} of {}", r.completed, r.jobs)),
    ("wait mean", |r| duration(r.wait_mean_s)),
    ("wait p50", |r| duration(r.wait_p50_s)),
    ("wait p95", |r| duration(r.wait_p95_s)),
    ("wait max", |r| duration(r.wait_max_s)),
    ("bounded slowdown mean", |r| {
        format!("{:.2}", r.slowdown_mean)
    }),
    ("bounded slowdown p95", |r| format!("{:.2}", r.slowdown_p95)),
    ("utilization", |r| format!("{:.1} %", r.utilization * 100.0)),
    ("busy", |r| format!("{:.1} %", r.busy * 100.0)),
    ("makespan", |r| duration(r.makespan_s)),
    ("big jobs", |r| r.big_jobs.to_string()),
    ("big jobs' wait p95", |r| duration(r.big_wait_p95_s)),
    ("big jobs' wait max", |r| duration(r.big_wait_max_s)),
    ("Jain's index (users)", |r| format!("{:.3}", r.jain_users)),
    ("preemptions", |r| r.preemptions.to_string()),
    ("lost work (resource-h)", |r| {
        format!("{:.1}", r.lost_work_h)
    }),
];

const NOTES: &str = "Waits and slowdowns are of completed jobs. Utilization: the completed jobs' \
work over the capacity for the makespan; busy: what jobs held, completed or not. Big jobs need \
more than a quarter of the cluster's cpu (gpu on a cluster with GPUs). Jain's index is over the \
users' mean bounded slowdowns (1: every user slowed alike). Lost work: what jobs held beyond \
the completed jobs' work (preempted work run again, unfinished jobs).";

/// The report as Markdown: a title, the table, the notes.
pub fn markdown(trace_name: &str, rows: &[Row]) -> String {
    let mut out = format!("# {trace_name}: {} policies compared\n\n", rows.len());
    out.push_str(&format!(
        "| {} |\n|{}\n",
        COLUMNS.map(|c| c.0).join(" | "),
        "---|".repeat(COLUMNS.len())
    ));
    for r in rows {
        let cells: Vec<String> = COLUMNS.iter().map(|c| c.1(r)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.push_str(&format!("\n{NOTES}\n"));
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report as one self-contained HTML page: the table, then each kind of plot with the
/// policies side by side (`plots[i]` are row `i`'s SVG documents, in the same order for every
/// row).
pub fn html(trace_name: &str, rows: &[Row], plots: &[Vec<String>]) -> String {
    let title = escape(&format!("{trace_name}: {} policies compared", rows.len()));
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 1.5em; }}\n\
         table {{ border-collapse: collapse; font-size: 0.9em; }}\n\
         th, td {{ border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: right; }}\n\
         th:first-child, td:first-child {{ text-align: left; }}\n\
         .plots {{ display: flex; flex-wrap: wrap; gap: 1em; }}\n\
         .plots svg {{ width: {}%; min-width: 420px; height: auto; }}\n\
         </style>\n</head>\n<body>\n<h1>{title}</h1>\n<table>\n<tr>",
        (100 / rows.len().max(1)).clamp(30, 100) - 1
    );
    for c in COLUMNS {
        out.push_str(&format!("<th>{}</th>", escape(c.0)));
    }
    out.push_str("</tr>\n");
    for r in rows {
        out.push_str("<tr>");
        for c in COLUMNS {
            out.push_str(&format!("<td>{}</td>", escape(&c.1(r))));
        }
        out.push_str("</tr>\n");
    }
    out.push_str(&format!("</table>\n<p>{}</p>\n", escape(NOTES)));
    let kinds = plots.first().map_or(0, Vec::len);
    for k in 0..kinds {
        out.push_str("<div class=\"plots\">\n");
        for policy in plots {
            if let Some(svg) = policy.get(k) {
                out.push_str(svg.trim());
                out.push('\n');
            }
        }
        out.push_str("</div>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_when_even_and_one_over_n_when_one_bears_it_all() {
        assert_eq!(jain(&[2.0, 2.0, 2.0]), 1.0);
        assert_eq!(jain(&[5.0, 0.0, 0.0, 0.0]), 0.25);
        assert_eq!(jain(&[]), 1.0);
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(duration(42.0), "42 s");
        assert_eq!(duration(210.0), "3.5 min");
        assert_eq!(duration(7_560.0), "2.1 h");
        assert_eq!(duration(112_320.0), "1.3 d");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.95), 95.0);
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
