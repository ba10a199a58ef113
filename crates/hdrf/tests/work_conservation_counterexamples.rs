//! Minimal inputs on which vector HDRF is *not* work-conserving (found by the property tests in
//! `properties.rs`, P6 and P6'). They follow from the spec (§4.2, §4.3, §5) and are pinned here
//! as behaviour, not as bugs: if the algorithm changes, these tests say so.
//!
//! Cluster: 100 user slots, 100 cpu, 100 GiB memory; shares below are of that cluster.

use fairsched_hdrf::{
    NoClock, OperationSpec, PoolSpec, ROOT, Tree, UpdateInput, UpdateOptions, UpdateOutput, update,
};
use fairsched_resources::{ResourceVector, Resources};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Demand in percent of the cluster: (cpu, memory).
fn op(cpu: f64, memory: f64) -> OperationSpec {
    OperationSpec {
        demand: Resources::from_values([0.0, cpu, 0.0, memory / 100.0 * 100.0 * GIB, 0.0]),
        ..OperationSpec::default()
    }
}

fn run(tree: &Tree, improved: bool) -> UpdateOutput {
    let mut tree = tree.clone();
    let input = UpdateInput {
        total_resources: Resources::from_values([100.0, 100.0, 0.0, 100.0 * GIB, 0.0]),
        now_seconds: 0.0,
        previous_update_seconds: None,
        options: UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: improved,
            ..UpdateOptions::default()
        },
    };
    let out = update(&mut tree, &input, &NoClock);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    out
}

/// (cpu, memory) share of an element.
fn cpu_mem(out: &UpdateOutput, i: usize) -> (f64, f64) {
    let v: ResourceVector = out.attributes[i].fair_share.total;
    (v[1], v[3])
}

fn assert_near(got: (f64, f64), expected: (f64, f64), what: &str) {
    assert!(
        (got.0 - expected.0).abs() < 1e-7 && (got.1 - expected.1).abs() < 1e-7,
        "{what}: expected (cpu, memory) {expected:?}, got {got:?}"
    );
}

/// One pool, three operations of equal weight: A and C want 60% memory each, B wants 80% cpu.
/// All children of a pool share one fit factor f (each gets `S_c(f · w_c / w_min)`). Memory
/// saturates at f = 0.5 (A and C at 50% each), so f stops there, and B stops at 50% cpu although
/// half the cpu is idle and B needs no memory. DRF progressive filling would freeze A and C
/// and give B its 80%.
#[test]
fn shared_fit_factor_stops_an_operation_on_a_resource_it_does_not_use() {
    let mut t = Tree::new();
    let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
    let a = t.add_operation(p, "A", 1.0, op(0.0, 60.0)).unwrap();
    let b = t.add_operation(p, "B", 1.0, op(80.0, 0.0)).unwrap();
    let c = t.add_operation(p, "C", 1.0, op(0.0, 60.0)).unwrap();
    for improved in [false, true] {
        let out = run(&t, improved);
        assert_near(cpu_mem(&out, a), (0.0, 0.5), "A");
        assert_near(cpu_mem(&out, b), (0.5, 0.0), "B");
        assert_near(cpu_mem(&out, c), (0.0, 0.5), "C");
        assert_near(cpu_mem(&out, ROOT), (0.5, 1.0), "root");
    }
}

/// Same pool with A and C wanting exactly 50% memory each: both are fully satisfied, memory is
/// exactly full, and B *still* stops at 50% cpu. The pool's memory consumption reaches 1.0 (its
/// limit) at f = 0.5 and stays flat; at suggestion 1 = L − G the left-continuous inverse (§4.3)
/// returns the start of that plateau. With 49% each, memory never reaches the limit and B gets
/// its 80%: one percent more memory demand from A and C costs B 30% of the cpu.
#[test]
fn demand_exactly_at_the_cluster_freezes_the_pool_at_the_plateau() {
    for (each, b_cpu) in [(50.0, 0.5), (49.0, 0.8)] {
        let mut t = Tree::new();
        let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
        let a = t.add_operation(p, "A", 1.0, op(0.0, each)).unwrap();
        let b = t.add_operation(p, "B", 1.0, op(80.0, 0.0)).unwrap();
        t.add_operation(p, "C", 1.0, op(0.0, each)).unwrap();
        for improved in [false, true] {
            let out = run(&t, improved);
            assert_near(cpu_mem(&out, a), (0.0, each / 100.0), "A");
            assert_near(cpu_mem(&out, b), (b_cpu, 0.0), "B");
        }
    }
}

/// Two pools under the root. P (weight 1) holds A (weight 2, 40% cpu) and B (weight 1, 100%
/// memory); Q (weight 1.75) holds C (100% memory). A saturates at P's suggestion 0.4 (fit 0.2),
/// after which cpu stops binding P and P's fit factor leaps from 0.2 to 0.4: S_P jumps from
/// (0.4 cpu, 0.2 memory) to (0.4, 0.4) at suggestion 0.4. At the root that jump takes memory
/// from 0.9 to 1.1, across the cluster, and the left-continuous S stops below it: memory stays
/// 10% idle while B and C both want more of it.
#[test]
fn jump_in_a_child_pool_leaves_capacity_idle() {
    let mut t = Tree::new();
    let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
    let a = t.add_operation(p, "A", 2.0, op(40.0, 0.0)).unwrap();
    let b = t.add_operation(p, "B", 1.0, op(0.0, 100.0)).unwrap();
    let q = t.add_pool(ROOT, "Q", 1.75, PoolSpec::default()).unwrap();
    let c = t.add_operation(q, "C", 1.0, op(0.0, 100.0)).unwrap();
    for improved in [false, true] {
        let out = run(&t, improved);
        assert_near(cpu_mem(&out, a), (0.4, 0.0), "A");
        assert_near(cpu_mem(&out, b), (0.0, 0.2), "B");
        assert_near(cpu_mem(&out, c), (0.0, 0.7), "C");
        assert_near(cpu_mem(&out, ROOT), (0.4, 0.9), "root");
    }
}
