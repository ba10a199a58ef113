//! Knife edge found by `properties.rs` (P7b, DRF strategy-proofness; and classic vs improved):
//! an operation whose demand exceeds the cluster on a resource r is capped at suggestion 1, so
//! its share on r is `d_r · (1 / d_r)` — exactly 1.0 or 1 − 1 ulp depending on rounding. If it
//! is exactly 1.0, its pool's F is flat at level 1 = the limit on r, and at the root's
//! suggestion 1 the left-continuous inverse of §4.3 (`s ≤ L − G` takes the *start* of a
//! plateau) freezes the pool's fit factor where r fills up, so the siblings stop growing. If it
//! is 1 − 1 ulp, the plateau is below the limit, the third case (`sup`) applies, and the
//! siblings grow until the next resource saturates. The two outcomes are far apart.
//!
//! Minimal input: cluster 100 cpu / 100 GiB memory / 100 network (and 100 slots, 16 gpu); one
//! pool with X (weight 3.4; 18 cpu, 118 GiB) and Y (weight 1; 88 cpu, 30 network). X is capped at
//! 100% memory. Classic mode gives Y 0.847 cpu (cpu saturates, work-conserving); improved mode
//! gives Y 0.294 cpu (frozen where X's memory hits 1; cpu 55% idle). The spec (§10) expects both
//! modes to agree. The direction is arbitrary: with X at weight 5 instead of 3.4, classic gives
//! Y 0.20 and improved 0.847. (Over 65 combinations of X's memory demand, 101–300 GiB, and
//! weight, 1–5, the modes disagreed on these two.) In improved mode, Y can get 0.733 cpu instead of 0.294 by claiming 120
//! network instead of 30 (a DRF strategy-proofness violation); in classic mode a similar lie
//! pays on other inputs (e.g. X: 69 cpu, weight 1.1 → 75.9 cpu claimed; Y: 60 cpu + 118 GiB,
//! weight 6.6: X's share goes from 0.167 to 0.49).
//!
//! Ignored: they assert the agreement / non-manipulability the knife edge breaks
//! (`cargo test --test capped_share_knife_edge -- --ignored`).

use fairsched_hdrf::{
    ElementIndex, NoClock, OperationSpec, PoolSpec, ROOT, Tree, UpdateInput, UpdateOptions,
    UpdateOutput, update,
};
use fairsched_resources::Resources;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn cluster() -> Resources {
    Resources::from_values([100.0, 100.0, 16.0, 100.0 * GIB, 100.0])
}

fn op(cpu: f64, memory_gib: f64, network: f64) -> OperationSpec {
    OperationSpec {
        demand: Resources::from_values([0.0, cpu, 0.0, memory_gib * GIB, network]),
        ..OperationSpec::default()
    }
}

/// One pool with X and Y; returns the tree and Y.
fn pool_of_two(x: (f64, OperationSpec), y: (f64, OperationSpec)) -> (Tree, ElementIndex) {
    let mut t = Tree::new();
    let p = t.add_pool(ROOT, "P", 1.0, PoolSpec::default()).unwrap();
    t.add_operation(p, "X", x.0, x.1).unwrap();
    let y = t.add_operation(p, "Y", y.0, y.1).unwrap();
    (t, y)
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
    let out = update(&mut tree, &input, &NoClock);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    out
}

#[test]
#[ignore = "knife edge: classic and improved mode disagree when a sibling is capped at share 1"]
fn classic_and_improved_agree_when_a_sibling_is_capped() {
    let (t, y) = pool_of_two((3.4, op(18.0, 118.0, 0.0)), (1.0, op(88.0, 0.0, 30.0)));
    let classic = run(&t, false).attributes[y].fair_share.total;
    let improved = run(&t, true).attributes[y].fair_share.total;
    assert!(
        classic.near(&improved, 1e-7),
        "Y: classic {classic:?} vs improved {improved:?}"
    );
}

#[test]
#[ignore = "knife edge: inflating a demand changes the rounding of a capped sibling's share"]
fn inflating_a_demand_does_not_pay() {
    // Utility of Y for its true demand (88 cpu, 30 network): min(1, cpu/0.88, network/0.3).
    let utility = |out: &UpdateOutput, y: ElementIndex| {
        let f = out.attributes[y].fair_share.total;
        (f[1] / 0.88).min(f[4] / 0.3).min(1.0)
    };
    for improved in [false, true] {
        let (honest, y) = pool_of_two((3.4, op(18.0, 118.0, 0.0)), (1.0, op(88.0, 0.0, 30.0)));
        let (lying, _) = pool_of_two((3.4, op(18.0, 118.0, 0.0)), (1.0, op(88.0, 0.0, 120.0)));
        let truthful = utility(&run(&honest, improved), y);
        let lied = utility(&run(&lying, improved), y);
        assert!(
            lied <= truthful + 1e-9,
            "improved={improved}: Y's utility {truthful} when honest, {lied} when claiming 120 network"
        );
    }
}
