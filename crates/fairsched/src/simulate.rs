//! `fairsched simulate`: replays a workload trace through the scheduling core in virtual time
//! and writes `summary.json`, `jobs.csv` and SVG plots (see `fairsched_sim::replay`).

use clap::Args;
use fairsched_resources::{ResourceKind, Resources, parse_amount};
use fairsched_sim::replay::{self, Policy, ReplayOptions, output, plots};
use fairsched_sim::trace::{self, MachineGroup, TraceFormat};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// (`main.rs` gives the command `args_conflicts_with_subcommands`: `simulate --trace ...` or
/// `simulate compare --trace ...`.)
#[derive(Debug, Args)]
pub struct SimulateArgs {
    #[command(subcommand)]
    command: Option<SimulateCommand>,
    #[command(flatten)]
    replay: ReplayArgs,
    /// How jobs share the cluster: `fair-share` (a pool per trace group with an ephemeral
    /// pool per user under it), `drf` (a pool per user), `fifo` (one FIFO queue), the batch
    /// baselines `fcfs` (strict first come, first served), `easy` (EASY backfilling by
    /// requested times: a reservation for the queue head) and `conservative` (conservative
    /// backfilling: every waiting job has a reservation, which no later job delays), the
    /// backfilling ones expecting a job without a requested time to run its run time, all
    /// with rigid jobs, or a pool tree file (TOML/JSON; jobs go to the pool named like their group if it
    /// exists, else to their user's ephemeral pool). `+reservation` after fairsched's own
    /// (`fair-share+reservation`): the gang gathering resources for a rigid job keeps them until
    /// it starts and holds only what it needs by the running jobs' requested times, as EASY's
    /// queue head. `+nopreemption` after fairsched's own (`fair-share+nopreemption`): nothing
    /// starves, so nothing is preempted (by default starving pools take back their fair
    /// share; a rigid job preempted loses all its allocations and starts again whole).
    #[arg(long, value_name = "POLICY", default_value = "fair-share")]
    policy: String,
    /// Directory for summary.json, jobs.csv and the plots utilization.svg, queue.svg and
    /// wait_cdf.svg (created if missing).
    #[arg(long, value_name = "DIR", default_value = "simulation")]
    out: PathBuf,
}

#[derive(Debug, clap::Subcommand)]
enum SimulateCommand {
    /// Replay one trace under several policies and compare them in one report.
    ///
    /// Writes compare.md and compare.html (self-contained: the table of every metric per
    /// policy, then each kind of plot with the policies side by side) into --out, and each
    /// policy's summary.json, jobs.csv and plots into a directory of its own there. Exit
    /// status as `fairsched simulate`.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
struct CompareArgs {
    #[command(flatten)]
    replay: ReplayArgs,
    /// The policies, comma-separated (each as `fairsched simulate --policy` takes it), in the
    /// order the report lists them; e.g. `fifo,fair-share,drf`.
    #[arg(
        long,
        value_name = "POLICY,...",
        value_delimiter = ',',
        required = true
    )]
    policy: Vec<String>,
    /// Directory for the report and one directory per policy (created if missing).
    #[arg(long, value_name = "DIR", default_value = "comparison")]
    out: PathBuf,
}

