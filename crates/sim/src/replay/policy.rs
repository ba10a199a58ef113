//! Scheduling policies a trace is replayed under: the pool tree the jobs run in and the pool
//! each job goes to.

use fairsched_config::{
    PoolConfig, PoolTreeConfig, PoolTrees, ValidatedPoolTrees, is_name_char, load_pool_tree_file,
    validate_pool_trees,
};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Name of the one pool tree of a replay.
pub const TREE_NAME: &str = "default";

/// Operation and pool count limits of the built-in policies: high enough never to refuse a
/// trace's jobs (a trace has no notion of YTsaurus' operation limits).
const NO_LIMIT: u32 = 10_000_000;

/// How jobs share the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Hierarchical fair share: one pool per trace group (present while the group has jobs),
    /// and under it an ephemeral pool per user (`create_ephemeral_subpools`); equal weights;
    /// preemption as the scheduler's defaults (starving pools and operations reclaim their fair
    /// share from what others hold beyond theirs; a rigid job only whole).
    FairShare,
    /// Flat fair share over users (DRF across the resources): an ephemeral pool per user under
    /// the root.
    Drf,
    /// One FIFO pool: jobs run in submission order, a job that does not fit waits and holds
    /// back nothing (later jobs that fit start). With preemption (the default), a waiting job
    /// that starves takes room from jobs after it, whose fair share is nothing.
    Fifo,
    /// First come, first served, strictly: one FIFO pool of rigid jobs whose head holds what
    /// is free until it starts; no job passes it (the jobs' requested times are not given to
    /// the scheduler, so nothing backfills).
    Fcfs,
    /// EASY backfilling: one FIFO pool of rigid jobs whose head plans its start from the
    /// running jobs' requested times and holds only what it needs of what is free
    /// (`gang_placement.hold = "needed"`); a later job starts now if it fits and either ends
    /// by the head's expected start by its requested time or uses only what the head does not
    /// need. A job without a requested time is expected to run its trace run time (a perfect
    /// estimate; at least 1 ms).
    Easy,
    /// Conservative backfilling: as [`Policy::Easy`], and every waiting job has a planned
    /// start too (`gang_placement.hold = "planned"`): in queue order, each job is planned at
    /// the earliest time it fits for its requested time beside the running jobs (until their
    /// requested times) and the jobs planned before it; a job starts only at its planned
    /// start, so it never delays one before it. The plan is made again as jobs end (early).
    /// Jobs without a requested time as under [`Policy::Easy`].
    Conservative,
    /// A pool tree file (TOML or JSON, one tree: `config` and `pools`): a job goes to the pool
    /// named like its group when the tree has one, else to its user's ephemeral pool under the
    /// tree's `default_parent_pool`. Its limits apply as written.
    File(PathBuf),
}

impl Policy {
    /// The names `--policy` accepts besides a file.
    pub const BUILT_IN: [&'static str; 6] =
        ["fair-share", "drf", "fifo", "fcfs", "easy", "conservative"];

    /// `fair-share`, `drf`, `fifo`, `fcfs`, `easy`, `conservative`, or a path to a pool tree
    /// file.
    pub fn parse(text: &str) -> Policy {
        match text {
            "fair-share" | "fair_share" => Policy::FairShare,
            "drf" => Policy::Drf,
            "fifo" => Policy::Fifo,
            "fcfs" => Policy::Fcfs,
            "easy" => Policy::Easy,
            "conservative" => Policy::Conservative,
            path => Policy::File(PathBuf::from(path)),
        }
    }

    /// Whether the policy is a batch-system baseline (`fcfs`, `easy`, `conservative`): rigid
    /// jobs, decisions at every event, fair shares irrelevant.
    pub fn is_baseline(&self) -> bool {
        matches!(self, Policy::Fcfs | Policy::Easy | Policy::Conservative)
    }

    /// How the policy is named in outputs.
    pub fn name(&self) -> String {
        match self {
            Policy::FairShare => "fair-share".to_string(),
            Policy::Drf => "drf".to_string(),
            Policy::Fifo => "fifo".to_string(),
            Policy::Fcfs => "fcfs".to_string(),
            Policy::Easy => "easy".to_string(),
            Policy::Conservative => "conservative".to_string(),
            Policy::File(path) => path.display().to_string(),
        }
    }
}

/// A starvation timeout never reached (the core saturates: `u64::MAX` ms means never).
const NEVER_STARVING: u64 = u64::MAX;

/// Drops the pools' own starvation timeouts (they inherit the tree's).
fn clear_starvation_timeouts(
    pools: &mut std::collections::BTreeMap<String, fairsched_config::PoolNode>,
) {
    for node in pools.values_mut() {
        node.fair_share_starvation_timeout_ms = None;
        clear_starvation_timeouts(&mut node.pools);
    }
}

/// How long a gang may gather resources in a rigid replay of a built-in policy (6 hours of
/// virtual time: a trace's wide job waits for nodes to empty, which can take that long).
pub const RIGID_ASSEMBLY_TIMEOUT_MS: u64 = 6 * 3_600_000;

/// The baselines' queue head never gives up what it holds (far beyond any trace's span, and
/// small enough that adding it to a trace's times does not overflow).
const BASELINE_ASSEMBLY_TIMEOUT_MS: u64 = 1 << 50;

/// What a policy asks of the replay's jobs besides the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRules {
    /// Jobs start whole, every one a gang (even of one allocation), whatever `--rigid` says.
    pub always_rigid: bool,
    /// Jobs carry a time limit: their requested time, or (with `estimate_missing`) their
    /// run time when they have none.
    pub time_limits: bool,
    pub estimate_missing: bool,
}

