//! Times full updates of the divan benchmark's large tree (`fairsched-hdrf-testkit`, seed 1,
//! 10k pools / 100k operations, fast FIFO on) outside divan, with phase timings.
//!
//! Usage: `bench_probe [classic|improved] [runs] [pools] [operations]` (defaults: classic, 5,
//! 10000, 100000). Every run updates a fresh clone of the tree (as the benchmark does) and
//! prints wall and thread CPU time; then one more update prints its phase timings.
//! `runs` = 0 runs a single update and prints nothing else (for callgrind). With `REUSE_OUTPUT`
//! set, the runs use `update_into` on one output (no fresh allocation of the attributes); with
//! `SIZES_BY_DEPTH` set, the function sizes are also printed per depth of the tree.
//!
//! The runs are full updates (the workspace forgets the previous update's functions before
//! each). With `STEADY` set they are incremental updates in a steady state instead (as the
//! divan benchmark `steady_*`): they alternate between the tree and a copy with 1 % of the
//! operations' usage changed, and every run prints its phase timings and elements reused.

// A driver timing the library, not the library: it reads clocks (clippy.toml forbids them in
// the crate itself).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use fairsched_hdrf::{
    NoClock, PhaseClock, PhaseTimings, Tree, UpdateOptions, UpdateOutput, Workspace, update,
};
use fairsched_hdrf_testkit::rng::Rng;
use fairsched_hdrf_testkit::{InstantClock, TreeParams, options, random_tree};
use std::time::Instant;

/// CPU time of this thread (ns), from /proc/thread-self/schedstat (0 where unavailable).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `tree` with the usage of 1 % of its operations changed (as the divan benchmark does).
fn with_usage_changed(tree: &Tree) -> Tree {
    let mut changed = tree.clone();
    let mut rng = Rng::new(2);
    for i in 0..changed.len() {
        if let Some(op) = changed.element_mut(i).operation_mut()
            && rng.chance(0.01)
        {
            op.usage = if op.usage == fairsched_resources::Resources::ZERO {
                op.demand.scale(0.1)
            } else {
                op.usage.scale(0.5)
            };
        }
    }
    changed
}

fn print_phases(tm: &PhaseTimings) {
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "phases (ms): prepare {:.1} (matching {:.1}), op F {:.1}, fifo F {:.1}, pool F {:.1}, M {:.1} (min {:.1}), compose {:.1}, compress {:.1}, top-down {:.1}, total {:.1}; reused {}",
        ms(tm.prepare_ns),
        ms(tm.matching_ns),
        ms(tm.operation_functions_ns),
        ms(tm.fifo_pool_functions_ns),
        ms(tm.normal_pool_functions_ns),
        ms(tm.max_fit_factor_ns),
        ms(tm.pointwise_min_ns),
        ms(tm.compose_ns),
        ms(tm.compress_ns),
        ms(tm.top_down_ns),
        ms(tm.total_ns),
        tm.reused_elements,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let improved = args.get(1).is_some_and(|a| a == "improved");
    let runs: usize = args.get(2).map_or(5, |r| r.parse().expect("runs"));
    let pools: usize = args.get(3).map_or(10_000, |r| r.parse().expect("pools"));
    let operations: usize = args
        .get(4)
        .map_or(100_000, |r| r.parse().expect("operations"));
    let opts = UpdateOptions {
        enable_fast_fifo_fair_share_by_fit_factor_computation: true,
        ..options(improved, true)
    };
    let (tree, input) = random_tree(1, &TreeParams::benchmark(pools, operations, opts));
    if runs == 0 {
        let mut t = tree.clone();
        let out = update(&mut t, &input, &NoClock);
        println!("root fair share {:?}", out.attributes[0].fair_share.total);
        return;
    }
    let reuse = std::env::var_os("REUSE_OUTPUT").is_some();
    let steady = std::env::var_os("STEADY").is_some();
    let changed = with_usage_changed(&tree);
    let mut times = Vec::new();
    let mut out = UpdateOutput::default();
    let mut workspace = Workspace::new();
    let clock = InstantClock::new();
    if steady {
        workspace.update(&mut changed.clone(), &input, &NoClock);
    }
    for run in 0..runs {
        let mut t = if steady && run % 2 == 1 {
            changed.clone()
        } else {
            tree.clone()
        };
        let clock: &dyn PhaseClock = if steady { &clock } else { &NoClock };
        if !steady {
            workspace.forget_functions();
        }
        let (start, cpu) = (Instant::now(), cpu_ns());
        if reuse {
            workspace.update_into(&mut t, &input, clock, &mut out);
        } else {
            out = workspace.update(&mut t, &input, clock);
        }
        let (wall, cpu) = (start.elapsed(), cpu_ns() - cpu);
        println!(
            "update: {} elements: {:.1} ms wall, {:.1} ms cpu, warnings {}",
            t.len(),
            wall.as_secs_f64() * 1e3,
            cpu as f64 / 1e6,
            out.warnings.len()
        );
        times.push(cpu);
        if steady {
            print_phases(&out.timings);
        }
    }
    times.sort_unstable();
    println!("median cpu {:.1} ms", times[times.len() / 2] as f64 / 1e6);
    let mut t = tree.clone();
    workspace.forget_functions();
    let out = workspace.update(&mut t, &input, &InstantClock::new());
    print!("full update: ");
    print_phases(&out.timings);
    let mut sizes = [0usize; 3];
    for a in &out.attributes {
        sizes[0] += a.function_sizes.fair_share_by_fit_factor;
        sizes[1] += a.function_sizes.max_fit_factor_by_suggestion;
        sizes[2] += a.function_sizes.fair_share_by_suggestion;
    }
    if std::env::var_os("SIZES_BY_DEPTH").is_some() {
        // Elements and function segments per depth (root = 0).
        let mut depth = vec![0usize; t.len()];
        let mut by_depth: Vec<[usize; 4]> = Vec::new();
        for (i, a) in out.attributes.iter().enumerate() {
            if let Some(p) = t.element(i).parent {
                depth[i] = depth[p] + 1;
            }
            if by_depth.len() <= depth[i] {
                by_depth.resize(depth[i] + 1, [0; 4]);
            }
            let fs = &a.function_sizes;
            let row = &mut by_depth[depth[i]];
            row[0] += 1;
            row[1] += fs.fair_share_by_fit_factor;
            row[2] += fs.max_fit_factor_by_suggestion;
            row[3] += fs.fair_share_by_suggestion;
        }
        for (d, r) in by_depth.iter().enumerate() {
            println!(
                "depth {d}: {} elements, segments F {} M {} S {}",
                r[0], r[1], r[2], r[3]
            );
        }
    }
    println!(
        "segments: F {} M {} S {}; root fair share {:?}",
        sizes[0], sizes[1], sizes[2], out.attributes[0].fair_share.total
    );
}
