//! Validation: a pure function from a configuration to either the validated value (with the
//! effective per-pool settings) or every problem found.
//!
//! A rejected configuration changes nothing: the functions here never mutate their input, and
//! the caller keeps using its previous validated value.

use crate::common::{
    FifoPoolSchedulingOrder, IntegralGuaranteeType, MAX_NAME_LENGTH, MAX_POOL_DEPTH, MAX_WEIGHT,
    MIN_WEIGHT, NESTED_PROMISED_GUARANTEE_FAIR_SHARE_POOLS, RELAXED_SHARE_MULTIPLIER_RANGE,
    ROOT_POOL_NAME, SchedulingMode,
};
use crate::error::{ConfigError, ConfigErrors};
use crate::pool::{PoolConfig, PoolNode, PoolPresetConfig};
use crate::presets::resolve_pool_config;
use crate::tree::TreeConfig;
use crate::trees::{PoolTreeConfig, PoolTrees};
use fairsched_resources::{PartialResources, ResourceKind, format_amount};
use std::collections::BTreeMap;

/// A pool's configuration after presets, defaults and inheritance.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectivePool {
    /// The pool's name (unique in its tree).
    pub name: String,
    /// Path from the root, `"research/adhoc"`.
    pub path: String,
    /// Parent pool name; `None` when the parent is the root.
    pub parent: Option<String>,
    /// 1 for children of the root.
    pub depth: usize,
    /// Child pool names, in name order.
    pub children: Vec<String>,
    /// The pool's own options with its presets applied.
    pub config: PoolConfig,
    /// Own value, else the tree's `max_operation_count_per_pool`.
    pub max_operation_count: u32,
    /// Own value, else the tree's `max_running_operation_count_per_pool`.
    pub max_running_operation_count: u32,
    /// Own value, else the parent's effective value (the tree's at the top).
    pub fair_share_starvation_tolerance: f64,
    /// Own value, else the parent's effective value (the tree's at the top).
    pub fair_share_starvation_timeout_ms: u64,
    /// Own value, else the parent's effective value (the tree's at the top).
    pub enable_aggressive_starvation: bool,
    /// Own value, else the parent's effective value (true at the root).
    pub allow_aggressive_preemption: bool,
    /// Own value, else true (the scheduler checks every element on an allocation's path).
    pub allow_normal_preemption: bool,
    /// Own value, else the parent's effective value (the tree's threshold, with
    /// `max_unpreemptible_running_allocation_count` folded in, at the top).
    pub non_preemptible_resource_usage_threshold: PartialResources,
    /// Own value (default true) and the parent's effective value: a pool that forbids regular
    /// allocations on SSD nodes forbids them for its whole subtree.
    pub allow_regular_allocations_on_ssd_nodes: bool,
    /// Own value (default false) and the pool is FIFO.
    pub enable_lightweight_operations: bool,
    /// Own value, else the parent's effective value (the tree's at the top).
    pub use_pool_satisfaction_for_scheduling: bool,
    /// Own value, else the tree's.
    pub fifo_pool_scheduling_order: FifoPoolSchedulingOrder,
    /// Own value, else the tree's.
    pub enable_fair_share_truncation_in_fifo_pool: bool,
    /// Own `integral_guarantees.relaxed_share_multiplier_limit`, else the tree's.
    pub relaxed_share_multiplier_limit: f64,
    /// Own `integral_guarantees.should_distribute_free_volume_among_children`, else the tree's.
    pub should_distribute_free_volume_among_children: bool,
}

/// A tree that passed validation.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedTree {
    /// The tree exactly as given (presets not applied), for storing and showing.
    pub tree: PoolTreeConfig,
    /// Every pool, depth-first, children in name order.
    pub pools: Vec<EffectivePool>,
    /// Problems that do not reject the tree (YTsaurus raises alerts for them): limits below
    /// guarantees, a missing or FIFO default parent pool, nested promised-guarantee pools, ...
    pub warnings: Vec<ConfigError>,
    index: BTreeMap<String, usize>,
}

impl ValidatedTree {
    /// The tree's options.
    pub fn config(&self) -> &TreeConfig {
        &self.tree.config
    }

    /// A pool by name.
    pub fn pool(&self, name: &str) -> Option<&EffectivePool> {
        self.index.get(name).map(|&i| &self.pools[i])
    }

    /// Names of the root's children, in name order.
    pub fn top_level_pools(&self) -> impl Iterator<Item = &str> {
        self.tree.pools.keys().map(String::as_str)
    }

