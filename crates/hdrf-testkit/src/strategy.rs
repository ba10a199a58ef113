//! proptest strategies producing small [`TreeSpec`]s.
//!
//! Values are drawn as small integers (percentages of a fixed reference cluster, weights in
//! tenths), so a shrunk counterexample reads as round numbers. Every feature has a probability
//! in [`SmallTreeConfig`]; setting it to 0 removes the feature (e.g. "classic DRF-like trees":
//! no gangs, limits or guarantees).

use crate::spec::{
    GuaranteeNode, IntegralNode, LimitsNode, NodeSpec, OperationNode, PoolNode, TreeSpec,
};
use fairsched_resources::Resources;
use proptest::prelude::*;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A proptest configuration of `cases` cases (or `PROPTEST_CASES` when set, for longer
/// exploration runs) drawn from the fixed `seed` unless `PROPTEST_RNG_SEED` asks for another:
/// CI runs the same cases every time (a random seed once made main's CI fail on a tree no
/// earlier run had drawn). No failure persistence files.
pub fn fixed_seed_config(cases: u32, seed: u64) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let default = ProptestConfig::default();
    let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
        default.rng_seed
    } else {
        proptest::test_runner::RngSeed::Fixed(seed)
    };
    ProptestConfig {
        cases,
        failure_persistence: None,
        rng_seed,
        ..default
    }
}

/// The reference cluster: 100 user slots, 100 cpu, 16 gpu, 100 GiB memory, 100 network.
/// Demands are drawn as percentages of it.
pub fn reference_cluster() -> Resources {
    Resources::from_values([100.0, 100.0, 16.0, 100.0 * GIB, 100.0])
}

/// Feature probabilities and sizes of [`small_tree`].
#[derive(Clone, Debug, PartialEq)]
pub struct SmallTreeConfig {
    /// Levels of pool nesting (operations sit at most one level deeper).
    pub max_pool_depth: u32,
    /// proptest's `desired_size` for the recursion (roughly the element count).
    pub desired_size: u32,
    /// Largest number of children of one pool.
    pub max_children: usize,
    pub fifo: f64,
    pub strong_guarantee: f64,
    pub integral: f64,
    pub pool_limits: f64,
    pub operation_limits: f64,
    pub gang: f64,
    pub usage: f64,
    /// Probability that the cluster has gpu and network (otherwise only slots, cpu, memory;
    /// operations may still demand gpu/network, which the cluster then ignores).
    pub gpu_and_network: f64,
    /// Largest demand per resource, in percent of the reference cluster.
    pub max_demand_percent: u32,
}

impl Default for SmallTreeConfig {
    fn default() -> Self {
        SmallTreeConfig {
            max_pool_depth: 4,
            desired_size: 30,
            max_children: 4,
            fifo: 0.25,
            strong_guarantee: 0.35,
            integral: 0.15,
            pool_limits: 0.15,
            operation_limits: 0.1,
            gang: 0.15,
            usage: 0.3,
            gpu_and_network: 0.3,
            max_demand_percent: 120,
        }
    }
}

impl SmallTreeConfig {
    /// Classic DRF-like trees: no gangs, limits, strong or integral guarantees (FIFO pools and
    /// usage stay unless switched off as well).
    pub fn drf_like() -> SmallTreeConfig {
        SmallTreeConfig {
            strong_guarantee: 0.0,
            integral: 0.0,
            pool_limits: 0.0,
            operation_limits: 0.0,
            gang: 0.0,
            ..SmallTreeConfig::default()
        }
    }
}

/// `Some(value)` with probability `p` (`prop::option::weighted` rejects 0 and 1).
fn maybe<S>(p: f64, s: S) -> BoxedStrategy<Option<S::Value>>
where
    S: Strategy + 'static,
    S::Value: Clone,
{
    if p <= 0.0 {
        Just(None).boxed()
    } else if p >= 1.0 {
        s.prop_map(Some).boxed()
    } else {
        prop::option::weighted(p, s).boxed()
    }
}

/// `true` with probability `p`.
fn flag(p: f64) -> BoxedStrategy<bool> {
    if p <= 0.0 {
        Just(false).boxed()
    } else if p >= 1.0 {
        Just(true).boxed()
    } else {
        prop::bool::weighted(p).boxed()
    }
}

fn weight() -> impl Strategy<Value = f64> {
    // 0.5 ..= 10.0 in tenths; shrinks toward 1.0.
    prop_oneof![Just(1.0), (5u32..=100).prop_map(|t| f64::from(t) / 10.0)]
}

fn percent_or_zero(max: u32) -> impl Strategy<Value = u32> {
    prop_oneof![1 => Just(0u32), 3 => 1u32..=max.max(1)]
}

/// One operation.
pub fn operation(config: &SmallTreeConfig) -> impl Strategy<Value = OperationNode> + use<> {
    let reference = reference_cluster().values();
    (
        weight(),
        proptest::array::uniform5(percent_or_zero(config.max_demand_percent)),
        maybe(config.usage, 1u32..=100),
        flag(config.gang),
        maybe(config.operation_limits, 1u32..=100),
        0u32..100,
    )
        .prop_map(move |(weight, pct, usage, gang, limit, start)| {
            let demand = Resources::from_values(std::array::from_fn(|r| {
                f64::from(pct[r]) / 100.0 * reference[r]
            }));
            OperationNode {
                weight,
                demand,
                usage_fraction: usage.map_or(0.0, |u| f64::from(u) / 100.0),
                gang,
                cpu_limit: limit.map(|l| f64::from(l) / 100.0),
                start_time: f64::from(start),
            }
        })
}

