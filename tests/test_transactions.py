"""MULTI / EXEC / DISCARD / WATCH (RESP). Validated against redis-server 7."""

import threading
import time

import pytest
import redis

pytestmark = pytest.mark.redis_only


def test_multi_exec_basic(r, raw):
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    raw.request(b"*2\r\n$4\r\nINCR\r\n$1\r\na\r\n", b"+QUEUED\r\n")
    raw.request(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n", b"+QUEUED\r\n")
    # nothing is executed before EXEC
    assert r.get("a") is None
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n")
    assert r.get("a") == b"2"


def test_empty_multi_exec(raw):
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*0\r\n")


def test_pipeline_transaction(r):
    p = r.pipeline(transaction=True)
    p.set("a", "1").incr("a").mget("a", "b").hset("h", "f", "v")
    assert p.execute() == [True, 2, [b"2", None], 1]


def test_discard(r, raw):
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$7\r\nDISCARD\r\n", b"+OK\r\n")
    assert r.exists("a") == 0
    assert raw.err("EXEC") == "ERR EXEC without MULTI"
    assert raw.err("DISCARD") == "ERR DISCARD without MULTI"
    # the connection is back to normal
    raw.request(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n", b"$-1\r\n")


def test_exec_without_multi(raw):
    assert raw.err("EXEC") == "ERR EXEC without MULTI"


def test_nested_multi(raw):
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    assert raw.err("MULTI") == "ERR MULTI calls can not be nested"
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    # the nested MULTI does not abort the transaction
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*1\r\n+OK\r\n")


def test_runtime_error_inside_exec(r, raw):
    r.set("s", "abc")
    r.hset("h", "f", "v")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    raw.request(b"*2\r\n$4\r\nINCR\r\n$1\r\ns\r\n", b"+QUEUED\r\n")
    raw.request(b"*2\r\n$3\r\nGET\r\n$1\r\nh\r\n", b"+QUEUED\r\n")
    raw.request(b"*2\r\n$4\r\nINCR\r\n$1\r\na\r\n", b"+QUEUED\r\n")
    raw.request(
        b"*1\r\n$4\r\nEXEC\r\n",
        b"*4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n"
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:2\r\n",
    )
    # errors do not roll back the other commands
    assert r.get("a") == b"2"


def test_execabort_on_queueing_error(r, raw):
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    assert raw.err("SET", "b") == "ERR wrong number of arguments for 'set' command"
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert r.exists("a", "b", "c") == 0
    # an unknown command while queuing aborts as well
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    assert raw.err("NOSUCHCOMMAND", "x").startswith("ERR unknown command 'NOSUCHCOMMAND'")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert r.exists("a") == 0
    # and the connection has left the MULTI state
    assert raw.err("EXEC") == "ERR EXEC without MULTI"


def test_execabort_via_redis_py(r):
    p = r.pipeline(transaction=True)
    p.set("a", "1")
    p.execute_command("SET", "only-key")
    with pytest.raises(redis.exceptions.ResponseError):
        p.execute()
    assert r.exists("a") == 0


def test_watch_aborts_exec(r, r2, raw):
    r.set("k", "1")
    raw.request(b"*2\r\n$5\r\nWATCH\r\n$1\r\nk\r\n", b"+OK\r\n")
    r2.set("k", "2")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n3\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*-1\r\n")
    assert r.get("k") == b"2"
    # EXEC clears the watch: the next transaction goes through
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n4\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*1\r\n+OK\r\n")
    assert r.get("k") == b"4"


@pytest.mark.parametrize(
    "modify",
    [
        lambda c: c.delete("k"),
        lambda c: c.expire("k", 100),
        lambda c: c.append("k", "x"),
        lambda c: c.set("k", "1"),  # same value still counts as a modification
        lambda c: c.flushall(),
    ],
    ids=["del", "expire", "append", "set-same", "flushall"],
)
def test_watch_detects_modifications(r, r2, raw, modify):
    r.set("k", "1")
    raw.request(b"*2\r\n$5\r\nWATCH\r\n$1\r\nk\r\n", b"+OK\r\n")
    modify(r2)
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*-1\r\n")


def test_watch_missing_key_created(r, r2, raw):
    raw.request(b"*2\r\n$5\r\nWATCH\r\n$1\r\nn\r\n", b"+OK\r\n")
    r2.set("n", "1")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*1\r\n$4\r\nPING\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*-1\r\n")


def test_watch_untouched_key_succeeds(r, r2, raw):
    r.set("k", "1")
    raw.request(b"*3\r\n$5\r\nWATCH\r\n$1\r\nk\r\n$5\r\nother\r\n", b"+OK\r\n")
    r2.set("unrelated", "x")
    r2.get("k")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*1\r\n:2\r\n")


def test_unwatch(r, r2, raw):
    r.set("k", "1")
    raw.request(b"*2\r\n$5\r\nWATCH\r\n$1\r\nk\r\n", b"+OK\r\n")
    raw.request(b"*1\r\n$7\r\nUNWATCH\r\n", b"+OK\r\n")
    r2.set("k", "2")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n3\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*1\r\n+OK\r\n")
    assert r.get("k") == b"3"


def test_discard_clears_watch(r, r2, raw):
    r.set("k", "1")
    raw.request(b"*2\r\n$5\r\nWATCH\r\n$1\r\nk\r\n", b"+OK\r\n")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*1\r\n$7\r\nDISCARD\r\n", b"+OK\r\n")
    r2.set("k", "2")
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    raw.request(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"+QUEUED\r\n")
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*1\r\n$1\r\n2\r\n")


def test_watch_inside_multi(raw):
    raw.request(b"*1\r\n$5\r\nMULTI\r\n", b"+OK\r\n")
    assert raw.err("WATCH", "k") == "ERR WATCH inside MULTI is not allowed"
    raw.request(b"*1\r\n$4\r\nEXEC\r\n", b"*0\r\n")


def test_watch_with_redis_py(r, r2):
    r.set("k", "1")
    with r.pipeline() as p:
        p.watch("k")
        r2.set("k", "2")
        p.multi()
        p.set("k", "3")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("k") == b"2"


def test_transaction_atomic_across_keys(server, r):
    r.mset({"a": 0, "b": 0})
    stop = threading.Event()
    errors = []
    writes = [0]

    def writer():
        c = server.client()
        try:
            while not stop.is_set():
                p = c.pipeline(transaction=True)
                p.incr("a").incr("b")
                a, b = p.execute()
                if a != b:
                    errors.append(("exec", a, b))
                writes[0] += 1
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            c.close()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    reads = 0
    deadline = time.monotonic() + 1.5
    try:
        while time.monotonic() < deadline and not errors:
            a, b = r.mget("a", "b")
            assert a == b, f"saw a={a} b={b} mid-transaction"
            reads += 1
    finally:
        stop.set()
        t.join(10)
    assert not errors, errors
    assert writes[0] > 10 and reads > 10
    a, b = r.mget("a", "b")
    assert a == b == str(writes[0]).encode()
