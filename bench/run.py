#!/usr/bin/env python3
"""cairn benchmark orchestrator: cairn against Redis and memcached, side by side.

    .venv/bin/python bench/run.py --quick            # < 3 minutes, results in bench/results/quick/
    .venv/bin/python bench/run.py                    # full mode, results in bench/results/
    .venv/bin/python bench/run.py --suites null,memory --repeats 5

Every server runs on free loopback ports and is stopped at the end of its suite.
Each measurement samples the server's CPU time (utime + stime from
/proc/PID/stat) and RSS around one cairn-bench run; every configuration is
repeated (round-robin over the servers, so slow drifts of a shared machine hit
every server alike) and reported as the median with its spread (min..max).

Outputs per suite: <suite>.json (every sample), <suite>.md (tables with ratios
to the peers measured in the same run) and <suite>*.png; plus summary.md.
See bench/README.md for what each suite measures.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cachesim  # noqa: E402

HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
NPROC = os.cpu_count() or 1
MB = 1024 * 1024

SUITES = ["mdcached", "null", "pipeline", "memory", "scaling", "latency", "eviction"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# machine
# --------------------------------------------------------------------------------------

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
    """What was benchmarked: the binary's modification time (its build) and size."""
    try:
        st = os.stat(path)
        return {"path": str(path), "built": _dt.datetime.fromtimestamp(st.st_mtime, _dt.timezone.utc)
                .strftime("%Y-%m-%d %H:%M UTC"), "bytes": st.st_size}
    except OSError:
        return {"path": str(path)}


def machine_line(m):
    return (f"{m['nproc']} cores ({m['cpu_model'] or 'unknown CPU'}), {m['memory_gib']} GiB, Linux {m['kernel']}; "
            f"{m['redis'].split(' sha=')[0]}; {m['memcached']}; cairn {m['cairn_commit']}"
            + (f" (binary built {m['cairn_binary']['built']})" if m.get("cairn_binary", {}).get("built") else "")
            + f"; {m['date']}")


# --------------------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------------------

