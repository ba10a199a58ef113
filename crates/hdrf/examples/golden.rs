//! Fingerprints of full updates of large trees, to check that an optimisation changes no result.
//!
//! `golden [quick]`: for the benchmark trees of `fairsched-hdrf-testkit` (seed 1; 1k pools / 10k
//! operations and, unless `quick`, 10k pools / 100k operations; classic and improved mode, fast
//! FIFO on, as in `benches/fair_share_update.rs`) and a few smaller seeds with other option sets,
//! runs two updates in a row (the second consumes and refills integral volumes) and prints one
//! hash per configuration of everything the update returns (every attribute bit for bit, function
//! sizes, errors, warnings) and of the tree's persistent state afterwards. Compare the output of
//! two builds with `diff`.

use fairsched_hdrf::{NoClock, Tree, UpdateInput, UpdateOptions, UpdateOutput, update};
use fairsched_hdrf_testkit::{TreeParams, options, random_tree};
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hasher};

/// Feeds formatted text into a hasher (no intermediate string).
struct HashWriter(DefaultHasher);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

fn fingerprint(out: &UpdateOutput, tree: &Tree) -> u64 {
    let mut h = HashWriter(DefaultHasher::new());
    for a in &out.attributes {
        // `{:?}` prints every double exactly (shortest round-trip form).
        write!(h, "{a:?}").unwrap();
    }
    write!(h, "{:?}{:?}", out.errors, out.warnings).unwrap();
    for e in tree.elements() {
        write!(h, "{:?}", e.integral_state).unwrap();
    }
    h.0.finish()
}

fn run(label: &str, tree: &Tree, input: &UpdateInput) {
    let mut t = tree.clone();
    let mut second = input.clone();
    second.previous_update_seconds = Some(input.now_seconds);
    second.now_seconds = input.now_seconds + 30.0;
    let a = update(&mut t, input, &NoClock);
    let b = update(&mut t, &second, &NoClock);
    println!(
        "{label:<40} {:016x} {:016x} warnings {} {}",
        fingerprint(&a, &t),
        fingerprint(&b, &t),
        a.warnings.len(),
        b.warnings.len()
    );
}

fn bench_options(improved: bool) -> UpdateOptions {
    UpdateOptions {
        enable_fast_fifo_fair_share_by_fit_factor_computation: true,
        ..options(improved, true)
    }
}

fn main() {
    let quick = std::env::args().nth(1).is_some_and(|a| a == "quick");
    let mut sizes = vec![(1_000, 10_000)];
    if !quick {
        sizes.push((10_000, 100_000));
    }
    for (pools, operations) in sizes {
        for improved in [false, true] {
            let params = TreeParams::benchmark(pools, operations, bench_options(improved));
            let (tree, input) = random_tree(1, &params);
            let mode = if improved { "improved" } else { "classic" };
            run(&format!("bench {pools}/{operations} {mode}"), &tree, &input);
        }
    }
    // Smaller trees under other option sets (several seeds each).
    for seed in 2..8u64 {
        for bits in 0..16u32 {
            let opts = UpdateOptions {
                enable_improved_fair_share_by_fit_factor_computation: bits & 1 != 0,
                enable_step_function_for_gang_operations: bits & 2 != 0,
                enable_fast_fifo_fair_share_by_fit_factor_computation: bits & 4 != 0,
                enable_improved_fair_share_by_fit_factor_computation_distribution_gap: bits & 8
                    != 0,
                enable_fifo_children_reordering_for_guarantee_utilization: true,
                ..UpdateOptions::default()
            };
            let params = TreeParams {
                pools: 200,
                operations: 2_000,
                network: seed % 2 == 0,
                gang_fraction: 0.2,
                ..TreeParams::benchmark(200, 2_000, opts)
            };
            let (tree, input) = random_tree(seed, &params);
            run(&format!("seed {seed} options {bits:04b}"), &tree, &input);
        }
    }
}