/// The tree a replay runs in and how jobs are placed in it.
#[derive(Clone, Debug)]
pub struct PolicyTree {
    pub trees: ValidatedPoolTrees,
    /// [`Policy::FairShare`]: the options of a group's pool. Group pools are created when the
    /// group's first job arrives and removed when its last one has finished, so that the tree
    /// (and every fair-share update) holds the groups that have work, not every group of the
    /// trace.
    pub group_pool: Option<PoolConfig>,
    /// Pools jobs of a group go to, by sanitised group name (`None`: the user's ephemeral
    /// pool).
    group_pools: Option<BTreeSet<String>>,
    fifo: bool,
    pub jobs: JobRules,
}

impl JobRules {
    /// fairsched's own policies: requested times as limits, rigid as asked.
    const OWN: JobRules = JobRules {
        always_rigid: false,
        time_limits: true,
        estimate_missing: false,
    };
}

/// The name a trace's user or group gets as a pool name: ASCII letters, digits, `_`, `-` and
/// `:` kept, anything else replaced by `_` (an SWF `-1` id is already `u?`/`g?`, which becomes
/// `u_`/`g_`).
pub fn pool_name(raw: &str) -> String {
    let name: String = raw
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    if name.is_empty() {
        "_".to_string()
    } else {
        name
    }
}

