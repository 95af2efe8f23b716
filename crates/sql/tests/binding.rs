//! Parameters are bound, never interpolated, and every SQLite type comes back as it went in.

mod common;
use common::*;
use sql::{ErrorKind, Value};

#[test]
fn every_type_round_trips() {
    let e = engine();
    exec(&e, "CREATE TABLE v(id INTEGER PRIMARY KEY, x)", vec![]);
    let values = vec![
        Value::Null,
        Value::Integer(-9_007_199_254_740_993),
        Value::Integer(i64::MAX),
        Value::Real(3.25),
        Value::Real(-0.0001),
        text("héllo, 'world'; DROP TABLE v; --"),
        text(""),
        Value::Blob(vec![0, 159, 146, 150, 255]),
        Value::Blob(vec![]),
    ];
    for (i, v) in values.iter().enumerate() {
        let n = exec(
            &e,
            "INSERT INTO v VALUES (?, ?)",
            vec![Value::Integer(i as i64), v.clone()],
        );
        assert_eq!(n, 1);
    }
    let got = rows(&e, "SELECT x, typeof(x) FROM v ORDER BY id", vec![]);
    for (v, row) in values.iter().zip(&got) {
        assert_eq!(&row[0], v);
        let ty = match v {
            Value::Null => "null",
            Value::Integer(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        };
        assert_eq!(row[1], text(ty));
    }
    // The injection attempt above was data, not SQL.
    assert_eq!(int(&e, "SELECT count(*) FROM v"), values.len() as i64);
}

#[test]
fn bulk_strings_bind_as_text_or_blob() {
    assert_eq!(Value::from_bulk(b"42".to_vec()), text("42"));
    assert_eq!(
        Value::from_bulk(vec![0xff, 0x00]),
        Value::Blob(vec![0xff, 0x00])
    );
    let e = engine();
    exec(
        &e,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, r REAL, s TEXT, b BLOB)",
        vec![],
    );
    let args = ["7", "12", "2.5", "abc", "raw"].map(|s| Value::from_bulk(s.as_bytes().to_vec()));
    exec(
        &e,
        "INSERT INTO t VALUES (?, ?, ?, ?, CAST(? AS BLOB))",
        args.to_vec(),
    );
    // Column affinity turns numeric text into numbers; CAST(? AS BLOB) forces a blob.
    let got = rows(
        &e,
        "SELECT n, r, s, b, typeof(b) FROM t WHERE id = ?",
        vec![Value::from_bulk(b"7".to_vec())],
    );
    assert_eq!(
        got,
        vec![vec![
            Value::Integer(12),
            Value::Real(2.5),
            text("abc"),
            Value::Blob(b"raw".to_vec()),
            text("blob")
        ]]
    );
    let invalid = Value::from_bulk(vec![0xc3, 0x28]);
    exec(
        &e,
        "INSERT INTO t(id, s) VALUES (8, ?)",
        vec![invalid.clone()],
    );
    assert_eq!(
        rows(&e, "SELECT s FROM t WHERE id = 8", vec![]),
        vec![vec![invalid]]
    );
}

#[test]
fn parameter_count_must_match() {
    let e = engine();
    exec(&e, "CREATE TABLE t(a)", vec![]);
    let err = try_exec(&e, "INSERT INTO t VALUES (?)", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadArgument);
    let err = try_exec(
        &e,
        "INSERT INTO t VALUES (?)",
        vec![Value::Integer(1), Value::Integer(2)],
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadArgument, "{err}");
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 0, "nothing ran");
    let err = try_query(&e, "SELECT ?", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadArgument);
}

#[test]
fn numbered_and_named_parameters() {
    let e = engine();
    let got = rows(
        &e,
        "SELECT ?2, ?1, :x",
        vec![text("a"), text("b"), Value::Integer(3)],
    );
    assert_eq!(got, vec![vec![text("b"), text("a"), Value::Integer(3)]]);
}

#[test]
fn scripts_consume_parameters_in_order() {
    let e = engine();
    let n = exec(
        &e,
        "CREATE TABLE t(a, b); INSERT INTO t VALUES (?, ?); INSERT INTO t VALUES (?, 'x'); UPDATE t SET b = ? WHERE a = 1",
        vec![Value::Integer(1), text("one"), Value::Integer(2), text("uno")],
    );
    assert_eq!(n, 3, "two inserts and one update; DDL counts nothing");
    assert_eq!(
        rows(&e, "SELECT a, b FROM t ORDER BY a", vec![]),
        vec![
            vec![Value::Integer(1), text("uno")],
            vec![Value::Integer(2), text("x")]
        ]
    );
}

#[test]
fn changes_count_only_the_statement() {
    let e = engine();
    exec(&e, "CREATE TABLE t(a)", vec![]);
    exec(&e, "CREATE TABLE log(a)", vec![]);
    exec(
        &e,
        "CREATE TRIGGER tl AFTER INSERT ON t BEGIN INSERT INTO log VALUES (NEW.a); END",
        vec![],
    );
    assert_eq!(exec(&e, "INSERT INTO t VALUES (1), (2)", vec![]), 2);
    assert_eq!(
        exec(&e, "CREATE INDEX ta ON t(a)", vec![]),
        0,
        "DDL reports no stale count"
    );
    assert_eq!(exec(&e, "SELECT 1", vec![]), 0);
    assert_eq!(int(&e, "SELECT count(*) FROM log"), 2);
}

#[test]
fn query_may_write_with_returning() {
    let e = engine();
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, a)", vec![]);
    let (cols, got) = try_query(
        &e,
        "INSERT INTO t(a) VALUES (?) RETURNING id, a",
        vec![text("x")],
    )
    .unwrap();
    assert_eq!(cols, vec!["id", "a"]);
    assert_eq!(got, vec![vec![Value::Integer(1), text("x")]]);
    // The same text again, now served from the analysis cache.
    let (_, got) = try_query(
        &e,
        "INSERT INTO t(a) VALUES (?) RETURNING id, a",
        vec![text("y")],
    )
    .unwrap();
    assert_eq!(got, vec![vec![Value::Integer(2), text("y")]]);
}

#[test]
fn transactions_live_within_one_exec() {
    let e = engine();
    exec(&e, "CREATE TABLE t(a)", vec![]);
    exec(
        &e,
        "BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); COMMIT",
        vec![],
    );
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 2);
    let err = try_exec(&e, "BEGIN; INSERT INTO t VALUES (3)", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadArgument, "{err}");
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 2, "rolled back");
    let err = try_exec(
        &e,
        "BEGIN; INSERT INTO t VALUES (3); INSERT INTO nope VALUES (1); COMMIT",
        vec![],
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Syntax, "{err}");
    assert_eq!(
        int(&e, "SELECT count(*) FROM t"),
        2,
        "a failed script leaves nothing behind"
    );
    exec(&e, "INSERT INTO t VALUES (4)", vec![]);
    assert_eq!(
        int(&e, "SELECT count(*) FROM t"),
        3,
        "connection still usable"
    );
}
