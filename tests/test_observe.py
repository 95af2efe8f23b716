"""MONITOR, SLOWLOG and LATENCY: the operator's views of the command path.

Redis's behaviour is checked with CAIRN_TARGET=redis; memcached requests in MONITOR, the
output bound of a monitor that never reads, and the `sql` / `expire-cycle` latency events are
cairn's own.
"""

import re
import threading
import time

import pytest

from conftest import RawConn, decode_resp, encode_command, wait_until

LINE = re.compile(rb"^\+(\d+)\.(\d{6}) \[0 ([^\]]+)\] (.*)$")


def monitor_lines(mon, count, timeout=5.0):
    """The next `count` MONITOR lines as (peer, arguments text)."""
    out = []
    for _ in range(count):
        line = mon.read_line(timeout)
        m = LINE.match(line)
        assert m, f"not a MONITOR line: {line!r}"
        secs = int(m.group(1))
        assert abs(secs - time.time()) < 60
        out.append((m.group(3).decode(), m.group(4)))
    return out


def start_monitor(server, **kw):
    mon = server.raw(**kw)
    assert mon.command("MONITOR") == b"+OK\r\n"
    return mon


def local_peer(conn):
    host, port = conn.sock.getsockname()
    return f"{host}:{port}"


@pytest.fixture
def observed(server, r):
    """The shared server with the slow log and latency monitor back at their defaults after."""
    yield r
    r.config_set("slowlog-log-slower-than", 10000)
    r.config_set("slowlog-max-len", 128)
    r.config_set("latency-monitor-threshold", 0)
    r.slowlog_reset()
    r.execute_command("LATENCY", "RESET")


# ---------------------------------------------------------------------------- MONITOR


def test_monitor_shows_commands_in_redis_format(server, r):
    mon = start_monitor(server)
    actor = server.raw()
    try:
        peer = local_peer(actor)
        assert actor.command("SET", "k", b'v\x00\n"\xc3\xa9\\') == b"+OK\r\n"
        actor.command("MULTI")
        actor.command("SET", "a", "1")
        actor.command("GET", "a")
        actor.command("EXEC")
        actor.command("AUTH", "secret")  # fails (no password set), still shown, redacted
        actor.command("AUTH", "user", "secret")
        actor.command("HELLO", "2", "AUTH", "user", "secret")
        # Hidden: administrative commands, and commands refused before they run.
        actor.command("CONFIG", "GET", "maxmemory")
        actor.command("CLIENT", "LIST")
        actor.command("SLOWLOG", "LEN")
        actor.command("NOSUCHCOMMAND", "x")
        actor.command("GET")
        actor.command("CLIENT", "SETNAME", "worker")
        actor.command("ECHO", "done")
        got = monitor_lines(mon, 10)
        assert {p for p, _ in got} == {peer}
        assert [a for _, a in got] == [
            b'"SET" "k" "v\\x00\\n\\"\\xc3\\xa9\\\\"',
            b'"MULTI"',
            b'"SET" "a" "1"',
            b'"GET" "a"',
            b'"EXEC"',
            b'"AUTH" "(redacted)"',
            b'"AUTH" "(redacted)" "(redacted)"',
            b'"HELLO" "2" "AUTH" "(redacted)" "(redacted)"',
            b'"CLIENT" "SETNAME" "worker"',
            b'"ECHO" "done"',
        ]
    finally:
        actor.close()
        mon.close()


def test_monitor_connection_may_not_touch_the_keyspace(server, r):
    mon = start_monitor(server)
    try:
        # Its own commands are shown to it too, after their reply.
        assert mon.command("PING") == b"+PONG\r\n"
        assert monitor_lines(mon, 1)[0][1] == b'"PING"'
        for args in (("GET", "k"), ("SET", "k", "v"), ("PUBLISH", "c", "m"), ("DBSIZE",)):
            assert mon.err(*args) == "ERR Replica can't interact with the keyspace"
        # A second MONITOR is ignored: no reply at all.
        mon.send(encode_command("MONITOR"))
        assert mon.read_available(0.3) == b""
        assert mon.command("QUIT") == b"+OK\r\n"
        assert mon.is_closed()
    finally:
        mon.close()


def test_monitor_inside_multi_is_refused(server, r):
    c = server.raw()
    try:
        c.command("MULTI")
        assert c.command("MONITOR") == b"+QUEUED\r\n"
        assert c.command("EXEC") == b"*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n"
        # Not monitoring: keyspace commands still work.
        assert c.command("SET", "k", "v") == b"+OK\r\n"
    finally:
        c.close()


