//! How to copy the SQL tables for a snapshot, measured (issue 13): the engine's database is one
//! shared `memdb` image; a snapshot must copy it while the writer waits.
//!
//! 1. Three ways to copy the image of a table of `rows` rows (seed 002's cache table: two
//!    indexes, ~100-byte payloads, expiry metadata), each on its own connection to a shared
//!    memdb like the engine's: the raw `memdb` read the engine uses (`xRead`, one `memcpy`),
//!    `sqlite3_serialize`, and the online backup API into a private memdb.
//! 2. The engine end to end: `SqlEngine::snapshot` and `SqlEngine::restore`, and the latency of
//!    primary-key reads and of single-row writes, alone and while a snapshot is taken every 20 ms.
//!
//! Run: `cargo run --release -p cairn-sql --example snapshot_bench -- [rows]` (default 100000).

use rusqlite::backup::Backup;
use rusqlite::{ffi, Connection, OpenFlags};
use sql::{ExpiryRules, Reply, Request, SqlConfig, SqlEngine, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SCHEMA: &str =
    "CREATE TABLE cache(id INTEGER PRIMARY KEY, page INTEGER, user INTEGER, data BLOB);
     CREATE INDEX cache_page ON cache(page); CREATE INDEX cache_user ON cache(user);";

fn fill(rows: i64) -> String {
    format!(
        "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < {})
         INSERT INTO cache SELECT i, i * 7919 % 30000, i * 104729 % 1000, randomblob(100) FROM c",
        rows - 1
    )
}

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..n {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed());
        out = Some(r);
    }
    (best, out.unwrap())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The engine's way: `memdb`'s xRead of the whole file, under a read transaction.
fn raw_copy(db: &Connection) -> Vec<u8> {
    db.execute_batch("BEGIN").unwrap();
    let len: i64 = db
        .query_row(
            "SELECT p.page_count * s.page_size FROM pragma_page_count() AS p, pragma_page_size() AS s",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut out = Vec::with_capacity(len as usize);
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    unsafe {
        ffi::sqlite3_file_control(
            db.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            &mut file as *mut _ as *mut std::ffi::c_void,
        );
        let read = (*(*file).pMethods).xRead.unwrap();
        assert_eq!(
            read(file, out.as_mut_ptr() as *mut _, len as i32, 0),
            ffi::SQLITE_OK
        );
        out.set_len(len as usize);
    }
    db.execute_batch("COMMIT").unwrap();
    out
}

/// `sqlite3_serialize` (a shared memdb cannot be served without a copy: it copies page by page
/// through the pager into memory from SQLite's heap).
fn serialize_copy(db: &Connection) -> Vec<u8> {
    let mut size = 0;
    unsafe {
        let p = ffi::sqlite3_serialize(db.handle(), c"main".as_ptr(), &mut size, 0);
        assert!(!p.is_null());
        let out = std::slice::from_raw_parts(p, size as usize).to_vec();
        ffi::sqlite3_free(p as *mut _);
        out
    }
}

/// The online backup API into a private memdb, then that image read without a copy.
fn backup_copy(db: &Connection) -> usize {
    let mut dest = Connection::open("file:bench-private?vfs=memdb").unwrap();
    Backup::new(db, &mut dest).unwrap().step(-1).unwrap();
    let mut size = 0;
    let p = unsafe {
        ffi::sqlite3_serialize(
            dest.handle(),
            c"main".as_ptr(),
            &mut size,
            ffi::SQLITE_SERIALIZE_NOCOPY,
        )
    };
    assert!(!p.is_null());
    size as usize
}

fn methods(rows: i64) {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let uri = "file:/snapshot-bench?vfs=memdb";
    let db = Connection::open_with_flags(uri, flags).unwrap();
    db.execute_batch(SCHEMA).unwrap();
    db.execute_batch(&fill(rows)).unwrap();
    // Row metadata as the engine keeps it for a table with expiry rules.
    db.execute_batch(
        "CREATE TABLE _cairn_meta_cache(rid INTEGER PRIMARY KEY, seq INTEGER NOT NULL, \
         written_ms INTEGER NOT NULL, op_stamp INTEGER NOT NULL);
         CREATE INDEX _cairn_1_order ON _cairn_meta_cache(seq, written_ms, op_stamp);
         INSERT INTO _cairn_meta_cache SELECT id, id, 1700000000000 + id, 0 FROM cache;",
    )
    .unwrap();
    let other = Connection::open_with_flags(uri, flags).unwrap();
    let (raw, image) = best_of(5, || raw_copy(&other));
    let (ser, copy) = best_of(5, || serialize_copy(&other));
    assert_eq!(image, copy, "both copies are the same image");
    let (bak, size) = best_of(5, || backup_copy(&other));
    assert_eq!(size, image.len());
    println!(
        "image {:.1} MB ({rows} rows): raw memdb read {}, sqlite3_serialize {}, backup API {}",
        image.len() as f64 / 1e6,
        ms(raw),
        ms(ser),
        ms(bak)
    );
}

fn run(e: &SqlEngine, sql: &str, params: Vec<Value>) -> Reply {
    e.run(Request::Exec {
        sql: sql.into(),
        params,
    })
    .unwrap()
}

/// p99 and maximum.
fn p99(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "{} (max {})",
        ms(v[v.len() * 99 / 100]),
        ms(*v.last().unwrap())
    )
}

