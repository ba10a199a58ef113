//! The project-root example from the YTsaurus pool documentation (`shared/seeds/001`): a project
//! quota of 100 cpu split into `project-adhoc` (guarantee 80, weight 1), `project-batch`
//! (guarantee 0, weight 10) and `project-backup` (guarantee 20, weight 1).
//!
//! The documentation says: under full load the guaranteed pools get their guarantees and batch
//! gets nothing; when a guaranteed pool cannot use its share, the unused part goes to batch,
//! which has the larger weight. With additive guarantees (spec §13.1, §7.2) each pool gets
//! `min(demand, guarantee + weight · f)` for one fit factor f that fills the cluster, so:
//!
//! * full load: `0.8 + f + 10 f + 0.2 + f ≤ 1` gives f = 0: adhoc 0.8, batch 0, backup 0.2;
//! * adhoc idle: `0.2 + f + 10 f = 1`, f = 0.8/11: backup 0.2 + f = 0.2727…, batch 0.7272…;
//! * backup idle: `0.8 + f + 10 f = 1`, f = 0.2/11: adhoc 0.8181…, batch 0.1818…;
//! * adhoc using only 30 cpu: `0.3 + 0.2 + f + 10 f = 1`, f = 0.5/11: backup 0.2454…,
//!   batch 0.4545…;
//! * only batch busy: batch 1.0.
//!
//! `project-root` itself always reports its whole share as strong guarantee (its guarantee is
//! the full 100 cpu); the split into guarantee and weight-proportional parts shows on the
//! children.
//!
//! The cluster also has user slots and memory; operations demand 10% of each, so cpu (100%)
//! stays the dominant resource and the others never bind.

use fairsched_hdrf::{
    ElementIndex, NoClock, OperationSpec, PoolSpec, ROOT, Tree, UpdateInput, UpdateOptions,
    UpdateOutput, update,
};
use fairsched_resources::{PartialResources, ResourceKind, Resources};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const CPU: usize = ResourceKind::Cpu.index();

fn cluster() -> Resources {
    Resources::from_values([1000.0, 100.0, 0.0, 1000.0 * GIB, 0.0])
}

/// An operation wanting the whole cluster's cpu (and 10% of its slots and memory), or
/// `cpu` cpu when given.
fn operation(cpu: f64) -> OperationSpec {
    OperationSpec {
        demand: Resources::from_values([100.0, cpu, 0.0, 100.0 * GIB, 0.0]),
        ..OperationSpec::default()
    }
}

fn guaranteed(cpu: f64) -> PoolSpec {
    PoolSpec {
        strong_guarantee_resources: PartialResources::EMPTY.with(ResourceKind::Cpu, cpu),
        ..PoolSpec::default()
    }
}

struct Project {
    tree: Tree,
    root: ElementIndex,
    adhoc: ElementIndex,
    batch: ElementIndex,
    backup: ElementIndex,
}

/// The project tree; each pool gets one operation demanding `cpu` (None: the pool is idle and
/// has no operation).
fn project(adhoc_cpu: Option<f64>, batch_cpu: Option<f64>, backup_cpu: Option<f64>) -> Project {
    let mut tree = Tree::new();
    let root = tree
        .add_pool(ROOT, "project-root", 1.0, guaranteed(100.0))
        .unwrap();
    let adhoc = tree
        .add_pool(root, "project-adhoc", 1.0, guaranteed(80.0))
        .unwrap();
    let batch = tree
        .add_pool(root, "project-batch", 10.0, guaranteed(0.0))
        .unwrap();
    let backup = tree
        .add_pool(root, "project-backup", 1.0, guaranteed(20.0))
        .unwrap();
    for (pool, cpu) in [(adhoc, adhoc_cpu), (batch, batch_cpu), (backup, backup_cpu)] {
        if let Some(cpu) = cpu {
            let name = format!("{}-op", tree.element(pool).name);
            tree.add_operation(pool, name, 1.0, operation(cpu)).unwrap();
        }
    }
    Project {
        tree,
        root,
        adhoc,
        batch,
        backup,
    }
}

fn run(p: &mut Project, improved: bool) -> UpdateOutput {
    let input = UpdateInput {
        total_resources: cluster(),
        now_seconds: 0.0,
        previous_update_seconds: None,
        options: UpdateOptions {
            enable_improved_fair_share_by_fit_factor_computation: improved,
            ..UpdateOptions::default()
        },
    };
    let out = update(&mut p.tree, &input, &NoClock);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    out
}

/// Expected cpu shares: (total, strong-guarantee part, weight-proportional part).
type Expected = (f64, f64, f64);

