"""ZUNION ZINTER ZDIFF ZDIFFSTORE ZINTERCARD (WITHSCORES WEIGHTS AGGREGATE LIMIT) and ZRANK /
ZREVRANK WITHSCORE. Validated against redis-server with CAIRN_TARGET=redis, except WITHSCORE
(Redis 7.2, newer than the 7.0 installed here: cairn_only, checked against t_zset.c)."""

import pytest
import redis

pytestmark = pytest.mark.redis_only


@pytest.fixture
def zs(r):
    r.zadd("a", {"x": 1, "y": 2, "z": 3})
    r.zadd("b", {"y": 10, "z": 20, "w": 30})
    r.sadd("s", "z", "v")
    return r


def test_zunion_zinter_zdiff(zs):
    r = zs
    assert r.zunion(["a", "b"]) == [b"x", b"y", b"z", b"w"]
    assert r.zunion(["a", "b"], withscores=True) == [(b"x", 1), (b"y", 12), (b"z", 23), (b"w", 30)]
    assert r.zinter(["a", "b"], withscores=True) == [(b"y", 12), (b"z", 23)]
    assert r.zinter(["a", "b"], aggregate="MIN", withscores=True) == [(b"y", 2), (b"z", 3)]
    assert r.zunion({"a": 2, "b": 1}, aggregate="MAX", withscores=True) == [
        (b"x", 2), (b"y", 10), (b"z", 20), (b"w", 30)]
    # A set counts with score 1; a missing key is empty.
    assert r.zinter(["a", "s"], withscores=True) == [(b"z", 4)]
    assert r.zinter(["a", "missing"]) == []
    # (redis-py leaves ZDIFF's WITHSCORES reply flat.)
    assert r.zdiff(["a", "b"], withscores=True) == [b"x", b"1"]
    assert r.zdiff(["a", "s", "missing"]) == [b"x", b"y"]
    assert r.zdiff(["missing", "a"]) == []


def test_zdiffstore_and_zintercard(zs):
    r = zs
    assert r.zdiffstore("d", ["a", "b"]) == 1
    assert r.zrange("d", 0, -1, withscores=True) == [(b"x", 1)]
    assert r.zdiffstore("d", ["a", "a"]) == 0
    assert r.exists("d") == 0
    assert r.zintercard(2, ["a", "b"]) == 2
    assert r.zintercard(2, ["a", "b"], limit=1) == 1
    assert r.zintercard(2, ["a", "b"], limit=0) == 2
    assert r.zintercard(1, ["missing"]) == 0


def test_errors(zs, raw):
    r = zs
    r.set("str", "v")
    assert raw.err("ZUNION", "0", "a") == "ERR at least 1 input key is needed for 'zunion' command"
    assert raw.err("ZINTERCARD", "0", "a") == "ERR at least 1 input key is needed for 'zintercard' command"
    assert raw.err("ZDIFF", "3", "a", "b") == "ERR syntax error"
    assert raw.err("ZUNION", "x", "a") == "ERR value is not an integer or out of range"
    assert raw.err("ZINTER", "2", "a", "str").startswith("WRONGTYPE")
    # The keys' types are checked before the options.
    assert raw.err("ZINTER", "2", "a", "str", "BOGUS").startswith("WRONGTYPE")
    assert raw.err("ZDIFF", "2", "a", "b", "WEIGHTS", "1", "2") == "ERR syntax error"
    assert raw.err("ZDIFF", "1", "a", "AGGREGATE", "MIN") == "ERR syntax error"
    assert raw.err("ZUNIONSTORE", "d", "1", "a", "WITHSCORES") == "ERR syntax error"
    assert raw.err("ZINTERCARD", "1", "a", "LIMIT", "-1") == "ERR LIMIT can't be negative"
    assert raw.err("ZINTERCARD", "1", "a", "WITHSCORES") == "ERR syntax error"
    assert raw.err("ZUNION", "2", "a", "b", "WEIGHTS", "1", "x") == "ERR weight value is not a float"
    assert raw.err("ZUNION", "1", "a", "AGGREGATE", "AVG") == "ERR syntax error"


@pytest.mark.cairn_only  # WITHSCORE is Redis 7.2; the installed reference is 7.0
def test_zrank_withscore(r, raw):
    r.zadd("z", {"a": 1.5, "b": 2, "c": 3})
    assert r.zrank("z", "b", withscore=True) == [1, b"2"]
    assert r.zrevrank("z", "a", withscore=True) == [2, b"1.5"]
    assert r.zrank("z", "nope", withscore=True) is None
    assert r.zrank("missing", "a", withscore=True) is None
    raw.request(b"*4\r\n$5\r\nZRANK\r\n$1\r\nz\r\n$4\r\nnope\r\n$9\r\nWITHSCORE\r\n", b"*-1\r\n")
    assert raw.err("ZRANK", "z", "a", "WITHSCORES") == "ERR syntax error"
    assert raw.err("ZRANK", "z", "a", "WITHSCORE", "x") == "ERR wrong number of arguments for 'zrank' command"
    assert r.zrank("z", "c") == 2
