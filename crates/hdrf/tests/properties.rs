//! Property tests of the fair-share update on random trees (`fairsched-hdrf-testkit`).
//!
//! Every property runs in four option sets (classic / improved mode, gang step function off /
//! on, plus the fast FIFO path and the distribution gap on some of them), see [`modes`].
//! Failing inputs are printed by proptest as a shrunk [`TreeSpec`] (percentages of the testkit's
//! reference cluster, weights in tenths).
//!
//! Notation: `fs(v)` is `fair_share.total` of element v, `D(v)` its `demand_share`, `Λ(v)` its
//! `limits_share`, `LD(v)` its `limited_demand_share` (= `S_v(1)`), `G(v)` its guarantee share
//! `strong_guarantee_share + proposed_integral_share` (after adjustment). Vector comparisons are
//! componentwise over all five resources (resources the cluster lacks have share 0 everywhere).

use fairsched_hdrf::{
    ElementIndex, NoClock, PoolMode, ROOT, Tree, UpdateOptions, UpdateOutput, update,
};
use fairsched_hdrf_testkit::strategy::{SmallTreeConfig, flat_tree, small_tree};
use fairsched_hdrf_testkit::{NodeSpec, TreeParams, TreeSpec};
use fairsched_resources::{RESOURCE_COUNT, ResourceVector};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const EPS: f64 = 1e-9;

/// The option sets every property runs in.
fn modes() -> Vec<(&'static str, UpdateOptions)> {
    vec![
        ("classic", UpdateOptions::default()),
        (
            "classic+step+fast_fifo",
            UpdateOptions {
                enable_step_function_for_gang_operations: true,
                enable_fast_fifo_fair_share_by_fit_factor_computation: true,
                ..UpdateOptions::default()
            },
        ),
        (
            "improved",
            UpdateOptions {
                enable_improved_fair_share_by_fit_factor_computation: true,
                enable_fast_fifo_fair_share_by_fit_factor_computation: true,
                ..UpdateOptions::default()
            },
        ),
        (
            "improved+step+gap",
            UpdateOptions {
                enable_improved_fair_share_by_fit_factor_computation: true,
                enable_improved_fair_share_by_fit_factor_computation_distribution_gap: true,
                enable_step_function_for_gang_operations: true,
                ..UpdateOptions::default()
            },
        ),
    ]
}

/// `cases` cases, or `PROPTEST_CASES` when set (for longer exploration runs).
fn config(cases: u32) -> ProptestConfig {
    config_with_rejects(cases, ProptestConfig::default().max_global_rejects)
}

/// Like [`config`], allowing `max_global_rejects` rejected cases.
fn config_with_rejects(cases: u32, max_global_rejects: u32) -> ProptestConfig {
    ProptestConfig {
        max_global_rejects,
        ..fairsched_hdrf_testkit::strategy::fixed_seed_config(cases, 0x00fa_1c5e_d5ee_d001)
    }
}

/// Builds `spec` with `options` and runs one update.
fn run(spec: &TreeSpec, options: &UpdateOptions) -> (Tree, UpdateOutput) {
    let (mut tree, input) = spec.build(options);
    let out = update(&mut tree, &input, &NoClock);
    (tree, out)
}

fn fs(out: &UpdateOutput, i: ElementIndex) -> ResourceVector {
    out.attributes[i].fair_share.total
}

/// First resource where `a_r > b_r + eps`, if any.
fn exceeds(a: &ResourceVector, b: &ResourceVector, eps: f64) -> Option<usize> {
    (0..RESOURCE_COUNT).find(|&r| a[r] > b[r] + eps)
}

fn sum(vs: impl IntoIterator<Item = ResourceVector>) -> ResourceVector {
    vs.into_iter().fold(ResourceVector::ZERO, |a, b| a + b)
}

fn is_step_gang(tree: &Tree, options: &UpdateOptions, i: ElementIndex) -> bool {
    let e = tree.element(i);
    let gang = e.operation().is_some_and(|o| o.gang);
    let allowed = e
        .parent
        .and_then(|p| tree.element(p).pool())
        .is_some_and(|p| p.allow_gang_step_function);
    gang && allowed && options.enable_step_function_for_gang_operations
}

fn fail(mode: &str, msg: String) -> TestCaseError {
    TestCaseError::fail(format!("[{mode}] {msg}"))
}

// ---- the invariants ---------------------------------------------------------------------------

/// P1: the update's own invariant checks stay silent and no overcommit error is reported on a
/// feasible tree.
fn check_no_warnings(mode: &str, out: &UpdateOutput) -> Result<(), TestCaseError> {
    if !out.warnings.is_empty() {
        return Err(fail(mode, format!("warnings: {:?}", out.warnings)));
    }
    if !out.errors.is_empty() {
        return Err(fail(mode, format!("errors: {:?}", out.errors)));
    }
    Ok(())
}

