//! Row changes for the change sink's row listeners (write-behind of SQL tables): while a
//! client's request runs on the writer, SQLite's update hook notes the rowids it inserts,
//! updates or deletes in the tables the sink asks for ([`ChangeSink::wants_rows`]); after the
//! request succeeded, each noted row is read as it is now and the sink is told
//! ([`ChangeSink::rows_changed`]) before the reply goes.
//!
//! The hook gives only a rowid (a deleted row's values are gone), so a table is written back
//! only when its primary key is its rowid: one `INTEGER PRIMARY KEY` column, and a statement
//! that UPDATEs that column is refused ([`key_updates`]: the hook would name only the new
//! rowid, and the old key's row would stay in the database). Reading the rows
//! after the request, rather than at each hook call, makes the result right whatever the
//! request did in between (a ROLLBACK TO a savepoint, a row changed twice). Expiry's deletes
//! are not noted ([`Paused`]): expiry changes the cache, not the database.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

use crate::conn::{Analysis, Conn};
use crate::shared::Shared;
use crate::{ChangeSink, SqlError, Value};

#[derive(Debug)]
pub struct RowChanges<'a> {
    /// Lower-case table name.
    pub table: &'a str,
    /// The table's one primary key column; why not, when it has none or several or its rows
    /// could not be read (the sink refuses to write such a table back).
    pub key_column: Result<&'a str, String>,
    /// The table's columns, in order.
    pub columns: &'a [String],
    /// Each changed row's primary key and its columns now (None: the row is gone).
    pub rows: &'a [(Value, Option<Vec<Value>>)],
}

#[derive(Default)]
struct Noted {
    collecting: bool,
    /// Per table (in first-noted order): the rowids the hook saw changed.
    tables: Vec<(String, Vec<i64>)>,
}

thread_local! {
    static NOTED: RefCell<Noted> = RefCell::new(Noted::default());
}

/// Installs the hook on the writer's connection.
pub(crate) fn install(shared: &Arc<Shared>, conn: &Conn) {
    let shared = shared.clone();
    conn.db
        .update_hook(Some(move |_action, db: &str, table: &str, rowid: i64| {
            let collecting = NOTED.with(|n| n.borrow().collecting);
            if !collecting || db != "main" {
                return;
            }
            let table = table.to_ascii_lowercase();
            if !shared
                .changes
                .get()
                .is_some_and(|sink| sink.wants_rows(&table))
            {
                return;
            }
            NOTED.with(|n| {
                let mut n = n.borrow_mut();
                match n.tables.iter_mut().find(|(t, _)| *t == table) {
                    Some((_, seen)) => seen.push(rowid),
                    None => n.tables.push((table, vec![rowid])),
                }
            });
        }));
}

/// Refuses a statement that UPDATEs the key (the rowid) of a table whose rows are wanted:
/// the update hook names only a row's new rowid, so the old key's row would be missed.
pub(crate) fn key_updates(shared: &Shared, conn: &Conn, a: &Analysis) -> Result<(), SqlError> {
    if a.updates.is_empty() {
        return Ok(());
    }
    let Some(sink) = shared.changes.get() else {
        return Ok(());
    };
    for (table, column) in &a.updates {
        if !sink.wants_rows(table) {
            continue;
        }
        let key = matches!(column.as_str(), "rowid" | "oid" | "_rowid_")
            || conn
                .internal(|db| {
                    db.query_row(
                        "SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0 AND lower(name) = ?2",
                        [table, column],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .unwrap_or(0)
                > 0;
        if key {
            return Err(SqlError::refused(format!(
                "table '{table}' is written back by its primary key: its key column cannot be UPDATEd (DELETE and INSERT the row instead)"
            )));
        }
    }
    Ok(())
}

/// Starts noting for a client's request on this (the writer) thread.
pub(crate) fn begin() {
    NOTED.with(|n| {
        let mut n = n.borrow_mut();
        n.collecting = true;
        n.tables.clear();
    });
}

/// Stops noting; with `ok` (the request succeeded) tells the sink of the noted rows as they
/// are now.
pub(crate) fn finish(shared: &Shared, conn: &Conn, ok: bool) {
    let tables = NOTED.with(|n| {
        let mut n = n.borrow_mut();
        n.collecting = false;
        std::mem::take(&mut n.tables)
    });
    if !ok || tables.is_empty() {
        return;
    }
    let Some(sink) = shared.changes.get() else {
        return;
    };
    for (table, seen) in tables {
        tell(sink.as_ref(), conn, &table, seen);
    }
}

/// Noting off while expiry removes rows (restored when dropped).
pub(crate) struct Paused(bool);

impl Paused {
    pub fn start() -> Paused {
        Paused(NOTED.with(|n| std::mem::replace(&mut n.borrow_mut().collecting, false)))
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        NOTED.with(|n| n.borrow_mut().collecting = self.0);
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn tell(sink: &dyn ChangeSink, conn: &Conn, table: &str, seen: Vec<i64>) {
    let refuse = |why: String, columns: &[String]| {
        sink.rows_changed(&RowChanges {
            table,
            key_column: Err(why),
            columns,
            rows: &[],
        })
    };
    // The table as it is now: its columns and primary key (none: dropped by the request).
    let info: rusqlite::Result<Vec<(String, String, i64)>> = conn.internal(|db| {
        let mut stmt = db.prepare("SELECT name, type, pk FROM pragma_table_info(?1)")?;
        let rows = stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    });
    let Ok(info) = info else { return };
    if info.is_empty() {
        return;
    }
    let columns: Vec<String> = info.iter().map(|(c, _, _)| c.clone()).collect();
    let keys: Vec<usize> = (0..info.len()).filter(|&i| info[i].2 > 0).collect();
    // A rowid table (WITHOUT ROWID tables never reach the hook) whose one key column is
    // declared INTEGER: that column is the rowid.
    let key = match keys.as_slice() {
        [k] if info[*k].1.eq_ignore_ascii_case("INTEGER") => *k,
        _ => {
            let why = format!(
                "table '{table}' has no INTEGER PRIMARY KEY (one column): its rows cannot be keyed"
            );
            return refuse(why, &columns);
        }
    };
    let mut once = HashSet::new();
    let rowids: Vec<i64> = seen.into_iter().filter(|r| once.insert(*r)).collect();
    let select = format!("SELECT * FROM {} WHERE rowid = ?1", quoted(table));
    let now: rusqlite::Result<Vec<(Value, Option<Vec<Value>>)>> = conn.internal(|db| {
        let mut stmt = db.prepare(&select)?;
        let n = stmt.column_count();
        rowids
            .into_iter()
            .map(|rowid| {
                let mut rows = stmt.query([rowid])?;
                let row = rows.next()?.map(|r| {
                    (0..n)
                        .map(|i| crate::exec::value_of(r.get_ref_unwrap(i)))
                        .collect()
                });
                Ok((Value::Integer(rowid), row))
            })
            .collect()
    });
    match now {
        Ok(rows) => sink.rows_changed(&RowChanges {
            table,
            key_column: Ok(&columns[key]),
            columns: &columns,
            rows: &rows,
        }),
        Err(e) => refuse(
            format!("reading the changed rows of '{table}': {e}"),
            &columns,
        ),
    }
}
