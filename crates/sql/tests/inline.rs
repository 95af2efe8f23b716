//! Queries run on the caller's thread (`SqlEngine::query_inline`): same results as the engine's
//! threads, short ones only (the step budget), read-only only, counted once, and never a view
//! of uncommitted data.

mod common;
use common::*;
use sql::{ExpiryRules, Reply, Request, SqlConfig, SqlEngine, Value};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// An engine whose statements may take long (a busy test machine).
fn patient() -> std::sync::Arc<SqlEngine> {
    engine_with(SqlConfig {
        timeout: Duration::from_secs(30),
        ..SqlConfig::default()
    })
}

fn inline(e: &SqlEngine, sql: &str, params: Vec<Value>) -> Option<Reply> {
    e.query_inline(sql.as_bytes(), &params)
        .map(|(r, _took)| r.unwrap_or_else(|err| panic!("{sql}: {err}")))
}

fn engine_reply(e: &SqlEngine, sql: &str, params: Vec<Value>) -> Reply {
    e.run(Request::Query {
        sql: sql.as_bytes().to_vec(),
        params,
    })
    .unwrap()
}

fn frag(e: &SqlEngine, n: i64) {
    exec(
        e,
        "CREATE TABLE frag(id INTEGER PRIMARY KEY, page INTEGER, data TEXT)",
        vec![],
    );
    exec(e, "CREATE INDEX frag_page ON frag(page)", vec![]);
    exec(
        e,
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) \
         INSERT INTO frag SELECT i, i % 100, printf('row %d', i) FROM n",
        vec![Value::Integer(n)],
    );
}

#[test]
fn point_and_range_reads_equal_the_engines() {
    let e = engine();
    frag(&e, 1000);
    for (sql, p) in [
        ("SELECT * FROM frag WHERE id = ?", Value::Integer(7)),
        ("SELECT * FROM frag WHERE id = ?", text("42")),
        ("SELECT * FROM frag WHERE id = ?", Value::Integer(5000)),
        (
            "SELECT id, data FROM frag WHERE page = ?",
            Value::Integer(3),
        ),
        ("SELECT ?, typeof(?1), cairn_now() > 0", Value::Real(1.5)),
    ] {
        let here = inline(&e, sql, vec![p.clone()]).expect("short read runs inline");
        assert_eq!(here, engine_reply(&e, sql, vec![p]), "{sql}");
    }
    // Errors are the engine's errors too.
    let (bad, _) = e.query_inline(b"SELECT * FROM nowhere", &[]).unwrap();
    assert_eq!(bad.unwrap_err().message, "no such table: nowhere");
    let (bad, _) = e.query_inline(b"SELECT ?", &[]).unwrap();
    assert!(bad.unwrap_err().message.contains("1 parameter(s)"));
}

#[test]
fn long_statements_go_to_the_engine_within_the_budget() {
    let e = engine();
    frag(&e, 20_000);
    let long = "SELECT count(*), sum(length(data)) FROM frag WHERE data LIKE '%9%'";
    let before = e.stats().statements;
    let t = Instant::now();
    assert_eq!(inline(&e, long, vec![]), None);
    let took = t.elapsed();
    // 1,000 steps are microseconds of work; the whole scan is far more.
    // (Generous: the test machine may be busy; the full statement takes far longer.)
    assert!(
        took < Duration::from_millis(100),
        "abandoned after {took:?}"
    );
    // Nothing of the attempt counted.
    assert_eq!(e.stats().statements, before);
    // Remembered: the next attempt does not even start.
    assert_eq!(inline(&e, long, vec![]), None);
    let Reply::Rows { rows, .. } = engine_reply(&e, long, vec![]) else {
        panic!()
    };
    assert_eq!(rows[0][0], Value::Integer(6_878));
    assert_eq!(e.stats().statements, before + 1);
}

#[test]
fn writes_and_disabled_budget_go_to_the_engine() {
    let e = engine();
    frag(&e, 10);
    let ins = "INSERT INTO frag VALUES (100, 1, 'x') RETURNING id";
    assert_eq!(inline(&e, ins, vec![]), None);
    assert_eq!(
        int(&e, "SELECT count(*) FROM frag"),
        10,
        "not written inline"
    );
    let off = engine_with(SqlConfig {
        inline_steps: 0,
        ..SqlConfig::default()
    });
    assert_eq!(inline(&off, "SELECT 1", vec![]), None);
    e.shutdown();
    assert_eq!(inline(&e, "SELECT 1", vec![]), None);
}

#[test]
fn inline_reads_count_as_operations_for_expiry() {
    let e = engine();
    exec(&e, "CREATE TABLE o(id INTEGER PRIMARY KEY)", vec![]);
    let r = e.run(Request::Expire {
        table: "o".into(),
        rules: Some(ExpiryRules {
            ops: Some(3),
            ..Default::default()
        }),
    });
    assert_eq!(r, Ok(Reply::Ok));
    exec(&e, "INSERT INTO o VALUES (1)", vec![]);
    let count = "SELECT count(*) FROM o";
    // The insert was operation 1; inline reads are operations 2, 3 and 4 (the row has seen
    // 2 and 3 when 4 starts), as in `expiry.rs`'s `ops_counts_statements_on_the_table`.
    for _ in 0..3 {
        let Some(Reply::Rows { rows, .. }) = inline(&e, count, vec![]) else {
            panic!("not inline")
        };
        assert_eq!(rows[0][0], Value::Integer(1));
    }
    // Now the row is due: the read must wait for its removal, so the engine runs it.
    assert_eq!(inline(&e, count, vec![]), None);
    assert_eq!(int(&e, count), 0);
    assert_eq!(e.stats().expired_ops, 1);
}

