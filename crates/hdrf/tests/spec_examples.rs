//! Worked examples from `shared/spec/vector_hdrf.md` (§7 and §13): small trees whose fair
//! shares are known in closed form.

use fairsched_hdrf::{
    IntegralGuaranteeType, IntegralGuarantees, NoClock, OperationSpec, PoolMode, PoolSpec, ROOT,
    Tree, UpdateInput, UpdateOptions, update,
};
use fairsched_resources::{PartialResources, ResourceKind, ResourceVector, Resources};

const MB: f64 = 1048576.0;

fn res(slots: f64, cpu: f64, memory: f64) -> Resources {
    Resources::from_values([slots, cpu, 0.0, memory, 0.0])
}

fn cluster() -> Resources {
    res(100.0, 100.0, 1000.0 * MB)
}

fn op(demand: Resources) -> OperationSpec {
    OperationSpec {
        demand,
        ..OperationSpec::default()
    }
}

fn run(
    tree: &mut Tree,
    total: Resources,
    improved: bool,
    previous: Option<f64>,
) -> fairsched_hdrf::UpdateOutput {
    let input = UpdateInput {
        total_resources: total,
        now_seconds: 0.0,
        previous_update_seconds: previous,
        options: UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: improved,
            ..UpdateOptions::default()
        },
    };
    let out = update(tree, &input, &NoClock);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    out
}

fn assert_near(actual: ResourceVector, expected: [f64; 5], what: &str) {
    assert!(
        actual.near(&ResourceVector(expected), 1e-7),
        "{what}: expected {expected:?}, got {actual:?}"
    );
}

/// §7.1: DRF inside a pool — each operation gets dominant share 2/3.
#[test]
fn drf_inside_a_pool() {
    for improved in [false, true] {
        let mut t = Tree::new();
        let a = t.add_pool(ROOT, "A", 1.0, PoolSpec::default()).unwrap();
        let x = t
            .add_operation(a, "X", 1.0, op(res(100.0, 100.0, 2000.0 * MB)))
            .unwrap();
        let y = t
            .add_operation(a, "Y", 1.0, op(res(100.0, 200.0, 1000.0 * MB)))
            .unwrap();
        let out = run(&mut t, cluster(), improved, None);
        let third = 1.0 / 3.0;
        assert_near(
            out.attributes[x].fair_share.total,
            [third, third, 0.0, 2.0 * third, 0.0],
            "X",
        );
        assert_near(
            out.attributes[y].fair_share.total,
            [third, 2.0 * third, 0.0, third, 0.0],
            "Y",
        );
    }
}

/// §13.1: guarantees are added, not maxed: A (50% strong) and B share 75/25.
#[test]
fn guarantees_are_additive() {
    for improved in [false, true] {
        let mut t = Tree::new();
        let a = t
            .add_pool(
                ROOT,
                "A",
                1.0,
                PoolSpec {
                    strong_guarantee_resources: PartialResources::EMPTY
                        .with(ResourceKind::Cpu, 50.0),
                    ..PoolSpec::default()
                },
            )
            .unwrap();
        let b = t.add_pool(ROOT, "B", 1.0, PoolSpec::default()).unwrap();
        t.add_operation(a, "opA", 1.0, op(cluster())).unwrap();
        t.add_operation(b, "opB", 1.0, op(cluster())).unwrap();
        let out = run(&mut t, cluster(), improved, None);
        assert_near(
            out.attributes[a].fair_share.total,
            [0.75, 0.75, 0.0, 0.75, 0.0],
            "A",
        );
        assert_near(
            out.attributes[b].fair_share.total,
            [0.25, 0.25, 0.0, 0.25, 0.0],
            "B",
        );
        assert_near(
            out.attributes[a].fair_share.strong_guarantee,
            [0.5, 0.5, 0.0, 0.5, 0.0],
            "A strong",
        );
    }
}

/// §13.4: an operation's fair share first keeps the shape of its usage.
#[test]
fn usage_shape_is_reproduced_first() {
    let mut t = Tree::new();
    let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
    let x = t
        .add_operation(
            p,
            "x",
            1.0,
            OperationSpec {
                demand: cluster(),
                usage: res(50.0, 50.0, 0.0),
                ..OperationSpec::default()
            },
        )
        .unwrap();
    let y = t.add_operation(p, "y", 1.0, op(cluster())).unwrap();
    let out = run(&mut t, cluster(), false, None);
    assert_near(
        out.attributes[x].fair_share.total,
        [0.5, 0.5, 0.0, 0.0, 0.0],
        "x",
    );
    assert_near(
        out.attributes[y].fair_share.total,
        [0.5, 0.5, 0.0, 0.5, 0.0],
        "y",
    );
}

