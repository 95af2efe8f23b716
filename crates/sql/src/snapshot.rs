//! Snapshots of the SQL tables (issue 13): every table with its rows, schema (indexes,
//! triggers, views), expiry rules and per-row metadata, as of one point in the SQL change log.
//!
//! **Taking** one is a job on the writer thread, between two jobs: no change is in flight there,
//! so the engine's change count ([`Shared::change_seq`]) is exactly the snapshot's position —
//! every change numbered up to it is in the copy, none after. The copy is the database image
//! itself, read from SQLite's `memdb` store by `memcpy` (in pieces, see [`CHUNK`]) under a read
//! transaction of the writer connection (`read_image`), straight into the snapshot's buffer
//! behind its header. Readers are not stopped (a read transaction shares the database with
//! them); writes wait for the copy (~1 ms for an 18 MB image here). The checksum is computed
//! afterwards on the caller's thread. The raw read was chosen over SQLite's online backup API
//! and `sqlite3_serialize` by measurement (`examples/snapshot_bench.rs`, figures in
//! `docs/architecture.md`): it is the fastest, and both others copy page by page
//! through a pager and allocate their copy from SQLite's heap, which counts against
//! `--sql-maxmemory`'s heap limit (an image near the limit could not be copied).
//!
//! **Restoring** is a writer job too: the image is opened read-only in place (a private
//! connection `sqlite3_deserialize`d over the snapshot's bytes, no copy), checked
//! (`PRAGMA quick_check`, cairn's rules table present), then copied over the engine's database
//! with SQLite's online backup API (the shared `memdb` image cannot be swapped, only written
//! through a connection). The expiry registry is then rebuilt from `_cairn_expiry` and the
//! snapshot's counters, and the change count set to the snapshot's position.
//!
//! Expiry across a restart: `written_ms` in the row metadata is wall-clock time (the engine
//! clock), so AGE keeps counting from each row's original write, not from the restore; rows
//! whose age passed while the server was down go at the first sweep after start, as a key whose
//! TTL passed is not loaded. OPS continues from the saved operation count (operations are reads
//! too, so the count is the one at the copy, not tied to the position); ROWS from the row count
//! kept in the image.

use crate::conn::Conn;
use crate::error::ErrorKind;
use crate::expiry::quote;
use crate::registry::TableRules;
use crate::shared::Shared;
use crate::snapshot_format::{self as format, Counters, Parsed};

use crate::{ExpiryRules, SqlError};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{ffi, Connection, OptionalExtension};
use std::ffi::{c_int, c_void};
use std::time::Duration;

/// One snapshot of the SQL tables (see [`crate::SqlEngine::snapshot`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlSnapshot {
    /// Self-describing, versioned and checksummed; [`crate::SqlEngine::restore`] reads them.
    pub bytes: Vec<u8>,
    /// Number of the last SQL change included: the SQL change log's sequence number at the copy.
    pub position: u64,
}

fn bad(message: impl Into<String>) -> SqlError {
    SqlError::new(ErrorKind::BadSnapshot, message)
}

/// Writer side: copies the tables between two jobs. The result lacks only its checksum
/// ([`format::seal`], done by the caller off the writer thread).
pub(crate) fn take(shared: &Shared, conn: &Conn) -> Result<SqlSnapshot, SqlError> {
    let position = shared.change_seq();
    let mut counters: Vec<Counters> = shared
        .registry
        .all()
        .iter()
        .map(|t| Counters {
            id: t.id,
            ops: t.ops(),
            seq: t.seq(),
        })
        .collect();
    counters.sort_by_key(|c| c.id);
    let bytes = conn.internal(|db| {
        db.execute_batch("BEGIN")?;
        let copied = copy_image(db, position, &counters);
        let _ = db.execute_batch("COMMIT");
        Ok(copied)
    })??;
    Ok(SqlSnapshot { bytes, position })
}

