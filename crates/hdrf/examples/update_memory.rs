//! Heap memory of the fair-share update, counted by the `dhat` heap profiler (every block the
//! program allocates, in requested bytes; the allocator's own per-block overhead is not in
//! these figures, the block counts are printed so it can be estimated).
//!
//! For each benchmark tree of `crates/hdrf/benches/fair_share_update.rs`
//! (`fairsched-hdrf-testkit`, seed 1, fast FIFO on): 1k pools / 10k operations and 10k pools /
//! 100k operations, it prints
//!
//! * the input: the tree and its `UpdateInput`;
//! * the first update with a fresh `Workspace` (`Workspace::update`): the peak heap above the
//!   input while it runs, and what stays allocated afterwards, split into the returned
//!   `UpdateOutput` (measured by dropping it) and the working memory the `Workspace` keeps for
//!   the next update;
//! * a second update with the same `Workspace` (the previous output dropped first) and a
//!   `Workspace::update_into` reusing that output: bytes allocated while each runs, whether the
//!   peak rose, and what stays allocated.
//!
//! Each tree is measured on its own thread under its own profiler; everything measured is
//! allocated after the profiler starts, so every block is counted.
//!
//! Usage: `cargo run --release -p fairsched-hdrf --example update_memory [-- classic|improved|both
//! [LATER_UPDATES]]` (default: classic, 8 later updates; the working memory stops growing by the
//! 9th update of the large tree). Prints a Markdown table (and each tree's raw figures on
//! stderr). With `DHAT_DIR=DIR` it also saves each tree's dhat profile in DIR. The profiler
//! records a backtrace per block, so this runs a few times slower than a plain update.

// A driver or test of the crate, not the crate: it may read clocks, spawn threads and hash
// (clippy.toml forbids them in the crate itself).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use fairsched_hdrf::{ElementAttributes, NoClock, UpdateOptions, Workspace};
use fairsched_hdrf_testkit::{TreeParams, options, random_tree};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const SEED: u64 = 1;
const SIZES: [(usize, usize); 2] = [(1_000, 10_000), (10_000, 100_000)];

fn stats() -> dhat::HeapStats {
    dhat::HeapStats::get()
}

/// Updates after the first one, unless the second argument says otherwise.
const MORE_UPDATES: usize = 8;

/// One update's figures.
#[derive(Debug)]
struct UpdateFigures {
    /// Bytes allocated while it ran (freed or not).
    allocated: u64,
    /// Peak above the heap just before it (`None`: it did not raise the peak of the run so
    /// far, which an earlier step set).
    peak: Option<usize>,
    /// Heap kept by the library after it, above the input (its output dropped).
    kept: usize,
    kept_blocks: usize,
}

/// One tree's figures (bytes and blocks).
#[derive(Debug)]
struct Row {
    mode: &'static str,
    pools: usize,
    operations: usize,
    elements: usize,
    input_bytes: usize,
    output_bytes: usize,
    output_blocks: usize,
    /// An update with a fresh `Workspace`, then `MORE_UPDATES` more with the same one (each
    /// output dropped before the next update).
    updates: Vec<UpdateFigures>,
    /// `update_into` reusing the output of one more `update`.
    into: UpdateFigures,
}

fn measure(mode: &'static str, pools: usize, operations: usize, more: usize) -> Row {
    // `DHAT_DIR`: also save each tree's profile (allocation sites at the peak and at the end)
    // there, for dhat's viewer (`dh_view.html`).
    let _profiler = match std::env::var_os("DHAT_DIR") {
        Some(dir) => dhat::Profiler::builder()
            .file_name(
                std::path::Path::new(&dir)
                    .join(format!("dhat-hdrf-{mode}-{pools}-{operations}.json")),
            )
            .build(),
        None => dhat::Profiler::builder().testing().build(),
    };
    let opts = UpdateOptions {
        enable_fast_fifo_fair_share_by_fit_factor_computation: true,
        ..options(mode == "improved", true)
    };
    let base = stats();
    let (mut tree, input) = random_tree(SEED, &TreeParams::benchmark(pools, operations, opts));
    let s0 = stats();
    let elements = tree.len();
    let input_bytes = s0.curr_bytes - base.curr_bytes;

    let mut workspace = Workspace::new();
    let mut updates = Vec::new();
    let (mut output_bytes, mut output_blocks) = (0, 0);
    for i in 0..=more {
        let before = stats();
        let out = workspace.update(&mut tree, &input, &NoClock);
        let after = stats();
        assert_eq!(out.attributes.len(), elements);
        drop(out);
        let dropped = stats();
        if i == 0 {
            output_bytes = after.curr_bytes - dropped.curr_bytes;
            output_blocks = after.curr_blocks - dropped.curr_blocks;
        }
        updates.push(UpdateFigures {
            allocated: after.total_bytes - before.total_bytes,
            peak: (after.max_bytes > before.max_bytes).then(|| after.max_bytes - before.curr_bytes),
            kept: dropped.curr_bytes - s0.curr_bytes,
            kept_blocks: dropped.curr_blocks - s0.curr_blocks,
        });
    }

    let mut out = workspace.update(&mut tree, &input, &NoClock);
    let before = stats();
    workspace.update_into(&mut tree, &input, &NoClock, &mut out);
    let after = stats();
    assert_eq!(out.attributes.len(), elements);
    let into = UpdateFigures {
        allocated: after.total_bytes - before.total_bytes,
        peak: (after.max_bytes > before.max_bytes).then(|| after.max_bytes - before.curr_bytes),
        kept: after.curr_bytes - s0.curr_bytes - output_bytes,
        kept_blocks: after.curr_blocks - s0.curr_blocks - output_blocks,
    };

    Row {
        mode,
        pools,
        operations,
        elements,
        input_bytes,
        output_bytes,
        output_blocks,
        updates,
        into,
    }
}

