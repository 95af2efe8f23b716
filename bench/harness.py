"""The benchmark harness that bench/run.py's suites (bench/suites/) and the other bench scripts
share: the machine's description, servers under test on free loopback ports (the kit's
launcher, tests/kit.py), one cairn-bench measurement with the server's CPU and RSS around it,
round-robin repeats with medians and spreads, markdown tables, and the Suite page writer.

Every server runs on free loopback ports and is stopped at the end of its suite. Each measurement
samples the server's CPU time (utime + stime from /proc/PID/stat) and RSS around one cairn-bench
run; every configuration is repeated (round-robin over the servers, so slow drifts of a shared
machine hit every server alike) and reported as the median with its spread (min..max).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
NPROC = os.cpu_count() or 1
MB = 1024 * 1024

# run.py's suites in run order; threads (bench/threads.py) and sql (bench/suites/sql.py, also
# bench/app_suites.py's) bring issue 19's thread-count and SQL point-read figures into `make bench`.
SUITES = ["mdcached", "null", "pipeline", "memory", "scaling", "latency", "eviction", "threads", "sql"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _cmd_out(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info():
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "nproc": NPROC,
        "cpu_model": model,
        "kernel": platform.release(),
        "memory_gib": round(mem / 1024**3, 1),
        "redis": _cmd_out(["redis-server", "--version"]),
        "memcached": _cmd_out(["memcached", "-V"]),
        "cairn_commit": _cmd_out(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
        + ("+local changes" if _cmd_out(["git", "-C", str(ROOT), "status", "--porcelain", "--", "crates"]) else ""),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else [],
    }


def binary_info(path):
    """What was benchmarked: the binary's modification time (its build), size and the commit it
    was built from (its --version; the checkout's HEAD may be another)."""
    try:
        st = os.stat(path)
        return {"path": str(path), "built": _dt.datetime.fromtimestamp(st.st_mtime, _dt.timezone.utc)
                .strftime("%Y-%m-%d %H:%M UTC"), "bytes": st.st_size, "commit": binary_commit(path)}
    except OSError:
        return {"path": str(path)}


def cairn_default_threads():
    """The event loops cairn runs here when given no --threads (what it answers to CONFIG GET
    threads): the summary labels the default configuration of the machine a run used."""
    srv = Server("cairn-default", "cairn", "cairn default").start()
    try:
        reply = resp_call(srv.resp_port, "CONFIG", "GET", "threads")
        return int(reply[1]) if isinstance(reply, list) else None
    except (OSError, ValueError, IndexError):
        return None
    finally:
        srv.stop()


def load_threads(cores):
    """Load-generator threads for a run on `cores` cores: one on small machines (as every page so far),
    a quarter of the cores on larger ones, so that one client thread does not cap many server threads."""
    return max(1, cores // 4)


def machine_line(m):
    """The page's machine line; "cairn <commit>" names the binary's commit where it says one
    (bench/figures.py reads it), else the checkout's."""
    built = (m.get("cairn_binary") or {}).get("commit")
    commit = m["cairn_commit"] if not built or m["cairn_commit"].startswith(built[:7]) else \
        f"{built[:7]} (checkout {m['cairn_commit']})"
    return (f"{m['nproc']} cores ({m['cpu_model'] or 'unknown CPU'}), {m['memory_gib']} GiB, Linux {m['kernel']}; "
            f"{m['redis'].split(' sha=')[0]}; {m['memcached']}; cairn {commit}"
            + (f" (binary built {m['cairn_binary']['built']})" if m.get("cairn_binary", {}).get("built") else "")
            + f"; {m['date']}")


def machine_busy_seconds():
    """CPU seconds all cores spent busy (user+nice+system+irq+softirq+steal) since boot."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    v = [int(x) for x in f]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / CLK_TCK


# The server launcher, ports, child processes, RESP and memcached on raw sockets: the shared kit
# (tests/kit.py). The names stay importable from here (the other bench scripts use `B.free_port`, ...).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kit import (  # noqa: E402,F401
    ServerProcess, binary_commit, die_with_parent as _die_with_parent, free_port, mc_stats, resp_call,
)


class Server(ServerProcess):
    """One server under test (the kit's launcher, tests/kit.py). kind: cairn | redis | memcached."""

    def __init__(self, name, kind, label, args=(), workdir=None, memcached_mb=1024):
        if kind == "cairn":
            args = ["--loglevel", "warning", *args]
        elif kind == "redis":
            args = ["--loglevel", "warning", *args]
        else:
            args = ["-c", "4096", *args]
        super().__init__(args, kind=kind, binary=CAIRN_BIN, name=name, workdir=workdir,
                         memcached_mb=memcached_mb if kind == "memcached" else None, keep_dir=False)
        self.label = label

    @property
    def resp_port(self):
        return self.port if self.has_resp else None

    @property
    def mc_port(self):
        return self.memcache_port if self.has_memcache else None

    @property
    def protocols(self):
        return [p for p, port in (("resp", self.resp_port), ("memcache", self.mc_port)) if port]

    def port_of(self, proto):
        return self.resp_port if proto == "resp" else self.mc_port

    # -- introspection --
    def info(self):
        """Server's own accounting: used_memory (bytes) and number of keys."""
        if self.kind in ("cairn", "redis"):
            text = resp_call(self.resp_port, "INFO").decode()
            kv = dict(line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))
            keys = resp_call(self.resp_port, "DBSIZE")
            return {"used_memory": int(kv["used_memory"]), "keys": int(keys),
                    "evicted": int(kv.get("evicted_keys", 0)), "expired": int(kv.get("expired_keys", 0))}
        st = mc_stats(self.mc_port)
        slabs = mc_stats(self.mc_port, "slabs")
        return {"used_memory": int(st["bytes"]), "keys": int(st["curr_items"]),
                "evicted": int(st.get("evictions", 0)), "expired": int(st.get("expired_unfetched", 0)),
                "total_malloced": int(slabs.get("total_malloced", 0))}


def server_specs(n=NPROC):
    """The standard line-up: cairn in each I/O model, Redis, memcached -t 1 and -t N."""
    specs = [
        ("cairn-1t", "cairn", "cairn reactor 1t", ["--threads", "1"]),
        (f"cairn-{n}t", "cairn", f"cairn reactor {n}t", ["--threads", str(n)]),
        ("cairn-dispatch", "cairn", f"cairn dispatch {n}w", ["--io-model", "dispatch", "--workers", str(n)]),
        ("redis", "redis", "redis", []),
        ("memcached-1t", "memcached", "memcached -t 1", ["-t", "1"]),
        (f"memcached-{n}t", "memcached", f"memcached -t {n}", ["-t", str(n)]),
    ]
    seen, out = set(), []
    for s in specs:
        if s[0] not in seen:
            seen.add(s[0])
            out.append(s)
    return out


class Runner:
    def __init__(self, opts, workdir):
        self.opts = opts
        self.workdir = Path(workdir)
        self.n = 0

    def bench(self, srv, proto, args, timeout=None, check=True):
        """Runs cairn-bench against srv; returns one sample (dict)."""
        self.n += 1
        out = self.workdir / f"run-{self.n}.json"
        err = self.workdir / f"run-{self.n}.err"
        cmd = [str(BENCH_BIN), "-p", str(srv.port_of(proto)), "--protocol", proto, "--json", str(out), "-q"]
        cmd += [str(a) for a in args]
        c0 = srv.cpu_seconds()
        m0 = machine_busy_seconds()
        t0 = time.monotonic()
        with open(err, "wb") as ef:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=ef, preexec_fn=_die_with_parent)
        limit = timeout or 600
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > limit:
                p.kill()
                os.wait4(p.pid, 0)
                raise RuntimeError(f"cairn-bench timed out: {' '.join(cmd)}")
            time.sleep(0.005)
        wall = time.monotonic() - t0
        c1 = srv.cpu_seconds()
        m1 = machine_busy_seconds()
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0 or not out.exists():
            msg = f"cairn-bench failed ({rc}) against {srv.name}/{proto}: {' '.join(cmd)}\n{err.read_text()[-2000:]}"
            if check:
                raise RuntimeError(msg)
            log(msg)
            if not out.exists():
                return None
        d = json.loads(out.read_text())
        ops = max(d["ops"], 1)
        lat = d["latency_us"]
        s = {
            "throughput": d["throughput"],
            "ops": d["ops"],
            "errors": d["errors"] + d["conn_errors"] + d["unfinished"],
            "server_cpu_s": c1 - c0,
            "cpu_us_per_op": (c1 - c0) * 1e6 / ops,
            "bench_cpu_us_per_op": (ru.ru_utime + ru.ru_stime) * 1e6 / ops,
            "bench_cpu_util": (ru.ru_utime + ru.ru_stime) / max(wall, 1e-9),
            "server_cpu_util": (c1 - c0) / max(wall, 1e-9),
            # Cores kept busy by everything else on the machine during the run: the noise indicator.
            "other_cpu_util": max(0.0, (m1 - m0) - (c1 - c0) - (ru.ru_utime + ru.ru_stime)) / max(wall, 1e-9),
            "p50": lat["p50"], "p90": lat["p90"], "p99": lat["p99"], "p999": lat["p999"], "max": lat["max"],
            "mean": lat["mean"],
            "rss": srv.rss_bytes(),
        }
        if d.get("hit_ratio") is not None:
            s["hit_ratio"] = d["hit_ratio"]
        if "send_lag_us" in d:
            s["lag_p50"] = d["send_lag_us"]["p50"]
            s["lag_p99"] = d["send_lag_us"]["p99"]
        if d["error_samples"]:
            s["error_samples"] = d["error_samples"]
        return s

    def load(self, srv, keys, value_size, proto=None, key_size=16, extra=()):
        """Writes every key once (pipelined)."""
        proto = proto or srv.protocols[0]
        return self.bench(srv, proto, ["--load", "--keys", keys, "--key-size", key_size, "--value-size", value_size,
                                       "-c", 4, "-P", 64, *extra], timeout=900)


def aggregate(samples):
    """median / min / max / spread% for every numeric metric over the repeats."""
    samples = [s for s in samples if s]
    out = {}
    if not samples:
        return out
    for k, v in samples[0].items():
        if not isinstance(v, (int, float)):
            continue
        vals = [s[k] for s in samples if isinstance(s.get(k), (int, float))]
        med = statistics.median(vals)
        out[k] = {"median": med, "min": min(vals), "max": max(vals),
                  "spread_pct": (max(vals) - min(vals)) / med * 100 if med else 0.0, "values": vals}
    errs = [e for s in samples for e in s.get("error_samples", [])]
    if errs:
        out["error_samples"] = errs[:5]
    return out


def med(agg, metric):
    m = agg.get(metric)
    return m["median"] if m else float("nan")


def spread(agg, metric):
    m = agg.get(metric)
    return m["spread_pct"] if m else float("nan")


def measured(runner, srv, proto, args):
    """One sample; re-run (up to --noisy-retries times) when other processes kept more than
    --max-other-load cores busy during it. The last attempt is kept either way, and the tables show
    its 'other load'."""
    opts = runner.opts
    smp = None
    for attempt in range(1 + max(0, opts.noisy_retries)):
        smp = runner.bench(srv, proto, args, check=False)
        if smp is None or smp["other_cpu_util"] <= opts.max_other_load:
            break
        log(f"{srv.name}/{proto}: other processes kept {smp['other_cpu_util']:.2f} cores busy; measuring again")
    if smp is not None:
        smp["attempts"] = attempt + 1
    return smp


def round_robin(runner, pairs, args_for, repeats, warmup_args=None):
    """pairs: list of (server, proto, key) ; returns {key: aggregate}. Warm-up once per pair first."""
    samples = {key: [] for _, _, key in pairs}
    if warmup_args is not None:
        for srv, proto, key in pairs:
            runner.bench(srv, proto, args_for(key) + warmup_args, check=False)
    for r in range(repeats):
        for srv, proto, key in pairs:
            samples[key].append(measured(runner, srv, proto, args_for(key)))
    return {key: aggregate(v) | {"samples": v} for key, v in samples.items()}


def fmt_num(x, digits=0):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 1000 and digits == 0:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def fmt_ratio(a, b):
    if not b or b != b or a != a:
        return "–"
    return f"{a / b:.2f}×"


def md_table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def peers_in(results_keys, labels):
    return [k for k in results_keys if not labels[k].startswith("cairn")]


def throughput_table(rows, labels, peers):
    """rows: list of (key, agg). Columns: throughput ± spread, CPU/op, latency, ratios to each peer."""
    headers = ["server", "ops/s (median)", "spread", "server CPU µs/op", "p50 µs", "p99 µs", "p99.9 µs",
               "other load (cores)"]
    for p in peers:
        headers += [f"ops/s vs {labels[p]}", f"CPU/op vs {labels[p]}"]
    aggs = dict(rows)
    out = []
    for key, agg in rows:
        r = [labels[key], fmt_num(med(agg, "throughput")), f"±{spread(agg, 'throughput'):.0f}%",
             fmt_num(med(agg, "cpu_us_per_op"), 2), fmt_num(med(agg, "p50"), 1), fmt_num(med(agg, "p99"), 1),
             fmt_num(med(agg, "p999"), 1), fmt_num(med(agg, "other_cpu_util"), 2)]
        for p in peers:
            r += [fmt_ratio(med(agg, "throughput"), med(aggs[p], "throughput")),
                  fmt_ratio(med(agg, "cpu_us_per_op"), med(aggs[p], "cpu_us_per_op"))]
        out.append(r)
    return md_table(headers, out)


class Suite:
    def __init__(self, name, opts, runner, machine):
        self.name, self.opts, self.runner, self.machine = name, opts, runner, machine
        self.out = Path(opts.out)
        self.servers = []
        self.md = []
        self.data = {"suite": name, "mode": "quick" if opts.quick else "full", "machine": machine,
                     "repeats": opts.repeats, "results": {}}
        self.pngs = []

    def start(self, specs, **kw):
        for name, kind, label, args in specs:
            self.servers.append(Server(name, kind, label, args, workdir=self.runner.workdir, **kw).start())
        return self.servers

    def stop_all(self):
        for s in self.servers:
            s.stop()
        self.servers = []

    def png(self, stem):
        p = self.out / f"{stem}.png"
        self.pngs.append(p.name)
        return p

    def note(self):
        return f"{self.machine['nproc']} cores, {self.machine['cpu_model']}; median of {self.opts.repeats}, bars/whiskers = min..max"

    def write(self, title, intro):
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{self.name}.json").write_text(json.dumps(self.data, indent=1, default=str))
        head = [f"# {title}", "", intro, "", f"Machine: {machine_line(self.machine)}.",
                f"Mode: {self.data['mode']}; each figure is the median of {self.opts.repeats} runs "
                f"(spread = (max-min)/median). Server CPU is utime+stime from /proc/PID/stat over the run. "
                f"'Other load' is how many cores everything except the server and cairn-bench kept busy during "
                f"the run (from /proc/stat): when it is high, that run shared the machine.", ""]
        body = head + self.md + [""] + [f"![{p}]({p})" for p in self.pngs]
        (self.out / f"{self.name}.md").write_text("\n".join(body) + "\n")


def dur(opts, quick, full):
    return opts.duration if opts.duration else (quick if opts.quick else full)


# The binaries under test: main() (run.py) and the other scripts set them from their --cairn / --bench.
CAIRN_BIN = ROOT / "target" / "release" / "cairn-server"
BENCH_BIN = ROOT / "target" / "release" / "cairn-bench"
