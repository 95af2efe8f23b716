//! Errors the engine reports; their messages are meant to reach the client verbatim (the server
//! only adds its `ERR ` prefix), so they say what happened and which limit applied.

use std::fmt;

/// Broad class of an error, for the server to pick a reply prefix or count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The SQL did not compile (syntax error, unknown table or column): SQLite's message.
    Syntax,
    /// SQLite failed while running the statement (constraint violation, type error…).
    Sqlite,
    /// The sandbox refused an operation (ATTACH, PRAGMA, load_extension…).
    Refused,
    /// The statement ran longer than the timeout, or waited that long for a lock.
    Timeout,
    /// The result exceeded `max_result_bytes`.
    ResultTooLarge,
    /// The SQL memory limit was reached; writes are refused.
    OutOfMemory,
    /// `SQL.DESCRIBE` / `SQL.EXPIRE` named a table that does not exist.
    NoSuchTable,
    /// The request itself is malformed (wrong parameter count, bad rule value, non-UTF-8 SQL).
    BadArgument,
    /// The engine is shutting down.
    Shutdown,
    /// The client went away before its request ran; the request was dropped.
    Cancelled,
    /// Bytes given to `SqlEngine::restore` are not a snapshot this engine reads: another
    /// file, a newer format version, truncated or damaged.
    BadSnapshot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SqlError {
    pub kind: ErrorKind,
    pub message: String,
}

impl SqlError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> SqlError {
        SqlError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn refused(what: impl fmt::Display) -> SqlError {
        SqlError::new(ErrorKind::Refused, format!("SQL refused: {what}"))
    }

    pub(crate) fn bad(message: impl Into<String>) -> SqlError {
        SqlError::new(ErrorKind::BadArgument, message)
    }

    pub(crate) fn cancelled() -> SqlError {
        SqlError::new(
            ErrorKind::Cancelled,
            "SQL request dropped: the client disconnected before it ran",
        )
    }

    pub(crate) fn shutdown() -> SqlError {
        SqlError::new(ErrorKind::Shutdown, "SQL engine is shutting down")
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SqlError {}

/// SQLite's own message for an error, without rusqlite's decorations.
pub(crate) fn sqlite_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

/// Errors from SQL the engine issues itself: OOM-class codes keep their meaning.
impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> SqlError {
        let kind = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::OutOfMemory) => {
                ErrorKind::OutOfMemory
            }
            _ => ErrorKind::Sqlite,
        };
        SqlError::new(kind, sqlite_message(&e))
    }
}