/// P2: for every element, `0 ≤ fs ≤ D + 1e-9` and `fs ≤ Λ + 1e-9`; the decomposition parts are
/// non-negative (−1e-12) and add up to the total (1e-12).
fn check_bounded_by_demand_and_limits(
    mode: &str,
    tree: &Tree,
    out: &UpdateOutput,
) -> Result<(), TestCaseError> {
    for i in 0..tree.len() {
        let a = &out.attributes[i];
        let f = a.fair_share;
        let name = &tree.element(i).name;
        if let Some(r) = exceeds(&f.total, &a.demand_share, EPS) {
            return Err(fail(
                mode,
                format!(
                    "{name}: fair share {:?} exceeds demand share {:?} on resource {r}",
                    f.total, a.demand_share
                ),
            ));
        }
        if let Some(r) = exceeds(&f.total, &a.limits_share, EPS) {
            return Err(fail(
                mode,
                format!(
                    "{name}: fair share {:?} exceeds limits share {:?} on resource {r}",
                    f.total, a.limits_share
                ),
            ));
        }
        let parts = [
            f.total,
            f.strong_guarantee,
            f.integral_guarantee,
            f.weight_proportional,
        ];
        if parts.iter().any(|p| p.min_component() < -1e-12) {
            return Err(fail(
                mode,
                format!("{name}: negative fair-share part in {f:?}"),
            ));
        }
        let recomposed = f.strong_guarantee + f.integral_guarantee + f.weight_proportional;
        if !recomposed.near(&f.total, 1e-12) {
            return Err(fail(
                mode,
                format!("{name}: parts do not add up to the total: {f:?}"),
            ));
        }
    }
    Ok(())
}

/// P3: for every composite v, `Σ_children fs(c) ≤ fs(v) + 1e-9`; and `fs(root) ≤ 1 + 1e-9`.
fn check_children_within_parent(
    mode: &str,
    tree: &Tree,
    out: &UpdateOutput,
) -> Result<(), TestCaseError> {
    for i in 0..tree.len() {
        let e = tree.element(i);
        if e.is_operation() {
            continue;
        }
        let children = sum(e.children.iter().map(|&c| fs(out, c)));
        if let Some(r) = exceeds(&children, &fs(out, i), EPS) {
            return Err(fail(
                mode,
                format!(
                    "{}: children's fair shares {children:?} exceed the fair share {:?} on resource {r}",
                    e.name,
                    fs(out, i)
                ),
            ));
        }
    }
    if let Some(r) = exceeds(&fs(out, ROOT), &ResourceVector::ONES, EPS) {
        return Err(fail(
            mode,
            format!("root fair share {:?} exceeds 1 on {r}", fs(out, ROOT)),
        ));
    }
    Ok(())
}

/// P4: guarantees are served through `S_v(0)`.
///
/// `S_v(0) = F_v(M_v(0))` where `M_v(0)` is the largest fit factor at which v's consumption
/// `F_v` stays within `G'(v) = min(G(v), Λ(v))` on every resource (§4.3), and every element gets
/// at least `S_v(0)` because suggestions are ≥ 0 and S is nondecreasing (§5; in improved mode
/// `C_i(f) ≥ C_i(0) = S_i(0)`). Consumption follows the shape of the children's demands, so a
/// guarantee is used up by its *first* exhausted resource, not on every resource: a pool whose
/// guarantee is 50% everywhere but whose single operation wants 100% cpu and 20% memory gets
/// 50% cpu and 10% memory from its guarantee. Where `F_v` is continuous at `M_v(0)` this gives
/// the precise statement below. `F_v` is continuous when every child's S is, which holds for
/// operations that are not step-function gangs (their F is piecewise linear without jumps, and
/// S has no jump since the equalised usage part keeps the binding resource continuous). For
/// pool children the property does not hold in general: a child's S may jump (§7.3), and the
/// guarantee of the parent may stop below the jump.
///
/// Statement, for every pool v whose children are all operations and none is a step-function
/// gang: let `LD = Σ_children LD(c)` (what v consumes at the end of its F), `G' = min(G(v), Λ(v))`
/// and `R = {r : LD_r > G'_r}` (resources on which the guarantee does not cover the demand).
/// * If `R` is empty, `fs(v) ≥ LD − 1e-9` (the guarantee covers everything);
/// * otherwise `max_{r∈R} (fs(v)_r − G'_r) ≥ −1e-9` (some uncovered resource is filled up to its
///   guarantee).
///
/// Ancestors play no role: feasible guarantees (`Σ children ≤ parent`, guarantees ≤ limits) make
/// `F_parent(0) ≤ G'(parent)`, so no ancestor can cut below a child's `S(0)`.
fn check_guarantees_served(
    mode: &str,
    tree: &Tree,
    options: &UpdateOptions,
    out: &UpdateOutput,
) -> Result<(), TestCaseError> {
    for i in 0..tree.len() {
        let e = tree.element(i);
        if e.pool().is_none() || e.children.is_empty() {
            continue;
        }
        if !e
            .children
            .iter()
            .all(|&c| tree.element(c).is_operation() && !is_step_gang(tree, options, c))
        {
            continue;
        }
        let a = &out.attributes[i];
        let g = (a.strong_guarantee_share + a.proposed_integral_share).min(&a.limits_share);
        if g.is_zero() {
            continue;
        }
        let ld = sum(e
            .children
            .iter()
            .map(|&c| out.attributes[c].limited_demand_share));
        let f = a.fair_share.total;
        let uncovered: Vec<usize> = (0..RESOURCE_COUNT).filter(|&r| ld[r] > g[r]).collect();
        if uncovered.is_empty() {
            if let Some(r) = exceeds(&ld, &f, EPS) {
                return Err(fail(
                    mode,
                    format!(
                        "{}: guarantee {g:?} covers the limited demand {ld:?}, but fair share is {f:?} (resource {r})",
                        e.name
                    ),
                ));
            }
        } else if uncovered.iter().all(|&r| f[r] < g[r] - EPS) {
            return Err(fail(
                mode,
                format!(
                    "{}: fair share {f:?} is below the guarantee {g:?} on every resource {uncovered:?} where the limited demand {ld:?} exceeds it",
                    e.name
                ),
            ));
        }
    }
    Ok(())
}

