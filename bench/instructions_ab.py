#!/usr/bin/env python3
"""User-space instructions per request of two cairn binaries, counted by callgrind.

    .venv/bin/python bench/instructions_ab.py OLD_BINARY NEW_BINARY --labels OLD_COMMIT NEW_COMMIT

Writes bench/results/instructions_ab.{md,json}, naming both binaries' commits and the checkout's.

CPU time per request (`cpu_ab.py`) is the figure users feel, but on a small shared VM its
samples spread by 20% and more, so a difference of a few percent needs many rounds. Instruction
counts do not depend on the rest of the machine: the same binary and load give the same count to
a fraction of a percent. Each binary runs under `valgrind --tool=callgrind` with one I/O thread;
keys are loaded, the counters zeroed, then cairn-bench sends the requests (90% GET, 10% SET,
4 connections, pipeline 16) over RESP and then memcached, and the count is dumped. The count
covers every thread of the server (parsing, the command path, the store), not the kernel's work.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as B  # noqa: E402  (machine description for the result page)

BENCH = HERE.parent / "target" / "release" / "cairn-bench"


from kit import ServerProcess  # noqa: E402  (the launcher, tests/kit.py)


def total_instructions(path):
    for line in open(path):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def count(binary, proto, requests, work):
    """Instructions per request of `binary` serving `requests` requests over `proto`."""
    out = os.path.join(work, f"cg.{proto}.{os.path.basename(binary)}")
    srv = ServerProcess(["--threads", "1"], binary=binary, name="callgrind", keep_dir=False,
                        wrapper=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    server = srv.start(timeout=60).proc
    port = srv.port if proto == "resp" else srv.memcache_port
    try:
        load = [str(BENCH), "-p", str(port), "--protocol", proto, "-c", "4", "-P", "16", "-k", "10000"]
        subprocess.run(load + ["-n", "40000", "--read-ratio", "0"], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "-z", str(server.pid)], capture_output=True, check=True)
        subprocess.run(load + ["-n", str(requests), "--read-ratio", "0.9"], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "-d", str(server.pid)], capture_output=True, check=True)
        time.sleep(0.5)
    finally:
        srv.stop(timeout=None)
    dumps = sorted(glob.glob(out + ".*"))
    return total_instructions(dumps[0]) / requests


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--labels", nargs=2, default=["old", "new"], help="the binaries' commits")
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--out", default=str(HERE / "results"))
    opts = ap.parse_args()
    old_label, new_label = opts.labels
    rows, counts = [], {}
    with tempfile.TemporaryDirectory() as work:
        for proto in ("resp", "memcache"):
            old, new = (count(b, proto, opts.requests, work) for b in (opts.old, opts.new))
            counts[proto] = {old_label: old, new_label: new}
            rows.append([proto, f"{old:.0f}", f"{new:.0f}", f"{new / old:.3f}"])
    machine = B.machine_info()
    table = B.md_table(["protocol", f"{old_label} instructions / request", f"{new_label}", "new / old"], rows)
    page = (f"# Instructions per request: {old_label} vs {new_label}\n\n"
            f"`bench/instructions_ab.py {' '.join(sys.argv[1:])}` on {B.machine_line(machine)}.\n"
            f"callgrind, one I/O thread, {opts.requests} requests (90% GET, 10% SET, 4 connections, "
            f"pipeline 16) over each protocol after 40,000 SETs; user-space instructions of every "
            f"server thread, the kernel's work not included.\n\n{table}\n")
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "instructions_ab.md").write_text(page)
    (out / "instructions_ab.json").write_text(json.dumps({"labels": opts.labels, "counts": counts,
                                                          "machine": machine}, indent=1))
    print(page)


if __name__ == "__main__":
    sys.exit(main())
