//! Extreme but finite inputs (issue 17, "no input can stop the scheduler"): the update must
//! never panic, and give finite numbers with a warning where an input leaves no meaningful
//! result.

use fairsched_hdrf::{
    ElementIndex, FifoSortParameter, IntegralGuaranteeType, IntegralGuarantees, IntegralState,
    NoClock, OperationSpec, PoolMode, PoolSpec, ROOT, ResourceVolume, Tree, UpdateInput,
    UpdateOptions, UpdateOutput, update,
};
use fairsched_resources::{
    PartialResources, RESOURCE_COUNT, ResourceKind, ResourceVector, Resources,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn cluster() -> Resources {
    Resources::from_values([100.0, 100.0, 16.0, 100.0 * 1024.0 * 1024.0 * 1024.0, 100.0])
}

fn input(options: UpdateOptions) -> UpdateInput {
    UpdateInput {
        total_resources: cluster(),
        now_seconds: 0.0,
        previous_update_seconds: None,
        options,
    }
}

fn classic_and_improved() -> [UpdateOptions; 2] {
    [
        UpdateOptions::default(),
        UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: true,
            ..UpdateOptions::default()
        },
    ]
}

fn cpu_op(cpu: f64) -> OperationSpec {
    OperationSpec {
        demand: Resources::ZERO.with(ResourceKind::Cpu, cpu),
        ..OperationSpec::default()
    }
}

/// One update, whose output must pass [`check_output`].
fn update_checked(tree: &mut Tree, input: &UpdateInput) -> UpdateOutput {
    let out = update(tree, input, &NoClock);
    if let Err(e) = check_output(tree, &out) {
        panic!("{e}");
    }
    out
}

/// Whether `out` has a warning on `element` whose message contains `needle`.
fn warned(out: &UpdateOutput, element: &str, needle: &str) -> bool {
    out.warnings
        .iter()
        .any(|w| w.element == element && w.message.contains(needle))
}

// ---- one input at a time -------------------------------------------------------------------------

/// Weights of 1e-10 (below the smallest relative weight the functions' arithmetic handles),
/// 1e308 beside 1e-300 (a ratio no double holds), zero and negative weights panicked in the
/// functions (NaN or inverted segment bounds). They are brought into
/// `[2^-26, 2^26]` with a warning naming the operation and the weight.
#[test]
fn extreme_weights_are_clamped() {
    let cases: [&[f64]; 8] = [
        &[1e-10],
        &[1e-10, 1.0],
        &[1e308, 1e-300],
        &[1e-300],
        &[1e308],
        &[f64::MAX, 1.0],
        &[0.0, 1.0],
        &[-1.0, 1.0],
    ];
    for options in classic_and_improved() {
        for weights in cases {
            let mut t = Tree::new();
            let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
            for (k, &w) in weights.iter().enumerate() {
                t.add_operation(p, format!("op{k}"), w, cpu_op(60.0))
                    .unwrap();
            }
            let out = update_checked(&mut t, &input(options.clone()));
            for (k, &w) in weights.iter().enumerate() {
                let used = out.attributes[p + 1 + k].weight;
                if (1.0 / 67_108_864.0..=67_108_864.0).contains(&w) {
                    assert_eq!(used, w);
                } else {
                    assert!(
                        warned(&out, &format!("op{k}"), &format!("weight {w:e}")),
                        "{weights:?}: {:?}",
                        out.warnings
                    );
                    assert!(used == 1.0 / 67_108_864.0 || used == 67_108_864.0);
                }
            }
        }
    }
}

/// An operation using more than it demands had a fair share by fit factor that decreased from
/// 1 to 2, whose inverse (the reference construction of M) has inverted segment bounds.
#[test]
fn usage_above_demand_does_not_panic() {
    for options in classic_and_improved() {
        let mut t = Tree::new();
        let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
        let op = OperationSpec {
            usage: Resources::ZERO.with(ResourceKind::Network, 1.0),
            ..OperationSpec::default()
        };
        let a = t.add_operation(p, "A", 1.0, op).unwrap();
        t.add_operation(p, "B", 1.0, cpu_op(50.0)).unwrap();
        let out = update_checked(&mut t, &input(options));
        assert!(
            warned(&out, "A", "exceeds demand share"),
            "{:?}",
            out.warnings
        );
        assert_eq!(out.attributes[a].fair_share.total, ResourceVector::ZERO);
    }
}

