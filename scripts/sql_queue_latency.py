#!/usr/bin/env python3
"""GET p99 and `SQL.QUERY "SELECT 1"` latency while 100 heavy SQL statements queue (issue 11,
item 4). Starts its own server; each heavy statement is a runaway recursive CTE that runs into
--sql-timeout (1 s), sent by its own connection.

Usage: .venv/bin/python scripts/sql_queue_latency.py [path/to/cairn-server] [--heavy N]
"""
import argparse
import socket
import subprocess
import threading
import time

import redis

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def p(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def get_loop(port, seconds, out):
    c = redis.Redis(port=port)
    c.set("k", "v" * 100)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        c.get("k")
        out.append(time.perf_counter() - t)
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default="target/release/cairn-server")
    ap.add_argument("--heavy", type=int, default=100)
    args = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen([args.binary, "--port", str(port), "--memcache-port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        c = redis.Redis(port=port, socket_timeout=120)
        idle = []
        get_loop(port, 2, idle)
        try:
            c.execute_command("SQL.QUERY", RUNAWAY)  # once: interrupted after 1 s
        except redis.ResponseError:
            pass
        socks = []
        for _ in range(args.heavy):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(encode("SQL.QUERY", RUNAWAY))
            socks.append(s)
        time.sleep(0.2)
        loaded = []
        t = threading.Thread(target=get_loop, args=(port, 8, loaded))
        t.start()
        select1 = []
        for _ in range(3):
            t0 = time.perf_counter()
            c.execute_command("SQL.QUERY", "SELECT 1")
            select1.append(time.perf_counter() - t0)
            time.sleep(0.5)
        t.join()
        print(f"GET p50/p99 idle:   {p(idle, .5) * 1e6:.0f} / {p(idle, .99) * 1e6:.0f} us ({len(idle)} GETs)")
        print(f"GET p50/p99 loaded: {p(loaded, .5) * 1e6:.0f} / {p(loaded, .99) * 1e6:.0f} us ({len(loaded)} GETs, "
              f"{args.heavy} heavy statements queued)")
        print("SELECT 1 latency:   " + ", ".join(f"{x * 1000:.1f} ms" for x in select1))
        for s in socks:
            s.close()
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
