"""SQL tables (issue 5): SQL.EXEC / SQL.QUERY / SQL.EXPIRE / SQL.TABLES / SQL.DESCRIBE.

Covers statement results and reply shapes (RESP2 and RESP3, exact bytes for one small case),
parameter binding with every SQLite type, the expiry rules AGE / ROWS / OPS and their hidden
row metadata, every operation the sandbox refuses, the limits (--sql-timeout on a runaway
recursive CTE while other clients keep being served, --sql-max-result, --sql-maxmemory),
pipelining, MULTI, concurrent readers, redis-cli, and the seed-002 example (per-user statistics
and presence tracking cached as rows, queried and expired) that the README shows.

SQL tables outlive FLUSHALL, and the `server` fixture is shared by the whole session, so every
test works on tables with unique names (the `table` fixture) and drops them afterwards.

All cairn-only: Redis has no SQL.* commands.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import threading
import time

import pytest
import redis

from conftest import HOST, encode_command, wait_until

pytestmark = pytest.mark.cairn_only

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
TIMEOUT_1S = "interrupted: statement ran longer than --sql-timeout (1000 ms)"
ALLOWED_PRAGMAS = ("table_info, table_xinfo, table_list, index_list, index_info, index_xinfo, "
                   "foreign_key_list, foreign_key_check, foreign_keys")

_names = itertools.count()


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------

def sql_exec(c, sql, *args):
    return c.execute_command("SQL.EXEC", sql, *args)


def sql_query(c, sql, *args):
    """SQL.QUERY; returns (columns as str, rows) with rows as the client decoded them."""
    reply = c.execute_command("SQL.QUERY", sql, *args)
    assert isinstance(reply, list) and len(reply) == 2, f"SQL.QUERY reply is not [columns, rows]: {reply!r}"
    columns, rows = reply
    return [col.decode() for col in columns], rows


def rows_of(c, sql, *args):
    return sql_query(c, sql, *args)[1]


def scalar(c, sql, *args):
    rows = rows_of(c, sql, *args)
    assert len(rows) == 1 and len(rows[0]) == 1, f"expected one value from {sql!r}, got {rows!r}"
    return rows[0][0]


def col(c, sql, *args):
    """The first column of every row."""
    return [row[0] for row in rows_of(c, sql, *args)]


def error_of(c, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        c.execute_command(*args)
    return str(e.value)


def flat_map(reply) -> dict:
    """A RESP2 map (flat [k1, v1, k2, v2 ...]) or a RESP3 map, as {str: value}."""
    if isinstance(reply, dict):
        return {k.decode(): v for k, v in reply.items()}
    assert isinstance(reply, list) and len(reply) % 2 == 0, reply
    return {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}


def rules(c, table) -> dict:
    return flat_map(c.execute_command("SQL.EXPIRE", table))


def redis_cli(port, *args, resp3=False, formatted=False, timeout=20) -> str:
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli is not installed")
    cmd = [exe, "-h", HOST, "-p", str(port)]
    if resp3:
        cmd.append("-3")
    if formatted:
        cmd.append("--no-raw")
    cmd += [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"{cmd} exited {p.returncode}: {p.stderr!r}"
    return p.stdout.decode()


@pytest.fixture
def table(server, r):
    """Makes unique table names on the shared server; drops those tables afterwards."""
    made = []

    def make(prefix="t"):
        name = f"{prefix}_{next(_names)}_{int(time.time() * 1000) % 100000}"
        made.append(name)
        return name

    yield make
    c = server.client()
    try:
        for name in reversed(made):
            try:
                sql_exec(c, f'DROP VIEW IF EXISTS "{name}"')
            except redis.ResponseError:
                pass
            try:
                sql_exec(c, f'DROP TABLE IF EXISTS "{name}"')
            except redis.ResponseError:
                pass
    finally:
        c.close()


# ----------------------------------------------------------------------------
# statements and reply shapes
# ----------------------------------------------------------------------------

def test_ddl_and_dml_counts(r, table):
    t = table("users")
    assert sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER)") == 0
    assert sql_exec(r, f"CREATE INDEX {t}_score ON {t}(score)") == 0
    assert sql_exec(r, f"INSERT INTO {t}(name, score) VALUES (?, ?)", "a", 1) == 1
    assert sql_exec(r, f"INSERT INTO {t}(name, score) VALUES ('b', 2), ('c', 3), ('d', 4)") == 3
    assert sql_exec(r, f"UPDATE {t} SET score = score * 10 WHERE score >= ?", 3) == 2
    assert sql_exec(r, f"UPDATE {t} SET score = 0 WHERE name = ?", "nobody") == 0
    assert sql_exec(r, f"DELETE FROM {t} WHERE name IN (?, ?)", "a", "b") == 2
    assert rows_of(r, f"SELECT name, score FROM {t} ORDER BY id") == [[b"c", 30], [b"d", 40]]
    # a script: statements run in order, parameters are consumed in order, counts add up
    assert sql_exec(r, f"INSERT INTO {t}(name, score) VALUES (?, ?); DELETE FROM {t} WHERE score = ?",
                    "e", 5, 40) == 2
    assert col(r, f"SELECT name FROM {t} ORDER BY id") == [b"c", b"e"]
    # a constraint violation is an error, and changes nothing
    assert "NOT NULL constraint failed" in error_of(r, "SQL.EXEC", f"INSERT INTO {t}(name) VALUES (NULL)")
    assert scalar(r, f"SELECT count(*) FROM {t}") == 2
    # SELECT through SQL.EXEC runs but changes nothing
    assert sql_exec(r, f"SELECT * FROM {t}") == 0
    # INSERT ... RETURNING through SQL.QUERY writes and returns the rows
    cols, rows = sql_query(r, f"INSERT INTO {t}(name, score) VALUES (?, ?) RETURNING name, score", "f", 6)
    assert (cols, rows) == (["name", "score"], [[b"f", 6]])
    assert scalar(r, f"SELECT count(*) FROM {t}") == 3
    # SQL.QUERY runs exactly one statement
    assert "exactly one statement" in error_of(r, "SQL.QUERY", "SELECT 1; SELECT 2")
    assert sql_exec(r, f"DELETE FROM {t}") == 3


def test_drop_table_changes_no_rows(r, table):
    t = table("drop")
    assert sql_exec(r, f"CREATE TABLE {t}(x)") == 0
    assert sql_exec(r, f"INSERT INTO {t} VALUES (1), (2), (3), (4), (5)") == 5
    assert sql_exec(r, f"DROP TABLE {t}") == 0


def test_select_shape_resp2(r, table):
    t = table("shape")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, name TEXT, ratio REAL, raw BLOB, note TEXT)")
    sql_exec(r, f"INSERT INTO {t} VALUES (1, 'one', 0.5, x'00ff', NULL), (2, 'two', -2.25, x'', 'n')")
    cols, rows = sql_query(r, f"SELECT * FROM {t} ORDER BY id")
    assert cols == ["id", "name", "ratio", "raw", "note"]
    # RESP2: rows are arrays; integers are integers, reals bulk strings, NULL nil
    assert rows == [[1, b"one", b"0.5", b"\x00\xff", None], [2, b"two", b"-2.25", b"", b"n"]]
    # no rows: the columns still come back, with an empty row array
    assert sql_query(r, f"SELECT id, name FROM {t} WHERE id > 100") == (["id", "name"], [])
    # expressions and aliases name their columns
    assert sql_query(r, "SELECT 1 + 1, 'x' AS alias") == (["1 + 1", "alias"], [[2, b"x"]])


def test_select_shape_resp3(r3, table):
    t = table("shape3")
    sql_exec(r3, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, name TEXT, ratio REAL, raw BLOB, note TEXT)")
    sql_exec(r3, f"INSERT INTO {t} VALUES (1, 'one', 0.5, x'00ff', NULL), (2, 'two', -2.25, x'', 'n')")
    cols, rows = sql_query(r3, f"SELECT * FROM {t} ORDER BY id")
    assert cols == ["id", "name", "ratio", "raw", "note"]
    # RESP3: each row is a map column -> typed value (integer, double, null)
    assert rows == [
        {b"id": 1, b"name": b"one", b"ratio": 0.5, b"raw": b"\x00\xff", b"note": None},
        {b"id": 2, b"name": b"two", b"ratio": -2.25, b"raw": b"", b"note": b"n"},
    ]
    assert isinstance(rows[0][b"ratio"], float) and isinstance(rows[0][b"id"], int)
    assert sql_query(r3, f"SELECT id FROM {t} WHERE id > 100") == (["id"], [])


def test_select_exact_bytes_resp2_and_resp3(raw, server):
    sql = "SELECT 1 AS a, 'x' AS b, NULL AS c, 2.5 AS d"
    header = b"*2\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n*1\r\n"
    assert raw.command("SQL.QUERY", sql) == header + b"*4\r\n:1\r\n$1\r\nx\r\n$-1\r\n$3\r\n2.5\r\n"
    assert raw.command("SQL.EXEC", "SELECT 1") == b":0\r\n"
    with server.raw() as c3:
        assert c3.command("HELLO", "3").startswith(b"%")
        assert c3.command("SQL.QUERY", sql) == header + (
            b"%4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n$1\r\nx\r\n$1\r\nc\r\n_\r\n$1\r\nd\r\n,2.5\r\n")
        # a real with no fraction stays a double, an integer stays an integer
        assert c3.command("SQL.QUERY", "SELECT 3.0 AS r, 3 AS i") == (
            b"*2\r\n*2\r\n$1\r\nr\r\n$1\r\ni\r\n*1\r\n%2\r\n$1\r\nr\r\n,3\r\n$1\r\ni\r\n:3\r\n")
    assert raw.command("SQL.QUERY", "SELECT 1 WHERE 0") == b"*2\r\n*1\r\n$1\r\n1\r\n*0\r\n"


def test_many_sql_commands_on_one_connection(server, r):
    """Every SQL reply arrives, command after command, on one connection, mixed with key-value
    commands; in every I/O mode. (Regression: in dispatch mode a reply completing while the
    connection's job was still on a worker lost its resume flag and the connection hung.)"""
    with server.raw(timeout=3) as c:
        for i in range(100):
            assert c.command("SQL.QUERY", "SELECT ?", i) == (
                b"*2\r\n*1\r\n$1\r\n?\r\n*1\r\n*1\r\n$%d\r\n%d\r\n" % (len(str(i)), i)), i
            if i % 10 == 0:
                assert c.command("PING") == b"+PONG\r\n"
                assert c.command("SQL.EXEC", "SELECT 1") == b":0\r\n"


# ----------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------

def test_param_integer_by_affinity_and_cast(r, r3, table):
    t = table("pint")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, n INTEGER, any_col)")
    sql_exec(r, f"INSERT INTO {t} VALUES (?, ?, ?)", 1, 42, 42)
    sql_exec(r, f"INSERT INTO {t} VALUES (?, ?, ?)", 2, -9000000000000000000, "007")
    # the INTEGER column converts the numeric text; the untyped column keeps text
    assert rows_of(r, f"SELECT n, typeof(n), any_col, typeof(any_col) FROM {t} ORDER BY id") == [
        [42, b"integer", b"42", b"text"],
        [-9000000000000000000, b"integer", b"007", b"text"],
    ]
    # comparisons against an INTEGER column are numeric too
    assert col(r, f"SELECT id FROM {t} WHERE n = ?", "42") == [1]
    assert col(r, f"SELECT id FROM {t} WHERE n < ?", "0") == [2]
    # without a column, CAST makes the integer
    assert rows_of(r, "SELECT typeof(?), CAST(? AS INTEGER) + 1, typeof(CAST(? AS INTEGER))", 5, 41, 7) == [
        [b"text", 42, b"integer"]]
    cols, rows = sql_query(r3, "SELECT CAST(? AS INTEGER) AS v", "123")
    assert rows == [{b"v": 123}] and isinstance(rows[0][b"v"], int)
    # a large integer survives exactly
    big = 2**62 + 12345
    sql_exec(r, f"INSERT INTO {t}(id, n) VALUES (3, ?)", big)
    assert scalar(r, f"SELECT n FROM {t} WHERE id = 3") == big


