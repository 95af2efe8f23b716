"""Write-through mappings (docs/writebehind.md, "Write-through"): the reply to a write of a
mapped key comes after the database committed the row; a row the database refuses is an error
reply in the protocol's own form and the cache keeps the key's previous record.

Runs against SQLite and a private PostgreSQL (tests/wb_pg.py), as tests/test_writebehind.py."""

from __future__ import annotations

import time

import pytest
import redis
from pymemcache.exceptions import MemcacheServerError

from conftest import TARGET
from test_writebehind import Db, drained, info, pg, start  # noqa: F401 - pg is a fixture

pytestmark = pytest.mark.cairn_only

if TARGET != "cairn":
    pytest.skip("write-through is cairn's own", allow_module_level=True)

# The database refuses a note whose body is 'bad' (a CHECK constraint).
CHECK = "CHECK (body <> 'bad')"


def config(tmp_path, db, *, users_mode="through", timeout="5s", extra=""):
    text = f"""
dir = "{tmp_path}"
{extra}

[[writeback]]
name = "users"
prefix = "user:"
database = "{db.url}"
table = "users"
value = "hash"
mode = "{users_mode}"
delay = "300ms"

[[writeback]]
name = "notes"
prefix = "note:"
database = "{db.url}"
table = "notes"
value = "string"
value_column = "body"
mode = "through"
through_timeout = "{timeout}"
"""
    path = tmp_path / "cairn.toml"
    path.write_text(text)
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "postgres":
        db = Db("postgres", tmp_path, request.getfixturevalue("pg"))
    else:
        db = Db("sqlite", tmp_path)
    db.create(notes_check=CHECK)
    return db


def body(db, key):
    rows = db.sql("SELECT body FROM notes WHERE id = ?", (key,))
    return rows[0][0] if rows else None


def test_the_row_is_in_the_database_when_the_reply_arrives(db, tmp_path):
    srv = start(config(tmp_path, db), f"wt-reply-{db.kind}")
    try:
        r, mc = srv.client(), srv.mc(default_noreply=False)
        assert info(r, "notes")["mode"] == "through"
        for i in range(20):
            assert r.set("note:a", f"v{i}")
            assert body(db, "a") == f"v{i}"  # no waiting: committed before the reply
        r.hset("user:7", mapping={"name": "ann", "age": "41"})
        assert db.sql("SELECT name, age FROM users WHERE id = 7") == [("ann", 41)]
        assert mc.set("note:m", b"from memcached")
        assert body(db, "m") == "from memcached"
        assert r.append("note:m", "!") == len("from memcached!")
        assert body(db, "m") == "from memcached!"
        assert r.delete("note:a") == 1
        assert body(db, "a") is None
        assert info(r, "notes")["waiting"] == "0"
    finally:
        srv.stop()


def test_a_refused_row_is_an_error_and_the_cache_keeps_its_value(db, tmp_path):
    srv = start(config(tmp_path, db), f"wt-refuse-{db.kind}")
    try:
        r, mc = srv.client(), srv.mc(default_noreply=False)
        r.set("note:a", "good", ex=100)
        with pytest.raises(redis.ResponseError, match="^write-through refused: note:a: ") as e:
            r.set("note:a", "bad")
        assert "check" in str(e.value).lower()
        assert r.get("note:a") == b"good"
        assert 90 < r.ttl("note:a") <= 100  # the previous record, its TTL included
        assert body(db, "a") == "good"
        # A new key refused: the cache does not keep it.
        with pytest.raises(redis.ResponseError, match="write-through refused"):
            r.set("note:new", "bad")
        assert r.get("note:new") is None
        assert r.exists("note:new") == 0
        # memcached: SERVER_ERROR, and the previous value stays.
        assert mc.set("note:mc", b"first")
        with pytest.raises(MemcacheServerError, match="write-through refused"):
            mc.set("note:mc", b"bad")
        assert mc.get("note:mc") == b"first"
        assert body(db, "mc") == "first"
        # A record that cannot become a row at all (a string on a hash mapping) too.
        with pytest.raises(redis.ResponseError, match="write-through refused: user:9: .*hash"):
            r.set("user:9", "a string")
        assert r.exists("user:9") == 0
        # The writer was told: nothing is dead-lettered, and the mapping flows on.
        assert r.execute_command("WB.DLQ", "notes", "LIST") == []
        assert r.set("note:a", "after")
        assert body(db, "a") == "after"
    finally:
        srv.stop()


