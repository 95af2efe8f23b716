#!/usr/bin/env python3
"""Replication benchmark (issue 14 "Performance"), cairn against redis-server in the same run.

    .venv/bin/python bench/replication.py [--keys 10000000] [--rate 50000] [--quick]

For each server (cairn, then redis-server with the same topology) it starts a primary and two
replicas on free ports and measures:

1. **Replication lag** at a fixed write rate: `cairn-bench --rate R` sends SETs (open loop) to the
   primary while a probe writes a fresh value to a probe key every 5 ms and polls both replicas
   until they return it; the lag is the time from sending the probe's SET to the value being
   readable on a replica (it includes one round trip to the primary and the polling, the same
   for both servers). p50 / p99 over all probes and both replicas, with the rate the load
   generator actually reached.
2. **Primary CPU per SET with 0, 1, 2 replicas**: a pipelined raw client sends `--sets` SETs; the
   figure is the primary's own CPU time (its threads' run time, `cpu_ab.cpu_ns`) per SET. The
   replicas are attached one by one (REPLICAOF) between the measurements; cairn's 2-replica
   figure is taken again with `repl-send-delay-us 0` (a write per replica per loop turn).
3. **Full sync of N keys**: the primary is filled with N keys (`cairn-bench --load`, 32-byte
   values), a fresh replica is pointed at it, and the time until its link is up and it holds N
   keys is measured, while a probe times GET/SET round trips on the primary (p50 / p99 during
   the sync, and before it as the baseline). Redis runs with `repl-diskless-sync-delay 0` so it
   does not wait 5 s before starting.

The page bench/results/replication.md (or replication-quick.md with --quick) names the commit and
the machine. This machine has 2 cores shared by the servers and the load generator: the rate
is what it sustains, and the ratios matter more than the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as B  # noqa: E402
from cpu_ab import cpu_ns  # noqa: E402
from kit import ServerProcess, encode_command as command  # noqa: E402  (launcher, RESP request bytes)

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent




class Conn:
    """A minimal blocking RESP client (one request at a time; replies as raw lines)."""

    def __init__(self, port, timeout=60):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise ConnectionError("closed")
                self.buf += data
            val, self.buf = self.buf[:n], self.buf[n + 2:]
            return val
        if line[:1] == b"*":
            return [self._reply() for _ in range(int(line[1:]))]
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line[1:]

    def call(self, *args):
        self.sock.sendall(command(*args))
        return self._reply()

    def pipeline(self, payload, replies):
        """Sends a batch and skims `replies` one-line replies."""
        self.sock.sendall(payload)
        got = self.buf.count(b"\r\n")
        while got < replies:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
            got = self.buf.count(b"\r\n")
        self.buf = b""

    def info(self, section="replication"):
        text = self.call("INFO", section).decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def close(self):
        self.sock.close()


class Server:
    """A primary or replica: the kit's launcher (tests/kit.py) plus a connection."""

    def __init__(self, kind, cairn):
        self.kind = kind
        if kind == "redis":
            args = ["--repl-diskless-sync-delay", "0", "--repl-backlog-size", "64mb",
                    "--client-output-buffer-limit", "replica 0 0 0"]
        else:
            args = ["--memcache-port", "0", "--repl-backlog-size", "64mb"]
        self.server = ServerProcess(args, kind=kind, binary=cairn, memcache_port=None,
                                    name=f"repl-bench-{kind}", keep_dir=False)
        if kind == "cairn":
            self.server.args += ["--dir", str(self.server.dir)]
        self.server.start(timeout=10)
        self.port, self.proc = self.server.port, self.server.proc
        self.conn = Conn(self.port)

    def replicaof(self, primary):
        self.conn.call("REPLICAOF", HOST, primary.port)

    def link_up(self):
        i = self.conn.info()
        return i.get("master_link_status") == "up" and i.get("master_sync_in_progress") == "0"

    def stop(self):
        self.server.stop()


