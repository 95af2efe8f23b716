"""List commands (RESP2 and RESP3). Validated against redis-server 7 with CAIRN_TARGET=redis."""

import pytest
import redis

pytestmark = pytest.mark.redis_only


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


def test_push_pop_len_range(r, raw):
    assert r.rpush("l", "a", "b") == 2
    assert r.lpush("l", "x", "y") == 4
    assert r.lrange("l", 0, -1) == [b"y", b"x", b"a", b"b"]
    assert r.llen("l") == 4
    assert r.llen("nol") == 0
    assert r.lrange("l", 1, 2) == [b"x", b"a"]
    assert r.lrange("l", -2, 100) == [b"a", b"b"]
    assert r.lrange("l", 3, 1) == []
    assert r.lrange("l", 10, 20) == []
    assert r.lrange("nol", 0, -1) == []
    assert r.lpop("l") == b"y"
    assert r.rpop("l") == b"b"
    assert r.lpop("l", 5) == [b"x", b"a"]
    assert r.exists("l") == 0
    assert r.lpop("nol") is None
    assert r.lpop("nol", 2) is None
    raw.request(b"*3\r\n$4\r\nLPOP\r\n$3\r\nnol\r\n$1\r\n2\r\n", b"*-1\r\n")
    r.rpush("l", "a")
    assert r.rpop("l", 0) == []
    assert raw.err("LPOP", "l", "-1") == "ERR value is out of range, must be positive"
    assert raw.err("LRANGE", "l", "a", "1") == "ERR value is not an integer or out of range"
    assert raw.err("LPUSH", "l") == arity("lpush")


def test_pushx(r):
    assert r.lpushx("nol", "a") == 0
    assert r.rpushx("nol", "a") == 0
    assert r.exists("nol") == 0
    r.rpush("l", "m")
    assert r.lpushx("l", "a", "b") == 3
    assert r.rpushx("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"m", b"z"]


def test_lindex_lset(r, raw):
    r.rpush("l", "a", "b", "c")
    assert r.lindex("l", 0) == b"a"
    assert r.lindex("l", -1) == b"c"
    assert r.lindex("l", 3) is None
    assert r.lindex("nol", 0) is None
    assert r.lset("l", -1, "C") is True
    assert r.lrange("l", 0, -1) == [b"a", b"b", b"C"]
    assert raw.err("LSET", "l", "5", "x") == "ERR index out of range"
    assert raw.err("LSET", "nol", "0", "x") == "ERR no such key"
    assert raw.err("LINDEX", "l", "x") == "ERR value is not an integer or out of range"


def test_lrem(r):
    r.rpush("l", "a", "b", "a", "c", "a")
    assert r.lrem("l", 1, "a") == 1
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"c", b"a"]
    assert r.lrem("l", -1, "a") == 1
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"c"]
    r.rpush("l", "a", "a")
    assert r.lrem("l", 0, "a") == 3
    assert r.lrange("l", 0, -1) == [b"b", b"c"]
    assert r.lrem("l", 0, "zz") == 0
    assert r.lrem("nol", 0, "a") == 0


def test_ltrim(r):
    r.rpush("l", *"abcdef")
    assert r.ltrim("l", 1, -2) is True
    assert r.lrange("l", 0, -1) == [b"b", b"c", b"d", b"e"]
    assert r.ltrim("l", -2, 100) is True
    assert r.lrange("l", 0, -1) == [b"d", b"e"]
    assert r.ltrim("l", 5, 1) is True
    assert r.exists("l") == 0
    assert r.ltrim("nol", 0, 1) is True


def test_linsert(r, raw):
    r.rpush("l", "a", "c")
    assert r.linsert("l", "before", "c", "b") == 3
    assert r.linsert("l", "AFTER", "c", "d") == 4
    assert r.lrange("l", 0, -1) == [b"a", b"b", b"c", b"d"]
    assert r.linsert("l", "before", "zz", "x") == -1
    assert r.linsert("nol", "before", "a", "x") == 0
    assert raw.err("LINSERT", "l", "middle", "a", "x") == "ERR syntax error"


