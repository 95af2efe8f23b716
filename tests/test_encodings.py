"""OBJECT ENCODING of each type by size, as Redis 7.4 answers it (issue 17), and the
thresholds that decide it (`hash-max-listpack-entries` and the rest) through CONFIG GET/SET.

Runs against real Redis too (CAIRN_TARGET=redis). The local redis-server is 7.0: it has no
packed sets or lists (`listpack` for them is Redis 7.2) and no field expiry (`listpackex` is
7.4); those tests are cairn_only with the reason.
"""

import pytest

from conftest import TARGET

pytestmark = pytest.mark.redis_only

THRESHOLDS = {
    "hash-max-listpack-entries": "512",
    "hash-max-listpack-value": "64",
    "set-max-intset-entries": "512",
    "zset-max-listpack-entries": "128",
    "zset-max-listpack-value": "64",
    "list-max-listpack-size": "-2",
}


def enc(r, key):
    return r.object("encoding", key).decode()


@pytest.fixture
def limits(r):
    """Puts the thresholds back after a test that changes them."""
    old = {name: r.config_get(name)[name] for name in THRESHOLDS}
    yield
    for name, value in old.items():
        r.config_set(name, value)


def test_thresholds_answer_config_get_with_redis_defaults(r):
    for name, default in THRESHOLDS.items():
        assert r.config_get(name) == {name: default}
    # The old ziplist names are aliases.
    assert r.config_get("hash-max-ziplist-entries") == {"hash-max-ziplist-entries": "512"}


@pytest.mark.cairn_only  # set-max-listpack-* is Redis 7.2; the local redis-server is 7.0
def test_set_listpack_thresholds_answer_config_get(r):
    assert r.config_get("set-max-listpack-entries") == {"set-max-listpack-entries": "128"}
    assert r.config_get("set-max-listpack-value") == {"set-max-listpack-value": "64"}


def test_hash_listpack_then_hashtable(r):
    r.hset("small", mapping={f"f{i}": "v" for i in range(512)})
    assert enc(r, "small") == "listpack"
    r.hset("many", mapping={f"f{i}": "v" for i in range(513)})
    assert enc(r, "many") == "hashtable"
    r.hset("long", "f", "x" * 64)
    assert enc(r, "long") == "listpack"
    r.hset("long", "g", "x" * 65)
    assert enc(r, "long") == "hashtable"
    r.hset("longfield", "y" * 65, "v")
    assert enc(r, "longfield") == "hashtable"


def test_zset_listpack_then_skiplist(r):
    r.zadd("small", {f"m{i}": i for i in range(128)})
    assert enc(r, "small") == "listpack"
    r.zadd("small", {"one-more": 1})
    assert enc(r, "small") == "skiplist"
    r.zadd("long", {"x" * 65: 1})
    assert enc(r, "long") == "skiplist"


def test_set_intset_then_hashtable(r):
    r.sadd("ints", *range(512))
    assert enc(r, "ints") == "intset"
    r.sadd("ints", 512)
    assert enc(r, "ints") == "hashtable"
    r.sadd("big", *[f"m{i}" for i in range(200)])
    assert enc(r, "big") == "hashtable"


@pytest.mark.cairn_only  # packed sets are Redis 7.2; the local redis-server is 7.0
def test_set_listpack(r):
    r.sadd("mixed", 1, 2, "three")
    assert enc(r, "mixed") == "listpack"
    r.sadd("ints", 1, 2, 3)
    assert enc(r, "ints") == "intset"
    r.sadd("ints", "x")
    assert enc(r, "ints") == "listpack"
    r.sadd("long", "x" * 65)
    assert enc(r, "long") == "hashtable"


@pytest.mark.cairn_only  # packed lists are Redis 7.2; the local redis-server is 7.0
def test_list_listpack_then_quicklist(r):
    r.rpush("small", *range(100))
    assert enc(r, "small") == "listpack"
    r.rpush("big", "x" * 5000, "y" * 5000)  # past the 8 KiB of list-max-listpack-size -2
    assert enc(r, "big") == "quicklist"


