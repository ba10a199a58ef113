//! Valid configurations: defaults, the seed examples, presets, inheritance, warnings, alerts,
//! updates and round trips.

use fairsched_config::*;
use fairsched_resources::{PartialResources, ResourceKind, Resources};
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn tree_toml(text: &str) -> PoolTreeConfig {
    load_pool_tree_str(text, Format::Toml).unwrap_or_else(|e| panic!("{e}"))
}

fn valid(tree: &PoolTreeConfig) -> ValidatedTree {
    validate_tree(tree).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn empty_documents_give_the_ytsaurus_defaults() {
    let from_toml = tree_toml("");
    let from_json = load_pool_tree_str("{}", Format::Json).unwrap();
    assert_eq!(from_toml, from_json);
    assert_eq!(from_toml, PoolTreeConfig::default());

    let c = &from_toml.config;
    assert_eq!(c.node_tag_filter, None);
    assert_eq!(c.main_resource, ResourceKind::Cpu);
    assert_eq!(c.default_parent_pool, "<Root>");
    assert_eq!(c.max_operation_count, 50_000);
    assert_eq!(c.max_running_operation_count, 2_000);
    assert_eq!(c.max_operation_count_per_pool, 50);
    assert_eq!(c.max_running_operation_count_per_pool, 8);
    assert_eq!(c.max_ephemeral_pools_per_user, 1);
    assert!(c.forbid_immediate_operations_in_root);
    assert_eq!(c.infer_weight_from_guarantees_share_multiplier, None);
    assert_eq!(c.integral_guarantees.smooth_period_ms, 60_000);
    assert_eq!(
        c.integral_guarantees.pool_capacity_saturation_period_ms,
        86_400_000
    );
    assert_eq!(c.integral_guarantees.relaxed_share_multiplier_limit, 3.0);
    assert_eq!(c.fair_share_starvation_tolerance, 0.8);
    assert_eq!(c.fair_share_starvation_timeout_ms, 30_000);
    assert_eq!(c.fair_share_aggressive_starvation_timeout_ms, 120_000);
    assert!(!c.enable_aggressive_starvation);
    assert!(c.enable_pool_starvation);
    assert_eq!(c.preemption_satisfaction_threshold, 1.0);
    assert_eq!(c.aggressive_preemption_satisfaction_threshold, 0.2);
    assert!(c.non_preemptible_resource_usage_threshold.is_empty());
    assert_eq!(c.max_unpreemptible_running_allocation_count, None);
    assert_eq!(c.preemptive_scheduling_backoff_ms, 5_000);
    assert_eq!(c.allocation_preemption_timeout_ms, None);
    assert_eq!(c.allocation_graceful_preemption_timeout_ms, 60_000);
    assert_eq!(c.waiting_for_resources_on_node_timeout_ms, None);
    assert_eq!(
        c.scheduling_preemption_priority_scope,
        PreemptionPriorityScope::OperationAndAncestors
    );
    assert_eq!(c.max_preemptive_allocations_per_heartbeat, 1);
    assert_eq!(c.allowed_resource_usage_staleness_ms, 100);
    assert!(!c.use_pool_satisfaction_for_scheduling);
    assert!(!c.enable_step_function_for_gang_operations);
    assert!(!c.enable_improved_fair_share_by_fit_factor_computation);
    assert!(!c.enable_improved_fair_share_by_fit_factor_computation_distribution_gap);
    assert!(!c.enable_fast_fifo_fair_share_by_fit_factor_computation);
    assert!(!c.enable_fifo_children_reordering_for_guarantee_utilization);
    assert!(from_toml.pools.is_empty());
    let v = valid(&from_toml);
    assert!(v.pools.is_empty() && v.warnings.is_empty());
}

#[test]
fn an_empty_pool_gets_default_and_inherited_settings() {
    let tree = tree_toml("[pools.a]\n");
    let v = valid(&tree);
    let a = v.pool("a").unwrap();
    assert_eq!(a.config, PoolConfig::default());
    assert_eq!(a.config.weight, None);
    assert_eq!(a.config.mode, SchedulingMode::FairShare);
    assert_eq!(
        a.config.fifo_sort_parameters,
        [FifoSortParameter::Weight, FifoSortParameter::StartTime]
    );
    assert!(a.config.integral_guarantees.can_accept_free_volume);
    assert_eq!(
        a.config.integral_guarantees.guarantee_type,
        IntegralGuaranteeType::None
    );
    assert!(a.config.resource_limits.is_empty());
    assert!(a.config.inherit_acl);
    assert_eq!(a.max_operation_count, 50);
    assert_eq!(a.max_running_operation_count, 8);
    assert_eq!(a.fair_share_starvation_tolerance, 0.8);
    assert_eq!(a.fair_share_starvation_timeout_ms, 30_000);
    assert!(!a.enable_aggressive_starvation);
    assert!(a.allow_aggressive_preemption);
    assert!(a.allow_normal_preemption);
    assert!(a.allow_regular_allocations_on_ssd_nodes);
    assert!(!a.enable_lightweight_operations);
    assert_eq!(a.relaxed_share_multiplier_limit, 3.0);
    assert!(!a.should_distribute_free_volume_among_children);
    assert_eq!(
        a.fifo_pool_scheduling_order,
        FifoPoolSchedulingOrder::Satisfaction
    );
    assert_eq!(a.parent, None);
    assert_eq!(a.depth, 1);
}

/// Lowering only `max_operation_count` below the default running limit (8) is accepted: the pool
/// then runs at most that many operations. An explicit contradiction is rejected (invalid inputs).
#[test]
fn a_low_operation_limit_caps_the_default_running_limit() {
    let tree =
        tree_toml("[pools.a]\nmax_operation_count = 5\n[pools.b]\nmax_operation_count = 20\n");
    let v = valid(&tree);
    assert_eq!(v.pool("a").unwrap().max_operation_count, 5);
    assert_eq!(v.pool("a").unwrap().max_running_operation_count, 5);
    assert_eq!(v.pool("b").unwrap().max_running_operation_count, 8);
}

#[test]
fn seed_001_example_loads_from_toml_and_json_identically() {
    let toml = load_pool_tree_file(example("seed001_project_root.toml")).unwrap();
    let json = load_pool_tree_file(example("seed001_project_root.json")).unwrap();
    assert_eq!(toml, json);

    let v = valid(&toml);
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    let expected = [
        // name, cpu guarantee, weight, max running, max operations (seed 001's table)
        ("project-root", 100.0, 1.0, 10, 50),
        ("project-adhoc", 80.0, 1.0, 10, 50),
        ("project-batch", 0.0, 10.0, 4, 50),
        ("project-backup", 20.0, 1.0, 2, 50),
    ];
    for (name, cpu, weight, running, ops) in expected {
        let p = v.pool(name).unwrap();
        let guarantee = p.config.strong_guarantee_resources;
        assert_eq!(
            guarantee.raw_of(ResourceKind::Cpu),
            Some((cpu * 100.0) as i64)
        );
        assert_eq!(p.config.weight, Some(weight));
        assert_eq!(p.max_running_operation_count, running);
        assert_eq!(p.max_operation_count, ops);
    }
    assert_eq!(
        v.pool("project-batch").unwrap().path,
        "project-root/project-batch"
    );
    assert_eq!(
        v.pool("project-batch").unwrap().parent.as_deref(),
        Some("project-root")
    );
    let order: Vec<&str> = v.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "project-root",
            "project-adhoc",
            "project-backup",
            "project-batch"
        ]
    );
    // The loader-and-validator in one step agrees.
    let direct = load_and_validate_pool_tree_file(example("seed001_project_root.json")).unwrap();
    assert_eq!(direct, v);
}

