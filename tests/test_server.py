"""Connection and server commands (RESP): HELLO, AUTH, QUIT, INFO, CONFIG,
CLIENT, COMMAND, TIME, errors, redis-cli and inline commands.
Validated against redis-server 7 with CAIRN_TARGET=redis."""

import shutil
import socket
import subprocess
import time

import pytest
import redis

from conftest import HOST, decode_resp, encode_command, wait_until

pytestmark = pytest.mark.redis_only

HELLO_KEYS = {b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"}
NOAUTH = b"-NOAUTH Authentication required.\r\n"
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"


def arity(cmd):
    return f"ERR wrong number of arguments for '{cmd}' command"


# --- HELLO / RESP3 -----------------------------------------------------------

def test_hello_2(raw):
    reply = raw.command("HELLO", "2")
    assert reply.startswith(b"*")
    flat = decode_resp(reply)
    assert len(flat) % 2 == 0
    hello = dict(zip(flat[::2], flat[1::2]))
    assert HELLO_KEYS <= set(hello)
    assert hello[b"proto"] == 2
    assert isinstance(hello[b"id"], int)
    assert hello[b"modules"] == []
    # still RESP2 afterwards
    raw.request(encode_command("GET", "missing"), b"$-1\r\n")


def test_hello_3_switches_to_resp3(r, raw):
    r.hset("h", "f", "v")
    reply = raw.command("HELLO", "3")
    assert reply.startswith(b"%")
    hello = decode_resp(reply)
    assert HELLO_KEYS <= set(hello)
    assert hello[b"proto"] == 3
    id_reply = decode_resp(raw.command("CLIENT", "ID"))
    assert hello[b"id"] == id_reply
    # RESP3 types: null, map, integer
    raw.request(encode_command("GET", "missing"), b"_\r\n")
    raw.request(encode_command("HGETALL", "h"), b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n")
    raw.request(encode_command("HGETALL", "nohash"), b"%0\r\n")
    raw.request(encode_command("EXISTS", "h"), b":1\r\n")
    raw.request(encode_command("HMGET", "h", "f", "zz"), b"*2\r\n$1\r\nv\r\n_\r\n")
    cfg = raw.command("CONFIG", "GET", "maxmemory")
    assert cfg.startswith(b"%1\r\n$9\r\nmaxmemory\r\n")
    # and back to RESP2
    assert raw.command("HELLO", "2").startswith(b"*")
    raw.request(encode_command("GET", "missing"), b"$-1\r\n")
    raw.request(encode_command("HGETALL", "h"), b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n")


def test_hello_without_version_and_errors(raw):
    hello = decode_resp(raw.command("HELLO"))
    flat = dict(zip(hello[::2], hello[1::2]))
    assert flat[b"proto"] == 2
    assert raw.err("HELLO", "4") == "NOPROTO unsupported protocol version"
    assert raw.err("HELLO", "1") == "NOPROTO unsupported protocol version"
    assert raw.err("HELLO", "abc") == "ERR Protocol version is not an integer or out of range"


def test_hello_setname(raw):
    hello = decode_resp(raw.command("HELLO", "3", "SETNAME", "myname"))
    assert hello[b"proto"] == 3
    raw.request(encode_command("CLIENT", "GETNAME"), b"$6\r\nmyname\r\n")


def test_resp3_client(r3):
    assert r3.ping() is True
    assert r3.get("missing") is None
    r3.hset("h", mapping={"a": "1", "b": "2"})
    assert r3.hgetall("h") == {b"a": b"1", b"b": b"2"}
    assert r3.set("k", "v") is True
    assert r3.get("k") == b"v"
    assert r3.incr("n") == 1
    assert r3.ttl("k") == -1
    assert r3.incrbyfloat("f", 1.5) == 1.5
    assert r3.exists("k", "h") == 2
    p = r3.pipeline(transaction=True)
    p.set("a", "1").get("a").hgetall("h")
    assert p.execute() == [True, b"1", {b"a": b"1", b"b": b"2"}]


# --- AUTH / requirepass ------------------------------------------------------

def test_auth_without_password_configured(raw):
    assert raw.err("AUTH", "foo") == (
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?")


def test_requirepass(server_factory):
    srv = server_factory("--requirepass", "s3cret")
    c = srv.raw()
    for cmd in (["PING"], ["GET", "a"], ["SET", "a", "b"], ["CLIENT", "ID"], ["INFO"]):
        c.request(encode_command(*cmd), NOAUTH)
    assert c.err("HELLO", "3").startswith("NOAUTH HELLO must be called with the client already authenticated")
    c.request(encode_command("AUTH", "wrong"), WRONGPASS)
    c.request(encode_command("AUTH", "default", "wrong"), WRONGPASS)
    c.request(encode_command("GET", "a"), NOAUTH)
    c.request(encode_command("AUTH", "s3cret"), b"+OK\r\n")
    c.request(encode_command("SET", "a", "b"), b"+OK\r\n")
    c.request(encode_command("GET", "a"), b"$1\r\nb\r\n")
    c.close()
    # user + password form
    c = srv.raw()
    c.request(encode_command("AUTH", "default", "s3cret"), b"+OK\r\n")
    c.request(encode_command("GET", "a"), b"$1\r\nb\r\n")
    c.close()
    # HELLO ... AUTH
    c = srv.raw()
    c.request(encode_command("HELLO", "3", "AUTH", "default", "wrong"), WRONGPASS)
    c.request(encode_command("GET", "a"), NOAUTH)
    hello = decode_resp(c.command("HELLO", "3", "AUTH", "default", "s3cret"))
    assert hello[b"proto"] == 3
    c.request(encode_command("GET", "a"), b"$1\r\nb\r\n")
    c.close()
    # inline commands are checked too
    c = srv.raw()
    c.request(b"GET a\r\n", NOAUTH)
    c.close()
    # redis-py
    with pytest.raises(redis.AuthenticationError):
        srv.client().ping()
    with pytest.raises(redis.AuthenticationError):
        srv.client(password="nope").ping()
    assert srv.client(password="s3cret").get("a") == b"b"
    assert srv.client(password="s3cret", protocol=3).get("a") == b"b"


def test_auth_arity(server_factory):
    srv = server_factory("--requirepass", "pw")
    c = srv.raw()
    assert c.err("AUTH") == arity("auth")
    assert c.err("AUTH", "a", "b", "c") == "ERR syntax error"


# --- QUIT --------------------------------------------------------------------

def test_quit(r, raw):
    raw.send(encode_command("QUIT") + encode_command("SET", "after-quit", "1"))
    raw.expect(b"+OK\r\n")
    assert raw.is_closed(timeout=2)
    assert r.exists("after-quit") == 0


def test_quit_inline(server):
    with server.raw() as c:
        c.request(b"QUIT\r\n", b"+OK\r\n")
        assert c.is_closed(timeout=2)


# --- INFO ----------------------------------------------------------------------

def test_info_sections(r, raw):
    text = decode_resp(raw.command("INFO")).decode()
    # redis-py parses INFO; make sure raw text has the section headers
    for section in ("# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"):
        assert section in text, section
    assert all(line == "" or line.startswith("#") or ":" in line for line in text.split("\r\n"))
    info = r.info()
    for field in ("keyspace_hits", "keyspace_misses", "evicted_keys", "expired_keys",
                  "connected_clients", "used_memory", "used_memory_rss"):
        assert isinstance(info[field], int), field
    assert info["used_memory"] > 0
    assert info["used_memory_rss"] > 0
    assert info["connected_clients"] >= 1


def test_info_single_section(r, raw):
    stats = decode_resp(raw.command("INFO", "stats")).decode()
    assert "# Stats" in stats
    assert "# Server" not in stats and "# Memory" not in stats
    assert "keyspace_hits:" in stats
    mem = r.info("memory")
    assert "used_memory" in mem and "keyspace_hits" not in mem
    clients = r.info("clients")
    assert "connected_clients" in clients


def test_info_keyspace(r, raw):
    assert "db0" not in r.info("keyspace")
    r.set("a", "1")
    r.set("b", "1", ex=100)
    r.hset("h", "f", "v")
    db0 = r.info("keyspace")["db0"]
    assert db0["keys"] == 3
    assert db0["expires"] == 1
    assert "db0:keys=3,expires=1" in decode_resp(raw.command("INFO", "keyspace")).decode()


def test_info_hits_misses(r):
    r.set("k", "v")
    before = r.info("stats")
    for _ in range(3):
        r.get("k")
    for _ in range(2):
        r.get("missing")
    after = r.info("stats")
    assert after["keyspace_hits"] - before["keyspace_hits"] == 3
    assert after["keyspace_misses"] - before["keyspace_misses"] == 2


def test_info_connected_clients(server, r):
    base = r.info("clients")["connected_clients"]
    conns = [server.raw() for _ in range(3)]
    for c in conns:
        c.request(b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n")
    assert r.info("clients")["connected_clients"] == base + 3
    for c in conns:
        c.close()
    wait_until(lambda: r.info("clients")["connected_clients"] == base, timeout=3, msg="clients to go away")


def test_info_expired_keys(r):
    before = r.info("stats")["expired_keys"]
    r.set("e", "v", px=20)
    time.sleep(0.1)
    assert r.get("e") is None
    # The counter counts removals: a read only hides the key, the expiry cycle removes it.
    deadline = time.time() + 5
    while r.info("stats")["expired_keys"] < before + 1 and time.time() < deadline:
        time.sleep(0.05)
    assert r.info("stats")["expired_keys"] >= before + 1


# --- CONFIG ----------------------------------------------------------------

def test_config_get_set_maxmemory(r, raw):
    reply = decode_resp(raw.command("CONFIG", "GET", "maxmemory"))
    assert len(reply) == 2 and reply[0] == b"maxmemory"
    original = reply[1]
    assert original.isdigit()
    try:
        raw.request(encode_command("CONFIG", "SET", "maxmemory", "104857600"), b"+OK\r\n")
        assert decode_resp(raw.command("CONFIG", "GET", "maxmemory")) == [b"maxmemory", b"104857600"]
        raw.request(encode_command("CONFIG", "SET", "maxmemory", "200mb"), b"+OK\r\n")
        assert r.config_get("maxmemory") == {"maxmemory": "209715200"}
        assert raw.err("CONFIG", "SET", "maxmemory", "lots").startswith("ERR ")
        assert r.config_get("maxmemory") == {"maxmemory": "209715200"}
    finally:
        raw.request(encode_command("CONFIG", "SET", "maxmemory", original), b"+OK\r\n")
    assert r.config_get("maxmemory") == {"maxmemory": original.decode()}
    raw.request(encode_command("CONFIG", "GET", "no-such-parameter"), b"*0\r\n")
    assert raw.err("CONFIG", "GET") == arity("config|get")
    assert raw.err("CONFIG", "SET", "maxmemory") == arity("config|set")


# --- CLIENT -------------------------------------------------------------------

def test_client_id_setname_getname(server, raw):
    a = decode_resp(raw.command("CLIENT", "ID"))
    with server.raw() as other:
        b = decode_resp(other.command("CLIENT", "ID"))
    assert isinstance(a, int) and isinstance(b, int) and a != b and b > a
    raw.request(encode_command("CLIENT", "GETNAME"), b"$-1\r\n")
    raw.request(encode_command("CLIENT", "SETNAME", "worker-1"), b"+OK\r\n")
    raw.request(encode_command("CLIENT", "GETNAME"), b"$8\r\nworker-1\r\n")
    assert raw.err("CLIENT", "SETNAME", "has space") == \
        "ERR Client names cannot contain spaces, newlines or special characters."
    raw.request(encode_command("CLIENT", "GETNAME"), b"$8\r\nworker-1\r\n")
    # an empty name clears it
    raw.request(encode_command("CLIENT", "SETNAME", ""), b"+OK\r\n")
    raw.request(encode_command("CLIENT", "GETNAME"), b"$-1\r\n")


def _client_lines(text: bytes):
    out = {}
    for line in text.decode().strip().split("\n"):
        fields = dict(f.split("=", 1) for f in line.strip().split(" ") if "=" in f)
        out[int(fields["id"])] = fields
    return out


def test_client_list_and_info(server, r, raw):
    my_id = decode_resp(raw.command("CLIENT", "ID"))
    raw.request(encode_command("CLIENT", "SETNAME", "lister"), b"+OK\r\n")
    listing = _client_lines(decode_resp(raw.command("CLIENT", "LIST")))
    assert my_id in listing
    me = listing[my_id]
    assert me["name"] == "lister"
    local = raw.sock.getsockname()
    assert me["addr"] == f"{local[0]}:{local[1]}"
    assert r.client_id() in listing
    info = decode_resp(raw.command("CLIENT", "INFO"))
    assert info.count(b"\n") == 1 and info.endswith(b"\n")
    fields = _client_lines(info)
    assert list(fields) == [my_id]
    assert fields[my_id]["name"] == "lister"
    # redis-py helpers
    assert any(c["name"] == "lister" for c in r.client_list())
    assert r.client_info()["id"] == r.client_id()


def test_client_kill_by_id(server, r, raw):
    victim = server.raw()
    victim_id = decode_resp(victim.command("CLIENT", "ID"))
    raw.request(encode_command("CLIENT", "KILL", "ID", str(victim_id)), b":1\r\n")
    assert victim.is_closed(timeout=3)
    victim.close()
    wait_until(lambda: str(victim_id) not in [c["id"] for c in r.client_list()],
               timeout=3, msg="killed client to leave CLIENT LIST")
    # the filter form replies with the number of killed clients
    raw.request(encode_command("CLIENT", "KILL", "ID", str(victim_id)), b":0\r\n")
    assert raw.err("CLIENT", "KILL", "ID", "abc").startswith("ERR ")
    # the killer is unaffected
    raw.request(encode_command("PING"), b"+PONG\r\n")
    # redis-py's helper
    other = server.client()
    try:
        assert r.client_kill_filter(_id=other.client_id()) == 1
    finally:
        other.close()


def test_client_unknown_subcommand(raw):
    assert raw.err("CLIENT", "NOSUCH").startswith("ERR unknown subcommand 'NOSUCH'")


# --- COMMAND --------------------------------------------------------------------

def test_command_count_info_docs(r, raw):
    count = decode_resp(raw.command("COMMAND", "COUNT"))
    assert isinstance(count, int) and count >= 40
    info = decode_resp(raw.command("COMMAND", "INFO", "get", "set", "hset", "nosuchcmd"))
    get, set_, hset, missing = info
    assert get[0] == b"get" and get[1] == 2
    assert b"readonly" in get[2]
    assert get[3:6] == [1, 1, 1]
    assert set_[0] == b"set" and set_[1] == -3 and b"write" in set_[2]
    assert hset[0] == b"hset" and hset[1] == -4
    assert missing is None
    # COMMAND (all) as redis-py parses it
    table = r.command()
    assert len(table) == count
    for name, ar in [("get", 2), ("set", -3), ("mget", -2), ("del", -2), ("hgetall", 2), ("expire", -3),
                     ("incr", 2), ("multi", 1), ("exec", 1), ("ping", -1), ("scan", -2)]:
        assert table[name]["arity"] == ar, name
    docs = decode_resp(raw.command("COMMAND", "DOCS", "get"))
    assert docs[0] == b"get"
    doc = dict(zip(docs[1][::2], docs[1][1::2]))
    assert b"summary" in doc and doc[b"summary"]
    assert b"since" in doc and b"group" in doc


# --- TIME ----------------------------------------------------------------------

def test_time(r, raw):
    secs, usecs = r.time()
    assert abs(secs + usecs / 1e6 - time.time()) < 2
    assert 0 <= usecs < 1_000_000
    reply = decode_resp(raw.command("TIME"))
    assert len(reply) == 2 and all(x.isdigit() for x in reply)


# --- errors ----------------------------------------------------------------------

def test_unknown_command(raw):
    raw.request(encode_command("foo", "a", "b"),
                b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n")
    raw.request(encode_command("FOO"), b"-ERR unknown command 'FOO', with args beginning with: \r\n")
    raw.request(b"foo bar\r\n", b"-ERR unknown command 'foo', with args beginning with: 'bar' \r\n")
    # the connection keeps working
    raw.request(encode_command("PING"), b"+PONG\r\n")


@pytest.mark.parametrize(
    "cmd",
    [["get"], ["set", "k"], ["mset", "k"], ["del"], ["incr"], ["incrby", "k"], ["expire", "k"], ["ttl"],
     ["hset", "h", "f"], ["hget", "h"], ["hgetall"], ["getrange", "k", "0"], ["exists"], ["echo"],
     ["setex", "k", "1"], ["type"], ["dbsize", "x"], ["multi", "x"], ["watch"]],
)
def test_wrong_arity(raw, cmd):
    assert raw.err(*cmd) == arity(cmd[0])
    # case of the name in the error follows Redis: lower case
    upper = [cmd[0].upper()] + cmd[1:]
    assert raw.err(*upper) == arity(cmd[0])


# --- redis-cli -------------------------------------------------------------------

def cli(server, *args, input=None):
    exe = shutil.which("redis-cli")
    if not exe:
        pytest.skip("redis-cli not installed")
    p = subprocess.run([exe, "-h", HOST, "-p", str(server.port), *args], input=input,
                       capture_output=True, timeout=30)
    return p


def test_redis_cli(server, r):
    p = cli(server, "set", "a", "b")
    assert p.returncode == 0 and p.stdout == b"OK\n", p
    assert cli(server, "get", "a").stdout == b"b\n"
    assert cli(server, "--raw", "get", "a").stdout == b"b\n"
    assert cli(server, "--no-raw", "get", "a").stdout == b'"b"\n'
    assert cli(server, "--no-raw", "get", "missing").stdout == b"(nil)\n"
    assert cli(server, "--no-raw", "incr", "n").stdout == b"(integer) 1\n"
    assert cli(server, "--no-raw", "hgetall", "nohash").stdout == b"(empty array)\n"
    assert cli(server, "--no-raw", "ping").stdout == b"PONG\n"
    r.hset("h", "f", "v")
    assert cli(server, "--raw", "hgetall", "h").stdout == b"f\nv\n"
    err = cli(server, "--no-raw", "get")
    assert b"ERR wrong number of arguments for 'get' command" in err.stdout + err.stderr
    assert cli(server, "dbsize").stdout == b"3\n"


def test_redis_cli_pipe(server, r):
    n = 2000
    payload = b"".join(encode_command("SET", f"pipe:{i}", f"v{i}") for i in range(n))
    payload += encode_command("INCR", "pipe:counter")
    p = cli(server, "--pipe", input=payload)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    assert f"errors: 0, replies: {n + 1}" in out, out
    assert r.dbsize() == n + 1
    assert r.get("pipe:1999") == b"v1999"


def test_redis_cli_pipe_reports_errors(server, r):
    r.hset("h", "f", "v")
    payload = encode_command("SET", "a", "1") + encode_command("INCR", "h")
    p = cli(server, "--pipe", input=payload)
    out = p.stdout.decode()
    assert "errors: 1, replies: 2" in out, out


# --- inline commands ---------------------------------------------------------------

def test_inline_commands(r, raw):
    raw.request(b"SET a b\r\n", b"+OK\r\n")
    raw.request(b"GET a\r\n", b"$1\r\nb\r\n")
    raw.request(b"PING\r\n", b"+PONG\r\n")
    raw.request(b"set   spaced    value  \r\n", b"+OK\r\n")
    assert r.get("spaced") == b"value"
    raw.request(b"EXISTS a spaced nope\n", b":2\r\n")  # bare LF works too
    raw.request(b"\r\n" b"PING\r\n", b"+PONG\r\n")  # empty lines are ignored


def test_inline_quoted_arguments(server, r, raw):
    raw.request(b'SET "my key" "hello world"\r\n', b"+OK\r\n")
    assert r.get("my key") == b"hello world"
    # a closing quote must be followed by a space
    raw.request(b"SET 'single q' 'it''s'\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n")
    assert raw.is_closed(timeout=2)
    with server.raw() as c:
        c.request(b"SET 'single q' 'a \"b\"'\r\n", b"+OK\r\n")
        c.request(b'SET esc "tab\\there\\x41\\n"\r\n', b"+OK\r\n")
        c.request(b'SET empty ""\r\n', b"+OK\r\n")
        c.request(b"GET empty\r\n", b"$0\r\n\r\n")
    assert r.get("single q") == b'a "b"'
    assert r.get("esc") == b"tab\there" + b"A\n"


def test_inline_unbalanced_quotes(server):
    with server.raw() as c:
        c.request(b'SET "a b\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n")
        assert c.is_closed(timeout=2)
    # the server is fine
    with server.raw() as c:
        c.request(b"PING\r\n", b"+PONG\r\n")


def test_mixed_inline_and_multibulk(raw):
    raw.send(b"SET a 1\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\nGET a\r\n")
    raw.expect(b"+OK\r\n:2\r\n$1\r\n2\r\n")


def test_many_connections_sequential(server):
    for _ in range(50):
        with server.raw() as c:
            c.request(b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n")


def test_client_disconnect_mid_command(server, r):
    s = socket.create_connection((HOST, server.port))
    s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nz\r\n$10\r\nabc")
    s.close()
    assert r.ping() is True
    assert r.exists("z") == 0
