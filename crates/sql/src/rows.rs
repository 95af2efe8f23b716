//! Row changes for the change sink's row listeners (write-behind of SQL tables): while a
//! client's request runs on the writer, SQLite's pre-update hook notes the primary keys of the
//! rows it inserts, updates or deletes in the tables the sink asks for
//! ([`ChangeSink::wants_rows`]); after the request succeeded, each noted row is read as it is
//! now and the sink is told ([`ChangeSink::rows_changed`]) before the reply goes.
//!
//! The pre-update hook (unlike the update hook, which names only a rowid) sees a row's old and
//! new column values, for rowid and WITHOUT ROWID tables alike, so any primary key works: one
//! column of any type, or several. An UPDATE that changes a row's key notes both keys: the old
//! one reads back as gone (a delete), the new one as the row. Reading the rows after the
//! request, rather than at each hook call, makes the result right whatever the request did in
//! between (a ROLLBACK TO a savepoint, a row changed twice). Expiry's deletes are not noted
//! ([`Paused`]): expiry changes the cache, not the database.
//!
//! The hook is SQLite's `SQLITE_ENABLE_PREUPDATE_HOOK` API, compiled into the bundled SQLite by
//! the workspace's `.cargo/config.toml` (`LIBSQLITE3_FLAGS`) and called through the bundled
//! bindings (rusqlite's own `preupdate_hook` feature would need bindgen and libclang).

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

use rusqlite::ffi;

use crate::conn::Conn;
use crate::shared::Shared;
use crate::{ChangeSink, Value};

/// At most this many row images noted per request and table; past it the table's changes in
/// the request are not written back (the sink is told why), so that one huge request cannot
/// grow the writer's memory without bound.
const NOTED_MAX: usize = 1_000_000;

#[derive(Debug)]
pub struct RowChanges<'a> {
    /// Lower-case table name.
    pub table: &'a str,
    /// The table's primary key columns (indexes into `columns`, in key order); why not, when
    /// it has none or its rows could not be read (the sink refuses to write such a table back).
    pub keys: Result<&'a [usize], String>,
    /// The table's columns, in order.
    pub columns: &'a [String],
    /// Each changed row.
    pub rows: &'a [ChangedRow],
}

/// A changed row's primary key values (in [`RowChanges::keys`] order) and its columns now
/// (None: the row is gone).
pub type ChangedRow = (Vec<Value>, Option<Vec<Value>>);

/// One table's noted rows: each change's old and/or new row image (all columns).
struct Table {
    name: String,
    images: Vec<Vec<Value>>,
    /// More than [`NOTED_MAX`] images were offered (the rest were not kept).
    overflow: bool,
}

#[derive(Default)]
struct Noted {
    /// The writer's state, set by [`install`] on the writer thread (the hook runs there).
    shared: Option<Arc<Shared>>,
    collecting: bool,
    /// Per table (in first-noted order).
    tables: Vec<Table>,
}

thread_local! {
    static NOTED: RefCell<Noted> = RefCell::new(Noted::default());
}

/// Installs the hook on the writer's connection (called on the writer thread).
pub(crate) fn install(shared: &Arc<Shared>, conn: &Conn) {
    NOTED.with(|n| n.borrow_mut().shared = Some(shared.clone()));
    // SAFETY: the handle is the open connection's; the callback takes no context pointer and
    // only reads values SQLite hands it during the call.
    unsafe {
        ffi::sqlite3_preupdate_hook(conn.db.handle(), Some(preupdate), std::ptr::null_mut());
    }
}