#[test]
fn seed_001_rules_reject_the_changes_the_seed_forbids() {
    let base = load_pool_tree_file(example("seed001_project_root.toml")).unwrap();
    // "The children's guarantees may not exceed the parent's": backup 20 -> 30 makes 110.
    let mut more = base.clone();
    more.pool_at_mut("project-root/project-backup")
        .unwrap()
        .strong_guarantee_resources
        .set(ResourceKind::Cpu, 30.0);
    let err = validate_update(&base, &more).unwrap_err();
    let e = err
        .find(Some("project-root"), "strong_guarantee_resources.cpu")
        .unwrap();
    assert!(
        e.message
            .contains("sum to 110 cpu, more than this pool's 100"),
        "{e}"
    );
    // "max_running_operation_count may not exceed max_operation_count".
    let mut running = base.clone();
    running
        .pool_at_mut("project-root/project-batch")
        .unwrap()
        .max_running_operation_count = Some(60);
    let err = validate_update(&base, &running).unwrap_err();
    assert!(
        err.find(
            Some("project-root/project-batch"),
            "max_running_operation_count"
        )
        .is_some()
    );
    // Operation limits of children may sum above the parent's: accepted.
    let mut counts = base.clone();
    counts
        .pool_at_mut("project-root/project-batch")
        .unwrap()
        .max_running_operation_count = Some(10);
    let update = validate_update(&base, &counts).unwrap();
    assert_eq!(update.diff.changed, ["project-root/project-batch"]);
}

