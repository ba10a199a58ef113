//! Heap memory of the scheduling core per node, per operation and per running allocation,
//! counted by the `dhat` heap profiler (every block the program allocates, in requested bytes;
//! the allocator's own per-block overhead is not in these figures, the block counts are printed
//! so it can be estimated).
//!
//! Each case builds a `Scheduler` step by step under its own profiler, on its own thread (each
//! pool tree keeps the fair-share update's working memory, a `Workspace`, between updates: it
//! counts with the scheduler's heap), and reads the heap after every step:
//!
//! 1. `Scheduler::new` with a pool tree of 124 pools (4 × 5 × 5, 100 leaves);
//! 2. `add_node` for every node (16 cpu, 64 GiB, 16 user slots; ids `node-00000`);
//! 3. `start_operation` for every operation: one task of N jobs of (1 cpu, 2 GiB, 1 slot), a
//!    user of 50, a leaf pool round robin (ids `op-00000`);
//! 4. the first fair-share update (`update_fair_share`), with the peak heap while it ran;
//! 5. one heartbeat of every node at t = 0 (an empty cluster: jobs are placed until the nodes
//!    are full or nothing is pending);
//! 6. a second fair-share update (t = 1 s), with usage;
//! 7. one more heartbeat of every node, each reporting up to 4 of its jobs completed (they are
//!    replaced while jobs are pending).
//!
//! The event log is taken (and dropped) after every step, as a driver does. Everything measured
//! is allocated after the profiler starts, so every block is counted.
//!
//! Usage: `cargo run --release -p fairsched-core --example memory` (about a minute: the profiler
//! records a backtrace per block). Prints Markdown tables: the heap after each step, then the
//! costs per node, per operation and per running allocation (raw figures on stderr).

#[path = "../benches/support/workload.rs"]
mod workload;

use fairsched_core::{NodeHeartbeat, NodeId, NodeSpec, OperationSpec, Scheduler, SchedulerConfig};
use fairsched_resources::{ResourceKind, Resources};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Children per pool at depth 1, 2, 3.
const FANOUT: [usize; 3] = [4, 5, 5];

/// (nodes, operations, jobs per operation).
const CASES: [(usize, usize, u32); 6] = [
    (1_000, 1_000, 32),
    (10_000, 1_000, 32),
    (1_000, 10_000, 32),
    (10_000, 10_000, 32),
    (1_000, 1_000, 1),
    (1_000, 1_000, 10_000),
];

const STEPS: [&str; 7] = [
    "empty",
    "+ nodes",
    "+ operations",
    "1st update",
    "heartbeats (fill)",
    "2nd update",
    "heartbeats (4 done per node)",
];

/// Heap in use after one step.
#[derive(Clone, Copy, Debug)]
struct Heap {
    bytes: usize,
    blocks: usize,
}

#[derive(Debug)]
struct Case {
    nodes: usize,
    operations: usize,
    jobs: u32,
    /// Heap after each of `STEPS`.
    heap: Vec<Heap>,
    /// Peak above the heap before the first update, while it ran (`None`: it set no new peak).
    update_peak: Option<usize>,
    /// The same for the second update.
    second_update_peak: Option<usize>,
    /// Running allocations after each heartbeat round.
    allocations_fill: usize,
    allocations_churn: usize,
    /// Peak of the whole case.
    peak: usize,
}

/// The pool tree as JSON (no operation or running limits get in the way), and its leaves.
fn tree() -> (String, Vec<String>) {
    workload::pool_tree(FANOUT)
}

fn heap() -> Heap {
    let s = dhat::HeapStats::get();
    Heap {
        bytes: s.curr_bytes,
        blocks: s.curr_blocks,
    }
}

fn node_id(i: usize) -> NodeId {
    NodeId(format!("node-{i:05}"))
}

/// Runs `f` and returns the peak above the heap before it, if it set a new peak.
fn peak_of(f: impl FnOnce()) -> Option<usize> {
    let before = dhat::HeapStats::get();
    f();
    let after = dhat::HeapStats::get();
    (after.max_bytes > before.max_bytes).then(|| after.max_bytes - before.curr_bytes)
}

