"""Introspection (issue 11, items 13 and 14): INFO has every section and field Redis 7 emits,
with real values; ROLE; CLIENT LIST / INFO show real per-client state, SETINFO values and
filter by ID and TYPE; CONFIG RESETSTAT resets every counter; commandstats count failed and
rejected calls and errorstats count error codes (Redis 7 semantics)."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from conftest import TARGET, decode_resp, encode_command, wait_until

pytestmark = pytest.mark.redis_only

# Sections of `INFO everything` in Redis 7 (Latencystats only when latency tracking is on).
SECTIONS = ["Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU",
            "Modules", "Errorstats", "Cluster", "Keyspace"]

# Every field a real redis-server 7.0 prints in those sections (`redis-cli info everything`),
# but the per-platform `*_main_thread` CPU times.
REDIS7_FIELDS = {
    "Server": """redis_version redis_git_sha1 redis_git_dirty redis_build_id redis_mode os arch_bits
        monotonic_clock multiplexing_api atomicvar_api gcc_version process_id process_supervised
        run_id tcp_port server_time_usec uptime_in_seconds uptime_in_days hz configured_hz
        lru_clock executable config_file io_threads_active""",
    "Clients": """connected_clients cluster_connections maxclients client_recent_max_input_buffer
        client_recent_max_output_buffer blocked_clients tracking_clients clients_in_timeout_table""",
    "Memory": """used_memory used_memory_human used_memory_rss used_memory_rss_human
        used_memory_peak used_memory_peak_human used_memory_peak_perc used_memory_overhead
        used_memory_startup used_memory_dataset used_memory_dataset_perc allocator_allocated
        allocator_active allocator_resident total_system_memory total_system_memory_human
        used_memory_lua used_memory_vm_eval used_memory_lua_human used_memory_scripts_eval
        number_of_cached_scripts number_of_functions number_of_libraries used_memory_vm_functions
        used_memory_vm_total used_memory_vm_total_human used_memory_functions used_memory_scripts
        used_memory_scripts_human maxmemory maxmemory_human maxmemory_policy allocator_frag_ratio
        allocator_frag_bytes allocator_rss_ratio allocator_rss_bytes rss_overhead_ratio
        rss_overhead_bytes mem_fragmentation_ratio mem_fragmentation_bytes
        mem_not_counted_for_evict mem_replication_backlog mem_total_replication_buffers
        mem_clients_slaves mem_clients_normal mem_cluster_links mem_aof_buffer mem_allocator
        active_defrag_running lazyfree_pending_objects lazyfreed_objects""",
    "Persistence": """loading async_loading current_cow_peak current_cow_size current_cow_size_age
        current_fork_perc current_save_keys_processed current_save_keys_total
        rdb_changes_since_last_save rdb_bgsave_in_progress rdb_last_save_time
        rdb_last_bgsave_status rdb_last_bgsave_time_sec rdb_current_bgsave_time_sec rdb_saves
        rdb_last_cow_size rdb_last_load_keys_expired rdb_last_load_keys_loaded aof_enabled
        aof_rewrite_in_progress aof_rewrite_scheduled aof_last_rewrite_time_sec
        aof_current_rewrite_time_sec aof_last_bgrewrite_status aof_rewrites
        aof_rewrites_consecutive_failures aof_last_write_status aof_last_cow_size
        module_fork_in_progress module_fork_last_cow_size""",
    "Stats": """total_connections_received total_commands_processed instantaneous_ops_per_sec
        total_net_input_bytes total_net_output_bytes total_net_repl_input_bytes
        total_net_repl_output_bytes instantaneous_input_kbps instantaneous_output_kbps
        instantaneous_input_repl_kbps instantaneous_output_repl_kbps rejected_connections
        sync_full sync_partial_ok sync_partial_err expired_keys expired_stale_perc
        expired_time_cap_reached_count expire_cycle_cpu_milliseconds evicted_keys evicted_clients
        total_eviction_exceeded_time current_eviction_exceeded_time keyspace_hits keyspace_misses
        pubsub_channels pubsub_patterns pubsubshard_channels latest_fork_usec total_forks
        migrate_cached_sockets slave_expires_tracked_keys active_defrag_hits active_defrag_misses
        active_defrag_key_hits active_defrag_key_misses total_active_defrag_time
        current_active_defrag_time tracking_total_keys tracking_total_items
        tracking_total_prefixes unexpected_error_replies total_error_replies
        dump_payload_sanitizations total_reads_processed total_writes_processed
        io_threaded_reads_processed io_threaded_writes_processed reply_buffer_shrinks
        reply_buffer_expands""",
    "Replication": """role connected_slaves master_failover_state master_replid master_replid2
        master_repl_offset second_repl_offset repl_backlog_active repl_backlog_size
        repl_backlog_first_byte_offset repl_backlog_histlen""",
    "CPU": "used_cpu_sys used_cpu_user used_cpu_sys_children used_cpu_user_children",
    "Cluster": "cluster_enabled",
}


def info_sections(raw, *args) -> dict[str, dict[str, str]]:
    """INFO's text as {section title: {field: raw value}}, checking the line format."""
    text = decode_resp(raw.command("INFO", *args)).decode()
    sections: dict[str, dict[str, str]] = {}
    current = None
    for line in text.split("\r\n"):
        if not line:
            continue
        if line.startswith("# "):
            current = line[2:]
            assert current not in sections, f"section {current} twice"
            sections[current] = {}
            continue
        assert current is not None, line
        name, sep, value = line.partition(":")
        assert sep and name and " " not in name, f"bad INFO line {line!r}"
        sections[current][name] = value
    assert not text.endswith("\r\n\r\n"), "trailing blank line"
    return sections