#[test]
fn the_multi_tree_example_loads_and_resolves() {
    let v = load_and_validate_pool_trees_file(example("pool_trees.toml")).unwrap();
    assert_eq!(v.default_tree.as_deref(), Some("physical"));
    assert_eq!(v.trees.keys().collect::<Vec<_>>(), ["gpu", "physical"]);
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);

    let physical = &v.trees["physical"];
    assert_eq!(physical.default_parent_pool(), Some("research"));
    let prod = physical.pool("prod").unwrap();
    // From the "production" preset.
    assert_eq!(prod.fair_share_starvation_tolerance, 0.9);
    assert_eq!(prod.fair_share_starvation_timeout_ms, 15_000);
    assert!(!prod.allow_aggressive_preemption);
    // Inherited by the child.
    let ingest = physical.pool("ingest").unwrap();
    assert_eq!(ingest.fair_share_starvation_tolerance, 0.9);
    assert!(!ingest.allow_aggressive_preemption);
    assert!(ingest.enable_aggressive_starvation); // tree-wide
    assert_eq!(ingest.max_running_operation_count, 20);
    assert_eq!(
        ingest.non_preemptible_resource_usage_threshold,
        PartialResources::EMPTY.with(ResourceKind::UserSlots, 2.0)
    );
    let reports = physical.pool("reports").unwrap();
    assert!(reports.enable_lightweight_operations);
    let research = physical.pool("research").unwrap();
    assert_eq!(research.fair_share_starvation_tolerance, 0.5);
    assert!(!research.enable_aggressive_starvation);
    assert_eq!(
        research
            .config
            .ephemeral_subpool_config
            .as_ref()
            .unwrap()
            .max_operation_count,
        Some(10)
    );
    let gpu = &v.trees["gpu"];
    assert_eq!(gpu.config().main_resource, ResourceKind::Gpu);
    assert!(gpu.config().enable_step_function_for_gang_operations);
    assert_eq!(
        gpu.pool("inference")
            .unwrap()
            .config
            .integral_guarantees
            .guarantee_type,
        IntegralGuaranteeType::Burst
    );
}

#[test]
fn presets_fill_unset_options_earlier_presets_first_and_explicit_options_win() {
    let tree = tree_toml(
        r#"
[config.pool_config_presets.a]
fair_share_starvation_tolerance = 0.6
[config.pool_config_presets.b]
fair_share_starvation_tolerance = 0.5
fair_share_starvation_timeout_ms = 2000
enable_aggressive_starvation = true

[pools.ab]
config_presets = ["a", "b"]
[pools.ba]
config_presets = ["b", "a"]
[pools.explicit]
config_presets = ["a", "b"]
fair_share_starvation_tolerance = 0.7
enable_aggressive_starvation = false
[pools.explicit.pools.child]
"#,
    );
    let v = valid(&tree);
    // YTsaurus: [A (0.6), B (0.5, 2000)] gives tolerance 0.6, timeout 2000.
    let ab = v.pool("ab").unwrap();
    assert_eq!(ab.fair_share_starvation_tolerance, 0.6);
    assert_eq!(ab.fair_share_starvation_timeout_ms, 2000);
    assert!(ab.enable_aggressive_starvation);
    let ba = v.pool("ba").unwrap();
    assert_eq!(ba.fair_share_starvation_tolerance, 0.5);
    let explicit = v.pool("explicit").unwrap();
    assert_eq!(explicit.fair_share_starvation_tolerance, 0.7);
    assert_eq!(explicit.fair_share_starvation_timeout_ms, 2000);
    assert!(!explicit.enable_aggressive_starvation);
    // Children inherit the effective (preset-resolved) values.
    let child = v.pool("child").unwrap();
    assert_eq!(child.fair_share_starvation_tolerance, 0.7);
    assert_eq!(child.fair_share_starvation_timeout_ms, 2000);

    // resolve_presets gives the same pool configs, and keeps the preset lists.
    let resolved = resolve_presets(&tree).unwrap();
    let node = resolved.pool_at("ab").unwrap();
    assert_eq!(node.fair_share_starvation_tolerance, Some(0.6));
    assert_eq!(node.config_presets, ["a", "b"]);
    assert_eq!(node.config(), ab.config);
    // The tree as given is kept untouched in the validated value.
    assert_eq!(v.tree, tree);
    assert_eq!(
        v.tree
            .pool_at("ab")
            .unwrap()
            .fair_share_starvation_tolerance,
        None
    );
}

#[test]
fn resolve_presets_reports_every_unknown_preset() {
    let tree = tree_toml(
        "[pools.a]\nconfig_presets = [\"x\"]\n[pools.a.pools.b]\nconfig_presets = [\"y\", \"z\"]\n",
    );
    let errors = resolve_presets(&tree).unwrap_err();
    let rendered: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        rendered,
        [
            "pool \"a\": field \"config_presets\": unknown preset \"x\": the tree defines no pool_config_presets",
            "pool \"a/b\": field \"config_presets\": unknown preset \"y\": the tree defines no pool_config_presets",
            "pool \"a/b\": field \"config_presets\": unknown preset \"z\": the tree defines no pool_config_presets",
        ]
    );
}

