//! The job spawner and keepers alone (`fairsched-job-keeper __job-spawner ...`): agents run it
//! as their spawner when it is installed beside `fairsched` (a smaller process than
//! `fairsched __job-spawner`, so the keeper it forks for each job is smaller too).

fn main() {
    fairsched_agent::keeper::binary_main()
}
