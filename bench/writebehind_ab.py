#!/usr/bin/env python3
"""A/B of a mapped SET's CPU between two cairn binaries, for a loaded machine:

    .venv/bin/python bench/writebehind_ab.py BASE_BINARY NEW_BINARY ROUNDS SETS

Four servers (each binary without a mapping and with a `value = "string"` mapping under `wb-fsync
everysec`, one private durable PostgreSQL behind both) take SETS pipelined SETs in turn each round
(bench/writebehind.py's client and payloads); the mapped ones are drained between rounds. Prints
each server's CPU per SET (all its threads), the `wb-*` threads' share, and the mapped/unmapped
ratio per binary (of the medians, and the median of each round's ratio)."""

import collections
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import writebehind as W  # noqa: E402

base, new = (str(Path(b).resolve()) for b in sys.argv[1:3])
rounds, n = int(sys.argv[3]), int(sys.argv[4])
wb_ns = W.wb_threads_ns
pg = W.Pg(durable=True).start()
servers = {}
try:
    for i, (label, binary, mapped) in enumerate([("base off", base, False), ("base on", base, True),
                                                 ("new off", new, False), ("new on", new, True)]):
        srv = W.cairn(binary)
        if mapped:
            pg.sql(f"CREATE TABLE t{i} (id text PRIMARY KEY, body text)")
            srv.add_mapping("s", pg, f"t{i}", "string")
        servers[label] = (srv, mapped)
    reqs = W.payloads("SET", "s:", n)
    res = collections.defaultdict(list)
    for r in range(rounds):
        for label, (srv, mapped) in servers.items():
            pid = srv.proc.pid
            c0, w0 = W.cpu_ns(pid), wb_ns(pid)
            W.pipelined(srv.port, reqs)
            res[label].append((W.cpu_ns(pid) - c0) / 1e3 / n)
            res[label + " wb"].append((wb_ns(pid) - w0) / 1e3 / n)
            if mapped:
                srv.drain(["s"])
        print(f"round {r}: " + "; ".join(f"{k} {v[-1]:.3f}" for k, v in res.items() if not k.endswith("wb")), flush=True)
    m = {k: statistics.median(v) for k, v in res.items()}
    ratios = {b: statistics.median([on / off for on, off in zip(res[f"{b} on"], res[f"{b} off"])]) for b in ("base", "new")}
    print({k: round(v, 3) for k, v in m.items()})
    print("ratio of medians: base %.2f new %.2f" % (m["base on"] / m["base off"], m["new on"] / m["new off"]),
          "median of per-round ratios: base %.2f new %.2f" % (ratios["base"], ratios["new"]))
    print("load", open("/proc/loadavg").read().strip())
finally:
    for srv, _ in servers.values():
        srv.stop()
    pg.close()
