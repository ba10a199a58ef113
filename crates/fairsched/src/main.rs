//! The `fairsched` binary.

mod agent;
mod allocator;
mod args;
mod bench;
mod cli;
mod hdrf_check;
mod runtime;
mod server;
mod simulate;
mod up;

/// mimalloc for every command: in a server placing thousands of jobs a second glibc's
/// malloc (consolidating and unlinking free chunks) took about a quarter of the CPU (perf,
/// BENCHMARKS.md "Session 14"); its purge is off by default (`allocator.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    #[command(args_conflicts_with_subcommands = true)]
    Simulate(simulate::SimulateArgs),
    /// Configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Benchmarks of the running system (`bench server`: the scheduler server's throughput
    /// with simulated agents; `bench load`: the API under concurrent clients; `bench
    /// trivial-jobs`: the workload of the comparison with Slurm on real processes).
    Bench {
        #[command(subcommand)]
        command: bench::BenchCommand,
    },
    /// Run the scheduler server.
    Server(server::ServerArgs),
    /// Run a node agent that runs jobs on this machine.
    Agent(agent::AgentArgs),
    /// A whole cluster on this machine: the server and N agents sharing its resources.
    Up(up::UpArgs),
    // The CLI: op, pool, node, tree, events.
    #[command(flatten)]
    Cli(cli::CliCommand),
}

#[derive(Debug, Args)]
struct ScenarioArgs {
    /// The scenario file (JSON; its format: docs/scenario-format.md).
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
    /// Check a configuration file as the server would read it, without starting anything:
    /// prints what it configures, or the errors (each naming the file, line and option).
    ///
    /// `--for server` checks the server's file (`fairsched server --config FILE`): its
    /// options, `[auth]` and token files, the pool trees it configures (`pool_trees_file`
    /// read) and the scheduler's settings with them. `--for pool-trees` checks a pool-trees
    /// file (the server's `pool_trees_file`, what `fairsched pool apply` takes). Without
    /// `--for`, a file with a server option (`listen`, `data_dir`, `scheduler`, `auth`, ...)
    /// is a server's file, any other a pool-trees file. Exit status: 0 valid, 2 not.
    Check {
        /// The file (.toml; a pool-trees file may also be .json).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Which kind of file [default: decided by its options].
        #[arg(long = "for", value_enum, value_name = "FILE")]
        kind: Option<ReferenceFile>,
    },
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

/// A closed standard output (`fairsched op list | head -1`) ends the command quietly, with the
/// status a process killed by SIGPIPE has (128 + 13), as other command-line tools end, instead
/// of a panic message: Rust ignores SIGPIPE, so `println!` panics on a closed pipe.
fn exit_quietly_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    // An agent's job spawner (or a job's keeper on its own) before anything else.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match args.get(1) {
        Some(a) if a == fairsched_agent::keeper::SPAWNER_ARG => {
            fairsched_agent::keeper::spawner_main(&args[2..])
        }
        Some(a) if a == fairsched_agent::keeper::KEEPER_ARG => {
            fairsched_agent::keeper::main(&args[2..])
        }
        _ => {}
    }
    allocator::configure();
    exit_quietly_on_closed_stdout();
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
        Command::Config {
            command: ConfigCommand::Check { file, kind },
        } => {
            // What the server would warn about at its start (token files others may read):
            // on stderr.
            runtime::init_tracing();
            match check_config(&file, kind) {
                Ok(summary) => {
                    println!("{summary}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Simulate(args) => simulate::main(args),
        Command::Bench { command } => bench::main(command),
        Command::Server(args) => exit_status(server::run(args)),
        Command::Agent(args) => exit_status(agent::run(args)),
        Command::Up(args) => exit_status(up::run(args)),
        Command::Cli(command) => exit_status(cli::run(command)),
    }
}

/// The exit status of `server`, `agent`, `up` and the CLI's commands: 0, or 1 with the error
/// on stderr.
fn exit_status(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A database URL with its password, if any, replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or("");
            format!("{scheme}://{name}:***@{host}")
        }
        _ => url.to_string(),
    }
}

