"""The memory suite: memory per item, 16 B keys with 32 B values and with 1 KB values (RSS and the
server's own accounting). Run by `bench/run.py --suites memory`; writes memory.md, memory.json
and plots (bench/README.md).
"""

from __future__ import annotations

import time

from harness import (
    aggregate,
    fmt_num,
    fmt_ratio,
    MB,
    md_table,
    med,
    NPROC,
    Server,
    server_specs,
    spread,
    Suite,
)
from plots import plot_memory


def run(opts, runner, machine):
    """Suite 4: memory per item: 16 B keys with 32 B values and with 1 KB values."""
    s = Suite("memory", opts, runner, machine)
    nkeys = 100_000 if opts.quick else 1_000_000
    n = NPROC
    configs = [("32B", 32), ("1KB", 1024)]
    specs = [x for x in server_specs() if x[0] in (f"cairn-{n}t", "redis", f"memcached-{n}t")]
    # Records without CAS (memcached's -C), right after the default row (figures.py reads that).
    specs.insert(1, (f"cairn-{n}t-nocas", "cairn", f"cairn reactor {n}t --cas no",
                     ["--threads", str(n), "--cas", "no"]))
    labels = {x[0]: x[2] for x in specs}
    try:
        for cname, vsize in configs:
            samples = {x[0]: [] for x in specs}
            for rep in range(opts.repeats):
                for spec in specs:
                    srv = Server(spec[0], spec[1], spec[2], spec[3], workdir=runner.workdir,
                                 memcached_mb=max(1024, int(nkeys * (vsize + 200) / MB * 1.3))).start()
                    try:
                        time.sleep(0.2)
                        rss0, info0 = srv.rss_bytes(), srv.info()
                        lr = runner.load(srv, nkeys, vsize)
                        time.sleep(0.3 if opts.quick else 1.0)
                        rss1, info1 = srv.rss_bytes(), srv.info()
                        samples[spec[0]].append({
                            "rss_per_key": (rss1 - rss0) / nkeys,
                            "own_per_key": (info1["used_memory"] - info0["used_memory"]) / nkeys,
                            "rss_total": rss1, "keys": info1["keys"], "errors": lr["errors"],
                            "load_throughput": lr["throughput"],
                            "payload_per_key": 16 + vsize,
                        } | ({"malloced_per_key": (info1["total_malloced"] - info0.get("total_malloced", 0)) / nkeys}
                             if "total_malloced" in info1 else {}))
                    finally:
                        srv.stop()
            res = {k: aggregate(v) | {"samples": v} for k, v in samples.items()}
            s.data["results"][cname] = res
            rows = []
            for k in res:
                a = res[k]
                r = [labels[k], fmt_num(med(a, "keys")), fmt_num(med(a, "rss_per_key"), 1), f"±{spread(a, 'rss_per_key'):.0f}%",
                     fmt_num(med(a, "own_per_key"), 1), fmt_num(med(a, "rss_per_key") - 16 - vsize, 1)]
                for p in ("redis", f"memcached-{n}t"):
                    r.append(fmt_ratio(med(a, "rss_per_key"), med(res[p], "rss_per_key")))
                rows.append(r)
            s.md += [f"## {nkeys:,} keys of 16 B with {vsize} B values", "",
                     md_table(["server", "keys held", "RSS bytes/key", "spread", "own accounting bytes/key",
                               "RSS overhead over payload B/key", "RSS/key vs redis", f"RSS/key vs memcached -t {n}"], rows),
                     "", "Own accounting: `used_memory` from INFO (cairn, Redis); memcached's `bytes` stat (item bytes, "
                     "excluding slab slack; `stats slabs` total_malloced per key: "
                     + ", ".join(f"{fmt_num(med(res[k], 'malloced_per_key'), 1)}" for k in res if "malloced_per_key" in res[k])
                     + ").", ""]
        plot_memory(s.png("memory_rss"), s.png("memory_own"), s.data["results"], labels, configs, nkeys, s.note())
    finally:
        s.stop_all()
    s.write("Suite 4: memory per item",
            f"A fresh server per run; {nkeys:,} keys of 16 bytes written once (SET, pipelined), then RSS (from "
            "/proc/PID/statm) and the server's own accounting are read after a one-second pause. Per-key figures are "
            "(after − before) / keys. Payload is 16 B + the value size.")
    return s