def test_monitor_flag_in_client_list(server, r):
    mon = start_monitor(server)
    try:
        wait_until(lambda: any("O" in c["flags"] for c in r.client_list()), msg="flags=O")
    finally:
        mon.close()
    wait_until(lambda: not any("O" in c["flags"] for c in r.client_list()), msg="monitor gone")


def test_monitor_unix_socket_peer(server_factory, tmp_path):
    path = str(tmp_path / "m.sock")
    srv = server_factory("--unixsocket", path)
    mon = start_monitor(srv)
    actor = RawConn(path=path)
    try:
        actor.command("PING")
        peer, args = monitor_lines(mon, 1)[0]
        assert (peer, args) == (f"unix:{path}", b'"PING"')
    finally:
        actor.close()
        mon.close()


@pytest.mark.cairn_only
def test_monitor_shows_memcached_requests(server, r):
    mon = start_monitor(server)
    mc = server.mc_raw()
    try:
        peer = local_peer(mc)
        mc.request(b"set k 5 0 2\r\nhi\r\n", b"STORED\r\n")
        mc.request(b"add k 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
        mc.request(b"gets k\r\n", b"VALUE k 5 2 ")
        mc.read_until(b"END\r\n")
        mc.request(b"incr n 1\r\n", b"NOT_FOUND\r\n")
        mc.request(b"delete k noreply\r\nmn\r\n", b"MN\r\n")
        got = monitor_lines(mon, 6)
        assert {p for p, _ in got} == {peer}
        assert [a for _, a in got] == [
            b'"set" "k" "5" "0" "hi"',
            b'"set" "k" "0" "0" "x" "NX"',
            b'"mget" "k"',
            b'"incrby" "n" "1"',
            b'"del" "k"',
            b'"mn"',
        ]
    finally:
        mc.close()
        mon.close()


@pytest.mark.cairn_only
def test_a_monitor_that_never_reads_is_cut_and_others_keep_their_latency(server_factory):
    srv = server_factory("--client-output-buffer-limit", "pubsub 256kb 128kb 1")
    mon = start_monitor(srv, rcvbuf=4096)
    r = srv.client()
    value = b"x" * 4000
    # A third client measures its round trips while the monitor's output piles up.
    worst = [0.0]
    stop = threading.Event()

    def ping():
        p = srv.client()
        while not stop.is_set():
            t0 = time.monotonic()
            p.ping()
            worst[0] = max(worst[0], time.monotonic() - t0)
            time.sleep(0.005)
        p.close()

    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        t0 = time.monotonic()
        for _ in range(10):
            pipe = r.pipeline(transaction=False)
            for i in range(500):
                pipe.set(f"k{i}", value)
            pipe.execute()
        # 20 MB of monitor lines went out; the writer never waited for the monitor.
        assert time.monotonic() - t0 < 20
        stats = lambda: r.info("stats")["client_output_limit_disconnections"]
        wait_until(lambda: stats() >= 1, msg="the monitor is cut at its limit")
        assert mon.is_closed(5.0)
        assert not any("O" in c["flags"] for c in r.client_list())
    finally:
        stop.set()
        pinger.join()
        mon.close()
    assert worst[0] < 2.0, f"a PING took {worst[0]:.3f}s while the monitor was stuck"
    assert r.ping()


# ---------------------------------------------------------------------------- SLOWLOG


def slowlog_raw(c, *args):
    return decode_resp(c.command("SLOWLOG", *args))


def test_slowlog_entries_have_redis_shape(server, observed):
    r = observed
    c = server.raw()
    try:
        c.command("CLIENT", "SETNAME", "slowpoke")
        assert c.command("CONFIG", "SET", "slowlog-log-slower-than", "0") == b"+OK\r\n"
        c.command("SLOWLOG", "RESET")
        long_key = b"a" * 201
        c.command("SET", long_key, "v")
        c.command("DEL", *[str(i) for i in range(40)])
        c.command("AUTH", "secret")
        entries = slowlog_raw(c, "GET", "4")
        assert len(entries) == 4
        auth, dele, setcmd, reset = entries
        # Newest first, ids increasing by one.
        assert [e[0] for e in entries] == list(range(reset[0] + 3, reset[0] - 1, -1))
        for e in entries:
            assert len(e) == 6
            assert abs(e[1] - time.time()) < 60
            assert e[2] >= 0
            assert e[4] == local_peer(c).encode()
            assert e[5] == b"slowpoke"
        assert reset[3] == [b"SLOWLOG", b"RESET"]
        assert setcmd[3] == [b"SET", b"a" * 128 + b"... (73 more bytes)", b"v"]
        assert len(dele[3]) == 32
        assert dele[3][:3] == [b"DEL", b"0", b"1"]
        assert dele[3][30] == b"29"
        assert dele[3][31] == b"... (10 more arguments)"
        assert auth[3] == [b"AUTH", b"(redacted)"]
        # Each SLOWLOG command is logged too, after it ran.
        assert decode_resp(c.command("SLOWLOG", "LEN")) == 5
        assert len(slowlog_raw(c, "GET")) == 6
        assert len(slowlog_raw(c, "GET", "-1")) == 7
        assert slowlog_raw(c, "GET", "0") == []
    finally:
        c.close()


def test_slowlog_threshold_and_length(server, observed):
    r = observed
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 3)
    for i in range(10):
        r.set(f"k{i}", i)
    assert r.slowlog_len() == 3
    assert [e["command"] for e in r.slowlog_get(10)][1:] == [b"SET k9 9", b"SET k8 8"]
    # Negative: nothing is logged.
    r.config_set("slowlog-log-slower-than", -1)
    r.slowlog_reset()
    r.set("x", 1)
    assert r.slowlog_len() == 0
    # A high threshold: fast commands are not logged.
    r.config_set("slowlog-log-slower-than", 10_000_000)
    r.set("x", 1)
    assert r.slowlog_len() == 0
    assert r.config_get("slowlog*") == {
        "slowlog-log-slower-than": "10000000",
        "slowlog-max-len": "3",
    }