fn check(p: &Project, out: &UpdateOutput, mode: &str, expected: [(ElementIndex, Expected); 4]) {
    for (i, (total, strong, weighted)) in expected {
        let name = &p.tree.element(i).name;
        let fs = &out.attributes[i].fair_share;
        let got = (
            fs.total[CPU],
            fs.strong_guarantee[CPU],
            fs.weight_proportional[CPU],
        );
        assert!(
            (got.0 - total).abs() <= 1e-7
                && (got.1 - strong).abs() <= 1e-7
                && (got.2 - weighted).abs() <= 1e-7
                && fs.integral_guarantee[CPU].abs() <= 1e-12,
            "[{mode}] {name}: expected cpu (total, strong, weight-proportional) = ({total}, {strong}, {weighted}), got {got:?}"
        );
        // The other resources follow the operations' shape (10% of the cpu share) and stay
        // below the cluster.
        assert!(fs.total.max_component() <= 1.0 + 1e-9, "[{mode}] {name}");
    }
    let root_cpu = out.attributes[ROOT].fair_share.total[CPU];
    let used: f64 = expected.iter().skip(1).map(|(_, e)| e.0).sum();
    assert!(
        (root_cpu - used).abs() <= 1e-7,
        "[{mode}] root cpu {root_cpu}"
    );
}

const MODES: [(&str, bool); 2] = [("classic", false), ("improved", true)];

#[test]
fn full_load_serves_the_guarantees_and_starves_batch() {
    for (mode, improved) in MODES {
        let mut p = project(Some(100.0), Some(100.0), Some(100.0));
        let out = run(&mut p, improved);
        check(
            &p,
            &out,
            mode,
            [
                (p.root, (1.0, 1.0, 0.0)),
                (p.adhoc, (0.8, 0.8, 0.0)),
                (p.batch, (0.0, 0.0, 0.0)),
                (p.backup, (0.2, 0.2, 0.0)),
            ],
        );
    }
}

#[test]
fn idle_adhoc_leaves_its_guarantee_to_batch_mostly() {
    let f = 0.8 / 11.0;
    for adhoc in [None, Some(0.0)] {
        for (mode, improved) in MODES {
            let mut p = project(adhoc, Some(100.0), Some(100.0));
            let out = run(&mut p, improved);
            check(
                &p,
                &out,
                mode,
                [
                    (p.root, (1.0, 1.0, 0.0)),
                    (p.adhoc, (0.0, 0.0, 0.0)),
                    (p.batch, (10.0 * f, 0.0, 10.0 * f)),
                    (p.backup, (0.2 + f, 0.2, f)),
                ],
            );
            assert!((0.2 + f - 0.272_727_272_7).abs() < 1e-9);
            assert!((10.0 * f - 0.727_272_727_2).abs() < 1e-9);
        }
    }
}

#[test]
fn idle_backup_leaves_its_guarantee_to_batch_mostly() {
    let f = 0.2 / 11.0;
    for (mode, improved) in MODES {
        let mut p = project(Some(100.0), Some(100.0), None);
        let out = run(&mut p, improved);
        check(
            &p,
            &out,
            mode,
            [
                (p.root, (1.0, 1.0, 0.0)),
                (p.adhoc, (0.8 + f, 0.8, f)),
                (p.batch, (10.0 * f, 0.0, 10.0 * f)),
                (p.backup, (0.0, 0.0, 0.0)),
            ],
        );
    }
}

#[test]
fn partially_busy_adhoc_gives_the_rest_away() {
    // adhoc wants 30 cpu: it keeps 0.3 (within its guarantee); backup and batch share the
    // remaining 0.7 as 0.2 + f and 10 f.
    let f = 0.5 / 11.0;
    for (mode, improved) in MODES {
        let mut p = project(Some(30.0), Some(100.0), Some(100.0));
        let out = run(&mut p, improved);
        check(
            &p,
            &out,
            mode,
            [
                (p.root, (1.0, 1.0, 0.0)),
                (p.adhoc, (0.3, 0.3, 0.0)),
                (p.batch, (10.0 * f, 0.0, 10.0 * f)),
                (p.backup, (0.2 + f, 0.2, f)),
            ],
        );
    }
}

#[test]
fn only_batch_busy_takes_the_whole_quota() {
    for (mode, improved) in MODES {
        let mut p = project(None, Some(100.0), None);
        let out = run(&mut p, improved);
        check(
            &p,
            &out,
            mode,
            [
                (p.root, (1.0, 1.0, 0.0)),
                (p.adhoc, (0.0, 0.0, 0.0)),
                (p.batch, (1.0, 0.0, 1.0)),
                (p.backup, (0.0, 0.0, 0.0)),
            ],
        );
    }
}
