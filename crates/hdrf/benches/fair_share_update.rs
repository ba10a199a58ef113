//! A full fair-share `update` on seeded random trees (`fairsched-hdrf-testkit`):
//! 1k pools / 10k operations and 10k pools / 100k operations, depth 3–5, mixed features (FIFO
//! pools, strong and integral guarantees, limits, gangs with the step function, usage), in
//! classic and improved mode (fast FIFO path on).
//!
//! The tree is built once per benchmark; every iteration updates a fresh clone (cloned outside
//! the timed section), because `update` advances integral state. Every iteration reuses one
//! `Workspace` (the working memory a repeated caller keeps). `update_into_*` times
//! `Workspace::update_into` with an output reused across iterations too.
//!
//! `update_*` and `update_into_*` are full updates: the workspace forgets the previous
//! update's functions before each (`Workspace::forget_functions`, O(1)), else updating the same
//! tree again would reuse every element's. `steady_*` is the incremental update in a steady
//! state: iterations alternate between the tree and a copy with 1 % of the operations' usage
//! changed (chosen at random over the tree, fixed seed), so each update sees 1 % of the
//! operations changed since the previous one; it prints the elements reused (`reused_elements`)
//! per update after its samples.
//!
//! `CARGO_TARGET_DIR=... cargo bench -p fairsched-hdrf`. Per-phase timings:
//! `cargo run --release -p fairsched-hdrf-testkit --example hdrf_phases`.

use divan::Bencher;
use fairsched_hdrf::Tree;
use fairsched_hdrf::{NoClock, UpdateOptions, UpdateOutput, Workspace};
use fairsched_hdrf_testkit::rng::Rng;
use fairsched_hdrf_testkit::{TreeParams, options, random_tree};

fn main() {
    divan::main();
}

const SEED: u64 = 1;
const MODES: [&str; 2] = ["classic", "improved"];

fn mode_options(mode: &str) -> UpdateOptions {
    UpdateOptions {
        enable_fast_fifo_fair_share_by_fit_factor_computation: true,
        ..options(mode == "improved", true)
    }
}

fn bench(bencher: Bencher, pools: usize, operations: usize, mode: &str) {
    let params = TreeParams::benchmark(pools, operations, mode_options(mode));
    let (tree, input) = random_tree(SEED, &params);
    let mut workspace = Workspace::new();
    workspace.update(&mut tree.clone(), &input, &NoClock);
    bencher.with_inputs(|| tree.clone()).bench_local_refs(|t| {
        workspace.forget_functions();
        workspace.update(t, &input, &NoClock)
    });
}

/// `update_into` writing into one output reused by every iteration (warmed up once): what a
/// caller that keeps the previous update's output pays, without the ~1 KB per element of fresh
/// output memory that `update` allocates (and faults in) every time.
fn bench_into(bencher: Bencher, pools: usize, operations: usize, mode: &str) {
    let params = TreeParams::benchmark(pools, operations, mode_options(mode));
    let (tree, input) = random_tree(SEED, &params);
    let mut workspace = Workspace::new();
    let mut out = UpdateOutput::default();
    workspace.update_into(&mut tree.clone(), &input, &NoClock, &mut out);
    bencher.with_inputs(|| tree.clone()).bench_local_refs(|t| {
        workspace.forget_functions();
        workspace.update_into(t, &input, &NoClock, &mut out);
    });
}

/// `tree` with the usage of `fraction` of its operations (drawn with a fixed seed) changed:
/// halved, or a tenth of the demand where it was zero.
fn with_usage_changed(tree: &Tree, fraction: f64) -> Tree {
    let mut changed = tree.clone();
    let mut rng = Rng::new(SEED + 1);
    let mut count = 0;
    for i in 0..changed.len() {
        if let Some(op) = changed.element_mut(i).operation_mut()
            && rng.chance(fraction)
        {
            op.usage = if op.usage == fairsched_resources::Resources::ZERO {
                op.demand.scale(0.1)
            } else {
                op.usage.scale(0.5)
            };
            count += 1;
        }
    }
    eprintln!("steady state: {count} operations' usage changed between updates");
    changed
}

/// The incremental update in a steady state: `update_into` alternating between the tree and a
/// copy with 1 % of the operations' usage changed, one workspace and output throughout (warmed
/// up by two updates).
fn bench_steady(bencher: Bencher, pools: usize, operations: usize, mode: &str) {
    let params = TreeParams::benchmark(pools, operations, mode_options(mode));
    let (tree, input) = random_tree(SEED, &params);
    let changed = with_usage_changed(&tree, 0.01);
    let mut workspace = Workspace::new();
    let mut out = UpdateOutput::default();
    workspace.update_into(&mut tree.clone(), &input, &NoClock, &mut out);
    workspace.update_into(&mut changed.clone(), &input, &NoClock, &mut out);
    let mut flip = false;
    let mut reused = Vec::new();
    bencher
        .with_inputs(|| {
            flip = !flip;
            if flip { tree.clone() } else { changed.clone() }
        })
        .bench_local_refs(|t| {
            workspace.update_into(t, &input, &NoClock, &mut out);
            reused.push(out.timings.reused_elements);
        });
    eprintln!(
        "steady state, {mode}: {} elements, reused per update {:?}",
        tree.len(),
        reused
    );
}

#[divan::bench(args = MODES, sample_count = 20, sample_size = 1)]
fn update_1k_pools_10k_ops(bencher: Bencher, mode: &str) {
    bench(bencher, 1_000, 10_000, mode);
}

/// Under a second per iteration: few samples.
#[divan::bench(args = MODES, sample_count = 5, sample_size = 1)]
fn update_10k_pools_100k_ops(bencher: Bencher, mode: &str) {
    bench(bencher, 10_000, 100_000, mode);
}

#[divan::bench(args = MODES, sample_count = 5, sample_size = 1)]
fn update_into_10k_pools_100k_ops(bencher: Bencher, mode: &str) {
    bench_into(bencher, 10_000, 100_000, mode);
}

#[divan::bench(args = MODES, sample_count = 20, sample_size = 1)]
fn steady_1k_pools_10k_ops(bencher: Bencher, mode: &str) {
    bench_steady(bencher, 1_000, 10_000, mode);
}

#[divan::bench(args = MODES, sample_count = 10, sample_size = 1)]
fn steady_10k_pools_100k_ops(bencher: Bencher, mode: &str) {
    bench_steady(bencher, 10_000, 100_000, mode);
}
