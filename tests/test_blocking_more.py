"""BRPOPLPUSH, BZPOPMIN, BZPOPMAX and CLIENT UNBLOCK (TIMEOUT | ERROR). Validated against
redis-server with CAIRN_TARGET=redis."""

import pytest

from conftest import encode_command as resp  # the kit's RESP encoder

pytestmark = pytest.mark.redis_only


def test_brpoplpush_at_once_and_after_a_wait(server, r):
    r.rpush("src", "a", "b")
    assert r.brpoplpush("src", "dst", timeout=1) == b"b"
    assert r.lrange("dst", 0, -1) == [b"b"]
    c = server.raw()
    c.send(resp("BRPOPLPUSH", "empty", "dst", "10"))
    assert c.read_available(wait=0.1) == b""
    r.rpush("empty", "x")
    assert c.read_resp(timeout=5) == b"$1\r\nx\r\n"
    assert r.lrange("dst", 0, -1) == [b"x", b"b"]
    # A timeout answers a null array (as Redis does for every blocked list command).
    c.send(resp("BRPOPLPUSH", "empty", "dst", "0.05"))
    assert c.read_resp(timeout=5) == b"*-1\r\n"
    c.close()


def test_bzpopmin_bzpopmax(server, r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.bzpopmin(["none", "z"], timeout=1) == (b"z", b"a", 1.0)
    assert r.bzpopmax(["z"], timeout=1) == (b"z", b"c", 3.0)
    c = server.raw()
    c.send(resp("BZPOPMAX", "q1", "q2", "10"))
    assert c.read_available(wait=0.1) == b""
    r.zadd("q2", {"m": 2.5, "n": 1})
    assert c.read_resp(timeout=5) == b"*3\r\n$2\r\nq2\r\n$1\r\nm\r\n$3\r\n2.5\r\n"
    assert r.zrange("q2", 0, -1) == [b"n"]
    c.send(resp("BZPOPMIN", "q1", "0.05"))
    assert c.read_resp(timeout=5) == b"*-1\r\n"
    # RESP3: the score is a double, the timeout a null.
    c.send(resp("HELLO", "3"))
    c.read_resp(timeout=5)
    c.send(resp("BZPOPMIN", "q1", "10"))
    assert c.read_available(wait=0.1) == b""
    r.zincrby("q1", 1.5, "k")
    assert c.read_resp(timeout=5) == b"*3\r\n$2\r\nq1\r\n$1\r\nk\r\n,1.5\r\n"
    c.send(resp("BZPOPMIN", "q1", "0.05"))
    assert c.read_resp(timeout=5) == b"_\r\n"
    c.close()
    r.set("str", "v")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.bzpopmin(["str"], timeout=1)
    assert r.execute_command("MULTI") == b"OK"
    r.execute_command("BZPOPMIN", "nothing", "0")
    assert r.execute_command("EXEC") == [None]


def test_client_unblock(server, r):
    c = server.raw()
    c.send(resp("CLIENT", "ID"))
    cid = int(c.read_resp(timeout=5)[1:-2])
    c.send(resp("BLPOP", "nothing", "0"))
    assert c.read_available(wait=0.1) == b""
    assert r.client_unblock(cid) == 1
    assert c.read_resp(timeout=5) == b"*-1\r\n"
    assert r.client_unblock(cid) == 0
    c.send(resp("BZPOPMIN", "nothing", "0"))
    assert c.read_available(wait=0.1) == b""
    assert r.client_unblock(cid, error=True) == 1
    assert c.read_resp(timeout=5) == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    c.send(resp("BLMOVE", "nothing", "d", "LEFT", "LEFT", "0"))
    assert c.read_available(wait=0.1) == b""
    assert r.execute_command("CLIENT", "UNBLOCK", cid, "TIMEOUT") == 1
    assert c.read_resp(timeout=5) == b"*-1\r\n"
    # The connection goes on.
    c.send(resp("PING"))
    assert c.read_resp(timeout=5) == b"+PONG\r\n"
    c.close()
    assert r.client_unblock(999999) == 0
    with pytest.raises(Exception, match="CLIENT UNBLOCK reason should be TIMEOUT or ERROR"):
        r.execute_command("CLIENT", "UNBLOCK", cid, "NOPE")
    with pytest.raises(Exception, match="value is not an integer or out of range"):
        r.execute_command("CLIENT", "UNBLOCK", "x")


def test_lmpop_zmpop(r, raw):
    r.rpush("l2", "a", "b", "c")
    r.zadd("z2", {"m": 1, "n": 2, "o": 3})
    assert r.lmpop(2, "l1", "l2", direction="LEFT") == [b"l2", [b"a"]]
    assert r.lmpop(2, "l1", "l2", direction="RIGHT", count=5) == [b"l2", [b"c", b"b"]]
    assert r.exists("l2") == 0
    assert r.lmpop(1, "l2", direction="LEFT") is None
    assert r.execute_command("ZMPOP", 2, "z1", "z2", "MAX", "COUNT", 2) == [b"z2", [[b"o", b"3"], [b"n", b"2"]]]
    assert r.execute_command("ZMPOP", 1, "z2", "MIN") == [b"z2", [[b"m", b"1"]]]
    assert r.execute_command("ZMPOP", 1, "z2", "MIN") is None
    r.set("str", "v")
    assert raw.err("LMPOP", "1", "str", "LEFT").startswith("WRONGTYPE")
    assert raw.err("LMPOP", "0", "l", "LEFT") == "ERR numkeys should be greater than 0"
    assert raw.err("LMPOP", "3", "l", "LEFT") == "ERR syntax error"
    assert raw.err("LMPOP", "1", "l", "UP") == "ERR syntax error"
    assert raw.err("LMPOP", "1", "l", "LEFT", "COUNT", "0") == "ERR count should be greater than 0"
    assert raw.err("LMPOP", "1", "l", "LEFT", "COUNT", "1", "COUNT", "2") == "ERR syntax error"
    assert raw.err("ZMPOP", "1", "z", "LEFT") == "ERR syntax error"
    assert raw.err("ZMPOP", "9223372036854775807", "z", "MIN") == "ERR syntax error"


def test_blmpop_bzmpop_wait(server, r):
    r.rpush("l", "x")
    assert r.blmpop(1, 2, "none", "l", direction="LEFT") == [b"l", [b"x"]]
    c = server.raw()
    c.send(resp("BLMPOP", "10", "2", "q1", "q2", "RIGHT", "COUNT", "2"))
    assert c.read_available(wait=0.1) == b""
    r.rpush("q2", "a", "b", "c")
    assert c.read_resp(timeout=5) == b"*2\r\n$2\r\nq2\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n"
    c.send(resp("BZMPOP", "10", "1", "zq", "MIN", "COUNT", "5"))
    assert c.read_available(wait=0.1) == b""
    r.zadd("zq", {"p": 2, "q": 1})
    assert c.read_resp(timeout=5) == b"*2\r\n$2\r\nzq\r\n*2\r\n*2\r\n$1\r\nq\r\n$1\r\n1\r\n*2\r\n$1\r\np\r\n$1\r\n2\r\n"
    c.send(resp("BZMPOP", "0.05", "1", "zq", "MIN"))
    assert c.read_resp(timeout=5) == b"*-1\r\n"
    c.send(resp("BLMPOP", "x", "1", "zq", "MIN"))
    assert c.read_resp(timeout=5) == b"-ERR syntax error\r\n"
    c.send(resp("BLMPOP", "x", "1", "zq", "LEFT"))
    assert c.read_resp(timeout=5) == b"-ERR timeout is not a float or out of range\r\n"
    c.close()


def test_client_unblock_wait(server, r):
    """A client blocked in WAIT (no replica acknowledges) is answered by CLIENT UNBLOCK: with
    the count reached so far (TIMEOUT, the default) or -UNBLOCKED (ERROR)."""
    c = server.raw()
    c.send(resp("CLIENT", "ID"))
    cid = int(c.read_resp(timeout=5)[1:-2])
    c.send(resp("SET", "k", "v"))
    assert c.read_resp(timeout=5) == b"+OK\r\n"
    c.send(resp("WAIT", "1", "0"))
    assert c.read_available(wait=0.2) == b""
    assert r.client_unblock(cid) == 1
    assert c.read_resp(timeout=5) == b":0\r\n"
    c.send(resp("WAIT", "1", "0"))
    assert c.read_available(wait=0.2) == b""
    assert r.client_unblock(cid, error=True) == 1
    assert c.read_resp(timeout=5) == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    assert r.client_unblock(cid) == 0
    c.send(resp("PING"))
    assert c.read_resp(timeout=5) == b"+PONG\r\n"
    c.close()
