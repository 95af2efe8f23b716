"""Server CPU per GET and per SET of two cairn binaries, interleaved A/B (issue 12: the change
stream must keep GET/SET within 3% when no consumer needs values).

    .venv/bin/python bench/stream_cost.py OLD_BINARY NEW_BINARY [--rounds 7] [--seconds 4]

Each round starts each binary in turn (A, B, A, B...), loads 10,000 keys of 32 B, then runs
cairn-bench GET-only and SET-only for --seconds with 10 connections, and divides the server's
CPU time (utime + stime from /proc) by the replies. Prints every sample and the medians.
"""

import argparse
import json
import socket
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "target" / "release" / "cairn-bench"
CLK_TCK = 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def bench(port, *args):
    out = subprocess.run([str(BENCH), "-p", str(port), "-q", *map(str, args)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def measure(binary, seconds):
    port = free_port()
    srv = subprocess.Popen([binary, "--port", str(port), "--memcache-port", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        bench(port, "--load", "--keys", 10000, "--value-size", 32, "-P", 64)
        result = {}
        for name, ratio in (("get", 1), ("set", 0)):
            args = ["-c", 10, "--keys", 10000, "--value-size", 32, "--read-ratio", ratio]
            bench(port, "-d", 0.3, *args)  # warm-up, not measured
            c0 = cpu_seconds(srv.pid)
            report = bench(port, "-d", seconds, *args)
            cpu = cpu_seconds(srv.pid) - c0
            result[name] = cpu * 1e6 / report["ops"]
        return result
    finally:
        srv.terminate()
        srv.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=4)
    a = p.parse_args()
    samples = {"old": {"get": [], "set": []}, "new": {"get": [], "set": []}}
    for r in range(a.rounds):
        order = [("old", a.old), ("new", a.new)] if r % 2 == 0 else [("new", a.new), ("old", a.old)]
        for label, binary in order:
            res = measure(binary, a.seconds)
            for k, v in res.items():
                samples[label][k].append(v)
            print(f"round {r} {label}: GET {res['get']:.2f} µs/op  SET {res['set']:.2f} µs/op", flush=True)
    for k in ("get", "set"):
        old, new = statistics.median(samples["old"][k]), statistics.median(samples["new"][k])
        print(f"{k.upper()}: median server CPU old {old:.2f} µs/op, new {new:.2f} µs/op, "
              f"new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