/// Sets `enable_promised_guarantee_fair_share` on every pool whose children are all operations
/// (such pools have no pool descendants, so no flagged pool is nested in another) and returns
/// them.
fn flag_pools_of_operations(tree: &mut Tree) -> Vec<ElementIndex> {
    let mut flagged = Vec::new();
    for i in 0..tree.len() {
        let e = tree.element(i);
        if e.pool().is_some()
            && !e.children.is_empty()
            && e.children.iter().all(|&c| tree.element(c).is_operation())
        {
            flagged.push(i);
        }
    }
    for &i in &flagged {
        if let Some(p) = tree.element_mut(i).pool_mut() {
            p.enable_promised_guarantee_fair_share = true;
        }
    }
    flagged
}

/// P4': the promised-guarantee fair share of a flagged pool is exactly `S_v(0)` (§5.3), so the
/// P4 statement becomes tight there. For every flagged pool v whose children are all operations
/// and none is a step-function gang, with `G'`, `LD` and `R` as in P4 and `P = promised total`:
/// * `P ≤ G' + 1e-9` on every resource (the guarantee alone never buys more than the guarantee);
/// * if `R` is empty, `P ≥ LD − 1e-9`;
/// * otherwise some `r ∈ R` has `|P_r − G'_r| ≤ 1e-9` (the guarantee is exhausted exactly on its
///   first binding resource).
///
/// Also, `fs(v) ≥ P − 1e-9` (the regular fair share includes what the guarantee alone buys).
fn check_promised_guarantee(
    mode: &str,
    tree: &Tree,
    options: &UpdateOptions,
    out: &UpdateOutput,
    flagged: &[ElementIndex],
) -> Result<(), TestCaseError> {
    for &i in flagged {
        let e = tree.element(i);
        let a = &out.attributes[i];
        let p = a.promised_guarantee_fair_share.total;
        if let Some(r) = exceeds(&p, &a.fair_share.total, EPS) {
            return Err(fail(
                mode,
                format!(
                    "{}: promised-guarantee share {p:?} exceeds the fair share {:?} on {r}",
                    e.name, a.fair_share.total
                ),
            ));
        }
        if e.children.iter().any(|&c| is_step_gang(tree, options, c)) {
            continue;
        }
        let g = (a.strong_guarantee_share + a.proposed_integral_share).min(&a.limits_share);
        if let Some(r) = exceeds(&p, &g, EPS) {
            return Err(fail(
                mode,
                format!(
                    "{}: promised-guarantee share {p:?} exceeds the guarantee {g:?} on {r}",
                    e.name
                ),
            ));
        }
        let ld = sum(e
            .children
            .iter()
            .map(|&c| out.attributes[c].limited_demand_share));
        let uncovered: Vec<usize> = (0..RESOURCE_COUNT).filter(|&r| ld[r] > g[r]).collect();
        if uncovered.is_empty() {
            if let Some(r) = exceeds(&ld, &p, EPS) {
                return Err(fail(
                    mode,
                    format!(
                        "{}: guarantee {g:?} covers the limited demand {ld:?}, but the promised share is {p:?} (resource {r})",
                        e.name
                    ),
                ));
            }
        } else if uncovered.iter().all(|&r| (p[r] - g[r]).abs() > EPS) {
            return Err(fail(
                mode,
                format!(
                    "{}: promised share {p:?} reaches the guarantee {g:?} on none of the resources {uncovered:?} where the limited demand {ld:?} exceeds it",
                    e.name
                ),
            ));
        }
    }
    Ok(())
}

/// P9: integral shares add up. A non-integral pool (or the root) receives proposed integral share
/// only from the integral pools below it (§3.7 step 6, §3.8 step 4: "increase hierarchically",
/// clamped at non-root elements), so for every such composite v:
/// `pis(v) ≤ Σ_{d} pis(d) + 1e-9`, summed over the topmost integral pools d of v's subtree; and a
/// burst pool B takes at most its (possibly rescaled) burst ratio on every resource (§3.7 steps
/// 1–5: `pis(B) = S_B(0) − sg ≤ proposed ≤ burst_ratio`).
fn check_integral_shares_add_up(
    mode: &str,
    tree: &Tree,
    out: &UpdateOutput,
) -> Result<(), TestCaseError> {
    match integral_inflation(tree, out) {
        None => Ok(()),
        Some(found) => Err(fail(mode, found)),
    }
}

