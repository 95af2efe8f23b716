"""String commands (RESP). Validated against redis-server 7 with CAIRN_TARGET=redis."""

import time

import pytest

pytestmark = pytest.mark.redis_only

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INT = "ERR value is not an integer or out of range"
SYNTAX = "ERR syntax error"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


# --- PING / ECHO -------------------------------------------------------------

def test_ping_echo(r, raw):
    assert r.ping() is True
    raw.request(b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n")
    raw.request(b"*2\r\n$4\r\nPING\r\n$5\r\nhello\r\n", b"$5\r\nhello\r\n")
    raw.request(b"*2\r\n$4\r\nECHO\r\n$3\r\na\r\n\r\n", b"$3\r\na\r\n\r\n")
    raw.request(b"*2\r\n$4\r\necho\r\n$0\r\n\r\n", b"$0\r\n\r\n")
    assert r.echo(b"\x00\xff") == b"\x00\xff"
    assert raw.err("PING", "a", "b") == arity("ping")
    assert raw.err("ECHO") == arity("echo")
    assert raw.err("ECHO", "a", "b") == arity("echo")


def test_commands_are_case_insensitive(raw):
    raw.request(b"*3\r\n$3\r\nsEt\r\n$1\r\nk\r\n$1\r\nv\r\n", b"+OK\r\n")
    raw.request(b"*2\r\n$3\r\nget\r\n$1\r\nk\r\n", b"$1\r\nv\r\n")
    # ...but keys are not
    raw.request(b"*2\r\n$3\r\nGET\r\n$1\r\nK\r\n", b"$-1\r\n")


# --- GET / SET ---------------------------------------------------------------

def test_get_set_basic(r, raw):
    assert r.get("missing") is None
    raw.request(b"*2\r\n$3\r\nGET\r\n$7\r\nmissing\r\n", b"$-1\r\n")
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", "v2") is True
    assert r.get("k") == b"v2"
    assert r.set("empty", "") is True
    assert r.get("empty") == b""
    assert r.exists("empty") == 1
    assert raw.err("GET") == arity("get")
    assert raw.err("GET", "a", "b") == arity("get")
    assert raw.err("SET", "a") == arity("set")


def test_set_nx_xx(r):
    assert r.set("k", "1", xx=True) is None
    assert r.exists("k") == 0
    assert r.set("k", "1", nx=True) is True
    assert r.set("k", "2", nx=True) is None
    assert r.get("k") == b"1"
    assert r.set("k", "3", xx=True) is True
    assert r.get("k") == b"3"


def test_set_ex_px_exat_pxat(r):
    r.set("a", "v", ex=100)
    assert 98 <= r.ttl("a") <= 100
    r.set("b", "v", px=100000)
    assert 99000 <= r.pttl("b") <= 100000
    now = int(time.time())
    r.set("c", "v", exat=now + 100)
    assert 98 <= r.ttl("c") <= 100
    assert r.expiretime("c") == now + 100
    r.set("d", "v", pxat=now * 1000 + 100000)
    assert 97000 <= r.pttl("d") <= 100000
    # a plain SET clears the TTL
    r.set("a", "v2")
    assert r.ttl("a") == -1
    # EXAT in the past: the key is stored already expired
    assert r.set("e", "v", exat=1) is True
    assert r.get("e") is None
    assert r.exists("e") == 0


def test_set_keepttl(r):
    r.set("k", "v", ex=100)
    assert r.set("k", "v2", keepttl=True) is True
    assert r.get("k") == b"v2"
    assert 98 <= r.ttl("k") <= 100


def test_set_get_option(r, raw):
    assert r.set("k", "1", get=True) is None
    assert r.set("k", "2", get=True) == b"1"
    assert r.get("k") == b"2"
    # NX + GET (allowed since 7.0): returns the old value and does not set
    assert r.set("k", "3", nx=True, get=True) == b"2"
    assert r.get("k") == b"2"
    # XX + GET on a missing key: nil and nothing stored
    assert r.set("m", "3", xx=True, get=True) is None
    assert r.exists("m") == 0
    r.hset("h", "f", "v")
    assert raw.err("SET", "h", "x", "GET") == WRONGTYPE
    assert r.type("h") == b"hash"
    # without GET, SET overwrites whatever type was there
    assert r.set("h", "x") is True
    assert r.type("h") == b"string"


@pytest.mark.parametrize(
    "args",
    [
        ["NX", "XX"],
        ["EX", "10", "PX", "100"],
        ["EX", "10", "EXAT", "99999999999"],
        ["PX", "10", "PXAT", "99999999999999"],
        ["KEEPTTL", "EX", "10"],
        ["EX", "10", "KEEPTTL"],
        ["EX"],
        ["BOGUS"],
        ["NX", "NX", "XX"],
    ],
)
def test_set_invalid_option_combinations(raw, args):
    assert raw.err("SET", "k", "v", *args) == SYNTAX
    raw.request(b"*2\r\n$6\r\nEXISTS\r\n$1\r\nk\r\n", b":0\r\n")


@pytest.mark.parametrize("opt", ["EX", "PX", "EXAT", "PXAT"])
def test_set_invalid_expire(raw, opt):
    assert raw.err("SET", "k", "v", opt, "0") == "ERR invalid expire time in 'set' command"
    assert raw.err("SET", "k", "v", opt, "-5") == "ERR invalid expire time in 'set' command"
    assert raw.err("SET", "k", "v", opt, "abc") == NOT_INT
    assert raw.err("SET", "k", "v", opt, "1.5") == NOT_INT
    raw.request(b"*2\r\n$6\r\nEXISTS\r\n$1\r\nk\r\n", b":0\r\n")


def test_set_ex_overflow(raw):
    assert raw.err("SET", "k", "v", "EX", "9223372036854775807") == "ERR invalid expire time in 'set' command"
    assert raw.err("SET", "k", "v", "EX", "99999999999999999999") == NOT_INT


def test_setnx_setex_psetex(r, raw):
    assert r.setnx("k", "1") is True
    assert r.setnx("k", "2") is False
    assert r.get("k") == b"1"
    assert r.setex("s", 100, "v") is True
    assert 98 <= r.ttl("s") <= 100
    assert r.psetex("p", 100000, "v") is True
    assert 99000 <= r.pttl("p") <= 100000
    assert r.get("p") == b"v"
    assert raw.err("SETEX", "k", "0", "v") == "ERR invalid expire time in 'setex' command"
    assert raw.err("SETEX", "k", "-1", "v") == "ERR invalid expire time in 'setex' command"
    assert raw.err("PSETEX", "k", "0", "v") == "ERR invalid expire time in 'psetex' command"
    assert raw.err("SETEX", "k", "x", "v") == NOT_INT
    assert raw.err("SETEX", "k", "10") == arity("setex")
    assert raw.err("SETNX", "k") == arity("setnx")


def test_getset_getdel(r, raw):
    assert r.getset("k", "1") is None
    assert r.getset("k", "2") == b"1"
    assert r.get("k") == b"2"
    r.expire("k", 100)
    r.getset("k", "3")
    assert r.ttl("k") == -1  # GETSET discards the TTL
    assert r.getdel("k") == b"3"
    assert r.exists("k") == 0
    assert r.getdel("k") is None
    r.hset("h", "f", "v")
    assert raw.err("GETSET", "h", "x") == WRONGTYPE
    assert raw.err("GETDEL", "h") == WRONGTYPE
    assert r.exists("h") == 1


def test_getex(r, raw):
    assert r.getex("missing", ex=10) is None
    assert r.exists("missing") == 0
    r.set("k", "v")
    assert r.getex("k") == b"v"
    assert r.ttl("k") == -1
    assert r.getex("k", ex=100) == b"v"
    assert 98 <= r.ttl("k") <= 100
    assert r.getex("k", px=50000) == b"v"
    assert 49000 <= r.pttl("k") <= 50000
    now = int(time.time())
    assert r.getex("k", exat=now + 200) == b"v"
    assert r.expiretime("k") == now + 200
    assert r.getex("k", pxat=(now + 300) * 1000) == b"v"
    assert r.expiretime("k") == now + 300
    assert r.getex("k", persist=True) == b"v"
    assert r.ttl("k") == -1
    assert raw.err("GETEX", "k", "EX", "0") == "ERR invalid expire time in 'getex' command"
    assert raw.err("GETEX", "k", "EX", "10", "PX", "10") == SYNTAX
    assert raw.err("GETEX", "k", "PERSIST", "EX", "10") == SYNTAX
    assert raw.err("GETEX", "k", "FOO") == SYNTAX
    assert raw.err("GETEX", "k", "EX", "abc") == NOT_INT
    r.hset("h", "f", "v")
    assert raw.err("GETEX", "h") == WRONGTYPE


def test_getex_past_deadline_deletes(r):
    r.set("k", "v")
    assert r.getex("k", exat=1) == b"v"
    assert r.exists("k") == 0


# --- MGET / MSET / MSETNX ----------------------------------------------------

def test_mget_mset(r, raw):
    assert r.mset({"a": "1", "b": "2", "c": "3"}) is True
    assert r.mget("a", "b", "missing", "c") == [b"1", b"2", None, b"3"]
    r.hset("h", "f", "v")
    # MGET returns nil for keys of another type instead of an error
    assert r.mget("a", "h") == [b"1", None]
    raw.request(b"*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nz\r\n", b"*2\r\n$1\r\n1\r\n$-1\r\n")
    assert raw.err("MSET", "a") == arity("mset")
    assert raw.err("MSET", "a", "1", "b") == arity("mset")
    assert raw.err("MGET") == arity("mget")
    # the last occurrence wins
    r.execute_command("MSET", "d", "1", "d", "2")
    assert r.get("d") == b"2"


def test_msetnx_all_or_nothing(r, raw):
    assert r.msetnx({"a": "1", "b": "2"}) is True
    assert r.msetnx({"b": "x", "c": "3"}) is False
    assert r.get("b") == b"2"
    assert r.exists("c") == 0
    assert r.msetnx({"c": "3", "d": "4"}) is True
    assert r.mget("c", "d") == [b"3", b"4"]
    assert raw.err("MSETNX", "a", "1", "b") == arity("msetnx")


# --- DEL / UNLINK / EXISTS ---------------------------------------------------

def test_del_unlink_exists(r, raw):
    r.mset({"a": "1", "b": "2", "c": "3"})
    r.hset("h", "f", "v")
    assert r.exists("a") == 1
    assert r.exists("a", "a", "a") == 3
    assert r.exists("a", "b", "nope", "h") == 3
    assert r.delete("a", "a", "nope") == 1
    assert r.exists("a") == 0
    assert r.unlink("b", "c", "x") == 2
    assert r.delete("h") == 1
    assert r.exists("b", "c", "h") == 0
    assert raw.err("DEL") == arity("del")
    assert raw.err("UNLINK") == arity("unlink")
    assert raw.err("EXISTS") == arity("exists")


# --- counters ----------------------------------------------------------------

def test_incr_decr(r, raw):
    assert r.incr("n") == 1
    assert r.incr("n") == 2
    assert r.decr("n") == 1
    assert r.incrby("n", 10) == 11
    assert r.decrby("n", 20) == -9
    assert r.incrby("n", -1) == -10
    assert r.get("n") == b"-10"
    assert r.decr("fresh") == -1
    raw.request(b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n", b":-9\r\n")
    r.set("ttl", "5", ex=100)
    r.incr("ttl")
    assert 98 <= r.ttl("ttl") <= 100  # INCR keeps the TTL


@pytest.mark.parametrize("value", ["abc", "1.5", " 1", "1 ", "", "+1", "01x", "99999999999999999999", "0x10"])
def test_incr_non_integer(r, raw, value):
    r.set("k", value)
    assert raw.err("INCR", "k") == NOT_INT
    assert raw.err("DECRBY", "k", "1") == NOT_INT
    assert r.get("k") == value.encode()


def test_incr_overflow(r, raw):
    r.set("k", "9223372036854775807")
    assert raw.err("INCR", "k") == "ERR increment or decrement would overflow"
    assert raw.err("INCRBY", "k", "1") == "ERR increment or decrement would overflow"
    r.set("k", "-9223372036854775808")
    assert raw.err("DECR", "k") == "ERR increment or decrement would overflow"
    assert r.get("k") == b"-9223372036854775808"
    assert raw.err("INCRBY", "k", "abc") == NOT_INT
    assert raw.err("INCRBY", "k", "9223372036854775808") == NOT_INT
    assert raw.err("DECRBY", "k2", "-9223372036854775808") == "ERR decrement would overflow"
    r.hset("h", "f", "1")
    assert raw.err("INCR", "h") == WRONGTYPE
    assert raw.err("INCR") == arity("incr")
    assert raw.err("INCRBY", "k") == arity("incrby")


def test_incrbyfloat(r, raw):
    assert r.incrbyfloat("f", 10.5) == 10.5
    raw.request(b"*3\r\n$11\r\nINCRBYFLOAT\r\n$1\r\nf\r\n$3\r\n0.1\r\n", b"$4\r\n10.6\r\n")
    assert r.get("f") == b"10.6"
    r.set("g", "5.0e3")
    raw.request(b"*3\r\n$11\r\nINCRBYFLOAT\r\n$1\r\ng\r\n$3\r\n200\r\n", b"$4\r\n5200\r\n")
    r.set("h", "10")
    raw.request(b"*3\r\n$11\r\nINCRBYFLOAT\r\n$1\r\nh\r\n$5\r\n-10.0\r\n", b"$1\r\n0\r\n")
    raw.request(b"*3\r\n$11\r\nINCRBYFLOAT\r\n$1\r\nh\r\n$4\r\n1e-2\r\n", b"$4\r\n0.01\r\n")
    raw.request(b"*3\r\n$11\r\nINCRBYFLOAT\r\n$1\r\nm\r\n$5\r\n3.0e3\r\n", b"$4\r\n3000\r\n")
    r.set("s", "abc")
    assert raw.err("INCRBYFLOAT", "s", "1") == "ERR value is not a valid float"
    assert raw.err("INCRBYFLOAT", "h", "abc") == "ERR value is not a valid float"
    assert raw.err("INCRBYFLOAT", "h", "inf").startswith("ERR ")
    assert raw.err("INCRBYFLOAT", "h", "nan").startswith("ERR ")
    r.hset("hash", "f", "1")
    assert raw.err("INCRBYFLOAT", "hash", "1") == WRONGTYPE
    assert raw.err("INCRBYFLOAT", "h") == arity("incrbyfloat")


# --- APPEND / STRLEN / GETRANGE / SETRANGE -----------------------------------

def test_append_strlen(r, raw):
    assert r.append("k", "Hello") == 5
    assert r.append("k", " World") == 11
    assert r.get("k") == b"Hello World"
    assert r.strlen("k") == 11
    assert r.strlen("missing") == 0
    assert r.append("k", "") == 11
    r.set("n", "10")
    assert r.append("n", "5") == 3
    assert r.incr("n") == 106
    r.hset("h", "f", "v")
    assert raw.err("APPEND", "h", "x") == WRONGTYPE
    assert raw.err("STRLEN", "h") == WRONGTYPE
    assert raw.err("APPEND", "k") == arity("append")


def test_getrange(r, raw):
    r.set("k", "Hello World")
    assert r.getrange("k", 0, 4) == b"Hello"
    assert r.getrange("k", -5, -1) == b"World"
    assert r.getrange("k", 0, -1) == b"Hello World"
    assert r.getrange("k", -100, 4) == b"Hello"
    assert r.getrange("k", 6, 1000) == b"World"
    assert r.getrange("k", 5, 3) == b""
    assert r.getrange("k", 100, 200) == b""
    assert r.getrange("k", -1, -5) == b""
    assert r.getrange("missing", 0, -1) == b""
    raw.request(b"*4\r\n$8\r\nGETRANGE\r\n$1\r\nk\r\n$2\r\n20\r\n$2\r\n30\r\n", b"$0\r\n\r\n")
    assert raw.err("GETRANGE", "k", "a", "1") == NOT_INT
    assert raw.err("GETRANGE", "k", "0") == arity("getrange")


def test_setrange(r, raw):
    r.set("k", "Hello World")
    assert r.setrange("k", 6, "Redis") == 11
    assert r.get("k") == b"Hello Redis"
    assert r.setrange("pad", 5, "x") == 6
    assert r.get("pad") == b"\x00\x00\x00\x00\x00x"
    assert r.setrange("k", 11, "!!") == 13
    assert r.get("k") == b"Hello Redis!!"
    assert r.setrange("k", 0, "") == 13
    # an empty value on a missing key creates nothing
    assert r.setrange("none", 10, "") == 0
    assert r.exists("none") == 0
    assert raw.err("SETRANGE", "k", "-1", "x") == "ERR offset is out of range"
    assert raw.err("SETRANGE", "k", "536870911", "ab").startswith("ERR string exceeds maximum allowed size")
    assert r.get("k") == b"Hello Redis!!"
    r.hset("h", "f", "v")
    assert raw.err("SETRANGE", "h", "0", "x") == WRONGTYPE


def test_type(r):
    r.set("s", "v")
    r.hset("h", "f", "v")
    assert r.type("s") == b"string"
    assert r.type("h") == b"hash"
    assert r.type("missing") == b"none"


# --- binary safety -----------------------------------------------------------

def test_binary_safe_keys_and_values(r, raw):
    all_bytes = bytes(range(256))
    value = all_bytes * 4 + b"\r\n\x00\r\n$3\r\n*1\r\n"
    for key in (all_bytes, b"\x00", b"a\r\nb", b"\r\n", b" ", b"\xff\xfe"):
        assert r.set(key, value) is True
        assert r.get(key) == value
        assert r.strlen(key) == len(value)
        assert r.exists(key) == 1
    assert r.dbsize() == 6
    assert r.append(all_bytes, b"\x00\r\n") == len(value) + 3
    assert r.getrange(all_bytes, 0, 255) == all_bytes
    enc = b"*3\r\n$3\r\nSET\r\n$3\r\na\x00b\r\n$4\r\n\r\n\r\n\r\n"
    raw.request(enc, b"+OK\r\n")
    raw.request(b"*2\r\n$3\r\nGET\r\n$3\r\na\x00b\r\n", b"$4\r\n\r\n\r\n\r\n")
    assert r.get(b"a\x00b") == b"\r\n\r\n"
    assert r.get(b"a") is None


def test_large_value_roundtrip(r):
    value = bytes(range(256)) * 4096  # 1 MiB
    r.set("big", value)
    assert r.get("big") == value
    assert r.strlen("big") == len(value)


def test_pipelined_commands(server, r, raw):
    # many commands in one write; replies come back in order
    n = 500
    payload = b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$%d\r\nv%d\r\n" % (len(b"k%d" % i), i, len(b"v%d" % i), i)
                       for i in range(n))
    payload += b"".join(b"*2\r\n$3\r\nGET\r\n$%d\r\nk%d\r\n" % (len(b"k%d" % i), i) for i in range(n))
    raw.send(payload)
    raw.expect(b"+OK\r\n" * n)
    raw.expect(b"".join(b"$%d\r\nv%d\r\n" % (len(b"v%d" % i), i) for i in range(n)))
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.incr("ctr")
    assert p.execute() == list(range(1, n + 1))


def test_split_frames(raw):
    # a command split at every byte still works
    frame = b"*3\r\n$3\r\nSET\r\n$5\r\nsplit\r\n$5\r\nvalue\r\n"
    for i in range(len(frame)):
        raw.send(frame[i:i + 1])
        time.sleep(0.001)
    raw.expect(b"+OK\r\n")
    raw.request(b"*2\r\n$3\r\nGET\r\n$5\r\nsplit\r\n", b"$5\r\nvalue\r\n")
