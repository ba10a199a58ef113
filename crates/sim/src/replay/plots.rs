//! The plots `fairsched simulate` writes beside `summary.json` and `jobs.csv`, as SVG:
//!
//! - `utilization.svg`: the cluster's utilization (%) over virtual time, as the mean of each
//!   bin of a fixed grid (hourly, daily, ...: [`super::usage`]), computed exactly from what the
//!   jobs held, beside the utilization of the schedule the trace recorded (its jobs' recorded
//!   starts and run times, on the replayed cluster) when the trace has every job's wait;
//! - `queue.svg`: pending allocations (upper panel) and jobs in the system (lower panel), each
//!   on its own axis, over virtual time, as steps (a value holds until the next sample);
//! - `wait_cdf.svg`: the cumulative distribution of completed jobs' waits (first start −
//!   submission), log-scaled, beside the waits the trace recorded for the same jobs.
//!
//! Every title names the policy, the job model and the trace. Virtual time is in days, or in
//! hours when the replay spans less than two days. Curves are reduced per pixel column, never
//! by rank: the CDF keeps, for each column of the plot, where its rise within the column
//! starts and ends (so the curve is exact to a pixel), the queue keeps each column's first,
//! lowest, highest and last value; a plot stays a few tens of kilobytes whatever the trace's
//! size.
//!
//! **Fonts.** Drawn with `plotters`' SVG backend and none of its font features (`ttf`,
//! `ab_glyph`): text is written into the SVG as `<text>` elements with a generic
//! `sans-serif` family, left for the viewer to render, and laid out with `plotters`' built-in
//! estimate of text widths. Nothing reads a font file, so plotting works on a machine with no
//! fonts and no fontconfig installed (CI's bare Debian).

use super::usage::UsageBins;
use super::{JobState, ReplayReport, Sample};
use crate::trace::Trace;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Most points a curve is drawn with.
pub const MAX_POINTS: usize = 2000;

/// Pixel columns a wait CDF is reduced to (two points each, at most).
pub const CDF_COLUMNS: usize = MAX_POINTS / 2 - 1;

/// Pixel columns a queue curve is reduced to (four points each, at most).
pub const QUEUE_COLUMNS: usize = MAX_POINTS / 4;

/// Most bins the utilization is shown in (two points each).
pub const UTILIZATION_BINS: usize = MAX_POINTS / 2;

/// Where waits shorter than this (s) are drawn on the log-scaled axis, zero waits included.
pub const WAIT_FLOOR_S: f64 = 1.0;

const SIZE: (u32, u32) = (1000, 600);
/// Tick labels and legend (`plotters` writes 1/1.24 of it as the SVG font size).
const LABEL_FONT: (&str, u32) = ("sans-serif", 17);
/// Axis descriptions.
const DESC_FONT: (&str, u32) = ("sans-serif", 19);
const MS_PER_HOUR: f64 = 3_600_000.0;
const MS_PER_DAY: f64 = 86_400_000.0;

