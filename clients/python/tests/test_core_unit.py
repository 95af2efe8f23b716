"""CacheCore's flows against an in-memory key space with a fake clock; validation; SQL typing."""

import builtins
import datetime

import pytest
from fakes import FakeClock, FakeServer

from cairn import commands, sql
from cairn._core import DEFAULT, CacheCore
from cairn.near import MISS, NearCache, PeerGroup
from cairn.serializers import JsonSerializer, MsgpackSerializer, PickleSerializer
from cairn.tags import tag_args


def core(clock, near=True, peers=None, **kw):
    n = None
    if near:
        n = NearCache(clock=clock)
        n.set_enabled(True)
    opts = dict(ttl=None, stale_ttl=None, lease_ttl=5, lease_wait=None, poll_interval=0.01)
    opts.update(kw)
    return CacheCore("ns", kw.pop("serializer", JsonSerializer()), near=n, peers=peers, wall_ms=clock.wall_ms,
                     monotonic=clock, **{k: v for k, v in opts.items() if k != "serializer"})


def test_get_set_ttl_and_near_fill():
    clock = FakeClock()
    srv = FakeServer(clock)
    c = core(clock, ttl=10)
    srv.drive(c.set("k", {"a": 1}, DEFAULT, None))
    assert srv.drive(c.get("k", None)) == {"a": 1}
    assert c.near.read("k") == ({"a": 1}, None)  # filled, with the server's TTL
    clock.advance(10.01)
    assert c.near.read("k") == (MISS, None)  # the near entry died with the server's TTL
    assert srv.drive(c.get("k", "gone")) == "gone"


def test_stale_while_revalidate_by_the_wall_clock():
    clock = FakeClock()
    srv = FakeServer(clock)
    c = core(clock, near=False, ttl=10, stale_ttl=20)
    srv.drive(c.set("k", "v1", DEFAULT, None))
    clock.advance(11)  # soft-expired, still stored
    assert srv.drive(c.get("k", "miss")) == "miss"
    assert srv.drive(c.fetch("k", DEFAULT, None), lambda: "v2") == "v2"  # lease taken, refreshed
    assert srv.drive(c.get("k", None)) == "v2"
    assert srv.run("GET", b"__lease__:ns:k") is None, "lease released"


def test_fetch_waits_for_the_lease_holder_then_fetches_itself():
    clock = FakeClock()
    srv = FakeServer(clock)
    c = core(clock, near=False, lease_wait=0.5)
    srv.run("SET", b"__lease__:ns:k", b"other", "NX", "PX", 5000)
    t0 = clock()
    assert srv.drive(c.fetch("k", DEFAULT, None), lambda: "mine") == "mine"
    assert 0.5 <= clock() - t0 < 0.6  # polled with the fake clock's sleeps until lease_wait
    assert srv.drive(c.get("k", None)) == "mine"


def test_write_methods():
    clock = FakeClock()
    srv = FakeServer(clock)
    c = core(clock, ttl=5)
    srv.drive(c.set_many({"a": 1, "b": 2}, DEFAULT, None))
    assert srv.drive(c.get_many(["a", "b", "x"])) == {"a": 1, "b": 2}
    assert srv.drive(c.add("a", 9, DEFAULT, None)) is False
    assert srv.drive(c.add("n", 9, None, None)) is True and srv.run("PTTL", b"ns:n") == -1
    assert srv.drive(c.incr("a", 41, DEFAULT)) == 42
    assert srv.drive(c.incr("fresh", 1, DEFAULT)) == 1 and srv.run("PTTL", b"ns:fresh") == 5000
    assert srv.drive(c.touch("a", 60, )) is True and srv.run("PTTL", b"ns:a") == 60000
    assert srv.drive(c.touch("a", None)) is True and srv.run("PTTL", b"ns:a") == -1
    assert srv.drive(c.touch("zz", None)) is False
    assert srv.drive(c.delete(["a", "b", "zz"])) == 2
    clock.advance(5)
    assert srv.drive(c.get("fresh", None)) is None


