//! Authorization: whether a caller may run a command (see the table in [`crate::auth`]).

use super::{authentication_required, refused};
use crate::caller::{Caller, Identity};
use crate::command::Command;
use fairsched_api::{ApiError, SubmitOperation, codes};
use fairsched_config::Permission;
use fairsched_config::acl::{AccessDenied, permission_name};
use fairsched_core::tree::{PoolTree, ROOT_NAME};
use fairsched_core::{NodeId, OperationId, Scheduler};
use std::collections::BTreeSet;

/// A permission a pool's ACL (or the root) refused.
#[derive(Debug)]
struct Refusal {
    permission: &'static str,
    /// The pool whose ACL decided (an ephemeral pool's parent, or the root).
    pool: String,
    tree: String,
    /// `no use permission on pool "adhoc" (research/adhoc) in tree "default": why`.
    text: String,
}

impl Refusal {
    /// Code 901 with `user`, `permission`, `pool` and `tree`; `message` leads the text.
    fn error(self, who: &Identity, lead: &str) -> ApiError {
        refused(
            who,
            self.permission,
            &self.pool,
            &self.tree,
            format!("{lead}: {}", self.text),
        )
    }

    /// `user "bob" has no use permission on pool ...`.
    fn plain(self, who: &Identity) -> ApiError {
        let text = format!("user {:?} has {}", who.name, self.text);
        refused(who, self.permission, &self.pool, &self.tree, text)
    }
}

/// Whether `who` has `permission` on `pool` (explicit, ephemeral or the root) in `tree`.
fn pool_access(
    tree: &PoolTree,
    pool: &str,
    who: &Identity,
    permission: Permission,
) -> Result<(), Refusal> {
    let config = &tree.validated.tree;
    let name = permission_name(permission);
    let refusal = |checked: &str, shown: String, why: String| Refusal {
        permission: name,
        pool: checked.to_string(),
        tree: tree.name.clone(),
        text: format!(
            "no {name} permission on pool {shown} in tree {:?}: {why}",
            tree.name
        ),
    };
    // `"adhoc" (research/adhoc)`: the path when the pool is not at the top.
    let shown = |e: &AccessDenied, name: &str| {
        if e.pool == name {
            format!("{name:?}")
        } else {
            format!("{name:?} ({})", e.pool)
        }
    };
    let root = |shown: String, why: &str| {
        if permission == Permission::Use {
            Ok(())
        } else {
            Err(refusal(ROOT_NAME, shown, why.to_string()))
        }
    };
    if pool == ROOT_NAME {
        return root(
            format!("{ROOT_NAME:?}"),
            "the root has no ACL; only superusers may administer it",
        );
    }
    if config.find_pool(pool).is_some() {
        return config
            .check_access(pool, who.subject(), permission)
            .map_err(|e| refusal(pool, shown(&e, pool), e.why.clone()));
    }
    // Ephemeral (or about to be): its parent decides.
    let parent = tree
        .ephemeral
        .get(pool)
        .map(|e| e.parent.clone())
        .or_else(|| tree.validated.default_parent_pool().map(str::to_string))
        .unwrap_or_else(|| ROOT_NAME.to_string());
    if parent == ROOT_NAME {
        return root(
            format!("{pool:?} (an ephemeral pool at the root)"),
            "the root has no ACL; only superusers may administer or manage its pools",
        );
    }
    config
        .check_access(&parent, who.subject(), permission)
        .map_err(|e| {
            let shown = format!(
                "{} (the parent of the ephemeral pool {pool:?})",
                shown(&e, &parent)
            );
            refusal(&parent, shown, e.why.clone())
        })
}

/// The error for what only superusers may do.
fn superusers_only(who: &Identity, what: &str, pool: &str, tree: &str) -> ApiError {
    refused(
        who,
        "administer",
        pool,
        tree,
        format!(
            "user {:?} may not {what}: only superusers may (auth.superusers)",
            who.name
        ),
    )
}

