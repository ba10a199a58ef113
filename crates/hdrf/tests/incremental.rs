//! The incremental update: a [`Workspace`] kept from one update to the next reuses the
//! functions of unchanged subtrees, and its results must be **bit-identical** to a fresh
//! workspace's.
//!
//! * `kept_workspace_is_bit_identical_to_a_fresh_one` (differential property test): a random
//!   small tree (`fairsched-hdrf-testkit`'s strategy) in one of four option sets is updated with
//!   a kept workspace; then, for several rounds, a random change set is applied (operations'
//!   usage, demand, start time and gang flag, weights, pools' limits, strong guarantees and
//!   flags (gang step function allowed, FIFO reordering, promised guarantee), operations
//!   added, removed and moved, a pool switched between FIFO and fair share, children
//!   reordered, the cluster resized, the clock advanced, sometimes the options changed,
//!   sometimes nothing at all), the tree is rebuilt (in depth- or breadth-first order, so that
//!   indices move as they do when the core builds a fresh tree) and updated with the kept
//!   workspace and with a fresh one. Every attribute (by its bits: `{:?}` prints doubles
//!   exactly), error, warning and the trees' integral state must be equal.
//! * The same on medium seeded trees (integral pools, larger fan-outs).
//! * An unchanged tree reuses every element's functions (the root's in classic mode are
//!   computed at suggestion 1 every time); a change of one operation's usage rebuilds only that
//!   operation and its ancestors; a workspace that forgot its functions reuses nothing; names
//!   all alike (the matching by name then pairs siblings arbitrarily) change no result.

use fairsched_hdrf::{
    ElementIndex, ElementKind, IntegralState, NoClock, PoolMode, ROOT, Tree, UpdateInput,
    UpdateOptions, UpdateOutput, Workspace,
};
use fairsched_hdrf_testkit::strategy::{SmallTreeConfig, small_tree};
use fairsched_hdrf_testkit::{TreeParams, random_tree};
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// The option sets of the property tests (`tests/properties.rs`; FIFO reordering added to the
/// second).
fn modes() -> Vec<UpdateOptions> {
    vec![
        UpdateOptions::default(),
        UpdateOptions {
            enable_step_function_for_gang_operations: true,
            enable_fast_fifo_fair_share_by_fit_factor_computation: true,
            enable_fifo_children_reordering_for_guarantee_utilization: true,
            ..UpdateOptions::default()
        },
        UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: true,
            enable_fast_fifo_fair_share_by_fit_factor_computation: true,
            ..UpdateOptions::default()
        },
        UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: true,
            enable_improved_fair_share_by_fit_factor_computation_distribution_gap: true,
            enable_step_function_for_gang_operations: true,
            ..UpdateOptions::default()
        },
    ]
}

/// SplitMix64: the change sets are drawn from a seed proptest gives.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
}

/// An element and its subtree, independent of arena indices (what a tree is rebuilt from).
#[derive(Clone, Debug)]
struct Node {
    name: String,
    weight: f64,
    kind: ElementKind,
    limits: PartialResources,
    state: IntegralState,
    children: Vec<Node>,
}

fn node(tree: &Tree, i: ElementIndex) -> Node {
    let e = tree.element(i);
    Node {
        name: e.name.clone(),
        weight: e.weight,
        kind: e.kind.clone(),
        limits: e.resource_limits,
        state: e.integral_state,
        children: e.children.iter().map(|&c| node(tree, c)).collect(),
    }
}