/// The first element whose proposed integral share exceeds what P9 allows, described.
fn integral_inflation(tree: &Tree, out: &UpdateOutput) -> Option<String> {
    fn guarantee_type(tree: &Tree, i: ElementIndex) -> fairsched_hdrf::IntegralGuaranteeType {
        tree.element(i)
            .pool()
            .map_or(fairsched_hdrf::IntegralGuaranteeType::None, |p| {
                p.integral_guarantees.guarantee_type
            })
    }
    fn integral(tree: &Tree, i: ElementIndex) -> bool {
        guarantee_type(tree, i) != fairsched_hdrf::IntegralGuaranteeType::None
    }
    fn below(tree: &Tree, out: &UpdateOutput, i: ElementIndex) -> ResourceVector {
        let mut total = ResourceVector::ZERO;
        for &c in &tree.element(i).children {
            if integral(tree, c) {
                total = total + out.attributes[c].proposed_integral_share;
            } else if !tree.element(c).is_operation() {
                total = total + below(tree, out, c);
            }
        }
        total
    }
    for i in 0..tree.len() {
        if tree.element(i).is_operation() {
            continue;
        }
        let own = out.attributes[i].proposed_integral_share;
        if guarantee_type(tree, i) == fairsched_hdrf::IntegralGuaranteeType::Burst {
            let ratio = out.attributes[i].burst_ratio;
            if exceeds(&own, &ResourceVector::splat(ratio), EPS).is_some() {
                return Some(format!(
                    "{}: burst pool's proposed integral share {own:?} exceeds its burst ratio {ratio}",
                    tree.element(i).name
                ));
            }
            continue;
        }
        if integral(tree, i) {
            continue;
        }
        let sum = below(tree, out, i);
        if exceeds(&own, &sum, EPS).is_some() {
            return Some(format!(
                "{}: proposed integral share {own:?} exceeds the sum {sum:?} of its integral pools' shares",
                tree.element(i).name
            ));
        }
    }
    None
}

/// Whether the known `AdjustProposedIntegralShare` over-correction (see
/// `integral_share_regressions.rs`) fired in this update, at a burst pool or at an ancestor of
/// an integral pool: the other properties are not checked on such updates, since the inflated
/// guarantee legitimately breaks them (P1, P3, P4).
fn known_integral_bug(tree: &Tree, out: &UpdateOutput) -> bool {
    integral_inflation(tree, out).is_some()
}

/// Dominant resource of a share vector (first maximum), among resources the cluster has.
fn dominant(v: &ResourceVector) -> usize {
    let mut best = 0;
    for r in 1..RESOURCE_COUNT {
        if v[r] > v[best] {
            best = r;
        }
    }
    best
}

/// P5: weight proportionality. In every fair-share pool whose children are all operations
/// without usage and limits, consider the children that are *unsatisfied* (fair share below
/// demand − 1e-6 on their dominant demand resource), not step-function gangs, and not capped at
/// the full suggestion (dominant share < 1 − 1e-9; an operation demanding more than the cluster
/// stops there). Their dominant shares divided by their weights are equal within 1e-7: each of
/// them gets `S_c(f · w_c / w_min) = demand · (f · w_c / w_min) / max_r demand_r` for one pool
/// fit factor f (§4.2, §5).
fn check_weight_proportionality(
    mode: &str,
    tree: &Tree,
    options: &UpdateOptions,
    out: &UpdateOutput,
) -> Result<Vec<f64>, TestCaseError> {
    let mut ratios_seen = Vec::new();
    for i in 0..tree.len() {
        let e = tree.element(i);
        let Some(pool) = e.pool() else { continue };
        if pool.mode != PoolMode::FairShare {
            continue;
        }
        let plain_ops = e.children.iter().all(|&c| {
            let ce = tree.element(c);
            ce.operation().is_some_and(|o| o.usage.is_zero()) && ce.resource_limits.is_empty()
        });
        if !plain_ops {
            continue;
        }
        let mut ratios: Vec<(ElementIndex, f64)> = Vec::new();
        for &c in &e.children {
            if is_step_gang(tree, options, c) {
                continue;
            }
            let a = &out.attributes[c];
            let d = dominant(&a.demand_share);
            if a.demand_share[d] == 0.0 {
                continue;
            }
            let share = a.fair_share.total[d];
            if share < a.demand_share[d] - 1e-6 && share < 1.0 - EPS {
                ratios.push((c, share / tree.element(c).weight));
            }
        }
        for w in ratios.windows(2) {
            let ((c1, r1), (c2, r2)) = (w[0], w[1]);
            if (r1 - r2).abs() > 1e-7 {
                return Err(fail(
                    mode,
                    format!(
                        "{}: unsatisfied siblings {} and {} have dominant share / weight {r1} and {r2}",
                        e.name,
                        tree.element(c1).name,
                        tree.element(c2).name
                    ),
                ));
            }
        }
        if ratios.len() >= 2 {
            ratios_seen.push(ratios[0].1);
        }
    }
    Ok(ratios_seen)
}