/// Writes `utilization.svg`, `queue.svg` and `wait_cdf.svg` into `dir` (which must exist) and
/// returns their paths. `trace_name` names the trace in the titles (e.g. its file name).
pub fn write_plots(
    trace: &Trace,
    trace_name: &str,
    report: &ReplayReport,
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    let subtitle = format!("{}, {} jobs, {trace_name}", report.policy, report.job_model);
    let time = TimeAxis::of(0, report.end_ms);
    let files = [
        (
            "utilization.svg",
            utilization_svg(trace, report, &time, &subtitle)?,
        ),
        ("queue.svg", queue_svg(report, &time, &subtitle)?),
        ("wait_cdf.svg", wait_cdf_svg(trace, report, &subtitle)?),
    ];
    let mut paths = Vec::with_capacity(files.len());
    for (name, svg) in files {
        let path = dir.join(name);
        std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// The x axis of the time series: its unit and range.
struct TimeAxis {
    unit_ms: f64,
    label: &'static str,
    range: Range<f64>,
}

impl TimeAxis {
    fn of(first_ms: u64, last_ms: u64) -> TimeAxis {
        let (first, last) = (first_ms as f64, last_ms as f64);
        let (unit_ms, label) = if last - first < 2.0 * MS_PER_DAY {
            (MS_PER_HOUR, "virtual time (hours)")
        } else {
            (MS_PER_DAY, "virtual time (days)")
        };
        let (start, mut end) = (first / unit_ms, last / unit_ms);
        if end <= start {
            end = start + 1.0;
        }
        TimeAxis {
            unit_ms,
            label,
            range: start..end,
        }
    }

    fn x(&self, t_ms: u64) -> f64 {
        t_ms as f64 / self.unit_ms
    }
}

/// The utilization (%) of each bin of `bins`, as steps: a horizontal segment per bin.
pub fn utilization_steps(bins: &UsageBins, total: f64) -> Vec<(u64, f64)> {
    let mut points = Vec::with_capacity(bins.used_ms.len() * 2);
    for (start, mean) in bins.means(total) {
        let end = (start + bins.bin_ms).min(bins.end_ms);
        points.extend([(start, mean * 100.0), (end, mean * 100.0)]);
    }
    points
}

/// The usage of the schedule the trace recorded (each replayed job from its recorded start,
/// submission + wait, for its run time), in bins like `like`; None unless the trace recorded
/// every replayed job's wait.
pub fn recorded_usage(trace: &Trace, report: &ReplayReport, like: &UsageBins) -> Option<UsageBins> {
    let mut bins = UsageBins {
        bin_ms: like.bin_ms,
        used_ms: Vec::new(),
        end_ms: 0,
    };
    for r in &report.records {
        let job = &trace.jobs[r.job];
        let start = job.submit_ms.checked_add(job.trace_wait_ms?)?;
        let held = job.unit.raw_of(report.measured) as f64 * f64::from(job.width);
        bins.add(start, start.saturating_add(job.duration_ms), held);
    }
    (!report.records.is_empty()).then_some(bins)
}

fn utilization_svg(
    trace: &Trace,
    report: &ReplayReport,
    time: &TimeAxis,
    subtitle: &str,
) -> Result<String, String> {
    let total = report.total_resources.raw_of(report.measured) as f64;
    let (shown, unit) = report.usage.for_display(UTILIZATION_BINS);
    let replayed = utilization_steps(&shown, total);
    // The trace's schedule, in the same bins (merged alike), over its own span.
    let recorded = recorded_usage(trace, report, &report.usage)
        .map(|bins| utilization_steps(&bins.merged(shown.bin_ms / report.usage.bin_ms), total));
    let end_ms = recorded
        .iter()
        .flatten()
        .map(|p| p.0)
        .fold(report.end_ms, u64::max);
    let time = TimeAxis::of(0, end_ms.max(time.range.end as u64));
    let top = replayed
        .iter()
        .chain(recorded.iter().flatten())
        .map(|p| p.1)
        .fold(100.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = chart(
            &root,
            &format!("Cluster utilization ({unit} means): {subtitle}"),
        )
        .build_cartesian_2d(time.range.clone(), 0.0..top)
        .map_err(plot_error)?;
        time_mesh(
            &mut chart,
            &time,
            &format!("{} utilization (%)", report.measured.name()),
        )?;
        let mut curves = vec![(
            replayed,
            BLUE,
            format!("replay: {}, {} jobs", report.policy, report.job_model),
        )];
        if let Some(recorded) = recorded {
            curves.push((recorded, RED, "trace: as recorded".to_string()));
        }
        for (points, color, label) in curves {
            let points = points.iter().map(|&(t, v)| (time.x(t), v));
            curve(&mut chart, points, color, 1, label)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn queue_svg(report: &ReplayReport, time: &TimeAxis, subtitle: &str) -> Result<String, String> {
    /// A panel: its curve's name, the count it shows, its colour.
    type Panel = (&'static str, fn(&Sample) -> u64, RGBColor);
    let panels: [Panel; 2] = [
        ("pending allocations", |s| s.pending_allocations, RED),
        ("jobs in the system", |s| s.jobs_in_system, BLUE),
    ];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let root = root
            .titled(&format!("Queue: {subtitle}"), ("sans-serif", 26))
            .map_err(plot_error)?;
        let areas = root.split_evenly((2, 1));
        for ((name, value, color), area) in panels.into_iter().zip(&areas) {
            let steps = step_points(&report.series, report.end_ms, value);
            let points = by_columns(&steps, &time.range, time.unit_ms, QUEUE_COLUMNS);
            let top = points.iter().map(|p| p.1).fold(0.0, f64::max);
            let top = if top > 0.0 { top * 1.05 } else { 1.0 };
            let mut chart = ChartBuilder::on(area)
                .margin(10)
                .x_label_area_size(45)
                .y_label_area_size(75)
                .build_cartesian_2d(time.range.clone(), 0.0..top)
                .map_err(plot_error)?;
            time_mesh(&mut chart, time, name)?;
            curve(&mut chart, points, color, 1, name.to_string())?;
            legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// A sampled count as steps (ms, value): each sample's value holds until the next sample (the
/// last one until `end_ms`).
pub fn step_points(series: &[Sample], end_ms: u64, value: fn(&Sample) -> u64) -> Vec<(u64, f64)> {
    let mut points = Vec::with_capacity(series.len() * 2);
    for (i, s) in series.iter().enumerate() {
        let until = series.get(i + 1).map_or(end_ms.max(s.t_ms), |n| n.t_ms);
        let v = value(s) as f64;
        points.extend([(s.t_ms, v), (until, v)]);
    }
    points
}

/// `points` (ms, value; in time order) in the axis' unit, reduced to `columns` columns of the
/// x range: in each, the first, lowest, highest and last point in time order (all of them
/// where there are few), so that no peak or step is lost at the plot's resolution.
pub fn by_columns(
    points: &[(u64, f64)],
    range: &Range<f64>,
    unit_ms: f64,
    columns: usize,
) -> Vec<(f64, f64)> {
    let width = (range.end - range.start).max(f64::MIN_POSITIVE);
    let column = |x: f64| {
        (((x - range.start) / width * columns as f64)
            .floor()
            .max(0.0)) as usize
    };
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut group: Vec<(f64, f64)> = Vec::new();
    fn flush(group: &mut Vec<(f64, f64)>, out: &mut Vec<(f64, f64)>) {
        if group.len() <= 4 {
            out.append(group);
            return;
        }
        let lo = (0..group.len())
            .min_by(|&a, &b| group[a].1.total_cmp(&group[b].1))
            .unwrap_or(0);
        let hi = (0..group.len())
            .max_by(|&a, &b| group[a].1.total_cmp(&group[b].1))
            .unwrap_or(0);
        let mut keep = vec![0, lo, hi, group.len() - 1];
        keep.sort_unstable();
        keep.dedup();
        out.extend(keep.into_iter().map(|k| group[k]));
        group.clear();
    }
    let mut current = None;
    for &(t, v) in points {
        let x = t as f64 / unit_ms;
        let c = column(x);
        if current != Some(c) {
            flush(&mut group, &mut out);
            current = Some(c);
        }
        group.push((x, v));
    }
    flush(&mut group, &mut out);
    out
}

fn wait_cdf_svg(trace: &Trace, report: &ReplayReport, subtitle: &str) -> Result<String, String> {
    let completed = report
        .records
        .iter()
        .filter(|r| r.state == JobState::Completed);
    let replayed: Vec<f64> = completed
        .clone()
        .filter_map(|r| r.wait_ms(trace.jobs[r.job].submit_ms))
        .map(|ms| ms as f64 / 1000.0)
        .collect();
    let recorded: Vec<f64> = completed
        .filter_map(|r| trace.jobs[r.job].trace_wait_ms)
        .map(|ms| ms as f64 / 1000.0)
        .collect();
    let max = replayed
        .iter()
        .chain(&recorded)
        .copied()
        .fold(WAIT_FLOOR_S, f64::max);
    // At least a decade, and some room past the longest wait.
    let x_range = WAIT_FLOOR_S..(max * 1.5).max(WAIT_FLOOR_S * 10.0);
    let replayed = cdf(replayed, &x_range, CDF_COLUMNS);
    let recorded = cdf(recorded, &x_range, CDF_COLUMNS);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = chart(
            &root,
            &format!("Wait time CDF of completed jobs: {subtitle}"),
        )
        .build_cartesian_2d(x_range.clone().log_scale(), 0.0..1.0)
        .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "wait (s, log scale; waits under {WAIT_FLOOR_S:.0} s drawn at {WAIT_FLOOR_S:.0} s)"
            ))
            .y_desc("fraction of completed jobs")
            .x_label_formatter(&|v| format_seconds(*v))
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_error)?;
        let curves = [
            (
                replayed,
                BLUE,
                format!("replay: {}, {} jobs", report.policy, report.job_model),
            ),
            (recorded, RED, "trace: as recorded".to_string()),
        ];
        for (points, color, label) in curves {
            if points.is_empty() {
                continue;
            }
            curve(&mut chart, points, color, 2, label)?;
        }
        // Lower right: every curve has reached 1 before the axis' end.
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// The chart around a plot: margins, title and label areas.
fn chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 26))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(75);
    builder
}

/// The series' legend, at `position`.
fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(LABEL_FONT)
        .draw()
        .map_err(plot_error)
}

/// The axes of a plot over virtual time: `time`'s unit on x, whole numbers described as
/// `y_desc` on y.
fn time_mesh(
    chart: &mut ChartContext<
        '_,
        SVGBackend<'_>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    time: &TimeAxis,
    y_desc: &str,
) -> Result<(), String> {
    chart
        .configure_mesh()
        .x_desc(time.label)
        .y_desc(y_desc)
        .x_label_formatter(&|v| trim(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(LABEL_FONT)
        .axis_desc_style(DESC_FONT)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(plot_error)
}

/// Draws `points` as one labelled curve of `color`, `width` pixels wide, with its legend entry.
fn curve<'a, DB, CT, X, Y>(
    chart: &mut ChartContext<'a, DB, CT>,
    points: impl IntoIterator<Item = (X, Y)>,
    color: RGBColor,
    width: u32,
    label: String,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate<From = (X, Y)>,
    X: Clone + 'static,
    Y: Clone + 'static,
{
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(width)))
        .map_err(plot_error)?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    Ok(())
}

fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    format!("drawing a plot: {e}")
}

/// The empirical CDF of `values` (s; waits under [`WAIT_FLOOR_S`] counted at the floor) as a
/// step curve over the log-scaled `x_range`, reduced to `columns` columns of equal width on
/// that scale: for the values that fall in one column, the curve leaves the fraction below
/// them at the first and reaches the fraction at or below the last at the last (a rise
/// within one column); between columns it is flat. So at every column boundary the curve is
/// the exact fraction of values below it, and it has at most two points per column.
pub fn cdf(mut values: Vec<f64>, x_range: &Range<f64>, columns: usize) -> Vec<(f64, f64)> {
    for v in &mut values {
        *v = v.max(WAIT_FLOOR_S);
    }
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    let (lo, hi) = (x_range.start.ln(), x_range.end.ln());
    let width = (hi - lo).max(f64::MIN_POSITIVE);
    let column = |v: f64| ((v.ln() - lo) / width * columns as f64).floor().max(0.0) as usize;
    let mut steps: Vec<(f64, f64)> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let c = column(values[i]);
        let first = values[i];
        let below = i as f64 / n;
        let mut j = i;
        while j + 1 < values.len() && column(values[j + 1]) == c {
            j += 1;
        }
        steps.extend([(first, below), (values[j], (j + 1) as f64 / n)]);
        i = j + 1;
    }
    steps
}

