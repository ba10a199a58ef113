//! The plots `fairsched simulate` writes beside `summary.json` and `jobs.csv`, as SVG:
//!
//! - `utilization.svg`: the cluster's utilization (%) over virtual time;
//! - `queue.svg`: pending allocations and jobs in the system over virtual time;
//! - `wait_cdf.svg`: the cumulative distribution of completed jobs' waits (first start −
//!   submission), log-scaled, beside the waits the trace recorded for the same jobs.
//!
//! Virtual time is in days, or in hours when the replay spans less than two days. Every curve
//! is downsampled to at most [`MAX_POINTS`] points (keeping each bucket's lowest and highest
//! point, so peaks survive), so a plot stays a few tens of kilobytes whatever the trace's size.
//!
//! **Fonts.** Drawn with `plotters`' SVG backend and none of its font features (`ttf`,
//! `ab_glyph`): text is written into the SVG as `<text>` elements with a generic
//! `sans-serif` family, left for the viewer to render, and laid out with `plotters`' built-in
//! estimate of text widths. Nothing reads a font file, so plotting works on a machine with no
//! fonts and no fontconfig installed (CI's bare Debian).

use super::{JobState, ReplayReport, Sample};
use crate::trace::Trace;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Most points a curve is drawn with.
pub const MAX_POINTS: usize = 2000;

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
/// returns their paths.
pub fn write_plots(
    trace: &Trace,
    report: &ReplayReport,
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    let subtitle = format!("{} on the {} trace", report.policy, trace.format.name());
    let time = TimeAxis::of(&report.series);
    let files = [
        (
            "utilization.svg",
            utilization_svg(report, &time, &subtitle)?,
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
    fn of(series: &[Sample]) -> TimeAxis {
        let first = series.first().map_or(0, |s| s.t_ms) as f64;
        let last = series.last().map_or(0, |s| s.t_ms) as f64;
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

    fn x(&self, sample: &Sample) -> f64 {
        sample.t_ms as f64 / self.unit_ms
    }
}

fn utilization_svg(
    report: &ReplayReport,
    time: &TimeAxis,
    subtitle: &str,
) -> Result<String, String> {
    let points: Vec<(f64, f64)> = report
        .series
        .iter()
        .map(|s| (time.x(s), s.utilization * 100.0))
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = chart(&root, &format!("Cluster utilization: {subtitle}"))
            .build_cartesian_2d(time.range.clone(), 0.0..100.0)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(time.label)
            .y_desc("utilization (%)")
            .x_label_formatter(&|v| trim(*v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_error)?;
        chart
            .draw_series(LineSeries::new(
                downsample(&points, MAX_POINTS),
                BLUE.stroke_width(1),
            ))
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn queue_svg(report: &ReplayReport, time: &TimeAxis, subtitle: &str) -> Result<String, String> {
    let pending: Vec<(f64, f64)> = report
        .series
        .iter()
        .map(|s| (time.x(s), s.pending_allocations as f64))
        .collect();
    let in_system: Vec<(f64, f64)> = report
        .series
        .iter()
        .map(|s| (time.x(s), s.jobs_in_system as f64))
        .collect();
    let top = pending
        .iter()
        .chain(&in_system)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.05 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = chart(&root, &format!("Queue: {subtitle}"))
            .build_cartesian_2d(time.range.clone(), 0.0..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(time.label)
            .y_desc("count")
            .x_label_formatter(&|v| trim(*v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_error)?;
        for (points, color, label) in [
            (&pending, RED, "pending allocations"),
            (&in_system, BLUE, "jobs in the system"),
        ] {
            chart
                .draw_series(LineSeries::new(
                    downsample(points, MAX_POINTS),
                    color.stroke_width(1),
                ))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
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
    let replayed = cdf(replayed);
    let recorded = cdf(recorded);
    let max = replayed
        .iter()
        .chain(&recorded)
        .map(|p| p.0)
        .fold(WAIT_FLOOR_S, f64::max);
    // At least a decade, and some room past the longest wait.
    let x_end = (max * 1.5).max(WAIT_FLOOR_S * 10.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = chart(
            &root,
            &format!("Wait time CDF of completed jobs: {subtitle}"),
        )
        .build_cartesian_2d((WAIT_FLOOR_S..x_end).log_scale(), 0.0..1.0)
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
            (replayed, BLUE, format!("replay ({})", report.policy)),
            (recorded, RED, "trace".to_string()),
        ];
        for (points, color, label) in curves {
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
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

fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    format!("drawing a plot: {e}")
}

/// The empirical CDF of `values` (s) as a step curve: for each distinct value (waits under
/// [`WAIT_FLOOR_S`] counted at the floor), the fraction of values below it and then at or below
/// it, in increasing order; at most [`MAX_POINTS`] points (the distinct values downsampled to
/// half of it before the steps are drawn).
fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    for v in &mut values {
        *v = v.max(WAIT_FLOOR_S);
    }
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (i, &v) in values.iter().enumerate() {
        let fraction = (i + 1) as f64 / n;
        match points.last_mut() {
            Some(last) if last.0 == v => last.1 = fraction,
            _ => points.push((v, fraction)),
        }
    }
    let points = downsample(&points, MAX_POINTS / 2);
    let mut steps = Vec::with_capacity(points.len() * 2);
    let mut below = 0.0;
    for (x, fraction) in points {
        steps.extend([(x, below), (x, fraction)]);
        below = fraction;
    }
    steps
}

/// At most `max` (at least 2) of `points` (in increasing x): all of them if they are few
/// enough, else the first and last and, in each of `max / 2 - 1` buckets of consecutive
/// points between, the lowest and the highest (in x order), so that the curve keeps its peaks
/// and troughs.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    let max = max.max(2);
    if points.len() <= max {
        return points.to_vec();
    }
    let (first, last) = (points[0], points[points.len() - 1]);
    let inner = &points[1..points.len() - 1];
    let buckets = (max / 2 - 1).max(1);
    let mut out = Vec::with_capacity(max);
    out.push(first);
    for b in 0..buckets {
        let bucket = &inner[b * inner.len() / buckets..(b + 1) * inner.len() / buckets];
        let lowest = bucket
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.1.total_cmp(&b.1.1));
        let highest = bucket
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.1.total_cmp(&b.1.1));
        match (lowest, highest) {
            (Some((i, &lo)), Some((j, _))) if i == j => out.push(lo),
            (Some((i, &lo)), Some((j, &hi))) if i < j => out.extend([lo, hi]),
            (Some((_, &lo)), Some((_, &hi))) => out.extend([hi, lo]),
            _ => {}
        }
    }
    out.push(last);
    out
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

    #[test]
    fn downsample_keeps_few_points_and_bounds_many() {
        let few: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, i as f64)).collect();
        assert_eq!(downsample(&few, 2000), few);
        // A spike in a long flat series survives.
        let many: Vec<(f64, f64)> = (0..100_000)
            .map(|i| (i as f64, if i == 54_321 { 7.0 } else { 1.0 }))
            .collect();
        let out = downsample(&many, 2000);
        assert!(out.len() <= 2000, "{}", out.len());
        assert!(out.contains(&(54_321.0, 7.0)));
        assert_eq!(out.first(), Some(&(0.0, 1.0)));
        assert_eq!(out.last(), Some(&(99_999.0, 1.0)));
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "x stays in order");
    }

    #[test]
    fn cdf_merges_equal_values_and_floors_zero() {
        assert_eq!(
            cdf(vec![0.0, 10.0, 0.5, 10.0]),
            vec![
                (WAIT_FLOOR_S, 0.0),
                (WAIT_FLOOR_S, 0.5),
                (10.0, 0.5),
                (10.0, 1.0)
            ]
        );
        assert!(cdf(Vec::new()).is_empty());
        let big = cdf((0..300_000).map(f64::from).collect());
        assert!(big.len() <= MAX_POINTS, "{}", big.len());
        assert_eq!(big.last(), Some(&(299_999.0, 1.0)));
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