#[test]
fn inheritance_of_starvation_preemption_and_ssd_settings() {
    let tree = tree_toml(
        r#"
[config]
fair_share_starvation_tolerance = 0.7
fair_share_starvation_timeout_ms = 1000
max_unpreemptible_running_allocation_count = 3
use_pool_satisfaction_for_scheduling = true

[pools.top]
fair_share_starvation_tolerance = 0.5
allow_aggressive_preemption = false
allow_regular_allocations_on_ssd_nodes = false
allow_normal_preemption = false
[pools.top.pools.mid]
fair_share_starvation_timeout_ms = 5000
allow_regular_allocations_on_ssd_nodes = true
use_pool_satisfaction_for_scheduling = false
[pools.top.pools.mid.pools.leaf]
non_preemptible_resource_usage_threshold = { cpu = 4 }
[pools.other]
"#,
    );
    let v = valid(&tree);
    let leaf = v.pool("leaf").unwrap();
    assert_eq!(leaf.path, "top/mid/leaf");
    assert_eq!(leaf.depth, 3);
    assert_eq!(leaf.parent.as_deref(), Some("mid"));
    assert_eq!(leaf.fair_share_starvation_tolerance, 0.5);
    assert_eq!(leaf.fair_share_starvation_timeout_ms, 5000);
    assert!(!leaf.allow_aggressive_preemption);
    // A pool forbidding regular allocations on SSD nodes forbids them for its subtree.
    assert!(!leaf.allow_regular_allocations_on_ssd_nodes);
    // allow_normal_preemption is per element (the scheduler checks the whole path).
    assert!(leaf.allow_normal_preemption);
    assert!(!v.pool("top").unwrap().allow_normal_preemption);
    assert!(!leaf.use_pool_satisfaction_for_scheduling);
    assert_eq!(
        leaf.non_preemptible_resource_usage_threshold,
        PartialResources::EMPTY.with(ResourceKind::Cpu, 4.0)
    );
    let other = v.pool("other").unwrap();
    assert_eq!(other.fair_share_starvation_tolerance, 0.7);
    assert_eq!(other.fair_share_starvation_timeout_ms, 1000);
    assert!(other.use_pool_satisfaction_for_scheduling);
    // The legacy unpreemptible count is folded into the threshold's user_slots.
    assert_eq!(
        other.non_preemptible_resource_usage_threshold,
        PartialResources::EMPTY.with(ResourceKind::UserSlots, 3.0)
    );
}

#[test]
fn ytsaurus_aliases_are_accepted() {
    let tree = load_pool_tree_str(
        r#"{
          "config": {
            "nodes_filter": "default",
            "fair_share_preemption_timeout_ms": 1500,
            "job_interrupt_timeout_ms": 2000,
            "max_unpreemptible_running_job_count": 0,
            "infer_weight_from_min_share_ratio_multiplier": 10,
            "max_ephemeral_pool_per_user": 2
          },
          "pools": {
            "a": {
              "min_share_resources": {"cpu": 3},
              "allow_regular_jobs_on_ssd_nodes": false,
              "allow_aggressive_starvation_preemption": true,
              "allow_regular_preemption": false,
              "enable_promised_guarantee_fair_share": true,
              "scheduling_tag": "ssd",
              "fair_share_preemption_timeout_ms": 700
            }
          }
        }"#,
        Format::Json,
    )
    .unwrap();
    let c = &tree.config;
    assert_eq!(c.node_tag_filter.as_deref(), Some("default"));
    assert_eq!(c.fair_share_starvation_timeout_ms, 1500);
    assert_eq!(c.allocation_preemption_timeout_ms, Some(2000));
    assert_eq!(c.max_unpreemptible_running_allocation_count, Some(0));
    assert_eq!(c.infer_weight_from_guarantees_share_multiplier, Some(10.0));
    assert_eq!(c.max_ephemeral_pools_per_user, 2);
    let a = &tree.pools["a"];
    assert_eq!(
        a.strong_guarantee_resources.raw_of(ResourceKind::Cpu),
        Some(300)
    );
    assert_eq!(a.allow_regular_allocations_on_ssd_nodes, Some(false));
    assert_eq!(a.allow_aggressive_preemption, Some(true));
    assert_eq!(a.allow_normal_preemption, Some(false));
    assert!(a.compute_promised_guarantee_fair_share);
    assert_eq!(a.scheduling_tag_filter.as_deref(), Some("ssd"));
    assert_eq!(a.fair_share_starvation_timeout_ms, Some(700));
    valid(&tree);
}

#[test]
fn the_scenario_format_pool_trees_block_loads() {
    // The `pool_trees` block of PRODUCT.md's scenario example.
    let trees: std::collections::BTreeMap<String, PoolTreeConfig> = from_str(
        r#"{
          "default": {
            "config": {"fair_share_starvation_timeout_ms": 1000, "preemptive_scheduling_backoff_ms": 0},
            "pools": {"test_pool": {"strong_guarantee_resources": {"cpu": 3}, "pools": {}}}
          }
        }"#,
        Format::Json,
    )
    .unwrap();
    let tree = &trees["default"];
    assert_eq!(tree.config.fair_share_starvation_timeout_ms, 1000);
    assert_eq!(tree.config.preemptive_scheduling_backoff_ms, 0);
    let v = valid(tree);
    assert_eq!(v.pool("test_pool").unwrap().max_operation_count, 50);
    // A single tree is the default tree.
    let set = PoolTrees {
        default_tree: None,
        pool_trees: trees.clone(),
    };
    assert_eq!(set.default_tree_name(), Some("default"));
    assert_eq!(
        validate_pool_trees(&set).unwrap().default_tree.as_deref(),
        Some("default")
    );
}