/// Negative usages, demands, limits, guarantees and totals panicked (segments that do not
/// touch); they are taken as zero, with a warning.
#[test]
fn negative_amounts_are_taken_as_zero() {
    let minus = Resources::from_raw([-1, -100, -1, -1, -1]);
    for options in classic_and_improved() {
        let mut t = Tree::new();
        let p = t
            .add_pool(
                ROOT,
                "P",
                1.0,
                PoolSpec {
                    strong_guarantee_resources: PartialResources::from_resources(&minus),
                    ..PoolSpec::default()
                },
            )
            .unwrap();
        let op = OperationSpec {
            usage: minus,
            demand: minus,
            ..OperationSpec::default()
        };
        let a = t.add_operation(p, "A", 1.0, op).unwrap();
        t.add_operation(p, "B", 1.0, cpu_op(50.0)).unwrap();
        let l = t.add_operation(p, "L", 1.0, cpu_op(50.0)).unwrap();
        t.element_mut(l).resource_limits = PartialResources::from_resources(&minus);
        let out = update_checked(&mut t, &input(options.clone()));
        for (element, what) in [
            ("A", "usage"),
            ("A", "demand"),
            ("P", "strong guarantee"),
            ("L", "resource limits"),
        ] {
            assert!(
                warned(&out, element, &format!("{what} {minus} is negative")),
                "{element} {what}: {:?}",
                out.warnings
            );
        }
        assert_eq!(out.attributes[a].fair_share.total, ResourceVector::ZERO);
        assert_eq!(out.attributes[l].fair_share.total, ResourceVector::ZERO);
        let mut negative_total = input(options);
        negative_total.total_resources = minus;
        let out = update_checked(&mut t, &negative_total);
        assert!(
            warned(&out, "<Root>", "total resources"),
            "{:?}",
            out.warnings
        );
    }
}

fn burst_pool(tree: &mut Tree, parent: ElementIndex, name: &str) -> ElementIndex {
    let ten_percent = Resources::ZERO.with(ResourceKind::Cpu, 10.0);
    let spec = PoolSpec {
        integral_guarantees: IntegralGuarantees {
            guarantee_type: IntegralGuaranteeType::Burst,
            resource_flow: ten_percent,
            burst_guarantee_resources: ten_percent,
            ..IntegralGuarantees::default()
        },
        ..PoolSpec::default()
    };
    tree.add_pool(parent, name, 1.0, spec).unwrap()
}

/// A stored accumulated volume of 1e308 cpu·s (infinite in hundredths) and a stored share ratio
/// of -1e300 made the volumes infinite (and NaN after a subtraction); they are reset or clamped,
/// with a warning, and the stored state stays finite.
#[test]
fn extreme_stored_integral_state_is_reset() {
    for (volume, ratio, needle) in [
        (1e308, 0.5, "is not finite"),
        (1e303, 0.5, "exceeds"),
        (1.0, -1e300, "last integral share ratio"),
        (1.0, 1e300, "last integral share ratio"),
    ] {
        let mut t = Tree::new();
        let b = burst_pool(&mut t, ROOT, "B");
        t.add_operation(b, "op", 1.0, cpu_op(50.0)).unwrap();
        t.element_mut(b).integral_state = IntegralState {
            accumulated_volume: ResourceVolume::from_values([volume; RESOURCE_COUNT]),
            last_share_ratio: ratio,
        };
        let mut i = input(UpdateOptions::default());
        i.now_seconds = 10.0;
        i.previous_update_seconds = Some(0.0);
        let out = update_checked(&mut t, &i);
        assert!(
            warned(&out, "B", needle),
            "{volume} {ratio}: {:?}",
            out.warnings
        );
    }
}

