"""Configuration as one table (issue 12): CONFIG SET of several parameters is all or nothing
with Redis's errors, CONFIG GET shows every setting, CONFIG REWRITE writes the --config file
back (comments kept) and a restart reads it, unknown file keys are refused, and memcached's
`stats settings` shows the same values as CONFIG GET."""

from __future__ import annotations

import os

import pytest

from conftest import HOST, decode_resp, encode_command

pytestmark = pytest.mark.redis_only


def _get(c, pattern):
    reply = decode_resp(c.command("CONFIG", "GET", pattern))
    if isinstance(reply, dict):
        return {k.decode(): v.decode() for k, v in reply.items()}
    return {reply[i].decode(): reply[i + 1].decode() for i in range(0, len(reply), 2)}


def _failed(name, why=""):
    return f"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"


def test_config_set_several_parameters_is_all_or_nothing(server_factory):
    srv = server_factory()
    c = srv.raw()
    before = _get(c, "maxclients")
    # The second value is bad: the first is not applied either.
    assert c.err("CONFIG", "SET", "maxclients", "50", "maxmemory", "lots").startswith(
        _failed("maxmemory"))
    assert c.err("CONFIG", "SET", "maxclients", "50", "nosuch", "1") == \
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    assert c.err("CONFIG", "SET", "maxclients", "50", "maxclients", "60") == \
        _failed("maxclients", "duplicate parameter")
    assert c.err("CONFIG", "SET", "maxclients", "50", "databases", "1") == \
        _failed("databases", "can't set immutable config")
    assert c.err("CONFIG", "SET", "maxclients", "50", "maxmemory") == "ERR syntax error"
    assert _get(c, "maxclients") == before
    c.request(encode_command("CONFIG", "SET", "maxclients", "50", "slowlog-max-len", "7"), b"+OK\r\n")
    assert _get(c, "maxclients") == {"maxclients": "50"}
    assert _get(c, "slowlog-max-len") == {"slowlog-max-len": "7"}


def test_config_get_shows_redis_and_new_settings(server_factory):
    srv = server_factory()
    c = srv.raw()
    got = _get(c, "slowlog-*")
    assert got == {"slowlog-log-slower-than": "10000", "slowlog-max-len": "128"}
    assert _get(c, "latency-monitor-threshold") == {"latency-monitor-threshold": "0"}
    assert _get(c, "databases") == {"databases": "1"}
    assert c.err("CONFIG", "SET", "slowlog-log-slower-than", "-5") == _failed(
        "slowlog-log-slower-than", "argument must be between -1 and 9223372036854775807 inclusive")
    assert c.err("CONFIG", "SET", "latency-monitor-threshold", "x") == _failed(
        "latency-monitor-threshold", "argument couldn't be parsed into an integer")
    # Redis clients switch persistence off this way.
    c.request(encode_command("CONFIG", "SET", "save", "", "appendonly", "no"), b"+OK\r\n")


@pytest.mark.cairn_only
def test_config_get_star_lists_every_setting(server_factory):
    srv = server_factory("--sql-timeout", "250ms")
    c = srv.raw()
    everything = _get(c, "*")
    for name in ("bind", "port", "maxmemory", "maxmemory-policy", "maxclients", "requirepass",
                 "sql-timeout", "sql-max-result", "sql-maxmemory", "tracking-table-max-keys",
                 "max-tags-per-record", "io-model", "threads", "loglevel", "save", "appendonly"):
        assert name in everything, name
    assert everything["sql-timeout"] == "250ms"
    assert everything["port"] == str(srv.port)
    assert c.err("CONFIG", "SET", "sql-timeout", "2s") == _failed(
        "sql-timeout", "can't set immutable config")


