//! SQL tables in the change stream (`crate::sql_changes`): the SQL log a server keeps, replayed
//! through the command path on another server, rebuilds the same rows.

use crate::testkit::{server, Client};
use store::Author;

/// The SQL log of one server, replayed through the command path on another, rebuilds the
/// same rows: statements with their parameters, expiry rules, and the rows expiry removed,
/// in order, each named after its author; statements that failed or only read are not in it.
#[test]
fn replaying_the_sql_log_rebuilds_the_tables() {
    let primary = server(&[]);
    let mut cursor = primary.store.subscribe();
    let mut c = Client::on(&primary);
    for (line, reply) in [
        (
            r#"SQL.EXEC "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n REAL)""#,
            ":0",
        ),
        (
            r#"SQL.EXEC "INSERT INTO t VALUES (?, ?, ?)" 1 one 1.5"#,
            ":1",
        ),
        (
            r#"SQL.EXEC "INSERT INTO t VALUES (?, ?, ?)" 2 "two words" 2"#,
            ":1",
        ),
        (
            r#"SQL.EXEC "INSERT INTO t VALUES (1, 'dup', 0)""#,
            "-ERR UNIQUE constraint failed: t.id",
        ),
        (
            r#"SQL.QUERY "SELECT count(*) FROM t""#,
            r#"[["count(*)"], [[:2]]]"#,
        ),
        (r#"SQL.EXEC "UPDATE t SET n = n * 2 WHERE id = ?" 2"#, ":1"),
        ("SQL.EXPIRE t ROWS 3", "+OK"),
    ] {
        assert_eq!(c.cmd(line), reply, "{line}");
    }
    for id in 3..=6 {
        let insert = format!(r#"SQL.EXEC "INSERT INTO t VALUES ({id}, 'r{id}', {id})""#);
        assert_eq!(c.cmd(&insert), ":1");
    }
    let count = r#"SQL.QUERY "SELECT count(*) FROM t""#;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while c.cmd(count) != r#"[["count(*)"], [[:3]]]"# {
        assert!(std::time::Instant::now() < deadline, "expiry kept 3 rows");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut log = Vec::new();
    cursor
        .read(primary.store.sql_log(), usize::MAX, |r| {
            log.push((r.author, r.key().to_vec()))
        })
        .expect("the backlog holds the whole log");
    let commands: Vec<String> = log
        .iter()
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
        .collect();
    // create, 2 inserts, update, rules, 4 inserts and, each right after the insert that
    // put the table over its ROWS rule, the 3 rows expiry removed.
    assert_eq!(log.len(), 12, "{commands:#?}");
    let client = Author(c.info.id);
    for ((author, _), command) in log.iter().zip(&commands) {
        let by_expiry = command.contains("DELETE FROM \"t\" WHERE rowid = ?");
        let expected = if by_expiry { Author::SERVER } else { client };
        assert_eq!(*author, expected, "{command:?}");
    }
    assert_eq!(commands.iter().filter(|c| c.contains("DELETE")).count(), 3);
    assert!(commands[1].starts_with("*5\r\n$8\r\nSQL.EXEC\r\n"));
    assert!(commands[1].ends_with("$3\r\none\r\n$3\r\n1.5\r\n"));
    let rules = "$10\r\nSQL.EXPIRE\r\n$1\r\nt\r\n$3\r\nAGE\r\n$1\r\n0\r\n$4\r\nROWS\r\n$1\r\n3\r\n";
    assert!(commands[4].contains(rules), "{}", commands[4]);

    let replica = server(&[]);
    let mut r = Client::on(&replica);
    for (_, command) in &log {
        let reply = r.feed(command);
        assert!(
            !reply.starts_with(b"-"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    }
    let dump = r#"SQL.QUERY "SELECT rowid, * FROM t ORDER BY rowid""#;
    let rows = c.cmd(dump);
    assert_eq!(
        rows,
        r#"[["id", "id", "name", "n"], [[:4, :4, "r4", "4"], [:5, :5, "r5", "5"], [:6, :6, "r6", "6"]]]"#
    );
    assert_eq!(r.cmd(dump), rows);
}

/// Without a cursor the SQL log only numbers its changes (nothing is encoded or kept).
#[test]
fn without_a_consumer_sql_changes_are_only_numbered() {
    let shared = server(&[]);
    let mut c = Client::on(&shared);
    let before = shared.store.positions()[shared.store.sql_log()];
    c.cmd(r#"SQL.EXEC "CREATE TABLE u (x)""#);
    c.cmd(r#"SQL.EXEC "INSERT INTO u VALUES (1)""#);
    c.cmd(r#"SQL.QUERY "SELECT * FROM u""#);
    let after = shared.store.positions()[shared.store.sql_log()];
    assert_eq!(after - before, 2);
    assert_eq!(shared.store.change_backlog_memory(), 0);
}

/// Typed parameters (`SQL.EXEC TYPES ...`) replay typed: an INTEGER stays an INTEGER in an
/// untyped column, a NULL a NULL, a UTF-8 BLOB a BLOB, a REAL its exact value; untyped
/// statements replay untyped.
#[test]
fn typed_parameters_replay_with_their_types() {
    let primary = server(&[]);
    let mut cursor = primary.store.subscribe();
    let mut c = Client::on(&primary);
    for (line, reply) in [
        (r#"SQL.EXEC "CREATE TABLE v (x)""#, ":0"),
        (
            r#"SQL.EXEC TYPES irbnt "INSERT INTO v VALUES (?), (?), (?), (?), (?)" 5 0.1 abc "" 7"#,
            ":5",
        ),
        (r#"SQL.EXEC "INSERT INTO v VALUES (?)" 8"#, ":1"),
    ] {
        assert_eq!(c.cmd(line), reply, "{line}");
    }
    let mut log = Vec::new();
    cursor
        .read(primary.store.sql_log(), usize::MAX, |r| {
            log.push(r.key().to_vec())
        })
        .expect("the backlog holds the whole log");
    assert_eq!(log.len(), 3);
    let typed = String::from_utf8_lossy(&log[1]).into_owned();
    assert!(
        typed.contains("$5\r\nTYPES\r\n$5\r\nirbnt\r\n"),
        "{typed:?}"
    );
    assert!(!String::from_utf8_lossy(&log[2]).contains("TYPES"));
    let replica = server(&[]);
    let mut r = Client::on(&replica);
    for command in &log {
        let reply = r.feed(command);
        assert!(
            !reply.starts_with(b"-"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    }
    let dump = r#"SQL.QUERY "SELECT typeof(x), x = 0.1 FROM v ORDER BY rowid""#;
    let rows = c.cmd(dump);
    assert_eq!(
        rows,
        r#"[["typeof(x)", "x = 0.1"], [["integer", :0], ["real", :1], ["blob", :0], ["null", $-1], ["text", :0], ["text", :0]]]"#
    );
    assert_eq!(r.cmd(dump), rows);
}
