"""Shared fixtures and helpers for cairn's Python integration tests.

Targets (env ``CAIRN_TARGET``):
  * ``cairn`` (default): the real binary (``CAIRN_BIN``, default
    ``target/release/cairn-server``), started in three I/O modes.
  * ``redis``: a real ``redis-server``; RESP tests run, memcached-only and
    cairn-only tests are skipped.  Used to check that the tests encode real
    Redis behaviour.
  * ``memcached``: a real ``memcached``; memcached tests run, the rest skip.

Other knobs:
  * ``CAIRN_MODES=reactor,single`` limits the modes of the ``server`` fixture.
  * ``CAIRN_KEEP_LOGS=1`` keeps the server log directory after the run.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
TARGET = os.environ.get("CAIRN_TARGET", "cairn").strip().lower() or "cairn"
if TARGET not in ("cairn", "redis", "memcached"):
    raise RuntimeError(f"CAIRN_TARGET must be cairn, redis or memcached, not {TARGET!r}")
VALIDATING = TARGET != "cairn"
CAIRN_BIN = os.environ.get("CAIRN_BIN", str(ROOT / "target" / "release" / "cairn-server"))
HOST = "127.0.0.1"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 2.0

# The I/O modes every test taking the `server` fixture runs in.
MODES = {
    # Two loops named explicitly: the default is one loop on machines of up to 3 cores, where
    # "reactor" would then test nothing "single" does not (cross-loop wakes, kills, mail).
    "reactor": ["--threads", "2"],
    "single": ["--threads", "1"],
    "dispatch": ["--io-model", "dispatch", "--workers", "2"],
}


def _selected_modes():
    if VALIDATING:
        return [TARGET]
    wanted = os.environ.get("CAIRN_MODES", "").strip()
    if not wanted:
        return list(MODES)
    names = [m.strip() for m in wanted.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODES]
    if unknown:
        raise RuntimeError(f"unknown CAIRN_MODES entries: {unknown}")
    return names


SERVER_PARAMS = _selected_modes()

_LOG_ROOT = Path(tempfile.mkdtemp(prefix="cairn-tests-"))


def pytest_configure(config):
    config.addinivalue_line("markers", "cairn_only: cairn-specific behaviour; skipped in validation mode")
    config.addinivalue_line("markers", "redis_only: needs a RESP endpoint (skipped when CAIRN_TARGET=memcached)")
    config.addinivalue_line("markers", "memcache_only: needs a memcached endpoint (skipped when CAIRN_TARGET=redis)")


def pytest_report_header(config):
    where = CAIRN_BIN if TARGET == "cairn" else shutil.which(TARGET + ("-server" if TARGET == "redis" else "")) or TARGET
    return [f"cairn target: {TARGET} ({where}); server modes: {', '.join(SERVER_PARAMS)}; logs: {_LOG_ROOT}"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if TARGET != "cairn" and item.get_closest_marker("cairn_only"):
            item.add_marker(pytest.mark.skip(reason=f"cairn-only test (CAIRN_TARGET={TARGET})"))
        if TARGET == "memcached" and item.get_closest_marker("redis_only"):
            item.add_marker(pytest.mark.skip(reason="RESP test (CAIRN_TARGET=memcached)"))
        if TARGET == "redis" and item.get_closest_marker("memcache_only"):
            item.add_marker(pytest.mark.skip(reason="memcached test (CAIRN_TARGET=redis)"))


def pytest_unconfigure(config):
    if os.environ.get("CAIRN_KEEP_LOGS"):
        return
    shutil.rmtree(_LOG_ROOT, ignore_errors=True)


# ----------------------------------------------------------------------------
# small utilities
# ----------------------------------------------------------------------------

# The shared kit (tests/kit.py): also used by bench/, studies/ and the client's benchmark.
# Re-exported here: tests import these names from conftest.
from kit import (  # noqa: E402
    RespError,
    ServerProcess,
    decode_resp,
    die_with_parent as _die_with_parent,
    encode_command,
    free_port,
    read_reply,
    wait_until,
)


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*(b|k|kb|m|mb|g|gb)?", str(text).strip().lower())
    if not m:
        raise ValueError(f"bad size {text!r}")
    mult = {None: 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
    return int(m.group(1)) * mult[m.group(2)]


def _listening_tcp_ports_of(pid: int) -> set[int]:
    """TCP ports a process listens on, from /proc (Linux only)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            # local_address rem_address st ... inode at index 9; st 0A == LISTEN
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