#[test]
fn warnings_do_not_reject_the_tree() {
    let tree = tree_toml(
        r#"
[config]
default_parent_pool = "missing"
[pools.capped]
strong_guarantee_resources = { cpu = 10 }
resource_limits = { cpu = 5 }
[pools.promised]
compute_promised_guarantee_fair_share = true
[pools.promised.pools.inner]
compute_promised_guarantee_fair_share = true
[pools.plain]
enable_lightweight_operations = true
"#,
    );
    let v = valid(&tree);
    let rendered: Vec<String> = v.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        rendered,
        [
            "pool \"capped\": field \"resource_limits.cpu\": 5 is below the pool's strong guarantee 10; the guarantee is clipped to the limit",
            "pool \"plain\": field \"enable_lightweight_operations\": has an effect only in FIFO pools",
            "pool \"promised/inner\": field \"compute_promised_guarantee_fair_share\": ancestor pool \"promised\" already computes the promised-guarantee fair share; only the topmost such pool is used (code 29001)",
            "field \"config.default_parent_pool\": pool \"missing\" does not exist; ephemeral pools will be created under the root",
        ]
    );
    assert_eq!(v.default_parent_pool(), None);
}

#[test]
fn fifo_default_parent_falls_back_to_the_root_with_a_warning() {
    let v = valid(&tree_toml(
        "[config]\ndefault_parent_pool = \"queue\"\n[pools.queue]\nmode = \"fifo\"\n",
    ));
    assert_eq!(v.default_parent_pool(), None);
    assert_eq!(v.warnings.len(), 1);
    assert_eq!(v.warnings[0].field, "config.default_parent_pool");
}

#[test]
fn every_error_is_reported_at_once() {
    let tree = tree_toml(
        r#"
[config]
fair_share_starvation_tolerance = 2
[pools.a]
weight = -1
max_operation_count = 1
max_running_operation_count = 2
[pools.a.pools.b]
mode = "fifo"
[pools.a.pools.b.pools.c]
"#,
    );
    let errors = validate_tree(&tree).unwrap_err();
    let fields: Vec<(Option<&str>, &str)> = errors
        .errors()
        .iter()
        .map(|e| (e.pool.as_deref(), e.field.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            (None, "config.fair_share_starvation_tolerance"),
            (Some("a"), "weight"),
            (Some("a"), "max_running_operation_count"),
            (Some("a/b"), "mode"),
        ]
    );
}

#[test]
fn guarantee_overcommit_raises_alert_29000() {
    // YT-S36 "overcommit": 3 nodes x (10 cpu, 10 slots, 100 network); pools 15+20 cpu.
    let cluster = Resources::ZERO
        .with(ResourceKind::Cpu, 30.0)
        .with(ResourceKind::UserSlots, 30.0)
        .with(ResourceKind::Network, 300.0);
    let tree = tree_toml(
        "[pools.pool1]\nstrong_guarantee_resources = { cpu = 15, user_slots = 20 }\n\
         [pools.pool2]\nstrong_guarantee_resources = { cpu = 20 }\n",
    );
    // Overcommit is not a validation error.
    valid(&tree);
    let alert = guarantee_overcommit_alert(&tree, &cluster).unwrap();
    assert_eq!(alert.code, 29000);
    assert_eq!(alert.attributes.overcommitted_resources, ["cpu"]);
    assert_eq!(
        alert.message,
        "Strong guarantees of the root's pools exceed the cluster's resources (cpu: guarantees 35 \
         > cluster 30); guarantees are scaled down proportionally to fit"
    );
    assert_eq!(
        serde_json::to_value(&alert).unwrap()["attributes"]["total_strong_guarantee_resources"]["cpu"],
        35.0
    );

    // Nested guarantees are not counted twice; a fitting tree raises nothing.
    let seed = load_pool_tree_file(example("seed001_project_root.toml")).unwrap();
    let hundred = Resources::ZERO.with(ResourceKind::Cpu, 100.0);
    assert_eq!(guarantee_overcommit_alert(&seed, &hundred), None);
    assert!(guarantee_overcommit_alert(&seed, &hundred.with(ResourceKind::Cpu, 99.0)).is_some());

    // A cluster with no nodes overcommits any positive guarantee (YT-S36 "zero cluster"); the
    // message says that there are no nodes rather than comparing with 0.
    let alert = guarantee_overcommit_alert(&tree, &Resources::ZERO).unwrap();
    assert_eq!(
        alert.message,
        "the tree has no nodes yet: the strong guarantees of the root's pools (user_slots: \
         20, cpu: 35) are checked against the cluster's resources once nodes join"
    );
    assert_eq!(
        guarantee_overcommit_alert(&tree_toml(""), &Resources::ZERO),
        None
    );

    // Strong guarantees plus resource flows.
    let flows = tree_toml(
        "[pools.a]\nstrong_guarantee_resources = { cpu = 20 }\n\
         [pools.b]\nintegral_guarantees = { guarantee_type = \"relaxed\", resource_flow = { cpu = 15 } }\n",
    );
    let alert = guarantee_overcommit_alert(&flows, &cluster).unwrap();
    assert!(
        alert.message.starts_with(
            "Strong guarantees and resource flows of the root's pools exceed the \
                          cluster's resources (cpu: guarantees and resource flows 35 > cluster 30)"
        ),
        "{}",
        alert.message
    );
}