fn measure(nodes: usize, operations: usize, jobs: u32) -> Case {
    let _profiler = dhat::Profiler::builder().testing().build();
    let base = heap();
    let mut heaps = Vec::new();
    let mut step = |s: &mut Scheduler| {
        drop(s.take_events());
        let h = heap();
        heaps.push(Heap {
            bytes: h.bytes - base.bytes,
            blocks: h.blocks - base.blocks,
        });
    };

    let (json, leaves) = tree();
    let trees = fairsched_config::load_pool_trees_str(&json, fairsched_config::Format::Json)
        .expect("tree loads");
    let trees = fairsched_config::validate_pool_trees(&trees).expect("tree is valid");
    drop(json);
    let mut s = Scheduler::new(SchedulerConfig::default(), trees).expect("scheduler");
    step(&mut s);

    let node = Resources::ZERO
        .with(ResourceKind::Cpu, 16.0)
        .with(ResourceKind::Memory, 64.0 * GIB)
        .with(ResourceKind::UserSlots, 16.0);
    for i in 0..nodes {
        let spec = NodeSpec {
            id: node_id(i),
            resources: node,
            tags: Default::default(),
        };
        s.add_node(0, spec).expect("node");
    }
    step(&mut s);

    let job = Resources::ZERO
        .with(ResourceKind::Cpu, 1.0)
        .with(ResourceKind::Memory, 2.0 * GIB)
        .with(ResourceKind::UserSlots, 1.0);
    for i in 0..operations {
        // Through serde, so that fields added later take their defaults.
        let spec: OperationSpec = serde_json::from_value(serde_json::json!({
            "id": format!("op-{i:05}"),
            "user": format!("user{}", i % 50),
            "pool": leaves[i % leaves.len()],
            "tasks": [{"job_count": jobs, "resources": job}],
        }))
        .expect("operation spec");
        s.start_operation(0, spec).expect("operation");
    }
    drop(leaves);
    step(&mut s);

    let update_peak = peak_of(|| s.update_fair_share(0));
    step(&mut s);

    for i in 0..nodes {
        drop(
            s.process_heartbeat(0, &node_id(i), NodeHeartbeat::default())
                .expect("heartbeat"),
        );
    }
    let allocations_fill = s.allocations().count();
    step(&mut s);

    let second_update_peak = peak_of(|| s.update_fair_share(1000));
    step(&mut s);

    for i in 0..nodes {
        let id = node_id(i);
        let report = workload::four_completed(&s, &id);
        drop(s.process_heartbeat(1000, &id, report).expect("heartbeat"));
    }
    let allocations_churn = s.allocations().count();
    step(&mut s);

    let peak = dhat::HeapStats::get().max_bytes - base.bytes;
    drop(s);
    Case {
        nodes,
        operations,
        jobs,
        heap: heaps,
        update_peak,
        second_update_peak,
        allocations_fill,
        allocations_churn,
        peak,
    }
}

fn mb(bytes: usize) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

fn k(n: usize) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// `(a - b) / n` in bytes.
fn slope(a: usize, b: usize, n: usize) -> String {
    format!("{:.0}", (a as f64 - b as f64) / n as f64)
}

