//! Snapshots of the SQL tables: what a restore brings back (tables, schema, rules, row
//! metadata), that a snapshot's position is exact while writes go on, that expiry continues
//! after a restore as if nothing happened, and that bad bytes are refused.

mod common;
use common::*;
use sql::{
    ChangeSink, ErrorKind, ExpiryRules, Reply, Request, SqlChange, SqlConfig, SqlEngine, Value,
};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn set(e: &SqlEngine, table: &str, rules: ExpiryRules) {
    let r = e.run(Request::Expire {
        table: table.into(),
        rules: Some(rules),
    });
    assert_eq!(r, Ok(Reply::Ok));
}

fn show(e: &SqlEngine, table: &str) -> ExpiryRules {
    match e.run(Request::Expire {
        table: table.into(),
        rules: None,
    }) {
        Ok(Reply::Rules(r)) => r,
        other => panic!("{other:?}"),
    }
}

fn ids(e: &SqlEngine, table: &str) -> Vec<i64> {
    rows(e, &format!("SELECT id FROM {table} ORDER BY id"), vec![])
        .into_iter()
        .map(|r| match r[0] {
            Value::Integer(i) => i,
            ref v => panic!("{v:?}"),
        })
        .collect()
}

/// Small engines, no background sweep: expiry happens only where a test says.
fn quiet() -> SqlConfig {
    SqlConfig {
        threads: 1,
        sweep_interval: Duration::from_secs(3600),
        ..SqlConfig::default()
    }
}

fn age(secs: u64) -> ExpiryRules {
    ExpiryRules {
        age: Some(Duration::from_secs(secs)),
        ..Default::default()
    }
}

/// Everything the engine's database holds, table by table, in a comparable form.
fn everything(e: &SqlEngine) -> Vec<(String, Vec<Vec<Value>>)> {
    let schema = rows(
        e,
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name",
        vec![],
    );
    let mut out = vec![("sqlite_schema".to_string(), schema.clone())];
    for row in &schema {
        let (Value::Text(kind), Value::Text(name)) = (&row[0], &row[1]) else {
            panic!("{row:?}");
        };
        let name = String::from_utf8(name.clone()).unwrap();
        // FTS5's shadow tables are compared through the virtual table itself.
        if kind != b"table" || name.starts_with("docs_") || name.starts_with("sqlite_") {
            continue;
        }
        // By the first column (unique in these tables): WITHOUT ROWID tables have no rowid.
        let all = rows(e, &format!("SELECT * FROM \"{name}\" ORDER BY 1"), vec![]);
        out.push((name, all));
    }
    out
}

