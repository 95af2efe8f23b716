//! Expiry rules: AGE, ROWS and OPS, hidden row metadata, and how rules follow the schema.

mod common;
use common::*;
use sql::{ErrorKind, ExpiryRules, Reply, Request, SqlConfig, SqlEngine, Value};
use std::time::{Duration, Instant};

fn set(e: &SqlEngine, table: &str, rules: ExpiryRules) {
    let r = e.run(Request::Expire {
        table: table.into(),
        rules: Some(rules),
    });
    assert_eq!(r, Ok(Reply::Ok));
}

fn show(e: &SqlEngine, table: &str) -> ExpiryRules {
    match e
        .run(Request::Expire {
            table: table.into(),
            rules: None,
        })
        .unwrap()
    {
        Reply::Rules(r) => r,
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

fn insert(e: &SqlEngine, table: &str, id: i64) {
    exec(
        e,
        &format!("INSERT INTO {table}(id, v) VALUES (?, 'x')"),
        vec![Value::Integer(id)],
    );
}

fn quiet() -> SqlConfig {
    // No background sweep during the test: lazy expiry alone must be exact.
    SqlConfig {
        sweep_interval: Duration::from_secs(3600),
        ..SqlConfig::default()
    }
}

#[test]
fn age_removes_old_rows() {
    let e = engine_with(quiet());
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    set(
        &e,
        "t",
        ExpiryRules {
            age: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    );
    insert(&e, "t", 1);
    insert(&e, "t", 2);
    e.advance_clock(Duration::from_secs(30));
    insert(&e, "t", 3);
    assert_eq!(ids(&e, "t"), vec![1, 2, 3]);
    e.advance_clock(Duration::from_secs(31));
    assert_eq!(ids(&e, "t"), vec![3], "rows 1 and 2 are 61 s old");
    // An update rewrites the row: its age starts again.
    e.advance_clock(Duration::from_secs(20));
    exec(&e, "UPDATE t SET v = 'y' WHERE id = 3", vec![]);
    e.advance_clock(Duration::from_secs(50));
    assert_eq!(ids(&e, "t"), vec![3]);
    e.advance_clock(Duration::from_secs(11));
    assert_eq!(ids(&e, "t"), Vec::<i64>::new());
    assert_eq!(e.stats().expired_age, 3);
}

#[test]
fn rows_keeps_the_newest() {
    let e = engine_with(quiet());
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    for id in 1..=5 {
        insert(&e, "t", id);
    }
    // Rules on a table that already has rows apply at once, oldest (by rowid) first.
    set(
        &e,
        "t",
        ExpiryRules {
            rows: Some(3),
            ..Default::default()
        },
    );
    assert_eq!(ids(&e, "t"), vec![3, 4, 5]);
    insert(&e, "t", 6);
    assert_eq!(ids(&e, "t"), vec![4, 5, 6]);
    // Rewriting row 4 makes it the newest, so 5 goes next.
    exec(&e, "UPDATE t SET v = 'new' WHERE id = 4", vec![]);
    insert(&e, "t", 7);
    assert_eq!(ids(&e, "t"), vec![4, 6, 7]);
    // REPLACE deletes and re-inserts: metadata and the count follow.
    exec(
        &e,
        "INSERT OR REPLACE INTO t(id, v) VALUES (6, 'again')",
        vec![],
    );
    insert(&e, "t", 8);
    assert_eq!(ids(&e, "t"), vec![6, 7, 8]);
    exec(&e, "DELETE FROM t WHERE id = 7", vec![]);
    insert(&e, "t", 9);
    assert_eq!(ids(&e, "t"), vec![6, 8, 9]);
    assert_eq!(
        int(&e, "SELECT count(*) FROM _cairn_meta_t"),
        3,
        "one metadata row per row"
    );
    assert_eq!(e.stats().expired_rows, 5);
}

#[test]
fn ops_counts_statements_on_the_table() {
    let e = engine_with(quiet());
    exec(
        &e,
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v); CREATE TABLE other(a)",
        vec![],
    );
    set(
        &e,
        "t",
        ExpiryRules {
            ops: Some(3),
            ..Default::default()
        },
    );
    insert(&e, "t", 1); // op 1 writes row 1
    insert(&e, "t", 2); // op 2
    assert_eq!(ids(&e, "t"), vec![1, 2]); // op 3
    exec(&e, "INSERT INTO other VALUES (1)", vec![]); // not an operation on t
    assert_eq!(ids(&e, "t"), vec![1, 2]); // op 4: row 1 has seen 2, 3 (and now 4 starts)
    assert_eq!(ids(&e, "t"), vec![2]); // op 5: three operations (2, 3, 4) since row 1 was written
    assert_eq!(ids(&e, "t"), Vec::<i64>::new()); // op 6: row 2 has seen 3, 4, 5
    assert_eq!(e.stats().expired_ops, 2);
}

#[test]
fn rules_combine_and_show() {
    let e = engine_with(quiet());
    exec(&e, "CREATE TABLE Stats(id INTEGER PRIMARY KEY, v)", vec![]);
    assert_eq!(show(&e, "stats"), ExpiryRules::default());
    let rules = ExpiryRules {
        age: Some(Duration::from_secs(10)),
        rows: Some(2),
        ops: Some(100),
    };
    set(&e, "STATS", rules.clone());
    assert_eq!(show(&e, "Stats"), rules);
    for id in 1..=3 {
        insert(&e, "Stats", id);
    }
    assert_eq!(ids(&e, "Stats"), vec![2, 3]);
    e.advance_clock(Duration::from_secs(11));
    assert_eq!(ids(&e, "Stats"), Vec::<i64>::new());
    // Replacing the rules keeps the metadata; clearing them removes it.
    set(
        &e,
        "stats",
        ExpiryRules {
            rows: Some(1),
            ..Default::default()
        },
    );
    assert_eq!(show(&e, "stats").rows, Some(1));
    set(&e, "stats", ExpiryRules::default());
    assert_eq!(show(&e, "stats"), ExpiryRules::default());
    let gone = try_query(&e, "SELECT * FROM _cairn_meta_Stats", vec![]).unwrap_err();
    assert!(gone.message.contains("no such table"), "{gone}");
    for id in 1..=3 {
        insert(&e, "Stats", id);
    }
    assert_eq!(ids(&e, "Stats"), vec![1, 2, 3]);
}

#[test]
fn metadata_is_hidden_unless_asked() {
    let e = engine_with(quiet());
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    set(
        &e,
        "t",
        ExpiryRules {
            rows: Some(10),
            ..Default::default()
        },
    );
    insert(&e, "t", 1);
    let (cols, _) = try_query(&e, "SELECT * FROM t", vec![]).unwrap();
    assert_eq!(cols, vec!["id", "v"]);
    assert_eq!(
        e.run(Request::Tables).unwrap(),
        Reply::Tables(vec!["t".into()])
    );
    let (cols, got) = try_query(
        &e,
        "SELECT t.id, m.written_ms, m.op_stamp FROM t JOIN _cairn_meta_t AS m ON m.rid = t.rowid",
        vec![],
    )
    .unwrap();
    assert_eq!(cols, vec!["id", "written_ms", "op_stamp"]);
    let Value::Integer(written) = got[0][1] else {
        panic!("{got:?}")
    };
    let now = int(&e, "SELECT cairn_now()");
    assert!(now >= written && now - written < 5_000, "{now} {written}");
}

#[test]
fn bad_targets_and_values() {
    let e = engine();
    exec(
        &e,
        "CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID; CREATE VIEW vw AS SELECT 1",
        vec![],
    );
    let err = |table: &str, rules: ExpiryRules| {
        e.run(Request::Expire {
            table: table.into(),
            rules: Some(rules),
        })
        .unwrap_err()
    };
    let rows = ExpiryRules {
        rows: Some(1),
        ..Default::default()
    };
    assert_eq!(err("nope", rows.clone()).kind, ErrorKind::NoSuchTable);
    assert_eq!(
        e.run(Request::Expire {
            table: "nope".into(),
            rules: None
        })
        .unwrap_err()
        .kind,
        ErrorKind::NoSuchTable
    );
    let w = err("w", rows.clone());
    assert_eq!(w.kind, ErrorKind::BadArgument);
    assert!(w.message.contains("WITHOUT ROWID"), "{w}");
    let vw = err("vw", rows.clone());
    assert_eq!(vw.kind, ErrorKind::BadArgument);
    assert!(vw.message.contains("is a view"), "{vw}");
    assert_eq!(err("_cairn_expiry", rows).kind, ErrorKind::BadArgument);
    exec(&e, "CREATE TABLE t(a)", vec![]);
    assert_eq!(
        err(
            "t",
            ExpiryRules {
                rows: Some(0),
                ..Default::default()
            }
        )
        .kind,
        ErrorKind::BadArgument
    );
    assert_eq!(
        err(
            "t",
            ExpiryRules {
                age: Some(Duration::ZERO),
                ..Default::default()
            }
        )
        .kind,
        ErrorKind::BadArgument
    );
}

#[test]
fn rules_follow_renames_and_drops() {
    let e = engine_with(quiet());
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    set(
        &e,
        "t",
        ExpiryRules {
            rows: Some(2),
            ..Default::default()
        },
    );
    exec(&e, "ALTER TABLE t RENAME TO t2", vec![]);
    assert_eq!(show(&e, "t2").rows, Some(2));
    for id in 1..=4 {
        insert(&e, "t2", id);
    }
    assert_eq!(ids(&e, "t2"), vec![3, 4]);
    assert_eq!(int(&e, "SELECT count(*) FROM _cairn_meta_t2"), 2);
    exec(&e, "DROP TABLE t2", vec![]);
    assert_eq!(e.stats().tables_with_rules, 0);
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM sqlite_schema WHERE name LIKE '\\_cairn\\_meta%' ESCAPE '\\'"
        ),
        0
    );
    // A new table under the old name starts without rules.
    exec(&e, "CREATE TABLE t2(id INTEGER PRIMARY KEY, v)", vec![]);
    for id in 1..=4 {
        insert(&e, "t2", id);
    }
    assert_eq!(ids(&e, "t2"), vec![1, 2, 3, 4]);
}