/// A pool's own attributes (children are attached by [`node`]).
fn pool_attributes(config: &SmallTreeConfig) -> impl Strategy<Value = PoolNode> + use<> {
    let guarantee = maybe(
        config.strong_guarantee,
        (5u32..=100, any::<bool>()).prop_map(|(pct, main_only)| GuaranteeNode {
            fraction: f64::from(pct) / 100.0,
            main_only,
        }),
    );
    let integral = maybe(
        config.integral,
        (any::<bool>(), 1u32..=20, 10u32..=30, 0u32..=600).prop_map(
            |(burst, flow, multiplier, seconds)| IntegralNode {
                burst,
                flow_ratio: f64::from(flow) / 100.0,
                burst_multiplier: f64::from(multiplier) / 10.0,
                initial_volume_seconds: f64::from(seconds),
            },
        ),
    );
    let limits = maybe(
        config.pool_limits,
        (
            prop::option::of(5u32..=100),
            prop::option::weighted(0.3, 5u32..=100),
        )
            .prop_map(|(cpu, memory)| LimitsNode {
                cpu: Some(f64::from(cpu.unwrap_or(50)) / 100.0),
                memory: memory.map(|m| f64::from(m) / 100.0),
            }),
    );
    (
        weight(),
        flag(config.fifo),
        any::<bool>(),
        guarantee,
        integral,
        limits,
    )
        .prop_map(
            |(weight, fifo, fifo_by_weight, guarantee, integral, limits)| PoolNode {
                weight,
                fifo,
                fifo_by_weight,
                guarantee,
                integral,
                limits,
                children: Vec::new(),
            },
        )
}

/// A node: an operation, or a pool with up to `max_children` children, nested up to
/// `max_pool_depth` levels.
pub fn node(config: &SmallTreeConfig) -> impl Strategy<Value = NodeSpec> + use<> {
    let leaf = operation(config).prop_map(NodeSpec::Operation);
    let config = config.clone();
    let max_children = config.max_children;
    leaf.prop_recursive(
        config.max_pool_depth,
        config.desired_size,
        max_children as u32,
        move |inner| {
            (
                pool_attributes(&config),
                prop::collection::vec(inner, 0..=max_children),
            )
                .prop_map(|(mut pool, children)| {
                    pool.children = children;
                    NodeSpec::Pool(pool)
                })
        },
    )
}

/// A small tree: 1–4 children under the root, pools nested up to `max_pool_depth` levels (depth
/// ≤ 5 with the default), roughly `desired_size` elements.
pub fn small_tree(config: SmallTreeConfig) -> impl Strategy<Value = TreeSpec> {
    let with_gpu_and_network = flag(config.gpu_and_network);
    let previous = prop_oneof![Just(None), (1u32..=120).prop_map(|s| Some(f64::from(s)))];
    (
        prop::collection::vec(node(&config), 1..=4),
        with_gpu_and_network,
        previous,
    )
        .prop_map(|(children, gpu_and_network, previous)| {
            let mut cluster = reference_cluster();
            if !gpu_and_network {
                cluster.set_raw(fairsched_resources::ResourceKind::Gpu, 0);
                cluster.set_raw(fairsched_resources::ResourceKind::Network, 0);
            }
            TreeSpec {
                cluster,
                children,
                seconds_since_previous_update: previous,
            }
        })
}

/// A flat tree for DRF properties: the root holds one pool of `ops` operations, with no usage,
/// gangs, limits or guarantees. The cluster has slots, cpu and memory (and gpu/network with
/// probability `config.gpu_and_network`). Weights are all 1 when `equal_weights`.
pub fn flat_tree(
    ops: std::ops::RangeInclusive<usize>,
    equal_weights: bool,
    config: SmallTreeConfig,
) -> impl Strategy<Value = TreeSpec> {
    let op_config = SmallTreeConfig {
        usage: 0.0,
        gang: 0.0,
        operation_limits: 0.0,
        ..config.clone()
    };
    (
        prop::collection::vec(operation(&op_config), ops),
        flag(config.gpu_and_network),
    )
        .prop_map(move |(mut operations, gpu_and_network)| {
            if equal_weights {
                for o in &mut operations {
                    o.weight = 1.0;
                }
            }
            let mut cluster = reference_cluster();
            if !gpu_and_network {
                cluster.set_raw(fairsched_resources::ResourceKind::Gpu, 0);
                cluster.set_raw(fairsched_resources::ResourceKind::Network, 0);
            }
            TreeSpec {
                cluster,
                children: vec![NodeSpec::Pool(PoolNode {
                    weight: 1.0,
                    fifo: false,
                    fifo_by_weight: false,
                    guarantee: None,
                    integral: None,
                    limits: None,
                    children: operations.into_iter().map(NodeSpec::Operation).collect(),
                })],
                seconds_since_previous_update: None,
            }
        })
}