/// The tree a pool command names (`None`: the default one); an unknown tree is the actor's
/// to report.
fn named_tree<'a>(sched: &'a Scheduler, tree: Option<&str>) -> Option<&'a PoolTree> {
    match tree {
        None => Some(sched.tree()),
        Some(name) => sched.tree_index(name).map(|t| &sched.trees()[t]),
    }
}

/// Whether `cmd` names something that does not exist, which the actor refuses before it
/// changes anything: a pool tree (`?tree=`, an operation's `pool_trees` or
/// `scheduling_options_per_pool_tree`), a node, an operation, or the pool to change or remove.
/// (A missing parent pool is not here: a pool update sets the options before it moves.)
fn names_missing(sched: &Scheduler, cmd: &Command) -> bool {
    let no_tree = |name: &str| sched.tree_index(name).is_none();
    let no_pool = |tree: &Option<String>, pool: &str| {
        named_tree(sched, tree.as_deref())
            .is_none_or(|t| t.validated.tree.find_pool(pool).is_none())
    };
    let no_operation = |id: &str| sched.operation(&OperationId(id.to_string())).is_none();
    match cmd {
        Command::Submit(submission, _, _) => {
            let spec = &submission.spec;
            let listed = spec.pool_trees.iter().flatten();
            let per_tree = spec.scheduling_options_per_pool_tree.keys();
            listed.chain(per_tree).any(|t| no_tree(t))
        }
        Command::Abort(id, _) => no_operation(id),
        Command::UpdateOperation(id, update, _) => {
            no_operation(id)
                || update
                    .scheduling_options_per_pool_tree
                    .keys()
                    .any(|t| no_tree(t))
        }
        Command::CreatePool { tree, .. } | Command::ApplyTree { tree, .. } => {
            tree.as_deref().is_some_and(no_tree)
        }
        Command::UpdatePool { tree, name, .. } | Command::RemovePool { tree, name, .. } => {
            no_pool(tree, name)
        }
        Command::Node { id, .. } => sched.node(&NodeId(id.clone())).is_none(),
        Command::Logs(..)
        | Command::Events(..)
        | Command::History(..)
        | Command::Snapshot(..)
        | Command::Register(..)
        | Command::Heartbeat(..) => false,
    }
}

