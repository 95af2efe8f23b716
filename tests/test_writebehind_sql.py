"""Write-behind of cairn's SQL tables (docs/writebehind.md, "SQL tables"): an `sql_table`
mapping writes each row a client's SQL changes to the same-schema table of the database,
keyed by the table's primary key (an INTEGER one, text, several columns, WITHOUT ROWID),
through the same durable log as keys; rows removed by the table's expiry rules stay in the
database."""

from __future__ import annotations

import time

import pytest

from conftest import TARGET
from test_writebehind import Db, drained, info, pg, start  # noqa: F401 - pg is a fixture

pytestmark = pytest.mark.cairn_only

if TARGET != "cairn":
    pytest.skip("write-behind is cairn's own", allow_module_level=True)

SCHEMA = "(id INTEGER PRIMARY KEY, name TEXT, hits INTEGER, score REAL)"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "postgres":
        d = Db("postgres", tmp_path, request.getfixturevalue("pg"))
        d.sql("DROP TABLE IF EXISTS stats, nokey, tkey, ckey, wkey, gkey")
        return d
    return Db("sqlite", tmp_path)


def config(tmp_path, db, delay="20ms", tables=("stats",)):
    path = tmp_path / "cairn.toml"
    text = f'dir = "{tmp_path}"\n'
    for table in tables:
        text += f"""
[[writeback]]
name = "{table}"
sql_table = "{table}"
database = "{db.url}"
table = "{table}"
delay = "{delay}"
"""
    path.write_text(text)
    return path


def cairn_rows(r):
    _columns, rows = r.execute_command("SQL.QUERY", "SELECT * FROM stats")
    return sorted(tuple(row) for row in rows)


def db_rows(db):
    rows = db.sql("SELECT id, name, hits, score FROM stats ORDER BY id")
    return [(i, n.encode() if n is not None else None, h, s) for i, n, h, s in rows]


def as_db(rows):
    """cairn's reply (bytes, ints, floats as text) in the database's types."""
    out = []
    for i, n, h, s in rows:
        out.append((i, n, h, float(s) if s is not None else None))
    return out


def test_inserts_updates_deletes_arrive(db, tmp_path):
    db.sql(f"CREATE TABLE stats {SCHEMA}")
    srv = start(config(tmp_path, db), f"wbsql-{db.kind}")
    try:
        r = srv.client()
        r.execute_command("SQL.EXEC", f"CREATE TABLE stats {SCHEMA}")
        for i in range(1, 6):
            r.execute_command("SQL.EXEC", "TYPES", "itir", "INSERT INTO stats VALUES (?, ?, ?, ?)", i, f"n{i}", i * 10, i / 4)
        r.execute_command("SQL.EXEC", "INSERT INTO stats (id, name) VALUES (6, NULL)")
        r.execute_command("SQL.EXEC", "UPDATE stats SET hits = hits + 1 WHERE id <= 2")
        r.execute_command("SQL.EXEC", "UPDATE stats SET name = 'it''s' WHERE id = 3")
        r.execute_command("SQL.EXEC", "DELETE FROM stats WHERE id = 4")
        # A script: what a savepoint rolled back never happened.
        r.execute_command(
            "SQL.EXEC",
            "SAVEPOINT s; INSERT INTO stats (id, name) VALUES (7, 'gone'); ROLLBACK TO s; RELEASE s;"
            "INSERT INTO stats (id, name) VALUES (8, 'kept')",
        )
        # A failed statement changes nothing.
        with pytest.raises(Exception):
            r.execute_command("SQL.EXEC", "INSERT INTO stats (id, name) VALUES (1, 'dup')")
        # Moving a row's key (the rowid itself, or through the column): the old key's row
        # leaves the database, the new one arrives.
        r.execute_command("SQL.EXEC", "UPDATE stats SET id = 50 WHERE id = 5")
        r.execute_command("SQL.EXEC", "INSERT INTO stats (id, name) VALUES (9, 'moved')")
        r.execute_command("SQL.EXEC", "UPDATE stats SET rowid = 10 WHERE id = 9")
        r.execute_command("SQL.EXEC", "DELETE FROM stats WHERE id = 10")
        drained(r, ["stats"])
        want = as_db(cairn_rows(r))
        assert [row[0] for row in want] == [1, 2, 3, 6, 8, 50]
        assert db_rows(db) == want
        # DELETE without WHERE (SQLite's truncate optimisation is off for it).
        r.execute_command("SQL.EXEC", "DELETE FROM stats")
        drained(r, ["stats"])
        assert db_rows(db) == []
        assert info(r, "stats")["sql_table"] == "stats"
        assert int(info(r, "stats")["rows_written"]) >= 7
    finally:
        srv.stop()


