"""`--cas no`: records without CAS, answering as memcached `-C` does (checked byte for byte against
a real `memcached -C` in the same test), and WATCH still seeing every change."""

import shutil

import pytest
import redis

from conftest import TARGET, RawConn
from kit import HOST, ServerProcess, mc_stats

pytestmark = pytest.mark.skipif(TARGET != "cairn", reason="starts its own cairn servers")

# Requests whose replies memcached -C and cairn --cas no must agree on, in order.
SCRIPT = [
    b"set a 0 0 1\r\nx\r\n",
    b"gets a\r\n",
    b"cas a 0 0 1 5\r\ny\r\n",
    b"cas a 0 0 1 0\r\nz\r\n",
    b"gets a\r\n",
    b"cas nokey 0 0 1 0\r\nq\r\n",
    b"mg a c v\r\n",
    b"ms a 1 C0\r\nw\r\n",
    b"ms a 1 C7\r\nw\r\n",
    b"ms a 1 E9\r\nw\r\n",
    b"ms nokey 1 C5\r\nx\r\n",
    b"mg a c v\r\n",
    b"mg a E5 v\r\n",
    b"set n 0 0 1\r\n5\r\n",
    b"ma n C0 v\r\n",
    b"ma n C5 v\r\n",
    b"ma n E5 v\r\n",
    b"md n E5\r\n",
    b"md n C5\r\n",
    b"touch n 100\r\n",
    b"gets n\r\n",
    b"md n C0\r\n",
    b"mg n v\r\n",
    b"ms a 1 I\r\nv\r\n",
    b"mg a c s v\r\n",
]


def replies(port):
    conn = RawConn(HOST, port)
    out = []
    for request in SCRIPT:
        conn.send(request)
        # Every reply above is one line, or VALUE/VA lines that end with END or the value.
        line = conn.read_until(b"\r\n")
        if line.startswith(b"VALUE"):
            line += conn.read_until(b"END\r\n")
        elif line.startswith(b"VA "):
            line += conn.read_until(b"\r\n")
        out.append(line)
    conn.sock.close()
    return out


@pytest.fixture
def cairn_no_cas(server_factory):
    return server_factory("--cas", "no")


@pytest.mark.skipif(shutil.which("memcached") is None, reason="needs memcached")
def test_replies_match_memcached_dash_c(cairn_no_cas):
    peer = ServerProcess(["-C"], kind="memcached").start()
    try:
        expected = replies(peer.memcache_port)
    finally:
        peer.stop()
    got = replies(cairn_no_cas.memcache_port)
    assert got == expected
    # What the script shows, so that a change on either side is easy to read.
    assert expected[1] == b"VALUE a 0 1 0\r\nx\r\nEND\r\n"
    assert expected[2] == expected[3] == b"EXISTS\r\n"


def test_records_are_four_bytes_smaller(server_factory, cairn_no_cas):
    with_cas = server_factory()
    sizes = []
    for srv in (with_cas, cairn_no_cas):
        r = srv.client()
        r.set(b"k" * 16, b"v" * 32)
        sizes.append(r.memory_usage(b"k" * 16))
        assert r.config_get("cas")["cas"] == ("yes" if srv is with_cas else "no")
    assert sizes[0] - sizes[1] == 4, sizes
    # memcached's `stats settings` says so as memcached -C does.
    assert mc_stats(cairn_no_cas.memcache_port, "settings")["cas_enabled"] == "no"
    assert mc_stats(with_cas.memcache_port, "settings")["cas_enabled"] == "yes"


def test_watch_sees_every_change_without_cas(cairn_no_cas):
    r = cairn_no_cas.client()
    other = cairn_no_cas.client()
    changes = [
        lambda: other.set(b"w", b"2"),
        lambda: other.expire(b"w", 100),
        lambda: other.append(b"w", b"x"),
        lambda: other.incr(b"n"),
        lambda: other.rpush(b"l", b"y"),
        lambda: other.delete(b"w") and other.set(b"w", b"1"),
    ]
    for i, change in enumerate(changes):
        r.set(b"w", b"1")
        r.set(b"n", b"1")
        r.rpush(b"l", b"x")
        key = {3: b"n", 4: b"l"}.get(i, b"w")
        p = r.pipeline(transaction=True)
        p.watch(key)
        change()
        p.multi()
        p.set(b"done", b"1")
        with pytest.raises(redis.WatchError):
            p.execute()
        p.reset()
    # No change: EXEC runs.
    p = r.pipeline(transaction=True)
    p.watch(b"w")
    p.multi()
    p.set(b"done", b"2")
    assert p.execute() == [True]
    assert r.get(b"done") == b"2"