def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise RuntimeError(f"timed out waiting for {what}")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def loadgen(args, duration_s):
    return subprocess.Popen([str(ROOT / "target/release/cairn-bench"), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=B._die_with_parent)


def measure_lag(primary, replicas, rate, seconds):
    gen = loadgen(["-p", primary.port, "--rate", rate, "-c", 8, "-d", seconds, "--warmup", 1,
                   "--read-ratio", 0, "--keys", 100000, "--value-size", 32], seconds)
    pc = Conn(primary.port)
    rcs = [Conn(r.port) for r in replicas]
    lags = []
    time.sleep(1.0)  # the load generator's warmup
    end = time.monotonic() + seconds - 0.5
    i = 0
    while time.monotonic() < end:
        i += 1
        val = str(i).encode()
        t0 = time.perf_counter()
        pc.call("SET", "lag:probe", val)
        for rc in rcs:
            while rc.call("GET", "lag:probe") != val:
                pass
            lags.append((time.perf_counter() - t0) * 1e6)
        time.sleep(0.005)
    out = json.loads(gen.communicate(timeout=seconds + 30)[0])
    for c in [pc, *rcs]:
        c.close()
    return {"p50_us": pct(lags, 50), "p99_us": pct(lags, 99), "probes": len(lags),
            "rate": out["throughput"], "set_p99_us": out["latency_us"]["p99"]}


def cpu_per_set(primary, sets, pipeline=100):
    c = Conn(primary.port)
    batches = [b"".join(command("SET", f"cpu:{(b * pipeline + j) % 100000}", "x" * 32)
                        for j in range(pipeline)) for b in range(10)]
    c.pipeline(batches[0], pipeline)  # warm
    c0 = cpu_ns(primary.proc.pid)
    sent = 0
    b = 0
    while sent < sets:
        c.pipeline(batches[b % len(batches)], pipeline)
        sent += pipeline
        b += 1
    used = cpu_ns(primary.proc.pid) - c0
    c.close()
    return used / 1e3 / sent


def full_sync(primary, fresh, keys):
    subprocess.run([str(ROOT / "target/release/cairn-bench"), "-p", str(primary.port), "--load",
                    "--keys", str(keys), "--value-size", "32", "-c", "4", "-P", "64"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert int(primary.conn.call("DBSIZE")) >= keys
    probe = Conn(primary.port)

    def sample(stop, out):
        i = 0
        while not stop.is_set():
            i += 1
            t0 = time.perf_counter()
            probe.call("SET", "sync:probe", i) if i % 2 else probe.call("GET", f"key:{i % keys:012}")
            out.append((time.perf_counter() - t0) * 1e6)
            time.sleep(0.001)

    base = []
    stop = threading.Event()
    t = threading.Thread(target=sample, args=(stop, base))
    t.start()
    time.sleep(1.0)
    stop.set()
    t.join()
    during = []
    stop = threading.Event()
    t = threading.Thread(target=sample, args=(stop, during))
    t0 = time.monotonic()
    t.start()
    fresh.replicaof(primary)
    try:
        wait(lambda: fresh.link_up() and int(fresh.conn.call("DBSIZE")) >= keys, 1800, "the full sync")
    finally:
        stop.set()
        t.join()
    took = time.monotonic() - t0
    probe.close()
    return {"seconds": took, "base_p50_us": pct(base, 50), "base_p99_us": pct(base, 99),
            "p50_us": pct(during, 50), "p99_us": pct(during, 99), "samples": len(during)}


def perf_shares(primary, sets):
    """Shares of a cairn primary's event-loop CPU (perf samples, cpu-clock, during `sets`
    pipelined SETs) spent in loopback receive processing (softirq `process_backlog` run inside
    its own sends: the peer's TCP receive and its thread's wakeup, which a NIC's softirq on the
    peer's host does when the peer is remote) and in involuntary context switches (preempted on
    return to user mode by the threads it woke on the shared cores). None without perf."""
    data = Path(tempfile.mkdtemp(prefix="repl-perf-")) / "perf.data"
    try:
        rec = subprocess.Popen(["perf", "record", "-F", "10000", "-g", "-o", str(data), "-p",
                                str(primary.proc.pid)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    except OSError:
        return None
    time.sleep(1.0)
    cpu_per_set(primary, sets)
    rec.send_signal(signal.SIGINT)
    rec.wait()
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,period,ip,sym"],
                            capture_output=True, text=True).stdout
    shutil.rmtree(data.parent, ignore_errors=True)
    total = loop = preempt = 0
    for sample in script.split("\n\n"):
        lines = sample.strip().splitlines()
        if not lines or not lines[0].startswith("cairn-io"):
            continue
        total += 1
        stack = " ".join(lines[1:])
        if "process_backlog" in stack:
            loop += 1
        elif "exit_to_user_mode" in stack and "__schedule" in stack:
            preempt += 1
    if total < 100:
        return None
    return {"loopback_receive": loop / total, "preempted": preempt / total, "samples": total}


def run_kind(kind, opts):
    log = lambda m: print(f"[{kind}] {m}", flush=True)  # noqa: E731
    res = {}
    # Three primaries with 0, 1 and 2 replicas, measured in turns (the order rotates every
    # round), so the machine's other load weighs on each alike; `primary` is the 2-replica one.
    primaries = [Server(kind, opts.cairn) for _ in range(3)]
    primary = primaries[2]
    replicas = [Server(kind, opts.cairn) for _ in range(2)]
    lone = Server(kind, opts.cairn)
    try:
        lone.replicaof(primaries[1])
        for r in replicas:
            r.replicaof(primary)
        for r in [lone, *replicas]:
            wait(r.link_up, 60, "a replica's link")
        cases = [(str(n), primaries[n], None) for n in range(3)]
        if kind == "cairn":
            # The same with a write per replica at every event-loop turn's end (no send delay).
            default = primary.conn.call("CONFIG", "GET", "repl-send-delay-us")[1]
            res["send_delay_us"] = int(default)
            cases.append(("no_delay", primary, "0"))
        runs = {name: [] for name, _, _ in cases}
        o0 = int(primary.conn.info()["master_repl_offset"])
        for i in range(opts.rounds):
            for name, server, delay in cases[i % len(cases):] + cases[:i % len(cases)]:
                if kind == "cairn" and server is primary:
                    server.conn.call("CONFIG", "SET", "repl-send-delay-us", delay or default)
                runs[name].append(cpu_per_set(server, opts.sets))
            log(f"round {i}: " + " ".join(f"{k} {v[-1]:.3f}" for k, v in runs.items()))
        o1 = int(primary.conn.info()["master_repl_offset"])
        res["stream_bytes_per_set"] = (o1 - o0) / (opts.rounds * (opts.sets + 100)
                                                     * (2 if kind == "cairn" else 1))
        res["cpu_us"] = {n: statistics.median(runs[str(n)]) for n in range(3)}
        log(f"CPU per SET with 0, 1, 2 replicas: {res['cpu_us']}")
        if kind == "cairn":
            primary.conn.call("CONFIG", "SET", "repl-send-delay-us", default)
            res["cpu_us_no_delay"] = statistics.median(runs["no_delay"])
            log(f"CPU per SET with 2 replicas, repl-send-delay-us 0: {res['cpu_us_no_delay']:.3f} µs")
            res["perf"] = {n: perf_shares(primaries[n], opts.sets) for n in (0, 2)}
            log(f"perf shares: {res['perf']}")
        res["lag"] = measure_lag(primary, replicas, opts.rate, opts.seconds)
        log(f"lag {res['lag']}")
    finally:
        for s in [*replicas, lone, *primaries[:2]]:
            s.stop()
    fresh = Server(kind, opts.cairn)
    try:
        primary.conn.call("FLUSHALL")
        res["sync"] = full_sync(primary, fresh, opts.keys)
        log(f"full sync of {opts.keys} keys: {res['sync']}")
    finally:
        fresh.stop()
        primary.stop()
    return res


def perf_note(c):
    """The perf-derived figure: the raw one less the loopback receive the replicas add (a
    separate line; the raw figures stay the result)."""
    shares = c.get("perf") or {}
    if not shares.get(0) or not shares.get(2):
        return "\n\nperf was not available: no loopback-receive share measured."
    two, zero = c["cpu_us"][2], c["cpu_us"][0]
    # µs per SET in each part, with 2 replicas less with none: what the replicas add there.
    added = {k: two * shares[2][k] - zero * shares[0][k] for k in ("loopback_receive", "preempted")}
    less = two - max(added["loopback_receive"], 0)
    both = less - max(added["preempted"], 0)
    pct = lambda n, k: f"{100 * shares[n][k]:.1f}%"  # noqa: E731
    return (f"\n\n**Perf-derived, not measured directly** (`perf record -g` of the event loops "
            f"of the 0- and 2-replica primaries, {shares[0]['samples']} and "
            f"{shares[2]['samples']} samples): loopback receive processing run inside the "
            f"primary's own sends (softirq `process_backlog`: the peers' TCP receive and "
            f"wakeup, which a NIC's softirq on their hosts does when they are remote) is "
            f"{pct(0, 'loopback_receive')} of the samples with 0 replicas (the client's replies) "
            f"and {pct(2, 'loopback_receive')} with 2; involuntary context switches (preempted "
            f"by the threads it woke on the shared cores) {pct(0, 'preempted')} and "
            f"{pct(2, 'preempted')}. Less the loopback receive the replicas add: {less:.3f} µs "
            f"per SET with 2 replicas, {less / zero:.2f}× of 0 replicas; less the added "
            f"preemption too: {both:.3f} µs, {both / zero:.2f}×. The raw figures above are the "
            f"result.")


def send_floor(stream_bytes_per_set, batches, pipeline=100, runs=3):
    """`send-floor` (bench/loadgen/src/bin/send_floor.rs): the sender CPU per batch that the
    kernel alone charges for writing a batch's stream to 2 loopback receivers waiting in epoll,
    with batches back to back (the receivers may not sleep between them) and 100 µs apart with
    the sender spinning meanwhile (a server busy with its next batch; the receivers sleep at
    every batch), less the same loop with no receiver (its clock reads). Medians of `runs`."""
    binary = ROOT / "target/release/send-floor"
    if not binary.exists():
        return None
    size = max(1, round(stream_bytes_per_set * pipeline))

    def cpu(receivers, gap):
        vals = []
        for _ in range(runs):
            out = subprocess.run([str(binary), "--receivers", str(receivers), "--bytes", str(size),
                                  "--batches", str(batches), *gap],
                                 capture_output=True, text=True, timeout=300, check=True).stdout
            vals.append(json.loads(out)["sender_cpu_us_per_batch"])
        return statistics.median(vals)

    res = {"bytes_per_batch": size, "pipeline": pipeline}
    for name, gap in (("back_to_back", ["--gap-us", "0"]), ("asleep", ["--gap-us", "100", "--spin"])):
        base = cpu(0, gap)
        res[f"{name}_us_per_set"] = max(cpu(2, gap) - base, 0) / pipeline
    return res


def floor_note(c):
    """The page's section on the sends' kernel floor (what no server code can go below)."""
    f = c.get("send_floor")
    if not f:
        return ""
    zero = c["cpu_us"][0]
    budget = 0.15 * zero
    low, high = f["back_to_back_us_per_set"], f["asleep_us_per_set"]
    return (f"\n\n## The sends alone: the kernel's floor\n\n`send-floor` "
            f"(bench/loadgen/src/bin/send_floor.rs) does only what the primary's kernel does for "
            f"its replicas: one write of a batch's stream ({f['bytes_per_batch']} bytes: "
            f"{f['pipeline']} SETs at cairn's stream bytes per SET) to each of 2 loopback TCP "
            f"receivers that wait in epoll, timed with the sender thread's CPU clock around the "
            f"writes (less the same loop without receivers; medians of 3 runs). With batches back "
            f"to back (receivers that may still be awake) the writes cost the sender {low:.3f} µs "
            f"per SET; with batches 100 µs apart, the sender spinning meanwhile as a server busy "
            f"with its next batch would, so that the receivers are asleep at every write and the "
            f"write wakes them, {high:.3f} µs. The goal allows 2 replicas {budget:.3f} µs per SET "
            f"above the 0-replica {zero:.3f} µs (15%): the writes alone take {low / budget:.2f}× "
            f"and {high / budget:.2f}× of that, before any server code runs. On loopback a write "
            f"runs the receiver's TCP receive and its wakeup in the sender (a NIC's softirq on the "
            f"replicas' hosts does that when they are remote), so this figure is the machine's, "
            f"not cairn's; how much of it a run pays depends on whether the replicas sleep "
            f"between batches.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cairn", default=str(ROOT / "target/release/cairn-server"))
    ap.add_argument("--keys", type=int, default=10_000_000, help="keys for the full sync")
    ap.add_argument("--rate", type=int, default=50_000, help="SETs per second during the lag probe")
    ap.add_argument("--seconds", type=int, default=10, help="length of the lag run")
    ap.add_argument("--sets", type=int, default=300_000, help="SETs per CPU measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a check of the rig")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                    help="folder for the result page and JSON")
    opts = ap.parse_args()
    if opts.quick:
        opts.keys, opts.rate, opts.seconds, opts.sets, opts.rounds = 20_000, 5_000, 2, 20_000, 1
    load = [os.getloadavg()[0]]  # the machine's other load (it may be shared), start and end
    results = {kind: run_kind(kind, opts) for kind in ("cairn", "redis")}
    results["cairn"]["send_floor"] = send_floor(results["cairn"]["stream_bytes_per_set"],
                                                2000 if opts.quick else 20000)
    load.append(os.getloadavg()[0])
    c, r = results["cairn"], results["redis"]
    ratio = lambda a, b: f"{a / b:.2f}" if b else "n/a"  # noqa: E731
    machine = B.machine_info()
    machine["cairn_binary"] = B.binary_info(opts.cairn)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    rows_cpu = [[f"{n} replicas", f"{c['cpu_us'][n]:.3f}", f"{r['cpu_us'][n]:.3f}",
                 ratio(c['cpu_us'][n], r['cpu_us'][n]), ratio(c['cpu_us'][n], c['cpu_us'][0]),
                 ratio(r['cpu_us'][n], r['cpu_us'][0])] for n in range(3)]
    rows_lag = [[k, f"{c['lag'][k]:.0f}", f"{r['lag'][k]:.0f}", ratio(c['lag'][k], r['lag'][k])]
                for k in ("rate", "p50_us", "p99_us", "set_p99_us")]
    rows_sync = [[k, f"{c['sync'][k]:.1f}" if k == "seconds" else f"{c['sync'][k]:.0f}",
                  f"{r['sync'][k]:.1f}" if k == "seconds" else f"{r['sync'][k]:.0f}",
                  ratio(c['sync'][k], r['sync'][k])]
                 for k in ("seconds", "base_p50_us", "base_p99_us", "p50_us", "p99_us")]
    page = (
        f"# Replication (issue 14)\n\n"
        f"`bench/replication.py --keys {opts.keys} --rate {opts.rate} --seconds {opts.seconds} "
        f"--sets {opts.sets} --rounds {opts.rounds}` at commit `{commit}` on {B.machine_line(machine)}. "
        f"Each server runs a primary and two replicas of its own kind on loopback, cairn with its "
        f"default threads, redis-server 7 with `repl-diskless-sync-delay 0`. The machine has few "
        f"cores shared by three servers, the load generator and the probes, and with whatever else "
        f"runs there (load average {load[0]:.1f} at the start, {load[1]:.1f} at the end): compare "
        f"the ratios.\n\n"
        f"## Primary CPU per SET\n\nPipelined SETs (32-byte values, 100 per batch); the primary's "
        f"own CPU time per SET in µs, median of {opts.rounds} rounds. cairn runs with its default "
        f"`repl-send-delay-us {c['send_delay_us']}`; goal: 2 replicas ≤ 1.15× of 0 replicas.\n\n"
        + B.md_table(["replicas", "cairn µs", "redis µs", "cairn / redis", "cairn vs 0 replicas",
                      "redis vs 0 replicas"], rows_cpu)
        + f"\n\nWith `repl-send-delay-us 0` (one write per replica at the end of every event-loop "
        f"turn, as Redis) cairn's primary spends {c['cpu_us_no_delay']:.3f} µs per SET with 2 "
        f"replicas ({ratio(c['cpu_us_no_delay'], c['cpu_us'][0])}× its 0-replica figure), in "
        f"the same rounds. Stream bytes per SET: cairn {c['stream_bytes_per_set']:.1f}, redis "
        f"{r['stream_bytes_per_set']:.1f}."
        + perf_note(c)
        + floor_note(c)
        + f"\n\n## Replication lag at {opts.rate} SETs/s with 2 replicas\n\n"
        f"Open-loop SETs from `cairn-bench --rate {opts.rate}` (`rate`: what it reached); a probe "
        f"SET every 5 ms on the primary, polled on both replicas: µs from sending the SET to the "
        f"value being readable on a replica (includes a round trip). `set_p99_us`: the load's own "
        f"SET p99 on the primary.\n\n"
        + B.md_table(["", "cairn", "redis", "cairn / redis"], rows_lag)
        + f"\n\n## Full sync of {opts.keys} keys\n\nSeconds from REPLICAOF on a fresh replica until "
        f"its link is up and it holds every key; GET/SET round trips (µs) on the primary "
        f"before (`base_`) and during the sync.\n\n"
        + B.md_table(["", "cairn", "redis", "cairn / redis"], rows_sync)
        + "\n"
    )
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "replication-quick" if opts.quick else "replication"
    (out / f"{name}.md").write_text(page)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1))
    print(page)


if __name__ == "__main__":
    main()