    /// The pool ephemeral pools are created under: `None` for the root (also when the
    /// configured default parent is missing or FIFO, as in YTsaurus).
    pub fn default_parent_pool(&self) -> Option<&str> {
        let name = self.tree.config.default_parent_pool.as_str();
        match self.pool(name) {
            Some(p) if p.config.mode != SchedulingMode::Fifo => Some(name),
            _ => None,
        }
    }
}

/// Several trees that passed validation.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedPoolTrees {
    /// The trees by name.
    pub trees: BTreeMap<String, ValidatedTree>,
    /// The default tree's name (see [`PoolTrees::default_tree_name`]).
    pub default_tree: Option<String>,
    /// All trees' warnings, each naming its tree.
    pub warnings: Vec<ConfigError>,
}

/// What changes between two versions of a tree (pools are matched by name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolTreeDiff {
    /// Paths (in the new tree) of pools that did not exist.
    pub added: Vec<String>,
    /// Paths (in the old tree) of pools that no longer exist.
    pub removed: Vec<String>,
    /// Paths (in the new tree) of pools whose own options or parent changed.
    pub changed: Vec<String>,
    /// Whether the tree's `config` changed.
    pub tree_config_changed: bool,
}

impl PoolTreeDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && !self.tree_config_changed
    }
}

/// An accepted change of a tree.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeUpdate {
    /// The new tree, validated.
    pub validated: ValidatedTree,
    /// What changed.
    pub diff: PoolTreeDiff,
}

/// Validates a change of a tree: the whole new tree must be valid (so, for example, turning a
/// pool with subpools into a FIFO pool, raising a child's guarantee above what its parent has
/// left, or changing `main_resource` while guarantees lack the new main resource are
/// rejected). On error the caller keeps `old`.
pub fn validate_update(
    old: &PoolTreeConfig,
    new: &PoolTreeConfig,
) -> Result<TreeUpdate, ConfigErrors> {
    let validated = validate_tree(new)?;
    Ok(TreeUpdate {
        validated,
        diff: diff_trees(old, new),
    })
}

/// Pools added, removed and changed between two trees, matched by name.
pub fn diff_trees(old: &PoolTreeConfig, new: &PoolTreeConfig) -> PoolTreeDiff {
    fn index(tree: &PoolTreeConfig) -> BTreeMap<String, (String, PoolConfig)> {
        let mut map = BTreeMap::new();
        for (path, node) in tree.walk() {
            let name = path.rsplit('/').next().unwrap_or_default().to_string();
            map.entry(name).or_insert((path, node.config()));
        }
        map
    }
    let (old_pools, new_pools) = (index(old), index(new));
    let mut diff = PoolTreeDiff {
        tree_config_changed: old.config != new.config,
        ..PoolTreeDiff::default()
    };
    for (name, (path, config)) in &new_pools {
        match old_pools.get(name) {
            None => diff.added.push(path.clone()),
            Some((old_path, old_config)) => {
                let parent = |p: &str| p.rsplit_once('/').map(|(a, _)| a.to_string());
                if old_config != config || parent(old_path) != parent(path) {
                    diff.changed.push(path.clone());
                }
            }
        }
    }
    for (name, (path, _)) in &old_pools {
        if !new_pools.contains_key(name) {
            diff.removed.push(path.clone());
        }
    }
    diff.added.sort();
    diff.removed.sort();
    diff.changed.sort();
    diff
}