def test_param_float(r, r3, table):
    t = table("preal")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, x REAL)")
    sql_exec(r, f"INSERT INTO {t} VALUES (?, ?), (?, ?), (?, ?)", 1, "2.5", 2, "-0.125", 3, "1e3")
    assert rows_of(r, f"SELECT x, typeof(x) FROM {t} ORDER BY id") == [
        [b"2.5", b"real"], [b"-0.125", b"real"], [b"1000", b"real"]]
    _, rows = sql_query(r3, f"SELECT x FROM {t} ORDER BY id")
    assert [row[b"x"] for row in rows] == [2.5, -0.125, 1000.0]
    assert all(isinstance(row[b"x"], float) for row in rows)
    # an integer into a REAL column becomes a real
    sql_exec(r, f"INSERT INTO {t} VALUES (4, ?)", 7)
    assert rows_of(r3, f"SELECT x, typeof(x) FROM {t} WHERE id = 4") == [{b"x": 7.0, b"typeof(x)": b"real"}]
    assert rows_of(r3, "SELECT CAST(? AS REAL) * 2 AS y", "1.25") == [{b"y": 2.5}]
    assert col(r, f"SELECT id FROM {t} WHERE x > ? ORDER BY id", "2.4") == [1, 3, 4]


def test_param_text_unicode(r, r3, table):
    t = table("ptext")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, s TEXT)")
    samples = ["", "plain", "héllo wörld", "日本語テキスト", "emoji 🚀✓", "quote ' \" ; -- DROP TABLE x", "new\nline\ttab"]
    for i, s in enumerate(samples):
        assert sql_exec(r, f"INSERT INTO {t} VALUES (?, ?)", i, s) == 1
    rows = rows_of(r, f"SELECT s, typeof(s), length(s) FROM {t} ORDER BY id")
    assert rows == [[s.encode(), b"text", len(s)] for s in samples]
    # bound text is data, never SQL: the table is intact
    assert scalar(r, f"SELECT count(*) FROM {t}") == len(samples)
    assert col(r, f"SELECT id FROM {t} WHERE s = ?", "日本語テキスト") == [3]
    assert rows_of(r3, f"SELECT s FROM {t} WHERE id = 4") == [{b"s": "emoji 🚀✓".encode()}]
    # text that looks like a number stays text in a TEXT column
    sql_exec(r, f"INSERT INTO {t} VALUES (100, ?)", "00123")
    assert rows_of(r, f"SELECT s, typeof(s) FROM {t} WHERE id = 100") == [[b"00123", b"text"]]


def test_param_blob(r, r3, table):
    t = table("pblob")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, b)")
    binary = bytes([0xFF, 0x00, 0xFE, 0x80, 0x0D, 0x0A, 0xC3])  # not valid UTF-8
    assert sql_exec(r, f"INSERT INTO {t} VALUES (1, ?)", binary) == 1
    # valid UTF-8 bytes would be text; CAST(? AS BLOB) forces a blob
    assert sql_exec(r, f"INSERT INTO {t} VALUES (2, CAST(? AS BLOB))", "abc") == 1
    assert sql_exec(r, f"INSERT INTO {t} VALUES (3, ?)", "abc") == 1
    allbytes = bytes(range(256))
    assert sql_exec(r, f"INSERT INTO {t} VALUES (4, ?)", allbytes) == 1
    assert rows_of(r, f"SELECT b, typeof(b), length(b), hex(b) FROM {t} ORDER BY id") == [
        [binary, b"blob", len(binary), binary.hex().upper().encode()],
        [b"abc", b"blob", 3, b"616263"],
        [b"abc", b"text", 3, b"616263"],
        [allbytes, b"blob", 256, allbytes.hex().upper().encode()],
    ]
    assert rows_of(r3, f"SELECT b FROM {t} WHERE id = 1") == [{b"b": binary}]
    # a blob parameter matches the stored blob exactly
    assert col(r, f"SELECT id FROM {t} WHERE b = ?", binary) == [1]
    assert col(r, f"SELECT id FROM {t} WHERE b = CAST(? AS BLOB) ORDER BY id", "abc") == [2]
    assert rows_of(r, "SELECT typeof(?), length(?)", b"\xff\xfe", b"\xff\xfe") == [[b"blob", 2]]


