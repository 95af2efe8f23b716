"""The scaling suite: throughput and CPU per op against server threads (1, 2, 4, 8, 16, up to twice
the cores available to the run), with cairn's default thread count beside them (mdcached workload,
40 clients). Run by `bench/run.py --suites scaling`; writes scaling.md, scaling.json and plots
(bench/README.md).
"""

from __future__ import annotations

import os

from harness import dur, fmt_num, fmt_ratio, load_threads, md_table, med, resp_call, round_robin, spread, Suite
from plots import lines, triple

COUNTS = (1, 2, 4, 8, 16)


def thread_counts(cores):
    """The counts worth running on `cores` cores: more than twice the cores only measures the
    scheduler."""
    return [t for t in COUNTS if t <= max(1, cores) * 2]


def run(opts, runner, machine):
    """Suite 7: thread scaling (mdcached workload, 40 clients), cairn's default included."""
    s = Suite("scaling", opts, runner, machine)
    d = dur(opts, 0.3, 3.0)
    cores = len(os.sched_getaffinity(0))
    threads = thread_counts(cores)
    clients = load_threads(cores)  # cairn-bench threads: 1 on 2 cores, a quarter of the cores on larger machines
    specs = [("cairn-rdefault", "cairn", "cairn reactor", [])]
    for t in threads:
        specs.append((f"cairn-r{t}", "cairn", "cairn reactor", ["--threads", str(t)]))
        specs.append((f"cairn-d{t}", "cairn", "cairn dispatch", ["--io-model", "dispatch", "--workers", str(t)]))
        specs.append((f"memcached-{t}", "memcached", "memcached", ["-t", str(t)]))
    specs.append(("redis", "redis", "redis", []))
    try:
        servers = s.start(specs)
        default_srv = servers[0]
        chosen = int(resp_call(default_srv.resp_port, "CONFIG", "GET", "threads")[1])
        s.data["machine_cores_available"] = cores
        s.data["default_threads"] = chosen
        s.data["load_threads"] = clients
        for srv in servers:
            runner.load(srv, 30000, "1024+-500")
        fam = {"cairn reactor": "resp", "cairn dispatch": "resp", "memcached": "memcache", "redis": "resp"}
        pairs = [(srv, fam[srv.label], srv.name) for srv in servers]
        pairs += [(srv, "memcache", srv.name + "/mc") for srv in servers if srv.name.startswith("cairn-r")]
        res = round_robin(runner, pairs, lambda k: ["-c", 40, "-t", clients, "-d", d, "--keys", 30000,
                                                    "--value-size", "1024+-500", "--read-ratio", 0.9],
                          opts.repeats, warmup_args=["-d", 0.3])
        s.data["results"] = res

        def row(label, shown, a, base):
            return [label, shown, fmt_num(med(a, "throughput")), f"±{spread(a, 'throughput'):.0f}%",
                    fmt_ratio(med(a, "throughput"), med(base, "throughput")), fmt_num(med(a, "cpu_us_per_op"), 2),
                    fmt_ratio(med(a, "cpu_us_per_op"), med(base, "cpu_us_per_op")),
                    fmt_num(med(a, "server_cpu_util"), 2), fmt_num(med(a, "other_cpu_util"), 2),
                    fmt_ratio(med(a, "throughput"), med(res["redis"], "throughput"))]

        fams = [("cairn reactor (RESP)", "cairn-r{}"), ("cairn reactor (memcached)", "cairn-r{}/mc"),
                ("cairn dispatch (RESP)", "cairn-d{}"), ("memcached", "memcached-{}")]
        rows = []
        for label, pat in fams:
            base = res[pat.format(1)]
            if pat.startswith("cairn-r"):
                rows.append(row(label, f"default ({chosen})", res[pat.format("default")], base))
            rows += [row(label, t, res[pat.format(t)], base) for t in threads]
        rows.append(row("redis (single-threaded)", 1, res["redis"], res["redis"]))
        s.md += [f"Cores available to the run: {cores}; cairn's default chose {chosen} event loop(s) "
                 "(CONFIG GET threads). Thread counts run: " + ", ".join(map(str, threads))
                 + " (up to twice the cores); "
                 f"cairn-bench ran {clients} load thread(s) (a quarter of the cores, at least one)."
                 + ("" if 16 in threads else " Scaling to 16 threads needs a machine with at least 8 cores "
                    "(`.venv/bin/python bench/run.py --suites scaling,threads` there; the page records the machine)."),
                 "", "## 90/10 GET/SET, 30k keys of 1 KB ± 500 B, 40 connections", "",
                 md_table(["server", "threads", "ops/s", "spread", "ops/s vs 1 thread", "server CPU µs/op",
                           "CPU/op vs 1 thread", "server CPU (cores busy)", "other load (cores)", "ops/s vs redis"],
                          rows), ""]
        for metric, ylabel, stem, ttl in (("throughput", "throughput (ops/s)", "scaling_throughput", "Throughput vs server threads"),
                                          ("cpu_us_per_op", "server CPU per op (µs)", "scaling_cpu", "Server CPU per op vs server threads")):
            series = {label: [triple(res[pat.format(t)], metric) for t in threads] for label, pat in fams}
            refs = {"redis (1 thread)": med(res["redis"], metric),
                    f"cairn default ({chosen} loop(s), RESP)": med(res["cairn-rdefault"], metric)}
            lines(s.png(stem), f"{ttl} (40 conns, 90/10, 1 KB ± 500 B)", "server threads (--threads / --workers / -t)",
                  ylabel, threads, series, note=s.note(), logx=len(threads) > 3, ref_lines=refs)
    finally:
        s.stop_all()
    s.write("Suite 7: thread scaling",
            "The mdcached workload (90/10, 30k keys, 1 KB ± 500 B) with 40 connections against each server at "
            "1, 2, 4, 8 and 16 threads (those up to twice the cores available), cairn's default thread count "
            "beside them, Redis and memcached in the same run. On a machine with few cores the load generator "
            "shares the CPUs with the server, so the interesting figure is CPU per op and how it changes with "
            "threads. Run on a bigger machine to see real scaling; results are labelled with the machine.")
    return s
