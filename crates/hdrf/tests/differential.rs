//! Differential test of the production update against the original implementation, which is
//! kept verbatim in `fairsched_hdrf_testkit::oracle` as the oracle. The knobs it sets are
//! `fairsched_hdrf::tuning` (feature `tuning`, enabled for this crate's tests only).
//!
//! Seeded random trees (small and medium, every option combination: classic/improved mode,
//! distribution gap, gang step function, FIFO reordering, fast FIFO, inferred weights; with
//! strong guarantees, burst and relaxed integral pools with accumulated volume, limits, gangs,
//! usage, promised-guarantee and priority pools, ties in weights and round shares) are updated
//! twice (the second update refills and consumes integral volumes) by both implementations.
//!
//! * With the exact summation forced everywhere (`Tuning::exact_sum` allowing everything) the
//!   outputs must be **bit-identical** (every double, segment counts, warnings, errors, and the
//!   persistent integral state of the tree).
//! * With the default tuning (large fan-outs use the balanced summation), and with the balanced
//!   summation forced everywhere (`exact_sum` allowing nothing), every double of a classic-mode update
//!   must agree within `1e-12` relative (absolute below magnitude 1), and the discrete outputs
//!   (FIFO indices, dominant resources, errors) must be equal. Segment counts are not compared
//!   there: the builder merges a segment only on exact equality of values, so a last-bit
//!   difference may keep two segments apart. Improved-mode updates never use the balanced
//!   summation (see `fairsched_hdrf`'s `improved` module), so they must stay bit-identical under any tuning.
//!
//! These comparisons use `Tuning::envelope = false` (M and S built as the reference builds
//! them). The default builds them in one walk over F (`envelope` module): the same functions,
//! with values that differ in the last bits. Small trees must then agree with the reference within
//! `1e-12` in every option combination (`small_trees_by_envelope_are_close_in_every_option_combination`),
//! and the `envelope` module's unit tests compare the two constructions function by function on random
//! F. Medium trees are not compared that way: their round shares put some values within a few
//! ulps of a limit, and there the last bits decide which side of the limit a share falls on
//! (medium seed 2012, classic mode: a FIFO child's share of user slots is 0.9999999999999999 by
//! the walk and 1.0000000000000002 by the reference, against a limit of exactly 1, and the
//! pool's limited demand then differs by 0.125). Both are rounding of the same real value; the
//! algorithm is discontinuous there by design (left-continuous functions, hard limits).

use fairsched_hdrf::tuning::{ExactSum, Tuning};
use fairsched_hdrf::update_tuned;
use fairsched_hdrf::{
    DetailedFairShare, ElementAttributes, ElementIndex, FifoSortParameter, IntegralGuaranteeType,
    IntegralGuarantees, NoClock, OperationSpec, PoolMode, PoolSpec, ROOT, ResourceVolume, Tree,
    UpdateInput, UpdateOptions, UpdateOutput,
};
use fairsched_hdrf_testkit::oracle;
use fairsched_resources::{
    PartialResources, RESOURCE_COUNT, ResourceKind, ResourceVector, Resources,
};

/// SplitMix64: a tiny deterministic generator (the seed alone fixes the tree).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A fraction that is often "round" (a multiple of 1/20), to provoke exact ties.
    fn fraction(&mut self) -> f64 {
        if self.chance(0.5) {
            self.below(21) as f64 / 20.0
        } else {
            self.unit()
        }
    }
}

/// Shape of a generated tree.
#[derive(Clone, Copy, Debug)]
struct Shape {
    pools: usize,
    operations: usize,
    max_depth: usize,
    /// Extra operations attached to a few pools to create large fan-outs.
    wide_pools: usize,
    wide_fanout: usize,
}

const SMALL: Shape = Shape {
    pools: 6,
    operations: 14,
    max_depth: 4,
    wide_pools: 0,
    wide_fanout: 0,
};

const MEDIUM: Shape = Shape {
    pools: 40,
    operations: 250,
    max_depth: 5,
    wide_pools: 2,
    wide_fanout: 150,
};

