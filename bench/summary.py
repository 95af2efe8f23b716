"""summary.md of a results directory: the headline figures of every suite page present there
(run.py writes it after the suites; `run.py --summary-only` rewrites it from the JSON)."""

from __future__ import annotations

import json
from pathlib import Path

from harness import fmt_num, machine_line, md_table, SUITES


def headline_rows(out):
    """The key figures of every suite present in `out`, for cairn with one thread per core and with one
    thread, Redis, and memcached -t N and -t 1; ratios pair like with like (N threads with memcached -t N,
    one event loop with Redis and memcached -t 1)."""
    rows = []

    def load(name):
        p = Path(out) / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    def get(d, *path):
        for k in path:
            if not isinstance(d, dict) or k not in d:
                return None
            d = d[k]
        return d

    def m(agg, metric, scale=1.0):
        v = get(agg, metric, "median")
        return None if v is None else v * scale

    def add(what, unit, vals, digits=0, lower_better=False):
        """vals: {'cN', 'c1', 'redis', 'mN', 'm1'} -> value or None."""
        def f(x):
            return "–" if x is None else fmt_num(x, digits)

        def rt(a, b):
            return "–" if a is None or b is None or not b else f"{a / b:.2f}×"

        v = {k: vals.get(k) for k in ("cN", "c1", "redis", "mN", "m1")}
        rows.append([what, unit + (" ↓" if lower_better else ""), f(v["cN"]), f(v["c1"]), f(v["redis"]), f(v["mN"]),
                     f(v["m1"]), rt(v["cN"], v["redis"]), rt(v["c1"], v["redis"]), rt(v["cN"], v["mN"]),
                     rt(v["c1"], v["m1"])])

    for name in SUITES:
        d = load(name)
        if not d:
            continue
        n = d["machine"]["nproc"]
        R = d["results"]
        names = {"cN": f"cairn-{n}t", "c1": "cairn-1t", "redis": "redis", "mN": f"memcached-{n}t", "m1": "memcached-1t"}

        def pick(table, metric, protos=("resp", "memcache"), scale=1.0, keyfmt="{}"):
            out_ = {}
            for k, srv in names.items():
                proto = "memcache" if k.startswith("m") else None
                t = table(proto)
                if t is not None:
                    out_[k] = m(get(t, keyfmt.format(srv)), metric, scale)
            return out_

        if name == "mdcached":
            for c in (10, 40):
                for proto, what in (("resp", "RESP"), ("memcache", "memcached text")):
                    t = get(R, f"{proto}/c{c}") or {}
                    if proto == "resp":
                        vals = {k: m(t.get(srv), "throughput") for k, srv in names.items() if not k.startswith("m")}
                        cpu = {k: m(t.get(srv), "cpu_us_per_op") for k, srv in names.items() if not k.startswith("m")}
                    else:
                        vals = {k: m(t.get(srv), "throughput") for k, srv in names.items() if k != "redis"}
                        cpu = {k: m(t.get(srv), "cpu_us_per_op") for k, srv in names.items() if k != "redis"}
                    add(f"mdcached 90/10, 1 KB ± 500 B, {c} clients, {what}", "ops/s", vals)
                    add(f"mdcached 90/10, 1 KB ± 500 B, {c} clients, {what}", "server CPU µs/op", cpu, 2, True)
        elif name == "null":
            for key, what, proto in (("resp/c10/ping", "PING", "resp"), ("resp/c10/get", "GET 32 B (RESP)", "resp"),
                                     ("memcache/c10/ping", "mn", "memcache"),
                                     ("memcache/c10/get", "GET 32 B (memcached text)", "memcache")):
                t = get(R, key) or {}
                vals = {k: m(t.get(srv), "cpu_us_per_op") for k, srv in names.items()
                        if (k != "redis" if proto == "memcache" else not k.startswith("m"))}
                add(f"{what}, 10 clients", "server CPU µs/op", vals, 2, True)
        elif name == "pipeline":
            for op in ("get", "set"):
                for p in (1, 16, 64):
                    t = get(R, f"{op}/P{p}") or {}
                    add(f"{op.upper()} pipeline {p} (RESP)", "ops/s",
                        {k: m(t.get(f"{srv}/resp"), "throughput") for k, srv in names.items() if not k.startswith("m")})
                    add(f"{op.upper()} pipeline {p} (memcached text)", "ops/s",
                        {"cN": m(t.get(f"{names['cN']}/memcache"), "throughput"),
                         "mN": m(t.get(f"{names['mN']}/memcache"), "throughput"),
                         "m1": m(t.get(f"{names['m1']}/memcache"), "throughput")})
        elif name == "memory":
            for cname in ("32B", "1KB"):
                t = get(R, cname) or {}
                add(f"memory, 16 B keys + {cname} values", "RSS bytes/key",
                    {"cN": m(t.get(names["cN"]), "rss_per_key"), "redis": m(t.get("redis"), "rss_per_key"),
                     "mN": m(t.get(names["mN"]), "rss_per_key")}, 1, True)
        elif name == "scaling":
            add(f"mdcached 90/10, 40 clients (scaling suite)", "ops/s",
                {"cN": m(R.get(f"cairn-r{n}"), "throughput"), "c1": m(R.get("cairn-r1"), "throughput"),
                 "redis": m(R.get("redis"), "throughput"), "mN": m(R.get(f"memcached-{n}"), "throughput"),
                 "m1": m(R.get("memcached-1"), "throughput")})
            add(f"mdcached 90/10, 40 clients (scaling suite)", "server CPU µs/op",
                {"cN": m(R.get(f"cairn-r{n}"), "cpu_us_per_op"), "c1": m(R.get("cairn-r1"), "cpu_us_per_op"),
                 "redis": m(R.get("redis"), "cpu_us_per_op"), "mN": m(R.get(f"memcached-{n}"), "cpu_us_per_op"),
                 "m1": m(R.get("memcached-1"), "cpu_us_per_op")}, 2, True)
        elif name == "latency":
            for tag, what in (("open50", "50%"), ("open80", "80%")):
                t = get(R, tag) or {}
                add(f"open loop at {what} of max, p99", "µs",
                    {k: m(t.get(srv), "p99") for k, srv in names.items()}, 1, True)
        elif name == "eviction":
            for key, what in (("zipf0.8", "Zipf 0.8"), ("zipf0.99", "Zipf 0.99"), ("scan", "Zipf 0.99 + scan"),
                              ("loop", "Zipf 0.99 + loop")):
                srv = get(R, key, "servers") or {}
                add(f"hit ratio, {what}, cache = 10% of keys", "%",
                    {"cN": m(srv.get(names["cN"]), "hit_ratio", 100), "redis": m(srv.get("redis"), "hit_ratio", 100),
                     "mN": m(srv.get(names["mN"]), "hit_ratio", 100)}, 2)
    return rows


