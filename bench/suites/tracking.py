"""The tracking suite (issue 6): server CPU per GET with CLIENT TRACKING on and off, invalidation
delivery latency, and server memory per tracked key; Redis 7 is the peer. Run by
`bench/app_suites.py --suite tracking`; writes tracking.md / tracking.json / plots
(bench/README.md).
"""

from __future__ import annotations

import os
import random
import selectors
import statistics
import time

import harness as B
from app_harness import (
    _plt,
    agg,
    bar_panel,
    COL,
    commandstats,
    Conn,
    enc,
    fmt_num,
    fmt_ratio,
    Incomplete,
    info,
    log,
    M,
    md_table,
    met,
    MP,
    pct,
    Probe,
    QUIET,
    Report,
    S,
    save_fig,
    settle_rss,
    start_server,
    T,
    us,
    used_memory,
)


TRACK_KEYS = 10_000
TRACK_VALUE = b"v" * 32


def _get_worker(port, conns, tracking, seconds, go, out):
    """conns connections doing GETs, one in flight on each (sent all at once, then all replies read)."""
    rng = random.Random(os.getpid())
    cs = []
    for _ in range(conns):
        c = Conn(port, resp3=True)
        if tracking:
            c.call("CLIENT", "TRACKING", "ON")
        cs.append(c)
    reqs = [enc("GET", b"t:%05d" % rng.randrange(TRACK_KEYS)) for _ in range(4096)]
    go.wait()
    done, i = 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in cs:
            c.s.sendall(reqs[i & 4095])
            i += 1
        for c in cs:
            c.reply()
        done += len(cs)
    out.put(done)
    for c in cs:
        c.close()


