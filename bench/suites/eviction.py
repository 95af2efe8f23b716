"""The eviction suite: hit ratio of four key streams (Zipf 0.8, Zipf 0.99, Zipf with a scan, Zipf
with a loop) against a cache holding 10% of the keys, next to offline simulations (cachesim.py). Run by `bench/run.py --suites eviction`; writes eviction.md,
eviction.json and plots (bench/README.md).
"""

from __future__ import annotations

import cachesim
import subprocess
import time

import harness  # its BENCH_BIN / CAIRN_BIN are set by run.py's --bench / --cairn
from harness import aggregate, fmt_ratio, log, MB, md_table, med, NPROC, resp_call, Server, spread, Suite
from plots import _plt, color_for, triple


def run(opts, runner, machine):
    """Suite 6: hit ratio of four key streams against a cache holding 10% of the keys."""
    s = Suite("eviction", opts, runner, machine)
    nkeys = 20_000 if opts.quick else 100_000
    nreq = 40_000 if opts.quick else 300_000
    vsize = 1024
    frac = 0.10
    n = NPROC
    # name -> (title, cairn-bench's stream arguments)
    streams = {
        "zipf0.8": ("Zipf s=0.8", ["--dist", "zipf", "--zipf-s", 0.8]),
        "zipf0.99": ("Zipf s=0.99", ["--dist", "zipf", "--zipf-s", 0.99]),
        "scan": ("Zipf s=0.99 with a scan (a quarter of the requests read every key in order)",
                 ["--dist", "scan", "--zipf-s", 0.99, "--pattern-share", 0.25]),
        "loop": ("Zipf s=0.99 with a loop (a quarter of the requests loop over the coldest 15% of the keys)",
                 ["--dist", "loop", "--zipf-s", 0.99, "--pattern-share", 0.25]),
    }
    specs = [(f"cairn-{n}t", "cairn", f"cairn allkeys-lru", ["--threads", str(n)]),
             ("redis", "redis", "redis allkeys-lru", ["--maxmemory-policy", "allkeys-lru"]),
             (f"memcached-{n}t", "memcached", f"memcached (seg. LRU)", ["-t", str(n)])]
    labels = {x[0]: x[2] for x in specs}
    try:
        # Calibrate: bytes per item as each server accounts them, with no limit.
        per_item = {}
        for spec in specs:
            srv = Server(*spec, workdir=runner.workdir, memcached_mb=1024).start()
            try:
                i0 = srv.info()
                runner.load(srv, nkeys, vsize)
                i1 = srv.info()
                if srv.kind == "memcached":
                    per_item[spec[0]] = (i1["total_malloced"] - i0["total_malloced"]) / nkeys
                else:
                    per_item[spec[0]] = (i1["used_memory"] - i0["used_memory"]) / nkeys
            finally:
                srv.stop()
        s.data["per_item_bytes"] = per_item
        for name, (title, stream_args) in streams.items():
            keyfile = runner.workdir / f"keys-{name}.bin"
            stream = []
            for seed in (11, 12):  # warm-up run, then measured run
                subprocess.run([str(harness.BENCH_BIN), "--port", "1", "--dump-keys", str(keyfile), "--keys", str(nkeys),
                                "--requests", str(nreq), *map(str, stream_args), "--seed", str(seed)],
                               check=True)
                stream.append(cachesim.load_keys(keyfile))
            keys = stream[0] + stream[1]
            cap = int(nkeys * frac)
            sims = {}
            for pol in cachesim.POLICIES:
                t0 = time.monotonic()
                h, tot = cachesim.simulate(pol, keys, cap, warm=nreq)
                sims[pol] = h / tot
                log(f"eviction sim {pol} {name}: {h / tot:.4f} ({time.monotonic() - t0:.1f}s)")
            samples = {x[0]: [] for x in specs}
            for rep in range(opts.repeats):
                for spec in specs:
                    base_mb = 1024
                    if spec[1] == "memcached":
                        mb = max(1, round(per_item[spec[0]] * cap / MB))
                        srv = Server(*spec, workdir=runner.workdir, memcached_mb=mb).start()
                    else:
                        srv = Server(*spec, workdir=runner.workdir, memcached_mb=base_mb).start()
                    try:
                        proto = srv.protocols[0]
                        if srv.kind != "memcached":
                            base = srv.info()["used_memory"]
                            resp_call(srv.resp_port, "CONFIG", "SET", "maxmemory", int(base + per_item[spec[0]] * cap))
                        common = ["--keys", nkeys, *stream_args, "--read-ratio", 1, "--fill-on-miss",
                                  "--value-size", vsize, "-c", 1, "-P", 8, "--requests", nreq]
                        runner.bench(srv, proto, common + ["--seed", 11], timeout=600)
                        m = runner.bench(srv, proto, common + ["--seed", 12], timeout=600)
                        info = srv.info()
                        m["items_held"] = info["keys"]
                        m["capacity_frac"] = info["keys"] / nkeys
                        m["evicted"] = info["evicted"]
                        samples[spec[0]].append(m)
                    finally:
                        srv.stop()
            res = {k: aggregate(v) | {"samples": v} for k, v in samples.items()}
            best = max(sims[p] for p in cachesim.BEST_OF)
            s.data["results"][name] = {"servers": res, "sim": sims, "capacity_items": cap, "best_of": best}
            rows = [[labels[k], f"{med(res[k], 'hit_ratio') * 100:.2f}%", f"±{spread(res[k], 'hit_ratio'):.1f}%",
                     f"{med(res[k], 'items_held'):,.0f} ({med(res[k], 'capacity_frac') * 100:.1f}%)",
                     fmt_ratio(med(res[k], "hit_ratio"), sims["lru"]),
                     f"{(med(res[k], 'hit_ratio') - best) * 100:+.2f}"] for k in res]
            rows += [[f"simulated {cachesim.LABELS[p]}", f"{v * 100:.2f}%", "–", f"{cap:,} (10.0%)", fmt_ratio(v, sims["lru"]),
                      f"{(v - best) * 100:+.2f}"]
                     for p, v in sims.items()]
            s.md += [f"## {title}: {nkeys:,} keys of {vsize} B, cache sized for {cap:,} items (10%)", "",
                     md_table(["cache", "hit ratio", "spread", "items held at end (fraction of keys)", "vs simulated LRU",
                               "points vs best of S3-FIFO and W-TinyLFU"], rows), ""]
        gap_rows = [[streams[name][0].split(" (")[0], f"{r['best_of'] * 100:.2f}%",
                     f"{med(r['servers'][specs[0][0]], 'hit_ratio') * 100:.2f}%",
                     f"{(med(r['servers'][specs[0][0]], 'hit_ratio') - r['best_of']) * 100:+.2f}",
                     f"{r['sim']['cairn-model'] * 100:.2f}%"]
                    for name, r in s.data["results"].items()]
        s.md = ["## cairn against the best simulated policy", "",
                md_table(["stream", "best of S3-FIFO and W-TinyLFU (simulated)", labels[specs[0][0]],
                          "points vs best", "simulated cairn-model"], gap_rows), ""] + s.md
        skews = list(streams)
        plt_groups = [streams[k][0].split(" (")[0].replace("Zipf s=0.99 with", "+") for k in skews]
        plt = _plt()
        fig, ax = plt.subplots(figsize=(8, 4.6))
        allrows = [(labels[x[0]], [triple(s.data["results"][sk]["servers"][x[0]], "hit_ratio", 100) for sk in skews], color_for(labels[x[0]]))
                   for x in specs]
        width = 0.8 / len(specs)
        for i, (label, vals, col) in enumerate(allrows):
            xs = [g - 0.4 + width * (i + 0.5) for g in range(len(skews))]
            ax.bar(xs, [v[0] for v in vals], width * 0.9, label=label, color=col,
                   yerr=[[v[0] - v[1] for v in vals], [v[2] - v[0] for v in vals]], capsize=3)
        # The simulated policies: reference lines across each group.
        styles = [("#444444", "--"), ("#8c510a", ":"), ("#762a83", "-."), ("#000000", (0, (5, 1))), ("#1b7837", (0, (1, 1)))]
        for (col, ls), p in zip(styles, cachesim.POLICIES):
            for g, sk in enumerate(skews):
                ax.hlines(s.data["results"][sk]["sim"][p] * 100, g - 0.45, g + 0.45, colors=col,
                          linestyles=ls, lw=1.6, label=f"simulated {cachesim.LABELS[p]}" if g == 0 else None)
        ax.set_xticks(range(len(skews)))
        ax.set_xticklabels(plt_groups)
        ax.set_ylabel("hit ratio (%)")
        ax.set_title(f"Hit ratio, cache = 10% of {nkeys:,} keys (servers vs simulated policies)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.text(0.01, 0.01, s.note(), fontsize=7, color="#555")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(s.png("eviction_hit_ratio"), dpi=110)
        plt.close(fig)
    finally:
        s.stop_all()
    s.write("Suite 6: eviction hit ratio",
            f"Four key streams (cache-aside: GET, and SET of 1 KB after a miss; one connection, 8 in flight) against "
            f"each server with its memory limit set to hold 10% of the {nkeys:,} keys. The limit is calibrated per server "
            f"from its own accounting of {nkeys:,} items written without a limit (bytes per item: "
            + ", ".join(f"{labels[k]} {v:.0f}" for k, v in s.data.get("per_item_bytes", {}).items())
            + "; memcached's -m is in whole megabytes of slab pages). A warm-up stream runs first; the hit ratio is "
            "that of a second stream. The simulated policies replay exactly the same two streams "
            "(`cairn-bench --dump-keys`) with a capacity of 10% of the keys; `cairn-model` is cairn's allkeys-lru "
            "algorithm as cachesim.py models it (256 shards, each with its probationary FIFO, ghost set and "
            "counter CLOCK in hash order). Reproduce: `.venv/bin/python bench/run.py --suites eviction`.")
    return s
