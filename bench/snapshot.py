#!/usr/bin/env python3
"""Snapshots: BGSAVE time and file size, GET/SET latency of a load during the save against the
same load without one, and the time from start to serving the loaded keys, against redis-server
saving and loading an RDB of the same keys in the same run.

    .venv/bin/python bench/snapshot.py --keys 2000000          # the issue asks 10 million

Writes bench/results/snapshot.{md,json}, naming the commit it ran at. Keys are cairn-bench's
16-byte keys with 32-byte values; 10% of cairn's carry a typed tag (Redis has none). The load is
open loop (cairn-bench --rate, latency from the intended send time), 90% GET, over the whole
keyspace.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as B  # noqa: E402

ROOT = HERE.parent
BENCH = ROOT / "target" / "release" / "cairn-bench"
CAIRN = ROOT / "target" / "release" / "cairn-server"


from kit import ServerProcess  # noqa: E402  (the launcher, tests/kit.py)


def server(kind, work):
    """cairn (its snapshot in work/cairn) or redis-server (its dump.rdb in its own directory):
    the kit's launcher (tests/kit.py), started and restarted by `start`."""
    if kind == "cairn":
        args = ["--memcache-port", "0", "--dir", str(work / "cairn"), "--save-on-shutdown", "no"]
    else:
        args = []
    return ServerProcess(args, kind=kind, binary=CAIRN, memcache_port=None, name=kind, workdir=work,
                         log_path=work / f"{kind}.log")


def start(srv):
    """(Re)starts srv without waiting; returns the time it was started."""
    started = time.monotonic()
    srv.start(wait=False, append_log=True)
    return started


