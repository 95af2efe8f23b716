"""Key expiry (RESP). Validated against redis-server 7 with CAIRN_TARGET=redis."""

import time

import pytest

from conftest import wait_until

pytestmark = pytest.mark.redis_only

NOT_INT = "ERR value is not an integer or out of range"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


def test_ttl_pttl_missing_and_persistent(r, raw):
    raw.request(b"*2\r\n$3\r\nTTL\r\n$7\r\nmissing\r\n", b":-2\r\n")
    raw.request(b"*2\r\n$4\r\nPTTL\r\n$7\r\nmissing\r\n", b":-2\r\n")
    r.set("k", "v")
    raw.request(b"*2\r\n$3\r\nTTL\r\n$1\r\nk\r\n", b":-1\r\n")
    raw.request(b"*2\r\n$4\r\nPTTL\r\n$1\r\nk\r\n", b":-1\r\n")
    assert raw.err("TTL") == arity("ttl")


def test_expire_and_pexpire(r, raw):
    r.set("k", "v")
    raw.request(b"*3\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$3\r\n100\r\n", b":1\r\n")
    assert 99 <= r.ttl("k") <= 100
    assert 99000 <= r.pttl("k") <= 100000
    assert r.pexpire("k", 50000) is True
    assert 49000 <= r.pttl("k") <= 50000
    assert r.ttl("k") in (49, 50)
    raw.request(b"*3\r\n$6\r\nEXPIRE\r\n$7\r\nmissing\r\n$3\r\n100\r\n", b":0\r\n")
    assert r.pexpire("missing", 100) is False
    assert raw.err("EXPIRE", "k", "abc") == NOT_INT
    assert raw.err("EXPIRE", "k", "1.5") == NOT_INT
    assert raw.err("EXPIRE", "k") == arity("expire")
    assert raw.err("EXPIRE", "k", "10", "BOGUS") == "ERR Unsupported option BOGUS"
    # the TTL survives a value change through APPEND / SETRANGE / INCR
    r.set("n", "1")
    r.expire("n", 100)
    r.incr("n")
    r.append("n", "0")
    r.setrange("n", 0, "3")
    assert r.ttl("n") >= 99


def test_expireat_pexpireat(r):
    r.set("k", "v")
    now = int(time.time())
    assert r.expireat("k", now + 100) is True
    assert 98 <= r.ttl("k") <= 100
    assert r.expiretime("k") == now + 100
    assert r.pexpireat("k", (now + 200) * 1000 + 123) is True
    assert r.pexpiretime("k") == (now + 200) * 1000 + 123
    assert r.expiretime("k") == now + 200
    assert r.expireat("missing", now + 100) is False


def test_expiretime_missing_and_persistent(r, raw):
    raw.request(b"*2\r\n$10\r\nEXPIRETIME\r\n$1\r\nk\r\n", b":-2\r\n")
    raw.request(b"*2\r\n$11\r\nPEXPIRETIME\r\n$1\r\nk\r\n", b":-2\r\n")
    r.set("k", "v")
    raw.request(b"*2\r\n$10\r\nEXPIRETIME\r\n$1\r\nk\r\n", b":-1\r\n")
    raw.request(b"*2\r\n$11\r\nPEXPIRETIME\r\n$1\r\nk\r\n", b":-1\r\n")


def test_persist(r, raw):
    r.set("k", "v", ex=100)
    raw.request(b"*2\r\n$7\r\nPERSIST\r\n$1\r\nk\r\n", b":1\r\n")
    assert r.ttl("k") == -1
    raw.request(b"*2\r\n$7\r\nPERSIST\r\n$1\r\nk\r\n", b":0\r\n")
    raw.request(b"*2\r\n$7\r\nPERSIST\r\n$7\r\nmissing\r\n", b":0\r\n")
    assert r.get("k") == b"v"


