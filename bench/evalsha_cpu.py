#!/usr/bin/env python3
"""Server CPU per EVALSHA of a small script, cairn against redis-server (issue 17).

    .venv/bin/python bench/evalsha_cpu.py [--cairn target/release/cairn-server] [--requests 200000]

Each server runs alone on a free port; a raw pipelined client sends `--requests` EVALSHA of
the lock-release script frameworks use (GET, compare, DEL: one read, sometimes a write) in
batches of `--pipeline`, and the figure is the server's own CPU time (its threads' run time from
/proc/<pid>/task/*/schedstat) per request, which depends little on the client's speed. Rounds
alternate between the servers; the medians and the ratio cairn / redis are printed and written to
bench/results/evalsha_cpu.md, which names the commit and the machine.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import statistics
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as B  # noqa: E402
from cpu_ab import cpu_ns  # noqa: E402
from kit import ServerProcess, encode_command as command  # noqa: E402  (launcher, RESP request bytes)

SCRIPT = ('if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) '
          'else return 0 end')






def start(kind, binary):
    """The server (the kit's launcher, tests/kit.py, one I/O thread) and a connection to it."""
    args = ["--threads", "1"] if kind == "cairn" else []
    srv = ServerProcess(args, kind=kind, binary=binary, name=f"evalsha-{kind}", keep_dir=False).start(timeout=4)
    return srv, socket.create_connection(("127.0.0.1", srv.port))


def read_replies(sock, n):
    """Reads n one-line replies (integers, status, errors)."""
    buf = b""
    got = 0
    while got < n:
        data = sock.recv(1 << 20)
        if not data:
            raise RuntimeError("closed")
        buf += data
        got += buf.count(b"\r\n")
        buf = b""
    return got


def measure(kind, binary, requests, pipeline):
    srv, sock = start(kind, binary)
    try:
        sock.sendall(command("SCRIPT", "LOAD", SCRIPT))
        reply = b""
        while not reply.endswith(b"\r\n") or reply.count(b"\r\n") < 2:
            reply += sock.recv(4096)
        sha = reply.split(b"\r\n")[1]
        # Half the calls find the owner (GET + DEL), half a stranger (GET only).
        batch = b"".join(
            command("SET", f"lock:{i}", "me") + command("EVALSHA", sha, 1, f"lock:{i}", "me" if i % 2 else "x")
            for i in range(pipeline)
        )
        per_batch = 2 * pipeline
        c0 = cpu_ns(srv.proc.pid)
        sent = 0
        while sent < requests:
            sock.sendall(batch)
            read_replies(sock, per_batch)
            sent += pipeline
        used = cpu_ns(srv.proc.pid) - c0
        return used / 1e3 / sent  # µs per EVALSHA (+ its SET)
    finally:
        sock.close()
        srv.stop(5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default="target/release/cairn-server")
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--pipeline", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    opts = ap.parse_args()
    got = {"cairn": [], "redis": []}
    for r in range(opts.rounds):
        order = ("cairn", "redis") if r % 2 == 0 else ("redis", "cairn")
        for kind in order:
            got[kind].append(measure(kind, opts.cairn, opts.requests, opts.pipeline))
    med = {k: statistics.median(v) for k, v in got.items()}
    for k, v in got.items():
        print(f"{k:6} server CPU per SET+EVALSHA: median {med[k]:.2f} µs  (rounds: {', '.join(f'{x:.2f}' for x in v)})")
    print(f"ratio cairn / redis: {med['cairn'] / med['redis']:.2f}")
    machine = B.machine_info()
    machine["cairn_binary"] = B.binary_info(opts.cairn)
    rows = [[k, f"{med[k]:.2f}", ", ".join(f"{x:.2f}" for x in got[k])] for k in ("cairn", "redis")]
    page = (f"# Server CPU per EVALSHA (issue 17)\n\n"
            f"`bench/evalsha_cpu.py --requests {opts.requests} --pipeline {opts.pipeline} --rounds "
            f"{opts.rounds}` on {B.machine_line(machine)}.\n\n"
            f"Each request is a SET plus an EVALSHA of the lock-release script frameworks use "
            f"(`{SCRIPT}`), pipelined by {opts.pipeline}, one I/O thread each; the figure is the "
            f"server's own CPU time per request (µs), median of the rounds. Rounds alternate "
            f"between the servers; the machine may be shared with other work (load average "
            f"{os.getloadavg()[0]:.1f} at the end), which the spread of the rounds shows.\n\n"
            + B.md_table(["server", "µs CPU per SET + EVALSHA", "rounds"], rows)
            + f"\n\nRatio cairn / redis: **{med['cairn'] / med['redis']:.2f}**.\n")
    out = Path(__file__).resolve().parent / "results"
    (out / "evalsha_cpu.md").write_text(page)


if __name__ == "__main__":
    main()
