"""Work the server does in bounded slices so that other clients do not stall (issue 19, tails):
mass active expiry at a bounded share of a core, a TAG.DEL of many records in chunks on a helper
thread, FLUSHALL freeing in the background.
What clients see must not change: every key goes, is counted, and tracked clients are told of
every one (the change tap hears each removal)."""

from __future__ import annotations

import select
import socket
import time

import pytest
import redis

from conftest import wait_until
from kit import encode_command
from test_pubsub_tracking import Conns, invalidated, messages


@pytest.fixture
def conns():
    c = Conns()
    yield c
    c.close()


def keys_told(conn, wanted, timeout=5.0):
    """Keys invalidated for `conn` until `wanted` of them came (or the timeout)."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < wanted and time.monotonic() < deadline:
        got += invalidated(messages(conn, 0.1))
    return got


@pytest.mark.cairn_only
def read_every(conn, prefix, n):
    """GETs prefix0..prefix<n-1> on `conn`, pipelined a thousand at a time, so that tracking
    remembers every key for this connection."""
    for lo in range(0, n, 1000):
        conn.send(b"".join(encode_command("GET", f"{prefix}{i}") for i in range(lo, lo + 1000)))
        for _ in range(1000):
            conn.read_resp()


def test_mass_expiry_removes_counts_and_invalidates_every_key(server, r, conns):
    n = 20_000
    t = conns.tracked(server)
    before = r.info("stats")["expired_keys"]
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"mx:{i}", "v", px=3000)
    p.set("stays", "v")
    p.execute()
    # The tracked client reads every key, so each one's expiry must reach it.
    read_every(t, "mx:", n)
    wait_until(lambda: r.dbsize() == 1, timeout=10, interval=0.05, msg="active expiry of every key")
    assert r.info("stats")["expired_keys"] - before == n
    got = keys_told(t, n)
    assert sorted(got) == sorted(f"mx:{i}".encode() for i in range(n))
    assert r.get("stays") == b"v"


@pytest.mark.cairn_only
def test_tag_del_in_chunks_removes_the_whole_group_and_tells_every_key(server, r, conns):
    n = 3000  # about six chunks of 512
    t = conns.tracked(server)
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("TAG.SET", f"tg:{i}", "v", "TAG", 7, 1)
    p.execute_command("TAG.SET", "other", "v", "TAG", 7, 2)
    p.execute()
    read_every(t, "tg:", n)
    assert r.execute_command("TAG.DEL", "WHERE", 7, "=", 1) == n
    assert r.execute_command("TAG.COUNT", "WHERE", 7, "=", 1) == 0
    assert r.dbsize() == 1
    got = keys_told(t, n)
    assert sorted(got) == sorted(f"tg:{i}".encode() for i in range(n))
    # Inside a transaction the delete is one step too.
    for i in range(10):
        r.execute_command("TAG.SET", f"tx:{i}", "v", "TAG", 7, 3)
    p = r.pipeline(transaction=True)
    p.execute_command("TAG.DEL", "WHERE", 7, "=", 3)
    p.dbsize()
    assert p.execute() == [10, 1]


@pytest.mark.cairn_only
def test_flushall_of_many_keys_empties_and_uncounts_at_once(server, r):
    p = r.pipeline(transaction=False)
    for i in range(100_000):
        p.set(f"fl:{i}", "x" * 32)
    p.execute()
    used = r.info("memory")["used_memory"]
    assert r.flushall()
    assert r.dbsize() == 0
    # Uncounted at once, though the records are freed by the reaper afterwards.
    assert r.info("memory")["used_memory"] < used / 4
    r.set("after", "v")
    assert r.get("after") == b"v"


def tag_group(r, prefix, n, value):
    """n records prefix0..prefix<n-1> tagged (7, value), pipelined."""
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("TAG.SET", f"{prefix}{i}", "v", "TAG", 7, value)
    p.execute()


@pytest.mark.cairn_only
def test_a_large_tag_del_leaves_the_event_loop_to_other_clients(server_factory):
    # One I/O thread: with the delete on it, no other client was answered until it was over.
    srv = server_factory("--threads", "1")
    r = redis.Redis(port=srv.port)
    n = 200_000
    tag_group(r, "big:", n, 1)
    r.set("other", "v")
    a = socket.create_connection(("127.0.0.1", srv.port))
    b = socket.create_connection(("127.0.0.1", srv.port))
    bf = b.makefile("rb")
    # The deleting client's next commands come in the same write: they must see the group gone.
    a.sendall(encode_command("TAG.DEL", "WHERE", 7, "=", 1) + encode_command("TAG.COUNT", "WHERE", 7, "=", 1)
              + encode_command("DBSIZE"))
    answered = 0
    while not select.select([a], [], [], 0)[0]:
        b.sendall(encode_command("PING"))
        assert bf.readline() == b"+PONG\r\n"
        answered += 1
    af = a.makefile("rb")
    assert [af.readline() for _ in range(3)] == [b":%d\r\n" % n, b":0\r\n", b":1\r\n"]
    assert answered >= 5, f"only {answered} PINGs were answered during the delete"
    a.close()
    b.close()


@pytest.mark.cairn_only
def test_a_large_tag_del_in_a_transaction_or_a_script_runs_in_place(server, r):
    tag_group(r, "txg:", 2000, 4)
    p = r.pipeline(transaction=True)
    p.execute_command("TAG.DEL", "WHERE", 7, "=", 4)
    p.execute_command("TAG.COUNT", "WHERE", 7, "=", 4)
    assert p.execute() == [2000, 0]
    tag_group(r, "scg:", 2000, 5)
    assert r.eval("return {redis.call('TAG.DEL', 'WHERE', 7, '=', 5), redis.call('TAG.COUNT', 'WHERE', 7, '=', 5)}",
                  0) == [2000, 0]


@pytest.mark.cairn_only
def test_a_large_tag_del_reaches_a_replica(server_factory):
    from test_replication import pair

    _, pc, _, rc = pair(server_factory)
    tag_group(pc, "rg:", 5000, 6)
    pc.set("kept", "v")
    assert pc.execute_command("TAG.DEL", "WHERE", 7, "=", 6) == 5000
    assert pc.execute_command("WAIT", 1, 5000) == 1
    wait_until(lambda: rc.dbsize() == 1, timeout=10, msg="the group's deletion at the replica")
    assert rc.get("kept") == b"v"


@pytest.mark.cairn_only
def test_a_million_keys_expiring_at_once_are_all_gone_within_seconds(server_factory):
    # Active expiry works at most a quarter of a core, yet must keep up: memory stays bounded.
    srv = server_factory("--threads", "1")
    r = redis.Redis(port=srv.port)
    n = 1_000_000
    deadline_ms = int(time.time() * 1000) + 25_000
    sock = socket.create_connection(("127.0.0.1", srv.port))
    f = sock.makefile("rb")
    for lo in range(0, n, 10_000):
        sock.sendall(b"".join(encode_command("SET", f"mass:{i}", "v", "PXAT", deadline_ms)
                              for i in range(lo, lo + 10_000)))
        for _ in range(10_000):
            f.readline()
    sock.close()
    # All share one deadline (on a machine slow enough to load past it, the last expire as
    # they are written, which must not change what follows).
    time.sleep(max(0.0, (deadline_ms - int(time.time() * 1000)) / 1000))
    # Readers never see an expired key, whether or not active expiry has reached it.
    assert r.get("mass:12345") is None and r.exists("mass:999999") == 0
    started = time.monotonic()
    wait_until(lambda: r.dbsize() == 0, timeout=20, interval=0.1, msg="active expiry of a million keys")
    took = time.monotonic() - started
    assert r.info("stats")["expired_keys"] == n
    print(f"a million keys expired within {took:.1f} s of their deadline")