/// P6: Pareto efficiency / work conservation. If an operation is unsatisfied (fair share below
/// demand − 1e-6 on some resource), some resource it demands is saturated at the root
/// (`fs(root)_r ≥ 1 − 1e-7`).
fn check_work_conservation(
    mode: &str,
    tree: &Tree,
    out: &UpdateOutput,
) -> Result<(), TestCaseError> {
    let root = fs(out, ROOT);
    for i in 0..tree.len() {
        if !tree.element(i).is_operation() {
            continue;
        }
        let a = &out.attributes[i];
        let d = a.demand_share;
        let f = a.fair_share.total;
        let unsatisfied = (0..RESOURCE_COUNT).any(|r| d[r] - f[r] > 1e-6);
        if !unsatisfied {
            continue;
        }
        let saturated = (0..RESOURCE_COUNT).any(|r| d[r] > 0.0 && root[r] >= 1.0 - 1e-7);
        if !saturated {
            return Err(fail(
                mode,
                format!(
                    "{} is unsatisfied (fair share {f:?}, demand {d:?}) but no resource it demands is saturated (root {root:?})",
                    tree.element(i).name
                ),
            ));
        }
    }
    Ok(())
}

/// P8: FIFO order. In a FIFO pool, an operation gets anything (> 1e-9 on some resource) only if
/// every operation before it in the effective FIFO order has its limited demand `S(1)`
/// (within 1e-9).
fn check_fifo_order(mode: &str, tree: &Tree, out: &UpdateOutput) -> Result<(), TestCaseError> {
    for i in 0..tree.len() {
        let e = tree.element(i);
        if e.pool().is_none_or(|p| p.mode != PoolMode::Fifo) {
            continue;
        }
        let mut order: Vec<(usize, ElementIndex)> = e
            .children
            .iter()
            .map(|&c| {
                let a = &out.attributes[c];
                (
                    a.effective_fifo_index
                        .or(a.fifo_index)
                        .expect("FIFO children have an index"),
                    c,
                )
            })
            .collect();
        order.sort_unstable();
        let mut first_unsatisfied: Option<ElementIndex> = None;
        for &(_, c) in &order {
            let a = &out.attributes[c];
            if let Some(u) = first_unsatisfied
                && a.fair_share.total.max_component() > EPS
            {
                return Err(fail(
                    mode,
                    format!(
                        "{}: {} gets {:?} although the earlier {} is unsatisfied",
                        e.name,
                        tree.element(c).name,
                        a.fair_share.total,
                        tree.element(u).name
                    ),
                ));
            }
            if first_unsatisfied.is_none()
                && exceeds(&a.limited_demand_share, &a.fair_share.total, EPS).is_some()
            {
                first_unsatisfied = Some(c);
            }
        }
    }
    Ok(())
}

fn check_all_general(spec: &TreeSpec, skip_guarantees: bool) -> Result<(), TestCaseError> {
    for (mode, options) in modes() {
        let (tree, out) = run(spec, &options);
        if known_integral_bug(&tree, &out) {
            continue;
        }
        check_no_warnings(mode, &out)?;
        check_bounded_by_demand_and_limits(mode, &tree, &out)?;
        check_children_within_parent(mode, &tree, &out)?;
        if !skip_guarantees {
            check_guarantees_served(mode, &tree, &options, &out)?;
        }
        check_fifo_order(mode, &tree, &out)?;
    }
    Ok(())
}