/// Validates a set of trees: each tree, the tree names, `default_tree`, and that trees do not
/// obviously share nodes (two trees with the same `node_tag_filter`, or a tree without a filter
/// beside other trees). Errors name their tree.
pub fn validate_pool_trees(trees: &PoolTrees) -> Result<ValidatedPoolTrees, ConfigErrors> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut validated = BTreeMap::new();

    for (name, tree) in &trees.pool_trees {
        if let Err(message) = check_name(name, "tree") {
            errors.push(ConfigError::tree_level("name", message).in_tree(name));
        }
        match validate_tree(tree) {
            Ok(v) => {
                warnings.extend(v.warnings.iter().cloned().map(|w| w.in_tree(name)));
                validated.insert(name.clone(), v);
            }
            Err(e) => errors.extend(e.into_iter().map(|e| e.in_tree(name))),
        }
    }

    if let Some(default) = &trees.default_tree
        && !trees.pool_trees.contains_key(default)
    {
        let known: Vec<String> = trees.pool_trees.keys().map(|k| format!("{k:?}")).collect();
        errors.push(ConfigError::tree_level(
            "default_tree",
            format!(
                "names tree {default:?}, which does not exist (trees: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }

    if trees.pool_trees.len() > 1 {
        let mut by_filter: BTreeMap<String, &str> = BTreeMap::new();
        for (name, tree) in &trees.pool_trees {
            let filter = tree
                .config
                .node_tag_filter
                .as_deref()
                .map(str::trim)
                .unwrap_or_default();
            if filter.is_empty() {
                errors.push(
                    ConfigError::tree_level(
                        "config.node_tag_filter",
                        "is not set, so this tree takes every node; with several trees each \
                         tree needs a node_tag_filter (trees must not share nodes)",
                    )
                    .in_tree(name),
                );
                continue;
            }
            let normalized: String = filter.split_whitespace().collect::<Vec<_>>().join(" ");
            if let Some(other) = by_filter.get(&normalized) {
                errors.push(
                    ConfigError::tree_level(
                        "config.node_tag_filter",
                        format!(
                            "{filter:?} is the same as tree {other:?}'s; trees must not share nodes"
                        ),
                    )
                    .in_tree(name),
                );
            } else {
                by_filter.insert(normalized, name);
            }
        }
    }

    if errors.is_empty() {
        Ok(ValidatedPoolTrees {
            trees: validated,
            default_tree: trees.default_tree_name().map(str::to_string),
            warnings,
        })
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Validates one tree. Returns the validated tree (with effective pool settings and warnings)
/// or every error found; errors come in a fixed order (tree options, then pools depth-first in
/// name order).
pub fn validate_tree(tree: &PoolTreeConfig) -> Result<ValidatedTree, ConfigErrors> {
    let mut v = Validator {
        tree: &tree.config,
        errors: Vec::new(),
        warnings: Vec::new(),
        seen: BTreeMap::new(),
        pools: Vec::new(),
    };
    v.check_tree_config();
    let root = Inherited::root(&tree.config);
    v.check_children(None, None, &tree.pools);
    for (name, node) in &tree.pools {
        v.visit(name, node, None, &root, 1);
    }
    v.check_default_parent(tree);

    if !v.errors.is_empty() {
        return Err(ConfigErrors(v.errors));
    }
    let index = v
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), i))
        .collect();
    Ok(ValidatedTree {
        tree: tree.clone(),
        pools: v.pools,
        warnings: v.warnings,
        index,
    })
}

/// Whether a pool or tree name may contain `c`: ASCII letters, digits, `_`, `-` and `:`.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':')
}

/// Checks a pool name (or tree name): not empty, not `<Root>`, no `$` (reserved for ephemeral
/// subpools `<pool>$<user>`), only `[A-Za-z0-9_:-]` (YTsaurus' name pattern for
/// administrators), at most [`MAX_NAME_LENGTH`] bytes.
pub fn check_name(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} name must not be empty"));
    }
    if name == ROOT_POOL_NAME {
        return Err(format!("{what} name {name:?} is reserved for the root"));
    }
    if name.contains('$') {
        return Err(format!(
            "{what} name {name:?} contains '$', which is reserved for ephemeral subpools"
        ));
    }
    if let Some(c) = name.chars().find(|&c| !is_name_char(c)) {
        return Err(format!(
            "{what} name {name:?} contains {c:?}; allowed are ASCII letters, digits, '_', '-' and ':'"
        ));
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "{what} name is {} characters long; at most {MAX_NAME_LENGTH} are allowed",
            name.len()
        ));
    }
    Ok(())
}

/// Effective values a pool inherits from its parent (or from the tree at the top).
#[derive(Clone, Debug)]
struct Inherited {
    tolerance: f64,
    timeout_ms: u64,
    aggressive_starvation: bool,
    allow_aggressive_preemption: bool,
    threshold: PartialResources,
    allow_regular_on_ssd: bool,
    use_pool_satisfaction: bool,
    /// Nearest ancestor with a burst or relaxed integral guarantee: (path, type).
    integral_ancestor: Option<(String, IntegralGuaranteeType)>,
    /// Nearest ancestor computing the promised-guarantee fair share.
    promised_ancestor: Option<String>,
}

impl Inherited {
    fn root(tree: &TreeConfig) -> Inherited {
        Inherited {
            tolerance: tree.fair_share_starvation_tolerance,
            timeout_ms: tree.fair_share_starvation_timeout_ms,
            aggressive_starvation: tree.enable_aggressive_starvation,
            allow_aggressive_preemption: true,
            threshold: tree.effective_non_preemptible_resource_usage_threshold(),
            allow_regular_on_ssd: true,
            use_pool_satisfaction: tree.use_pool_satisfaction_for_scheduling,
            integral_ancestor: None,
            promised_ancestor: None,
        }
    }
}

struct Validator<'a> {
    tree: &'a TreeConfig,
    errors: Vec<ConfigError>,
    warnings: Vec<ConfigError>,
    /// Pool name → path of its first occurrence.
    seen: BTreeMap<String, String>,
    pools: Vec<EffectivePool>,
}