/// Periods whose volumes overflow (now 1e308 after -1e308, a saturation period of 1e308) or a
/// smooth period of zero or 1e-300 gave infinite or NaN volumes and shares. They are shortened
/// to 1e12 s (the smooth period: volumes give no integral share when it is not positive), with
/// a warning.
#[test]
fn extreme_periods_keep_volumes_finite() {
    let cases = [
        (
            1e308,
            Some(-1e308),
            86400.0,
            60.0,
            "time since the previous update",
        ),
        (
            1e308,
            Some(0.0),
            86400.0,
            60.0,
            "time since the previous update",
        ),
        (10.0, Some(0.0), 1e308, 60.0, "saturation period"),
        (10.0, Some(0.0), -1.0, 60.0, "saturation period"),
        (10.0, Some(0.0), 86400.0, 0.0, "smooth period"),
        (10.0, Some(0.0), 86400.0, -1.0, "smooth period"),
        (10.0, Some(0.0), 86400.0, 1e300, "smooth period"),
    ];
    for (now, previous, saturation, smooth, needle) in cases {
        let mut t = Tree::new();
        let b = burst_pool(&mut t, ROOT, "B");
        t.add_operation(b, "op", 1.0, cpu_op(50.0)).unwrap();
        t.element_mut(b).integral_state.accumulated_volume =
            ResourceVolume::from_values([1e6; RESOURCE_COUNT]);
        let i = UpdateInput {
            total_resources: cluster(),
            now_seconds: now,
            previous_update_seconds: previous,
            options: UpdateOptions {
                integral_pool_capacity_saturation_period_seconds: saturation,
                integral_smooth_period_seconds: smooth,
                ..UpdateOptions::default()
            },
        };
        let out = update_checked(&mut t, &i);
        assert!(
            warned(&out, "<Root>", needle),
            "{needle}: {:?}",
            out.warnings
        );
        // And again on the state it stored (a restarted server).
        update_checked(&mut t, &i);
    }
}

/// A burst pool below another burst pool with a pool between them: the outer pool's integral
/// share built the whole subtree's functions and dropped only its own, the inner one dropped
/// its own, and the pool between kept functions whose child had none ("fair-share functions are
/// prepared before use").
#[test]
fn nested_burst_pools_rebuild_the_pool_between() {
    for options in classic_and_improved() {
        let mut t = Tree::new();
        let outer = burst_pool(&mut t, ROOT, "outer");
        let between = t
            .add_pool(outer, "between", 1.0, PoolSpec::default())
            .unwrap();
        let inner = burst_pool(&mut t, between, "inner");
        t.add_operation(inner, "op", 1.0, cpu_op(50.0)).unwrap();
        let mut i = input(options);
        i.now_seconds = 10.0;
        i.previous_update_seconds = Some(0.0);
        for p in [outer, inner] {
            t.element_mut(p).integral_state.accumulated_volume =
                ResourceVolume::from_values([1e4; RESOURCE_COUNT]);
        }
        update_checked(&mut t, &i);
    }
}

/// A pool in a FIFO pool (warned of) whose fair share by suggestion starts above zero: the fast
/// FIFO path laid its S after its predecessor's end, and the two did not touch.
#[test]
fn fast_fifo_path_with_a_pool_child_does_not_panic() {
    let mut t = Tree::new();
    let fifo = t
        .add_pool(
            ROOT,
            "F",
            1.0,
            PoolSpec {
                mode: PoolMode::Fifo,
                strong_guarantee_resources: PartialResources::EMPTY.with(ResourceKind::Cpu, 20.0),
                ..PoolSpec::default()
            },
        )
        .unwrap();
    t.add_pool(fifo, "empty", 1.0, PoolSpec::default()).unwrap();
    let guaranteed = PoolSpec {
        strong_guarantee_resources: PartialResources::EMPTY.with(ResourceKind::Cpu, 10.0),
        ..PoolSpec::default()
    };
    let g = t.add_pool(fifo, "G", 1.0, guaranteed).unwrap();
    t.add_operation(g, "op", 1.0, cpu_op(50.0)).unwrap();
    let out = update_checked(
        &mut t,
        &input(UpdateOptions {
            enable_fast_fifo_fair_share_by_fit_factor_computation: true,
            ..UpdateOptions::default()
        }),
    );
    assert!(warned(&out, "F", "may only contain operations"));
}