@pytest.mark.cairn_only
def test_default_threads_are_one_loop_per_two_available_cores(server_factory):
    # What the process may use (affinity), not the machine's CPU count; the tests' own mask is
    # the server's too.
    cores = len(os.sched_getaffinity(0))
    srv = server_factory()
    c = srv.raw()
    chosen = _get(c, "threads")["threads"]
    assert chosen == str(max(1, cores // 2))
    info = c.command("INFO", "server").decode()
    assert f"io_threads:{chosen}\r\n" in info
    # The event loops really are that many.
    loops = [t for t in os.listdir(f"/proc/{srv.proc.pid}/task")
             if open(f"/proc/{srv.proc.pid}/task/{t}/comm").read().startswith("cairn-io-")]
    assert len(loops) == int(chosen)
    # An explicit count is kept as given, even past the cores.
    srv = server_factory("--threads", "3")
    assert _get(srv.raw(), "threads")["threads"] == "3"


def test_config_rewrite_without_a_config_file(server_factory):
    srv = server_factory()
    c = srv.raw()
    assert c.err("CONFIG", "REWRITE") == "ERR The server is running without a config file"


@pytest.mark.cairn_only
def test_config_rewrite_round_trip(server_factory, tmp_path):
    cfg = tmp_path / "cairn.toml"
    cfg.write_text(
        "# my cache\n"
        "maxclients = 500   # will be rewritten\n"
        "\n"
        "# limits\n"
        'max_value_size = "1mb"\n'
    )
    srv = server_factory("--config", str(cfg))
    c = srv.raw()
    assert _get(c, "max-value-size") == {"max-value-size": str(1 << 20)}
    c.request(encode_command("CONFIG", "SET", "maxclients", "123", "slowlog-log-slower-than", "5",
                             "maxmemory-policy", "noeviction"), b"+OK\r\n")
    c.request(encode_command("CONFIG", "REWRITE"), b"+OK\r\n")
    text = cfg.read_text()
    lines = text.splitlines()
    # Comments and order kept; lines updated in place; new settings appended.
    assert lines[:5] == ["# my cache", "maxclients = 123", "", "# limits", "max_value_size = 1048576"]
    assert "# Generated by CONFIG REWRITE" in lines
    assert "slowlog-log-slower-than = 5" in lines
    assert 'maxmemory-policy = "noeviction"' in lines
    assert [p.name for p in tmp_path.iterdir()] == ["cairn.toml"]  # no temporary file left
    srv.stop()
    # A restart from the file (on new ports: the flags win over the ports written there).
    again = server_factory("--config", str(cfg))
    c2 = again.raw()
    assert _get(c2, "maxclients") == {"maxclients": "123"}
    assert _get(c2, "slowlog-log-slower-than") == {"slowlog-log-slower-than": "5"}
    assert _get(c2, "maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert _get(c2, "max-value-size") == {"max-value-size": str(1 << 20)}


@pytest.mark.cairn_only
def test_unknown_config_file_key_is_refused(server_factory, tmp_path):
    cfg = tmp_path / "cairn.toml"
    cfg.write_text('maxmemroy = "1gb"\n')
    srv = server_factory("--config", str(cfg), start=False)
    srv.start(wait=False)
    assert srv.proc.wait(5) != 0
    srv.stopped = True
    assert "unknown key 'maxmemroy'" in srv.log(), srv.log()


@pytest.mark.cairn_only
def test_stats_settings_agree_with_config_get(server_factory):
    srv = server_factory("--memcache-unixsocket", "", "--maxmemory", "64mb")
    c = srv.raw()
    c.request(encode_command("CONFIG", "SET", "maxclients", "321", "max-value-size", "2mb",
                             "maxmemory-policy", "noeviction"), b"+OK\r\n")
    config = _get(c, "*")
    with srv.mc_raw() as mc:
        mc.send(b"stats settings\r\n")
        text = mc.read_until(b"END\r\n").decode()
    stats = dict(line.split(" ", 2)[1:] for line in text.splitlines() if line.startswith("STAT "))
    assert stats["maxconns"] == config["maxclients"] == "321"
    assert stats["item_size_max"] == config["max-value-size"] == str(2 << 20)
    assert stats["maxbytes"] == config["maxmemory"] == str(64 << 20)
    assert stats["tcpport"] == config["memcache-port"] == str(srv.memcache_port)
    assert stats["inter"] == config["bind"] == HOST
    assert stats["evictions"] == "off"
    assert stats["domain_socket"] == "NULL"


def test_config_help(server_factory):
    srv = server_factory()
    c = srv.raw()
    lines = decode_resp(c.command("CONFIG", "HELP"))
    assert lines[0].startswith(b"CONFIG <subcommand>")
    assert b"REWRITE" in lines and b"GET <pattern>" in lines
    assert c.err("CONFIG", "HELP", "x") == "ERR wrong number of arguments for 'config|help' command"
