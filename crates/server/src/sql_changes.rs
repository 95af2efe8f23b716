//! SQL tables in the change stream: the SQL engine tells of each change its writer makes
//! (`sql::ChangeSink`), and this sink appends it to the store's SQL log as the command that
//! replays it, RESP-encoded: `SQL.EXEC sql params...` (or `SQL.QUERY` for a statement that came
//! as a query), `SQL.EXPIRE table AGE a ROWS r OPS o` for new expiry rules, and
//! `SQL.EXEC "DELETE FROM <table> WHERE rowid = ?" <rowid>` for a row expiry removed. Replayed
//! in log order through the command path on an engine holding the same tables, they rebuild
//! the same rows (a replica or a snapshot restore does this).
//!
//! The SQL log numbers every change like the shards' logs do, whether or not a consumer reads
//! it; the command is only encoded while one does (`Store::record_sql_with`).

use std::sync::Arc;

use sql::{SqlChange, Value};
use store::{Author, Store};

/// The engine's change sink, writing into `store`'s SQL log.
pub struct SqlChanges(pub Arc<Store>);

impl sql::ChangeSink for SqlChanges {
    fn wants(&self) -> bool {
        // Always: even unread, a change takes its sequence number (the consistent cut).
        true
    }

    fn changed(&self, change: &SqlChange<'_>) {
        let store = &self.0;
        let author = match change {
            SqlChange::Statement { origin, .. } | SqlChange::Rules { origin, .. } => {
                Author(*origin)
            }
            SqlChange::Expired { .. } => Author::SERVER,
        };
        store.record_sql_with(author, || replay_command(change));
    }
}

/// The command that replays `change`, RESP-encoded (a request as a client sends it).
pub fn replay_command(change: &SqlChange<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match change {
        SqlChange::Statement {
            query, sql, params, ..
        } => {
            let name: &[u8] = if *query { b"SQL.QUERY" } else { b"SQL.EXEC" };
            resp::reply::array_len(&mut out, 2 + params.len());
            resp::reply::bulk(&mut out, name);
            resp::reply::bulk(&mut out, sql);
            for param in params.iter() {
                match param {
                    Value::Text(b) | Value::Blob(b) => resp::reply::bulk(&mut out, b),
                    Value::Integer(i) => resp::reply::bulk(&mut out, i.to_string().as_bytes()),
                    Value::Real(f) => resp::reply::bulk(&mut out, f.to_string().as_bytes()),
                    // Protocol parameters are never NULL (they arrive as bulk strings).
                    Value::Null => resp::reply::bulk(&mut out, b""),
                }
            }
        }
        SqlChange::Rules { table, rules, .. } => {
            resp::reply::array_len(&mut out, 8);
            resp::reply::bulk(&mut out, b"SQL.EXPIRE");
            resp::reply::bulk(&mut out, table.as_bytes());
            for (name, value) in [
                ("AGE", rules.age.map_or(0, |d| d.as_secs())),
                ("ROWS", rules.rows.unwrap_or(0)),
                ("OPS", rules.ops.unwrap_or(0)),
            ] {
                resp::reply::bulk(&mut out, name.as_bytes());
                resp::reply::bulk(&mut out, value.to_string().as_bytes());
            }
        }
        SqlChange::Expired { table, rowid } => {
            let delete = format!(
                "DELETE FROM \"{}\" WHERE rowid = ?",
                table.replace('"', "\"\"")
            );
            resp::reply::array_len(&mut out, 3);
            resp::reply::bulk(&mut out, b"SQL.EXEC");
            resp::reply::bulk(&mut out, delete.as_bytes());
            resp::reply::bulk(&mut out, rowid.to_string().as_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
        let rules =
            "$10\r\nSQL.EXPIRE\r\n$1\r\nt\r\n$3\r\nAGE\r\n$1\r\n0\r\n$4\r\nROWS\r\n$1\r\n3\r\n";
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
}
