//! SQL tables (cairn-only): statements with `?` parameters, reply shapes of SQL.QUERY and
//! SQL.DESCRIBE in RESP2 and RESP3, SQL.EXPIRE rules, errors, and SQL refused inside MULTI. The
//! replies come from the engine's threads through the client's mailbox, as over a socket.

use crate::testkit::*;

#[test]
fn sql_statements_and_replies() {
    check2(&[
        (r#"SQL.EXEC "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)""#, ":0"),
        (r#"SQL.EXEC "INSERT INTO t VALUES (?, ?)" 1 one"#, ":1"),
        (r#"SQL.EXEC "INSERT INTO t VALUES (?, ?)" 2"#, "-ERR the statement has 2 parameter(s) but 1 argument(s) were given"),
        (r#"SQL.QUERY "SELECT id, name FROM t ORDER BY id""#, r#"[["id", "name"], [[:1, "one"]]]"#),
        (r#"SQL.QUERY "SELECT name FROM t WHERE id = ?" 1"#, r#"[["name"], [["one"]]]"#),
        (r#"SQL.QUERY "SELECT name FROM t WHERE id = ?" 9"#, r#"[["name"], []]"#),
        ("SQL.TABLES", r#"["t"]"#),
        ("SQL.DESCRIBE t", r#"[["name", "id", "type", "INTEGER", "notnull", :0, "default", $-1, "pk", :1], ["name", "name", "type", "TEXT", "notnull", :0, "default", $-1, "pk", :0]]"#),
        ("SQL.DESCRIBE nope", "-ERR no such table: nope"),
        (r#"SQL.QUERY "SELEKT 1""#, r#"-ERR near "SELEKT": syntax error"#),
        (r#"SQL.QUERY "SELECT * FROM nope""#, "-ERR no such table: nope"),
        (r#"SQL.EXEC "INSERT INTO t VALUES (1, 'dup')""#, "-ERR UNIQUE constraint failed: t.id"),
        ("SQL.EXPIRE t", r#"["age", $-1, "rows", $-1, "ops", $-1]"#),
        ("SQL.EXPIRE t AGE 60", "+OK"),
        ("SQL.EXPIRE t BOGUS 1", "-ERR SQL.EXPIRE rules are AGE seconds, ROWS n and OPS n"),
        ("SQL.EXPIRE nope AGE 60", "-ERR no such table: nope"),
        ("SQL.QUERY", "-ERR wrong number of arguments for 'sql.query' command"),
        ("SQL.TABLES x", "-ERR wrong number of arguments for 'sql.tables' command"),
        ("MULTI", "+OK"),
        (r#"SQL.QUERY "SELECT 1""#, "-ERR 'sql.query' cannot run inside MULTI"),
        ("EXEC", "-EXECABORT Transaction discarded because of previous errors."),
    ]);
}

#[test]
fn sql_shapes_resp3() {
    check3(&[
        (r#"SQL.EXEC "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL)""#, ":0"),
        (r#"SQL.EXEC "INSERT INTO t VALUES (1, 'one', 1.5)""#, ":1"),
        (r#"SQL.QUERY "SELECT id, name, score, NULL FROM t""#, r#"[["id", "name", "score", "NULL"], [{"id": :1, "name": "one", "score": ,1.5, "NULL": _}]]"#),
        ("SQL.TABLES", r#"["t"]"#),
    ]);
}

/// The typed-argument form `TYPES spec sql args...`: integers bind as INTEGER, reals as REAL,
/// `b` as BLOB even when the bytes are UTF-8, `n` as NULL; untyped arguments stay TEXT.
#[test]
fn sql_typed_arguments() {
    check3(&[
        (r#"SQL.QUERY "SELECT ? = 5" 5"#, r#"[["? = 5"], [{"? = 5": :0}]]"#),
        (r#"SQL.QUERY TYPES i "SELECT ? = 5" 5"#, r#"[["? = 5"], [{"? = 5": :1}]]"#),
        (
            r#"SQL.QUERY TYPES irtbn "SELECT typeof(?) a, typeof(?) b, typeof(?) c, typeof(?) d, typeof(?) e" -7 2.5 x y """#,
            r#"[["a", "b", "c", "d", "e"], [{"a": "integer", "b": "real", "c": "text", "d": "blob", "e": "null"}]]"#,
        ),
        (r#"SQL.QUERY TYPES ir "SELECT ? + ?" 2 0.5"#, r#"[["? + ?"], [{"? + ?": ,2.5}]]"#),
        (r#"SQL.EXEC "CREATE TABLE t (v)""#, ":0"),
        (r#"SQL.EXEC TYPES in "INSERT INTO t VALUES (?), (?)" 42 """#, ":2"),
        (r#"SQL.QUERY "SELECT typeof(v) AS ty FROM t ORDER BY rowid""#, r#"[["ty"], [{"ty": "integer"}, {"ty": "null"}]]"#),
        (r#"SQL.QUERY TYPES i "SELECT ?" x"#, "-ERR TYPES argument 1 is not an integer"),
        (r#"SQL.QUERY TYPES r "SELECT ?" 1.5x"#, "-ERR TYPES argument 1 is not a real number"),
        (r#"SQL.QUERY TYPES n "SELECT ?" x"#, "-ERR TYPES argument 1 is not empty (NULL takes an empty argument)"),
        (r#"SQL.QUERY TYPES ii "SELECT ?" 1"#, "-ERR TYPES names 2 type(s) but 1 argument(s) were given"),
        (r#"SQL.QUERY TYPES q "SELECT ?" 1"#, "-ERR TYPES letters are i (INTEGER), r (REAL), t (TEXT), b (BLOB), n (NULL)"),
    ]);
}
