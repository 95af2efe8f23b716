"""Configuration foot-guns (issue 11, item 9): settings that would lock every client out are
refused, clearing requirepass lets waiting connections in, SIGHUP does not kill the server,
and requests of millions of arguments (MSET of a million pairs) work within a bounded query
buffer."""

from __future__ import annotations

import signal
import time

import pytest

from conftest import TARGET, encode_command, wait_until

pytestmark = pytest.mark.redis_only

NOAUTH = b"-NOAUTH Authentication required.\r\n"


def _config_error(name: str, why: str) -> str:
    return f"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"


def test_config_set_maxclients_zero_is_refused(server_factory):
    srv = server_factory()
    c = srv.raw()
    before = c.command("CONFIG", "GET", "maxclients")
    assert c.err("CONFIG", "SET", "maxclients", "0") == _config_error(
        "maxclients", "argument must be between 1 and 4294967295 inclusive")
    assert c.err("CONFIG", "SET", "maxclients", "many") == _config_error(
        "maxclients", "argument couldn't be parsed into an integer")
    assert c.command("CONFIG", "GET", "maxclients") == before
    # New connections are still accepted.
    with srv.raw() as other:
        other.request(b"PING\r\n", b"+PONG\r\n")
    c.request(encode_command("CONFIG", "SET", "maxclients", "50"), b"+OK\r\n")


@pytest.mark.cairn_only
def test_config_set_max_value_size_zero_is_refused(server_factory):
    srv = server_factory()
    c = srv.raw()
    assert c.err("CONFIG", "SET", "max-value-size", "0").startswith(
        _config_error("max-value-size", "argument must be between 1 and"))
    c.request(encode_command("SET", "k", "v"), b"+OK\r\n")
    c.request(encode_command("CONFIG", "SET", "max-value-size", "1kb"), b"+OK\r\n")
    c.request(encode_command("SET", "k", "x" * 600), b"+OK\r\n")
    assert c.err("APPEND", "k", "x" * 600).startswith("ERR")
    # The query buffer limit has Redis's 1mb floor.
    assert c.err("CONFIG", "SET", "client-query-buffer-limit", "1000").startswith(
        _config_error("client-query-buffer-limit", "argument must be between 1048576 and"))


@pytest.mark.cairn_only
@pytest.mark.parametrize("flag", [["--max-value-size", "0"], ["--maxclients", "0"],
                                  ["--client-query-buffer-limit", "10kb"]])
def test_zero_limits_refused_at_startup(server_factory, flag):
    srv = server_factory(*flag, start=False)
    srv.start(wait=False)
    assert srv.proc.wait(5) != 0
    srv.stopped = True
    assert "between" in srv.log() or "least" in srv.log(), srv.log()


def test_clearing_requirepass_lets_waiting_connections_in(server_factory):
    srv = server_factory("--requirepass", "pw")
    waiting = srv.raw()
    waiting.request(encode_command("GET", "k"), NOAUTH)
    admin = srv.raw()
    admin.request(encode_command("AUTH", "pw"), b"+OK\r\n")
    admin.request(encode_command("SET", "k", "v"), b"+OK\r\n")
    admin.request(encode_command("CONFIG", "SET", "requirepass", ""), b"+OK\r\n")
    # The connection that never authenticated now runs commands.
    waiting.request(encode_command("GET", "k"), b"$1\r\nv\r\n")
    if TARGET == "cairn":
        # HELLO too (Redis still answers NOAUTH to HELLO alone there: it checks the
        # connection's flag, not whether a password is needed).
        hello = waiting.command("HELLO", "2")
        assert hello.startswith(b"*14\r\n"), hello
    # As in Redis, that connection never authenticated: a new password locks it out again,
    # while connections that did authenticate stay in.
    admin.request(encode_command("CONFIG", "SET", "requirepass", "pw2"), b"+OK\r\n")
    waiting.request(encode_command("GET", "k"), NOAUTH)
    admin.request(encode_command("GET", "k"), b"$1\r\nv\r\n")
    with srv.raw() as fresh:
        fresh.request(encode_command("GET", "k"), NOAUTH)


def test_sighup_does_not_kill_the_server(server_factory):
    srv = server_factory()
    c = srv.raw()
    c.request(encode_command("SET", "k", "v"), b"+OK\r\n")
    for _ in range(3):
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.05)
    time.sleep(0.2)
    assert srv.proc.poll() is None, f"server died on SIGHUP; log:\n{srv.log()}"
    c.request(encode_command("GET", "k"), b"$1\r\nv\r\n")
    with srv.raw() as other:
        other.request(b"PING\r\n", b"+PONG\r\n")
    # SIGTERM still shuts it down cleanly (the teardown checks exit status 0).
    assert srv.stop() == 0


def _mset_frame(pairs: int, pad: bytes = b"") -> bytes:
    parts = [b"*%d\r\n$4\r\nMSET\r\n" % (2 * pairs + 1)]
    for i in range(pairs):
        k = b"key:%d" % i
        v = b"v%d%s" % (i, pad)
        parts.append(b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    return b"".join(parts)


def test_mset_of_a_million_pairs(server_factory):
    srv = server_factory()
    frame = _mset_frame(1_000_000)  # 2,000,001 arguments, about 27 MB
    with srv.raw(timeout=60) as c:
        # Sent in small pieces, so the server sees the request arrive over many reads.
        for i in range(0, len(frame), 1 << 20):
            c.send(frame[i:i + (1 << 20)])
        c.expect(b"+OK\r\n", timeout=60)
        c.request(encode_command("DBSIZE"), b":1000000\r\n")
        c.request(encode_command("MGET", "key:0", "key:999999"), b"*2\r\n$2\r\nv0\r\n$7\r\nv999999\r\n")
        # The connection stays usable for ordinary requests.
        c.request(b"PING\r\n", b"+PONG\r\n")


@pytest.mark.cairn_only
def test_query_buffer_limit_bounds_a_huge_request(server_factory):
    srv = server_factory("--client-query-buffer-limit", "1mb", "--max-value-size", "64kb")
    c = srv.raw()
    fits = _mset_frame(30_000)  # about 0.6 MB
    c.send(fits)
    c.expect(b"+OK\r\n")
    frame = _mset_frame(30_000, pad=b"x" * 100)  # about 3.6 MB: past the limit
    try:
        c.send(frame[: 2 << 20])
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert c.is_closed(timeout=5)
    assert srv.client().dbsize() == 30_000
    assert srv.client().info("stats")["client_query_buffer_limit_disconnections"] == 1
    # More arguments than the limit has room for are refused at the header, as Redis
    # refuses counts past INT_MAX.
    with srv.raw() as c:
        c.request(b"*1000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n")
        assert c.is_closed()
    assert srv.proc.poll() is None, srv.log()
