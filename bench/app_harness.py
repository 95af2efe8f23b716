"""What bench/app_suites.py's suites (bench/suites/tags.py, sql.py, tracking.py) share: a small
RESP client on a raw socket (the round trips measured are the server's, not a library's),
INFO / commandstats taps, a memcached connection, medians and spreads, the bar plots, the
Report page writer, servers (the harness's, bench/harness.py) and the fragments data set."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import random
import socket
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as B  # noqa: E402  (servers on free ports, /proc sampling, tables)
import plots  # noqa: E402  (error bars)
from kit import encode_command as enc  # noqa: E402  (RESP request bytes; tests/kit.py)

ROOT = B.ROOT
HOST = B.HOST
log = B.log
md_table, fmt_num, fmt_ratio = B.md_table, B.fmt_num, B.fmt_ratio
SUITES = ["tags", "sql", "tracking"]
MP = mp.get_context("fork")

TYPE_PAGE, TYPE_USER = 1, 2
N_RECORDS, N_PAGES, N_USERS, VALUE_SIZE = 100_000, 30_000, 1_000, 200
QUIET = 0.25  # cores kept busy by the rest of the machine below which a run counts as quiet


# --------------------------------------------------------------------------------------------------
# a small RESP client (raw socket: the round trips measured are the server's, not a library's)
# --------------------------------------------------------------------------------------------------

class RespError(Exception):
    pass


class Incomplete(Exception):
    """A non-blocking reader ran out of buffered bytes in the middle of a reply."""


class Conn:
    """Blocking RESP2/RESP3 connection with a complete reply parser (pushes are returned as
    ('push', [...]) tuples)."""

    def __init__(self, port, resp3=False):
        self.s = socket.create_connection((HOST, port), timeout=60)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0
        self.nofill = False
        if resp3:
            self.call("HELLO", "3")

    def close(self):
        self.s.close()

    def _fill(self):
        if self.nofill:
            raise Incomplete()
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 2
                return line
            self._fill()

    def _bytes(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        out = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return out

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+",):
            return rest
        if t == b"-" or t == b"!":
            return RespError((self._bytes(int(rest)) if t == b"!" else rest).decode(errors="replace"))
        if t == b":":
            return int(rest)
        if t in (b"$", b"="):
            n = int(rest)
            return None if n < 0 else self._bytes(n)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            items = [self.read() for _ in range(n)]
            return ("push", items) if t == b">" else items
        if t == b"%":
            return {self.read(): self.read() for _ in range(int(rest))}
        if t == b"_":
            return None
        if t == b",":
            return float(rest)
        if t == b"#":
            return rest == b"t"
        if t == b"(":
            return int(rest)
        raise RuntimeError(f"unexpected RESP line {line[:80]!r}")

    def reply(self):
        """Next reply that is not a push."""
        while True:
            v = self.read()
            if not (isinstance(v, tuple) and v and v[0] == "push"):
                return v

    def call(self, *args):
        self.s.sendall(enc(*args))
        v = self.reply()
        if isinstance(v, RespError):
            raise v
        return v

    def timed(self, *args):
        """(reply, round trip in ns)."""
        data = enc(*args)
        t0 = time.perf_counter_ns()
        self.s.sendall(data)
        v = self.reply()
        t1 = time.perf_counter_ns()
        if isinstance(v, RespError):
            raise v
        return v, t1 - t0

    def pipeline(self, commands, batch=500):
        """Sends pre-encoded commands in batches; returns the number of error replies."""
        errors = 0
        first = None
        for i in range(0, len(commands), batch):
            chunk = commands[i:i + batch]
            self.s.sendall(b"".join(chunk))
            for _ in chunk:
                v = self.reply()
                if isinstance(v, RespError):
                    errors += 1
                    first = first or v
        if errors:
            raise RuntimeError(f"{errors} error replies, first: {first}")
        return len(commands)


def info(port, section=""):
    c = Conn(port)
    try:
        text = (c.call("INFO", section) if section else c.call("INFO")).decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def commandstats(port):
    """{command: (calls, usec)} from INFO commandstats."""
    out = {}
    for k, v in info(port, "commandstats").items():
        if k.startswith("cmdstat_"):
            f = dict(x.split("=", 1) for x in v.split(","))
            out[k[len("cmdstat_"):].lower()] = (int(f["calls"]), int(f["usec"]))
    return out


class StatsTap:
    """Per-call server time: INFO commandstats, read on its own connection after every measured call; the
    growth of the named commands' usec is that call's server time (1 µs resolution). Unlike one usec/calls
    figure over a batch, this gives a median that a few preempted calls on a shared machine cannot move."""

    def __init__(self, port, names):
        self.c = Conn(port)
        self.names = names
        self.last = self._read()

    def _read(self):
        out = dict.fromkeys(self.names, 0)
        for line in self.c.call("INFO", "commandstats").decode().splitlines():
            if line.startswith("cmdstat_"):
                k, v = line.split(":", 1)
                k = k[len("cmdstat_"):].lower()
                if k in out:
                    out[k] = int(v.split("usec=", 1)[1].split(",", 1)[0])
        return out

    def delta(self):
        now = self._read()
        d = sum(now[n] - self.last[n] for n in self.names)
        self.last = now
        return d

    def close(self):
        self.c.close()


def reset_stats(port):
    c = Conn(port)
    c.call("CONFIG", "RESETSTAT")
    c.close()


def used_memory(port):
    return int(info(port, "memory")["used_memory"])


def settle_rss(srv, wait=0.3):
    time.sleep(wait)
    return srv.rss_bytes()


# memcached text protocol, just what the tags suite needs
class McConn:
    def __init__(self, port):
        self.s = socket.create_connection((HOST, port), timeout=60)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def timed_line(self, cmd: bytes):
        t0 = time.perf_counter_ns()
        self.s.sendall(cmd)
        line = self.f.readline()
        return line.strip(), time.perf_counter_ns() - t0

    def set_noreply(self, items, batch=2000):
        for i in range(0, len(items), batch):
            self.s.sendall(b"".join(b"set %s 0 0 %d noreply\r\n%s\r\n" % (k, len(v), v) for k, v in items[i:i + batch]))
        line, _ = self.timed_line(b"version\r\n")
        if not line.startswith(b"VERSION"):
            raise RuntimeError(f"memcached load: {line!r}")

    def get_hits(self, keys):
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        hits = 0
        while True:
            line = self.f.readline()
            if line.startswith(b"END"):
                return hits
            if line.startswith(b"VALUE"):
                hits += 1
                self.f.read(int(line.split()[3]) + 2)

    def close(self):
        self.s.close()


# --------------------------------------------------------------------------------------------------
# statistics, tables, plots
# --------------------------------------------------------------------------------------------------

def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summ(vals):
    """median / min / max / spread% over the repeats."""
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "spread_pct": float("nan"),
                "values": []}
    m = statistics.median(vals)
    return {"median": m, "min": min(vals), "max": max(vals),
            "spread_pct": (max(vals) - min(vals)) / m * 100 if m else 0.0, "values": vals}


def agg(samples):
    """samples: list of dicts of numbers -> {metric: summ}."""
    keys = [k for k, v in samples[0].items() if isinstance(v, (int, float))] if samples else []
    return {k: summ([s.get(k) for s in samples]) for k in keys}


def M(a, metric):
    return a[metric]["median"] if a and metric in a else float("nan")


def S(a, metric):
    m = a.get(metric) if a else None
    if not m or m["spread_pct"] != m["spread_pct"] or len(m["values"]) < 2:
        return ""
    return f"±{m['spread_pct']:.0f}%"


def T(a, metric, scale=1.0):
    m = a.get(metric) if a else None
    if not m or m["median"] != m["median"]:
        return None
    return (m["median"] * scale, m["min"] * scale, m["max"] * scale)


def us(x, digits=1):
    if x is None or x != x:
        return "–"
    if abs(x) >= 10000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}"


def met(value, target):
    if value != value:
        return "–"
    return "**met**" if value <= target else "**not met**"


COL = {"cairn": "#1b7837", "cairn2": "#5aae61", "cairn3": "#a6dba0", "redis": "#b2182b", "redis2": "#ef8a62",
       "memcached": "#2166ac", "other": "#777777"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_panel(ax, groups, series, colors, ylabel, title, log=False, targets=None, value_fmt=None, legend_loc="upper left"):
    """groups: x labels; series: {label: [(median, lo, hi) | None per group]}; targets: {group index: (y, label)}."""
    for bars, ys in plots.error_bars(ax, series, lambda label: colors.get(label, COL["other"]), 0.92):
        if value_fmt:
            for b_, y in zip(bars, ys):
                ax.annotate(value_fmt(y), (b_.get_x() + b_.get_width() / 2, y), ha="center", va="bottom",
                            fontsize=7, xytext=(0, 2), textcoords="offset points")
    for g, (y, lab) in (targets or {}).items():
        ax.hlines(y, g - 0.45, g + 0.45, colors="black", linestyles="--", linewidth=1.2)
        ax.annotate(lab, (g + 0.45, y), fontsize=7, ha="right", va="bottom", xytext=(0, 1), textcoords="offset points",
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        ax.set_ylim(10 ** math.floor(math.log10(max(lo, 1e-3))), hi * 2.5)
    else:
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc=legend_loc)


def save_fig(fig, path, note):
    fig.text(0.01, 0.005, note, fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    _plt().close(fig)


class Report:
    def __init__(self, name, opts, machine, params):
        self.name, self.opts, self.machine = name, opts, machine
        self.out = Path(opts.out)
        self.md = []
        self.pngs = []
        self.data = {"suite": name, "mode": "quick" if opts.quick else "full", "machine": machine,
                     "repeats": opts.repeats, "params": params, "results": {}, "samples": {}}

    def png(self, stem):
        self.out.mkdir(parents=True, exist_ok=True)
        p = self.out / f"{self.name}_{stem}.png"
        self.pngs.append(p.name)
        return p

    def note(self):
        m = self.machine
        return (f"{m['nproc']} cores ({m['cpu_model']}), shared and busy; median of {self.opts.repeats} "
                f"repeat(s), whiskers min..max; {m['date']}")

    def write(self, title, intro, started):
        self.out.mkdir(parents=True, exist_ok=True)
        self.data["elapsed_s"] = round(time.monotonic() - started, 1)
        (self.out / f"{self.name}.json").write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        m = self.machine
        head = [f"# {title}", "", intro, "",
                f"Machine: {B.machine_line(m)}; load average at start {' '.join(m.get('loadavg_at_start', []))} "
                f"(the machine is shared with other work: read the ratios and medians, not single figures).",
                f"Mode: {self.data['mode']}; " + (
                    f"each figure is the median of {self.opts.repeats} repeats, spread = (max − min) / median."
                    if self.opts.repeats > 1 else "one repeat (no spread): run the full mode for medians.")
                + f" Produced by `bench/app_suites.py` in {self.data['elapsed_s']:.0f} s.", ""]
        if "binary built" not in head[4]:  # older run.py: say which build ran here
            head[4] += f" cairn-server binary built {m['cairn_binary']['built']}."
        now = binary_stamp()
        if now["mtime_ns"] != m["cairn_binary"]["mtime_ns"]:
            head.insert(-1, f"**Warning: the cairn-server binary was rebuilt during the run (now {now['built']}); "
                            "servers started after that ran the new build. Re-run for consistent figures.**")
            self.data["binary_rebuilt_during_run"] = now
            log(f"WARNING: {B.CAIRN_BIN} was rebuilt during the run")
        body = head + self.md + [""] + [f"![{p}]({p})" for p in self.pngs]
        (self.out / f"{self.name}.md").write_text("\n".join(body) + "\n")


def binary_stamp():
    """The cairn-server binary that runs: its build time (mtime), size and commit (HEAD's commit does
    not say which build ran); run.py's format, plus the exact mtime to notice a rebuild during the run."""
    st = B.CAIRN_BIN.stat()
    return {"path": str(B.CAIRN_BIN), "built": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(st.st_mtime)),
            "bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "commit": B.binary_commit(B.CAIRN_BIN)}