#[test]
fn round_trip_of_tables_schema_rules_and_row_metadata() {
    let a = engine_with(quiet());
    exec(
        &a,
        "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT UNIQUE, score REAL, avatar BLOB);
         CREATE INDEX users_score ON users(score DESC);
         CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, user INTEGER, what TEXT);
         CREATE INDEX events_user ON events(user, what);
         CREATE TABLE pairs(k TEXT, v, PRIMARY KEY (k)) WITHOUT ROWID;
         CREATE VIEW busy AS SELECT user, count(*) AS n FROM events GROUP BY user;
         CREATE TRIGGER audit AFTER DELETE ON users BEGIN INSERT INTO events(user, what) VALUES (OLD.id, 'gone'); END;
         CREATE VIRTUAL TABLE docs USING fts5(body);",
        vec![],
    );
    for i in 1..=50i64 {
        exec(
            &a,
            "INSERT INTO users VALUES (?, ?, ?, ?); INSERT INTO events(user, what) VALUES (?, 'joined')",
            vec![
                Value::Integer(i),
                text(&format!("user{i}")),
                Value::Real(i as f64 / 3.0),
                Value::Blob(vec![i as u8, 0, 255]),
                Value::Integer(i),
            ],
        );
    }
    exec(
        &a,
        "INSERT INTO pairs VALUES ('a', 1), ('b', x'00ff')",
        vec![],
    );
    exec(
        &a,
        "INSERT INTO docs VALUES ('the quick brown fox'), ('lazy dogs')",
        vec![],
    );
    let rules = ExpiryRules {
        age: Some(Duration::from_secs(3600)),
        rows: Some(1000),
        ops: Some(10_000),
    };
    set(&a, "users", rules.clone());
    set(&a, "events", age(600));
    exec(&a, "UPDATE users SET score = 0 WHERE id = 45", vec![]);
    exec(&a, "DELETE FROM users WHERE id = 44", vec![]);
    let before = everything(&a);
    assert!(
        before
            .iter()
            .any(|(n, r)| n == "_cairn_meta_users" && r.len() == 49),
        "row metadata is part of the database"
    );
    let snap = a.snapshot().unwrap();

    // The target has tables of its own: a restore replaces them.
    let b = engine_with(quiet());
    exec(
        &b,
        "CREATE TABLE old(x); INSERT INTO old VALUES (1)",
        vec![],
    );
    set(&b, "old", age(5));
    b.restore(&snap.bytes).unwrap();
    assert_eq!(everything(&b), before);
    assert_eq!(show(&b, "users"), rules);
    assert_eq!(show(&b, "events"), age(600));
    assert_eq!(b.stats().tables_with_rules, 2, "old's rules went with old");
    assert!(try_query(&b, "SELECT * FROM old", vec![]).is_err());
    // Indexes are there and used; the view, trigger and full-text index work.
    let plan = rows(
        &b,
        "EXPLAIN QUERY PLAN SELECT * FROM events WHERE user = 3",
        vec![],
    );
    let plan = match &plan[0][3] {
        Value::Text(t) => String::from_utf8_lossy(t).into_owned(),
        other => panic!("{other:?}"),
    };
    assert!(plan.contains("INDEX events_user"), "{plan}");
    assert_eq!(int(&b, "SELECT n FROM busy WHERE user = 7"), 1);
    exec(&b, "DELETE FROM users WHERE id = 7", vec![]);
    assert_eq!(int(&b, "SELECT n FROM busy WHERE user = 7"), 2);
    assert_eq!(
        int(&b, "SELECT count(*) FROM docs WHERE docs MATCH 'fox'"),
        1
    );
    let err = try_exec(&b, "INSERT INTO users(name) VALUES ('user1')", vec![]).unwrap_err();
    assert!(err.message.contains("UNIQUE"), "{err}");
    // New writes are written after every restored row (write sequence numbers continue).
    exec(
        &b,
        "INSERT INTO users(id, name) VALUES (100, 'new')",
        vec![],
    );
    assert_eq!(
        int(
            &b,
            "SELECT rid FROM _cairn_meta_users ORDER BY seq DESC LIMIT 1"
        ),
        100
    );
}

#[test]
fn position_is_exact_while_writes_go_on() {
    let a = engine_with(SqlConfig {
        threads: 2,
        ..quiet()
    });
    exec(&a, "CREATE TABLE n(id INTEGER PRIMARY KEY, v)", vec![]);
    let base = a.snapshot().unwrap().position;
    assert_eq!(base, 1, "the CREATE TABLE is change 1");
    const ROWS: i64 = 3000;
    let writer = {
        let a = a.clone();
        std::thread::spawn(move || {
            for i in 1..=ROWS {
                // One change per statement; some statements write several rows' worth of data.
                exec(
                    &a,
                    "INSERT INTO n VALUES (?, zeroblob(?))",
                    vec![Value::Integer(i), Value::Integer(i % 7 * 100)],
                );
            }
        })
    };
    let mut snaps = Vec::new();
    while !writer.is_finished() {
        snaps.push(a.snapshot().unwrap());
        // Readers are not held up while snapshots are taken.
        assert!(int(&a, "SELECT count(*) FROM n") >= 0);
        std::thread::sleep(Duration::from_micros(500));
    }
    writer.join().unwrap();
    snaps.push(a.snapshot().unwrap());
    assert!(snaps.len() >= 3, "only {} snapshots", snaps.len());
    assert_eq!(snaps.last().unwrap().position, base + ROWS as u64);
    let b = engine_with(quiet());
    let mut mid = 0;
    for s in &snaps {
        b.restore(&s.bytes).unwrap();
        let expect = (s.position - base) as i64;
        if expect > 0 && expect < ROWS {
            mid += 1;
        }
        assert_eq!(
            rows(&b, "SELECT count(*), coalesce(max(id), 0) FROM n", vec![]),
            vec![vec![Value::Integer(expect), Value::Integer(expect)]],
            "snapshot at position {}",
            s.position
        );
    }
    assert!(
        mid > 0,
        "no snapshot was taken while rows were being written"
    );
}

/// Runs `steps` on both engines, comparing what they return after each one.
fn twin(a: &SqlEngine, b: &SqlEngine, steps: &[(&str, Option<Duration>)]) {
    for (i, (sql, advance)) in steps.iter().enumerate() {
        if let Some(by) = advance {
            a.advance_clock(*by);
            b.advance_clock(*by);
        }
        let (x, y) = (
            try_query(a, sql, vec![]).map(|r| r.1),
            try_query(b, sql, vec![]).map(|r| r.1),
        );
        assert_eq!(x, y, "step {i}: {sql}");
    }
}

