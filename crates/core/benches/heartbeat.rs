//! Heartbeat scheduling throughput of the core.
//!
//! Clusters of identical nodes (16 cpu, 64 GiB, 16 slots) and operations with many small
//! pending jobs (1 cpu, 2 GiB, 1 slot; 20–40 jobs each, weights 1–3) spread over the leaves of a
//! three-level pool tree:
//!
//! * large: 10,000 nodes, 10,000 operations, 1,000 pools (10 × 9 × 10);
//! * small: 1,000 nodes, 1,000 operations, 100 pools (4 × 4 × 5).
//!
//! Each benchmark times one full round of heartbeats (every node once) right after a
//! fair-share update; building the cluster, the update and cloning the scheduler happen outside
//! the timed section (`with_inputs`). The item counter is the number of placements (allocations
//! started) in the round, so divan's `item/s` is placements per second on one core (the core is
//! single-threaded).
//!
//! * `fill`: an empty cluster; the round fills every node (16 placements per heartbeat).
//! * `churn`: a full cluster one second later; every node reports 4 completed jobs and gets 4
//!   new ones.
//!
//! Both sizes run ten samples. A round includes the first heartbeat's walk over the whole tree
//! (the fill round starts right after the build's fair-share update, the churn round right after
//! a new one), so the figures include that once-per-update cost.
//!
//! `CARGO_TARGET_DIR=... cargo bench -p fairsched-core --bench heartbeat [-- small|large]`;
//! `HEARTBEAT_PHASES=small|large` on the bench binary times the phases once with a plain
//! clock instead (handy under perf or valgrind).

// A driver or test of the crate, not the crate: it may read clocks, spawn threads and hash
// (clippy.toml forbids them in the crate itself).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/workload.rs"]
mod workload;

use divan::Bencher;
use divan::counter::ItemsCount;
use fairsched_core::{
    Millis, NodeHeartbeat, NodeId, NodeSpec, OperationSpec, Scheduler, SchedulerConfig,
};
use fairsched_resources::{ResourceKind, Resources};
use std::sync::OnceLock;

fn main() {
    // `HEARTBEAT_PHASES=small|large`: time the phases once with a plain clock (for profiling
    // with perf or callgrind) instead of running divan.
    match std::env::var("HEARTBEAT_PHASES").as_deref() {
        Ok("small") => phases(SMALL),
        Ok("large") => phases(LARGE),
        _ => divan::main(),
    }
}

/// CPU time of this thread (Linux `/proc/thread-self/schedstat`), to report rounds on a
/// loaded machine; `None` elsewhere.
fn cpu_time() -> Option<std::time::Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

/// Runs `f`, printing its wall-clock and CPU time; returns its result and the CPU time (wall
/// time if the CPU time is unknown).
fn timed<T>(what: &str, f: impl FnOnce() -> T) -> (T, std::time::Duration) {
    let (wall, cpu) = (std::time::Instant::now(), cpu_time());
    let out = f();
    let wall = wall.elapsed();
    match cpu.and_then(|c| Some(cpu_time()? - c)) {
        Some(cpu) => {
            eprintln!("{what}: wall {wall:.2?}, cpu {cpu:.2?}");
            (out, cpu)
        }
        None => {
            eprintln!("{what}: wall {wall:.2?}");
            (out, wall)
        }
    }
}

/// Times building, the fair-share update and one fill and one churn round.
fn phases(size: Size) {
    eprintln!("{size:?}");
    let (mut s, _) = timed("build + first fair-share update", || build(size));
    let report = |what: &str, placed: u64, d: std::time::Duration, heartbeats: usize| {
        eprintln!(
            "{what}: {placed} placements, {:.0} placements/s, {:.1} us/heartbeat (cpu time)",
            placed as f64 / d.as_secs_f64(),
            d.as_secs_f64() * 1e6 / heartbeats as f64
        );
    };
    let reports = fill_reports(&s);
    let (placed, d) = timed("fill round", || round(&mut s, 0, &reports));
    report("fill round", placed, d, reports.len());
    s.take_events();
    timed("fair-share update with usage", || s.tick(1000));
    let reports = churn_reports(&s);
    let (placed, d) = timed("churn round", || round(&mut s, 1000, &reports));
    report("churn round", placed, d, reports.len());
}

const GB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Clone, Copy, Debug)]
struct Size {
    nodes: usize,
    operations: usize,
    /// Children per pool at depth 1, 2, 3.
    fanout: [usize; 3],
}

const LARGE: Size = Size {
    nodes: 10_000,
    operations: 10_000,
    fanout: [10, 9, 10],
};

const SMALL: Size = Size {
    nodes: 1_000,
    operations: 1_000,
    fanout: [4, 4, 5],
};

/// The pool tree as JSON (no operation or running limits get in the way), and its leaves.
fn tree(size: Size) -> (String, Vec<String>) {
    workload::pool_tree(size.fanout)
}