/// Header and image, inside the read transaction `take` opened.
fn copy_image(db: &Connection, position: u64, counters: &[Counters]) -> Result<Vec<u8>, SqlError> {
    // The first read takes the shared lock: the image stays as it is until COMMIT.
    let size: i64 = db.query_row(
        "SELECT p.page_count * s.page_size FROM pragma_page_count() AS p, pragma_page_size() AS s",
        [],
        |r| r.get(0),
    )?;
    let len = usize::try_from(size).map_err(|_| SqlError::from(rusqlite::Error::InvalidQuery))?;
    let mut out = format::header(position, counters, len);
    read_image(db, &mut out, len)?;
    Ok(out)
}

/// Bytes copied per `xRead`: memdb holds the image's mutex for each call, which every reader
/// connection also takes (to lock, to fetch a page), so the copy goes in pieces of ~20 µs.
const CHUNK: usize = 256 << 10;

/// Appends the first `len` bytes of the connection's main database file to `out`. The engine's
/// database lives in SQLite's `memdb` VFS, whose `xRead` is a `memcpy` from the shared image
/// under the image's own mutex: no page cache, no SQLite heap. The caller's read transaction
/// keeps the image as it is between the pieces.
fn read_image(db: &Connection, out: &mut Vec<u8>, len: usize) -> Result<(), SqlError> {
    let failed = |what: &str| SqlError::new(ErrorKind::Sqlite, format!("SQL snapshot: {what}"));
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: FILE_POINTER writes one pointer to the database's open file (owned by the
    // connection, valid while it is open; we hold the connection for the whole copy).
    let rc = unsafe {
        ffi::sqlite3_file_control(
            db.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            &mut file as *mut *mut ffi::sqlite3_file as *mut c_void,
        )
    };
    // SAFETY: a non-null file of an open connection has valid methods while it is open.
    let read = match rc {
        ffi::SQLITE_OK if !file.is_null() => unsafe { (*file).pMethods.as_ref() }
            .and_then(|m| m.xRead)
            .ok_or_else(|| failed("the database file cannot be read"))?,
        _ => return Err(failed("no database file")),
    };
    out.reserve(len);
    let start = out.len();
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK);
        // SAFETY: `out` has `len` bytes of spare capacity from `start`; xRead fills exactly `n`
        // bytes at the given offset when it returns SQLITE_OK (any other code: we stop and
        // never expose the bytes).
        let rc = unsafe {
            read(
                file,
                out.as_mut_ptr().add(start + done) as *mut c_void,
                n as c_int,
                done as i64,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(failed(&format!("reading the image failed (code {rc})")));
        }
        done += n;
    }
    // SAFETY: all `len` bytes were written above.
    unsafe { out.set_len(start + len) };
    Ok(())
}

/// A snapshot checked on the caller's thread ([`format::parse`]), copied for the writer job.
pub(crate) struct Checked {
    bytes: Vec<u8>,
    position: u64,
    counters: Vec<Counters>,
    image: std::ops::Range<usize>,
}

pub(crate) fn check(bytes: &[u8]) -> Result<Checked, SqlError> {
    let Parsed {
        position,
        counters,
        image,
    } = format::parse(bytes)?;
    let at = image.as_ptr() as usize - bytes.as_ptr() as usize;
    Ok(Checked {
        bytes: bytes.to_vec(),
        position,
        counters,
        image: at..at + image.len(),
    })
}