/// What a replay reads, whatever the policy.
#[derive(Debug, Args)]
struct ReplayArgs {
    /// The trace: SWF (`.swf`, `.swf.gz`, Parallel Workloads Archive) or the Alibaba GPU
    /// cluster trace's pod list (`.csv`; its node list `openb_node_list_all_node.csv` is read
    /// from the same directory when present). Required.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The trace's format; default: from the file name.
    #[arg(long, value_name = "swf|alibaba-gpu")]
    format: Option<String>,
    /// The nodes: `COUNT` (the trace's node shape, COUNT of them) or
    /// `COUNT:cpu=32,memory=64GiB,gpu=8,user_slots=32` (user_slots default: one per cpu,
    /// at least 1). Default: the machine the trace describes.
    #[arg(long, value_name = "NODES")]
    nodes: Option<String>,
    /// Replay only the first N jobs (in submission order).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Virtual milliseconds between fair-share updates, at most a week (`fcfs`, `easy` and
    /// `conservative` decide at every event: 1 ms, whatever this says).
    #[arg(long, value_name = "MS", default_value_t = replay::DEFAULT_FAIR_SHARE_UPDATE_PERIOD_MS)]
    fair_share_update_period_ms: u64,
    /// How a job of several allocations starts: `rigid` (the default: whole, as the traces'
    /// batch systems ran it; it becomes a gang placed by the core's `gang_placement`, turned
    /// on in the policy's tree, which holds free resources for it until all fit) or
    /// `malleable` (each allocation as room appears; its wait is that for its first).
    #[arg(long, value_name = "rigid|malleable", default_value = "rigid")]
    job_model: String,
    /// The default model (`--job-model rigid`); kept for scripts written before it was.
    #[arg(long, hide = true)]
    rigid: bool,
}

/// Runs the command; exit 0 done, 2 bad input (the message names it), 1 the outputs could not
/// be written.
pub fn main(args: SimulateArgs) -> ExitCode {
    let result = match &args.command {
        Some(SimulateCommand::Compare(compare)) => run_compare(compare),
        None => run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("fairsched simulate: {message}");
            ExitCode::from(code)
        }
    }
}

type Failure = (u8, String);

/// The longest `--fair-share-update-period-ms` taken: a week of virtual time.
const MAX_UPDATE_PERIOD_MS: u64 = 7 * 24 * 3600 * 1000;

fn bad(message: String) -> Failure {
    (2, message)
}

fn write_failed(message: String) -> Failure {
    (1, message)
}

/// The trace read and the options of its replays (the policy left at its default).
fn load(args: &ReplayArgs) -> Result<(trace::Trace, ReplayOptions, String), Failure> {
    let file = trace_file(args)?;
    let format = args
        .format
        .as_deref()
        .map(|f| {
            f.parse::<TraceFormat>()
                .map_err(|e| format!("--format: {e}"))
        })
        .transpose()
        .map_err(bad)?;
    let trace = trace::load(file, format).map_err(|e| bad(e.to_string()))?;
    let nodes = args
        .nodes
        .as_deref()
        .map(|n| parse_nodes(n, trace.machine.as_deref()))
        .transpose()
        .map_err(|e| bad(format!("--nodes: {e}")))?;
    let rigid = match args.job_model.as_str() {
        "rigid" => true,
        "malleable" if args.rigid => {
            return Err(bad(
                "--rigid and --job-model malleable contradict each other: give one".to_string(),
            ));
        }
        "malleable" => false,
        other => {
            return Err(bad(format!(
                "--job-model: {other:?} is not a job model: rigid or malleable"
            )));
        }
    };
    if args.fair_share_update_period_ms > MAX_UPDATE_PERIOD_MS {
        return Err(bad(format!(
            "--fair-share-update-period-ms: {} ms is longer than a week ({MAX_UPDATE_PERIOD_MS} \
             ms): jobs would wait that long for their first share; the default is {} ms",
            args.fair_share_update_period_ms,
            replay::DEFAULT_FAIR_SHARE_UPDATE_PERIOD_MS
        )));
    }
    let options = ReplayOptions {
        nodes,
        fair_share_update_period_ms: args.fair_share_update_period_ms,
        limit: args.limit,
        rigid,
        ..ReplayOptions::default()
    };
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok((trace, options, name))
}

/// `--trace` (a subcommand beside the command's own options makes clap's `required` unusable:
/// it is checked here).
fn trace_file(args: &ReplayArgs) -> Result<&std::path::Path, Failure> {
    args.trace
        .as_deref()
        .ok_or_else(|| bad("--trace FILE is required: the trace to replay".to_string()))
}

/// What `--policy` asked for: the policy, a reservation for the gathering gang, preemption.
struct PolicyChoice {
    policy: Policy,
    reservation: bool,
    preemption: bool,
}