/// The three guarantee-like resource maps of a pool.
#[derive(Clone, Copy, Debug)]
enum GuaranteeKind {
    Strong,
    Flow,
    Burst,
}

impl GuaranteeKind {
    const ALL: [GuaranteeKind; 3] = [
        GuaranteeKind::Strong,
        GuaranteeKind::Flow,
        GuaranteeKind::Burst,
    ];

    fn field(self) -> &'static str {
        match self {
            GuaranteeKind::Strong => "strong_guarantee_resources",
            GuaranteeKind::Flow => "integral_guarantees.resource_flow",
            GuaranteeKind::Burst => "integral_guarantees.burst_guarantee_resources",
        }
    }

    fn what(self) -> &'static str {
        match self {
            GuaranteeKind::Strong => "strong guarantees",
            GuaranteeKind::Flow => "resource flows",
            GuaranteeKind::Burst => "burst guarantees",
        }
    }

    fn of_config(self, c: &PoolConfig) -> &PartialResources {
        match self {
            GuaranteeKind::Strong => &c.strong_guarantee_resources,
            GuaranteeKind::Flow => &c.integral_guarantees.resource_flow,
            GuaranteeKind::Burst => &c.integral_guarantees.burst_guarantee_resources,
        }
    }

    /// Presets never carry guarantees, so a node's own values are the resolved ones.
    fn of_node(self, n: &PoolNode) -> &PartialResources {
        match self {
            GuaranteeKind::Strong => &n.strong_guarantee_resources,
            GuaranteeKind::Flow => &n.integral_guarantees.resource_flow,
            GuaranteeKind::Burst => &n.integral_guarantees.burst_guarantee_resources,
        }
    }
}

