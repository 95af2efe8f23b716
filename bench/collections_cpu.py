#!/usr/bin/env python3
"""Server CPU per op of set, sorted set and list commands: cairn against redis-server, in turns
in the same run (issue 17's performance goal: no worse than Redis on any of them).

    python3 bench/collections_cpu.py target/release/cairn-server [requests]

Each round starts cairn (--threads 1) then redis-server, loads a 10-member set and a 1000-member
sorted set, and drives each command with redis-benchmark (-c 8 -P 16, 1000 random keys); the
figure is the server's own CPU time (/proc/<pid>/task/*/schedstat) per request, median of 3.
The table is printed and written to bench/results/collections_cpu.md, which names the commit.
"""
import subprocess, sys, statistics
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as B  # noqa: E402
from cpu_ab import cpu_ns  # noqa: E402
from kit import ServerProcess  # noqa: E402  (the launcher, tests/kit.py)

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


def start(kind):
    """The server (the kit's launcher, tests/kit.py) with the small set and the big sorted set."""
    args = ["--memcache-port", "0", "--threads", "1"] if kind == "cairn" else []
    srv = ServerProcess(args, kind=kind, binary=CAIRN, memcache_port=None, name=f"collections-{kind}",
                        keep_dir=False).start()
    cli = ["redis-cli", "-p", str(srv.port)]
    subprocess.run(cli + ["SADD", "small"] + [f"m{i}" for i in range(10)], stdout=subprocess.DEVNULL)
    args = []
    for i in range(1000): args += [str(i), f"m{i}"]
    subprocess.run(cli + ["ZADD", "big"] + args, stdout=subprocess.DEVNULL)
    return srv

results = {}
for rnd in range(3):
    for kind in ("cairn", "redis"):
        srv = start(kind)
        p, port = srv.proc, srv.port
        for name, cmd in CASES:
            c0 = cpu_ns(p.pid)
            subprocess.run(["redis-benchmark", "-p", str(port), "-n", str(N), "-c", "8", "-P", "16", "-r", "1000", "-q"] + cmd, stdout=subprocess.DEVNULL)
            results.setdefault((name, kind), []).append((cpu_ns(p.pid) - c0) / N)
        srv.stop()
rows = []
for name, _ in CASES:
    c = statistics.median(results[(name, 'cairn')]); r = statistics.median(results[(name, 'redis')])
    rows.append([name, f"{c:.0f}", f"{r:.0f}", f"{c / r:.2f}"])
machine = B.machine_info()
machine["cairn_binary"] = B.binary_info(CAIRN)
page = (f"# Server CPU per op of collection commands (issue 17)\n\n"
        f"`bench/collections_cpu.py {CAIRN} {N}` on {B.machine_line(machine)}.\n\n"
        f"cairn `--threads 1` and redis-server in turns, 3 rounds; redis-benchmark -c 8 -P 16 over "
        f"1000 random keys; server CPU ns per request, medians.\n\n"
        + B.md_table(["command", "cairn ns/op", "redis ns/op", "cairn / redis"], rows) + "\n")
print(page)
(Path(__file__).resolve().parent / "results" / "collections_cpu.md").write_text(page)
