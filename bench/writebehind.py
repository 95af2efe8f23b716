#!/usr/bin/env python3
"""Write-behind benchmark (issue 15 "Performance"): what write-behind costs cairn per write, and
what its coalescing saves the database.

    .venv/bin/python bench/writebehind.py [--sets 200000] [--seconds 10] [--rounds 5] [--quick]

A private PostgreSQL cluster (tests/wb_pg.py's initdb + pg_ctl; fsync and synchronous_commit
on unless --pg-fast) is the database of every mapping.

1. **CPU per write, write-behind off vs on.** A raw pipelined client (100 requests per batch)
   sends `--sets` SETs of 32-byte values, then as many HSETs of two 16-byte fields, each to a
   distinct key, to cairn without a mapping, with a mapping (`value = "string"` for the SETs'
   keys, `value = "hash"` for the HSETs') under `wb-fsync everysec`, and under `wb-fsync
   always`; the peer is redis-server without AOF, with `appendonly yes appendfsync everysec`
   and with `appendfsync always` (AOF rewrite off). The figure is the server's own CPU time (all
   its threads' run time, `cpu_ab.cpu_ns`) per request: on the command path (until the last
   reply) and, for cairn, including the flusher's work until WB.INFO's queue is empty; cairn's
   write-behind threads' share of the first (`wb-*`: flusher, syncer, fsync thread) beside it.
   The client's and PostgreSQL's CPU are not counted there. Servers
   run side by side; each round visits every server in turn (median of `--rounds`).
2. **Coalescing on a 90/10 Zipf workload.** cairn is filled with `--keys` keys and PostgreSQL's
   table with the same rows; then a mapping is added (WB.ADD) and `cairn-bench` runs 90% GET /
   10% SET, Zipf s = 0.99, 10 connections, for `--seconds`. Writes acknowledged (cairn-bench's
   SET replies) against the row writes PostgreSQL received (its own `pg_stat_user_tables`
   counters for the table, read after cairn stopped, with WB.INFO's `rows_written` beside it),
   for `delay` = 0 ms, 100 ms and 1 s; the saving is 1 − rows / writes. PostgreSQL's CPU time
   (all its processes) over the run and the drain is the database's side of the argument.
3. The same workload with `mode = "through"` (the reply after the database commit). Where this
   commit's WB.ADD refuses the mode, the page says "not available at <commit>" with the reason.

Writes bench/results/writebehind.{md,json,png} (writebehind-quick.* with --quick) naming the commit
and the machine. These machines are shared and have few cores: compare ratios.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
import harness as B  # noqa: E402
from cpu_ab import cpu_ns  # noqa: E402
from kit import binary_commit, die_with_parent, encode_command, free_port, resp_call  # noqa: E402
import wb_pg  # noqa: E402

HOST = "127.0.0.1"
PIPELINE = 100
TICK = os.sysconf("SC_CLK_TCK")


# --- PostgreSQL ---------------------------------------------------------------------------

class Pg(wb_pg.Postgres):
    """tests/wb_pg.py's throwaway cluster, durable by default: a benchmark of the database's
    write rate should pay the commits a real database pays."""

    def __init__(self, durable):
        super().__init__()
        self.durable = durable

    def start(self):
        if self.durable:
            self._run(wb_pg._bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                      "-E", "UTF8", "--locale", "C")
            opts = f"-k {self.dir} -p {self.port} -c listen_addresses=127.0.0.1 -c max_connections=200"
            self._run(wb_pg._bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l",
                      str(self.dir / "log"), "-w", "start")
            return self
        return super().start()

    def postmaster(self):
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def cpu_s(self):
        """CPU seconds of the whole cluster: every live process, plus the reaped ones (the
        postmaster's cutime/cstime), so that a backend that exited still counts."""
        pm = self.postmaster()
        total = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                f = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(proc.name), int(f[1])
            if pid == pm or ppid == pm:
                total += int(f[11]) + int(f[12])  # utime, stime
                if pid == pm:
                    total += int(f[13]) + int(f[14])  # cutime, cstime
        return total / TICK

    def query(self, statement, params=()):
        """One statement on a connection kept open (a fresh one would fork a backend, whose
        CPU time would count as the database's)."""
        import psycopg

        if getattr(self, "conn", None) is None:
            self.conn = psycopg.connect(self.dsn, autocommit=True)
        cur = self.conn.execute(statement, params)
        return cur.fetchall() if cur.description else []

    def close(self):
        if getattr(self, "conn", None) is not None:
            self.conn.close()
        super().close()

    def tuple_writes(self, table):
        """Row writes the database counted on `table` (inserts + updates + deletes)."""
        rows = self.query("SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables "
                        "WHERE relname = %s", (table,))
        return int(rows[0][0]) if rows else 0

    def settled_writes(self, table, at_least=0, timeout=15):
        """The counter once it stops moving: a backend sends its counters on exit, or up to
        10 s after its last transaction."""
        deadline = time.monotonic() + timeout
        last = -1
        while time.monotonic() < deadline:
            now = self.tuple_writes(table)
            if now == last and now >= at_least:
                return now
            last = now
            time.sleep(0.3)
        return last


# --- servers ------------------------------------------------------------------------------

class Refused(Exception):
    """The server refused a configuration (the reason is the message)."""


class Srv:
    """A cairn or redis-server on a free port in a temporary directory."""

    def __init__(self, kind, argv):
        self.kind = kind
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix=f"wb-bench-{kind}-")
        port_args = ["--port", str(self.port), "--bind", HOST]
        if kind == "cairn":
            port_args += ["--memcache-port", "0"]
        self.proc = subprocess.Popen([*argv, *port_args], stdout=subprocess.DEVNULL,
                                     stderr=open(Path(self.dir) / "stderr", "wb"), cwd=self.dir,
                                     preexec_fn=die_with_parent)
        for _ in range(500):
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{kind} exited: {self.stderr()}")
                time.sleep(0.02)
        raise RuntimeError(f"{kind} did not start")

    def stderr(self):
        return (Path(self.dir) / "stderr").read_text(errors="replace")[-500:]

    def call(self, *args):
        return resp_call(self.port, *args)

    def add_mapping(self, name, pg, table, value, **extra):
        """WB.ADD of `name` for keys `<name>:` -> `table`; Refused with the server's reason."""
        shape = ["value", "string", "value_column", "body"] if value == "string" else ["value", "hash"]
        args = ["prefix", f"{name}:", "database", pg.url, "table", table, "key_column", "id", *shape]
        for k, v in extra.items():
            args += [k, v]
        try:
            self.call("WB.ADD", name, *args)
        except RuntimeError as e:
            raise Refused(str(e).split(": ", 1)[-1]) from None

    def wb_info(self, name):
        raw = self.call("WB.INFO", name)
        if isinstance(raw, list):
            raw = dict(zip(raw[::2], raw[1::2]))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def drain(self, names, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = [self.wb_info(n) for n in names]
            if all(s.get("queue", "0") == "0" for s in states):  # through: no queue, maybe
                return states
            time.sleep(0.02)
        raise RuntimeError(f"write-behind did not drain: {states}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def cairn(binary, fsync="everysec"):
    return Srv("cairn", [binary, "--wb-fsync", fsync])


def redis(aof):
    argv = ["redis-server", "--save", "", "--auto-aof-rewrite-percentage", "0"]
    argv += ["--appendonly", "yes", "--appendfsync", aof] if aof else ["--appendonly", "no"]
    return Srv("redis", argv)


def wb_threads_ns(pid):
    """Nanoseconds cairn's write-behind threads (named `wb-*`) have run: the part of the server's
    CPU that is not the command path's."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().startswith("wb-"):
                total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def pipelined(port, payloads):
    """Sends each payload (PIPELINE requests) and waits for its PIPELINE one-line replies."""
    with socket.create_connection((HOST, port), timeout=120) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for p in payloads:
            s.sendall(p)
            got = 0
            while got < PIPELINE:
                data = s.recv(1 << 20)
                if not data:
                    raise ConnectionError("closed")
                if data[:1] == b"-" or b"\r\n-" in data:
                    raise RuntimeError(f"error reply: {data[:200]!r}")
                got += data.count(b"\r\n")


# --- 1. CPU per write ---------------------------------------------------------------------

def payloads(verb, prefix, n):
    """n requests in batches of PIPELINE, each to a distinct key (no coalescing helps)."""
    v16 = "v" * 16
    out = []
    for b in range(0, n, PIPELINE):
        if verb == "SET":
            out.append(b"".join(encode_command("SET", f"{prefix}{i:012}", "x" * 32)
                                for i in range(b, b + PIPELINE)))
        else:
            out.append(b"".join(encode_command("HSET", f"{prefix}{i:012}", "f1", v16, "f2", v16)
                                for i in range(b, b + PIPELINE)))
    return out


CPU_CONFIGS = [  # (label, kind, fsync or AOF policy; None = off)
    ("cairn, write-behind off", "cairn", None),
    ("cairn, write-behind everysec", "cairn", "everysec"),
    ("cairn, write-behind always", "cairn", "always"),
    ("redis, AOF off", "redis", None),
    ("redis, AOF everysec", "redis", "everysec"),
    ("redis, AOF always", "redis", "always"),
]


def cpu_suite(opts, pg, log):
    reqs = {"SET": payloads("SET", "s:", opts.sets), "HSET": payloads("HSET", "h:", opts.sets)}
    n_always = max(PIPELINE, opts.sets // 10 // PIPELINE * PIPELINE)
    servers = {}
    for i, (label, kind, policy) in enumerate(CPU_CONFIGS):
        if kind == "redis":
            servers[label] = redis(policy)
            continue
        srv = cairn(opts.cairn, policy or "everysec")
        if policy:
            for name, value in (("s", "string"), ("h", "hash")):
                table = f"cpu{i}_{name}"
                pg.sql(f"CREATE TABLE {table} (id text PRIMARY KEY, "
                       + ("body text)" if value == "string" else "f1 text, f2 text)"))
                srv.add_mapping(name, pg, table, value)
        servers[label] = srv
    samples = {label: {k: [] for k in ("SET", "HSET", "SET_flush", "HSET_flush", "SET_wb", "HSET_wb")}
               for label in servers}
    try:
        for r in range(opts.rounds):
            for label, kind, policy in CPU_CONFIGS:
                srv = servers[label]
                # fsync always costs an fsync per write or per batch: a tenth of the requests
                n = n_always if policy == "always" else opts.sets
                for verb in ("SET", "HSET"):
                    pid = srv.proc.pid
                    c0, w0 = cpu_ns(pid), wb_threads_ns(pid) if kind == "cairn" else 0
                    pipelined(srv.port, reqs[verb][: n // PIPELINE])
                    c1 = cpu_ns(pid)
                    samples[label][verb].append((c1 - c0) / 1e3 / n)
                    if kind == "cairn" and policy:
                        samples[label][f"{verb}_wb"].append((wb_threads_ns(pid) - w0) / 1e3 / n)
                    if kind == "cairn" and policy:
                        srv.drain(["s" if verb == "SET" else "h"])
                        samples[label][f"{verb}_flush"].append((cpu_ns(pid) - c0) / 1e3 / n)
            log(f"CPU round {r + 1}: " + "; ".join(
                f"{label} {s['SET'][-1]:.2f}/{s['HSET'][-1]:.2f} µs" for label, s in samples.items()))
    finally:
        for srv in servers.values():
            srv.stop()
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    spread = lambda xs: (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else 0.0  # noqa: E731
    return {label: {k: {"median_us": med(v), "spread": spread(v) if v else None, "samples": v}
                    for k, v in s.items()} for label, s in samples.items()}


# --- 2 and 3. Coalescing on a Zipf workload, and write-through -----------------------------

ZIPF_CONFIGS = [  # (label, mapping settings; None = no mapping)
    ("no mapping", None),
    ("behind, delay 0ms", {"delay": "0ms"}),
    ("behind, delay 100ms", {"delay": "100ms"}),
    ("behind, delay 1s", {"delay": "1s"}),
    # A batch holds at most `batch` distinct keys, so a batch larger than a delay window's
    # distinct keys shows what the delay alone would coalesce.
    ("behind, delay 1s, batch 20000", {"delay": "1s", "batch": "20000"}),
    ("through", {"mode": "through"}),
]


def window_saving(opts, writes, seconds, delay_s, seed):
    """The saving if every `delay_s` window of writes became one batch: the writes' keys drawn
    from the same Zipf (cairn-bench --dump-keys; a run's writes are a random tenth of its
    requests, so they follow the same law), cut into windows of the measured write rate."""
    if not delay_s or not writes:
        return None
    with tempfile.NamedTemporaryFile() as f:
        subprocess.run([str(ROOT / "target/release/cairn-bench"), "-p", "1", "--dump-keys", f.name,
                        "-n", str(writes), "--dist", "zipf", "--zipf-s", "0.99",
                        "--keys", str(opts.keys), "--seed", str(seed)], check=True,
                       capture_output=True, timeout=120)
        keys = array.array("I")
        keys.frombytes(Path(f.name).read_bytes())
    per_window = max(1, round(writes / seconds * delay_s))
    rows = sum(len(set(keys[i:i + per_window])) for i in range(0, len(keys), per_window))
    return 1 - rows / writes


def bench_json(args):
    done = subprocess.run([str(ROOT / "target/release/cairn-bench"), *map(str, args), "-q"],
                          capture_output=True, text=True, check=True, timeout=3600)
    return json.loads(done.stdout)


def zipf_once(opts, pg, label, settings, run_id):
    """One fresh server: fill, map, run the workload, drain, stop; the counts."""
    table = f"z{run_id}"
    name = f"z{run_id}"
    pg.sql(f"CREATE TABLE {table} (id text PRIMARY KEY, body text)")
    # The database already holds every row (as it would under a cache): one COPY-like insert.
    width = 16 - len(name) - 1
    pg.sql(f"INSERT INTO {table} SELECT lpad(g::text, {width}, '0'), repeat('a', 32) "
           f"FROM generate_series(0, {opts.keys - 1}) g")
    base_rows = pg.settled_writes(table, at_least=opts.keys)
    srv = cairn(opts.cairn)
    try:
        bench_json(["-p", srv.port, "--load", "--keys", opts.keys, "--key-prefix", f"{name}:",
                    "--value-size", 32, "-c", 4, "-P", 64])
        if settings is not None:
            try:
                srv.add_mapping(name, pg, table, "string", **settings)
            except Refused as e:
                return {"refused": str(e)}
        pg_c0, srv_c0 = pg.cpu_s(), cpu_ns(srv.proc.pid)
        t0 = time.monotonic()
        out = bench_json(["-p", srv.port, "-c", 10, "-d", opts.seconds, "--read-ratio", 0.9,
                          "--dist", "zipf", "--zipf-s", 0.99, "--keys", opts.keys,
                          "--key-prefix", f"{name}:", "--value-size", 32, "--seed", run_id])
        info = srv.drain([name])[0] if settings is not None else {}
        drained_s = time.monotonic() - t0
        srv_cpu = (cpu_ns(srv.proc.pid) - srv_c0) / 1e9
    finally:
        srv.stop()
    time.sleep(0.5)  # cairn's database connection ends: its backend exits and is reaped
    pg_cpu = pg.cpu_s() - pg_c0
    rows = pg.settled_writes(table) - base_rows
    writes = out["sets"]
    delay_s = {"0ms": 0, "100ms": 0.1, "1s": 1.0}.get((settings or {}).get("delay"))
    return {"window_saved": window_saving(opts, writes, out["elapsed_s"], delay_s, run_id),"writes": writes, "gets": out["gets"], "errors": out["errors"], "seconds": out["elapsed_s"],
            "throughput": out["throughput"], "set_p99_us": out["set_latency_us"]["p99"],
            "get_p99_us": out["get_latency_us"]["p99"], "rows": rows,
            "rows_written": int(info.get("rows_written", 0)), "batches": int(info.get("batches", 0)),
            "saved": 1 - rows / writes if writes and settings is not None else None,
            "drain_s": drained_s, "cairn_cpu_s": srv_cpu, "pg_cpu_s": pg_cpu}


def zipf_suite(opts, pg, log):
    runs = {label: [] for label, _ in ZIPF_CONFIGS}
    run_id = 0
    for r in range(opts.rounds):
        for label, settings in ZIPF_CONFIGS:
            if runs[label] and "refused" in runs[label][0]:
                continue
            run_id += 1
            res = zipf_once(opts, pg, label, settings, run_id)
            runs[label].append(res)
            log(f"zipf round {r + 1} {label}: {res}")
    out = {}
    for label, rs in runs.items():
        if rs and "refused" in rs[0]:
            out[label] = {"refused": rs[0]["refused"]}
            continue
        keys = [k for k, v in rs[0].items() if isinstance(v, (int, float))]
        med = {k: statistics.median(r[k] for r in rs) for k in keys}
        for k in ("saved", "window_saved"):
            med[k] = statistics.median(r[k] for r in rs) if rs[0][k] is not None else None
        out[label] = {"median": med, "runs": rs}
    return out


# --- the page -----------------------------------------------------------------------------

def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def cpu_tables(cpu, rounds):
    def cell(label, key):
        s = cpu[label].get(key)  # (`_wb`: not in runs before it was measured)
        if not s or s["median_us"] is None:
            return "–"
        return f"{s['median_us']:.3f} ±{s['spread'] * 100:.0f}%"

    rows = []
    for verb in ("SET", "HSET"):
        off_c = cpu["cairn, write-behind off"][verb]["median_us"]
        off_r = cpu["redis, AOF off"][verb]["median_us"]
        for (cl, ck, cp), (rl, rk, rp) in zip(CPU_CONFIGS[:3], CPU_CONFIGS[3:]):
            c = cpu[cl][verb]["median_us"]
            r = cpu[rl][verb]["median_us"]
            flush = cpu[cl][f"{verb}_flush"]["median_us"]
            rows.append([f"{verb}, {cp or 'off'}", cell(cl, verb), cell(cl, f"{verb}_wb"), fmt(c / off_c),
                         cell(cl, f"{verb}_flush") if flush else "–",
                         fmt(flush / off_c) if flush else "–",
                         cell(rl, verb), fmt(r / off_r), fmt(c / r)])
    return B.md_table(["write, durability", "cairn µs/op", "of it wb-* threads", "cairn vs off",
                       "cairn µs/op with flush",
                       "with flush vs off", "redis µs/op", "redis vs off", "cairn / redis"], rows)


def zipf_table(z, commit):
    rows = []
    base = z["no mapping"].get("median", {})
    for label, _ in ZIPF_CONFIGS:
        r = z[label]
        if "refused" in r:
            rows.append([label, f"not available at {commit}: {r['refused']}"] + ["–"] * 10)
            continue
        m = r["median"]
        rows.append([label, f"{m['writes']:.0f}", f"{m['rows']:.0f}", f"{m['rows_written']:.0f}",
                     f"{m['saved'] * 100:.1f}%" if m["saved"] is not None else "–",
                     f"{m['window_saved'] * 100:.1f}%" if m["window_saved"] is not None else "–",
                     f"{m['rows'] / m['seconds']:.0f}", f"{m['throughput']:.0f}",
                     fmt(m["throughput"] / base["throughput"]) if base else "–",
                     f"{m['set_p99_us']:.0f}", f"{m['pg_cpu_s'] * 1e6 / max(m['writes'], 1):.1f}",
                     f"{m['cairn_cpu_s'] * 1e6 / max(m['writes'] + m['gets'], 1):.2f}"])
    return B.md_table(["cairn", "writes acknowledged", "row writes in PostgreSQL",
                       "WB.INFO rows_written", "database writes saved", "saved if a batch were a delay window",
                       "rows/s to PostgreSQL",
                       "ops/s", "ops/s vs no mapping", "SET p99 µs", "PostgreSQL CPU µs per write",
                       "cairn CPU µs per op"], rows)


def headline(cpu, z, commit):
    on = cpu["cairn, write-behind everysec"]["SET"]["median_us"] / cpu["cairn, write-behind off"]["SET"]["median_us"]
    aof = cpu["redis, AOF everysec"]["SET"]["median_us"] / cpu["redis, AOF off"]["SET"]["median_us"]
    lines = [f"- **SET CPU, write-behind on (everysec) / off: {on:.2f}×** (goal ≤ 1.3×: "
             f"{'met' if on <= 1.3 else 'not met'}); Redis AOF everysec / off: {aof:.2f}×."]
    d = z.get("behind, delay 100ms", {})
    if "median" in d:
        m = d["median"]
        lines.append(f"- **Database writes saved by coalescing at delay 100ms: {m['saved'] * 100:.1f}%** "
                     f"({m['writes']:.0f} writes acknowledged, {m['rows']:.0f} row writes in PostgreSQL).")
    t = z.get("through", {})
    lines.append(f"- Write-through: not available at {commit} ({t['refused']})." if "refused" in t
                 else "- Write-through: measured below.")
    return "\n".join(lines)


def plot(res, path):
    """Two panels: CPU per write (log scale: `always` is far above the rest), and the database
    writes saved per configuration, measured against what a delay window alone would save."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cpu, z = res["cpu"], res["zipf"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    groups = [f"{verb}, {p or 'off'}" for verb in ("SET", "HSET") for _, _, p in CPU_CONFIGS[:3]]
    xs = range(len(groups))
    for k, (kind, configs) in enumerate((("cairn", CPU_CONFIGS[:3]), ("redis", CPU_CONFIGS[3:]))):
        ys = [cpu[label][verb]["median_us"] for verb in ("SET", "HSET") for label, _, _ in configs]
        a.bar([x + (k - 0.5) * 0.4 for x in xs], ys, 0.4,
              label="cairn (write-behind)" if kind == "cairn" else "redis (AOF)")
    a.set_yscale("log")
    a.set_xticks(list(xs), groups, rotation=20, fontsize=8)
    a.set_ylabel("server CPU µs per request")
    a.set_title("CPU per write: durability off / everysec / always")
    a.legend(fontsize=8)
    labels = [label for label, _ in ZIPF_CONFIGS if "median" in z.get(label, {})
              and z[label]["median"].get("saved") is not None]
    measured = [z[label]["median"]["saved"] * 100 for label in labels]
    window = [(z[label]["median"].get("window_saved") or 0) * 100 for label in labels]
    xs = range(len(labels))
    b.bar([x - 0.2 for x in xs], measured, 0.4, label="measured (PostgreSQL's row writes)")
    b.bar([x + 0.2 for x in xs], window, 0.4, label="if a batch were a delay window")
    b.set_xticks(list(xs), [label.replace("behind, ", "") for label in labels], rotation=20, fontsize=8)
    b.set_ylabel("database writes saved, %")
    b.set_title("Coalescing, 90/10 Zipf 0.99")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(res):
    """The page, from the results (a run's, or a JSON file's: --from-json)."""
    opts, machine, commit = res["opts"], res["machine"], res["commit"]
    cpu, z = res["cpu"], res["zipf"]
    args = (f"--sets {opts['sets']} --keys {opts['keys']} --seconds {opts['seconds']} --rounds {opts['rounds']}"
            + (" --pg-fast" if opts["pg_fast"] else ""))
    pg_mode = ("fsync off (--pg-fast)" if opts["pg_fast"]
               else "fsync and synchronous_commit on (durable commits)")
    sets, rounds = opts["sets"], opts["rounds"]
    plot_line = f"\n![CPU per write and writes saved]({res['png']})\n" if res.get("png") else ""
    return f"""# Write-behind (issue 15)

`bench/writebehind.py {args}` at commit `{commit}` on {B.machine_line(machine)}; load average {' '.join(machine['loadavg_at_start'])} at the start, {' '.join(res['load_end'])} at the end; the rig (this script) at `{res['rig']}`. {res.get('note', '')}PostgreSQL {res['pg_version']} on the same machine, {pg_mode}. The machine's few cores are shared by the servers, PostgreSQL, the load generator and (on a busy machine) other jobs: compare the ratios.

{headline(cpu, z, commit)}
{plot_line}
## Server CPU per write, write-behind off and on

{sets} requests per measurement ({sets // 10 // PIPELINE * PIPELINE or PIPELINE} under `always`) from a raw pipelined client ({PIPELINE} per batch), each to a distinct key: SET of a 32-byte value (a `value = "string"` mapping covers the keys), HSET of two 16-byte fields (a `value = "hash"` mapping). The server process's own CPU time per request in µs, all its threads (median of {rounds} rounds, ± spread; the client's and PostgreSQL's CPU are not counted): on the command path (until the last reply), of which cairn's write-behind threads (`wb-*`: the flusher, which may start on the first records while the client still sends, the once-a-second syncer and the `always` fsync thread), and for cairn also until the flusher had written every row to PostgreSQL (`with flush`). The peer is redis-server with `appendonly yes` and the same `appendfsync` (no AOF rewrite during the run): the closest peer to a durable log, but with no database behind it. Redis writes its AOF once per event-loop turn, and under `always` fsyncs it there too; cairn writes its log once per connection's batch of requests (one `write` per pipeline; since c2937d8, before it once per command), and under `always` fsyncs it once per batch too, on its fsync thread, before any of the batch's replies goes (since c211089; before it once per command of a pipelined connection).

{cpu_tables(cpu, rounds)}

## Coalescing: database writes saved on a 90/10 Zipf workload

cairn holds {opts['keys']} keys and PostgreSQL the same rows; `cairn-bench -c 10 -d {opts['seconds']} --read-ratio 0.9 --dist zipf --zipf-s 0.99` runs against a fresh server with one `value = "string"` mapping over every key (`batch = 500`). *Writes acknowledged*: the SETs that got their reply. *Row writes in PostgreSQL*: the database's own count for the table (`pg_stat_user_tables` inserts + updates + deletes, after the queue drained and cairn stopped); `WB.INFO rows_written` is cairn's count. *Database writes saved* = 1 − row writes / writes acknowledged: seed 003's argument for write-behind, that "multiple changes to the same object within the write-behind interval are coalesced and only written once to the underlying database". *Saved if a batch were a delay window*: the same count for the run's number of writes drawn from the same Zipf law, cut into windows of `delay` at the measured write rate, every window one batch — what the delay alone would save; the flusher's batches also stop at `batch` distinct keys, which the `batch 20000` row lifts. *PostgreSQL CPU*: all its processes, over the run and the drain, per write acknowledged. *ops/s* moves with whatever else the machine runs. Medians of {rounds} runs.

{zipf_table(z, commit)}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cairn", default=str(ROOT / "target/release/cairn-server"))
    ap.add_argument("--sets", type=int, default=200_000, help="requests per CPU measurement")
    ap.add_argument("--keys", type=int, default=100_000, help="keys of the Zipf workload")
    ap.add_argument("--seconds", type=int, default=10, help="length of each Zipf run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pg-fast", action="store_true", help="PostgreSQL with fsync off, as the tests run it")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a check of the rig")
    ap.add_argument("--no-plot", action="store_true", help="no PNG (matplotlib missing)")
    ap.add_argument("--from-json", help="render the page and plot again from a run's JSON")
    ap.add_argument("--note", help="a sentence for the page's first paragraph (the machine's state)")
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for the page and JSON")
    opts = ap.parse_args()
    if opts.quick:
        opts.sets, opts.keys, opts.seconds, opts.rounds = 5_000, 2_000, 1, 1
        opts.pg_fast = True  # a check of the rig: initdb without its fsyncs
    out = Path(opts.out)
    name = "writebehind-quick" if opts.quick else "writebehind"
    if opts.from_json:
        res = json.loads(Path(opts.from_json).read_text())
        name = Path(opts.from_json).stem
    else:
        res = measure(opts)
    out.mkdir(parents=True, exist_ok=True)
    res["png"] = None
    if opts.note:
        res["note"] = opts.note.rstrip() + " "
    if not opts.no_plot:
        try:
            plot(res, out / f"{name}.png")
            res["png"] = f"{name}.png"
        except ImportError:
            print("matplotlib missing: no plot", file=sys.stderr)
    page = render(res)
    (out / f"{name}.md").write_text(page)
    (out / f"{name}.json").write_text(json.dumps(res, indent=1))
    print(page)


def measure(opts):
    if not shutil.which("redis-server"):
        sys.exit("redis-server not found")
    log = lambda m: print(m, flush=True)  # noqa: E731
    machine = B.machine_info()
    machine["cairn_binary"] = B.binary_info(opts.cairn)
    rig = machine["cairn_commit"]
    commit = (binary_commit(opts.cairn) or rig)[:7]
    machine["cairn_commit"] = commit  # the code measured is the binary's, not the rig's checkout
    pg = Pg(durable=not opts.pg_fast).start()
    try:
        cpu = cpu_suite(opts, pg, log)
        z = zipf_suite(opts, pg, log)
    finally:
        pg.close()
    return {"commit": commit, "rig": rig, "machine": machine, "opts": vars(opts),
            "load_end": Path("/proc/loadavg").read_text().split()[:3], "pg_version": pg_version(),
            "cpu": cpu, "zipf": z}


def pg_version():
    try:
        out = subprocess.run([wb_pg._bin("postgres"), "--version"], capture_output=True, text=True,
                             timeout=10).stdout
        return re.search(r"\d+\.\d+", out).group(0)
    except (OSError, AttributeError, TypeError):
        return "?"


if __name__ == "__main__":
    main()
