"""NearCache and PeerGroup with a fake clock: local TTLs, soft expiry, fill tokens, eviction."""

import pytest
from fakes import FakeClock

from cairn.near import MISS, NearCache, PeerGroup


def near(clock, **kw):
    n = NearCache(clock=clock, **kw)
    n.set_enabled(True)
    return n


def fill(n, key, value, server_ttl=None, soft_in=None):
    return n.complete_fill(n.begin_fill(key), value, server_ttl, soft_in)


def test_entry_lives_max_local_ttl_or_the_server_ttl():
    clock = FakeClock()
    n = near(clock, max_local_ttl=10)
    assert fill(n, "a", 1) and fill(n, "b", 2, server_ttl=3)
    clock.advance(2.9)
    assert n.read("a") == (1, None) and n.read("b") == (2, None)
    clock.advance(0.2)  # past b's server TTL
    assert n.read("b") == (MISS, None) and n.read("a") == (1, None)
    clock.advance(7)  # past max_local_ttl
    assert n.read("a") == (MISS, None)
    assert n.stats.expirations == 2 and len(n) == 0


def test_soft_expiry_keeps_a_stale_entry():
    clock = FakeClock()
    n = near(clock)
    fill(n, "k", "v", server_ttl=30, soft_in=5)
    clock.advance(5)
    value, stale = n.read("k")
    assert value is MISS and stale is not None and stale.value == "v"
    assert n.get("k", "dflt") == "dflt"


def test_invalidation_during_a_fill_wins():
    n = near(FakeClock())
    token = n.begin_fill("k")
    n.invalidate_pushed(["k"])  # a write elsewhere, pushed while our read was in flight
    assert not n.complete_fill(token, "old")
    assert n.read("k") == (MISS, None) and n.stats.rejected_fills == 1


def test_flush_and_disabled_cache_keep_nothing():
    n = near(FakeClock())
    token = n.begin_fill("k")
    n.flush()
    assert not n.complete_fill(token, 1)
    n.set_enabled(False)
    assert not fill(n, "k", 1)


def test_own_write_push_is_let_through_once():
    n = near(FakeClock())
    token = n.begin_own_fill("k")
    assert n.complete_fill(token, "mine")
    n.invalidate_pushed(["k"])  # the push of our own write
    assert n.read("k") == ("mine", None)
    n.invalidate_pushed(["k"])  # a later write's push
    assert n.read("k") == (MISS, None)


def test_clock_eviction_gives_read_entries_a_second_chance():
    n = near(FakeClock(), max_items=2)
    fill(n, "a", 1)
    fill(n, "b", 2)
    n.read("a")  # referenced
    fill(n, "c", 3)
    assert set(n.keys()) == {"a", "c"} and n.stats.evictions == 1


def test_peer_group_invalidates_every_member_but_the_writer():
    g = PeerGroup()
    a, b = near(FakeClock()), near(FakeClock())
    g.add(a)
    g.add(b)
    fill(a, "k", 1)
    fill(b, "k", 1)
    g.invalidate_many(["k"], besides=a)
    assert a.read("k") == (1, None) and b.read("k") == (MISS, None)
    g.discard(b)
    assert g.members() == [a]


def test_bad_bounds():
    with pytest.raises(ValueError):
        NearCache(0)
    with pytest.raises(ValueError):
        NearCache(10, 0)