def client_fields(line: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in line.split(" "))


def client_lines(raw, *args) -> list[dict[str, str]]:
    text = decode_resp(raw.command("CLIENT", "LIST", *args)).decode()
    return [client_fields(line) for line in text.split("\n") if line]


def client_by_id(raw, cid) -> dict[str, str]:
    lines = client_lines(raw, "ID", str(cid))
    assert len(lines) == 1, lines
    return lines[0]


# --- INFO sections and fields -------------------------------------------------------

def test_info_everything_has_every_redis7_section_and_field(raw):
    sections = info_sections(raw, "everything")
    for title in SECTIONS + ["Commandstats"]:
        assert title in sections, f"missing section {title}; got {list(sections)}"
    for title, names in REDIS7_FIELDS.items():
        missing = [n for n in names.split() if n not in sections[title]]
        assert not missing, f"{title} lacks {missing}"
    # Sections come in Redis's order.
    order = [t for t in sections if t in SECTIONS]
    assert order == SECTIONS, order


def test_info_section_selection(raw):
    default = info_sections(raw)
    assert list(default) == SECTIONS
    assert list(info_sections(raw, "default")) == SECTIONS
    assert "Commandstats" in info_sections(raw, "all")
    assert list(info_sections(raw, "server", "CLIENTS")) == ["Server", "Clients"]
    assert list(info_sections(raw, "cluster")) == ["Cluster"]
    assert list(info_sections(raw, "replication", "replication")) == ["Replication"]
    both = info_sections(raw, "default", "commandstats")
    assert set(both) == set(SECTIONS) | {"Commandstats"}
    assert info_sections(raw, "nosuchsection") == {}


def test_info_parses_with_redis_py(r):
    info = r.info()
    assert info["role"] == "master"
    assert info["connected_slaves"] == 0
    # Shared by the session's tests: one that spoke PSYNC to it started its stream (as it
    # would Redis's backlog), so only a fresh server's offset is known (test below).
    assert info["master_repl_offset"] >= 0
    assert info["cluster_enabled"] == 0
    assert info["aof_enabled"] == 0
    assert info["rdb_bgsave_in_progress"] == 0
    assert info["rdb_last_bgsave_status"] == "ok"
    assert isinstance(info["used_cpu_user"], float)
    assert info["used_memory_peak"] >= info["used_memory"] > 0
    assert r.info("cluster") == {"cluster_enabled": 0}
    everything = r.info("everything")
    assert everything["cmdstat_info"]["calls"] >= 1
    assert everything["role"] == "master"
    # redis-py's own test harness reads these.
    assert r.info("server")["redis_version"].startswith("7.")
    assert r.info("replication")["role"] == "master"


def test_role(r, raw):
    role, offset, replicas = r.execute_command("ROLE")
    assert (role, replicas) == (b"master", [])
    assert raw.command("ROLE") == b"*3\r\n$6\r\nmaster\r\n:%d\r\n*0\r\n" % offset


def test_a_primary_that_never_had_a_replica_stays_at_offset_0(server_factory):
    """As Redis, whose backlog (and offset) starts with its first replica: writes, and a WAIT
    that no replica answers, leave the offset at 0."""
    srv = server_factory()
    r = srv.client()
    r.set("k", "v")
    assert r.execute_command("WAIT", "1", "50") == 0
    r.set("k", "w")
    assert r.info("replication")["master_repl_offset"] == 0
    assert r.execute_command("ROLE") == [b"master", 0, []]