fn resources(cluster: &Resources, mut f: impl FnMut(usize) -> f64) -> Resources {
    let t = cluster.values();
    Resources::from_values(std::array::from_fn(|r| (t[r] * f(r)).floor()))
}

/// A random tree and the cluster total.
fn random_tree(seed: u64, shape: Shape) -> (Tree, Resources) {
    let mut rng = Rng(seed);
    let gib = (1u64 << 30) as f64;
    let cluster = Resources::from_values([
        (100 + rng.below(900)) as f64,
        (100 + rng.below(900)) as f64 + rng.below(100) as f64 / 100.0,
        if rng.chance(0.5) {
            (8 * (1 + rng.below(8))) as f64
        } else {
            0.0
        },
        (100 + rng.below(900)) as f64 * gib,
        if rng.chance(0.3) {
            (1000 + rng.below(9000)) as f64
        } else {
            0.0
        },
    ]);
    let mut tree = Tree::new();
    let mut depth = vec![0usize];
    // Whether the pool or one of its ancestors has an integral guarantee.
    let mut integral = vec![false];
    let mut pools = vec![ROOT];
    let weight = |rng: &mut Rng| {
        if rng.chance(0.6) {
            (1 + rng.below(4)) as f64
        } else {
            0.5 + 4.5 * rng.unit()
        }
    };

    for k in 0..shape.pools {
        let candidates: Vec<ElementIndex> = pools
            .iter()
            .copied()
            .filter(|&p| depth[p] + 2 < shape.max_depth)
            .collect();
        let parent = candidates[rng.below(candidates.len())];
        let mut spec = PoolSpec {
            fifo_sort_parameters: match rng.below(3) {
                0 => vec![FifoSortParameter::Weight],
                1 => vec![FifoSortParameter::StartTime],
                _ => vec![
                    FifoSortParameter::PendingJobCount,
                    FifoSortParameter::Weight,
                ],
            },
            allow_gang_step_function: rng.chance(0.85),
            enable_promised_guarantee_fair_share: rng.chance(0.06),
            enable_fifo_children_reordering_for_guarantee_utilization: rng.chance(0.6),
            infer_weight: rng.chance(0.2),
            priority_strong_guarantee_adjustment: rng.chance(0.05),
            priority_strong_guarantee_adjustment_donorship: rng.chance(0.05),
            ..PoolSpec::default()
        };
        if rng.chance(0.35) {
            let share = 0.05 + 0.3 * rng.fraction();
            let mut g = PartialResources::EMPTY;
            g.set(ResourceKind::Cpu, cluster.get(ResourceKind::Cpu) * share);
            if rng.chance(0.4) {
                g.set(
                    ResourceKind::Memory,
                    cluster.get(ResourceKind::Memory) * share * 0.8,
                );
            }
            if rng.chance(0.2) {
                g.set(
                    ResourceKind::Gpu,
                    (cluster.get(ResourceKind::Gpu) * share).floor(),
                );
            }
            spec.strong_guarantee_resources = g;
        }
        // Integral pools are never nested (the reference update does not support it: a nested
        // pool's functions are dropped after its ancestor's were built, and never rebuilt).
        if !integral[parent] && rng.chance(0.15) {
            let flow = 0.02 + 0.15 * rng.fraction();
            let burst = rng.chance(0.5);
            spec.integral_guarantees = IntegralGuarantees {
                guarantee_type: if burst {
                    IntegralGuaranteeType::Burst
                } else {
                    IntegralGuaranteeType::Relaxed
                },
                resource_flow: resources(&cluster, |r| if r == 1 { flow / 60.0 } else { 0.0 }),
                burst_guarantee_resources: resources(&cluster, |r| {
                    if r == 1 || r == 3 { flow * 2.0 } else { 0.0 }
                }),
                relaxed_share_multiplier_limit: rng.chance(0.3).then(|| 1.0 + 4.0 * rng.unit()),
                can_accept_free_volume: rng.chance(0.8),
                should_distribute_free_volume_among_children: rng.chance(0.3),
            };
        }
        let name = format!("pool{k}");
        let w = weight(&mut rng);
        let p = tree.add_pool(parent, name, w, spec).unwrap();
        if rng.chance(0.12) {
            let mut limits = PartialResources::EMPTY;
            limits.set(
                ResourceKind::Cpu,
                cluster.get(ResourceKind::Cpu) * (0.1 + 0.6 * rng.fraction()),
            );
            if rng.chance(0.5) {
                limits.set(
                    ResourceKind::Memory,
                    cluster.get(ResourceKind::Memory) * (0.1 + 0.6 * rng.unit()),
                );
            }
            tree.element_mut(p).resource_limits = limits;
        }
        if rng.chance(0.5) {
            let v = ResourceVolume::from_resources(&cluster, 60.0 * rng.fraction());
            tree.element_mut(p).integral_state.accumulated_volume = v;
        }
        let is_integral = tree
            .element(p)
            .pool()
            .unwrap()
            .integral_guarantees
            .guarantee_type
            != IntegralGuaranteeType::None;
        depth.push(depth[parent] + 1);
        integral.push(integral[parent] || is_integral);
        pools.push(p);
    }

    let add_operation = |tree: &mut Tree, rng: &mut Rng, parent: ElementIndex, k: usize| {
        let scale = if rng.chance(0.1) { 1.5 } else { 0.3 };
        let demand = resources(&cluster, |_| {
            if rng.chance(0.15) {
                0.0
            } else {
                scale * rng.fraction() * rng.fraction()
            }
        });
        let usage = if rng.chance(0.5) {
            Resources::ZERO
        } else {
            let u = rng.fraction();
            Resources::from_values(demand.values().map(|d| (d * u).floor()))
        };
        let spec = OperationSpec {
            demand,
            usage,
            gang: rng.chance(0.22),
            best_allocation_share: if rng.chance(0.1) {
                ResourceVector(std::array::from_fn(|_| 0.2 + 0.8 * rng.fraction()))
            } else {
                ResourceVector::ONES
            },
            start_time: rng.below(5) as f64,
            pending_job_count: rng.below(3) as u64,
        };
        let w = weight(rng);
        let op = tree
            .add_operation(parent, format!("op{k}"), w, spec)
            .unwrap();
        if rng.chance(0.08) {
            let mut limits = PartialResources::EMPTY;
            limits.set(
                ResourceKind::Cpu,
                cluster.get(ResourceKind::Cpu) * 0.5 * rng.fraction(),
            );
            tree.element_mut(op).resource_limits = limits;
        }
    };
    let mut count = 0;
    for _ in 0..shape.operations {
        let parent = pools[rng.below(pools.len())];
        add_operation(&mut tree, &mut rng, parent, count);
        count += 1;
    }
    for _ in 0..shape.wide_pools {
        let parent = pools[1 + rng.below(pools.len() - 1)];
        for _ in 0..shape.wide_fanout {
            add_operation(&mut tree, &mut rng, parent, count);
            count += 1;
        }
    }
    // FIFO pools: some pools whose children are all operations.
    for &p in &pools[1..] {
        let only_operations = tree
            .element(p)
            .children
            .iter()
            .all(|&c| tree.element(c).is_operation());
        if only_operations && rng.chance(0.4) {
            let spec = tree.element_mut(p).pool_mut().unwrap();
            spec.mode = PoolMode::Fifo;
            // A small guarantee makes FIFO reordering (which needs one) likely to defer gangs.
            if spec.strong_guarantee_resources.is_empty() && rng.chance(0.6) {
                let share = 0.02 + 0.1 * rng.fraction();
                spec.strong_guarantee_resources
                    .set(ResourceKind::Cpu, cluster.get(ResourceKind::Cpu) * share);
                // Guarantees only reach a pool whose ancestors have one too.
                let mut a = tree.element(p).parent;
                while let Some(q) = a.filter(|&q| q != ROOT) {
                    let spec = tree.element_mut(q).pool_mut().unwrap();
                    if !spec.strong_guarantee_resources.is_set(ResourceKind::Cpu) {
                        spec.strong_guarantee_resources
                            .set(ResourceKind::Cpu, cluster.get(ResourceKind::Cpu) * 0.3);
                    }
                    a = tree.element(q).parent;
                }
            }
        }
    }
    (tree, cluster)
}

