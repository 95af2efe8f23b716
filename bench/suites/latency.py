"""The latency suite: open-loop latency at 50% and 80% of each server's measured maximum, plus
disturbances. Run by `bench/run.py --suites latency`; writes latency.md, latency.json and plots
(bench/README.md).
"""

from __future__ import annotations

import time

from harness import (
    aggregate,
    dur,
    fmt_num,
    MB,
    md_table,
    med,
    NPROC,
    resp_call,
    round_robin,
    server_specs,
    Suite,
)
from plots import grouped_bars, triple


def run(opts, runner, machine):
    """Suite 5: open-loop latency at 50% and 80% of each server's measured max, plus disturbances."""
    s = Suite("latency", opts, runner, machine)
    d = dur(opts, 0.3, 5.0)
    n = NPROC
    specs = [x for x in server_specs() if x[0] in ("cairn-1t", f"cairn-{n}t", "redis", f"memcached-{n}t")]
    # cairn refuses values above 64 MB by default; the disturbance below writes a 100 MB one.
    specs = [(a, b, c, args + ["--max-value-size", "256mb"] if b == "cairn" else args) for a, b, c, args in specs]
    conns = 10
    tail_s = 0.6 if opts.quick else 2.5
    wl = ["--keys", 30000, "--value-size", "1024+-500", "--read-ratio", 0.9]
    try:
        servers = s.start(specs)
        labels = {x.name: x.label for x in servers}
        for srv in servers:
            runner.load(srv, 30000, "1024+-500")
        pairs = [(srv, srv.protocols[0], srv.name) for srv in servers]
        maxes = round_robin(runner, pairs, lambda k: ["-c", conns, "-d", d] + wl, opts.repeats,
                            warmup_args=["-d", 0.2 if opts.quick else 1.0])
        s.data["results"]["max"] = maxes
        for frac in (0.5, 0.8):
            res = round_robin(runner, pairs, lambda k, f=frac: ["-c", conns, "-d", d, "--rate",
                                                                 round(med(maxes[k], "throughput") * f)] + wl,
                              opts.repeats)
            s.data["results"][f"open{int(frac * 100)}"] = res
        # disturbances, at 50% load: (a) many keys expiring at once, (b) deleting a 100 MB value.
        # Full mode repeats each (round-robin over the servers); quick mode runs each once.
        nexp = 50_000 if opts.quick else 1_000_000
        reps = 1 if opts.quick else opts.repeats
        import threading

        # How fast each server takes pipelined small writes (sizes the expiry deadline below).
        load_rate = {srv.name: runner.load(srv, 20_000, 32, extra=["--key-prefix", "probe:"])["throughput"]
                     for srv in servers}
        exp_samples = {srv.name: [] for srv in servers}
        del_samples = {srv.name: [] for srv in servers}
        for rep in range(reps):
            for srv in servers:
                rate = round(med(maxes[srv.name], "throughput") * 0.5)
                proto = srv.protocols[0]
                # (a) keys under another prefix, all expiring in the same second, which falls inside the run:
                # the deadline leaves twice the expected load time plus a second.
                at = int(time.time() + 2 * nexp / max(load_rate[srv.name], 1.0) + 1.0) + 1
                runner.bench(srv, proto, ["--load", "--keys", nexp, "--key-prefix", "exp:", "--value-size", 32,
                                          "-c", 4, "-P", 64, "--expire-at", at], timeout=600)
                before = srv.info()["keys"]
                lead = at - time.time()
                smp = runner.bench(srv, proto, ["-c", conns, "-d", max(d, lead + tail_s), "--rate", rate] + wl,
                                   check=False)
                after = srv.info()
                if smp:
                    smp.update(keys_before=before, keys_after=after["keys"], expiry_offset_s=lead)
                exp_samples[srv.name].append(smp)
                # (b) a 100 MB value deleted in the middle of the run (RESP servers only).
                if srv.kind == "memcached":
                    continue
                resp_call(srv.resp_port, "SET", "big:value", b"x" * (100 * MB))
                took = {}

                def deleter(port=srv.resp_port, took=took):
                    time.sleep(0.4 if opts.quick else 1.0)
                    t0 = time.monotonic()
                    resp_call(port, "DEL", "big:value")
                    took["s"] = time.monotonic() - t0

                th = threading.Thread(target=deleter)
                th.start()
                smp = runner.bench(srv, proto, ["-c", conns, "-d", max(d, 1.0 if opts.quick else 3.0), "--rate", rate]
                                   + wl, check=False)
                th.join()
                if smp:
                    smp["del_seconds"] = took.get("s", float("nan"))
                del_samples[srv.name].append(smp)
        for name_, v in exp_samples.items():
            s.data["results"].setdefault("expire", {})[name_] = aggregate(v) | {"samples": v}
        for name_, v in del_samples.items():
            if v:
                s.data["results"].setdefault("bigdel", {})[name_] = aggregate(v) | {"samples": v}
        rows = []
        for k in labels:
            mx = maxes[k]
            r = [labels[k], servers[[x.name for x in servers].index(k)].protocols[0], fmt_num(med(mx, "throughput")),
                 fmt_num(med(mx, "p50"), 1), fmt_num(med(mx, "p99"), 1)]
            for tag in ("open50", "open80"):
                a = s.data["results"][tag][k]
                r += [fmt_num(med(a, "throughput")), fmt_num(med(a, "p50"), 1), fmt_num(med(a, "p99"), 1),
                      fmt_num(med(a, "p999"), 1), fmt_num(med(a, "max"), 1)]
            rows.append(r)
        s.md += [f"## Open loop at 50% and 80% of each server's closed-loop maximum ({conns} connections)", "",
                 "Latency is measured from each request's intended send time, so stalls are not hidden "
                 "(no coordinated omission). All latencies in µs.", "",
                 md_table(["server", "protocol", "max ops/s", "max p50", "max p99",
                           "50%: ops/s", "p50", "p99", "p99.9", "max",
                           "80%: ops/s", "p50", "p99", "p99.9", "max"], rows), ""]
        rows = []
        for k in labels:
            for tag, what in (("open50", "50% load, quiet"), ("expire", f"{nexp:,} keys expire at once"),
                              ("bigdel", "100 MB value deleted")):
                a = s.data["results"].get(tag, {}).get(k)
                if not a:
                    continue
                extra = ""
                if tag == "expire":
                    extra = (f"keys {med(a, 'keys_before'):,.0f} → {med(a, 'keys_after'):,.0f} at the end; expiry "
                             f"{med(a, 'expiry_offset_s'):.1f} s into the run")
                if tag == "bigdel":
                    extra = f"DEL took {med(a, 'del_seconds') * 1000:.1f} ms"
                rows.append([labels[k], what, fmt_num(med(a, "p50"), 1), fmt_num(med(a, "p99"), 1),
                             fmt_num(med(a, "p999"), 1), fmt_num(med(a, "max"), 1), extra])
        s.md += [f"## Disturbances at 50% load ({'one run each' if opts.quick else f'median of {opts.repeats} runs'})", "",
                 md_table(["server", "during", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "note"], rows), ""]
        groups = ["50% p50", "50% p99", "50% p99.9", "80% p50", "80% p99", "80% p99.9"]
        series = {labels[k]: [triple(s.data["results"][t][k], m) for t in ("open50", "open80") for m in ("p50", "p99", "p999")]
                  for k in labels}
        grouped_bars(s.png("latency_open_loop"), "Open-loop latency at 50% / 80% of max (90/10, 1 KB ± 500 B)",
                     "latency (µs, log scale)", groups, series, note=s.note(), log=True)
        groups = ["quiet p99", "quiet p99.9", "expiry p99", "expiry p99.9", "100MB DEL p99", "100MB DEL p99.9"]
        series = {labels[k]: [triple(s.data["results"].get(t, {}).get(k), m) for t in ("open50", "expire", "bigdel")
                              for m in ("p99", "p999")] for k in labels}
        grouped_bars(s.png("latency_disturbances"), "Tail latency at 50% load while keys expire / a 100 MB value is deleted",
                     "latency (µs, log scale)", groups, series, note=s.note(), log=True)
    finally:
        s.stop_all()
    s.write("Suite 5: latency under load",
            "First each server's closed-loop maximum (10 connections, 90/10 over 30k keys of 1 KB ± 500 B), then "
            "open-loop runs at 50% and 80% of it. Then, at 50%, two disturbances: a large batch of keys all "
            "expiring in the same second during the run, and a DEL of a 100 MB value (RESP servers).")
    return s