impl PolicyTree {
    /// Builds the tree for `policy`; `groups` are the trace's groups (sanitised), used by
    /// [`Policy::FairShare`]. `rigid`: jobs start whole (the tree's `gang_placement` is turned
    /// on; a built-in policy's gangs may gather for [`RIGID_ASSEMBLY_TIMEOUT_MS`], a file's
    /// keep its `assembly_timeout_ms`). `reservation`: the gathering gang is never given up
    /// and holds only what it needs by the running jobs' time limits
    /// (`gang_placement.hold = "needed"`), as EASY's queue head: a reservation for the gang
    /// first in the policy's order. Without `preemption` nothing ever starves (the tree's
    /// starvation timeouts are never reached, and a file's pools lose theirs), so nothing is
    /// preempted for starvation.
    pub fn new(
        policy: &Policy,
        groups: &[String],
        rigid: bool,
        reservation: bool,
        preemption: bool,
    ) -> Result<PolicyTree, String> {
        let unlimited_pool = serde_json::json!({
            "max_operation_count": NO_LIMIT,
            "max_running_operation_count": NO_LIMIT,
        });
        let mut config = serde_json::json!({
            "max_operation_count": NO_LIMIT,
            "max_running_operation_count": NO_LIMIT,
            "max_operation_count_per_pool": NO_LIMIT,
            "max_running_operation_count_per_pool": NO_LIMIT,
            "max_ephemeral_pools_per_user": NO_LIMIT,
            "min_spare_allocation_resources_on_node": {},
            "gang_placement": if reservation {
                serde_json::json!({
                    "enable": rigid,
                    "assembly_timeout_ms": BASELINE_ASSEMBLY_TIMEOUT_MS,
                    "hold": "needed",
                })
            } else {
                serde_json::json!({
                    "enable": rigid,
                    "assembly_timeout_ms": RIGID_ASSEMBLY_TIMEOUT_MS,
                })
            },
        });
        if !preemption {
            config["fair_share_starvation_timeout_ms"] = NEVER_STARVING.into();
            config["fair_share_aggressive_starvation_timeout_ms"] = NEVER_STARVING.into();
        }
        let (tree, group_pools, fifo): (serde_json::Value, Option<BTreeSet<String>>, bool) =
            match policy {
                Policy::FairShare => {
                    let mut pool = unlimited_pool.clone();
                    pool["create_ephemeral_subpools"] = true.into();
                    pool["ephemeral_subpool_config"] = unlimited_pool.clone();
                    let group_pool: PoolConfig = serde_json::from_value(pool)
                        .map_err(|e| format!("the built-in policy's group pool: {e}"))?;
                    let tree: PoolTreeConfig = serde_json::from_value(serde_json::json!({
                        "config": config,
                    }))
                    .map_err(|e| format!("the built-in policy's pool tree: {e}"))?;
                    let trees = validate_pool_trees(&PoolTrees::single(TREE_NAME, tree))
                        .map_err(|e| format!("the built-in policy's pool tree: {e}"))?;
                    return Ok(PolicyTree {
                        trees,
                        group_pools: Some(groups.iter().cloned().collect()),
                        fifo: false,
                        group_pool: Some(group_pool),
                        jobs: JobRules::OWN,
                    });
                }
                Policy::Drf => (serde_json::json!({"config": config}), None, false),
                Policy::Fifo => {
                    let mut pool = unlimited_pool.clone();
                    pool["mode"] = "fifo".into();
                    let tree = serde_json::json!({"config": config, "pools": {"queue": pool}});
                    (tree, None, true)
                }
                Policy::Fcfs | Policy::Easy | Policy::Conservative => {
                    let mut pool = unlimited_pool.clone();
                    pool["mode"] = "fifo".into();
                    let mut config = config.clone();
                    config["gang_placement"] = serde_json::json!({
                        "enable": true,
                        "assembly_timeout_ms": BASELINE_ASSEMBLY_TIMEOUT_MS,
                        "hold": if *policy == Policy::Conservative { "planned" } else { "needed" },
                    });
                    let tree = serde_json::json!({"config": config, "pools": {"queue": pool}});
                    (tree, None, true)
                }
                Policy::File(path) => {
                    let mut tree: PoolTreeConfig = load_pool_tree_file(path)
                        .map_err(|e| format!("--policy {}: {e}", path.display()))?;
                    if rigid {
                        tree.config.gang_placement.enable = true;
                    }
                    if !preemption {
                        tree.config.fair_share_starvation_timeout_ms = NEVER_STARVING;
                        tree.config.fair_share_aggressive_starvation_timeout_ms = NEVER_STARVING;
                        clear_starvation_timeouts(&mut tree.pools);
                    }
                    if reservation {
                        tree.config.gang_placement.assembly_timeout_ms =
                            BASELINE_ASSEMBLY_TIMEOUT_MS;
                        tree.config.gang_placement.hold = fairsched_config::GangHold::Needed;
                    }
                    let names = tree
                        .walk()
                        .into_iter()
                        .map(|(p, _)| p.rsplit('/').next().unwrap_or(&p).to_string())
                        .collect();
                    let trees = PoolTrees::single(TREE_NAME, tree);
                    let trees = validate_pool_trees(&trees)
                        .map_err(|e| format!("--policy {}: {e}", path.display()))?;
                    return Ok(PolicyTree {
                        trees,
                        group_pools: Some(names),
                        fifo: false,
                        group_pool: None,
                        jobs: JobRules::OWN,
                    });
                }
            };
        let tree: PoolTreeConfig = serde_json::from_value(tree)
            .map_err(|e| format!("the built-in policy's pool tree: {e}"))?;
        let trees = validate_pool_trees(&PoolTrees::single(TREE_NAME, tree))
            .map_err(|e| format!("the built-in policy's pool tree: {e}"))?;
        let jobs = match policy {
            Policy::Fcfs => JobRules {
                always_rigid: true,
                time_limits: false,
                estimate_missing: false,
            },
            Policy::Easy | Policy::Conservative => JobRules {
                always_rigid: true,
                time_limits: true,
                estimate_missing: true,
            },
            _ => JobRules::OWN,
        };
        Ok(PolicyTree {
            trees,
            group_pools,
            fifo,
            group_pool: None,
            jobs,
        })
    }

    /// The pool a job of `group` goes to (`None`: its user's ephemeral pool).
    pub fn pool_for(&self, group: &str) -> Option<String> {
        if self.fifo {
            return Some("queue".to_string());
        }
        let name = pool_name(group);
        self.group_pools
            .as_ref()
            .filter(|pools| pools.contains(&name))
            .map(|_| name)
    }
}
