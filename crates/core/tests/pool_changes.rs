//! Runtime pool changes: each is validated whole; a rejected change names the pool and the
//! field and changes nothing.

mod common;

use common::*;
use fairsched_config::PoolConfig;
use fairsched_core::{OperationId, SchedulerConfig};
use fairsched_resources::{PartialResources, ResourceKind};

const TREE: &str = r#"{"pool_trees": {"default": {"pools": {
    "research": {"strong_guarantee_resources": {"cpu": 10}, "pools": {"adhoc": {"strong_guarantee_resources": {"cpu": 6}}}},
    "prod": {}
}}}}"#;

fn guarantee(cpu: f64) -> PoolConfig {
    PoolConfig {
        strong_guarantee_resources: PartialResources::EMPTY.with(ResourceKind::Cpu, cpu),
        ..PoolConfig::default()
    }
}

/// (what, change, expected error substring or None for success)
type Change = fn(&mut fairsched_core::Scheduler) -> Result<(), fairsched_core::CoreError>;

#[test]
fn pool_changes_are_validated_whole() {
    let cases: Vec<(&str, Change, Option<&str>)> = vec![
        (
            "create a pool",
            |s| s.create_pool(1, Some("research"), "batch", guarantee(4.0)),
            None,
        ),
        (
            "children's guarantees above the parent's",
            |s| s.create_pool(1, Some("research"), "batch", guarantee(5.0)),
            Some("strong_guarantee_resources"),
        ),
        (
            "duplicate name",
            |s| s.create_pool(1, None, "adhoc", PoolConfig::default()),
            Some("already exists"),
        ),
        (
            "unknown parent",
            |s| s.create_pool(1, Some("nope"), "x", PoolConfig::default()),
            Some("\"nope\""),
        ),
        (
            "bad weight",
            |s| {
                s.set_pool(
                    1,
                    "prod",
                    PoolConfig {
                        weight: Some(-1.0),
                        ..PoolConfig::default()
                    },
                )
            },
            Some("weight"),
        ),
        (
            "bad name",
            |s| s.create_pool(1, None, "a b", PoolConfig::default()),
            Some("name"),
        ),
        (
            "move a pool",
            |s| s.move_pool(1, "adhoc", Some("prod")),
            Some("strong_guarantee_resources"),
        ),
        (
            "move into own subtree",
            |s| s.move_pool(1, "research", Some("adhoc")),
            Some("own subtree"),
        ),
        (
            "remove a pool with children",
            |s| s.remove_pool(1, "research"),
            Some("child pools"),
        ),
        ("remove an empty pool", |s| s.remove_pool(1, "prod"), None),
    ];
    for (what, change, expected) in cases {
        let mut s = scheduler(TREE, SchedulerConfig::default());
        let before = s.tree_config().clone();
        let result = change(&mut s);
        match expected {
            None => assert!(result.is_ok(), "{what}: {result:?}"),
            Some(needle) => {
                let err = result.expect_err(what);
                assert!(err.message().contains(needle), "{what}: {err}");
                assert_eq!(s.tree_config(), &before, "{what}: nothing changes");
            }
        }
    }
}

/// YTsaurus: an explicit pool removed while it has operations turns into an ephemeral pool of
/// the same name under the default parent, gone when its last operation leaves; created again,
/// it takes its operations back.
#[test]
fn a_pool_removed_with_operations_lives_on_as_an_ephemeral_pool() {
    let mut s = scheduler(TREE, SchedulerConfig::default());
    add_nodes(&mut s, 1, res(4.0, 4.0));
    s.start_op(
        0,
        op("job", Some("prod"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    s.remove_pool(1, "prod").unwrap();
    assert!(s.tree().explicit("prod").is_none());
    assert!(s.tree().ephemeral.contains_key("prod"));
    s.update_fair_share(2);
    let snap = s.snapshot(2);
    assert_eq!(snap.operations["job"].pool, "prod");
    assert!(snap.pools["prod"].is_ephemeral);
    assert_eq!(snap.pools["prod"].operation_count, 1);
    // Created again (under another parent), the pool is explicit and keeps the operation.
    s.create_pool(3, None, "fresh", PoolConfig::default())
        .unwrap();
    s.create_pool(4, Some("fresh"), "prod", PoolConfig::default())
        .unwrap();
    assert!(!s.tree().ephemeral.contains_key("prod"));
    s.update_fair_share(5);
    let snap = s.snapshot(5);
    assert!(!snap.pools["prod"].is_ephemeral);
    assert_eq!(snap.pools["prod"].parent.as_deref(), Some("fresh"));
    assert_eq!(snap.pools["fresh"].operation_count, 1);
    // Removed again and left by its operation, the ephemeral pool disappears.
    s.remove_pool(6, "prod").unwrap();
    s.update_operation(
        7,
        &OperationId("job".into()),
        None,
        None,
        Some("fresh".into()),
    )
    .unwrap();
    s.update_fair_share(8);
    let snap = s.snapshot(8);
    assert_eq!(snap.operations["job"].pool, "fresh");
    assert!(!snap.pools.contains_key("prod"), "{:?}", snap.pools.keys());
}

/// YTsaurus keeps a removed pool that still has children: with the default options under the
/// default parent, until its subtree is empty. Removing a whole subtree whose leaf has an
/// operation in an ephemeral subpool keeps that leaf (not its removed ancestors) and the
/// subpool under it; both go with the operation.
#[test]
fn a_removed_pool_with_an_ephemeral_subpool_is_kept_until_it_is_empty() {
    let tree = r#"{"pool_trees": {"default": {"pools": {
        "research": {"pools": {"team": {"create_ephemeral_subpools": true}}},
        "prod": {}
    }}}}"#;
    let mut s = scheduler(tree, SchedulerConfig::default());
    add_nodes(&mut s, 1, res(4.0, 4.0));
    s.start_op(
        0,
        op("job", Some("team"), vec![task(1, res(1.0, 1.0), None)]),
    )
    .unwrap();
    s.update_fair_share(1);
    assert_eq!(s.snapshot(1).operations["job"].pool, "team$user");

    // The whole `research` subtree goes in one declarative change.
    let mut config = s.tree_config().clone();
    config.pools.remove("research");
    s.set_tree_config(2, config).unwrap();
    s.update_fair_share(3);
    let snap = s.snapshot(3);
    assert!(
        !snap.pools.contains_key("research"),
        "{:?}",
        snap.pools.keys()
    );
    assert!(snap.pools["team"].is_ephemeral);
    assert_eq!(snap.pools["team"].parent.as_deref(), Some("<Root>"));
    assert_eq!(snap.pools["team$user"].parent.as_deref(), Some("team"));
    assert_eq!(snap.pools["team"].operation_count, 1);
    assert_eq!(snap.operations["job"].pool, "team$user");

    s.abort_operation(4, &OperationId("job".into())).unwrap();
    s.update_fair_share(5);
    let snap = s.snapshot(5);
    assert!(!snap.pools.contains_key("team"), "{:?}", snap.pools.keys());
    assert!(!snap.pools.contains_key("team$user"));
}
