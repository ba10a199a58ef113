//! Known bug (found by `properties.rs`, P9 and P1): `AdjustProposedIntegralShare` (§3.7 step 3)
//! resets *every* component of the proposed integral share to `limits − strong guarantee` when
//! `sg + pis` exceeds the limits on *one* component by a rounding error.
//!
//! Minimal input: cluster 100 slots / 100 cpu / 100 GiB. Pool P has a strong guarantee of
//! (37 slots, 37.51 cpu, 37 GiB) and a cpu limit of 38; under it a burst pool B (flow = burst =
//! 3 cpu, 60 s of volume) with two operations (57 cpu + 41 GiB; 5 slots + 60 GiB). B's burst
//! share is clipped to P's cpu room, 0.38 − 0.3751 = 0.0049. In improved mode `S_B(0) − sg`
//! comes out as 0.004900000000000053, a few ulps above that room, so the hierarchical increase
//! at P calls the adjustment, which sets P's proposed integral share to `limits − sg` on all
//! resources: (0.63, 0.0049, 0, 0.63) instead of (0.0004, 0.0049, 0, 0.0084). P's guarantee
//! then covers the whole cluster on slots and memory; with a sibling pool the root's F(0)
//! exceeds 1 ("fair share at zero fit factor … exceeds limit") and the root fair share is 113%
//! of the user slots.
//!
//! The upstream function does the same (`proposedIntegralShare = limitsShare −
//! strongGuaranteeShare`, then `nextafter` steps), although its header promises to "slightly
//! decrease components". Suggested fix: only replace the components where `sg + pis > limits`.
//! The same reset fires at a burst pool itself (§3.7 step 3), found by the property tests' random
//! seed on 2026-11-23: a burst pool B with a strong guarantee of 10.08 cpu (slots and memory
//! inferred: 10 slots, 0.10079999999143183 of the memory after truncation to bytes), limits of
//! 56 cpu and 41 GiB, and a burst ratio of 0.36. Its proposed share is min(0.36, room under the
//! limits) = 0.36 except memory, 0.41 − 0.10079999999143183 = 0.3092000000085682, and
//! `sg + proposed` on memory rounds to one ulp above 0.41. The adjustment then proposes
//! `limits − sg` on every resource, so B takes 0.4592 cpu of integral share instead of 0.36,
//! and a sibling's guarantee of 44.91 cpu makes the root's fair share 1.0091 cpu.
//!
//! The upstream function does the same, so fairsched keeps it (results must match the
//! reference bit for bit); the property tests recognise both sites (`known_integral_bug` in
//! `properties.rs`) and skip those updates.
//! The tests assert the intended behaviour and are ignored until the fix lands
//! (`cargo test --test integral_share_regressions -- --ignored`).

use fairsched_hdrf::{
    ElementIndex, IntegralGuaranteeType, IntegralGuarantees, NoClock, OperationSpec, PoolSpec,
    ROOT, ResourceVolume, Tree, UpdateInput, UpdateOptions, UpdateOutput, update,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn cluster() -> Resources {
    Resources::from_values([100.0, 100.0, 0.0, 100.0 * GIB, 0.0])
}

fn op(values: [f64; 5]) -> OperationSpec {
    OperationSpec {
        demand: Resources::from_values(values),
        ..OperationSpec::default()
    }
}

fn guaranteed(values: [f64; 5]) -> PoolSpec {
    PoolSpec {
        strong_guarantee_resources: PartialResources::from_resources(&Resources::from_values(
            values,
        )),
        ..PoolSpec::default()
    }
}

/// Adds P (with the burst pool B below it) under the root; returns (P, B).
fn add_limited_parent_with_burst_child(t: &mut Tree) -> (ElementIndex, ElementIndex) {
    let p = t
        .add_pool(
            ROOT,
            "P",
            1.0,
            guaranteed([37.0, 37.51, 0.0, 37.0 * GIB, 0.0]),
        )
        .unwrap();
    t.element_mut(p).resource_limits = PartialResources::EMPTY.with(ResourceKind::Cpu, 38.0);
    let cpu3 = Resources::ZERO.with(ResourceKind::Cpu, 3.0);
    let b = t
        .add_pool(
            p,
            "B",
            1.0,
            PoolSpec {
                integral_guarantees: IntegralGuarantees {
                    guarantee_type: IntegralGuaranteeType::Burst,
                    resource_flow: cpu3,
                    burst_guarantee_resources: cpu3,
                    ..IntegralGuarantees::default()
                },
                ..PoolSpec::default()
            },
        )
        .unwrap();
    t.element_mut(b).integral_state.accumulated_volume =
        ResourceVolume::from_resources(&cluster().scale(0.03), 60.0);
    t.add_operation(b, "b1", 1.0, op([0.0, 57.0, 0.0, 41.0 * GIB, 0.0]))
        .unwrap();
    t.add_operation(b, "b2", 1.0, op([5.0, 0.0, 0.0, 60.0 * GIB, 0.0]))
        .unwrap();
    (p, b)
}

fn run(tree: &Tree, improved: bool) -> UpdateOutput {
    let mut tree = tree.clone();
    let input = UpdateInput {
        total_resources: cluster(),
        now_seconds: 0.0,
        previous_update_seconds: None,
        options: UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: improved,
            ..UpdateOptions::default()
        },
    };
    update(&mut tree, &input, &NoClock)
}