def test_pipelined_writes_to_one_key_keep_their_order(db, tmp_path):
    srv = start(config(tmp_path, db), f"wt-order-{db.kind}")
    try:
        r = srv.client()
        pipe = r.pipeline(transaction=False)
        for i in range(100):
            pipe.set("note:p", "bad" if i == 50 else str(i))
        replies = pipe.execute(raise_on_error=False)
        assert replies[:50] == [True] * 50 and replies[51:] == [True] * 49
        assert isinstance(replies[50], redis.ResponseError)
        assert r.get("note:p") == b"99"
        assert body(db, "p") == "99"
        assert int(info(r, "notes")["rows_written"]) >= 99  # one row write each, not coalesced
    finally:
        srv.stop()


def test_exec_waits_once_and_reports_a_refusal(db, tmp_path):
    srv = start(config(tmp_path, db), f"wt-exec-{db.kind}")
    try:
        r = srv.client()
        pipe = r.pipeline(transaction=True)
        pipe.set("note:x", "1").set("note:y", "2")
        assert pipe.execute() == [True, True]
        assert (body(db, "x"), body(db, "y")) == ("1", "2")
        pipe = r.pipeline(transaction=True)
        pipe.set("note:x", "3").set("note:y", "bad").set("note:y", "4")
        pipe.set("note:z", "bad")
        with pytest.raises(redis.ResponseError, match=r"write-through refused: note:y: .*1 more"):
            pipe.execute()
        # The rows the database took are in the cache and the database; the refused ones
        # are undone (note:y's last write, 4, came after its refused one and stays).
        assert r.get("note:x") == b"3" and body(db, "x") == "3"
        assert r.get("note:y") == b"4" and body(db, "y") == "4"
        assert r.get("note:z") is None and body(db, "z") is None
    finally:
        srv.stop()


def test_through_and_behind_side_by_side(db, tmp_path):
    srv = start(config(tmp_path, db, users_mode="behind"), f"wt-mixed-{db.kind}")
    try:
        r = srv.client()
        assert info(r, "users")["mode"] == "behind"
        r.hset("user:1", "name", "bo")
        r.set("note:n", "through")
        assert body(db, "n") == "through"
        assert db.sql("SELECT name FROM users WHERE id = 1") == []  # behind: after its delay
        drained(r, ["users"])
        assert db.sql("SELECT name FROM users WHERE id = 1") == [("bo",)]
        r.mset({"user:2": "not a hash", "note:both": "ok"})  # one command, both mappings
        assert body(db, "both") == "ok"
    finally:
        srv.stop()


def test_database_down_the_reply_waits_then_says_queued(pg, tmp_path):  # noqa: F811
    db = Db("postgres", tmp_path, pg)
    db.create(notes_check=CHECK)
    srv = start(config(tmp_path, db, timeout="400ms"), "wt-down")
    try:
        r = srv.client()
        r.set("note:d", "before")
        pg.stop()
        try:
            started = time.monotonic()
            with pytest.raises(redis.ResponseError, match="write-through pending: .*queued"):
                r.set("note:d", "while down")
            waited = time.monotonic() - started
            assert 0.35 < waited < 3, waited
            # Not refused: the cache keeps the write, which the database gets when back.
            assert r.get("note:d") == b"while down"
            assert r.set("other:key", "unmapped keys do not wait")
        finally:
            pg.start()
        drained(r, ["notes"], timeout=40)
        assert body(db, "d") == "while down"
        assert r.set("note:d", "back")
        assert body(db, "d") == "back"
    finally:
        srv.stop()
