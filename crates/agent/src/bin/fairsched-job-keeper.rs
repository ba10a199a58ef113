//! The job keeper alone (`fairsched-job-keeper __job-keeper ...`), for the agent's tests,
//! whose test programs cannot be one; `fairsched` runs itself as its agents' keeper.

fn main() {
    fairsched_agent::keeper::binary_main()
}
