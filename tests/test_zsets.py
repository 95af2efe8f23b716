"""Sorted set commands (RESP2 and RESP3). Validated against redis-server 7 with
CAIRN_TARGET=redis. Scores are chosen to print the same in every Redis 7 (halves, integers)."""

import pytest
import redis

pytestmark = pytest.mark.redis_only

NOT_FLOAT = "ERR value is not a valid float"


def test_zadd_flags(r, raw):
    assert r.zadd("z", {"a": 1, "b": 2}) == 2
    assert r.zadd("z", {"a": 5, "c": 3}) == 1
    assert r.zscore("z", "a") == 5.0
    assert r.zadd("z", {"a": 6, "d": 4}, nx=True) == 1
    assert r.zscore("z", "a") == 5.0
    assert r.zadd("z", {"a": 7, "e": 1}, xx=True) == 0
    assert r.zscore("z", "a") == 7.0 and r.zscore("z", "e") is None
    assert r.zadd("z", {"a": 8, "b": 9, "f": 1}, ch=True) == 3
    assert r.zadd("z", {"a": 1}, gt=True, ch=True) == 0
    assert r.zadd("z", {"a": 10}, gt=True, ch=True) == 1
    assert r.zadd("z", {"a": 20}, lt=True, ch=True) == 0
    assert r.zadd("z", {"a": 2.5}, lt=True, ch=True) == 1
    assert r.zadd("z", {"a": 1.5}, incr=True) == 4.0
    assert r.zadd("z", {"new": 1}, incr=True, xx=True) is None
    assert r.zadd("z", {"a": 1}, incr=True, nx=True) is None
    assert raw.err("ZADD", "z", "NX", "XX", "1", "a") == "ERR XX and NX options at the same time are not compatible"
    assert raw.err("ZADD", "z", "GT", "LT", "1", "a") == "ERR GT, LT, and/or NX options at the same time are not compatible"
    assert raw.err("ZADD", "z", "NX", "GT", "1", "a") == "ERR GT, LT, and/or NX options at the same time are not compatible"
    assert raw.err("ZADD", "z", "INCR", "1", "a", "2", "b") == "ERR INCR option supports a single increment-element pair"
    assert raw.err("ZADD", "z", "1", "a", "2") == "ERR syntax error"
    assert raw.err("ZADD", "z", "x", "a") == NOT_FLOAT
    assert raw.err("ZADD", "z", "nan", "a") == NOT_FLOAT
    r.zadd("inf", {"a": float("inf")})
    assert raw.err("ZADD", "inf", "INCR", "-inf", "a") == "ERR resulting score is not a number (NaN)"
    assert r.zadd("z", {"x": 1}, xx=True) == 0


def test_zrem_zcard_zscore_zmscore_zincrby(r, raw):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zcard("z") == 3 and r.zcard("noz") == 0
    assert r.zrem("z", "a", "zz") == 1
    assert r.zscore("z", "zz") is None and r.zscore("noz", "a") is None
    assert r.zmscore("z", ["b", "zz", "c"]) == [2.0, None, 3.0]
    assert r.zmscore("noz", ["a"]) == [None]
    assert r.zincrby("z", 1.5, "b") == 3.5
    assert r.zincrby("z", 2, "new") == 2.0
    assert raw.err("ZINCRBY", "z", "x", "a") == NOT_FLOAT
    assert r.zrem("z", "b", "c", "new") == 3
    assert r.exists("z") == 0


