#!/usr/bin/env python3
"""Memory per small collection, cairn against redis-server (issue 17).

    .venv/bin/python bench/collection_memory.py [target/release/cairn-server]

For each type, 10,000 keys of 10 members of about 9 bytes are written to a fresh server (the
kit's launcher, tests/kit.py; cairn with one I/O thread); the figures are the growth of
INFO `used_memory` per key and MEMORY USAGE of one key, with Redis's OBJECT ENCODING. Prints a
Markdown table (quoted in docs/architecture.md, "Collections").
"""

from __future__ import annotations

import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ServerProcess  # noqa: E402  (the kit's launcher, tests/kit.py)

KEYS = 10_000
MEMBERS = [f"member:{i}" for i in range(10)]


def used(r):
    return r.info("memory")["used_memory"]


def fill(p, typ, key):
    if typ == "set":
        p.sadd(key, *MEMBERS)
    elif typ == "zset":
        p.zadd(key, {m: i for i, m in enumerate(MEMBERS)})
    elif typ == "hash":
        p.hset(key, mapping={m: "value" for m in MEMBERS})
    else:
        p.rpush(key, *MEMBERS)


def measure(kind, binary):
    args = ["--threads", "1"] if kind == "cairn" else []
    srv = ServerProcess(args, kind=kind, binary=binary, name=f"mem-{kind}", keep_dir=False).start(timeout=4)
    r = redis.Redis(port=srv.port)
    out = {}
    try:
        for typ in ("set", "zset", "hash", "list"):
            r.flushall()
            base = used(r)
            p = r.pipeline(transaction=False)
            for k in range(KEYS):
                fill(p, typ, f"{typ}:{k}")
            p.execute()
            encoding = r.object("encoding", f"{typ}:1").decode()
            out[typ] = ((used(r) - base) / KEYS, r.memory_usage(f"{typ}:1"), encoding)
    finally:
        srv.stop(5)
    return out


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/cairn-server"
    cairn, red = measure("cairn", binary), measure("redis", None)
    print("| type | cairn bytes/key | cairn MEMORY USAGE | Redis bytes/key | Redis MEMORY USAGE (encoding) |")
    print("| --- | --- | --- | --- | --- |")
    for t in cairn:
        print(f"| {t} | {cairn[t][0]:.0f} | {cairn[t][1]} | {red[t][0]:.0f} | {red[t][1]} ({red[t][2]}) |")


if __name__ == "__main__":
    main()
