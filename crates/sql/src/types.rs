//! The values, requests and replies that cross the engine's API.

use std::sync::Arc;
use std::time::Duration;

/// One SQL value. `Text` carries bytes because SQLite does not enforce UTF-8 on text it
/// stores (`CAST(x'ff' AS TEXT)` is legal), and the server sends bytes on the wire anyway.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl Value {
    /// The rule for protocol arguments, which arrive as untyped byte strings (RESP bulk strings):
    /// valid UTF-8 binds as TEXT, anything else as BLOB. Numbers therefore bind as TEXT and are
    /// converted by the column's type affinity (an INTEGER column stores `'42'` as 42, and
    /// `WHERE id = ?` compares numerically). To force BLOB storage for bytes that happen to be
    /// valid UTF-8, write `CAST(? AS BLOB)` in the SQL; `CAST(? AS INTEGER)` / `CAST(? AS REAL)`
    /// force numbers where no column affinity applies (e.g. `SELECT ? + 1`).
    pub fn from_bulk(bytes: Vec<u8>) -> Value {
        match String::from_utf8(bytes) {
            Ok(s) => Value::Text(s.into_bytes()),
            Err(e) => Value::Blob(e.into_bytes()),
        }
    }
}

/// Automatic expiry rules of one table; `None` means the rule is off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpiryRules {
    /// Remove rows whose last write is older than this.
    pub age: Option<Duration>,
    /// Keep at most this many rows, removing the least recently written first.
    pub rows: Option<u64>,
    /// Remove a row once this many operations (statements) have run on its table since the row
    /// was last written.
    pub ops: Option<u64>,
}

impl ExpiryRules {
    /// True when no rule is set; setting such rules clears a table's expiry.
    pub fn is_empty(&self) -> bool {
        self.age.is_none() && self.rows.is_none() && self.ops.is_none()
    }
}

/// One column of `SQL.DESCRIBE`, as SQLite's `table_info` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnInfo {
    pub name: String,
    /// Declared type, empty when none was declared.
    pub decl_type: String,
    pub not_null: bool,
    /// The default value's SQL text.
    pub default: Option<String>,
    /// 0 when the column is not part of the primary key, else its 1-based position in it.
    pub primary_key: u32,
}

/// What the server asks the engine to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `SQL.EXEC`: one statement or a `;`-separated script; `params` are consumed by the
    /// statements' `?` placeholders in order.
    Exec { sql: Vec<u8>, params: Vec<Value> },
    /// `SQL.QUERY`: exactly one statement; its rows come back.
    Query { sql: Vec<u8>, params: Vec<Value> },
    /// `SQL.EXPIRE`: `None` shows the rules; `Some` replaces them (all-`None` rules clear them).
    Expire {
        table: String,
        rules: Option<ExpiryRules>,
    },
    /// `SQL.TABLES`.
    Tables,
    /// `SQL.DESCRIBE`.
    Describe { table: String },
}

/// The engine's answer to a `Request`.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Rows changed by `Exec` (INSERT/UPDATE/DELETE statements only, triggers excluded).
    Changed(u64),
    Rows {
        /// Shared with the statement's cached analysis: a repeated query copies no names.
        columns: Arc<[String]>,
        rows: Vec<Vec<Value>>,
    },
    Rules(ExpiryRules),
    Ok,
    Tables(Vec<String>),
    Describe(Vec<ColumnInfo>),
}

/// Counters for `INFO`-style reporting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SqlStats {
    /// Bytes SQLite has allocated in this process (data, page caches, statements).
    pub memory_used: u64,
    /// SQLite's heap limit derived from `max_memory` (0 = none): image, caches, temporary
    /// b-trees and statements together.
    pub heap_limit: u64,
    /// Queued statements dropped because their client went away before their turn.
    pub cancelled: u64,
    /// Bytes of this engine's database image (tables, indexes, row metadata).
    pub data_bytes: u64,
    /// `max_memory` from the config (0 = unlimited).
    pub max_memory: u64,
    /// User statements run (each statement of a script counts).
    pub statements: u64,
    /// Statements interrupted by the timeout.
    pub interrupted: u64,
    /// Statements refused by the sandbox.
    pub refused: u64,
    /// Results cut off by `max_result_bytes`.
    pub results_too_large: u64,
    /// Writes refused because the memory limit was reached.
    pub oom_refused: u64,
    /// Rows removed by each expiry rule.
    pub expired_age: u64,
    pub expired_rows: u64,
    pub expired_ops: u64,
    /// Tables that have expiry rules.
    pub tables_with_rules: u64,
    /// Statements waiting for an engine thread now.
    pub queued: u64,
    /// Queries run on the caller's thread ([`crate::SqlEngine::query_inline`]; counted in
    /// `statements` too), and inline attempts handed to the engine's threads instead.
    pub inline: u64,
    pub handed_off: u64,
    /// Statements run, per bucket of [`crate::LATENCY_BOUNDS_NS`] (not cumulative; the last
    /// bucket takes the slower ones), and their total run time.
    pub latency: [u64; crate::LATENCY_BOUNDS_NS.len() + 1],
    pub latency_nanos: u64,
}
