//! Invalid configurations: every case is data, run through one `check` helper.
//!
//! A case is a document (TOML or JSON, one tree or a set of trees) and the one error it must
//! produce: either a load error (path inside the document + message) or a validation error
//! (tree, pool path, field + message). `check` also asserts that a rejected document leaves the
//! caller's current configuration untouched.

use fairsched_config::{
    ConfigErrors, Format, PoolTreeConfig, PoolTrees, ValidatedTree, load_pool_tree_str,
    load_pool_trees_str, validate_pool_trees, validate_tree, validate_update,
};

#[derive(Clone, Copy, Debug)]
enum Doc {
    /// One tree: `config` + `pools`.
    Tree,
    /// A set of trees: `default_tree` + `pool_trees`.
    Trees,
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Rejected while loading, at this path inside the document.
    Load {
        path: &'static str,
        message: &'static str,
    },
    /// Loaded, then rejected by validation with an error naming this tree, pool and field.
    Invalid {
        tree: Option<&'static str>,
        pool: Option<&'static str>,
        field: &'static str,
        message: &'static str,
    },
}

struct Case {
    name: &'static str,
    doc: Doc,
    format: Format,
    input: &'static str,
    expect: Expect,
}

use Doc::{Tree, Trees};
use Expect::{Invalid, Load};
use Format::{Json, Toml};

const fn pool_err(pool: &'static str, field: &'static str, message: &'static str) -> Expect {
    Invalid {
        tree: None,
        pool: Some(pool),
        field,
        message,
    }
}

const fn tree_err(field: &'static str, message: &'static str) -> Expect {
    Invalid {
        tree: None,
        pool: None,
        field,
        message,
    }
}

