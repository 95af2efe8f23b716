#!/usr/bin/env python3
"""Server CPU per request of cairn's default thread count against `--threads 1`, `--threads 2`
and Redis, driven by redis-benchmark (issue 19, part 1).

    .venv/bin/python bench/threads.py [--rounds 5] [--requests 150000] [--out bench/results]
    .venv/bin/python bench/run.py --suites threads      # the same, as a suite of `make bench`

The servers run side by side; each round runs redis-benchmark -c 50 GET and SET, with and
without -P 16 (5× the requests), against every server in turn before the next workload, the order
of servers rotating from round to round, so drift in the machine's load hits them alike. Per server and workload it records ops/s (redis-benchmark's own figure),
the server's CPU per request (run time of all its threads, /proc/<pid>/task/*/schedstat), its
context switches per request (voluntary + involuntary, /proc/<pid>/task/*/status) and how busy
the rest of the machine was. The page gives medians and each figure's ratio to `--threads 1`;
writes bench/results/threads.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as B  # noqa: E402

SERVERS = [  # (name, kind, args): "cairn default" passes no --threads.
    ("cairn 1t", "cairn", ["--threads", "1"]),
    ("cairn 2t", "cairn", ["--threads", "2"]),
    ("cairn default", "cairn", []),
    ("redis", "redis", []),
]
# SET first, so that the GETs find the keys.
WORKLOADS = [("SET", "set", 1), ("GET", "get", 1), ("SET -P 16", "set", 16), ("GET -P 16", "get", 16)]
# Pipelined runs send this many times the requests, so that they last about as long.
PIPELINED_MORE = 5


def task_totals(pid):
    """(run time in ns, context switches) summed over the server's threads."""
    ns = switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns += int((task / "schedstat").read_text().split()[0])
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return ns, switches


def reported_threads(srv):
    """The thread count the server says it runs (CONFIG GET threads); '-' for Redis."""
    if srv.kind != "cairn":
        return "-"
    reply = B.resp_call(srv.resp_port, "CONFIG", "GET", "threads")
    return reply[1].decode() if isinstance(reply, list) else str(reply)


def bench_one(srv, test, pipeline, requests):
    """One redis-benchmark run; returns ops/s, server µs/op, switches/op, other cores busy."""
    ns0, sw0 = task_totals(srv.proc.pid)
    busy0, t0 = B.machine_busy_seconds(), time.monotonic()
    out = subprocess.run(["redis-benchmark", "-p", str(srv.resp_port), "-c", "50", "-n", str(requests),
                          "-P", str(pipeline), "-t", test, "-r", "100000", "-d", "32", "--csv"],
                         capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - t0
    ns1, sw1 = task_totals(srv.proc.pid)
    busy = B.machine_busy_seconds() - busy0
    rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    server_s = (ns1 - ns0) / 1e9
    return {"ops_s": rps, "cpu_us_per_op": (ns1 - ns0) / 1e3 / requests, "switches_per_op": (sw1 - sw0) / requests,
            # Cores kept busy by everything else (redis-benchmark included): the machine's share.
            "other_cores": max(busy - server_s, 0.0) / wall}


def measure(rounds, requests):
    """Every server side by side for `rounds` rounds; returns (samples, threads each reports)."""
    samples = {name: {w: [] for w, _, _ in WORKLOADS} for name, _, _ in SERVERS}
    chosen = {}
    servers = []
    try:
        for name, kind, args in SERVERS:
            servers.append(B.Server(name, kind, name, args=args).start())
            chosen[name] = reported_threads(servers[-1])
        for r in range(rounds):
            # Every server in turn on one workload before the next: the figures compared with one
            # another are measured within seconds, and the order rotates from round to round.
            for w, test, pipeline in WORKLOADS:
                order = servers[r % len(servers):] + servers[:r % len(servers)]
                for srv in order:
                    n = requests * (PIPELINED_MORE if pipeline > 1 else 1)
                    samples[srv.name][w].append(bench_one(srv, test, pipeline, n))
            B.log(f"threads: round {r + 1}/{rounds} done")
    finally:
        for srv in servers:
            srv.stop()
    return samples, chosen


def medians(samples):
    """{server: {workload: {metric: median}}}: what the page and summary.md quote."""
    return {name: {w: {k: statistics.median(s[k] for s in runs) for k in runs[0]} for w, runs in per.items() if runs}
            for name, per in samples.items()}


def write_page(out, samples, chosen, machine, rounds, requests, command, mode="full"):
    """threads.md (tables) and threads.json (every sample, the medians) in `out`."""
    med = medians(samples)
    rows = []
    for w, _, _ in WORKLOADS:
        base = med["cairn 1t"][w]
        for name, _, _ in SERVERS:
            m = med[name][w]
            rows.append([w, name, chosen[name], B.fmt_num(m["ops_s"]), B.fmt_num(m["cpu_us_per_op"], 2),
                         f"{m['cpu_us_per_op'] / base['cpu_us_per_op']:.2f}×", f"{m['ops_s'] / base['ops_s']:.2f}×",
                         f"{m['switches_per_op']:.3f}", f"{m['other_cores']:.2f}"])
    table = B.md_table(["workload", "server", "threads", "ops/s", "server CPU µs/op", "CPU/op vs 1t",
                        "ops/s vs 1t", "context switches/op", "other cores busy"], rows)
    page = (f"# Default thread count against --threads 1 (redis-benchmark)\n\n"
            f"`{command}` on {B.machine_line(machine)}.\n\n"
            f"redis-benchmark -c 50 -n {requests} -r 100000 -d 32, with and without -P 16 ({PIPELINED_MORE}× the "
            f"requests); each figure is the median of {rounds} rounds; within a round every server runs one "
            "workload before the next, in an order that rotates from round to round. "
            "'threads' is what the server reports (CONFIG GET threads). Server CPU = run time of all its threads "
            "(/proc/<pid>/task/*/schedstat); context switches = voluntary + involuntary over its threads; "
            "'other cores busy' = cores kept busy by everything else, redis-benchmark included (from /proc/stat).\n\n"
            f"{table}\n")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "threads.md").write_text(page)
    (out / "threads.json").write_text(json.dumps(
        {"suite": "threads", "mode": mode, "machine": machine, "repeats": rounds, "requests": requests,
         "threads": chosen, "results": med, "samples": samples}, indent=1))
    return page


def run(opts, runner, machine):
    """bench/run.py's `threads` suite: 5 rounds of 150,000 requests (quick: 1 round of 20,000)."""
    rounds, requests = (1, 20_000) if opts.quick else (max(opts.repeats, 5), 150_000)
    samples, chosen = measure(rounds, requests)
    write_page(opts.out, samples, chosen, machine, rounds, requests,
               "bench/run.py" + (" --quick" if opts.quick else "") + " --suites threads",
               "quick" if opts.quick else "full")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=150_000)
    ap.add_argument("--out", default=str(HERE / "results"))
    opts = ap.parse_args()
    samples, chosen = measure(opts.rounds, opts.requests)
    machine = B.machine_info()
    machine["cairn_binary"] = B.binary_info(B.CAIRN_BIN)
    machine["cairn_default_threads"] = chosen["cairn default"]
    print(write_page(opts.out, samples, chosen, machine, opts.rounds, opts.requests,
                     " ".join(["bench/threads.py", *sys.argv[1:]])))


if __name__ == "__main__":
    main()