impl PolicyChoice {
    fn apply(self, options: &ReplayOptions) -> ReplayOptions {
        ReplayOptions {
            policy: self.policy,
            reservation: self.reservation,
            preemption: self.preemption,
            ..options.clone()
        }
    }
}

/// `text` as a policy: a built-in one or an existing pool tree file, with `+reservation`
/// after it for a reservation for the gathering gang and `+nopreemption` for no preemption
/// (in either order); `rigid`: the job model asked for (the baselines have no malleable
/// model, a reservation is for rigid jobs).
fn policy(text: &str, rigid: bool) -> Result<PolicyChoice, Failure> {
    let (mut name, mut reservation, mut preemption) = (text, false, true);
    loop {
        if let Some(rest) = name.strip_suffix("+reservation") {
            (name, reservation) = (rest, true);
        } else if let Some(rest) = name.strip_suffix("+nopreemption") {
            (name, preemption) = (rest, false);
        } else {
            break;
        }
    }
    let policy = Policy::parse(name);
    if !preemption && policy.is_baseline() {
        return Err(bad(format!(
            "--policy {text}: {name} never preempts (+nopreemption is for fair-share, drf, \
             fifo and pool tree files)"
        )));
    }
    if reservation && policy.is_baseline() {
        return Err(bad(format!(
            "--policy {text}: {name} already reserves for its queue head (+reservation is for \
             fair-share, drf, fifo and pool tree files)"
        )));
    }
    if reservation && !rigid {
        return Err(bad(format!(
            "--policy {text}: a reservation holds resources for a rigid job (leave out \
             --job-model malleable)"
        )));
    }
    if let Policy::File(path) = &policy
        && !path.exists()
    {
        let several = if text.contains(',') {
            format!(
                "; to replay several policies and compare them: `fairsched simulate compare \
                 --trace T --policy {text}`"
            )
        } else {
            String::new()
        };
        return Err(bad(format!(
            "--policy: {text:?} is neither one of {} nor an existing pool tree file{several}",
            Policy::BUILT_IN.join(", ")
        )));
    }
    if policy.is_baseline() && !rigid {
        return Err(bad(format!(
            "--policy {text} starts every job whole: it has no malleable model (leave out \
             --job-model malleable)"
        )));
    }
    Ok(PolicyChoice {
        policy,
        reservation,
        preemption,
    })
}

fn check_out(out: &std::path::Path) -> Result<(), Failure> {
    if out.exists() && !out.is_dir() {
        return Err(bad(format!(
            "--out {}: exists and is not a directory",
            out.display()
        )));
    }
    Ok(())
}

/// Seconds between two progress lines when stderr is not a terminal (a log, a CI job).
const PROGRESS_LINE_PERIOD: Duration = Duration::from_secs(10);

/// Shows a replay's progress (a bar on a terminal, a line every
/// [`PROGRESS_LINE_PERIOD`] otherwise) and writes `jobs.csv` as jobs end.
struct Reporter<'a> {
    trace: &'a trace::Trace,
    label: &'a str,
    bar: ProgressBar,
    /// Progress lines instead of the bar.
    lines: bool,
    started: Instant,
    last_line: Instant,
    jobs: output::JobsCsv,
    /// Writing `jobs.csv` failed (what stopped the replay).
    write_failed: bool,
}

impl replay::Observer for Reporter<'_> {
    fn progress(&mut self, p: replay::ProgressUpdate) {
        let day = p.t_ms as f64 / 86_400_000.0;
        self.bar.set_position(p.finished);
        self.bar
            .set_message(format!("{} submitted, day {day:.1}", p.submitted));
        if self.lines && self.last_line.elapsed() >= PROGRESS_LINE_PERIOD {
            self.last_line = Instant::now();
            eprintln!(
                "fairsched simulate: {}{} of {} jobs finished, {} submitted, virtual day \
                 {day:.1}, {:.0} s",
                self.label,
                p.finished,
                p.total,
                p.submitted,
                self.started.elapsed().as_secs_f64()
            );
        }
        // What finished so far is on disk if the replay is stopped; a failure to write
        // shows at the next row or at the end.
        let _ = self.jobs.flush();
    }

    fn outcome(&mut self, record: &replay::JobRecord) -> Result<(), String> {
        let written = self.jobs.write(self.trace, record);
        self.write_failed = written.is_err();
        written
    }
}

