//! The job spawner and keepers alone (`fairsched-job-keeper __job-spawner ...`), for the
//! agent's tests, whose test programs cannot be one; `fairsched` runs itself as its agents'
//! spawner unless this program is installed beside it.

fn main() {
    fairsched_agent::keeper::binary_main()
}
