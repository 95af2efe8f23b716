//! SQL tables in the change stream: the SQL engine tells of each change its writer makes
//! (`sql::ChangeSink`), and this sink appends it to the store's SQL log as the command that
//! replays it, RESP-encoded: `SQL.EXEC sql params...` (or `SQL.QUERY` for a statement that came
//! as a query), `SQL.EXPIRE table AGE a ROWS r OPS o` for new expiry rules, and
//! `SQL.EXEC "DELETE FROM <table> WHERE rowid = ?" <rowid>` for a row expiry removed. Replayed
//! in log order through the command path on an engine holding the same tables, they rebuild
//! the same rows (a replica or a snapshot restore does this).
//!
//! The SQL log numbers every change like the shards' logs do, whether or not a consumer reads
//! it; the command is only encoded while one does (`Store::record_sql_with`).

use std::sync::Arc;

use sql::{SqlChange, Value};
use store::{Author, Store};

/// The engine's change sink, writing into `store`'s SQL log.
pub struct SqlChanges(pub Arc<Store>);

impl sql::ChangeSink for SqlChanges {
    fn wants(&self) -> bool {
        // Always: even unread, a change takes its sequence number (the consistent cut).
        true
    }

    fn changed(&self, change: &SqlChange<'_>) {
        let store = &self.0;
        let author = match change {
            SqlChange::Statement { origin, .. } | SqlChange::Rules { origin, .. } => {
                Author(*origin)
            }
            SqlChange::Expired { .. } => Author::SERVER,
        };
        store.record_sql_with(author, || replay_command(change));
    }

    fn restored(&self, position: u64) {
        // The engine numbers its next change `position + 1`; the store's SQL log must agree,
        // so that a snapshot's SQL position and the change stream name the same change.
        self.0.restart_sql_log_at(position);
    }
}

/// The command that replays `change`, RESP-encoded (a request as a client sends it).
pub fn replay_command(change: &SqlChange<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match change {
        SqlChange::Statement {
            query, sql, params, ..
        } => {
            let name: &[u8] = if *query { b"SQL.QUERY" } else { b"SQL.EXEC" };
            // Parameters that the untyped form would bind differently (numbers, NULL, BLOBs
            // that are valid UTF-8, TEXT that is not) replay in the TYPES form.
            let typed = params.iter().any(|p| match p {
                Value::Text(b) => std::str::from_utf8(b).is_err(),
                Value::Blob(b) => std::str::from_utf8(b).is_ok(),
                _ => true,
            });
            resp::reply::array_len(&mut out, 2 + params.len() + if typed { 2 } else { 0 });
            resp::reply::bulk(&mut out, name);
            if typed {
                resp::reply::bulk(&mut out, b"TYPES");
                let spec: Vec<u8> = params
                    .iter()
                    .map(|p| match p {
                        Value::Null => b'n',
                        Value::Integer(_) => b'i',
                        Value::Real(_) => b'r',
                        Value::Text(_) => b't',
                        Value::Blob(_) => b'b',
                    })
                    .collect();
                resp::reply::bulk(&mut out, &spec);
            }
            resp::reply::bulk(&mut out, sql);
            for param in params.iter() {
                match param {
                    Value::Text(b) | Value::Blob(b) => resp::reply::bulk(&mut out, b),
                    Value::Integer(i) => resp::reply::bulk(&mut out, i.to_string().as_bytes()),
                    // `{:?}` round-trips exactly (and keeps a `.0`/exponent).
                    Value::Real(f) => resp::reply::bulk(&mut out, format!("{f:?}").as_bytes()),
                    Value::Null => resp::reply::bulk(&mut out, b""),
                }
            }
        }
        SqlChange::Rules { table, rules, .. } => {
            resp::reply::array_len(&mut out, 8);
            resp::reply::bulk(&mut out, b"SQL.EXPIRE");
            resp::reply::bulk(&mut out, table.as_bytes());
            for (name, value) in [
                ("AGE", rules.age.map_or(0, |d| d.as_secs())),
                ("ROWS", rules.rows.unwrap_or(0)),
                ("OPS", rules.ops.unwrap_or(0)),
            ] {
                resp::reply::bulk(&mut out, name.as_bytes());
                resp::reply::bulk(&mut out, value.to_string().as_bytes());
            }
        }
        SqlChange::Expired { table, rowid } => {
            let delete = format!(
                "DELETE FROM \"{}\" WHERE rowid = ?",
                table.replace('"', "\"\"")
            );
            resp::reply::array_len(&mut out, 3);
            resp::reply::bulk(&mut out, b"SQL.EXEC");
            resp::reply::bulk(&mut out, delete.as_bytes());
            resp::reply::bulk(&mut out, rowid.to_string().as_bytes());
        }
    }
    out
}