def test_expiry_leaves_the_database_rows(tmp_path):
    db = Db("sqlite", tmp_path)
    db.sql(f"CREATE TABLE stats {SCHEMA}")
    srv = start(config(tmp_path, db), "wbsql-expiry")
    try:
        r = srv.client()
        r.execute_command("SQL.EXEC", f"CREATE TABLE stats {SCHEMA}")
        r.execute_command("SQL.EXPIRE", "stats", "ROWS", 2)
        for i in range(1, 6):
            r.execute_command("SQL.EXEC", "TYPES", "i", "INSERT INTO stats (id, name) VALUES (?, 'x')", i)
        deadline = time.monotonic() + 10
        while len(cairn_rows(r)) > 2:
            assert time.monotonic() < deadline, "expiry did not cut the table to 2 rows"
            time.sleep(0.05)
            r.execute_command("SQL.QUERY", "SELECT count(*) FROM stats")
        drained(r, ["stats"])
        assert [row[0] for row in db_rows(db)] == [1, 2, 3, 4, 5]
    finally:
        srv.stop()


def test_a_restart_resumes_the_log(db, tmp_path):
    """Rows captured but not applied (a long delay) when cairn is killed reach the database
    after the restart, though cairn's SQL tables themselves are gone with the process."""
    db.sql(f"CREATE TABLE stats {SCHEMA}")
    srv = start(config(tmp_path, db, delay="1h"), f"wbsql-restart-{db.kind}")
    r = srv.client()
    r.execute_command("SQL.EXEC", f"CREATE TABLE stats {SCHEMA}")
    r.execute_command("SQL.EXEC", "INSERT INTO stats (id, name, hits) VALUES (1, 'a', 1), (2, 'b', 2)")
    r.execute_command("SQL.EXEC", "DELETE FROM stats WHERE id = 2")
    assert info(r, "stats")["queue"] != "0"
    srv.kill()
    assert db_rows(db) == []
    srv2 = start(config(tmp_path, db), f"wbsql-restart-{db.kind}-2")
    try:
        drained(srv2.client(), ["stats"])
        assert db_rows(db) == [(1, b"a", 1, None)]
    finally:
        srv2.stop()


def test_a_table_without_a_primary_key_is_refused(tmp_path):
    db = Db("sqlite", tmp_path)
    srv = start(config(tmp_path, db), "wbsql-nokey")
    try:
        r = srv.client()
        r.execute_command("SQL.EXEC", "CREATE TABLE nokey (a TEXT, b INTEGER)")
        r.execute_command("SQL.EXEC", "CREATE TABLE textkey (a TEXT PRIMARY KEY, b INTEGER)")
        with pytest.raises(Exception, match="needs a PRIMARY KEY"):
            r.execute_command("WB.ADD", "nokey", "sql_table", "nokey", "database", db.url, "table", "nokey")
        assert r.execute_command(
            "WB.ADD", "textkey", "sql_table", "textkey", "database", db.url, "table", "textkey"
        ) in (b"OK", "OK", True)
        with pytest.raises(Exception, match="not both"):
            r.execute_command(
                "WB.ADD", "x", "sql_table", "t", "prefix", "p:", "database", db.url, "table", "t"
            )
        # Mapped before it existed, then created without a key: its changes are refused into
        # the dead-letter list (the cache keeps them).
        r.execute_command("SQL.EXEC", "CREATE TABLE stats (id TEXT, name TEXT)")
        r.execute_command("SQL.EXEC", "INSERT INTO stats VALUES ('a', 'b')")
        letters = r.execute_command("WB.DLQ", "stats", "LIST")
        assert len(letters) == 1 and b"no PRIMARY KEY" in letters[0][2]
        assert r.execute_command("SQL.QUERY", "SELECT count(*) FROM stats")[1] == [[1]]
    finally:
        srv.stop()


# Tables keyed otherwise than by an INTEGER PRIMARY KEY: cairn's schema, and the database's.
KEYED = {
    "tkey": ("(name TEXT PRIMARY KEY, v INTEGER UNIQUE)", "(name text PRIMARY KEY, v integer UNIQUE)"),
    "ckey": ("(a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b))", "(a text, b integer, v text, PRIMARY KEY (a, b))"),
    "wkey": ("(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID", "(k text PRIMARY KEY, v text)"),
}


def keyed_rows(rows):
    """Rows as comparable tuples of text (cairn answers bytes and ints, the database str)."""
    def text(v):
        return v.decode() if isinstance(v, bytes) else (None if v is None else str(v))
    return sorted(tuple(text(v) for v in row) for row in rows)


def same_rows(r, db):
    for table in KEYED:
        _cols, mine = r.execute_command("SQL.QUERY", f"SELECT * FROM {table}")
        theirs = db.sql(f"SELECT * FROM {table}")
        assert keyed_rows(theirs) == keyed_rows(mine), table


