//! The job keeper alone (`fairsched-job-keeper __job-keeper ...`): agents run it for each job
//! when it is installed beside `fairsched` (it starts faster than `fairsched __job-keeper`).

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