// ---- general trees ----------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(512))]

    /// P1 on small random trees with every feature.
    #[test]
    fn no_warnings_on_feasible_trees(spec in small_tree(SmallTreeConfig::default())) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            if known_integral_bug(&tree, &out) {
                continue;
            }
            check_no_warnings(mode, &out)?;
        }
    }

    /// P2.
    #[test]
    fn fair_share_within_demand_and_limits(spec in small_tree(SmallTreeConfig::default())) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            if known_integral_bug(&tree, &out) {
                continue;
            }
            check_bounded_by_demand_and_limits(mode, &tree, &out)?;
        }
    }

    /// P3.
    #[test]
    fn children_fair_shares_fit_in_the_parent(spec in small_tree(SmallTreeConfig::default())) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            if known_integral_bug(&tree, &out) {
                continue;
            }
            check_children_within_parent(mode, &tree, &out)?;
        }
    }

    /// P4 and P4', on trees with many guarantees (strong and integral) and limits.
    #[test]
    fn guarantees_are_served(spec in small_tree(SmallTreeConfig {
        strong_guarantee: 0.7,
        integral: 0.25,
        pool_limits: 0.25,
        ..SmallTreeConfig::default()
    })) {
        for (mode, options) in modes() {
            let (mut tree, input) = spec.build(&options);
            let flagged = flag_pools_of_operations(&mut tree);
            let out = update(&mut tree, &input, &NoClock);
            if known_integral_bug(&tree, &out) {
                continue;
            }
            check_no_warnings(mode, &out)?;
            check_guarantees_served(mode, &tree, &options, &out)?;
            check_promised_guarantee(mode, &tree, &options, &out, &flagged)?;
        }
    }

    /// P9. FAILS (rarely: about once in a few thousand cases) because of the
    /// `AdjustProposedIntegralShare` over-correction; see `integral_share_regressions.rs` for the
    /// minimal input. Run with `-- --ignored`.
    #[test]
    #[ignore = "known bug: AdjustProposedIntegralShare resets every component (integral_share_regressions.rs)"]
    fn integral_shares_add_up(spec in small_tree(SmallTreeConfig {
        strong_guarantee: 0.7,
        integral: 0.4,
        pool_limits: 0.4,
        ..SmallTreeConfig::default()
    })) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            check_integral_shares_add_up(mode, &tree, &out)?;
        }
    }

    /// P5, on trees without usage (the checked pools also need operations without limits).
    #[test]
    fn unsatisfied_siblings_share_in_proportion_to_weights(spec in small_tree(SmallTreeConfig {
        usage: 0.0,
        operation_limits: 0.0,
        ..SmallTreeConfig::default()
    })) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            check_weight_proportionality(mode, &tree, &options, &out)?;
        }
    }

    /// P8.
    #[test]
    fn fifo_pools_serve_in_order(spec in small_tree(SmallTreeConfig {
        fifo: 0.7,
        ..SmallTreeConfig::default()
    })) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            check_fifo_order(mode, &tree, &out)?;
        }
    }

}

/// P1–P4 and P8 on medium seeded trees (`TreeParams::default()`: 30 pools, 100 operations,
/// depth 3–5, every feature on).
#[test]
fn seeded_random_trees_satisfy_the_general_properties() {
    for seed in 0..24 {
        let spec = fairsched_hdrf_testkit::random_spec(seed, &TreeParams::default());
        if let Err(e) = check_all_general(&spec, false) {
            panic!("seed {seed}: {e}");
        }
    }
}

// ---- DRF on flat trees --------------------------------------------------------------------------

/// Dominant share: the largest component.
fn dominant_share(v: &ResourceVector) -> f64 {
    v.max_component()
}

/// Leontief utility of an allocation `a` for an operation truly demanding `d`: how much of its
/// demand it can run, `min(1, min_{r: d_r > 0} a_r / d_r)`.
fn utility(a: &ResourceVector, d: &ResourceVector) -> f64 {
    let mut u: f64 = 1.0;
    for r in 0..RESOURCE_COUNT {
        if d[r] > 0.0 {
            u = u.min(a[r] / d[r]);
        }
    }
    u
}

fn operations_of(tree: &Tree) -> Vec<ElementIndex> {
    (0..tree.len())
        .filter(|&i| tree.element(i).is_operation())
        .collect()
}