def test_slowlog_help_and_errors(server, observed):
    c = server.raw()
    try:
        help_lines = decode_resp(c.command("SLOWLOG", "HELP"))
        assert help_lines[0] == b"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
        assert help_lines[-2:] == [b"HELP", b"    Prints this help."]
        assert b"GET [<count>]" in help_lines
        assert c.err("SLOWLOG", "GET", "-2") == "ERR count should be greater than or equal to -1"
        assert c.err("SLOWLOG", "GET", "x") == "ERR count should be greater than or equal to -1"
        assert c.err("SLOWLOG", "GET", "1", "2") == (
            "ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP."
        )
        assert c.err("SLOWLOG", "LEN", "x") == "ERR wrong number of arguments for 'slowlog|len' command"
        assert c.err("SLOWLOG", "nope") == "ERR unknown subcommand 'nope'. Try SLOWLOG HELP."
        assert c.err("SLOWLOG") == "ERR wrong number of arguments for 'slowlog' command"
        for bad, why in (
            ("-2", "argument must be between -1 and 9223372036854775807 inclusive"),
            ("x", "argument couldn't be parsed into an integer"),
        ):
            assert c.err("CONFIG", "SET", "slowlog-log-slower-than", bad) == (
                "ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - " + why
            )
        assert c.err("CONFIG", "SET", "slowlog-max-len", "-1").endswith(
            "argument must be between 0 and 9223372036854775807 inclusive"
        )
    finally:
        c.close()


@pytest.mark.cairn_only
def test_slowlog_sees_memcached_requests(server, observed, mc):
    observed.config_set("slowlog-log-slower-than", 0)
    observed.slowlog_reset()
    assert mc.set("mk", b"v" * 300, noreply=False)
    entries = observed.slowlog_get(1)
    assert entries[0]["command"].startswith(b"set mk 0 0 " + b"v" * 128 + b"... (172 more bytes)")


@pytest.mark.cairn_only
def test_slowlog_flags_on_the_command_line(server_factory):
    srv = server_factory("--slowlog-log-slower-than", "-1", "--slowlog-max-len", "7",
                         "--latency-monitor-threshold", "5")
    r = srv.client()
    assert r.config_get("slowlog*") == {"slowlog-log-slower-than": "-1", "slowlog-max-len": "7"}
    assert r.config_get("latency-monitor-threshold") == {"latency-monitor-threshold": "5"}
    r.set("k", "v")
    assert r.slowlog_len() == 0


# ---------------------------------------------------------------------------- LATENCY


def test_latency_command_event(server, observed):
    r = observed
    r.execute_command("LATENCY", "RESET")
    assert r.execute_command("LATENCY", "LATEST") == []
    r.config_set("latency-monitor-threshold", 1)
    # One MSET of many pairs runs well past a millisecond, in Redis as here.
    pairs = []
    for i in range(200_000):
        pairs += [f"key:{i}", "v"]
    before = int(time.time())
    deadline = time.monotonic() + 10
    while True:
        r.execute_command("MSET", *pairs)
        latest = r.execute_command("LATENCY", "LATEST")
        if any(e[0] == b"command" for e in latest) or time.monotonic() > deadline:
            break
    (event,) = [e for e in latest if e[0] == b"command"]
    name, when, latency, worst = event
    assert before - 1 <= when <= time.time() + 1
    assert 1 <= latency <= worst
    history = r.execute_command("LATENCY", "HISTORY", "command")
    assert history and history[-1] == [when, latency]
    assert r.execute_command("LATENCY", "HISTORY", "nosuchevent") == []
    assert r.execute_command("LATENCY", "RESET", "COMMAND", "nosuch") == 1
    assert r.execute_command("LATENCY", "HISTORY", "command") == []


