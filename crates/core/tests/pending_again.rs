//! A job that goes back to pending between fair-share updates (it failed, or was aborted) can
//! start again at once: the heartbeat's skip rule ("this node cannot fit even the smallest
//! pending job") reads the pending jobs as they are now, not as of the last update (where
//! there were none, so every heartbeat was skipped until the next update).

mod common;

use common::{StartOp, add_nodes, op, res, scheduler, task};
use fairsched_core::{
    FinishedAllocation, JobOutcome, NodeHeartbeat, NodeId, OperationId, SchedulerConfig,
};

/// (how the job ends, cpu of a job of a second operation pending throughout (0: none))
const CASES: &[(JobOutcome, f64)] = &[
    // Nothing was pending at the last update.
    (JobOutcome::Failed, 0.0),
    (JobOutcome::Aborted, 0.0),
    // Only a job larger than the node was pending then.
    (JobOutcome::Failed, 2.0),
    (JobOutcome::Aborted, 2.0),
];

#[test]
fn a_job_pending_again_between_updates_starts_at_the_same_heartbeat() {
    for &(outcome, other) in CASES {
        let case = format!("{outcome:?}, other job of {other} cpu");
        let mut s = scheduler(
            r#"{"pool_trees": {"default": {"pools": {"p": {}}}}}"#,
            // Updates far apart: everything below happens between two of them.
            SchedulerConfig {
                fair_share_update_period_ms: 60_000,
                ..SchedulerConfig::default()
            },
        );
        add_nodes(&mut s, 1, res(1.0, 2.0));
        s.start_op(0, op("a", Some("p"), vec![task(1, res(1.0, 1.0), None)]))
            .expect("operation");
        if other > 0.0 {
            s.start_op(0, op("b", Some("p"), vec![task(1, res(other, 1.0), None)]))
                .expect("operation");
        }
        s.update_fair_share(0);
        let node = NodeId("node-0".into());
        let first = s
            .process_heartbeat(100, &node, NodeHeartbeat::default())
            .expect("heartbeat");
        assert_eq!(first.start.len(), 1, "{case}: the first job starts");
        // The last update before the job ends sees it running.
        s.update_fair_share(150);
        let finished = vec![FinishedAllocation {
            allocation: first.start[0].allocation,
            outcome,
        }];
        let again = s
            .process_heartbeat(200, &node, NodeHeartbeat { finished })
            .expect("heartbeat");
        assert_eq!(
            again.start.len(),
            1,
            "{case}: a job starts in the room the ended one left, before the next update"
        );
        assert_eq!(again.start[0].operation, OperationId("a".into()), "{case}");
    }
}