def test_param_null(r, r3, table):
    t = table("pnull")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, opt TEXT, n INTEGER DEFAULT 5)")
    # NULL through the SQL literal, and by leaving a nullable column out
    assert sql_exec(r, f"INSERT INTO {t}(id, opt, n) VALUES (?, NULL, NULL)", 1) == 1
    assert sql_exec(r, f"INSERT INTO {t}(id) VALUES (?)", 2) == 1
    # an empty string is a value, not NULL
    assert sql_exec(r, f"INSERT INTO {t}(id, opt) VALUES (?, ?)", 3, "") == 1
    assert rows_of(r, f"SELECT id, opt, typeof(opt), n FROM {t} ORDER BY id") == [
        [1, None, b"null", None], [2, None, b"null", 5], [3, b"", b"text", 5]]
    assert rows_of(r3, f"SELECT opt, n FROM {t} WHERE id = 1") == [{b"opt": None, b"n": None}]
    assert col(r, f"SELECT id FROM {t} WHERE opt IS NULL ORDER BY id") == [1, 2]
    # a NULL can also be produced from a parameter
    assert sql_exec(r, f"UPDATE {t} SET opt = NULLIF(?, '') WHERE id = 3", "") == 1
    assert scalar(r, f"SELECT typeof(opt) FROM {t} WHERE id = 3") == b"null"


def test_wrong_parameter_count(r, table):
    t = table("pcount")
    sql_exec(r, f"CREATE TABLE {t}(a, b)")
    assert error_of(r, "SQL.EXEC", f"INSERT INTO {t} VALUES (?, ?)", "only-one") == (
        "the statement has 2 parameter(s) but 1 argument(s) were given")
    assert error_of(r, "SQL.QUERY", "SELECT ?", 1, 2) == (
        "the statement has 1 parameter(s) but 2 argument(s) were given")
    assert error_of(r, "SQL.QUERY", "SELECT ?") == (
        "the statement has 1 parameter(s) but 0 argument(s) were given")
    assert error_of(r, "SQL.EXEC", f"DELETE FROM {t} WHERE a = ?", 1, 2) == (
        "the statement has 1 parameter(s) but 2 argument(s) were given")
    # nothing was written by the failed statements
    assert scalar(r, f"SELECT count(*) FROM {t}") == 0
    # a script consumes the parameters statement by statement: too few, or too many
    assert error_of(r, "SQL.EXEC", f"INSERT INTO {t} VALUES (?, ?); DELETE FROM {t} WHERE a = ?", 1, 2) == (
        "the script has more parameters than the 2 argument(s) given")
    assert error_of(r, "SQL.EXEC", f"SELECT ?; SELECT ?", 1, 2, 3) == (
        "3 argument(s) given but the SQL has 2 parameter(s)")
    assert r.ping() is True


# ----------------------------------------------------------------------------
# expiry rules
# ----------------------------------------------------------------------------

def test_expire_age(r, table):
    t = table("age")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v TEXT)")
    assert r.execute_command("SQL.EXPIRE", t, "AGE", 1) == b"OK"
    assert rules(r, t) == {"age": 1, "rows": None, "ops": None}
    sql_exec(r, f"INSERT INTO {t} VALUES (1, 'old'), (2, 'old')")
    time.sleep(0.8)
    sql_exec(r, f"INSERT INTO {t} VALUES (3, 'new')")
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [1, 2, 3]
    time.sleep(0.5)
    # the old rows are 1.3 s old, the new one 0.5 s
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [3]
    time.sleep(0.8)
    # the background sweep removes rows without any statement on the table: read the hidden
    # metadata table, which does not count as touching the table
    wait_until(lambda: scalar(r, f"SELECT count(*) FROM _cairn_meta_{t}") == 0, timeout=2,
               msg="the background sweep to remove the expired row")
    assert rows_of(r, f"SELECT * FROM {t}") == []
    # the rule survives the inserts and keeps applying
    assert rules(r, t) == {"age": 1, "rows": None, "ops": None}


def test_expire_age_counts_from_last_write(r, table):
    t = table("agew")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v INTEGER)")
    r.execute_command("SQL.EXPIRE", t, "AGE", 1)
    sql_exec(r, f"INSERT INTO {t} VALUES (1, 0), (2, 0)")
    time.sleep(0.7)
    assert sql_exec(r, f"UPDATE {t} SET v = 1 WHERE id = 2") == 1  # refreshes row 2
    time.sleep(0.6)
    assert rows_of(r, f"SELECT id, v FROM {t}") == [[2, 1]]


def test_expire_rows_keeps_newest(r, table):
    t = table("rows")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v TEXT)")
    # rows already in the table are trimmed when the rule is set
    for i in range(1, 6):
        sql_exec(r, f"INSERT INTO {t} VALUES (?, ?)", i, f"v{i}")
    assert r.execute_command("SQL.EXPIRE", t, "ROWS", 3) == b"OK"
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [3, 4, 5]
    for i in range(6, 10):
        sql_exec(r, f"INSERT INTO {t} VALUES (?, ?)", i, f"v{i}")
        assert col(r, f"SELECT id FROM {t} ORDER BY id") == [i - 2, i - 1, i]
    # one multi-row insert beyond the limit keeps the newest 3 of it
    assert sql_exec(r, f"INSERT INTO {t} VALUES (20, 'a'), (21, 'b'), (22, 'c'), (23, 'd'), (24, 'e')") == 5
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [22, 23, 24]
    # "newest" is by last write: an updated row is kept over rows written after it was inserted
    sql_exec(r, f"UPDATE {t} SET v = 'touched' WHERE id = 22")
    sql_exec(r, f"INSERT INTO {t} VALUES (25, 'f')")
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [22, 24, 25]
    # deleting makes room
    sql_exec(r, f"DELETE FROM {t} WHERE id = 24")
    sql_exec(r, f"INSERT INTO {t} VALUES (26, 'g')")
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [22, 25, 26]
    assert scalar(r, f"SELECT count(*) FROM _cairn_meta_{t}") == 3
    assert rules(r, t) == {"age": None, "rows": 3, "ops": None}


def test_expire_ops(r, table):
    t = table("ops")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v TEXT)")
    assert r.execute_command("SQL.EXPIRE", t, "OPS", 3) == b"OK"
    sql_exec(r, f"INSERT INTO {t} VALUES (1, 'a')")
    # three operations on the table are made after the write; then the row is gone
    seen = [col(r, f"SELECT id FROM {t}") for _ in range(5)]
    assert seen == [[1], [1], [1], [], []]
    # every statement on the table counts, writes included
    sql_exec(r, f"INSERT INTO {t} VALUES (2, 'b')")
    sql_exec(r, f"INSERT INTO {t} VALUES (3, 'c')")           # op 1 after row 2
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [2, 3]  # op 2
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [2, 3]  # op 3: row 2 has now seen 3
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == [3]
    assert col(r, f"SELECT id FROM {t} ORDER BY id") == []
    # statements on other tables do not count
    other = table("ops_other")
    sql_exec(r, f"CREATE TABLE {other}(x)")
    sql_exec(r, f"INSERT INTO {t} VALUES (4, 'd')")
    for _ in range(6):
        sql_exec(r, f"INSERT INTO {other} VALUES (1)")
        rows_of(r, f"SELECT * FROM {other}")
    assert col(r, f"SELECT id FROM {t}") == [4]
    assert rules(r, t) == {"age": None, "rows": None, "ops": 3}