#[test]
fn expiry_goes_on_after_a_restore_as_without_it() {
    let a = engine_with(quiet());
    exec(
        &a,
        "CREATE TABLE by_age(id INTEGER PRIMARY KEY, v);
         CREATE TABLE by_rows(id INTEGER PRIMARY KEY, v);
         CREATE TABLE by_ops(id INTEGER PRIMARY KEY, v);",
        vec![],
    );
    set(&a, "by_age", age(60));
    set(
        &a,
        "by_rows",
        ExpiryRules {
            rows: Some(3),
            ..Default::default()
        },
    );
    set(
        &a,
        "by_ops",
        ExpiryRules {
            ops: Some(6),
            ..Default::default()
        },
    );
    for id in 1..=3 {
        for t in ["by_age", "by_rows", "by_ops"] {
            exec(&a, &format!("INSERT INTO {t} VALUES ({id}, 'x')"), vec![]);
        }
    }
    a.advance_clock(Duration::from_secs(40));
    exec(&a, "INSERT INTO by_age VALUES (4, 'later')", vec![]);
    assert_eq!(ids(&a, "by_ops"), vec![1, 2, 3]);
    let snap = a.snapshot().unwrap();
    let b = engine_with(quiet());
    b.restore(&snap.bytes).unwrap();
    // The same moment on both clocks: `a` was moved 40 s ahead.
    b.advance_clock(Duration::from_secs(40));
    let before = (
        b.stats().expired_age,
        b.stats().expired_rows,
        b.stats().expired_ops,
    );
    twin(
        &a,
        &b,
        &[
            // AGE counts from each row's original write: rows 1-3 were written 40 s before the
            // snapshot, so they go 21 s later; row 4 (written at the snapshot) stays.
            (
                "SELECT id FROM by_age ORDER BY id",
                Some(Duration::from_secs(21)),
            ),
            (
                "SELECT id FROM by_age ORDER BY id",
                Some(Duration::from_secs(30)),
            ),
            (
                "SELECT id FROM by_age ORDER BY id",
                Some(Duration::from_secs(10)),
            ),
            // ROWS: the oldest restored row goes first, new rows are newest.
            ("INSERT INTO by_rows VALUES (10, 'y') RETURNING id", None),
            ("SELECT id FROM by_rows ORDER BY id", None),
            ("UPDATE by_rows SET v = 'z' WHERE id = 3 RETURNING id", None),
            ("INSERT INTO by_rows VALUES (11, 'y') RETURNING id", None),
            ("SELECT id FROM by_rows ORDER BY id", None),
            // OPS continues from the operation count at the snapshot.
            ("SELECT id FROM by_ops ORDER BY id", None),
            ("SELECT id FROM by_ops ORDER BY id", None),
            ("SELECT id FROM by_ops ORDER BY id", None),
            ("SELECT id FROM by_ops ORDER BY id", None),
        ],
    );
    let s = b.stats();
    assert!(
        s.expired_age > before.0 && s.expired_rows > before.1 && s.expired_ops > before.2,
        "every rule removed rows after the restore: {s:?}"
    );
    assert_eq!(ids(&b, "by_age"), Vec::<i64>::new());
    assert_eq!(ids(&b, "by_rows"), vec![3, 10, 11]);
}