// ---- the property ------------------------------------------------------------------------------

/// Extreme finite doubles, with ordinary ones among them.
fn extreme_f64() -> BoxedStrategy<f64> {
    prop_oneof![
        Just(0.0),
        Just(f64::MIN_POSITIVE),
        Just(1e-300),
        Just(1e-10),
        Just(1.0),
        Just(1e10),
        Just(1e300),
        Just(f64::MAX),
        Just(-1.0),
        Just(-1e300),
        (1u32..=100).prop_map(|t| f64::from(t) / 10.0),
    ]
    .boxed()
}

/// Extreme raw resource amounts (cpu in hundredths), with ordinary ones among them.
fn extreme_raw() -> BoxedStrategy<i64> {
    prop_oneof![
        Just(0i64),
        Just(1),
        Just(i64::MAX / 4),
        Just(i64::MAX),
        Just(1 << 40),
        Just(-1),
        Just(i64::MIN),
        (1i64..=10_000),
    ]
    .boxed()
}

fn extreme_resources() -> BoxedStrategy<Resources> {
    proptest::array::uniform5(extreme_raw())
        .prop_map(Resources::from_raw)
        .boxed()
}

fn extreme_partial() -> BoxedStrategy<PartialResources> {
    proptest::array::uniform5(proptest::option::of(extreme_raw()))
        .prop_map(PartialResources::from_raw)
        .boxed()
}

fn extreme_vector() -> BoxedStrategy<ResourceVector> {
    proptest::array::uniform5(extreme_f64())
        .prop_map(ResourceVector)
        .boxed()
}

fn extreme_state() -> BoxedStrategy<IntegralState> {
    (proptest::array::uniform5(extreme_f64()), extreme_f64())
        .prop_map(|(v, r)| IntegralState {
            accumulated_volume: ResourceVolume::from_values(v),
            last_share_ratio: r,
        })
        .boxed()
}

#[derive(Clone, Debug)]
enum NodeKind {
    Pool(PoolSpec),
    Operation(OperationSpec),
}

/// One element: which earlier pool is its parent (modulo the pools so far), its kind and its
/// element-level fields.
#[derive(Clone, Debug)]
struct Node {
    parent: usize,
    kind: NodeKind,
    weight: f64,
    limits: PartialResources,
    state: IntegralState,
}