/// Latencies of `op` run back to back for `d`.
fn latencies(d: Duration, mut op: impl FnMut(i64)) -> Vec<Duration> {
    let mut out = Vec::new();
    let end = Instant::now() + d;
    let mut i = 0;
    while Instant::now() < end {
        let t = Instant::now();
        op(i);
        out.push(t.elapsed());
        i += 1;
    }
    out
}

fn engine(rows: i64) {
    let config = SqlConfig {
        threads: 2,
        ..SqlConfig::default()
    };
    let e = SqlEngine::new(config.clone()).unwrap();
    run(&e, SCHEMA, vec![]);
    run(&e, &fill(rows), vec![]);
    let rules = ExpiryRules {
        age: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    e.run(Request::Expire {
        table: "cache".into(),
        rules: Some(rules),
    })
    .unwrap();
    let (took, snap) = best_of(5, || e.snapshot().unwrap());
    let fresh = SqlEngine::new(config).unwrap();
    let (restored, ()) = best_of(3, || fresh.restore(&snap.bytes).unwrap());
    println!(
        "engine: snapshot {} ({:.1} MB, copy + checksum), restore {}",
        ms(took),
        snap.bytes.len() as f64 / 1e6,
        ms(restored)
    );

    // Reads and writes, alone and while snapshots are taken back to back.
    let read = |i: i64| {
        e.run(Request::Query {
            sql: b"SELECT data FROM cache WHERE id = ?".to_vec(),
            params: vec![Value::Integer(i * 7 % rows)],
        })
        .unwrap();
    };
    let write = |i: i64| {
        run(
            &e,
            "UPDATE cache SET user = ? WHERE id = ?",
            vec![Value::Integer(i), Value::Integer(i * 13 % rows)],
        );
    };
    let span = Duration::from_millis(1500);
    let (r0, w0) = (p99(latencies(span, read)), p99(latencies(span, write)));
    let busy = Arc::new(AtomicBool::new(true));
    let snaps = std::thread::scope(|s| {
        let taker = s.spawn(|| {
            let mut n = 0;
            while busy.load(Ordering::Relaxed) {
                e.snapshot().unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            n
        });
        let r1 = p99(latencies(span, read));
        let w1 = p99(latencies(span, write));
        busy.store(false, Ordering::Relaxed);
        (r1, w1, taker.join().unwrap())
    });
    let (r1, w1, n) = snaps;
    println!("p99 read by key: {r0} alone, {r1} during snapshots");
    println!("p99 one-row write: {w0} alone, {w1} during snapshots ({n} snapshots, one per 20 ms)");
}

fn main() {
    let rows: i64 = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().expect("rows"));
    methods(rows);
    engine(rows);
}
