"""The Python client (clients/python) as a web application uses it (issue 18).

Fail open with a circuit breaker and short default timeouts (a stopped or silent server costs one
short timeout per interval), read-your-writes per process across Cache objects and Clients of a
namespace, ``client.cache(ns)`` per request without new connections, set_many / add / incr /
touch / delete_many / @cached, and validation errors. Everything but the tag cases also runs
against redis-server (CAIRN_TARGET=redis).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

import pytest
import redis

from conftest import HOST, ROOT, TARGET, free_port, wait_until
from client_fixtures import plain, srv  # noqa: F401  (fixtures)

# This checkout's client, whatever the venv has installed.
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
cairn = pytest.importorskip("cairn", reason="the cairn client is not installed (scripts/setup.sh installs it)")
from cairn import CacheUnavailable, where  # noqa: E402

if TARGET == "memcached":
    pytest.skip("the cairn client speaks RESP", allow_module_level=True)

cairn_only = pytest.mark.cairn_only


@pytest.fixture
def client(srv, plain):
    c = cairn.Client(HOST, srv.port, health_interval=0.2)
    yield c
    c.close()


def _silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    s = socket.socket()
    s.bind((HOST, 0))
    s.listen(16)
    return s, s.getsockname()[1]


def _closed_port():
    """A port nothing listens on: the kit's free port."""
    return free_port()


# ----------------------------------------------------------------------------
# fail open, timeouts, circuit breaker
# ----------------------------------------------------------------------------

def test_default_timeouts_and_no_retries():
    c = cairn.Client(HOST, 1)
    kw = c.redis.connection_pool.connection_kwargs
    assert kw["socket_connect_timeout"] == 0.25 and kw["socket_timeout"] == 0.5
    assert c.redis.connection_pool.connection_kwargs["retry"]._retries == 0
    c2 = cairn.Client.from_url(f"redis://{HOST}:1/0", read_timeout=0.2)
    assert c2.redis.connection_pool.connection_kwargs["socket_timeout"] == 0.2
    with pytest.raises(ValueError, match="connect_timeout"):
        cairn.Client(HOST, 1, connect_timeout=0)


def test_silent_server_costs_one_short_timeout_per_interval():
    sock, port = _silent_port()
    try:
        client = cairn.Client(HOST, port, breaker_interval=60)
        strict = client.cache("silent", near=False)
        t0 = time.monotonic()
        with pytest.raises(CacheUnavailable):
            strict.get("k")
        first = time.monotonic() - t0
        assert first < 1.5, f"one read timeout (0.5 s), not {first:.2f} s"
        assert isinstance(CacheUnavailable("x"), redis.ConnectionError)
        # Open breaker: the next hundred calls fail at once, without the network.
        lenient = client.cache("silent", near=False, on_error="fetch")
        t0 = time.monotonic()
        for i in range(100):
            assert lenient.get("k", "dflt") == "dflt"
            assert lenient.get_or_fetch(f"k{i}", lambda: "fetched") == "fetched"
            lenient.set("k", "v")  # a fill is skipped
            assert lenient.add("k", "v") is False
            assert lenient.get_many(["a", "b"]) == {}
        assert time.monotonic() - t0 < 0.5
        assert client.breaker.state == "open" and client.breaker.rejected >= 500
        with pytest.raises(CacheUnavailable):
            lenient.delete("k")  # invalidations are never dropped silently
        client.close()
    finally:
        sock.close()