/// Replays `trace` under `options` with a progress bar (`label` before it), writing `out`'s
/// `jobs.csv` as jobs end (in `jobs.csv.partial` until the replay is over).
fn replay_with_progress(
    trace: &trace::Trace,
    options: &ReplayOptions,
    label: &str,
    out: &std::path::Path,
) -> Result<(replay::ReplayReport, output::JobsCsv), Failure> {
    let total = options
        .limit
        .unwrap_or(trace.jobs.len())
        .min(trace.jobs.len());
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{label}{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} jobs finished ({{per_sec}}, eta {{eta}}) {{msg}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut reporter = Reporter {
        trace,
        label,
        bar,
        lines: !std::io::stderr().is_terminal(),
        started: Instant::now(),
        last_line: Instant::now(),
        jobs: output::JobsCsv::new(out),
        write_failed: false,
    };
    let result = replay::replay_observed(trace, options, &mut reporter);
    reporter.bar.finish_and_clear();
    match result {
        Ok(report) => Ok((report, reporter.jobs)),
        Err(e) if reporter.write_failed => Err(write_failed(e)),
        Err(e) if reporter.jobs.rows() > 0 => {
            let _ = reporter.jobs.flush();
            Err(bad(format!(
                "{e} (the {} jobs that had ended are in {})",
                reporter.jobs.rows(),
                reporter.jobs.partial_path().display()
            )))
        }
        Err(e) => Err(bad(e)),
    }
}

/// Writes a replay's summary.json and plots into `out` and finishes its jobs.csv; returns
/// the summary and the plots' paths.
fn write_outputs(
    trace: &trace::Trace,
    file: &std::path::Path,
    name: &str,
    (report, jobs): (&replay::ReplayReport, output::JobsCsv),
    out: &std::path::Path,
) -> Result<(output::Summary, Vec<PathBuf>), Failure> {
    let summary = output::summary(trace, &file.display().to_string(), report);
    std::fs::create_dir_all(out)
        .map_err(|e| write_failed(format!("--out {}: {e}", out.display())))?;
    output::write_summary(&summary, &out.join("summary.json")).map_err(write_failed)?;
    let plotted = plots::write_plots(trace, name, report, out).map_err(write_failed)?;
    jobs.finish().map_err(write_failed)?;
    Ok((summary, plotted))
}

fn run(args: &SimulateArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let (trace, options, name) = load(&args.replay)?;
    let options = policy(&args.policy, options.rigid)?.apply(&options);
    check_out(&args.out)?;
    let (report, jobs) = replay_with_progress(&trace, &options, "", &args.out)?;
    let (summary, plotted) = write_outputs(
        &trace,
        trace_file(&args.replay)?,
        &name,
        (&report, jobs),
        &args.out,
    )?;
    eprintln!(
        "fairsched simulate: {} jobs ({} completed, {} unfinished, {} failed, {} skipped) on {} \
         nodes under {} in {:.1} s; mean wait {:.0} s, utilization {:.1} %; wrote summary.json, jobs.csv and {} \
         into {}",
        summary.jobs.replayed,
        summary.jobs.completed,
        summary.jobs.unfinished,
        summary.jobs.failed,
        summary.jobs.skipped,
        summary.nodes.count,
        summary.policy,
        started.elapsed().as_secs_f64(),
        summary.wait_s.mean,
        summary.utilization * 100.0,
        plotted
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .collect::<Vec<_>>()
            .join(", "),
        args.out.display()
    );
    Ok(())
}

/// A directory name for the `i`th policy: its position and its name, letters, digits, `-`
/// and `_` kept (a pool tree file is named by its file stem).
fn policy_dir(i: usize, text: &str) -> String {
    let stem = std::path::Path::new(text)
        .file_stem()
        .map_or(text.to_string(), |s| s.to_string_lossy().into_owned());
    let clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}-{clean}", i + 1)
}

