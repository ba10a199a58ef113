//! Read access: who may read an operation's output, environment and events, decided on a
//! published view.

use super::refused;
use crate::caller::Caller;
use crate::view::View;
use fairsched_api::{ApiError, EventView, OperationView, codes};
use fairsched_config::acl::Subject;
use fairsched_config::{Permission, PoolTreeConfig};
use fairsched_core::tree::ROOT_NAME;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What replaces each value of an operation's `env` for a caller who may not read it.
pub const REDACTED: &str = "<redacted>";

/// The pool-tree configurations the published views hold as JSON, parsed once per version
/// (a tree's JSON is replaced, not changed, when the tree changes) for read checks.
#[derive(Debug, Default)]
pub struct AclTrees {
    parsed: std::sync::Mutex<BTreeMap<String, ParsedTree>>,
}

/// A tree's configuration as the view holds it (JSON) and parsed.
type ParsedTree = (Arc<Value>, Arc<PoolTreeConfig>);

impl AclTrees {
    /// Every tree of `view`, parsed.
    fn of(&self, view: &View) -> BTreeMap<String, Arc<PoolTreeConfig>> {
        let mut parsed = self.parsed.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = BTreeMap::new();
        for t in &view.trees {
            let name = &t.info.name;
            let fresh = parsed
                .get(name)
                .is_some_and(|(json, _)| Arc::ptr_eq(json, &t.config));
            if !fresh {
                // A tree the server runs always parses; an empty one (should it not) grants
                // nothing but to owners and superusers.
                let config: PoolTreeConfig =
                    serde_json::from_value(t.config.as_ref().clone()).unwrap_or_default();
                parsed.insert(name.clone(), (t.config.clone(), Arc::new(config)));
            }
            if let Some((_, config)) = parsed.get(name) {
                out.insert(name.clone(), config.clone());
            }
        }
        out
    }
}

/// Who may read an operation's output (`op logs`), its jobs' environment (`env` in its
/// spec) and its events, decided on a published view: everyone while authentication is off;
/// else its owner, superusers, and users the ACL of its pool grants `read` in one of its
/// trees (`fairsched_config::acl`: a pool whose effective ACL is empty is readable by
/// everyone). An ephemeral pool is checked on its parent; an operation in the root or in an
/// ephemeral pool at the root is readable by its owner and superusers only (the root has no
/// ACL to grant it). A reader without a token (`authenticate_reads` off) is no user: it
/// reads where a pool's empty ACL lets everyone read, or an entry grants `everyone` `read`.
#[derive(Debug)]
pub struct ReadAccess<'a> {
    caller: &'a Caller,
    view: &'a View,
    /// `None`: the caller may read everything.
    trees: Option<BTreeMap<String, Arc<PoolTreeConfig>>>,
}

/// The pools of tree `tree` in `view`'s snapshot.
fn snapshot_pools<'a>(
    view: &'a View,
    tree: &str,
) -> Option<&'a BTreeMap<String, fairsched_core::snapshot::PoolSnapshot>> {
    if tree == view.snapshot.tree {
        Some(&view.snapshot.pools)
    } else {
        view.snapshot.pool_trees.get(tree).map(|t| &t.pools)
    }
}

