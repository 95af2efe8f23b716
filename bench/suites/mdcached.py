"""The mdcached suite: 90/10 GET/SET over 30,000 records of 1 KB ± 500 B with 10 and 40 clients
(the mdcached paper's Tables I/II), cairn against Redis and memcached. Run by `bench/run.py
--suites mdcached`; writes mdcached.md, mdcached.json and plots (bench/README.md).
"""

from __future__ import annotations

from harness import dur, peers_in, round_robin, server_specs, Suite, throughput_table
from plots import grouped_bars, triple


def run(opts, runner, machine):
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
