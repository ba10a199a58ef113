//! A compact, declarative description of a pool tree ([`TreeSpec`]) and its conversion into a
//! [`Tree`] plus an [`UpdateInput`].
//!
//! Both the seeded generator ([`crate::random_tree`]) and the proptest strategies
//! ([`crate::strategy`]) produce a `TreeSpec`. Keeping the description separate from the arena
//! has two benefits: proptest shrinks the description (so a failing case shrinks to a small,
//! readable tree), and [`TreeSpec::build`] is the single place that makes configurations
//! *feasible*:
//!
//! * strong guarantees only appear where the parent has one (or under the root); siblings'
//!   guarantee fractions are scaled so that they sum to at most [`SIBLING_GUARANTEE_CAP`] of the
//!   parent's guarantee on every resource, and at the root to at most
//!   `SIBLING_GUARANTEE_CAP − (integral budget actually used)` of the cluster;
//! * integral pools are never nested in integral pools; the sums of their resource-flow ratios and
//!   of their burst ratios are scaled to at most [`INTEGRAL_BUDGET`];
//! * a limited pool's limits are raised to at least its (inferred) strong guarantee;
//! * a FIFO flag on a pool with pool children is ignored (FIFO pools hold only operations);
//! * usages are `demand × fraction` (so `usage ≤ demand`) and are scaled down together so that
//!   the total usage fits in [`USAGE_CAP`] of the cluster.
//!
//! With these rules a built tree never makes `update` report `PoolTreeGuaranteesOvercommit`.

use fairsched_hdrf::{
    ElementIndex, FifoSortParameter, IntegralGuaranteeType, IntegralGuarantees, OperationSpec,
    PoolMode, PoolSpec, ROOT, ResourceVolume, Tree, UpdateInput, UpdateOptions,
};
use fairsched_resources::{
    PartialResources, RESOURCE_COUNT, ResourceKind, ResourceVector, Resources,
};

/// Siblings' strong-guarantee fractions sum to at most this share of the parent's guarantee.
pub const SIBLING_GUARANTEE_CAP: f64 = 0.95;
/// Cap on the summed resource-flow ratios (and, separately, burst ratios) of integral pools.
pub const INTEGRAL_BUDGET: f64 = 0.4;
/// Total usage is scaled to fit in this share of the cluster on every resource.
pub const USAGE_CAP: f64 = 0.98;
/// `now` of the update built from a spec (previous update = now − seconds since it).
pub const NOW_SECONDS: f64 = 3600.0;

/// A whole tree: the cluster and the root's children.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeSpec {
    /// Cluster total. Components that are 0 are resources the cluster does not have.
    pub cluster: Resources,
    /// Children of the root, in attachment order.
    pub children: Vec<NodeSpec>,
    /// Seconds since the previous update (`None`: integral volumes are not refilled).
    pub seconds_since_previous_update: Option<f64>,
}

/// A pool or an operation.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeSpec {
    Pool(PoolNode),
    Operation(OperationNode),
}

/// A pool and its subtree.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolNode {
    pub weight: f64,
    /// FIFO mode (honoured only when every child is an operation).
    pub fifo: bool,
    /// FIFO order by weight first (otherwise by start time).
    pub fifo_by_weight: bool,
    pub guarantee: Option<GuaranteeNode>,
    pub integral: Option<IntegralNode>,
    pub limits: Option<LimitsNode>,
    pub children: Vec<NodeSpec>,
}

/// A strong guarantee, relative to the parent's (inferred) guarantee.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuaranteeNode {
    /// Fraction of the parent's guarantee (before sibling scaling), in `(0, 1]`.
    pub fraction: f64,
    /// Configure only the main resource and let the update infer the others (§3.2); otherwise
    /// configure every resource explicitly.
    pub main_only: bool,
}

/// An integral guarantee (burst or relaxed) with some initial accumulated volume.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntegralNode {
    /// Burst (otherwise relaxed).
    pub burst: bool,
    /// Resource flow as a share of the cluster (before budget scaling), configured on the main
    /// resource.
    pub flow_ratio: f64,
    /// Burst pools: burst guarantee = flow × this.
    pub burst_multiplier: f64,
    /// Initial accumulated volume: `cluster × flow_ratio × seconds`.
    pub initial_volume_seconds: f64,
}

/// Pool resource limits as shares of the cluster (absent: unlimited).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LimitsNode {
    pub cpu: Option<f64>,
    pub memory: Option<f64>,
}

/// An operation.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationNode {
    pub weight: f64,
    pub demand: Resources,
    /// Usage = demand × this (before the global usage cap), in `[0, 1]`.
    pub usage_fraction: f64,
    pub gang: bool,
    /// Cpu limit as a share of the cluster.
    pub cpu_limit: Option<f64>,
    pub start_time: f64,
}

