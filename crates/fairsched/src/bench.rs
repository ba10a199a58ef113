//! `fairsched bench`: benchmarks of the running system, a real server in this process with
//! simulated agents: `bench server` (server.rs: the scheduler's throughput) and `bench load`
//! (load.rs: the API's latency under concurrent clients), on the harness in harness.rs.

use clap::Subcommand;
use std::process::ExitCode;

mod harness;
mod load;
mod server;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Throughput of the whole scheduler server: a real server (HTTP on 127.0.0.1, SQLite
    /// store in a temporary directory) and N simulated agents in this process.
    ///
    /// The agents heartbeat through the real HTTP protocol; their jobs run no process and
    /// finish --job-ms after they started. Reports placements and completions per second,
    /// heartbeat latency percentiles and rate, errors, and the server threads' CPU time, all
    /// over the measurement window that follows the warm-up.
    Server(server::ServerBenchArgs),
    /// A load test of the server's API: a real server on 127.0.0.1 with simulated agents and
    /// N concurrent clients doing mixed reads (operation list and show, tree, nodes, events)
    /// and writes (submit, abort) for --duration; then, with --history N, the same again after
    /// N more operations have finished. Reports p50/p99 latency per route and errors.
    Load(load::LoadArgs),
}

pub fn main(command: BenchCommand) -> ExitCode {
    match command {
        BenchCommand::Server(args) => server::main(&args),
        BenchCommand::Load(args) => load::main(&args),
    }
}