/// Writer side: replaces every table of the engine with the snapshot's.
pub(crate) fn restore(shared: &Shared, conn: &mut Conn, snap: &Checked) -> Result<(), SqlError> {
    let source = open_image(&snap.bytes[snap.image.clone()])?;
    check_image(&source)?;
    let page_size =
        |db: &Connection| db.pragma_query_value(None, "page_size", |r| r.get::<_, i64>(0));
    let (theirs, ours) = (page_size(&source.db)?, conn.internal(page_size)?);
    if theirs != ours {
        return Err(bad(format!(
            "SQL snapshot has {theirs}-byte pages; this engine uses {ours}"
        )));
    }
    {
        let was = std::mem::replace(&mut conn.auth.lock().internal, true);
        let copied = copy_into(&source, &mut conn.db);
        conn.auth.lock().internal = was;
        copied.map_err(|e| match e.kind {
            ErrorKind::OutOfMemory if shared.config.max_memory > 0 => SqlError::new(
                ErrorKind::OutOfMemory,
                format!(
                    "SQL snapshot's tables ({} bytes) do not fit in --sql-maxmemory ({} bytes)",
                    snap.image.len(),
                    shared.config.max_memory
                ),
            ),
            _ => e,
        })?;
    }
    drop(source);
    rebuild_registry(shared, conn, &snap.counters)?;
    shared.set_change_seq(snap.position);
    if let Some(sink) = shared.changes.get() {
        sink.restored(snap.position);
    }
    Ok(())
}

/// A private connection reading `image` in place. Only through the returned value, which
/// borrows `image`, so the bytes outlive the connection.
struct Image<'a> {
    db: Connection,
    _bytes: std::marker::PhantomData<&'a [u8]>,
}

impl std::ops::Deref for Image<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.db
    }
}

fn open_image(image: &[u8]) -> Result<Image<'_>, SqlError> {
    let db = Connection::open_in_memory()?;
    let len = image.len() as i64;
    // SAFETY: READONLY without FREEONCLOSE: SQLite reads the bytes in place and never writes or
    // frees them; `Image` borrows `image`, so they outlive the connection.
    let rc = unsafe {
        ffi::sqlite3_deserialize(
            db.handle(),
            c"main".as_ptr(),
            image.as_ptr() as *mut u8,
            len,
            len,
            ffi::SQLITE_DESERIALIZE_READONLY as _,
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(bad(format!(
            "SQL snapshot: the database image cannot be opened (code {rc})"
        )));
    }
    Ok(Image {
        db,
        _bytes: std::marker::PhantomData,
    })
}

/// The image must be a sound SQLite database with cairn's rules table.
fn check_image(db: &Connection) -> Result<(), SqlError> {
    let damaged = |e: rusqlite::Error| {
        bad(format!(
            "SQL snapshot damaged: {}",
            crate::error::sqlite_message(&e)
        ))
    };
    let verdict: String = db
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(damaged)?;
    if verdict != "ok" {
        return Err(bad(format!("SQL snapshot damaged: {verdict}")));
    }
    let rules: Option<String> = db
        .query_row(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name = '_cairn_expiry'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(damaged)?;
    if rules.is_none() {
        return Err(bad(
            "SQL snapshot damaged: the image lacks cairn's _cairn_expiry table",
        ));
    }
    Ok(())
}

/// SQLite's online backup, all pages in one step: the destination's pages, schema and size
/// become the source's. The destination's memory cap applies (`--sql-maxmemory`).
fn copy_into(source: &Connection, dest: &mut Connection) -> Result<(), SqlError> {
    let backup = Backup::new(source, dest)?;
    for _ in 0..100 {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            // Readers finishing a statement (restore runs before clients are served, but the
            // engine may be in use): wait a little for them.
            StepResult::More | StepResult::Busy | StepResult::Locked => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => {}
        }
    }
    Err(SqlError::new(
        ErrorKind::Sqlite,
        "SQL snapshot: the database stayed busy during the restore",
    ))
}

