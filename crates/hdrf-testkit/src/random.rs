//! Seeded random trees of any size (for benchmarks and seed-driven tests).

use crate::rng::Rng;
use crate::spec::{
    GuaranteeNode, IntegralNode, LimitsNode, NodeSpec, OperationNode, PoolNode, TreeSpec,
};
use fairsched_hdrf::{Tree, UpdateInput, UpdateOptions};
use fairsched_resources::{ResourceKind, Resources};
use std::ops::RangeInclusive;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// What [`random_tree`] generates. Fractions are probabilities per pool (or per operation).
#[derive(Clone, Debug, PartialEq)]
pub struct TreeParams {
    /// Number of pools (the root not included).
    pub pools: usize,
    /// Number of operations.
    pub operations: usize,
    /// Height of the tree (root at depth 0, the deepest operations at the chosen height) is
    /// drawn from this range; pools live at depths `1..height`. Values below 2 are raised to 2.
    pub depth: RangeInclusive<usize>,
    /// Share of childless-pool-candidates (pools without pool children) that are FIFO.
    pub fifo_fraction: f64,
    /// Share of pools with a strong guarantee (only where the parent has one, or at the top).
    pub strong_guarantee_fraction: f64,
    /// Share of pools with an integral guarantee (burst or relaxed, half each).
    pub integral_fraction: f64,
    /// Share of pools, and of operations, with resource limits.
    pub limits_fraction: f64,
    /// Share of gang operations.
    pub gang_fraction: f64,
    /// Share of operations with non-zero usage (`usage = demand × U(0, 1)`).
    pub usage_fraction: f64,
    /// Weights of pools and operations are uniform in this range.
    pub weight_range: (f64, f64),
    /// Cluster has gpu (and some operations demand it).
    pub gpu: bool,
    /// Cluster has network (and some operations demand it).
    pub network: bool,
    /// Total demand divided by the cluster size (per resource, with ±30% skew).
    pub load_factor: f64,
    /// Options of the returned [`UpdateInput`].
    pub options: UpdateOptions,
}

impl Default for TreeParams {
    fn default() -> Self {
        TreeParams {
            pools: 30,
            operations: 100,
            depth: 3..=5,
            fifo_fraction: 0.2,
            strong_guarantee_fraction: 0.3,
            integral_fraction: 0.1,
            limits_fraction: 0.1,
            gang_fraction: 0.05,
            usage_fraction: 0.5,
            weight_range: (0.5, 10.0),
            gpu: true,
            network: false,
            load_factor: 2.0,
            options: UpdateOptions::default(),
        }
    }
}

impl TreeParams {
    /// The benchmark shape: `pools` pools and `operations` operations, depth 3–5, mixed modes
    /// (FIFO pools, strong and integral guarantees, limits, gangs, usage).
    pub fn benchmark(pools: usize, operations: usize, options: UpdateOptions) -> TreeParams {
        TreeParams {
            pools,
            operations,
            options,
            ..TreeParams::default()
        }
    }
}

/// A seeded random tree: the same `seed` and `params` always give the same tree.
pub fn random_tree(seed: u64, params: &TreeParams) -> (Tree, UpdateInput) {
    random_spec(seed, params).build(&params.options)
}

