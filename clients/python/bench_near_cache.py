#!/usr/bin/env python3
"""Measures the near cache and client tracking.

1. Near-cache hit cost per ``Cache.get`` in CPython (timeit), next to a dict lookup and a GET
   round trip.
2. Invalidation delivery latency, write -> push, p50/p99 on loopback:
   a. raw RESP3 ``invalidate`` pushes, default tracking mode and BCAST;
   b. the cairn client's near cache (write -> the hub thread has dropped the entry);
   c. N BCAST tracking clients at R writes/s (the issue's "50 clients, 10k writes/s").
   Writer and receiver are separate processes; timestamps are CLOCK_MONOTONIC (perf_counter_ns),
   which is system-wide on Linux.
3. Server CPU per GET with CLIENT TRACKING on vs off (pipelined and unpipelined GETs from several
   processes; CPU from /proc/PID/stat, GET counts from INFO commandstats).
4. Server memory per tracked key (RSS before and after one client reads N keys with tracking on).

Usage:
    python clients/python/bench_near_cache.py              # starts target/release/cairn-server
    python clients/python/bench_near_cache.py --quick      # smaller runs (~30 s)
    python clients/python/bench_near_cache.py --json out.json
Options: --server-bin PATH, --only hit,latency,cpu,memory
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE / "src"))
# Ports and RESP requests: the repository's shared test kit (tests/kit.py).
sys.path.insert(0, str(ROOT / "tests"))

import redis  # noqa: E402

import cairn  # noqa: E402

HOST = "127.0.0.1"


# ----------------------------------------------------------------------------------------------
# plumbing
# ----------------------------------------------------------------------------------------------

from kit import ServerProcess, encode_command as cmd  # noqa: E402


def ServerProc(binary: str, *args: str) -> ServerProcess:
    """A started cairn-server on a free port, memcached port off: the kit's launcher (tests/kit.py)."""
    srv = ServerProcess(["--memcache-port", "0", "--loglevel", "warn", *args], binary=binary, memcache_port=None,
                        name="near-cache-bench", keep_dir=False)
    return srv.start(timeout=10)


