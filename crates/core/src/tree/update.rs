//! A fair-share update of one tree taken apart, so that a driver may compute it away from the
//! scheduler: [`PoolTree::prepare_update`] copies what the computation reads (the pools'
//! configuration, shared; each operation's demand, usage, weight and limits, flat) and lends it
//! the tree's working memory; [`TreeUpdate::compute`] builds the tree of pools and operations,
//! runs the pure `hdrf` update and builds the new arena with its statuses from it (any
//! thread); [`PoolTree::apply_update`] puts that arena in place. Heartbeats in between use the
//! previous shares.

use super::*;
use crate::model::{Millis, Operation, OperationId};
use crate::preemptible::PreemptionPriority;
use fairsched_hdrf::{UpdateOutput, Workspace};

/// An operation as the update reads it, copied when it is prepared.
#[derive(Clone, Debug)]
pub(crate) struct PreparedOperation {
    id: OperationId,
    pool: String,
    weight: f64,
    resource_limits: fairsched_resources::PartialResources,
    input: HdrfOperation,
    settings: OperationSettings,
    /// In graceful preemption mode.
    graceful: bool,
}

/// Running operation `op` as an update of tree `t` reads it (`None`: not in that tree);
/// `ssd_media` as [`PoolTree::ssd_media`] gives them.
pub(crate) fn prepare_operation(
    t: usize,
    op: &Operation,
    ssd_media: Option<&[String]>,
) -> Option<PreparedOperation> {
    let mine = op.in_tree(t)?;
    Some(PreparedOperation {
        id: op.spec.id.clone(),
        pool: mine.pool.clone(),
        weight: mine.weight.unwrap_or(1.0),
        resource_limits: mine.resource_limits,
        input: HdrfOperation {
            demand: op.demand_in(t),
            usage: mine.usage,
            gang: op.is_gang(),
            best_allocation_share: ResourceVector::ONES,
            start_time: op.start_time as f64,
            pending_job_count: u64::from(op.pending_job_count()),
        },
        settings: OperationSettings {
            scheduling_tag_filter: op.spec.scheduling_tag_filter.clone(),
            fair_share_starvation_tolerance: op.spec.fair_share_starvation_tolerance,
            fair_share_starvation_timeout_ms: op.spec.fair_share_starvation_timeout_ms,
            pending_job_count: op.pending_job_count(),
            ssd_task: ssd_media
                .is_some_and(|media| op.spec.tasks.iter().any(|task| asks_for_media(task, media))),
        },
        graceful: op.spec.preemption_mode == crate::model::PreemptionMode::Graceful,
    })
}

/// What the update needs of an operation after the computation, taken when it is prepared.
#[derive(Clone, Debug)]
pub(crate) struct OperationSettings {
    scheduling_tag_filter: Option<String>,
    fair_share_starvation_tolerance: Option<f64>,
    fair_share_starvation_timeout_ms: Option<u64>,
    pending_job_count: u32,
    /// Some task asks for disk on an SSD medium of `ssd_priority_preemption` (enabled).
    ssd_task: bool,
}