#[test]
fn updates_are_validated_whole_and_diffed() {
    let old = tree_toml("[pools.a]\nweight = 1\n[pools.a.pools.b]\n[pools.c]\n[pools.gone]\n");
    let mut new = old.clone();
    new.pools.remove("gone");
    new.pools.get_mut("c").unwrap().weight = Some(3.0);
    // Move b from a to c.
    let b = new.pools.get_mut("a").unwrap().pools.remove("b").unwrap();
    new.pools.get_mut("c").unwrap().pools.insert("b".into(), b);
    new.pools.insert("fresh".into(), PoolNode::default());
    new.config.fair_share_starvation_tolerance = 0.5;
    let update = validate_update(&old, &new).unwrap();
    assert_eq!(
        update.diff,
        PoolTreeDiff {
            added: vec!["fresh".into()],
            removed: vec!["gone".into()],
            changed: vec!["c".into(), "c/b".into()],
            tree_config_changed: true,
        }
    );
    assert_eq!(
        update.validated.pool("b").unwrap().parent.as_deref(),
        Some("c")
    );
    assert!(diff_trees(&old, &old).is_empty());

    // A pool with subpools cannot become FIFO; the caller keeps the old tree.
    let mut fifo = old.clone();
    fifo.pools.get_mut("a").unwrap().mode = SchedulingMode::Fifo;
    let current = valid(&old);
    let err = validate_update(&current.tree, &fifo).unwrap_err();
    assert!(err.find(Some("a"), "mode").is_some());
    assert_eq!(current.tree, old);

    // Changing main_resource while guarantees lack the new one is rejected.
    let with_guarantee = tree_toml("[pools.a]\nstrong_guarantee_resources = { cpu = 4 }\n");
    let mut gpu_main = with_guarantee.clone();
    gpu_main.config.main_resource = ResourceKind::Gpu;
    let err = validate_update(&with_guarantee, &gpu_main).unwrap_err();
    assert!(err.find(Some("a"), "strong_guarantee_resources").is_some());
}