def test_expire_show_set_and_clear_rules(r, r3, table):
    t = table("rules")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY)")
    # no rules: every rule is nil (RESP2 flat map, RESP3 map)
    assert r.execute_command("SQL.EXPIRE", t) == [b"age", None, b"rows", None, b"ops", None]
    assert r3.execute_command("SQL.EXPIRE", t) == {b"age": None, b"rows": None, b"ops": None}
    assert r.execute_command("SQL.EXPIRE", t, "AGE", 3600, "ROWS", 1000, "OPS", 50) == b"OK"
    assert r.execute_command("SQL.EXPIRE", t) == [b"age", 3600, b"rows", 1000, b"ops", 50]
    assert r3.execute_command("SQL.EXPIRE", t) == {b"age": 3600, b"rows": 1000, b"ops": 50}
    # table names are case-insensitive, rule names too
    assert rules(r, t.upper()) == {"age": 3600, "rows": 1000, "ops": 50}
    # rules survive writes
    for i in range(20):
        sql_exec(r, f"INSERT INTO {t} VALUES (?)", i)
    assert rules(r, t) == {"age": 3600, "rows": 1000, "ops": 50}
    assert scalar(r, f"SELECT count(*) FROM {t}") == 20
    # 0 turns rules off
    assert r.execute_command("SQL.EXPIRE", t, "age", 0, "rows", 0, "ops", 0) == b"OK"
    assert rules(r, t) == {"age": None, "rows": None, "ops": None}
    # and with the rules off nothing expires any more
    assert r.execute_command("SQL.EXPIRE", t, "ROWS", 5) == b"OK"
    assert scalar(r, f"SELECT count(*) FROM {t}") == 5
    assert r.execute_command("SQL.EXPIRE", t, "ROWS", 0) == b"OK"
    assert rules(r, t) == {"age": None, "rows": None, "ops": None}
    for i in range(100, 110):
        sql_exec(r, f"INSERT INTO {t} VALUES (?)", i)
    assert scalar(r, f"SELECT count(*) FROM {t}") == 15


def test_expire_errors(r, table):
    t = table("experr")
    sql_exec(r, f"CREATE TABLE {t}(x)")
    assert error_of(r, "SQL.EXPIRE", "no_such_table_xyz") == "no such table: no_such_table_xyz"
    assert error_of(r, "SQL.EXPIRE", "no_such_table_xyz", "AGE", 5) == "no such table: no_such_table_xyz"
    assert "non-negative" in error_of(r, "SQL.EXPIRE", t, "AGE", -1)
    assert "non-negative" in error_of(r, "SQL.EXPIRE", t, "ROWS", "ten")
    assert "AGE seconds, ROWS n and OPS n" in error_of(r, "SQL.EXPIRE", t, "TTL", 5)
    assert "syntax" in error_of(r, "SQL.EXPIRE", t, "AGE").lower()
    assert "internal table" in error_of(r, "SQL.EXPIRE", "_cairn_expiry", "ROWS", 1)
    v = table("experr_view")
    sql_exec(r, f"CREATE VIEW {v} AS SELECT x FROM {t}")
    assert "ordinary table" in error_of(r, "SQL.EXPIRE", v, "ROWS", 1)
    # nothing was set by the failures
    assert rules(r, t) == {"age": None, "rows": None, "ops": None}