def start_server(kind, args=(), label=None):
    name = {"cairn": "cairn", "redis": "redis", "memcached": "memcached"}[kind]
    if kind == "memcached":
        args = ["-t", "1"] + list(args)
    return B.Server(name, kind, label or name, list(args)).start()


def stop_all(servers):
    for s in servers:
        try:
            s.stop()
        except Exception as e:  # keep stopping the others
            log(f"stopping {s.name}: {e}")


# --------------------------------------------------------------------------------------------------
# the seed 002 data set
# --------------------------------------------------------------------------------------------------

def fragments(n=N_RECORDS, pages=N_PAGES, users=N_USERS, seed=2):
    """(index, key, page, user) for every record; pages and users drawn uniformly (seeded)."""
    rng = random.Random(seed)
    return [(i, b"frag:%06d" % i, rng.randrange(pages), rng.randrange(users)) for i in range(n)]


def value_of(i):
    return (b"<div class=frag id=f%06d>" % i).ljust(VALUE_SIZE - 6, b"x") + b"</div>"


def by_group(recs):
    pages, users = {}, {}
    for r in recs:
        pages.setdefault(r[2], []).append(r)
        users.setdefault(r[3], []).append(r)
    return pages, users


def cairn_tagset(r):
    return enc("TAG.SET", r[1], value_of(r[0]), "TAG", TYPE_PAGE, r[2], "TAG", TYPE_USER, r[3])


def redis_tagged_write(r):
    """The Redis way: the value, plus the key in one set per tag."""
    return [enc("SET", r[1], value_of(r[0])), enc("SADD", b"tag:page:%d" % r[2], r[1]),
            enc("SADD", b"tag:user:%d" % r[3], r[1])]


class Probe:
    """CPU accounting around a measurement: the server, this script and its reaped children, and everything
    else on the machine ('other': the noise indicator on a shared box). Call stop() after joining children."""

    def __init__(self, srv):
        self.srv = srv
        self.t0 = self._snap()

    def _snap(self):
        import resource

        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (time.monotonic(), self.srv.cpu_seconds(), B.machine_busy_seconds(),
                a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime)

    def stop(self):
        t1 = self._snap()
        wall, srv, mach, ours = (y - x for x, y in zip(self.t0, t1))
        wall = max(wall, 1e-9)
        return {"server_cores_busy": srv / wall, "clients_cores_busy": ours / wall,
                "other_cores_busy": max(0.0, mach - srv - ours) / wall}


def timed_block(fn):
    t0 = time.monotonic()
    v = fn()
    return v, time.monotonic() - t0