impl NodeSpec {
    /// Number of elements in this subtree.
    pub fn element_count(&self) -> usize {
        match self {
            NodeSpec::Operation(_) => 1,
            NodeSpec::Pool(p) => {
                1 + p
                    .children
                    .iter()
                    .map(NodeSpec::element_count)
                    .sum::<usize>()
            }
        }
    }

    fn visit_operations(&self, f: &mut impl FnMut(&OperationNode)) {
        match self {
            NodeSpec::Operation(o) => f(o),
            NodeSpec::Pool(p) => p.children.iter().for_each(|c| c.visit_operations(f)),
        }
    }
}

/// Options of an update in the classic or improved mode, with or without the gang step
/// function (everything else at its default).
pub fn options(improved: bool, step_function: bool) -> UpdateOptions {
    UpdateOptions {
        enable_improved_fair_share_by_fit_factor_computation: improved,
        enable_step_function_for_gang_operations: step_function,
        ..UpdateOptions::default()
    }
}

impl TreeSpec {
    /// Number of elements, the root included.
    pub fn element_count(&self) -> usize {
        1 + self
            .children
            .iter()
            .map(NodeSpec::element_count)
            .sum::<usize>()
    }

    /// Builds the tree and the update input for `options` (see the module docs for the
    /// feasibility rules applied on the way).
    pub fn build(&self, options: &UpdateOptions) -> (Tree, UpdateInput) {
        let mut b = Builder {
            tree: Tree::new(),
            cluster: self.cluster,
            main: options.main_resource,
            integral_scale: 1.0,
            usage_scale: 1.0,
            names: 0,
        };

        // Integral budget: sums of flow ratios and of burst ratios over the pools that will
        // actually be integral (not nested in another integral pool).
        let (mut flow, mut burst) = (0.0, 0.0);
        for c in &self.children {
            integral_totals(c, false, &mut flow, &mut burst);
        }
        let used = f64::max(flow, burst);
        if used > INTEGRAL_BUDGET {
            b.integral_scale = INTEGRAL_BUDGET / used;
        }
        let integral_used = used.min(INTEGRAL_BUDGET);

        // Usage cap.
        let mut usage = [0.0; RESOURCE_COUNT];
        for c in &self.children {
            c.visit_operations(&mut |o| {
                let u = o.demand.scale(o.usage_fraction.clamp(0.0, 1.0)).values();
                for r in 0..RESOURCE_COUNT {
                    usage[r] += u[r];
                }
            });
        }
        let total = self.cluster.values();
        for r in 0..RESOURCE_COUNT {
            if usage[r] > 0.0 {
                b.usage_scale = f64::min(b.usage_scale, USAGE_CAP * total[r] / usage[r]);
            }
        }

        let root_cap = (SIBLING_GUARANTEE_CAP - integral_used).max(0.0);
        b.children(ROOT, &self.children, Some(self.cluster), root_cap, false);

        let input = UpdateInput {
            total_resources: self.cluster,
            now_seconds: NOW_SECONDS,
            previous_update_seconds: self
                .seconds_since_previous_update
                .map(|dt| NOW_SECONDS - dt),
            options: options.clone(),
        };
        (b.tree, input)
    }
}

fn integral_totals(node: &NodeSpec, under_integral: bool, flow: &mut f64, burst: &mut f64) {
    if let NodeSpec::Pool(p) = node {
        let integral = !under_integral && p.integral.is_some();
        if integral {
            let i = p.integral.as_ref().expect("checked");
            *flow += i.flow_ratio;
            if i.burst {
                *burst += i.flow_ratio * i.burst_multiplier;
            }
        }
        for c in &p.children {
            integral_totals(c, under_integral || integral, flow, burst);
        }
    }
}

struct Builder {
    tree: Tree,
    cluster: Resources,
    main: ResourceKind,
    integral_scale: f64,
    usage_scale: f64,
    names: usize,
}