def test_hidden_metadata(r, r3, table):
    t = table("hidden")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v TEXT)")
    r.execute_command("SQL.EXPIRE", t, "AGE", 3600, "ROWS", 100)
    before_ms = int(time.time() * 1000)
    sql_exec(r, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    # SELECT * shows only the user's columns, in RESP2 and RESP3
    assert sql_query(r, f"SELECT * FROM {t} ORDER BY id") == (["id", "v"], [[1, b"a"], [2, b"b"]])
    assert rows_of(r3, f"SELECT * FROM {t} ORDER BY id") == [{b"id": 1, b"v": b"a"}, {b"id": 2, b"v": b"b"}]
    assert [flat_map(c)["name"] for c in r.execute_command("SQL.DESCRIBE", t)] == [b"id", b"v"]
    # the metadata tables are not listed
    tables = r.execute_command("SQL.TABLES")
    assert t.encode() in tables
    assert not [n for n in tables if n.lower().startswith(b"_cairn_") or n.startswith(b"sqlite_")]
    # ... but can be read when asked for, e.g. each row's write time
    cols, rows = sql_query(r, f"SELECT t.id, m.written_ms FROM {t} AS t JOIN _cairn_meta_{t} AS m "
                              f"ON m.rid = t.rowid ORDER BY t.id")
    assert cols == ["id", "written_ms"] and [row[0] for row in rows] == [1, 2]
    for _, written in rows:
        assert abs(written - before_ms) < 5000, (written, before_ms)
    # ... and are read-only
    for sql in (f"DELETE FROM _cairn_meta_{t}", f"UPDATE _cairn_meta_{t} SET written_ms = 0",
                f"INSERT INTO _cairn_meta_{t} VALUES (9, 9, 9, 9)", f"DROP TABLE _cairn_meta_{t}",
                "DELETE FROM _cairn_expiry", f"CREATE TABLE _cairn_mine_{t}(x)"):
        assert error_of(r, "SQL.EXEC", sql).startswith("SQL refused: "), sql
    assert scalar(r, f"SELECT count(*) FROM _cairn_meta_{t}") == 2
    assert rules(r, t) == {"age": 3600, "rows": 100, "ops": None}


# ----------------------------------------------------------------------------
# SQL.TABLES, SQL.DESCRIBE
# ----------------------------------------------------------------------------

def test_tables_and_describe(r, r3, table):
    a, b_ = table("desc_a"), table("desc_b")
    sql_exec(r, f"CREATE TABLE {a}(k INTEGER NOT NULL, name TEXT DEFAULT 'anon', weight REAL, "
                f"note, PRIMARY KEY (name, k))")
    sql_exec(r, f"CREATE TABLE {b_}(id INTEGER PRIMARY KEY)")
    names = r.execute_command("SQL.TABLES")
    assert isinstance(names, list)
    assert {a.encode(), b_.encode()} <= set(names)
    assert r3.execute_command("SQL.TABLES") == names
    want = [
        {"name": b"k", "type": b"INTEGER", "notnull": 1, "default": None, "pk": 2},
        {"name": b"name", "type": b"TEXT", "notnull": 0, "default": b"'anon'", "pk": 1},
        {"name": b"weight", "type": b"REAL", "notnull": 0, "default": None, "pk": 0},
        {"name": b"note", "type": b"", "notnull": 0, "default": None, "pk": 0},
    ]
    d2 = r.execute_command("SQL.DESCRIBE", a)
    assert [flat_map(c) for c in d2] == want
    # RESP2 maps are flat arrays in key order name, type, notnull, default, pk
    assert d2[0] == [b"name", b"k", b"type", b"INTEGER", b"notnull", 1, b"default", None, b"pk", 2]
    d3 = r3.execute_command("SQL.DESCRIBE", a)
    assert all(isinstance(c, dict) for c in d3) and [flat_map(c) for c in d3] == want
    assert error_of(r, "SQL.DESCRIBE", "no_such_table_xyz") == "no such table: no_such_table_xyz"
    # a dropped table leaves the list
    sql_exec(r, f"DROP TABLE {b_}")
    assert b_.encode() not in r.execute_command("SQL.TABLES")
    assert "wrong number of arguments" in error_of(r, "SQL.DESCRIBE").lower()


# ----------------------------------------------------------------------------
# the sandbox
# ----------------------------------------------------------------------------

REFUSED = [
    ("SQL.EXEC", "ATTACH 'other.db' AS other", "ATTACH is not allowed"),
    ("SQL.EXEC", "ATTACH ':memory:' AS mem", "ATTACH is not allowed"),
    ("SQL.EXEC", "DETACH main", "DETACH is not allowed"),
    ("SQL.EXEC", "VACUUM INTO '/tmp/cairn-sql-test-vacuum.db'", "VACUUM is not allowed"),
    ("SQL.QUERY", "SELECT load_extension('x')", "load_extension is not allowed"),
    ("SQL.EXEC", "SELECT load_extension('/lib/x.so', 'entry')", "load_extension is not allowed"),
    ("SQL.EXEC", "PRAGMA writable_schema=1", f"PRAGMA writable_schema is not allowed (allowed: {ALLOWED_PRAGMAS})"),
    ("SQL.QUERY", "PRAGMA journal_mode", f"PRAGMA journal_mode is not allowed (allowed: {ALLOWED_PRAGMAS})"),
    ("SQL.EXEC", "PRAGMA main.journal_mode=OFF", "PRAGMA journal_mode is not allowed"),
    ("SQL.QUERY", "SELECT * FROM pragma_journal_mode", "PRAGMA journal_mode is not allowed"),
    ("SQL.EXEC", "PRAGMA foreign_keys=OFF", "PRAGMA foreign_keys can only be read"),
    ("SQL.EXEC", "PRAGMA cache_size=1", "PRAGMA cache_size is not allowed"),
    ("SQL.QUERY", "SELECT fts3_tokenizer('simple')", "fts3_tokenizer is not allowed"),
    ("SQL.EXEC", "CREATE TEMP TABLE tmp_x(a)", "TEMP objects are not allowed"),
    ("SQL.EXEC", "CREATE VIRTUAL TABLE passwd USING csv(filename='/etc/passwd')",
     "virtual table module csv is not allowed"),
]


@pytest.mark.parametrize("command,sql,why", REFUSED, ids=[s for _, s, _ in REFUSED])
def test_refused(r, command, sql, why):
    msg = error_of(r, command, sql)
    assert msg.startswith("SQL refused: "), msg
    assert why in msg, msg
    # the connection stays usable
    assert scalar(r, "SELECT 1") == 1


def test_refused_leaves_no_files(r):
    import os
    path = "/tmp/cairn-sql-test-vacuum.db"
    if os.path.exists(path):
        os.unlink(path)
    error_of(r, "SQL.EXEC", f"VACUUM INTO '{path}'")
    error_of(r, "SQL.EXEC", f"ATTACH '{path}' AS x")
    assert not os.path.exists(path)
    # file-access functions of the sqlite3 shell do not exist here
    assert "no such function" in error_of(r, "SQL.QUERY", "SELECT readfile('/etc/passwd')")
    assert "no such function" in error_of(r, "SQL.QUERY", f"SELECT writefile('{path}', 'x')")
    assert not os.path.exists(path)


def test_refused_attach_with_parameter(r):
    # refused whatever the spelling: the file name bound as a parameter, or an expression
    for args in (("ATTACH ? AS x", "/tmp/cairn-attach.db"), ("ATTACH 'a' || 'b' AS y",), ("DETACH ?", "main")):
        assert error_of(r, "SQL.EXEC", *args).startswith("SQL refused: "), args


def test_refused_attach_with_parameter_says_why(r):
    assert error_of(r, "SQL.EXEC", "ATTACH ? AS x", "/tmp/cairn-attach.db") == "SQL refused: ATTACH is not allowed"
    assert error_of(r, "SQL.EXEC", "DETACH ?", "main") == "SQL refused: DETACH is not allowed"


def test_allowed_pragmas(r, table):
    t = table("prag")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    sql_exec(r, f"CREATE INDEX {t}_name ON {t}(name)")
    cols, rows = sql_query(r, f"PRAGMA table_info({t})")
    assert cols == ["cid", "name", "type", "notnull", "dflt_value", "pk"]
    assert rows == [[0, b"id", b"INTEGER", 0, None, 1], [1, b"name", b"TEXT", 1, None, 0]]
    assert rows_of(r, f"PRAGMA table_xinfo({t})") == [
        [0, b"id", b"INTEGER", 0, None, 1, 0], [1, b"name", b"TEXT", 1, None, 0, 0]]
    assert col(r, f"SELECT name FROM pragma_table_info('{t}') ORDER BY cid") == [b"id", b"name"]
    assert scalar(r, "PRAGMA foreign_keys") in (0, 1)
    assert [row[1] for row in rows_of(r, f"PRAGMA index_list({t})")] == [f"{t}_name".encode()]
    assert rows_of(r, f"PRAGMA index_info({t}_name)") == [[0, 1, b"name"]]


def test_pragma_index_list_sees_new_index(server, r, table):
    # PRAGMA index_list(t) and index_info(i) look t and i up in the reader connection's copy of the
    # schema and, not finding them, never read the database; readers reload it after DDL
    # every reader loads the schema as it is now ...
    clients = [server.client() for _ in range(6)]
    try:
        def warm(c):
            rows_of(c, "SELECT count(*) FROM sqlite_schema")
        ths = [threading.Thread(target=warm, args=(c,)) for c in clients]
        [th.start() for th in ths]
        [th.join() for th in ths]
        # ... then a table and an index appear
        t = table("idxlist")
        sql_exec(r, f"CREATE TABLE {t}(a, b)")
        sql_exec(r, f"CREATE INDEX {t}_a ON {t}(a)")
        got = {}

        def ask(i, c):
            got[i] = ([row[1] for row in rows_of(c, f"PRAGMA index_list({t})")],
                      rows_of(c, f"PRAGMA index_info({t}_a)"))
        ths = [threading.Thread(target=ask, args=(i, c)) for i, c in enumerate(clients)]
        [th.start() for th in ths]
        [th.join() for th in ths]
    finally:
        for c in clients:
            c.close()
    assert all(v == ([f"{t}_a".encode()], [[0, 0, b"a"]]) for v in got.values()), got


def test_syntax_error_keeps_connection_usable(r, raw, table):
    assert error_of(r, "SQL.QUERY", "SELEC 1") == 'near "SELEC": syntax error'
    assert error_of(r, "SQL.EXEC", "CREATE TABL x(a)") == 'near "TABL": syntax error'
    assert error_of(r, "SQL.QUERY", "SELECT * FROM no_such_table_xyz") == "no such table: no_such_table_xyz"
    assert "no such column" in error_of(r, "SQL.QUERY", "SELECT nope")
    assert r.ping() is True
    assert scalar(r, "SELECT 40 + 2") == 42
    # the exact reply on the wire, then the connection goes on
    assert raw.command("SQL.QUERY", "SELEC 1") == b'-ERR near "SELEC": syntax error\r\n'
    assert raw.command("PING") == b"+PONG\r\n"
    assert raw.command("SQL.EXEC", "SELECT 1") == b":0\r\n"
    # a script whose second statement does not compile reports the error; the connection goes on
    t = table("syn")
    sql_exec(r, f"CREATE TABLE {t}(x)")
    assert "syntax error" in error_of(r, "SQL.EXEC", f"INSERT INTO {t} VALUES (1); INSERTT INTO {t} VALUES (2)")
    assert r.ping() is True
    # a transaction must finish within one SQL.EXEC; a dangling one is rolled back
    assert "rolled back" in error_of(r, "SQL.EXEC", f"BEGIN; INSERT INTO {t} VALUES (99)")
    assert 99 not in col(r, f"SELECT x FROM {t}")
    assert sql_exec(r, f"BEGIN; INSERT INTO {t} VALUES (100); INSERT INTO {t} VALUES (101); COMMIT") == 2
    assert {100, 101} <= set(col(r, f"SELECT x FROM {t}"))


def test_non_utf8_sql_text_is_an_error(r):
    assert "UTF-8" in error_of(r, "SQL.QUERY", b"SELECT '\xff'")
    assert r.ping() is True


# ----------------------------------------------------------------------------
# the time limit
# ----------------------------------------------------------------------------

def _run_timed(c, *args):
    t0 = time.monotonic()
    try:
        reply = c.execute_command(*args)
    except redis.ResponseError as e:
        reply = e
    return reply, time.monotonic() - t0


def test_runaway_cte_is_interrupted_while_others_are_served(server, r, table):
    other = table("bystander")
    sql_exec(r, f"CREATE TABLE {other}(id INTEGER PRIMARY KEY, v TEXT)")
    sql_exec(r, f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 500) "
                f"INSERT INTO {other} SELECT i, 'v' || i FROM s")
    assert scalar(r, f"SELECT count(*) FROM {other}") == 500

    result = {}
    runaway = server.client()
    kv = server.client()
    sq = server.client()

    def run():
        result["reply"], result["elapsed"] = _run_timed(runaway, "SQL.QUERY", RUNAWAY)

    th = threading.Thread(target=run)
    try:
        for c in (runaway, kv, sq):  # connected before the runaway: round trips are measured
            assert c.ping() is True
        th.start()
        time.sleep(0.1)  # let the runaway start
        lat = []
        t_end = time.monotonic() + 0.6
        i = 0
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            assert kv.set(f"k{i}", f"v{i}") is True
            assert kv.get(f"k{i}") == f"v{i}".encode()
            assert kv.ping() is True
            lat.append(time.monotonic() - t0)
            i += 1
        # another client's SQL on another table completes while the runaway still runs
        t0 = time.monotonic()
        rows = rows_of(sq, f"SELECT count(*), sum(id) FROM {other} WHERE v LIKE 'v%'")
        sql_elapsed = time.monotonic() - t0
        still_running = th.is_alive()
        th.join(10)
        assert not th.is_alive()
    finally:
        for c in (runaway, kv, sq):
            c.close()
    print(f"\n[{server.mode}] runaway interrupted after {result['elapsed']:.3f}s; {len(lat)} GET/SET/PING "
          f"rounds meanwhile, max {max(lat) * 1000:.1f} ms, p90 {sorted(lat)[int(len(lat) * 0.9)] * 1000:.2f} ms, "
          f"median {sorted(lat)[len(lat) // 2] * 1000:.2f} ms; "
          f"concurrent SQL query {sql_elapsed * 1000:.1f} ms")
    assert isinstance(result["reply"], redis.ResponseError), result["reply"]
    assert str(result["reply"]) == TIMEOUT_1S
    assert 0.8 <= result["elapsed"] <= 3.0, result["elapsed"]
    # a blocked I/O thread would hold the first round trip for the rest of the runaway (~0.9 s)
    # and allow only a few rounds; the bounds leave room for a busy two-core test machine
    assert len(lat) >= 20
    assert max(lat) < 0.5, f"key-value round trips stalled during the runaway: max {max(lat):.3f}s"
    assert sorted(lat)[int(len(lat) * 0.9)] < 0.05, f"p90 {sorted(lat)[int(len(lat) * 0.9)]:.3f}s"
    assert rows == [[500, 500 * 501 // 2]]
    assert still_running, "the concurrent query finished only after the runaway ended"
    assert sql_elapsed < 0.5
    # the runaway's connection and the engine stay usable
    assert scalar(r, "SELECT 1") == 1


def test_runaway_write_is_interrupted_and_rolled_back(server, r, table):
    t = table("runaway_w")
    sql_exec(r, f"CREATE TABLE {t}(x INTEGER)")
    reply, elapsed = _run_timed(r, "SQL.EXEC", f"INSERT INTO {t} WITH RECURSIVE c(x) AS "
                                               f"(SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c")
    assert isinstance(reply, redis.ResponseError) and str(reply) == TIMEOUT_1S, reply
    assert 0.8 <= elapsed <= 3.0, elapsed
    # the statement left nothing behind and the writer takes the next write at once
    assert scalar(r, f"SELECT count(*) FROM {t}") == 0
    t0 = time.monotonic()
    assert sql_exec(r, f"INSERT INTO {t} VALUES (1)") == 1
    assert time.monotonic() - t0 < 0.5
    assert r.ping() is True


def test_sql_timeout_flag(server_factory):
    srv = server_factory("--sql-timeout", "300ms")
    c = srv.client()
    try:
        reply, elapsed = _run_timed(c, "SQL.QUERY", RUNAWAY)
        assert isinstance(reply, redis.ResponseError), reply
        assert str(reply) == "interrupted: statement ran longer than --sql-timeout (300 ms)"
        assert 0.2 <= elapsed <= 1.5, elapsed
        # a quick statement is unaffected
        assert scalar(c, "SELECT count(*) FROM (WITH RECURSIVE c(x) AS "
                         "(SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1000) SELECT x FROM c)") == 1000
    finally:
        c.close()


# ----------------------------------------------------------------------------
# result and memory limits
# ----------------------------------------------------------------------------

def test_sql_max_result(server_factory):
    srv = server_factory("--sql-max-result", "10kb")
    c = srv.client()
    try:
        sql_exec(c, "CREATE TABLE big(id INTEGER PRIMARY KEY, v TEXT)")
        for i in range(100):
            sql_exec(c, "INSERT INTO big VALUES (?, ?)", i, "x" * 200)
        msg = error_of(c, "SQL.QUERY", "SELECT * FROM big")
        assert msg == ("result larger than --sql-max-result (10240 bytes); "
                       "select fewer rows or columns (LIMIT)")
        # a big single value is cut off too
        assert "--sql-max-result" in error_of(c, "SQL.QUERY", "SELECT zeroblob(20000)")
        # a smaller result is fine, and the connection is usable
        rows = rows_of(c, "SELECT id, v FROM big ORDER BY id LIMIT 10")
        assert [row[0] for row in rows] == list(range(10)) and all(row[1] == b"x" * 200 for row in rows)
        assert scalar(c, "SELECT count(*) FROM big") == 100
        assert c.ping() is True
    finally:
        c.close()


def test_sql_maxmemory(server_factory):
    srv = server_factory("--sql-maxmemory", "1mb")
    c = srv.client()
    try:
        sql_exec(c, "CREATE TABLE fill(id INTEGER PRIMARY KEY, v BLOB)")
        blob = b"\xff" * 50_000
        inserted, err = 0, None
        for _ in range(200):
            try:
                assert sql_exec(c, "INSERT INTO fill(v) VALUES (?)", blob) == 1
                inserted += 1
            except redis.ResponseError as e:
                err = str(e)
                break
        assert err is not None, "no write failed under --sql-maxmemory 1mb"
        assert 5 <= inserted <= 21, inserted
        assert err == ("SQL memory limit reached (--sql-maxmemory 1048576 bytes): "
                       "writes are refused until rows are deleted or expire")
        # further writes keep failing, without side effects
        assert "memory limit" in error_of(c, "SQL.EXEC", "INSERT INTO fill(v) VALUES (?)", blob)
        # the key-value store is unaffected
        assert c.set("kv:after-oom", b"x" * 100_000) is True
        assert c.get("kv:after-oom") == b"x" * 100_000
        assert c.incr("kv:counter") == 1
        # reads and deletes still work, and deleting makes room for writes again
        assert scalar(c, "SELECT count(*) FROM fill") == inserted
        assert rows_of(c, "SELECT length(v) FROM fill LIMIT 1") == [[50_000]]
        assert sql_exec(c, "DELETE FROM fill WHERE id > 2") == inserted - 2
        assert sql_exec(c, "INSERT INTO fill(v) VALUES (?)", blob) == 1
        assert scalar(c, "SELECT count(*) FROM fill") == 3
    finally:
        c.close()


# ----------------------------------------------------------------------------
# protocol: pipelining, MULTI, concurrency, redis-cli
# ----------------------------------------------------------------------------

def test_pipeline_keeps_reply_order(r, raw, table):
    t = table("pipe")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v TEXT)")
    r.set("k", "value")
    # redis-py pipeline
    p = r.pipeline(transaction=False)
    p.execute_command("SQL.QUERY", "SELECT ? AS a", "first")
    p.get("k")
    p.execute_command("SQL.EXEC", f"INSERT INTO {t} VALUES (1, 'one')")
    p.set("k2", "v2")
    p.execute_command("SQL.QUERY", f"SELECT v FROM {t}")
    p.ping()
    assert p.execute() == [[[b"a"], [[b"first"]]], b"value", 1, True, [[b"v"], [[b"one"]]], True]
    # raw: everything in one write, slow SQL first; replies still come back in order
    batch = b"".join([
        encode_command("SQL.QUERY", "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                                    "SELECT x+1 FROM c WHERE x < 300000) SELECT x FROM c)"),
        encode_command("GET", "k"),
        encode_command("SQL.EXEC", f"INSERT INTO {t} VALUES (2, 'two')"),
        encode_command("INCR", "n"),
        encode_command("SQL.QUERY", "SELEC oops"),
        encode_command("SQL.QUERY", f"SELECT count(*) FROM {t}"),
        encode_command("PING"),
    ])
    raw.send(batch)
    assert raw.read_resp() == b"*2\r\n*1\r\n$8\r\ncount(*)\r\n*1\r\n*1\r\n:300000\r\n"
    assert raw.read_resp() == b"$5\r\nvalue\r\n"
    assert raw.read_resp() == b":1\r\n"
    assert raw.read_resp() == b":1\r\n"
    assert raw.read_resp() == b'-ERR near "SELEC": syntax error\r\n'
    assert raw.read_resp() == b"*2\r\n*1\r\n$8\r\ncount(*)\r\n*1\r\n*1\r\n:2\r\n"
    assert raw.read_resp() == b"+PONG\r\n"
    assert raw.read_available(0.1) == b""


