#!/usr/bin/env python3
"""Server CPU per GET and per SET of two cairn binaries, measured in turns (A/B).

    .venv/bin/python bench/cpu_ab.py OLD_BINARY NEW_BINARY [--rounds 7] [--requests 400000]

Answers "did this change make GET/SET cost more CPU?" on a noisy machine: the two binaries run
one after the other, round after round (A, B, B, A, A, B ...), each on a fresh server loaded
with the same keys, and the load generator sends a fixed number of requests. The figure is the
server's own CPU time (its threads' run time, /proc/<pid>/task/*/schedstat) per request, which depends far less on what
else the machine runs than throughput does. Reports the median per binary and protocol, the
spread, and the ratio NEW / OLD; writes bench/results/cpu_ab.{json,md} (naming both commits
when given with --labels).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as B  # noqa: E402

CASES = [  # (name, protocol, read ratio)
    ("GET resp", "resp", 1.0),
    ("SET resp", "resp", 0.0),
    ("get memcached", "memcache", 1.0),
    ("set memcached", "memcache", 0.0),
]


def cpu_ns(pid):
    """Nanoseconds the server's threads have run (schedstat: exact, where /proc/stat ticks are 10 ms).
    The server's threads live as long as it does, so none of their time is lost with an exited thread."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def measure(runner, binary, opts):
    """One server of `binary`: every case once. Returns {case: server CPU µs per request}."""
    B.CAIRN_BIN = Path(binary)
    srv = B.Server("cairn", "cairn", "cairn", args=["--threads", str(opts.threads)]).start()
    try:
        runner.load(srv, opts.keys, opts.value_size)
        out = {}
        for name, proto, reads in CASES:
            c0 = cpu_ns(srv.proc.pid)
            s = runner.bench(srv, proto, ["-n", opts.requests, "-c", opts.connections, "-P", opts.pipeline,
                                          "--keys", opts.keys, "--value-size", opts.value_size,
                                          "--read-ratio", reads])
            out[name] = (cpu_ns(srv.proc.pid) - c0) / 1e3 / max(s["ops"], 1)
        return out
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--labels", nargs=2, default=["old", "new"], help="names for the two binaries (e.g. commits)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=10)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--value-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2, help="server I/O threads")
    ap.add_argument("--out", default=str(HERE / "results"))
    opts = ap.parse_args()
    samples = {label: {name: [] for name, _, _ in CASES} for label in opts.labels}
    with tempfile.TemporaryDirectory() as work:
        runner = B.Runner(opts, work)
        for r in range(opts.rounds):
            # ABBA order: a drift in machine load during a round hits both binaries alike.
            order = [(opts.labels[0], opts.old), (opts.labels[1], opts.new)]
            for label, binary in (order if r % 2 == 0 else order[::-1]):
                for name, v in measure(runner, binary, opts).items():
                    samples[label][name].append(v)
            B.log(f"round {r + 1}/{opts.rounds} done")
    rows = []
    for name, _, _ in CASES:
        a, b = (statistics.median(samples[label][name]) for label in opts.labels)
        spread = [(max(samples[lb][name]) - min(samples[lb][name])) / statistics.median(samples[lb][name])
                  for lb in opts.labels]
        rows.append([name, f"{a:.2f}", f"{b:.2f}", f"{b / a:.3f}", f"{spread[0]:.0%} / {spread[1]:.0%}"])
    machine = B.machine_info()
    table = B.md_table(["request", f"{opts.labels[0]} µs/op", f"{opts.labels[1]} µs/op", "new / old",
                        "spread old / new"], rows)
    page = (f"# Server CPU per request: {opts.labels[0]} vs {opts.labels[1]}\n\n"
            f"`bench/cpu_ab.py {' '.join(sys.argv[1:])}` on {B.machine_line(machine)}.\n"
            f"Median of {opts.rounds} rounds (ABBA order); each round a fresh server with {opts.keys} keys of "
            f"{opts.value_size} B, {opts.requests} requests, {opts.connections} connections, pipeline "
            f"{opts.pipeline}, {opts.threads} server threads. Server CPU = run time of its threads from /proc/<pid>/task/*/schedstat.\n\n"
            f"{table}\n")
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu_ab.md").write_text(page)
    (out / "cpu_ab.json").write_text(json.dumps({"labels": opts.labels, "samples": samples,
                                                 "machine": machine}, indent=1))
    print(page)


if __name__ == "__main__":
    main()