proptest! {
    #![proptest_config(config_with_rejects(512, u32::MAX))]

    /// P7a, sharing incentive: with weights `w`, every operation's dominant share is at least
    /// `min(its dominant demand share, w_i / Σw) − 1e-9` (what it would get on a private
    /// `w_i / Σw` slice of the cluster).
    #[test]
    fn drf_sharing_incentive(spec in flat_tree(1..=8, false, SmallTreeConfig::default())) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            let ops = operations_of(&tree);
            let total_weight: f64 = ops.iter().map(|&i| tree.element(i).weight).sum();
            for &i in &ops {
                let a = &out.attributes[i];
                let entitled = dominant_share(&a.demand_share)
                    .min(tree.element(i).weight / total_weight);
                let got = dominant_share(&a.fair_share.total);
                prop_assert!(
                    got >= entitled - EPS,
                    "[{}] {}: dominant share {} < entitlement {} (fair share {:?}, demand {:?})",
                    mode, tree.element(i).name, got, entitled, a.fair_share.total, a.demand_share
                );
            }
        }
    }

    /// P7b, strategy-proofness: an operation that inflates its demand on one resource (by a
    /// factor 1.1–5, or from 0 to some amount) never gets a higher utility for its *true*
    /// demand (`utility` above) than when truthful (+1e-9).
    ///
    /// Restricted to the regime where it holds: every operation demands less than the cluster
    /// (≤ 99%) and no total demand equals the cluster exactly, honest or lying. Outside it the
    /// property FAILS: an operation capped at share 1 on some resource (demand > cluster, or a
    /// total exactly at the cluster) makes its pool's F flat at level 1 there, and at suggestion
    /// 1 the left-continuous inverse (§4.3) stops the whole pool at the start of that plateau;
    /// whether the capped share rounds to 1.0 or to 1 − 1 ulp then decides the siblings'
    /// shares, and a lie that changes the rounding can pay off. See
    /// `capped_share_knife_edge.rs`.
    #[test]
    fn drf_strategy_proofness(
        spec in flat_tree(1..=6, false, SmallTreeConfig {
            max_demand_percent: 99,
            ..SmallTreeConfig::default()
        }),
        liar in any::<prop::sample::Index>(),
        resource in 0usize..RESOURCE_COUNT,
        factor in 11u32..=50,
        from_zero_percent in 1u32..=100,
    ) {
        let NodeSpec::Pool(pool) = &spec.children[0] else { unreachable!() };
        let k = liar.index(pool.children.len());
        let mut lying = spec.clone();
        let NodeSpec::Pool(lying_pool) = &mut lying.children[0] else { unreachable!() };
        let NodeSpec::Operation(op) = &mut lying_pool.children[k] else { unreachable!() };
        let kind = fairsched_resources::ResourceKind::ALL[resource];
        let true_amount = op.demand.get(kind);
        let inflated = if true_amount > 0.0 {
            true_amount * f64::from(factor) / 10.0
        } else {
            fairsched_hdrf_testkit::strategy::reference_cluster().get(kind)
                * f64::from(from_zero_percent) / 100.0
        };
        op.demand.set(kind, inflated.min(0.99 * fairsched_hdrf_testkit::strategy::reference_cluster().get(kind)).max(true_amount));
        for (mode, options) in modes() {
            let (tree, honest) = run(&spec, &options);
            let (_, lied) = run(&lying, &options);
            prop_assume!(!demand_hits_cluster_exactly(&honest) && !demand_hits_cluster_exactly(&lied));
            let i = operations_of(&tree)[k];
            let d = honest.attributes[i].demand_share;
            let u_true = utility(&honest.attributes[i].fair_share.total, &d);
            let u_lie = utility(&lied.attributes[i].fair_share.total, &d);
            prop_assert!(
                u_lie <= u_true + EPS,
                "[{}] {} gains by inflating {}: utility {} -> {} (honest share {:?}, lying share {:?}, true demand {:?})",
                mode, tree.element(i).name, kind, u_true, u_lie,
                honest.attributes[i].fair_share.total, lied.attributes[i].fair_share.total, d
            );
        }
    }

    /// P7c, (weighted) envy-freeness: no operation prefers another's allocation scaled to its own
    /// weight: `utility_i(a_j · w_i / w_j) ≤ utility_i(a_i) + 1e-9`.
    #[test]
    fn drf_envy_freeness(spec in flat_tree(2..=8, false, SmallTreeConfig::default())) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            let ops = operations_of(&tree);
            for &i in &ops {
                let di = out.attributes[i].demand_share;
                let ui = utility(&out.attributes[i].fair_share.total, &di);
                for &j in &ops {
                    if i == j {
                        continue;
                    }
                    let scale = tree.element(i).weight / tree.element(j).weight;
                    let other = out.attributes[j].fair_share.total * scale;
                    let envied = utility(&other, &di);
                    prop_assert!(
                        envied <= ui + EPS,
                        "[{}] {} envies {}: own utility {}, utility of the other's (weight-scaled) share {}",
                        mode, tree.element(i).name, tree.element(j).name, ui, envied
                    );
                }
            }
        }
    }
}

/// P6': weak work conservation. If an operation is unsatisfied, some resource is saturated at the
/// root (`≥ 1 − 1e-7`) *and demanded by an unsatisfied operation*.
fn check_weak_work_conservation(
    mode: &str,
    tree: &Tree,
    out: &UpdateOutput,
) -> Result<(), TestCaseError> {
    let root = fs(out, ROOT);
    let unsatisfied: Vec<ElementIndex> = (0..tree.len())
        .filter(|&i| {
            let a = &out.attributes[i];
            tree.element(i).is_operation()
                && (0..RESOURCE_COUNT).any(|r| a.demand_share[r] - a.fair_share.total[r] > 1e-6)
        })
        .collect();
    if unsatisfied.is_empty() {
        return Ok(());
    }
    let ok = (0..RESOURCE_COUNT).any(|r| {
        root[r] >= 1.0 - 1e-7
            && unsatisfied
                .iter()
                .any(|&i| out.attributes[i].demand_share[r] > 0.0)
    });
    if ok {
        Ok(())
    } else {
        Err(fail(
            mode,
            format!(
                "unsatisfied operations {:?} but no resource they demand is saturated (root {root:?})",
                unsatisfied
                    .iter()
                    .map(|&i| (
                        tree.element(i).name.clone(),
                        out.attributes[i].fair_share.total,
                        out.attributes[i].demand_share
                    ))
                    .collect::<Vec<_>>()
            ),
        ))
    }
}

/// True when some element's demand equals the cluster exactly on some resource (the boundary
/// where the left-continuous inverse of §4.3 stops at the start of a plateau).
fn demand_hits_cluster_exactly(out: &UpdateOutput) -> bool {
    out.attributes
        .iter()
        .any(|a| (0..RESOURCE_COUNT).any(|r| a.demand_share[r] == 1.0))
}

// ---- work conservation ------------------------------------------------------------------------