#[test]
fn pool_node_and_pool_config_convert_both_ways() {
    let tree =
        load_pool_tree_file(example("pool_trees.toml").with_file_name("seed001_project_root.toml"))
            .unwrap();
    let root = &tree.pools["project-root"];
    let config = root.config();
    let rebuilt = PoolNode::from_parts(config.clone(), root.pools.clone());
    assert_eq!(&rebuilt, root);
    let mut other = PoolNode::default();
    other.set_config(config.clone());
    assert_eq!(other.config(), config);
    assert!(other.pools.is_empty());
    // A pool object without `pools` is a valid PoolConfig document, and the reverse.
    let text = to_string(&config, Format::Json).unwrap();
    let node: PoolNode = from_str(&text, Format::Json).unwrap();
    assert_eq!(node.config(), config);
    let err = from_str::<PoolConfig>(r#"{"pools": {}}"#, Format::Json).unwrap_err();
    assert_eq!(err.document_path(), Some("pools"));
}

#[test]
fn file_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("fairsched-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[pools.research.pools.adhoc]\nweight = 1\nwieght = 2\n",
    )
    .unwrap();
    let err = load_pool_tree_file(&bad).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:3:1: at pools.research.pools.adhoc.wieght: ",
            bad.display()
        )),
        "{text}"
    );

    let invalid = dir.join("invalid.json");
    std::fs::write(&invalid, r#"{"pools": {"a": {"weight": -2}}}"#).unwrap();
    match load_and_validate_pool_tree_file(&invalid).unwrap_err() {
        Error::Invalid { file, errors } => {
            assert_eq!(file.as_deref(), Some(invalid.as_path()));
            assert_eq!(errors.len(), 1);
        }
        other => panic!("{other}"),
    }

    let unknown = dir.join("trees.yaml");
    std::fs::write(&unknown, "").unwrap();
    assert!(matches!(
        load_pool_trees_file(&unknown),
        Err(LoadError::UnknownFormat { .. })
    ));
    assert!(matches!(
        load_pool_trees_file(dir.join("missing.toml")),
        Err(LoadError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn examples_round_trip_through_toml_and_json() {
    for name in ["seed001_project_root.toml", "seed001_project_root.json"] {
        let tree = load_pool_tree_file(example(name)).unwrap();
        for format in [Format::Toml, Format::Json] {
            let text = to_string(&tree, format).unwrap();
            let back = load_pool_tree_str(&text, format).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back, tree, "{name} via {format}");
        }
    }
    let trees = load_pool_trees_file(example("pool_trees.toml")).unwrap();
    for format in [Format::Toml, Format::Json] {
        let text = to_string(&trees, format).unwrap();
        let back = load_pool_trees_str(&text, format).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, trees, "pool_trees via {format}");
    }
}

#[test]
fn snapshot_default_tree_config() {
    insta::assert_snapshot!(
        "default_tree_config_toml",
        to_string(&TreeConfig::default(), Format::Toml).unwrap()
    );
}

#[test]
fn snapshot_rendered_error_lists() {
    let tree = tree_toml(
        r#"
[config]
aggressive_preemption_satisfaction_threshold = 1.5
fair_share_aggressive_starvation_timeout_ms = 1000

[config.pool_config_presets.prod]
fair_share_starvation_tolerance = 0.9

[pools.research]
strong_guarantee_resources = { cpu = 50, memory = "100GiB" }
config_presets = ["prod", "nightly"]

[pools.research.pools.adhoc]
weight = -1
strong_guarantee_resources = { cpu = 40, memory = "80GiB", gpu = 1 }

[pools.research.pools.batch]
strong_guarantee_resources = { cpu = 20 }
mode = "fifo"
max_operation_count = 4

[pools.research.pools.batch.pools.adhoc]
"#,
    );
    insta::assert_snapshot!(
        "error_list_research_tree",
        validate_tree(&tree).unwrap_err()
    );

    let trees = load_pool_trees_str(
        r#"{"default_tree": "main", "pool_trees": {
              "physical": {"config": {"node_tag_filter": "rack:1"}},
              "copy": {"config": {"node_tag_filter": "rack:1"}, "pools": {"q": {"mode": "fifo", "create_ephemeral_subpools": true}}},
              "any": {}}}"#,
        Format::Json,
    )
    .unwrap();
    insta::assert_snapshot!(
        "error_list_tree_set",
        validate_pool_trees(&trees).unwrap_err()
    );
}

#[test]
fn pools_may_be_nested_30_levels_deep_but_not_31() {
    fn chain(levels: usize) -> PoolTreeConfig {
        let mut node = PoolNode::default();
        for level in (2..=levels).rev() {
            let mut parent = PoolNode::default();
            parent.pools.insert(format!("level{level}"), node);
            node = parent;
        }
        let mut tree = PoolTreeConfig::default();
        tree.pools.insert("level1".into(), node);
        tree
    }
    let ok = valid(&chain(MAX_POOL_DEPTH));
    assert_eq!(ok.pool("level30").unwrap().depth, 30);
    // A 30-level tree survives both formats.
    for format in [Format::Toml, Format::Json] {
        let text = to_string(&ok.tree, format).unwrap();
        assert_eq!(load_pool_tree_str(&text, format).unwrap(), ok.tree);
    }
    let errors = validate_tree(&chain(MAX_POOL_DEPTH + 1)).unwrap_err();
    let path: Vec<String> = (1..=30).map(|l| format!("level{l}")).collect();
    let e = errors.find(Some(&path.join("/")), "pools").unwrap();
    assert!(e.message.contains("at most 30 levels"), "{e}");
    // Very deep trees are rejected without exhausting the stack.
    assert!(validate_tree(&chain(2_000)).is_err());
}

