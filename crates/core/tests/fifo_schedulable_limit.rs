//! `max_schedulable_element_count_in_fifo_pool` = N: only the first N operations of a FIFO pool
//! (in FIFO order) with a fair share get jobs; the rest wait, and say why, even where nodes
//! have room.

mod common;

use common::{Driver, StartOp, op, res, scheduler, task};
use fairsched_core::{OperationId, SchedulerConfig};

/// Four operations of 2 one-cpu jobs each in FIFO pool `q`, started in order, on 2 nodes of 4
/// cpus: room for all of them. Returns the running jobs of each, and the scheduler.
fn run(limit: Option<u32>) -> (Vec<usize>, fairsched_core::Scheduler) {
    let option = limit.map_or(String::new(), |n| {
        format!(r#""max_schedulable_element_count_in_fifo_pool": {n}"#)
    });
    let tree = format!(
        r#"{{"pool_trees": {{"default": {{"config": {{{option}}},
            "pools": {{"q": {{"mode": "fifo"}}}}}}}}}}"#
    );
    let mut s = scheduler(&tree, SchedulerConfig::default());
    common::add_nodes(&mut s, 2, res(4.0, 4.0));
    for i in 0..4 {
        s.start_op(
            i,
            op(
                &format!("o{i}"),
                Some("q"),
                vec![task(2, res(1.0, 1.0), None)],
            ),
        )
        .unwrap();
    }
    Driver::new().run(&mut s, 10, 1000, 100);
    let running = (0..4)
        .map(|i| {
            s.operation(&OperationId(format!("o{i}")))
                .unwrap()
                .allocations
                .len()
        })
        .collect();
    (running, s)
}

#[test]
fn only_the_first_operations_of_a_fifo_pool_get_jobs() {
    let (running, _) = run(None);
    assert_eq!(
        running,
        vec![2, 2, 2, 2],
        "without the limit every operation runs"
    );
    let (running, s) = run(Some(2));
    assert_eq!(running, vec![2, 2, 0, 0]);
    let why = s
        .why_waiting(s.operation(&OperationId("o2".into())).unwrap())
        .unwrap_or_default();
    assert!(
        why.contains("max_schedulable_element_count_in_fifo_pool") && why.contains("first 2"),
        "{why}"
    );
    let (running, _) = run(Some(3));
    assert_eq!(running, vec![2, 2, 2, 0]);
}
