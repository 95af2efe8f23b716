"""Write-behind to SQLite and PostgreSQL (docs/writebehind.md): a mapped key's writes reach
the database through cairn's durable log, in order, coalesced, surviving kill -9.

PostgreSQL is a private cluster the tests start (tests/wb_pg.py, as studies/thesis does); its
tests are skipped, saying why, only when it cannot start."""

from __future__ import annotations

import random
import sqlite3
import threading
import time

import pytest
import redis

from conftest import HOST, TARGET, Server

pytestmark = pytest.mark.cairn_only  # write-behind is cairn's own

if TARGET != "cairn":
    pytest.skip("write-behind is cairn's own", allow_module_level=True)


@pytest.fixture(scope="module")
def pg():
    import wb_pg

    try:
        server = wb_pg.Postgres().start()
    except Exception as e:  # noqa: BLE001 - any failure to start means: skip, saying why
        pytest.skip(f"PostgreSQL could not start: {e}")
    yield server
    server.close()


class Db:
    """One database for a test: SQLite (a file) or PostgreSQL (fresh tables)."""

    def __init__(self, kind, tmp_path, pg=None):
        self.kind = kind
        self.pg = pg
        if kind == "sqlite":
            self.path = tmp_path / "app.db"
            self.url = f"sqlite://{self.path}"
        else:
            self.url = pg.url
            self.sql("DROP TABLE IF EXISTS users, notes, cairn_wb_version, cairn_wb_checkpoint, "
                     "cairn_wb_dead")

    def sql(self, statement, params=()):
        if self.kind == "sqlite":
            with sqlite3.connect(self.path) as conn:
                return conn.execute(statement, params).fetchall()
        return self.pg.sql(statement.replace("?", "%s"), params)

    def create(self, notes_check=""):
        self.sql("CREATE TABLE users (id integer PRIMARY KEY, name text, age integer)")
        self.sql(f"CREATE TABLE notes (id text PRIMARY KEY, body text {notes_check})")


def config(tmp_path, db, *, delay="20ms", extra="", retries=5):
    text = f"""
dir = "{tmp_path}"
{extra}

[[writeback]]
name = "users"
prefix = "user:"
database = "{db.url}"
table = "users"
key_column = "id"
value = "hash"
delay = "{delay}"
batch = 500

[[writeback]]
name = "notes"
prefix = "note:"
database = "{db.url}"
table = "notes"
value = "string"
value_column = "body"
delay = "{delay}"
retries = {retries}
"""
    path = tmp_path / "cairn.toml"
    path.write_text(text)
    return path


def start(path, name):
    return Server(["--config", str(path)], name=name).start()


def info(r, name):
    raw = r.execute_command("WB.INFO", name)
    if isinstance(raw, list):
        raw = dict(zip(raw[::2], raw[1::2]))
    return {k.decode(): v.decode() for k, v in raw.items()}


def drained(r, names=("users", "notes"), timeout=30.0):
    deadline = time.monotonic() + timeout
    states = None
    while time.monotonic() < deadline:
        try:
            states = [info(r, n) for n in names]
        except redis.exceptions.BusyLoadingError:
            # A restart that found a snapshot answers -LOADING until it is read.
            time.sleep(0.05)
            continue
        if all(s["queue"] == "0" for s in states):
            return states
        time.sleep(0.05)
    raise AssertionError(f"write-behind did not drain: {states}")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "postgres":
        return Db("postgres", tmp_path, request.getfixturevalue("pg"))
    return Db("sqlite", tmp_path)


