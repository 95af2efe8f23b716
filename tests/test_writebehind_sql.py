"""Write-behind of cairn's SQL tables (docs/writebehind.md, "SQL tables"): an `sql_table`
mapping writes each row a client's SQL changes to the same-schema table of the database,
keyed by the table's INTEGER PRIMARY KEY, through the same durable log as keys; rows removed
by the table's expiry rules stay in the database."""

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
        d.sql("DROP TABLE IF EXISTS stats, nokey")
        return d
    return Db("sqlite", tmp_path)


def config(tmp_path, db, delay="20ms"):
    path = tmp_path / "cairn.toml"
    path.write_text(f"""
dir = "{tmp_path}"

[[writeback]]
name = "stats"
sql_table = "stats"
database = "{db.url}"
table = "stats"
delay = "{delay}"
""")
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
        # The key column cannot be UPDATEd (the old key's row would be missed): refused, and
        # moved by DELETE and INSERT instead.
        for sql in ("UPDATE stats SET id = 50 WHERE id = 5", "UPDATE stats SET rowid = 50"):
            with pytest.raises(Exception, match="cannot be UPDATEd"):
                r.execute_command("SQL.EXEC", sql)
        r.execute_command(
            "SQL.EXEC",
            "INSERT INTO stats SELECT 50, name, hits, score FROM stats WHERE id = 5;"
            "DELETE FROM stats WHERE id = 5",
        )
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


def test_a_table_without_an_integer_primary_key_is_refused(tmp_path):
    db = Db("sqlite", tmp_path)
    srv = start(config(tmp_path, db), "wbsql-nokey")
    try:
        r = srv.client()
        r.execute_command("SQL.EXEC", "CREATE TABLE nokey (a TEXT, b INTEGER)")
        r.execute_command("SQL.EXEC", "CREATE TABLE textkey (a TEXT PRIMARY KEY, b INTEGER)")
        for table in ("nokey", "textkey"):
            with pytest.raises(Exception, match="INTEGER PRIMARY KEY"):
                r.execute_command(
                    "WB.ADD", table, "sql_table", table, "database", db.url, "table", table
                )
        with pytest.raises(Exception, match="not both"):
            r.execute_command(
                "WB.ADD", "x", "sql_table", "t", "prefix", "p:", "database", db.url, "table", "t"
            )
        # Mapped before it existed, then created without a key: its changes are refused into
        # the dead-letter list (the cache keeps them).
        r.execute_command("SQL.EXEC", "CREATE TABLE stats (id TEXT, name TEXT)")
        r.execute_command("SQL.EXEC", "INSERT INTO stats VALUES ('a', 'b')")
        letters = r.execute_command("WB.DLQ", "stats", "LIST")
        assert len(letters) == 1 and b"INTEGER PRIMARY KEY" in letters[0][2]
        assert r.execute_command("SQL.QUERY", "SELECT count(*) FROM stats")[1] == [[1]]
    finally:
        srv.stop()
