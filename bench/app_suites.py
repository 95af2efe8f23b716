#!/usr/bin/env python3
"""cairn application-level benchmark suites: typed tags, SQL tables, client tracking.

    .venv/bin/python bench/app_suites.py --quick                 # < 2 minutes -> bench/results/quick/
    .venv/bin/python bench/app_suites.py                         # full mode   -> bench/results/
    .venv/bin/python bench/app_suites.py --suite tags            # one suite (tags | sql | tracking)

Suites (the "Performance" sections of issues 4, 5 and 6; seed 002's scenario):

  tags      100,000 fragments (200 B) tagged with 30,000 pages and 1,000 users. Expire one page
            (TAG.DEL WHERE page = p), one user (~100 records), read a user's group (TAG.GET): server
            time from INFO commandstats and client round trips, next to the Redis way (a set per
            tag, SMEMBERS + DEL / MGET, as Symfony's and Laravel's adapters do) and memcached's
            flush_all; memory cost of tags per record.
  sql       the same 100,000 rows in an SQL table with indexes on page and user. DELETE by page and
            by user (round trip minus a PING round trip measured in the same run), SELECT by primary
            key throughput next to GET and TAG.GET (redis-py pipelines), and GET p50/p99 of an
            open-loop cairn-bench run alone and while another process runs full-table aggregates.
  tracking  server CPU per GET with 50 clients, CLIENT TRACKING on vs off; invalidation delivery
            latency (write -> RESP3 push) with 50 tracking clients at 10k writes/s; server memory
            per tracked key. Redis 7 is the peer for all three.

Every server runs on free loopback ports and is stopped at the end of its suite. Full mode repeats
each measurement (default 5 times, round-robin over the servers) and reports the median and the
spread ((max - min) / median); quick mode measures once with smaller batches.
Outputs: <suite>.json (every sample), <suite>.md (tables with ratios to the peers), <suite>_*.png.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as B  # noqa: E402
from app_harness import ROOT, SUITES, binary_stamp, log  # noqa: E402
from suites import sql, tags, tracking  # noqa: E402

# This file holds the command line; what the suites share is bench/app_harness.py and each suite
# is a module of bench/suites/ with run(opts, machine).
SUITE_FUNCS = {"tags": tags.run, "sql": sql.run, "tracking": tracking.run}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one repeat, smaller batches (< 2 minutes for all three)")
    ap.add_argument("--suite", action="append", choices=SUITES,
                    help="run only this suite (repeatable; default: all)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per measurement (full mode default 5, at least 3)")
    ap.add_argument("--out", default=None, help="results directory (default bench/results, or bench/results/quick)")
    ap.add_argument("--cairn", default=str(ROOT / "target" / "release" / "cairn-server"))
    ap.add_argument("--bench", default=str(ROOT / "target" / "release" / "cairn-bench"))
    opts = ap.parse_args(argv)
    if opts.repeats is None:
        opts.repeats = 1 if opts.quick else 5
    if not opts.quick and opts.repeats < 3:
        ap.error("full mode needs --repeats ≥ 3 (median and spread)")
    if opts.out is None:
        opts.out = str(ROOT / "bench" / "results" / ("quick" if opts.quick else ""))
    B.CAIRN_BIN, B.BENCH_BIN = Path(opts.cairn), Path(opts.bench)
    for b in (B.CAIRN_BIN, B.BENCH_BIN):
        if not os.access(b, os.X_OK):
            ap.error(f"{b} is missing: run `cargo build --release -p cairn-server -p cairn-bench`")
    import shutil

    for tool in ("redis-server", "memcached"):
        if not shutil.which(tool):
            ap.error(f"{tool} is not installed (scripts/setup.sh installs it)")
    wanted = opts.suite or SUITES
    machine = B.machine_info()
    machine["cairn_binary"] = binary_stamp()
    t0 = time.monotonic()
    failed = []
    for name in SUITES:
        if name not in wanted:
            continue
        ts = time.monotonic()
        log(f"app suite {name} ...")
        try:
            SUITE_FUNCS[name](opts, machine)
            log(f"app suite {name} done in {time.monotonic() - ts:.0f}s -> {opts.out}/{name}.md")
        except Exception:
            import traceback

            log(f"app suite {name} FAILED after {time.monotonic() - ts:.0f}s:\n{traceback.format_exc()}")
            failed.append(name)
    log(f"all done in {time.monotonic() - t0:.0f}s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
