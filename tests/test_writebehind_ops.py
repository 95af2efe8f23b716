"""Write-behind operations (docs/writebehind.md): dead letters kept in the database across a
restart, WB.DLQ LIST / RETRY / DROP, CONFIG SET of the wb-* settings, a 30 s PostgreSQL outage
under writes through both protocols, and evictions and expirations that never drop a pending
write. The helpers and the PostgreSQL fixture are test_writebehind's."""

from __future__ import annotations

import re
import threading
import time

import pytest
import redis

import test_writebehind as wbt
from conftest import TARGET
from test_writebehind import Db, config, drained, info, start

pytestmark = pytest.mark.cairn_only  # write-behind is cairn's own

if TARGET != "cairn":
    pytest.skip("write-behind is cairn's own", allow_module_level=True)

pg = wbt.pg  # the module's private PostgreSQL cluster (a fixture)
db = wbt.db  # SQLite and PostgreSQL, each test once per database (a fixture)


def refuse_poison(db, on):
    """Makes the notes table refuse (or accept again) the body 'poison'."""
    if db.kind == "postgres":
        if on:
            db.sql("ALTER TABLE notes ADD CONSTRAINT no_poison CHECK (body <> 'poison')")
        else:
            db.sql("ALTER TABLE notes DROP CONSTRAINT no_poison")
        return
    for event in ("INSERT", "UPDATE"):
        name = f"no_poison_{event.lower()}"
        if on:
            db.sql(f"CREATE TRIGGER {name} BEFORE {event} ON notes WHEN NEW.body = 'poison' "
                   "BEGIN SELECT RAISE(ABORT, 'poison refused'); END")
        else:
            db.sql(f"DROP TRIGGER {name}")