def test_info_values_are_real(server_factory):
    srv = server_factory()
    c = srv.raw()
    stats = info_sections(c, "stats")["Stats"]
    connections = int(stats["total_connections_received"])
    for _ in range(5):
        with srv.raw() as other:
            other.request(b"PING\r\n", b"+PONG\r\n")
    stats = info_sections(c, "stats")["Stats"]
    assert int(stats["total_connections_received"]) == connections + 5

    # Each I/O thread adds its read and write counts to the totals at the end of its loop
    # iteration, after the replies went out: a busy machine can show the last PING's a
    # moment later.
    def counted() -> bool:
        s = info_sections(c, "stats")["Stats"]
        return int(s["total_reads_processed"]) >= 6 and int(s["total_writes_processed"]) >= 5

    wait_until(counted, timeout=5)

    # Load from another connection: ops/sec and CPU time become visible.
    stop = threading.Event()

    def load():
        with srv.raw() as busy:
            batch = encode_command("SET", "k", "v") * 200
            while not stop.is_set():
                busy.send(batch)
                busy.read_exact(5 * 200)

    t = threading.Thread(target=load)
    t.start()
    try:
        ops = wait_until(lambda: int(info_sections(c, "stats")["Stats"]["instantaneous_ops_per_sec"]),
                         timeout=5, msg="instantaneous_ops_per_sec > 0 under load")
        assert ops > 0
        kbps = float(info_sections(c, "stats")["Stats"]["instantaneous_input_kbps"])
        assert kbps > 0
    finally:
        stop.set()
        t.join()
    cpu = info_sections(c, "cpu")["CPU"]
    assert float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]) > 0

    # The memory peak follows used memory up, and stays when it goes down.
    mem = info_sections(c, "memory")["Memory"]
    c.request(encode_command("SET", "big", "x" * 4_000_000), b"+OK\r\n")
    high = info_sections(c, "memory")["Memory"]
    assert int(high["used_memory"]) > int(mem["used_memory"]) + 3_000_000
    assert int(high["used_memory_peak"]) >= int(high["used_memory"])
    c.request(encode_command("DEL", "big"), b":1\r\n")
    low = info_sections(c, "memory")["Memory"]
    assert int(low["used_memory_peak"]) >= int(high["used_memory"])
    assert int(low["used_memory"]) < int(high["used_memory"])
    assert low["used_memory_peak_human"].endswith(("K", "M"))

    # Replication and persistence say "master, nothing saved".
    repl = info_sections(c, "replication")["Replication"]
    assert repl["role"] == "master" and repl["connected_slaves"] == "0"
    assert len(repl["master_replid"]) == 40
    pers = info_sections(c, "persistence")["Persistence"]
    assert pers["aof_enabled"] == "0" and pers["rdb_bgsave_in_progress"] == "0"
    assert abs(int(pers["rdb_last_save_time"]) - time.time()) < 3600


# --- CLIENT LIST / INFO ---------------------------------------------------------------

@pytest.mark.cairn_only  # CLIENT SETINFO is Redis 7.2; the reference server here is 7.0
def test_client_setinfo_shows_in_client_list(server, r, raw):
    me = client_fields(decode_resp(raw.command("CLIENT", "INFO")).decode().strip())
    assert me["lib-name"] == "" and me["lib-ver"] == ""
    assert raw.command("CLIENT", "SETINFO", "lib-name", "mylib") == b"+OK\r\n"
    assert raw.command("CLIENT", "SETINFO", "LIB-VER", "1.2.3") == b"+OK\r\n"
    me = client_fields(decode_resp(raw.command("CLIENT", "INFO")).decode().strip())
    assert (me["lib-name"], me["lib-ver"]) == ("mylib", "1.2.3")
    with server.raw() as other:
        assert client_by_id(other, me["id"])["lib-name"] == "mylib"
    assert raw.err("CLIENT", "SETINFO", "lib-name", "my lib") == \
        "ERR lib-name cannot contain spaces, newlines or special characters."
    assert raw.err("CLIENT", "SETINFO", "lib-ver", "1\n2") == \
        "ERR lib-ver cannot contain spaces, newlines or special characters."
    assert raw.err("CLIENT", "SETINFO", "lib-os", "x") == "ERR Unrecognized option 'lib-os'"
    assert raw.err("CLIENT", "SETINFO", "lib-name").startswith("ERR wrong number of arguments")
    assert raw.command("CLIENT", "SETINFO", "lib-name", "") == b"+OK\r\n"
    me = client_fields(decode_resp(raw.command("CLIENT", "INFO")).decode().strip())
    assert (me["lib-name"], me["lib-ver"]) == ("", "1.2.3")
    # redis-py announces itself on connect.
    info = r.client_info()
    assert info["lib-name"] == "redis-py" and info["lib-ver"] == redis.__version__


