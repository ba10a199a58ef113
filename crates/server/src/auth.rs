//! API tokens and pool ACLs.
//!
//! * Authentication ([`Auth`], used by `http.rs`): with users configured (`[auth]`), a request
//!   to `/api/v1` names its user by a bearer token, compared in constant time; the request
//!   goes to the actor with its [`Caller`]. No users: authentication is off
//!   ([`Caller::Unchecked`]).
//! * Authorization ([`authorize`], called by the actor for every command before it changes
//!   anything): the pools' ACLs (`fairsched_config::acl`) in the tree's configuration as it is
//!   when the command runs, and the superusers.
//!
//! Which permission each command needs:
//!
//! | command | needs (superusers pass every check) |
//! |---|---|
//! | submit | `user` is the caller's own name (another one: superusers only); `use` on its pool in every tree it runs in |
//! | abort, update an operation | the operation's own user, or `manage` on its pool in one of its trees; moving it also needs `use` on the new pool |
//! | create a pool | `administer` on its parent; a top-level pool: superusers only |
//! | set a pool's options, move or remove it | `administer` on it; a move also on the new parent (to the top: superusers only) |
//! | apply a whole tree, node actions | superusers only |
//! | reads, agents' register and heartbeat | nothing here (`http.rs` decides; reading others' operations' output, environment and events needs `read`: [`ReadAccess`]) |
//!
//! Names are resolved before permissions are checked: a command that names a pool tree, node
//! or operation that does not exist, or whose pool to change or remove is not configured,
//! passes here, and the actor refuses it with the "does not exist" error a superuser gets
//! (before it changes anything). That tells a user nothing they cannot read anyway
//! (`GET /api/v1/pool_trees`, `/nodes`, `/operations`, `/pools`).
//!
//! A pool that is not in the configuration (an ephemeral one) is checked on its parent: the
//! pool it was created under when it exists, else where it would be created, the tree's
//! `default_parent_pool` when that is configured; an ephemeral pool at the root (no parent
//! pool) may be used by everyone, and only superusers may administer or manage it. The root
//! itself has no ACL: everyone may run operations directly in it (unless the tree's
//! `forbid_immediate_operations_in_root`), only superusers may administer it.

use crate::ServerConfig;
use crate::caller::{Caller, Identity};
use crate::command::Command;
use crate::view::View;
use fairsched_api::{ApiError, EventView, OperationView, codes};
use fairsched_config::acl::{AccessDenied, Subject, permission_name};
use fairsched_config::{Permission, PoolTreeConfig};
use fairsched_core::tree::{PoolTree, ROOT_NAME};
use fairsched_core::{NodeId, OperationId, Scheduler};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The server's users by token, from `[auth]`.
#[derive(Clone, Default)]
pub struct Auth {
    /// (token, user), in the file's order.
    users: Vec<(Vec<u8>, Arc<Identity>)>,
    /// Reads need a token too.
    pub authenticate_reads: bool,
}

/// Never prints the tokens.
impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field(
                "users",
                &self.users.iter().map(|(_, u)| &u.name).collect::<Vec<_>>(),
            )
            .field("authenticate_reads", &self.authenticate_reads)
            .finish()
    }
}

impl Auth {
    /// Authentication off: no users.
    pub fn off() -> Auth {
        Auth::default()
    }

    /// Whether requests must name a user (some users are configured).
    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// How many users are configured.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Validates `[auth]` and reads the token files, warning about files others may read.
    /// Errors name the option (`auth.users[1].token`) and never print a token.
    pub fn from_config(config: &ServerConfig) -> anyhow::Result<Auth> {
        Auth::load(config, true)
    }

    /// [`Auth::from_config`] without the warnings (a check of the file).
    pub fn check(config: &ServerConfig) -> anyhow::Result<()> {
        Auth::load(config, false).map(|_| ())
    }