/// §7.2: strong, burst, relaxed and plain pools each get guarantee + weight·f, f = 0.1.
#[test]
fn all_kinds_of_pools_share_the_weighted_remainder() {
    for improved in [false, true] {
        let mut t = Tree::new();
        let cpu10 = Resources::ZERO.with(ResourceKind::Cpu, 10.0);
        let zero_sg = PartialResources::EMPTY.with(ResourceKind::Cpu, 0.0);
        let strong = t
            .add_pool(
                ROOT,
                "strong",
                1.0,
                PoolSpec {
                    strong_guarantee_resources: PartialResources::EMPTY
                        .with(ResourceKind::Cpu, 10.0),
                    ..PoolSpec::default()
                },
            )
            .unwrap();
        let integral = |kind| PoolSpec {
            strong_guarantee_resources: zero_sg,
            integral_guarantees: IntegralGuarantees {
                guarantee_type: kind,
                resource_flow: cpu10,
                burst_guarantee_resources: if kind == IntegralGuaranteeType::Burst {
                    cpu10
                } else {
                    Resources::ZERO
                },
                ..IntegralGuarantees::default()
            },
            ..PoolSpec::default()
        };
        let burst = t
            .add_pool(ROOT, "burst", 1.0, integral(IntegralGuaranteeType::Burst))
            .unwrap();
        let relaxed = t
            .add_pool(
                ROOT,
                "relaxed",
                2.0,
                integral(IntegralGuaranteeType::Relaxed),
            )
            .unwrap();
        let plain = t
            .add_pool(
                ROOT,
                "plain",
                3.0,
                PoolSpec {
                    strong_guarantee_resources: zero_sg,
                    mode: PoolMode::FairShare,
                    ..PoolSpec::default()
                },
            )
            .unwrap();
        for p in [strong, burst, relaxed, plain] {
            t.add_operation(p, format!("op-{p}"), 1.0, op(cluster()))
                .unwrap();
        }
        let out = run(&mut t, cluster(), improved, Some(-60.0));
        let u = |x: f64| [x, x, 0.0, x, 0.0];
        assert_near(out.attributes[strong].fair_share.total, u(0.2), "strong");
        assert_near(out.attributes[burst].fair_share.total, u(0.2), "burst");
        assert_near(out.attributes[relaxed].fair_share.total, u(0.3), "relaxed");
        assert_near(out.attributes[plain].fair_share.total, u(0.3), "plain");
        assert_near(
            out.attributes[burst].fair_share.integral_guarantee,
            u(0.1),
            "burst integral",
        );
        assert_near(
            out.attributes[relaxed].fair_share.integral_guarantee,
            u(0.1),
            "relaxed integral",
        );
    }
}

/// Weight inference (scheduler spec §3, YT-S37): guarantee shares 0.3 / 0.4 / none with
/// multiplier 10 give weights 30/7, 40/7 and 1 (the root's share is the sum of its children's).
#[test]
fn weights_are_inferred_from_guarantee_shares() {
    let mut t = Tree::new();
    let pool = |cpu: Option<f64>| PoolSpec {
        strong_guarantee_resources: cpu.map_or(PartialResources::EMPTY, |c| {
            PartialResources::EMPTY.with(ResourceKind::Cpu, c)
        }),
        infer_weight: true,
        ..PoolSpec::default()
    };
    let a = t.add_pool(ROOT, "a", 1.0, pool(Some(30.0))).unwrap();
    let b = t.add_pool(ROOT, "b", 1.0, pool(Some(40.0))).unwrap();
    let c = t.add_pool(ROOT, "c", 1.0, pool(None)).unwrap();
    let explicit = t
        .add_pool(ROOT, "explicit", 2.5, PoolSpec::default())
        .unwrap();
    let input = UpdateInput {
        total_resources: cluster(),
        now_seconds: 0.0,
        previous_update_seconds: None,
        options: UpdateOptions {
            infer_weight_from_guarantees_share_multiplier: Some(10.0),
            ..UpdateOptions::default()
        },
    };
    let out = update(&mut t, &input, &NoClock);
    let w = |i: usize| out.attributes[i].weight;
    assert!((w(a) - 30.0 / 7.0).abs() < 1e-12, "{}", w(a));
    assert!((w(b) - 40.0 / 7.0).abs() < 1e-12, "{}", w(b));
    assert_eq!(w(c), 1.0);
    assert_eq!(w(explicit), 2.5);
}

