//! A failed job runs again, until the operation's `max_failed_job_count` (YTsaurus default 10):
//! then the operation fails, naming the limit, and its other jobs are aborted.

mod common;

use common::{StartOp, add_nodes, op, res, scheduler, task};
use fairsched_core::{
    FinishedAllocation, JobOutcome, NodeHeartbeat, NodeId, OperationId, OperationState,
    SchedulerConfig,
};

/// (limit in the spec, failures before the operation fails)
const CASES: &[(Option<u32>, u32)] = &[(Some(3), 3), (Some(1), 1), (None, 10)];

#[test]
fn an_operation_fails_when_its_failed_job_limit_is_reached() {
    for &(limit, expected) in CASES {
        let mut s = scheduler(
            r#"{"pool_trees": {"default": {"pools": {"p": {}}}}}"#,
            SchedulerConfig::default(),
        );
        add_nodes(&mut s, 1, res(2.0, 2.0));
        let mut spec = op("a", Some("p"), vec![task(5, res(1.0, 1.0), None)]);
        spec.max_failed_job_count = limit;
        s.start_op(0, spec).expect("operation");
        let node = NodeId("node-0".into());
        let id = OperationId("a".into());
        let mut running = Vec::new();
        let mut failures = 0;
        let mut t = 0;
        // Every heartbeat, one running job fails.
        while s.operation(&id).expect("op").state == OperationState::Running {
            assert!(
                failures <= expected,
                "limit {limit:?}: still running after {failures}"
            );
            s.tick(t);
            let finished = running
                .pop()
                .map(|allocation| FinishedAllocation {
                    allocation,
                    outcome: JobOutcome::Failed,
                })
                .into_iter()
                .collect::<Vec<_>>();
            failures += finished.len() as u32;
            let response = s
                .process_heartbeat(t, &node, NodeHeartbeat { finished })
                .expect("heartbeat");
            running.extend(response.start.iter().map(|o| o.allocation));
            t += 100;
        }
        assert_eq!(failures, expected, "limit {limit:?}");
        let op = s.operation(&id).expect("op");
        assert_eq!(op.state, OperationState::Failed);
        assert_eq!(op.failed_job_count, expected);
        // The other running job was aborted with the operation.
        assert_eq!(op.running_job_count(), 0);
        assert!(s.node(&node).expect("node").allocations.is_empty());
    }
}