impl Builder {
    fn name(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    /// Attaches `children` under `parent`, whose inferred strong guarantee is `parent_guarantee`
    /// (`None`: the parent has none, so children get none either).
    fn children(
        &mut self,
        parent: ElementIndex,
        children: &[NodeSpec],
        parent_guarantee: Option<Resources>,
        cap: f64,
        under_integral: bool,
    ) {
        let mut fractions = 0.0;
        if parent_guarantee.is_some() {
            for c in children {
                if let NodeSpec::Pool(PoolNode {
                    guarantee: Some(g), ..
                }) = c
                {
                    fractions += g.fraction.clamp(0.0, 1.0);
                }
            }
        }
        let scale = if fractions > cap {
            cap / fractions
        } else {
            1.0
        };
        for c in children {
            match c {
                NodeSpec::Operation(o) => self.operation(parent, o),
                NodeSpec::Pool(p) => {
                    self.pool(parent, p, parent_guarantee, scale, under_integral);
                }
            }
        }
    }

    fn operation(&mut self, parent: ElementIndex, o: &OperationNode) {
        let fraction = o.usage_fraction.clamp(0.0, 1.0) * self.usage_scale;
        let spec = OperationSpec {
            demand: o.demand,
            usage: o.demand.scale(fraction),
            gang: o.gang,
            best_allocation_share: ResourceVector::ONES,
            start_time: o.start_time,
            pending_job_count: 0,
        };
        let name = self.name("op");
        let i = self
            .tree
            .add_operation(parent, name, o.weight, spec)
            .expect("parent is a composite");
        if let Some(share) = o.cpu_limit {
            let raw = (share * self.cluster.raw_of(ResourceKind::Cpu) as f64).floor() as i64;
            self.tree
                .element_mut(i)
                .resource_limits
                .set_raw(ResourceKind::Cpu, Some(raw.max(0)));
        }
    }

    fn pool(
        &mut self,
        parent: ElementIndex,
        p: &PoolNode,
        parent_guarantee: Option<Resources>,
        sibling_scale: f64,
        under_integral: bool,
    ) {
        let main = self.main;
        // Strong guarantee: configured amounts, and the inferred guarantee the update will
        // compute (§3.2), replicated exactly so that the children stay within it.
        let mut configured = PartialResources::EMPTY;
        let mut inferred: Option<Resources> = None;
        if let (Some(g), Some(pg)) = (p.guarantee, parent_guarantee) {
            let alpha = g.fraction.clamp(0.0, 1.0) * sibling_scale;
            let explicit =
                Resources::from_raw(pg.raw().map(|raw| (alpha * raw as f64).floor() as i64));
            if g.main_only {
                configured.set_raw(main, Some(explicit.raw_of(main)));
                let child_main = explicit.get(main);
                let parent_main = pg.get(main);
                let ratio = if parent_main > 0.0 {
                    child_main / parent_main
                } else {
                    0.0
                };
                let mut r = explicit;
                for kind in ResourceKind::ALL {
                    if kind != main {
                        r.set(kind, ratio * pg.get(kind));
                    }
                }
                inferred = Some(r);
            } else {
                configured = PartialResources::from_resources(&explicit);
                inferred = Some(explicit);
            }
        }

        let integral = if under_integral { None } else { p.integral };
        let mut integral_guarantees = IntegralGuarantees::default();
        if let Some(i) = integral {
            let flow_ratio = i.flow_ratio * self.integral_scale;
            let cpu = self.cluster.raw_of(main) as f64;
            let mut flow = Resources::ZERO;
            flow.set_raw(main, (flow_ratio * cpu).floor() as i64);
            integral_guarantees.resource_flow = flow;
            if i.burst {
                integral_guarantees.guarantee_type = IntegralGuaranteeType::Burst;
                let mut burst = Resources::ZERO;
                burst.set_raw(main, (flow_ratio * i.burst_multiplier * cpu).floor() as i64);
                integral_guarantees.burst_guarantee_resources = burst;
            } else {
                integral_guarantees.guarantee_type = IntegralGuaranteeType::Relaxed;
            }
        }

        let has_pool_children = p.children.iter().any(|c| matches!(c, NodeSpec::Pool(_)));
        let mode = if p.fifo && !has_pool_children {
            PoolMode::Fifo
        } else {
            PoolMode::FairShare
        };
        let spec = PoolSpec {
            mode,
            strong_guarantee_resources: configured,
            integral_guarantees,
            fifo_sort_parameters: if p.fifo_by_weight {
                vec![FifoSortParameter::Weight, FifoSortParameter::StartTime]
            } else {
                vec![FifoSortParameter::StartTime]
            },
            ..PoolSpec::default()
        };
        let name = self.name("pool");
        let i = self
            .tree
            .add_pool(parent, name, p.weight, spec)
            .expect("parent is a composite");

        if let Some(l) = p.limits {
            let mut limits = PartialResources::EMPTY;
            for (kind, share) in [(ResourceKind::Cpu, l.cpu), (ResourceKind::Memory, l.memory)] {
                if let Some(share) = share {
                    let mut raw = (share * self.cluster.raw_of(kind) as f64).floor() as i64;
                    if let Some(g) = inferred {
                        raw = raw.max(g.raw_of(kind));
                    }
                    limits.set_raw(kind, Some(raw.max(0)));
                }
            }
            self.tree.element_mut(i).resource_limits = limits;
        }

        if let Some(ig) = integral {
            let flow_ratio = ig.flow_ratio * self.integral_scale;
            let volume = ResourceVolume::from_resources(
                &self.cluster.scale(flow_ratio),
                ig.initial_volume_seconds.max(0.0),
            );
            self.tree.element_mut(i).integral_state.accumulated_volume = volume;
        }

        self.children(
            i,
            &p.children,
            inferred,
            SIBLING_GUARANTEE_CAP,
            under_integral || integral.is_some(),
        );
    }
}