fn run_compare(args: &CompareArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let (trace, options, name) = load(&args.replay)?;
    // Every policy is checked before any is replayed.
    let policies: Vec<(String, PolicyChoice)> = args
        .policy
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(|p| Ok((p.to_string(), policy(p, options.rigid)?)))
        .collect::<Result<_, Failure>>()?;
    if policies.is_empty() {
        return Err(bad("--policy: no policy given".to_string()));
    }
    check_out(&args.out)?;
    let mut rows = Vec::new();
    let mut plots = Vec::new();
    for (i, (text, choice)) in policies.into_iter().enumerate() {
        let options = choice.apply(&options);
        let label = format!("[{}/{}] {text} ", i + 1, args.policy.len());
        let dir = args.out.join(policy_dir(i, &text));
        let (report, jobs) = replay_with_progress(&trace, &options, &label, &dir)?;
        let (summary, plotted) = write_outputs(
            &trace,
            trace_file(&args.replay)?,
            &name,
            (&report, jobs),
            &dir,
        )?;
        rows.push(replay::compare::row(&trace, &report, &summary));
        plots.push(
            plotted
                .iter()
                .map(|p| {
                    std::fs::read_to_string(p)
                        .map_err(|e| write_failed(format!("{}: {e}", p.display())))
                })
                .collect::<Result<Vec<_>, _>>()?,
        );
        eprintln!(
            "fairsched simulate compare: {text}: mean wait {:.0} s, utilization {:.1} % ({})",
            summary.wait_s.mean,
            summary.utilization * 100.0,
            dir.display()
        );
    }
    let md = args.out.join("compare.md");
    let html = args.out.join("compare.html");
    std::fs::write(&md, replay::compare::markdown(&name, &rows))
        .map_err(|e| write_failed(format!("{}: {e}", md.display())))?;
    std::fs::write(&html, replay::compare::html(&name, &rows, &plots))
        .map_err(|e| write_failed(format!("{}: {e}", html.display())))?;
    eprintln!(
        "fairsched simulate compare: {} policies on {name} in {:.1} s; wrote {} and {}",
        rows.len(),
        started.elapsed().as_secs_f64(),
        md.display(),
        html.display()
    );
    Ok(())
}

/// `COUNT` or `COUNT:kind=amount,...`.
fn parse_nodes(text: &str, machine: Option<&[MachineGroup]>) -> Result<Vec<MachineGroup>, String> {
    let (count, resources) = match text.split_once(':') {
        Some((count, resources)) => (count, Some(resources)),
        None => (text, None),
    };
    let count: u32 = count
        .trim()
        .parse()
        .map_err(|_| format!("{count:?} is not a node count"))?;
    if count == 0 {
        return Err("the node count must be above 0".to_string());
    }
    let Some(resources) = resources else {
        let shape = machine
            .and_then(|groups| groups.iter().max_by_key(|g| g.count))
            .ok_or("the trace does not describe its nodes; give their resources (COUNT:cpu=...)")?;
        return Ok(vec![MachineGroup {
            count,
            resources: shape.resources,
            tags: shape.tags.clone(),
        }]);
    };
    let mut r = Resources::ZERO;
    let mut slots_given = false;
    for part in resources.split(',') {
        let (name, amount) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not kind=amount"))?;
        let kind = ResourceKind::from_name(name.trim()).ok_or_else(|| {
            format!("unknown resource {name:?} (user_slots, cpu, gpu, memory, network)")
        })?;
        let raw = parse_amount(kind, amount.trim()).map_err(|e| format!("{name}: {e}"))?;
        r.set_raw(kind, raw);
        slots_given |= kind == ResourceKind::UserSlots;
    }
    if !slots_given {
        r = r.with(
            ResourceKind::UserSlots,
            r.get(ResourceKind::Cpu).ceil().max(1.0),
        );
    }
    Ok(vec![MachineGroup {
        count,
        resources: r,
        tags: Vec::new(),
    }])
}
