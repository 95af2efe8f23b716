"""CLIENT KILL filters, CLIENT REPLY, AUTH as Redis's `default` user and HELLO SETNAME.

Validated against redis-server 7 with CAIRN_TARGET=redis; cairn-only tests cover what the local
redis-server 7.0 lacks (CLIENT KILL MAXAGE is Redis 7.4), memcached connections and SQL.
"""

import time

import pytest
import redis

from conftest import HOST, decode_resp, encode_command, wait_until

pytestmark = pytest.mark.redis_only

WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NAME_ERR = "ERR Client names cannot contain spaces, newlines or special characters."


def cid(conn):
    return decode_resp(conn.command("CLIENT", "ID"))


def alive(conn):
    return conn.command("PING") == b"+PONG\r\n"


def mc_alive(mc):
    mc.send(b"version\r\n")
    return mc.read_line().startswith(b"VERSION ")


def connected(srv):
    """A raw connection the server has surely registered (one round trip done)."""
    c = srv.raw()
    assert alive(c)
    return c


def mc_connected(srv):
    c = srv.mc_raw()
    assert mc_alive(c)
    return c


def subscriber(srv, resp3=False):
    c = srv.raw()
    if resp3:
        c.command("HELLO", "3")
    c.send(encode_command("SUBSCRIBE", "news"))
    c.read_resp()
    return c


# --- CLIENT KILL ----------------------------------------------------------------

def test_client_kill_type_pubsub_kills_only_subscribers(server_factory):
    srv = server_factory()
    killer, normal = connected(srv), connected(srv)
    subs = [subscriber(srv), subscriber(srv, resp3=True)]
    mc = mc_connected(srv) if srv.has_memcache else None
    assert killer.command("CLIENT", "KILL", "TYPE", "pubsub") == b":2\r\n"
    for s in subs:
        assert s.is_closed(timeout=3)
    assert alive(killer) and alive(normal)
    if mc is not None:  # memcached connections are `normal` clients
        assert mc_alive(mc)
    # the other types: nobody is a master or replica here
    for kind in ("master", "replica", "slave", "MASTER"):
        assert killer.command("CLIENT", "KILL", "TYPE", kind) == b":0\r\n"
    assert alive(normal)


def test_client_kill_type_normal_spares_subscribers(server_factory):
    srv = server_factory()
    killer, normal = connected(srv), connected(srv)
    sub = subscriber(srv)
    expected = 2 if srv.has_memcache else 1
    mc = mc_connected(srv) if srv.has_memcache else None
    assert killer.command("CLIENT", "KILL", "TYPE", "normal") == b":%d\r\n" % expected
    assert normal.is_closed(timeout=3)
    if mc is not None:
        assert mc.is_closed(timeout=3)
    sub.send(encode_command("PING"))
    assert decode_resp(sub.read_resp()) == [b"pong", b""]
    assert alive(killer)


def test_client_kill_user_default_and_skipme(server_factory):
    srv = server_factory()
    killer = connected(srv)
    others = [connected(srv), connected(srv)]
    sub = subscriber(srv)
    # several filters are ANDed: this client is not a subscriber
    assert killer.command("CLIENT", "KILL", "ID", str(cid(others[0])), "TYPE", "pubsub") == b":0\r\n"
    assert alive(others[0])
    assert killer.command("CLIENT", "KILL", "USER", "default") == b":3\r\n"
    for c in others + [sub]:
        assert c.is_closed(timeout=3)
    assert alive(killer)
    # SKIPME no: the caller is killed too, after its reply
    assert killer.command("CLIENT", "KILL", "USER", "default", "SKIPME", "no") == b":1\r\n"
    assert killer.is_closed(timeout=3)


def test_client_kill_addr_laddr_and_old_form(server_factory):
    srv = server_factory()
    killer, a, b = connected(srv), connected(srv), connected(srv)
    a_addr = "%s:%d" % a.sock.getsockname()
    assert killer.command("CLIENT", "KILL", "ADDR", a_addr) == b":1\r\n"
    assert a.is_closed(timeout=3)
    assert alive(b)
    b_addr = "%s:%d" % b.sock.getsockname()
    assert killer.command("CLIENT", "KILL", b_addr) == b"+OK\r\n"
    assert b.is_closed(timeout=3)
    assert killer.err("CLIENT", "KILL", b_addr) == "ERR No such client"
    c = connected(srv)
    laddr = "%s:%d" % killer.sock.getpeername()
    assert killer.command("CLIENT", "KILL", "LADDR", laddr, "SKIPME", "yes") == b":1\r\n"
    assert c.is_closed(timeout=3)
    assert killer.command("CLIENT", "KILL", "LADDR", "1.2.3.4:1") == b":0\r\n"
    assert alive(killer)