def test_stopped_server_fails_open_then_recovers(server_factory):
    srv = server_factory()
    port = srv.port
    client = cairn.Client(HOST, port, breaker_interval=0.3, health_interval=0.2)
    try:
        c = client.cache("fo", on_error="fetch", ttl=60)
        calls = []

        def fetch():
            calls.append(1)
            return {"n": len(calls)}

        assert c.get_or_fetch("k", fetch) == {"n": 1}
        srv.stop()
        wait_until(lambda: not c.near.enabled, timeout=3, msg="near cache off with the stream")
        t0 = time.monotonic()
        assert c.get("k") is None  # a miss, not an exception
        assert c.get_or_fetch("k", fetch) == {"n": 2}  # fetch() answers while the server is down
        assert time.monotonic() - t0 < 1.0
        assert client.breaker.state in ("open", "half-open")
        srv2 = server_factory(port=port, memcache_port=srv.memcache_port)
        srv2.wait_ready()
        time.sleep(0.35)  # past the interval: one trial call goes through and closes the breaker
        assert c.get_or_fetch("k", fetch) == {"n": 3}
        assert client.breaker.state == "closed"
        assert c.get("k") == {"n": 3}
    finally:
        client.close()


def test_on_error_is_validated(client):
    with pytest.raises(ValueError, match="on_error"):
        client.cache("x", on_error="ignore")


# ----------------------------------------------------------------------------
# read-your-writes per process; cache() per request
# ----------------------------------------------------------------------------

def test_read_your_writes_across_caches_and_clients(srv, client):
    other = cairn.Client(HOST, srv.port, health_interval=0.2)
    try:
        a = client.cache("ryw")
        b = other.cache("ryw")
        c = client.cache("ryw", ttl=600)  # another Cache object of the namespace, same client
        for cache in (a, b, c):
            assert cache.near.enabled
        stale = 0
        for i in range(300):
            writer = (a, b, c)[i % 3]
            for reader in (a, b, c):
                reader.get("k")  # keep the near caches warm with the old value
            writer.set("k", i)
            stale += sum(1 for reader in (a, b, c) if reader.get("k") != i)
            if i % 50 == 0:
                writer.delete("k")
                stale += sum(1 for reader in (a, b, c) if reader.get("k") is not None)
        assert stale == 0, f"{stale} stale reads after own-process writes"
        assert a.stats()["hits"] > 0, "the near caches were in use"
    finally:
        other.close()


def _connections(r):
    return len(r.client_list())


def test_cache_per_request_reuses_connections(client, plain):
    first = client.cache("req", ttl=30)
    first.set("k", 1)
    assert first.get("k") == 1
    hub = client.tracking
    wait_until(lambda: hub.ready)
    registrar, listener = hub.registrar_id, hub.listener_id
    before = _connections(plain)
    for i in range(200):
        c = client.cache("req", ttl=30)  # as a view would, per request
        assert c is first
        assert c.get("k") == 1
    # Other options: another Cache object, but the namespace is already registered.
    for i in range(20):
        client.cache("req", ttl=30 + i)
    assert _connections(plain) == before
    assert (hub.registrar_id, hub.listener_id) == (registrar, listener), "no new registrar"
    assert len(client._cache_memo) == 20  # ttl=30 again is the first one
    first.close()
    assert client.cache("req", ttl=30) is not first  # a closed cache is not handed out again


# ----------------------------------------------------------------------------
# set_many, add, incr, touch, delete_many, @cached
# ----------------------------------------------------------------------------

def test_write_methods(client, plain):
    c = client.cache("w", ttl=100)
    c.set_many({"a": 1, "b": [2], "c": {"x": 3}})
    assert c.get_many(["a", "b", "c", "nope"]) == {"a": 1, "b": [2], "c": {"x": 3}}
    assert 99_000 < plain.pttl("w:b") <= 100_000
    assert c.add("a", 5) is False and c.get("a") == 1
    assert c.add("new", 5, ttl=None) is True and plain.pttl("w:new") == -1
    assert c.incr("a") == 2 and c.incr("a", 10) == 12 and c.decr("a", 2) == 10
    assert c.get("a") == 10
    assert c.incr("counter") == 1 and 99_000 < plain.pttl("w:counter") <= 100_000
    with pytest.raises(redis.ResponseError):
        c.incr("b")  # a list is not a counter
    with pytest.raises(TypeError, match="json"):
        client.cache("w2", "pickle").incr("x")
    with pytest.raises(TypeError, match="int"):
        c.incr("a", 1.5)
    assert c.touch("a", ttl=5) is True and 4000 < plain.pttl("w:a") <= 5000
    assert c.touch("a", ttl=None) is True and plain.pttl("w:a") == -1
    assert c.touch("missing") is False
    assert c.has_key("a") and not c.has_key("missing")
    assert c.delete_many(["a", "b", "missing"]) == 2
    assert c.get_many(["a", "b", "c"]) == {"c": {"x": 3}}
    with pytest.raises(TypeError, match="sequence"):
        c.delete_many("abc")