/// Tree setups of the upstream integration scenarios (shared/conformance/yt_scenarios.json),
/// written in the scenario format: every one must load and validate.
#[test]
fn integration_scenario_setups_are_valid() {
    let setups: &[(&str, &str)] = &[
        (
            "YT-S1",
            r#"{"config": {"preemption_satisfaction_threshold": 0.99, "fair_share_starvation_tolerance": 0.8,
                "fair_share_starvation_timeout_ms": 1000, "max_unpreemptible_running_allocation_count": 0,
                "preemptive_scheduling_backoff_ms": 0, "allocation_graceful_preemption_timeout_ms": 10000,
                "max_ephemeral_pools_per_user": 2},
               "pools": {"test_pool": {"strong_guarantee_resources": {"cpu": 3}}}}"#,
        ),
        (
            "YT-S5",
            r#"{"pools": {"p1": {"fair_share_starvation_tolerance": 0.6, "pools": {
                  "p2": {}, "p3": {"fair_share_starvation_tolerance": 0.5},
                  "p4": {"fair_share_starvation_tolerance": 0.9}}},
                "p5": {"fair_share_starvation_tolerance": 0.8, "pools": {"p6": {}}}}}"#,
        ),
        (
            "YT-S14",
            r#"{"config": {"aggressive_preemption_satisfaction_threshold": 0.4, "preemption_satisfaction_threshold": 0.9,
                "fair_share_starvation_tolerance": 1.0, "non_preemptible_resource_usage_threshold": {},
                "max_unpreemptible_running_allocation_count": null}}"#,
        ),
        (
            "YT-S23",
            r#"{"config": {"aggressive_preemption_satisfaction_threshold": 0.2, "preemption_satisfaction_threshold": 1.0,
                "fair_share_starvation_tolerance": 0.8, "max_unpreemptible_running_allocation_count": 0,
                "fair_share_starvation_timeout_ms": 100, "fair_share_aggressive_starvation_timeout_ms": 200,
                "preemptive_scheduling_backoff_ms": 0},
               "pools": {"regular_pool": {"strong_guarantee_resources": {"cpu": 1}},
                         "starving_pool": {"strong_guarantee_resources": {"cpu": 9}}}}"#,
        ),
        (
            "YT-S25",
            r#"{"config": {"fair_share_starvation_tolerance": 0.9, "max_ephemeral_pools_per_user": 5,
                "ssd_priority_preemption": {"enable": false, "node_tag_filter": "ssd_tag", "medium_names": ["ssd_slots"]}},
               "pools": {"protected": {"allow_regular_jobs_on_ssd_nodes": false}, "regular": {}}}"#,
        ),
        (
            "YT-S31",
            r#"{"pools": {"root": {"max_operation_count": 5, "max_running_operation_count": 2, "pools": {
                  "pool": {}, "lightweight_pool": {"mode": "fifo", "enable_lightweight_operations": true}}}}}"#,
        ),
        (
            "YT-S32",
            r#"{"config": {"default_parent_pool": "default_pool", "max_ephemeral_pools_per_user": 3},
               "pools": {"default_pool": {}}}"#,
        ),
        (
            "YT-S34",
            r#"{"config": {"enable_limiting_ancestor_check": true},
               "pools": {"limiting_pool": {"resource_limits": {"cpu": 1.0}, "pools": {"subpool": {}}}}}"#,
        ),
        (
            "YT-S36 explicit",
            r#"{"config": {"main_resource": "cpu"},
               "pools": {"pool": {"strong_guarantee_resources": {"cpu": 30, "user_slots": 30}, "pools": {
                  "subpool1": {"strong_guarantee_resources": {"cpu": 10, "user_slots": 20}},
                  "subpool2": {"strong_guarantee_resources": {"cpu": 20, "user_slots": 10}}}}}}"#,
        ),
        (
            "YT-S36 partially explicit, with scaling",
            r#"{"pools": {"pool": {"strong_guarantee_resources": {"cpu": 30, "user_slots": 30}, "pools": {
                  "subpool1": {"strong_guarantee_resources": {"cpu": 10, "user_slots": 25}},
                  "subpool2": {"strong_guarantee_resources": {"cpu": 5}},
                  "subpool3": {"strong_guarantee_resources": {"cpu": 10}}}}}}"#,
        ),
        (
            "YT-S36 overcommit (an alert, not an error)",
            r#"{"pools": {"pool1": {"strong_guarantee_resources": {"cpu": 15, "user_slots": 20}},
                         "pool2": {"strong_guarantee_resources": {"cpu": 20}}}}"#,
        ),
        (
            "YT-S37 resource flow",
            r#"{"config": {"infer_weight_from_min_share_ratio_multiplier": 10},
               "pools": {
                 "test_pool1": {"integral_guarantees": {"resource_flow": {"cpu": 30}, "guarantee_type": "relaxed"}},
                 "test_pool2": {"integral_guarantees": {"resource_flow": {"cpu": 40}, "guarantee_type": "none"}, "pools": {
                   "subpool1": {"integral_guarantees": {"resource_flow": {"cpu": 16}, "guarantee_type": "burst"}},
                   "subpool2": {"integral_guarantees": {"resource_flow": {"cpu": 24}, "guarantee_type": "relaxed"}}}},
                 "test_pool3": {}}}"#,
        ),
        (
            "YT-S40",
            r#"{"config": {"enable_limiting_ancestor_check": false, "enable_guarantee_priority_scheduling": true},
               "pools": {"root": {"resource_limits": {"user_slots": 0}, "strong_guarantee_resources": {"cpu": 4.0},
                                  "allow_regular_preemption": false, "pools": {
                 "prod": {"resource_limits": {"user_slots": 1}, "strong_guarantee_resources": {"cpu": 3.0},
                          "compute_promised_guarantee_fair_share": true},
                 "research": {}}}}}"#,
        ),
    ];
    for (id, text) in setups {
        let tree = load_pool_tree_str(text, Format::Json).unwrap_or_else(|e| panic!("{id}: {e}"));
        let v = validate_tree(&tree).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(v.warnings.is_empty(), "{id}: {:?}", v.warnings);
    }
}