    fn load(config: &ServerConfig, warn: bool) -> anyhow::Result<Auth> {
        let auth = &config.auth;
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut users: Vec<(Vec<u8>, Arc<Identity>)> = Vec::new();
        for (i, u) in auth.users.iter().enumerate() {
            let at = format!("auth.users[{i}]");
            if u.name.trim().is_empty() {
                anyhow::bail!("{at}.name: a user needs a name");
            }
            if u.name == fairsched_config::acl::EVERYONE {
                anyhow::bail!(
                    "{at}.name: {:?} is reserved (the ACL subject every user belongs to)",
                    u.name
                );
            }
            if let Some(first) = names.insert(&u.name, i) {
                anyhow::bail!(
                    "{at}.name: user {:?} is already auth.users[{first}]; names must be unique",
                    u.name
                );
            }
            if let Some(g) = u.groups.iter().position(|g| g.trim().is_empty()) {
                anyhow::bail!("{at}.groups[{g}]: a group needs a name");
            }
            let token = match (&u.token, &u.token_file) {
                (Some(_), Some(_)) => {
                    anyhow::bail!("{at}: give either token or token_file, not both")
                }
                (None, None) => {
                    anyhow::bail!("{at}: user {:?} needs a token or token_file", u.name)
                }
                (Some(t), None) => {
                    if t.trim().is_empty() {
                        anyhow::bail!("{at}.token: the token is empty");
                    }
                    t.clone()
                }
                (None, Some(path)) => {
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        anyhow::anyhow!("{at}.token_file: cannot read {}: {e}", path.display())
                    })?;
                    if warn {
                        warn_if_readable_by_others(path, "a token file");
                    }
                    let t = text.trim().to_string();
                    if t.is_empty() {
                        anyhow::bail!("{at}.token_file: {} is empty", path.display());
                    }
                    t
                }
            };
            let field = if u.token.is_some() {
                "token"
            } else {
                "token_file"
            };
            if let Some(j) = users
                .iter()
                .position(|(other, _)| *other == token.as_bytes())
            {
                anyhow::bail!(
                    "{at}.{field}: the same token as auth.users[{j}] ({:?}); every user needs \
                     their own",
                    users[j].1.name
                );
            }
            if config.agent_token.as_deref() == Some(token.as_str()) {
                anyhow::bail!(
                    "{at}.{field}: the same token as agent_token; users and agents need \
                     different tokens"
                );
            }
            users.push((
                token.into_bytes(),
                Arc::new(Identity {
                    name: u.name.clone(),
                    groups: u.groups.clone(),
                    superuser: auth.superusers.contains(&u.name),
                }),
            ));
        }
        for (i, s) in auth.superusers.iter().enumerate() {
            if !names.contains_key(s.as_str()) {
                anyhow::bail!(
                    "auth.superusers[{i}]: {s:?} is not a user (auth.users names {:?})",
                    names.keys().collect::<Vec<_>>()
                );
            }
        }
        if auth.authenticate_reads && users.is_empty() {
            anyhow::bail!(
                "auth.authenticate_reads: needs auth.users (without users authentication is off)"
            );
        }
        match config.agent_token.as_deref() {
            Some(t) if t.trim().is_empty() => anyhow::bail!(
                "agent_token: the token is empty; set a secret (for example the output of \
                 `openssl rand -hex 32`) or leave the option out"
            ),
            None if !users.is_empty() => anyhow::bail!(
                "agent_token: required when [auth] has users (without it anyone who can reach \
                 the server could register a node and report on its jobs); set `agent_token = \
                 \"<secret>\"` at the top of the server's file (for example the output of \
                 `openssl rand -hex 32`) and give every agent the same secret (`fairsched agent \
                 --token`, or FAIRSCHED_AGENT_TOKEN)"
            ),
            _ => {}
        }
        Ok(Auth {
            users,
            authenticate_reads: auth.authenticate_reads,
        })
    }

    /// The user whose token this is. Every user's token is compared, in constant time, so
    /// that the time taken tells nothing about the tokens.
    pub fn identify(&self, token: &str) -> Option<Arc<Identity>> {
        let mut found = None;
        for (known, user) in &self.users {
            if bool::from(known.as_slice().ct_eq(token.as_bytes())) {
                found = Some(user.clone());
            }
        }
        found
    }
}

