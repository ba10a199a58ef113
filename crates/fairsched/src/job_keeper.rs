//! The job keeper alone (`fairsched-job-keeper __job-keeper ...`): agents run it for each job
//! when it is installed beside `fairsched` (it starts faster than `fairsched __job-keeper`).

fn main() {
    fairsched_agent::keeper::binary_main()
}