def machine_busy_seconds():
    """CPU seconds all cores spent busy (user+nice+system+irq+softirq+steal) since boot."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    v = [int(x) for x in f]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / CLK_TCK


# Ports, child processes, RESP and memcached on raw sockets: the shared kit (tests/kit.py). The
# names stay importable from here (the other bench scripts use `run.free_port`, ...).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kit import ServerProcess, die_with_parent as _die_with_parent, free_port, mc_stats, resp_call  # noqa: E402,F401


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


# --------------------------------------------------------------------------------------
# one measurement
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


COLORS = {"cairn": ["#1b7837", "#5aae61", "#a6dba0"], "redis": ["#b2182b"], "memcached": ["#2166ac", "#67a9cf"]}


def color_for(label, idx_by_family={}):
    fam = "cairn" if label.startswith("cairn") else "redis" if label.startswith("redis") else "memcached"
    key = (fam, label)
    if key not in idx_by_family:
        idx_by_family[key] = len([k for k in idx_by_family if k[0] == fam])
    pal = COLORS[fam]
    return pal[idx_by_family[key] % len(pal)]


def _kfmt(ax):
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 1e6:g}M" if abs(v) >= 1e6 else f"{v / 1e3:g}k" if abs(v) >= 1e4 else f"{v:g}"))


def error_bars(ax, series, color_of, fill=0.95):
    """Draws grouped bars with min-max error bars: series is {label: [(median, lo, hi) or None per
    group]}; missing and NaN points are skipped. Returns [(bars, heights)] per series."""
    width = 0.8 / max(1, len(series))
    drawn = []
    for i, (label, vals) in enumerate(series.items()):
        xs, ys, lo, hi = [], [], [], []
        for g, v in enumerate(vals):
            if v is None or v[0] != v[0]:
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            ys.append(v[0])
            lo.append(max(0, v[0] - v[1]))
            hi.append(max(0, v[2] - v[0]))
        bars = ax.bar(xs, ys, width * fill, label=label, color=color_of(label), yerr=[lo, hi], capsize=2,
                      error_kw={"elinewidth": 0.8, "ecolor": "#333"})
        drawn.append((bars, ys))
    return drawn


def grouped_bars(path, title, ylabel, groups, series, note=None, log=False):
    """groups: x tick labels; series: {label: [(median, lo, hi) or None per group]}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(min(12, max(7, 0.35 * len(groups) * max(1, len(series)) + 3)), 4.6))
    n = max(1, len(series))
    error_bars(ax, series, color_for, 0.95)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    if not log:
        _kfmt(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=2 if n > 4 else 1)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lines(path, title, xlabel, ylabel, xs, series, note=None, logx=False, ref_lines=None):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for label, vals in series.items():
        pts = [(x, v) for x, v in zip(xs, vals) if v is not None and v[0] == v[0]]
        if not pts:
            continue
        ax.errorbar([p[0] for p in pts], [p[1][0] for p in pts],
                    yerr=[[max(0, p[1][0] - p[1][1]) for p in pts], [max(0, p[1][2] - p[1][0]) for p in pts]],
                    marker="o", capsize=3, label=label, color=color_for(label))
    for label, y in (ref_lines or {}).items():
        ax.axhline(y, ls="--", lw=1, label=label)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(xlabel)
    _kfmt(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(path_rss, path_own, results, labels, configs, nkeys, note):
    """One panel per value size (linear scales, so the differences show), bars labelled with bytes/key."""
    plt = _plt()
    keys_txt = f"{nkeys / 1e6:g}M" if nkeys >= 1_000_000 else f"{nkeys // 1000}k"
    for path, metric, ylabel, title in (
            (path_rss, "rss_per_key", "RSS bytes per key", "Resident memory per key (lower is better)"),
            (path_own, "own_per_key", "bytes per key (server's own accounting)",
             "Memory per key as each server accounts it")):
        fig, axes = plt.subplots(1, len(configs), figsize=(4.2 * len(configs) + 1, 4.6))
        for ax, (cname, vsize) in zip(axes, configs):
            names = list(labels)
            vals = [triple(results[cname].get(k), metric) for k in names]
            xs = range(len(names))
            bars = ax.bar(xs, [v[0] if v else 0 for v in vals], 0.7, color=[color_for(labels[k]) for k in names],
                          yerr=[[v[0] - v[1] if v else 0 for v in vals], [v[2] - v[0] if v else 0 for v in vals]],
                          capsize=3)
            for b, v in zip(bars, vals):
                if v:
                    ax.annotate(f"{v[0]:.0f}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                                va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
            ax.axhline(16 + vsize, ls="--", lw=1, color="#555", label=f"payload ({16 + vsize} B)")
            ax.set_xticks(list(xs))
            ax.set_xticklabels([labels[k] for k in names], fontsize=8)
            ax.set_title(f"{keys_txt} keys: 16 B key + {cname} value", fontsize=10)
            ax.set_ylabel(ylabel)
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
        fig.suptitle(title)
        fig.text(0.01, 0.01, note, fontsize=7, color="#555")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(path, dpi=110)
        plt.close(fig)


def triple(agg, metric, scale=1.0):
    m = agg.get(metric) if agg else None
    if not m:
        return None
    return (m["median"] * scale, m["min"] * scale, m["max"] * scale)


# --------------------------------------------------------------------------------------
# suites
# --------------------------------------------------------------------------------------

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


def suite_mdcached(opts, runner, machine):
    """Suite 1: mdcached Table I/II: 90/10 over 30,000 records of 1 KB +- 500 B, 10 and 40 clients."""
    s = Suite("mdcached", opts, runner, machine)
    d = dur(opts, 0.25, 3.0)
    clients = [10, 40]
    try:
        servers = s.start(server_specs())
        labels = {x.name: x.label for x in servers}
        for srv in servers:
            runner.load(srv, 30000, "1024+-500")
        for proto in ("resp", "memcache"):
            pairs = [(srv, proto, srv.name) for srv in servers if proto in srv.protocols]
            for c in clients:
                args = lambda key, c=c: ["-c", c, "-d", d, "--keys", 30000, "--value-size", "1024+-500",
                                         "--read-ratio", 0.9, "--seed", 7]
                res = round_robin(runner, pairs, args, opts.repeats, warmup_args=["-d", 0.2 if opts.quick else 1.0])
                s.data["results"][f"{proto}/c{c}"] = res
                peers = peers_in(res.keys(), labels)
                s.md += [f"## {proto.upper() if proto == 'resp' else 'memcached text'}, {c} clients", "",
                         throughput_table(list(res.items()), labels, peers), ""]
        # plots: throughput and CPU/op per (proto, clients)
        groups = [f"{p} c={c}" for p in ("resp", "memcache") for c in clients]
        names = [x.name for x in servers]
        for metric, ylabel, stem, ttl in (
                ("throughput", "throughput (ops/s)", "mdcached_throughput", "90% GET / 10% SET, 30k keys, 1 KB ± 500 B"),
                ("cpu_us_per_op", "server CPU per op (µs)", "mdcached_cpu", "Server CPU per operation (lower is better)"),
                ("p99", "p99 latency (µs)", "mdcached_p99", "p99 latency, closed loop")):
            series = {labels[n]: [triple(s.data["results"][f"{p}/c{c}"].get(n), metric)
                                  for p in ("resp", "memcache") for c in clients] for n in names}
            grouped_bars(s.png(stem), f"mdcached Table I/II: {ttl}", ylabel, groups, series, note=s.note())
    finally:
        s.stop_all()
    s.write("Suite 1: mdcached Table I/II workload",
            "90% reads / 10% writes (GET/SET) over 30,000 records of 1 KB ± 500 B (uniform 524..1524 B), uniform keys, "
            "closed loop with 10 and 40 connections (one request outstanding each), through RESP and the memcached "
            "text protocol. Ratios compare each server with the peers in the same table.")
    return s


def suite_null(opts, runner, machine):
    """Suite 2: null transactions (PING / mn) and GET of a 32 B value: the syscall floor."""
    s = Suite("null", opts, runner, machine)
    d = dur(opts, 0.25, 2.0)
    clients = [10] if opts.quick else [10, 40]
    try:
        servers = s.start(server_specs())
        labels = {x.name: x.label for x in servers}
        for srv in servers:
            runner.load(srv, 10000, 32)
        for proto in ("resp", "memcache"):
            pairs = [(srv, proto, srv.name) for srv in servers if proto in srv.protocols]
            for c in clients:
                ping = round_robin(runner, pairs, lambda k, c=c: ["-c", c, "-d", d, "--ping"], opts.repeats,
                                   warmup_args=["-d", 0.15 if opts.quick else 0.5])
                get = round_robin(runner, pairs, lambda k, c=c: ["-c", c, "-d", d, "--keys", 10000, "--read-ratio", 1],
                                  opts.repeats)
                s.data["results"][f"{proto}/c{c}/ping"] = ping
                s.data["results"][f"{proto}/c{c}/get"] = get
                peers = peers_in(ping.keys(), labels)
                null_name = "PING" if proto == "resp" else "mn"
                s.md += [f"## {null_name} ({proto}), {c} clients", "", throughput_table(list(ping.items()), labels, peers), ""]
                rows = []
                for k in ping:
                    pt, gt = med(ping[k], "throughput"), med(get[k], "throughput")
                    pc, gc = med(ping[k], "cpu_us_per_op"), med(get[k], "cpu_us_per_op")
                    rows.append([labels[k], fmt_num(pt), fmt_num(gt), fmt_ratio(gt, pt), fmt_num(pc, 2), fmt_num(gc, 2),
                                 fmt_num(gc - pc, 2)])
                s.md += [f"GET (32 B values, 10k keys) against the {null_name} floor, {c} clients:", "",
                         md_table(["server", f"{null_name} ops/s", "GET ops/s", "GET/null", f"{null_name} CPU µs/op",
                                   "GET CPU µs/op", "GET cost above floor µs"], rows), ""]
        names = [x.name for x in servers]
        groups = [f"{'PING' if p == 'resp' else 'mn'} c={c}" for p in ("resp", "memcache") for c in clients] + \
                 [f"GET/{p} c={c}" for p in ("resp", "memcache") for c in clients]
        keys = [f"{p}/c{c}/ping" for p in ("resp", "memcache") for c in clients] + \
               [f"{p}/c{c}/get" for p in ("resp", "memcache") for c in clients]
        for metric, ylabel, stem, ttl in (("throughput", "throughput (ops/s)", "null_throughput", "Null transactions vs GET"),
                                          ("cpu_us_per_op", "server CPU per op (µs)", "null_cpu", "Server CPU per null transaction / GET")):
            series = {labels[n]: [triple(s.data["results"][k].get(n), metric) for k in keys] for n in names}
            grouped_bars(s.png(stem), ttl, ylabel, groups, series, note=s.note())
    finally:
        s.stop_all()
    s.write("Suite 2: null transactions (mdcached Fig. 6)",
            "PING (RESP) and `mn` (memcached meta no-op) do no work in the store: their cost is the floor set by "
            "syscalls and the event loop. The second table puts a GET of a 32-byte value next to it, so the "
            "difference is what the store and the command path cost.")
    return s


def suite_pipeline(opts, runner, machine):
    """Suite 3: GET / SET at pipeline depths 1, 4, 16, 64."""
    s = Suite("pipeline", opts, runner, machine)
    d = dur(opts, 0.15, 2.0)
    depths = [1, 4, 16, 64]
    n = NPROC
    specs = [x for x in server_specs() if x[0] in ("cairn-1t", f"cairn-{n}t", "redis", f"memcached-{n}t", "memcached-1t")]
    if opts.quick:
        specs = [x for x in specs if x[0] != "memcached-1t"]
    try:
        servers = s.start(specs)
        labels = {x.name: x.label for x in servers}
        for srv in servers:
            runner.load(srv, 100000, 32)
        combos = [(srv, "resp") for srv in servers if srv.kind != "memcached"] + \
                 [(srv, "memcache") for srv in servers if srv.kind == "memcached" or srv.name == f"cairn-{n}t"]
        for op, ratio in (("get", 1), ("set", 0)):
            for p in depths:
                pairs = [(srv, proto, f"{srv.name}/{proto}") for srv, proto in combos]
                res = round_robin(runner, pairs, lambda k, p=p, ratio=ratio: [
                    "-c", 10, "-P", p, "-d", d, "--keys", 100000, "--value-size", 32, "--read-ratio", ratio],
                    opts.repeats, warmup_args=None if opts.quick else ["-d", 0.5])
                s.data["results"][f"{op}/P{p}"] = res
        lab = {f"{srv.name}/{proto}": f"{labels[srv.name]} ({proto})" for srv, proto in combos}
        for op in ("get", "set"):
            resp_peer = [k for k in lab if k.startswith("redis")]
            mc_peer = [k for k in lab if k.startswith("memcached") and k.endswith(f"-{n}t/memcache")] or \
                      [k for k in lab if k.startswith("memcached")]
            rows = []
            for k in lab:
                peer = resp_peer if k.endswith("/resp") else mc_peer
                r = [lab[k]]
                for p in depths:
                    a = s.data["results"][f"{op}/P{p}"][k]
                    b = s.data["results"][f"{op}/P{p}"][peer[0]] if peer else None
                    r.append(f"{fmt_num(med(a, 'throughput'))} ({fmt_ratio(med(a, 'throughput'), med(b, 'throughput')) if b else '–'})")
                rows.append(r)
            s.md += [f"## {op.upper()}, 10 connections: ops/s (ratio to {labels.get('redis', 'redis')} for RESP rows, "
                     f"to memcached -t {n} for memcached rows)", "",
                     md_table(["server"] + [f"P={p}" for p in depths], rows), ""]
            rows = []
            for k in lab:
                peer = resp_peer if k.endswith("/resp") else mc_peer
                r = [lab[k]]
                for p in depths:
                    a = s.data["results"][f"{op}/P{p}"][k]
                    b = s.data["results"][f"{op}/P{p}"][peer[0]] if peer else None
                    r.append(f"{fmt_num(med(a, 'cpu_us_per_op'), 2)} ({fmt_ratio(med(a, 'cpu_us_per_op'), med(b, 'cpu_us_per_op')) if b else '–'})")
                rows.append(r)
            s.md += [f"{op.upper()}: server CPU µs per op (ratio to the same peer):", "",
                     md_table(["server"] + [f"P={p}" for p in depths], rows), ""]
            series = {lab[k]: [triple(s.data["results"][f"{op}/P{p}"][k], "throughput") for p in depths] for k in lab}
            lines(s.png(f"pipeline_{op}"), f"{op.upper()} throughput vs pipeline depth (10 connections, 32 B values)",
                  "pipeline depth (requests in flight per connection)", "throughput (ops/s)", depths, series,
                  note=s.note(), logx=True)
            series = {lab[k]: [triple(s.data["results"][f"{op}/P{p}"][k], "cpu_us_per_op") for p in depths] for k in lab}
            lines(s.png(f"pipeline_{op}_cpu"), f"{op.upper()}: server CPU per op vs pipeline depth",
                  "pipeline depth (requests in flight per connection)", "server CPU per op (µs)", depths, series,
                  note=s.note(), logx=True)
    finally:
        s.stop_all()
    s.write("Suite 3: pipelining",
            "GET (100% reads) and SET (100% writes) over 100,000 keys with 32-byte values, 10 connections each "
            "keeping P requests in flight.")
    return s


def suite_memory(opts, runner, machine):
    """Suite 4: memory per item: 16 B keys with 32 B values and with 1 KB values."""
    s = Suite("memory", opts, runner, machine)
    nkeys = 100_000 if opts.quick else 1_000_000
    n = NPROC
    configs = [("32B", 32), ("1KB", 1024)]
    specs = [x for x in server_specs() if x[0] in (f"cairn-{n}t", "redis", f"memcached-{n}t")]
    labels = {x[0]: x[2] for x in specs}
    try:
        for cname, vsize in configs:
            samples = {x[0]: [] for x in specs}
            for rep in range(opts.repeats):
                for spec in specs:
                    srv = Server(spec[0], spec[1], spec[2], spec[3], workdir=runner.workdir,
                                 memcached_mb=max(1024, int(nkeys * (vsize + 200) / MB * 1.3))).start()
                    try:
                        time.sleep(0.2)
                        rss0, info0 = srv.rss_bytes(), srv.info()
                        lr = runner.load(srv, nkeys, vsize)
                        time.sleep(0.3 if opts.quick else 1.0)
                        rss1, info1 = srv.rss_bytes(), srv.info()
                        samples[spec[0]].append({
                            "rss_per_key": (rss1 - rss0) / nkeys,
                            "own_per_key": (info1["used_memory"] - info0["used_memory"]) / nkeys,
                            "rss_total": rss1, "keys": info1["keys"], "errors": lr["errors"],
                            "load_throughput": lr["throughput"],
                            "payload_per_key": 16 + vsize,
                        } | ({"malloced_per_key": (info1["total_malloced"] - info0.get("total_malloced", 0)) / nkeys}
                             if "total_malloced" in info1 else {}))
                    finally:
                        srv.stop()
            res = {k: aggregate(v) | {"samples": v} for k, v in samples.items()}
            s.data["results"][cname] = res
            rows = []
            for k in res:
                a = res[k]
                r = [labels[k], fmt_num(med(a, "keys")), fmt_num(med(a, "rss_per_key"), 1), f"±{spread(a, 'rss_per_key'):.0f}%",
                     fmt_num(med(a, "own_per_key"), 1), fmt_num(med(a, "rss_per_key") - 16 - vsize, 1)]
                for p in ("redis", f"memcached-{n}t"):
                    r.append(fmt_ratio(med(a, "rss_per_key"), med(res[p], "rss_per_key")))
                rows.append(r)
            s.md += [f"## {nkeys:,} keys of 16 B with {vsize} B values", "",
                     md_table(["server", "keys held", "RSS bytes/key", "spread", "own accounting bytes/key",
                               "RSS overhead over payload B/key", "RSS/key vs redis", f"RSS/key vs memcached -t {n}"], rows),
                     "", "Own accounting: `used_memory` from INFO (cairn, Redis); memcached's `bytes` stat (item bytes, "
                     "excluding slab slack; `stats slabs` total_malloced per key: "
                     + ", ".join(f"{fmt_num(med(res[k], 'malloced_per_key'), 1)}" for k in res if "malloced_per_key" in res[k])
                     + ").", ""]
        plot_memory(s.png("memory_rss"), s.png("memory_own"), s.data["results"], labels, configs, nkeys, s.note())
    finally:
        s.stop_all()
    s.write("Suite 4: memory per item",
            f"A fresh server per run; {nkeys:,} keys of 16 bytes written once (SET, pipelined), then RSS (from "
            "/proc/PID/statm) and the server's own accounting are read after a one-second pause. Per-key figures are "
            "(after − before) / keys. Payload is 16 B + the value size.")
    return s


def suite_scaling(opts, runner, machine):
    """Suite 7: thread scaling 1..cores (mdcached workload, 40 clients)."""
    s = Suite("scaling", opts, runner, machine)
    d = dur(opts, 0.3, 3.0)
    threads = list(range(1, NPROC + 1))
    specs = []
    for t in threads:
        specs.append((f"cairn-r{t}", "cairn", f"cairn reactor", ["--threads", str(t)]))
        specs.append((f"cairn-d{t}", "cairn", f"cairn dispatch", ["--io-model", "dispatch", "--workers", str(t)]))
        specs.append((f"memcached-{t}", "memcached", f"memcached", ["-t", str(t)]))
    specs.append(("redis", "redis", "redis", []))
    try:
        servers = s.start(specs)
        for srv in servers:
            runner.load(srv, 30000, "1024+-500")
        fam = {"cairn reactor": "resp", "cairn dispatch": "resp", "memcached": "memcache", "redis": "resp"}
        pairs = [(srv, fam[srv.label], srv.name) for srv in servers]
        pairs += [(srv, "memcache", srv.name + "/mc") for srv in servers if srv.name.startswith("cairn-r")]
        res = round_robin(runner, pairs, lambda k: ["-c", 40, "-d", d, "--keys", 30000, "--value-size", "1024+-500",
                                                    "--read-ratio", 0.9], opts.repeats, warmup_args=["-d", 0.3])
        s.data["results"] = res
        fams = [("cairn reactor (RESP)", "cairn-r{}"), ("cairn reactor (memcached)", "cairn-r{}/mc"),
                ("cairn dispatch (RESP)", "cairn-d{}"), ("memcached", "memcached-{}")]
        rows = []
        for label, pat in fams:
            for t in threads:
                a = res[pat.format(t)]
                base = res[pat.format(1)]
                rows.append([label, t, fmt_num(med(a, "throughput")), f"±{spread(a, 'throughput'):.0f}%",
                             fmt_ratio(med(a, "throughput"), med(base, "throughput")), fmt_num(med(a, "cpu_us_per_op"), 2),
                             fmt_num(med(a, "server_cpu_util"), 2),
                             fmt_ratio(med(a, "throughput"), med(res["redis"], "throughput"))])
        r = res["redis"]
        rows.append(["redis (single-threaded)", 1, fmt_num(med(r, "throughput")), f"±{spread(r, 'throughput'):.0f}%", "1.00×",
                     fmt_num(med(r, "cpu_us_per_op"), 2), fmt_num(med(r, "server_cpu_util"), 2), "1.00×"])
        s.md += ["## 90/10 GET/SET, 30k keys of 1 KB ± 500 B, 40 connections", "",
                 md_table(["server", "threads", "ops/s", "spread", "vs 1 thread", "server CPU µs/op",
                           "server CPU (cores busy)", "ops/s vs redis"], rows), ""]
        for metric, ylabel, stem, ttl in (("throughput", "throughput (ops/s)", "scaling_throughput", "Throughput vs server threads"),
                                          ("cpu_us_per_op", "server CPU per op (µs)", "scaling_cpu", "Server CPU per op vs server threads")):
            series = {label: [triple(res[pat.format(t)], metric) for t in threads] for label, pat in fams}
            lines(s.png(stem), f"{ttl} (40 conns, 90/10, 1 KB ± 500 B)", "server threads (--threads / --workers / -t)",
                  ylabel, threads, series, note=s.note(), ref_lines={"redis (1 thread)": med(res["redis"], metric)})
    finally:
        s.stop_all()
    s.write("Suite 7: thread scaling",
            f"The mdcached workload (90/10, 30k keys, 1 KB ± 500 B) with 40 connections against each server at 1..{NPROC} "
            "threads. On a machine with few cores the load generator shares the CPUs with the server, so the "
            "interesting figure is CPU per op and how it changes with threads. Run on a bigger machine to see "
            "real scaling; results are labelled with the machine.")
    return s


def suite_latency(opts, runner, machine):
    """Suite 5: open-loop latency at 50% and 80% of each server's measured max, plus disturbances."""
    s = Suite("latency", opts, runner, machine)
    d = dur(opts, 0.3, 5.0)
    n = NPROC
    specs = [x for x in server_specs() if x[0] in ("cairn-1t", f"cairn-{n}t", "redis", f"memcached-{n}t")]
    # cairn refuses values above 64 MB by default; the disturbance below writes a 100 MB one.
    specs = [(a, b, c, args + ["--max-value-size", "256mb"] if b == "cairn" else args) for a, b, c, args in specs]
    conns = 10
    tail_s = 0.6 if opts.quick else 2.5
    wl = ["--keys", 30000, "--value-size", "1024+-500", "--read-ratio", 0.9]
    try:
        servers = s.start(specs)
        labels = {x.name: x.label for x in servers}
        for srv in servers:
            runner.load(srv, 30000, "1024+-500")
        pairs = [(srv, srv.protocols[0], srv.name) for srv in servers]
        maxes = round_robin(runner, pairs, lambda k: ["-c", conns, "-d", d] + wl, opts.repeats,
                            warmup_args=["-d", 0.2 if opts.quick else 1.0])
        s.data["results"]["max"] = maxes
        for frac in (0.5, 0.8):
            res = round_robin(runner, pairs, lambda k, f=frac: ["-c", conns, "-d", d, "--rate",
                                                                 round(med(maxes[k], "throughput") * f)] + wl,
                              opts.repeats)
            s.data["results"][f"open{int(frac * 100)}"] = res
        # disturbances, at 50% load: (a) many keys expiring at once, (b) deleting a 100 MB value.
        # Full mode repeats each (round-robin over the servers); quick mode runs each once.
        nexp = 50_000 if opts.quick else 1_000_000
        reps = 1 if opts.quick else opts.repeats
        import threading

        # How fast each server takes pipelined small writes (sizes the expiry deadline below).
        load_rate = {srv.name: runner.load(srv, 20_000, 32, extra=["--key-prefix", "probe:"])["throughput"]
                     for srv in servers}
        exp_samples = {srv.name: [] for srv in servers}
        del_samples = {srv.name: [] for srv in servers}
        for rep in range(reps):
            for srv in servers:
                rate = round(med(maxes[srv.name], "throughput") * 0.5)
                proto = srv.protocols[0]
                # (a) keys under another prefix, all expiring in the same second, which falls inside the run:
                # the deadline leaves twice the expected load time plus a second.
                at = int(time.time() + 2 * nexp / max(load_rate[srv.name], 1.0) + 1.0) + 1
                runner.bench(srv, proto, ["--load", "--keys", nexp, "--key-prefix", "exp:", "--value-size", 32,
                                          "-c", 4, "-P", 64, "--expire-at", at], timeout=600)
                before = srv.info()["keys"]
                lead = at - time.time()
                smp = runner.bench(srv, proto, ["-c", conns, "-d", max(d, lead + tail_s), "--rate", rate] + wl,
                                   check=False)
                after = srv.info()
                if smp:
                    smp.update(keys_before=before, keys_after=after["keys"], expiry_offset_s=lead)
                exp_samples[srv.name].append(smp)
                # (b) a 100 MB value deleted in the middle of the run (RESP servers only).
                if srv.kind == "memcached":
                    continue
                resp_call(srv.resp_port, "SET", "big:value", b"x" * (100 * MB))
                took = {}

                def deleter(port=srv.resp_port, took=took):
                    time.sleep(0.4 if opts.quick else 1.0)
                    t0 = time.monotonic()
                    resp_call(port, "DEL", "big:value")
                    took["s"] = time.monotonic() - t0

                th = threading.Thread(target=deleter)
                th.start()
                smp = runner.bench(srv, proto, ["-c", conns, "-d", max(d, 1.0 if opts.quick else 3.0), "--rate", rate]
                                   + wl, check=False)
                th.join()
                if smp:
                    smp["del_seconds"] = took.get("s", float("nan"))
                del_samples[srv.name].append(smp)
        for name_, v in exp_samples.items():
            s.data["results"].setdefault("expire", {})[name_] = aggregate(v) | {"samples": v}
        for name_, v in del_samples.items():
            if v:
                s.data["results"].setdefault("bigdel", {})[name_] = aggregate(v) | {"samples": v}
        rows = []
        for k in labels:
            mx = maxes[k]
            r = [labels[k], servers[[x.name for x in servers].index(k)].protocols[0], fmt_num(med(mx, "throughput")),
                 fmt_num(med(mx, "p50"), 1), fmt_num(med(mx, "p99"), 1)]
            for tag in ("open50", "open80"):
                a = s.data["results"][tag][k]
                r += [fmt_num(med(a, "throughput")), fmt_num(med(a, "p50"), 1), fmt_num(med(a, "p99"), 1),
                      fmt_num(med(a, "p999"), 1), fmt_num(med(a, "max"), 1)]
            rows.append(r)
        s.md += [f"## Open loop at 50% and 80% of each server's closed-loop maximum ({conns} connections)", "",
                 "Latency is measured from each request's intended send time, so stalls are not hidden "
                 "(no coordinated omission). All latencies in µs.", "",
                 md_table(["server", "protocol", "max ops/s", "max p50", "max p99",
                           "50%: ops/s", "p50", "p99", "p99.9", "max",
                           "80%: ops/s", "p50", "p99", "p99.9", "max"], rows), ""]
        rows = []
        for k in labels:
            for tag, what in (("open50", "50% load, quiet"), ("expire", f"{nexp:,} keys expire at once"),
                              ("bigdel", "100 MB value deleted")):
                a = s.data["results"].get(tag, {}).get(k)
                if not a:
                    continue
                extra = ""
                if tag == "expire":
                    extra = (f"keys {med(a, 'keys_before'):,.0f} → {med(a, 'keys_after'):,.0f} at the end; expiry "
                             f"{med(a, 'expiry_offset_s'):.1f} s into the run")
                if tag == "bigdel":
                    extra = f"DEL took {med(a, 'del_seconds') * 1000:.1f} ms"
                rows.append([labels[k], what, fmt_num(med(a, "p50"), 1), fmt_num(med(a, "p99"), 1),
                             fmt_num(med(a, "p999"), 1), fmt_num(med(a, "max"), 1), extra])
        s.md += [f"## Disturbances at 50% load ({'one run each' if opts.quick else f'median of {opts.repeats} runs'})", "",
                 md_table(["server", "during", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "note"], rows), ""]
        groups = ["50% p50", "50% p99", "50% p99.9", "80% p50", "80% p99", "80% p99.9"]
        series = {labels[k]: [triple(s.data["results"][t][k], m) for t in ("open50", "open80") for m in ("p50", "p99", "p999")]
                  for k in labels}
        grouped_bars(s.png("latency_open_loop"), "Open-loop latency at 50% / 80% of max (90/10, 1 KB ± 500 B)",
                     "latency (µs, log scale)", groups, series, note=s.note(), log=True)
        groups = ["quiet p99", "quiet p99.9", "expiry p99", "expiry p99.9", "100MB DEL p99", "100MB DEL p99.9"]
        series = {labels[k]: [triple(s.data["results"].get(t, {}).get(k), m) for t in ("open50", "expire", "bigdel")
                              for m in ("p99", "p999")] for k in labels}
        grouped_bars(s.png("latency_disturbances"), "Tail latency at 50% load while keys expire / a 100 MB value is deleted",
                     "latency (µs, log scale)", groups, series, note=s.note(), log=True)
    finally:
        s.stop_all()
    s.write("Suite 5: latency under load",
            "First each server's closed-loop maximum (10 connections, 90/10 over 30k keys of 1 KB ± 500 B), then "
            "open-loop runs at 50% and 80% of it. Then, at 50%, two disturbances: a large batch of keys all "
            "expiring in the same second during the run, and a DEL of a 100 MB value (RESP servers).")
    return s


def suite_eviction(opts, runner, machine):
    """Suite 6: hit ratio of a Zipf stream against a cache holding 10% of the keys."""
    s = Suite("eviction", opts, runner, machine)
    nkeys = 20_000 if opts.quick else 100_000
    nreq = 40_000 if opts.quick else 300_000
    vsize = 1024
    frac = 0.10
    n = NPROC
    skews = [0.8, 0.99]
    specs = [(f"cairn-{n}t", "cairn", f"cairn (CLOCK)", ["--threads", str(n)]),
             ("redis", "redis", "redis allkeys-lru", ["--maxmemory-policy", "allkeys-lru"]),
             (f"memcached-{n}t", "memcached", f"memcached (seg. LRU)", ["-t", str(n)])]
    labels = {x[0]: x[2] for x in specs}
    try:
        # Calibrate: bytes per item as each server accounts them, with no limit.
        per_item = {}
        for spec in specs:
            srv = Server(*spec, workdir=runner.workdir, memcached_mb=1024).start()
            try:
                i0 = srv.info()
                runner.load(srv, nkeys, vsize)
                i1 = srv.info()
                if srv.kind == "memcached":
                    per_item[spec[0]] = (i1["total_malloced"] - i0["total_malloced"]) / nkeys
                else:
                    per_item[spec[0]] = (i1["used_memory"] - i0["used_memory"]) / nkeys
            finally:
                srv.stop()
        s.data["per_item_bytes"] = per_item
        for skew in skews:
            keyfile = runner.workdir / f"keys-{skew}.bin"
            stream = []
            for seed in (11, 12):  # warm-up run, then measured run
                subprocess.run([str(BENCH_BIN), "--port", "1", "--dump-keys", str(keyfile), "--keys", str(nkeys),
                                "--requests", str(nreq), "--dist", "zipf", "--zipf-s", str(skew), "--seed", str(seed)],
                               check=True)
                stream.append(cachesim.load_keys(keyfile))
            keys = stream[0] + stream[1]
            cap = int(nkeys * frac)
            sims = {}
            for pol in cachesim.POLICIES:
                t0 = time.monotonic()
                h, tot = cachesim.simulate(pol, keys, cap, warm=nreq)
                sims[pol] = h / tot
                log(f"eviction sim {pol} s={skew}: {h / tot:.4f} ({time.monotonic() - t0:.1f}s)")
            samples = {x[0]: [] for x in specs}
            for rep in range(opts.repeats):
                for spec in specs:
                    base_mb = 1024
                    if spec[1] == "memcached":
                        mb = max(1, round(per_item[spec[0]] * cap / MB))
                        srv = Server(*spec, workdir=runner.workdir, memcached_mb=mb).start()
                    else:
                        srv = Server(*spec, workdir=runner.workdir, memcached_mb=base_mb).start()
                    try:
                        proto = srv.protocols[0]
                        if srv.kind != "memcached":
                            base = srv.info()["used_memory"]
                            resp_call(srv.resp_port, "CONFIG", "SET", "maxmemory", int(base + per_item[spec[0]] * cap))
                        common = ["--keys", nkeys, "--dist", "zipf", "--zipf-s", skew, "--read-ratio", 1, "--fill-on-miss",
                                  "--value-size", vsize, "-c", 1, "-P", 8, "--requests", nreq]
                        runner.bench(srv, proto, common + ["--seed", 11], timeout=600)
                        m = runner.bench(srv, proto, common + ["--seed", 12], timeout=600)
                        info = srv.info()
                        m["items_held"] = info["keys"]
                        m["capacity_frac"] = info["keys"] / nkeys
                        m["evicted"] = info["evicted"]
                        samples[spec[0]].append(m)
                    finally:
                        srv.stop()
            res = {k: aggregate(v) | {"samples": v} for k, v in samples.items()}
            s.data["results"][f"zipf{skew}"] = {"servers": res, "sim": sims, "capacity_items": cap}
            rows = [[labels[k], f"{med(res[k], 'hit_ratio') * 100:.2f}%", f"±{spread(res[k], 'hit_ratio'):.1f}%",
                     f"{med(res[k], 'items_held'):,.0f} ({med(res[k], 'capacity_frac') * 100:.1f}%)",
                     fmt_ratio(med(res[k], "hit_ratio"), sims["lru"])] for k in res]
            rows += [[f"simulated {cachesim.LABELS[p]}", f"{v * 100:.2f}%", "–", f"{cap:,} (10.0%)", fmt_ratio(v, sims["lru"])]
                     for p, v in sims.items()]
            s.md += [f"## Zipf s={skew}: {nkeys:,} keys of {vsize} B, cache sized for {cap:,} items (10%)", "",
                     md_table(["cache", "hit ratio", "spread", "items held at end (fraction of keys)", "vs simulated LRU"], rows), ""]
        plt_groups = [f"Zipf {sk}" for sk in skews]
        plt = _plt()
        fig, ax = plt.subplots(figsize=(8, 4.6))
        allrows = [(labels[x[0]], [triple(s.data["results"][f"zipf{sk}"]["servers"][x[0]], "hit_ratio", 100) for sk in skews], color_for(labels[x[0]]))
                   for x in specs]
        width = 0.8 / len(specs)
        for i, (label, vals, col) in enumerate(allrows):
            xs = [g - 0.4 + width * (i + 0.5) for g in range(len(skews))]
            ax.bar(xs, [v[0] for v in vals], width * 0.9, label=label, color=col,
                   yerr=[[v[0] - v[1] for v in vals], [v[2] - v[0] for v in vals]], capsize=3)
        # The simulated policies: reference lines across each group.
        styles = [("#444444", "--"), ("#8c510a", ":"), ("#762a83", "-."), ("#000000", (0, (5, 1)))]
        for (col, ls), p in zip(styles, cachesim.POLICIES):
            for g, sk in enumerate(skews):
                ax.hlines(s.data["results"][f"zipf{sk}"]["sim"][p] * 100, g - 0.45, g + 0.45, colors=col,
                          linestyles=ls, lw=1.6, label=f"simulated {cachesim.LABELS[p]}" if g == 0 else None)
        ax.set_xticks(range(len(skews)))
        ax.set_xticklabels(plt_groups)
        ax.set_ylabel("hit ratio (%)")
        ax.set_title(f"Hit ratio, cache = 10% of {nkeys:,} keys (servers vs simulated policies)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.text(0.01, 0.01, s.note(), fontsize=7, color="#555")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(s.png("eviction_hit_ratio"), dpi=110)
        plt.close(fig)
    finally:
        s.stop_all()
    s.write("Suite 6: eviction hit ratio",
            f"A Zipf key stream (cache-aside: GET, and SET of 1 KB after a miss; one connection, 8 in flight) against "
            f"each server with its memory limit set to hold 10% of the {nkeys:,} keys. The limit is calibrated per server "
            f"from its own accounting of {nkeys:,} items written without a limit (bytes per item: "
            + ", ".join(f"{labels[k]} {v:.0f}" for k, v in s.data.get("per_item_bytes", {}).items())
            + "; memcached's -m is in whole megabytes of slab pages). A warm-up stream runs first; the hit ratio is "
            "that of a second stream. The simulated policies replay exactly the same two streams "
            "(`cairn-bench --dump-keys`) with a capacity of 10% of the keys.")
    return s


SUITE_FUNCS = {"mdcached": suite_mdcached, "null": suite_null, "pipeline": suite_pipeline, "memory": suite_memory,
               "scaling": suite_scaling, "latency": suite_latency, "eviction": suite_eviction}


def headline_rows(out):
    """The key figures of every suite present in `out`, for cairn with one thread per core and with one
    thread, Redis, and memcached -t N and -t 1; ratios pair like with like (N threads with memcached -t N,
    one event loop with Redis and memcached -t 1)."""
    rows = []

    def load(name):
        p = Path(out) / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    def get(d, *path):
        for k in path:
            if not isinstance(d, dict) or k not in d:
                return None
            d = d[k]
        return d

    def m(agg, metric, scale=1.0):
        v = get(agg, metric, "median")
        return None if v is None else v * scale

    def add(what, unit, vals, digits=0, lower_better=False):
        """vals: {'cN', 'c1', 'redis', 'mN', 'm1'} -> value or None."""
        def f(x):
            return "–" if x is None else fmt_num(x, digits)

        def rt(a, b):
            return "–" if a is None or b is None or not b else f"{a / b:.2f}×"

        v = {k: vals.get(k) for k in ("cN", "c1", "redis", "mN", "m1")}
        rows.append([what, unit + (" ↓" if lower_better else ""), f(v["cN"]), f(v["c1"]), f(v["redis"]), f(v["mN"]),
                     f(v["m1"]), rt(v["cN"], v["redis"]), rt(v["c1"], v["redis"]), rt(v["cN"], v["mN"]),
                     rt(v["c1"], v["m1"])])

    for name in SUITES:
        d = load(name)
        if not d:
            continue
        n = d["machine"]["nproc"]
        R = d["results"]
        names = {"cN": f"cairn-{n}t", "c1": "cairn-1t", "redis": "redis", "mN": f"memcached-{n}t", "m1": "memcached-1t"}

        def pick(table, metric, protos=("resp", "memcache"), scale=1.0, keyfmt="{}"):
            out_ = {}
            for k, srv in names.items():
                proto = "memcache" if k.startswith("m") else None
                t = table(proto)
                if t is not None:
                    out_[k] = m(get(t, keyfmt.format(srv)), metric, scale)
            return out_

        if name == "mdcached":
            for c in (10, 40):
                for proto, what in (("resp", "RESP"), ("memcache", "memcached text")):
                    t = get(R, f"{proto}/c{c}") or {}
                    if proto == "resp":
                        vals = {k: m(t.get(srv), "throughput") for k, srv in names.items() if not k.startswith("m")}
                        cpu = {k: m(t.get(srv), "cpu_us_per_op") for k, srv in names.items() if not k.startswith("m")}
                    else:
                        vals = {k: m(t.get(srv), "throughput") for k, srv in names.items() if k != "redis"}
                        cpu = {k: m(t.get(srv), "cpu_us_per_op") for k, srv in names.items() if k != "redis"}
                    add(f"mdcached 90/10, 1 KB ± 500 B, {c} clients, {what}", "ops/s", vals)
                    add(f"mdcached 90/10, 1 KB ± 500 B, {c} clients, {what}", "server CPU µs/op", cpu, 2, True)
        elif name == "null":
            for key, what, proto in (("resp/c10/ping", "PING", "resp"), ("resp/c10/get", "GET 32 B (RESP)", "resp"),
                                     ("memcache/c10/ping", "mn", "memcache"),
                                     ("memcache/c10/get", "GET 32 B (memcached text)", "memcache")):
                t = get(R, key) or {}
                vals = {k: m(t.get(srv), "cpu_us_per_op") for k, srv in names.items()
                        if (k != "redis" if proto == "memcache" else not k.startswith("m"))}
                add(f"{what}, 10 clients", "server CPU µs/op", vals, 2, True)
        elif name == "pipeline":
            for op in ("get", "set"):
                for p in (1, 16, 64):
                    t = get(R, f"{op}/P{p}") or {}
                    add(f"{op.upper()} pipeline {p} (RESP)", "ops/s",
                        {k: m(t.get(f"{srv}/resp"), "throughput") for k, srv in names.items() if not k.startswith("m")})
                    add(f"{op.upper()} pipeline {p} (memcached text)", "ops/s",
                        {"cN": m(t.get(f"{names['cN']}/memcache"), "throughput"),
                         "mN": m(t.get(f"{names['mN']}/memcache"), "throughput"),
                         "m1": m(t.get(f"{names['m1']}/memcache"), "throughput")})
        elif name == "memory":
            for cname in ("32B", "1KB"):
                t = get(R, cname) or {}
                add(f"memory, 16 B keys + {cname} values", "RSS bytes/key",
                    {"cN": m(t.get(names["cN"]), "rss_per_key"), "redis": m(t.get("redis"), "rss_per_key"),
                     "mN": m(t.get(names["mN"]), "rss_per_key")}, 1, True)
        elif name == "scaling":
            add(f"mdcached 90/10, 40 clients (scaling suite)", "ops/s",
                {"cN": m(R.get(f"cairn-r{n}"), "throughput"), "c1": m(R.get("cairn-r1"), "throughput"),
                 "redis": m(R.get("redis"), "throughput"), "mN": m(R.get(f"memcached-{n}"), "throughput"),
                 "m1": m(R.get("memcached-1"), "throughput")})
            add(f"mdcached 90/10, 40 clients (scaling suite)", "server CPU µs/op",
                {"cN": m(R.get(f"cairn-r{n}"), "cpu_us_per_op"), "c1": m(R.get("cairn-r1"), "cpu_us_per_op"),
                 "redis": m(R.get("redis"), "cpu_us_per_op"), "mN": m(R.get(f"memcached-{n}"), "cpu_us_per_op"),
                 "m1": m(R.get("memcached-1"), "cpu_us_per_op")}, 2, True)
        elif name == "latency":
            for tag, what in (("open50", "50%"), ("open80", "80%")):
                t = get(R, tag) or {}
                add(f"open loop at {what} of max, p99", "µs",
                    {k: m(t.get(srv), "p99") for k, srv in names.items()}, 1, True)
        elif name == "eviction":
            for sk in ("0.8", "0.99"):
                srv = get(R, f"zipf{sk}", "servers") or {}
                add(f"hit ratio, Zipf {sk}, cache = 10% of keys", "%",
                    {"cN": m(srv.get(names["cN"]), "hit_ratio", 100), "redis": m(srv.get("redis"), "hit_ratio", 100),
                     "mN": m(srv.get(names["mN"]), "hit_ratio", 100)}, 2)
    return rows


def write_summary(out, machine, quick, elapsed=None):
    present = [n for n in SUITES if (Path(out) / f"{n}.md").exists()]
    n = machine["nproc"]
    lines_ = [f"# cairn benchmark results ({'quick' if quick else 'full'} mode)", "",
              f"Machine: {machine_line(machine)}.", "",
              f"Reproduce: `make {'bench-quick' if quick else 'bench'}` "
              f"(`.venv/bin/python bench/run.py{' --quick' if quick else ''}`)"
              + (f"; this run took {elapsed / 60:.1f} minutes." if elapsed else "."), "",
              f"Headline figures: cairn's reactor with one thread per core (its default) and with one thread, against "
              f"Redis and memcached -t {n} / -t 1; medians of the repeated runs in one session. Ratios pair like with "
              "like: N threads with memcached -t N, one event loop with Redis and memcached -t 1. On 2 cores the "
              "load generator competes with a multi-threaded server for the CPUs, which is why the 1-thread columns "
              "matter here. Details, spreads and plots in each suite's page.", "",
              md_table(["workload", "metric (↓ lower is better)", f"cairn {n}t", "cairn 1t", "redis", f"memcached -t {n}",
                        "memcached -t 1", f"cairn {n}t / redis", "cairn 1t / redis", f"cairn {n}t / memcached -t {n}",
                        "cairn 1t / memcached -t 1"], headline_rows(out)), "", "Suites:", ""]
    for name in present:
        try:
            mi = json.loads((Path(out) / f"{name}.json").read_text())
            when = f" — {mi['mode']} mode, {mi['machine']['date']}, cairn {mi['machine']['cairn_commit']}"
        except (OSError, ValueError, KeyError):
            when = ""
        lines_.append(f"- [{name}]({name}.md){when}")
    others = sorted(p.stem for p in Path(out).glob("*.md") if p.stem not in SUITES and p.stem != "summary")
    if others:
        lines_ += ["", "Other result pages in this directory (not produced by run.py): "
                   + ", ".join(f"[{o}]({o}.md)" for o in others) + "."]
    (Path(out) / "summary.md").write_text("\n".join(lines_) + "\n")


def main(argv=None):
    global CAIRN_BIN, BENCH_BIN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs, smaller data (< 3 minutes on 2 cores)")
    ap.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per configuration (median and spread; at least 3)")
    ap.add_argument("--duration", type=float, default=None, help="override each run's duration in seconds")
    ap.add_argument("--out", default=None, help="results directory (default bench/results, or bench/results/quick)")
    ap.add_argument("--cairn", default=str(ROOT / "target" / "release" / "cairn-server"))
    ap.add_argument("--bench", default=str(ROOT / "target" / "release" / "cairn-bench"))
    ap.add_argument("--max-other-load", type=float, default=0.5,
                    help="cores other processes may keep busy during a run before it is measured again (default 0.5)")
    ap.add_argument("--noisy-retries", type=int, default=None,
                    help="how many times a noisy run is measured again (default 2 in full mode, 0 in quick mode)")
    ap.add_argument("--summary-only", action="store_true",
                    help="only rewrite summary.md from the JSON already in the results directory")
    opts = ap.parse_args(argv)
    if opts.noisy_retries is None:
        opts.noisy_retries = 0 if opts.quick else 2
    if opts.out is None:
        opts.out = str(ROOT / "bench" / "results" / ("quick" if opts.quick else ""))
    if opts.summary_only:
        found = [json.loads(p.read_text()) for n in SUITES if (p := Path(opts.out) / f"{n}.json").exists()]
        if not found:
            ap.error(f"no results in {opts.out}")
        write_summary(opts.out, found[0]["machine"], opts.quick)
        return
    CAIRN_BIN, BENCH_BIN = Path(opts.cairn), Path(opts.bench)
    for b in (CAIRN_BIN, BENCH_BIN):
        if not os.access(b, os.X_OK):
            ap.error(f"{b} is missing: run `cargo build --release -p cairn-server -p cairn-bench`")
    for tool in ("redis-server", "memcached"):
        if not shutil.which(tool):
            ap.error(f"{tool} is not installed (scripts/setup.sh installs it)")
    wanted = [x.strip() for x in opts.suites.split(",") if x.strip()]
    bad = [x for x in wanted if x not in SUITE_FUNCS]
    if bad:
        ap.error(f"unknown suites {bad}; choose from {SUITES}")
    Path(opts.out).mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    machine["cairn_binary"] = binary_info(CAIRN_BIN)
    t0 = time.monotonic()
    done, failed = [], []
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as wd:
        runner = Runner(opts, wd)
        for name in SUITES:
            if name not in wanted:
                continue
            ts = time.monotonic()
            log(f"suite {name} ...")
            try:
                SUITE_FUNCS[name](opts, runner, machine)
            except Exception:
                import traceback

                log(f"suite {name} FAILED after {time.monotonic() - ts:.0f}s:\n{traceback.format_exc()}")
                failed.append(name)
                continue
            done.append(name)
            log(f"suite {name} done in {time.monotonic() - ts:.0f}s -> {opts.out}/{name}.md")
    write_summary(opts.out, machine, opts.quick, time.monotonic() - t0)
    log(f"all done in {time.monotonic() - t0:.0f}s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if failed:
        sys.exit(1)


CAIRN_BIN = ROOT / "target" / "release" / "cairn-server"
BENCH_BIN = ROOT / "target" / "release" / "cairn-bench"

if __name__ == "__main__":
    main()
