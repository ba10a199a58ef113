//! A refused command: [`CoreError`] (nothing changed) and the YTsaurus error codes it carries.

/// YTsaurus error code: too many operations in a pool.
pub const ERROR_TOO_MANY_OPERATIONS: u32 = 202;
/// YTsaurus `ResolveError`: what a command names does not exist (a pool, a parent pool).
pub const ERROR_NO_SUCH_OBJECT: u32 = 500;

/// A command was rejected; nothing changed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// What the command names does not exist (YTsaurus `ResolveError`, 500): a pool, a parent
    /// pool.
    #[error("{0}")]
    NoSuchObject(String),
    /// A pool (or the tree) already has its most operations (YTsaurus `TooManyOperations`,
    /// 202).
    #[error("{0}")]
    TooManyOperations(String),
    /// A pool tree configuration a change would produce is invalid, with the code of its
    /// first coded error if one has one (29000: guarantees overcommitted).
    #[error("{message}")]
    InvalidConfig { code: Option<u32>, message: String },
    /// Anything else the core refuses: a spec that cannot run, a state that does not allow
    /// the command, a name taken.
    #[error("{0}")]
    Rejected(String),
}

impl CoreError {
    /// A [`CoreError::Rejected`].
    pub fn new(message: impl Into<String>) -> CoreError {
        CoreError::Rejected(message.into())
    }

    /// The YTsaurus error code, where one exists.
    pub fn code(&self) -> Option<u32> {
        match self {
            CoreError::NoSuchObject(_) => Some(ERROR_NO_SUCH_OBJECT),
            CoreError::TooManyOperations(_) => Some(ERROR_TOO_MANY_OPERATIONS),
            CoreError::InvalidConfig { code, .. } => *code,
            CoreError::Rejected(_) => None,
        }
    }

    /// What was refused and why, in words.
    pub fn message(&self) -> &str {
        match self {
            CoreError::NoSuchObject(m)
            | CoreError::TooManyOperations(m)
            | CoreError::Rejected(m) => m,
            CoreError::InvalidConfig { message, .. } => message,
        }
    }
}