def test_cached_decorator(client, plain):
    c = client.cache("deco", ttl=60)
    calls = []

    @c.cached()
    def square(n, *, label="sq"):
        calls.append(n)
        return {"label": label, "value": n * n}

    assert square(4) == {"label": "sq", "value": 16}
    assert square(4) == {"label": "sq", "value": 16}
    assert square(4, label="x") == {"label": "x", "value": 16}
    assert calls == [4, 4]
    keys = sorted(k.decode() for k in plain.keys("deco:*"))
    assert keys == ['deco:test_client_web.test_cached_decorator.<locals>.square:[[4],{"label":"x"}]',
                    'deco:test_client_web.test_cached_decorator.<locals>.square:[[4],{}]']

    @c.cached(key=lambda user_id: f"user:{user_id}", ttl=5)
    def profile(user_id):
        calls.append(user_id)
        return {"id": user_id}

    assert profile(7) == {"id": 7} and profile(7) == {"id": 7}
    assert calls.count(7) == 1 and 4000 < plain.pttl("deco:user:7") <= 5000
    with pytest.raises(TypeError, match="key="):
        square(object())


@cairn_only
def test_tagged_writes_and_cached_tags(client, plain):
    PAGE = 1
    c = client.cache("frag", ttl=60)
    c.set_many({"p5:header": "<h1>", "p5:body": "<p>"}, tags=[(PAGE, 5)])
    assert c.add("p6:header", "<h1>6", tags=[(PAGE, 6)]) is True
    assert c.add("p6:header", "again", tags=[(PAGE, 6)]) is False

    renders = []

    @c.cached(key=lambda page: f"p{page}:footer", tags=lambda page: [(PAGE, page)])
    def footer(page):
        renders.append(page)
        return f"<footer {page}>"

    assert footer(5) == "<footer 5>" and footer(5) == "<footer 5>" and renders == [5]
    assert sorted(c.keys_by_tag(where(PAGE) == 5)) == ["p5:body", "p5:footer", "p5:header"]
    assert c.delete_by_tag(where(PAGE) == 5) == 3  # one TAG.DEL for the page's fragments
    assert c.get("p5:header") is None and c.get("p6:header") == "<h1>6"
    assert footer(5) == "<footer 5>" and renders == [5, 5]


# ----------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------

def test_validation_errors(client):
    c = client.cache("v")
    with pytest.raises(TypeError, match=r"\(type, value\) pair"):
        c.set("k", 1, tags=[(1, 2, 3)])
    with pytest.raises(TypeError, match="tag value must be an int"):
        c.set("k", 1, tags=[(1, "5")])
    with pytest.raises(TypeError, match="list of"):
        c.set("k", 1, tags=(1, 5))
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        c.set("k", 1, tags=[(-1, 5)])
    with pytest.raises(TypeError, match="number of seconds"):
        c.set("k", 1, ttl="60")
    with pytest.raises(ValueError, match="positive"):
        c.set("k", 1, ttl=0)
    with pytest.raises(TypeError, match="number of seconds"):
        client.cache("v2", ttl=True)
    with pytest.raises(TypeError, match="cache keys are str"):
        c.get(5)
    with pytest.raises(TypeError, match="mapping"):
        c.set_many([("a", 1)])
    with pytest.raises(ValueError, match="namespace"):
        client.cache("")