/// One tree's fair-share update, prepared and (once computed) ready to apply.
pub struct TreeUpdate {
    t: usize,
    now: Millis,
    total: Resources,
    /// The tree's configuration generation when prepared.
    generation: u64,
    /// The pools' configuration when prepared (the update is installed only if it is still
    /// the tree's: see `generation`), the ephemeral pools then, and the operations.
    validated: Arc<ValidatedTree>,
    ephemeral: BTreeMap<String, EphemeralPool>,
    operations: Vec<PreparedOperation>,
    /// The pools' integral states, lent by the tree (given back at install or return).
    integral_states: BTreeMap<String, IntegralState>,
    previous_update_ms: Option<Millis>,
    /// The tree the computation builds and updates.
    tree: Tree,
    workspace: Workspace,
    kinds: Vec<ElementRef>,
    limits: Vec<Resources>,
    by_pool: BTreeMap<String, ElementIndex>,
    by_operation: BTreeMap<OperationId, ElementIndex>,
    /// Per element: the operation's settings (`None` for pools and the root).
    settings: Vec<Option<OperationSettings>>,
    /// Per element: a pool's own settings that its subtree inherits (`None` for the root and
    /// operations), and whether it schedules in FIFO order.
    pools: Vec<Option<PoolSettings>>,
    fifo_order: Vec<bool>,
    any_graceful: bool,
    /// The new arena, built with the computation (off the scheduler's thread).
    arena: Option<Arena>,
    /// Each pool's integral state after the computation.
    integral: Vec<(String, IntegralState)>,
    /// The tree's starvation clocks as prepared, and as the computed statuses advanced them.
    below_since: BTreeMap<String, Millis>,
    below_since_after: Option<BTreeMap<String, Millis>>,
    /// Operations by preemption priority under the computed statuses.
    targets: BTreeMap<PreemptionPriority, Vec<ElementIndex>>,
    /// When a computed starvation status changes next by the clock alone.
    next_status_change: Option<Millis>,
}

/// What a pool's subtree inherits from its configuration (see `inherit_settings`).
#[derive(Clone, Debug)]
struct PoolSettings {
    scheduling_tag_filter: Option<String>,
    allow_regular_allocations_on_ssd_nodes: Option<bool>,
    fair_share_starvation_tolerance: Option<f64>,
    fair_share_starvation_timeout_ms: Option<u64>,
    enable_aggressive_starvation: Option<bool>,
    use_pool_satisfaction_for_scheduling: Option<bool>,
}

impl PoolSettings {
    fn of(c: &PoolConfig) -> PoolSettings {
        PoolSettings {
            scheduling_tag_filter: c.scheduling_tag_filter.clone(),
            allow_regular_allocations_on_ssd_nodes: c.allow_regular_allocations_on_ssd_nodes,
            fair_share_starvation_tolerance: c.fair_share_starvation_tolerance,
            fair_share_starvation_timeout_ms: c.fair_share_starvation_timeout_ms,
            enable_aggressive_starvation: c.enable_aggressive_starvation,
            use_pool_satisfaction_for_scheduling: c.use_pool_satisfaction_for_scheduling,
        }
    }
}

impl TreeUpdate {
    /// Runs the fair-share computation (pure; the tree's working memory is lent to it) and
    /// builds the arena that installing it puts in place.
    pub fn compute(&mut self) {
        self.build_tree();
        let config = self.validated.config();
        let input = UpdateInput {
            total_resources: self.total,
            now_seconds: self.now as f64 / 1000.0,
            previous_update_seconds: self.previous_update_ms.map(|t| t as f64 / 1000.0),
            options: update_options(config),
        };
        let output = self
            .workspace
            .update(&mut self.tree, &input, &fairsched_hdrf::NoClock);
        self.integral = self
            .by_pool
            .iter()
            .map(|(name, &index)| (name.clone(), self.tree.element(index).integral_state))
            .collect();
        let mut arena = self.build_arena(output);
        let mut below_since = self.below_since.clone();
        let config = self.validated.config();
        self.next_status_change =
            crate::status::update_statuses(&mut arena, config, &mut below_since, self.now);
        self.targets = crate::preemptible::preemption_targets(&arena, config, |i| {
            self.settings[i].as_ref().is_some_and(|op| op.ssd_task)
        });
        self.below_since_after = Some(below_since);
        self.arena = Some(arena);
    }

    /// Operations by preemption priority under the computed statuses (taken once).
    pub(crate) fn take_targets(&mut self) -> BTreeMap<PreemptionPriority, Vec<ElementIndex>> {
        std::mem::take(&mut self.targets)
    }

    /// The index of the tree it updates.
    pub fn tree_index(&self) -> usize {
        self.t
    }
}