impl Validator<'_> {
    fn tree_error(&mut self, field: &str, message: String) {
        self.errors
            .push(ConfigError::tree_level(format!("config.{field}"), message));
    }

    fn check_tree_config(&mut self) {
        let t = self.tree;
        if let Err(m) = in_closed_range(t.fair_share_starvation_tolerance, 0.0, 1.0) {
            self.tree_error("fair_share_starvation_tolerance", m);
        }
        if !t.preemption_satisfaction_threshold.is_finite()
            || t.preemption_satisfaction_threshold <= 0.0
        {
            self.tree_error(
                "preemption_satisfaction_threshold",
                format!(
                    "must be a finite number > 0 (got {})",
                    t.preemption_satisfaction_threshold
                ),
            );
        }
        let aggressive = t.aggressive_preemption_satisfaction_threshold;
        if !aggressive.is_finite() || aggressive < 0.0 {
            self.tree_error(
                "aggressive_preemption_satisfaction_threshold",
                format!("must be a finite number >= 0 (got {aggressive})"),
            );
        } else if t.preemption_satisfaction_threshold.is_finite()
            && aggressive > t.preemption_satisfaction_threshold
        {
            self.tree_error(
                "aggressive_preemption_satisfaction_threshold",
                format!(
                    "must not exceed preemption_satisfaction_threshold ({aggressive} > {})",
                    t.preemption_satisfaction_threshold
                ),
            );
        }
        if t.fair_share_aggressive_starvation_timeout_ms < t.fair_share_starvation_timeout_ms {
            self.tree_error(
                "fair_share_aggressive_starvation_timeout_ms",
                format!(
                    "must be >= fair_share_starvation_timeout_ms ({} < {})",
                    t.fair_share_aggressive_starvation_timeout_ms,
                    t.fair_share_starvation_timeout_ms
                ),
            );
        }
        let coefficient = t.allocation_count_preemption_timeout_coefficient;
        if !coefficient.is_finite() || coefficient < 1.0 {
            self.tree_error(
                "allocation_count_preemption_timeout_coefficient",
                format!("must be a finite number >= 1 (got {coefficient})"),
            );
        }
        if let Some(m) = t.infer_weight_from_guarantees_share_multiplier
            && (!m.is_finite() || m < 1.0)
        {
            self.tree_error(
                "infer_weight_from_guarantees_share_multiplier",
                format!("must be a finite number >= 1 (got {m})"),
            );
        }
        for (field, value) in [
            ("max_operation_count", t.max_operation_count),
            ("max_running_operation_count", t.max_running_operation_count),
            (
                "max_operation_count_per_pool",
                t.max_operation_count_per_pool,
            ),
            (
                "max_running_operation_count_per_pool",
                t.max_running_operation_count_per_pool,
            ),
            (
                "max_ephemeral_pools_per_user",
                t.max_ephemeral_pools_per_user,
            ),
            (
                "max_preemptive_allocations_per_heartbeat",
                t.max_preemptive_allocations_per_heartbeat,
            ),
            (
                "job_reservation.max_reservations",
                t.job_reservation.max_reservations,
            ),
        ] {
            if value == 0 {
                self.tree_error(field, "must be > 0 (got 0)".to_string());
            }
        }
        if t.gang_placement.assembly_timeout_ms == 0 {
            self.tree_error(
                "gang_placement.assembly_timeout_ms",
                "must be > 0 (got 0)".to_string(),
            );
        }
        for (field, value) in [
            (
                "max_started_allocations_per_heartbeat",
                t.max_started_allocations_per_heartbeat,
            ),
            (
                "max_schedulable_element_count_in_fifo_pool",
                t.max_schedulable_element_count_in_fifo_pool,
            ),
        ] {
            if value == Some(0) {
                self.tree_error(field, "must be > 0 when set (got 0)".to_string());
            }
        }
        if t.max_running_operation_count > t.max_operation_count {
            self.tree_error(
                "max_running_operation_count",
                format!(
                    "must not exceed max_operation_count ({} > {})",
                    t.max_running_operation_count, t.max_operation_count
                ),
            );
        }
        if t.max_running_operation_count_per_pool > t.max_operation_count_per_pool {
            self.tree_error(
                "max_running_operation_count_per_pool",
                format!(
                    "must not exceed max_operation_count_per_pool ({} > {})",
                    t.max_running_operation_count_per_pool, t.max_operation_count_per_pool
                ),
            );
        }
        let ig = &t.integral_guarantees;
        if ig.smooth_period_ms == 0 {
            self.tree_error(
                "integral_guarantees.smooth_period_ms",
                "must be > 0 (got 0)".to_string(),
            );
        }
        if ig.pool_capacity_saturation_period_ms == 0 {
            self.tree_error(
                "integral_guarantees.pool_capacity_saturation_period_ms",
                "must be > 0 (got 0)".to_string(),
            );
        }
        let (lo, hi) = RELAXED_SHARE_MULTIPLIER_RANGE;
        if let Err(m) = in_closed_range(ig.relaxed_share_multiplier_limit, lo, hi) {
            self.tree_error("integral_guarantees.relaxed_share_multiplier_limit", m);
        }
        let ssd = &t.ssd_priority_preemption;
        if ssd.enable
            && ssd
                .node_tag_filter
                .as_deref()
                .is_none_or(|f| f.trim().is_empty())
        {
            self.tree_error(
                "ssd_priority_preemption.node_tag_filter",
                "must be set when ssd_priority_preemption.enable is true".to_string(),
            );
        }
        for (field, filter) in [
            ("node_tag_filter", &t.node_tag_filter),
            (
                "ssd_priority_preemption.node_tag_filter",
                &ssd.node_tag_filter,
            ),
        ] {
            if let Some(Err(e)) = filter.as_deref().map(crate::TagFilter::parse) {
                self.tree_error(field, e.to_string());
            }
        }
        for (name, preset) in &t.pool_config_presets {
            self.check_preset(name, preset);
        }
    }

    fn check_preset(&mut self, name: &str, preset: &PoolPresetConfig) {
        if name.is_empty() {
            self.tree_error(
                "pool_config_presets",
                "preset name must not be empty".to_string(),
            );
        }
        if let Some(t) = preset.fair_share_starvation_tolerance
            && let Err(m) = in_closed_range(t, 0.0, 1.0)
        {
            self.tree_error(
                &format!("pool_config_presets.{name}.fair_share_starvation_tolerance"),
                m,
            );
        }
    }

    fn check_default_parent(&mut self, tree: &PoolTreeConfig) {
        let name = tree.config.default_parent_pool.as_str();
        if name == ROOT_POOL_NAME {
            return;
        }
        let message = match self.pools.iter().find(|p| p.name == name) {
            None => format!(
                "pool {name:?} does not exist; ephemeral pools will be created under the root"
            ),
            Some(p) if p.config.mode == SchedulingMode::Fifo => format!(
                "pool {name:?} is a FIFO pool and cannot hold ephemeral pools; they will be \
                 created under the root"
            ),
            Some(_) => return,
        };
        self.warnings.push(ConfigError::tree_level(
            "config.default_parent_pool",
            message,
        ));
    }

    /// Checks a pool (or the root, `parent_path = None`) against its children: guarantee sums
    /// and "configured at parent".
    fn check_children(
        &mut self,
        parent_path: Option<&str>,
        parent: Option<&PoolConfig>,
        children: &BTreeMap<String, PoolNode>,
    ) {
        let Some(parent) = parent else {
            return; // The root configures no guarantees; overcommit there is an alert.
        };
        let parent_path = parent_path.unwrap_or_default();
        for g in GuaranteeKind::ALL {
            let (field, what) = (g.field(), g.what());
            let parent_values = g.of_config(parent);
            for kind in ResourceKind::ALL {
                let mut sum: i64 = 0;
                let mut parts = Vec::new();
                for (child_name, child) in children {
                    let Some(value) = g.of_node(child).raw_of(kind) else {
                        continue;
                    };
                    sum = sum.saturating_add(value);
                    parts.push(format!("{child_name:?} {}", format_amount(kind, value)));
                    if value > 0 && !parent_values.is_set(kind) {
                        self.errors.push(ConfigError::pool(
                            format!("{parent_path}/{child_name}"),
                            format!("{field}.{kind}"),
                            format!(
                                "is {} but the parent pool {parent_path:?} does not configure \
                                 {kind} in its {field}; a pool may only have {what} for \
                                 resources its parent configures",
                                format_amount(kind, value)
                            ),
                        ));
                    }
                }
                if let Some(limit) = parent_values.raw_of(kind)
                    && sum > limit
                {
                    self.errors.push(ConfigError::pool(
                        parent_path,
                        format!("{field}.{kind}"),
                        format!(
                            "children's {what} sum to {} {kind}, more than this pool's {} \
                             (children: {})",
                            format_amount(kind, sum),
                            format_amount(kind, limit),
                            parts.join(", ")
                        ),
                    ));
                }
            }
        }
    }

    fn visit(
        &mut self,
        name: &str,
        node: &PoolNode,
        parent_path: Option<&str>,
        inherited: &Inherited,
        depth: usize,
    ) {
        let path = match parent_path {
            Some(p) => format!("{p}/{name}"),
            None => name.to_string(),
        };
        if let Err(message) = check_name(name, "pool") {
            self.errors
                .push(ConfigError::pool(path.clone(), "name", message));
        }
        if let Some(first) = self.seen.get(name) {
            self.errors.push(ConfigError::pool(
                path.clone(),
                "name",
                format!(
                    "duplicate pool name {name:?}: also at {first:?}; pool names must be unique \
                     within a tree"
                ),
            ));
        } else {
            self.seen.insert(name.to_string(), path.clone());
        }

        let own = node.config();
        self.check_own_options(&path, &own, node);

        // Presets (unknown ones are errors; the rest of the checks use the resolved config).
        let config = match resolve_pool_config(self.tree, &path, &own) {
            Ok(c) => c,
            Err(e) => {
                self.errors.extend(e);
                own.clone()
            }
        };

        // Integral-guarantee structure.
        if let Some((ancestor, kind)) = &inherited.integral_ancestor {
            for (field, value) in [
                (
                    "integral_guarantees.resource_flow",
                    &config.integral_guarantees.resource_flow,
                ),
                (
                    "integral_guarantees.burst_guarantee_resources",
                    &config.integral_guarantees.burst_guarantee_resources,
                ),
            ] {
                if !value.is_empty() {
                    self.errors.push(ConfigError::pool(
                        path.clone(),
                        field,
                        format!(
                            "is set, but ancestor pool {ancestor:?} has integral guarantee type \
                             {}; pools inside an integral pool may not have their own resource \
                             flow or burst guarantee",
                            kind.name()
                        ),
                    ));
                }
            }
        }

        // Warnings.
        for kind in ResourceKind::ALL {
            if let (Some(limit), Some(guarantee)) = (
                config.resource_limits.raw_of(kind),
                config.strong_guarantee_resources.raw_of(kind),
            ) && limit < guarantee
            {
                self.warnings.push(ConfigError::pool(
                    path.clone(),
                    format!("resource_limits.{kind}"),
                    format!(
                        "{} is below the pool's strong guarantee {}; the guarantee is clipped \
                         to the limit",
                        format_amount(kind, limit),
                        format_amount(kind, guarantee)
                    ),
                ));
            }
        }
        if config.compute_promised_guarantee_fair_share
            && let Some(ancestor) = &inherited.promised_ancestor
        {
            self.warnings.push(
                ConfigError::pool(
                    path.clone(),
                    "compute_promised_guarantee_fair_share",
                    format!(
                        "ancestor pool {ancestor:?} already computes the promised-guarantee fair \
                         share; only the topmost such pool is used"
                    ),
                )
                .with_code(NESTED_PROMISED_GUARANTEE_FAIR_SHARE_POOLS),
            );
        }
        if config.enable_lightweight_operations == Some(true) && config.mode != SchedulingMode::Fifo
        {
            self.warnings.push(ConfigError::pool(
                path.clone(),
                "enable_lightweight_operations",
                "has an effect only in FIFO pools",
            ));
        }

        // Effective values.
        let t = self.tree;
        let max_operation_count = config
            .max_operation_count
            .unwrap_or(t.max_operation_count_per_pool);
        // An explicit running limit above the operation limit is a contradiction and is rejected
        // (as YTsaurus does). The tree's default running limit is not: a pool that only lowers
        // its operation limit below it simply runs at most that many operations.
        let max_running_operation_count = match config.max_running_operation_count {
            Some(explicit) => {
                if explicit > max_operation_count {
                    self.errors.push(ConfigError::pool(
                        path.clone(),
                        "max_running_operation_count",
                        format!(
                            "must not exceed max_operation_count ({explicit} > \
                             {max_operation_count}{})",
                            if config.max_operation_count.is_none() {
                                " from the tree's max_operation_count_per_pool"
                            } else {
                                ""
                            },
                        ),
                    ));
                }
                explicit
            }
            None => t
                .max_running_operation_count_per_pool
                .min(max_operation_count),
        };
        let effective = EffectivePool {
            name: name.to_string(),
            path: path.clone(),
            parent: parent_path.map(|p| p.rsplit('/').next().unwrap_or(p).to_string()),
            depth,
            children: node.pools.keys().cloned().collect(),
            max_operation_count,
            max_running_operation_count,
            fair_share_starvation_tolerance: config
                .fair_share_starvation_tolerance
                .unwrap_or(inherited.tolerance),
            fair_share_starvation_timeout_ms: config
                .fair_share_starvation_timeout_ms
                .unwrap_or(inherited.timeout_ms),
            enable_aggressive_starvation: config
                .enable_aggressive_starvation
                .unwrap_or(inherited.aggressive_starvation),
            allow_aggressive_preemption: config
                .allow_aggressive_preemption
                .unwrap_or(inherited.allow_aggressive_preemption),
            allow_normal_preemption: config.allow_normal_preemption.unwrap_or(true),
            non_preemptible_resource_usage_threshold: config
                .non_preemptible_resource_usage_threshold
                .unwrap_or(inherited.threshold),
            allow_regular_allocations_on_ssd_nodes: inherited.allow_regular_on_ssd
                && config
                    .allow_regular_allocations_on_ssd_nodes
                    .unwrap_or(true),
            enable_lightweight_operations: config.enable_lightweight_operations.unwrap_or(false)
                && config.mode == SchedulingMode::Fifo,
            use_pool_satisfaction_for_scheduling: config
                .use_pool_satisfaction_for_scheduling
                .unwrap_or(inherited.use_pool_satisfaction),
            fifo_pool_scheduling_order: config
                .fifo_pool_scheduling_order
                .unwrap_or(t.fifo_pool_scheduling_order),
            enable_fair_share_truncation_in_fifo_pool: config
                .enable_fair_share_truncation_in_fifo_pool
                .unwrap_or(t.enable_fair_share_truncation_in_fifo_pool),
            relaxed_share_multiplier_limit: config
                .integral_guarantees
                .relaxed_share_multiplier_limit
                .unwrap_or(t.integral_guarantees.relaxed_share_multiplier_limit),
            should_distribute_free_volume_among_children: config
                .integral_guarantees
                .should_distribute_free_volume_among_children
                .unwrap_or(t.should_distribute_free_volume_among_children),
            config,
        };

        let child_inherited = Inherited {
            tolerance: effective.fair_share_starvation_tolerance,
            timeout_ms: effective.fair_share_starvation_timeout_ms,
            aggressive_starvation: effective.enable_aggressive_starvation,
            allow_aggressive_preemption: effective.allow_aggressive_preemption,
            threshold: effective.non_preemptible_resource_usage_threshold,
            allow_regular_on_ssd: effective.allow_regular_allocations_on_ssd_nodes,
            use_pool_satisfaction: effective.use_pool_satisfaction_for_scheduling,
            integral_ancestor: inherited.integral_ancestor.clone().or_else(|| {
                match effective.config.integral_guarantees.guarantee_type {
                    IntegralGuaranteeType::None => None,
                    kind => Some((path.clone(), kind)),
                }
            }),
            promised_ancestor: inherited.promised_ancestor.clone().or_else(|| {
                effective
                    .config
                    .compute_promised_guarantee_fair_share
                    .then(|| path.clone())
            }),
        };
        let config_for_children = effective.config.clone();
        self.pools.push(effective);

        self.check_children(Some(&path), Some(&config_for_children), &node.pools);
        if depth >= MAX_POOL_DEPTH && !node.pools.is_empty() {
            // Do not descend further: the subtree is rejected anyway.
            self.errors.push(ConfigError::pool(
                path.clone(),
                "pools",
                format!(
                    "pools may be nested at most {MAX_POOL_DEPTH} levels deep; this pool is at \
                     depth {depth} and has child pools"
                ),
            ));
            return;
        }
        for (child_name, child) in &node.pools {
            self.visit(child_name, child, Some(&path), &child_inherited, depth + 1);
        }
    }

    /// Range and consistency checks of the options a pool sets itself.
    fn check_own_options(&mut self, path: &str, c: &PoolConfig, node: &PoolNode) {
        let mut err = |field: &str, message: String| {
            self.errors.push(ConfigError::pool(path, field, message));
        };
        if let Some(w) = c.weight {
            if !w.is_finite() {
                err("weight", format!("must be a finite number (got {w})"));
            } else if w <= 0.0 {
                err("weight", format!("must be > 0 (got {w})"));
            } else if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&w) {
                err(
                    "weight",
                    format!("must be in [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}] (got {w:e})"),
                );
            }
        }
        let main = self.tree.main_resource;
        if !c.strong_guarantee_resources.is_empty() && !c.strong_guarantee_resources.is_set(main) {
            err(
                "strong_guarantee_resources",
                format!(
                    "sets {} but not the tree's main resource \"{main}\"; a pool with guarantees \
                     must include the main resource (0 is allowed)",
                    set_resources(&c.strong_guarantee_resources)
                ),
            );
        }
        if let Some(t) = c.fair_share_starvation_tolerance
            && let Err(m) = in_closed_range(t, 0.0, 1.0)
        {
            err("fair_share_starvation_tolerance", m);
        }
        let ig = &c.integral_guarantees;
        if let Some(x) = ig.relaxed_share_multiplier_limit {
            let (lo, hi) = RELAXED_SHARE_MULTIPLIER_RANGE;
            if let Err(m) = in_closed_range(x, lo, hi) {
                err("integral_guarantees.relaxed_share_multiplier_limit", m);
            }
        }
        if ig.guarantee_type == IntegralGuaranteeType::Relaxed
            && !ig.burst_guarantee_resources.is_empty()
        {
            err(
                "integral_guarantees.burst_guarantee_resources",
                format!(
                    "burst guarantees cannot be set for integral guarantee type \"relaxed\" (got {})",
                    ig.burst_guarantee_resources
                ),
            );
        }
        if c.fifo_sort_parameters.is_empty() {
            err("fifo_sort_parameters", "must not be empty".to_string());
        }
        if let Some(Err(e)) = c
            .scheduling_tag_filter
            .as_deref()
            .map(crate::TagFilter::parse)
        {
            err("scheduling_tag_filter", e.to_string());
        }
        if c.mode == SchedulingMode::Fifo {
            if !node.pools.is_empty() {
                let names: Vec<String> = node.pools.keys().map(|k| format!("{k:?}")).collect();
                err(
                    "mode",
                    format!(
                        "a FIFO pool cannot have child pools (has {})",
                        names.join(", ")
                    ),
                );
            }
            if c.create_ephemeral_subpools {
                err(
                    "create_ephemeral_subpools",
                    "a FIFO pool cannot create ephemeral subpools".to_string(),
                );
            }
        }
        // As for explicit pools: only an explicit running limit above the operation limit is a
        // contradiction; the tree's default running limit is capped by the operation limit
        // (YTsaurus accepts `ephemeral_subpool_config: {max_operation_count: 1}`).
        if let Some(e) = &c.ephemeral_subpool_config
            && let Some(running) = e.max_running_operation_count
        {
            let ops = e
                .max_operation_count
                .unwrap_or(self.tree.max_operation_count_per_pool);
            if running > ops {
                err(
                    "ephemeral_subpool_config.max_running_operation_count",
                    format!("must not exceed max_operation_count ({running} > {ops})"),
                );
            }
        }
        for (i, ace) in c.acl.iter().enumerate() {
            if ace.subjects.is_empty() {
                err(
                    &format!("acl[{i}].subjects"),
                    "must not be empty".to_string(),
                );
            }
            if ace.permissions.is_empty() {
                err(
                    &format!("acl[{i}].permissions"),
                    "must not be empty".to_string(),
                );
            }
            for subject in &ace.subjects {
                if subject.trim().is_empty() {
                    err(
                        &format!("acl[{i}].subjects"),
                        "subject names must not be empty".to_string(),
                    );
                }
            }
        }
    }
}

fn set_resources(r: &PartialResources) -> String {
    let names: Vec<&str> = ResourceKind::ALL
        .into_iter()
        .filter(|k| r.is_set(*k))
        .map(ResourceKind::name)
        .collect();
    names.join(", ")
}

fn in_closed_range(x: f64, lo: f64, hi: f64) -> Result<(), String> {
    if x.is_finite() && (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(format!("must be in [{lo}, {hi}] (got {x})"))
    }
}
