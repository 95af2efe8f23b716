//! No statement can overflow an engine thread's stack (issue 11, item 1): the reproductions
//! from the issue, then generated SQL (deep nesting, long LIKE/GLOB patterns, chained CTEs and
//! views) that must each end in a result or an error, never in an abort of the process.

mod common;
use common::*;
use proptest::prelude::*;
use sql::{ErrorKind, SqlConfig, SqlEngine, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn shared_engine() -> Arc<SqlEngine> {
    static E: OnceLock<Arc<SqlEngine>> = OnceLock::new();
    E.get_or_init(|| {
        engine_with(SqlConfig {
            timeout: Duration::from_secs(2),
            ..SqlConfig::default()
        })
    })
    .clone()
}

fn still_serves(e: &SqlEngine) {
    assert_eq!(int(e, "SELECT 1"), 1);
}

fn chained_ctes(n: usize) -> String {
    let mut s = String::from("WITH c0 AS (SELECT 1 AS x)");
    for i in 1..n {
        s += &format!(", c{i} AS (SELECT x FROM c{})", i - 1);
    }
    s + &format!(" SELECT * FROM c{}", n - 1)
}

fn text(s: String) -> Value {
    Value::Text(s.into_bytes())
}

#[test]
fn guard_is_installed() {
    assert!(shared_engine().stack_guard_active());
}

#[test]
fn long_like_and_glob_patterns_from_the_issue() {
    let e = shared_engine();
    for (sql, pattern) in [
        ("SELECT ? LIKE ?", "%a".repeat(20_000) + "b"),
        ("SELECT ? GLOB ?", "*a".repeat(20_000) + "b"),
    ] {
        let r = rows(&e, sql, vec![text("a".repeat(20_000)), text(pattern)]);
        assert_eq!(r, vec![vec![Value::Integer(0)]], "{sql}");
    }
    // Past SQLite's pattern limit: an error, not a deeper recursion.
    let err = try_query(
        &e,
        "SELECT ? LIKE ?",
        vec![text("a".into()), text("%a".repeat(30_000))],
    )
    .unwrap_err();
    assert!(
        err.message.contains("LIKE or GLOB pattern too complex"),
        "{err}"
    );
    still_serves(&e);
}

#[test]
fn ten_thousand_chained_ctes_from_the_issue() {
    let e = shared_engine();
    // Answered, refused as too deep or interrupted while compiling (SQLite's CTE lookups are
    // quadratic), depending on the build and the machine; never an abort.
    match try_query(&e, &chained_ctes(10_000), vec![]) {
        Ok((_, r)) => assert_eq!(r, vec![vec![Value::Integer(1)]]),
        Err(err) => assert!(
            err.message.contains("nests too deeply") || err.message.ends_with("to compile"),
            "{err}"
        ),
    }
    still_serves(&e);
}

#[test]
fn three_thousand_chained_views_from_the_issue() {
    // Its own engine: thousands of views slow every other test's schema loads.
    let e = engine();
    let mut script = String::from("CREATE VIEW v0 AS SELECT 1 AS x;");
    for i in 1..3_000 {
        script += &format!("CREATE VIEW v{i} AS SELECT x FROM v{};", i - 1);
    }
    exec(&e, &script, vec![]);
    // Over 2 MiB of stack (this aborted the process), and quadratic work for SQLite to
    // expand: answered, or interrupted while it compiles; never an abort.
    for r in [
        try_query(&e, "SELECT x FROM v2999", vec![]).map(|(_, r)| r),
        try_exec(&e, "CREATE TABLE t AS SELECT x FROM v2999", vec![]).map(|_| vec![]),
    ] {
        if let Err(err) = r {
            assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
            assert!(err.message.ends_with("to compile"), "{err}");
        }
    }
    still_serves(&e);
}

#[test]
fn views_whose_flattened_expressions_nest_deeply_are_refused() {
    let e = engine_with(SqlConfig {
        timeout: Duration::from_secs(20),
        ..SqlConfig::default()
    });
    // Each view nests its column 400 deep; flattening stacks them: 40,000 levels (~22 MiB
    // of stack without the guard).
    let neg = |x: &str| format!("{}{x}{}", "-(".repeat(400), ")".repeat(400));
    let mut script = String::from("CREATE VIEW w0 AS SELECT 1 AS x;");
    for i in 1..100 {
        script += &format!(
            "CREATE VIEW w{i} AS SELECT {} AS x FROM w{};",
            neg("x"),
            i - 1
        );
    }
    exec(&e, &script, vec![]);
    let err = try_query(&e, "SELECT x FROM w99", vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Refused, "{err}");
    assert!(err.message.contains("nests too deeply"), "{err}");
    let err = try_exec(&e, "CREATE TABLE t AS SELECT x FROM w99", vec![]).unwrap_err();
    assert!(err.message.contains("nests too deeply"), "{err}");
    assert_eq!(int(&e, "SELECT x FROM w2"), 1);
}

#[test]
fn compiling_is_bounded_by_the_timeout() {
    let e = engine_with(SqlConfig {
        timeout: Duration::from_millis(200),
        ..SqlConfig::default()
    });
    let started = std::time::Instant::now();
    let err = try_query(&e, &chained_ctes(10_000), vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert_eq!(
        err.message,
        "interrupted: statement took longer than --sql-timeout (200 ms) to compile"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    still_serves(&e);
}

#[test]
fn nested_subqueries_are_refused_not_overflowed() {
    let e = shared_engine();
    let n = 30_000;
    let sql = format!(
        "SELECT * FROM {}(SELECT 1){}",
        "(SELECT * FROM ".repeat(n),
        ")".repeat(n)
    );
    let err = try_query(&e, &sql, vec![]).unwrap_err();
    assert!(err.message.contains("nests too deeply"), "{err}");
    still_serves(&e);
}

/// One generated statement of a pathological shape.
#[derive(Debug, Clone)]
enum Shape {
    Parens(usize),
    Subqueries(usize),
    ScalarSubqueries(usize),
    Ctes(usize),
    Compound(usize),
    Like(usize, bool),
    Unary(usize),
    Case(usize),
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (1usize..5_000).prop_map(Shape::Parens),
        (1usize..40_000).prop_map(Shape::Subqueries),
        (1usize..3_000).prop_map(Shape::ScalarSubqueries),
        (1usize..2_500).prop_map(Shape::Ctes),
        (1usize..1_000).prop_map(Shape::Compound),
        ((1usize..40_000), any::<bool>()).prop_map(|(n, g)| Shape::Like(n, g)),
        (1usize..20_000).prop_map(Shape::Unary),
        (1usize..2_000).prop_map(Shape::Case),
    ]
}

fn statement(s: &Shape) -> (String, Vec<Value>) {
    match *s {
        Shape::Parens(n) => (
            format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
            vec![],
        ),
        Shape::Subqueries(n) => (
            format!(
                "SELECT * FROM {}(SELECT 1){}",
                "(SELECT * FROM ".repeat(n),
                ")".repeat(n)
            ),
            vec![],
        ),
        Shape::ScalarSubqueries(n) => (
            format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n)),
            vec![],
        ),
        Shape::Ctes(n) => (chained_ctes(n), vec![]),
        Shape::Compound(n) => (vec!["SELECT 1"; n].join(" UNION ALL "), vec![]),
        Shape::Like(n, glob) => {
            let (op, wild) = if glob { ("GLOB", "*a") } else { ("LIKE", "%a") };
            (
                format!("SELECT ? {op} ?"),
                vec![text("a".repeat(n)), text(wild.repeat(n) + "b")],
            )
        }
        Shape::Unary(n) => (format!("SELECT {}1", "-".repeat(n)), vec![]),
        Shape::Case(n) => (
            format!(
                "SELECT {}1{}",
                "CASE WHEN 1 THEN ".repeat(n),
                " END".repeat(n)
            ),
            vec![],
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the shape and depth: a result or an error, and the engine keeps serving.
    #[test]
    fn generated_deep_sql_never_aborts(s in shape()) {
        let e = shared_engine();
        let (sql, params) = statement(&s);
        let _ = try_query(&e, &sql, params.clone());
        let _ = try_exec(&e, &sql, params);
        still_serves(&e);
    }
}
