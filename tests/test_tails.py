"""Work the server does in bounded slices so that other clients do not stall (issue 19, tails):
mass active expiry, a TAG.DEL of many records in chunks, FLUSHALL freeing in the background.
What clients see must not change: every key goes, is counted, and tracked clients are told of
every one (the change tap hears each removal)."""

from __future__ import annotations

import time

import pytest

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
