"""One command path (issue 12): every command, whatever its protocol and whether EXEC runs it,
goes through the same checks and statistics. These are the user-visible effects that once
differed between the RESP, EXEC and memcached paths."""

from __future__ import annotations

import pytest

from conftest import encode_command
from test_info import commandstats, errorstats, info_sections


def client_line(c, conn) -> str:
    """The CLIENT LIST line of the connection `conn` (matched by its own address: the readiness
    probe's connection to the same listener may not be reaped yet)."""
    text = c.command("CLIENT", "LIST").decode()
    port = conn.sock.getsockname()[1]
    lines = [ln for ln in text.splitlines() if f" addr=127.0.0.1:{port} " in ln]
    assert len(lines) == 1, text
    return lines[0]


def field(line: str, name: str) -> str:
    return dict(kv.split("=", 1) for kv in line.split(" ") if "=" in kv)[name]


def test_refusals_in_multi_and_subscribed_mode_are_rejected_calls(server_factory):
    """A command refused before it runs (wrong arity inside MULTI, a RESP2 subscriber's GET)
    is a rejected call and an error, never a call; the refusal inside MULTI dooms EXEC."""
    srv = server_factory()
    c, sub = srv.raw(), srv.raw()
    c.request(encode_command("CONFIG", "RESETSTAT"), b"+OK\r\n")
    c.request(encode_command("MULTI"), b"+OK\r\n")
    c.request(encode_command("SET", "k", "v"), b"+QUEUED\r\n")
    assert c.err("GET").startswith("ERR wrong number of arguments")
    assert c.err("EXEC").startswith("EXECABORT")
    sub.send(encode_command("SUBSCRIBE", "ch"))
    sub.read_resp()
    assert sub.err("GET", "k").startswith("ERR Can't execute 'get'")
    sub.request(encode_command("PING"), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
    stats = commandstats(c)
    get = stats["cmdstat_get"]
    assert (get["calls"], get["failed_calls"], get["rejected_calls"]) == (0, 0, 2)
    # the queued SET never ran
    assert "cmdstat_set" not in stats
    assert errorstats(c) == {"errorstat_ERR": 2, "errorstat_EXECABORT": 1}


def test_last_command_after_a_pipelined_batch_and_exec(server_factory):
    """CLIENT LIST `cmd=` names the last command a client ran, even when it came in one batch
    with others; after a transaction it is EXEC (the queued commands are EXEC's)."""
    srv = server_factory()
    c, watcher = srv.raw(), srv.raw()
    c.send(encode_command("SET", "a", "1") + encode_command("GET", "a") + encode_command("PING"))
    c.expect(b"+OK\r\n$1\r\n1\r\n+PONG\r\n")
    assert field(client_line(watcher, c), "cmd") == "ping"
    c.send(encode_command("MULTI") + encode_command("GET", "a") + encode_command("EXEC"))
    c.expect(b"+OK\r\n+QUEUED\r\n*1\r\n$1\r\n1\r\n")
    assert field(client_line(watcher, c), "cmd") == "exec"


@pytest.mark.cairn_only
def test_deferred_command_refused_in_multi_is_rejected(server_factory):
    srv = server_factory()
    c = srv.raw()
    c.request(encode_command("CONFIG", "RESETSTAT"), b"+OK\r\n")
    c.request(encode_command("MULTI"), b"+OK\r\n")
    assert c.err("SQL.TABLES") == "ERR 'sql.tables' cannot run inside MULTI"
    assert c.err("EXEC").startswith("EXECABORT")
    tables = commandstats(c)["cmdstat_sql.tables"]
    assert (tables["calls"], tables["rejected_calls"]) == (0, 1)


@pytest.mark.cairn_only
def test_memcached_requests_on_the_command_path(server_factory):
    """A memcached request is one call of its mapped entry (a multi-key `get` too), counted
    once in total_commands_processed, and CLIENT LIST shows it under the mapped name."""
    srv = server_factory()
    c, mc = srv.raw(), srv.mc_raw()
    c.request(encode_command("CONFIG", "RESETSTAT"), b"+OK\r\n")
    before = int(info_sections(c, "stats")["Stats"]["total_commands_processed"])
    mc.request(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n")
    mc.request(b"get k nope other\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")
    assert field(client_line(c, mc), "cmd") == "mget"
    mc.request(b"touch k 10\r\n", b"TOUCHED\r\n")
    assert field(client_line(c, mc), "cmd") == "expire"
    mc.request(b"mn\r\n", b"MN\r\n")
    assert field(client_line(c, mc), "cmd") == "mn"
    after = int(info_sections(c, "stats")["Stats"]["total_commands_processed"])
    # 4 memcached requests, plus this connection's INFO and 3 CLIENT LISTs
    assert after - before == 4 + 4
    stats = commandstats(c)
    assert {n: stats[f"cmdstat_{n}"]["calls"] for n in ("set", "mget", "expire", "mn")} == {
        "set": 1, "mget": 1, "expire": 1, "mn": 1}