@pytest.mark.cairn_only  # hash field expiry is Redis 7.4; the local redis-server is 7.0
def test_hash_with_field_deadlines_is_listpackex(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.execute_command("HEXPIRE", "h", 100, "FIELDS", 1, "a")
    assert enc(r, "h") == "listpackex"
    r.hset("h", "big", "x" * 65)
    assert enc(r, "h") == "hashtable"


def test_thresholds_follow_config_set(r, limits):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    r.sadd("s", 1, 2, 3)
    assert (enc(r, "h"), enc(r, "z"), enc(r, "s")) == ("listpack", "listpack", "intset")
    r.config_set("hash-max-listpack-entries", 2)
    r.config_set("zset-max-listpack-entries", 2)
    r.config_set("set-max-intset-entries", 2)
    # Redis converts on the next write; cairn's answer follows the thresholds at once.
    r.hset("h2", mapping={"a": "1", "b": "2", "c": "3"})
    r.zadd("z2", {"a": 1, "b": 2, "c": 3})
    r.sadd("s2", 1, 2, 3)
    # Past set-max-intset-entries Redis 7.2+ packs a small set as a listpack; 7.0 has none.
    packed_set = "hashtable" if TARGET == "redis" else "listpack"
    assert (enc(r, "h2"), enc(r, "z2"), enc(r, "s2")) == ("hashtable", "skiplist", packed_set)
    assert r.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "2"}


def test_sets_and_sorted_sets_stay_large_after_shrinking(r):
    # Redis converts these one way: a set or sorted set that grew past a limit keeps its
    # large encoding when it shrinks again.
    r.sadd("ints", *range(513))
    assert enc(r, "ints") == "hashtable"
    r.srem("ints", *range(3, 513))
    assert enc(r, "ints") == "hashtable"
    r.zadd("z", {f"m{i}": i for i in range(129)})
    assert enc(r, "z") == "skiplist"
    r.zremrangebyrank("z", 3, -1)
    assert (r.zcard("z"), enc(r, "z")) == (3, "skiplist")
    r.zadd("long", {"x" * 65: 1, "a": 2})
    r.zrem("long", "x" * 65)
    assert enc(r, "long") == "skiplist"


@pytest.mark.cairn_only  # packed sets are Redis 7.2; the local redis-server is 7.0
def test_set_encodings_after_shrinking_and_by_count(r):
    r.sadd("s", 1, 2, 3, "x")
    assert enc(r, "s") == "listpack"
    r.srem("s", "x")  # no way back to intset in Redis 7.4
    assert enc(r, "s") == "listpack"
    # SADD picks the form by how many members it was given, duplicates included.
    r.sadd("dups", *["a"] * 129)
    assert (r.scard("dups"), enc(r, "dups")) == (1, "hashtable")
    r.sadd("intdups", *[7] * 513)
    assert enc(r, "intdups") == "hashtable"
    # SPOP of most of a hash set leaves the rest in a new set, built up from a listpack.
    r.sadd("big", *[f"m{i}" for i in range(200)])
    assert len(r.spop("big", 197)) == 197
    assert (r.scard("big"), enc(r, "big")) == (3, "listpack")
    r.sadd("big2", *[f"m{i}" for i in range(200)])
    r.spop("big2", 150)  # 50 left: 5 * 50 > 150, popped one by one, still a hashtable
    assert enc(r, "big2") == "hashtable"


@pytest.mark.cairn_only  # packed lists are Redis 7.2; the local redis-server is 7.0
def test_list_goes_back_to_listpack_at_half_its_limit(r):
    # 100-byte elements take 103 bytes of listpack each (7 of header): the 80th push passes
    # 8 KiB (the bytes so far plus its raw 100).
    r.rpush("l", *["x" * 100] * 79)
    assert enc(r, "l") == "listpack"
    r.rpush("l", "x" * 100)
    assert enc(r, "l") == "quicklist"
    # Back only at half the limit (4096 bytes: 39 elements), never on every write.
    r.ltrim("l", 0, 39)
    assert enc(r, "l") == "quicklist"
    r.rpop("l")
    assert (r.llen("l"), enc(r, "l")) == (39, "listpack")

    r.rpush("big", "x" * 5000, "y" * 5000)
    assert enc(r, "big") == "quicklist"
    r.rpop("big")
    assert enc(r, "big") == "quicklist"  # 5011 bytes: over half the limit
    r.lset("big", 0, "small")
    assert enc(r, "big") == "listpack"
    r.lrem("big", 0, "small")
    assert r.exists("big") == 0