/// A tick of a linear axis: `5`, not `5.0`.
fn trim(v: f64) -> String {
    let text = format!("{v:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

/// A wait-axis tick: seconds, minutes, hours or days, whichever reads best.
fn format_seconds(s: f64) -> String {
    let (value, unit) = if s >= 86_400.0 {
        (s / 86_400.0, "d")
    } else if s >= 3_600.0 {
        (s / 3_600.0, "h")
    } else if s >= 60.0 {
        (s / 60.0, "min")
    } else {
        (s, "s")
    };
    if value >= 10.0 || value.fract().abs() < 1e-9 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fraction of `values` (floored) below `x`.
    fn exact_below(values: &[f64], x: f64) -> f64 {
        values.iter().filter(|&&v| v.max(WAIT_FLOOR_S) < x).count() as f64 / values.len() as f64
    }

    /// The drawn curve's value just left of `x`: the last point before it (the curve is flat
    /// between columns).
    fn drawn_left_of(curve: &[(f64, f64)], x: f64) -> f64 {
        curve
            .iter()
            .take_while(|p| p.0 < x)
            .last()
            .map_or(0.0, |p| p.1)
    }

    #[test]
    fn cdf_merges_equal_values_and_floors_zero() {
        let range = WAIT_FLOOR_S..100.0;
        assert_eq!(
            cdf(vec![0.0, 10.0, 0.5, 10.0], &range, 1000),
            vec![
                (WAIT_FLOOR_S, 0.0),
                (WAIT_FLOOR_S, 0.5),
                (10.0, 0.5),
                (10.0, 1.0)
            ]
        );
        assert!(cdf(Vec::new(), &range, 1000).is_empty());
    }

    #[test]
    fn cdf_is_exact_at_every_column_boundary() {
        // Skewed waits: most short and distinct, a long tail (the shape whose CDF the earlier
        // reduction by value rank drew up to 24 points off).
        let values: Vec<f64> = (0..300_000u64)
            .map(|i| {
                let u = (i * 7_919 % 300_000) as f64 / 300_000.0;
                (1.0 / (1.0 - u * 0.999_99)).powf(3.0) + (i % 13) as f64 * 1e-3
            })
            .collect();
        let max = values.iter().copied().fold(0.0, f64::max);
        let range = WAIT_FLOOR_S..max * 1.5;
        let curve = cdf(values.clone(), &range, CDF_COLUMNS);
        assert!(curve.len() <= MAX_POINTS, "{}", curve.len());
        assert_eq!(curve.last().map(|p| p.1), Some(1.0));
        let (lo, hi) = (range.start.ln(), range.end.ln());
        for k in 1..=CDF_COLUMNS {
            let boundary = (lo + (hi - lo) * k as f64 / CDF_COLUMNS as f64).exp();
            let (drawn, exact) = (
                drawn_left_of(&curve, boundary),
                exact_below(&values, boundary),
            );
            assert!(
                (drawn - exact).abs() < 1e-12,
                "column boundary {boundary} s: drawn {drawn}, data {exact}"
            );
        }
    }

    #[test]
    fn queue_steps_hold_values_and_keep_peaks_per_column() {
        let sample = |t_ms, pending| Sample {
            t_ms,
            utilization: 0.0,
            running_allocations: 0,
            pending_allocations: pending,
            jobs_in_system: 0,
        };
        // 5 pending for three idle days, then 0: the value holds across the gap.
        let series = [sample(0, 5), sample(3 * 86_400_000, 0)];
        let steps = step_points(&series, 4 * 86_400_000, |s| s.pending_allocations);
        assert_eq!(
            steps,
            vec![
                (0, 5.0),
                (3 * 86_400_000, 5.0),
                (3 * 86_400_000, 0.0),
                (4 * 86_400_000, 0.0)
            ]
        );
        // 100,000 samples with one spike: at most four points per column, the spike kept.
        let series: Vec<Sample> = (0..100_000u64)
            .map(|i| sample(i * 1_000, if i == 54_321 { 700 } else { 1 }))
            .collect();
        let steps = step_points(&series, 100_000_000, |s| s.pending_allocations);
        let range = 0.0..100_000_000.0 / MS_PER_HOUR;
        let points = by_columns(&steps, &range, MS_PER_HOUR, QUEUE_COLUMNS);
        assert!(points.len() <= MAX_POINTS, "{}", points.len());
        assert!(points.iter().any(|p| p.1 == 700.0));
        assert!(
            points.windows(2).all(|w| w[0].0 <= w[1].0),
            "x stays in order"
        );
    }

    #[test]
    fn seconds_read_in_their_unit() {
        assert_eq!(format_seconds(1.0), "1 s");
        assert_eq!(format_seconds(100.0), "1.7 min");
        assert_eq!(format_seconds(7_200.0), "2 h");
        assert_eq!(format_seconds(1_000_000.0), "12 d");
        assert_eq!(trim(5.0), "5");
        assert_eq!(trim(2.5), "2.5");
    }
}
