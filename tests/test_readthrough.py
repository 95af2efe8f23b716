"""Read-through of write-behind mappings (docs/writebehind.md, "Read-through"): a read of a
missing mapped key loads its row from SQLite or PostgreSQL, once however many readers miss it,
without holding up other clients; a write made meanwhile wins; a pending delete is not undone.

PostgreSQL is a private cluster the tests start (tests/wb_pg.py); its tests are skipped, saying
why, only when it cannot start."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from pymemcache.exceptions import MemcacheServerError

from conftest import TARGET, Server
from test_writebehind import Db, info, pg  # noqa: F401 - pg is a fixture

pytestmark = pytest.mark.cairn_only  # write-behind is cairn's own

if TARGET != "cairn":
    pytest.skip("write-behind is cairn's own", allow_module_level=True)

# A view whose every read of a row sleeps, then logs the read: the loads of a test overlap for
# sure, and the database itself counts its queries.
SLOW_VIEW = """
CREATE TABLE load_log (id text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION slow_body(k text, b text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_sleep(0.8);
    INSERT INTO load_log (id) VALUES (k);
    RETURN b;
END $$;
CREATE VIEW slow_notes AS SELECT id, slow_body(id, body) AS body FROM notes;
"""


def pg_db(pg, tmp_path):
    pg.sql("DROP VIEW IF EXISTS slow_notes")
    pg.sql("DROP FUNCTION IF EXISTS slow_body(text, text)")
    pg.sql("DROP TABLE IF EXISTS load_log")
    return Db("postgres", tmp_path, pg)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "postgres":
        return pg_db(request.getfixturevalue("pg"), tmp_path)
    return Db("sqlite", tmp_path)


def config(tmp_path, db, *, delay="20ms", negative_ttl="0", ttl="0", notes_table="notes"):
    text = f"""
dir = "{tmp_path}"

[[writeback]]
name = "users"
prefix = "user:"
database = "{db.url}"
table = "users"
value = "hash"
delay = "{delay}"
read_through = true
negative_ttl = "{negative_ttl}"
ttl = "{ttl}"

[[writeback]]
name = "notes"
prefix = "note:"
database = "{db.url}"
table = "{notes_table}"
value = "string"
value_column = "body"
delay = "{delay}"
read_through = true
negative_ttl = "{negative_ttl}"
ttl = "{ttl}"
"""
    path = tmp_path / "cairn.toml"
    path.write_text(text)
    return Server(["--config", str(path)], name="wb-read").start()


def counters(r, name):
    i = info(r, name)
    return {k: int(i[k]) for k in ("loads", "load_hits", "load_misses", "load_errors",
                                   "load_joins", "negative_hits", "negatives", "last_lsn")}


def test_hash_and_string_rows_load_with_their_ttl(db, tmp_path):
    db.create()
    db.sql("INSERT INTO users (id, name, age) VALUES (1, 'ann', 30), (2, 'bob', NULL)")
    db.sql("INSERT INTO notes (id, body) VALUES ('a', 'hello'), ('b', 'from memcached'), "
           "('c', 'three')")
    srv = config(tmp_path, db, ttl="1h")
    try:
        r = srv.client()
        assert r.hgetall("user:1") == {b"name": b"ann", b"age": b"30"}
        assert 3500 < r.ttl("user:1") <= 3600
        # A null column is no field; HGET loads as HGETALL does.
        assert r.hget("user:2", "name") == b"bob"
        assert r.hgetall("user:2") == {b"name": b"bob"}
        assert r.get("note:a") == b"hello"
        assert 3500 < r.ttl("note:a") <= 3600
        assert srv.mc().get("note:b") == b"from memcached"
        assert r.mget("note:c", "note:none", "other") == [b"three", None, None]
        assert r.exists("user:3") == 0
        assert r.get("other:key") is None  # not mapped: no load
        users, notes = counters(r, "users"), counters(r, "notes")
        assert (users["loads"], users["load_hits"], users["load_misses"]) == (3, 2, 1)
        assert (notes["loads"], notes["load_hits"], notes["load_misses"]) == (4, 3, 1)
        # Loaded records are the server's own: not written back.
        assert users["last_lsn"] == 0 and notes["last_lsn"] == 0
        # Hits do not load again.
        assert r.get("note:a") == b"hello"
        assert counters(r, "notes")["loads"] == 4
    finally:
        srv.stop()


def test_a_missing_row_is_remembered_for_negative_ttl(tmp_path):
    db = Db("sqlite", tmp_path)
    db.create()
    srv = config(tmp_path, db, negative_ttl="600ms")
    try:
        r = srv.client()
        assert r.get("note:n") is None
        db.sql("INSERT INTO notes (id, body) VALUES ('n', 'late')")
        assert r.get("note:n") is None  # remembered missing: no query
        c = counters(r, "notes")
        assert (c["loads"], c["negative_hits"], c["negatives"]) == (1, 1, 1)
        time.sleep(0.7)
        assert r.get("note:n") == b"late"
        assert counters(r, "notes")["loads"] == 2
    finally:
        srv.stop()


def test_32_concurrent_misses_cause_one_query(pg, tmp_path):
    """32 clients GET one missing key while its (slow) query runs: the database sees one
    query, every client gets the row, and other clients are served meanwhile."""
    db = pg_db(pg, tmp_path)
    db.create()
    pg.sql(SLOW_VIEW)
    db.sql("INSERT INTO notes (id, body) VALUES ('hot', 'the row'), ('k2', 'other row')")
    srv = config(tmp_path, db, notes_table="slow_notes")
    try:
        clients = [srv.client() for _ in range(32)]
        for c in clients:
            c.ping()
        results = [None] * 32
        start = threading.Barrier(33)

        def read(i):
            start.wait()
            results[i] = clients[i].get("note:hot")

        threads = [threading.Thread(target=read, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        start.wait()
        time.sleep(0.2)
        # The load blocks neither I/O threads nor other keys.
        other = srv.client()
        other.set("plain", "1")
        assert other.get("plain") == b"1"
        assert time.monotonic() - t0 < 0.6, "a read of another key waited for the load"
        for t in threads:
            t.join(10)
        assert results == [b"the row"] * 32
        assert pg.sql("SELECT count(*) FROM load_log WHERE id = 'hot'") == [(1,)]
        c = counters(clients[0], "notes")
        assert (c["loads"], c["load_joins"]) == (1, 31)
    finally:
        srv.stop()


def test_a_write_during_the_load_wins(pg, tmp_path):
    db = pg_db(pg, tmp_path)
    db.create()
    pg.sql(SLOW_VIEW)
    db.sql("INSERT INTO notes (id, body) VALUES ('w', 'old row')")
    srv = config(tmp_path, db, notes_table="slow_notes", delay="5s")
    try:
        reader, writer = srv.client(), srv.client()
        got = []
        t = threading.Thread(target=lambda: got.append(reader.get("note:w")))
        t.start()
        time.sleep(0.3)  # the load is in its pg_sleep
        assert writer.set("note:w", "newer")
        t.join(10)
        assert got == [b"newer"]
        time.sleep(0.8)
        assert writer.get("note:w") == b"newer"
        # A write that leaves the key absent (set, then deleted) wins too: the row loaded
        # meanwhile is dropped, and the read answers what the cache holds.
        db.sql("INSERT INTO notes (id, body) VALUES ('w2', 'old row')")
        got.clear()
        t = threading.Thread(target=lambda: got.append(reader.get("note:w2")))
        t.start()
        time.sleep(0.3)
        writer.set("note:w2", "short-lived")
        writer.delete("note:w2")
        t.join(10)
        assert got == [None]
        time.sleep(0.8)
        assert writer.get("note:w2") is None
        assert pg.sql("SELECT count(*) FROM load_log") == [(2,)]
    finally:
        srv.stop()


def test_a_pending_delete_is_not_undone_by_a_load(tmp_path):
    """A key deleted in the cache whose delete is still in the log reads as missing, not as
    the database's row."""
    db = Db("sqlite", tmp_path)
    db.create()
    db.sql("INSERT INTO notes (id, body) VALUES ('p', 'db row')")
    srv = config(tmp_path, db, delay="1500ms")
    try:
        r = srv.client()
        assert r.get("note:p") == b"db row"
        r.delete("note:p")
        assert r.get("note:p") is None
        assert counters(r, "notes")["negative_hits"] == 1
        time.sleep(1.8)  # applied: the row is gone, and a read finds it gone
        assert db.sql("SELECT count(*) FROM notes WHERE id = 'p'") == [(0,)]
        assert r.get("note:p") is None
    finally:
        srv.stop()


def test_a_pending_value_that_expired_loads_after_the_flusher(tmp_path):
    """A newer value that expired before the flusher applied it: the load waits for the
    flusher, and reads the newer value, not the database's older row."""
    db = Db("sqlite", tmp_path)
    db.create()
    db.sql("INSERT INTO notes (id, body) VALUES ('q', 'db row')")
    srv = config(tmp_path, db, delay="1500ms")
    try:
        r = srv.client()
        r.set("note:q", "newer", px=50)
        time.sleep(0.2)
        assert db.sql("SELECT body FROM notes WHERE id = 'q'") == [("db row",)]
        assert r.get("note:q") == b"newer"
    finally:
        srv.stop()


def test_database_down_answers_an_error(pg, tmp_path):
    db = pg_db(pg, tmp_path)
    db.create()
    db.sql("INSERT INTO notes (id, body) VALUES ('up', 'fine')")
    srv = config(tmp_path, db)
    down = False
    try:
        r = srv.client()
        assert r.get("note:up") == b"fine"
        pg.stop()
        down = True
        t0 = time.monotonic()
        with pytest.raises(redis.ResponseError, match="read-through: "):
            r.get("note:down")
        assert time.monotonic() - t0 < 6
        with pytest.raises(MemcacheServerError, match="read-through"):
            srv.mc().get("note:down2")
        assert r.get("note:up") == b"fine"  # cached keys are still served
        assert counters(r, "notes")["load_errors"] == 2
        pg.start()
        down = False
        db.sql("INSERT INTO notes (id, body) VALUES ('down', 'back')")
        assert r.get("note:down") == b"back"
    finally:
        srv.stop()
        if down:
            pg.start()


def test_wb_add_reads_through(tmp_path):
    """A mapping added at run time reads through too; WB.INFO reports its settings."""
    db = Db("sqlite", tmp_path)
    db.create()
    db.sql("INSERT INTO notes (id, body) VALUES ('r', 'added later')")
    srv = config(tmp_path, db)
    try:
        r = srv.client()
        r.execute_command("WB.ADD", "more", "prefix", "m:", "database", db.url, "table", "notes",
                          "value", "string", "value_column", "body", "read_through", "true",
                          "ttl", "10s")
        assert r.get("m:r") == b"added later"
        assert 0 < r.ttl("m:r") <= 10
        i = info(r, "more")
        assert (i["read_through"], i["ttl"], i["loads"]) == ("true", "10000ms", "1")
        with pytest.raises(redis.ResponseError, match="read_through 'maybe'"):
            r.execute_command("WB.ADD", "bad", "prefix", "b:", "database", db.url,
                              "table", "notes", "read_through", "maybe")
    finally:
        srv.stop()