def wait_for(what, check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except redis.BusyLoadingError:  # a restarted server loads its snapshot first
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def restart(path, name):
    """Starts the server and waits until it has loaded its snapshot (LOADING before)."""
    srv = start(path, name)
    r = srv.client()
    wait_for("the snapshot loaded", lambda: info(r, "notes") is not None)
    return srv, r


def test_dead_letters_survive_a_restart_then_retry_and_drop(db, tmp_path):
    """Refused changes become letters in cairn_wb_dead (with the checkpoint that skips them);
    a restart finds them; RETRY re-captures each key's CURRENT value (a key changed since keeps
    its newer row); DROP removes letters from the database too."""
    db.create()
    refuse_poison(db, True)
    path = config(tmp_path, db, retries=1)
    srv = start(path, f"wb-dlq-{db.kind}")
    r = srv.client()
    before = int(time.time() * 1000)
    r.set("note:a", "fine")
    r.set("note:bad", "poison")
    r.set("note:later", "poison")
    r.set("note:gone", "poison")
    state = drained(r, ["notes"])[0]
    assert state["dead_letters"] == "3", state
    letters = r.execute_command("WB.DLQ", "notes", "LIST")
    assert [entry[1] for entry in letters] == [b"note:gone", b"note:later", b"note:bad"]
    lsns = [entry[0] for entry in letters]
    assert lsns == sorted(lsns, reverse=True)  # newest first
    lsn, key, reason, value, when = letters[2]
    assert (key, value) == (b"note:bad", b"poison")
    assert b"poison" in reason or b"no_poison" in reason, reason
    assert before - 1000 <= when <= time.time() * 1000 + 1000
    assert len(r.execute_command("WB.DLQ", "notes", "LIST", 1)) == 1
    # note:later changes after its letter: the newer value reaches the table.
    r.set("note:later", "newer")
    drained(r, ["notes"])
    assert db.sql("SELECT count(*) FROM cairn_wb_dead") == [(3,)]
    srv.stop()

    srv, r = restart(path, f"wb-dlq-{db.kind}-2")
    try:
        wait_for("the letters loaded", lambda: info(r, "notes")["dead_letters"] == "3")
        assert r.execute_command("WB.DLQ", "notes", "LIST") == letters
        # DROP one letter by number: gone from the list at once, from the database soon.
        assert r.execute_command("WB.DLQ", "notes", "DROP", lsns[0], 999999) == 1
        wait_for("the dropped letter deleted",
                 lambda: db.sql("SELECT count(*) FROM cairn_wb_dead") == [(2,)])
        refuse_poison(db, False)
        with r.pipeline(transaction=True) as t:
            t.execute_command("WB.DLQ", "notes", "RETRY")
            with pytest.raises(redis.ResponseError, match="not allowed in a transaction"):
                t.execute()
        # RETRY: note:bad's current value is re-captured and arrives; note:later's letter
        # does not bring its old value back over the newer row.
        assert r.execute_command("WB.DLQ", "notes", "RETRY") == 2
        assert r.execute_command("WB.DLQ", "notes", "LIST") == []
        drained(r, ["notes"])
        rows = dict(db.sql("SELECT id, body FROM notes"))
        assert rows == {"a": "fine", "bad": "poison", "later": "newer"}, rows
        wait_for("the retried letters deleted",
                 lambda: db.sql("SELECT count(*) FROM cairn_wb_dead") == [(0,)])
        with pytest.raises(redis.ResponseError, match="no such write-behind mapping"):
            r.execute_command("WB.DLQ", "nope", "LIST")
        with pytest.raises(redis.ResponseError, match="positive integer"):
            r.execute_command("WB.DLQ", "notes", "RETRY", "x")
        with pytest.raises(redis.ResponseError, match="not an integer"):
            r.execute_command("WB.DLQ", "notes", "LIST", "-1")
        with pytest.raises(redis.ResponseError, match="subcommands"):
            r.execute_command("WB.DLQ", "notes", "FROB")
    finally:
        srv.stop()
    srv, r = restart(path, f"wb-dlq-{db.kind}-3")
    try:
        drained(r, ["notes"])
        time.sleep(0.3)
        assert r.execute_command("WB.DLQ", "notes", "LIST") == []
    finally:
        srv.stop()


def test_config_set_wb_settings(pg, tmp_path):
    """wb-fsync, wb-on-full and wb-max-bytes change at run time; a smaller wb-max-bytes
    applies to the next writes; CONFIG REWRITE keeps them."""
    db = Db("postgres", tmp_path, pg)
    db.create()
    path = config(tmp_path, db)
    srv = start(path, "wb-config")
    try:
        r = srv.client()
        assert r.config_get("wb-*") == {"wb-fsync": "everysec", "wb-max-bytes": str(1 << 30),
                                        "wb-on-full": "error"}
        assert r.config_set("wb-fsync", "always")
        r.set("note:always", "1")  # the reply comes after a group fsync
        assert r.config_set("wb-on-full", "block")
        assert r.config_set("wb-on-full", "error")
        with pytest.raises(redis.ResponseError, match="at least 64kb"):
            r.config_set("wb-max-bytes", "10kb")
        with pytest.raises(redis.ResponseError, match="expected always or everysec"):
            r.config_set("wb-fsync", "never")
        drained(r, ["notes"])
        pg.stop()
        value = "v" * 1000
        for i in range(100):  # ~100 kb in the log, under the 1gb bound
            r.set(f"note:{i % 20}", f"{i}:{value}")
        assert int(info(r, "notes")["bytes"]) > 64 << 10
        assert r.config_set("wb-max-bytes", "64kb")
        with pytest.raises(redis.ResponseError, match="BUSY write-behind queue full"):
            r.set("note:1", "refused")
        assert r.set("other:key", "unmapped keys are unaffected")
        pg.start()
        drained(r, ["notes"], timeout=40)
        # Applied, the log shrinks below the new bound (its full segment is replaced).
        wait_for("the log to shrink", lambda: int(info(r, "notes")["bytes"]) < 64 << 10)
        assert r.set("note:after", "accepted again")
        assert dict(db.sql("SELECT id, body FROM notes"))["19"] == f"99:{value}"
        r.config_rewrite()
        text = path.read_text()
        head = text.split("[[writeback]]")[0]  # settings live above the mapping tables
        assert re.search(r'^wb-fsync = "always"$', head, re.M), text
        assert re.search(r"^wb-max-bytes = 65536$", head, re.M), text
    finally:
        srv.stop()
    srv, r = restart(path, "wb-config-2")
    try:
        assert r.config_get("wb-*") == {"wb-fsync": "always",
                                                   "wb-max-bytes": "65536", "wb-on-full": "error"}
    finally:
        srv.stop()


def test_postgres_down_30s_under_writes_everything_drains(pg, tmp_path):
    """What it proves (issue 15): PostgreSQL stopped for 30 s while a client keeps writing
    through RESP (SET, HSET) and memcached (set) at a modest rate, under a wb-max-bytes the
    outage does not reach: no write is refused or slowed into an error, the log holds them,
    and once PostgreSQL is back everything drains and every acknowledged write's last value
    is in the table. Runs ~40 s."""
    db = Db("postgres", tmp_path, pg)
    db.create()
    srv = start(config(tmp_path, db, extra='wb-max-bytes = "64mb"'), "wb-outage")
    try:
        r = srv.client()
        mc = srv.mc()
        acked = {}  # key -> last acknowledged value (values grow)
        errors = []
        stop = threading.Event()

        def writer():
            w = srv.client()
            seq = 0
            try:
                while not stop.is_set():
                    seq += 1
                    k = (seq // 3) % 150
                    if seq % 3 == 0:
                        w.set(f"note:{k}", str(seq))
                        acked[f"note:{k}"] = seq
                    elif seq % 3 == 1:
                        w.hset(f"user:{k}", mapping={"name": f"n{seq}", "age": str(seq)})
                        acked[f"user:{k}"] = seq
                    else:
                        assert mc.set(f"note:m{k}", str(seq), noreply=False)
                        acked[f"note:m{k}"] = seq
                    time.sleep(0.004)  # a modest rate: ~200 writes a second
            except Exception as e:  # noqa: BLE001 - the test fails on any write error
                errors.append(repr(e))

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        time.sleep(2)
        pg.stop()
        t0 = time.monotonic()
        wait_for("the flusher to see the outage", lambda: info(r, "notes")["last_error"] != "")
        time.sleep(max(0.0, 30 - (time.monotonic() - t0)))
        queued = int(info(r, "notes")["queue"]) + int(info(r, "users")["queue"])
        pg.start()
        time.sleep(2)
        stop.set()
        thread.join(10)
        assert not errors, errors
        assert queued > 1000, queued  # the outage's writes waited in the log
        drained(r, timeout=30)
        rows = {f"note:{i}": int(b) for i, b in db.sql("SELECT id, body FROM notes")}
        users = {f"user:{i}": (n, age) for i, n, age in db.sql("SELECT id, name, age FROM users")}
        assert len(acked) == 450
        for key, v in acked.items():
            if key.startswith("user:"):
                assert users.get(key) == (f"n{v}", v), (key, v, users.get(key))
            else:
                assert rows.get(key) == v, (key, v, rows.get(key))
    finally:
        srv.stop()


def test_evicted_and_expired_keys_still_reach_the_database(tmp_path):
    """maxmemory small: mapped keys are evicted (and others expire) before the flusher ran
    (delay 3 s); their rows arrive all the same, with their last values."""
    db = Db("sqlite", tmp_path)
    db.create()
    extra = 'maxmemory = "2mb"\nmaxmemory-policy = "allkeys-lru"'
    srv = start(config(tmp_path, db, delay="3s", extra=extra), "wb-evict")
    try:
        r = srv.client()
        p = r.pipeline(transaction=False)
        for i in range(200):
            if i % 2:
                p.set(f"note:{i}", f"kept {i}")
            else:
                p.set(f"note:{i}", f"expires {i}", px=100)
        p.execute()
        filler = "x" * 2000
        p = r.pipeline(transaction=False)
        for i in range(3000):  # ~6 mb of unmapped keys through a 2 mb cache
            p.set(f"filler:{i}", filler)
        p.execute()
        time.sleep(0.2)
        assert r.info("stats")["evicted_keys"] > 0
        present = sum(r.exists(f"note:{i}") for i in range(1, 200, 2))
        assert present < 100, "no mapped key was evicted"
        assert sum(r.exists(f"note:{i}") for i in range(0, 200, 2)) == 0
        assert int(info(r, "notes")["checkpoint"]) == 0  # the flusher has not run yet
        drained(r, ["notes"])
        rows = dict(db.sql("SELECT id, body FROM notes"))
        assert len(rows) == 200
        for i in range(200):
            assert rows[str(i)] == (f"kept {i}" if i % 2 else f"expires {i}")
    finally:
        srv.stop()