/// `fairsched config check`: what a valid file configures, as lines of text.
/// The top-level options of a server file but `pool_trees` (which a pool-trees file has too):
/// a file with one of them is a server file. From the server file's reference, so that it
/// knows every option.
fn server_options() -> Vec<String> {
    let schema = fairsched_server::reference::server_config().json_schema();
    schema["$defs"]["ServerConfig"]["x-order"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o.as_str())
        .filter(|o| *o != "pool_trees")
        .map(str::to_string)
        .collect()
}

fn check_config(file: &std::path::Path, kind: Option<ReferenceFile>) -> anyhow::Result<String> {
    let kind = match kind {
        Some(k) => k,
        None => {
            let document: serde_json::Value = fairsched_config::from_file(file)?;
            let options = server_options();
            let is_server = document
                .as_object()
                .is_some_and(|o| o.keys().any(|k| options.contains(k)));
            if is_server {
                ReferenceFile::Server
            } else {
                ReferenceFile::PoolTrees
            }
        }
    };
    let mut out = Vec::new();
    match kind {
        ReferenceFile::Server => {
            let config = fairsched_server::ServerConfig::from_file(file)?;
            let summary = fairsched_server::check_config(&config)?;
            out.push(format!("{}: a valid server file", file.display()));
            match &config.store.url {
                None => out.push(format!(
                    "  listen {}, data_dir {}",
                    config.listen,
                    config.data_dir.display()
                )),
                Some(url) => {
                    let advertised = config
                        .advertise_url
                        .clone()
                        .unwrap_or_else(|| format!("http://{}", config.listen));
                    out.push(format!(
                        "  listen {}, advertised as {advertised}",
                        config.listen
                    ));
                    out.push(format!(
                        "  store: PostgreSQL {} (not connected to by this check), lease {} ms",
                        without_password(url),
                        config.store.lease_ms
                    ));
                }
            }
            match &summary.trees_source {
                Some(source) => {
                    out.push(format!("  pool trees from {source} (used on a new store):"));
                    for (name, pools) in &summary.trees {
                        out.push(format!("    {name}: {pools} pools"));
                    }
                }
                None => out.push("  no pool trees: a new store runs one tree, default".into()),
            }
            out.push(if summary.users == 0 {
                "  authentication off (no [auth] users)".to_string()
            } else {
                format!(
                    "  {} [auth] users; agents need the agent_token",
                    summary.users
                )
            });
            for w in &summary.warnings {
                out.push(format!("  warning: {w}"));
            }
        }
        ReferenceFile::PoolTrees => {
            // A pool-trees file, or one tree (`[config]`, `[pools.NAME]`) as `pool apply`
            // takes it.
            let document: serde_json::Value = fairsched_config::from_file(file)?;
            let trees = if document.get("pool_trees").is_some() {
                fairsched_config::load_pool_trees_file(file)?
            } else {
                let tree = fairsched_config::load_pool_tree_file(file)?;
                fairsched_config::PoolTrees::single("tree", tree)
            };
            let validated = fairsched_config::validate_pool_trees(&trees)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            out.push(format!("{}: valid pool trees", file.display()));
            for (name, t) in &validated.trees {
                let default = if validated.default_tree.as_deref() == Some(name) {
                    " (default)"
                } else {
                    ""
                };
                out.push(format!("  {name}{default}: {} pools", t.pools.len()));
            }
            for w in &validated.warnings {
                out.push(format!("  warning: {w}"));
            }
        }
    }
    Ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    /// Every top-level option of a server file tells `config check` it is one (a file with
    /// only `agent_token_file` was checked as a pool-trees file: "unknown option").
    #[test]
    fn every_server_option_marks_a_server_file() {
        let options = serde_json::to_value(fairsched_server::ServerConfig::default()).unwrap();
        for key in options.as_object().unwrap().keys() {
            assert!(
                key == "pool_trees" || super::server_options().contains(key),
                "{key} is missing from the server options"
            );
        }
    }
}
