//! SQL tables in the change stream: the SQL engine tells of each change its writer makes
//! (`sql::ChangeSink`), and this sink appends it to the store's SQL log as the command that
//! replays it, RESP-encoded: `SQL.EXEC sql params...` (or `SQL.QUERY` for a statement that came
//! as a query), `SQL.EXPIRE table AGE a ROWS r OPS o` for new expiry rules, and
//! `SQL.EXEC "DELETE FROM <table> WHERE rowid = ?" <rowid>` for a row expiry removed. Replayed
//! in log order through the command path on an engine holding the same tables, they rebuild
//! the same rows (a replica or a snapshot restore does this).
//!
//! The sink also hands write-behind the rows a client's request changed in a table an
//! `sql_table` mapping names (`wants_rows`, `rows_changed`): each row goes to the mapping's log
//! as it is after the request (a gone row as a delete), durable as the mapping's fsync rule
//! says before the SQL reply goes. A replica's rows are its primary's, which writes them back.
//!
//! The SQL log numbers every change like the shards' logs do, whether or not a consumer reads
//! it; the command is only encoded while one does (`Store::record_sql_with`).

use std::sync::Arc;

use sql::{RowChanges, SqlChange, Value};
use store::{Author, Store};

/// The engine's change sink, writing into `store`'s SQL log (and mapped tables' rows into
/// write-behind).
pub struct SqlChanges(pub Arc<Store>, pub Arc<writeback::Engine>);

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

    fn wants_rows(&self, table: &str) -> bool {
        !self.0.replica_mode() && self.1.mapped_table(table).is_some()
    }

    fn rows_changed(&self, rows: &RowChanges<'_>) {
        if self.0.replica_mode() {
            return;
        }
        let Some(m) = self.1.mapped_table(rows.table) else {
            return;
        };
        let keys = match &rows.keys {
            Ok(k) => *k,
            Err(why) => return m.refuse(rows.table.as_bytes(), why),
        };
        for (pk, row) in rows.rows {
            let key = key_text(pk);
            let key_cols: Vec<(&str, writeback::Cell<'_>)> = (keys.iter().zip(pk))
                .map(|(&i, v)| (rows.columns[i].as_str(), cell(v)))
                .collect();
            match row {
                Some(values) => {
                    let rest: Vec<(&str, writeback::Cell<'_>)> = (rows.columns.iter().zip(values))
                        .enumerate()
                        .filter(|(i, _)| !keys.contains(i))
                        .map(|(_, (name, v))| (name.as_str(), cell(v)))
                        .collect();
                    let value = writeback::encode_sql_row(&key_cols, &rest);
                    self.1.capture_row(&m, &key, writeback::OpKind::Row, &value);
                }
                None => {
                    let value = writeback::encode_sql_row(&key_cols, &[]);
                    self.1
                        .capture_row(&m, &key, writeback::OpKind::Delete, &value);
                }
            }
        }
        // Durable before the reply, as a key's change is (the reply goes after this call).
        if let Some(durable) = self.1.commit() {
            durable.wait();
        }
    }
}

fn cell(v: &Value) -> writeback::Cell<'_> {
    match v {
        Value::Null => writeback::Cell::Null,
        Value::Integer(i) => writeback::Cell::Integer(*i),
        Value::Real(f) => writeback::Cell::Real(*f),
        Value::Text(b) => writeback::Cell::Text(b),
        Value::Blob(b) => writeback::Cell::Blob(b),
    }
}

/// A primary key as the row's id in the log and the database (text): one column's value as
/// it is; several as `len:text` parts joined by `,` (unambiguous whatever the values hold).
fn key_text(key: &[Value]) -> Vec<u8> {
    fn text(v: &Value) -> Vec<u8> {
        match v {
            Value::Null => Vec::new(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Real(f) => format!("{f:?}").into_bytes(),
            Value::Text(b) | Value::Blob(b) => b.clone(),
        }
    }
    match key {
        [one] => text(one),
        several => {
            let mut out = Vec::new();
            for (i, v) in several.iter().enumerate() {
                let t = text(v);
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(format!("{}:", t.len()).as_bytes());
                out.extend_from_slice(&t);
            }
            out
        }
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