def test_zrange_by_rank_score_lex(r, raw):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrange("z", 0, -1) == [b"a", b"b", b"c", b"d"]
    assert r.zrange("z", 1, 2, withscores=True) == [(b"b", 2.0), (b"c", 3.0)]
    assert r.zrange("z", 0, 1, desc=True) == [b"d", b"c"]
    assert r.zrevrange("z", 0, 0, withscores=True) == [(b"d", 4.0)]
    assert r.zrangebyscore("z", 2, 3) == [b"b", b"c"]
    assert r.zrangebyscore("z", "(2", "+inf") == [b"c", b"d"]
    assert r.zrangebyscore("z", "-inf", "(3", withscores=True) == [(b"a", 1.0), (b"b", 2.0)]
    assert r.zrangebyscore("z", 1, 4, start=1, num=2) == [b"b", b"c"]
    assert r.zrevrangebyscore("z", 4, 2) == [b"d", b"c", b"b"]
    assert r.zrevrangebyscore("z", "(4", "-inf", start=0, num=1) == [b"c"]
    assert r.zrange("z", 3, 2, byscore=True, desc=True) == [b"c", b"b"]
    assert r.zrange("z", 1, 4, byscore=True, offset=1, num=10) == [b"b", b"c", b"d"]
    assert r.execute_command("ZRANGE", "z", "1", "4", "BYSCORE", "LIMIT", "0", "-1") == [b"a", b"b", b"c", b"d"]
    r.zadd("lex", {m: 0 for m in "abcde"})
    assert r.zrangebylex("lex", "[b", "(d") == [b"b", b"c"]
    assert r.zrangebylex("lex", "-", "+", start=1, num=2) == [b"b", b"c"]
    assert r.zrange("lex", "[d", "-", bylex=True, desc=True) == [b"d", b"c", b"b", b"a"]
    assert r.zlexcount("lex", "(a", "[c") == 2
    assert r.zcount("z", "(1", 3) == 2
    assert r.zcount("noz", 0, 1) == 0
    assert r.zrange("noz", 0, -1) == []
    assert raw.err("ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    assert raw.err("ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES") == "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    assert raw.err("ZRANGEBYSCORE", "z", "x", "1") == "ERR min or max is not a float"
    assert raw.err("ZRANGEBYLEX", "z", "a", "+") == "ERR min or max not valid string range item"
    assert raw.err("ZRANGE", "z", "a", "1") == "ERR value is not an integer or out of range"
    assert raw.err("ZRANGE", "z", "0", "1", "FOO") == "ERR syntax error"


def test_zrangestore(r, raw):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zrangestore("dst", "z", 2, 3, byscore=True) == 2
    assert r.zrange("dst", 0, -1, withscores=True) == [(b"b", 2.0), (b"c", 3.0)]
    assert r.zrangestore("dst", "z", 5, 6) == 0
    assert r.exists("dst") == 0
    assert raw.err("ZRANGESTORE", "dst", "z", "0", "1", "WITHSCORES") == "ERR syntax error"


def test_zrank_zrevrank(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zrank("z", "a") == 0 and r.zrank("z", "c") == 2
    assert r.zrevrank("z", "a") == 2
    assert r.zrank("z", "zz") is None and r.zrank("noz", "a") is None


def test_zremrange(r):
    r.zadd("z", {m: i for i, m in enumerate("abcdef")})
    assert r.zremrangebyscore("z", "(0", 1) == 1
    assert r.zremrangebyrank("z", -2, -1) == 2
    assert r.zrange("z", 0, -1) == [b"a", b"c", b"d"]
    r.zadd("lex", {m: 0 for m in "abc"})
    assert r.zremrangebylex("lex", "[b", "+") == 2
    assert r.zrange("lex", 0, -1) == [b"a"]
    assert r.zremrangebyrank("z", 0, -1) == 3
    assert r.exists("z") == 0
    assert r.zremrangebyscore("noz", 0, 1) == 0


def test_zpopmin_zpopmax(r, raw):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zpopmin("z") == [(b"a", 1.0)]
    assert r.zpopmax("z", 5) == [(b"c", 3.0), (b"b", 2.0)]
    assert r.exists("z") == 0
    assert r.zpopmin("noz") == []
    assert raw.err("ZPOPMIN", "z", "-1") == "ERR value is out of range, must be positive"


def test_zunionstore_zinterstore(r, raw):
    r.zadd("a", {"x": 1, "y": 2})
    r.zadd("b", {"y": 3, "z": 4})
    r.sadd("s", "x", "z")
    assert r.zunionstore("u", ["a", "b"]) == 3
    assert r.zrange("u", 0, -1, withscores=True) == [(b"x", 1.0), (b"z", 4.0), (b"y", 5.0)]
    assert r.zinterstore("i", {"a": 2, "b": 3}) == 1
    assert r.zscore("i", "y") == 13.0
    assert r.zunionstore("m", ["a", "b"], aggregate="MAX") == 3
    assert r.zscore("m", "y") == 3.0
    assert r.zunionstore("m", ["a", "b"], aggregate="min") == 3
    assert r.zscore("m", "y") == 2.0
    # A set counts as a sorted set of score 1.
    assert r.zinterstore("i", ["a", "s"]) == 1
    assert r.zscore("i", "x") == 2.0
    assert r.zinterstore("i", ["a", "missing"]) == 0
    assert r.exists("i") == 0
    assert raw.err("ZUNIONSTORE", "d", "0", "a") == "ERR at least 1 input key is needed for 'zunionstore' command"
    assert raw.err("ZUNIONSTORE", "d", "3", "a", "b") == "ERR syntax error"
    assert raw.err("ZUNIONSTORE", "d", "1", "a", "WEIGHTS", "x") == "ERR weight value is not a float"
    assert raw.err("ZUNIONSTORE", "d", "1", "a", "AGGREGATE", "AVG") == "ERR syntax error"
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.zunionstore("d", ["a", "str"])


def test_zscan_zrandmember(r):
    r.zadd("z", {f"m{i}": i for i in range(30)})
    cursor, pairs = r.zscan("z", 0, count=1000)
    while cursor:
        cursor, more = r.zscan("z", cursor, count=1000)
        pairs += more
    assert dict(pairs) == {f"m{i}".encode(): float(i) for i in range(30)}
    assert dict(r.zscan("z", 0, match="m2*", count=1000)[1]) == {f"m{i}".encode(): float(i) for i in (2, *range(20, 30))}
    assert r.zrandmember("z") in {f"m{i}".encode() for i in range(30)}
    assert len(set(r.zrandmember("z", 5))) == 5
    assert len(r.zrandmember("z", -40)) == 40
    with_scores = r.zrandmember("z", 3, withscores=True)
    assert len(with_scores) == 6
    assert r.zrandmember("noz") is None
    assert r.zrandmember("noz", 3) == []


def test_resp3_doubles_and_pairs(r3, raw):
    raw.command("HELLO", "3")
    raw.command("ZADD", "z", "1.5", "a", "2", "b")
    assert raw.command("ZSCORE", "z", "a") == b",1.5\r\n"
    assert raw.command("ZSCORE", "z", "zz") == b"_\r\n"
    assert raw.command("ZINCRBY", "z", "1", "b") == b",3\r\n"
    assert raw.command("ZMSCORE", "z", "a", "zz") == b"*2\r\n,1.5\r\n_\r\n"
    assert raw.command("ZRANGE", "z", "0", "-1", "WITHSCORES") == b"*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,3\r\n"
    assert raw.command("ZPOPMIN", "z") == b"*2\r\n$1\r\na\r\n,1.5\r\n"
    raw.command("ZADD", "z", "1.5", "a")
    assert raw.command("ZPOPMIN", "z", "1") == b"*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n"
    assert raw.command("ZADD", "z", "INCR", "1", "b") == b",4\r\n"
    # RESP2: scores are bulk strings.
    assert r3.zscore("z", "b") == 4.0


def test_resp2_scores_are_bulk_strings(r, raw):
    r.zadd("z", {"a": 1.5, "b": -2})
    assert raw.command("ZSCORE", "z", "a") == b"$3\r\n1.5\r\n"
    assert raw.command("ZRANGE", "z", "0", "-1", "WITHSCORES") == b"*4\r\n$1\r\nb\r\n$2\r\n-2\r\n$1\r\na\r\n$3\r\n1.5\r\n"


def test_wrongtype_and_multi(r):
    r.set("str", "x")
    for args in (("ZADD", "str", "1", "a"), ("ZSCORE", "str", "a"), ("ZRANGE", "str", "0", "1"),
                 ("ZCARD", "str"), ("ZPOPMIN", "str"), ("ZRANK", "str", "a"), ("ZINCRBY", "str", "1", "a")):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command(*args)
    p = r.pipeline(transaction=True)
    p.zadd("z", {"a": 1})
    p.zincrby("z", 2, "a")
    p.zrange("z", 0, -1, withscores=True)
    assert p.execute() == [1, 3.0, [(b"a", 3.0)]]


@pytest.mark.cairn_only
def test_collections_count_in_maxmemory_and_are_evicted(server_factory):
    """Sets, sorted sets and lists are charged to used_memory as they grow in place, and are
    evicted under the limit (or refused with OOM under noeviction)."""
    srv = server_factory("--maxmemory", "4mb")
    c = srv.client()
    base = c.info("memory")["used_memory"]
    p = c.pipeline(transaction=False)
    for i in range(0, 5000, 500):
        p.sadd("set", *[f"member-{j:06}" for j in range(i, i + 500)])
        p.zadd("zset", {f"member-{j:06}": j for j in range(i, i + 500)})
        p.rpush("list", *[f"member-{j:06}" for j in range(i, i + 500)])
    p.execute()
    grown = c.info("memory")["used_memory"] - base
    assert grown > 3 * 5000 * 16, grown
    # Fill past the limit with more collections: old ones are evicted.
    for k in range(60):
        c.sadd(f"filler-{k}", *[f"{k}-{j:05}-padding-padding" for j in range(1000)])
    info = c.info()
    assert info["evicted_keys"] > 0
    assert info["used_memory"] <= 4 * 1024 * 1024 * 1.2
    c.close()
    # 2mb, not 1mb: the limit must leave room for the first push (~57 KB) beside the
    # connection's buffers, which a loaded machine can see grow (this failed twice under load).
    strict = server_factory("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    c = strict.client()
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for k in range(100):
            c.rpush("big", *[f"{k}-{j:05}-padding-padding" for j in range(1000)])
    assert c.llen("big") > 0 and c.lpop("big") is not None, "reads and pops still work"
    c.close()


def test_over_the_limit_takes_run_and_refused_moves_lose_nothing(server_factory):
    """Over maxmemory under noeviction, commands that only take away (Redis's commands without
    `denyoom`: SREM, ZPOPMIN, LPOP, BLPOP) still run, so a full store can be drained; a move
    (LMOVE, `denyoom`) is refused and leaves both lists as they were."""
    srv = server_factory("--maxmemory-policy", "noeviction")
    c = srv.client()
    c.sadd("s", "a", "b")
    c.zadd("z", {"a": 1, "b": 2})
    c.rpush("src", "x", "y", "z")
    for k in range(10):
        c.rpush("big", *[f"{k}-{j:05}-padding-padding" for j in range(1000)])
    # Lowering the limit under what is stored puts the store over it, as in Redis.
    c.config_set("maxmemory", c.info("memory")["used_memory"] // 2)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        c.sadd("s", "c")
    assert c.srem("s", "a") == 1
    assert c.zpopmin("z") == [(b"a", 1.0)]
    assert c.lpop("src") == b"x"
    assert c.blpop(["src"], timeout=1) == (b"src", b"y")
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        c.lmove("src", "dst", "LEFT", "LEFT")
    assert c.lrange("src", 0, -1) == [b"z"] and not c.exists("dst"), "a refused move loses nothing"
    assert c.delete("big") == 1
    c.config_set("maxmemory", 0)
    c.rpush("src", "w")
    assert c.rpoplpush("src", "src") == b"w", "a rotation copies, then pops"
    assert c.lrange("src", 0, -1) == [b"w", b"z"]
    assert c.lpop("src") == b"w"
    assert c.lmove("src", "dst", "LEFT", "LEFT") == b"z"
    assert c.lrange("dst", 0, -1) == [b"z"] and not c.exists("src")
    c.close()


@pytest.mark.cairn_only
def test_a_refused_smove_loses_nothing(server_factory):
    """Over the limit under noeviction, an SMOVE that would create its destination is refused
    (cairn's choice: Redis, where SMOVE is not `denyoom`, runs it) and the member stays put."""
    srv = server_factory("--maxmemory-policy", "noeviction")
    c = srv.client()
    c.sadd("src", "m", "n")
    c.rpush("big", *[f"{j:05}-padding-padding" for j in range(5000)])
    c.config_set("maxmemory", c.info("memory")["used_memory"] // 2)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        c.smove("src", "dst", "m")
    assert c.smembers("src") == {b"m", b"n"} and not c.exists("dst")
    c.config_set("maxmemory", 0)
    assert c.smove("src", "dst", "m") and c.smembers("dst") == {b"m"}
    assert c.smembers("src") == {b"n"}
    assert c.smove("src", "dst", "absent") is False