#[test]
#[ignore = "known bug: AdjustProposedIntegralShare resets every component to limits - sg"]
fn parent_integral_share_is_the_sum_of_its_burst_child() {
    let mut t = Tree::new();
    let (p, b) = add_limited_parent_with_burst_child(&mut t);
    for improved in [false, true] {
        let out = run(&t, improved);
        let parent = out.attributes[p].proposed_integral_share;
        let child = out.attributes[b].proposed_integral_share;
        assert!(
            parent.near(&child, 1e-9),
            "improved={improved}: P's proposed integral share {parent:?} should equal B's {child:?}"
        );
    }
}

#[test]
#[ignore = "known bug: AdjustProposedIntegralShare resets every component to limits - sg"]
fn inflated_integral_share_overcommits_the_root() {
    let mut t = Tree::new();
    let a = t
        .add_pool(
            ROOT,
            "A",
            1.0,
            guaranteed([50.0, 50.0, 0.0, 50.0 * GIB, 0.0]),
        )
        .unwrap();
    t.add_operation(a, "a1", 1.0, op([60.0, 0.0, 0.0, 0.0, 0.0]))
        .unwrap();
    let (p, _) = add_limited_parent_with_burst_child(&mut t);
    t.add_operation(p, "x", 1.0, op([60.0, 0.0, 0.0, 0.0, 0.0]))
        .unwrap();
    for improved in [false, true] {
        let out = run(&t, improved);
        // Today (improved): a warning, root slots 1.1317, A 0.5 although guaranteed 0.5 and
        // wanting 0.6, x 0.6.
        assert!(
            out.warnings.is_empty(),
            "improved={improved}: {:?}",
            out.warnings
        );
        let root = out.attributes[ROOT].fair_share.total;
        assert!(
            root.max_component() <= 1.0 + 1e-9,
            "improved={improved}: root fair share {root:?} exceeds the cluster"
        );
    }
}

/// The burst-pool site (see the module comment).
fn burst_pool_next_to_a_guaranteed_sibling() -> (Tree, ElementIndex) {
    let mut t = Tree::new();
    let a = t
        .add_pool(
            ROOT,
            "A",
            1.0,
            guaranteed([44.0, 44.91, 0.0, 44.0 * GIB, 0.0]),
        )
        .unwrap();
    t.add_operation(a, "a1", 1.0, op([0.0, 61.0, 0.0, 0.0, 0.0]))
        .unwrap();
    let cpu36 = Resources::ZERO.with(ResourceKind::Cpu, 36.0);
    let b = t
        .add_pool(
            ROOT,
            "B",
            1.0,
            PoolSpec {
                strong_guarantee_resources: PartialResources::EMPTY.with(ResourceKind::Cpu, 10.08),
                integral_guarantees: IntegralGuarantees {
                    guarantee_type: IntegralGuaranteeType::Burst,
                    resource_flow: cpu36,
                    burst_guarantee_resources: cpu36,
                    ..IntegralGuarantees::default()
                },
                ..PoolSpec::default()
            },
        )
        .unwrap();
    t.element_mut(b).resource_limits = PartialResources::EMPTY
        .with(ResourceKind::Cpu, 56.0)
        .with(ResourceKind::Memory, 41.0 * GIB);
    t.element_mut(b).integral_state.accumulated_volume =
        ResourceVolume::from_resources(&cluster().scale(0.36), 60.0);
    t.add_operation(b, "b1", 1.0, op([0.0, 56.0, 0.0, 0.0, 0.0]))
        .unwrap();
    (t, b)
}

/// What the update computes today for the burst-pool site, pinned so that a change to the
/// adjustment (or to the inference that produces the memory guarantee) is noticed.
#[test]
fn burst_pool_integral_share_is_reset_to_its_limits_as_upstream_does() {
    let (t, b) = burst_pool_next_to_a_guaranteed_sibling();
    for improved in [false, true] {
        let out = run(&t, improved);
        let pis = out.attributes[b].proposed_integral_share;
        let sg = out.attributes[b].strong_guarantee_share;
        assert_eq!(sg[ResourceKind::Memory.index()], 0.10079999999143183);
        assert!(
            (pis[ResourceKind::Cpu.index()] - 0.4592).abs() < 1e-12,
            "improved={improved}: {pis:?}"
        );
        assert!(
            out.warnings
                .iter()
                .any(|w| w.message.contains("fair share at zero fit factor")),
            "improved={improved}: {:?}",
            out.warnings
        );
    }
}

#[test]
#[ignore = "known bug: AdjustProposedIntegralShare resets every component to limits - sg"]
fn burst_pool_takes_at_most_its_burst_ratio() {
    let (t, b) = burst_pool_next_to_a_guaranteed_sibling();
    for improved in [false, true] {
        let out = run(&t, improved);
        let pis = out.attributes[b].proposed_integral_share;
        assert!(
            pis.max_component() <= 0.36 + 1e-9,
            "improved={improved}: B's proposed integral share {pis:?} exceeds its burst ratio"
        );
        assert!(
            out.warnings.is_empty(),
            "improved={improved}: {:?}",
            out.warnings
        );
    }
}
