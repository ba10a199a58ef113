//! Pool access control: who may use, administer or manage a pool, from the pools' `acl` and
//! `inherit_acl` options (YTsaurus Cypress ACLs on `scheduler_pool` nodes, simplified).
//!
//! The rules, in order:
//! 1. A pool's *effective* ACL is its own entries, then (while `inherit_acl` holds, the
//!    default) its parent's, up to the top-level pool. The root has no ACL.
//! 2. A pool whose effective ACL is empty is open to use: `use` and `read` are granted to
//!    everyone; `administer`, `write` and `manage` (changing the pool, managing others'
//!    operations) need an entry that allows them, so a tree without ACLs is changed by the
//!    server's superusers only.
//! 3. Otherwise an entry *matches* when one of its subjects is the user, one of the user's
//!    groups, or `everyone`, and it lists the permission. A matching `deny` refuses (it wins
//!    over any `allow`); else a matching `allow` grants; else the permission is refused.
//!
//! Ephemeral pools are not in the configuration: callers check their parent.

use crate::common::{AccessControlEntry, AceAction, Permission};
use crate::trees::PoolTreeConfig;

/// The subject every user belongs to.
pub const EVERYONE: &str = "everyone";

/// Who asks: a user and the groups the server knows them by.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
}

impl Subject<'_> {
    fn matches(&self, entry: &AccessControlEntry) -> bool {
        entry
            .subjects
            .iter()
            .any(|s| s == self.user || s == EVERYONE || self.groups.iter().any(|g| g == s))
    }
}

/// A refused permission: the error names the user, the permission and the pool, and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("user {user:?} has no {permission} permission on pool {pool:?}: {why}")]
pub struct AccessDenied {
    pub user: String,
    pub permission: &'static str,
    /// The pool's path.
    pub pool: String,
    pub why: String,
}

/// The name of a permission as written in an ACL (`use`, `administer`, ...).
pub fn permission_name(p: Permission) -> &'static str {
    match p {
        Permission::Use => "use",
        Permission::Administer => "administer",
        Permission::Read => "read",
        Permission::Write => "write",
        Permission::Manage => "manage",
    }
}

impl PoolTreeConfig {
    /// The effective ACL of the pool at `path` (`"research/adhoc"`): its own entries first,
    /// then each ancestor's while `inherit_acl` holds; each entry with the path of the pool
    /// that holds it. `None` when there is no such pool.
    pub fn effective_acl(&self, path: &str) -> Option<Vec<(String, &AccessControlEntry)>> {
        let parts: Vec<&str> = path.split('/').collect();
        let mut chain = Vec::new();
        for depth in 1..=parts.len() {
            let prefix = parts[..depth].join("/");
            let pool = self.pool_at(&prefix)?;
            chain.push((prefix, pool));
        }
        let mut out = Vec::new();
        for (pool_path, pool) in chain.iter().rev() {
            out.extend(pool.acl.iter().map(|e| (pool_path.clone(), e)));
            if !pool.inherit_acl {
                break;
            }
        }
        Some(out)
    }