impl PoolTree {
    /// Whether `update` was prepared from this tree's current configuration.
    pub(crate) fn update_is_current(&self, update: &TreeUpdate) -> bool {
        update.generation == self.generation
    }

    /// Takes back the working memory lent to an update that will not be installed.
    pub(crate) fn return_workspace(&mut self, update: &mut TreeUpdate) {
        self.workspace = std::mem::take(&mut update.workspace);
        self.below_fair_share_since = std::mem::take(&mut update.below_since);
        self.integral_states = std::mem::take(&mut update.integral_states);
    }

    /// Prepares an update over the pools and the given operations of this tree (index `t`,
    /// in start order, each copied by [`prepare_operation`]); `total` is the resources of the
    /// tree's nodes, `generation` the tree's configuration generation when the operations
    /// were copied. The pools' configuration is shared: the tree is built with the
    /// computation. The tree's working memory, its integral states and its starvation clocks
    /// go with it until [`PoolTree::apply_update`] (or [`PoolTree::return_workspace`]).
    pub(crate) fn prepare_update(
        &mut self,
        t: usize,
        now: Millis,
        total: Resources,
        generation: u64,
        operations: Vec<PreparedOperation>,
    ) -> TreeUpdate {
        TreeUpdate {
            t,
            now,
            total,
            generation,
            validated: Arc::clone(&self.validated),
            ephemeral: self.ephemeral.clone(),
            any_graceful: operations.iter().any(|op| op.graceful),
            operations,
            integral_states: std::mem::take(&mut self.integral_states),
            previous_update_ms: self.last_update_ms,
            tree: Tree::new(),
            workspace: std::mem::take(&mut self.workspace),
            kinds: Vec::new(),
            limits: Vec::new(),
            by_pool: BTreeMap::new(),
            by_operation: BTreeMap::new(),
            settings: Vec::new(),
            pools: Vec::new(),
            fifo_order: Vec::new(),
            arena: None,
            integral: Vec::new(),
            below_since: std::mem::take(&mut self.below_fair_share_since),
            below_since_after: None,
            targets: BTreeMap::new(),
            next_status_change: None,
        }
    }

    /// The disk media that make an operation an SSD one in this tree (`None`: SSD priority
    /// preemption is off), for [`prepare_operation`].
    pub(crate) fn ssd_media(&self) -> Option<&[String]> {
        let ssd = &self.config().ssd_priority_preemption;
        ssd.enable.then_some(ssd.medium_names.as_slice())
    }

    /// Installs a computed update ([`TreeUpdate::compute`]) prepared from this tree: the new
    /// arena with the shares and statuses (built with the computation), the integral states
    /// and starvation clocks, the working memory back. An update prepared before the tree's
    /// configuration changed is not installed (false); its working memory and the clocks as
    /// they were come back all the same. The previous arena goes into `update` (for the
    /// driver to drop where that costs it nothing).
    pub(crate) fn apply_update(&mut self, update: &mut TreeUpdate) -> bool {
        if update.generation != self.generation {
            self.return_workspace(update);
            return false;
        }
        self.workspace = std::mem::take(&mut update.workspace);
        self.integral_states = std::mem::take(&mut update.integral_states);
        let arena = update.arena.as_mut().expect("apply a computed update");
        std::mem::swap(&mut self.arena, arena);
        self.below_fair_share_since = update
            .below_since_after
            .take()
            .expect("apply a computed update");
        self.last_update_ms = Some(update.now);
        self.next_status_change_ms = update.next_status_change;
        for (name, state) in std::mem::take(&mut update.integral) {
            self.integral_states.insert(name, state);
        }
        true
    }
}

