"""The benchmark load generator (bench/loadgen, `cairn-bench`) against a live cairn.

Its own logic (mix ratios, key distributions, value sizes, histogram arithmetic,
reply framing) is covered by the crate's unit tests (`cargo test --workspace`).
These tests check the two protocol encoders end to end: cairn-bench drives a
real cairn over RESP and over the memcached text protocol, and the server's own
counters (INFO, stats, DBSIZE) must agree with what cairn-bench reports.

The binary is found through CAIRN_BENCH_BIN, else next to CAIRN_BIN
(target/release/cairn-bench); `make test` builds both.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import CAIRN_BIN, HOST

pytestmark = pytest.mark.cairn_only

BENCH_BIN = os.environ.get("CAIRN_BENCH_BIN", str(Path(CAIRN_BIN).parent / "cairn-bench"))


@pytest.fixture(scope="module")
def bench_bin():
    if not os.access(BENCH_BIN, os.X_OK):
        pytest.fail(f"load generator {BENCH_BIN} not found; run `cargo build --release -p cairn-bench` "
                    f"or set CAIRN_BENCH_BIN", pytrace=False)
    return BENCH_BIN


def run_bench(bench_bin, port, *args, protocol="resp", expect_rc=0, timeout=30):
    cmd = [bench_bin, "--host", HOST, "-p", str(port), "--protocol", protocol, "-q"] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    assert p.returncode == expect_rc, f"{cmd} exited {p.returncode}: {p.stderr.decode(errors='replace')}"
    return json.loads(p.stdout)


def info(client):
    return client.info()


def mc_stats(srv):
    c = srv.mc_raw()
    try:
        c.send(b"stats\r\n")
        text = c.read_until(b"END\r\n").decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = parts[2]
    return out


def assert_clean(report):
    assert report["errors"] == 0, report["error_samples"]
    assert report["conn_errors"] == 0, report["error_samples"]
    assert report["unfinished"] == 0
    assert report["ops"] > 0
    lat = report["latency_us"]
    assert lat["count"] == report["ops"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]


def test_resp_load_then_mix_matches_server_counters(server_factory, bench_bin):
    srv = server_factory()
    r = srv.client()
    load = run_bench(bench_bin, srv.port, "--load", "--keys", 2000, "--value-size", "100..200", "-c", 3, "-P", 16)
    assert_clean(load)
    assert load["ops"] == load["sets"] == 2000
    assert r.dbsize() == 2000
    for i in (0, 7, 1999):
        n = r.strlen(f"key:{i:012d}")
        assert 100 <= n <= 200, (i, n)

    before = info(r)
    rep = run_bench(bench_bin, srv.port, "--keys", 2000, "--read-ratio", 0.9, "-c", 4, "-t", 2, "-d", 0.5,
                    "--value-size", 64)
    assert_clean(rep)
    after = info(r)
    assert rep["gets"] + rep["sets"] == rep["ops"]
    assert rep["hits"] == rep["gets"], "every key was loaded"
    frac = rep["gets"] / rep["ops"]
    assert abs(frac - 0.9) < 0.03, frac
    # The server saw every request and every hit.
    assert after["total_commands_processed"] - before["total_commands_processed"] >= rep["ops"]
    assert after["keyspace_hits"] - before["keyspace_hits"] == rep["hits"]
    assert rep["throughput"] > 0 and rep["bytes_out"] > 0 and rep["bytes_in"] > 0


def test_memcache_load_then_mix_matches_server_counters(server_factory, bench_bin):
    srv = server_factory()
    load = run_bench(bench_bin, srv.memcache_port, "--load", "--keys", 1500, "--value-size", "1024+-500",
                     "-c", 2, "-P", 8, protocol="memcache")
    assert_clean(load)
    assert load["sets"] == 1500
    st0 = mc_stats(srv)
    assert int(st0["curr_items"]) == 1500
    rep = run_bench(bench_bin, srv.memcache_port, "--keys", 3000, "--read-ratio", 0.5, "-c", 4, "-d", 0.5,
                    "--value-size", 32, protocol="memcache")
    assert_clean(rep)
    st1 = mc_stats(srv)
    assert int(st1["cmd_get"]) - int(st0["cmd_get"]) == rep["gets"]
    assert int(st1["get_hits"]) - int(st0["get_hits"]) == rep["hits"]
    assert int(st1["cmd_set"]) - int(st0["cmd_set"]) == rep["sets"]
    # Half the keys were never loaded: both hits and misses occur.
    assert rep["hits"] > 0 and rep["misses"] > 0
    assert abs(rep["gets"] / rep["ops"] - 0.5) < 0.05
    # Written through memcached, readable through RESP (same keyspace).
    assert srv.client().get("key:000000000001") is not None


@pytest.mark.parametrize("protocol,null", [("resp", "mn"), ("memcache", "mn"), ("memcache", "version")])
def test_null_transactions(server_factory, bench_bin, protocol, null):
    srv = server_factory()
    port = srv.port if protocol == "resp" else srv.memcache_port
    before = info(srv.client())["total_commands_processed"]
    rep = run_bench(bench_bin, port, "--ping", "--mc-null", null, "-n", 3000, "-c", 3, "-P", 4, protocol=protocol)
    assert_clean(rep)
    assert rep["ops"] == rep["nulls"] == 3000
    assert rep["gets"] == rep["sets"] == 0
    if protocol == "resp":
        after = info(srv.client())["total_commands_processed"]
        assert after - before >= 3000


def test_request_count_is_exact_and_pipelined(server_factory, bench_bin):
    srv = server_factory()
    rep = run_bench(bench_bin, srv.port, "-n", 1001, "-c", 4, "-P", 32, "--read-ratio", 0, "--keys", 50)
    assert_clean(rep)
    assert rep["ops"] == rep["issued"] == rep["sets"] == 1001
    assert srv.client().dbsize() <= 50


def test_open_loop_holds_the_rate(server_factory, bench_bin):
    srv = server_factory()
    rep = run_bench(bench_bin, srv.port, "--rate", 2000, "-d", 1.5, "-c", 4, "--keys", 100)
    assert_clean(rep)
    assert rep["config"]["mode"] == "open"
    assert abs(rep["ops"] - 3000) <= 150, rep["ops"]
    assert rep["send_lag_us"]["count"] == rep["ops"]


def test_fill_on_miss_writes_missed_keys(server_factory, bench_bin):
    srv = server_factory()
    rep = run_bench(bench_bin, srv.port, "-n", 3000, "-c", 1, "--read-ratio", 1, "--fill-on-miss", "--keys", 500,
                    "--dist", "zipf", "--zipf-s", 0.99)
    assert_clean(rep)
    assert rep["misses"] > 0 and rep["hits"] > 0
    # With one connection and no pipelining every miss is followed by its SET (except a miss on
    # the very last request, when the request budget is spent), and no key misses twice.
    assert rep["misses"] - 1 <= rep["sets"] <= rep["misses"]
    assert srv.client().dbsize() == rep["sets"]


def test_error_replies_are_counted(server_factory, bench_bin):
    srv = server_factory("--maxmemory", "1mb", "--maxmemory-policy", "noeviction")
    rep = run_bench(bench_bin, srv.port, "--load", "--keys", 5000, "--value-size", 1024, "-c", 2, "-P", 8)
    assert rep["errors"] > 0
    assert rep["ops"] == 5000
    assert any("OOM" in e for e in rep["error_samples"]), rep["error_samples"]
    mrep = run_bench(bench_bin, srv.memcache_port, "--load", "--keys", 5000, "--value-size", 1024, "-c", 2,
                     "--key-prefix", "mc:", protocol="memcache")
    assert mrep["errors"] > 0
    assert any("SERVER_ERROR" in e for e in mrep["error_samples"]), mrep["error_samples"]


def test_dump_keys_is_deterministic_and_skewed(bench_bin, tmp_path):
    paths = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.bin"
        subprocess.run([bench_bin, "-p", "1", "--dump-keys", str(p), "--requests", "20000", "--keys", "1000",
                        "--dist", "zipf", "--zipf-s", "0.99", "--seed", "5"], check=True)
        paths.append(p)
    a, b = paths[0].read_bytes(), paths[1].read_bytes()
    assert a == b and len(a) == 20000 * 4
    keys = struct.unpack(f"<{20000}I", a)
    assert max(keys) < 1000
    # Zipf: key 0 is the most popular, far above the uniform 1/1000.
    assert keys.count(0) > 20000 * 0.05


# ----------------------------------------------------------------------------
# the offline cache simulators used by the eviction suite (bench/cachesim.py)
# ----------------------------------------------------------------------------

def _cachesim():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import cachesim

    return cachesim


def _zipf_stream(n_keys, n, s, seed):
    import random

    rng = random.Random(seed)
    weights = [1.0 / (k + 1) ** s for k in range(n_keys)]
    return rng.choices(range(n_keys), weights=weights, k=n)


def test_cache_simulators_respect_capacity_and_basic_laws():
    cs = _cachesim()
    stream = _zipf_stream(2000, 30000, 0.9, seed=3)
    ratios = {}
    for name, cls in cs.POLICIES.items():
        cache = cls(200)
        hits = 0
        for k in stream:
            hits += cache.access(k)
            assert cache.size() <= 200, name
        ratios[name] = hits / len(stream)
        # Whatever fits is never evicted: after one pass, everything hits.
        h, n = cs.simulate(name, list(range(50)) * 20, 100, warm=50)
        assert h == n, name
        # A key just inserted is there on the next access.
        c = cls(10)
        assert c.access(7) is False and c.access(7) is True
    # A loop one larger than the cache defeats LRU completely.
    assert cs.simulate("lru", list(range(11)) * 30, 10, warm=11)[0] == 0
    # On a skewed stream the scan-resistant policies beat LRU, and all are sane.
    for name in ("sieve", "s3fifo", "wtinylfu"):
        assert ratios[name] > ratios["lru"], ratios
    assert all(0.2 < r < 0.9 for r in ratios.values()), ratios


def test_cache_simulators_replay_cairn_bench_streams(bench_bin, tmp_path):
    cs = _cachesim()
    p = tmp_path / "keys.bin"
    subprocess.run([bench_bin, "-p", "1", "--dump-keys", str(p), "--requests", "20000", "--keys", "2000",
                    "--dist", "zipf", "--zipf-s", "0.99", "--seed", "1"], check=True)
    keys = cs.load_keys(p)
    assert len(keys) == 20000 and max(keys) < 2000
    h, n = cs.simulate("lru", keys, 200, warm=10000)
    assert n == 10000 and 0.3 < h / n < 0.9


def test_a_silent_server_ends_the_run_with_an_error(bench_bin):
    """A server that accepts and never answers: the run stops by itself and says so."""
    import socket
    import threading
    import time

    lsock = socket.socket()
    lsock.bind((HOST, 0))
    lsock.listen(8)
    port = lsock.getsockname()[1]
    held = []
    stop = threading.Event()

    def accept():
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(lsock.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        t0 = time.monotonic()
        rep = run_bench(bench_bin, port, "-n", 10, "-c", 2, "--idle-timeout", 0.5, expect_rc=3)
        assert time.monotonic() - t0 < 10
        assert rep["ops"] == 0 and rep["unfinished"] == 2
        assert any("no reply" in e for e in rep["error_samples"]), rep["error_samples"]
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        lsock.close()
