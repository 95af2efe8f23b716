"""Short read-only SQL.QUERY statements run on the I/O thread (issue 19, part 5), against the
real server:
- their replies are the engine threads' replies (a server with `--sql-inline-steps 0` answers
  every query on the engine threads), in RESP2 and RESP3, errors included;
- a long SELECT still goes to the engine: other clients of the same I/O thread (`--threads 1`)
  are served while it runs;
- expiry-by-operations rules count inline reads;
- the slow log and commandstats see inline statements.
The /metrics counters `cairn_sql_inline_statements` and `cairn_sql_inline_handed_off` show
which way a query went. All cairn-only: Redis has no SQL.* commands.
"""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest
import redis

from conftest import HOST, encode_command, free_port

pytestmark = pytest.mark.cairn_only

LONG = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 3000000) "
        "SELECT count(*) FROM c")


def metric(port, name) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def start(server_factory, *args):
    mport = free_port()
    srv = server_factory("--metrics-port", str(mport), *args)
    return srv, mport


def load(c):
    c.execute_command("SQL.EXEC", "CREATE TABLE frag(id INTEGER PRIMARY KEY, page INTEGER, "
                                  "user INTEGER, score REAL, data TEXT, raw BLOB)")
    c.execute_command("SQL.EXEC", "CREATE INDEX frag_page ON frag(page)")
    c.execute_command(
        "SQL.EXEC",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
        "INSERT INTO frag SELECT i, i % 300, i % 17, i / 7.0, printf('row %d', i), "
        "CASE WHEN i % 5 = 0 THEN NULL ELSE x'00ff' END FROM n")


QUERIES = [
    ("SELECT * FROM frag WHERE id = ?", 7),
    ("SELECT * FROM frag WHERE id = ?", "10"),
    ("SELECT * FROM frag WHERE id = ?", 999999),
    ("SELECT id, data, raw FROM frag WHERE page = ? ORDER BY id", 3),
    ("SELECT count(*), max(score) FROM frag WHERE user = ?", 4),
    ("SELECT ?, typeof(?1)", b"\xff\x00"),
    ("SELECT * FROM nowhere WHERE id = ?", 1),
    ("SELECT ? + ?", 1),
    ("SELEC 1 WHERE 1 = ?", 1),
    ("SELECT * FROM _cairn_expiry WHERE id = ?", 1),
]


def answers(c, queries):
    out = []
    for sql, arg in queries:
        try:
            out.append(c.execute_command("SQL.QUERY", sql, arg))
        except redis.ResponseError as e:
            out.append(("error", str(e)))
    return out


def test_inline_replies_equal_the_engine_threads(server_factory):
    fast, fast_metrics = start(server_factory)
    slow, slow_metrics = start(server_factory, "--sql-inline-steps", "0")
    for protocol in (2, 3):
        a, b = fast.client(protocol=protocol), slow.client(protocol=protocol)
        try:
            if protocol == 2:
                load(a)
                load(b)
            assert answers(a, QUERIES) == answers(b, QUERIES)
        finally:
            a.close()
            b.close()
    # the fast server answered the short queries itself, the other never tried
    assert metric(fast_metrics, "cairn_sql_inline_statements_total") >= 2 * (len(QUERIES) - 4)
    assert metric(slow_metrics, "cairn_sql_inline_statements_total") == 0
    assert metric(slow_metrics, "cairn_sql_inline_handed_off_total") == 0


def test_long_select_goes_to_the_engine_and_does_not_hold_up_the_io_thread(server_factory):
    srv, mport = start(server_factory, "--threads", "1", "--sql-timeout", "30s")
    c = srv.client()
    s = socket.create_connection((HOST, srv.port))
    try:
        c.set("k", "v")
        handed = metric(mport, "cairn_sql_inline_handed_off_total")
        s.sendall(encode_command("SQL.QUERY", LONG))
        time.sleep(0.05)
        s.setblocking(False)
        worst = 0.0
        for i in range(20):
            started = time.monotonic()
            assert c.get("k") == b"v"
            assert c.execute_command("SQL.QUERY", "SELECT ?", i)[1] == [[str(i).encode()]]
            worst = max(worst, time.monotonic() - started)
        # the long statement is still running on an engine thread (no reply yet) ...
        with pytest.raises(BlockingIOError):
            s.recv(1)
        # ... while the same I/O thread served everyone else
        assert worst < 0.5, f"a GET + short query took {worst:.3f} s while the long one ran"
        assert metric(mport, "cairn_sql_inline_handed_off_total") == handed + 1
        s.setblocking(True)
        s.settimeout(60)
        buf = b""
        while not buf.endswith(b":3000000\r\n"):
            chunk = s.recv(4096)
            assert chunk, buf
            buf += chunk
        # known long now: the next one goes straight to the engine, not tried again inline
        s.sendall(encode_command("SQL.QUERY", LONG))
        buf = b""
        while not buf.endswith(b":3000000\r\n"):
            chunk = s.recv(4096)
            assert chunk, buf
            buf += chunk
        assert metric(mport, "cairn_sql_inline_handed_off_total") == handed + 1
    finally:
        s.close()
        c.close()


def test_ops_expiry_counts_inline_reads(server_factory):
    srv, mport = start(server_factory)
    c = srv.client()
    try:
        c.execute_command("SQL.EXEC", "CREATE TABLE o(id INTEGER PRIMARY KEY)")
        assert c.execute_command("SQL.EXPIRE", "o", "OPS", "3") == b"OK"
        c.execute_command("SQL.EXEC", "INSERT INTO o VALUES (1)")  # op 1 writes the row
        inline = metric(mport, "cairn_sql_inline_statements_total")
        for _ in range(3):  # ops 2, 3, 4: the row has seen 2 and 3 when 4 starts
            assert c.execute_command("SQL.QUERY", "SELECT id FROM o WHERE id = ?", 1)[1] == [[1]]
        assert metric(mport, "cairn_sql_inline_statements_total") == inline + 3
        # op 5: three operations since the row was written: it is gone
        assert c.execute_command("SQL.QUERY", "SELECT id FROM o WHERE id = ?", 1)[1] == []
    finally:
        c.close()


def test_slowlog_and_commandstats_see_inline_statements(server_factory):
    srv, mport = start(server_factory)
    c = srv.client()
    try:
        c.config_set("slowlog-log-slower-than", 0)
        c.slowlog_reset()
        before = metric(mport, "cairn_sql_inline_statements_total")
        assert c.execute_command("SQL.QUERY", "SELECT ? * 2", 21)[1] == [[42]]
        assert metric(mport, "cairn_sql_inline_statements_total") == before + 1
        entries = c.slowlog_get()
        assert any(e["command"] == b"SQL.QUERY SELECT ? * 2 21" for e in entries), entries
        stats = c.info("commandstats")
        assert stats["cmdstat_sql.query"]["calls"] >= 1
    finally:
        c.close()
