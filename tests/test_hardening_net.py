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
    value = os.urandom(1_000_000)  # memcached's default item size limit is 1 MiB with headers
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


# --- item 6: client buffers before and after AUTH -------------------------------------------------

def _rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _info_field(client, field):
    return int(client.info("memory")[field])


@pytest.mark.redis_only
def test_unauthenticated_big_headers_refused(server_factory):
    srv = server_factory("--requirepass", "pw")
    with srv.raw() as c:
        c.send(b"*1\r\n$60000000\r\n")
        c.expect(b"-ERR Protocol error: unauthenticated bulk length\r\n")
        assert c.is_closed(timeout=3)
    with srv.raw() as c:
        c.send(b"*11\r\n")
        c.expect(b"-ERR Protocol error: unauthenticated multibulk length\r\n")
        assert c.is_closed(timeout=3)
    with srv.raw() as c:
        # Small requests still get their NOAUTH answer; after AUTH the limits are lifted
        # (AUTH and the big request in the same batch).
        assert c.command("GET", "k").startswith(b"-NOAUTH")
        big = b"x" * 100_000
        c.send(encode_command("AUTH", "pw") + encode_command("SET", "k", big))
        c.expect(b"+OK\r\n+OK\r\n")
        c.send(encode_command("STRLEN", "k"))
        c.expect(b":100000\r\n")


@pytest.mark.redis_only
@pytest.mark.cairn_only
@pytest.mark.timeout(60)
def test_unauthenticated_frames_do_not_grow_memory(server_factory):
    srv = server_factory("--requirepass", "pw")
    before = _rss_kb(srv.proc.pid)
    chunk = b"x" * (1 << 20)
    conns = []
    try:
        for _ in range(10):
            s = socket.create_connection((HOST, srv.port))
            conns.append(s)
            try:
                s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$60000000\r\n")
                for _ in range(8):
                    s.sendall(chunk)
            except OSError:
                pass  # refused and closed: what we want
        time.sleep(0.3)
        grown_mb = (_rss_kb(srv.proc.pid) - before) / 1024
        assert grown_mb < 30, f"RSS grew by {grown_mb:.0f} MB"
    finally:
        for s in conns:
            s.close()


@pytest.mark.redis_only
@pytest.mark.timeout(60)
def test_client_buffers_count_against_maxmemory(server_factory):
    srv = server_factory("--maxmemory", "16mb", "--maxmemory-policy", "noeviction")
    c = srv.client()
    assert c.set("small", "v")
    base = _info_field(c, "mem_clients_normal")
    hog = socket.create_connection((HOST, srv.port))
    try:
        # A request whose value never completes: 24 MB of it sit in the input buffer.
        hog.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$40000000\r\n")
        chunk = b"x" * (1 << 20)
        for _ in range(24):
            hog.sendall(chunk)
        wait_until(lambda: _info_field(c, "mem_clients_normal") > base + (20 << 20), timeout=10,
                   msg="client buffers in mem_clients_normal")
        assert _info_field(c, "used_memory") > 20 << 20
        with pytest.raises(Exception, match="maxmemory"):
            c.set("other", "v")
    finally:
        hog.close()
    wait_until(lambda: _info_field(c, "mem_clients_normal") < base + (1 << 20), timeout=10,
               msg="buffers released")
    assert c.set("other", "v")
    c.close()


# --- item 8: output-buffer classes ----------------------------------------------------------------

@pytest.mark.redis_only
@pytest.mark.timeout(60)
def test_reader_of_a_100mb_value_is_not_cut(server_factory):
    srv = server_factory("--max-value-size", "128mb")
    c = srv.client()
    value = os.urandom(100 << 20)
    assert c.set("huge", value)
    assert c.get("huge") == value
    # Large pipelined reads over a small receive buffer, read slowly.
    p = c.pipeline(transaction=False)
    for _ in range(3):
        p.get("huge")
    assert p.execute() == [value] * 3
    c.close()


def _client_ids(c):
    return {int(x["id"]) for x in c.client_list()}


@pytest.mark.redis_only
@pytest.mark.timeout(60)
def test_pubsub_subscriber_that_never_reads_is_cut(server_factory):
    srv = server_factory()
    c = srv.client()
    sub = RawConn(HOST, srv.port, rcvbuf=16 * 1024)
    sub_id = int(sub.command("CLIENT", "ID")[1:-2])
    sub.send(encode_command("SUBSCRIBE", "ch"))
    sub.read_resp()
    message = b"m" * (512 << 10)
    try:
        for i in range(100):  # 50 MB, never read
            c.publish("ch", message)
            if sub_id not in _client_ids(c):
                break
        # Messages reach the subscriber's thread asynchronously: give the last ones a moment.
        wait_until(lambda: sub_id not in _client_ids(c), timeout=5, msg="the subscriber cut")
        assert i * len(message) > 24 << 20  # not before the hard limit (32 MB)
    finally:
        sub.close()
    assert c.ping()
    c.close()