/// A fresh random secret: 32 bytes from the operating system's generator, as 64 hex digits.
pub fn random_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Each node's own secret, issued when it registers ([`NodeCredentials::issue`]) and checked
/// on its heartbeats ([`NodeCredentials::check`]), so that an agent reports on its own node's
/// jobs only: the shared `agent_token` says "an agent", the credential says which node. Kept
/// in memory only: after a server restart every node registers again (its heartbeat is
/// answered `NODE_NOT_REGISTERED`, on which agents register), and its jobs are kept.
pub struct NodeCredentials {
    /// Heartbeats must carry their node's credential (the server has an `agent_token`;
    /// without one the agent endpoints are open and anyone may register any node).
    checked: bool,
    by_node: BTreeMap<String, Vec<u8>>,
}

/// Never prints the credentials.
impl std::fmt::Debug for NodeCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCredentials")
            .field("checked", &self.checked)
            .field("nodes", &self.by_node.len())
            .finish()
    }
}

impl NodeCredentials {
    /// `checked`: whether heartbeats must carry their node's credential.
    pub fn new(checked: bool) -> NodeCredentials {
        NodeCredentials {
            checked,
            by_node: BTreeMap::new(),
        }
    }

    /// A new credential for `node`; the one it had stops working.
    pub fn issue(&mut self, node: &str) -> Result<String, ApiError> {
        let secret = random_secret().map_err(|e| {
            ApiError::new(
                codes::INTERNAL,
                format!("cannot generate the node's credential: {e}"),
            )
        })?;
        self.by_node
            .insert(node.to_string(), secret.as_bytes().to_vec());
        Ok(secret)
    }

    /// Whether a heartbeat of `node` that carries `given` may go on.
    pub fn check(&self, node: &str, given: Option<&str>) -> Result<(), ApiError> {
        if !self.checked {
            return Ok(());
        }
        let Some(expected) = self.by_node.get(node) else {
            return Err(ApiError::new(
                codes::NODE_NOT_REGISTERED,
                format!(
                    "node {node:?} must register again: the server has no credential for it \
                     (the server restarted since the node registered)"
                ),
            )
            .with_attribute("node", node));
        };
        let Some(given) = given else {
            return Err(ApiError::new(
                codes::AUTHENTICATION,
                format!(
                    "the heartbeat of node {node:?} carries no node_credential: send the one \
                     its registration returned (register again to get a new one)"
                ),
            )
            .with_attribute("node", node));
        };
        if bool::from(expected.as_slice().ct_eq(given.as_bytes())) {
            Ok(())
        } else {
            Err(ApiError::new(
                codes::AUTHENTICATION,
                format!(
                    "the node_credential is not node {node:?}'s: a heartbeat must carry the \
                     credential of its own node's last registration (register again to get a \
                     new one)"
                ),
            )
            .with_attribute("node", node))
        }
    }
}

/// Compares a secret in constant time (for the agent token).
pub fn same_secret(given: &str, expected: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Warns (once, at load) when a file holding secrets may be read by other users.
pub fn warn_if_readable_by_others(path: &Path, what: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{:o}", mode & 0o777),
                    "{what} may be read by other users; make it readable by the server's user \
                     only (chmod 600)"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, what);
}

// ---- authorization ------------------------------------------------------------------------

/// The error of a refused permission: code 901, attributes `user`, `permission`, `pool`,
/// `tree` (and more where they help).
fn refused(who: &Identity, permission: &str, pool: &str, tree: &str, message: String) -> ApiError {
    ApiError::new(codes::AUTHORIZATION, message)
        .with_attribute("user", who.name.as_str())
        .with_attribute("permission", permission)
        .with_attribute("pool", pool)
        .with_attribute("tree", tree)
}