/// The [`TreeSpec`] behind [`random_tree`] (for callers that want to edit it before building).
pub fn random_spec(seed: u64, params: &TreeParams) -> TreeSpec {
    let mut rng = Rng::new(seed);
    let lo = (*params.depth.start()).max(2);
    let hi = (*params.depth.end()).max(lo);
    let height = rng.int(lo as u64, hi as u64) as usize;
    let pool_levels = height - 1;

    // --- Pool skeleton: counts per level grow geometrically, parents drawn uniformly from the
    // previous level.
    let n = params.pools;
    let mut level_counts = vec![0usize; pool_levels];
    if n > 0 {
        // b + b^2 + ... + b^L ≈ n.
        let mut b = 1.0f64;
        while (1..=pool_levels).map(|l| b.powi(l as i32)).sum::<f64>() < n as f64 {
            b *= 1.05;
        }
        let mut assigned = 0;
        for (l, count) in level_counts.iter_mut().enumerate() {
            let c = (b.powi(l as i32 + 1).round() as usize).max(1);
            *count = c.min(n - assigned);
            assigned += *count;
        }
        // The deepest level absorbs rounding.
        if let Some(last) = level_counts.last_mut() {
            *last += n - assigned;
        }
    }
    // Every pool is (parent index or None for the root, level).
    let mut parents: Vec<Option<usize>> = Vec::with_capacity(n);
    let mut levels: Vec<usize> = Vec::with_capacity(n);
    let mut previous_level: Vec<usize> = Vec::new();
    for (l, &count) in level_counts.iter().enumerate() {
        let mut this_level = Vec::with_capacity(count);
        for _ in 0..count {
            let parent = if l == 0 || previous_level.is_empty() {
                None
            } else {
                Some(previous_level[rng.index(previous_level.len())])
            };
            this_level.push(parents.len());
            parents.push(parent);
            levels.push(l + 1);
        }
        if !this_level.is_empty() {
            previous_level = this_level;
        }
    }
    let mut pool_children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in parents.iter().enumerate() {
        if let Some(p) = p {
            pool_children[*p].push(i);
        }
    }
    let leaf_pools: Vec<usize> = (0..n).filter(|&i| pool_children[i].is_empty()).collect();

    // --- Pool attributes.
    let (wlo, whi) = params.weight_range;
    let mut pools: Vec<PoolNode> = (0..n)
        .map(|i| {
            let fifo = pool_children[i].is_empty() && rng.chance(params.fifo_fraction);
            PoolNode {
                weight: round_to(rng.uniform(wlo, whi), 0.01).max(wlo),
                fifo,
                fifo_by_weight: fifo && rng.chance(0.5),
                guarantee: rng
                    .chance(params.strong_guarantee_fraction)
                    .then(|| GuaranteeNode {
                        fraction: rng.uniform(0.05, 0.6),
                        main_only: rng.chance(0.5),
                    }),
                integral: rng.chance(params.integral_fraction).then(|| IntegralNode {
                    burst: rng.chance(0.5),
                    flow_ratio: rng.uniform(0.005, 0.05),
                    burst_multiplier: rng.uniform(1.0, 3.0),
                    initial_volume_seconds: rng.uniform(0.0, 600.0),
                }),
                limits: rng.chance(params.limits_fraction).then(|| LimitsNode {
                    cpu: Some(rng.uniform(0.05, 0.8)),
                    memory: rng.chance(0.5).then(|| rng.uniform(0.05, 0.8)),
                }),
                children: Vec::new(),
            }
        })
        .collect();

    // --- Operations: 80% into pools without pool children, the rest anywhere.
    let mut op_parent: Vec<Option<usize>> = Vec::with_capacity(params.operations);
    let mut ops: Vec<OperationNode> = Vec::with_capacity(params.operations);
    let mut total_demand = [0.0f64; 5];
    for k in 0..params.operations {
        let parent = if n == 0 {
            None
        } else if !leaf_pools.is_empty() && rng.chance(0.8) {
            Some(leaf_pools[rng.index(leaf_pools.len())])
        } else {
            Some(rng.index(n))
        };
        // An operation may only sit in a FIFO pool if it is a leaf pool: all pools chosen here
        // are fine, since FIFO pools never have pool children.
        let jobs = rng.log_uniform(1.0, 500.0).floor();
        let cpu_per_job = [0.5, 1.0, 1.0, 2.0, 4.0, 8.0][rng.index(6)];
        let memory_per_job = rng.int(1, 16) as f64 * GIB;
        let gpu = if params.gpu && rng.chance(0.1) {
            jobs * [1.0, 2.0, 4.0, 8.0][rng.index(4)]
        } else {
            0.0
        };
        let network = if params.network && rng.chance(0.3) {
            jobs * rng.int(1, 100) as f64
        } else {
            0.0
        };
        let demand = Resources::from_values([
            jobs,
            jobs * cpu_per_job,
            gpu,
            jobs * memory_per_job,
            network,
        ]);
        for (t, v) in total_demand.iter_mut().zip(demand.values()) {
            *t += v;
        }
        let usage_fraction = if rng.chance(params.usage_fraction) {
            rng.unit()
        } else {
            0.0
        };
        ops.push(OperationNode {
            weight: round_to(rng.uniform(wlo, whi), 0.01).max(wlo),
            demand,
            usage_fraction,
            gang: rng.chance(params.gang_fraction),
            cpu_limit: rng
                .chance(params.limits_fraction)
                .then(|| rng.uniform(0.01, 0.5)),
            start_time: k as f64,
        });
        op_parent.push(parent);
    }

    // --- Cluster: total demand / load factor, skewed per resource.
    let load = params.load_factor.max(1e-3);
    let mut cluster = Resources::ZERO;
    for kind in ResourceKind::ALL {
        let wanted = match kind {
            ResourceKind::Gpu => params.gpu,
            ResourceKind::Network => params.network,
            _ => true,
        };
        if !wanted {
            continue;
        }
        let skew = rng.uniform(0.7, 1.3);
        let floor = match kind {
            ResourceKind::Memory => 64.0 * GIB,
            _ => 8.0,
        };
        cluster.set(
            kind,
            (total_demand[kind.index()] / load * skew)
                .max(floor)
                .round(),
        );
    }

    // --- Assemble bottom-up: operations into pools, pools into parents (deepest first).
    let mut top: Vec<NodeSpec> = Vec::new();
    let mut op_children: Vec<Vec<NodeSpec>> = vec![Vec::new(); n];
    for (op, parent) in ops.into_iter().zip(op_parent) {
        match parent {
            Some(p) => op_children[p].push(NodeSpec::Operation(op)),
            None => top.push(NodeSpec::Operation(op)),
        }
    }
    // Attachment order inside a pool: its pool children first, then its operations.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(levels[i]));
    let mut built: Vec<Option<NodeSpec>> = vec![None; n];
    for &i in &order {
        let mut node = std::mem::replace(
            &mut pools[i],
            PoolNode {
                weight: 1.0,
                fifo: false,
                fifo_by_weight: false,
                guarantee: None,
                integral: None,
                limits: None,
                children: Vec::new(),
            },
        );
        let mut children: Vec<NodeSpec> = pool_children[i]
            .iter()
            .map(|&c| built[c].take().expect("children are built first"))
            .collect();
        children.append(&mut op_children[i]);
        node.children = children;
        built[i] = Some(NodeSpec::Pool(node));
    }
    for i in 0..n {
        if parents[i].is_none() {
            top.push(built[i].take().expect("top-level pool"));
        }
    }
    // Top-level pools before any top-level operations, in creation order.
    top.sort_by_key(|c| matches!(c, NodeSpec::Operation(_)));

    TreeSpec {
        cluster,
        children: top,
        seconds_since_previous_update: (params.integral_fraction > 0.0).then_some(60.0),
    }
}