impl TreeUpdate {
    /// Builds the tree the computation updates from what was prepared: explicit pools in
    /// configuration order (parents before children), then ephemeral ones, then the
    /// operations in start order.
    fn build_tree(&mut self) {
        let validated = Arc::clone(&self.validated);
        let infer_weights = validated
            .config()
            .infer_weight_from_guarantees_share_multiplier
            .is_some();
        let mut tree = Tree::new();
        self.kinds = vec![ElementRef::Root];
        self.limits = vec![Resources::infinite()];
        self.pools = vec![None];
        self.fifo_order = vec![false];
        self.by_pool = BTreeMap::new();
        /// Adds a pool and what the update records of it.
        fn add_pool(
            this: &mut TreeUpdate,
            tree: &mut Tree,
            parent: ElementIndex,
            name: &str,
            config: &PoolConfig,
            infer_weights: bool,
            fifo_order: bool,
        ) -> ElementIndex {
            let index = tree
                .add_pool(
                    parent,
                    name,
                    config.weight.unwrap_or(1.0),
                    pool_spec(config, infer_weights),
                )
                .expect("parent is a pool or the root");
            tree.element_mut(index).resource_limits = config.resource_limits;
            if let Some(state) = this.integral_states.get(name) {
                tree.element_mut(index).integral_state = *state;
            }
            this.kinds.push(ElementRef::Pool(name.to_string()));
            this.limits.push(config.resource_limits.or_infinite());
            this.pools.push(Some(PoolSettings::of(config)));
            this.fifo_order.push(fifo_order);
            this.by_pool.insert(name.to_string(), index);
            index
        }
        fn add_explicit(
            this: &mut TreeUpdate,
            tree: &mut Tree,
            validated: &ValidatedTree,
            parent: ElementIndex,
            nodes: &BTreeMap<String, PoolNode>,
            infer_weights: bool,
        ) {
            for (name, node) in nodes {
                let Some(effective) = validated.pool(name) else {
                    continue;
                };
                let fifo = effective.fifo_pool_scheduling_order == FifoPoolSchedulingOrder::Fifo;
                let index = add_pool(
                    this,
                    tree,
                    parent,
                    name,
                    &effective.config,
                    infer_weights,
                    fifo,
                );
                add_explicit(this, tree, validated, index, &node.pools, infer_weights);
            }
        }
        add_explicit(
            self,
            &mut tree,
            &validated,
            ROOT,
            &validated.tree.pools,
            infer_weights,
        );
        // Ephemeral pools, each after its parent (an explicit pool, the root, or a removed
        // pool kept for its ephemeral subpools, itself ephemeral).
        let ephemeral = std::mem::take(&mut self.ephemeral);
        let mut waiting: Vec<(&String, &EphemeralPool)> = ephemeral.iter().collect();
        // Set when a pass adds nothing: the parents left exist nowhere (not reachable through
        // the scheduler's commands), so the pools go under the root rather than vanish.
        let mut stuck = false;
        while !waiting.is_empty() {
            let before = waiting.len();
            waiting.retain(|&(name, e)| {
                let parent = if stuck || e.parent == ROOT_NAME {
                    ROOT
                } else if let Some(&p) = self.by_pool.get(&e.parent) {
                    p
                } else {
                    return true;
                };
                // (Ephemeral pools are never FIFO-ordered: their order is not configured.)
                add_pool(
                    self,
                    &mut tree,
                    parent,
                    name,
                    &e.config,
                    infer_weights,
                    false,
                );
                false
            });
            stuck = waiting.len() == before;
        }
        let operations = std::mem::take(&mut self.operations);
        self.by_operation = BTreeMap::new();
        self.settings = Vec::new();
        for op in operations {
            let Some(&parent) = self.by_pool.get(&op.pool) else {
                continue;
            };
            let index = tree
                .add_operation(parent, op.id.0.clone(), op.weight, op.input)
                .expect("pools accept operations");
            tree.element_mut(index).resource_limits = op.resource_limits;
            self.kinds.push(ElementRef::Operation(op.id.clone()));
            self.limits.push(op.resource_limits.or_infinite());
            self.pools.push(None);
            self.fifo_order.push(false);
            self.by_operation.insert(op.id, index);
            self.settings.resize(self.kinds.len() - 1, None);
            self.settings.push(Some(op.settings));
        }
        self.settings.resize(self.kinds.len(), None);
        self.tree = tree;
    }

