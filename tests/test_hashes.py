"""Hash commands (RESP). Validated against redis-server 7 with CAIRN_TARGET=redis."""

import pytest

pytestmark = pytest.mark.redis_only

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


def test_hset_hget(r, raw):
    assert r.hset("h", mapping={"a": "1", "b": "2", "c": "3"}) == 3
    assert r.hset("h", mapping={"a": "x", "d": "4"}) == 1
    raw.request(b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\ne\r\n$1\r\n5\r\n", b":1\r\n")
    raw.request(b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\ne\r\n$1\r\n6\r\n", b":0\r\n")
    assert r.hget("h", "a") == b"x"
    assert r.hget("h", "e") == b"6"
    assert r.hget("h", "missing") is None
    assert r.hget("nohash", "a") is None
    raw.request(b"*3\r\n$4\r\nHGET\r\n$1\r\nh\r\n$1\r\nz\r\n", b"$-1\r\n")
    # HMSET is the old spelling
    raw.request(b"*4\r\n$5\r\nHMSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\ng\r\n", b"+OK\r\n")
    assert r.hget("h", "f") == b"g"
    assert raw.err("HSET", "h") == arity("hset")
    assert raw.err("HSET", "h", "a") == arity("hset")
    assert raw.err("HSET", "h", "a", "1", "b") == arity("hset")
    assert raw.err("HGET", "h") == arity("hget")


def test_hset_duplicate_fields_in_one_call(r):
    assert r.execute_command("HSET", "h", "a", "1", "a", "2") == 1
    assert r.hget("h", "a") == b"2"


def test_hmget_hgetall_hkeys_hvals_hlen(r, raw):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hmget("h", "a", "zz", "c") == [b"1", None, b"3"]
    assert r.hmget("nohash", "a", "b") == [None, None]
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2", b"c": b"3"}
    assert r.hgetall("nohash") == {}
    raw.request(b"*2\r\n$7\r\nHGETALL\r\n$6\r\nnohash\r\n", b"*0\r\n")
    assert sorted(r.hkeys("h")) == [b"a", b"b", b"c"]
    assert sorted(r.hvals("h")) == [b"1", b"2", b"3"]
    assert r.hkeys("nohash") == []
    assert r.hvals("nohash") == []
    assert r.hlen("h") == 3
    assert r.hlen("nohash") == 0
    # HKEYS and HVALS come in the same order, matching HGETALL
    assert list(zip(r.hkeys("h"), r.hvals("h"))) == list(r.hgetall("h").items())
    assert raw.err("HMGET", "h") == arity("hmget")


def test_hdel_hexists(r, raw):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hexists("h", "a") is True
    assert r.hexists("h", "zz") is False
    assert r.hexists("nohash", "a") is False
    assert r.hdel("h", "a", "a", "zz") == 1
    assert r.hexists("h", "a") is False
    assert r.hdel("nohash", "a") == 0
    raw.request(b"*4\r\n$4\r\nHDEL\r\n$1\r\nh\r\n$1\r\nb\r\n$1\r\nc\r\n", b":2\r\n")
    assert raw.err("HDEL", "h") == arity("hdel")


def test_hash_deleted_when_last_field_removed(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.hdel("h", "a")
    assert r.exists("h") == 1
    r.hdel("h", "b")
    assert r.exists("h") == 0
    assert r.type("h") == b"none"
    assert r.dbsize() == 0
    # the name is free for a string now
    assert r.set("h", "v") is True


def test_hincrby(r, raw):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    raw.request(b"*4\r\n$7\r\nHINCRBY\r\n$1\r\nh\r\n$1\r\nn\r\n$1\r\n3\r\n", b":1\r\n")
    r.hset("h", "s", "abc")
    assert raw.err("HINCRBY", "h", "s", "1") == "ERR hash value is not an integer"
    assert raw.err("HINCRBY", "h", "n", "x") == "ERR value is not an integer or out of range"
    r.hset("h", "big", "9223372036854775807")
    assert raw.err("HINCRBY", "h", "big", "1") == "ERR increment or decrement would overflow"
    assert r.hget("h", "big") == b"9223372036854775807"
    assert raw.err("HINCRBY", "h", "n") == arity("hincrby")


def test_hsetnx(r, raw):
    assert r.hsetnx("h", "a", "1") == 1
    assert r.hsetnx("h", "a", "2") == 0
    assert r.hget("h", "a") == b"1"
    raw.request(b"*4\r\n$6\r\nHSETNX\r\n$1\r\nh\r\n$1\r\nb\r\n$1\r\n2\r\n", b":1\r\n")
    assert raw.err("HSETNX", "h", "a") == arity("hsetnx")


def test_hstrlen_and_binary_fields(r):
    field = bytes(range(256))
    value = b"\r\n\x00" * 100
    assert r.hset("h", field, value) == 1
    assert r.hget("h", field) == value
    assert r.hgetall("h") == {field: value}
    assert r.execute_command("HSTRLEN", "h", field) == len(value)


@pytest.mark.parametrize(
    "cmd",
    [
        ["HGET", "s", "f"], ["HSET", "s", "f", "v"], ["HMGET", "s", "f"], ["HGETALL", "s"],
        ["HDEL", "s", "f"], ["HEXISTS", "s", "f"], ["HLEN", "s"], ["HKEYS", "s"], ["HVALS", "s"],
        ["HINCRBY", "s", "f", "1"], ["HSETNX", "s", "f", "v"],
    ],
)
def test_hash_command_on_string_is_wrongtype(r, raw, cmd):
    r.set("s", "v")
    assert raw.err(*cmd) == WRONGTYPE
    assert r.get("s") == b"v"


@pytest.mark.parametrize(
    "cmd",
    [["GET", "h"], ["APPEND", "h", "x"], ["INCR", "h"], ["STRLEN", "h"], ["GETRANGE", "h", "0", "1"],
     ["GETDEL", "h"], ["SETRANGE", "h", "0", "x"]],
)
def test_string_command_on_hash_is_wrongtype(r, raw, cmd):
    r.hset("h", "f", "v")
    assert raw.err(*cmd) == WRONGTYPE
    assert r.hgetall("h") == {b"f": b"v"}


def test_large_hash(r):
    n = 5000
    p = r.pipeline(transaction=False)
    for i in range(0, n, 500):
        p.hset("big", mapping={f"f{j}": j for j in range(i, i + 500)})
    p.execute()
    assert r.hlen("big") == n
    got = r.hgetall("big")
    assert len(got) == n
    assert got[b"f4999"] == b"4999"