/// The tree of `root`, its elements attached depth first or breadth first.
fn build(root: &Node, breadth_first: bool) -> Tree {
    let mut tree = Tree::new();
    {
        let r = tree.element_mut(ROOT);
        r.weight = root.weight;
        r.resource_limits = root.limits;
        r.integral_state = root.state;
    }
    let mut queue: std::collections::VecDeque<(ElementIndex, &Node)> =
        root.children.iter().map(|c| (ROOT, c)).collect();
    while let Some((parent, n)) = if breadth_first {
        queue.pop_front()
    } else {
        queue.pop_back()
    } {
        let i = match &n.kind {
            ElementKind::Pool(spec) => {
                tree.add_pool(parent, n.name.clone(), n.weight, spec.clone())
            }
            ElementKind::Operation(spec) => {
                tree.add_operation(parent, n.name.clone(), n.weight, spec.clone())
            }
            ElementKind::Root => unreachable!("one root"),
        }
        .expect("parent is a composite");
        let e = tree.element_mut(i);
        e.resource_limits = n.limits;
        e.integral_state = n.state;
        if breadth_first {
            queue.extend(n.children.iter().map(|c| (i, c)));
        } else {
            // Popped from the back: pushed in reverse to attach in order.
            queue.extend(n.children.iter().rev().map(|c| (i, c)));
        }
    }
    tree
}

/// Paths (child positions from the root) of every pool, and of every operation.
fn paths(root: &Node) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    fn walk(
        n: &Node,
        path: &mut Vec<usize>,
        pools: &mut Vec<Vec<usize>>,
        ops: &mut Vec<Vec<usize>>,
    ) {
        for (k, c) in n.children.iter().enumerate() {
            path.push(k);
            match c.kind {
                ElementKind::Operation(_) => ops.push(path.clone()),
                _ => {
                    pools.push(path.clone());
                    walk(c, path, pools, ops);
                }
            }
            path.pop();
        }
    }
    let (mut pools, mut ops) = (Vec::new(), Vec::new());
    walk(root, &mut Vec::new(), &mut pools, &mut ops);
    (pools, ops)
}

fn at<'a>(root: &'a mut Node, path: &[usize]) -> &'a mut Node {
    path.iter().fold(root, |n, &k| &mut n.children[k])
}