# ----------------------------------------------------------------------------
# raw socket client for exact-bytes checks
# ----------------------------------------------------------------------------

class RawConn:
    """A plain socket with buffered, timeout-bounded reads."""

    def __init__(self, host=HOST, port=None, path=None, timeout=5.0, rcvbuf=None):
        if path is not None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            addr = path
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            addr = (host, port)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(addr)
        self.timeout = timeout
        self.buf = b""
        self.eof = False

    # -- plumbing --
    def send(self, data: bytes):
        self.sock.sendall(data)
        return self

    def _fill(self, deadline) -> bool:
        """Reads more bytes into the buffer; False on EOF/reset or timeout."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            self.eof = True
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_exact(self, n: int, timeout=None) -> bytes:
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise AssertionError(f"wanted {n} bytes, got {self.buf!r} (eof={self.eof})")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_until(self, terminator: bytes, timeout=None) -> bytes:
        deadline = time.monotonic() + (timeout or self.timeout)
        while terminator not in self.buf:
            if not self._fill(deadline):
                raise AssertionError(f"no {terminator!r} in {self.buf[:2000]!r} (eof={self.eof})")
        i = self.buf.index(terminator) + len(terminator)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_line(self, timeout=None) -> bytes:
        """One CRLF-terminated line, without the CRLF."""
        return self.read_until(b"\r\n", timeout)[:-2]

    def read_available(self, wait=0.2) -> bytes:
        """Everything that arrives within `wait` seconds."""
        deadline = time.monotonic() + wait
        while self._fill(deadline):
            pass
        out, self.buf = self.buf, b""
        return out

    def expect(self, expected: bytes, timeout=None) -> bytes:
        """Asserts that the next bytes on the wire are exactly `expected`."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < len(expected):
            if not expected.startswith(self.buf[: len(expected)]):
                break
            if not self._fill(deadline):
                break
        got = self.buf[: len(expected)]
        assert got == expected, f"expected {expected!r}, got {self.buf[:2000]!r} (eof={self.eof})"
        self.buf = self.buf[len(expected):]
        return got

    def request(self, data: bytes, expected: bytes, timeout=None) -> bytes:
        self.send(data)
        return self.expect(expected, timeout)

    def read_resp(self, timeout=None) -> bytes:
        """The raw bytes of one complete RESP2/RESP3 reply."""
        deadline = time.monotonic() + (timeout or self.timeout)
        out = bytearray()

        def line():
            while b"\r\n" not in self.buf:
                if not self._fill(deadline):
                    raise AssertionError(f"incomplete reply: {bytes(out) + self.buf!r} (eof={self.eof})")
            i = self.buf.index(b"\r\n") + 2
            ln, self.buf = self.buf[:i], self.buf[i:]
            out.extend(ln)
            return ln[:-2]

        def exact(n):
            while len(self.buf) < n:
                if not self._fill(deadline):
                    raise AssertionError(f"incomplete reply: {bytes(out) + self.buf!r} (eof={self.eof})")
            out.extend(self.buf[:n])
            self.buf = self.buf[n:]

        def value():
            ln = line()
            t, rest = ln[:1], ln[1:]
            if t in (b"$", b"=", b"!"):
                n = int(rest)
                if n >= 0:
                    exact(n + 2)
            elif t in (b"*", b"~", b">"):
                for _ in range(max(int(rest), 0)):
                    value()
            elif t in (b"%", b"|"):
                for _ in range(2 * int(rest)):
                    value()
                if t == b"|":
                    value()
            elif t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
                pass
            else:
                raise AssertionError(f"not a RESP reply: {ln!r}")

        value()
        return bytes(out)

    def command(self, *args) -> bytes:
        """Sends one RESP-encoded command and returns the raw reply."""
        self.send(encode_command(*args))
        return self.read_resp()

    def err(self, *args) -> str:
        """Sends a command that must fail; returns the error text without '-' and CRLF."""
        reply = self.command(*args)
        assert reply.startswith(b"-"), f"expected an error reply to {args!r}, got {reply!r}"
        return reply[1:-2].decode(errors="replace")

    def is_closed(self, timeout=2.0) -> bool:
        """True once the peer closes (pending data is discarded)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.eof:
                return True
            if not self._fill(deadline):
                return self.eof
            self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ----------------------------------------------------------------------------
# server processes
# ----------------------------------------------------------------------------

_REDIS_POLICY = {"evict": "allkeys-lru", "noeviction": "noeviction"}


def _flag_pairs(args):
    """Splits ['--a', 'x', '--flag'] into [('--a', 'x'), ('--flag', None)]."""
    out, i = [], 0
    args = list(args)
    while i < len(args):
        a = args[i]
        if i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
            out.append((a, str(args[i + 1])))
            i += 2
        else:
            out.append((a, None))
            i += 1
    return out


def _to_redis_args(args):
    out = []
    for flag, val in _flag_pairs(args):
        if flag in ("--requirepass", "--maxclients", "--maxmemory", "--unixsocket", "--unixsocketperm",
                    "--dir", "--dbfilename", "--save", "--stop-writes-on-bgsave-error",
                    "--rdb-key-save-delay", "--key-load-delay", "--loading-process-events-interval-bytes",
                    "--replicaof", "--repl-backlog-size", "--min-replicas-to-write", "--min-replicas-max-lag",
                    "--masterauth", "--replica-read-only", "--replica-serve-stale-data", "--repl-timeout"):
            out += [flag, val]
        elif flag == "--maxmemory-policy":
            out += [flag, _REDIS_POLICY.get(val, val)]
        elif flag == "--client-output-limit":
            out += ["--client-output-buffer-limit", f"normal {val} {val} 0"]
        elif flag in ("--threads", "--io-model", "--workers", "--memcache-port", "--memcache-unixsocket", "--loglevel"):
            continue
        else:
            pytest.skip(f"{flag} has no redis-server equivalent")
    return out


def _to_memcached_args(args):
    out = []
    for flag, val in _flag_pairs(args):
        if flag == "--maxclients":
            out += ["-c", val]
        elif flag == "--max-value-size":
            out += ["-I", str(parse_size(val))]
        elif flag == "--maxmemory":
            out += ["-m", str(max(1, parse_size(val) // (1024 * 1024)))]
        elif flag == "--maxmemory-policy":
            if val == "noeviction":
                out += ["-M"]
        elif flag == "--threads":
            out += ["-t", val]
        elif flag in ("--io-model", "--workers", "--loglevel", "--port"):
            continue
        else:
            pytest.skip(f"{flag} has no memcached equivalent")
    return out


class Server(ServerProcess):
    """One server process (cairn, or redis-server / memcached in validation mode): the kit's
    launcher (tests/kit.py) with the tests' defaults, flag translation for the validation peers,
    clients, and pytest failures.

    port / memcache_port: "auto" picks a free port, an int is used as is,
    None passes no flag at all (cairn then uses its default).
    """

    start_error = AssertionError

    def __init__(self, args=(), *, kind=None, port="auto", memcache_port="auto", name="srv", env=None):
        kind = kind or TARGET
        super().__init__(args, kind=kind, binary=CAIRN_BIN, port=port, memcache_port=memcache_port, name=name,
                         workdir=_LOG_ROOT, env=env)
        self.unixsocket = self._arg("--unixsocket")
        self.memcache_unixsocket = self._arg("--memcache-unixsocket")
        self.password = self._arg("--requirepass")

    def server_args(self):
        if self.kind == "redis":
            return ["--databases", "1"] + _to_redis_args(self.args)
        if self.kind == "memcached":
            return _to_memcached_args(self.args)
        return self.args

    def start(self, wait=True):
        if self.kind == "cairn" and not os.access(self.binary, os.X_OK):
            pytest.fail(f"server binary {self.binary} not found; run `cargo build --release -p cairn-server` "
                        f"or set CAIRN_BIN", pytrace=False)
        return super().start(wait=wait, timeout=START_TIMEOUT)

    def assert_alive(self):
        if not self.alive():
            rc = self.proc.returncode if self.proc else None
            raise AssertionError(f"{self.name} is not running (exit status {rc}); log:\n{self.log()}")

    def wait_ready(self, timeout=START_TIMEOUT):
        super().wait_ready(timeout)

    def terminate(self, timeout=STOP_TIMEOUT):
        return super().terminate(timeout)

    def stop(self, timeout=STOP_TIMEOUT, check=True):
        already = self.stopped
        rc, took = self.terminate(timeout)
        if check and not already:
            assert rc is not None, f"{self.name} did not exit within {timeout}s of SIGTERM; log:\n{self.log()}"
            assert rc == 0, f"{self.name} exited with status {rc} after SIGTERM; log:\n{self.log()}"
        return rc

    # -- clients --
    def client(self, protocol=2, **kw) -> redis.Redis:
        if not self.has_resp and "unix_socket_path" not in kw:
            pytest.skip("no RESP endpoint on this target")
        opts = dict(host=HOST, port=self.port, decode_responses=False, socket_timeout=10,
                    socket_connect_timeout=5, single_connection_client=True, protocol=protocol)
        opts.update(kw)
        return redis.Redis(**opts)

    def mc(self, **kw):
        from pymemcache.client.base import Client

        if not self.has_memcache:
            pytest.skip("no memcached endpoint on this target")
        opts = dict(connect_timeout=5, timeout=10)
        opts.update(kw)
        return Client((HOST, self.memcache_port), **opts)

    def raw(self, **kw) -> RawConn:
        if not self.has_resp:
            pytest.skip("no RESP endpoint on this target")
        return RawConn(HOST, self.port, **kw)

    def mc_raw(self, **kw) -> RawConn:
        if not self.has_memcache:
            pytest.skip("no memcached endpoint on this target")
        return RawConn(HOST, self.memcache_port, **kw)

    def listening_ports(self):
        return _listening_tcp_ports_of(self.proc.pid)

    def __repr__(self):
        return f"<Server {self.name} {self.kind} resp={self.port} mc={self.memcache_port}>"


# ----------------------------------------------------------------------------
# fixtures
# ----------------------------------------------------------------------------

@pytest.fixture(scope="session", params=SERVER_PARAMS)
def server(request):
    """The shared server, once per I/O mode (or the validation peer)."""
    mode = request.param
    args = MODES.get(mode, [])
    srv = Server(args, name=f"server-{mode}")
    srv.mode = mode
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def server_factory(request):
    """Starts extra servers with special flags; stops them (expecting exit 0) at teardown.

    Usage: srv = server_factory("--maxclients", "5")  (plus Server keyword args)
    """
    started = []

    def make(*args, start=True, **kw):
        if args and isinstance(args[0], (list, tuple)):
            args = tuple(args[0]) + tuple(args[1:])
        srv = Server(args, name=kw.pop("name", request.node.name[:40].replace("/", "_")), **kw)
        started.append(srv)
        if start:
            srv.start()
        return srv

    yield make
    errors = []
    for srv in started:
        if srv.proc is None:
            continue
        try:
            srv.stop()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)


@pytest.fixture
def r(server):
    """redis-py (RESP2, bytes) on the shared server, after FLUSHALL."""
    server.assert_alive()
    c = server.client()
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def r2(server, r):
    """A second, independent RESP2 connection."""
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def r3(server, r):
    """redis-py speaking RESP3 (HELLO 3) on the flushed shared server."""
    c = server.client(protocol=3)
    yield c
    c.close()


@pytest.fixture
def raw(server, r):
    """A raw socket to the RESP port of the flushed shared server."""
    c = server.raw()
    yield c
    c.close()


@pytest.fixture
def mc(server):
    """pymemcache client on the shared server, after flush_all."""
    server.assert_alive()
    c = server.mc()
    assert c.flush_all(noreply=False) is True
    yield c
    c.close()


@pytest.fixture
def mc_raw(server, mc):
    """A raw socket to the memcached port of the flushed shared server."""
    c = server.mc_raw()
    yield c
    c.close()
