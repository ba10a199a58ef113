//! Times full fair-share updates of a large synthetic tree: root → 100 pools → 100 pools each (a
//! quarter of them FIFO) → 10 operations each; 110,101 elements.
//!
//! Usage: `probe [classic|improved] [runs]` (default classic, 5 runs). Prints, per run, the wall
//! and CPU time of `update` (a fresh output every time) and then of `update_into` (reusing the
//! previous output), the phase timings of one more update, and function sizes per depth.
//! `runs` = 0 only runs one update (for instruction counting under callgrind). The workspace
//! forgets the previous update's functions before each update (`forget_functions`), so that
//! every update is a full one, not an incremental one reusing them.

// A driver or test of the crate, not the crate: it may read clocks, spawn threads and hash
// (clippy.toml forbids them in the crate itself).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use fairsched_hdrf::*;
use fairsched_resources::*;
use std::time::Instant;

struct WallClock(Instant);

impl PhaseClock for WallClock {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// CPU time of this thread (ns), from /proc/thread-self/schedstat (0 where unavailable).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn build_tree() -> Tree {
    let mut t = Tree::new();
    let mut x: u64 = 12345;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ops = 0;
    for a in 0..100 {
        let pa = t
            .add_pool(
                ROOT,
                format!("a{a}"),
                1.0 + (rnd() % 5) as f64,
                PoolSpec::default(),
            )
            .unwrap();
        for b in 0..100 {
            let fifo = rnd() % 4 == 0;
            let pb = t
                .add_pool(
                    pa,
                    format!("b{a}_{b}"),
                    1.0 + (rnd() % 5) as f64,
                    PoolSpec {
                        mode: if fifo {
                            PoolMode::Fifo
                        } else {
                            PoolMode::FairShare
                        },
                        fifo_sort_parameters: vec![FifoSortParameter::Weight],
                        ..PoolSpec::default()
                    },
                )
                .unwrap();
            for _ in 0..10 {
                let d = Resources::from_values([
                    (1 + rnd() % 50) as f64,
                    (1 + rnd() % 100) as f64,
                    0.0,
                    ((1 + rnd() % 100) << 30) as f64,
                    0.0,
                ]);
                let u = if rnd() % 2 == 0 {
                    d.scale(0.5)
                } else {
                    Resources::ZERO
                };
                t.add_operation(
                    pb,
                    format!("op{ops}"),
                    1.0 + (rnd() % 3) as f64,
                    OperationSpec {
                        demand: d,
                        usage: u,
                        ..OperationSpec::default()
                    },
                )
                .unwrap();
                ops += 1;
            }
        }
    }
    t
}

fn report(label: &str, t: &Tree, start: Instant, cpu: u64, out: &UpdateOutput) {
    println!(
        "{label}: {} elements: {:?} (cpu {:.1} ms) warnings={}",
        t.len(),
        start.elapsed(),
        (cpu_ns() - cpu) as f64 / 1e6,
        out.warnings.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let improved = args.get(1).is_some_and(|a| a == "improved");
    let runs: usize = args.get(2).map_or(5, |r| r.parse().expect("runs"));
    let mut t = build_tree();
    let total = Resources::from_values([100000.0, 100000.0, 0.0, (100000u64 << 32) as f64, 0.0]);
    let input = UpdateInput {
        total_resources: total,
        now_seconds: 0.0,
        previous_update_seconds: None,
        options: UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: improved,
            ..UpdateOptions::default()
        },
    };
    if runs == 0 {
        let out = update(&mut t, &input, &NoClock);
        println!("root fair share {:?}", out.attributes[0].fair_share.total);
        return;
    }
    let mut workspace = Workspace::new();
    for _ in 0..runs {
        workspace.forget_functions();
        let (start, cpu) = (Instant::now(), cpu_ns());
        let out = workspace.update(&mut t, &input, &NoClock);
        report("update", &t, start, cpu, &out);
    }
    let mut out = UpdateOutput::default();
    for _ in 0..runs {
        workspace.forget_functions();
        let (start, cpu) = (Instant::now(), cpu_ns());
        workspace.update_into(&mut t, &input, &NoClock, &mut out);
        report("update_into", &t, start, cpu, &out);
    }
    workspace.forget_functions();
    let out = workspace.update(&mut t, &input, &WallClock(Instant::now()));
    println!("{:#?}", out.timings);
    let mut depth = vec![0usize; t.len()];
    let mut agg = [[0usize; 4]; 4];
    for i in 1..t.len() {
        depth[i] = depth[t.element(i).parent.unwrap()] + 1;
    }
    for i in 0..t.len() {
        let fs = out.attributes[i].function_sizes;
        let a = &mut agg[depth[i]];
        a[0] += 1;
        a[1] += fs.fair_share_by_fit_factor;
        a[2] += fs.max_fit_factor_by_suggestion;
        a[3] += fs.fair_share_by_suggestion;
    }
    for (d, a) in agg.iter().enumerate() {
        println!(
            "depth {d}: {} elements, F {} M {} S {}",
            a[0], a[1], a[2], a[3]
        );
    }
    println!("root fair share {:?}", out.attributes[0].fair_share.total);
}