def client_id(conn) -> int:
    return int(conn.command("CLIENT", "ID")[1:-2])


def test_client_list_shows_real_state(server):
    r = server.raw()
    sub = server.raw()
    sub_id = client_id(sub)
    sub.send(encode_command("SUBSCRIBE", "a", "b"))
    sub.read_resp(), sub.read_resp()
    sub.send(encode_command("PSUBSCRIBE", "p*"))
    sub.read_resp()
    line = client_by_id(r, sub_id)
    assert (line["flags"], line["sub"], line["psub"]) == ("P", "2", "1"), line

    tx = server.raw()
    tx_id = client_id(tx)
    tx.request(encode_command("WATCH", "w1", "w2"), b"+OK\r\n")
    tx.request(encode_command("MULTI"), b"+OK\r\n")
    tx.request(encode_command("SET", "k", "v"), b"+QUEUED\r\n")
    tx.request(encode_command("INCR", "n"), b"+QUEUED\r\n")
    line = client_by_id(r, tx_id)
    # (`watch=` is Redis 7.2's; the reference server here is 7.0.)
    assert (line["flags"], line["multi"], line.get("watch", "2")) == ("x", "2", "2"), line
    assert int(line["multi-mem"]) > 0 or TARGET == "redis"
    tx.command("EXEC")
    line = client_by_id(r, tx_id)
    assert (line["flags"], line["multi"], line.get("watch", "0")) == ("N", "-1", "0"), line

    tr = server.raw()
    tr_id = client_id(tr)
    tr.request(encode_command("CLIENT", "TRACKING", "on", "REDIRECT", str(sub_id)), b"+OK\r\n")
    line = client_by_id(r, tr_id)
    assert (line["flags"], line["redir"]) == ("t", str(sub_id)), line
    tr.request(encode_command("CLIENT", "TRACKING", "off"), b"+OK\r\n")
    tr.request(encode_command("CLIENT", "TRACKING", "on", "BCAST"), b"+OK\r\n")
    line = client_by_id(r, tr_id)
    assert (line["flags"], line["redir"]) == ("tB", "0"), line
    tr.request(encode_command("CLIENT", "NO-EVICT", "on"), b"+OK\r\n")
    assert client_by_id(r, tr_id)["flags"] == "tBe"
    tr.request(encode_command("CLIENT", "NO-EVICT", "off"), b"+OK\r\n")
    assert tr.err("CLIENT", "NO-EVICT", "maybe") == "ERR syntax error"

    # The caller's own line is current, as is CLIENT INFO's.
    me = client_fields(decode_resp(tx.command("CLIENT", "INFO")).decode().strip())
    assert me["cmd"].startswith("client") and me["flags"] == "N"
    for c in (sub, tx, tr, r):
        c.close()


@pytest.mark.cairn_only
def test_client_waiting_for_sql_is_blocked(server_factory):
    srv = server_factory("--sql-timeout", "10s")
    lister = srv.raw()
    waiter = srv.raw(timeout=15)
    wid = client_id(waiter)
    slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
            "SELECT count(*) FROM c")
    waiter.send(encode_command("SQL.QUERY", slow))
    line = wait_until(lambda: (l := client_by_id(lister, wid))["flags"] == "b" and l,
                      timeout=5, msg="flags=b while the statement runs")
    assert line["cmd"] == "sql.query"
    assert info_sections(lister, "clients")["Clients"]["blocked_clients"] == "1"
    assert waiter.read_resp(timeout=15).startswith((b"*", b"-"))
    wait_until(lambda: client_by_id(lister, wid)["flags"] == "N", timeout=3, msg="b cleared")
    assert info_sections(lister, "clients")["Clients"]["blocked_clients"] == "0"


def line_with(lister, cid, name):
    """The client's CLIENT LIST fields once `name` is positive, else None."""
    line = client_by_id(lister, cid)
    return line if int(line[name]) > 0 else None