fn mb(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn per(bytes: usize, n: usize) -> String {
    format!("{:.0}", bytes as f64 / n as f64)
}

fn main() {
    let modes: &[&'static str] = match std::env::args().nth(1).as_deref() {
        None | Some("classic") => &["classic"],
        Some("improved") => &["improved"],
        Some("both") => &["classic", "improved"],
        Some(other) => panic!("unknown mode {other:?}: classic, improved or both"),
    };
    let more: usize = std::env::args().nth(2).map_or(MORE_UPDATES, |n| {
        n.parse().expect("number of later updates")
    });
    let mut rows = Vec::new();
    for &mode in modes {
        for (pools, operations) in SIZES {
            // A thread of its own per tree, under its own profiler.
            let row = std::thread::spawn(move || measure(mode, pools, operations, more))
                .join()
                .expect("measurement thread");
            eprintln!("{row:?}");
            rows.push(row);
        }
    }

    println!(
        "Heap of a fair-share update (dhat, requested bytes; B/el = bytes per element, \
         elements = pools + operations + root). size_of::<ElementAttributes>() = {} bytes.",
        std::mem::size_of::<ElementAttributes>()
    );
    println!(
        "Updates: the 1st with a fresh `Workspace`, {more} more with the same one (output \
         dropped before the next), then `update_into` reusing an output."
    );
    println!();
    println!(
        "| tree | mode | elements | input tree | 1st update: peak above input | output | working memory kept after the 1st / last `update` | later `update`s: peak above the heap before / allocated | `update_into`: peak above before / allocated |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let range = |values: Vec<usize>| {
        let (lo, hi) = (values.iter().min(), values.iter().max());
        match (lo, hi) {
            (Some(&lo), Some(&hi)) if mb(lo) != mb(hi) => format!("{}–{}", mb(lo), mb(hi)),
            (Some(&lo), _) => mb(lo),
            _ => "–".to_string(),
        }
    };
    for r in &rows {
        let n = r.elements;
        let (first, later) = r.updates.split_first().expect("updates");
        let last = later.last().unwrap_or(first);
        // A later update that set no new peak peaked at most at an earlier one's level.
        let later_peaks = later.iter().filter_map(|u| u.peak).collect::<Vec<_>>();
        let no_peak = later.len() - later_peaks.len();
        println!(
            "| {}k pools / {}k ops | {} | {} | {} ({} B/el) | {} ({} B/el) | {} ({} B/el, {} block) | {} ({} B/el) / {} ({} B/el, {} blocks) | {}{} / {} | {} / {} |",
            r.pools / 1000,
            r.operations / 1000,
            r.mode,
            n,
            mb(r.input_bytes),
            per(r.input_bytes, n),
            first.peak.map_or("no new peak".to_string(), mb),
            first.peak.map_or("–".to_string(), |p| per(p, n)),
            mb(r.output_bytes),
            per(r.output_bytes, n),
            r.output_blocks,
            mb(first.kept),
            per(first.kept, n),
            mb(last.kept),
            per(last.kept, n),
            last.kept_blocks,
            range(later_peaks),
            if no_peak > 0 {
                format!(" ({no_peak} set no new peak)")
            } else {
                String::new()
            },
            range(later.iter().map(|u| u.allocated as usize).collect()),
            r.into.peak.map_or("no new peak".to_string(), mb),
            mb(r.into.allocated as usize),
        );
    }
}
