"""The pipeline suite: GET / SET throughput and server CPU at pipeline depths 1, 4, 16, 64. Run by
`bench/run.py --suites pipeline`; writes pipeline.md, pipeline.json and plots (bench/README.md).
"""

from __future__ import annotations

from harness import dur, fmt_num, fmt_ratio, md_table, med, NPROC, round_robin, server_specs, Suite
from plots import lines, triple


def run(opts, runner, machine):
    """Suite 3: GET / SET at pipeline depths 1, 4, 16, 64."""
    s = Suite("pipeline", opts, runner, machine)
    d = dur(opts, 0.15, 2.0)
    depths = [1, 4, 16, 64]
    n = NPROC
    specs = [x for x in server_specs() if x[0] in ("cairn-1t", f"cairn-{n}t", "redis", f"memcached-{n}t", "memcached-1t")]
    if opts.quick:
        specs = [x for x in specs if x[0] != "memcached-1t"]
    try:
        servers = s.start(specs)
        labels = {x.name: x.label for x in servers}
        for srv in servers:
            runner.load(srv, 100000, 32)
        combos = [(srv, "resp") for srv in servers if srv.kind != "memcached"] + \
                 [(srv, "memcache") for srv in servers if srv.kind == "memcached" or srv.name == f"cairn-{n}t"]
        for op, ratio in (("get", 1), ("set", 0)):
            for p in depths:
                pairs = [(srv, proto, f"{srv.name}/{proto}") for srv, proto in combos]
                res = round_robin(runner, pairs, lambda k, p=p, ratio=ratio: [
                    "-c", 10, "-P", p, "-d", d, "--keys", 100000, "--value-size", 32, "--read-ratio", ratio],
                    opts.repeats, warmup_args=None if opts.quick else ["-d", 0.5])
                s.data["results"][f"{op}/P{p}"] = res
        lab = {f"{srv.name}/{proto}": f"{labels[srv.name]} ({proto})" for srv, proto in combos}
        for op in ("get", "set"):
            resp_peer = [k for k in lab if k.startswith("redis")]
            mc_peer = [k for k in lab if k.startswith("memcached") and k.endswith(f"-{n}t/memcache")] or \
                      [k for k in lab if k.startswith("memcached")]
            rows = []
            for k in lab:
                peer = resp_peer if k.endswith("/resp") else mc_peer
                r = [lab[k]]
                for p in depths:
                    a = s.data["results"][f"{op}/P{p}"][k]
                    b = s.data["results"][f"{op}/P{p}"][peer[0]] if peer else None
                    r.append(f"{fmt_num(med(a, 'throughput'))} ({fmt_ratio(med(a, 'throughput'), med(b, 'throughput')) if b else '–'})")
                rows.append(r)
            s.md += [f"## {op.upper()}, 10 connections: ops/s (ratio to {labels.get('redis', 'redis')} for RESP rows, "
                     f"to memcached -t {n} for memcached rows)", "",
                     md_table(["server"] + [f"P={p}" for p in depths], rows), ""]
            rows = []
            for k in lab:
                peer = resp_peer if k.endswith("/resp") else mc_peer
                r = [lab[k]]
                for p in depths:
                    a = s.data["results"][f"{op}/P{p}"][k]
                    b = s.data["results"][f"{op}/P{p}"][peer[0]] if peer else None
                    r.append(f"{fmt_num(med(a, 'cpu_us_per_op'), 2)} ({fmt_ratio(med(a, 'cpu_us_per_op'), med(b, 'cpu_us_per_op')) if b else '–'})")
                rows.append(r)
            s.md += [f"{op.upper()}: server CPU µs per op (ratio to the same peer):", "",
                     md_table(["server"] + [f"P={p}" for p in depths], rows), ""]
            series = {lab[k]: [triple(s.data["results"][f"{op}/P{p}"][k], "throughput") for p in depths] for k in lab}
            lines(s.png(f"pipeline_{op}"), f"{op.upper()} throughput vs pipeline depth (10 connections, 32 B values)",
                  "pipeline depth (requests in flight per connection)", "throughput (ops/s)", depths, series,
                  note=s.note(), logx=True)
            series = {lab[k]: [triple(s.data["results"][f"{op}/P{p}"][k], "cpu_us_per_op") for p in depths] for k in lab}
            lines(s.png(f"pipeline_{op}_cpu"), f"{op.upper()}: server CPU per op vs pipeline depth",
                  "pipeline depth (requests in flight per connection)", "server CPU per op (µs)", depths, series,
                  note=s.note(), logx=True)
    finally:
        s.stop_all()
    s.write("Suite 3: pipelining",
            "GET (100% reads) and SET (100% writes) over 100,000 keys with 32-byte values, 10 connections each "
            "keeping P requests in flight.")
    return s