def test_client_list_qbuf_and_omem(server, r):
    lister = server.raw()
    partial = server.raw()
    pid = client_id(partial)
    partial.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabcdefghij")
    line = wait_until(lambda: line_with(lister, pid, "qbuf"), timeout=3, msg="qbuf > 0")
    # At least the partial argument (Redis drops parsed arguments from its buffer).
    assert int(line["qbuf"]) >= 10
    assert int(line["tot-mem"]) >= int(line["qbuf"]) + int(line["qbuf-free"])

    value = b"x" * (1 << 20)
    r.set("omem:big", value)
    slow = server.raw(rcvbuf=4096)
    sid = client_id(slow)
    slow.send(encode_command("GET", "omem:big") * 12)
    line = wait_until(lambda: line_with(lister, sid, "omem"), timeout=5,
                      msg="omem > 0 for a client that does not read")
    assert int(line["tot-mem"]) >= int(line["omem"])
    assert "w" in line["events"] or TARGET == "redis"
    # Client buffers count in INFO memory (Redis updates the figure in its cron).
    wait_until(lambda: r.info("memory")["mem_clients_normal"] > 1_000_000, timeout=3,
               msg="mem_clients_normal to include the unsent output")
    slow.close()
    partial.close()
    lister.close()
    r.delete("omem:big")


def test_client_list_id_and_type_filters(server):
    r = server.raw()
    a, b, sub = server.raw(), server.raw(), server.raw()
    ida, idb, idsub = client_id(a), client_id(b), client_id(sub)
    sub.send(encode_command("SUBSCRIBE", "ch"))
    sub.read_resp()
    assert [l["id"] for l in client_lines(r, "ID", str(idb), str(ida))] == [str(idb), str(ida)]
    assert client_lines(r, "ID", "999999999") == []
    assert len(client_lines(r, "ID", str(ida), "999999999")) == 1
    assert r.err("CLIENT", "LIST", "ID", "abc") == "ERR Invalid client ID"
    normal = {l["id"] for l in client_lines(r, "TYPE", "normal")}
    assert {str(ida), str(idb)} <= normal and str(idsub) not in normal
    assert {l["id"] for l in client_lines(r, "TYPE", "PUBSUB")} == {str(idsub)}
    assert client_lines(r, "TYPE", "master") == []
    assert client_lines(r, "TYPE", "replica") == []
    assert client_lines(r, "TYPE", "slave") == []
    assert r.err("CLIENT", "LIST", "TYPE", "bogus") == "ERR Unknown client type 'bogus'"
    assert r.err("CLIENT", "LIST", "TYPE") == "ERR syntax error"
    for c in (a, b, sub, r):
        c.close()


# --- commandstats, errorstats, RESETSTAT ------------------------------------------------

def commandstats(raw) -> dict[str, dict[str, float]]:
    out = {}
    for name, value in info_sections(raw, "commandstats")["Commandstats"].items():
        out[name] = {k: float(v) for k, v in (kv.split("=") for kv in value.split(","))}
    return out


def errorstats(raw) -> dict[str, int]:
    return {name: int(value.split("=")[1])
            for name, value in info_sections(raw, "errorstats")["Errorstats"].items()}


def test_failed_and_rejected_calls(server_factory):
    srv = server_factory()
    c = srv.raw()
    c.request(encode_command("CONFIG", "RESETSTAT"), b"+OK\r\n")
    c.request(encode_command("SET", "k", "v"), b"+OK\r\n")
    assert c.err("INCR", "k") == "ERR value is not an integer or out of range"   # failed
    assert c.err("GET").startswith("ERR wrong number of arguments")                # rejected
    assert c.err("HGET", "k", "f").startswith("WRONGTYPE")                          # failed
    assert c.err("NOSUCHCOMMAND", "x").startswith("ERR unknown command")            # errorstats only
    # Inside a transaction each queued command counts as if it ran alone.
    c.request(encode_command("MULTI"), b"+OK\r\n")
    c.request(encode_command("INCR", "k"), b"+QUEUED\r\n")
    c.request(encode_command("EXEC"), b"*1\r\n-ERR value is not an integer or out of range\r\n")
    stats = commandstats(c)
    assert stats["cmdstat_set"] == {**stats["cmdstat_set"], "calls": 1, "failed_calls": 0, "rejected_calls": 0}
    assert (stats["cmdstat_incr"]["calls"], stats["cmdstat_incr"]["failed_calls"]) == (2, 2)
    assert (stats["cmdstat_get"]["calls"], stats["cmdstat_get"]["rejected_calls"]) == (0, 1)
    assert stats["cmdstat_hget"]["failed_calls"] == 1
    assert stats["cmdstat_exec"]["failed_calls"] == 0
    assert not any("nosuchcommand" in name for name in stats)
    errors = errorstats(c)
    assert errors == {"errorstat_ERR": 4, "errorstat_WRONGTYPE": 1}, errors
    assert int(info_sections(c, "stats")["Stats"]["total_error_replies"]) == 5