def wait_serving(port, started, key, timeout=600):
    """Seconds from `started` until GET `key` answers with a value (not -LOADING)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = redis.Redis(port=port, socket_timeout=5)
            if r.get(key) is not None:
                return time.monotonic() - started
        except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
            pass
        time.sleep(0.005)
    raise RuntimeError("the server did not serve in time")


def fill(port, keys):
    subprocess.run([str(BENCH), "-p", str(port), "--load", "--keys", str(keys), "--value-size", "32",
                    "-c", "4", "-P", "64"], check=True, capture_output=True)


def tag(port, keys):
    """Tags every tenth key (TAG.ADD key 1 <i % 1000>)."""
    r = redis.Redis(port=port)
    pipe = r.pipeline(transaction=False)
    for i in range(0, keys, 10):
        pipe.execute_command("TAG.ADD", f"key:{i:012d}", 1, i % 1000)
        if len(pipe) >= 5000:
            pipe.execute()
    pipe.execute()


def load(port, keys, seconds, rate, out):
    return subprocess.Popen([str(BENCH), "-p", str(port), "-c", "8", "-d", str(seconds), "--rate", str(rate),
                             "--read-ratio", "0.9", "--keys", str(keys), "--value-size", "32", "--json", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def p99s(path):
    j = json.loads(Path(path).read_text())
    return j["get_latency_us"]["p99"], j["set_latency_us"]["p99"], j["throughput"]


def save_timed(r, background=True):
    t0 = time.monotonic()
    if background:
        r.execute_command("BGSAVE")
        while r.info("persistence")["rdb_bgsave_in_progress"]:
            time.sleep(0.01)
    else:
        r.save()
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--rate", type=int, default=20_000, help="requests per second of the load")
    ap.add_argument("--seconds", type=int, default=8, help="length of each load run")
    ap.add_argument("--out", default=str(HERE / "results"))
    opts = ap.parse_args()
    n = opts.keys
    probe = f"key:{n - 1:012d}"
    res = {"keys": n, "rate": opts.rate}
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        (work / "cairn").mkdir()
        srv = server("cairn", work)
        port = srv.port
        start(srv)
        wait_serving_port(port)
        fill(port, n)
        tag(port, n)
        r = redis.Redis(port=port)
        assert r.dbsize() == n
        # The same load without and with a save.
        base = str(work / "base.json")
        load(port, n, opts.seconds, opts.rate, base).wait()
        during = str(work / "during.json")
        lg = load(port, n, opts.seconds, opts.rate, during)
        time.sleep(1)
        res["cairn_bgsave_s"] = save_timed(r)
        lg.wait()
        res["cairn_base"] = p99s(base)
        res["cairn_during"] = p99s(during)
        res["cairn_file_bytes"] = (work / "cairn" / "dump.cairn").stat().st_size
        res["cairn_longest_lock"] = ""
        srv.kill()
        started = start(srv)
        res["cairn_restart_s"] = wait_serving(port, started, probe)
        assert redis.Redis(port=port).dbsize() == n
        srv.kill()
        text = (work / "cairn.log").read_text(errors="replace")
        for line in text.splitlines():
            if "background saving terminated" in line:
                res["cairn_longest_lock"] = line.split("longest shard lock ")[-1].rstrip(")")
            if "snapshot loaded" in line:
                res["cairn_load_line"] = line.split("INFO ")[-1]
        # Redis: the same keys (no tags), SAVE-timed BGSAVE, load at start.
        rsrv = server("redis", work)
        rport = rsrv.port
        start(rsrv)
        wait_serving_port(rport)
        fill(rport, n)
        rr = redis.Redis(port=rport)
        base = str(work / "rbase.json")
        load(rport, n, opts.seconds, opts.rate, base).wait()
        during = str(work / "rduring.json")
        lg = load(rport, n, opts.seconds, opts.rate, during)
        time.sleep(1)
        res["redis_bgsave_s"] = save_timed(rr)
        lg.wait()
        res["redis_base"] = p99s(base)
        res["redis_during"] = p99s(during)
        res["redis_file_bytes"] = (rsrv.dir / "dump.rdb").stat().st_size
        rsrv.kill()
        started = start(rsrv)
        res["redis_restart_s"] = wait_serving(rport, started, probe)
        rsrv.kill()
    write_page(res, opts)


def wait_serving_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("server did not start")


def write_page(res, opts):
    machine = B.machine_info()
    n = res["keys"]
    cores = machine["nproc"]
    rows = []
    for kind in ("cairn", "redis"):
        bg, fb = res[f"{kind}_bgsave_s"], res[f"{kind}_file_bytes"]
        (bget, bset, _), (dget, dset, _) = res[f"{kind}_base"], res[f"{kind}_during"]
        rs = res[f"{kind}_restart_s"]
        rows.append([kind, f"{bg:.2f} s", f"{fb / 1e6:.1f} MB", f"{bget:.0f} / {dget:.0f} ({dget / bget:.2f}x)",
                     f"{bset:.0f} / {dset:.0f} ({dset / bset:.2f}x)", f"{rs:.2f} s",
                     f"{n / rs / 1e6:.2f} M/s ({n / rs / cores / 1e6:.2f} per core)"])
    table = B.md_table(["server", "BGSAVE", "file", "GET p99 µs: no save / during", "SET p99 µs: no save / during",
                        "start to serving", "keys/s"], rows)
    page = (f"# Snapshots: save and restart\n\n"
            f"`bench/snapshot.py --keys {n} --rate {opts.rate} --seconds {opts.seconds}` on {B.machine_line(machine)}.\n\n"
            f"{n:,} keys of 16 bytes with 32-byte values (cairn: 10% carry a typed tag). The load is cairn-bench "
            f"open loop, {opts.rate} requests/s, 90% GET, 8 connections, {opts.seconds} s, the save started "
            f"1 s into it. \"Start to serving\" runs from spawning the process until a GET of the last key "
            f"answers (not -LOADING). Redis forks for BGSAVE; cairn copies shard by shard under each shard's "
            f"read lock (longest hold: {res.get('cairn_longest_lock', '?')}).\n\n{table}\n\n"
            f"cairn's log: `{res.get('cairn_load_line', '')}`\n")
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "snapshot.md").write_text(page)
    (out / "snapshot.json").write_text(json.dumps({"results": res, "machine": machine}, indent=1))
    print(page)


if __name__ == "__main__":
    sys.exit(main())
