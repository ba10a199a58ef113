//! Property: any configuration written as TOML or JSON loads back to an equal value.

use fairsched_config::*;
use fairsched_resources::{PartialResources, ResourceKind};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use std::collections::BTreeMap;

fn partial_resources() -> impl Strategy<Value = PartialResources> {
    (
        option::of(0i64..10_000),
        option::of(0i64..1_000_000),
        option::of(0i64..64),
        option::of(0i64..(1i64 << 50)),
        option::of(0i64..1_000_000),
    )
        .prop_map(|(slots, cpu, gpu, memory, network)| {
            PartialResources::from_raw([slots, cpu, gpu, memory, network])
        })
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_:-]{0,8}"
}

fn unit_f64() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0]
}

fn pool_options() -> impl Strategy<Value = PoolConfig> {
    let sharing = (
        option::of(1e-3f64..1e3),
        partial_resources(),
        partial_resources(),
        prop_oneof![Just(SchedulingMode::FairShare), Just(SchedulingMode::Fifo)],
        vec(
            prop_oneof![
                Just(FifoSortParameter::StartTime),
                Just(FifoSortParameter::Weight),
                Just(FifoSortParameter::PendingJobCount)
            ],
            0..4,
        ),
        (
            prop_oneof![
                Just(IntegralGuaranteeType::None),
                Just(IntegralGuaranteeType::Burst),
                Just(IntegralGuaranteeType::Relaxed)
            ],
            partial_resources(),
            partial_resources(),
            option::of(1.0f64..10.0),
            any::<bool>(),
            option::of(any::<bool>()),
        ),
    );
    let limits = (
        option::of(0u32..1000),
        option::of(0u32..1000),
        any::<bool>(),
        any::<bool>(),
        option::of((
            option::of(0u32..10),
            option::of(0u32..10),
            partial_resources(),
        )),
        vec(name(), 0..3),
    );
    let overrides = (
        option::of(unit_f64()),
        option::of(0u64..10_000_000),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
        option::of(partial_resources()),
        option::of(any::<bool>()),
        option::of(any::<bool>()),
    );
    let flags = (
        any::<[bool; 5]>(),
        option::of("[a-z &|!]{1,10}"),
        vec((vec(name(), 1..3), any::<bool>(), any::<bool>()), 0..2),
    );
    (sharing, limits, overrides, flags).prop_map(
        |(
            (
                weight,
                strong,
                limits_res,
                mode,
                fifo,
                (kind, flow, burst, relaxed, accept, distribute),
            ),
            (max_ops, max_running, forbid, ephemeral, eph_config, presets),
            (
                tolerance,
                timeout,
                aggressive,
                allow_aggressive,
                allow_normal,
                threshold,
                ssd,
                lightweight,
            ),
            (flags, tag_filter, acl),
        )| {
            PoolConfig {
                weight,
                strong_guarantee_resources: strong,
                integral_guarantees: PoolIntegralGuaranteesConfig {
                    guarantee_type: kind,
                    resource_flow: flow,
                    burst_guarantee_resources: burst,
                    relaxed_share_multiplier_limit: relaxed,
                    can_accept_free_volume: accept,
                    should_distribute_free_volume_among_children: distribute,
                },
                resource_limits: limits_res,
                mode,
                fifo_sort_parameters: fifo,
                fifo_pool_scheduling_order: None,
                enable_fair_share_truncation_in_fifo_pool: Some(flags[0]),
                max_operation_count: max_ops,
                max_running_operation_count: max_running,
                forbid_immediate_operations: forbid,
                create_ephemeral_subpools: ephemeral,
                ephemeral_subpool_config: eph_config.map(|(r, o, l)| EphemeralSubpoolConfig {
                    mode: SchedulingMode::FairShare,
                    max_running_operation_count: r,
                    max_operation_count: o,
                    resource_limits: l,
                }),
                config_presets: presets,
                fair_share_starvation_tolerance: tolerance,
                fair_share_starvation_timeout_ms: timeout,
                enable_aggressive_starvation: aggressive,
                allow_aggressive_preemption: allow_aggressive,
                allow_normal_preemption: allow_normal,
                non_preemptible_resource_usage_threshold: threshold,
                allow_regular_allocations_on_ssd_nodes: ssd,
                enable_lightweight_operations: lightweight,
                use_pool_satisfaction_for_scheduling: None,
                compute_promised_guarantee_fair_share: flags[1],
                enable_fifo_children_reordering_for_guarantee_utilization: flags[2],
                enable_priority_strong_guarantee_adjustment: flags[3],
                enable_priority_strong_guarantee_adjustment_donorship: flags[4],
                scheduling_tag_filter: tag_filter,
                acl: acl
                    .into_iter()
                    .map(|(subjects, deny, admin)| AccessControlEntry {
                        action: if deny {
                            AceAction::Deny
                        } else {
                            AceAction::Allow
                        },
                        subjects,
                        permissions: if admin {
                            vec![Permission::Use, Permission::Administer]
                        } else {
                            vec![Permission::Use]
                        },
                    })
                    .collect(),
                inherit_acl: !flags[0],
            }
        },
    )
}