/// The expiry registry from the restored `_cairn_expiry`, with the snapshot's counters. A write
/// sequence below the metadata's highest `seq` (a damaged counter) is raised to it, so new
/// writes still sort after every restored row.
fn rebuild_registry(shared: &Shared, conn: &Conn, counters: &[Counters]) -> Result<(), SqlError> {
    for t in shared.registry.all() {
        shared.registry.remove(t.id);
    }
    let rows = conn.internal(|db| {
        let mut st = db.prepare("SELECT id, tbl, age_ms, max_rows, max_ops FROM _cairn_expiry")?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<i64>>(4)?,
            ))
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })?;
    for (id, name, age, max_rows, max_ops) in rows {
        let positive = |v: Option<i64>| v.filter(|&v| v > 0).map(|v| v as u64);
        let rules = ExpiryRules {
            age: positive(age).map(Duration::from_millis),
            rows: positive(max_rows),
            ops: positive(max_ops),
        };
        // A rules row without its metadata table is dropped by `expiry::reconcile` afterwards.
        let highest: Option<i64> = conn
            .internal(|db| {
                db.query_row(
                    &format!(
                        "SELECT max(seq) FROM {}",
                        quote(&format!("_cairn_meta_{name}"))
                    ),
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap_or(None);
        let saved = counters.iter().find(|c| c.id == id);
        let seq = saved
            .map_or(0, |c| c.seq)
            .max(highest.unwrap_or(0).max(0) as u64);
        let t = TableRules::new(id, name, rules);
        t.restore_counters(saved.map_or(0, |c| c.ops), seq);
        shared.registry.put(t);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reply, Request, SqlConfig, SqlEngine, Value};

    fn exec(e: &SqlEngine, sql: &str) {
        let r = e.run(Request::Exec {
            sql: sql.into(),
            params: vec![],
        });
        assert!(matches!(r, Ok(Reply::Changed(_))), "{sql}: {r:?}");
    }

    fn count(e: &SqlEngine, table: &str) -> Result<Value, SqlError> {
        match e.run(Request::Query {
            sql: format!("SELECT count(*) FROM {table}").into(),
            params: vec![],
        })? {
            Reply::Rows { rows, .. } => Ok(rows[0][0].clone()),
            other => panic!("{other:?}"),
        }
    }

    /// The snapshot's bytes with its image replaced, checksum and all made right again: only
    /// SQLite's own checks can tell.
    fn with_image(bytes: &[u8], change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let p = format::parse(bytes).unwrap();
        let mut image = p.image.to_vec();
        change(&mut image);
        let mut out = format::header(p.position, &p.counters, image.len());
        out.extend_from_slice(&image);
        format::seal(&mut out);
        out
    }

    #[test]
    fn a_damaged_image_with_a_good_checksum_is_refused() {
        let config = || SqlConfig {
            threads: 1,
            ..SqlConfig::default()
        };
        let a = SqlEngine::new(config()).unwrap();
        exec(
            &a,
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX t_v ON t(v);
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000)
             INSERT INTO t SELECT x, printf('value %d', x) FROM c",
        );
        let good = a.snapshot().unwrap().bytes;
        let page = 4096;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("not a database", with_image(&good, |i| i[..16].fill(b'x'))),
            (
                "a page of garbage",
                with_image(&good, |i| {
                    let at = i.len() / page / 2 * page;
                    i[at..at + page].fill(0xa5)
                }),
            ),
            (
                "half the pages",
                with_image(&good, |i| i.truncate(i.len() / page / 2 * page)),
            ),
            ("an empty image", with_image(&good, |i| i.clear())),
            (
                "no rules table",
                with_image(&good, |i| {
                    let plain = Connection::open("file:/cairn-snapshot-test?vfs=memdb").unwrap();
                    plain.execute_batch("CREATE TABLE x(y)").unwrap();
                    i.clear();
                    read_image(&plain, i, 2 * page).unwrap();
                }),
            ),
        ];
        let b = SqlEngine::new(config()).unwrap();
        exec(&b, "CREATE TABLE mine(x); INSERT INTO mine VALUES (1)");
        for (what, bytes) in cases {
            let err = b.restore(&bytes).unwrap_err();
            assert_eq!(err.kind, ErrorKind::BadSnapshot, "{what}: {err}");
            assert!(err.message.contains("damaged"), "{what}: {err}");
            assert_eq!(count(&b, "mine"), Ok(Value::Integer(1)), "{what}");
        }
        b.restore(&good).unwrap();
        assert_eq!(count(&b, "t"), Ok(Value::Integer(2000)));
        assert!(count(&b, "mine").is_err());
    }
}