// A driver, not the core: it may spawn threads (clippy.toml forbids them in the core).
#[allow(clippy::disallowed_methods)]
fn main() {
    let mut cases = Vec::new();
    for (nodes, operations, jobs) in CASES {
        let case = std::thread::spawn(move || measure(nodes, operations, jobs))
            .join()
            .expect("measurement thread");
        eprintln!("{case:?}");
        cases.push(case);
    }

    println!(
        "Heap of the scheduling core (dhat, requested bytes): after each step, and the peak of \
         the whole run. Pool tree of 124 pools; operations of one task of N jobs."
    );
    println!();
    print!("| nodes | operations | N |");
    for s in STEPS {
        print!(" {s} |");
    }
    println!(" peak of the run | 1st / 2nd update: peak above the heap before |");
    println!("|---|---|---|{}---|---|", "---|".repeat(STEPS.len()));
    let peak = |p: Option<usize>| p.map_or("no new peak".to_string(), mb);
    for c in &cases {
        print!("| {} | {} | {} |", k(c.nodes), k(c.operations), c.jobs);
        for (i, h) in c.heap.iter().enumerate() {
            let allocations = match i {
                4 => format!(", {} allocations", c.allocations_fill),
                6 => format!(", {} allocations", c.allocations_churn),
                _ => String::new(),
            };
            print!(" {} ({} blocks{allocations}) |", mb(h.bytes), h.blocks);
        }
        println!(
            " {} | {} / {} |",
            mb(c.peak),
            peak(c.update_peak),
            peak(c.second_update_peak)
        );
    }

    let find = |nodes: usize, operations: usize, jobs: u32| {
        cases
            .iter()
            .find(|c| (c.nodes, c.operations, c.jobs) == (nodes, operations, jobs))
            .expect("case")
    };
    let d = |c: &Case, to: usize, from: usize| c.heap[to].bytes as f64 - c.heap[from].bytes as f64;
    println!();
    println!(
        "Costs (bytes). Slope: the difference between two cases that differ only in that count, \
         divided by the difference of the counts; share: one case's step divided by its count."
    );
    println!();
    println!("| what | how | bytes |");
    println!("|---|---|---|");
    let (small, many_nodes, many_ops) = (
        find(1_000, 1_000, 32),
        find(10_000, 1_000, 32),
        find(1_000, 10_000, 32),
    );
    for c in [small, many_nodes] {
        println!(
            "| per node, registered | share, {} nodes | {:.0} |",
            k(c.nodes),
            d(c, 1, 0) / c.nodes as f64
        );
    }
    println!(
        "| per node, registered | slope 1k → 10k nodes (1k operations) | {} |",
        slope(many_nodes.heap[1].bytes, small.heap[1].bytes, 9_000)
    );
    println!(
        "| per node, whole heap after the 1st update | slope 1k → 10k nodes (1k operations) | {} |",
        slope(many_nodes.heap[3].bytes, small.heap[3].bytes, 9_000)
    );
    for c in [small, many_ops] {
        println!(
            "| per operation (N = 32), submitted | share, {} operations | {:.0} |",
            k(c.operations),
            d(c, 2, 1) / c.operations as f64
        );
    }
    println!(
        "| per operation (N = 32), submitted | slope 1k → 10k operations (1k nodes) | {} |",
        slope(many_ops.heap[2].bytes, small.heap[2].bytes, 9_000)
    );
    println!(
        "| per operation, what the 1st update adds (core arena, statuses, the fair-share library's kept working memory) | slope 1k → 10k operations (1k nodes) | {:.0} |",
        (d(many_ops, 3, 2) - d(small, 3, 2)) / 9_000.0
    );
    println!(
        "| per operation, whole heap after the 1st update | slope 1k → 10k operations (1k nodes) | {} |",
        slope(many_ops.heap[3].bytes, small.heap[3].bytes, 9_000)
    );
    if let (Some(a), Some(b)) = (many_ops.update_peak, small.update_peak) {
        println!(
            "| per operation, 1st update's peak above the heap before it | slope 1k → 10k operations (1k nodes) | {} |",
            slope(a, b, 9_000)
        );
    }
    if let (Some(a), Some(b)) = (many_ops.second_update_peak, small.second_update_peak) {
        println!(
            "| per operation, 2nd update's peak above the heap before it | slope 1k → 10k operations (1k nodes) | {} |",
            slope(a, b, 9_000)
        );
    }
    for jobs in [1, 32, 10_000] {
        let c = find(1_000, 1_000, jobs);
        println!(
            "| per operation, submitted, N = {jobs} | share, 1k operations | {:.0} |",
            d(c, 2, 1) / c.operations as f64
        );
    }
    for c in &cases {
        println!(
            "| per running allocation | fill round: heap added / allocations placed, {} nodes, {} operations, N = {} | {:.0} |",
            k(c.nodes),
            k(c.operations),
            c.jobs,
            d(c, 4, 3) / c.allocations_fill as f64
        );
    }
}