fn pools() -> impl Strategy<Value = BTreeMap<String, PoolNode>> {
    let leaf = pool_options().prop_map(|c| PoolNode::from_parts(c, BTreeMap::new()));
    let node = leaf.prop_recursive(3, 12, 3, |inner| {
        (pool_options(), btree_map(name(), inner, 0..3))
            .prop_map(|(c, children)| PoolNode::from_parts(c, children))
    });
    btree_map(name(), node, 0..4)
}

fn tree_config() -> impl Strategy<Value = TreeConfig> {
    (
        (
            option::of("[a-z]{1,6}"),
            prop_oneof![
                Just(ResourceKind::Cpu),
                Just(ResourceKind::Gpu),
                Just(ResourceKind::Memory)
            ],
            name(),
            1u32..100_000,
            1u32..100_000,
            option::of(1.0f64..100.0),
        ),
        (
            unit_f64(),
            0u64..10_000_000,
            0u64..10_000_000,
            0.0f64..2.0,
            partial_resources(),
            option::of(0u32..100),
        ),
        btree_map(
            name(),
            (
                option::of(unit_f64()),
                option::of(0u64..100_000),
                option::of(any::<bool>()),
            ),
            0..3,
        ),
        any::<[bool; 6]>(),
    )
        .prop_map(
            |(
                (filter, main, parent, ops, running, infer),
                (tolerance, timeout, aggressive_timeout, threshold, non_preemptible, unpreemptible),
                presets,
                flags,
            )| TreeConfig {
                node_tag_filter: filter,
                main_resource: main,
                default_parent_pool: parent,
                max_operation_count: ops,
                max_running_operation_count: running,
                infer_weight_from_guarantees_share_multiplier: infer,
                fair_share_starvation_tolerance: tolerance,
                fair_share_starvation_timeout_ms: timeout,
                fair_share_aggressive_starvation_timeout_ms: aggressive_timeout,
                preemption_satisfaction_threshold: threshold,
                non_preemptible_resource_usage_threshold: non_preemptible,
                max_unpreemptible_running_allocation_count: unpreemptible,
                pool_config_presets: presets
                    .into_iter()
                    .map(|(n, (t, ms, agg))| {
                        (
                            n,
                            PoolPresetConfig {
                                fair_share_starvation_tolerance: t,
                                fair_share_starvation_timeout_ms: ms,
                                enable_aggressive_starvation: agg,
                                ..PoolPresetConfig::default()
                            },
                        )
                    })
                    .collect(),
                enable_aggressive_starvation: flags[0],
                enable_step_function_for_gang_operations: flags[1],
                enable_improved_fair_share_by_fit_factor_computation: flags[2],
                enable_fast_fifo_fair_share_by_fit_factor_computation: flags[3],
                forbid_immediate_operations_in_root: flags[4],
                allow_preemption_from_starving_operations: flags[5],
                ..TreeConfig::default()
            },
        )
}

fn pool_trees() -> impl Strategy<Value = PoolTrees> {
    (
        option::of(name()),
        btree_map(
            name(),
            (tree_config(), pools()).prop_map(|(config, pools)| PoolTreeConfig { config, pools }),
            0..3,
        ),
    )
        .prop_map(|(default_tree, pool_trees)| PoolTrees {
            default_tree,
            pool_trees,
        })
}

/// Runs a property on a thread with a large stack: the strategies build deeply nested values
/// whose debug-build frames exceed the default 2 MiB test-thread stack.
fn check_property(test: impl Fn(PoolTrees) -> Result<(), TestCaseError> + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let mut runner = TestRunner::new(ProptestConfig::with_cases(128));
            if let Err(e) = runner.run(&pool_trees(), test) {
                panic!("{e}");
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn pool_trees_round_trip() {
    check_property(|trees| {
        for format in [Format::Toml, Format::Json] {
            let text = to_string(&trees, format).unwrap();
            let back = load_pool_trees_str(&text, format).unwrap_or_else(|e| panic!("{e}\n{text}"));
            prop_assert_eq!(&back, &trees, "{}:\n{}", format, text);
        }
        Ok(())
    });
}

#[test]
fn json_and_toml_agree() {
    check_property(|trees| {
        let toml =
            load_pool_trees_str(&to_string(&trees, Format::Toml).unwrap(), Format::Toml).unwrap();
        let json =
            load_pool_trees_str(&to_string(&trees, Format::Json).unwrap(), Format::Json).unwrap();
        prop_assert_eq!(toml, json);
        Ok(())
    });
}

/// Validation is a pure function: same input, same answer, input untouched, and an error is
/// never an empty list.
#[test]
fn validation_is_deterministic_and_pure() {
    check_property(|trees| {
        let copy = trees.clone();
        let first = validate_pool_trees(&trees);
        let second = validate_pool_trees(&trees);
        prop_assert_eq!(&trees, &copy);
        match (first, second) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => {
                prop_assert!(!a.is_empty());
                prop_assert_eq!(a, b);
            }
            _ => prop_assert!(false, "validation answered differently"),
        }
        Ok(())
    });
}
