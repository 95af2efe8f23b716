#!/usr/bin/env python3
"""Server CPU per op of set, sorted set and list commands: cairn against redis-server, in turns
in the same run (issue 17's performance goal: no worse than Redis on any of them).

    python3 bench/collections_cpu.py target/release/cairn-server [requests]

Each round starts cairn (--threads 1) then redis-server, loads a 10-member set and a 1000-member
sorted set, and drives each command with redis-benchmark (-c 8 -P 16, 1000 random keys); the
figure is the server's own CPU time (/proc/<pid>/task/*/schedstat) per request, median of 3.
"""
import os, subprocess, sys, time, statistics
from pathlib import Path

CAIRN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
CASES = [
    ("SADD", ["SADD", "s:__rand_int__", "m:__rand_int__"]),
    ("SMEMBERS(10)", ["SMEMBERS", "small"]),
    ("ZADD", ["ZADD", "z:__rand_int__", "__rand_int__", "m:__rand_int__"]),
    ("ZRANGEBYSCORE(100,10)", ["ZRANGEBYSCORE", "big", "100", "109"]),
    ("LPUSH", ["LPUSH", "l:__rand_int__", "v"]),
    ("LPOP", ["LPOP", "l:__rand_int__"]),
]

def cpu_ns(pid):
    t = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try: t += int((task / "schedstat").read_text().split()[0])
        except Exception: pass
    return t

def start(kind, port):
    if kind == "cairn":
        p = subprocess.Popen([CAIRN, "--port", str(port), "--memcache-port", "0", "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        p = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    cli = ["redis-cli", "-p", str(port)]
    subprocess.run(cli + ["SADD", "small"] + [f"m{i}" for i in range(10)], stdout=subprocess.DEVNULL)
    args = []
    for i in range(1000): args += [str(i), f"m{i}"]
    subprocess.run(cli + ["ZADD", "big"] + args, stdout=subprocess.DEVNULL)
    return p

results = {}
for rnd in range(3):
    for kind, port in (("cairn", 6431), ("redis", 6432)):
        p = start(kind, port)
        for name, cmd in CASES:
            c0 = cpu_ns(p.pid)
            subprocess.run(["redis-benchmark", "-p", str(port), "-n", str(N), "-c", "8", "-P", "16", "-r", "1000", "-q"] + cmd, stdout=subprocess.DEVNULL)
            results.setdefault((name, kind), []).append((cpu_ns(p.pid) - c0) / N)
        p.terminate(); p.wait()
print(f"{'command':24} {'cairn ns/op':>12} {'redis ns/op':>12} {'ratio':>7}")
for name, _ in CASES:
    c = statistics.median(results[(name, 'cairn')]); r = statistics.median(results[(name, 'redis')])
    print(f"{name:24} {c:12.0f} {r:12.0f} {c/r:7.2f}")