@pytest.mark.redis_only
def test_output_buffer_limit_config(server_factory):
    srv = server_factory()
    c = srv.client()
    got = c.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    assert got == "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    assert c.config_set("client-output-buffer-limit", "pubsub 1mb 512kb 1")
    got = c.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    assert got == "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 1"
    with pytest.raises(Exception):
        c.config_set("client-output-buffer-limit", "pubsub 1mb 512kb")
    with pytest.raises(Exception):
        c.config_set("client-output-buffer-limit", "bogus 1 1 1")
    c.close()


@pytest.mark.redis_only
@pytest.mark.timeout(30)
def test_pubsub_soft_limit_cuts_after_its_seconds(server_factory):
    srv = server_factory()
    c = srv.client()
    c.config_set("client-output-buffer-limit", "pubsub 0 1mb 1")
    sub = RawConn(HOST, srv.port, rcvbuf=16 * 1024)
    sub_id = int(sub.command("CLIENT", "ID")[1:-2])
    sub.send(encode_command("SUBSCRIBE", "ch"))
    sub.read_resp()
    message = b"m" * (256 << 10)
    try:
        for _ in range(24):  # 6 MB: over the soft limit, no hard limit
            c.publish("ch", message)
        assert sub_id in _client_ids(c), "cut before its soft-limit seconds"
        time.sleep(2.2)
        c.publish("ch", b"x")
        wait_until(lambda: sub_id not in _client_ids(c), timeout=5, msg="soft-limit cut")
    finally:
        sub.close()
    c.close()


@pytest.mark.redis_only
@pytest.mark.cairn_only
@pytest.mark.timeout(30)
def test_tracking_messages_count_as_pubsub_class(server_factory):
    srv = server_factory()
    c = srv.client()
    c.config_set("client-output-buffer-limit", "pubsub 1mb 0 0")
    t = RawConn(HOST, srv.port, rcvbuf=16 * 1024)
    t.command("HELLO", "3")
    t_id = int(t.command("CLIENT", "ID")[1:-2])
    assert t.command("CLIENT", "TRACKING", "on", "BCAST") == b"+OK\r\n"
    try:
        for i in range(2000):  # 2000 invalidations of 4 KB keys: 8 MB of pushes, never read
            c.set(b"k" * 4096 + str(i).encode(), "v")
            if i % 100 == 99 and t_id not in _client_ids(c):
                break
        assert t_id not in _client_ids(c), "the tracking client was not cut"
    finally:
        t.close()
    c.close()


@pytest.mark.redis_only
@pytest.mark.cairn_only
@pytest.mark.timeout(60)
def test_pipelining_client_that_stops_reading_is_throttled_not_cut(server_factory):
    srv = server_factory()
    c = srv.client()
    value = os.urandom(512 << 10)
    c.set("big", value)
    slow = RawConn(HOST, srv.port, rcvbuf=16 * 1024)
    slow_id = int(slow.command("CLIENT", "ID")[1:-2])
    n = 400  # 200 MB of replies
    t = threading.Thread(target=lambda: slow.sock.sendall(encode_command("GET", "big") * n),
                         daemon=True)
    t.start()
    try:
        time.sleep(1.0)
        # The server stopped running its requests: its unsent output stays small.
        info = [x for x in c.client_list() if int(x["id"]) == slow_id]
        assert info, "the client was cut"
        assert int(info[0]["omem"]) < 8 << 20, info
        assert _info_field(c, "mem_clients_normal") < 16 << 20
        # Once it reads, every reply comes.
        unit = b"$%d\r\n" % len(value) + value + b"\r\n"
        got = bytearray(slow.buf)
        slow.sock.settimeout(10)
        while len(got) < len(unit) * n:
            chunk = slow.sock.recv(1 << 20)
            assert chunk, f"closed after {len(got)} bytes"
            got += chunk
        assert len(got) == len(unit) * n
        assert got.count(unit) == n, "replies differ"
    finally:
        slow.close()
        t.join(10)
    c.close()


def test_pipeline_written_whole_before_reading_completes(server, r):
    # redis-py's pipeline.execute() sends every command before it reads a reply. 200k GETs of
    # 1 KB (6 MB of requests, 200 MB of replies): a server that stopped reading requests as
    # soon as its socket was full left both sides waiting on each other.
    r.set("pipe:k", b"x" * 1000)
    pipe = r.pipeline(transaction=False)
    for _ in range(200_000):
        pipe.get("pipe:k")
    out = pipe.execute()
    assert len(out) == 200_000 and out[-1] == b"x" * 1000
    r.delete("pipe:k")