def _cpu_run(kind, tracking, clients, procs, seconds):
    srv = start_server(kind)
    try:
        c = Conn(srv.resp_port)
        c.pipeline([enc("SET", b"t:%05d" % i, TRACK_VALUE) for i in range(TRACK_KEYS)])
        go, out = MP.Event(), MP.Queue()
        ws = [MP.Process(target=_get_worker, args=(srv.resp_port, clients // procs, tracking, seconds, go, out),
                         daemon=True) for _ in range(procs)]
        for w in ws:
            w.start()
        time.sleep(0.5)  # connections up
        calls0 = commandstats(srv.resp_port).get("get", (0, 0))[0]
        probe = Probe(srv)
        cpu0, m0, t0 = srv.cpu_seconds(), B.machine_busy_seconds(), time.monotonic()
        go.set()
        gets = sum(out.get(timeout=seconds + 60) for _ in ws)
        wall = time.monotonic() - t0
        cpu, mach = srv.cpu_seconds() - cpu0, B.machine_busy_seconds() - m0
        for w in ws:
            w.join(10)
        noise = probe.stop()
        calls = commandstats(srv.resp_port).get("get", (0, 0))[0] - calls0
        c.close()
        return {"cpu_us_per_get": cpu * 1e6 / max(calls, 1), "gets_per_s": gets / wall,
                "server_cores_busy": cpu / wall, "machine_cores_busy": mach / wall, "gets": calls,
                "other_cores_busy": noise["other_cores_busy"]}
    finally:
        srv.stop()


def _inv_receiver(port, clients, keys_per_client, ready, out):
    """clients RESP3 connections, default tracking mode; client j reads (and so tracks) keys inv:<j>:<i>.
    Records the arrival time of each key's invalidation push."""
    cs = []
    for j in range(clients):
        c = Conn(port, resp3=True)
        c.call("CLIENT", "TRACKING", "ON")
        c.pipeline([enc("GET", b"inv:%d:%d" % (j, i)) for i in range(keys_per_client)])
        cs.append(c)
    sel = selectors.DefaultSelector()
    for c in cs:
        c.s.setblocking(False)
        c.nofill = True
        sel.register(c.s, selectors.EVENT_READ, c)
    ready.set()
    total = clients * keys_per_client
    times = {}
    other = 0
    deadline = time.monotonic() + 300
    while len(times) < total and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            c = key.data
            try:
                chunk = c.s.recv(1 << 20)
            except BlockingIOError:
                continue
            now = time.perf_counter_ns()
            if not chunk:
                raise ConnectionError("receiver connection closed")
            c.buf = c.buf[c.pos:] + chunk
            c.pos = 0
            while True:  # parse every complete message in the buffer
                start = c.pos
                try:
                    v = c.read()
                except Incomplete:
                    c.pos = start
                    break
                if isinstance(v, tuple) and v[1] and v[1][0] == b"invalidate" and v[1][1]:
                    for k in v[1][1]:
                        times[k] = now
                else:
                    other += 1
    out.put((times, other))


def _inv_writer(port, keys, rate):
    """Writes each key once at `rate` per second (open loop: due writes go out together; replies are read
    when they come). Returns {key: send time ns} and the achieved rate."""
    c = Conn(port)
    c.s.setblocking(False)
    sent = {}
    interval = 1e9 / rate
    n = len(keys)
    i, replies = 0, 0
    start = time.perf_counter_ns()
    pending = b""
    while i < n or replies < n:
        now = time.perf_counter_ns()
        due = min(n, int((now - start) / interval) + 1)
        if due > i:
            t = time.perf_counter_ns()
            pending += b"".join(enc("SET", keys[k], b"x") for k in range(i, due))
            for k in range(i, due):
                sent[keys[k]] = t
            i = due
        if pending:
            try:
                m = c.s.send(pending)
                pending = pending[m:]
            except BlockingIOError:
                pass
        try:
            chunk = c.s.recv(1 << 20)
            replies += chunk.count(b"\r\n")
        except BlockingIOError:
            pass
        if i < n:
            nxt = start + i * interval
            slack = (nxt - time.perf_counter_ns()) / 1e9
            if slack > 0.0002:
                time.sleep(slack - 0.0001)
        elif replies < n:
            time.sleep(0.0002)
    elapsed = (time.perf_counter_ns() - start) / 1e9
    c.close()
    return sent, n / elapsed


def _stall_ms(sent, times):
    """Longest stretch (ms) during which pushes were due but none arrived: the worst gap between consecutive
    push arrival times while writes kept being sent (a stall of the server or of the receiver's scheduling)."""
    arr = sorted(times.values())
    if len(arr) < 2:
        return float("nan")
    return max(b - a for a, b in zip(arr, arr[1:])) / 1e6


def _latency_run(kind, clients, writes, rate):
    srv = start_server(kind)
    try:
        per = writes // clients
        keys = [b"inv:%d:%d" % (j, i) for i in range(per) for j in range(clients)]  # interleaved over clients
        c = Conn(srv.resp_port)
        c.pipeline([enc("SET", k, b"v") for k in keys])
        c.close()
        ready, out = MP.Event(), MP.Queue()
        p = MP.Process(target=_inv_receiver, args=(srv.resp_port, clients, per, ready, out), daemon=True)
        p.start()
        if not ready.wait(120):
            raise RuntimeError("receiver did not start")
        time.sleep(0.3)
        probe = Probe(srv)
        c0 = srv.cpu_seconds()
        sent, achieved = _inv_writer(srv.resp_port, keys, rate)
        times, other = out.get(timeout=300)
        cpu = srv.cpu_seconds() - c0
        p.join(10)
        noise = probe.stop()
        lat = [times[k] - sent[k] for k in sent if k in times]
        return {"p50_us": pct(lat, 50) / 1e3, "p90_us": pct(lat, 90) / 1e3, "p99_us": pct(lat, 99) / 1e3,
                "p999_us": pct(lat, 99.9) / 1e3, "max_us": max(lat) / 1e3 if lat else float("nan"),
                "lost": len(sent) - len(lat), "writes_per_s": achieved, "writes": len(sent),
                "server_cpu_us_per_write": cpu * 1e6 / len(sent), "other_cores_busy": noise["other_cores_busy"],
                "stall_ms": _stall_ms(sent, times)}
    finally:
        srv.stop()


def _memory_run(kind, n):
    srv = start_server(kind)
    try:
        c = Conn(srv.resp_port)
        keys = [b"mem:%08d" % i for i in range(n)]
        c.pipeline([enc("SET", k, b"v") for k in keys], batch=2000)
        t = Conn(srv.resp_port, resp3=True)
        t.call("CLIENT", "TRACKING", "ON")
        u0, r0 = used_memory(srv.resp_port), settle_rss(srv, 0.5)
        t.pipeline([enc("GET", k) for k in keys], batch=2000)
        u1, r1 = used_memory(srv.resp_port), settle_rss(srv, 0.5)
        extra = {}
        if kind == "redis":
            extra["tracking_total_keys"] = int(info(srv.resp_port, "stats").get("tracking_total_keys", "0"))
        t.close()
        c.close()
        return {"rss_per_key": (r1 - r0) / n, "used_memory_per_key": (u1 - u0) / n, **extra}
    finally:
        srv.stop()


def run(opts, machine):
    started = time.monotonic()
    q = opts.quick
    clients, rate = 50, 10_000
    cpu_s = 1.5 if q else 4.0
    writes = 10_000 if q else 30_000
    mem_n = 100_000 if q else 300_000
    rep = Report("tracking", opts, machine, {"clients": clients, "get_processes": 2, "get_keys": TRACK_KEYS,
                                             "get_run_seconds": cpu_s, "writes_per_s": rate,
                                             "writes_per_latency_run": writes, "tracked_keys_memory": mem_n})
    samples = {f"{k}_{m}": [] for k in ("cairn", "redis") for m in ("cpu_off", "cpu_on", "latency", "memory")}
    for r_i in range(opts.repeats):
        for kind in ("cairn", "redis"):  # alternate off / on so drifts of the shared box hit both
            off = _cpu_run(kind, False, clients, 2, cpu_s)
            on = _cpu_run(kind, True, clients, 2, cpu_s)
            on["ratio_on_off"] = on["cpu_us_per_get"] / off["cpu_us_per_get"]
            samples[f"{kind}_cpu_off"].append(off)
            samples[f"{kind}_cpu_on"].append(on)
        for kind in ("cairn", "redis"):
            samples[f"{kind}_latency"].append(_latency_run(kind, clients, writes, rate))
        if r_i == 0 or not q:
            for kind in ("cairn", "redis"):
                samples[f"{kind}_memory"].append(_memory_run(kind, mem_n))
        log(f"tracking: repeat {r_i + 1}/{opts.repeats} done "
            f"(cairn on/off {samples['cairn_cpu_on'][-1]['ratio_on_off']:.2f}, "
            f"push p99 {samples['cairn_latency'][-1]['p99_us']:.0f} µs)")
    rep.data["samples"] = samples
    res = rep.data["results"]
    for k, v in samples.items():
        res[k] = agg(v)

    rows = []
    for kind in ("cairn", "redis"):
        off, on = res[f"{kind}_cpu_off"], res[f"{kind}_cpu_on"]
        rows.append([kind, f"{M(off, 'cpu_us_per_get'):.2f} {S(off, 'cpu_us_per_get')}",
                     f"{M(on, 'cpu_us_per_get'):.2f} {S(on, 'cpu_us_per_get')}",
                     f"{M(on, 'ratio_on_off'):.2f}× {S(on, 'ratio_on_off')}",
                     fmt_num(M(off, "gets_per_s")), fmt_num(M(on, "gets_per_s")),
                     f"{M(off, 'other_cores_busy'):.2f} / {M(on, 'other_cores_busy'):.2f}",
                     f"≤ 1.15×: {met(M(on, 'ratio_on_off'), 1.15)}" if kind == "cairn" else ""])
    rows.append(["cairn / Redis", fmt_ratio(M(res["cairn_cpu_off"], "cpu_us_per_get"), M(res["redis_cpu_off"], "cpu_us_per_get")),
                 fmt_ratio(M(res["cairn_cpu_on"], "cpu_us_per_get"), M(res["redis_cpu_on"], "cpu_us_per_get")),
                 "", "", "", "", ""])
    lrows = []
    for kind in ("cairn", "redis"):
        a = res[f"{kind}_latency"]
        lrows.append([kind, fmt_num(M(a, "writes_per_s")), f"{us(M(a, 'p50_us'))} {S(a, 'p50_us')}",
                      us(M(a, "p90_us")), f"{us(M(a, 'p99_us'))} {S(a, 'p99_us')}", us(M(a, "p999_us")),
                      us(M(a, "max_us")), fmt_num(M(a, "lost")), f"{M(a, 'server_cpu_us_per_write'):.1f}",
                      f"{M(a, 'stall_ms'):.1f}", f"{M(a, 'other_cores_busy'):.2f}",
                      f"≤ 1,000 µs: {met(M(a, 'p99_us'), 1000)}" if kind == "cairn" else ""])
    lc, lr = res["cairn_latency"], res["redis_latency"]
    lrows.append(["cairn / Redis", "", fmt_ratio(M(lc, "p50_us"), M(lr, "p50_us")), "",
                  fmt_ratio(M(lc, "p99_us"), M(lr, "p99_us")), "", "", "", "", "", "", ""])
    mrows = []
    for kind in ("cairn", "redis"):
        a = res[f"{kind}_memory"]
        mrows.append([kind, f"{M(a, 'rss_per_key'):.1f} {S(a, 'rss_per_key')}",
                      f"{M(a, 'used_memory_per_key'):.1f}"])
    mrows.append(["cairn / Redis (RSS)", fmt_ratio(M(res["cairn_memory"], "rss_per_key"), M(res["redis_memory"], "rss_per_key")), ""])
    rep.md += [
        "## Server CPU per GET, CLIENT TRACKING on vs off", "",
        f"{clients} RESP3 connections from 2 Python processes ({clients // 2} each), each connection with one GET "
        f"in flight, uniformly over {TRACK_KEYS:,} keys of 32 B, {cpu_s:g} s per run; with tracking ON every "
        "connection has `CLIENT TRACKING ON` (default mode: the server remembers every key each client read). A "
        "fresh server per run, off and on alternated. CPU per GET = server utime + stime (/proc) over the run / "
        "GET calls (INFO commandstats). The Python clients, not the servers, set the pace.", "",
        md_table(["server", "CPU µs/GET off", "CPU µs/GET on", "on / off", "GET/s off", "GET/s on",
                  "other load (cores) off / on", "target (issue 6)"], rows), "",
        "## Invalidation delivery latency (write → push)", "",
        f"{clients} RESP3 connections in one receiver process with `CLIENT TRACKING ON` (default mode); client j "
        f"first reads its own {writes // clients:,} keys. A writer process then SETs each key once, interleaved over "
        f"the clients, at {rate:,} writes/s (open loop: writes due together go out in one send), so every write "
        "invalidates one tracked key of one client. Latency = arrival of the `invalidate` push at the receiver's "
        "`recv()` − the writer's send time (CLOCK_MONOTONIC, both processes); includes Python's wake-up on both "
        "sides. µs.", "",
        md_table(["server", "writes/s achieved", "p50", "p90", "p99", "p99.9", "max", "lost", "server CPU µs / write",
                  "longest gap between pushes (ms)", "other load (cores)", "target (issue 6)"], lrows), "",
        "Runs where the rest of the machine kept < %s cores busy: " % QUIET + "; ".join(
            f"{kind} p99 {us(statistics.median(q))} µs over {len(q)} of {len(samples[f'{kind}_latency'])} runs"
            if q else f"{kind}: none" for kind, q in
            ((k, [x["p99_us"] for x in samples[f"{k}_latency"] if x["other_cores_busy"] < QUIET]) for k in ("cairn", "redis")))
        + ".", "",
        "'Longest gap' is the longest time between two consecutive push arrivals while writes were being sent "
        "every 0.1 ms: a gap of tens or hundreds of ms is a stall (of the server or of the receiving process's "
        "scheduling) and is what drives p99 up. 'Other load' as in the table above.", "",
        "## Server memory per tracked key", "",
        f"A fresh server with {mem_n:,} keys (12 B key, 1 B value); one RESP3 client turns tracking on and reads "
        "every key once. (RSS after − RSS before) / keys; cairn's `used_memory` counts only the data store, not "
        "the tracking table, so its column is ~0 by construction; Redis's includes its tracking table.", "",
        md_table(["server", "RSS bytes per tracked key", "used_memory bytes per tracked key"], mrows), "",
    ]

    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15.5, 4.8))
    bar_panel(axes[0], ["tracking off", "tracking on"],
              {"cairn": [T(res["cairn_cpu_off"], "cpu_us_per_get"), T(res["cairn_cpu_on"], "cpu_us_per_get")],
               "redis": [T(res["redis_cpu_off"], "cpu_us_per_get"), T(res["redis_cpu_on"], "cpu_us_per_get")]},
              {"cairn": COL["cairn"], "redis": COL["redis"]}, "server CPU per GET (µs)",
              f"CPU per GET, {clients} clients: cairn on/off ×{M(res['cairn_cpu_on'], 'ratio_on_off'):.2f} (target ≤ 1.15)",
              value_fmt=lambda y: f"{y:.2f}")
    bar_panel(axes[1], ["p50", "p90", "p99", "p99.9"],
              {"cairn": [T(lc, m) for m in ("p50_us", "p90_us", "p99_us", "p999_us")],
               "redis": [T(lr, m) for m in ("p50_us", "p90_us", "p99_us", "p999_us")]},
              {"cairn": COL["cairn"], "redis": COL["redis"]}, "write → push latency (µs, log scale)",
              f"Invalidation delivery, {clients} tracking clients, {rate // 1000}k writes/s", log=True,
              targets={2: (1000, "target p99 1 ms")}, value_fmt=lambda y: us(y))
    bar_panel(axes[2], ["RSS per tracked key"],
              {"cairn": [T(res["cairn_memory"], "rss_per_key")], "redis": [T(res["redis_memory"], "rss_per_key")]},
              {"cairn": COL["cairn"], "redis": COL["redis"]}, "bytes per tracked key",
              f"Tracking table memory ({mem_n // 1000}k keys, 1 client)", value_fmt=lambda y: f"{y:.0f} B")
    fig.suptitle("Client tracking (issue 6): cairn vs Redis 7", fontsize=11)
    save_fig(fig, rep.png("figures"), rep.note())
    rep.write("Application suite: client tracking (issue 6)",
              "Server-assisted client-side caching (RESP3 `CLIENT TRACKING`): what tracking costs the server per GET, "
              "how fast an invalidation reaches the clients, and what a tracked key costs in memory. Redis 7 "
              "(`redis-server --save '' --appendonly no`) is measured the same way in the same run; both with "
              "default flags (cairn: one event loop per core).", started)
    return rep
