//! `fairsched bench`: benchmarks of the running system. A real server with simulated agents in
//! this process: `bench server` (server.rs: the scheduler's throughput; the server as a child
//! process, or with `--in-process` in this one) and `bench load` (load.rs: the API's latency
//! under concurrent clients; the server in this process), on the harness in harness.rs; and a
//! cluster of real server and agent processes running real jobs: `bench trivial-jobs`
//! (trivial_jobs.rs: the workload of the comparison with Slurm).

use clap::Subcommand;
use std::process::ExitCode;

mod harness;
mod load;
mod server;
mod trivial_jobs;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Throughput of the whole scheduler server: N simulated agents in this process against a
    /// real server (HTTP on 127.0.0.1, SQLite store in a temporary directory).
    ///
    /// The server is a separate process, `fairsched server` of this binary started with a
    /// configuration file written to the temporary directory and stopped by its PID at the
    /// end (also when the run fails or is interrupted); with --in-process it runs on a tokio
    /// runtime of this process instead. This process needs about one open file per agent (two
    /// with --in-process), and the server process as many; the soft limit is raised up to the
    /// hard limit (`ulimit -Hn`) as needed.
    ///
    /// The agents heartbeat through the real HTTP protocol; their jobs run no process and
    /// finish --job-ms after they started. Reports placements and completions per second,
    /// heartbeat latency percentiles and rate, errors, the server's CPU time and peak memory
    /// (its process's; with --in-process its threads' CPU and no memory of its own), and this
    /// process's, all over the measurement window that follows the warm-up.
    Server(server::ServerBenchArgs),
    /// A load test of the server's API: a real server on 127.0.0.1 with simulated agents and
    /// N concurrent clients doing mixed reads (operation list and show, tree, nodes, events)
    /// and writes (submit, abort) for --duration; then, with --history N, the same again after
    /// N more operations have finished. Reports p50/p99 latency per route and errors.
    Load(load::LoadArgs),
    /// The trivial-job workload of the comparison with Slurm (issue 20) on a cluster of real
    /// processes: a `fairsched server` and --agents `fairsched agent`s (by default 8 × 8 cpus
    /// = 64 slots) on 127.0.0.1, started from this binary with configuration files in a
    /// temporary directory; every job runs `true`.
    ///
    /// Phases (through the HTTP API): idle_latency (one one-job operation at a time:
    /// submit-to-start p50/p99), one_after_another (--operations one-job operations, each
    /// submitted when the last submission was answered: submissions/s and jobs completed/s),
    /// one_operation (one operation of --jobs jobs: jobs/s), with_backlog (--backlog
    /// operations wait in a pool whose running-operation limit is 0, then one_after_another
    /// again). scripts/slurm-trivial-jobs.sh runs the same workload on Slurm. Every process is
    /// stopped by its PID at the end.
    TrivialJobs(trivial_jobs::TrivialJobsArgs),
}

pub fn main(command: BenchCommand) -> ExitCode {
    match command {
        BenchCommand::Server(args) => server::main(&args),
        BenchCommand::Load(args) => load::main(&args),
        BenchCommand::TrivialJobs(args) => trivial_jobs::main(&args),
    }
}
