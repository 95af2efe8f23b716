#!/usr/bin/env python3
"""cairn benchmark orchestrator: cairn against Redis and memcached, side by side.

    .venv/bin/python bench/run.py --quick            # < 3 minutes, results in bench/results/quick/
    .venv/bin/python bench/run.py                    # full mode, results in bench/results/
    .venv/bin/python bench/run.py --suites null,memory --repeats 5

Every server runs on free loopback ports and is stopped at the end of its suite.
Each measurement samples the server's CPU time (utime + stime from
/proc/PID/stat) and RSS around one cairn-bench run; every configuration is
repeated (round-robin over the servers, so slow drifts of a shared machine hit
every server alike) and reported as the median with its spread (min..max).

Outputs per suite: <suite>.json (every sample), <suite>.md (tables with ratios
to the peers measured in the same run) and <suite>*.png; plus summary.md, composed
from every <suite>.json present (each row names the run it came from, so running
one suite updates its rows only), with issue 19's figures against their goals.
See bench/README.md for what each suite measures.
"""

# This file holds the command line; the harness (servers, measurements, tables) is
# bench/harness.py, the plots bench/plots.py, summary.md bench/summary.py, and each suite is a
# module of bench/suites/ with run(opts, runner, machine).

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import ROOT, SUITES, Runner, binary_info, log, machine_info  # noqa: E402
import threads  # noqa: E402
from app_harness import binary_stamp  # noqa: E402
from suites import eviction, latency, mdcached, memory, null, pipeline, scaling, sql  # noqa: E402
from summary import write_summary  # noqa: E402


def sql_suite(opts, runner, machine):
    """The SQL suite of bench/app_suites.py (SELECT by primary key against GET in the same server, issue
    19 part 5), with its own repeat count: one in quick mode, at least 5 in full mode, as there."""
    sql.run(argparse.Namespace(**{**vars(opts), "repeats": 1 if opts.quick else max(opts.repeats, 5)}),
            {**machine, "cairn_binary": binary_stamp()})


SUITE_FUNCS = {"mdcached": mdcached.run, "null": null.run, "pipeline": pipeline.run, "memory": memory.run,
               "scaling": scaling.run, "latency": latency.run, "eviction": eviction.run, "threads": threads.run,
               "sql": sql_suite}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs, smaller data (< 3 minutes on 2 cores)")
    ap.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per configuration (median and spread; at least 3)")
    ap.add_argument("--duration", type=float, default=None, help="override each run's duration in seconds")
    ap.add_argument("--out", default=None, help="results directory (default bench/results, or bench/results/quick)")
    ap.add_argument("--cairn", default=str(ROOT / "target" / "release" / "cairn-server"))
    ap.add_argument("--bench", default=str(ROOT / "target" / "release" / "cairn-bench"))
    ap.add_argument("--max-other-load", type=float, default=0.5,
                    help="cores other processes may keep busy during a run before it is measured again (default 0.5)")
    ap.add_argument("--noisy-retries", type=int, default=None,
                    help="how many times a noisy run is measured again (default 2 in full mode, 0 in quick mode)")
    ap.add_argument("--summary-only", action="store_true",
                    help="only rewrite summary.md from the JSON already in the results directory")
    opts = ap.parse_args(argv)
    if opts.noisy_retries is None:
        opts.noisy_retries = 0 if opts.quick else 2
    if opts.out is None:
        opts.out = str(ROOT / "bench" / "results" / ("quick" if opts.quick else ""))
    if opts.summary_only:
        if not any((Path(opts.out) / f"{n}.json").exists() for n in SUITES):
            ap.error(f"no results in {opts.out}")
        write_summary(opts.out, opts.quick)
        return
    harness.CAIRN_BIN, harness.BENCH_BIN = Path(opts.cairn), Path(opts.bench)
    for b in (harness.CAIRN_BIN, harness.BENCH_BIN):
        if not os.access(b, os.X_OK):
            ap.error(f"{b} is missing: run `cargo build --release -p cairn-server -p cairn-bench`")
    for tool in ("redis-server", "memcached"):
        if not shutil.which(tool):
            ap.error(f"{tool} is not installed (scripts/setup.sh installs it)")
    wanted = [x.strip() for x in opts.suites.split(",") if x.strip()]
    bad = [x for x in wanted if x not in SUITE_FUNCS]
    if bad:
        ap.error(f"unknown suites {bad}; choose from {SUITES}")
    Path(opts.out).mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    machine["cairn_binary"] = binary_info(harness.CAIRN_BIN)
    machine["cairn_default_threads"] = harness.cairn_default_threads()
    t0 = time.monotonic()
    done, failed = [], []
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as wd:
        runner = Runner(opts, wd)
        for name in SUITES:
            if name not in wanted:
                continue
            ts = time.monotonic()
            log(f"suite {name} ...")
            try:
                SUITE_FUNCS[name](opts, runner, machine)
            except Exception:
                import traceback

                log(f"suite {name} FAILED after {time.monotonic() - ts:.0f}s:\n{traceback.format_exc()}")
                failed.append(name)
                continue
            done.append(name)
            log(f"suite {name} done in {time.monotonic() - ts:.0f}s -> {opts.out}/{name}.md")
    write_summary(opts.out, opts.quick)
    log(f"all done in {time.monotonic() - t0:.0f}s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