/// Applies one random change to the tree (or the input); returns what it did.
fn change(rng: &mut Rng, root: &mut Node, input: &mut UpdateInput, fresh: &mut usize) -> String {
    let (pools, ops) = paths(root);
    let cpu_total = input.total_resources.raw_of(ResourceKind::Cpu);
    match rng.below(14) {
        0 | 1 if !ops.is_empty() => {
            let path = rng.pick(&ops);
            let f = rng.pick(&[0.0, 0.25, 0.5, 1.0]);
            let o = at(root, &path);
            let ElementKind::Operation(spec) = &mut o.kind else {
                unreachable!()
            };
            spec.usage = spec.demand.scale(f * 0.3);
            format!("usage of {} = demand × {}", o.name, f * 0.3)
        }
        2 if !ops.is_empty() => {
            let path = rng.pick(&ops);
            let f = rng.pick(&[0.5, 2.0]);
            let o = at(root, &path);
            let ElementKind::Operation(spec) = &mut o.kind else {
                unreachable!()
            };
            spec.demand = spec.demand.scale(f);
            spec.usage = spec.usage.scale(f);
            format!("demand and usage of {} × {f}", o.name)
        }
        3 if !pools.is_empty() || !ops.is_empty() => {
            let path = if rng.chance(0.5) && !pools.is_empty() {
                rng.pick(&pools)
            } else if !ops.is_empty() {
                rng.pick(&ops)
            } else {
                rng.pick(&pools)
            };
            let w = rng.pick(&[0.5, 1.0, 2.0, 3.5]);
            let n = at(root, &path);
            n.weight = w;
            format!("weight of {} = {w}", n.name)
        }
        4 if !pools.is_empty() => {
            let path = rng.pick(&pools);
            let n = at(root, &path);
            if rng.chance(0.3) {
                n.limits = PartialResources::EMPTY;
                format!("limits of {} removed", n.name)
            } else {
                let share = rng.pick(&[0.1, 0.3, 0.6]);
                let raw = (share * cpu_total as f64) as i64;
                n.limits.set_raw(ResourceKind::Cpu, Some(raw));
                format!("cpu limit of {} = {share}", n.name)
            }
        }
        5 if !pools.is_empty() => {
            let path = rng.pick(&pools);
            let share = rng.pick(&[0.0, 0.05, 0.2]);
            let n = at(root, &path);
            let ElementKind::Pool(spec) = &mut n.kind else {
                unreachable!()
            };
            let raw = (share * cpu_total as f64) as i64;
            spec.strong_guarantee_resources
                .set_raw(ResourceKind::Cpu, (raw > 0).then_some(raw));
            format!("cpu guarantee of {} = {share}", n.name)
        }
        6 => {
            let parent: Vec<usize> = if pools.is_empty() || rng.chance(0.2) {
                Vec::new()
            } else {
                rng.pick(&pools)
            };
            let p = at(root, &parent);
            let mut spec = fairsched_hdrf::OperationSpec {
                demand: input.total_resources.scale(rng.pick(&[0.05, 0.2, 0.5])),
                start_time: rng.below(100) as f64,
                gang: rng.chance(0.2),
                ..Default::default()
            };
            spec.usage = spec.demand.scale(rng.pick(&[0.0, 0.1]));
            *fresh += 1;
            let name = format!("new{fresh}");
            let k = rng.below(p.children.len() + 1);
            p.children.insert(
                k,
                Node {
                    name: name.clone(),
                    weight: 1.0,
                    kind: ElementKind::Operation(spec),
                    limits: PartialResources::EMPTY,
                    state: IntegralState::default(),
                    children: Vec::new(),
                },
            );
            format!("{name} added")
        }
        7 if !ops.is_empty() => {
            let path = rng.pick(&ops);
            let (last, parent) = path.split_last().expect("not the root");
            let removed = at(root, parent).children.remove(*last);
            format!("{} removed", removed.name)
        }
        8 if !ops.is_empty() => {
            let path = rng.pick(&ops);
            let (last, parent) = path.split_last().expect("not the root");
            let moved = at(root, parent).children.remove(*last);
            let (pools, _) = paths(root);
            let target: Vec<usize> = if pools.is_empty() {
                Vec::new()
            } else {
                rng.pick(&pools)
            };
            let t = at(root, &target);
            let k = rng.below(t.children.len() + 1);
            let name = moved.name.clone();
            t.children.insert(k, moved);
            format!("{name} moved")
        }
        9 if !pools.is_empty() => {
            let path = rng.pick(&pools);
            let n = at(root, &path);
            let ElementKind::Pool(spec) = &mut n.kind else {
                unreachable!()
            };
            spec.mode = match spec.mode {
                PoolMode::Fifo => PoolMode::FairShare,
                PoolMode::FairShare => PoolMode::Fifo,
            };
            format!("mode of {} = {:?}", n.name, spec.mode)
        }
        10 if !pools.is_empty() => {
            let path = rng.pick(&pools);
            let n = at(root, &path);
            let len = n.children.len();
            if len >= 2 {
                let (a, b) = (rng.below(len), rng.below(len));
                n.children.swap(a, b);
            }
            format!("children of {} swapped", n.name)
        }
        11 if !ops.is_empty() => {
            let path = rng.pick(&ops);
            let o = at(root, &path);
            let ElementKind::Operation(spec) = &mut o.kind else {
                unreachable!()
            };
            spec.gang = !spec.gang;
            format!("gang of {} = {}", o.name, spec.gang)
        }
        12 if !ops.is_empty() => {
            let path = rng.pick(&ops);
            let t = rng.below(100) as f64;
            let o = at(root, &path);
            let ElementKind::Operation(spec) = &mut o.kind else {
                unreachable!()
            };
            spec.start_time = t;
            format!("start time of {} = {t}", o.name)
        }
        13 if !pools.is_empty() => {
            let path = rng.pick(&pools);
            let which = rng.below(3);
            let n = at(root, &path);
            let ElementKind::Pool(spec) = &mut n.kind else {
                unreachable!()
            };
            let flag = match which {
                0 => &mut spec.allow_gang_step_function,
                1 => &mut spec.enable_fifo_children_reordering_for_guarantee_utilization,
                _ => &mut spec.enable_promised_guarantee_fair_share,
            };
            *flag ^= true;
            format!("flag {which} of {} toggled", n.name)
        }
        _ => {
            let f = rng.pick(&[0.9, 1.1]);
            let total = input.total_resources.scale(f);
            input.total_resources = total;
            format!("cluster × {f}")
        }
    }
}