/// The error for a request that needs a user and has none.
pub fn authentication_required() -> ApiError {
    ApiError::new(
        codes::AUTHENTICATION,
        "authentication required: send a user's token as `Authorization: Bearer <token>` \
         (the CLI's --token, FAIRSCHED_TOKEN or its config file's token)",
    )
}

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
        Command::Submit(spec, _, _) => {
            let listed = spec
                .get("pool_trees")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str);
            let per_tree = spec
                .get("scheduling_options_per_pool_tree")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.keys().map(String::as_str));
            listed.chain(per_tree).any(no_tree)
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
        Command::Submit(spec, _, _) => authorize_submit(sched, who, spec),
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
            tree, name, parent, ..
        } => {
            let Some(t) = named_tree(sched, tree.as_deref()) else {
                return Ok(());
            };
            explicit_access(t, name, who, Permission::Administer)?;
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
            explicit_access(t, name, who, Permission::Administer)
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
        | Command::Register(..)
        | Command::Heartbeat(..) => Ok(()),
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
fn authorize_submit(sched: &Scheduler, who: &Identity, spec: &Value) -> Result<(), ApiError> {
    // The handler filled in the caller's name when the body gave none.
    let user = spec.get("user").and_then(Value::as_str).unwrap_or("root");
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
    let trees: Vec<&str> = match spec.get("pool_trees").and_then(Value::as_array) {
        Some(names) => names.iter().filter_map(Value::as_str).collect(),
        None => vec![sched.tree().name.as_str()],
    };
    let per_tree = spec.get("scheduling_options_per_pool_tree");
    let seen: BTreeSet<&str> = trees.into_iter().collect();
    for name in seen {
        let Some(t) = sched.tree_index(name).map(|t| &sched.trees()[t]) else {
            continue;
        };
        let pool = per_tree
            .and_then(|m| m.get(name))
            .and_then(|o| o.get("pool"))
            .and_then(Value::as_str)
            .or_else(|| spec.get("pool").and_then(Value::as_str))
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

// ---- read access ----------------------------------------------------------------------------

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
        let first = self
            .view
            .operation_trees
            .get(&op.id)
            .map(String::as_str)
            .or_else(|| {
                op.spec
                    .get("pool_trees")
                    .and_then(|t| t.get(0))
                    .and_then(Value::as_str)
            })
            .unwrap_or(&self.view.snapshot.tree);
        let mut pools = vec![(first, op.pool.as_str())];
        if let Some(o) = self.view.snapshot.operations.get(&op.id) {
            pools.extend(
                o.pool_trees
                    .iter()
                    .map(|(t, o)| (t.as_str(), o.pool.as_str())),
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
        let known: BTreeSet<&str> = self
            .view
            .operations
            .iter()
            .map(|o| o.view.id.as_str())
            .collect();
        events
            .iter()
            .filter_map(|e| e.fields.get("operation").and_then(Value::as_str))
            .filter(|id| !known.contains(id))
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
        // A few events (a live stream's): find their operations; more: index them first.
        let ops: Option<BTreeMap<&str, &OperationView>> = (events.len() > 8).then(|| {
            self.view
                .operations
                .iter()
                .map(|o| (o.view.id.as_str(), o.view.as_ref()))
                .collect()
        });
        let mut decided: BTreeMap<String, bool> = BTreeMap::new();
        events
            .into_iter()
            .filter(|e| {
                let Some(id) = e.fields.get("operation").and_then(Value::as_str) else {
                    return true;
                };
                *decided.entry(id.to_string()).or_insert_with(|| {
                    let op = match &ops {
                        Some(ops) => ops.get(id).copied(),
                        None => self.operation(id),
                    };
                    op.or_else(|| finished.get(id).copied())
                        .is_some_and(|op| self.may_read(op))
                })
            })
            .collect()
    }

    /// The operation `id` of the view, if it has it.
    pub fn operation(&self, id: &str) -> Option<&'a OperationView> {
        self.view
            .operations
            .iter()
            .find(|o| o.view.id == id)
            .map(|o| o.view.as_ref())
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
