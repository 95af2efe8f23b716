"""The latency suite: open-loop latency at 50% and 80% of each server's measured maximum, plus
disturbances. Run by `bench/run.py --suites latency`; writes latency.md, latency.json and plots
(bench/README.md).
"""

from __future__ import annotations

import os
import socket
import threading
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

# (result tag, what the table calls it): the disturbances, in the order each server runs them.
DISTURBANCES = [
    ("expire", "{nexp:,} keys expire at once"),
    ("bigdel", "100 MB value deleted"),
    ("tagdel", "TAG.DEL of {ntag:,} records"),
    ("bgsave", "BGSAVE of {nexp:,} more keys"),
    ("flushall", "FLUSHALL of {nexp:,} more keys"),
]


def run(opts, runner, machine):
    """Suite 5: open-loop latency at 50% and 80% of each server's measured max, plus disturbances."""
    s = Suite("latency", opts, runner, machine)
    d = dur(opts, 0.3, 5.0)
    n = NPROC
    names = ("cairn-1t", f"cairn-{n}t", "redis", f"memcached-{n}t")
    # LATENCY_SERVERS=cairn-1t,cairn-2t narrows the line-up (for a quick look at one server).
    names = os.environ.get("LATENCY_SERVERS", "").split(",") if os.environ.get("LATENCY_SERVERS") else names
    specs = [x for x in server_specs() if x[0] in names]
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
        # Disturbances at 50% load (disturbances() below). Full mode repeats each (round-robin over
        # the servers); quick mode runs each once.
        nexp = 50_000 if opts.quick else 1_000_000
        ntag = 10_000 if opts.quick else 100_000
        reps = 1 if opts.quick else opts.repeats
        # How fast each server takes pipelined small writes (sizes the expiry deadline below).
        load_rate = {srv.name: runner.load(srv, 20_000, 32, extra=["--key-prefix", "probe:"])["throughput"]
                     for srv in servers}
        samples = {tag: {srv.name: [] for srv in servers} for tag, _ in DISTURBANCES}
        for rep in range(reps):
            for srv in servers:
                rate = round(med(maxes[srv.name], "throughput") * 0.5)
                got = disturbances(runner, srv, ["-c", conns, "--rate", rate] + wl, d, tail_s, nexp, ntag,
                                   load_rate[srv.name], opts.quick)
                for tag, smp in got.items():
                    samples[tag][srv.name].append(smp)
        for tag, per_server in samples.items():
            for name_, v in per_server.items():
                if v:
                    s.data["results"].setdefault(tag, {})[name_] = aggregate(v) | {"samples": v}
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
            for tag, what in [("open50", "50% load, quiet")] + DISTURBANCES:
                a = s.data["results"].get(tag, {}).get(k)
                if not a:
                    continue
                rows.append([labels[k], what.format(nexp=nexp, ntag=ntag), fmt_num(med(a, "p50"), 1),
                             fmt_num(med(a, "p99"), 1), fmt_num(med(a, "p999"), 1), fmt_num(med(a, "max"), 1),
                             note_of(tag, a)])
        s.md += [f"## Disturbances at 50% load ({'one run each' if opts.quick else f'median of {opts.repeats} runs'})", "",
                 md_table(["server", "during", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "note"], rows), ""]
        groups = ["50% p50", "50% p99", "50% p99.9", "80% p50", "80% p99", "80% p99.9"]
        series = {labels[k]: [triple(s.data["results"][t][k], m) for t in ("open50", "open80") for m in ("p50", "p99", "p999")]
                  for k in labels}
        grouped_bars(s.png("latency_open_loop"), "Open-loop latency at 50% / 80% of max (90/10, 1 KB ± 500 B)",
                     "latency (µs, log scale)", groups, series, note=s.note(), log=True)
        tags = ["open50"] + [t for t, _ in DISTURBANCES]
        groups = ["quiet", "expiry", "100 MB DEL", "TAG.DEL", "BGSAVE", "FLUSHALL"]
        series = {labels[k]: [triple(s.data["results"].get(t, {}).get(k), "p99") for t in tags] for k in labels}
        grouped_bars(s.png("latency_disturbances"), "p99 at 50% load during each disturbance",
                     "latency (µs, log scale)", groups, series, note=s.note(), log=True)
    finally:
        s.stop_all()
    s.write("Suite 5: latency under load",
            "First each server's closed-loop maximum (10 connections, 90/10 over 30k keys of 1 KB ± 500 B), then "
            "open-loop runs at 50% and 80% of it. Then, at 50%, disturbances: a large batch of keys all "
            "expiring in the same second during the run, a DEL of a 100 MB value (RESP servers), a TAG.DEL of "
            "100k tagged records (cairn), a BGSAVE of a million more keys (RESP servers) and a FLUSHALL "
            "(memcached: flush_all) of them. Each server runs in its default configuration (Redis: FLUSHALL "
            "is synchronous without ASYNC, lazyfree-lazy-user-flush no).")
    return s


