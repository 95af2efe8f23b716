//! Time, result-size and memory limits; syntax errors; the catalog; shutdown.

mod common;
use common::*;
use sql::{ColumnInfo, ErrorKind, Reply, Request, SqlConfig, Value};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const RUNAWAY: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

#[test]
fn runaway_cte_is_interrupted_while_other_tables_keep_working() {
    let e = engine_with(SqlConfig {
        threads: 2,
        ..SqlConfig::default()
    });
    exec(
        &e,
        "CREATE TABLE a(id INTEGER PRIMARY KEY, v); CREATE TABLE b(id INTEGER PRIMARY KEY, v)",
        vec![],
    );
    exec(&e, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 100) INSERT INTO a SELECT x, x FROM c", vec![]);
    let e2 = e.clone();
    let runaway = thread::spawn(move || {
        let start = Instant::now();
        let err = try_query(&e2, RUNAWAY, vec![]).unwrap_err();
        (err, start.elapsed())
    });
    thread::sleep(Duration::from_millis(100));
    // While it runs, reads of a and writes to b are answered promptly.
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let start = Instant::now();
        assert_eq!(
            rows(
                &e,
                "SELECT v FROM a WHERE id = ?",
                vec![Value::Integer(i + 1)]
            ),
            vec![vec![Value::Integer(i + 1)]]
        );
        exec(&e, "INSERT INTO b VALUES (?, 'x')", vec![Value::Integer(i)]);
        slowest = slowest.max(start.elapsed());
        thread::sleep(Duration::from_millis(20));
    }
    let (err, took) = runaway.join().unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert_eq!(
        err.message,
        "interrupted: statement ran longer than --sql-timeout (1000 ms)"
    );
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(
        slowest < Duration::from_millis(300),
        "other statements waited {slowest:?}"
    );
    assert_eq!(int(&e, "SELECT count(*) FROM b"), 20);
    assert!(e.stats().interrupted >= 1);
}

#[test]
fn runaway_write_is_interrupted_and_rolled_back() {
    let e = engine_with(SqlConfig {
        timeout: Duration::from_millis(300),
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE t(x)", vec![]);
    let start = Instant::now();
    let err = try_exec(&e, "INSERT INTO t WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert!(err.message.contains("(300 ms)"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 0);
}

#[test]
fn heavy_join_is_interrupted_while_other_readers_run() {
    let e = engine_with(SqlConfig {
        threads: 3,
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE a(id INTEGER PRIMARY KEY)", vec![]);
    exec(&e, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 200) INSERT INTO a SELECT x FROM c", vec![]);
    let e2 = e.clone();
    let heavy = thread::spawn(move || {
        try_query(
            &e2,
            "SELECT count(*) FROM a, a AS b, a AS c, a AS d",
            vec![],
        )
        .unwrap_err()
    });
    thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    assert_eq!(int(&e, "SELECT count(*) FROM a"), 200);
    assert!(
        start.elapsed() < Duration::from_millis(300),
        "readers of the same table run in parallel"
    );
    assert_eq!(heavy.join().unwrap().kind, ErrorKind::Timeout);
}

#[test]
fn result_cap() {
    let e = engine_with(SqlConfig {
        max_result_bytes: 10_000,
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    exec(&e, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1000) INSERT INTO t SELECT x, printf('%.80c', 'x') FROM c", vec![]);
    assert_eq!(rows(&e, "SELECT v FROM t LIMIT 50", vec![]).len(), 50);
    let err = try_query(&e, "SELECT v FROM t", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ResultTooLarge);
    assert_eq!(
        err.message,
        "result larger than --sql-max-result (10000 bytes); select fewer rows or columns (LIMIT)"
    );
    let err = try_query(&e, "SELECT randomblob(20000)", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ResultTooLarge);
    // Single values are capped by SQLite itself (SQLITE_LIMIT_LENGTH follows the cap, ≥ 1 MiB).
    let err = try_query(&e, "SELECT length(zeroblob(5000000))", vec![]).unwrap_err();
    assert!(err.message.contains("too big"), "{err}");
    assert_eq!(e.stats().results_too_large, 2);
}

#[test]
fn memory_cap_refuses_writes_but_not_reads_or_deletes() {
    let e = engine_with(SqlConfig {
        max_memory: 2 << 20,
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)", vec![]);
    let mut inserted = 0;
    let err = loop {
        match try_exec(&e, "INSERT INTO t(v) VALUES (randomblob(1000))", vec![]) {
            Ok(_) => inserted += 1,
            Err(err) => break err,
        }
        assert!(inserted < 10_000, "the limit never hit");
    };
    assert_eq!(err.kind, ErrorKind::OutOfMemory, "{err}");
    assert!(err.message.contains("--sql-maxmemory 2097152"), "{err}");
    assert!(inserted > 1000, "most of the 2 MiB is usable: {inserted}");
    assert_eq!(int(&e, "SELECT count(*) FROM t"), inserted);
    let stats = e.stats();
    assert!(
        stats.data_bytes <= 2 << 20 && stats.oom_refused == 1,
        "{stats:?}"
    );
    assert_eq!(
        exec(&e, "DELETE FROM t WHERE id % 2 = 0", vec![]),
        (inserted / 2) as u64
    );
    exec(&e, "INSERT INTO t(v) VALUES (randomblob(1000))", vec![]);
}

#[test]
fn syntax_errors_carry_sqlites_message() {
    let e = engine();
    let err = try_exec(&e, "SELEC 1", vec![]).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Syntax, "near \"SELEC\": syntax error")
    );
    let err = try_query(&e, "SELECT * FROM nope", vec![]).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Syntax, "no such table: nope")
    );
    let err = try_query(&e, "SELECT 1; SELECT 2", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadArgument);
    let err = e
        .run(Request::Query {
            sql: vec![0xff, 0xfe],
            params: vec![],
        })
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadArgument);
    exec(&e, "CREATE TABLE t(a UNIQUE)", vec![]);
    exec(&e, "INSERT INTO t VALUES (1)", vec![]);
    let err = try_exec(&e, "INSERT INTO t VALUES (1)", vec![]).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Sqlite, "UNIQUE constraint failed: t.a")
    );
    assert_eq!(int(&e, "SELECT 40 + 2"), 42, "still usable");
}

#[test]
fn tables_and_describe() {
    let e = engine();
    exec(
        &e,
        "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT 'anon', seen REAL);
         CREATE TABLE pages(id INTEGER, lang TEXT, body BLOB, PRIMARY KEY(id, lang));
         CREATE VIRTUAL TABLE docs USING fts5(body);
         CREATE VIEW names AS SELECT name FROM users",
        vec![],
    );
    e.run(Request::Expire {
        table: "users".into(),
        rules: Some(sql::ExpiryRules {
            rows: Some(5),
            ..Default::default()
        }),
    })
    .unwrap();
    assert_eq!(
        e.run(Request::Tables).unwrap(),
        Reply::Tables(vec!["docs".into(), "pages".into(), "users".into()])
    );
    let col = |name: &str, ty: &str, nn: bool, default: Option<&str>, pk: u32| ColumnInfo {
        name: name.into(),
        decl_type: ty.into(),
        not_null: nn,
        default: default.map(String::from),
        primary_key: pk,
    };
    assert_eq!(
        e.run(Request::Describe {
            table: "USERS".into()
        })
        .unwrap(),
        Reply::Describe(vec![
            col("id", "INTEGER", false, None, 1),
            col("name", "TEXT", true, Some("'anon'"), 0),
            col("seen", "REAL", false, None, 0),
        ])
    );
    let Reply::Describe(cols) = e
        .run(Request::Describe {
            table: "pages".into(),
        })
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        cols.iter().map(|c| c.primary_key).collect::<Vec<_>>(),
        vec![1, 2, 0]
    );
    assert!(
        matches!(e.run(Request::Describe { table: "names".into() }), Ok(Reply::Describe(c)) if c.len() == 1)
    );
    let err = e
        .run(Request::Describe {
            table: "nope".into(),
        })
        .unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NoSuchTable, "no such table: nope")
    );
}