    /// The arena of the computed update: its elements with their shares, FIFO order and
    /// limits, and the settings they inherit down the tree.
    fn build_arena(&mut self, output: UpdateOutput) -> Arena {
        let config = self.validated.config();
        let kinds = std::mem::take(&mut self.kinds);
        let mut elements: Vec<Element> = Vec::with_capacity(self.tree.len());
        // (The update's own element kinds and children move into the arena: no copies.)
        for (i, (attrs, kind)) in output.attributes.into_iter().zip(kinds).enumerate() {
            let e = self.tree.element_mut(i);
            let fifo = e.pool().is_some_and(|p| p.mode == PoolMode::Fifo);
            let schedule_in_fifo_order = fifo && self.fifo_order[i];
            let children = std::mem::take(&mut e.children);
            let parent = e.parent;
            elements.push(Element {
                kind,
                parent,
                children,
                fifo,
                schedule_in_fifo_order,
                resource_limits: self.limits[i],
                attrs,
                scheduling_status: SchedulingStatus::Normal,
                starvation_status: StarvationStatus::NonStarving,
                tolerance: config.fair_share_starvation_tolerance,
                starvation_timeout_ms: config.fair_share_starvation_timeout_ms,
                aggressive_starvation_enabled: config.enable_aggressive_starvation,
                use_pool_satisfaction_for_scheduling: config.use_pool_satisfaction_for_scheduling,
                timeout_scale: 1.0,
                guarantee_priority: false,
                allow_regular_on_ssd: true,
                tag_set: 0,
                fifo_limited: false,
            });
        }
        // FIFO pools schedule in FIFO order; with `max_schedulable_element_count_in_fifo_pool`
        // = N, only the operations up to the N-th one with a fair share get jobs.
        let fifo_limit = config.max_schedulable_element_count_in_fifo_pool;
        for i in 0..elements.len() {
            if elements[i].fifo {
                let mut children = std::mem::take(&mut elements[i].children);
                children.sort_by_key(|&c| elements[c].attrs.fifo_index.unwrap_or(usize::MAX));
                if let Some(limit) = fifo_limit {
                    let mut with_share = 0;
                    for &c in &children {
                        let limited = with_share >= limit;
                        elements[c].fifo_limited = limited;
                        if !limited && !elements[c].attrs.fair_share.total.is_zero() {
                            with_share += 1;
                        }
                    }
                }
                elements[i].children = children;
            }
        }
        let mut arena = Arena {
            elements,
            by_pool: std::mem::take(&mut self.by_pool),
            by_operation: std::mem::take(&mut self.by_operation),
            total_resources: self.total,
            errors: output.errors,
            computed_at: Some(self.now),
            any_graceful: self.any_graceful,
            tag_sets: vec![Vec::new()],
            ssd: {
                let ssd = &config.ssd_priority_preemption;
                // Validated when the configuration was accepted (required when enabled).
                ssd.node_tag_filter
                    .as_deref()
                    .filter(|f| !f.trim().is_empty())
                    .and_then(|f| fairsched_config::TagFilter::parse(f).ok())
                    .map(|filter| SsdNodes {
                        filter,
                        media: ssd.medium_names.clone(),
                        enabled: ssd.enable,
                    })
            },
        };
        self.inherit_settings(&mut arena);
        if config.enable_guarantee_priority_scheduling {
            for e in &mut arena.elements {
                if matches!(e.kind, ElementRef::Operation(_)) {
                    e.guarantee_priority = below_promised_guarantee(&e.attrs);
                }
            }
        }
        arena
    }