class Raw:
    """A minimal blocking RESP socket for the load generators (raw bytes, no parsing overhead)."""

    def __init__(self, port: int) -> None:
        self.s = socket.create_connection((HOST, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def read_until(self, n_bytes: int) -> bytes:
        while len(self.buf) < n_bytes:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n_bytes], self.buf[n_bytes:]
        return out

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        i = self.buf.index(b"\r\n")
        out, self.buf = self.buf[:i], self.buf[i + 2:]
        return out

    def skip_value(self) -> None:
        """Reads one RESP value (enough of the grammar for these replies)."""
        ln = self.line()
        t = ln[:1]
        if t in (b"$", b"=", b"!") and int(ln[1:]) >= 0:
            self.read_until(int(ln[1:]) + 2)
        elif t in (b"*", b">", b"~") and int(ln[1:]) > 0:
            for _ in range(int(ln[1:])):
                self.skip_value()
        elif t == b"%":
            for _ in range(2 * int(ln[1:])):
                self.skip_value()

    def call(self, *args) -> None:
        self.s.sendall(cmd(*args))
        self.skip_value()


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def summary_us(ns_values):
    us = [v / 1000 for v in ns_values]
    return {"n": len(us), "p50_us": round(pct(us, 50), 1), "p99_us": round(pct(us, 99), 1),
            "max_us": round(max(us), 1) if us else None}


# ----------------------------------------------------------------------------------------------
# 1. hit cost
# ----------------------------------------------------------------------------------------------

def bench_hit(port: int, quick: bool) -> dict:
    client = cairn.Client(HOST, port)
    c = client.cache("bench-hit", serializer="json")
    c.set("k", {"user": 42, "name": "ann"})
    for _ in range(100):
        c.get("k")
        if "k" in c.near.data:
            break
        time.sleep(0.005)
    assert "k" in c.near.data, "near fill failed"
    n = 200_000 if quick else 1_000_000
    get = c.get
    per = min(timeit.repeat(lambda: get("k"), number=n, repeat=5)) / n
    near_get = c.near.get
    per_near = min(timeit.repeat(lambda: near_get("k"), number=n, repeat=5)) / n
    d = {"k": 1}
    per_dict = min(timeit.repeat(lambda: d.get("k"), number=n, repeat=5)) / n
    r = redis.Redis(host=HOST, port=port)
    r.set("plain", b"x")
    m = 2000 if quick else 10000
    per_rt = min(timeit.repeat(lambda: r.get("plain"), number=m, repeat=3)) / m
    client.close()
    r.close()
    return {"cache_get_hit_ns": round(per * 1e9), "near_get_ns": round(per_near * 1e9),
            "dict_get_with_lambda_ns": round(per_dict * 1e9), "redis_py_get_roundtrip_us": round(per_rt * 1e6, 1)}


# ----------------------------------------------------------------------------------------------
# 2. delivery latency
# ----------------------------------------------------------------------------------------------

def _raw_receiver(port, mode, n, ready, out):
    """RESP3 tracking client; records the arrival time of each key's invalidation."""
    c = Raw(port)
    c.call("HELLO", "3")
    if mode == "bcast":
        c.call("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "lat:")
    else:
        c.call("CLIENT", "TRACKING", "ON")
        batch = 500
        for i in range(0, n, batch):  # remember every key the writer will change
            c.s.sendall(b"".join(cmd("GET", f"lat:{j}") for j in range(i, min(n, i + batch))))
            for _ in range(i, min(n, i + batch)):
                c.skip_value()
    ready.set()
    times = {}
    while len(times) < n:
        ln = c.line()
        if ln != b">2":
            raise RuntimeError(f"unexpected {ln!r}")
        c.line()  # $10
        c.read_until(12)  # invalidate\r\n
        count = int(c.line()[1:])
        now = time.perf_counter_ns()
        for _ in range(count):
            size = int(c.line()[1:])
            key = c.read_until(size + 2)[:-2]
            times[int(key[4:])] = now
    out.put(times)


def _near_receiver(port, n, ready, out):
    """The cairn client: records when the hub has applied each key's invalidation."""
    client = cairn.Client(HOST, port)
    client.cache("lat", serializer="bytes")
    times = {}

    def on_invalidation(keys):
        now = time.perf_counter_ns()
        for k in keys or ():
            times[int(k[4:])] = now

    client.tracking.on_invalidation = on_invalidation
    ready.set()
    deadline = time.monotonic() + 60
    while len(times) < n and time.monotonic() < deadline:
        time.sleep(0.05)  # the main thread is idle, as in a web worker waiting for requests
    out.put(times)
    client.close()


def _write_paced(port, n, rate, key_of):
    w = Raw(port)
    sent = {}
    interval = 1e9 / rate
    start = time.perf_counter_ns()
    for i in range(n):
        target = start + i * interval
        while time.perf_counter_ns() < target:
            pass
        t = time.perf_counter_ns()
        w.s.sendall(cmd("SET", key_of(i), "v"))
        w.skip_value()
        sent[i] = t
    elapsed = (time.perf_counter_ns() - start) / 1e9
    return sent, n / elapsed


def _latency_run(port, receiver, args, n, rate, key_of):
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    p = ctx.Process(target=receiver, args=(port, *args, n, ready, out))
    p.start()
    if not ready.wait(60):
        raise RuntimeError("receiver did not start")
    time.sleep(0.2)
    sent, achieved = _write_paced(port, n, rate, key_of)
    got = out.get(timeout=120)
    p.join(10)
    lat = [got[i] - sent[i] for i in sent if i in got]
    res = summary_us(lat)
    res["lost"] = n - len(lat)
    res["writes_per_s"] = round(achieved)
    return res


def _multi_receiver(port, clients, n, ready, out):
    import selectors

    sel = selectors.DefaultSelector()
    conns = []
    for j in range(clients):
        c = Raw(port)
        c.call("HELLO", "3")
        c.call("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", f"c{j}:")
        c.s.setblocking(False)
        sel.register(c.s, selectors.EVENT_READ, c)
        conns.append(c)
    ready.set()
    times = {}
    deadline = time.monotonic() + 120
    while len(times) < n and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            c = key.data
            chunk = c.s.recv(1 << 20)
            now = time.perf_counter_ns()
            c.buf += chunk
            # complete pushes: >2 $10 invalidate *1 $len key
            while True:
                b = c.buf
                i = b.find(b"*1\r\n$")
                if i < 0:
                    break
                j = b.find(b"\r\n", i + 5)
                if j < 0:
                    break
                size = int(b[i + 5:j])
                if len(b) < j + 2 + size + 2:
                    break
                k = b[j + 2:j + 2 + size]
                times[int(k.split(b":", 1)[1])] = now
                c.buf = b[j + 2 + size + 2:]
    out.put(times)


def bench_latency(port: int, quick: bool, clients: int, rate: int) -> dict:
    n = 2000 if quick else 10000
    res = {}
    res["raw_default_mode"] = _latency_run(port, _raw_receiver, ("default",), n, 2000, lambda i: f"lat:{i}")
    res["raw_bcast"] = _latency_run(port, _raw_receiver, ("bcast",), n, 2000, lambda i: f"lat:{i}")
    res["near_cache_hub"] = _latency_run(port, _near_receiver, (), n, 2000, lambda i: f"lat:{i}")
    m = 10000 if quick else 30000
    res[f"bcast_{clients}_clients_at_{rate}_writes_per_s"] = _latency_run(
        port, _multi_receiver, (clients,), m, rate, lambda i: f"c{i % clients}:{i}")
    return res


# ----------------------------------------------------------------------------------------------
# 3. server CPU per GET, tracking on vs off
# ----------------------------------------------------------------------------------------------

KEYS = 10000
VALUE = b"x" * 32


def _get_load(port, tracking, pipeline, seconds, conns, out):
    import random

    cs = []
    for _ in range(conns):
        c = Raw(port)
        c.call("HELLO", "3")
        if tracking:
            c.call("CLIENT", "TRACKING", "ON")
        cs.append(c)
    reply = b"$%d\r\n%s\r\n" % (len(VALUE), VALUE)
    rnd = random.Random(os.getpid())
    batches = [b"".join(cmd("GET", f"k:{rnd.randrange(KEYS)}") for _ in range(pipeline)) for _ in range(64)]
    done = 0
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        for c in cs:
            c.s.sendall(batches[i % 64])
            i += 1
        for c in cs:
            c.read_until(len(reply) * pipeline)
        done += pipeline * len(cs)
    out.put(done)


def _cpu_run(binary: str, tracking: bool, pipeline: int, seconds: float, procs: int) -> float:
    """Server CPU microseconds per GET for one run on a fresh server."""
    srv = ServerProc(binary)
    try:
        r = redis.Redis(host=HOST, port=srv.port)
        p = r.pipeline(transaction=False)
        for i in range(KEYS):
            p.set(f"k:{i}", VALUE)
        p.execute()
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        calls0 = r.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
        cpu0 = srv.cpu_seconds()
        ps = [ctx.Process(target=_get_load, args=(srv.port, tracking, pipeline, seconds, 8, out)) for _ in range(procs)]
        for x in ps:
            x.start()
        gets = sum(out.get(timeout=120) for _ in ps)
        for x in ps:
            x.join()
        cpu = srv.cpu_seconds() - cpu0
        calls = r.info("commandstats").get("cmdstat_get", {}).get("calls", 0) - calls0
        assert calls >= gets, (calls, gets)
        r.close()
        return cpu / max(calls, 1) * 1e6
    finally:
        srv.stop()


def bench_cpu(binary: str, quick: bool, repeat: int) -> dict:
    """Alternates tracking off/on runs and compares the medians (the box may be noisy)."""
    seconds = 2.0 if quick else 4.0
    res = {}
    for pipeline in (1, 16):
        runs: dict = {"off": [], "on": []}
        for _ in range(repeat):
            for tracking in (False, True):
                runs["on" if tracking else "off"].append(_cpu_run(binary, tracking, pipeline, seconds, 2))
        off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
        res[f"pipeline_{pipeline}"] = {
            "off_cpu_us_per_get": round(off, 3), "on_cpu_us_per_get": round(on, 3),
            "ratio_on_over_off": round(on / off, 3),
            "runs_off": [round(x, 3) for x in runs["off"]], "runs_on": [round(x, 3) for x in runs["on"]],
        }
    return res


# ----------------------------------------------------------------------------------------------
# 4. memory per tracked key
# ----------------------------------------------------------------------------------------------

def bench_memory(binary: str, quick: bool) -> dict:
    n = 100_000 if quick else 500_000
    srv = ServerProc(binary)
    try:
        r = redis.Redis(host=HOST, port=srv.port)
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.set(f"mem:{i:08d}", b"v")
            if i % 10000 == 9999:
                p.execute()
        p.execute()
        c = Raw(srv.port)
        c.call("HELLO", "3")
        c.call("CLIENT", "TRACKING", "ON")
        time.sleep(0.5)
        before = srv.rss_bytes()
        batch = 1000
        for i in range(0, n, batch):
            c.s.sendall(b"".join(cmd("GET", f"mem:{j:08d}") for j in range(i, i + batch)))
            for _ in range(batch):
                c.skip_value()
        time.sleep(0.5)
        after = srv.rss_bytes()
        r.close()
        return {"tracked_keys": n, "key_bytes": 12, "rss_delta_bytes": after - before,
                "bytes_per_tracked_key": round((after - before) / n, 1)}
    finally:
        srv.stop()


# ----------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-bin", default=str(ROOT / "target" / "release" / "cairn-server"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="hit,latency,cpu,memory")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3, help="alternating off/on runs per CPU measurement")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    only = set(args.only.split(","))
    results: dict = {"python": sys.version.split()[0], "cores": os.cpu_count()}
    srv = ServerProc(args.server_bin)
    try:
        if "hit" in only:
            results["hit"] = bench_hit(srv.port, args.quick)
            print("near-cache hit:", json.dumps(results["hit"]), flush=True)
        if "latency" in only:
            results["latency"] = bench_latency(srv.port, args.quick, args.clients, args.rate)
            for k, v in results["latency"].items():
                print(f"invalidation latency {k}:", json.dumps(v), flush=True)
    finally:
        srv.stop()
    if "cpu" in only:
        results["cpu"] = bench_cpu(args.server_bin, args.quick, args.repeat)
        for k, v in results["cpu"].items():
            print(f"server CPU per GET, {k}:", json.dumps(v), flush=True)
    if "memory" in only:
        results["memory"] = bench_memory(args.server_bin, args.quick)
        print("server memory per tracked key:", json.dumps(results["memory"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
