"""The thesis study (seed 001): shared vs per-node vs hybrid caching, on real parts.

Runs the thesis's six configurations (its Figures 5.1-5.6) and three sweeps it did not run
(nodes 1-12, read ratio 50-95%, shared share 10-90%) for the three cache systems, then draws the
figures and writes a summary. Every run starts a fresh cairn server and fresh nodes against one
PostgreSQL cluster loaded once. Results of finished runs are kept in ``runs.json`` in the output
directory and reused (``--fresh`` discards them), so an interrupted study resumes.

    python studies/thesis/run.py            # everything: 60 runs of 40,000 requests, about an hour
    python studies/thesis/run.py --quick    # the same figures from short runs: a smoke test
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plots  # noqa: E402
import rig  # noqa: E402
from caches import MODES  # noqa: E402

BASE = {"nodes": 3, "shared": 1500, "nonshared": 10000, "shared_pct": 30, "read_pct": 80, "prefetch": False}

# The thesis's Figures 5.1-5.6: (title, changes to BASE, the thesis's hit rates shared/distributed).
FIGURES: Dict[str, Tuple[Dict[str, Any], Dict[str, float]]] = {
    "5.1": ({"prefetch": True}, {"shared": 0.89, "pernode": 0.86}),
    "5.2": ({"prefetch": True, "read_pct": 50}, {}),
    "5.3": ({"nodes": 12}, {"pernode": 0.20}),
    "5.4": ({}, {"shared": 0.59, "pernode": 0.43}),
    "5.5": ({"nodes": 6, "nonshared": 50000}, {"shared": 0.38, "pernode": 0.21}),
    "5.6": ({"nodes": 6, "nonshared": 50000, "shared_pct": 60}, {"shared": 0.53, "pernode": 0.29}),
}
SWEEPS = {
    "nodes": [1, 2, 3, 6, 12],
    "read_pct": [50, 65, 80, 95],
    "shared_pct": [10, 30, 50, 70, 90],
}
HEADLINE = ("5.3", "5.4")
# --quick: the six figures, and sweeps of two points (mostly shared with the figures).
QUICK_SWEEPS = {"nodes": [3, 12], "read_pct": [50, 80], "shared_pct": [30, 90]}


def run_id(cfg: Dict[str, Any], requests: int) -> str:
    return (f"{cfg['mode']}-n{cfg['nodes']}-s{cfg['shared']}-ns{cfg['nonshared']}-sp{cfg['shared_pct']}"
            f"-r{cfg['read_pct']}-{'pf' if cfg['prefetch'] else 'nopf'}-q{requests}")


def plan(quick: bool, repeats: int) -> List[Tuple[Dict[str, Any], int]]:
    """(configuration with mode, repeat) in run order: sweeps first, the thesis's figures last, and
    the two the issue judges by (3 and 12 nodes, Figures 5.4 and 5.3) repeated at the very end. The
    three modes of a configuration run back to back, so that they see the same machine."""
    configs: List[Dict[str, Any]] = []
    for param, values in (QUICK_SWEEPS if quick else SWEEPS).items():
        for v in values:
            configs.append({**BASE, param: v})
    for name, (changes, _) in FIGURES.items():
        if name not in HEADLINE:
            configs.append({**BASE, **changes})
    unique = {json.dumps(c, sort_keys=True): c for c in configs}
    for name in HEADLINE:
        cfg = {**BASE, **FIGURES[name][0]}
        unique.pop(json.dumps(cfg, sort_keys=True), None)
    order = [(c, 0) for c in unique.values()]
    for rep in range(repeats):
        order += [({**BASE, **FIGURES[name][0]}, rep) for name in HEADLINE]
    return [({**c, "mode": m}, rep) for c, rep in order for m in MODES]


def mean(xs: List[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def pct(xs: List[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def summarize(raw: Dict[str, Any]) -> Dict[str, Any]:
    """The thesis's measures (ms) from one run's samples (hit, cache s, lookup s, total s, local)."""
    reads = raw["reads"]
    hits = [r for r in reads if r[0]]
    misses = [r for r in reads if not r[0]]
    ms = 1e3
    return {
        "config": raw["config"], "reads": len(reads), "writes": len(raw["writes"]),
        "hit_rate": len(hits) / len(reads) if reads else float("nan"),
        "local_hit_share": (sum(1 for r in hits if r[4]) / len(hits)) if hits else 0.0,
        "cache_ms": mean([r[1] for r in reads]) * ms,
        "cache_hit_ms": mean([r[1] for r in hits]) * ms,
        "cache_miss_ms": mean([r[1] for r in misses]) * ms,
        "total_ms": mean([r[3] for r in reads]) * ms,
        "total_hit_ms": mean([r[3] for r in hits]) * ms,
        "total_miss_ms": mean([r[3] for r in misses]) * ms,
        "lookup_ms": mean([r[2] for r in misses]) * ms,
        "total_p50_ms": pct([r[3] for r in reads], 50) * ms,
        "total_p99_ms": pct([r[3] for r in reads], 99) * ms,
        "cache_hit_p99_ms": pct([r[1] for r in hits], 99) * ms,
        "invalidate_ms": mean(raw["writes"]) * ms,
        "requests_per_s": (len(reads) + len(raw["writes"])) / raw["wall_s"],
        "cpu_us_per_request": {k: v * 1e6 / max(1, len(reads) + len(raw["writes"])) for k, v in raw["cpu_s"].items()},
        "wall_s": raw["wall_s"], "startup_s": raw["startup_s"],
    }


def merge_repeats(results: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """One entry per configuration: the mean of its repeats, with each repeat's total and hit rate."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for rid, r in sorted(results.items()):
        groups.setdefault(rid.split("-rep")[0], []).append(r)
    merged: Dict[str, Dict[str, Any]] = {}
    for rid, rs in groups.items():
        m = dict(rs[0])
        for k, v in rs[0].items():
            if isinstance(v, float):
                m[k] = mean([r[k] for r in rs])
        m["repeats_total_ms"] = [r["total_ms"] for r in rs]
        m["repeats_hit_rate"] = [r["hit_rate"] for r in rs]
        merged[rid] = m
    return merged