    /// Effective starvation and scheduling settings, inherited down the tree.
    fn inherit_settings(&self, arena: &mut Arena) {
        let settings = &self.settings;
        let config = self.validated.config();
        let coefficient = config.allocation_count_preemption_timeout_coefficient;
        let honour_tags = config.enable_scheduling_tags;
        for i in 1..arena.elements.len() {
            let parent = arena.elements[i].parent.unwrap_or(ROOT);
            let (tol, timeout, aggressive, use_sat, regular_on_ssd, tag_set) = {
                let p = &arena.elements[parent];
                (
                    p.tolerance,
                    p.starvation_timeout_ms,
                    p.aggressive_starvation_enabled,
                    p.use_pool_satisfaction_for_scheduling,
                    p.allow_regular_on_ssd,
                    p.tag_set,
                )
            };
            let pool_config = self.pools.get(i).and_then(Option::as_ref);
            let op = settings.get(i).and_then(Option::as_ref);
            // Its own scheduling tag filter joins those of its ancestors (validated when the
            // pool tree or the operation was accepted).
            let own_filter = match (pool_config, op) {
                (Some(c), _) => c.scheduling_tag_filter.clone(),
                (_, Some(op)) => op.scheduling_tag_filter.clone(),
                _ => None,
            }
            .and_then(|text| fairsched_config::TagFilter::parse(&text).ok())
            .filter(|f| !f.is_empty());
            let tag_set = match own_filter {
                Some(filter) if honour_tags => {
                    let mut set = arena.tag_sets[tag_set].clone();
                    set.push(filter);
                    arena.tag_sets.push(set);
                    arena.tag_sets.len() - 1
                }
                _ => tag_set,
            };
            let e = &mut arena.elements[i];
            e.tag_set = tag_set;
            e.tolerance = tol;
            e.starvation_timeout_ms = timeout;
            e.aggressive_starvation_enabled = aggressive;
            e.use_pool_satisfaction_for_scheduling = use_sat;
            e.allow_regular_on_ssd = regular_on_ssd;
            if let Some(c) = pool_config {
                if let Some(v) = c.allow_regular_allocations_on_ssd_nodes {
                    e.allow_regular_on_ssd = v;
                }
                if let Some(v) = c.fair_share_starvation_tolerance {
                    e.tolerance = v;
                }
                if let Some(v) = c.fair_share_starvation_timeout_ms {
                    e.starvation_timeout_ms = v;
                }
                if let Some(v) = c.enable_aggressive_starvation {
                    e.aggressive_starvation_enabled = v;
                }
                if let Some(v) = c.use_pool_satisfaction_for_scheduling {
                    e.use_pool_satisfaction_for_scheduling = v;
                }
            }
            // An operation may only be more conservative than its pool; small operations
            // starve sooner (timeouts scaled by pending jobs / coefficient when below 1).
            if let Some(op) = op {
                if let Some(v) = op.fair_share_starvation_tolerance {
                    e.tolerance = e.tolerance.min(v);
                }
                if let Some(v) = op.fair_share_starvation_timeout_ms {
                    e.starvation_timeout_ms = e.starvation_timeout_ms.max(v);
                }
                let ratio = f64::from(op.pending_job_count) / coefficient.max(1.0);
                if ratio < 1.0 {
                    e.timeout_scale = ratio;
                }
            }
        }
    }
}

/// Scheduler spec §1.3: an operation whose promised-guarantee fair share strictly dominates
/// its usage (on every resource it demands) is served first when
/// `enable_guarantee_priority_scheduling` is on.
fn below_promised_guarantee(attrs: &ElementAttributes) -> bool {
    const EPS: f64 = 1e-9;
    let promised = &attrs.promised_guarantee_fair_share.total;
    (0..fairsched_resources::RESOURCE_COUNT).any(|r| promised[r] > EPS)
        && (0..fairsched_resources::RESOURCE_COUNT)
            .filter(|&r| attrs.demand_share[r] > EPS)
            .all(|r| attrs.usage_share[r] + EPS < promised[r])
}
