//! Who sends a request: a [`Caller`] (a leaf: `auth` names it, the actor and `http` pass it on).

use fairsched_config::acl::Subject;
use std::sync::Arc;

/// A user the server knows (without the token).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub groups: Vec<String>,
    pub superuser: bool,
}

impl Identity {
    pub(crate) fn subject(&self) -> Subject<'_> {
        Subject {
            user: &self.name,
            groups: &self.groups,
        }
    }
}

/// Who sends a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Authentication is off (no users in `[auth]`): the request may do everything, and an
    /// operation's `user` is what the request says.
    Unchecked,
    /// No token where none is needed: a read while `authenticate_reads` is off, or an agent
    /// endpoint (which checks `agent_token` itself).
    Anonymous,
    /// A user, by their token.
    User(Arc<Identity>),
}

impl Caller {
    /// For logs: the user's name, `anonymous`, or `-` when authentication is off.
    pub fn name(&self) -> &str {
        match self {
            Caller::Unchecked => "-",
            Caller::Anonymous => "anonymous",
            Caller::User(u) => &u.name,
        }
    }

    /// The user, when the request was authenticated.
    pub fn user(&self) -> Option<&Identity> {
        match self {
            Caller::User(u) => Some(u),
            _ => None,
        }
    }
}
