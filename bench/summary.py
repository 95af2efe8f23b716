"""summary.md of a results directory, composed from the <suite>.json files there: the headline
figures of every suite and issue 19's figures against their goals. Each row names the run it
came from (cairn commit, date, the machine's default thread count), so a run of one suite changes
its own rows only. run.py writes it after the suites; `run.py --summary-only` rewrites it from the
JSON, and bench/figures.py --check fails while it and the JSON disagree."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from harness import fmt_num, machine_line, md_table, SUITES
import threads

# The page of the latency suite's disturbances, in its JSON's keys, with the issue's wording.
DISTURBANCES = [("expire", "mass expiry (every key expiring in the same second)"), ("flushall", "FLUSHALL"),
                ("bigdel", "DEL of a 100 MB value"), ("tagdel", "TAG.DEL of {tagged} records"),
                ("bgsave", "BGSAVE")]
# Eviction streams: the JSON's key and the label.
STREAMS = [("zipf0.8", "Zipf 0.8"), ("zipf0.99", "Zipf 0.99"), ("scan", "+scan"), ("loop", "+loop")]
# Runs without the control pair (before it existed) are judged as then: at most 1.05× in every workload.
THREADS_NOISE = 1.05


def load(out, name):
    p = Path(out) / f"{name}.json"
    try:
        return json.loads(p.read_text()) if p.exists() else None
    except ValueError:
        return None


def get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def med(agg, metric, scale=1.0):
    v = get(agg, metric, "median")
    return None if v is None else v * scale


def default_threads(d):
    """The event loops cairn ran with no --threads on the run's machine, where the run recorded it
    (run.py asks a default-started cairn; the threads suite's own 'cairn default' says it too)."""
    return d["machine"].get("cairn_default_threads") or (d.get("threads") or {}).get("cairn default")


def run_label(d):
    """Which run a row comes from: the cairn commit, the date, the machine's cores and default."""
    m = d["machine"]
    built = (m.get("cairn_binary") or {}).get("commit")
    commit = built[:7] if built else m["cairn_commit"]
    dflt = default_threads(d)
    return (f"cairn {commit}, {m['date'].split(' ')[0]}, {d.get('mode', 'full')}, {m['nproc']} cores, "
            + (f"default {dflt}t" if dflt else "default not recorded"))


def reproduce(name, quick):
    return f"make {'bench-quick' if quick else 'bench'} BENCH_ARGS=\"--suites {name}\""


def headline_rows(out):
    """The key figures of every suite present in `out`, for cairn with one thread per core and with one
    thread, Redis, and memcached -t N and -t 1; ratios pair like with like (N threads with memcached -t N,
    one event loop with Redis and memcached -t 1). The last cell names the run."""
    rows = []

    def add(what, unit, vals, digits=0, lower_better=False):
        """vals: {'cN', 'c1', 'redis', 'mN', 'm1'} -> value or None."""
        def f(x):
            return "–" if x is None else fmt_num(x, digits)

        def rt(a, b):
            return "–" if a is None or b is None or not b else f"{a / b:.2f}×"

        v = {k: vals.get(k) for k in ("cN", "c1", "redis", "mN", "m1")}
        rows.append([what, unit + (" ↓" if lower_better else ""), f(v["cN"]), f(v["c1"]), f(v["redis"]), f(v["mN"]),
                     f(v["m1"]), rt(v["cN"], v["redis"]), rt(v["c1"], v["redis"]), rt(v["cN"], v["mN"]),
                     rt(v["c1"], v["m1"]), run])

    for name in SUITES:
        d = load(out, name)
        if not d or "results" not in d:
            continue
        run = f"[{name}]({name}.md): {run_label(d)}"
        n = d["machine"]["nproc"]
        R = d["results"]
        names = {"cN": f"cairn-{n}t", "c1": "cairn-1t", "redis": "redis", "mN": f"memcached-{n}t", "m1": "memcached-1t"}

        if name == "mdcached":
            for c in (10, 40):
                for proto, what in (("resp", "RESP"), ("memcache", "memcached text")):
                    t = get(R, f"{proto}/c{c}") or {}
                    keep = [k for k in names if (not k.startswith("m") if proto == "resp" else k != "redis")]
                    add(f"mdcached 90/10, 1 KB ± 500 B, {c} clients, {what}", "ops/s",
                        {k: med(t.get(names[k]), "throughput") for k in keep})
                    add(f"mdcached 90/10, 1 KB ± 500 B, {c} clients, {what}", "server CPU µs/op",
                        {k: med(t.get(names[k]), "cpu_us_per_op") for k in keep}, 2, True)
        elif name == "null":
            for key, what, proto in (("resp/c10/ping", "PING", "resp"), ("resp/c10/get", "GET 32 B (RESP)", "resp"),
                                     ("memcache/c10/ping", "mn", "memcache"),
                                     ("memcache/c10/get", "GET 32 B (memcached text)", "memcache")):
                t = get(R, key) or {}
                vals = {k: med(t.get(srv), "cpu_us_per_op") for k, srv in names.items()
                        if (k != "redis" if proto == "memcache" else not k.startswith("m"))}
                add(f"{what}, 10 clients", "server CPU µs/op", vals, 2, True)
        elif name == "pipeline":
            for op in ("get", "set"):
                for p in (1, 16, 64):
                    t = get(R, f"{op}/P{p}") or {}
                    add(f"{op.upper()} pipeline {p} (RESP)", "ops/s",
                        {k: med(t.get(f"{srv}/resp"), "throughput") for k, srv in names.items() if not k.startswith("m")})
                    add(f"{op.upper()} pipeline {p} (memcached text)", "ops/s",
                        {"cN": med(t.get(f"{names['cN']}/memcache"), "throughput"),
                         "mN": med(t.get(f"{names['mN']}/memcache"), "throughput"),
                         "m1": med(t.get(f"{names['m1']}/memcache"), "throughput")})
        elif name == "memory":
            for cname in ("32B", "1KB"):
                t = get(R, cname) or {}
                add(f"memory, 16 B keys + {cname} values", "RSS bytes/key",
                    {"cN": med(t.get(names["cN"]), "rss_per_key"), "redis": med(t.get("redis"), "rss_per_key"),
                     "mN": med(t.get(names["mN"]), "rss_per_key")}, 1, True)
        elif name == "scaling":
            pick = {"cN": f"cairn-r{n}", "c1": "cairn-r1", "redis": "redis", "mN": f"memcached-{n}", "m1": "memcached-1"}
            add("mdcached 90/10, 40 clients (scaling suite)", "ops/s",
                {k: med(R.get(v), "throughput") for k, v in pick.items()})
            add("mdcached 90/10, 40 clients (scaling suite)", "server CPU µs/op",
                {k: med(R.get(v), "cpu_us_per_op") for k, v in pick.items()}, 2, True)
        elif name == "latency":
            for tag, what in (("open50", "50%"), ("open80", "80%")):
                t = get(R, tag) or {}
                add(f"open loop at {what} of max, p99", "µs",
                    {k: med(t.get(srv), "p99") for k, srv in names.items()}, 1, True)
        elif name == "eviction":
            for key, what in (("zipf0.8", "Zipf 0.8"), ("zipf0.99", "Zipf 0.99"), ("scan", "Zipf 0.99 + scan"),
                              ("loop", "Zipf 0.99 + loop")):
                srv = get(R, key, "servers") or {}
                add(f"hit ratio, {what}, cache = 10% of keys", "%",
                    {"cN": med(srv.get(names["cN"]), "hit_ratio", 100), "redis": med(srv.get("redis"), "hit_ratio", 100),
                     "mN": med(srv.get(names["mN"]), "hit_ratio", 100)}, 2)
    return rows


def ms(us):
    return "–" if us is None else f"{us / 1000:.1f} ms"


def threads_medians(d):
    """{server: {workload: median CPU µs/op}} from threads.json's samples (either format)."""
    return {srv: {w: statistics.median(s["cpu_us_per_op"] for s in runs) for w, runs in per.items() if runs}
            for srv, per in d["samples"].items()}


def threads_row(d, add):
    """Issue 19 part 1 from threads.json: the default against --threads 1, judged by threads.verdict
    (median of per-round ratios within the noise floor the run's control pair measured)."""
    chosen = d.get("threads") or {}
    loops = chosen.get(threads.DEFAULT, "?")
    v = threads.verdict(d["samples"], chosen)
    ws = list(v["workloads"])
    redis = {w: statistics.median(r) for w in ws if (r := threads.paired(d["samples"], "redis", w))}
    if ws:
        x = v["workloads"]
        add("threads", d, "1. default never costs more CPU per op than --threads 1 (median of per-round ratios "
            "≤ 1.00 + the noise floor a --threads 1 control pair measures in the same run, or the same loop count "
            "within that noise; rule on the page); redis-benchmark -c 50, "
            + " / ".join(ws),
            f"default ({loops} loop(s) here): " + " / ".join(f"{x[w]['default'][0]:.2f}×" for w in ws)
            + " of --threads 1; noise floor " + " / ".join(f"±{x[w]['floor']:.2f}" for w in ws),
            "Redis " + " / ".join(f"{redis[w]:.2f}×" for w in ws if w in redis) + " of cairn --threads 1",
            v["met"])
        return
    # An older run, without the control pair: medians of CPU per op, at most THREADS_NOISE.
    cpu = threads_medians(d)
    ws = [w for w in cpu.get("cairn default", {}) if w in cpu.get("cairn 1t", {})]
    if ws:
        ratio = {w: cpu["cairn default"][w] / cpu["cairn 1t"][w] for w in ws}
        redis = {w: cpu["redis"][w] / cpu["cairn 1t"][w] for w in ws if w in cpu.get("redis", {})}
        add("threads", d, f"1. default never costs more CPU per op than --threads 1 (≤ {THREADS_NOISE:.2f}×, "
            f"the runs' noise); redis-benchmark -c 50, {' / '.join(ws)}",
            f"default ({loops} loop(s) here): " + " / ".join(f"{ratio[w]:.2f}×" for w in ws) + " of --threads 1",
            "Redis " + " / ".join(f"{redis[w]:.2f}×" for w in ws if w in redis) + " of cairn --threads 1",
            max(ratio.values()) <= THREADS_NOISE)


def issue19_rows(out, quick):
    """Issue 19's figures: [goal, cairn, peer (same run), met, page, run, reproduce] per figure whose
    suite has results in `out`."""
    rows = []

    def add(name, d, goal, ours, peer, met):
        rows.append([goal, ours, peer, "**met**" if met is True else ("not met" if met is False else met),
                     f"[{name}.md]({name}.md)", run_label(d), f"`{reproduce(name, quick)}`"])

    d = load(out, "threads")
    if d and "samples" in d:
        threads_row(d, add)
    d = load(out, "memory")
    if d and "results" in d:
        n = d["machine"]["nproc"]
        r32, r1k = get(d, "results", "32B") or {}, get(d, "results", "1KB") or {}
        c32, c1k = med(r32.get(f"cairn-{n}t"), "rss_per_key"), med(r1k.get(f"cairn-{n}t"), "rss_per_key")
        m32, m1k = med(r32.get(f"memcached-{n}t"), "rss_per_key"), med(r1k.get(f"memcached-{n}t"), "rss_per_key")
        if c32 is not None:
            # The verdict is the default's (--cas yes); --cas no (memcached's -C) is shown beside it.
            nocas = med(r32.get(f"cairn-{n}t-nocas"), "rss_per_key")
            shown = f"{c32:.1f} B" + (f" (--cas no: {nocas:.1f} B)" if nocas is not None else "")
            add("memory", d, "2. RSS per key ≤ 64 B, 16 B keys + 32 B values, default --cas yes", shown,
                f"Redis {fmt_num(med(r32.get('redis'), 'rss_per_key'), 1)} B; memcached -t {n} {fmt_num(m32, 1)} B",
                c32 <= 64)
        if c1k is not None and m1k:
            add("memory", d, f"2. RSS per key ≤ 0.95× memcached's, 1 KB values", f"{c1k:.1f} B ({c1k / m1k:.2f}×)",
                f"memcached -t {n} {m1k:.1f} B; Redis {fmt_num(med(r1k.get('redis'), 'rss_per_key'), 1)} B",
                c1k / m1k <= 0.95)
    d = load(out, "eviction")
    if d and "results" in d:
        n = d["machine"]["nproc"]
        gaps, best, redis = [], [], []
        for key, label in STREAMS:
            r = get(d, "results", key)
            if not r:
                continue
            hit = med(r["servers"].get(f"cairn-{n}t"), "hit_ratio", 100)
            if hit is None:
                continue
            # Older pages lack best_of: the best of S3-FIFO and W-TinyLFU's simulations, as now.
            best_of = r.get("best_of") or max(r["sim"].get(k, 0) for k in ("s3fifo", "wtinylfu"))
            gaps.append((label, hit - best_of * 100))
            best.append(f"{best_of * 100:.2f}%")
            redis.append(fmt_num(med(r["servers"].get("redis"), "hit_ratio", 100), 2) + "%")
        if gaps:
            add("eviction", d, "3. hit ratio within 0.5 point of the best of S3-FIFO and W-TinyLFU (simulated on "
                "the same stream), cache = 10% of keys: " + " / ".join(g[0] for g in gaps),
                " / ".join(f"{g[1]:+.2f}" for g in gaps) + " points",
                "best simulation " + " / ".join(best) + "; Redis allkeys-lru " + " / ".join(redis),
                min(g[1] for g in gaps) >= -0.5)
    d = load(out, "latency")
    if d and "results" in d:
        n = d["machine"]["nproc"]
        for key, label in DISTURBANCES:
            t = get(d, "results", key)
            if not t:
                continue
            cairn = {c: med(t.get(f"cairn-{c}t"), "p99") for c in sorted({1, n})}
            cairn = {c: v for c, v in cairn.items() if v is not None}
            if not cairn:
                continue
            missed = [f"{c}t" for c, v in cairn.items() if v > 2000]
            peers = [f"{lbl} {ms(med(t.get(k), 'p99'))}" for k, lbl in (("redis", "Redis"),
                                                                       (f"memcached-{n}t", f"memcached -t {n}"))
                     if t.get(k)]
            label = label.format(tagged="10k" if d.get("mode") == "quick" else "100k")
            add("latency", d, f"4. GET p99 ≤ 2 ms at 50% load during {label}",
                ", ".join(f"{c}t {ms(v)}" for c, v in cairn.items()), "; ".join(peers) or "–",
                True if not missed else f"not met ({', '.join(missed)})")
    d = load(out, "sql")
    if d and "results" in d:
        ratio = get(d, "results", "select_pk_cpu_vs_get")
        if ratio is not None:
            sel = med(get(d, "results", "tput_select_pk"), "server_cpu_us_per_op")
            getc = med(get(d, "results", "tput_get"), "server_cpu_us_per_op")
            eng = get(d, "results", "select_pk_engine_cpu_vs_get")
            add("sql", d, "5. SQL SELECT by primary key ≤ 3× GET's server CPU", f"{ratio:.2f}× GET's"
                + (f" ({sel:.2f} µs)" if sel is not None else ""),
                f"GET {fmt_num(getc, 2)} µs in the same server"
                + (f"; on the SQL engine threads {eng:.2f}×" if eng is not None else ""), ratio <= 3)
    return rows


def render(out, quick):
    """summary.md's text for the JSON in `out` (no clock: the same JSON gives the same page)."""
    present = [(n, d) for n in SUITES if (d := load(out, n))]
    if not present:
        return None
    first = present[0][1]["machine"]
    n = first["nproc"]
    runs = {}
    for name, d in present:
        runs.setdefault(machine_line(d["machine"]), []).append(name)
    lines_ = [f"# cairn benchmark results ({'quick' if quick else 'full'} mode)", "",
              "Runs (the machine line of each; a run of some suites updates their rows only):", ""]
    lines_ += [f"- {', '.join(names)}: {line}." for line, names in runs.items()]
    lines_ += ["", f"Reproduce everything: `make {'bench-quick' if quick else 'bench'}` "
               f"(`.venv/bin/python bench/run.py{' --quick' if quick else ''}`); one suite: "
               f"`{reproduce('<suite>', quick)}`; this page alone from the JSON: "
               f"`.venv/bin/python bench/run.py{' --quick' if quick else ''} --summary-only`.", "",
               "## Issue 19 figures", "",
               "Each figure with its peer measured in the same run; 'run' names the cairn commit and date of the "
               "run it comes from, and the default thread count on that machine (cairn's default is one event "
               "loop per two available cores: on 2 cores the default *is* `--threads 1`).", "",
               md_table(["goal", "cairn", "peer (same run)", "met", "page", "run", "reproduce"],
                        issue19_rows(out, quick)), "",
               "## Headline figures", "",
               f"cairn's reactor with one thread per core ({n}t) and with one thread, against Redis and "
               f"memcached -t {n} / -t 1; medians of the repeated runs in one session. Ratios pair like with "
               "like: N threads with memcached -t N, one event loop with Redis and memcached -t 1. Which of "
               "the two is cairn's default on the run's machine, the 'run' column says (default Nt). On 2 cores "
               "the load generator competes with a multi-threaded server for the CPUs, which is why the 1-thread "
               "columns matter here. Details, spreads and plots in each suite's page.", "",
               md_table(["workload", "metric (↓ lower is better)", f"cairn {n}t", "cairn 1t", "redis",
                         f"memcached -t {n}", "memcached -t 1", f"cairn {n}t / redis", "cairn 1t / redis",
                         f"cairn {n}t / memcached -t {n}", "cairn 1t / memcached -t 1", "run"],
                        headline_rows(out)), "", "Suites:", ""]
    for name, d in present:
        lines_.append(f"- [{name}]({name}.md) — {run_label(d)}, {d['machine']['date']}")
    others = sorted(p.stem for p in Path(out).glob("*.md") if p.stem not in SUITES and p.stem != "summary")
    if others:
        lines_ += ["", "Other result pages in this directory (not produced by run.py): "
                   + ", ".join(f"[{o}]({o}.md)" for o in others) + "."]
    return "\n".join(lines_) + "\n"


def write_summary(out, quick):
    text = render(out, quick)
    if text is not None:
        (Path(out) / "summary.md").write_text(text)
