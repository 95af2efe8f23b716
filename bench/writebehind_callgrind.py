#!/usr/bin/env python3
"""User-space instructions per SET of cairn binaries with and without a write-behind mapping,
counted by callgrind: deterministic whatever else the machine runs, where CPU time on a shared
machine is not (bench/writebehind_ab.py measures that, kernel included):

    .venv/bin/python bench/writebehind_callgrind.py BINARY [BINARY...] SETS

Each binary runs under `valgrind --tool=callgrind --instr-atstart=no`, unmapped and then with a
`value = "string"` mapping to a private durable PostgreSQL (`delay` 1 h, so that the flusher
does not run while counting); instrumentation is on only while it takes SETS pipelined SETs of
bench/writebehind.py's payloads. The kernel's work (the log's `write`, the socket) is not
counted."""

import glob
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import writebehind as W  # noqa: E402


def count(binary, mapped, pg, reqs, out):
    for f in glob.glob(out + "*"):
        os.remove(f)
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
            binary, "--wb-fsync", "everysec"]
    srv = W.Srv("cairn", argv)
    try:
        if mapped:
            pg.sql("DROP TABLE IF EXISTS t; CREATE TABLE t (id text PRIMARY KEY, body text)")
            srv.add_mapping("s", pg, "t", "string", delay="1h")
        W.pipelined(srv.port, W.payloads("SET", "w:", 2000))  # warm-up, not counted
        subprocess.run(["callgrind_control", "-i", "on", str(srv.proc.pid)], capture_output=True, check=True)
        W.pipelined(srv.port, reqs)
        subprocess.run(["callgrind_control", "-i", "off", str(srv.proc.pid)], capture_output=True, check=True)
    finally:
        srv.stop()
    total = 0
    for f in glob.glob(out + "*"):
        total += next(int(line.split()[1]) for line in open(f) if line.startswith("totals:"))
    return total


def main():
    binaries, n = [str(Path(b).resolve()) for b in sys.argv[1:-1]], int(sys.argv[-1])
    reqs = W.payloads("SET", "s:", n)
    pg = W.Pg(durable=True).start()
    try:
        for i, binary in enumerate(binaries):
            off, on = (count(binary, mapped, pg, reqs, f"/tmp/wb-callgrind-{os.getpid()}-{i}-{int(mapped)}.out") / n
                       for mapped in (False, True))
            print(f"{binary}: {off:.0f} instructions per unmapped SET, {on:.0f} mapped: "
                  f"{on / off:.2f}x, +{on - off:.0f}", flush=True)
    finally:
        pg.close()


if __name__ == "__main__":
    main()