def change_keyed_tables(r):
    run = lambda sql: r.execute_command("SQL.EXEC", sql)  # noqa: E731
    run("INSERT INTO tkey VALUES ('a', 1), ('b', 2), ('c', 3), ('it''s', 4)")
    run("INSERT INTO ckey VALUES ('x', 1, 'one'), ('x', 2, 'two'), ('y', 1, 'three'), ('1:x', 2, 'odd')")
    run("INSERT INTO wkey VALUES ('p', 'pv'), ('q', 'qv'), ('s', 'sv')")
    # A savepoint rolled back changes nothing.
    run("SAVEPOINT s; DELETE FROM wkey; UPDATE ckey SET v = 'z'; ROLLBACK TO s; RELEASE s")
    run("UPDATE tkey SET v = 20 WHERE name = 'b'")
    run("UPDATE tkey SET name = 'c2' WHERE name = 'c'")  # the key moves
    run("DELETE FROM tkey WHERE name = 'a'")
    # REPLACE removes the row holding the same UNIQUE value under another key.
    run("INSERT OR REPLACE INTO tkey VALUES ('r', 20)")
    run("UPDATE ckey SET v = 'TWO' WHERE a = 'x' AND b = 2")
    run("UPDATE ckey SET b = 9 WHERE a = 'y'")  # one of two key columns moves
    # Deletes by both key columns (('x', 2) stays).
    run("DELETE FROM ckey WHERE a = 'x' AND b = 1")
    run("UPDATE wkey SET v = 'pv2' WHERE k = 'p'")
    run("UPDATE wkey SET k = 'q2' WHERE k = 'q'")
    run("DELETE FROM wkey WHERE k = 's'")


def test_text_composite_and_without_rowid_keys(db, tmp_path):
    for table, (_mine, theirs) in KEYED.items():
        db.sql(f"CREATE TABLE {table} {theirs}")
    srv = start(config(tmp_path, db, tables=KEYED), f"wbsql-keys-{db.kind}")
    try:
        r = srv.client()
        for table, (mine, _theirs) in KEYED.items():
            r.execute_command("SQL.EXEC", f"CREATE TABLE {table} {mine}")
        change_keyed_tables(r)
        drained(r, list(KEYED))
        same_rows(r, db)
        # A delete in a batch of its own takes only its row (('x', 2) shares its first column).
        r.execute_command("SQL.EXEC", "INSERT INTO ckey VALUES ('x', 5, 'five')")
        drained(r, list(KEYED))
        r.execute_command("SQL.EXEC", "DELETE FROM ckey WHERE a = 'x' AND b = 5")
        drained(r, list(KEYED))
        same_rows(r, db)
        assert keyed_rows(db.sql("SELECT * FROM tkey")) == [("c2", "3"), ("it's", "4"), ("r", "20")]
        assert keyed_rows(db.sql("SELECT * FROM ckey")) == [("1:x", "2", "odd"), ("x", "2", "TWO"), ("y", "9", "three")]
        assert keyed_rows(db.sql("SELECT * FROM wkey")) == [("p", "pv2"), ("q2", "qv")]
        for table in KEYED:
            assert r.execute_command("WB.DLQ", table, "LIST") == []
    finally:
        srv.stop()


def test_keyed_tables_resume_after_kill9(db, tmp_path):
    """Rows of text-, composite- and WITHOUT ROWID-keyed tables captured but not applied when
    cairn is killed reach the database after the restart."""
    for table, (_mine, theirs) in KEYED.items():
        db.sql(f"CREATE TABLE {table} {theirs}")
    srv = start(config(tmp_path, db, delay="1h", tables=KEYED), f"wbsql-keys-kill-{db.kind}")
    r = srv.client()
    for table, (mine, _theirs) in KEYED.items():
        r.execute_command("SQL.EXEC", f"CREATE TABLE {table} {mine}")
    change_keyed_tables(r)
    want = {t: keyed_rows(r.execute_command("SQL.QUERY", f"SELECT * FROM {t}")[1]) for t in KEYED}
    assert info(r, "ckey")["queue"] != "0"
    srv.kill()
    assert db.sql("SELECT * FROM ckey") == []
    srv2 = start(config(tmp_path, db, tables=KEYED), f"wbsql-keys-kill-{db.kind}-2")
    try:
        drained(srv2.client(), list(KEYED))
        for table in KEYED:
            assert keyed_rows(db.sql(f"SELECT * FROM {table}")) == want[table], table
    finally:
        srv2.stop()


def test_generated_columns_are_not_written(db, tmp_path):
    """A table's generated columns (VIRTUAL or STORED, between others) stay cairn's: the
    database's table has the other columns, and each row's values land in their own columns."""
    db.sql("CREATE TABLE gkey (k text PRIMARY KEY, v integer, note text)")
    srv = start(config(tmp_path, db, tables=("gkey",)), f"wbsql-gen-{db.kind}")
    try:
        r = srv.client()
        r.execute_command(
            "SQL.EXEC",
            "CREATE TABLE gkey (k TEXT PRIMARY KEY, v INTEGER, twice INTEGER AS (v * 2) VIRTUAL, "
            "thrice INTEGER AS (v * 3) STORED, note TEXT)",
        )
        r.execute_command("SQL.EXEC", "INSERT INTO gkey (k, v, note) VALUES ('a', 1, 'x'), ('b', 2, 'y')")
        r.execute_command("SQL.EXEC", "UPDATE gkey SET v = 5, k = 'c' WHERE k = 'b'")
        drained(r, ["gkey"])
        assert keyed_rows(db.sql("SELECT k, v, note FROM gkey")) == [("a", "1", "x"), ("c", "5", "y")]
        assert r.execute_command("WB.DLQ", "gkey", "LIST") == []
    finally:
        srv.stop()