proptest! {
    #![proptest_config(config_with_rejects(512, u32::MAX))]

    /// P6' on flat DRF-like trees (one pool of operations without usage, gangs, limits or
    /// guarantees), away from the exact boundary where a demand equals the cluster. Holds: the
    /// root has a single child whose S can only jump below the level it is offered, so the
    /// root's fit factor stops where some resource reaches 1, and that resource is still wanted
    /// by an unsatisfied operation.
    #[test]
    fn weak_work_conservation_in_a_flat_pool(
        spec in flat_tree(1..=8, false, SmallTreeConfig::drf_like())
    ) {
        let (_, first) = run(&spec, &UpdateOptions::default());
        prop_assume!(!demand_hits_cluster_exactly(&first));
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            check_weak_work_conservation(mode, &tree, &out)?;
        }
    }

    /// P6 as originally stated (an unsatisfied operation has a saturated resource *it* demands),
    /// on flat trees. FAILS: all children of a pool share one fit factor, so once a resource
    /// saturates, operations that do not use it stop growing too. See
    /// `work_conservation_counterexamples.rs::shared_fit_factor_*` for the minimal case. Run with
    /// `cargo test --test properties -- --ignored` to explore.
    #[test]
    #[ignore = "does not hold for vector HDRF: one fit factor per pool (see work_conservation_counterexamples.rs)"]
    fn strict_work_conservation_in_a_flat_pool(
        spec in flat_tree(1..=8, false, SmallTreeConfig::drf_like())
    ) {
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            check_work_conservation(mode, &tree, &out)?;
        }
    }

    /// P6' on hierarchical DRF-like trees. FAILS: a pool's S can jump (a child saturating a
    /// resource makes that resource stop binding, and the pool's fit factor leaps forward), and
    /// when the jump crosses 1 at the parent, the left-continuous S stops below it, leaving
    /// capacity idle. See `work_conservation_counterexamples.rs::jump_in_a_child_pool_*`.
    #[test]
    #[ignore = "does not hold for vector HDRF: left-continuous jumps (see work_conservation_counterexamples.rs)"]
    fn weak_work_conservation_in_hierarchies(
        spec in small_tree(SmallTreeConfig { usage: 0.0, fifo: 0.0, ..SmallTreeConfig::drf_like() })
    ) {
        let (_, first) = run(&spec, &UpdateOptions::default());
        prop_assume!(!demand_hits_cluster_exactly(&first));
        for (mode, options) in modes() {
            let (tree, out) = run(&spec, &options);
            check_weak_work_conservation(mode, &tree, &out)?;
        }
    }
}

/// The tree the random seed drew on 2026-11-23 (CI at 3346dac), with the root's fair share at
/// 1.0091 cpu: the known `AdjustProposedIntegralShare` over-correction, this time at the burst
/// pool itself (§3.7 step 3; `integral_share_regressions.rs` has the analysis). The properties
/// must recognise it as that bug: every mode reports it at the burst pool, and the checks that
/// skip such updates (`check_all_general`) then pass.
#[test]
fn the_tree_the_random_seed_found_is_the_known_integral_bug() {
    use fairsched_hdrf_testkit::{
        GuaranteeNode, IntegralNode, LimitsNode, OperationNode, PoolNode,
    };
    use fairsched_resources::{ResourceKind, Resources};
    let op = |cpu: f64| {
        NodeSpec::Operation(OperationNode {
            weight: 1.0,
            demand: Resources::ZERO.with(ResourceKind::Cpu, cpu),
            usage_fraction: 0.0,
            gang: false,
            cpu_limit: None,
            start_time: 0.0,
        })
    };
    let pool = |guarantee, integral, limits, children| {
        NodeSpec::Pool(PoolNode {
            weight: 1.0,
            fifo: false,
            fifo_by_weight: false,
            guarantee,
            integral,
            limits,
            children,
        })
    };
    let spec = TreeSpec {
        cluster: Resources::ZERO
            .with(ResourceKind::UserSlots, 100.0)
            .with(ResourceKind::Cpu, 100.0)
            .with(ResourceKind::Memory, 100.0 * 1024.0 * 1024.0 * 1024.0),
        children: vec![
            pool(
                Some(GuaranteeNode {
                    fraction: 0.98,
                    main_only: false,
                }),
                None,
                None,
                vec![pool(None, None, None, vec![op(61.0)])],
            ),
            pool(
                Some(GuaranteeNode {
                    fraction: 0.22,
                    main_only: true,
                }),
                Some(IntegralNode {
                    burst: true,
                    flow_ratio: 0.15,
                    burst_multiplier: 2.7,
                    initial_volume_seconds: 146.0,
                }),
                Some(LimitsNode {
                    cpu: Some(0.56),
                    memory: Some(0.41),
                }),
                vec![pool(None, None, None, vec![op(56.0)])],
            ),
        ],
        seconds_since_previous_update: None,
    };
    for (mode, options) in modes() {
        let (tree, out) = run(&spec, &options);
        let found = integral_inflation(&tree, &out);
        assert!(
            found
                .as_deref()
                .is_some_and(|f| f.contains("burst pool's proposed integral share")),
            "{mode}: {found:?}"
        );
    }
    check_all_general(&spec, false).unwrap();
}
