"""The one Python test kit: free ports, child processes that die with their parent, RESP
requests and replies on raw sockets, memcached `stats`, polling. Used by tests/ (conftest
re-exports it), bench/, studies/ and clients/python/bench_near_cache.py, so that each of them
does not carry its own RESP encoder and port picker (issue 20).

It depends on nothing outside the standard library: the bench scripts and the study import it
by path (`sys.path.insert(0, ROOT / "tests")`).
"""

from __future__ import annotations

import io
import signal
import socket
import time

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A currently free TCP port on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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