const CASES: &[Case] = &[
    // ----- Weights -----
    Case {
        name: "negative weight",
        doc: Tree,
        format: Toml,
        input: "[pools.research.pools.adhoc]\nweight = -1\n",
        expect: pool_err("research/adhoc", "weight", "must be > 0 (got -1)"),
    },
    Case {
        name: "zero weight",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"research": {"weight": 0}}}"#,
        expect: pool_err("research", "weight", "must be > 0 (got 0)"),
    },
    Case {
        name: "NaN weight",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\nweight = nan\n",
        expect: pool_err("a", "weight", "must be a finite number (got NaN)"),
    },
    Case {
        name: "infinite weight",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\nweight = inf\n",
        expect: pool_err("a", "weight", "must be a finite number (got inf)"),
    },
    Case {
        name: "weight above the maximum",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"weight": 1e9}}}"#,
        expect: pool_err(
            "a",
            "weight",
            "must be in [1.4901161193847656e-8, 6.7108864e7]",
        ),
    },
    Case {
        name: "weight far below the minimum, shown readably",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"weight": 1e-300}}}"#,
        expect: pool_err(
            "a",
            "weight",
            "must be in [1.4901161193847656e-8, 6.7108864e7] (got 1e-300)",
        ),
    },
    Case {
        name: "weight that is not a number",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\nweight = \"heavy\"\n",
        expect: Load {
            path: "pools.a.weight",
            message: "invalid type: the string \"heavy\", expected a number",
        },
    },
    // ----- Unknown names and bad values caught while loading -----
    Case {
        name: "misspelled pool option",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"research": {"pools": {"adhoc": {"wieght": 1}}}}}"#,
        expect: Load {
            path: "pools.research.pools.adhoc.wieght",
            message: "unknown option `wieght` (did you mean `weight`?)",
        },
    },
    Case {
        name: "misspelled tree option",
        doc: Tree,
        format: Toml,
        input: "[config]\nfair_share_starvation_tolerence = 0.5\n",
        expect: Load {
            path: "config.fair_share_starvation_tolerence",
            message: "did you mean `fair_share_starvation_tolerance`?",
        },
    },
    Case {
        name: "negative guarantee",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"strong_guarantee_resources": {"cpu": -1}}}}"#,
        expect: Load {
            path: "pools.a.strong_guarantee_resources",
            message: "resource \"cpu\": -1 is negative",
        },
    },
    Case {
        name: "unknown resource in limits",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\nresource_limits = { cpus = 1 }\n",
        expect: Load {
            path: "pools.a.resource_limits",
            message: "unknown resource \"cpus\"",
        },
    },
    Case {
        name: "option not allowed in a preset",
        doc: Tree,
        format: Toml,
        input: "[config.pool_config_presets.big]\nweight = 2\n",
        expect: Load {
            path: "config.pool_config_presets.big.weight",
            message: "unknown option `weight`",
        },
    },
    Case {
        name: "unknown main resource",
        doc: Tree,
        format: Toml,
        input: "[config]\nmain_resource = \"disk\"\n",
        expect: Load {
            path: "config.main_resource",
            message: "unknown resource \"disk\"",
        },
    },
    Case {
        name: "unknown pool mode",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"mode": "lifo"}}}"#,
        expect: Load {
            path: "pools.a.mode",
            message: "unknown variant `lifo`",
        },
    },
    Case {
        name: "unknown FIFO sort parameter",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\nmode = \"fifo\"\nfifo_sort_parameters = [\"start_time\", \"size\"]\n",
        expect: Load {
            path: "pools.a.fifo_sort_parameters[1]",
            message: "unknown variant `size`",
        },
    },
    Case {
        name: "negative operation count",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"max_operation_count": -1}}}"#,
        expect: Load {
            path: "pools.a.max_operation_count",
            message: "invalid value: `-1`, expected a whole number (0 or more)",
        },
    },
    Case {
        name: "negative timeout",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"fair_share_starvation_timeout_ms": -5}}"#,
        expect: Load {
            path: "config.fair_share_starvation_timeout_ms",
            message: "invalid value: `-5`, expected a whole number",
        },
    },
    Case {
        name: "TOML syntax error",
        doc: Tree,
        format: Toml,
        input: "[pools.a\nweight = 1\n",
        expect: Load {
            path: "",
            message: "invalid table header",
        },
    },
    Case {
        name: "JSON trailing characters",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {}} x"#,
        expect: Load {
            path: "",
            message: "trailing characters",
        },
    },
    // ----- Guarantees -----
    Case {
        name: "children's guarantees exceed the parent's",
        doc: Tree,
        format: Toml,
        input: r#"
[pools.project.pools.adhoc]
strong_guarantee_resources = { cpu = 80 }
[pools.project]
strong_guarantee_resources = { cpu = 100 }
[pools.project.pools.batch]
strong_guarantee_resources = { cpu = 40 }
"#,
        expect: pool_err(
            "project",
            "strong_guarantee_resources.cpu",
            "children's strong guarantees sum to 120 cpu, more than this pool's 100 \
             (children: \"adhoc\" 80, \"batch\" 40)",
        ),
    },
    Case {
        name: "child guarantees a resource the parent does not configure",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"p": {"strong_guarantee_resources": {"cpu": 10},
                   "pools": {"c": {"strong_guarantee_resources": {"cpu": 5, "memory": "1GiB"}}}}}}"#,
        expect: pool_err(
            "p/c",
            "strong_guarantee_resources.memory",
            "is 1GiB but the parent pool \"p\" does not configure memory",
        ),
    },
    Case {
        name: "guarantee without the main resource",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"strong_guarantee_resources": {"memory": "10GiB"}}}}"#,
        expect: pool_err(
            "a",
            "strong_guarantee_resources",
            "sets memory but not the tree's main resource \"cpu\"",
        ),
    },
    Case {
        name: "guarantee without a non-default main resource",
        doc: Tree,
        format: Toml,
        input: "[config]\nmain_resource = \"gpu\"\n[pools.a]\nstrong_guarantee_resources = { cpu = 8 }\n",
        expect: pool_err("a", "strong_guarantee_resources", "main resource \"gpu\""),
    },
    Case {
        name: "children's resource flows exceed the parent's",
        doc: Tree,
        format: Toml,
        input: r#"
[pools.p]
integral_guarantees = { resource_flow = { cpu = 10 } }
[pools.p.pools.a]
integral_guarantees = { guarantee_type = "relaxed", resource_flow = { cpu = 6 } }
[pools.p.pools.b]
integral_guarantees = { guarantee_type = "burst", resource_flow = { cpu = 6 }, burst_guarantee_resources = { cpu = 20 } }
"#,
        expect: pool_err(
            "p",
            "integral_guarantees.resource_flow.cpu",
            "children's resource flows sum to 12 cpu, more than this pool's 10",
        ),
    },
    Case {
        name: "burst guarantee on a relaxed pool",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"integral_guarantees": {"guarantee_type": "relaxed",
                   "resource_flow": {"cpu": 5}, "burst_guarantee_resources": {"cpu": 10}}}}}"#,
        expect: pool_err(
            "a",
            "integral_guarantees.burst_guarantee_resources",
            "burst guarantees cannot be set for integral guarantee type \"relaxed\"",
        ),
    },
    Case {
        name: "resource flow inside an integral pool",
        doc: Tree,
        format: Toml,
        input: r#"
[pools.burst]
integral_guarantees = { guarantee_type = "burst", resource_flow = { cpu = 10 }, burst_guarantee_resources = { cpu = 30 } }
[pools.burst.pools.inner]
integral_guarantees = { guarantee_type = "relaxed", resource_flow = { cpu = 5 } }
"#,
        expect: pool_err(
            "burst/inner",
            "integral_guarantees.resource_flow",
            "ancestor pool \"burst\" has integral guarantee type burst",
        ),
    },
    Case {
        name: "relaxed share multiplier above 10",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"integral_guarantees": {"guarantee_type": "relaxed",
                   "resource_flow": {"cpu": 1}, "relaxed_share_multiplier_limit": 11}}}}"#,
        expect: pool_err(
            "a",
            "integral_guarantees.relaxed_share_multiplier_limit",
            "must be in [1, 10] (got 11)",
        ),
    },
    Case {
        name: "tree relaxed share multiplier below 1",
        doc: Tree,
        format: Toml,
        input: "[config.integral_guarantees]\nrelaxed_share_multiplier_limit = 0.5\n",
        expect: tree_err(
            "config.integral_guarantees.relaxed_share_multiplier_limit",
            "must be in [1, 10] (got 0.5)",
        ),
    },
    // ----- Operation counts -----
    Case {
        name: "running limit above operation limit",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\nmax_operation_count = 5\nmax_running_operation_count = 10\n",
        expect: pool_err(
            "a",
            "max_running_operation_count",
            "must not exceed max_operation_count (10 > 5)",
        ),
    },
    Case {
        name: "ephemeral subpool running limit above its operation limit",
        doc: Tree,
        format: Toml,
        input: "[pools.a]\ncreate_ephemeral_subpools = true\nephemeral_subpool_config = { max_operation_count = 3, max_running_operation_count = 4 }\n",
        expect: pool_err(
            "a",
            "ephemeral_subpool_config.max_running_operation_count",
            "(4 > 3)",
        ),
    },
    Case {
        name: "tree running limit above tree operation limit",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"max_operation_count": 100, "max_running_operation_count": 200}}"#,
        expect: tree_err(
            "config.max_running_operation_count",
            "must not exceed max_operation_count (200 > 100)",
        ),
    },
    Case {
        name: "zero ephemeral pools per user",
        doc: Tree,
        format: Toml,
        input: "[config]\nmax_ephemeral_pools_per_user = 0\n",
        expect: tree_err("config.max_ephemeral_pools_per_user", "must be > 0 (got 0)"),
    },
    Case {
        name: "zero job reservations",
        doc: Tree,
        format: Toml,
        input: "[config.job_reservation]\nenable = true\nmax_reservations = 0\n",
        expect: tree_err(
            "config.job_reservation.max_reservations",
            "must be > 0 (got 0)",
        ),
    },
    Case {
        name: "zero gang assembly timeout",
        doc: Tree,
        format: Toml,
        input: "[config.gang_placement]\nenable = true\nassembly_timeout_ms = 0\n",
        expect: tree_err(
            "config.gang_placement.assembly_timeout_ms",
            "must be > 0 (got 0)",
        ),
    },
    // ----- Starvation and preemption -----
    Case {
        name: "tree tolerance above 1",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"fair_share_starvation_tolerance": 1.5}}"#,
        expect: tree_err(
            "config.fair_share_starvation_tolerance",
            "must be in [0, 1] (got 1.5)",
        ),
    },
    Case {
        name: "pool tolerance below 0",
        doc: Tree,
        format: Toml,
        input: "[pools.a.pools.b]\nfair_share_starvation_tolerance = -0.1\n",
        expect: pool_err(
            "a/b",
            "fair_share_starvation_tolerance",
            "must be in [0, 1] (got -0.1)",
        ),
    },
    Case {
        name: "preset tolerance above 1",
        doc: Tree,
        format: Toml,
        input: "[config.pool_config_presets.lenient]\nfair_share_starvation_tolerance = 2\n",
        expect: tree_err(
            "config.pool_config_presets.lenient.fair_share_starvation_tolerance",
            "must be in [0, 1] (got 2)",
        ),
    },
    Case {
        name: "aggressive threshold above the regular threshold",
        doc: Tree,
        format: Toml,
        input: "[config]\npreemption_satisfaction_threshold = 0.5\naggressive_preemption_satisfaction_threshold = 0.8\n",
        expect: tree_err(
            "config.aggressive_preemption_satisfaction_threshold",
            "must not exceed preemption_satisfaction_threshold (0.8 > 0.5)",
        ),
    },
    Case {
        name: "zero preemption threshold",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"preemption_satisfaction_threshold": 0, "aggressive_preemption_satisfaction_threshold": 0}}"#,
        expect: tree_err(
            "config.preemption_satisfaction_threshold",
            "must be a finite number > 0 (got 0)",
        ),
    },
    Case {
        name: "aggressive timeout shorter than the starvation timeout",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"fair_share_starvation_timeout_ms": 60000, "fair_share_aggressive_starvation_timeout_ms": 30000}}"#,
        expect: tree_err(
            "config.fair_share_aggressive_starvation_timeout_ms",
            "must be >= fair_share_starvation_timeout_ms (30000 < 60000)",
        ),
    },
    Case {
        name: "weight inference multiplier below 1",
        doc: Tree,
        format: Toml,
        input: "[config]\ninfer_weight_from_guarantees_share_multiplier = 0.5\n",
        expect: tree_err(
            "config.infer_weight_from_guarantees_share_multiplier",
            "must be a finite number >= 1 (got 0.5)",
        ),
    },
    Case {
        name: "SSD priority preemption without a node filter",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"ssd_priority_preemption": {"enable": true, "medium_names": ["ssd"]}}}"#,
        expect: tree_err(
            "config.ssd_priority_preemption.node_tag_filter",
            "must be set when ssd_priority_preemption.enable is true",
        ),
    },
    Case {
        name: "node tag filter that does not parse",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"node_tag_filter": "gpu & (ssd"}}"#,
        expect: tree_err("config.node_tag_filter", "at offset 10: expected ')'"),
    },
    Case {
        name: "SSD node tag filter that does not parse",
        doc: Tree,
        format: Json,
        input: r#"{"config": {"ssd_priority_preemption": {"enable": true, "node_tag_filter": "ssd |"}}}"#,
        expect: tree_err(
            "config.ssd_priority_preemption.node_tag_filter",
            "expected a tag, '!' or '('",
        ),
    },
    Case {
        name: "pool scheduling tag filter that does not parse",
        doc: Tree,
        format: Toml,
        input: "[pools.gpu]\nscheduling_tag_filter = \"gpu &\"\n",
        expect: pool_err("gpu", "scheduling_tag_filter", "expected a tag, '!' or '('"),
    },
    // ----- Names -----
    Case {
        name: "pool name with a space",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"bad name": {}}}"#,
        expect: pool_err("bad name", "name", "contains ' '"),
    },
    Case {
        name: "pool called <Root>",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"<Root>": {}}}"#,
        expect: pool_err("<Root>", "name", "reserved for the root"),
    },
    Case {
        name: "pool name with $",
        doc: Tree,
        format: Toml,
        input: "[pools.research.pools.\"adhoc$alice\"]\n",
        expect: pool_err(
            "research/adhoc$alice",
            "name",
            "'$', which is reserved for ephemeral subpools",
        ),
    },
    Case {
        name: "empty pool name",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"pools": {"": {}}}}}"#,
        expect: pool_err("a/", "name", "pool name must not be empty"),
    },
    Case {
        name: "pool name with a slash",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a/b": {}}}"#,
        expect: pool_err("a/b", "name", "contains '/'"),
    },
    Case {
        name: "duplicate pool name under different parents",
        doc: Tree,
        format: Toml,
        input: "[pools.a.pools.shared]\n[pools.b.pools.shared]\n",
        expect: pool_err(
            "b/shared",
            "name",
            "duplicate pool name \"shared\": also at \"a/shared\"",
        ),
    },
    Case {
        name: "pool named like a top-level pool deeper down",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"x": {"pools": {"y": {"pools": {"x": {}}}}}}}"#,
        expect: pool_err("x/y/x", "name", "duplicate pool name \"x\""),
    },
    // ----- Presets -----
    Case {
        name: "unknown preset",
        doc: Tree,
        format: Toml,
        input: "[config.pool_config_presets.batch]\nfair_share_starvation_tolerance = 0.5\n[pools.a.pools.b]\nconfig_presets = [\"batch\", \"prod\"]\n",
        expect: pool_err(
            "a/b",
            "config_presets",
            "unknown preset \"prod\": the tree's pool_config_presets are \"batch\"",
        ),
    },
    Case {
        name: "preset named but none defined",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"config_presets": ["prod"]}}}"#,
        expect: pool_err(
            "a",
            "config_presets",
            "the tree defines no pool_config_presets",
        ),
    },
    // ----- FIFO -----
    Case {
        name: "FIFO pool with child pools",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"queue": {"mode": "fifo", "pools": {"sub": {}}}}}"#,
        expect: pool_err(
            "queue",
            "mode",
            "a FIFO pool cannot have child pools (has \"sub\")",
        ),
    },
    Case {
        name: "FIFO pool creating ephemeral subpools",
        doc: Tree,
        format: Toml,
        input: "[pools.queue]\nmode = \"fifo\"\ncreate_ephemeral_subpools = true\n",
        expect: pool_err(
            "queue",
            "create_ephemeral_subpools",
            "a FIFO pool cannot create ephemeral subpools",
        ),
    },
    Case {
        name: "empty FIFO sort parameters",
        doc: Tree,
        format: Toml,
        input: "[pools.queue]\nmode = \"fifo\"\nfifo_sort_parameters = []\n",
        expect: pool_err("queue", "fifo_sort_parameters", "must not be empty"),
    },
    // ----- ACL -----
    Case {
        name: "ACL entry without subjects",
        doc: Tree,
        format: Json,
        input: r#"{"pools": {"a": {"acl": [{"action": "allow", "subjects": [], "permissions": ["use"]}]}}}"#,
        expect: pool_err("a", "acl[0].subjects", "must not be empty"),
    },
    Case {
        name: "ACL entry with an unknown permission",
        doc: Tree,
        format: Toml,
        input: "[[pools.a.acl]]\nsubjects = [\"alice\"]\npermissions = [\"fly\"]\n",
        expect: Load {
            path: "pools.a.acl[0].permissions[0]",
            message: "unknown variant `fly`",
        },
    },
    // ----- Sets of trees -----
    Case {
        name: "default tree that does not exist",
        doc: Trees,
        format: Toml,
        input: "default_tree = \"gpu\"\n[pool_trees.physical]\n",
        expect: tree_err(
            "default_tree",
            "names tree \"gpu\", which does not exist (trees: \"physical\")",
        ),
    },
    Case {
        name: "two trees with the same node filter",
        doc: Trees,
        format: Json,
        input: r#"{"pool_trees": {"a": {"config": {"node_tag_filter": "ssd"}},
                                  "b": {"config": {"node_tag_filter": " ssd "}}}}"#,
        expect: Invalid {
            tree: Some("b"),
            pool: None,
            field: "config.node_tag_filter",
            message: "is the same as tree \"a\"'s; trees must not share nodes",
        },
    },
    Case {
        name: "tree without a node filter beside another tree",
        doc: Trees,
        format: Toml,
        input: "[pool_trees.default]\n[pool_trees.gpu.config]\nnode_tag_filter = \"gpu\"\n",
        expect: Invalid {
            tree: Some("default"),
            pool: None,
            field: "config.node_tag_filter",
            message: "is not set, so this tree takes every node",
        },
    },
    Case {
        name: "pool error inside one of several trees",
        doc: Trees,
        format: Json,
        input: r#"{"default_tree": "a", "pool_trees": {
                    "a": {"config": {"node_tag_filter": "a"}, "pools": {"ok": {"weight": 2}}},
                    "b": {"config": {"node_tag_filter": "b"}, "pools": {"bad": {"weight": -3}}}}}"#,
        expect: Invalid {
            tree: Some("b"),
            pool: Some("bad"),
            field: "weight",
            message: "must be > 0 (got -3)",
        },
    },
    Case {
        name: "unknown top-level key in a set of trees",
        doc: Trees,
        format: Toml,
        input: "default = \"a\"\n[pool_trees.a]\n",
        expect: Load {
            path: "default",
            message: "unknown option `default`",
        },
    },
    Case {
        name: "bad tree name",
        doc: Trees,
        format: Json,
        input: r#"{"pool_trees": {"my tree": {}}}"#,
        expect: Invalid {
            tree: Some("my tree"),
            pool: None,
            field: "name",
            message: "tree name \"my tree\" contains ' '",
        },
    },
];