#[test]
fn submit_calls_back_from_engine_threads() {
    let e = engine_with(SqlConfig {
        threads: 4,
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE kv(k INTEGER PRIMARY KEY, v)", vec![]);
    exec(&e, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1000) INSERT INTO kv SELECT x, x * 2 FROM c", vec![]);
    let (tx, rx) = std::sync::mpsc::channel();
    let caller = thread::current().id();
    for k in 1..=1000i64 {
        let tx = tx.clone();
        e.submit(
            Request::Query {
                sql: b"SELECT v FROM kv WHERE k = ?".to_vec(),
                params: vec![Value::Integer(k)],
            },
            Box::new(move |r| {
                assert_ne!(thread::current().id(), caller);
                tx.send((k, r)).unwrap();
            }),
        );
    }
    drop(tx);
    let mut n = 0;
    for (k, r) in rx {
        let Ok(Reply::Rows { rows, .. }) = r else {
            panic!("{r:?}")
        };
        assert_eq!(rows, vec![vec![Value::Integer(k * 2)]]);
        n += 1;
    }
    assert_eq!(n, 1000);
    assert!(e.stats().statements >= 1000);
}

#[test]
fn shutdown_fails_pending_and_later_requests() {
    let e = engine_with(SqlConfig {
        threads: 1,
        ..SqlConfig::default()
    });
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..3 {
        let tx = tx.clone();
        e.submit(
            Request::Query {
                sql: RUNAWAY.as_bytes().to_vec(),
                params: vec![],
            },
            Box::new(move |r| tx.send(r).unwrap()),
        );
    }
    thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    e.shutdown();
    assert!(
        start.elapsed() < Duration::from_millis(900),
        "running statement interrupted"
    );
    let results: Vec<_> = rx.try_iter().collect();
    assert_eq!(results.len(), 3);
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Err(err) if err.kind == ErrorKind::Shutdown)),
        "{results:?}"
    );
    assert_eq!(
        e.run(Request::Tables).unwrap_err().kind,
        ErrorKind::Shutdown
    );
    drop(Arc::clone(&e));
}