/// Option combination number `bits` (all 64 combinations of the six switches).
fn options(bits: u32) -> UpdateOptions {
    let on = |k: u32| bits & (1 << k) != 0;
    UpdateOptions {
        enable_improved_fair_share_by_fit_factor_computation: on(0),
        enable_improved_fair_share_by_fit_factor_computation_distribution_gap: on(1),
        enable_step_function_for_gang_operations: on(2),
        enable_fifo_children_reordering_for_guarantee_utilization: on(3),
        enable_fast_fifo_fair_share_by_fit_factor_computation: on(4),
        infer_weight_from_guarantees_share_multiplier: on(5).then_some(2.0),
        ..UpdateOptions::default()
    }
}

/// Two updates (the second refills and consumes integral volumes) with one implementation.
fn run(
    tree: &Tree,
    cluster: Resources,
    options: &UpdateOptions,
    update: impl Fn(&mut Tree, &UpdateInput) -> UpdateOutput,
) -> (Vec<UpdateOutput>, Tree) {
    let mut tree = tree.clone();
    let mut outputs = Vec::new();
    for (now, previous) in [(100.0, None), (160.0, Some(100.0))] {
        let input = UpdateInput {
            total_resources: cluster,
            now_seconds: now,
            previous_update_seconds: previous,
            options: options.clone(),
        };
        outputs.push(update(&mut tree, &input));
    }
    (outputs, tree)
}