def test_lpos(r, raw):
    r.rpush("l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert r.lpos("l", "c") == 2
    assert r.lpos("l", "zz") is None
    assert r.lpos("l", "c", rank=2) == 6
    assert r.lpos("l", "c", rank=-1) == 7
    assert r.lpos("l", "c", count=0) == [2, 6, 7]
    assert r.lpos("l", "c", count=2) == [2, 6]
    assert r.lpos("l", "c", rank=-1, count=2) == [7, 6]
    assert r.lpos("l", "c", count=0, maxlen=7) == [2, 6]
    assert r.lpos("l", "zz", count=3) == []
    assert r.lpos("nol", "a") is None
    assert raw.err("LPOS", "l", "c", "RANK", "0").startswith("ERR RANK can't be zero")
    assert raw.err("LPOS", "l", "c", "COUNT", "-1") == "ERR COUNT can't be negative"
    assert raw.err("LPOS", "l", "c", "MAXLEN", "-1") == "ERR MAXLEN can't be negative"
    assert raw.err("LPOS", "l", "c", "FOO", "1") == "ERR syntax error"


def test_lmove_rpoplpush(r, raw):
    r.rpush("a", "1", "2", "3")
    assert r.lmove("a", "b", "LEFT", "RIGHT") == b"1"
    assert r.lmove("a", "b", "RIGHT", "LEFT") == b"3"
    assert r.lrange("b", 0, -1) == [b"3", b"1"]
    assert r.rpoplpush("b", "a") == b"1"
    assert r.lrange("a", 0, -1) == [b"1", b"2"]
    # Rotation within one list.
    assert r.lmove("a", "a", "LEFT", "RIGHT") == b"1"
    assert r.lrange("a", 0, -1) == [b"2", b"1"]
    assert r.lmove("nol", "a", "LEFT", "LEFT") is None
    assert r.rpoplpush("nol", "a") is None
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.lmove("a", "str", "LEFT", "LEFT")
    assert r.lrange("a", 0, -1) == [b"2", b"1"], "nothing moved"
    assert raw.err("LMOVE", "a", "b", "UP", "LEFT") == "ERR syntax error"
    # The last element moved deletes the source.
    assert r.lmove("b", "a", "LEFT", "LEFT") == b"3"
    assert r.exists("b") == 0


def test_wrongtype(r):
    r.set("str", "x")
    r.rpush("l", "a")
    for args in (
        ("LPUSH", "str", "a"), ("RPUSHX", "str", "a"), ("LPOP", "str"), ("RPOP", "str", "1"),
        ("LRANGE", "str", "0", "1"), ("LLEN", "str"), ("LINDEX", "str", "0"),
        ("LSET", "str", "0", "a"), ("LREM", "str", "0", "a"), ("LTRIM", "str", "0", "1"),
        ("LINSERT", "str", "BEFORE", "a", "b"), ("LPOS", "str", "a"),
        ("LMOVE", "str", "l", "LEFT", "LEFT"), ("RPOPLPUSH", "str", "l"),
        ("SADD", "l", "a"), ("ZADD", "l", "1", "a"), ("GET", "l"), ("INCR", "l"), ("HSET", "l", "a", "b"),
    ):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command(*args)
    assert r.type("l") == b"list"


def test_resp3(r3, raw):
    raw.command("HELLO", "3")
    assert raw.command("LPOP", "nol") == b"_\r\n"
    assert raw.command("LPOP", "nol", "1") == b"_\r\n"
    assert raw.command("RPUSH", "l", "a", "b") == b":2\r\n"
    assert raw.command("LRANGE", "l", "0", "-1") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert raw.command("LPOS", "l", "zz") == b"_\r\n"


def test_multi_exec_and_expiry(r):
    p = r.pipeline(transaction=True)
    p.rpush("l", "a", "b")
    p.lmove("l", "m", "LEFT", "LEFT")
    p.lrange("m", 0, -1)
    assert p.execute() == [2, b"a", [b"a"]]
    r.expire("l", 100)
    r.rpush("l", "c")
    assert 0 < r.ttl("l") <= 100


def test_large_list_pushes_and_pops_at_both_ends(r):
    p = r.pipeline(transaction=False)
    for i in range(0, 20000, 1000):
        p.rpush("big", *range(i, i + 1000))
    p.execute()
    assert r.llen("big") == 20000
    assert r.lindex("big", 12345) == b"12345"
    assert r.lpop("big") == b"0"
    assert r.rpop("big") == b"19999"
    assert r.lrange("big", 100, 102) == [b"101", b"102", b"103"]


# ---- Blocking pops ----------------------------------------------------------------------------

def resp(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def test_blpop_brpop_serve_at_once_when_data_is_there(r, raw):
    r.rpush("b", "1", "2")
    assert r.blpop(["a", "b"], timeout=1) == (b"b", b"1")
    assert r.brpop(["a", "b"], timeout=1) == (b"b", b"2")
    assert r.exists("b") == 0
    assert raw.err("BLPOP", "a", "-1") == "ERR timeout is negative"
    assert raw.err("BLPOP", "a", "x") == "ERR timeout is not a float or out of range"
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.blpop(["str"], timeout=1)


def test_blpop_times_out_with_a_null_array(server, r):
    import time

    c = server.raw()
    started = time.monotonic()
    c.send(resp("BLPOP", "empty", "0.2"))
    assert c.read_resp(timeout=5) == b"*-1\r\n"
    assert 0.15 <= time.monotonic() - started < 2
    c.send(resp("HELLO", "3"))
    c.read_resp(timeout=5)
    c.send(resp("BLMOVE", "empty", "d", "LEFT", "LEFT", "0.05"))
    assert c.read_resp(timeout=5) == b"_\r\n"
    c.close()


def test_blocked_client_is_woken_by_a_push_and_its_thread_keeps_serving(server, r):
    blocked = server.raw()
    blocked.send(resp("BLPOP", "q", "10"))
    assert blocked.read_available(wait=0.2) == b""
    # Other clients go on meanwhile (with one I/O thread too: the wait holds no thread).
    assert r.ping() is True
    assert r.rpush("q", "hello") == 1
    assert blocked.read_resp(timeout=5) == b"*2\r\n$1\r\nq\r\n$5\r\nhello\r\n"
    assert r.exists("q") == 0
    # The connection goes on after its reply.
    blocked.send(resp("PING"))
    assert blocked.read_resp(timeout=5) == b"+PONG\r\n"
    blocked.close()


def test_waiters_are_served_first_come_first_served(server, r):
    first, second = server.raw(), server.raw()
    first.send(resp("BRPOP", "q", "10"))
    assert first.read_available(wait=0.1) == b""
    second.send(resp("BRPOP", "other", "q", "10"))
    assert second.read_available(wait=0.1) == b""
    r.rpush("q", "a")
    assert first.read_resp(timeout=5) == b"*2\r\n$1\r\nq\r\n$1\r\na\r\n"
    assert second.read_available(wait=0.1) == b""
    r.rpush("q", "b", "c")
    assert second.read_resp(timeout=5) == b"*2\r\n$1\r\nq\r\n$1\r\nc\r\n"
    assert r.lrange("q", 0, -1) == [b"b"]
    first.close()
    second.close()


def test_blmove_waits_for_its_source(server, r):
    blocked = server.raw()
    blocked.send(resp("BLMOVE", "src", "dst", "RIGHT", "LEFT", "10"))
    assert blocked.read_available(wait=0.1) == b""
    r.lpush("src", "x")
    assert blocked.read_resp(timeout=5) == b"$1\r\nx\r\n"
    assert r.lrange("dst", 0, -1) == [b"x"]
    assert r.exists("src") == 0
    blocked.close()


def test_a_push_inside_exec_wakes_a_waiter(server, r):
    blocked = server.raw()
    blocked.send(resp("BLPOP", "q", "10"))
    assert blocked.read_available(wait=0.1) == b""
    p = r.pipeline(transaction=True)
    p.rpush("q", "v")
    p.llen("q")
    assert p.execute() == [1, 1], "the transaction sees its own push"
    assert blocked.read_resp(timeout=5) == b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n"
    blocked.close()


def test_blocking_commands_do_not_block_inside_multi(r):
    p = r.pipeline(transaction=True)
    p.blpop(["nothing"], timeout=0)
    p.blmove("nothing", "d", 0, "LEFT", "LEFT")
    p.rpush("q", "a")
    p.brpop(["q"], timeout=0)
    assert p.execute() == [None, None, 1, (b"q", b"a")]


def test_a_waiter_that_disconnects_takes_nothing(server, r):
    gone = server.raw()
    gone.send(resp("BLPOP", "q", "0"))
    assert gone.read_available(wait=0.1) == b""
    gone.close()
    import time

    time.sleep(0.2)
    r.rpush("q", "kept")
    time.sleep(0.1)
    assert r.lrange("q", 0, -1) == [b"kept"]
