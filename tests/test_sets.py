"""Set commands (RESP2 and RESP3). Validated against redis-server 7 with CAIRN_TARGET=redis."""

import pytest
import redis

pytestmark = pytest.mark.redis_only

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


def test_sadd_srem_smembers_scard(r, raw):
    assert r.sadd("s", "a", "b", "c", "a") == 3
    assert r.sadd("s", "c", "d") == 1
    assert r.smembers("s") == {b"a", b"b", b"c", b"d"}
    assert r.scard("s") == 4
    assert r.srem("s", "a", "zz") == 1
    assert r.srem("nos", "a") == 0
    assert r.scard("nos") == 0
    assert r.smembers("nos") == set()
    raw.request(b"*2\r\n$8\r\nSMEMBERS\r\n$3\r\nnos\r\n", b"*0\r\n")
    # The last member removed deletes the key, as in Redis.
    assert r.srem("s", "b", "c", "d") == 3
    assert r.exists("s") == 0
    assert raw.err("SADD", "s") == arity("sadd")
    assert raw.err("SCARD") == arity("scard")


def test_sismember_smismember(r):
    r.sadd("s", "a", "b")
    assert r.sismember("s", "a") == 1
    assert r.sismember("s", "x") == 0
    assert r.sismember("nos", "a") == 0
    assert r.smismember("s", "a", "x", "b") == [1, 0, 1]
    assert r.smismember("nos", "a") == [0]


def test_wrongtype_everywhere(r):
    r.set("str", "v")
    r.sadd("s", "a")
    for args in (
        ("SADD", "str", "a"), ("SREM", "str", "a"), ("SMEMBERS", "str"), ("SISMEMBER", "str", "a"),
        ("SMISMEMBER", "str", "a"), ("SCARD", "str"), ("SPOP", "str"), ("SRANDMEMBER", "str"),
        ("SSCAN", "str", "0"), ("SMOVE", "str", "s", "a"), ("SMOVE", "s", "str", "a"),
        ("SINTER", "s", "str"), ("SUNION", "s", "str"), ("SDIFF", "s", "str"),
        ("SINTERSTORE", "d", "s", "str"), ("SINTERCARD", "2", "s", "str"),
    ):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command(*args)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get("s")
    assert r.type("s") == b"set"
    # SMOVE refused: nothing moved.
    assert r.smembers("s") == {b"a"}


def test_spop(r, raw):
    r.sadd("s", *"abcde")
    popped = r.spop("s")
    assert popped in {b"a", b"b", b"c", b"d", b"e"}
    assert r.scard("s") == 4
    two = r.spop("s", 2)
    assert len(two) == 2 and not set(two) & {popped}
    assert r.scard("s") == 2
    assert sorted(r.spop("s", 10)) == sorted({b"a", b"b", b"c", b"d", b"e"} - {popped} - set(two))
    assert r.exists("s") == 0
    assert r.spop("nos") is None
    assert r.spop("nos", 3) == []
    r.sadd("s", "a")
    assert r.spop("s", 0) == []
    assert raw.err("SPOP", "s", "-1") == "ERR value is out of range, must be positive"
    assert raw.err("SPOP", "s", "x") == "ERR value is out of range, must be positive"
    assert raw.err("SPOP", "s", "1", "2") == "ERR syntax error"


def test_srandmember(r, raw):
    r.sadd("s", "a", "b", "c")
    assert r.srandmember("s") in {b"a", b"b", b"c"}
    two = r.srandmember("s", 2)
    assert len(two) == 2 and len(set(two)) == 2
    assert sorted(r.srandmember("s", 10)) == [b"a", b"b", b"c"]
    repeats = r.srandmember("s", -10)
    assert len(repeats) == 10 and set(repeats) <= {b"a", b"b", b"c"}
    assert r.srandmember("s", 0) == []
    assert r.srandmember("nos") is None
    assert r.srandmember("nos", 5) == []
    assert r.scard("s") == 3
    assert raw.err("SRANDMEMBER", "s", "x") == "ERR value is not an integer or out of range"


def test_sscan(r):
    members = {f"m{i}".encode() for i in range(50)}
    r.sadd("s", *members)
    seen, cursor = set(), 0
    while True:
        cursor, found = r.sscan("s", cursor)
        seen |= set(found)
        if cursor == 0:
            break
    assert seen == members
    cursor, found = r.sscan("s", 0, match="m1*", count=100)
    assert set(found) == {m for m in members if m.startswith(b"m1")}
    assert r.sscan("nos", 0) == (0, [])
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.execute_command("SSCAN", "s", "x")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SSCAN", "s", "0", "COUNT", "0")


def test_smove(r):
    r.sadd("a", "x", "y")
    assert r.smove("a", "b", "x") == 1
    assert r.smove("a", "b", "nope") == 0
    assert r.smove("noset", "b", "x") == 0
    assert r.smembers("a") == {b"y"}
    assert r.smembers("b") == {b"x"}
    assert r.smove("a", "a", "y") == 1
    assert r.smove("a", "a", "q") == 0
    assert r.smove("a", "b", "y") == 1
    assert r.exists("a") == 0