fn reference_run(
    tree: &Tree,
    cluster: Resources,
    options: &UpdateOptions,
) -> (Vec<UpdateOutput>, Tree) {
    run(tree, cluster, options, |t, i| {
        oracle::update::update(t, i, &NoClock)
    })
}

fn optimised_run(
    tree: &Tree,
    cluster: Resources,
    options: &UpdateOptions,
    tuning: Tuning,
) -> (Vec<UpdateOutput>, Tree) {
    run(tree, cluster, options, |t, i| {
        update_tuned(t, i, &NoClock, tuning)
    })
}

/// Every double of an element's attributes, with a name for messages.
fn doubles(a: &ElementAttributes) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    let mut vector = |name: &'static str, v: &ResourceVector| {
        for r in 0..RESOURCE_COUNT {
            out.push((name, v[r]));
        }
    };
    let detailed = |v: &mut dyn FnMut(&'static str, &ResourceVector),
                    prefix: [&'static str; 4],
                    d: &DetailedFairShare| {
        v(prefix[0], &d.total);
        v(prefix[1], &d.strong_guarantee);
        v(prefix[2], &d.integral_guarantee);
        v(prefix[3], &d.weight_proportional);
    };
    detailed(
        &mut vector,
        [
            "fair_share.total",
            "fair_share.strong_guarantee",
            "fair_share.integral_guarantee",
            "fair_share.weight_proportional",
        ],
        &a.fair_share,
    );
    detailed(
        &mut vector,
        [
            "promised.total",
            "promised.strong_guarantee",
            "promised.integral_guarantee",
            "promised.weight_proportional",
        ],
        &a.promised_guarantee_fair_share,
    );
    vector("usage_share", &a.usage_share);
    vector("demand_share", &a.demand_share);
    vector("limits_share", &a.limits_share);
    vector("strong_guarantee_share", &a.strong_guarantee_share);
    vector(
        "strong_guarantee_share_by_tier[0]",
        &a.strong_guarantee_share_by_tier[0],
    );
    vector(
        "strong_guarantee_share_by_tier[1]",
        &a.strong_guarantee_share_by_tier[1],
    );
    vector("proposed_integral_share", &a.proposed_integral_share);
    vector("estimated_guarantee_share", &a.estimated_guarantee_share);
    vector("limited_demand_share", &a.limited_demand_share);
    vector(
        "inferred_strong_guarantee_resources",
        &ResourceVector(a.inferred_strong_guarantee_resources.values()),
    );
    for (name, v) in [
        ("volume_overflow", &a.volume_overflow),
        ("acceptable_volume", &a.acceptable_volume),
        ("accepted_free_volume", &a.accepted_free_volume),
        ("children_volume_overflow", &a.children_volume_overflow),
    ] {
        vector(name, &ResourceVector(v.values()));
    }
    out.push(("weight", a.weight));
    out.push(("burst_ratio", a.burst_ratio));
    out.push(("total_burst_ratio", a.total_burst_ratio));
    out.push(("resource_flow_ratio", a.resource_flow_ratio));
    out.push(("total_resource_flow_ratio", a.total_resource_flow_ratio));
    out
}

/// Bit-exact comparison (Debug of doubles is exact, `-0.0` included).
fn assert_identical(
    label: &str,
    expected: &(Vec<UpdateOutput>, Tree),
    actual: &(Vec<UpdateOutput>, Tree),
) {
    for (step, (e, a)) in expected.0.iter().zip(&actual.0).enumerate() {
        assert_eq!(e.attributes.len(), a.attributes.len());
        for (i, (ea, aa)) in e.attributes.iter().zip(&a.attributes).enumerate() {
            let (de, da) = (format!("{ea:?}"), format!("{aa:?}"));
            assert!(
                de == da,
                "{label}: update {step}, element {i} differs:\nreference {de}\noptimised {da}"
            );
        }
        assert_eq!(
            format!("{:?}", e.errors),
            format!("{:?}", a.errors),
            "{label}: update {step}: errors"
        );
        assert_eq!(
            format!("{:?}", e.warnings),
            format!("{:?}", a.warnings),
            "{label}: update {step}: warnings"
        );
    }
    assert_eq!(
        format!("{:?}", expected.1),
        format!("{:?}", actual.1),
        "{label}: tree state"
    );
}

/// Tolerance comparison: `|a − b| ≤ 1e-12 · max(1, |a|, |b|)` for every double.
fn assert_close(
    label: &str,
    expected: &(Vec<UpdateOutput>, Tree),
    actual: &(Vec<UpdateOutput>, Tree),
) {
    const TOLERANCE: f64 = 1e-12;
    let close =
        |x: f64, y: f64| x == y || (x - y).abs() <= TOLERANCE * x.abs().max(y.abs()).max(1.0);
    for (step, (e, a)) in expected.0.iter().zip(&actual.0).enumerate() {
        for (i, (ea, aa)) in e.attributes.iter().zip(&a.attributes).enumerate() {
            for ((name, x), (_, y)) in doubles(ea).into_iter().zip(doubles(aa)) {
                assert!(
                    close(x, y),
                    "{label}: update {step}, element {i}: {name}: reference {x:e}, optimised {y:e}"
                );
            }
            assert_eq!(
                ea.dominant_resource, aa.dominant_resource,
                "{label}: element {i}"
            );
            assert_eq!(ea.fifo_index, aa.fifo_index, "{label}: element {i}");
            assert_eq!(
                ea.effective_fifo_index, aa.effective_fifo_index,
                "{label}: element {i}"
            );
        }
        assert_eq!(
            format!("{:?}", e.errors),
            format!("{:?}", a.errors),
            "{label}: update {step}: errors"
        );
        assert_eq!(
            e.warnings.len(),
            a.warnings.len(),
            "{label}: update {step}: warnings {:?} vs {:?}",
            e.warnings,
            a.warnings
        );
    }
    for (k, (pe, pa)) in expected
        .1
        .elements()
        .iter()
        .zip(actual.1.elements())
        .enumerate()
    {
        let (ve, va) = (
            pe.integral_state.accumulated_volume.values(),
            pa.integral_state.accumulated_volume.values(),
        );
        for r in 0..RESOURCE_COUNT {
            assert!(
                close(ve[r], va[r]),
                "{label}: element {k}: accumulated volume"
            );
        }
        let (se, sa) = (
            pe.integral_state.last_share_ratio,
            pa.integral_state.last_share_ratio,
        );
        assert!(
            close(se, sa),
            "{label}: element {k}: last share ratio {se} vs {sa}"
        );
    }
}

/// Bit-identical in improved mode, close in classic mode (see the module documentation).
fn compare_with_tuning(
    label: &str,
    opts: &UpdateOptions,
    expected: &(Vec<UpdateOutput>, Tree),
    actual: &(Vec<UpdateOutput>, Tree),
) {
    if opts.enable_improved_fair_share_by_fit_factor_computation {
        assert_identical(label, expected, actual);
    } else {
        assert_close(label, expected, actual);
    }
}

const EXACT: Tuning = Tuning {
    exact_sum: ExactSum {
        max_functions: usize::MAX,
        max_evaluations: usize::MAX,
    },
    envelope: false,
};

/// The default tuning with M and S built as the reference builds them.
fn reference_functions() -> Tuning {
    Tuning {
        envelope: false,
        ..Tuning::default()
    }
}

#[test]
fn small_trees_are_bit_identical_in_every_option_combination() {
    for seed in 0..32u64 {
        let (tree, cluster) = random_tree(seed, SMALL);
        for bits in 0..64 {
            let opts = options(bits);
            let expected = reference_run(&tree, cluster, &opts);
            let label = format!("small seed {seed} options {bits:06b}");
            assert_identical(
                &label,
                &expected,
                &optimised_run(&tree, cluster, &opts, reference_functions()),
            );
            assert_identical(
                &label,
                &expected,
                &optimised_run(&tree, cluster, &opts, EXACT),
            );
        }
    }
}

/// M and S built by one walk over F (`envelope` module, the default) agree with the reference
/// within 1e-12 in every option combination, classic and improved.
#[test]
fn small_trees_by_envelope_are_close_in_every_option_combination() {
    for seed in 0..32u64 {
        let (tree, cluster) = random_tree(seed, SMALL);
        for bits in 0..64 {
            let opts = options(bits);
            let expected = reference_run(&tree, cluster, &opts);
            let label = format!("small seed {seed} options {bits:06b} envelope");
            assert_close(
                &label,
                &expected,
                &optimised_run(&tree, cluster, &opts, Tuning::default()),
            );
        }
    }
}

#[test]
fn medium_trees_are_bit_identical_with_exact_summation() {
    for seed in 0..6u64 {
        let (tree, cluster) = random_tree(1000 + seed, MEDIUM);
        for k in 0..6u32 {
            let bits = ((seed as u32) * 11 + k * 23) % 64;
            let opts = options(bits);
            let expected = reference_run(&tree, cluster, &opts);
            let label = format!("medium seed {seed} options {bits:06b}");
            assert_identical(
                &label,
                &expected,
                &optimised_run(&tree, cluster, &opts, EXACT),
            );
        }
    }
}

#[test]
fn medium_trees_are_close_with_default_tuning() {
    for seed in 0..6u64 {
        let (tree, cluster) = random_tree(2000 + seed, MEDIUM);
        for k in 0..6u32 {
            let bits = ((seed as u32) * 7 + k * 19) % 64;
            let opts = options(bits);
            let expected = reference_run(&tree, cluster, &opts);
            let label = format!("medium seed {seed} options {bits:06b}");
            compare_with_tuning(
                &label,
                &opts,
                &expected,
                &optimised_run(&tree, cluster, &opts, reference_functions()),
            );
        }
    }
}

#[test]
fn balanced_summation_everywhere_is_close() {
    let forced = Tuning {
        exact_sum: ExactSum {
            max_functions: 0,
            max_evaluations: 0,
        },
        envelope: false,
    };
    for seed in 0..24u64 {
        let (tree, cluster) = random_tree(3000 + seed, SMALL);
        for bits in 0..64 {
            let opts = options(bits);
            let expected = reference_run(&tree, cluster, &opts);
            let label = format!("small seed {seed} options {bits:06b} forced balanced sum");
            compare_with_tuning(
                &label,
                &opts,
                &expected,
                &optimised_run(&tree, cluster, &opts, forced),
            );
        }
    }
}

/// The generator reaches the paths the comparisons are meant to cover.
#[test]
fn generator_covers_the_interesting_paths() {
    let (mut integral, mut reordered, mut promised, mut gangs, mut warnings, mut updates) =
        (0, 0, 0, 0, 0, 0);
    for seed in 0..60u64 {
        let (tree, cluster) = random_tree(seed, SMALL);
        let opts = options(0b01_1111);
        let (outputs, _) = optimised_run(&tree, cluster, &opts, EXACT);
        for out in &outputs {
            updates += 1;
            warnings += usize::from(!out.warnings.is_empty());
            for (i, a) in out.attributes.iter().enumerate() {
                let e = tree.element(i);
                integral += usize::from(e.pool().is_some() && !a.proposed_integral_share.is_zero());
                reordered += usize::from(a.effective_fifo_index.is_some());
                promised += usize::from(!a.promised_guarantee_fair_share.total.is_zero());
                gangs += usize::from(
                    e.operation().is_some_and(|o| o.gang) && !a.fair_share.total.is_zero(),
                );
            }
        }
    }
    eprintln!(
        "integral {integral} reordered {reordered} promised {promised} gangs {gangs} warnings {warnings}/{updates}"
    );
    assert!(integral > 20, "integral shares: {integral}");
    assert!(reordered > 3, "reordered FIFO children: {reordered}");
    assert!(promised > 5, "promised-guarantee shares: {promised}");
    assert!(gangs > 20, "gangs with a share: {gangs}");
    assert!(
        warnings * 2 < updates,
        "updates with warnings: {warnings} of {updates}"
    );
}

/// `update_into` overwrites everything a previous (larger or smaller) update left in the output.
#[test]
fn update_into_equals_update() {
    let mut out = UpdateOutput::default();
    for (seed, shape) in [(7u64, MEDIUM), (8, SMALL), (9, MEDIUM)] {
        let (tree, cluster) = random_tree(seed, shape);
        let opts = options(0b00_0101);
        let input = UpdateInput {
            total_resources: cluster,
            now_seconds: 100.0,
            previous_update_seconds: Some(40.0),
            options: opts,
        };
        let expected = fairsched_hdrf::update(&mut tree.clone(), &input, &NoClock);
        fairsched_hdrf::update_into(&mut tree.clone(), &input, &NoClock, &mut out);
        assert_eq!(format!("{expected:?}"), format!("{out:?}"), "seed {seed}");
    }
}

/// A [`fairsched_hdrf::Workspace`] reused across trees of different sizes and modes gives what a
/// fresh one gives: what an earlier update left in it (the functions an incremental update
/// reuses) changes no result. Only the count of reused elements differs (compared apart: none
/// across different trees, and the update of the same tree again reuses).
#[test]
fn reused_workspace_equals_fresh() {
    let mut workspace = fairsched_hdrf::Workspace::new();
    let mut out = UpdateOutput::default();
    for (seed, shape, bits) in [
        (7u64, MEDIUM, 0b00_0101),
        (8, SMALL, 0b10_0000),
        (9, MEDIUM, 0b11_1111),
        (10, SMALL, 0),
    ] {
        let (tree, cluster) = random_tree(seed, shape);
        let input = UpdateInput {
            total_resources: cluster,
            now_seconds: 100.0,
            previous_update_seconds: Some(40.0),
            options: options(bits),
        };
        let expected = fairsched_hdrf::update(&mut tree.clone(), &input, &NoClock);
        let reused = workspace.update(&mut tree.clone(), &input, &NoClock);
        assert_eq!(
            format!("{expected:?}"),
            format!("{reused:?}"),
            "seed {seed}"
        );
        workspace.update_into(&mut tree.clone(), &input, &NoClock, &mut out);
        assert!(out.timings.reused_elements > 0, "seed {seed} into");
        out.timings.reused_elements = 0;
        assert_eq!(
            format!("{expected:?}"),
            format!("{out:?}"),
            "seed {seed} into"
        );
    }
}
