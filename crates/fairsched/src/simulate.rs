//! `fairsched simulate`: replays a workload trace through the scheduling core in virtual time
//! and writes `summary.json`, `jobs.csv` and SVG plots (see `fairsched_sim::replay`).

use clap::Args;
use fairsched_resources::{ResourceKind, Resources, parse_amount};
use fairsched_sim::replay::{self, Policy, ReplayOptions, output, plots};
use fairsched_sim::trace::{self, MachineGroup, TraceFormat};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The trace: SWF (`.swf`, `.swf.gz`, Parallel Workloads Archive) or the Alibaba GPU
    /// cluster trace's pod list (`.csv`; its node list `openb_node_list_all_node.csv` is read
    /// from the same directory when present).
    #[arg(long, value_name = "FILE")]
    trace: PathBuf,
    /// The trace's format; default: from the file name.
    #[arg(long, value_name = "swf|alibaba-gpu")]
    format: Option<String>,
    /// How jobs share the cluster: `fair-share` (a pool per trace group with an ephemeral
    /// pool per user under it), `drf` (a pool per user), `fifo` (one FIFO queue), or a pool
    /// tree file (TOML/JSON; jobs go to the pool named like their group if it exists, else to
    /// their user's ephemeral pool).
    #[arg(long, value_name = "POLICY", default_value = "fair-share")]
    policy: String,
    /// The nodes: `COUNT` (the trace's node shape, COUNT of them) or
    /// `COUNT:cpu=32,memory=64GiB,gpu=8,user_slots=32` (user_slots default: one per cpu,
    /// at least 1). Default: the machine the trace describes.
    #[arg(long, value_name = "NODES")]
    nodes: Option<String>,
    /// Directory for summary.json, jobs.csv and the plots utilization.svg, queue.svg and
    /// wait_cdf.svg (created if missing).
    #[arg(long, value_name = "DIR", default_value = "simulation")]
    out: PathBuf,
    /// Replay only the first N jobs (in submission order).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Virtual milliseconds between fair-share updates.
    #[arg(long, value_name = "MS", default_value_t = replay::DEFAULT_FAIR_SHARE_UPDATE_PERIOD_MS)]
    fair_share_update_period_ms: u64,
    /// Start every job whole (all its allocations at once), as the traces' batch systems did:
    /// a job of several allocations becomes a gang placed by the core's `gang_placement`
    /// (turned on in the policy's tree), which holds free resources for it until all fit.
    /// Default: allocations start one by one as nodes free up (malleable).
    #[arg(long)]
    rigid: bool,
}

/// Runs the command; exit 0 done, 2 bad input (the message names it), 1 the outputs could not
/// be written.
pub fn main(args: SimulateArgs) -> ExitCode {
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("fairsched simulate: {message}");
            ExitCode::from(code)
        }
    }
}

fn run(args: &SimulateArgs) -> Result<(), (u8, String)> {
    let bad = |m: String| (2u8, m);
    let format = args
        .format
        .as_deref()
        .map(|f| {
            f.parse::<TraceFormat>()
                .map_err(|e| format!("--format: {e}"))
        })
        .transpose()
        .map_err(bad)?;
    let started = Instant::now();
    let trace = trace::load(&args.trace, format).map_err(|e| bad(e.to_string()))?;
    let nodes = args
        .nodes
        .as_deref()
        .map(|n| parse_nodes(n, trace.machine.as_deref()))
        .transpose()
        .map_err(|e| bad(format!("--nodes: {e}")))?;
    let policy = Policy::parse(&args.policy);
    if let Policy::File(path) = &policy
        && !path.exists()
    {
        return Err(bad(format!(
            "--policy: {:?} is neither one of {} nor an existing pool tree file",
            args.policy,
            Policy::BUILT_IN.join(", ")
        )));
    }
    let options = ReplayOptions {
        policy,
        nodes,
        fair_share_update_period_ms: args.fair_share_update_period_ms,
        limit: args.limit,
        rigid: args.rigid,
    };
    if args.out.exists() && !args.out.is_dir() {
        return Err(bad(format!(
            "--out {}: exists and is not a directory",
            args.out.display()
        )));
    }
    let total = args.limit.unwrap_or(trace.jobs.len()).min(trace.jobs.len());
    let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} jobs finished ({per_sec}, eta {eta}) {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let report = replay::replay(&trace, &options, &mut |p| {
        bar.set_position(p.finished);
        bar.set_message(format!(
            "{} submitted, day {:.1}",
            p.submitted,
            p.t_ms as f64 / 86_400_000.0
        ));
    })
    .map_err(bad)?;
    bar.finish_and_clear();
    let file = args.trace.display().to_string();
    let summary = output::summary(&trace, &file, &report);
    let write = |e: String| (1u8, e);
    std::fs::create_dir_all(&args.out)
        .map_err(|e| write(format!("--out {}: {e}", args.out.display())))?;
    output::write_summary(&summary, &args.out.join("summary.json")).map_err(write)?;
    output::write_jobs_csv(&trace, &report, &args.out.join("jobs.csv")).map_err(write)?;
    let name = args.trace.file_name().map_or_else(
        || args.trace.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let plotted = plots::write_plots(&trace, &name, &report, &args.out).map_err(write)?;
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
