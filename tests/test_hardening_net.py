"""Connection and buffer hardening (issue 11): backpressure that resumes, output-buffer classes,
client buffers before and after AUTH, cross-protocol (HTTP) requests, memcached binary packets."""

import os
import socket
import struct
import threading
import time

import pytest

from conftest import HOST, RawConn, encode_command, wait_until


# --- helpers -------------------------------------------------------------------------------------

def _pipeline(port, payload, unit, count, timeout=30.0, rcvbuf=None):
    """Sends `payload` from a thread while reading; asserts that exactly `count` copies of
    `unit` come back (every reply, in order) and that nothing more follows."""
    s = socket.create_connection((HOST, port))
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    errors = []

    def send():
        try:
            s.sendall(payload)
        except OSError as e:
            errors.append(e)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    want = len(unit) * count
    got = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want:
            left = deadline - time.monotonic()
            assert left > 0, f"stalled: {len(got)} of {want} bytes ({len(got) // len(unit)} replies)"
            s.settimeout(min(left, 5.0))
            try:
                chunk = s.recv(1 << 20)
            except socket.timeout:
                continue
            assert chunk, f"closed after {len(got)} of {want} bytes"
            got += chunk
        view = memoryview(got)
        n = len(unit)
        for i in range(count):
            if view[i * n:(i + 1) * n] != unit:
                raise AssertionError(f"reply {i} differs: {bytes(view[i * n:i * n + 80])!r}")
        assert len(got) == want
    finally:
        t.join(timeout)
        s.close()
    assert not errors, errors


def _mc_set(port, key, value):
    with RawConn(port=port) as c:
        c.request(b"set %s 0 0 %d\r\n" % (key, len(value)) + value + b"\r\n", b"STORED\r\n")


# --- item 2: backpressure resumes when the socket drains -----------------------------------------

@pytest.mark.memcache_only
@pytest.mark.timeout(60)
def test_mc_pipelined_big_gets_all_answered(server, mc):
    value = os.urandom(1 << 20)
    _mc_set(server.memcache_port, b"big", value)
    unit = b"VALUE big 0 %d\r\n" % len(value) + value + b"\r\nEND\r\n"
    _pipeline(server.memcache_port, b"get big\r\n" * 50, unit, 50)


@pytest.mark.memcache_only
@pytest.mark.timeout(90)
def test_mc_many_pipelined_small_gets_all_answered(server, mc):
    value = os.urandom(1024)
    _mc_set(server.memcache_port, b"k", value)
    unit = b"VALUE k 0 1024\r\n" + value + b"\r\nEND\r\n"
    _pipeline(server.memcache_port, b"get k\r\n" * 200_000, unit, 200_000, timeout=60)


@pytest.mark.redis_only
@pytest.mark.timeout(60)
def test_resp_pipelined_big_gets_all_answered(server, r):
    value = os.urandom(1 << 20)
    r.set("big", value)
    unit = b"$%d\r\n" % len(value) + value + b"\r\n"
    _pipeline(server.port, encode_command("GET", "big") * 50, unit, 50)


@pytest.mark.redis_only
@pytest.mark.timeout(90)
def test_resp_many_pipelined_small_gets_all_answered(server, r):
    value = os.urandom(1024)
    r.set("k", value)
    unit = b"$1024\r\n" + value + b"\r\n"
    _pipeline(server.port, encode_command("GET", "k") * 200_000, unit, 200_000, timeout=60)


# --- item 18: HTTP requests sent to either port are not run ---------------------------------------

HTTP_ATTACK_RESP = b"POST / HTTP/1.1\r\nHost: x\r\n\r\nSET pwned 1\r\n"
HTTP_ATTACK_MC = b"POST / HTTP/1.1\r\nHost: x\r\n\r\nset pwned 0 0 1\r\n1\r\n"


@pytest.mark.redis_only
@pytest.mark.parametrize("first", [b"POST / HTTP/1.1\r\n", b"Host: x\r\n"])
def test_resp_http_request_closes_connection(server, r, first):
    payload = first + b"Host: x\r\n\r\nSET pwned 1\r\n" if first.startswith(b"POST") else \
        first + b"\r\nSET pwned 1\r\n"
    with RawConn(port=server.port) as c:
        c.send(payload)
        assert c.is_closed(timeout=3)
        assert c.buf == b""
    assert r.exists("pwned") == 0
    assert r.ping()


@pytest.mark.memcache_only
def test_mc_http_request_closes_connection(server, mc):
    for line in (HTTP_ATTACK_MC, b"GET /index.html HTTP/1.0\r\nset pwned 0 0 1\r\n1\r\n"):
        with RawConn(port=server.memcache_port) as c:
            c.send(line)
            assert c.is_closed(timeout=3)
            assert c.buf == b""
    assert mc.get("pwned") is None


# --- item 21: a memcached binary-protocol packet gets an error and a close ------------------------

@pytest.mark.memcache_only
@pytest.mark.cairn_only
def test_mc_binary_packet_gets_error_and_close(server, mc):
    # A binary GET of "k" (magic 0x80, opcode 0x00, key length 1, opaque 0x01020304).
    packet = struct.pack(">BBHBBHIIQ", 0x80, 0x00, 1, 0, 0, 0, 1, 0x01020304, 0) + b"k"
    with RawConn(port=server.memcache_port) as c:
        c.send(packet)
        header = c.read_exact(24, timeout=3)
        magic, opcode, _keylen, _extlen, _dtype, status, bodylen, opaque, _cas = struct.unpack(
            ">BBHBBHIIQ", header)
        assert (magic, opcode, opaque) == (0x81, 0x00, 0x01020304)
        assert status == 0x83  # not supported
        body = c.read_exact(bodylen)
        assert b"binary protocol" in body
        assert c.is_closed(timeout=3)
    mc.set("after", b"1")
    assert mc.get("after") == b"1"