def test_algebra(r):
    r.sadd("a", "1", "2", "3", "4")
    r.sadd("b", "3", "4", "5")
    r.sadd("c", "4", "6")
    assert r.sinter("a", "b") == {b"3", b"4"}
    assert r.sinter("a", "b", "c") == {b"4"}
    assert r.sinter("a", "missing") == set()
    assert r.sunion("a", "b", "c", "missing") == {b"1", b"2", b"3", b"4", b"5", b"6"}
    assert r.sdiff("a", "b", "c") == {b"1", b"2"}
    assert r.sdiff("missing", "a") == set()
    assert r.sinterstore("d", "a", "b") == 2
    assert r.smembers("d") == {b"3", b"4"}
    assert r.sunionstore("d", "b", "c") == 4
    assert r.smembers("d") == {b"3", b"4", b"5", b"6"}
    assert r.sdiffstore("d", "a", "b") == 2
    assert r.smembers("d") == {b"1", b"2"}
    # A store of an empty result deletes the destination, whatever it held.
    r.set("d", "string")
    assert r.sinterstore("d", "a", "missing") == 0
    assert r.exists("d") == 0
    # The destination may be one of the sources.
    assert r.sunionstore("a", "a", "c") == 5
    assert r.smembers("a") == {b"1", b"2", b"3", b"4", b"6"}


def test_sintercard(r, raw):
    r.sadd("a", "1", "2", "3")
    r.sadd("b", "2", "3", "4")
    assert r.sintercard(2, ["a", "b"]) == 2
    assert r.sintercard(2, ["a", "b"], limit=1) == 1
    assert r.sintercard(1, ["a"], limit=0) == 3
    assert r.sintercard(2, ["a", "missing"]) == 0
    assert raw.err("SINTERCARD", "0", "a") == "ERR numkeys should be greater than 0"
    assert raw.err("SINTERCARD", "3", "a", "b") == "ERR Number of keys can't be greater than number of args"
    assert raw.err("SINTERCARD", "2", "a", "b", "LIMIT", "-1") == "ERR LIMIT can't be negative"
    assert raw.err("SINTERCARD", "2", "a", "b", "FOO") == "ERR syntax error"
    assert raw.err("SINTERCARD", "x", "a") == "ERR numkeys should be greater than 0"


def test_resp3_replies(r3, raw):
    r3.sadd("s", "a", "b")
    raw.command("HELLO", "3")
    assert raw.command("SMEMBERS", "s") in (b"~2\r\n$1\r\na\r\n$1\r\nb\r\n", b"~2\r\n$1\r\nb\r\n$1\r\na\r\n")
    assert raw.command("SINTER", "s", "s").startswith(b"~2\r\n")
    assert raw.command("SPOP", "nos", "1") == b"~0\r\n"
    assert raw.command("SRANDMEMBER", "s", "5").startswith(b"*2\r\n")
    assert raw.command("SMISMEMBER", "s", "a", "z") == b"*2\r\n:1\r\n:0\r\n"
    assert raw.command("SPOP", "nos") == b"_\r\n"


def test_expiry_and_keyspace_commands(r):
    r.sadd("s", "a")
    assert r.expire("s", 100) == 1
    r.sadd("s", "b")
    assert 0 < r.ttl("s") <= 100, "a change keeps the deadline"
    assert r.persist("s") == 1
    assert r.ttl("s") == -1
    r.pexpire("s", 1)
    import time

    time.sleep(0.05)
    assert r.exists("s") == 0
    assert r.sadd("s", "x") == 1
    r.rpush("l", "x")
    r.zadd("z", {"x": 1})
    r.set("str", "x")
    assert sorted(r.scan(0, _type="set", count=1000)[1]) == [b"s"]
    assert r.type("l") == b"list" and r.type("z") == b"zset"
    assert r.delete("s", "l", "z") == 3


def test_multi_exec(r):
    p = r.pipeline(transaction=True)
    p.sadd("a", "1", "2")
    p.sadd("b", "2")
    p.sinterstore("c", "a", "b")
    p.smembers("c")
    assert p.execute() == [2, 1, 1, {b"2"}]


@pytest.mark.cairn_only
def test_tags_on_a_set(r):
    """TAG.* applies to any key: a tagged set is found and deleted by its tag group."""
    r.sadd("s1", "a")
    r.sadd("s2", "b")
    assert r.execute_command("TAG.ADD", "s1", 1, 7) == 1
    r.sadd("s1", "c")
    r.expire("s1", 100)
    assert r.execute_command("TAG.OF", "s1") == [[1, 7]]
    assert r.execute_command("TAG.KEYS", "WHERE", 1, "=", 7) == [b"0", [b"s1"]]
    assert r.smembers("s1") == {b"a", b"c"}, "tagging and a deadline kept the members"
    assert r.execute_command("TAG.DEL", "WHERE", 1, "=", 7) == 1
    assert r.exists("s1") == 0 and r.exists("s2") == 1


def test_tracking_invalidation_on_sadd(server, r):
    """A client caching SMEMBERS hears of a change by SADD (RESP3 push)."""
    tracked = server.raw()
    tracked.command("HELLO", "3")
    assert tracked.command("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
    r.sadd("s", "a")
    tracked.command("SMEMBERS", "s")
    r.sadd("s", "b")
    push = tracked.read_resp(timeout=5)
    assert push.startswith(b">2\r\n$10\r\ninvalidate\r\n"), push
    assert b"$1\r\ns\r\n" in push
    tracked.close()


@pytest.mark.cairn_only
def test_memcached_get_of_a_set_misses(server, r):
    """A memcached read of a set gets what it gets for a hash: no value."""
    r.sadd("s", "a")
    mc = server.mc()
    assert mc.get("s") is None
    assert mc.get_many(["s"]) == {}
    mc.close()