/// A valid tree standing for "the configuration currently in force".
fn current_tree() -> ValidatedTree {
    let tree = load_pool_tree_str(
        "[pools.research]\nweight = 2\n[pools.research.pools.adhoc]\nweight = 1\n",
        Format::Toml,
    )
    .unwrap();
    validate_tree(&tree).unwrap()
}

/// Applies a new tree to `current` only if it validates, like the server does.
fn apply(current: &mut ValidatedTree, new: &PoolTreeConfig) -> Result<(), ConfigErrors> {
    let update = validate_update(&current.tree, new)?;
    *current = update.validated;
    Ok(())
}

fn check(case: &Case) {
    let name = case.name;
    let loaded: Result<Result<(), ConfigErrors>, fairsched_config::LoadError> = match case.doc {
        Tree => load_pool_tree_str(case.input, case.format).map(|tree| {
            // A rejected tree leaves the configuration in force untouched.
            let mut current = current_tree();
            let before = current.clone();
            let result = apply(&mut current, &tree);
            if result.is_err() {
                assert_eq!(
                    current, before,
                    "{name}: rejected tree changed the current one"
                );
            }
            result
        }),
        Trees => load_pool_trees_str(case.input, case.format)
            .map(|trees: PoolTrees| validate_pool_trees(&trees).map(|_| ())),
    };
    match case.expect {
        Load { path, message } => {
            let err = match loaded {
                Err(e) => e,
                Ok(r) => panic!("{name}: expected a load error, got {r:?}"),
            };
            assert_eq!(err.document_path(), Some(path), "{name}: {err}");
            assert!(
                err.to_string().contains(message),
                "{name}: message {:?} does not contain {message:?}",
                err.to_string()
            );
        }
        Invalid {
            tree,
            pool,
            field,
            message,
        } => {
            let result = loaded.unwrap_or_else(|e| panic!("{name}: expected to load, got {e}"));
            let errors = match result {
                Err(errors) => errors,
                Ok(()) => panic!("{name}: expected a validation error, got a valid config"),
            };
            let found = errors.errors().iter().find(|e| {
                e.tree.as_deref() == tree && e.pool.as_deref() == pool && e.field == field
            });
            let found = found.unwrap_or_else(|| {
                panic!(
                    "{name}: no error for tree {tree:?} pool {pool:?} field {field:?} in:\n{errors}"
                )
            });
            assert!(
                found.message.contains(message),
                "{name}: message {:?} does not contain {message:?}",
                found.message
            );
            // The rendered error names the pool and the field.
            let rendered = found.to_string();
            if let Some(pool) = pool {
                assert!(rendered.contains(&format!("pool {pool:?}")), "{rendered}");
            }
            assert!(rendered.contains(&format!("field {field:?}")), "{rendered}");
        }
    }
}

#[test]
fn every_invalid_input_is_rejected_with_a_precise_error() {
    let failed: Vec<&str> = CASES
        .iter()
        .filter(|case| std::panic::catch_unwind(|| check(case)).is_err())
        .map(|case| case.name)
        .collect();
    assert!(failed.is_empty(), "failed cases: {failed:#?}");
    let toml = CASES.iter().filter(|c| c.format == Toml).count();
    let json = CASES.len() - toml;
    assert!(
        CASES.len() >= 25 && toml >= 10 && json >= 10,
        "{toml} TOML, {json} JSON"
    );
}

#[test]
fn case_names_are_distinct() {
    let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len());
}
