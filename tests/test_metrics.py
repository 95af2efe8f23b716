"""The operator's views (issue 20): the metrics endpoint (/metrics parsed with the Prometheus
project's own OpenMetrics parser, /healthz, /readyz), MEMORY STATS / DOCTOR, INFO memory's
breakdown, --log-format json, --logfile reopened on SIGHUP, sd_notify readiness, --version.

The endpoint, the breakdown and the log options are cairn's (Redis has none of them); MEMORY
STATS and DOCTOR are Redis commands and their Redis fields are checked against Redis too.
"""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import CAIRN_BIN, free_port, wait_until


def get(port, path):
    """(status, content type, body) of GET http://127.0.0.1:port/path."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def scrape(port):
    """{(name, frozenset(labels)): value} of every sample, parsed by prometheus_client."""
    status, ctype, body = get(port, "/metrics")
    assert status == 200 and ctype.startswith("application/openmetrics-text"), (status, ctype)
    samples = {}
    families = {}
    for family in text_string_to_metric_families(body):
        families[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return families, samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0)


@pytest.mark.cairn_only  # the endpoint is cairn's
def test_metrics_parse_and_move(server_factory):
    mport = free_port()
    srv = server_factory("--metrics-port", str(mport))
    families, before = scrape(mport)
    # The families are there, with their types.
    for name, kind in {
        "cairn_commands": "counter",
        "cairn_command_duration_seconds": "histogram",
        "cairn_keyspace_hits": "counter",
        "cairn_keyspace_misses": "counter",
        "cairn_keys": "gauge",
        "cairn_expiring_keys": "gauge",
        "cairn_memory_used_bytes": "gauge",
        "cairn_memory_rss_bytes": "gauge",
        "cairn_memory_peak_bytes": "gauge",
        "cairn_memory_bytes": "gauge",
        "cairn_evicted_keys": "counter",
        "cairn_expired_keys": "counter",
        "cairn_connections": "gauge",
        "cairn_client_output_buffer_bytes": "gauge",
        "cairn_sql_queue_depth": "gauge",
        "cairn_sql_statement_duration_seconds": "histogram",
        "cairn_tracking_pushes": "counter",
        "cairn_pubsub_messages_published": "counter",
        "cairn_build_info": "gauge",
    }.items():
        if name in ("cairn_commands", "cairn_command_duration_seconds"):
            continue  # present once a command ran (below)
        assert families.get(name) == kind, (name, families.get(name))
    kinds = {dict(k[1])["kind"] for k in before if k[0] == "cairn_memory_bytes"}
    assert kinds == {"records", "index", "tag_index", "client_buffers", "scripts",
                     "tracking_table", "change_backlog", "repl_backlog", "sql"}

    r = srv.client()
    r.set("k", "v")
    r.set("t", "v", ex=100)
    for _ in range(5):
        r.get("k")
    r.get("missing")
    with pytest.raises(Exception):
        r.execute_command("INCR", "k")  # WRONGTYPE-free error: value is not an integer
    r.execute_command("SQL.EXEC", "CREATE TABLE m(x INTEGER)")
    r.execute_command("SQL.EXEC", "INSERT INTO m VALUES (1)")
    r.publish("ch", "hello")
    s = socket.create_connection(("127.0.0.1", srv.memcache_port))
    s.sendall(b"set mk 0 0 1\r\nx\r\nget mk\r\n")
    buf = b""
    while not buf.endswith(b"END\r\n"):
        buf += s.recv(4096)

    families, after = scrape(mport)
    assert families["cairn_commands"] == "counter"
    assert value(after, "cairn_commands_total", command="get", protocol="resp") == 6
    assert value(after, "cairn_commands_total", command="set", protocol="resp") == 2
    # memcached's set and get (the RESP commands they run as: SET, MGET) under their protocol.
    assert value(after, "cairn_commands_total", command="set", protocol="memcache") == 1
    assert value(after, "cairn_commands_total", command="mget", protocol="memcache") == 1
    assert value(after, "cairn_commands_total", command="mget", protocol="resp") == 0
    assert value(after, "cairn_command_errors_total", command="incr", protocol="resp") == 1
    assert value(after, "cairn_keyspace_hits_total") >= 5
    assert value(after, "cairn_keyspace_misses_total") >= 1
    assert value(after, "cairn_keys") == 3
    assert value(after, "cairn_expiring_keys") == 1
    assert value(after, "cairn_connections", protocol="resp") >= 1
    assert value(after, "cairn_connections", protocol="memcache") == 1
    assert value(after, "cairn_pubsub_messages_published_total") == 1
    assert value(after, "cairn_sql_statements_total") >= 2
    assert value(after, "cairn_sql_statement_duration_seconds_count") >= 2
    assert value(after, "cairn_memory_bytes", kind="records") > 0
    assert value(after, "cairn_memory_bytes", kind="index") > 0
    # The GET histogram: count = calls, cumulative buckets ending at +Inf.
    count = value(after, "cairn_command_duration_seconds_count", command="get")
    assert count == 6
    assert value(after, "cairn_command_duration_seconds_bucket", command="get", le="+Inf") == 6
    assert value(after, "cairn_command_duration_seconds_sum", command="get") > 0
    # One source for INFO and the endpoint: commandstats agrees.
    assert r.info("commandstats")["cmdstat_get"]["calls"] == 6
    s.close()


@pytest.mark.cairn_only  # the endpoint is cairn's
def test_healthz_readyz_and_errors(server_factory, tmp_path):
    mport = free_port()
    # A snapshot that loads slowly: /readyz says 503 while it loads, then 200.
    seed = server_factory("--dir", str(tmp_path))
    c = seed.client()
    for i in range(200):
        c.set(f"k{i}", "v")
    c.save()
    seed.stop()
    srv = server_factory("--dir", str(tmp_path), "--key-load-delay", "5000",
                         "--metrics-port", str(mport), start=False)
    srv.start(wait=False)
    wait_until(lambda: get_or_none(mport, "/healthz") is not None, timeout=10)
    status, _, body = get(mport, "/readyz")
    assert status == 503 and "loading" in body, (status, body)
    assert get(mport, "/healthz")[0] == 200
    wait_until(lambda: get(mport, "/readyz")[0] == 200, timeout=20)
    srv.wait_ready()
    assert get(mport, "/nope")[0] == 404
    # Not GET: 405; a request head past the bound: refused, the endpoint still answers.
    with socket.create_connection(("127.0.0.1", mport)) as s:
        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 405")
    with socket.create_connection(("127.0.0.1", mport)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    assert get(mport, "/healthz")[0] == 200


@pytest.mark.cairn_only
def test_readyz_on_a_replica_waits_for_its_primary(server_factory):
    """A replica is ready once in sync with its primary: 503 while its primary is away."""
    mport = free_port()
    rep = server_factory("--metrics-port", str(mport))
    rc = rep.client()
    assert get(mport, "/readyz")[0] == 200
    rc.replicaof("127.0.0.1", free_port())  # nothing listens there
    status, _, body = get(mport, "/readyz")
    assert status == 503 and "replication" in body, (status, body)
    primary = server_factory()
    primary.client().set("k", "v")
    rc.replicaof("127.0.0.1", primary.port)
    wait_until(lambda: get(mport, "/readyz")[0] == 200, timeout=10)
    assert rc.get("k") == b"v"


def get_or_none(port, path):
    try:
        return get(port, path)
    except OSError:
        return None


def test_memory_stats_and_doctor(r, server):
    r.set("a", "x" * 100)
    stats = r.memory_stats()
    for field in ("peak.allocated", "total.allocated", "keys.count", "dataset.bytes",
                  "overhead.total", "clients.normal"):
        assert field in stats, (field, sorted(stats))
    assert stats["keys.count"] == 1
    doctor = r.execute_command("MEMORY", "DOCTOR")
    assert isinstance(doctor, (bytes, str)) and len(doctor) > 0
    with pytest.raises(Exception, match="(?i)wrong number|unknown subcommand"):
        r.execute_command("MEMORY", "STATS", "extra")
    if server.kind == "cairn":
        # cairn's kinds, which INFO memory shows under the same numbers.
        assert stats["cairn.records"] > 100
        info = r.info("memory")
        for kind in ("records", "index", "tag_index", "client_buffers", "sql", "tracking_table",
                     "change_backlog", "scripts"):
            assert f"mem_{kind}" in info, kind
        assert info["mem_index"] == stats["cairn.index"]


@pytest.mark.cairn_only  # --log-format / --logfile are cairn's flags
def test_json_logs_to_a_file_reopened_on_sighup(server_factory, tmp_path):
    log = tmp_path / "cairn.log"
    srv = server_factory("--log-format", "json", "--logfile", str(log))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(line.get("message") == "cairn starting" and "commit" in line for line in lines), lines
    assert all("timestamp" in line and "level" in line for line in lines)
    rotated = tmp_path / "cairn.log.1"
    log.rename(rotated)
    srv.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: log.exists() and "reopened the log file" in log.read_text(), timeout=10)
    assert "reopened" not in rotated.read_text()


@pytest.mark.cairn_only  # systemd's notify protocol
def test_sd_notify_ready(server_factory, tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    srv = server_factory(env={"NOTIFY_SOCKET": path})
    assert sock.recv(100) == b"READY=1"
    srv.stop()
    assert sock.recv(100) == b"STOPPING=1"
    sock.close()


@pytest.mark.cairn_only
def test_version_names_the_commit():
    out = subprocess.run([CAIRN_BIN, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("cairn-server ") and "(commit " in out, out
    repo = Path(__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode == 0 and os.environ.get("CAIRN_BIN") is None:
        # Built from this checkout: the commit is this one's (or an older build's, if not rebuilt).
        assert len(out.split("(commit ")[1].rstrip(")\n")) == 12