def test_kill9_loses_no_acknowledged_write(db, tmp_path):
    """50k writes through RESP (SET, HSET) and memcached (set) on mapped keys; kill -9 at a
    random moment; restart: every acknowledged write is in the database with its last value,
    and no row is older than the last write the log took."""
    db.create()
    path = config(tmp_path, db)
    srv = start(path, f"wb-kill-{db.kind}")
    r = srv.client()
    mc = srv.mc()
    keys = 500
    acked, sent = {}, {}  # key -> last acknowledged / last sent value (values only grow)
    total = 50_000
    kill_after = random.uniform(0.3, 1.2)
    killed = threading.Event()

    def kill():
        killed.set()
        srv.kill()

    killer = threading.Timer(kill_after, kill)
    seq = 0
    killer.start()
    try:
        while seq < total:
            batch = []
            kind = (seq // 250) % 3
            for _ in range(250):
                seq += 1
                k = random.randrange(keys)
                key = ("user:%d" if kind == 1 else "note:%d") % k
                batch.append((key, seq))
                sent[key] = seq
            if kind == 0:
                p = r.pipeline(transaction=False)
                for key, v in batch:
                    p.set(key, str(v))
                p.execute()
            elif kind == 1:
                p = r.pipeline(transaction=False)
                for key, v in batch:
                    p.hset(key, mapping={"name": f"n{v}", "age": str(v)})
                p.execute()
            else:
                failed = mc.set_many({key: str(v) for key, v in batch}, noreply=False)
                assert not failed
                # set_many sends a dict: a key repeated in the batch keeps its last value.
            for key, v in batch:
                acked[key] = v
    except (redis.ConnectionError, OSError, ConnectionError, Exception) as e:  # noqa: BLE001
        if not killed.is_set():
            raise AssertionError(f"write failed with the server alive: {e}")
    killer.cancel()
    srv.kill()
    assert acked, "the kill came before any write was acknowledged"

    srv2 = start(path, f"wb-kill-{db.kind}-2")
    try:
        r2 = srv2.client()
        drained(r2)
        rows = {f"note:{i}": int(b) for i, b in db.sql("SELECT id, body FROM notes")}
        rows.update({f"user:{i}": age for i, _, age in db.sql("SELECT id, name, age FROM users")})
        names = dict(db.sql("SELECT id, name FROM users"))
        for key, v in acked.items():
            got = rows.get(key)
            assert got is not None, f"{key}: acknowledged {v}, missing from the database"
            assert v <= got <= sent[key], f"{key}: acknowledged {v}, database has {got}"
            if key.startswith("user:"):
                assert names[int(key[5:])] == f"n{got}"
        assert len(acked) > 100
    finally:
        srv2.stop()


def test_coalescing_1000_updates_one_row_write(db, tmp_path):
    db.create()
    srv = start(config(tmp_path, db, delay="1500ms"), f"wb-coalesce-{db.kind}")
    try:
        r = srv.client()
        p = r.pipeline(transaction=False)
        for i in range(1000):
            p.set("note:hot", str(i))
        p.execute()
        state = drained(r, ["notes"])[0]
        assert state["rows_written"] == "1", state
        assert state["batches"] == "1", state
        assert db.sql("SELECT body FROM notes WHERE id = 'hot'") == [("999",)]
    finally:
        srv.stop()


def test_deletes_and_order_survive_a_restart(db, tmp_path):
    """A delete is a guarded delete; a restart re-reading the log applies no older value."""
    db.create()
    path = config(tmp_path, db)
    srv = start(path, f"wb-del-{db.kind}")
    r = srv.client()
    r.set("note:a", "1")
    r.set("note:b", "1")
    r.delete("note:b")
    r.hset("user:7", mapping={"name": "x", "age": "1"})
    r.hset("user:7", "age", "2")
    drained(r)
    srv.stop()
    # The checkpoint forgotten: the whole log is applied again, and the guards keep the rows.
    db.sql("DELETE FROM cairn_wb_checkpoint")
    db.sql("UPDATE notes SET body = 'newer' WHERE id = 'a'")
    srv2 = start(path, f"wb-del-{db.kind}-2")
    try:
        drained(srv2.client())
        assert sorted(db.sql("SELECT id, body FROM notes")) == [("a", "newer")]
        assert db.sql("SELECT id, name, age FROM users") == [(7, "x", 2)]
    finally:
        srv2.stop()


def test_poison_row_goes_to_the_dead_letter_list(tmp_path):
    db = Db("sqlite", tmp_path)
    db.create(notes_check="CHECK (body <> 'poison')")
    srv = start(config(tmp_path, db, retries=2), "wb-poison")
    try:
        r = srv.client()
        r.set("note:a", "fine")
        r.set("note:bad", "poison")
        r.set("note:b", "fine too")
        state = drained(r, ["notes"])[0]
        assert sorted(db.sql("SELECT id, body FROM notes")) == [("a", "fine"), ("b", "fine too")]
        assert state["dead_letters"] == "1"
        assert int(state["retries"]) >= 1
        letters = r.execute_command("WB.DLQ", "notes", "LIST")
        assert len(letters) == 1 and letters[0][1] == b"note:bad"
        assert b"CHECK" in letters[0][2] or b"constraint" in letters[0][2]
        # The rest flows on.
        r.set("note:c", "later")
        drained(r, ["notes"])
        assert db.sql("SELECT body FROM notes WHERE id = 'c'") == [("later",)]
        assert r.execute_command("WB.DLQ", "notes", "DROP") == 1
        assert r.execute_command("WB.DLQ", "notes", "LIST") == []
        assert "poison row" not in srv.log()
    finally:
        srv.stop()


def test_database_down_busy_then_drains(pg, tmp_path):
    """PostgreSQL stopped under writes: the log grows to wb-max-bytes, then writes to mapped
    keys get -BUSY (others go on); PostgreSQL back, the queue drains in order."""
    db = Db("postgres", tmp_path, pg)
    db.create()
    path = config(tmp_path, db, extra='wb-max-bytes = "64kb"')
    srv = start(path, "wb-down")
    try:
        r = srv.client()
        r.set("note:first", "0")
        drained(r, ["notes"])
        pg.stop()
        value = "v" * 1000
        acked = {}
        busy = None
        for i in range(200):
            try:
                r.set(f"note:{i % 20}", f"{i}:{value}")
                acked[f"{i % 20}"] = f"{i}:{value}"
            except redis.ResponseError as e:
                busy = str(e)
                break
        assert busy == "BUSY write-behind queue full", busy
        assert 40 <= i <= 70, i  # about 64kb of 1kb records
        assert r.get(f"note:{i % 20}") != f"{i}:{value}".encode()  # the refused write did nothing
        assert r.set("other:key", "unmapped keys are unaffected")
        deadline = time.monotonic() + 10
        while info(r, "notes")["last_error"] == "" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert info(r, "notes")["last_error"] != ""
        pg.start()
        drained(r, ["notes"], timeout=40)
        rows = dict(db.sql("SELECT id, body FROM notes"))
        for k, v in acked.items():
            assert rows[k] == v
        assert r.set("note:after", "accepted again")
    finally:
        srv.stop()


def test_fsync_always_replies_after_the_log_is_on_disk(tmp_path):
    db = Db("sqlite", tmp_path)
    db.create()
    srv = start(config(tmp_path, db, extra='wb-fsync = "always"'), "wb-always")
    try:
        r = srv.client()
        p = r.pipeline(transaction=False)
        for i in range(100):
            p.set(f"note:{i % 7}", str(i))
            p.get(f"note:{i % 7}")
        replies = p.execute()
        assert replies[-1] == b"99" and replies[0] is True
        mc = srv.mc()
        assert mc.set("note:mc", "1", noreply=False)
        assert mc.get("note:mc") == b"1"
        with r.pipeline(transaction=True) as t:
            t.set("note:tx", "a").set("other", "b").get("note:tx")
            assert t.execute() == [True, True, b"a"]
        drained(r)
        assert db.sql("SELECT body FROM notes WHERE id = 'tx'") == [("a",)]
    finally:
        srv.stop()


def test_fsync_always_fsyncs_once_per_pipelined_batch(tmp_path):
    """Under `wb-fsync always` a connection's batch of writes shares one fsync, made before
    any of its replies goes (Redis's AOF `always` fsyncs once per event-loop turn); WB.INFO
    `fsyncs` counts them. Before, each pipelined write paid its own: 500 here."""
    db = Db("sqlite", tmp_path)
    db.create()
    srv = start(config(tmp_path, db, extra='wb-fsync = "always"'), "wb-always-batch")
    try:
        r = srv.client()
        assert r.set("note:first", "0")
        drained(r)
        before = int(info(r, "notes")["fsyncs"])
        for b in range(5):
            p = r.pipeline(transaction=False)
            for i in range(100):
                p.set(f"note:{b}:{i}", str(i))
                p.get(f"note:{b}:{i}")
            assert p.execute() == [True, b"0"] + [True, b"1"] + [x for i in range(2, 100)
                                                                  for x in (True, str(i).encode())]
        drained(r)
        fsyncs = int(info(r, "notes")["fsyncs"]) - before
        # One per batch, a few more where a pipeline arrives in several reads or the flusher
        # syncs between a write and its reply's fsync; never one per write.
        assert 5 <= fsyncs <= 40, fsyncs
        assert db.sql("SELECT count(*) FROM notes")[0][0] == 501
    finally:
        srv.stop()


def test_commands_and_config_errors(tmp_path):
    db = Db("sqlite", tmp_path)
    db.create()
    srv = start(config(tmp_path, db), "wb-cmds")
    try:
        r = srv.client()
        assert set(r.execute_command("WB.INFO")[::2]) == {b"users", b"notes"}
        with pytest.raises(redis.ResponseError, match="no such write-behind mapping"):
            r.execute_command("WB.INFO", "nope")
        with pytest.raises(redis.ResponseError, match="overlaps"):
            r.execute_command("WB.ADD", "more", "prefix", "note:x", "database", db.url,
                              "table", "notes", "value", "string", "value_column", "body")
        with pytest.raises(redis.ResponseError, match="unknown mapping key"):
            r.execute_command("WB.ADD", "more", "prefix", "m:", "color", "red")
        r.execute_command("WB.ADD", "more", "prefix", "m:", "database", db.url,
                          "table", "notes", "value", "string", "value_column", "body",
                          "delay", "0")
        r.set("m:zz", "added at run time")
        drained(r, ["more"])
        assert db.sql("SELECT body FROM notes WHERE id = 'zz'") == [("added at run time",)]
        assert r.execute_command("WB.DEL", "more") == b"OK"
        r.set("m:yy", "not mapped any more")
        time.sleep(0.2)
        assert db.sql("SELECT count(*) FROM notes WHERE id = 'yy'") == [(0,)]
        with pytest.raises(redis.ResponseError):
            r.execute_command("WB.DEL", "more")
    finally:
        srv.stop()
    bad = tmp_path / "bad.toml"
    bad.write_text('[[writeback]]\nname = "x"\nprefix = "a:"\ntable = "t"\n')
    s = Server(["--config", str(bad)], name="wb-badconf")
    with pytest.raises(AssertionError, match="needs a database"):
        s.start()
    s.kill()


def replicate(r, primary_port):
    """Makes `r`'s server a replica of the primary on `primary_port`; returns once its link is up."""
    r.replicaof("127.0.0.1", primary_port)
    deadline = time.monotonic() + 10
    while r.info("replication")["master_link_status"] != "up":
        assert time.monotonic() < deadline, "the replica's link did not come up"
        time.sleep(0.02)


def test_a_replica_leaves_write_behind_to_its_primary(tmp_path):
    """Primary and replica each map note:* to a database of their own: the primary writes the
    row back, the replica (whose changes are the primary's) writes nothing until promoted."""
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    pdb, rdb = Db("sqlite", tmp_path / "p"), Db("sqlite", tmp_path / "r")
    pdb.create()
    rdb.create()
    primary = start(config(tmp_path / "p", pdb), "wb-repl-primary")
    replica = start(config(tmp_path / "r", rdb), "wb-repl-replica")
    try:
        p, r = primary.client(), replica.client()
        replicate(r, primary.port)
        p.set("note:a", "from the primary")
        assert p.execute_command("WAIT", 1, 5000) == 1
        assert r.get("note:a") == b"from the primary"
        drained(p, ["notes"])
        assert pdb.sql("SELECT id, body FROM notes") == [("a", "from the primary")]
        assert info(r, "notes")["queue"] == "0"
        assert rdb.sql("SELECT id, body FROM notes") == []
        r.replicaof("NO", "ONE")
        r.set("note:b", "after the promotion")
        drained(r, ["notes"])
        assert rdb.sql("SELECT id, body FROM notes") == [("b", "after the promotion")]
    finally:
        replica.stop()
        primary.stop()


def test_a_promoted_replica_writes_over_the_old_primarys_rows(db, tmp_path):
    """Issue 15: primary and replica write back to the same database. The database's versions
    and checkpoint are the old primary's log numbers; the promoted replica's log must number
    above them, or the version guard would skip its writes (lost updates)."""
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    db.create()
    primary = start(config(tmp_path / "p", db), f"wb-failover-primary-{db.kind}")
    replica = start(config(tmp_path / "r", db), f"wb-failover-replica-{db.kind}")
    try:
        p, r = primary.client(), replica.client()
        replicate(r, primary.port)
        p.set("note:k", "old")
        for i in range(30):  # the primary's numbers run well past the replica's
            p.set(f"note:x{i}", str(i))
        assert p.execute_command("WAIT", 1, 5000) == 1
        drained(p, ["notes"])
        assert db.sql("SELECT body FROM notes WHERE id = 'k'") == [("old",)]
        r.replicaof("NO", "ONE")
        r.set("note:k", "new")
        r.delete("note:x0")
        drained(r, ["notes"])
        assert db.sql("SELECT body FROM notes WHERE id = 'k'") == [("new",)]
        assert db.sql("SELECT body FROM notes WHERE id = 'x0'") == []
        assert int(info(r, "notes")["last_lsn"]) > 31
    finally:
        replica.stop()
        primary.stop()