def test_writes_drop_the_key_from_every_peer():
    clock = FakeClock()
    srv = FakeServer(clock)
    group = PeerGroup()
    a, b = core(clock, peers=group), core(clock, peers=group)
    srv.drive(a.set("k", 1, DEFAULT, None))
    assert srv.drive(b.get("k", None)) == 1 and b.near.read("k")[0] == 1
    srv.drive(a.set("k", 2, DEFAULT, None))
    assert srv.drive(b.get("k", None)) == 2  # b's near entry went with a's write
    token = b.near.begin_fill("k")  # a fill in flight in b while a writes
    srv.drive(a.delete(["k"]))
    assert not b.near.complete_fill(token, 2)


def test_incr_needs_decimal_counters():
    clock = FakeClock()
    with pytest.raises(TypeError, match="json"):
        FakeServer(clock).drive(core(clock, serializer=PickleSerializer()).incr("k", 1, DEFAULT))
    with pytest.raises(TypeError, match="stale_ttl"):
        FakeServer(clock).drive(core(clock, ttl=1, stale_ttl=1).incr("k", 1, DEFAULT))
    with pytest.raises(TypeError, match="int"):
        FakeServer(clock).drive(core(clock).incr("k", "1", DEFAULT))


def test_validation():
    assert commands.ttl_ms(datetime.timedelta(seconds=1.5)) == 1500
    assert commands.ttl_ms(0.0001) == 1
    for bad in ("5", True, [1]):
        with pytest.raises(TypeError, match="number of seconds"):
            commands.ttl_ms(bad)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            commands.ttl_ms(bad)
    assert tag_args([(1, 2), (3, -4)]) == [1, 2, 3, -4]
    with pytest.raises(TypeError):
        tag_args([(1, "2")])
    with pytest.raises(TypeError):
        tag_args([(1.0, 2)])
    with pytest.raises(TypeError):
        tag_args((1, 2))
    with pytest.raises(ValueError):
        tag_args([(1 << 32, 2)])
    with pytest.raises(ValueError):
        tag_args([(1, 1 << 63)])
    with pytest.raises(ValueError, match="namespace"):
        CacheCore("", JsonSerializer(), ttl=None, stale_ttl=None, near=None, lease_ttl=5, lease_wait=None,
                  poll_interval=0.01)


def test_sql_arguments_are_typed():
    assert commands.sql_args("SQL.QUERY", "SELECT ?", ["a"]) == ["SQL.QUERY", "SELECT ?", "a"]
    assert commands.sql_args("SQL.QUERY", "SELECT ?,?,?,?,?,?", [5, 0.5, "x", b"y", None, True]) == [
        "SQL.QUERY", "TYPES", "irtbni", "SELECT ?,?,?,?,?,?", 5, "0.5", "x", b"y", b"", 1]
    assert commands.sql_args("SQL.EXEC", "X", [1e300])[-1] == "1e+300"
    with pytest.raises(ValueError, match="NaN"):
        commands.sql_args("SQL.EXEC", "X", [float("nan")])
    with pytest.raises(TypeError, match="parameter 2"):
        commands.sql_args("SQL.EXEC", "X", [1, object()])
    assert sql.expire_args("t", 60, None, 0) == ["SQL.EXPIRE", "t", "AGE", 60, "OPS", 0]
    assert sql.expire_args("t", 60.0, None, None) == ["SQL.EXPIRE", "t", "AGE", 60]
    with pytest.raises(TypeError, match="whole seconds"):
        sql.expire_args("t", 0.5, None, None)


def test_msgpack_hint_names_a_real_package(monkeypatch):
    real_import = builtins.__import__

    def no_msgpack(name, *a, **kw):
        if name == "msgpack":
            raise ImportError("No module named 'msgpack'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_msgpack)
    with pytest.raises(ImportError, match=r"pip install msgpack$"):
        MsgpackSerializer()