def test_expire_nx_xx_gt_lt(r, raw):
    r.set("k", "v")
    # XX: only when there is a TTL
    assert r.expire("k", 100, xx=True) is False
    assert r.ttl("k") == -1
    # NX: only when there is none
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 200, nx=True) is False
    assert r.ttl("k") <= 100
    assert r.expire("k", 200, xx=True) is True
    assert r.ttl("k") > 100
    # GT / LT against the current TTL
    assert r.expire("k", 100, gt=True) is False
    assert r.expire("k", 300, gt=True) is True
    assert r.ttl("k") > 200
    assert r.expire("k", 400, lt=True) is False
    assert r.expire("k", 50, lt=True) is True
    assert r.ttl("k") <= 50
    # a persistent key counts as an infinite TTL
    r.persist("k")
    assert r.expire("k", 100, gt=True) is False
    assert r.ttl("k") == -1
    assert r.expire("k", 100, lt=True) is True
    assert 0 < r.ttl("k") <= 100
    # the same flags on PEXPIRE / EXPIREAT / PEXPIREAT
    assert r.pexpire("k", 10**9, lt=True) is False
    assert r.pexpire("k", 10**9, gt=True) is True
    now = int(time.time())
    assert r.expireat("k", now + 10, nx=True) is False
    assert r.pexpireat("k", (now + 10) * 1000, xx=True) is True
    assert r.ttl("k") <= 10
    assert raw.err("EXPIRE", "k", "10", "NX", "XX") == \
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    assert raw.err("EXPIRE", "k", "10", "NX", "GT") == \
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    assert raw.err("EXPIRE", "k", "10", "GT", "LT") == \
        "ERR GT and LT options at the same time are not compatible"


def test_expire_flags_on_missing_key(r):
    assert r.expire("missing", 100, nx=True) is False
    assert r.expire("missing", 100, lt=True) is False


def test_nonpositive_expire_deletes(r, raw):
    r.set("a", "v")
    raw.request(b"*3\r\n$6\r\nEXPIRE\r\n$1\r\na\r\n$2\r\n-1\r\n", b":1\r\n")
    assert r.exists("a") == 0
    r.set("b", "v")
    assert r.pexpire("b", 0) is True
    assert r.get("b") is None
    r.set("c", "v")
    assert r.expireat("c", 1) is True
    assert r.exists("c") == 0
    r.set("d", "v")
    assert r.pexpireat("d", int(time.time() * 1000) - 1000) is True
    assert r.exists("d") == 0
    r.hset("h", "f", "v")
    assert r.expire("h", -10) is True
    assert r.exists("h") == 0


def test_set_ex_zero_is_an_error(raw):
    assert raw.err("SET", "k", "v", "EX", "0") == "ERR invalid expire time in 'set' command"
    raw.request(b"*2\r\n$6\r\nEXISTS\r\n$1\r\nk\r\n", b":0\r\n")


def test_lazy_expiry(r):
    r.set("k", "v", px=50)
    r.set("h", "v")
    r.pexpire("h", 50)
    r.set("keep", "v")
    assert r.get("k") == b"v"
    time.sleep(0.15)
    assert r.get("k") is None
    assert r.exists("k") == 0
    assert r.ttl("k") == -2
    assert r.exists("h") == 0
    assert r.hget("h", "f") is None
    assert r.get("keep") == b"v"
    # an expired key behaves as missing for every command
    r.set("n", "41", px=30)
    time.sleep(0.1)
    assert r.incr("n") == 1
    assert r.ttl("n") == -1
    r.set("a", "x", px=30)
    time.sleep(0.1)
    assert r.append("a", "y") == 1
    assert r.set("s", "1", px=30) is True
    time.sleep(0.1)
    assert r.set("s", "2", nx=True) is True


def test_expired_keys_not_listed(r):
    r.set("gone", "v", px=30)
    r.set("stay", "v")
    time.sleep(0.1)
    assert r.keys("*") == [b"stay"]
    cursor, seen = 0, set()
    while True:
        cursor, keys = r.scan(cursor)
        seen.update(keys)
        if cursor == 0:
            break
    assert seen == {b"stay"}


def test_active_expiry(r):
    p = r.pipeline(transaction=False)
    for i in range(2000):
        p.set(f"ae:{i}", "x", px=100)
    p.set("persistent", "x")
    p.execute()
    assert r.dbsize() >= 1001
    time.sleep(0.1)
    # DBSIZE does not touch keys: only active expiry can bring it down
    t0 = time.monotonic()
    wait_until(lambda: r.dbsize() == 1, timeout=1.5, interval=0.05, msg="active expiry to remove 2000 keys")
    print(f"active expiry done {time.monotonic() - t0:.2f}s after the deadline")
    info = r.info("stats")
    assert info["expired_keys"] >= 2000
    assert r.get("persistent") == b"x"