#[test]
fn background_sweep_removes_rows_without_traffic() {
    let e = engine_with(SqlConfig {
        sweep_interval: Duration::from_millis(20),
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)", vec![]);
    exec(&e, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2500) INSERT INTO t SELECT x, 'v' FROM c", vec![]);
    set(
        &e,
        "t",
        ExpiryRules {
            age: Some(Duration::from_secs(5)),
            ..Default::default()
        },
    );
    e.advance_clock(Duration::from_secs(6));
    // Only the sweep can remove them now (no statement touches t); 2500 rows take 3 batches.
    let start = Instant::now();
    while e.stats().expired_age < 2500 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "sweep too slow: {:?}",
            e.stats()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 0);
}

#[test]
fn real_time_age() {
    let e = engine_with(SqlConfig {
        sweep_interval: Duration::from_millis(50),
        ..SqlConfig::default()
    });
    exec(
        &e,
        "CREATE TABLE presence(id INTEGER PRIMARY KEY, v)",
        vec![],
    );
    set(
        &e,
        "presence",
        ExpiryRules {
            age: Some(Duration::from_millis(300)),
            ..Default::default()
        },
    );
    insert(&e, "presence", 1);
    assert_eq!(ids(&e, "presence"), vec![1]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(ids(&e, "presence"), Vec::<i64>::new());
}

#[test]
fn expiring_many_rows_does_not_stall_other_tables() {
    let e = engine_with(SqlConfig {
        sweep_interval: Duration::from_millis(10),
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE big(id INTEGER PRIMARY KEY, v); CREATE TABLE other(id INTEGER PRIMARY KEY, v)", vec![]);
    set(
        &e,
        "big",
        ExpiryRules {
            age: Some(Duration::from_secs(5)),
            ..Default::default()
        },
    );
    exec(&e, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000) INSERT INTO big SELECT x, 'v' FROM c", vec![]);
    exec(&e, "INSERT INTO other VALUES (1, 'o')", vec![]);
    e.advance_clock(Duration::from_secs(6));
    // The sweep now removes 30,000 rows in batches; other work interleaves with them.
    let mut slowest = Duration::ZERO;
    let start = Instant::now();
    while e.stats().expired_age < 30_000 {
        assert!(start.elapsed() < Duration::from_secs(20), "{:?}", e.stats());
        let t = Instant::now();
        assert_eq!(
            rows(&e, "SELECT v FROM other WHERE id = 1", vec![]),
            vec![vec![text("o")]]
        );
        exec(&e, "UPDATE other SET v = 'o' WHERE id = 1", vec![]);
        slowest = slowest.max(t.elapsed());
    }
    eprintln!(
        "slowest statement on another table during the sweep: {slowest:?} ({:?})",
        start.elapsed()
    );
    assert!(
        slowest < Duration::from_millis(250),
        "a statement on another table waited {slowest:?}"
    );
}
