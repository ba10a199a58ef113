//! A refused command: [`CoreError`] (nothing changed) and the YTsaurus error codes it carries.

/// YTsaurus error code: too many operations in a pool.
pub const ERROR_TOO_MANY_OPERATIONS: u32 = 202;
/// YTsaurus `ResolveError`: what a command names does not exist (a pool, a parent pool).
pub const ERROR_NO_SUCH_OBJECT: u32 = 500;

/// A command was rejected; nothing changed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct CoreError {
    /// YTsaurus error code where one exists (202 too many operations, 29000 guarantees).
    pub code: Option<u32>,
    pub message: String,
}

impl CoreError {
    pub fn new(message: impl Into<String>) -> CoreError {
        CoreError {
            code: None,
            message: message.into(),
        }
    }

    pub fn with_code(code: u32, message: impl Into<String>) -> CoreError {
        CoreError {
            code: Some(code),
            message: message.into(),
        }
    }
}