/// Whether `caller` may run `cmd`, decided on the trees as they are now and before anything
/// changes (see the module's table). Names are resolved first: a command about something that
/// does not exist passes ([`names_missing`]), and the actor refuses it with the error a
/// superuser gets.
pub fn authorize(sched: &Scheduler, caller: &Caller, cmd: &Command) -> Result<(), ApiError> {
    if matches!(
        cmd,
        Command::Logs(..)
            | Command::Events(..)
            | Command::History(..)
            | Command::Snapshot(..)
            | Command::Register(..)
            | Command::Heartbeat(..)
    ) {
        return Ok(());
    }
    let who = match caller {
        Caller::Unchecked => return Ok(()),
        Caller::Anonymous => return Err(authentication_required()),
        Caller::User(u) => u.as_ref(),
    };
    if who.superuser || names_missing(sched, cmd) {
        return Ok(());
    }
    match cmd {
        Command::Submit(submission, _, _) => authorize_submit(sched, who, &submission.spec),
        Command::Abort(id, _) => authorize_operation(sched, who, id, "abort", &[]),
        Command::UpdateOperation(id, update, _) => {
            // The new pool of the operation's first tree (`None`: that tree), then each
            // per-tree pool in its tree.
            let per_tree = update
                .scheduling_options_per_pool_tree
                .iter()
                .filter_map(|(tree, o)| Some((Some(tree.as_str()), o.pool.as_deref()?)));
            let moves = update.pool.iter().map(|p| (None, p.as_str()));
            let moves: Vec<(Option<&str>, &str)> = moves.chain(per_tree).collect();
            authorize_operation(sched, who, id, "update", &moves)
        }
        Command::CreatePool {
            tree, name, parent, ..
        } => {
            let Some(t) = named_tree(sched, tree.as_deref()) else {
                return Ok(());
            };
            match parent.as_deref() {
                None | Some(ROOT_NAME) => Err(superusers_only(
                    who,
                    &format!("create the top-level pool {name:?}"),
                    ROOT_NAME,
                    &t.name,
                )),
                Some(p) => explicit_access(t, p, who, Permission::Administer),
            }
        }
        Command::UpdatePool {
            tree,
            name,
            parent,
            config,
            ..
        } => {
            let Some(t) = named_tree(sched, tree.as_deref()) else {
                return Ok(());
            };
            explicit_access(t, name, who, Permission::Administer)?;
            authorize_dividing(t, name, who, config.as_ref())?;
            match parent.as_deref() {
                None => Ok(()),
                Some(ROOT_NAME) => Err(superusers_only(
                    who,
                    &format!("move pool {name:?} to the top level"),
                    ROOT_NAME,
                    &t.name,
                )),
                Some(p) => explicit_access(t, p, who, Permission::Administer),
            }
        }
        Command::RemovePool { tree, name, .. } => {
            let Some(t) = named_tree(sched, tree.as_deref()) else {
                return Ok(());
            };
            explicit_access(t, name, who, Permission::Administer)?;
            // A top-level pool is made by superusers, and its guarantee is theirs to give:
            // its own administrator may not remove it.
            match t.validated.tree.find_pool(name) {
                Some((path, _)) if !path.contains('/') => Err(superusers_only(
                    who,
                    &format!("remove the top-level pool {name:?}"),
                    ROOT_NAME,
                    &t.name,
                )),
                _ => Ok(()),
            }
        }
        Command::ApplyTree { tree, .. } => {
            let name = tree.clone().unwrap_or_else(|| sched.tree().name.clone());
            Err(superusers_only(
                who,
                &format!("replace the configuration of tree {name:?}"),
                ROOT_NAME,
                &name,
            ))
        }
        Command::Node { id, action, .. } => Err(ApiError::new(
            codes::AUTHORIZATION,
            format!(
                "user {:?} may not {} node {id:?}: only superusers may (auth.superusers)",
                who.name,
                action.name()
            ),
        )
        .with_attribute("user", who.name.as_str())
        .with_attribute("permission", "superuser")
        .with_attribute("node", id.as_str())),
        Command::Logs(..)
        | Command::Events(..)
        | Command::History(..)
        | Command::Snapshot(..)
        | Command::Register(..)
        | Command::Heartbeat(..) => Ok(()),
    }
}

