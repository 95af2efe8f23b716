"""Keyspace commands (RESP). Validated against redis-server 7 (started with
``--databases 1`` so that SELECT behaves like cairn's single database)."""

import pytest

pytestmark = pytest.mark.redis_only


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


def full_scan(r, **kw):
    cursor, seen, calls = 0, [], 0
    while True:
        cursor, keys = r.scan(cursor, **kw)
        calls += 1
        seen.extend(keys)
        if cursor == 0:
            return seen, calls
        assert calls < 100000, "SCAN did not terminate"


def test_dbsize_flushall(r, raw):
    assert r.dbsize() == 0
    r.mset({f"k{i}": i for i in range(100)})
    r.hset("h", "f", "v")
    assert r.dbsize() == 101
    raw.request(b"*1\r\n$6\r\nDBSIZE\r\n", b":101\r\n")
    raw.request(b"*1\r\n$8\r\nFLUSHALL\r\n", b"+OK\r\n")
    assert r.dbsize() == 0
    assert r.get("k1") is None


def test_flushdb_sync_async(r, raw):
    r.mset({f"k{i}": i for i in range(100)})
    raw.request(b"*2\r\n$7\r\nFLUSHDB\r\n$5\r\nASYNC\r\n", b"+OK\r\n")
    assert r.dbsize() == 0
    r.set("a", "1")
    raw.request(b"*2\r\n$7\r\nFLUSHDB\r\n$4\r\nSYNC\r\n", b"+OK\r\n")
    assert r.dbsize() == 0
    r.set("a", "1")
    raw.request(b"*1\r\n$7\r\nFLUSHDB\r\n", b"+OK\r\n")
    assert r.dbsize() == 0
    r.set("a", "1")
    raw.request(b"*2\r\n$8\r\nFLUSHALL\r\n$5\r\nASYNC\r\n", b"+OK\r\n")
    assert r.dbsize() == 0
    assert raw.err("FLUSHALL", "BOGUS") == "ERR syntax error"
    # the keyspace is usable right after an async flush
    r.set("after", "1")
    assert r.get("after") == b"1"


def test_select(raw):
    raw.request(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n", b"+OK\r\n")
    assert raw.err("SELECT", "1") == "ERR DB index is out of range"
    assert raw.err("SELECT", "abc") == "ERR value is not an integer or out of range"
    assert raw.err("SELECT") == arity("select")


def test_scan_sees_every_key(r):
    keys = {f"key:{i}".encode() for i in range(1000)}
    r.mset({k: "v" for k in keys})
    seen, calls = full_scan(r)
    assert set(seen) == keys
    assert calls >= 1
    # COUNT is a hint; iteration must still complete and see every key
    seen, calls = full_scan(r, count=7)
    assert set(seen) == keys
    assert calls > 1
    seen, _ = full_scan(r, count=5000)
    assert set(seen) == keys


def test_scan_match(r):
    r.mset({f"user:{i}": "v" for i in range(300)})
    r.mset({f"item:{i}": "v" for i in range(300)})
    seen, _ = full_scan(r, match="user:*", count=50)
    assert set(seen) == {f"user:{i}".encode() for i in range(300)}
    seen, _ = full_scan(r, match="item:1?", count=10)
    assert set(seen) == {f"item:1{i}".encode() for i in range(10)}
    seen, _ = full_scan(r, match="nothing*")
    assert seen == []


def test_scan_empty_and_errors(r, raw):
    assert r.scan(0) == (0, [])
    raw.request(b"*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n", b"*2\r\n$1\r\n0\r\n*0\r\n")
    assert raw.err("SCAN", "abc") == "ERR invalid cursor"
    assert raw.err("SCAN", "0", "COUNT", "0") == "ERR syntax error"
    assert raw.err("SCAN", "0", "COUNT", "x") == "ERR value is not an integer or out of range"
    assert raw.err("SCAN", "0", "BOGUS", "1") == "ERR syntax error"
    assert raw.err("SCAN") == arity("scan")


def test_scan_while_modifying(r):
    # keys present for the whole iteration must be returned at least once
    stable = {f"stable:{i}".encode() for i in range(500)}
    r.mset({k: "v" for k in stable})
    cursor, seen, n = 0, set(), 0
    while True:
        cursor, keys = r.scan(cursor, count=20)
        seen.update(keys)
        r.set(f"new:{n}", "v")
        n += 1
        if cursor == 0:
            break
    assert stable <= seen


def test_scan_reply_shape(raw):
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+OK\r\n")
    raw.request(b"*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n", b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n")


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ("*", ["hello", "hallo", "hxllo", "heello", "hllo", "h*llo", "h?llo", "h\\llo", "other"]),
        ("h?llo", ["hello", "hallo", "hxllo", "h*llo", "h?llo", "h\\llo"]),
        ("h*llo", ["hello", "hallo", "hxllo", "heello", "hllo", "h*llo", "h?llo", "h\\llo"]),
        ("h[ae]llo", ["hello", "hallo"]),
        ("h[^e]llo", ["hallo", "hxllo", "h*llo", "h?llo", "h\\llo"]),
        ("h[a-b]llo", ["hallo"]),
        ("h[a-z]llo", ["hello", "hallo", "hxllo"]),
        ("h\\*llo", ["h*llo"]),
        ("h\\?llo", ["h?llo"]),
        ("h\\\\llo", ["h\\llo"]),
        ("*er", ["other"]),
        ("h??llo", ["heello"]),
        ("nomatch*", []),
        ("hello", ["hello"]),
    ],
)
def test_keys_glob(r, pattern, expected):
    for k in ["hello", "hallo", "hxllo", "heello", "hllo", "h*llo", "h?llo", "h\\llo", "other"]:
        r.set(k, "1")
    assert sorted(r.keys(pattern)) == sorted(k.encode() for k in expected)


def test_keys_binary(r):
    r.set(b"a\x00b", "1")
    r.set(b"a\xffb", "1")
    r.set(b"ab", "1")
    assert sorted(r.keys("a?b")) == [b"a\x00b", b"a\xffb"]
    assert r.keys(b"a\x00*") == [b"a\x00b"]
