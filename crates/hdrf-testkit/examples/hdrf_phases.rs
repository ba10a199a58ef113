//! Prints the time per phase of one fair-share update on seeded random trees.
//!
//! `cargo run --release -p fairsched-hdrf-testkit --example hdrf_phases [-- SEED]`
//!
//! Trees: 1k pools / 10k operations and 10k pools / 100k operations (depth 3–5, FIFO pools,
//! strong and integral guarantees, limits, gangs, usage), in classic and improved mode. Each
//! configuration runs a few times on a fresh clone of the tree; the median run is printed.

use fairsched_hdrf::{PhaseTimings, UpdateOptions, Workspace};
use fairsched_hdrf_testkit::{InstantClock, TreeParams, options, random_tree};

const RUNS: usize = 5;

fn main() {
    let seed: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    println!("seed {seed}; median of {RUNS} runs; times in milliseconds");
    println!(
        "{:<22} {:<9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10}",
        "tree",
        "mode",
        "prepare",
        "op F",
        "fifo F",
        "pool F",
        "M",
        "ptw min",
        "compose",
        "compress",
        "top-down",
        "total",
        "max |S|",
    );
    for (label, pools, operations) in [
        ("1k pools / 10k ops", 1_000, 10_000),
        ("10k pools / 100k ops", 10_000, 100_000),
    ] {
        for (mode, improved) in [("classic", false), ("improved", true)] {
            let params = TreeParams::benchmark(pools, operations, mode_options(improved));
            let (tree, input) = random_tree(seed, &params);
            let clock = InstantClock::new();
            let mut workspace = Workspace::new();
            let mut runs: Vec<(PhaseTimings, usize)> = (0..RUNS)
                .map(|_| {
                    let mut t = tree.clone();
                    // A full update each time, not an incremental one reusing the last's
                    // functions.
                    workspace.forget_functions();
                    let out = workspace.update(&mut t, &input, &clock);
                    assert!(out.errors.is_empty(), "{:?}", out.errors);
                    let max_s = out
                        .attributes
                        .iter()
                        .map(|a| a.function_sizes.fair_share_by_suggestion)
                        .max()
                        .unwrap_or(0);
                    (out.timings, max_s)
                })
                .collect();
            runs.sort_by_key(|(t, _)| t.total_ns);
            let (t, max_s) = runs[RUNS / 2];
            let ms = |ns: u64| ns as f64 / 1e6;
            println!(
                "{:<22} {:<9} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>10}",
                label,
                mode,
                ms(t.prepare_ns),
                ms(t.operation_functions_ns),
                ms(t.fifo_pool_functions_ns),
                ms(t.normal_pool_functions_ns),
                ms(t.max_fit_factor_ns),
                ms(t.pointwise_min_ns),
                ms(t.compose_ns),
                ms(t.compress_ns),
                ms(t.top_down_ns),
                ms(t.total_ns),
                max_s,
            );
        }
    }
}

fn mode_options(improved: bool) -> UpdateOptions {
    UpdateOptions {
        enable_fast_fifo_fair_share_by_fit_factor_computation: true,
        ..options(improved, true)
    }
}
