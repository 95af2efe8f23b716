//! Every refused operation, refused by SQLite's authorizer with a message that says what.

mod common;
use common::*;
use sql::{ErrorKind, Value};

fn refused(e: &sql::SqlEngine, sql: &str) -> String {
    let err = try_exec(e, sql, vec![]).expect_err(sql);
    assert_eq!(err.kind, ErrorKind::Refused, "{sql}: {err}");
    assert!(err.message.starts_with("SQL refused: "), "{}", err.message);
    err.message
}

#[test]
fn attach_and_detach() {
    let e = engine();
    assert_eq!(
        refused(&e, "ATTACH DATABASE '/tmp/x.db' AS x"),
        "SQL refused: ATTACH is not allowed"
    );
    assert_eq!(
        refused(&e, "ATTACH ':memory:' AS m"),
        "SQL refused: ATTACH is not allowed"
    );
    assert_eq!(
        refused(&e, "DETACH DATABASE main"),
        "SQL refused: DETACH is not allowed"
    );
    // Through SQL.QUERY as well.
    let err = try_query(&e, "ATTACH 'file:/x?vfs=memdb' AS y", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refused);
}

#[test]
fn vacuum_into_and_vacuum() {
    let e = engine();
    exec(&e, "CREATE TABLE t(a); INSERT INTO t VALUES (1)", vec![]);
    let path = std::env::temp_dir().join(format!("cairn-vacuum-{}.db", std::process::id()));
    let sql = format!("VACUUM INTO '{}'", path.display());
    assert_eq!(refused(&e, &sql), "SQL refused: VACUUM is not allowed");
    assert!(!path.exists(), "no file was written");
    assert_eq!(refused(&e, "VACUUM"), "SQL refused: VACUUM is not allowed");
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 1, "still usable");
}

#[test]
fn extensions() {
    let e = engine();
    let msg = refused(
        &e,
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libm.so.6')",
    );
    assert_eq!(msg, "SQL refused: load_extension is not allowed");
    let err = try_query(&e, "SELECT load_extension('x')", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refused);
    refused(&e, "SELECT fts3_tokenizer('simple')");
    let msg = refused(&e, "CREATE VIRTUAL TABLE s USING dbstat");
    assert!(msg.contains("module dbstat is not allowed"), "{msg}");
    // Modules that keep their data in the database are fine.
    exec(&e, "CREATE VIRTUAL TABLE docs USING fts5(body)", vec![]);
    exec(
        &e,
        "INSERT INTO docs VALUES ('structured cached data')",
        vec![],
    );
    assert_eq!(
        int(&e, "SELECT count(*) FROM docs WHERE docs MATCH 'cached'"),
        1
    );
}

#[test]
fn pragmas_outside_the_allow_list() {
    let e = engine();
    for p in [
        "PRAGMA journal_mode = WAL",
        "PRAGMA writable_schema = ON",
        "PRAGMA cache_size = 100000",
        "PRAGMA temp_store_directory = '/tmp'",
        "PRAGMA max_page_count = 1000000000",
        "PRAGMA foreign_keys = OFF",
        "PRAGMA query_only",
    ] {
        let msg = refused(&e, p);
        assert!(msg.contains("PRAGMA"), "{p}: {msg}");
    }
    assert_eq!(
        refused(&e, "PRAGMA foreign_keys = OFF"),
        "SQL refused: PRAGMA foreign_keys can only be read"
    );
    let err = try_query(&e, "SELECT * FROM pragma_cache_size", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refused, "{err}");
}

#[test]
fn allowed_pragmas() {
    let e = engine();
    exec(
        &e,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL); CREATE INDEX tn ON t(name)",
        vec![],
    );
    let cols = rows(&e, "PRAGMA table_info(t)", vec![]);
    assert_eq!(cols.len(), 2);
    assert_eq!(cols[1][1], text("name"));
    assert_eq!(rows(&e, "PRAGMA index_list(t)", vec![]).len(), 1);
    assert_eq!(
        rows(&e, "SELECT name FROM pragma_table_info('t')", vec![]).len(),
        2
    );
    assert_eq!(int(&e, "PRAGMA foreign_keys"), 1);
}

#[test]
fn temp_objects() {
    let e = engine();
    let msg = refused(&e, "CREATE TEMP TABLE x(a)");
    assert!(msg.contains("TEMP"), "{msg}");
    exec(&e, "CREATE TABLE t(a)", vec![]);
    refused(&e, "CREATE TEMP VIEW v AS SELECT * FROM t");
    refused(
        &e,
        "CREATE TEMP TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END",
    );
}

