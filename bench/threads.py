#!/usr/bin/env python3
"""Server CPU per request of cairn's default thread count against `--threads 1`, `--threads 2`
and Redis, driven by redis-benchmark, with a verdict on issue 19 part 1: "the default never costs
more CPU per op than --threads 1".

    .venv/bin/python bench/threads.py [--rounds 12] [--requests 120000] [--out bench/results]
    .venv/bin/python bench/run.py --suites threads      # the same, as a suite of `make bench`
    .venv/bin/python bench/threads.py --rewrite bench/results/threads.json   # the page from a run's samples

The servers run side by side: cairn --threads 1, a second cairn --threads 1 (the control pair:
two identical configurations, whose difference is the run's noise floor), --threads 2, the
default (no --threads) and Redis. Each round runs redis-benchmark -c 50 SET and GET, with and
without -P 16, against every server in turn before the next workload, the order rotating from
round to round. Every figure is compared with --threads 1 *within its round* (paired ratios), and
the page gives the median of those ratios with a distribution-free ~95% interval, not a ratio of
medians. Per run it records ops/s, the server's CPU per request (run time of all its threads,
/proc/<pid>/task/*/schedstat), context switches per request, and, where `perf stat` can count
them (a machine with a PMU), instructions per request, which are far less noisy than CPU time.
The verdict rule (`verdict`) is written on the page; summary.md applies the same function.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as B  # noqa: E402

BASE, CONTROL, DEFAULT = "cairn 1t", "cairn 1t again", "cairn default"
SERVERS = [  # (name, kind, args): "cairn default" passes no --threads.
    (BASE, "cairn", ["--threads", "1"]),
    (CONTROL, "cairn", ["--threads", "1"]),
    ("cairn 2t", "cairn", ["--threads", "2"]),
    (DEFAULT, "cairn", []),
    ("redis", "redis", []),
]
# SET first, so that the GETs find the keys.
WORKLOADS = [("SET", "set", 1), ("GET", "get", 1), ("SET -P 16", "set", 16), ("GET -P 16", "get", 16)]
# Pipelined runs send this many times the requests, so that they last about as long.
PIPELINED_MORE = 5
# Full mode: rounds and requests per unpipelined run (~4-5 minutes on 2 cores); quick mode: a smoke test.
FULL, QUICK = (12, 120_000), (3, 10_000)
PERF_EVENTS = "instructions,context-switches"


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


def parse_perf(text):
    """{event: count} from `perf stat -x,` output; events perf could not count are left out."""
    counts = {}
    for line in text.splitlines():
        f = line.split(",")
        if len(f) >= 3 and f[0].replace(".", "", 1).isdigit():
            counts[f[2].split(":")[0]] = float(f[0])
    return counts


def perf_counts_instructions():
    """Whether `perf stat` counts instructions here (a VM without a PMU answers <not supported>)."""
    try:
        out = subprocess.run(["perf", "stat", "-x,", "-e", PERF_EVENTS, "--", "true"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "instructions" in parse_perf(out.stderr)


class PerfStat:
    """`perf stat -p PID` around one run: counts `events` over all the server's threads."""

    def __init__(self, pid, events=PERF_EVENTS):
        self.proc = subprocess.Popen(["perf", "stat", "-x,", "-e", events, "-p", str(pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.2)  # perf attaches to every thread before the load starts

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            return parse_perf(self.proc.communicate(timeout=20)[1])
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return {}


def bench_one(srv, test, pipeline, requests, perf=False, clients_threads=1):
    """One redis-benchmark run: ops/s, server µs/op and switches/op, instructions/op where perf counts
    them, and the cores kept busy by other processes (neither this server nor redis-benchmark)."""
    counter = PerfStat(srv.proc.pid) if perf else None
    ns0, sw0 = task_totals(srv.proc.pid)
    busy0, t0 = B.machine_busy_seconds(), time.monotonic()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = ["redis-benchmark", "-p", str(srv.resp_port), "-c", "50", "-n", str(requests), "-P", str(pipeline),
           "-t", test, "-r", "100000", "-d", "32", "--csv"]
    if clients_threads > 1:
        cmd += ["--threads", str(clients_threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - t0
    ns1, sw1 = task_totals(srv.proc.pid)
    busy = B.machine_busy_seconds() - busy0
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_s = (kids1.ru_utime - kids0.ru_utime) + (kids1.ru_stime - kids0.ru_stime)
    rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    server_s = (ns1 - ns0) / 1e9
    sample = {"ops_s": rps, "cpu_us_per_op": (ns1 - ns0) / 1e3 / requests, "switches_per_op": (sw1 - sw0) / requests,
              # Cores kept busy by everything else: the shared machine's own load during the run.
              "other_cores": max(busy - server_s - client_s, 0.0) / wall,
              "client_cores": client_s / wall}
    if counter is not None:
        counts = counter.stop()
        if "instructions" in counts:
            sample["instructions_per_op"] = counts["instructions"] / requests
    return sample


def measure(rounds, requests, perf=None):
    """Every server side by side for `rounds` rounds; returns (samples, threads each reports, perf used,
    redis-benchmark threads)."""
    perf = perf_counts_instructions() if perf is None else perf
    cores = len(os.sched_getaffinity(0))
    lt = B.load_threads(cores)
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
                    samples[srv.name][w].append(bench_one(srv, test, pipeline, n, perf, lt))
            B.log(f"threads: round {r + 1}/{rounds} done")
    finally:
        for srv in servers:
            srv.stop()
    return samples, chosen, perf, lt


def medians(samples):
    """{server: {workload: {metric: median}}}: each metric's median over the rounds."""
    return {name: {w: {k: statistics.median(s[k] for s in runs) for k in runs[0]} for w, runs in per.items() if runs}
            for name, per in samples.items()}


def paired(samples, name, w, metric="cpu_us_per_op"):
    """The per-round ratios of `name` to --threads 1 on workload `w` (rounds where both ran)."""
    a, b = samples.get(name, {}).get(w, []), samples.get(BASE, {}).get(w, [])
    return [x[metric] / y[metric] for x, y in zip(a, b) if metric in x and metric in y and y[metric]]


def median_interval(xs):
    """(median, lo, hi, coverage): the median of `xs` with a distribution-free interval from order
    statistics (the narrowest with coverage ≥ 95%; with fewer than 6 values, min..max and its coverage)."""
    xs = sorted(xs)
    n = len(xs)
    med = statistics.median(xs)

    def cover(k):  # P(x_(k) ≤ true median ≤ x_(n-k+1)), 1-based k
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n

    k = 1
    while k + 1 <= (n + 1) // 2 and cover(k + 1) >= 0.95:
        k += 1
    return med, xs[k - 1], xs[n - k], cover(k)


def verdict(samples, chosen, metric="cpu_us_per_op"):
    """Issue 19 part 1, per workload and overall. The control ratio (second --threads 1 / --threads 1)
    is what identical configurations show in this run: its noise floor is how far from 1.00 the ends
    of its median's ~95% interval reach. A workload is met when the default's median ratio is at most
    1.00 + that floor, or when the default runs the same thread count as --threads 1 and the intervals
    of its ratio and of the control ratio overlap (no difference the run can tell from noise).
    Returns {"met": bool|None, "workloads": {w: {...}}} (None: the samples lack the control pair)."""
    out = {}
    same = str(chosen.get(DEFAULT)) == str(chosen.get(BASE))
    for w, _, _ in WORKLOADS:
        d, c = paired(samples, DEFAULT, w, metric), paired(samples, CONTROL, w, metric)
        if not d or not c:
            continue
        dm, dlo, dhi, dcov = median_interval(d)
        cm, clo, chi, ccov = median_interval(c)
        floor = max(abs(clo - 1), abs(chi - 1))
        within = dm <= 1 + floor
        overlap = same and dlo <= chi and clo <= dhi
        why = ("within the noise floor" if within else
               "same configuration, within noise" if overlap else "above the noise floor")
        out[w] = {"default": [dm, dlo, dhi], "control": [cm, clo, chi], "coverage": min(dcov, ccov),
                  "floor": floor, "rounds": len(d), "met": within or overlap, "why": why}
    return {"met": all(v["met"] for v in out.values()) if out else None, "same_configuration": same,
            "metric": metric, "workloads": out}


RULE = ("**Rule.** Every figure is paired with --threads 1 of the same round and workload; the page gives "
        "the median of those per-round ratios and a distribution-free ~95% interval (order statistics; "
        "coverage in the table). The control pair (a second `--threads 1` against the first) measures "
        "the noise floor of this run: how far from 1.00 the ends of the control median's interval reach. "
        "A workload is **met** when the default's median ratio is ≤ 1.00 + the noise floor, or when the "
        "default runs the same number of event loops as `--threads 1` and the intervals of its ratio "
        "and of the control ratio overlap (no difference the run can tell from noise). The goal is met "
        "when every workload is.")


def interval(v):
    return f"{v[0]:.3f} [{v[1]:.3f}–{v[2]:.3f}]"


def verdict_table(v, chosen, label):
    rows = [[w, f"{chosen[DEFAULT]} / {chosen[BASE]}", interval(x["default"]), interval(x["control"]),
             f"±{x['floor']:.3f}", f"{x['coverage'] * 100:.0f}%", x["rounds"],
             ("**met**: " if x["met"] else "not met: ") + x["why"]] for w, x in v["workloads"].items()]
    return B.md_table(["workload", "loops default / 1t", f"default / 1t, {label}", f"control 1t / 1t, {label}",
                       "noise floor", "interval coverage", "rounds", "verdict"], rows)


def write_page(out, samples, chosen, machine, rounds, requests, command, mode="full", perf=False, load_threads_=1):
    """threads.md (verdict, tables) and threads.json (every sample, medians, verdicts) in `out`."""
    med = medians(samples)
    cpu = verdict(samples, chosen)
    ins = verdict(samples, chosen, "instructions_per_op") if perf else None
    rows = []
    for w, _, _ in WORKLOADS:
        for name, _, _ in SERVERS:
            m = med[name][w]
            cr, orr = paired(samples, name, w), paired(samples, name, w, "ops_s")
            rows.append([w, name, chosen[name], B.fmt_num(m["ops_s"]), B.fmt_num(m["cpu_us_per_op"], 2),
                         f"{statistics.median(cr):.2f}×", f"{min(cr):.2f}–{max(cr):.2f}",
                         f"{statistics.median(orr):.2f}×", f"{m['switches_per_op']:.3f}"]
                        + ([B.fmt_num(m.get("instructions_per_op"))] if perf else []))
    table = B.md_table(["workload", "server", "threads", "ops/s", "server CPU µs/op", "CPU/op vs 1t",
                        "CPU/op vs 1t, rounds' range", "ops/s vs 1t", "context switches/op"]
                       + (["instructions/op"] if perf else []), rows)
    load = [s["other_cores"] for per in samples.values() for runs in per.values() for s in runs]
    client = [s["client_cores"] for per in samples.values() for runs in per.values() for s in runs]
    met = {True: "**met**", False: "**not met**", None: "undecided (no control pair)"}[cpu["met"]]
    cores = machine.get("cores_available", machine["nproc"])
    page = [f"# Default thread count against --threads 1 (redis-benchmark)", "",
            f"`{command}` on {B.machine_line(machine)}.", "",
            f"Issue 19 part 1, \"the default never costs more CPU per op than `--threads 1`\": {met} in this run "
            f"(server CPU time per op; the default ran {chosen[DEFAULT]} event loop(s), "
            + ("the same configuration as `--threads 1`" if cpu["same_configuration"]
               else "not the configuration of `--threads 1`")
            + f", on {cores} available cores).", "",
            verdict_table(cpu, chosen, "CPU µs/op"), ""]
    if ins is not None:
        page += ["Instructions per op (`perf stat -e instructions -p <server>`; far less noisy than CPU time, "
                 "but blind to cache misses and to the cost of a context switch): "
                 + {True: "**met**", False: "**not met**", None: "undecided"}[ins["met"]] + ".", "",
                 verdict_table(ins, chosen, "instructions/op"), ""]
    else:
        page += ["Instructions per op: not counted (`perf stat -e instructions` answers <not supported> on this "
                 "machine: a VM without a PMU). Where perf counts them the suite adds them per run and a second "
                 "verdict table.", ""]
    page += [RULE, "",
             "## All servers", "",
             f"redis-benchmark -c 50 -n {requests} -r 100000 -d 32, with and without -P 16 ({PIPELINED_MORE}× the "
             f"requests), {load_threads_} redis-benchmark thread(s); {rounds} rounds; within a round every server "
             "runs one workload before the next, in an order that rotates from round to round. Absolute figures are "
             "medians over the rounds; 'vs 1t' figures are medians of the per-round ratios to `cairn 1t`, with their "
             "range. 'threads' is what the server reports (CONFIG GET threads); 'cairn 1t again' is the control. "
             "Server CPU = run time of all its threads (/proc/<pid>/task/*/schedstat); context switches = "
             "voluntary + involuntary over its threads.", "",
             f"The machine's other load (cores kept busy by neither the server nor redis-benchmark, /proc/stat and "
             f"getrusage): median {statistics.median(load):.2f}, max {max(load):.2f}"
             + (" (the machine was shared with other work during this run)" if statistics.median(load) > 0.25 else "")
             + f"; redis-benchmark itself: median {statistics.median(client):.2f} cores.", "",
             table, "",
             "## More cores", "",
             f"This run had {cores} available core(s). Without `--threads`, cairn runs one event loop per two "
             "available cores (cgroup quota and affinity included), so on 2–3 cores the default *is* `--threads 1` "
             "and this page can only show that the two are indistinguishable. On a larger machine the default "
             "runs several loops and the rule's first branch (median ratio ≤ 1.00 + noise floor) is the one that "
             "decides; from 8 cores on, redis-benchmark runs with a quarter of the cores as threads. What needs a larger "
             "machine: this suite there, and scaling with 1, 2, 4, 8 and 16 threads "
             "(`.venv/bin/python bench/run.py --suites scaling,threads`; both pages record the machine, its "
             "available cores and the default's loop count).", ""]
    text = "\n".join(page)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "threads.md").write_text(text)
    (out / "threads.json").write_text(json.dumps(
        {"suite": "threads", "mode": mode, "command": command, "machine": machine, "repeats": rounds,
         "requests": requests,
         "threads": chosen, "perf_instructions": perf, "load_threads": load_threads_, "results": med,
         "verdict": cpu, "verdict_instructions": ins, "samples": samples}, indent=1))
    return text


def run(opts, runner, machine):
    """bench/run.py's `threads` suite: 12 rounds of 120,000 requests (quick: 3 rounds of 10,000)."""
    rounds, requests = QUICK if opts.quick else (max(opts.repeats, FULL[0]), FULL[1])
    samples, chosen, perf, lt = measure(rounds, requests)
    machine = {**machine, "cores_available": len(os.sched_getaffinity(0))}
    write_page(opts.out, samples, chosen, machine, rounds, requests,
               "bench/run.py" + (" --quick" if opts.quick else "") + " --suites threads",
               "quick" if opts.quick else "full", perf, lt)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=FULL[0])
    ap.add_argument("--requests", type=int, default=FULL[1])
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--no-perf", action="store_true", help="do not count instructions with perf stat")
    ap.add_argument("--rewrite", metavar="JSON", help="only rewrite the page from a run's threads.json (its samples)")
    opts = ap.parse_args()
    if opts.rewrite:
        d = json.loads(Path(opts.rewrite).read_text())
        print(write_page(Path(opts.rewrite).parent, d["samples"], d["threads"], d["machine"], d["repeats"],
                         d["requests"], d.get("command", "bench/run.py --suites threads"), d.get("mode", "full"),
                         d.get("perf_instructions", False), d.get("load_threads", 1)))
        return
    samples, chosen, perf, lt = measure(opts.rounds, opts.requests, False if opts.no_perf else None)
    machine = B.machine_info()
    machine["cairn_binary"] = B.binary_info(B.CAIRN_BIN)
    machine["cairn_default_threads"] = int(chosen[DEFAULT])
    machine["cores_available"] = len(os.sched_getaffinity(0))
    print(write_page(opts.out, samples, chosen, machine, opts.rounds, opts.requests,
                     " ".join(["bench/threads.py", *sys.argv[1:]]), perf=perf, load_threads_=lt))


if __name__ == "__main__":
    main()