/// Every attribute by its bits (`{:?}` prints a double exactly), the errors and warnings.
fn check_identical(
    round: usize,
    kept: &UpdateOutput,
    fresh: &UpdateOutput,
    kept_tree: &Tree,
    fresh_tree: &Tree,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(kept.attributes.len(), fresh.attributes.len());
    for (i, (a, b)) in kept.attributes.iter().zip(&fresh.attributes).enumerate() {
        let (a, b) = (format!("{a:?}"), format!("{b:?}"));
        prop_assert!(
            a == b,
            "round {}, element {} ({}): kept workspace {} != fresh {}",
            round,
            i,
            fresh_tree.element(i).name,
            a,
            b
        );
    }
    prop_assert_eq!(format!("{:?}", kept.errors), format!("{:?}", fresh.errors));
    prop_assert_eq!(
        format!("{:?}", kept.warnings),
        format!("{:?}", fresh.warnings)
    );
    prop_assert_eq!(format!("{kept_tree:?}"), format!("{fresh_tree:?}"));
    Ok(())
}

/// Updates `tree` with a kept workspace, then `rounds` times: random changes, the tree rebuilt,
/// updated with the kept workspace and a fresh one, compared. Returns the reused counts.
fn run_rounds(
    mut tree: Tree,
    mut input: UpdateInput,
    seed: u64,
    rounds: usize,
) -> Result<Vec<usize>, TestCaseError> {
    let mut rng = Rng(seed);
    let mut workspace = Workspace::new();
    let mut out = UpdateOutput::default();
    workspace.update_into(&mut tree, &input, &NoClock, &mut out);
    let mut fresh_names = 0;
    let mut reused = Vec::new();
    for round in 0..rounds {
        let mut root = node(&tree, ROOT);
        let mut log = Vec::new();
        if !rng.chance(0.15) {
            for _ in 0..=rng.below(4) {
                log.push(change(&mut rng, &mut root, &mut input, &mut fresh_names));
            }
        }
        if rng.chance(0.5) {
            input.previous_update_seconds = Some(input.now_seconds);
            input.now_seconds += 10.0;
        }
        if rng.chance(0.05) {
            input
                .options
                .enable_fast_fifo_fair_share_by_fit_factor_computation ^= true;
        }
        let mut kept_tree = build(&root, rng.chance(0.5));
        let mut fresh_tree = kept_tree.clone();
        workspace.update_into(&mut kept_tree, &input, &NoClock, &mut out);
        let fresh = fairsched_hdrf::update(&mut fresh_tree, &input, &NoClock);
        prop_assert_eq!(fresh.timings.reused_elements, 0);
        check_identical(round, &out, &fresh, &kept_tree, &fresh_tree)
            .map_err(|e| TestCaseError::fail(format!("{e}; changes: {log:?}")))?;
        reused.push(out.timings.reused_elements);
        tree = kept_tree;
    }
    Ok(reused)
}

fn config(cases: u32) -> ProptestConfig {
    fairsched_hdrf_testkit::strategy::fixed_seed_config(cases, 0x00fa_1c5e_d5ee_d002)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn kept_workspace_is_bit_identical_to_a_fresh_one(
        spec in small_tree(SmallTreeConfig::default()),
        mode in 0usize..4,
        seed in any::<u64>(),
    ) {
        let (tree, input) = spec.build(&modes()[mode]);
        run_rounds(tree, input, seed, 6)?;
    }
}

/// Medium seeded trees (integral pools, fan-outs where classic sums are balanced), every mode.
#[test]
fn medium_trees_are_bit_identical_with_a_kept_workspace() {
    for seed in 0..3u64 {
        for (m, options) in modes().into_iter().enumerate() {
            let params = TreeParams::benchmark(60, 1_500, options);
            let (tree, input) = random_tree(seed, &params);
            let reused = run_rounds(tree, input, seed * 10 + m as u64, 4)
                .unwrap_or_else(|e| panic!("seed {seed}, mode {m}: {e}"));
            assert!(
                reused.iter().any(|&r| r > 0),
                "seed {seed}, mode {m}: nothing reused in {reused:?}"
            );
        }
    }
}

