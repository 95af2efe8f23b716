#!/usr/bin/env python3
"""User-space instructions per SET of cairn binaries with and without a write-behind mapping,
counted by callgrind: deterministic whatever else the machine runs, where CPU time on a shared
machine is not (bench/writebehind_ab.py measures that, kernel included):

    .venv/bin/python bench/writebehind_callgrind.py BINARY [BINARY...] SETS

Each binary runs under `valgrind --tool=callgrind --instr-atstart=no`, unmapped and then with a
`value = "string"` mapping to a private durable PostgreSQL (`delay` 1 h, so that the flusher
does not run while counting); instrumentation is on only while it takes SETS pipelined SETs of
bench/writebehind.py's payloads. The kernel's work (the log's `write`, the socket) is not
counted. Two counts per run: all the server's threads, and the request path alone (what
`Session::process`, the I/O thread's handling of a connection's requests, runs, with the
batch's log write): the first also takes whatever background work (expiry rounds, the
flusher's turns) the run's length let in, which moves with the machine's load."""

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
    total = path = 0
    for f in glob.glob(out + "*"):
        total += next(int(line.split()[1]) for line in open(f) if line.startswith("totals:"))
        listing = subprocess.run(["callgrind_annotate", "--inclusive=yes", f], capture_output=True, text=True).stdout
        path += max((int(line.split()[0].replace(",", "")) for line in listing.splitlines()
                     if "cairn_server::session::Session::process [" in line), default=0)
    return total, path


def main():
    binaries, n = [str(Path(b).resolve()) for b in sys.argv[1:-1]], int(sys.argv[-1])
    reqs = W.payloads("SET", "s:", n)
    pg = W.Pg(durable=True).start()
    try:
        for i, binary in enumerate(binaries):
            (off, off_path), (on, on_path) = (
                [c / n for c in count(binary, mapped, pg, reqs, f"/tmp/wb-callgrind-{os.getpid()}-{i}-{int(mapped)}.out")]
                for mapped in (False, True))
            print(f"{binary}: {off:.0f} instructions per unmapped SET, {on:.0f} mapped: "
                  f"{on / off:.2f}x, +{on - off:.0f}; request path alone {off_path:.0f} and {on_path:.0f}: "
                  f"{on_path / off_path:.2f}x, +{on_path - off_path:.0f}", flush=True)
    finally:
        pg.close()


if __name__ == "__main__":
    main()