def test_latency_help_and_errors(server, observed):
    c = server.raw()
    try:
        c.command("LATENCY", "RESET")
        assert c.command("LATENCY", "LATEST") == b"*0\r\n"
        assert c.command("LATENCY", "RESET", "a", "b") == b":0\r\n"
        assert c.err("LATENCY", "GRAPH", "command") == "ERR No samples available for event 'command'"
        assert c.err("LATENCY", "HISTORY") == "ERR wrong number of arguments for 'latency|history' command"
        assert c.err("LATENCY", "LATEST", "x") == "ERR wrong number of arguments for 'latency|latest' command"
        assert c.err("LATENCY", "nope") == "ERR unknown subcommand 'nope'. Try LATENCY HELP."
        help_lines = decode_resp(c.command("LATENCY", "HELP"))
        assert help_lines[0] == b"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
        for line in (b"LATEST", b"HISTORY <event>", b"RESET [<event> ...]", b"DOCTOR", b"GRAPH <event>"):
            assert line in help_lines
        doctor = decode_resp(c.command("LATENCY", "DOCTOR"))
        assert b"latency-monitor-threshold" in doctor
        assert c.err("CONFIG", "SET", "latency-monitor-threshold", "-1").endswith(
            "argument must be between 0 and 9223372036854775807 inclusive"
        )
    finally:
        c.close()


@pytest.mark.cairn_only
def test_latency_sql_event_and_slowlog(server, observed):
    r = observed
    r.execute_command("LATENCY", "RESET")
    r.config_set("latency-monitor-threshold", 1)
    r.config_set("slowlog-log-slower-than", 1000)
    r.slowlog_reset()
    query = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000) "
             "SELECT count(*) FROM c")
    assert r.execute_command("SQL.QUERY", query)[1] == [[50000]]
    latest = {e[0]: e for e in r.execute_command("LATENCY", "LATEST")}
    assert b"sql" in latest and latest[b"sql"][2] >= 1
    # The slow log has the statement with its run time on the engine, not its hand-off.
    (entry,) = [e for e in r.slowlog_get(10) if e["command"].startswith(b"SQL.QUERY")]
    assert entry["duration"] >= 1000


@pytest.mark.cairn_only
def test_latency_expire_cycle_event(server_factory):
    srv = server_factory("--latency-monitor-threshold", "1")
    r = srv.client()
    # Removing this many expired keys in one round takes it well past a millisecond: they all
    # share one deadline, far enough out that loading them ends first even on a slow machine
    # (with a relative PX the first keys expired while the rest loaded, and the rounds that
    # took them a few at a time each stayed under the threshold on a fast machine).
    keys = 200_000
    deadline_ms = int(time.time() * 1000) + 3000
    raw = srv.raw()
    raw.send(b"".join(encode_command("SET", f"e{i}", "v", "PXAT", deadline_ms) for i in range(keys)))
    raw.read_exact(len(b"+OK\r\n") * keys, timeout=30)
    raw.close()
    assert time.time() * 1000 < deadline_ms, "loaded before the deadline"
    wait_until(lambda: r.dbsize() == 0, timeout=30, msg="keys expired")

    def latest():
        return {e[0]: e for e in r.execute_command("LATENCY", "LATEST")}

    # The round reports when it ends, after its last rest: a little after the last key went.
    wait_until(lambda: b"expire-cycle" in latest(), timeout=10, msg="expire-cycle reported")
    assert latest()[b"expire-cycle"][3] >= 1


def test_reset_ends_monitor_multi_and_subscriptions(server, r):
    mon = start_monitor(server)
    actor = server.raw()
    try:
        assert mon.command("RESET") == b"+RESET\r\n"
        actor.command("SET", "k", "v")
        assert mon.read_available(0.3) == b""
        assert mon.command("GET", "k") == b"$1\r\nv\r\n"
        # MULTI, WATCH and subscriptions end too; the name is cleared.
        mon.command("CLIENT", "SETNAME", "n")
        mon.command("MULTI")
        assert mon.command("RESET") == b"+RESET\r\n"
        assert mon.err("EXEC") == "ERR EXEC without MULTI"
        mon.command("SUBSCRIBE", "ch")
        assert mon.command("RESET") == b"+RESET\r\n"
        assert mon.command("SET", "k", "w") == b"+OK\r\n"
        assert mon.command("CLIENT", "GETNAME") == b"$-1\r\n"
        assert r.pubsub_numsub("ch") == [(b"ch", 0)]
    finally:
        actor.close()
        mon.close()