/// Updates `tree` twice with one workspace (the second time a clone of `second`) and returns
/// the second output.
fn second_update(tree: &Tree, second: &Tree, input: &UpdateInput) -> UpdateOutput {
    let mut workspace = Workspace::new();
    let first = workspace.update(&mut tree.clone(), input, &NoClock);
    assert_eq!(first.timings.reused_elements, 0);
    let out = workspace.update(&mut second.clone(), input, &NoClock);
    let fresh = fairsched_hdrf::update(&mut second.clone(), input, &NoClock);
    assert_eq!(
        format!("{:?}", out.attributes),
        format!("{:?}", fresh.attributes)
    );
    assert_eq!(out.warnings, fresh.warnings);
    out
}

#[test]
fn an_unchanged_tree_reuses_every_element() {
    for (m, options) in modes().into_iter().enumerate() {
        let improved = options.enable_improved_fair_share_by_fit_factor_computation;
        let params = TreeParams::benchmark(40, 400, options);
        let (tree, input) = random_tree(7, &params);
        let out = second_update(&tree, &tree, &input);
        assert!(out.warnings.is_empty(), "mode {m}: {:?}", out.warnings);
        // Classic mode computes the root at suggestion 1 every time.
        let expected = if improved { tree.len() } else { tree.len() - 1 };
        assert_eq!(out.timings.reused_elements, expected, "mode {m}");
    }
}

#[test]
fn a_workspace_that_forgot_its_functions_reuses_nothing() {
    let params = TreeParams::benchmark(20, 200, UpdateOptions::default());
    let (tree, input) = random_tree(9, &params);
    let mut workspace = Workspace::new();
    workspace.update(&mut tree.clone(), &input, &NoClock);
    workspace.forget_functions();
    let out = workspace.update(&mut tree.clone(), &input, &NoClock);
    assert_eq!(out.timings.reused_elements, 0);
    let fresh = fairsched_hdrf::update(&mut tree.clone(), &input, &NoClock);
    assert_eq!(format!("{out:?}"), format!("{fresh:?}"));
    // The next update reuses again.
    let again = workspace.update(&mut tree.clone(), &input, &NoClock);
    assert_eq!(again.timings.reused_elements, tree.len() - 1);
}

#[test]
fn a_changed_operation_rebuilds_only_its_path() {
    for (m, options) in modes().into_iter().enumerate() {
        let params = TreeParams::benchmark(40, 400, options);
        let (tree, input) = random_tree(8, &params);
        for op in (0..tree.len())
            .filter(|&i| tree.element(i).is_operation())
            .step_by(37)
        {
            let mut changed = tree.clone();
            let spec = changed
                .element_mut(op)
                .operation_mut()
                .expect("an operation");
            if spec.demand == Resources::ZERO {
                continue;
            }
            spec.usage = spec.demand.scale(0.37);
            let out = second_update(&tree, &changed, &input);
            assert!(out.warnings.is_empty(), "mode {m}: {:?}", out.warnings);
            // The operation and its ancestors, the root included.
            let mut path = 1;
            let mut cur = op;
            while let Some(p) = tree.element(cur).parent {
                path += 1;
                cur = p;
            }
            let expected = tree.len() - path;
            assert_eq!(
                out.timings.reused_elements, expected,
                "mode {m}, operation {op}"
            );
        }
    }
}

/// Names are only the matching's guess: with every element named alike (so the match by name
/// pairs siblings arbitrarily whenever children change), results stay bit-identical.
#[test]
fn duplicate_names_only_lose_reuse() {
    for (m, options) in modes().into_iter().enumerate() {
        let params = TreeParams::benchmark(20, 200, options);
        let (mut tree, input) = random_tree(11, &params);
        for i in 1..tree.len() {
            tree.element_mut(i).name = "same".to_string();
        }
        run_rounds(tree, input, 100 + m as u64, 8).unwrap_or_else(|e| panic!("mode {m}: {e}"));
    }
}