def test_sql_inside_multi_is_refused(r, raw, table):
    t = table("multi")
    sql_exec(r, f"CREATE TABLE {t}(x)")
    assert raw.command("MULTI") == b"+OK\r\n"
    assert raw.command("SET", "m", "1") == b"+QUEUED\r\n"
    for args in (("SQL.QUERY", "SELECT 1"), ("SQL.EXEC", f"INSERT INTO {t} VALUES (1)"),
                 ("SQL.EXPIRE", t, "ROWS", 1), ("SQL.TABLES",), ("SQL.DESCRIBE", t)):
        reply = raw.command(*args)
        assert reply.startswith(b"-ERR '") and b"cannot run inside MULTI" in reply, (args, reply)
    assert raw.command("EXEC").startswith(b"-EXECABORT")
    # the transaction was discarded, and the SQL never ran
    assert raw.command("GET", "m") == b"$-1\r\n"
    assert scalar(r, f"SELECT count(*) FROM {t}") == 0
    assert rules(r, t) == {"age": None, "rows": None, "ops": None}
    # outside MULTI, the same connection runs SQL
    assert raw.command("SQL.QUERY", "SELECT 1") == b"*2\r\n*1\r\n$1\r\n1\r\n*1\r\n*1\r\n:1\r\n"
    # redis-py's transactional pipeline sees the error
    p = r.pipeline(transaction=True)
    p.set("m", "2")
    p.execute_command("SQL.QUERY", "SELECT 1")
    with pytest.raises(redis.ResponseError):
        p.execute()
    assert r.get("m") is None