    /// Whether `who` has `permission` on the pool named `pool` (names are unique in a tree)
    /// by the rules of this module. `None` is the root, which has no ACL: only the server's
    /// superusers may act on it, which the caller decides. A pool not in the configuration
    /// (an ephemeral one) is the caller's to map to its parent; here it is refused.
    pub fn check_access(
        &self,
        pool: &str,
        who: Subject<'_>,
        permission: Permission,
    ) -> Result<(), AccessDenied> {
        let name = permission_name(permission);
        let denied = |path: &str, why: String| AccessDenied {
            user: who.user.to_string(),
            permission: name,
            pool: path.to_string(),
            why,
        };
        let Some((path, _)) = self.find_pool(pool) else {
            return Err(denied(pool, "no such pool in the configuration".into()));
        };
        let acl = self.effective_acl(&path).unwrap_or_default();
        if acl.is_empty() {
            return match permission {
                Permission::Use | Permission::Read => Ok(()),
                _ => Err(denied(
                    &path,
                    "the pool has no ACL, and without one only its use is open to everyone".into(),
                )),
            };
        }
        let matching = |action: AceAction| {
            acl.iter().find(|(_, e)| {
                e.action == action && e.permissions.contains(&permission) && who.matches(e)
            })
        };
        if let Some((holder, _)) = matching(AceAction::Deny) {
            return Err(denied(&path, format!("denied by the ACL of {holder:?}")));
        }
        if matching(AceAction::Allow).is_some() {
            return Ok(());
        }
        Err(denied(
            &path,
            format!(
                "no ACL entry allows it (pools' acl and inherit_acl; subjects checked: {:?}, \
                 their groups {:?}, {EVERYONE:?})",
                who.user, who.groups
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> PoolTreeConfig {
        crate::load_pool_tree_str(
            r#"
            [pools.research]
            acl = [
              { action = "allow", subjects = ["ml"], permissions = ["use"] },
              { action = "allow", subjects = ["alice"], permissions = ["administer", "manage"] },
              { action = "deny", subjects = ["mallory"], permissions = ["use"] },
            ]
            [pools.research.pools.adhoc]
            acl = [{ action = "allow", subjects = ["bob"], permissions = ["use"] }]
            [pools.research.pools.private]
            inherit_acl = false
            acl = [{ action = "allow", subjects = ["carol"], permissions = ["use"] }]
            [pools.open]
            [pools.public]
            acl = [{ subjects = ["everyone"], permissions = ["use"] }]
            "#,
            crate::Format::Toml,
        )
        .unwrap()
    }

    /// One case: (pool, user, groups, permission, allowed).
    #[test]
    fn access_follows_the_rules() {
        let t = tree();
        let ml = vec!["ml".to_string()];
        let none: Vec<String> = Vec::new();
        let cases: &[(&str, &str, &Vec<String>, Permission, bool)] = &[
            // An empty effective ACL is open to use, not to change.
            ("open", "anyone", &none, Permission::Use, true),
            ("open", "anyone", &none, Permission::Read, true),
            ("open", "anyone", &none, Permission::Administer, false),
            ("open", "anyone", &none, Permission::Manage, false),
            ("open", "anyone", &none, Permission::Write, false),
            // Groups and users; a permission no entry lists is refused.
            ("research", "dave", &ml, Permission::Use, true),
            ("research", "dave", &none, Permission::Use, false),
            ("research", "dave", &ml, Permission::Administer, false),
            ("research", "alice", &none, Permission::Administer, true),
            ("research", "alice", &none, Permission::Use, false),
            // Deny wins over an allow through a group.
            ("research", "mallory", &ml, Permission::Use, false),
            // Inherited: the parent's entries apply below it, besides the pool's own.
            ("adhoc", "bob", &none, Permission::Use, true),
            ("adhoc", "dave", &ml, Permission::Use, true),
            ("adhoc", "alice", &none, Permission::Manage, true),
            ("adhoc", "mallory", &ml, Permission::Use, false),
            // inherit_acl = false cuts the chain.
            ("private", "carol", &none, Permission::Use, true),
            ("private", "dave", &ml, Permission::Use, false),
            ("private", "alice", &none, Permission::Administer, false),
            // `everyone`.
            ("public", "anyone", &none, Permission::Use, true),
            ("public", "anyone", &none, Permission::Administer, false),
            // A pool that is not configured.
            ("nope", "alice", &none, Permission::Use, false),
        ];
        for (pool, user, groups, permission, allowed) in cases {
            let who = Subject { user, groups };
            let got = t.check_access(pool, who, *permission);
            assert_eq!(
                got.is_ok(),
                *allowed,
                "{user} {groups:?} {permission:?} on {pool}: {got:?}"
            );
        }
    }

    #[test]
    fn a_refusal_names_user_permission_pool_and_the_reason() {
        let t = tree();
        let e = t
            .check_access(
                "research",
                Subject {
                    user: "mallory",
                    groups: &["ml".to_string()],
                },
                Permission::Use,
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"user "mallory" has no use permission on pool "research": denied by the ACL of "research""#
        );
        let e = t
            .check_access(
                "adhoc",
                Subject {
                    user: "eve",
                    groups: &[],
                },
                Permission::Use,
            )
            .unwrap_err();
        assert_eq!(e.pool, "research/adhoc");
        assert!(e.why.starts_with("no ACL entry allows it"), "{e}");
    }
}
