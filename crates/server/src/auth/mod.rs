//! API tokens and pool ACLs.
//!
//! * Authentication ([`Auth`], used by `http`): with users configured (`[auth]`), a request
//!   to `/api/v1` names its user by a bearer token, compared in constant time; the request
//!   goes to the actor with its [`Caller`](crate::caller::Caller). No users: authentication
//!   is off ([`Caller::Unchecked`](crate::caller::Caller::Unchecked)).
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
//! | reads, agents' register and heartbeat | nothing here (`http` decides; reading others' operations' output, environment and events needs `read`: [`ReadAccess`]) |
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

mod authorize;
mod guard;
mod read;

use crate::ServerConfig;
use crate::caller::Identity;
use fairsched_api::{ApiError, codes};
use std::collections::BTreeMap;
use std::sync::Arc;
use subtle::ConstantTimeEq;

pub use authorize::authorize;
pub use guard::{agent_token, caller_of, is_agent_path};
pub use read::{AclTrees, REDACTED, ReadAccess, redact_env};

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
        Ok(Auth {
            users: config.users(warn)?,
            authenticate_reads: config.auth.authenticate_reads,
        })
    }

    /// The first ACL subject of `config` (a pool's options, or a tree's with its pools)
    /// that names neither a user nor a group of `[auth]` (nor `everyone`), as an error naming
    /// where it is: a misspelt subject would make its entry apply to no one (a `deny` that
    /// denies nothing). Nothing to check without users.
    pub fn check_acl_subjects(&self, config: &serde_json::Value) -> Result<(), ApiError> {
        if !self.enabled() {
            return Ok(());
        }
        let mut known: Vec<&str> = vec!["everyone"];
        for (_, u) in &self.users {
            known.push(&u.name);
            known.extend(u.groups.iter().map(String::as_str));
        }
        known.sort_unstable();
        known.dedup();
        let mut found = None;
        find_unknown_subject(config, String::new(), &known, &mut found);
        match found {
            None => Ok(()),
            Some((at, subject)) => {
                let hint = fairsched_config::closest(&subject, known.iter().copied())
                    .map(|k| format!("did you mean {k:?}? "))
                    .unwrap_or_default();
                Err(ApiError::new(
                    codes::BAD_REQUEST,
                    format!(
                        "{at}: {subject:?} is neither a user nor a group of the server's [auth] \
                         (nor everyone); {hint}an entry for it would apply to no one"
                    ),
                )
                .with_attribute("field", at))
            }
        }
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

/// The error of a refused permission: code 901, attributes `user`, `permission`, `pool`,
/// `tree` (and more where they help).
pub(super) fn refused(
    who: &Identity,
    permission: &str,
    pool: &str,
    tree: &str,
    message: String,
) -> ApiError {
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

/// The first subject of an `acl` list under `value` (at path `at`) not in `known`.
fn find_unknown_subject(
    value: &serde_json::Value,
    at: String,
    known: &[&str],
    found: &mut Option<(String, String)>,
) {
    use serde_json::Value;
    if found.is_some() {
        return;
    }
    let Value::Object(map) = value else {
        return;
    };
    let join = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    for (key, v) in map {
        match (key.as_str(), v) {
            ("acl", Value::Array(entries)) => {
                for (i, entry) in entries.iter().enumerate() {
                    let Some(Value::Array(subjects)) = entry.get("subjects") else {
                        continue;
                    };
                    for subject in subjects.iter().filter_map(Value::as_str) {
                        if !known.contains(&subject) {
                            *found = Some((
                                format!("{}[{i}].subjects", join("acl")),
                                subject.to_string(),
                            ));
                            return;
                        }
                    }
                }
            }
            (_, Value::Object(_)) => find_unknown_subject(v, join(key), known, found),
            _ => {}
        }
        if found.is_some() {
            return;
        }
    }
}