/// A cluster right after its first fair-share update, nothing running yet.
fn build(size: Size) -> Scheduler {
    let (json, leaves) = tree(size);
    let trees = fairsched_config::load_pool_trees_str(&json, fairsched_config::Format::Json)
        .expect("tree loads");
    let trees = fairsched_config::validate_pool_trees(&trees).expect("tree is valid");
    let mut s = Scheduler::new(SchedulerConfig::default(), trees).expect("scheduler");
    let node = Resources::ZERO
        .with(ResourceKind::Cpu, 16.0)
        .with(ResourceKind::Memory, 64.0 * GB)
        .with(ResourceKind::UserSlots, 16.0);
    for i in 0..size.nodes {
        s.add_node(
            0,
            NodeSpec {
                id: NodeId(format!("node-{i:05}")),
                resources: node,
                tags: Default::default(),
            },
        )
        .expect("node");
    }
    let job = Resources::ZERO
        .with(ResourceKind::Cpu, 1.0)
        .with(ResourceKind::Memory, 2.0 * GB)
        .with(ResourceKind::UserSlots, 1.0);
    for i in 0..size.operations {
        // Through serde, so that fields added later take their defaults.
        let spec: OperationSpec = serde_json::from_value(serde_json::json!({
            "id": format!("op-{i:05}"),
            "user": format!("user{}", i % 50),
            "pool": leaves[i % leaves.len()],
            "weight": 1.0 + (i % 3) as f64,
            "tasks": [{"job_count": 20 + (i * 7 % 21), "resources": job}],
        }))
        .expect("operation spec");
        s.start_operation(0, spec).expect("operation");
    }
    s.tick(0);
    s.take_events();
    s
}

fn node_ids(s: &Scheduler) -> Vec<NodeId> {
    s.nodes().map(|n| n.id.clone()).collect()
}

/// One heartbeat of every node, in node order; returns the placements.
fn round(s: &mut Scheduler, now: Millis, reports: &[(NodeId, NodeHeartbeat)]) -> u64 {
    let before = s.stats.placements;
    for (node, report) in reports {
        s.process_heartbeat(now, node, report.clone())
            .expect("heartbeat");
    }
    s.stats.placements - before
}

/// Every node heartbeats with nothing to report.
fn fill_reports(s: &Scheduler) -> Vec<(NodeId, NodeHeartbeat)> {
    node_ids(s)
        .into_iter()
        .map(|n| (n, NodeHeartbeat::default()))
        .collect()
}

/// Every node reports 4 completed jobs.
fn churn_reports(s: &Scheduler) -> Vec<(NodeId, NodeHeartbeat)> {
    node_ids(s)
        .into_iter()
        .map(|n| {
            let report = workload::four_completed(s, &n);
            (n, report)
        })
        .collect()
}

/// Inputs of the two benchmarks for one size: the scheduler before the timed round, the
/// round's reports and its placements.
struct Setup {
    empty: Scheduler,
    fill_reports: Vec<(NodeId, NodeHeartbeat)>,
    fill_placements: u64,
    full: Scheduler,
    churn_reports: Vec<(NodeId, NodeHeartbeat)>,
    churn_placements: u64,
}

/// Builds the inputs; the fill round run here gives the churn round its full cluster. The
/// churn round's placements are its reports (every job is the same size and plenty are
/// pending); `bench_churn` checks that.
fn setup(size: Size) -> Setup {
    let empty = build(size);
    let fill_reports = fill_reports(&empty);
    let mut full = empty.clone();
    let fill_placements = round(&mut full, 0, &fill_reports);
    full.take_events();
    // One second later: a fair-share update, then every node reports 4 completed jobs.
    full.tick(1000);
    let churn_reports = churn_reports(&full);
    let churn_placements = churn_reports
        .iter()
        .map(|(_, r)| r.finished.len() as u64)
        .sum();
    eprintln!(
        "{size:?}: fill round {fill_placements} placements, churn round {churn_placements} placements"
    );
    Setup {
        empty,
        fill_reports,
        fill_placements,
        full,
        churn_reports,
        churn_placements,
    }
}

fn large() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| setup(LARGE))
}

fn small() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| setup(SMALL))
}

fn bench_fill(bencher: Bencher, setup: &'static Setup) {
    bencher
        .counter(ItemsCount::new(setup.fill_placements))
        .with_inputs(|| setup.empty.clone())
        .bench_local_values(|mut s| {
            round(&mut s, 0, &setup.fill_reports);
            s
        });
}

fn bench_churn(bencher: Bencher, setup: &'static Setup) {
    bencher
        .counter(ItemsCount::new(setup.churn_placements))
        .with_inputs(|| setup.full.clone())
        .bench_local_values(|mut s| {
            let placed = round(&mut s, 1000, &setup.churn_reports);
            assert_eq!(placed, setup.churn_placements);
            s
        });
}

/// 1,000 nodes, 1,000 operations, 100 pools: an empty cluster filled in one round.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn small_fill(bencher: Bencher) {
    bench_fill(bencher, small());
}

/// 1,000 nodes, 1,000 operations, 100 pools: 4 jobs end and start per node.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn small_churn(bencher: Bencher) {
    bench_churn(bencher, small());
}

/// 10,000 nodes, 10,000 operations, 1,000 pools: an empty cluster filled in one round.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn large_fill(bencher: Bencher) {
    bench_fill(bencher, large());
}

/// 10,000 nodes, 10,000 operations, 1,000 pools: 4 jobs end and start per node.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn large_churn(bencher: Bencher) {
    bench_churn(bencher, large());
}

/// A round on the full cluster where nothing ends: heartbeats that can place nothing (the
/// issue 20 case "full node, nothing pending that fits"). Counts heartbeats, not placements.
fn bench_idle(bencher: Bencher, setup: &'static Setup) {
    let idle = fill_reports(&setup.full);
    bencher
        .counter(ItemsCount::new(idle.len() as u64))
        .with_inputs(|| setup.full.clone())
        .bench_local_values(|mut s| {
            let placed = round(&mut s, 1000, &idle);
            assert_eq!(placed, 0, "the cluster is full");
            s
        });
}

/// 1,000 nodes, 1,000 operations, 100 pools: every node full, nothing ends.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn small_idle(bencher: Bencher) {
    bench_idle(bencher, small());
}

/// 10,000 nodes, 10,000 operations, 1,000 pools: every node full, nothing ends.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn large_idle(bencher: Bencher) {
    bench_idle(bencher, large());
}