fn pool_spec() -> BoxedStrategy<PoolSpec> {
    let integral = (
        prop_oneof![
            Just(IntegralGuaranteeType::None),
            Just(IntegralGuaranteeType::Burst),
            Just(IntegralGuaranteeType::Relaxed)
        ],
        extreme_resources(),
        extreme_resources(),
        proptest::option::of(extreme_f64()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(t, flow, burst, m, accept, distribute)| IntegralGuarantees {
                guarantee_type: t,
                resource_flow: flow,
                burst_guarantee_resources: burst,
                relaxed_share_multiplier_limit: m,
                can_accept_free_volume: accept,
                should_distribute_free_volume_among_children: distribute,
            },
        );
    let sort = proptest::collection::vec(
        prop_oneof![
            Just(FifoSortParameter::StartTime),
            Just(FifoSortParameter::Weight),
            Just(FifoSortParameter::PendingJobCount)
        ],
        0..=3,
    );
    (
        prop::bool::weighted(0.3),
        extreme_partial(),
        integral,
        sort,
        proptest::array::uniform6(any::<bool>()),
    )
        .prop_map(|(fifo, sg, integral, sort, flags)| PoolSpec {
            mode: if fifo {
                PoolMode::Fifo
            } else {
                PoolMode::FairShare
            },
            strong_guarantee_resources: sg,
            integral_guarantees: integral,
            fifo_sort_parameters: sort,
            allow_gang_step_function: flags[0],
            enable_promised_guarantee_fair_share: flags[1],
            enable_fifo_children_reordering_for_guarantee_utilization: flags[2],
            infer_weight: flags[3],
            priority_strong_guarantee_adjustment: flags[4],
            priority_strong_guarantee_adjustment_donorship: flags[5],
        })
        .boxed()
}

fn operation_spec() -> BoxedStrategy<OperationSpec> {
    (
        extreme_resources(),
        extreme_resources(),
        any::<bool>(),
        extreme_vector(),
        extreme_f64(),
        prop_oneof![Just(0u64), Just(u64::MAX), 1u64..100],
    )
        .prop_map(
            |(demand, usage, gang, best, start, pending)| OperationSpec {
                demand,
                usage,
                gang,
                best_allocation_share: best,
                start_time: start,
                pending_job_count: pending,
            },
        )
        .boxed()
}

fn node() -> BoxedStrategy<Node> {
    (
        any::<usize>(),
        prop_oneof![
            1 => pool_spec().prop_map(NodeKind::Pool),
            2 => operation_spec().prop_map(NodeKind::Operation),
        ],
        extreme_f64(),
        prop_oneof![Just(PartialResources::EMPTY), extreme_partial()],
        extreme_state(),
    )
        .prop_map(|(parent, kind, weight, limits, state)| Node {
            parent,
            kind,
            weight,
            limits,
            state,
        })
        .boxed()
}

fn options() -> BoxedStrategy<UpdateOptions> {
    (
        prop_oneof![
            Just(ResourceKind::Cpu),
            Just(ResourceKind::Memory),
            Just(ResourceKind::Gpu),
            Just(ResourceKind::UserSlots),
        ],
        extreme_f64(),
        extreme_f64(),
        extreme_f64(),
        proptest::option::of(extreme_f64()),
        proptest::array::uniform6(any::<bool>()),
    )
        .prop_map(
            |(main, saturation, smooth, relaxed, infer, flags)| UpdateOptions {
                main_resource: main,
                integral_pool_capacity_saturation_period_seconds: saturation,
                integral_smooth_period_seconds: smooth,
                relaxed_share_multiplier_limit: relaxed,
                infer_weight_from_guarantees_share_multiplier: infer,
                enable_step_function_for_gang_operations: flags[0],
                enable_fifo_children_reordering_for_guarantee_utilization: flags[1],
                enable_improved_fair_share_by_fit_factor_computation: flags[2],
                enable_improved_fair_share_by_fit_factor_computation_distribution_gap: flags[3],
                enable_fast_fifo_fair_share_by_fit_factor_computation: flags[4],
            },
        )
        .boxed()
}

#[derive(Clone, Debug)]
struct Case {
    nodes: Vec<Node>,
    total: Resources,
    now: f64,
    previous: Option<f64>,
    options: UpdateOptions,
}

fn case() -> BoxedStrategy<Case> {
    (
        proptest::collection::vec(node(), 1..10),
        prop_oneof![
            3 => Just(Resources::from_values([100.0, 100.0, 16.0, 1e11, 100.0])),
            2 => extreme_resources(),
        ],
        extreme_f64(),
        proptest::option::of(extreme_f64()),
        options(),
    )
        .prop_map(|(nodes, total, now, previous, options)| Case {
            nodes,
            total,
            now,
            previous,
            options,
        })
        .boxed()
}

fn build(case: &Case) -> Tree {
    let mut tree = Tree::new();
    let mut pools = vec![ROOT];
    for (k, n) in case.nodes.iter().enumerate() {
        let parent = pools[n.parent % pools.len()];
        let i = match &n.kind {
            NodeKind::Pool(spec) => {
                let i = tree
                    .add_pool(parent, format!("pool{k}"), n.weight, spec.clone())
                    .unwrap();
                pools.push(i);
                i
            }
            NodeKind::Operation(spec) => tree
                .add_operation(parent, format!("op{k}"), n.weight, spec.clone())
                .unwrap(),
        };
        let e = tree.element_mut(i);
        e.resource_limits = n.limits;
        e.integral_state = n.state;
    }
    tree
}

fn check_finite(what: &str, i: ElementIndex, v: &ResourceVector) -> Result<(), TestCaseError> {
    if v.0.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "element {i}: {what} {v:?} is not finite"
        )))
    }
}