@pytest.mark.cairn_only
def test_memcached_requests_in_commandstats(server_factory):
    """memcached requests count as the RESP command they map onto (memcached-only verbs under
    their own names); CLIENT_ERROR / SERVER_ERROR replies are failed calls, NOT_STORED is not."""
    srv = server_factory()
    c, mc = srv.raw(), srv.mc_raw()
    mc.request(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n")
    mc.request(b"add k 0 0 1\r\nw\r\n", b"NOT_STORED\r\n")
    mc.request(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")
    mc.request(b"gets nope nada\r\n", b"END\r\n")
    mc.request(b"incr k 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
    mc.request(b"prepend k 0 0 1\r\nu\r\n", b"STORED\r\n")
    mc.request(b"mn\r\n", b"MN\r\n")
    mc.request(b"delete k\r\n", b"DELETED\r\n")
    mc.request(b"delete k\r\n", b"NOT_FOUND\r\n")
    mc.request(b"bogus\r\n", b"ERROR\r\n")  # unknown: errorstats only
    stats = commandstats(c)
    calls = {name: (s["calls"], s["failed_calls"]) for name, s in stats.items()}
    assert calls["cmdstat_set"] == (2, 0)
    assert calls["cmdstat_mget"] == (2, 0)
    assert calls["cmdstat_incrby"] == (1, 1)
    assert calls["cmdstat_prepend"] == (1, 0)
    assert calls["cmdstat_mn"] == (1, 0)
    assert calls["cmdstat_del"] == (2, 0)
    assert errorstats(c) == {"errorstat_CLIENT_ERROR": 1, "errorstat_ERROR": 1}
    # a memcached-only entry is not a RESP command
    assert c.err("PREPEND", "k", "x").startswith("ERR unknown command")


def test_noauth_counts_as_rejected(server_factory):
    srv = server_factory("--requirepass", "pw")
    c = srv.raw()
    assert c.err("GET", "k") == "NOAUTH Authentication required."
    c.request(encode_command("AUTH", "pw"), b"+OK\r\n")
    assert commandstats(c)["cmdstat_get"]["rejected_calls"] == 1
    assert errorstats(c)["errorstat_NOAUTH"] == 1


def test_config_resetstat_resets_every_counter(server_factory):
    srv = server_factory()
    c = srv.raw()
    for _ in range(3):
        with srv.raw() as other:
            other.request(b"PING\r\n", b"+PONG\r\n")
    c.request(encode_command("SET", "k", "v"), b"+OK\r\n")
    c.request(encode_command("GET", "k"), b"$1\r\nv\r\n")
    c.request(encode_command("GET", "missing"), b"$-1\r\n")
    c.err("INCR", "k")
    c.err("GET")
    before = info_sections(c, "stats")["Stats"]
    assert int(before["keyspace_hits"]) > 0 and int(before["total_error_replies"]) > 0
    c.request(encode_command("CONFIG", "RESETSTAT"), b"+OK\r\n")
    sections = info_sections(c, "everything")
    stats = sections["Stats"]
    for name in ("total_connections_received", "keyspace_hits", "keyspace_misses",
                 "total_error_replies", "rejected_connections", "expired_keys", "evicted_keys"):
        assert stats[name] == "0", (name, stats[name])
    assert int(stats["total_commands_processed"]) <= 2
    assert int(stats["total_reads_processed"]) <= 3
    assert int(stats["total_net_input_bytes"]) < int(before["total_net_input_bytes"])
    # Only CONFIG itself ran since the reset (INFO is counted once it has answered).
    # (Redis names it `cmdstat_config|resetstat`: it counts subcommands apart.)
    names = list(sections["Commandstats"])
    assert len(names) == 1 and names[0].startswith("cmdstat_config"), names
    assert sections["Errorstats"] == {}
    assert client_fields(decode_resp(c.command("CLIENT", "INFO")).decode().strip())["id"]
