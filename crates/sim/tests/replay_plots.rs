//! The plots of a replay (`fairsched_sim::replay::plots`): small handwritten SWF traces replayed
//! and plotted into a temporary directory; each SVG is checked for its title, axes and curves,
//! the utilization's bins against what the jobs held, and a 5,000-job trace for staying small
//! (its curves reduced per pixel column).

use fairsched_sim::replay::plots::{MAX_POINTS, recorded_usage, write_plots};
use fairsched_sim::replay::{Policy, ReplayOptions, ReplayReport, replay};
use fairsched_sim::trace::{Trace, parse_swf};
use std::path::{Path, PathBuf};

/// SWF job line: number, submit (s), wait in the trace (s; -1 unknown), run time (s),
/// processors, user, group.
fn swf(jobs: &[(u32, u32, i64, u32, u32, u32, u32)], max_nodes: u32, max_procs: u32) -> String {
    let mut text = format!("; MaxNodes: {max_nodes}\n; MaxProcs: {max_procs}\n");
    for &(id, submit, wait, run, procs, user, group) in jobs {
        text.push_str(&format!(
            "{id} {submit} {wait} {run} {procs} -1 -1 {procs} -1 -1 1 {user} {group} -1 -1 -1 -1 -1\n"
        ));
    }
    text
}

fn run(trace: &Trace, policy: &str) -> ReplayReport {
    let options = ReplayOptions {
        policy: Policy::parse(policy),
        rigid: false,
        ..ReplayOptions::default()
    };
    replay(trace, &options, &mut |_| {}).expect("replays")
}

fn plot(trace: &Trace, report: &ReplayReport, dir: &Path) -> Vec<(String, String)> {
    let paths = write_plots(trace, "test.swf", report, dir).expect("plots are written");
    let names: Vec<&str> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap())
        .collect();
    assert_eq!(names, ["utilization.svg", "queue.svg", "wait_cdf.svg"]);
    paths
        .iter()
        .map(|p: &PathBuf| {
            assert_eq!(p.parent(), Some(dir), "{}", p.display());
            let svg = std::fs::read_to_string(p).expect("plot exists");
            check_svg(p, &svg);
            (names_of(p), svg)
        })
        .collect()
}

fn names_of(path: &Path) -> String {
    path.file_name().unwrap().to_str().unwrap().to_string()
}

/// An SVG document: its root element, closed, with at least one curve of two or more points.
fn check_svg(path: &Path, svg: &str) {
    let trimmed = svg.trim_start();
    assert!(
        trimmed.starts_with("<svg") || trimmed.starts_with("<?xml"),
        "{}: {}",
        path.display(),
        &svg[..svg.len().min(200)]
    );
    assert!(svg.trim_end().ends_with("</svg>"), "{}", path.display());
    assert!(
        curves(svg).iter().any(|&points| points >= 2),
        "{}: no curve with points",
        path.display()
    );
}

/// The number of points of each `<polyline>` of `svg`.
fn curves(svg: &str) -> Vec<usize> {
    svg.split("<polyline")
        .skip(1)
        .map(|element| {
            let element = &element[..element.find("/>").expect("polyline closes")];
            let points = element
                .split("points=\"")
                .nth(1)
                .expect("polyline has points");
            let points = &points[..points.find('"').unwrap()];
            points.split_whitespace().count()
        })
        .collect()
}

#[test]
fn plots_name_the_policy_and_format_and_draw_both_wait_curves() {
    // Two 4-processor nodes; the trace recorded waits of 0, 30, 300 and 5 s.
    let text = swf(
        &[
            (1, 0, 0, 100, 8, 1, 1),
            (2, 10, 30, 50, 4, 2, 2),
            (3, 20, 300, 30, 2, 1, 1),
            (4, 40, 5, 10, 1, 3, 2),
        ],
        2,
        8,
    );
    let trace = parse_swf(&text, "test.swf").unwrap();
    let report = run(&trace, "fifo");
    assert!(
        report.records.iter().all(|r| r.first_start_ms.is_some()),
        "every job ran"
    );
    let dir = tempfile::tempdir().unwrap();
    let plots = plot(&trace, &report, dir.path());
    let svg = |name: &str| &plots.iter().find(|p| p.0 == name).unwrap().1;

    let utilization = svg("utilization.svg");
    assert!(
        utilization.contains("Cluster utilization (1 s means): fifo, malleable jobs, test.swf"),
        "{utilization}"
    );
    assert!(utilization.contains("cpu utilization (%)"));
    assert!(utilization.contains("replay: fifo, malleable jobs"));
    assert!(
        utilization.contains("trace: as recorded"),
        "every wait is known"
    );
    // Four jobs over a few minutes: the time axis is in hours.
    assert!(svg("utilization.svg").contains("virtual time (hours)"));

    let queue = svg("queue.svg");
    assert!(queue.contains("Queue: fifo, malleable jobs, test.swf"));
    assert!(queue.contains("pending allocations") && queue.contains("jobs in the system"));
    assert!(curves(queue).iter().filter(|&&n| n >= 2).count() >= 2);

    let cdf = svg("wait_cdf.svg");
    assert!(cdf.contains("Wait time CDF of completed jobs: fifo, malleable jobs, test.swf"));
    assert!(cdf.contains("log scale; waits under 1 s drawn at 1 s"));
    assert!(cdf.contains("replay: fifo, malleable jobs"));
    assert!(
        cdf.contains("trace: as recorded"),
        "the trace's curve is labelled"
    );
    // Both curves: four distinct waits in the trace, so eight points as steps.
    assert!(curves(cdf).contains(&8), "{:?}", curves(cdf));
}