#[test]
fn deep_views_compile_on_the_engine() {
    let e = patient();
    exec(&e, "CREATE VIEW v0 AS SELECT 1 AS x", vec![]);
    for i in 1..=600 {
        exec(
            &e,
            &format!("CREATE VIEW v{i} AS SELECT x FROM v{}", i - 1),
            vec![],
        );
    }
    assert_eq!(inline(&e, "SELECT x FROM v600", vec![]), None);
    assert_eq!(int(&e, "SELECT x FROM v600"), 1);
    // A shallow one still runs here (once the connection has loaded the 601 views' schema,
    // which may take longer than an inline compilation may on a busy machine).
    let _ = inline(&e, "SELECT x FROM v5", vec![]);
    assert!(inline(&e, "SELECT x FROM v5", vec![]).is_some());
    let long_pattern = format!("'{}'", "%a".repeat(800));
    let sql = format!("SELECT 'aaa' LIKE {long_pattern}");
    assert_eq!(inline(&e, &sql, vec![]), None);
    assert_eq!(int(&e, &sql), 0);
}

#[test]
fn inline_reads_never_see_uncommitted_rows() {
    let e = patient();
    frag(&e, 100);
    // A transaction that inserts, then works for a while before it commits.
    let (tx, rx) = mpsc::channel();
    e.submit(
        Request::Exec {
            sql: b"BEGIN; INSERT INTO frag VALUES (1000, 1, 'new'); \
                   WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) \
                   SELECT count(*) FROM n; COMMIT"
                .to_vec(),
            params: vec![],
        },
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    let mut seen = 0;
    loop {
        let done = rx.try_recv().ok();
        let t = Instant::now();
        if let Some(Reply::Rows { rows, .. }) =
            inline(&e, "SELECT count(*) FROM frag WHERE id = 1000", vec![])
        {
            let n = rows[0][0].clone();
            if done.is_none() && n == Value::Integer(1) {
                // Committed between the check and the read: then the writer's reply is
                // moments away, not the rest of its long statement.
                let wait = Instant::now();
                assert!(rx.recv_timeout(Duration::from_secs(5)).is_ok());
                assert!(
                    wait.elapsed() < Duration::from_millis(300),
                    "saw an uncommitted row"
                );
                // While the writer holds its transaction the shared in-memory database's lock
                // usually hands every inline read off, so this may be the first that ran.
                seen += 1;
                break;
            }
            seen += 1;
        }
        // Generous: the machine may be busy; waiting for the commit would take seconds.
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "inline read waited"
        );
        if let Some(r) = done {
            r.unwrap();
            break;
        }
    }
    assert!(seen > 0, "no inline read ran");
    assert_eq!(int(&e, "SELECT count(*) FROM frag WHERE id = 1000"), 1);
}

/// The columns of a repeated query come from its cached analysis: a schema change made on
/// the writer (another connection) must show at once, never a stale statement's shape.
#[test]
fn cached_statements_follow_schema_changes() {
    let e = engine();
    exec(
        &e,
        "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT)",
        vec![],
    );
    exec(&e, "INSERT INTO t VALUES (1, 'x')", vec![]);
    let q = "SELECT * FROM t WHERE id = ?";
    let shape = |r: Reply| match r {
        Reply::Rows { columns, rows } => (columns.to_vec(), rows),
        other => panic!("unexpected reply {other:?}"),
    };
    for _ in 0..3 {
        let (cols, rows) = shape(inline(&e, q, vec![Value::Integer(1)]).expect("inline"));
        assert_eq!(cols, ["id", "a"]);
        assert_eq!(rows, vec![vec![Value::Integer(1), text("x")]]);
    }
    exec(&e, "ALTER TABLE t ADD COLUMN b INTEGER DEFAULT 7", vec![]);
    let (cols, rows) = shape(inline(&e, q, vec![Value::Integer(1)]).expect("inline"));
    assert_eq!(cols, ["id", "a", "b"]);
    assert_eq!(
        rows,
        vec![vec![Value::Integer(1), text("x"), Value::Integer(7)]]
    );
    // No row: the names still come from the current schema.
    exec(&e, "ALTER TABLE t RENAME COLUMN a TO renamed", vec![]);
    let (cols, rows) = shape(inline(&e, q, vec![Value::Integer(2)]).expect("inline"));
    assert_eq!(cols, ["id", "renamed", "b"]);
    assert!(rows.is_empty());
    assert_eq!(try_query(&e, q, vec![Value::Integer(2)]).unwrap().0, cols);
    // A text first analysed by SQL.EXEC (no column names) still names its columns.
    exec(&e, "SELECT id FROM t", vec![]);
    assert_eq!(try_query(&e, "SELECT id FROM t", vec![]).unwrap().0, ["id"]);
    exec(&e, "DROP TABLE t", vec![]);
    let (gone, _) = e.query_inline(q.as_bytes(), &[Value::Integer(1)]).unwrap();
    assert_eq!(gone.unwrap_err().message, "no such table: t");
}