unsafe extern "C" fn preupdate(
    _ctx: *mut c_void,
    db: *mut ffi::sqlite3,
    op: c_int,
    z_db: *const c_char,
    z_name: *const c_char,
    _old_rowid: i64,
    _new_rowid: i64,
) {
    NOTED.with(|n| {
        let Ok(mut n) = n.try_borrow_mut() else {
            return;
        };
        if !n.collecting || z_db.is_null() || z_name.is_null() {
            return;
        }
        // SAFETY: SQLite passes NUL-terminated names valid for the call.
        let (schema, table) = unsafe { (CStr::from_ptr(z_db), CStr::from_ptr(z_name)) };
        if schema.to_bytes() != b"main" {
            return;
        }
        let table = String::from_utf8_lossy(table.to_bytes()).to_ascii_lowercase();
        let wanted = n
            .shared
            .as_ref()
            .and_then(|s| s.changes.get())
            .is_some_and(|sink| sink.wants_rows(&table));
        if !wanted {
            return;
        }
        let at = match n.tables.iter().position(|t| t.name == table) {
            Some(i) => i,
            None => {
                n.tables.push(Table {
                    name: table,
                    images: Vec::new(),
                    overflow: false,
                });
                n.tables.len() - 1
            }
        };
        let t = &mut n.tables[at];
        // SAFETY: within the pre-update callback, as the API requires.
        unsafe {
            if op != ffi::SQLITE_INSERT {
                image(t, db, ffi::sqlite3_preupdate_old);
            }
            if op != ffi::SQLITE_DELETE {
                image(t, db, ffi::sqlite3_preupdate_new);
            }
        }
    });
}

type Getter = unsafe extern "C" fn(*mut ffi::sqlite3, c_int, *mut *mut ffi::sqlite3_value) -> c_int;

/// Notes the row image `get` (old or new) reads, within the pre-update callback.
unsafe fn image(t: &mut Table, db: *mut ffi::sqlite3, get: Getter) {
    if t.images.len() >= NOTED_MAX {
        t.overflow = true;
        return;
    }
    let count = unsafe { ffi::sqlite3_preupdate_count(db) };
    let mut row = Vec::with_capacity(count.max(0) as usize);
    for i in 0..count {
        let mut v: *mut ffi::sqlite3_value = std::ptr::null_mut();
        // A VIRTUAL generated column has no stored value (SQLITE_RANGE): it is not written
        // back, nor can it be a key column, so NULL stands in (a key column read so is
        // refused as a NULL key).
        let read = unsafe { get(db, i, &mut v) } == ffi::SQLITE_OK && !v.is_null();
        row.push(if read {
            unsafe { value(v) }
        } else {
            Value::Null
        });
    }
    t.images.push(row);
}

