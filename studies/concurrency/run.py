"""The concurrency-control study (seed 003, Dev & Chirkova): a primary copy, 2-10 replica caches
and a database, on real parts (cairn and PostgreSQL), for the seed's grid: batches of 10, 100 and
250 requests, read:write 1:1, 4:1 and 9:1, 2, 3, 5 and 10 replicas, and the schemes of rig.SCHEMES.

A *cell* is (scheme, replicas, batch, ratio); each is measured ``--runs`` times (each run: every
replica's client completes ``--batches`` batches at once, and the run's figure is the mean batch
latency over clients and batches), after one unmeasured warm-up batch. Each cell's result is one
JSON file in ``<out>/cells/``; a rerun skips measured cells (``--fresh`` discards them), so an
interrupted study resumes. A scheme whose write mode the server refuses (write-through, before it
exists) gets cells that say "not available at <commit>", and is retried by every rerun.

    python studies/concurrency/run.py            # the full grid: 252 cells x 3 runs
    python studies/concurrency/run.py --quick    # 2 replicas only, one batch per run (< 5 minutes)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clients  # noqa: E402
import plots  # noqa: E402
import rig  # noqa: E402

BATCHES = [10, 100, 250]
RATIOS = [1, 4, 9]  # reads per write
REPLICAS = [2, 3, 5, 10]
QUICK_REPLICAS = [2]


def cell_id(scheme: str, replicas: int, batch: int, ratio: int) -> str:
    return f"{scheme}-r{replicas}-b{batch}-rw{ratio}"


def plan(schemes: List[str], replicas: List[int]) -> List[Tuple[str, int, int, int]]:
    """Cells in run order: one cluster per (scheme, replicas), its nine cells back to back."""
    return [(s, n, b, r) for s in schemes for n in replicas for b in BATCHES for r in RATIOS]


class Clients:
    """One client process per replica, driven over pipes so that all start a batch together."""

    def __init__(self, cluster: rig.Cluster, near: bool, keys: int, conns: int) -> None:
        # Pools open connections on demand, so a batch of 10 uses at most 10 of them.
        ctx = mp.get_context("spawn")
        self.pipes: List[Any] = []
        self.procs: List[Any] = []
        for i, port in enumerate(cluster.replica_ports):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=clients.serve, args=(child, cluster.primary_port, port, cluster.replicas, near,
                                                          keys, conns, 1000 + i), daemon=True)
            p.start()
            self.pipes.append(parent)
            self.procs.append(p)
        for msg in self._gather(120):
            if msg[0] != "ready":
                raise RuntimeError(f"a client failed to start: {msg}")

    def _gather(self, timeout: float) -> List[Tuple[Any, ...]]:
        out = []
        for pipe in self.pipes:
            if not pipe.poll(timeout):
                raise RuntimeError(f"a client did not answer within {timeout:.0f} s")
            out.append(pipe.recv())
        return out

    def batches(self, size: int, ratio: int, count: int) -> Tuple[List[List[float]], Dict[str, float]]:
        """Each client's batch times, and the near caches' counters and the clients' CPU seconds
        (``client_cpu_s``) summed over clients."""
        for pipe in self.pipes:
            pipe.send(("batch", size, ratio, count))
        times: List[List[float]] = []
        near: Dict[str, float] = {"client_cpu_s": 0.0}
        for msg in self._gather(600):
            if msg[0] != "done":
                raise RuntimeError(f"a client failed: {msg[1]}")
            if msg[2]:
                raise RuntimeError(f"a client saw wrong answers: {msg[2]}")
            times.append(msg[1])
            near["client_cpu_s"] += msg[4]
            for k, v in msg[3].items():
                near[k] = near.get(k, 0) + v
        return times, near

    def close(self) -> None:
        for pipe in self.pipes:
            try:
                pipe.send(("stop",))
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join()


def measure_cell(cluster: rig.Cluster, cl: Clients, batch: int, ratio: int, runs: int,
                 batches: int) -> Dict[str, Any]:
    cl.batches(batch, ratio, 1)  # warm-up: connections opened, near caches filled
    cpu0 = cluster.cpu_seconds()
    run_ms: List[float] = []
    per_client: List[List[float]] = []
    near: Dict[str, float] = {}
    t0 = time.monotonic()
    for _ in range(runs):
        times, n = cl.batches(batch, ratio, batches)
        means = [statistics.fmean(t) * 1e3 for t in times]
        per_client.append(means)
        run_ms.append(statistics.fmean(means))
        for k, v in n.items():
            near[k] = near.get(k, 0) + v
    wall = time.monotonic() - t0
    cpu = {k: v - cpu0[k] for k, v in cluster.cpu_seconds().items()}
    requests = runs * batches * batch * cluster.replicas
    # CPU per request of each part (clock ticks of 10 ms: meaningful only for the larger cells).
    cpu["clients"] = near.pop("client_cpu_s")
    return {"status": "measured", "runs_ms": run_ms, "median_ms": statistics.median(run_ms),
            "min_ms": min(run_ms), "max_ms": max(run_ms), "per_client_ms": per_client,
            "writes_per_batch": max(1, round(batch / (ratio + 1))), "near": near, "wall_s": wall,
            "cpu_us_per_request": {k: v * 1e6 / requests for k, v in cpu.items()}}


def machine(cairn_bin: str, commit: Optional[str]) -> Dict[str, str]:
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    return {"commit": commit or rig.binary_commit(cairn_bin) or "unknown commit",
            "text": f"{platform.node()}: {cores} cores, Linux {platform.release()}, load average {load} at start, "
                    f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 replicas, one batch per run (a rig check, < 5 minutes)")
    ap.add_argument("--out", type=Path, help="output directory (default studies/concurrency/results[/quick])")
    ap.add_argument("--replicas", help="comma-separated degrees of replication (default 2,3,5,10; quick 2)")
    ap.add_argument("--schemes", help=f"comma-separated schemes (default all: {','.join(rig.SCHEMES)})")
    ap.add_argument("--runs", type=int, default=3, help="runs per cell (default 3)")
    ap.add_argument("--batches", type=int, help="batches per client per run (default 3; quick 1)")
    ap.add_argument("--keys", type=int, default=1,
                    help="objects the requests touch (default 1: the seed's 'same data object')")
    ap.add_argument("--max-conns", type=int, default=250,
                    help="connections per client to each server at most (default 250: a batch's requests all at once)")
    ap.add_argument("--db-latency-ms", type=float, default=0.0,
                    help="latency added to each writing database transaction (default 0)")
    ap.add_argument("--cairn-bin", default=str(rig.ROOT / "target/release/cairn-server"))
    ap.add_argument("--cairn-commit", help="the commit --cairn-bin was built from, where its own stamp (the"
                    " build tree's HEAD) is not it, e.g. another branch's sources built in this tree")
    ap.add_argument("--fresh", action="store_true", help="discard the results of earlier runs")
    args = ap.parse_args()

    out = args.out or (rig.HERE / "results" / ("quick" if args.quick else ""))
    replicas = ([int(x) for x in args.replicas.split(",")] if args.replicas
                else QUICK_REPLICAS if args.quick else REPLICAS)
    schemes = args.schemes.split(",") if args.schemes else list(rig.SCHEMES)
    unknown = [s for s in schemes if s not in rig.SCHEMES]
    if unknown:
        ap.error(f"unknown schemes {unknown}: the schemes are {list(rig.SCHEMES)}")
    batches = args.batches or (1 if args.quick else 3)
    cells_dir = out / "cells"
    logs = out / "logs"
    cells_dir.mkdir(parents=True, exist_ok=True)
    logs.mkdir(exist_ok=True)
    if args.fresh:
        for f in cells_dir.glob("*.json"):
            f.unlink()
    params = {"runs": args.runs, "batches": batches, "keys": args.keys, "max_conns": args.max_conns,
              "db_latency_ms": args.db_latency_ms}
    mach = machine(args.cairn_bin, args.cairn_commit)

    def done(cid: str) -> bool:
        f = cells_dir / f"{cid}.json"
        if not f.exists():
            return False
        r = json.loads(f.read_text())
        return r.get("status") == "measured" and r.get("params") == params

    cells = plan(schemes, replicas)
    todo = [c for c in cells if not done(cell_id(*c))]
    print(f"[concurrency] {len(todo)} of {len(cells)} cells to measure -> {out}", flush=True)
    t_start = time.monotonic()
    if todo:
        origin = rig.Origin(rows=max(1000, args.keys), db_latency_ms=args.db_latency_ms)
        try:
            refused: Dict[str, Optional[str]] = {}
            for mode in sorted({str(rig.SCHEMES[s]["mode"]) for s, *_ in todo}):
                refused[mode] = rig.unavailable_reason(args.cairn_bin, mode, origin.url)
            groups: Dict[Tuple[str, int], List[Tuple[int, int]]] = {}
            for s, n, b, r in todo:
                groups.setdefault((s, n), []).append((b, r))
            i = 0
            for (scheme, n), grid in groups.items():
                spec = rig.SCHEMES[scheme]
                reason = refused[str(spec["mode"])]
                if reason:
                    for b, r in grid:
                        i += 1
                        cid = cell_id(scheme, n, b, r)
                        res = {"status": "unavailable", "reason": reason, "commit": mach["commit"]}
                        (cells_dir / f"{cid}.json").write_text(json.dumps(res, indent=1))
                    print(f"[concurrency] {scheme} with {n} replicas: not available at {mach['commit']}: {reason}",
                          flush=True)
                    continue
                cluster = rig.Cluster(scheme, n, origin, args.cairn_bin, args.keys, logs).start()
                cl: Optional[Clients] = None
                try:
                    cl = Clients(cluster, bool(spec["near"]), args.keys, args.max_conns)
                    for b, r in grid:
                        i += 1
                        cid = cell_id(scheme, n, b, r)
                        res = measure_cell(cluster, cl, b, r, args.runs, batches)
                        cluster.check_database()  # the writes reached the rows: else no result
                        if not cluster.alive():
                            raise RuntimeError(f"a cairn process of {cid} exited: see {logs}")
                        res.update(params=params, commit=mach["commit"], scheme=scheme, replicas=n, batch=b,
                                   ratio=r)
                        (cells_dir / f"{cid}.json").write_text(json.dumps(res, indent=1))
                        print(f"[concurrency] {i}/{len(todo)} {cid}: median {res['median_ms']:.2f} ms"
                              f" ({res['min_ms']:.2f}-{res['max_ms']:.2f})", flush=True)
                finally:
                    if cl is not None:
                        cl.close()
                    cluster.close()
        finally:
            origin.close()

    results = {}
    for s, n, b, r in cells:
        f = cells_dir / f"{cell_id(s, n, b, r)}.json"
        if f.exists():
            results[(s, n, b, r)] = json.loads(f.read_text())
    meta = {"machine": mach, "params": params, "quick": args.quick, "replicas": replicas, "schemes": schemes}
    (out / "summary.md").write_text(plots.render(results, meta, out))
    print(f"[concurrency] tables, figures and {out / 'summary.md'} written in {time.monotonic() - t_start:.0f} s",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
