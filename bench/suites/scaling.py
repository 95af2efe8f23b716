"""The scaling suite: throughput against server threads, 1 to the cores (mdcached workload, 40
clients). Run by `bench/run.py --suites scaling`; writes scaling.md, scaling.json and plots
(bench/README.md).
"""

from __future__ import annotations

from harness import dur, fmt_num, fmt_ratio, md_table, med, NPROC, round_robin, spread, Suite
from plots import lines, triple


def run(opts, runner, machine):
    """Suite 7: thread scaling 1..cores (mdcached workload, 40 clients)."""
    s = Suite("scaling", opts, runner, machine)
    d = dur(opts, 0.3, 3.0)
    threads = list(range(1, NPROC + 1))
    specs = []
    for t in threads:
        specs.append((f"cairn-r{t}", "cairn", f"cairn reactor", ["--threads", str(t)]))
        specs.append((f"cairn-d{t}", "cairn", f"cairn dispatch", ["--io-model", "dispatch", "--workers", str(t)]))
        specs.append((f"memcached-{t}", "memcached", f"memcached", ["-t", str(t)]))
    specs.append(("redis", "redis", "redis", []))
    try:
        servers = s.start(specs)
        for srv in servers:
            runner.load(srv, 30000, "1024+-500")
        fam = {"cairn reactor": "resp", "cairn dispatch": "resp", "memcached": "memcache", "redis": "resp"}
        pairs = [(srv, fam[srv.label], srv.name) for srv in servers]
        pairs += [(srv, "memcache", srv.name + "/mc") for srv in servers if srv.name.startswith("cairn-r")]
        res = round_robin(runner, pairs, lambda k: ["-c", 40, "-d", d, "--keys", 30000, "--value-size", "1024+-500",
                                                    "--read-ratio", 0.9], opts.repeats, warmup_args=["-d", 0.3])
        s.data["results"] = res
        fams = [("cairn reactor (RESP)", "cairn-r{}"), ("cairn reactor (memcached)", "cairn-r{}/mc"),
                ("cairn dispatch (RESP)", "cairn-d{}"), ("memcached", "memcached-{}")]
        rows = []
        for label, pat in fams:
            for t in threads:
                a = res[pat.format(t)]
                base = res[pat.format(1)]
                rows.append([label, t, fmt_num(med(a, "throughput")), f"±{spread(a, 'throughput'):.0f}%",
                             fmt_ratio(med(a, "throughput"), med(base, "throughput")), fmt_num(med(a, "cpu_us_per_op"), 2),
                             fmt_num(med(a, "server_cpu_util"), 2),
                             fmt_ratio(med(a, "throughput"), med(res["redis"], "throughput"))])
        r = res["redis"]
        rows.append(["redis (single-threaded)", 1, fmt_num(med(r, "throughput")), f"±{spread(r, 'throughput'):.0f}%", "1.00×",
                     fmt_num(med(r, "cpu_us_per_op"), 2), fmt_num(med(r, "server_cpu_util"), 2), "1.00×"])
        s.md += ["## 90/10 GET/SET, 30k keys of 1 KB ± 500 B, 40 connections", "",
                 md_table(["server", "threads", "ops/s", "spread", "vs 1 thread", "server CPU µs/op",
                           "server CPU (cores busy)", "ops/s vs redis"], rows), ""]
        for metric, ylabel, stem, ttl in (("throughput", "throughput (ops/s)", "scaling_throughput", "Throughput vs server threads"),
                                          ("cpu_us_per_op", "server CPU per op (µs)", "scaling_cpu", "Server CPU per op vs server threads")):
            series = {label: [triple(res[pat.format(t)], metric) for t in threads] for label, pat in fams}
            lines(s.png(stem), f"{ttl} (40 conns, 90/10, 1 KB ± 500 B)", "server threads (--threads / --workers / -t)",
                  ylabel, threads, series, note=s.note(), ref_lines={"redis (1 thread)": med(res["redis"], metric)})
    finally:
        s.stop_all()
    s.write("Suite 7: thread scaling",
            f"The mdcached workload (90/10, 30k keys, 1 KB ± 500 B) with 40 connections against each server at 1..{NPROC} "
            "threads. On a machine with few cores the load generator shares the CPUs with the server, so the "
            "interesting figure is CPU per op and how it changes with threads. Run on a bigger machine to see "
            "real scaling; results are labelled with the machine.")
    return s