fn round_to(x: f64, step: f64) -> f64 {
    (x / step).round() * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_tree_and_requested_sizes() {
        let params = TreeParams::default();
        let (a, ia) = random_tree(5, &params);
        let (b, ib) = random_tree(5, &params);
        assert_eq!(a, b);
        assert_eq!(ia, ib);
        let (c, _) = random_tree(6, &params);
        assert_ne!(a, c);
        let pools = a.elements().iter().filter(|e| e.pool().is_some()).count();
        let ops = a.elements().iter().filter(|e| e.is_operation()).count();
        assert_eq!(pools, params.pools);
        assert_eq!(ops, params.operations);
    }

    #[test]
    fn depth_within_range_and_fifo_pools_hold_only_operations() {
        for seed in 0..20 {
            let params = TreeParams {
                depth: 3..=5,
                ..TreeParams::default()
            };
            let (tree, _) = random_tree(seed, &params);
            let mut max_depth = 0;
            for i in tree.preorder() {
                let mut depth = 0;
                let mut cur = i;
                while let Some(p) = tree.element(cur).parent {
                    depth += 1;
                    cur = p;
                }
                max_depth = max_depth.max(depth);
                let e = tree.element(i);
                if e.pool()
                    .is_some_and(|p| p.mode == fairsched_hdrf::PoolMode::Fifo)
                {
                    assert!(e.children.iter().all(|&c| tree.element(c).is_operation()));
                }
            }
            assert!(max_depth <= 5, "seed {seed}: depth {max_depth}");
        }
    }
}