impl<'a> ReadAccess<'a> {
    pub fn new(caller: &'a Caller, view: &'a View, trees: &AclTrees) -> ReadAccess<'a> {
        let everything = match caller {
            Caller::Unchecked => true,
            Caller::User(u) => u.superuser,
            Caller::Anonymous => false,
        };
        ReadAccess {
            caller,
            view,
            trees: (!everything).then(|| trees.of(view)),
        }
    }

    /// Whether the caller may read everything (no check needed).
    pub fn reads_everything(&self) -> bool {
        self.trees.is_none()
    }

    /// Whether the caller may read `op`'s output, environment and events.
    pub fn may_read(&self, op: &OperationView) -> bool {
        self.pool_refusing(op).is_none()
    }

    /// `None` when the caller may read `op`; else (tree, pool) of its first tree, for the
    /// error.
    fn pool_refusing(&self, op: &OperationView) -> Option<(String, String)> {
        let trees = self.trees.as_ref()?;
        let no_groups: &[String] = &[];
        let subject = match self.caller {
            Caller::User(u) if u.name == op.user => return None,
            Caller::User(u) => u.subject(),
            // Not a user name (names are not empty): matches `everyone` entries only.
            _ => Subject {
                user: "",
                groups: no_groups,
            },
        };
        let record = self.view.operations.get(&op.id);
        let first = record
            .and_then(|r| r.placements.first())
            .map(|(tree, _)| tree.as_str())
            .or_else(|| {
                op.spec
                    .get("pool_trees")
                    .and_then(|t| t.get(0))
                    .and_then(Value::as_str)
            })
            .unwrap_or(&self.view.snapshot.tree);
        let mut pools = vec![(first, op.pool.as_str())];
        if let Some(r) = record {
            pools.extend(
                r.placements
                    .iter()
                    .skip(1)
                    .map(|(t, p)| (t.as_str(), p.as_str())),
            );
        }
        let readable = |(tree, pool): &(&str, &str)| {
            let Some(config) = trees.get(*tree) else {
                return false;
            };
            let decides = if config.find_pool(pool).is_some() {
                Some(pool.to_string())
            } else {
                // An ephemeral pool: its parent (the one it was created under, else where
                // it would be created now).
                snapshot_pools(self.view, tree)
                    .and_then(|p| p.get(*pool))
                    .and_then(|p| p.parent.clone())
                    .or_else(|| {
                        let name = &config.config.default_parent_pool;
                        config
                            .find_pool(name)
                            .filter(|(_, p)| p.mode != fairsched_config::SchedulingMode::Fifo)
                            .map(|_| name.clone())
                    })
            };
            match decides {
                Some(p) if p != ROOT_NAME => {
                    config.check_access(&p, subject, Permission::Read).is_ok()
                }
                _ => false,
            }
        };
        if pools.iter().any(readable) {
            None
        } else {
            Some((first.to_string(), op.pool.clone()))
        }
    }

    /// `Ok` when the caller may read `op`, else the error to answer: 401 for a reader without
    /// a token, 403 (code 901) for a user, naming the operation, the pool and the tree.
    pub fn check(&self, op: &OperationView) -> Result<(), ApiError> {
        let Some((tree, pool)) = self.pool_refusing(op) else {
            return Ok(());
        };
        let id = op.id.as_str();
        match self.caller.user() {
            Some(who) => Err(refused(
                who,
                "read",
                &pool,
                &tree,
                format!(
                    "user {:?} may not read operation {id:?} of user {:?} (its output, \
                     environment and events): no read permission on pool {pool:?} in tree \
                     {tree:?}; its owner, superusers and users the pool's ACL allows `read` may",
                    who.name, op.user
                ),
            )
            .with_attribute("operation", id)),
            None => Err(ApiError::new(
                codes::AUTHENTICATION,
                format!(
                    "reading the output, environment or events of operation {id:?} needs a \
                     user's token: send it as `Authorization: Bearer <token>` (the CLI's \
                     --token, FAIRSCHED_TOKEN or its config file's token)"
                ),
            )
            .with_attribute("operation", id)),
        }
    }

    /// `op` as the caller may see it: with each `env` value of its tasks replaced by
    /// [`REDACTED`] when it may not read it.
    pub fn redact(&self, mut op: OperationView) -> OperationView {
        if !self.reads_everything() && !self.may_read(&op) {
            redact_env(&mut op.spec);
        }
        op
    }

    /// The events the caller may read: those about an operation it may not read (or that
    /// the view does not have) are left out.
    pub fn filter_events(&self, events: Vec<EventView>) -> Vec<EventView> {
        self.filter_events_with(events, &[])
    }

    /// The operations the events name that the view does not have (finished ones, in the
    /// store only): the caller reads them from there for [`ReadAccess::filter_events_with`].
    pub fn operations_missing(&self, events: &[EventView]) -> BTreeSet<String> {
        if self.reads_everything() {
            return BTreeSet::new();
        }
        events
            .iter()
            .filter_map(|e| e.fields.get("operation").and_then(Value::as_str))
            .filter(|id| !self.view.operations.contains_key(id))
            .map(str::to_string)
            .collect()
    }

    /// [`ReadAccess::filter_events`], also keeping the events of `finished` operations (read
    /// from the store) the caller may read.
    pub fn filter_events_with(
        &self,
        events: Vec<EventView>,
        finished: &[OperationView],
    ) -> Vec<EventView> {
        if self.reads_everything() {
            return events;
        }
        let finished: BTreeMap<&str, &OperationView> =
            finished.iter().map(|o| (o.id.as_str(), o)).collect();
        let mut decided: BTreeMap<String, bool> = BTreeMap::new();
        events
            .into_iter()
            .filter(|e| {
                let Some(id) = e.fields.get("operation").and_then(Value::as_str) else {
                    return true;
                };
                *decided.entry(id.to_string()).or_insert_with(|| {
                    self.operation(id)
                        .or_else(|| finished.get(id).copied())
                        .is_some_and(|op| self.may_read(op))
                })
            })
            .collect()
    }

    /// The operation `id` of the view, if it has it.
    pub fn operation(&self, id: &str) -> Option<&'a OperationView> {
        self.view.operations.get(id).map(|o| o.view.as_ref())
    }
}

/// Replaces every value of `env` in each task of an operation spec by [`REDACTED`].
pub fn redact_env(spec: &mut Value) {
    let tasks = spec.get_mut("tasks").and_then(Value::as_array_mut);
    for task in tasks.into_iter().flatten() {
        if let Some(env) = task.get_mut("env").and_then(Value::as_object_mut) {
            for value in env.values_mut() {
                *value = Value::String(REDACTED.into());
            }
        }
    }
}
