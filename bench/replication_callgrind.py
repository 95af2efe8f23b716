#!/usr/bin/env python3
"""User-space instructions per SET of a cairn primary with 0 or more replicas, counted by
callgrind: deterministic whatever else the machine runs, where CPU time on a shared machine is
not (bench/replication.py measures that, kernel included):

    .venv/bin/python bench/replication_callgrind.py BINARY [BINARY...] [--replicas 0,2] [--sets 20000]

The primary runs under `valgrind --tool=callgrind --instr-atstart=no`, its replicas natively;
instrumentation is on only while it takes the pipelined SETs (100 per batch, 32-byte values,
as bench/replication.py's CPU figure) after a warm-up. All the primary's threads are counted;
the kernel's work (the sends, the loopback receive) is not."""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import replication as R  # noqa: E402
from kit import ServerProcess  # noqa: E402


def count(binary, replicas, sets, out):
    for f in glob.glob(out + "*"):
        os.remove(f)
    primary = ServerProcess(["--memcache-port", "0", "--repl-backlog-size", "64mb"], binary=binary,
                            memcache_port=None, name="repl-callgrind", keep_dir=False,
                            wrapper=["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                     f"--callgrind-out-file={out}"])
    primary.args += ["--dir", str(primary.dir)]
    primary.start(timeout=60)
    attached = []
    try:
        for _ in range(replicas):
            r = R.Server("cairn", binary)
            attached.append(r)
            r.conn.call("REPLICAOF", R.HOST, primary.port)
        for r in attached:
            R.wait(r.link_up, 60, "a replica's link")
        c = R.Conn(primary.port)
        batches = [b"".join(R.command("SET", f"cpu:{(b * 100 + j) % 100000}", "x" * 32) for j in range(100))
                   for b in range(10)]
        for b in range(20):  # warm-up, not counted
            c.pipeline(batches[b % 10], 100)
        subprocess.run(["callgrind_control", "-i", "on", str(primary.proc.pid)], capture_output=True, check=True)
        for b in range(sets // 100):
            c.pipeline(batches[b % 10], 100)
        subprocess.run(["callgrind_control", "-i", "off", str(primary.proc.pid)], capture_output=True, check=True)
        c.close()
    finally:
        primary.stop()
        for r in attached:
            r.stop()
    return sum(next(int(line.split()[1]) for line in open(f) if line.startswith("totals:"))
               for f in glob.glob(out + "*")) / (sets // 100 * 100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--replicas", default="0,2")
    ap.add_argument("--sets", type=int, default=20000)
    opts = ap.parse_args()
    out = tempfile.mkdtemp(prefix="repl-callgrind-")
    for i, binary in enumerate(opts.binaries):
        binary = str(Path(binary).resolve())
        counts = {n: count(binary, n, opts.sets, f"{out}/{i}-{n}.out") for n in map(int, opts.replicas.split(","))}
        base = counts.get(0)
        line = ", ".join(f"{n} replicas {c:.0f}" + (f" (+{c - base:.0f})" if base and n else "")
                         for n, c in counts.items())
        print(f"{binary}: user-space instructions per SET: {line}", flush=True)


if __name__ == "__main__":
    main()