def note_of(tag, a):
    """The table's note for one disturbance's aggregate."""
    if tag == "expire":
        return (f"keys {med(a, 'keys_before'):,.0f} → {med(a, 'keys_after'):,.0f} at the end; expiry "
                f"{med(a, 'expiry_offset_s'):.1f} s into the run")
    if tag in ("bigdel", "tagdel", "flushall"):
        return f"the command took {med(a, 'action_seconds') * 1000:.1f} ms"
    if tag == "bgsave":
        return f"BGSAVE took {med(a, 'action_seconds') * 1000:.0f} ms to its end"
    return ""


def during(runner, srv, args, seconds, lead, action):
    """One open-loop run of `seconds` with `action(port)` run `lead` seconds into it on another
    thread; the sample gets action_seconds (how long the action took, seen from the client)."""
    took = {}

    def act():
        time.sleep(lead)
        t0 = time.monotonic()
        action(srv.port_of(srv.protocols[0]))
        took["s"] = time.monotonic() - t0

    th = threading.Thread(target=act)
    th.start()
    smp = runner.bench(srv, srv.protocols[0], ["-d", seconds] + args, check=False)
    th.join()
    if smp:
        smp["action_seconds"] = took.get("s", float("nan"))
    return smp


def bgsave_to_end(port):
    """BGSAVE, then wait until the background save is over."""
    before = resp_call(port, "LASTSAVE")
    resp_call(port, "BGSAVE")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        info = resp_call(port, "INFO", "persistence").decode()
        if "rdb_bgsave_in_progress:0" in info and resp_call(port, "LASTSAVE") != before:
            return
        time.sleep(0.005)


def tag_load(port, n):
    """n records under tl:, each tagged (type 9, value 1), pipelined."""
    from app_harness import Conn, enc

    c = Conn(port)
    c.pipeline([enc("TAG.SET", b"tl:%d" % i, b"v" * 32, "TAG", 9, 1) for i in range(n)], batch=1000)
    c.s.close()


def flush(srv):
    """The action that empties srv: FLUSHALL, or memcached's flush_all."""
    if srv.kind != "memcached":
        return lambda port: resp_call(port, "FLUSHALL")

    def flush_all(port):
        with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
            c.sendall(b"flush_all\r\n")
            c.recv(64)
    return flush_all


def disturbances(runner, srv, args, d, tail_s, nexp, ntag, load_rate, quick):
    """Each disturbance once against srv under the open-loop load `args`: {result tag: sample}."""
    proto = srv.protocols[0]
    lead = 0.4 if quick else 1.0
    seconds = max(d, 1.0 if quick else 3.0)
    out = {}
    # Keys under another prefix, all expiring in the same second, which falls inside the run: the
    # deadline leaves twice the expected load time plus a second.
    at = int(time.time() + 2 * nexp / max(load_rate, 1.0) + 1.0) + 1
    runner.bench(srv, proto, ["--load", "--keys", nexp, "--key-prefix", "exp:", "--value-size", 32,
                              "-c", 4, "-P", 64, "--expire-at", at], timeout=600)
    before = srv.info()["keys"]
    exp_lead = at - time.time()
    smp = runner.bench(srv, proto, ["-d", max(d, exp_lead + tail_s)] + args, check=False)
    if smp:
        smp.update(keys_before=before, keys_after=srv.info()["keys"], expiry_offset_s=exp_lead)
    out["expire"] = smp
    if srv.kind != "memcached":
        # A 100 MB value deleted in the middle of the run.
        resp_call(srv.resp_port, "SET", "big:value", b"x" * (100 * MB))
        out["bigdel"] = during(runner, srv, args, seconds, lead, lambda p: resp_call(p, "DEL", "big:value"))
    if srv.kind == "cairn":
        tag_load(srv.resp_port, ntag)
        out["tagdel"] = during(runner, srv, args, seconds, lead,
                               lambda p: resp_call(p, "TAG.DEL", "WHERE", 9, "=", 1))
    runner.bench(srv, proto, ["--load", "--keys", nexp, "--key-prefix", "more:", "--value-size", 32,
                              "-c", 4, "-P", 64], timeout=600)
    if srv.kind != "memcached":
        out["bgsave"] = during(runner, srv, args, seconds + (1.0 if quick else 2.0), lead, bgsave_to_end)
    out["flushall"] = during(runner, srv, args, seconds, lead, flush(srv))
    # The flush took the workload's keys too.
    runner.load(srv, 30000, "1024+-500")
    return out