def test_client_kill_errors(server_factory):
    srv = server_factory()
    killer, bystander = connected(srv), connected(srv)
    assert killer.err("CLIENT", "KILL", "TYPE", "x") == "ERR Unknown client type 'x'"
    assert killer.err("CLIENT", "KILL", "USER", "bob") == "ERR No such user 'bob'"
    assert killer.err("CLIENT", "KILL", "ID", "0") == "ERR client-id should be greater than 0"
    assert killer.err("CLIENT", "KILL", "ID", "abc") == "ERR client-id should be greater than 0"
    assert killer.err("CLIENT", "KILL", "SKIPME", "maybe") == "ERR syntax error"
    assert killer.err("CLIENT", "KILL", "ID", "1", "TYPE") == "ERR syntax error"
    assert killer.err("CLIENT", "KILL", "COLOR", "red") == "ERR syntax error"
    assert killer.err("CLIENT", "KILL") == "ERR wrong number of arguments for 'client|kill' command"
    # an error kills nobody
    assert alive(bystander) and alive(killer)


@pytest.mark.cairn_only  # MAXAGE is Redis 7.4; the local redis-server is 7.0
def test_client_kill_maxage(server_factory):
    srv = server_factory()
    old = connected(srv)
    assert alive(old)
    time.sleep(1.2)
    young, killer = connected(srv), connected(srv)
    assert killer.err("CLIENT", "KILL", "MAXAGE", "0") == "ERR maxage should be greater than 0"
    assert killer.err("CLIENT", "KILL", "MAXAGE", "x") == "ERR maxage is not an integer or out of range"
    assert killer.command("CLIENT", "KILL", "MAXAGE", "1") == b":1\r\n"
    assert old.is_closed(timeout=3)
    assert alive(young) and alive(killer)
    assert killer.command("CLIENT", "KILL", "MAXAGE", "3600") == b":0\r\n"


@pytest.mark.cairn_only
def test_client_kill_user_includes_memcached(server_factory):
    """memcached connections run as the `default` user and are `normal` clients."""
    srv = server_factory()
    killer, mc = connected(srv), mc_connected(srv)
    assert mc_alive(mc)
    assert killer.command("CLIENT", "KILL", "TYPE", "pubsub") == b":0\r\n"
    assert mc_alive(mc)
    assert killer.command("CLIENT", "KILL", "USER", "default") == b":1\r\n"
    assert mc.is_closed(timeout=3)


# --- CLIENT REPLY -----------------------------------------------------------------

def test_client_reply_off_on(raw):
    raw.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("SET", "a", "1")
             + encode_command("GET", "a") + encode_command("NOSUCH")
             + encode_command("CLIENT", "REPLY", "ON") + encode_command("GET", "a"))
    raw.expect(b"+OK\r\n$1\r\n1\r\n")
    assert raw.read_available(0.1) == b""


def test_client_reply_skip(raw):
    raw.send(encode_command("CLIENT", "REPLY", "SKIP") + encode_command("GET", "a")
             + encode_command("ECHO", "x")
             + encode_command("CLIENT", "REPLY", "SKIP") + encode_command("CLIENT", "REPLY", "SKIP")
             + encode_command("ECHO", "y") + encode_command("ECHO", "z"))
    raw.expect(b"$1\r\nx\r\n$1\r\nz\r\n")
    # SKIP while OFF changes nothing; ON answers +OK
    raw.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("CLIENT", "REPLY", "SKIP")
             + encode_command("ECHO", "q") + encode_command("CLIENT", "REPLY", "ON")
             + encode_command("ECHO", "r"))
    raw.expect(b"+OK\r\n$1\r\nr\r\n")
    assert raw.err("CLIENT", "REPLY", "MAYBE") == "ERR syntax error"
    assert raw.err("CLIENT", "REPLY") == "ERR wrong number of arguments for 'client|reply' command"
    assert raw.read_available(0.1) == b""