def machine(cairn_bin: str) -> str:
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    load = open("/proc/loadavg").read().split()[:3]
    # The commit the measured binary was built from (issue 20: every page names its commit).
    commit = rig.binary_commit(cairn_bin) or "unknown commit"
    return (f"{platform.node()}: {cores} cores, Linux {platform.release()}, cairn {commit}, "
            f"load average {' '.join(load)} at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs (a smoke test of the rig, < 5 minutes)")
    ap.add_argument("--out", type=Path, help="output directory (default studies/thesis/results[/quick])")
    ap.add_argument("--requests", type=int, help="requests per run (default 40,000; quick 1,500)")
    ap.add_argument("--users", type=int, default=12, help="simulated users, dealt over the nodes (default 12)")
    ap.add_argument("--db-latency-ms", type=float, default=10.0, help="added latency per database call")
    ap.add_argument("--cairn-bin", default=str(rig.ROOT / "target/release/cairn-server"))
    ap.add_argument("--rate", type=float, help="requests per second over all users (default 700; 0: unpaced)")
    ap.add_argument("--repeats", type=int, help="runs of the 3- and 12-node figures (default 3; quick 1)")
    ap.add_argument("--fresh", action="store_true", help="discard the results of earlier runs")
    ap.add_argument("--only", help="comma-separated run ids to (re)run, for debugging")
    args = ap.parse_args()

    out = args.out or (rig.HERE / "results" / ("quick" if args.quick else ""))
    requests = args.requests or (1500 if args.quick else 40000)
    rate = 700.0 if args.rate is None else args.rate
    repeats = args.repeats or (1 if args.quick else 3)
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    store = out / "runs.json"
    done: Dict[str, Any] = {} if args.fresh or not store.exists() else json.loads(store.read_text())
    def rid_of(cfg: Dict[str, Any], rep: int) -> str:
        return run_id(cfg, requests) + (f"-rep{rep}" if rep else "")

    only = set(args.only.split(",")) if args.only else set()
    todo = [(c, rep) for c, rep in plan(args.quick, repeats) if rid_of(c, rep) not in done or rid_of(c, rep) in only]
    print(f"[thesis] {len(todo)} runs of {requests} requests to do ({len(done)} kept) -> {out}", flush=True)

    t_start = time.monotonic()
    if todo:
        pg = rig.Postgres().start()
        try:
            pg.load(max(c["shared"] + c["nonshared"] for c, _ in todo))
            for i, (cfg, rep) in enumerate(todo):
                rid = rid_of(cfg, rep)
                run = rig.Run(cfg, pg, args.cairn_bin, args.users, requests, args.db_latency_ms, logs, rate)
                try:
                    res = summarize(run.execute())
                finally:
                    run.close()
                res.update(requests=requests, users=args.users, db_latency_ms=args.db_latency_ms, rate=rate, repeat=rep)
                done[rid] = res
                store.write_text(json.dumps(done, indent=1, sort_keys=True))
                print(f"[thesis] {i + 1}/{len(todo)} {rid}: hit {res['hit_rate']:.1%}, total {res['total_ms']:.2f} ms,"
                      f" cache hit {res['cache_hit_ms']:.3f} ms, {res['requests_per_s']:.0f} req/s", flush=True)
        finally:
            pg.close()

    results = merge_repeats({rid: r for rid, r in done.items() if f"-q{requests}" in rid})
    meta = {"machine": machine(args.cairn_bin), "requests": requests, "users": args.users, "db_latency_ms": args.db_latency_ms,
            "quick": args.quick, "rate": rate, "repeats": repeats,
            "run_s": sum(r["wall_s"] + r["startup_s"] for rid, r in done.items() if f"-q{requests}" in rid)}
    (out / "summary.md").write_text(plots.render(results, meta, FIGURES, BASE,
                                                 QUICK_SWEEPS if args.quick else SWEEPS, run_id, out))
    print(f"[thesis] figures and {out / 'summary.md'} written in {time.monotonic() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
