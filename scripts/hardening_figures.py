#!/usr/bin/env python3
"""The figures issue 11 ("Hardening") asks for, measured on one server binary:

1. RSS of a server (`--requirepass`) after 10 unauthenticated connections each send a
   `$60000000` bulk header and 60 MB;
2. how long a 100k-tag TAG.SET (and TAG.ADD) takes to be answered, and a 50k-clause TAG.COUNT;
3. peak RSS while a `count(DISTINCT ...)` over 2M rows builds a temporary b-tree under
   `--sql-maxmemory 32mb`;
4. GET p99 and `SELECT 1` latency while 100 heavy SQL statements queue
   (scripts/sql_queue_latency.py).

Usage: .venv/bin/python scripts/hardening_figures.py [path/to/cairn-server]
Run it on the old and the new binary to compare; each part starts its own server.
"""
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from sql_queue_latency import encode, free_port  # noqa: E402  (the script beside this one)


def start(binary, *flags):
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--memcache-port", "0", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("server did not start")


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def unauthenticated_frames(binary):
    proc, port = start(binary, "--requirepass", "pw")
    try:
        before = rss_mb(proc.pid)
        chunk = b"x" * (1 << 20)
        conns = []

        def one():
            s = socket.create_connection(("127.0.0.1", port))
            conns.append(s)
            try:
                s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$60000000\r\n")
                for _ in range(60):
                    s.sendall(chunk)
            except OSError:
                pass  # refused and closed: what a fixed server does

        threads = [threading.Thread(target=one) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        time.sleep(0.5)
        print(f"RSS before: {before} MB; after 10 unauthenticated 60 MB frames: "
              f"{rss_mb(proc.pid)} MB")
        for s in conns:
            s.close()
    finally:
        proc.kill()


def timed(port, args):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(120)
    data = encode(*(a if isinstance(a, bytes) else str(a) for a in args))
    t = time.perf_counter()
    s.sendall(data)
    buf = b""
    while not buf.endswith(b"\r\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    took = time.perf_counter() - t
    s.close()
    return took, buf.strip()[:80].decode(errors="replace")


def tag_refusals(binary):
    proc, port = start(binary)
    try:
        args = ["TAG.SET", "k", "v"]
        for i in range(100_000):
            args += ["TAG", "1", str(i)]
        print("TAG.SET with 100000 tags: %.3f s -> %s" % timed(port, args))
        r = redis.Redis(port=port)
        r.set("k", "v")
        args = ["TAG.ADD", "k"]
        for i in range(100_000):
            args += ["1", str(i)]
        print("TAG.ADD with 100000 tags: %.3f s -> %s" % timed(port, args))
        p = r.pipeline(transaction=False)
        for i in range(20_000):
            p.execute_command("TAG.SET", f"q{i}", "v", "TAG", "1", str(i))
        p.execute()
        args = ["TAG.COUNT", "WHERE", "1", "any"]
        for i in range(50_000):
            args += ["AND", "1", ">=", str(i % 100)]
        print("TAG.COUNT with 50000 AND clauses over 20k records: %.3f s -> %s"
              % timed(port, args))
    finally:
        proc.kill()


def sql_temp_btree(binary):
    proc, port = start(binary, "--sql-maxmemory", "32mb", "--sql-timeout", "60s")
    peak = [rss_mb(proc.pid)]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(proc.pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        before = peak[0]
        sql = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 2000000) "
               "SELECT count(DISTINCT hex(randomblob(48))) FROM c")
        t = time.perf_counter()
        try:
            result = str(redis.Redis(port=port, socket_timeout=120).execute_command("SQL.QUERY", sql))
        except redis.RedisError as e:
            result = f"error: {e}"
        took = time.perf_counter() - t
        time.sleep(0.2)
        done.set()
        watcher.join()
        print(f"SQL DISTINCT over 2M rows (--sql-maxmemory 32mb): RSS {before} MB, peak {peak[0]} MB, "
              f"{took:.1f} s -> {result[:80]}")
    finally:
        done.set()
        proc.kill()


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/cairn-server")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"binary {binary} (checkout at {commit}), {os.cpu_count()} cores")
    unauthenticated_frames(binary)
    tag_refusals(binary)
    sql_temp_btree(binary)
    subprocess.run([sys.executable, str(ROOT / "scripts/sql_queue_latency.py"), binary], check=False)


if __name__ == "__main__":
    main()