/// A pool update that changes the options deciding the pool's part of its parent's resources
/// (`weight`, `strong_guarantee_resources`, `integral_guarantees`; a pool update replaces the
/// pool's options, so leaving one out resets it) takes `administer` on the parent (the one
/// dividing), or a superuser for a top-level pool: a pool's own administrator would otherwise
/// take guarantees from its siblings. A config that does not parse passes (the actor refuses
/// it naming the field).
fn authorize_dividing(
    tree: &PoolTree,
    name: &str,
    who: &Identity,
    config: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(), ApiError> {
    let Some(config) = config else {
        return Ok(());
    };
    let Ok(new) = serde_json::from_value::<fairsched_config::PoolConfig>(
        serde_json::Value::Object(config.clone()),
    ) else {
        return Ok(());
    };
    let Some((path, old)) = tree.validated.tree.find_pool(name) else {
        return Ok(());
    };
    let mut changed = Vec::new();
    if new.weight != old.weight {
        changed.push("weight");
    }
    if new.strong_guarantee_resources != old.strong_guarantee_resources {
        changed.push("strong_guarantee_resources");
    }
    if new.integral_guarantees != old.integral_guarantees {
        changed.push("integral_guarantees");
    }
    if changed.is_empty() {
        return Ok(());
    }
    let what = changed.join(", ");
    match path.rsplit_once('/') {
        None => Err(superusers_only(
            who,
            &format!(
                "change {what} of the top-level pool {name:?} (they divide the cluster among \
                 the top-level pools)"
            ),
            ROOT_NAME,
            &tree.name,
        )),
        Some((parent_path, _)) => {
            let parent = parent_path.rsplit('/').next().unwrap_or(parent_path);
            explicit_access(tree, parent, who, Permission::Administer).map_err(|mut e| {
                e.message = format!(
                    "changing {what} of pool {name:?} divides its parent's resources and takes \
                     administer on the parent {parent:?}: {}",
                    e.message
                );
                e
            })
        }
    }
}

/// A permission on an explicit pool; a pool that is not configured passes (the core refuses
/// to change it).
fn explicit_access(
    tree: &PoolTree,
    pool: &str,
    who: &Identity,
    permission: Permission,
) -> Result<(), ApiError> {
    if tree.validated.tree.find_pool(pool).is_none() {
        return Ok(());
    }
    pool_access(tree, pool, who, permission).map_err(|r| r.plain(who))
}

/// Submit: as oneself, with `use` on the operation's pool in each of its trees.
fn authorize_submit(
    sched: &Scheduler,
    who: &Identity,
    spec: &SubmitOperation,
) -> Result<(), ApiError> {
    // The handler filled in the caller's name when the body gave none.
    let user = spec.user.as_deref().unwrap_or("root");
    if user != who.name {
        return Err(ApiError::new(
            codes::AUTHORIZATION,
            format!(
                "user {:?} may not submit an operation as user {user:?}: only superusers may \
                 (leave `user` out, or give your own name)",
                who.name
            ),
        )
        .with_attribute("user", who.name.as_str())
        .with_attribute("permission", "superuser")
        .with_attribute("operation_user", user));
    }
    let trees: Vec<&str> = match &spec.pool_trees {
        Some(names) => names.iter().map(String::as_str).collect(),
        None => vec![sched.tree().name.as_str()],
    };
    let per_tree = &spec.scheduling_options_per_pool_tree;
    let seen: BTreeSet<&str> = trees.into_iter().collect();
    for name in seen {
        let Some(t) = sched.tree_index(name).map(|t| &sched.trees()[t]) else {
            continue;
        };
        let pool = per_tree
            .get(name)
            .and_then(|o| o.pool.as_deref())
            .or(spec.pool.as_deref())
            .unwrap_or(user);
        pool_access(t, pool, who, Permission::Use).map_err(|r| r.plain(who))?;
    }
    Ok(())
}

/// Abort or update: the operation's own user, or `manage` on its pool in one of its trees;
/// each move (tree name, `None`: its first tree; new pool) also needs `use` there.
fn authorize_operation(
    sched: &Scheduler,
    who: &Identity,
    id: &str,
    what: &str,
    moves: &[(Option<&str>, &str)],
) -> Result<(), ApiError> {
    let Some(op) = sched.operation(&OperationId(id.to_string())) else {
        return Ok(());
    };
    if op.user != who.name {
        let mut first_refusal = None;
        for o in &op.trees {
            match pool_access(&sched.trees()[o.tree], &o.pool, who, Permission::Manage) {
                Ok(()) => {
                    first_refusal = None;
                    break;
                }
                Err(e) => {
                    first_refusal.get_or_insert(e);
                }
            }
        }
        if let Some(r) = first_refusal {
            let lead = format!(
                "user {:?} may not {what} operation {id:?} of user {:?}",
                who.name, op.user
            );
            return Err(r.error(who, &lead).with_attribute("operation", id));
        }
    }
    for (tree, pool) in moves {
        let t = match tree {
            Some(name) => sched.tree_index(name),
            None => op.trees.first().map(|o| o.tree),
        };
        if let Some(t) = t {
            pool_access(&sched.trees()[t], pool, who, Permission::Use).map_err(|r| {
                r.error(
                    who,
                    &format!("user {:?} may not move operation {id:?}", who.name),
                )
            })?;
        }
    }
    Ok(())
}
