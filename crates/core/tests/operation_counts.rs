//! Operation counts (scheduler spec §3.4): `max_operation_count` rejects with 202, the running
//! limit queues operations as pending and starts them in order when slots free up, lightweight
//! operations do not count against running limits (YTsaurus YT-S31).

mod common;

use common::*;
use fairsched_core::{OperationId, OperationState, SchedulerConfig};

const TREE: &str = r#"{"pool_trees": {"default": {
    "config": {"max_operation_count": 5, "max_running_operation_count": 2},
    "pools": {
        "pool": {},
        "lightweight_pool": {"mode": "fifo", "enable_lightweight_operations": true}
    }
}}}"#;

fn state(s: &fairsched_core::Scheduler, id: &str) -> OperationState {
    s.operation(&OperationId(id.into())).unwrap().state
}

fn counts(s: &fairsched_core::Scheduler, pool: &str) -> [u32; 3] {
    let c = s.pool_counts().get(pool).copied().unwrap_or_default();
    [
        c.operation_count,
        c.running_operation_count,
        c.lightweight_running_operation_count,
    ]
}

#[test]
fn lightweight_operations_do_not_count_against_the_running_limit() {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 3, res(1.0, 2.0));
    s.start_op(
        0,
        op("blocking", Some("pool"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    for i in 0..4 {
        s.start_op(
            1,
            op(
                &format!("light{i}"),
                Some("lightweight_pool"),
                vec![task(1, res(1.0, 1.0), None)],
            ),
        )
        .unwrap();
    }
    for i in 0..4 {
        assert_eq!(state(&s, &format!("light{i}")), OperationState::Running);
        assert!(
            s.operation(&OperationId(format!("light{i}")))
                .unwrap()
                .lightweight
        );
    }
    assert!(
        !s.operation(&OperationId("blocking".into()))
            .unwrap()
            .lightweight
    );
    let err = s
        .start_op(
            2,
            op(
                "sixth",
                Some("lightweight_pool"),
                vec![task(1, res(1.0, 1.0), None)],
            ),
        )
        .unwrap_err();
    assert_eq!(err.code(), Some(202), "{err}");
    assert!(err.message().contains("<Root>"), "{err}");
    assert!(
        s.operation(&OperationId("sixth".into())).is_none(),
        "nothing half-applied"
    );
    assert_eq!(counts(&s, "pool"), [1, 1, 0]);
    assert_eq!(counts(&s, "lightweight_pool"), [4, 0, 4]);
    assert_eq!(counts(&s, "<Root>"), [5, 1, 4]);
}

#[test]
fn only_vanilla_operations_are_lightweight_and_the_rest_wait_in_order() {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 3, res(1.0, 2.0));
    s.start_op(
        0,
        op("blocking", Some("pool"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    let mut map1 = op(
        "map1",
        Some("lightweight_pool"),
        vec![task(1, res(1.0, 1.0), None)],
    );
    map1.operation_type = Some("map".into());
    let mut map2 = op(
        "map2",
        Some("lightweight_pool"),
        vec![task(1, res(1.0, 1.0), None)],
    );
    map2.operation_type = Some("map".into());
    s.start_op(1, map1).unwrap();
    s.start_op(2, map2).unwrap();
    assert_eq!(state(&s, "map1"), OperationState::Running);
    assert_eq!(state(&s, "map2"), OperationState::Pending);
    let why = s
        .why_waiting(s.operation(&OperationId("map2".into())).unwrap())
        .unwrap();
    assert!(
        why.contains("<Root>") && why.contains("max_running_operation_count"),
        "{why}"
    );
    assert_eq!(counts(&s, "pool"), [1, 1, 0]);
    assert_eq!(counts(&s, "lightweight_pool"), [2, 1, 0]);
    s.start_op(
        3,
        op(
            "vanilla",
            Some("lightweight_pool"),
            vec![task(1, res(1.0, 1.0), None)],
        ),
    )
    .unwrap();
    assert_eq!(counts(&s, "lightweight_pool"), [3, 1, 1]);
    // When the blocking operation ends, the pending one starts.
    s.abort_operation(4, &OperationId("blocking".into()))
        .unwrap();
    assert_eq!(state(&s, "map2"), OperationState::Running);
    assert_eq!(counts(&s, "<Root>"), [3, 2, 1]);
}

#[test]
fn a_full_pool_rejects_new_operations_with_202() {
    let tree = r#"{"pool_trees": {"default": {"pools": {"small": {"max_operation_count": 2, "max_running_operation_count": 1}}}}}"#;
    let mut s = scheduler(tree, SchedulerConfig::default());
    s.start_op(
        0,
        op("a", Some("small"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    s.start_op(
        0,
        op("b", Some("small"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    assert_eq!(state(&s, "b"), OperationState::Pending);
    let err = s
        .start_op(
            0,
            op("c", Some("small"), vec![task(1, res(1.0, 1.0), None)]),
        )
        .unwrap_err();
    assert_eq!(err.code(), Some(202));
    assert!(err.message().contains("\"small\""), "{err}");
}

/// Finished operations stay visible (`operations`) but leave the live list that the
/// fair-share update and the other passes over live operations use; pending ones stay in it in
/// start order, and a finished one that was pending when it ended leaves it too.
#[test]
fn finished_operations_leave_the_live_operations() {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 1, res(1.0, 2.0));
    for id in ["a", "b", "c", "d"] {
        s.start_op(0, op(id, Some("pool"), vec![task(1, res(1.0, 1.0), None)]))
            .unwrap();
    }
    let live = |s: &fairsched_core::Scheduler| -> Vec<String> {
        s.unfinished_operations()
            .map(|o| o.spec.id.0.clone())
            .collect()
    };
    assert_eq!(live(&s), ["a", "b", "c", "d"]);
    s.abort_operation(1, &OperationId("a".into())).unwrap();
    s.abort_operation(1, &OperationId("c".into())).unwrap();
    assert_eq!(live(&s), ["b", "d"]);
    s.update_fair_share(2);
    assert_eq!(live(&s), ["b", "d"]);
    assert_eq!(s.operations().count(), 4);
    assert_eq!(state(&s, "a"), OperationState::Aborted);
}