/// A protected value as a [`Value`] (copied).
unsafe fn value(v: *mut ffi::sqlite3_value) -> Value {
    let bytes = |p: *const u8, n: c_int| -> Vec<u8> {
        if p.is_null() || n <= 0 {
            Vec::new()
        } else {
            // SAFETY: SQLite says `p` holds `n` bytes, valid until the value changes.
            unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec()
        }
    };
    unsafe {
        match ffi::sqlite3_value_type(v) {
            ffi::SQLITE_INTEGER => Value::Integer(ffi::sqlite3_value_int64(v)),
            ffi::SQLITE_FLOAT => Value::Real(ffi::sqlite3_value_double(v)),
            // The pointer first, then its length (the order SQLite documents).
            ffi::SQLITE_TEXT => {
                let p = ffi::sqlite3_value_text(v);
                Value::Text(bytes(p, ffi::sqlite3_value_bytes(v)))
            }
            ffi::SQLITE_BLOB => {
                let p = ffi::sqlite3_value_blob(v) as *const u8;
                Value::Blob(bytes(p, ffi::sqlite3_value_bytes(v)))
            }
            _ => Value::Null,
        }
    }
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
    for table in tables {
        tell(sink.as_ref(), conn, table);
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

/// A key's values as one comparable string (to note each key once).
fn fingerprint(key: &[Value]) -> String {
    format!("{key:?}")
}

fn tell(sink: &dyn ChangeSink, conn: &Conn, noted: Table) {
    let table = noted.name.as_str();
    let refuse = |why: String, columns: &[String]| {
        sink.rows_changed(&RowChanges {
            table,
            keys: Err(why),
            columns,
            rows: &[],
        })
    };
    // The table as it is now: its columns and primary key (none: dropped by the request).
    // Every column, generated ones too (a row image holds them all, in this order).
    let info: rusqlite::Result<Vec<(String, i64, i64)>> = conn.internal(|db| {
        let mut stmt = db.prepare("SELECT name, pk, hidden FROM pragma_table_xinfo(?1)")?;
        let rows = stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect()
    });
    let Ok(info) = info else { return };
    if info.is_empty() {
        return;
    }
    // Generated columns are not written back: the database computes its own.
    let written: Vec<usize> = (0..info.len()).filter(|&i| info[i].2 == 0).collect();
    let columns: Vec<String> = written.iter().map(|&i| info[i].0.clone()).collect();
    // The key's columns in key order, as places in a row image.
    let mut key_at: Vec<usize> = (0..info.len()).filter(|&i| info[i].1 > 0).collect();
    key_at.sort_by_key(|&i| info[i].1);
    let keys: Vec<usize> = (key_at.iter())
        .filter_map(|k| written.iter().position(|w| w == k))
        .collect();
    if keys.is_empty() || keys.len() != key_at.len() {
        let why = format!("table '{table}' has no PRIMARY KEY: its rows cannot be keyed");
        return refuse(why, &columns);
    }
    if noted.overflow {
        let why = format!(
            "a request changed more than {NOTED_MAX} rows of '{table}': they are not written back"
        );
        return refuse(why, &columns);
    }
    let mut once = HashSet::new();
    let mut wanted: Vec<Vec<Value>> = Vec::new();
    for image in &noted.images {
        // A row image of another shape: the request changed the table's columns after
        // changing rows, so the key's place in the image is not known.
        if image.len() != info.len() {
            let why = format!("table '{table}' changed its columns in the request that changed its rows: they are not written back");
            return refuse(why, &columns);
        }
        let key: Vec<Value> = key_at.iter().map(|&i| image[i].clone()).collect();
        if key.contains(&Value::Null) {
            let why = format!("a row of '{table}' has a NULL primary key: it cannot be keyed");
            return refuse(why, &columns);
        }
        if once.insert(fingerprint(&key)) {
            wanted.push(key);
        }
    }
    let filter: Vec<String> = (key_at.iter().enumerate())
        .map(|(n, &i)| format!("{} = ?{}", quoted(&info[i].0), n + 1))
        .collect();
    let list: Vec<String> = columns.iter().map(|c| quoted(c)).collect();
    let select = format!(
        "SELECT {} FROM {} WHERE {}",
        list.join(", "),
        quoted(table),
        filter.join(" AND ")
    );
    let now: rusqlite::Result<Vec<ChangedRow>> = conn.internal(|db| {
        let mut stmt = db.prepare(&select)?;
        let n = stmt.column_count();
        wanted
            .into_iter()
            .map(|key| {
                use rusqlite::types::{ToSqlOutput, ValueRef};
                let params = key.iter().map(|v| {
                    ToSqlOutput::Borrowed(match v {
                        Value::Null => ValueRef::Null,
                        Value::Integer(i) => ValueRef::Integer(*i),
                        Value::Real(f) => ValueRef::Real(*f),
                        Value::Text(b) => ValueRef::Text(b),
                        Value::Blob(b) => ValueRef::Blob(b),
                    })
                });
                let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                let row = rows.next()?.map(|r| {
                    (0..n)
                        .map(|i| crate::exec::value_of(r.get_ref_unwrap(i)))
                        .collect()
                });
                Ok((key, row))
            })
            .collect()
    });
    match now {
        Ok(rows) => sink.rows_changed(&RowChanges {
            table,
            keys: Ok(&keys),
            columns: &columns,
            rows: &rows,
        }),
        Err(e) => refuse(
            format!("reading the changed rows of '{table}': {e}"),
            &columns,
        ),
    }
}
