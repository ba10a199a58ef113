//! The job keeper alone (`fairsched-job-keeper __job-keeper ...`), for the agent's tests,
//! whose test programs cannot be one; `fairsched` runs itself as its agents' keeper.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match args.get(1) {
        Some(a) if a == fairsched_agent::keeper::KEEPER_ARG => {
            fairsched_agent::keeper::main(&args[2..])
        }
        _ => {
            eprintln!("usage: fairsched-job-keeper __job-keeper ... (run by an agent)");
            std::process::exit(2)
        }
    }
}