#[test]
fn cairn_tables_are_read_only() {
    let e = engine();
    exec(&e, "CREATE TABLE t(a)", vec![]);
    e.run(sql::Request::Expire {
        table: "t".into(),
        rules: Some(sql::ExpiryRules {
            rows: Some(10),
            ..Default::default()
        }),
    })
    .unwrap();
    exec(&e, "INSERT INTO t VALUES (1)", vec![]);
    // Reading the metadata is allowed (documented); changing it is not.
    assert_eq!(int(&e, "SELECT count(*) FROM _cairn_meta_t"), 1);
    for sql in [
        "DELETE FROM _cairn_meta_t",
        "UPDATE _cairn_expiry SET max_rows = 1",
        "INSERT INTO _cairn_meta_t(rid, written_ms, op_stamp) VALUES (9, 0, 0)",
        "DROP TABLE _cairn_meta_t",
        "DROP TRIGGER _cairn_1_ins",
        "ALTER TABLE _cairn_meta_t RENAME TO x",
        "CREATE TABLE _cairn_mine(a)",
        "CREATE TRIGGER _cairn_x AFTER INSERT ON t BEGIN DELETE FROM _cairn_meta_t; END",
    ] {
        refused(&e, sql);
    }
    // A user trigger may not write there either.
    exec(&e, "CREATE TABLE u(a)", vec![]);
    refused(&e, "CREATE TRIGGER sneaky AFTER INSERT ON u BEGIN DELETE FROM _cairn_meta_t; END; INSERT INTO u VALUES (1)");
    assert_eq!(int(&e, "SELECT count(*) FROM _cairn_meta_t"), 1);
}

#[test]
fn refusal_leaves_engine_usable_and_counts() {
    let e = engine();
    refused(&e, "ATTACH 'x' AS x");
    assert_eq!(
        rows(&e, "SELECT ?", vec![Value::Integer(5)]),
        vec![vec![Value::Integer(5)]]
    );
    assert!(e.stats().refused >= 1);
}

#[test]
fn temp_schema_however_spelled() {
    let e = engine();
    exec(&e, "CREATE TABLE orders(id INTEGER PRIMARY KEY, v)", vec![]);
    for sql in [
        "CREATE TABLE temp.orders(id INTEGER PRIMARY KEY, v)",
        "CREATE TABLE \"TEMP\".x(a)",
        "CREATE VIEW temp.v AS SELECT 1",
        "CREATE TRIGGER temp.trg AFTER INSERT ON orders BEGIN SELECT 1; END",
    ] {
        assert!(
            refused(&e, sql).contains("TEMP objects are not allowed"),
            "{sql}"
        );
    }
    // The writer's inserts reach the shared table, which every reader sees.
    assert_eq!(exec(&e, "INSERT INTO orders(v) VALUES (1)", vec![]), 1);
    assert_eq!(int(&e, "SELECT count(*) FROM orders"), 1);
    assert_eq!(int(&e, "SELECT count(*) FROM temp.sqlite_master"), 0);
}

#[test]
fn cairn_names_cannot_be_reached_by_rename_index_or_trigger() {
    let e = engine();
    exec(&e, "CREATE TABLE t(a); CREATE TABLE x(a)", vec![]);
    e.run(sql::Request::Expire {
        table: "t".into(),
        rules: Some(sql::ExpiryRules {
            rows: Some(5),
            ..Default::default()
        }),
    })
    .unwrap();
    assert_eq!(
        refused(&e, "ALTER TABLE x RENAME TO _cairn_meta_y"),
        "SQL refused: names starting with _cairn_ are reserved"
    );
    assert_eq!(int(&e, "SELECT count(*) FROM x"), 0);
    let err = try_query(&e, "ALTER TABLE x RENAME TO _Cairn_q", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refused, "{err}");
    exec(&e, "ALTER TABLE x RENAME TO x2", vec![]);
    for sql in [
        "CREATE INDEX i ON _cairn_meta_t(written_ms)",
        "CREATE TRIGGER tr AFTER INSERT ON _cairn_meta_t BEGIN SELECT 1; END",
    ] {
        assert!(refused(&e, sql).contains("belongs to cairn"), "{sql}");
    }
    for i in 0..8 {
        exec(&e, "INSERT INTO t VALUES (?)", vec![Value::Integer(i)]);
    }
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 5);
}

/// Runs `f` from several threads at once, `n` times each, so that every reader takes some.
fn on_every_reader<T: Send>(n: usize, f: impl Fn() -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let f = &f;
        let all: Vec<_> = (0..6)
            .map(|_| s.spawn(move || (0..n).map(|_| f()).collect::<Vec<T>>()))
            .collect();
        all.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn readers_see_new_tables_and_indexes_in_pragmas_and_the_catalog() {
    let e = engine_with(sql::SqlConfig {
        threads: 3,
        ..sql::SqlConfig::default()
    });
    // Every reader loads the schema as it is now ...
    on_every_reader(30, || int(&e, "SELECT count(*) FROM sqlite_schema"));
    // ... then a table and an index appear. PRAGMA index_list(t) looks t up in the connection's
    // loaded schema and, not finding it, never reads the database (so never notices the change).
    exec(
        &e,
        "CREATE TABLE fresh(a, b); CREATE INDEX fresh_a ON fresh(a)",
        vec![],
    );
    let seen = on_every_reader(20, || {
        let list = rows(&e, "PRAGMA index_list(fresh)", vec![]);
        let info = rows(&e, "PRAGMA index_info(fresh_a)", vec![]);
        let tables = match e.run(sql::Request::Tables) {
            Ok(sql::Reply::Tables(t)) => t,
            other => panic!("{other:?}"),
        };
        (list.len(), info, tables.contains(&"fresh".to_string()))
    });
    let want = (
        1,
        vec![vec![Value::Integer(0), Value::Integer(0), text("a")]],
        true,
    );
    let stale = seen.iter().filter(|s| **s != want).count();
    assert_eq!(
        stale,
        0,
        "{stale} of {} answers from a stale schema",
        seen.len()
    );
}