/// Every number of the output is finite; fair shares are within [0, 1].
fn check_output(tree: &Tree, out: &UpdateOutput) -> Result<(), TestCaseError> {
    prop_assert_eq!(out.attributes.len(), tree.len());
    for (i, a) in out.attributes.iter().enumerate() {
        for (what, d) in [
            ("fair share", &a.fair_share),
            ("promised", &a.promised_guarantee_fair_share),
        ] {
            for v in [
                &d.total,
                &d.strong_guarantee,
                &d.integral_guarantee,
                &d.weight_proportional,
            ] {
                check_finite(what, i, v)?;
            }
            for r in 0..RESOURCE_COUNT {
                let x = d.total[r];
                prop_assert!(
                    (0.0..=1.0 + 1e-9).contains(&x),
                    "element {i}: {what} {:?} outside [0, 1]",
                    d.total
                );
            }
        }
        for (what, v) in [
            ("usage share", &a.usage_share),
            ("demand share", &a.demand_share),
            ("limits share", &a.limits_share),
            ("strong guarantee share", &a.strong_guarantee_share),
            ("tier 0", &a.strong_guarantee_share_by_tier[0]),
            ("tier 1", &a.strong_guarantee_share_by_tier[1]),
            ("proposed integral share", &a.proposed_integral_share),
            ("estimated guarantee share", &a.estimated_guarantee_share),
            ("limited demand share", &a.limited_demand_share),
        ] {
            check_finite(what, i, v)?;
        }
        let scalars = [
            a.weight,
            a.burst_ratio,
            a.total_burst_ratio,
            a.resource_flow_ratio,
            a.total_resource_flow_ratio,
        ];
        prop_assert!(
            scalars.iter().all(|x| x.is_finite()),
            "element {i}: scalars {scalars:?}"
        );
        for (what, vol) in [
            ("volume overflow", &a.volume_overflow),
            ("acceptable volume", &a.acceptable_volume),
            ("accepted free volume", &a.accepted_free_volume),
            ("children volume overflow", &a.children_volume_overflow),
        ] {
            prop_assert!(
                vol.values().iter().all(|x| x.is_finite()),
                "element {i}: {what} {vol:?}"
            );
        }
        let state = &tree.element(i).integral_state;
        prop_assert!(
            state
                .accumulated_volume
                .values()
                .iter()
                .all(|x| x.is_finite())
                && state.last_share_ratio.is_finite(),
            "element {i}: stored integral state {state:?}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(fairsched_hdrf_testkit::strategy::fixed_seed_config(
        256,
        0x17e1_e7e1_17e1_e7e1,
    ))]

    /// No panic on extreme finite inputs, finite outputs, fair shares in [0, 1]; and a second
    /// update on the state the first one stored (a restarted server) behaves the same.
    #[test]
    fn extreme_inputs_never_panic(case in case()) {
        let mut tree = build(&case);
        let mut input = UpdateInput {
            total_resources: case.total,
            now_seconds: case.now,
            previous_update_seconds: case.previous,
            options: case.options.clone(),
        };
        let out = update(&mut tree, &input, &NoClock);
        check_output(&tree, &out)?;
        input.previous_update_seconds = Some(case.now);
        input.now_seconds = case.now + 1.0;
        let out = update(&mut tree, &input, &NoClock);
        check_output(&tree, &out)?;
    }
}
