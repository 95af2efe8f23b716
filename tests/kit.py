"""The one Python test kit: the server launcher (cairn-server, redis-server, memcached), free
ports, child processes that die with their parent, RESP requests and replies on raw sockets,
memcached `stats`, polling. Used by tests/ (conftest
re-exports it), bench/, studies/ and clients/python/bench_near_cache.py, so that each of them
does not carry its own RESP encoder and port picker (issue 20).

It depends on nothing outside the standard library: the bench scripts and the study import it
by path (`sys.path.insert(0, ROOT / "tests")`).
"""

from __future__ import annotations

import collections
import io
import shutil
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
CAIRN_BIN = os.environ.get("CAIRN_BIN", str(ROOT / "target" / "release" / "cairn-server"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# The ports free_port handed out lately: the kernel may offer a port again as soon as its probe
# socket closes, and a server given the same port for RESP and memcached failed to start
# ("Address already in use", seen once in CI).
_RECENT_PORTS: collections.deque = collections.deque(maxlen=512)


def free_port(host: str = HOST) -> int:
    """A currently free TCP port on `host`, none of the last 512 this process handed out."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in _RECENT_PORTS:
            _RECENT_PORTS.append(port)
            return port
    raise RuntimeError("no free port that was not handed out lately")


def die_with_parent():
    """preexec_fn for subprocess.Popen: the child gets SIGKILL when its parent dies, so a
    crashed test or benchmark leaves no server behind (Linux's PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass


def wait_until(pred, timeout=5.0, interval=0.02, msg="condition"):
    """Polls pred() until it returns a truthy value; returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {msg}")
        time.sleep(interval)


def wait_for(check, timeout: float, what: str) -> None:
    """Polls check() (a rig's readiness probe) until it is true; connection errors and bad
    replies count as not yet. Raises RuntimeError naming `what` at the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def stop_process(proc, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`; a process already gone (or None) is left alone."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def encode_command(*args) -> bytes:
    """A RESP request: an array of bulk strings (str, bytes and int arguments)."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif not isinstance(a, (bytes, bytearray)):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class RespError(str):
    """An error reply, as read_reply / decode_resp return it."""


def read_reply(f):
    """Reads one complete RESP2/RESP3 reply from the binary file `f` (a socket's makefile("rb")
    or a BytesIO) into Python values.

    Maps become dicts, sets Python sets, nulls None, doubles float, booleans bool, big numbers
    int, simple strings / bulk / verbatim strings bytes, errors RespError; attributes are
    skipped. Raises EOFError when the stream ends first.
    """
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise EOFError(f"connection closed mid-reply: {line!r}")
    t, rest = line[:1], line[1:-2]
    if t in (b"$", b"=", b"!"):
        n = int(rest)
        if n < 0:
            return None
        body = f.read(n + 2)[:-2]
        if t == b"!":
            return RespError(body.decode(errors="replace"))
        return body[4:] if t == b"=" else body
    if t in (b"*", b">"):
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    if t == b"~":
        return {read_reply(f) for _ in range(int(rest))}
    if t == b"%":
        out = {}
        for _ in range(int(rest)):
            k = read_reply(f)
            out[k] = read_reply(f)
        return out
    if t == b"|":
        for _ in range(2 * int(rest)):
            read_reply(f)
        return read_reply(f)
    if t == b"+":
        return rest
    if t == b"-":
        return RespError(rest.decode(errors="replace"))
    if t in (b":", b"("):
        return int(rest)
    if t == b"_":
        return None
    if t == b",":
        return float(rest)
    if t == b"#":
        return rest == b"t"
    raise ValueError(f"not RESP: {line!r}")


def decode_resp(data: bytes):
    """Decodes one complete RESP2/RESP3 reply held in `data` (see read_reply)."""
    return read_reply(io.BytesIO(data))


def resp_call(port, *args, host=HOST, timeout=30):
    """One RESP command over a fresh connection; its reply (read_reply's values). An error
    reply raises RuntimeError."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(encode_command(*args))
        reply = read_reply(s.makefile("rb"))
    if isinstance(reply, RespError):
        raise RuntimeError(f"{args[0]}: {reply}")
    return reply


def mc_stats(port, group=None, host=HOST, timeout=30):
    """memcached `stats [group]` as {name: value text}."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"stats" + (b" " + group.encode() if group else b"") + b"\r\n")
        f = s.makefile("rb")
        out = {}
        while True:
            line = f.readline().strip()
            if not line or line == b"END":
                return out
            parts = line.decode().split(" ", 2)
            if parts[0] == "STAT" and len(parts) == 3:
                out[parts[1]] = parts[2]


def binary_commit(path):
    """The commit a cairn-server binary was built from (its `--version`), None if it says none."""
    import re
    import subprocess

    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"\(commit ([0-9a-f]+|unknown)\)", out)
    return m.group(1) if m and m.group(1) != "unknown" else None


class ServerProcess:
    """One cairn-server, redis-server or memcached child process: the launcher that tests/,
    bench/, studies/ and the client's benchmark share.

    kind: cairn | redis | memcached. port / memcache_port: "auto" picks a free port, an int is
    used as is, None passes no flag (cairn then uses its default); 0 turns cairn's memcached
    port off. `wrapper` goes before the command (valgrind, for example). The process runs in
    its own directory (`dir`, under `workdir`; removed by stop() unless keep_dir), logs to
    `log_path` (default dir/server.log), and dies with its parent (`preexec_fn`). Failures to
    start raise `start_error` with the log's tail.
    """

    start_error = RuntimeError

    def __init__(self, args=(), *, kind="cairn", binary=None, port="auto", memcache_port="auto",
                 name=None, workdir=None, log_path=None, env=None, memcached_mb=None, host=HOST,
                 keep_dir=True, wrapper=()):
        self.kind = kind
        self.wrapper = [str(w) for w in wrapper]
        self.args = [str(a) for a in args]
        self.binary = str(binary or CAIRN_BIN)
        if os.sep in self.binary:  # the process runs in its own directory: a relative path would miss
            self.binary = os.path.abspath(self.binary)
        self.name = name or kind
        self.env = env
        self.host = host
        self.memcached_mb = memcached_mb
        self.keep_dir = keep_dir
        self.proc = None
        self.cmd = None
        self.stopped = False
        self.preexec_fn = die_with_parent
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=workdir))
        self.log_path = Path(log_path) if log_path else self.dir / "server.log"
        self.port = None
        self.memcache_port = None
        self._auto_ports = (port == "auto", memcache_port == "auto")
        self.started_once = False
        if kind in ("cairn", "redis"):
            self.port = free_port() if port == "auto" else port
        if kind in ("cairn", "memcached"):
            self.memcache_port = free_port() if memcache_port == "auto" else memcache_port

    def _repick_ports(self) -> bool:
        """Picks new ports for those picked here ("auto"); False when there are none to pick."""
        resp_auto, memcache_auto = self._auto_ports
        repicked = False
        if resp_auto and self.port is not None:
            self.port, repicked = free_port(), True
        if memcache_auto and self.memcache_port is not None:
            self.memcache_port, repicked = free_port(), True
        return repicked

    @property
    def has_resp(self):
        return self.kind in ("cairn", "redis") and bool(self.port)

    @property
    def has_memcache(self):
        return self.kind in ("cairn", "memcached") and bool(self.memcache_port)

    def _arg(self, flag):
        if flag in self.args:
            i = self.args.index(flag)
            if i + 1 < len(self.args):
                return self.args[i + 1]
        return None

    def server_args(self):
        """The caller's arguments as the program takes them (a subclass may translate them)."""
        return self.args

    def command_line(self):
        if self.kind == "cairn":
            cmd = [self.binary]
            if "--bind" not in self.args:
                cmd += ["--bind", self.host]
            if self.port is not None and "--port" not in self.args:
                cmd += ["--port", str(self.port)]
            if self.memcache_port is not None and "--memcache-port" not in self.args:
                cmd += ["--memcache-port", str(self.memcache_port)]
            return cmd + self.server_args()
        if self.kind == "redis":
            return ["redis-server", "--port", str(self.port), "--bind", self.host, "--save", "",
                    "--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no"] + self.server_args()
        if self.kind == "memcached":
            cmd = ["memcached", "-U", "0", "-p", str(self.memcache_port), "-l", self.host]
            if self.memcached_mb is not None:
                cmd += ["-m", str(self.memcached_mb)]
            if os.geteuid() == 0:
                cmd += ["-u", "root"]
            return cmd + self.server_args()
        raise ValueError(f"unknown server kind {self.kind!r}")

    def start(self, wait=True, timeout=15.0, append_log=False):
        """Starts the process (again, after a stop or kill: same ports and directory); with
        append_log the log keeps the earlier runs' lines. A first start whose picked port was
        taken meanwhile by another process ("Address already in use") is tried again on new
        ports, twice at most."""
        for attempt in range(3):
            self._spawn(append_log)
            if not wait:
                break
            try:
                self.wait_ready(timeout)
                break
            except self.start_error:
                taken = self.proc.poll() is not None and "Address already in use" in self.log()
                if self.started_once or attempt == 2 or not taken or not self._repick_ports():
                    raise
        self.started_once = True
        return self

    def _spawn(self, append_log):
        self.cmd = self.wrapper + self.command_line()
        env = dict(os.environ, **self.env) if self.env else None
        with open(self.log_path, "ab" if append_log else "wb") as log:
            log.write(("$ " + " ".join(self.cmd) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=str(self.dir), preexec_fn=self.preexec_fn)
        self.stopped = False

    def log(self, tail=4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return "<no log>"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _endpoints(self):
        eps = []
        if self.has_resp:
            eps.append(("tcp", self.port))
        if self.has_memcache:
            eps.append(("tcp", self.memcache_port))
        for flag in ("--unixsocket", "--memcache-unixsocket"):
            if self._arg(flag):
                eps.append(("unix", self._arg(flag)))
        return eps

    def wait_ready(self, timeout=15.0):
        """Waits until every endpoint accepts connections; raises start_error (and kills the
        process) if it exits or does not listen within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        pending = self._endpoints()
        while pending:
            if self.proc.poll() is not None:
                raise self.start_error(f"{self.name} exited during startup with status {self.proc.returncode}; "
                                       f"command: {' '.join(self.cmd)}\nlog:\n{self.log()}")
            kind, where = pending[0]
            try:
                if kind == "tcp":
                    s = socket.create_connection((self.host, where), timeout=0.5)
                else:
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(0.5)
                    s.connect(where)
                s.close()
                pending.pop(0)
                continue
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise self.start_error(f"{self.name} did not accept connections on {kind} {where} within "
                                       f"{timeout}s; command: {' '.join(self.cmd)}\nlog:\n{self.log()}")
            time.sleep(0.02)

    def terminate(self, timeout=10.0):
        """Sends SIGTERM; returns (exit status, seconds taken); kills on timeout (status None)."""
        if self.proc is None or self.stopped:
            return (self.proc.returncode if self.proc else 0), 0.0
        self.stopped = True
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, time.monotonic() - t0
        return rc, time.monotonic() - t0

    def stop(self, timeout=10.0):
        """Terminates the process (see terminate) and, unless keep_dir, removes its directory;
        returns the exit status."""
        rc, _ = self.terminate(timeout)
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stopped = True

    # -- /proc sampling (Linux) --
    def cpu_seconds(self):
        """utime + stime of the whole process (all threads), in seconds."""
        text = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_bytes(self):
        return int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1]) * PAGE