def test_fail_open_does_not_swallow_fetch_errors(client):
    c = client.cache("fe", on_error="fetch")

    def broken():
        raise redis.ConnectionError("the database behind the cache is down")

    with pytest.raises(redis.ConnectionError, match="database"):
        c.get_or_fetch("k", broken)
    assert client.breaker.state == "closed"


def test_breaker_is_thread_safe_under_load():
    sock, port = _silent_port()
    try:
        client = cairn.Client(HOST, port, breaker_interval=60, read_timeout=0.3)
        c = client.cache("t", near=False, on_error="fetch")
        out = []

        def worker():
            out.append(c.get_or_fetch("k", lambda: "db"))

        t0 = time.monotonic()
        threads = [threading.Thread(target=worker) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert out == ["db"] * 16
        assert time.monotonic() - t0 < 2.0
        client.close()
    finally:
        sock.close()


def test_json_is_decoded_once(client, plain):
    c = client.cache("j")
    plain.set("j:k", json.dumps({"a": 1}))
    assert c.get("k") == {"a": 1}


def test_async_client_fails_open_and_shares_read_your_writes(srv, client):
    async def main():
        sock, port = _silent_port()
        try:
            dead = cairn.AsyncClient(HOST, port, breaker_interval=60)
            c = await dead.cache("adead", near=False, on_error="fetch")
            t0 = time.monotonic()
            assert await c.get("k", "d") == "d"
            assert await c.get_or_fetch("k", lambda: "db") == "db"
            assert await c.add("k", 1) is False
            assert time.monotonic() - t0 < 1.5
            with pytest.raises(CacheUnavailable):
                await c.delete("k")
            await dead.aclose()
        finally:
            sock.close()
        live = cairn.AsyncClient(HOST, srv.port, health_interval=0.2)
        try:
            a = await live.cache("aryw")
            s = client.cache("aryw")
            for i in range(50):
                await a.get("k")
                s.set("k", i)  # a sync write in the same process: the async near cache drops it
                assert await a.get("k") == i
                await a.set("k", -i)
                assert s.get("k") == -i
            await a.set_many({"x": 1})
            assert await a.incr("x", 2) == 3 and await a.decr("x") == 2
            assert await a.touch("x", 5) is True
            assert await a.delete_many(["x"]) == 1
        finally:
            await live.aclose()

    import asyncio
    asyncio.run(main())


@cairn_only
def test_reply_types_follow_the_protocol(client):
    """The README's statement: the protocol is redis-py's default unless protocol= is given
    (RESP2 before redis-py 8, RESP3 from 8 on); SQL reals are bytes over RESP2, floats over
    RESP3; keys and values are bytes either way. Runs with both redis-py releases
    (tests/test_client_redis_newest.py)."""
    default = 3 if int(redis.__version__.split(".")[0]) >= 8 else 2
    for protocol, c in ((default, client), (2, cairn.Client(HOST, client.endpoint[1], protocol=2)),
                        (3, cairn.Client(HOST, client.endpoint[1], protocol=3))):
        r = c.sql_query("SELECT ? AS i, ? AS r, ? AS t, ? AS b, ? AS n", 5, 0.5, "x", b"\xff", None)
        assert r.rows == [(5, 0.5 if protocol == 3 else b"0.5", b"x", b"\xff", None)], protocol
        c.tag_set("rt", "v", tags=[(9, 1)])
        assert c.tag_get(where(9) == 1).items == {b"rt": b"v"}
        assert c.tag_keys(where(9) == 1).items == [b"rt"]
        assert c.redis.get("rt") == b"v"
        if c is not client:
            c.close()


def test_creating_a_near_cache_with_the_server_down_does_not_block():
    port = _closed_port()
    client = cairn.Client(HOST, port)
    try:
        t0 = time.monotonic()
        c = client.cache("down", on_error="fetch")  # near cache on: waits for the stream
        assert c.get_or_fetch("k", lambda: "db") == "db"
        assert time.monotonic() - t0 < 1.0, "one failed connection attempt, not ready_timeout (5 s)"
        assert not c.near.enabled
    finally:
        client.close()