#[test]
fn wait_cdf_leaves_out_unknown_trace_waits_and_empty_replays_still_plot() {
    let text = swf(&[(1, 0, -1, 100, 4, 1, 1), (2, 0, -1, 100, 4, 2, 2)], 1, 4);
    let trace = parse_swf(&text, "test.swf").unwrap();
    let report = run(&trace, "fair-share");
    let dir = tempfile::tempdir().unwrap();
    let plots = plot(&trace, &report, dir.path());
    let cdf = &plots[2].1;
    assert!(cdf.contains("replay: fair-share, malleable jobs"));
    assert!(
        !cdf.contains("trace: as recorded"),
        "no trace waits, no trace curve"
    );
    assert!(!plots[0].1.contains("trace: as recorded"));

    // A job wider than the machine is skipped: nothing runs, the plots are still written.
    let text = swf(&[(1, 0, 0, 100, 64, 1, 1)], 1, 4);
    let trace = parse_swf(&text, "test.swf").unwrap();
    let report = run(&trace, "fifo");
    let dir = tempfile::tempdir().unwrap();
    let paths = write_plots(&trace, "test.swf", &report, dir.path()).expect("plots are written");
    for path in paths {
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.trim_end().ends_with("</svg>"), "{}", path.display());
        assert!(
            svg.contains("fifo, malleable jobs, test.swf"),
            "{}",
            path.display()
        );
    }
}

#[test]
fn plots_of_many_jobs_stay_small() {
    // 5,000 one-processor jobs, 40 s apart, on room enough for all, each with its own
    // recorded wait: 5,000 distinct points for the trace's CDF before downsampling.
    let jobs: Vec<_> = (0..5000u32)
        .map(|i| {
            (
                i + 1,
                i * 40,
                i64::from(i),
                10 + i % 20,
                1,
                i % 7 + 1,
                i % 3 + 1,
            )
        })
        .collect();
    let trace = parse_swf(&swf(&jobs, 16, 64), "test.swf").unwrap();
    let report = run(&trace, "fair-share");
    let dir = tempfile::tempdir().unwrap();
    let plots = plot(&trace, &report, dir.path());
    // 2.3 days: the time axis is in days.
    assert!(plots[0].1.contains("virtual time (days)"));
    for (name, svg) in &plots {
        assert!(svg.len() < 60_000, "{name}: {} bytes", svg.len());
        let longest = curves(svg).into_iter().max().unwrap();
        assert!(longest <= MAX_POINTS, "{name}: a curve of {longest} points");
    }
}

#[test]
fn utilization_is_the_mean_of_each_bin_and_idle_days_are_zero() {
    // One node of 4 processors: a job on all 4 for 1 h, nothing for three days, then a job
    // on 2 for 2 h (both recorded with no wait).
    let day: u64 = 86_400;
    let text = swf(
        &[
            (1, 0, 0, 3_600, 4, 1, 1),
            (2, 3 * day as u32, 0, 7_200, 2, 1, 1),
        ],
        1,
        4,
    );
    let trace = parse_swf(&text, "test.swf").unwrap();
    let report = run(&trace, "fifo");
    let bins = &report.usage;
    assert_eq!(bins.bin_ms, 300_000, "3 days and 2 hours in 5-minute bins");
    let means = bins.means(400.0);
    let at = |t_s: u64| {
        means
            .iter()
            .find(|(start, _)| *start == t_s * 1000)
            .map(|m| m.1)
    };
    assert_eq!(at(0), Some(1.0), "the first hour: the whole node");
    assert_eq!(
        at(3_600),
        Some(0.0),
        "the idle days are empty, not interpolated"
    );
    assert_eq!(at(2 * day), Some(0.0));
    assert_eq!(at(3 * day + 900), Some(0.5), "half the node for two hours");
    assert_eq!(means.len() as u64, (3 * day + 7_200) / 300);
    // The trace ran the same schedule: its recorded usage is the same.
    assert_eq!(recorded_usage(&trace, &report, bins).as_ref(), Some(bins));

    let dir = tempfile::tempdir().unwrap();
    let plots = plot(&trace, &report, dir.path());
    // 888 bins of 5 minutes (at most 1,000 are shown), each a horizontal step of 2 points.
    assert!(plots[0].1.contains("Cluster utilization (5 min means)"));
    assert!(
        curves(&plots[0].1).contains(&1776),
        "{:?}",
        curves(&plots[0].1)
    );
}
