//! The database side: what a flusher asks of a database, and the two drivers (SQLite through
//! rusqlite, PostgreSQL through the synchronous `postgres` client).
//!
//! Every row write is version-guarded: cairn's own table `cairn_wb_version (mapping, key,
//! version)` keeps the log number (LSN) of the last change applied to each key, and a change
//! is applied only if its number is greater. The mapped table holds only the application's
//! columns. `cairn_wb_checkpoint (mapping, lsn)` says how far the log was applied, and is
//! written in the same transaction as the rows it covers, and as the dead letters
//! (`cairn_wb_dead (mapping, lsn, key, value, reason, time_ms)`) of the changes it skips.

use crate::config::{MappingConfig, ValueShape};
use crate::DeadLetter;

/// One row change, ready for SQL: the key's id (the key less the mapping's prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub lsn: u64,
    pub change: RowChange,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowChange {
    Delete,
    /// Column name and value as text (the database converts it to the column's type).
    Upsert(Vec<(String, String)>),
}

/// Why a database call failed.
#[derive(Clone, Debug)]
pub struct DbError {
    pub message: String,
    /// The connection (or the database) is unusable: retry the same work later, forever.
    /// Otherwise the database refused the data: a bounded number of retries, then rows are
    /// isolated and the refused ones dead-lettered.
    pub connection: bool,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A database a flusher writes to.
pub trait Driver: Send {
    /// Creates cairn's tables if missing; the mapping's checkpoint (0: none yet).
    fn checkpoint(&mut self, mapping: &str) -> Result<u64, DbError>;
    /// Applies `rows` (one per key, in log order), stores the dead letters `dead` and sets
    /// the checkpoint to `checkpoint`, in one transaction. Returns how many rows changed the
    /// table (guards may skip some).
    fn apply(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        dead: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<u64, DbError>;
    /// As `apply`, but each row on its own savepoint: a row the database refuses is left out
    /// and its letter (`letters[i]` for `rows[i]`, with the database's reason) is stored with
    /// `dead`; the others and the checkpoint commit. Returns the rows written and every
    /// letter stored.
    fn apply_each(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        dead: &[DeadLetter],
        letters: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<(u64, Vec<DeadLetter>), DbError>;
    /// The mapping's newest `count` dead letters.
    fn dead_letters(&mut self, mapping: &str, count: usize) -> Result<Vec<DeadLetter>, DbError>;
    /// Deletes the mapping's dead letters numbered `lsns`.
    fn drop_dead_letters(&mut self, mapping: &str, lsns: &[u64]) -> Result<(), DbError>;
}

/// A refused row's letter: `letter` with the database's reason.
pub(crate) fn refused(letter: &DeadLetter, why: String) -> DeadLetter {
    DeadLetter {
        reason: why,
        ..letter.clone()
    }
}

/// Opens the driver for `cfg`'s database.
pub fn connect(cfg: &MappingConfig) -> Result<Box<dyn Driver>, DbError> {
    match &cfg.database {
        crate::config::Database::Sqlite(path) => Ok(Box::new(crate::sqlite::Sqlite::open(path)?)),
        crate::config::Database::Postgres(url) => Ok(Box::new(crate::pg::Postgres::open(url)?)),
    }
}

/// `"name"`: an identifier (checked at parse to be plain) quoted for SQL.
pub(crate) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The upsert's column list for `row`: the key column, then the value columns.
pub(crate) fn columns<'r>(cfg: &'r MappingConfig, cols: &'r [(String, String)]) -> Vec<&'r str> {
    std::iter::once(cfg.key_column.as_str())
        .chain(cols.iter().map(|(c, _)| c.as_str()))
        .collect()
}

/// Turns a record's value into columns (a hash's fields, or the string's one column).
pub fn row_columns(
    cfg: &MappingConfig,
    op: crate::log::OpKind,
    value: &[u8],
) -> Result<Vec<(String, String)>, String> {
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| "value is not UTF-8 text".to_string())
    };
    match (&cfg.value, op) {
        (ValueShape::String { column }, crate::log::OpKind::String) => {
            Ok(vec![(column.clone(), text(value)?)])
        }
        (ValueShape::Hash, crate::log::OpKind::Hash) => {
            let mut out = Vec::new();
            for (field, v) in store::hash::fields(value) {
                let name = text(field)?;
                let plain = !name.is_empty()
                    && name.len() <= 63
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !plain || name.eq_ignore_ascii_case(&cfg.key_column) {
                    return Err(format!("field '{name}' cannot be a column"));
                }
                out.push((name, text(v)?));
            }
            Ok(out)
        }
        (_, crate::log::OpKind::Collection) => {
            Err("the key holds a set, sorted set or list, which no mapping stores".into())
        }
        (ValueShape::Hash, _) => Err("the mapping wants hashes; the key holds a string".into()),
        (ValueShape::String { .. }, _) => {
            Err("the mapping wants strings; the key holds a hash".into())
        }
    }
}