def test_concurrent_readers(server, r, table):
    t = table("readers")
    sql_exec(r, f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, v TEXT, n INTEGER)")
    sql_exec(r, f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 2000) "
                f"INSERT INTO {t} SELECT i, 'row-' || i, i * 3 FROM s")
    errors, done = [], []

    def reader(seed):
        c = server.client(protocol=3 if seed % 2 else 2)
        try:
            for j in range(60):
                i = (seed * 7919 + j * 104729) % 2000 + 1
                rows = rows_of(c, f"SELECT v, n FROM {t} WHERE id = ?", i)
                want = [{b"v": f"row-{i}".encode(), b"n": 3 * i}] if seed % 2 else [[f"row-{i}".encode(), 3 * i]]
                if rows != want:
                    errors.append((seed, i, rows))
                if j % 10 == 0:
                    agg = rows_of(c, f"SELECT count(*), sum(n) FROM {t} WHERE id <= ?", i)
                    want = [{b"count(*)": i, b"sum(n)": 3 * i * (i + 1) // 2}] if seed % 2 else [[i, 3 * i * (i + 1) // 2]]
                    if agg != want:
                        errors.append((seed, "agg", i, agg))
            done.append(seed)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((seed, repr(e)))
        finally:
            c.close()

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(8)]
    for th in threads:
        th.start()
    # a writer on another table meanwhile does not disturb them
    w = table("readers_w")
    sql_exec(r, f"CREATE TABLE {w}(x)")
    for k in range(50):
        sql_exec(r, f"INSERT INTO {w} VALUES (?)", k)
    for th in threads:
        th.join(60)
    assert not errors, errors[:5]
    assert sorted(done) == list(range(8))
    assert scalar(r, f"SELECT count(*) FROM {w}") == 50


def test_redis_cli(server, r, table):
    t = table("cli")
    port = server.port
    assert redis_cli(port, "SQL.EXEC", f"CREATE TABLE {t}(id INTEGER PRIMARY KEY, name TEXT, score REAL)") == "0\n"
    assert redis_cli(port, "SQL.EXEC", f"INSERT INTO {t} VALUES (?, ?, ?), (?, ?, ?)",
                     1, "ana", 1.5, 2, "bo", 2) == "2\n"
    assert redis_cli(port, "SQL.QUERY", f"SELECT * FROM {t} ORDER BY id") == "id\nname\nscore\n1\nana\n1.5\n2\nbo\n2\n"
    assert redis_cli(port, "SQL.QUERY", f"SELECT name, score FROM {t} WHERE id = ?", 1, formatted=True) == (
        '1) 1) "name"\n   2) "score"\n2) 1) 1) "ana"\n      2) "1.5"\n')
    assert redis_cli(port, "SQL.QUERY", f"SELECT name, score FROM {t} WHERE id = ?", 1,
                     formatted=True, resp3=True) == (
        '1) 1) "name"\n   2) "score"\n2) 1) 1# "name" => "ana"\n      2# "score" => (double) 1.5\n')
    assert redis_cli(port, "SQL.EXPIRE", t, "ROWS", 10) == "OK\n"
    assert redis_cli(port, "SQL.EXPIRE", t, formatted=True) == (
        '1) "age"\n2) (nil)\n3) "rows"\n4) (integer) 10\n5) "ops"\n6) (nil)\n')
    assert t in redis_cli(port, "SQL.TABLES").split("\n")
    assert redis_cli(port, "SQL.EXEC", "ATTACH 'x.db' AS x", formatted=True) == (
        "(error) ERR SQL refused: ATTACH is not allowed\n")
    assert redis_cli(port, "SQL.QUERY", "SELEC 1", formatted=True) == '(error) ERR near "SELEC": syntax error\n'
    # several commands through one redis-cli connection (stdin), errors in between
    exe = shutil.which("redis-cli")
    script = (f'SQL.QUERY "SELEC 1"\nSQL.QUERY "SELECT count(*) FROM {t}"\nSET clik 1\nGET clik\n')
    p = subprocess.run([exe, "-h", HOST, "-p", str(port)], input=script.encode(), capture_output=True, timeout=20)
    assert p.stdout.decode() == 'ERR near "SELEC": syntax error\n\ncount(*)\n2\nOK\n1\n'


# ----------------------------------------------------------------------------
# seed 002: per-user statistics and presence tracking, cached as rows
# ----------------------------------------------------------------------------

def test_seed002_user_stats_and_presence(r, r3, table):
    stats, presence = table("stats"), table("presence")
    assert sql_exec(r, f"CREATE TABLE {stats}(user INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                       f"visits INTEGER NOT NULL DEFAULT 0, karma REAL, avatar BLOB)") == 0
    assert sql_exec(r, f"CREATE TABLE {presence}(user INTEGER NOT NULL, page INTEGER NOT NULL, "
                       f"seen_ms INTEGER NOT NULL, PRIMARY KEY (user, page))") == 0
    assert sql_exec(r, f"CREATE INDEX {presence}_page ON {presence}(page)") == 0
    assert r.execute_command("SQL.EXPIRE", presence, "AGE", 300, "ROWS", 10000) == b"OK"

    # the application stores what it computed: per-user statistics, typed
    users = {1: ("ana", 17, 4.5), 2: ("bo", 3, 0.25), 3: ("čedo", 0, None), 4: ("dani", 9, -1.0)}
    for uid, (name, visits, karma) in users.items():
        assert sql_exec(r, f"INSERT INTO {stats}(user, name, visits, karma, avatar) VALUES (?, ?, ?, "
                           + ("NULL" if karma is None else "?") + ", ?)",
                        *([uid, name, visits] + ([] if karma is None else [karma]) + [bytes([uid, 0xFF])])) == 1
    # presence: who is on which page, refreshed on every hit (REPLACE is a write: resets AGE)
    hits = [(1, 10), (2, 10), (3, 10), (1, 11), (4, 12), (2, 12), (1, 10)]
    now = int(time.time() * 1000)
    for uid, page in hits:
        assert sql_exec(r, f"INSERT OR REPLACE INTO {presence}(user, page, seen_ms) VALUES (?, ?, ?)",
                        uid, page, now) == 1
    assert scalar(r, f"SELECT count(*) FROM {presence}") == 6

    # query back only the parts needed
    assert col(r, f"SELECT user FROM {presence} WHERE page = ? ORDER BY user", 10) == [1, 2, 3]
    cols, rows = sql_query(r, f"SELECT s.name, s.visits, s.karma, count(p.page) AS online "
                              f"FROM {stats} AS s LEFT JOIN {presence} AS p USING (user) "
                              f"GROUP BY s.user ORDER BY s.user")
    assert cols == ["name", "visits", "karma", "online"]
    assert rows == [[b"ana", 17, b"4.5", 2], [b"bo", 3, b"0.25", 2], ["čedo".encode(), 0, None, 1],
                    [b"dani", 9, b"-1", 1]]
    assert rows_of(r3, f"SELECT name, karma, avatar FROM {stats} WHERE user = ?", 3) == [
        {b"name": "čedo".encode(), b"karma": None, b"avatar": b"\x03\xff"}]
    assert rows_of(r3, f"SELECT page, count(*) AS n FROM {presence} GROUP BY page ORDER BY n DESC, page LIMIT 1") == [
        {b"page": 10, b"n": 3}]
    # the index serves the per-page lookups
    plan = b" ".join(row[-1] for row in rows_of(r, f"EXPLAIN QUERY PLAN SELECT user FROM {presence} WHERE page = ?", 10))
    assert f"{presence}_page".encode() in plan, plan

    # modify in place instead of regenerating
    assert sql_exec(r, f"UPDATE {stats} SET visits = visits + 1, karma = karma + ? WHERE user = ?", 0.5, 1) == 1
    assert rows_of(r3, f"SELECT visits, karma FROM {stats} WHERE user = 1") == [{b"visits": 18, b"karma": 5.0}]

    # fine-grained expiry: page 10 changed, so its presence rows go, nothing else
    assert sql_exec(r, f"DELETE FROM {presence} WHERE page = ?", 10) == 3
    assert rows_of(r, f"SELECT user, page FROM {presence} ORDER BY user, page") == [[1, 11], [2, 12], [4, 12]]
    # one user's rows (logout)
    assert sql_exec(r, f"DELETE FROM {presence} WHERE user = ?", 2) == 1
    assert rows_of(r, f"SELECT user, page FROM {presence} ORDER BY user, page") == [[1, 11], [4, 12]]
    # stale presence by its own timestamp
    assert sql_exec(r, f"DELETE FROM {presence} WHERE seen_ms < ?", now + 1) == 2
    assert scalar(r, f"SELECT count(*) FROM {presence}") == 0
    # the statistics were untouched by all that
    assert scalar(r, f"SELECT count(*) FROM {stats}") == 4
    assert rules(r, presence) == {"age": 300, "rows": 10000, "ops": None}
    assert rules(r, stats) == {"age": None, "rows": None, "ops": None}


def test_seed002_presence_expires_by_age(r, table):
    presence = table("presence_age")
    sql_exec(r, f"CREATE TABLE {presence}(user INTEGER, page INTEGER, seen_ms INTEGER DEFAULT (cairn_now()), "
                f"PRIMARY KEY (user, page))")
    r.execute_command("SQL.EXPIRE", presence, "AGE", 1)
    sql_exec(r, f"INSERT INTO {presence}(user, page) VALUES (1, 5), (2, 5)")
    time.sleep(0.7)
    # user 1 is still on page 5: the REPLACE refreshes the row's age
    sql_exec(r, f"INSERT OR REPLACE INTO {presence}(user, page) VALUES (1, 5)")
    time.sleep(0.6)
    assert col(r, f"SELECT user FROM {presence} WHERE page = ?", 5) == [1]
    seen = scalar(r, f"SELECT seen_ms FROM {presence} WHERE user = 1")
    assert abs(seen - int(time.time() * 1000)) < 5000


# The README's "SQL tables" example, run through redis-cli with its formatted output.
README_EXAMPLE = [
    (["SQL.EXEC", "CREATE TABLE stats(user INTEGER PRIMARY KEY, name TEXT, visits INTEGER, karma REAL)"],
     "(integer) 0"),
    (["SQL.EXEC", "CREATE TABLE presence(user INTEGER, page INTEGER, seen_ms INTEGER, PRIMARY KEY(user, page))"],
     "(integer) 0"),
    (["SQL.EXEC", "CREATE INDEX presence_page ON presence(page)"], "(integer) 0"),
    (["SQL.EXPIRE", "presence", "AGE", "300", "ROWS", "100000"], "OK"),
    (["SQL.EXEC", "INSERT INTO stats VALUES (?, ?, ?, ?), (?, ?, ?, ?)", "42", "Ana", "17", "4.5", "7", "Bo", "3",
      "0.25"], "(integer) 2"),
    (["SQL.EXEC", "INSERT OR REPLACE INTO presence VALUES (?, ?, cairn_now()), (?, ?, cairn_now()), "
                  "(?, ?, cairn_now())", "42", "5", "7", "5", "42", "9"], "(integer) 3"),
    (["SQL.QUERY", "SELECT user FROM presence WHERE page = ? ORDER BY user", "5"],
     '1) 1) "user"\n2) 1) 1) (integer) 7\n   2) 1) (integer) 42'),
    (["SQL.QUERY", "SELECT s.name, s.visits, s.karma, count(p.page) AS online FROM stats s "
                   "LEFT JOIN presence p USING (user) GROUP BY s.user ORDER BY s.user"],
     '1) 1) "name"\n   2) "visits"\n   3) "karma"\n   4) "online"\n'
     '2) 1) 1) "Bo"\n      2) (integer) 3\n      3) "0.25"\n      4) (integer) 1\n'
     '   2) 1) "Ana"\n      2) (integer) 17\n      3) "4.5"\n      4) (integer) 2'),
    (["SQL.EXEC", "UPDATE stats SET visits = visits + 1 WHERE user = ?", "42"], "(integer) 1"),
    (["SQL.EXEC", "DELETE FROM presence WHERE page = ?", "5"], "(integer) 2"),
    (["SQL.EXEC", "DELETE FROM presence WHERE user = ?", "42"], "(integer) 1"),
    (["SQL.EXPIRE", "presence"],
     '1) "age"\n2) (integer) 300\n3) "rows"\n4) (integer) 100000\n5) "ops"\n6) (nil)'),
    (["SQL.EXEC", "ATTACH '/tmp/x.db' AS x"], "(error) ERR SQL refused: ATTACH is not allowed"),
]


def test_readme_example(server_factory):
    # a server of its own: the example uses fixed table names
    srv = server_factory()
    for args, want in README_EXAMPLE:
        assert redis_cli(srv.port, *args, formatted=True) == want + "\n", args
    assert redis_cli(srv.port, "SQL.QUERY", "SELECT name, karma FROM stats WHERE user = ?", 42,
                     formatted=True, resp3=True) == (
        '1) 1) "name"\n   2) "karma"\n2) 1) 1# "name" => "Ana"\n      2# "karma" => (double) 4.5\n')
    assert redis_cli(srv.port, "SQL.TABLES", formatted=True) == '1) "presence"\n2) "stats"\n'
