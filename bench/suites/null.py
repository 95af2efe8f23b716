"""The null suite: null transactions (PING / mn) and GET of a 32 B value, the syscall floor. Run by
`bench/run.py --suites null`; writes null.md, null.json and plots (bench/README.md).
"""

from __future__ import annotations

from harness import (
    dur,
    fmt_num,
    fmt_ratio,
    md_table,
    med,
    peers_in,
    round_robin,
    server_specs,
    Suite,
    throughput_table,
)
from plots import grouped_bars, triple


def run(opts, runner, machine):
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
