//! `--run-jobs-as-users`: each job runs as its operation's user's account (here `nobody`), in
//! its own directory, unable to read the agent's records; a job of a user without an account
//! here, or of `root`, fails saying why. Needs root (the agent then runs as root); skipped
//! otherwise.

mod common;

use fairsched_agent::MemoryEnforcement;
use fairsched_api::{JobState, OperationState, SubmitOperation, TaskSubmit, parse_resources};
use std::time::Duration;

fn as_user(user: &str, script: &str) -> SubmitOperation {
    SubmitOperation {
        user: Some(user.into()),
        max_failed_job_count: Some(1),
        tasks: vec![TaskSubmit {
            job_count: 1,
            resources: parse_resources("cpu=0.5,memory=0").unwrap(),
            command: vec!["sh".into(), "-c".into(), script.into()],
            ..TaskSubmit::default()
        }],
        ..SubmitOperation::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_as_their_users_account() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: --run-jobs-as-users needs root");
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("an account nobody");
    let cluster = common::start_with_options(MemoryEnforcement::Poll, None, None, true).await;
    let journal = cluster.work_dir.join("state").join("journal");
    let script = format!(
        "id -u; id -g; touch mine && stat -c %u mine; echo $HOME $USER; \
         cat {} > /dev/null 2>&1 && echo read-the-journal || echo denied",
        journal.display()
    );
    let op = cluster
        .client
        .submit(&as_user("nobody", &script))
        .await
        .unwrap()
        .id;
    let view = cluster
        .wait_state(&op, OperationState::Completed, Duration::from_secs(30))
        .await;
    assert_eq!(view.jobs[0].exit_code, Some(0), "{view:?}");
    let logs = cluster.client.operation_logs(&op).await.unwrap();
    let uid = nobody.uid.as_raw();
    assert_eq!(
        logs[0].stdout,
        format!(
            "{uid}\n{}\n{uid}\n{} nobody\ndenied\n",
            nobody.gid.as_raw(),
            nobody.dir.display()
        ),
        "{logs:?}"
    );

    for (user, why) in [
        ("no-such-user-of-fairsched", "there is no account"),
        ("root", "would run as root"),
    ] {
        let op = cluster
            .client
            .submit(&as_user(user, "echo ran"))
            .await
            .unwrap()
            .id;
        let (job, _) = cluster.first_ended_job(&op, Duration::from_secs(30)).await;
        assert_eq!(job.state, JobState::Failed, "{job:?}");
        let reason = job.reason.clone().unwrap_or_default();
        assert!(
            reason.contains(why) && reason.contains("--run-jobs-as-users"),
            "{user}: {job:?}"
        );
    }
    cluster.stop().await;
}