def test_client_reply_off_still_delivers_pushes(server, r, raw):
    # subscription confirmations and messages are pushes: Redis delivers them regardless
    raw.command("HELLO", "3")
    raw.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("SUBSCRIBE", "ch"))
    raw.expect(b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
    wait_until(lambda: r.publish("ch", "hi") == 1, msg="subscription")
    raw.expect(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n")
    raw.send(encode_command("PING") + encode_command("GET", "x") + encode_command("CLIENT", "REPLY", "ON"))
    raw.expect(b"+OK\r\n")


@pytest.mark.cairn_only
def test_client_reply_mutes_deferred_sql_replies(server, r, raw):
    """SQL replies come later from another thread: a muted one must be dropped, in order."""
    two, five = raw.command("SQL.QUERY", "SELECT 2"), raw.command("SQL.QUERY", "SELECT 5")
    assert two != five
    raw.send(encode_command("CLIENT", "REPLY", "SKIP") + encode_command("SQL.QUERY", "SELECT 1")
             + encode_command("SQL.QUERY", "SELECT 2") + encode_command("PING"))
    raw.expect(two + b"+PONG\r\n")
    raw.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("SQL.QUERY", "SELECT 3")
             + encode_command("SQL.QUERY", "SELECT 4") + encode_command("CLIENT", "REPLY", "ON")
             + encode_command("SQL.QUERY", "SELECT 5"))
    raw.expect(b"+OK\r\n" + five)
    assert raw.read_available(0.1) == b""


@pytest.mark.cairn_only
def test_client_reply_off_inside_exec_keeps_the_stream_valid(raw):
    # Redis sends a truncated EXEC array here (`*1` and no element); cairn drops EXEC's reply
    raw.send(encode_command("MULTI") + encode_command("CLIENT", "REPLY", "OFF")
             + encode_command("EXEC") + encode_command("PING") + encode_command("CLIENT", "REPLY", "ON"))
    raw.expect(b"+OK\r\n+QUEUED\r\n+OK\r\n")
    assert raw.command("PING") == b"+PONG\r\n"


# --- AUTH / HELLO ------------------------------------------------------------------

def test_auth_default_user_without_password(server, raw):
    assert raw.command("AUTH", "default", "anything") == b"+OK\r\n"
    assert raw.err("AUTH", "someone", "anything") == WRONGPASS
    assert raw.err("AUTH", "DEFAULT", "anything") == WRONGPASS
    assert raw.err("AUTH", "anything").startswith(
        "ERR AUTH <password> called without any password configured for the default user.")
    hello = decode_resp(raw.command("HELLO", "3", "AUTH", "default", "pw"))
    assert hello[b"proto"] == 3
    assert raw.err("HELLO", "3", "AUTH", "someone", "pw") == WRONGPASS
    # redis://default:pw@host URLs (redis-py sends AUTH default pw, or HELLO 3 AUTH ...)
    for protocol in (2, 3):
        c = redis.Redis.from_url(f"redis://default:pw@{HOST}:{server.port}", protocol=protocol)
        try:
            assert c.ping() is True
        finally:
            c.close()


def test_auth_default_user_with_requirepass(server_factory):
    srv = server_factory("--requirepass", "s3cret")
    c = srv.raw()
    assert c.err("AUTH", "default", "wrong") == WRONGPASS
    assert c.command("AUTH", "default", "s3cret") == b"+OK\r\n"
    url = f"redis://default:s3cret@{HOST}:{srv.port}"
    assert redis.Redis.from_url(url).ping() is True
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(f"redis://default:nope@{HOST}:{srv.port}").ping()


def _names_in_client_list(raw):
    text = decode_resp(raw.command("CLIENT", "LIST")).decode()
    return [line for line in text.split("\n") if line], text


def test_hello_setname_is_validated(raw):
    for bad in ("a b", "evil\nid=999 addr=1.2.3.4:5", "tab\there"):
        assert raw.err("HELLO", "3", "SETNAME", bad) == NAME_ERR
    # nothing changed: still RESP2, no name, no forged CLIENT LIST line
    assert raw.command("CLIENT", "GETNAME") == b"$-1\r\n"
    lines, text = _names_in_client_list(raw)
    assert "id=999" not in text
    assert all(line.startswith("id=") for line in lines)
    hello = decode_resp(raw.command("HELLO", "2", "SETNAME", "good-name"))
    assert hello[hello.index(b"proto") + 1] == 2
    assert raw.command("CLIENT", "GETNAME") == b"$9\r\ngood-name\r\n"
    # an empty name clears it, as CLIENT SETNAME ""
    raw.command("HELLO", "2", "SETNAME", "")
    assert raw.command("CLIENT", "GETNAME") == b"$-1\r\n"


def test_hello_checks_the_name_before_authenticating(server_factory):
    srv = server_factory("--requirepass", "pw")
    c = srv.raw()
    assert c.err("HELLO", "3", "SETNAME", "a b", "AUTH", "default", "pw") == NAME_ERR
    # the bad name failed the whole HELLO: not authenticated
    assert c.err("PING").startswith("NOAUTH")
    hello = decode_resp(c.command("HELLO", "3", "AUTH", "default", "pw", "SETNAME", "ok"))
    assert hello[b"proto"] == 3
    assert c.command("CLIENT", "GETNAME") == b"$2\r\nok\r\n"
