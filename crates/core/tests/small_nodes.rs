//! Issue 18, item 3: with the default tree options, small nodes are fully usable and a
//! guarantee is met by preemption. YTsaurus' default `min_spare_allocation_resources_on_node`
//! (1 cpu, 1 slot, 256 MiB) left 0.5 cpu of every 2-cpu node idle under 0.5-cpu jobs, and a
//! starving guaranteed pool then only filled that idle part, preempting nothing.

mod common;

use common::{Driver, add_nodes, op, res, scheduler, task};
use fairsched_core::{OperationId, SchedulerConfig};
use fairsched_resources::ResourceKind;

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {
    "batch": {}, "guaranteed": {"strong_guarantee_resources": {"cpu": 3}}
}}}}"#;

fn cpu_of(s: &fairsched_core::Scheduler, id: &str) -> f64 {
    s.operation(&OperationId(id.into()))
        .expect("operation")
        .usage
        .get(ResourceKind::Cpu)
}

#[test]
fn small_nodes_fill_and_a_guarantee_is_met_by_preemption_with_default_options() {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 3, res(2.0, 8.0));
    let mut d = Driver::new();
    d.start(
        &mut s,
        0,
        op("big", Some("batch"), vec![task(100, res(0.5, 1.0), None)]),
    )
    .expect("big");
    d.run(&mut s, 0, 5_000, 100);
    // Every node runs four 0.5-cpu jobs: nothing is left idle.
    assert_eq!(cpu_of(&s, "big"), 6.0, "the cluster's 6 cpus are used");

    // Jobs of one second: after each, the guaranteed operation's share is taken back at once.
    d.start(
        &mut s,
        5_000,
        op(
            "g",
            Some("guaranteed"),
            vec![task(1_000, res(0.5, 1.0), Some(1_000))],
        ),
    )
    .expect("g");
    let timeout = fairsched_config::PoolTreeConfig::default()
        .config
        .fair_share_starvation_timeout_ms;
    // Within the starvation timeout (and a few update periods) it is starving and preempts.
    d.run(&mut s, 5_100, 5_000 + timeout + 5_000, 100);
    assert!(
        d.count("allocation_preempted", "big") > 0,
        "big was preempted"
    );
    // Then it holds its guarantee (3 cpu), not only what was idle.
    d.run(
        &mut s,
        5_000 + timeout + 5_100,
        5_000 + timeout + 15_000,
        100,
    );
    assert!(
        cpu_of(&s, "g") >= 3.0,
        "the guaranteed operation uses {} cpu, less than its 3-cpu guarantee",
        cpu_of(&s, "g")
    );
}