/// An integral pool nested in another integral pool (the config crate rejects such trees, but the
/// library must not panic on them): the update completes and reports no panic.
#[test]
fn nested_integral_pools_do_not_panic() {
    for (outer, inner) in [
        (IntegralGuaranteeType::Burst, IntegralGuaranteeType::Burst),
        (
            IntegralGuaranteeType::Relaxed,
            IntegralGuaranteeType::Relaxed,
        ),
        (IntegralGuaranteeType::Burst, IntegralGuaranteeType::Relaxed),
        (IntegralGuaranteeType::Relaxed, IntegralGuaranteeType::Burst),
    ] {
        let cpu10 = Resources::ZERO.with(ResourceKind::Cpu, 10.0);
        let integral = |kind| PoolSpec {
            integral_guarantees: IntegralGuarantees {
                guarantee_type: kind,
                resource_flow: cpu10,
                burst_guarantee_resources: cpu10,
                ..IntegralGuarantees::default()
            },
            ..PoolSpec::default()
        };
        let mut t = Tree::new();
        let o = t.add_pool(ROOT, "outer", 1.0, integral(outer)).unwrap();
        let i = t.add_pool(o, "inner", 1.0, integral(inner)).unwrap();
        t.add_operation(i, "op", 1.0, op(cluster())).unwrap();
        let input = UpdateInput {
            total_resources: cluster(),
            now_seconds: 0.0,
            previous_update_seconds: Some(-60.0),
            options: UpdateOptions::default(),
        };
        let out = update(&mut t, &input, &NoClock);
        assert!(
            out.attributes[i].fair_share.total.max_component() > 0.0,
            "{outer:?}/{inner:?}"
        );
    }
}

/// §3.1 (upstream TestNestedPromisedGuaranteeFairSharePools, whose checks the conformance
/// format cannot express): a promised-guarantee pool below another one is an error naming it;
/// once the outer pool stops asking, the error is gone.
#[test]
fn nested_promised_guarantee_pools_are_an_error_until_the_outer_one_stops() {
    for improved in [false, true] {
        let mut t = Tree::new();
        let promised = PoolSpec {
            enable_promised_guarantee_fair_share: true,
            ..PoolSpec::default()
        };
        let a = t.add_pool(ROOT, "poolA", 1.0, promised.clone()).unwrap();
        let a1 = t.add_pool(a, "poolA1", 1.0, promised.clone()).unwrap();
        t.add_operation(a1, "op", 1.0, op(res(10.0, 10.0, 100.0 * MB)))
            .unwrap();
        let errors = |t: &mut Tree| run(t, cluster(), improved, None).errors;
        let first = errors(&mut t);
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].name(), "NestedPromisedGuaranteeFairSharePools");
        assert!(first[0].to_string().contains("poolA1"), "{}", first[0]);
        t.element_mut(a)
            .pool_mut()
            .unwrap()
            .enable_promised_guarantee_fair_share = false;
        assert_eq!(errors(&mut t), vec![]);
    }
}

/// A pool guaranteed the whole cluster's cpu gets all of it, exactly, not a rounding short of
/// it: the scheduler compares usages with fair shares, and the update no longer reproduces the
/// reference arithmetic bit for bit (`crate::envelope`), so this pins the value the scheduler
/// depends on. The setting of `e2e_preemption`'s `preemption_interrupts_real_jobs_with_their_signal`:
/// two nodes of 1 cpu, 1 GiB and 8 slots; two batch operations run 2 jobs of (0.5 cpu,
/// 64 MiB, 1 slot) each; the guaranteed pool's operation wants 4 such jobs.
#[test]
fn a_pool_guaranteed_the_whole_cluster_gets_exactly_all_of_it() {
    const GIB: f64 = 1024.0 * MB;
    let total = res(16.0, 2.0, 2.0 * GIB);
    let jobs = |n: f64| res(n, 0.5 * n, 64.0 * MB * n);
    for improved in [false, true] {
        let mut t = Tree::new();
        let guaranteed = t
            .add_pool(
                ROOT,
                "guaranteed",
                1.0,
                PoolSpec {
                    strong_guarantee_resources: PartialResources::EMPTY
                        .with(ResourceKind::Cpu, 2.0),
                    ..PoolSpec::default()
                },
            )
            .unwrap();
        let batch = t.add_pool(ROOT, "batch", 1.0, PoolSpec::default()).unwrap();
        for name in ["handles", "ignores"] {
            t.add_operation(
                batch,
                name,
                1.0,
                OperationSpec {
                    demand: jobs(2.0),
                    usage: jobs(2.0),
                    ..OperationSpec::default()
                },
            )
            .unwrap();
        }
        let b = t
            .add_operation(guaranteed, "B", 1.0, op(jobs(4.0)))
            .unwrap();
        let out = run(&mut t, total, improved, None);
        let share = out.attributes[b].fair_share.total;
        assert_eq!(
            share[ResourceKind::Cpu.index()],
            1.0,
            "improved={improved}: {share:?}"
        );
        assert_eq!(
            out.attributes[guaranteed].fair_share.total[ResourceKind::Cpu.index()],
            1.0,
            "improved={improved}"
        );
    }
}
