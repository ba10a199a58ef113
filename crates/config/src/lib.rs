//! Pool-tree configuration for fairsched: typed options with YTsaurus names and defaults,
//! TOML/JSON loading with precise errors, validation, presets, and the guarantees-overcommit
//! alert.
//!
//! # Layout of a configuration
//!
//! A **set of trees** ([`PoolTrees`]) is `default_tree` plus `pool_trees`, a map from tree name
//! to a **tree** ([`PoolTreeConfig`]). A tree has the tree options under `config`
//! ([`TreeConfig`]) and its top-level pools under `pools`. A **pool** ([`PoolNode`]) has its
//! options flat in the pool object ([`PoolConfig`]'s fields) beside `pools`, the map of its
//! children:
//!
//! ```toml
//! default_tree = "default"
//!
//! [pool_trees.default.config]
//! fair_share_starvation_timeout_ms = 1000
//! pool_config_presets = { prod = { fair_share_starvation_tolerance = 0.9 } }
//!
//! [pool_trees.default.pools.project-root]
//! strong_guarantee_resources = { cpu = 100 }
//! max_running_operation_count = 10
//!
//! [pool_trees.default.pools.project-root.pools.project-adhoc]
//! strong_guarantee_resources = { cpu = 80, memory = "200GiB" }
//! config_presets = ["prod"]
//! ```
//!
//! The same document in JSON has the same shape. Option names are the YTsaurus names; a
//! duration is the YTsaurus name plus `_ms`, in milliseconds. Resource maps accept numbers or
//! human strings (`"4GiB"`). Unknown option names are errors. Pool names are unique within a
//! tree. Maps are `BTreeMap`s, so everything iterates in name order.
//!
//! # Pipeline
//!
//! 1. **Load**: [`load_pool_trees_str`] / [`load_pool_trees_file`] (and the `load_pool_tree_*`
//!    twins for one tree, [`from_str`] / [`from_file`] for any type). Errors ([`LoadError`])
//!    name the file, the line, the path inside the document
//!    (`pools.research.pools.adhoc.weight`) and the problem.
//! 2. **Validate**: [`validate_tree`] / [`validate_pool_trees`] are pure: they return the
//!    validated value ([`ValidatedTree`]: the tree as given, each pool's effective settings
//!    after presets, defaults and inheritance, and warnings) or **all** errors found
//!    ([`ConfigErrors`], each naming pool path and field). A rejected configuration changes
//!    nothing; [`validate_update`] checks a change of a tree and reports what changed.
//! 3. **Presets**: [`resolve_presets`] / [`resolve_pool_config`] apply a pool's
//!    `config_presets`; the pool's own options win, then earlier presets over later ones.
//! 4. **Alert**: [`guarantee_overcommit_alert`] reports (code 29000) root guarantees above the
//!    cluster's total; such trees are accepted and the guarantees are scaled down.
//! 5. **Write back**: [`to_string`] writes TOML or JSON that loads to an equal value.
//!
//! 6. **Reference**: [`reference::pool_trees`] documents every option (name, aliases, type,
//!    default, doc comment) from these types as a JSON schema and as
//!    `docs/config-reference.md`; [`reference::Reference`] builds the same for any root type
//!    (the server's file).
//!
//! Module map: `tree` (tree options), `pool` (pool options, presets), `trees` (tree and tree
//! set), `load`, `validate`, `presets`, `alert`, `error`, `common` (enums, constants),
//! `reference` (the generated configuration reference).

pub mod acl;
mod alert;
mod common;
mod error;
mod load;
mod pool;
mod presets;
pub mod reference;
mod tag_filter;
mod tree;
mod trees;
mod validate;
mod words;

pub use acl::{AccessDenied, Subject};
pub use alert::{Alert, OvercommitAttributes, guarantee_overcommit_alert};
pub use common::{
    AccessControlEntry, AceAction, FifoPoolSchedulingOrder, FifoSortParameter,
    IntegralGuaranteeType, MAX_NAME_LENGTH, MAX_POOL_DEPTH, MAX_WEIGHT, MIN_WEIGHT,
    NESTED_PROMISED_GUARANTEE_FAIR_SHARE_POOLS, POOL_TREE_GUARANTEES_OVERCOMMIT, Permission,
    PreemptionPriorityScope, RELAXED_SHARE_MULTIPLIER_RANGE, ROOT_POOL_NAME, SchedulingMode,
    default_fifo_sort_parameters,
};
pub use error::{ConfigError, ConfigErrors, Error, Format, LoadError};
pub use load::{
    SerializeError, closest, from_file, from_str, load_and_validate_pool_tree_file,
    load_and_validate_pool_trees_file, load_pool_tree_file, load_pool_tree_str,
    load_pool_trees_file, load_pool_trees_str, to_string,
};
pub use pool::{
    EphemeralSubpoolConfig, PoolConfig, PoolIntegralGuaranteesConfig, PoolNode, PoolPresetConfig,
};
pub use presets::{resolve_pool_config, resolve_presets};
pub use tag_filter::{TagFilter, TagFilterError};
pub use tree::{
    GangHold, GangPlacementConfig, JobReservationConfig, SsdPriorityPreemptionConfig, TreeConfig,
    TreeIntegralGuaranteesConfig,
};
pub use trees::{PoolTreeConfig, PoolTrees};
pub use validate::{
    EffectivePool, PoolTreeDiff, TreeUpdate, ValidatedPoolTrees, ValidatedTree, check_name,
    diff_trees, is_name_char, validate_pool_trees, validate_tree, validate_update,
};
pub use words::user_words;
