//! What the engine tells its owner of each change to the tables, on the writer thread, in the
//! order the writer made them. The server appends them to the store's change stream, so that
//! the consumers of that stream (replication, snapshots) see SQL tables change too.
//!
//! A change is told only after it took effect (a statement that failed, and was rolled back,
//! is not), and only while the sink wants changes: with nobody listening, a write pays one call
//! of [`ChangeSink::wants`].

use crate::{ExpiryRules, RowChanges, Value};

/// One change to the tables.
#[derive(Debug, PartialEq)]
pub enum SqlChange<'a> {
    /// A client's statement (or script) that wrote: `query` says it came as SQL.QUERY (a
    /// statement with RETURNING, or one a reader found to write), else SQL.EXEC.
    Statement {
        query: bool,
        sql: &'a [u8],
        params: &'a [Value],
        origin: u64,
    },
    /// A table's expiry rules were set (SQL.EXPIRE with rules).
    Rules {
        table: &'a str,
        rules: &'a ExpiryRules,
        origin: u64,
    },
    /// Expiry removed the row `rowid` of `table` (by age, row count or operations).
    Expired { table: &'a str, rowid: i64 },
}

/// Receives the engine's changes (see the module's doc). Called on the writer thread while no
/// other write runs: it must be quick and must not submit work to the engine.
pub trait ChangeSink: Send + Sync {
    /// Whether anyone wants changes now; checked before each change is described. The engine
    /// numbers every change either way (a snapshot's position counts them all), so a sink that
    /// numbers changes (the store's SQL log) must want every one.
    fn wants(&self) -> bool;
    fn changed(&self, change: &SqlChange<'_>);
    /// The tables were replaced by a snapshot's (`SqlEngine::restore`) taken at `position`:
    /// the next change is numbered `position + 1`, and a sink that numbers changes continues
    /// from there. Called on the writer thread before any change made after the restore.
    fn restored(&self, _position: u64) {}
    /// Whether the rows a client's request changes in `table` (lower-case) are wanted, as
    /// [`ChangeSink::rows_changed`]: asked on the writer thread for each row changed.
    fn wants_rows(&self, _table: &str) -> bool {
        false
    }
    /// The rows a client's request changed in one wanted table, as they are after it; called
    /// on the writer thread after the request succeeded and before its reply (`crate::rows`).
    fn rows_changed(&self, _rows: &RowChanges<'_>) {}
}