def write_summary(out, machine, quick, elapsed=None):
    present = [n for n in SUITES if (Path(out) / f"{n}.md").exists()]
    n = machine["nproc"]
    lines_ = [f"# cairn benchmark results ({'quick' if quick else 'full'} mode)", "",
              f"Machine: {machine_line(machine)}.", "",
              f"Reproduce: `make {'bench-quick' if quick else 'bench'}` "
              f"(`.venv/bin/python bench/run.py{' --quick' if quick else ''}`)"
              + (f"; this run took {elapsed / 60:.1f} minutes." if elapsed else "."), "",
              f"Headline figures: cairn's reactor with one thread per core and with one thread (on up to 3 cores its default), against "
              f"Redis and memcached -t {n} / -t 1; medians of the repeated runs in one session. Ratios pair like with "
              "like: N threads with memcached -t N, one event loop with Redis and memcached -t 1. On 2 cores the "
              "load generator competes with a multi-threaded server for the CPUs, which is why the 1-thread columns "
              "matter here. Details, spreads and plots in each suite's page.", "",
              md_table(["workload", "metric (↓ lower is better)", f"cairn {n}t", "cairn 1t", "redis", f"memcached -t {n}",
                        "memcached -t 1", f"cairn {n}t / redis", "cairn 1t / redis", f"cairn {n}t / memcached -t {n}",
                        "cairn 1t / memcached -t 1"], headline_rows(out)), "", "Suites:", ""]
    for name in present:
        try:
            mi = json.loads((Path(out) / f"{name}.json").read_text())
            when = f" — {mi['mode']} mode, {mi['machine']['date']}, cairn {mi['machine']['cairn_commit']}"
        except (OSError, ValueError, KeyError):
            when = ""
        lines_.append(f"- [{name}]({name}.md){when}")
    others = sorted(p.stem for p in Path(out).glob("*.md") if p.stem not in SUITES and p.stem != "summary")
    if others:
        lines_ += ["", "Other result pages in this directory (not produced by run.py): "
                   + ", ".join(f"[{o}]({o}.md)" for o in others) + "."]
    (Path(out) / "summary.md").write_text("\n".join(lines_) + "\n")