#[test]
fn background_sweep_knows_restored_tables() {
    let a = engine_with(quiet());
    exec(&a, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    exec(&a, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1500) INSERT INTO t SELECT x, 'v' FROM c", vec![]);
    set(&a, "t", age(5));
    let snap = a.snapshot().unwrap();
    let b = engine_with(SqlConfig {
        threads: 1,
        sweep_interval: Duration::from_millis(20),
        ..SqlConfig::default()
    });
    b.restore(&snap.bytes).unwrap();
    assert_eq!(int(&b, "SELECT count(*) FROM t"), 1500);
    // Rows whose age passed while the server was down go without any statement touching them.
    b.advance_clock(Duration::from_secs(6));
    let start = Instant::now();
    while b.stats().expired_age < 1500 {
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", b.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(int(&b, "SELECT count(*) FROM _cairn_meta_t"), 0);
}

#[derive(Default)]
struct Numbering {
    last: AtomicU64,
    restored: Mutex<Vec<u64>>,
}

impl ChangeSink for Numbering {
    fn wants(&self) -> bool {
        true
    }
    fn changed(&self, _: &SqlChange<'_>) {
        self.last.fetch_add(1, Relaxed);
    }
    fn restored(&self, position: u64) {
        self.last.store(position, Relaxed);
        self.restored.lock().unwrap().push(position);
    }
}

#[test]
fn numbering_continues_from_the_position() {
    let a = engine_with(quiet());
    let told = Arc::new(Numbering::default());
    a.set_change_sink(told.clone());
    exec(&a, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    set(&a, "t", age(1));
    exec(&a, "INSERT INTO t VALUES (1, 'x'), (2, 'y')", vec![]);
    a.advance_clock(Duration::from_secs(2));
    assert_eq!(
        ids(&a, "t"),
        Vec::<i64>::new(),
        "two rows expired: two changes"
    );
    let snap = a.snapshot().unwrap();
    assert_eq!(snap.position, 5);
    assert_eq!(
        snap.position,
        told.last.load(Relaxed),
        "the sink's numbering"
    );
    assert_eq!(a.snapshot().unwrap().position, 5, "reads change nothing");

    let b = engine_with(quiet());
    let sink = Arc::new(Numbering::default());
    b.set_change_sink(sink.clone());
    exec(&b, "CREATE TABLE other(x)", vec![]);
    b.restore(&snap.bytes).unwrap();
    assert_eq!(*sink.restored.lock().unwrap(), vec![5]);
    assert_eq!(b.snapshot().unwrap().position, 5);
    exec(&b, "INSERT INTO t VALUES (3, 'z')", vec![]);
    assert_eq!(b.snapshot().unwrap().position, 6);
    assert_eq!(sink.last.load(Relaxed), 6);
}

#[test]
fn bad_bytes_are_refused_and_change_nothing() {
    let a = engine_with(quiet());
    exec(
        &a,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'a')",
        vec![],
    );
    let good = a.snapshot().unwrap().bytes;
    let b = engine_with(quiet());
    exec(
        &b,
        "CREATE TABLE mine(x); INSERT INTO mine VALUES (42)",
        vec![],
    );
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&2u32.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "bad magic"),
        ("garbage", b"*1\r\n$4\r\nPING\r\n".repeat(100), "bad magic"),
        (
            "a bare SQLite image",
            good[32..good.len() - 8].to_vec(),
            "bad magic",
        ),
        ("truncated", good[..good.len() - 100].to_vec(), "truncated"),
        ("one byte flipped", flipped, "checksum"),
        ("a newer version", newer, "version 2 is newer"),
    ];
    for (what, bytes, says) in cases {
        let err = b.restore(&bytes).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadSnapshot, "{what}: {err}");
        assert!(err.message.contains(says), "{what}: {err}");
        assert_eq!(int(&b, "SELECT x FROM mine"), 42, "{what}: nothing changed");
    }
    b.restore(&good).unwrap();
    assert_eq!(ids(&b, "t"), vec![1]);
}

#[test]
fn tables_larger_than_the_memory_limit_are_refused() {
    let a = engine_with(quiet());
    exec(&a, "CREATE TABLE big(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000) INSERT INTO big SELECT zeroblob(4000) FROM c", vec![]);
    let snap = a.snapshot().unwrap();
    let b = engine_with(SqlConfig {
        max_memory: 1 << 20,
        ..quiet()
    });
    exec(
        &b,
        "CREATE TABLE mine(x); INSERT INTO mine VALUES (7)",
        vec![],
    );
    let err = b.restore(&snap.bytes).unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutOfMemory, "{err}");
    assert!(err.message.contains("--sql-maxmemory"), "{err}");
    assert_eq!(int(&b, "SELECT x FROM mine"), 7, "nothing changed");
}

/// A sink that tries to take a snapshot from the writer thread.
struct Reentrant(Mutex<std::sync::Weak<SqlEngine>>, Mutex<Option<String>>);

impl ChangeSink for Reentrant {
    fn wants(&self) -> bool {
        true
    }
    fn changed(&self, _: &SqlChange<'_>) {
        if let Some(e) = self.0.lock().unwrap().upgrade() {
            let r = e.snapshot().map(|_| ()).map_err(|e| e.message);
            *self.1.lock().unwrap() = r.err();
        }
    }
}

#[test]
fn snapshot_from_an_engine_thread_is_refused_not_deadlocked() {
    let e = engine_with(quiet());
    let sink = Arc::new(Reentrant(Mutex::new(Arc::downgrade(&e)), Mutex::new(None)));
    e.set_change_sink(sink.clone());
    exec(&e, "CREATE TABLE t(x)", vec![]);
    let said = sink.1.lock().unwrap().clone().expect("refused");
    assert!(said.contains("engine thread"), "{said}");
}
