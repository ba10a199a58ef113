//! The `fairsched` binary.

mod bench;
mod cluster;
mod hdrf_check;
mod simulate;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// fairsched: a cluster scheduler for shared batch compute with hierarchical quotas.
#[derive(Debug, Parser)]
#[command(name = "fairsched", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The fair-share computation (vector HDRF).
    Hdrf {
        #[command(subcommand)]
        command: HdrfCommand,
    },
    /// Run a scenario file in virtual time through the scheduling core.
    ///
    /// Prints JSON lines: every event as it happens, then the snapshots; the same file gives
    /// the same bytes. Exit status: 0 ran, 1 output could not be written, 2 the file is
    /// malformed (each problem names the file and the JSON path).
    Scenario(ScenarioArgs),
    /// Replay a workload trace (SWF, Alibaba GPU) through the scheduling core in virtual time.
    ///
    /// Writes summary.json (jobs, wait and response times, slowdown, utilization, per group),
    /// jobs.csv (one row per job) and SVG plots (utilization.svg, queue.svg, wait_cdf.svg)
    /// into --out, with a progress bar on a terminal. Exit status: 0 done, 1 the outputs could
    /// not be written, 2 bad input (the message names the file, line and field, or the
    /// option).
    Simulate(simulate::SimulateArgs),
    /// Configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Benchmarks of the running system (`bench server`: the scheduler server's throughput
    /// with simulated agents).
    Bench {
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
    #[command(flatten)]
    Cluster(cluster::ClusterCommand),
}

#[derive(Debug, Args)]
struct ScenarioArgs {
    /// The scenario file (JSON; see PRODUCT.md "Scenario format").
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Also write events.jsonl, snapshots.jsonl and summary.json into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print one JSON line of counters (placements, preemptions, heartbeats,
    /// fair_share_updates, core_cpu_ms) to stderr at the end.
    #[arg(long)]
    stats: bool,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the reference of every option of a configuration file: name, aliases, type,
    /// default and documentation, generated from the configuration types.
    ///
    /// `--for server` (the default) documents the server's file, `fairsched server --config
    /// FILE` with its `[scheduler]` block (docs/server-config-reference.md); `--for
    /// pool-trees` documents a pool-trees file, the server's `pool_trees_file` and what
    /// `fairsched pool apply` takes (docs/config-reference.md).
    Reference {
        /// Which file: server (`fairsched server --config`) or pool-trees.
        #[arg(
            long = "for",
            value_enum,
            default_value = "server",
            value_name = "FILE"
        )]
        file: ReferenceFile,
        /// markdown (the page in docs/) or json-schema (the JSON schema it is rendered from;
        /// the server's is complete, inline pool trees included).
        #[arg(long, value_enum, default_value = "markdown")]
        format: ReferenceFormat,
    },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ReferenceFile {
    /// The server's file, `fairsched server --config FILE`.
    Server,
    /// A pool-trees file.
    PoolTrees,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ReferenceFormat {
    Markdown,
    JsonSchema,
}

#[derive(Debug, Subcommand)]
enum HdrfCommand {
    /// Run fair-share conformance files (the format of shared/conformance/vector_hdrf_cases.json).
    ///
    /// Prints one line per case (`ok ID` / `FAIL ID` with the failing assertions below it), then
    /// `N passed, N failed`. Exit status: 0 all passed, 1 a case failed, 2 a file is malformed.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Conformance files to run.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Report the time of every update call (`update_ms`).
    #[arg(long)]
    time: bool,
    /// Also compare with each step's `derived_not_asserted` values (tolerance 1e-9) and show the
    /// implementation-specific upstream assertions; differences are notes, never failures.
    #[arg(long)]
    derived: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Hdrf {
            command: HdrfCommand::Check(args),
        } => hdrf_check::check(
            &args.files,
            args.json,
            hdrf_check::Flags {
                time: args.time,
                derived: args.derived,
            },
        ),
        Command::Scenario(args) => {
            let options = fairsched_sim::scenario::cli::Options {
                file: args.file,
                out: args.out,
                stats: args.stats,
            };
            let stdout = std::io::stdout();
            let mut stdout = std::io::BufWriter::new(stdout.lock());
            let code =
                fairsched_sim::scenario::cli::main(&options, &mut stdout, &mut std::io::stderr());
            ExitCode::from(code)
        }
        Command::Config {
            command: ConfigCommand::Reference { file, format },
        } => {
            let reference = match file {
                ReferenceFile::Server => fairsched_server::reference::server_config(),
                ReferenceFile::PoolTrees => fairsched_config::reference::pool_trees(),
            };
            let text = match format {
                ReferenceFormat::Markdown => reference.markdown(),
                ReferenceFormat::JsonSchema => format!("{:#}\n", reference.json_schema()),
            };
            match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            }
        }
        Command::Simulate(args) => simulate::main(args),
        Command::Bench { command } => bench::main(command),
        Command::Cluster(command) => cluster::main(command),
    }
}
