"""COMMAND INFO / DOCS / GETKEYS / GETKEYSANDFLAGS of the Redis commands cairn implements, compared
with a real redis-server's answers to the same requests.

What cairn cannot match is left out of the comparison, each with its reason:
  * COMMAND COUNT and COMMAND LIST: cairn implements a subset of Redis's commands.
  * A container's subcommands (CONFIG, CLIENT, COMMAND, PUBSUB): cairn lists those it implements,
    so each of its subcommand entries is compared with Redis's entry of the same name; CLIENT
    SETINFO and NO-TOUCH come from Redis 7.2, newer than some installed redis-servers (7.0): they
    are compared only when the reference has them. So are the commands newer than Redis 7.0
    (the hash field expiry family of 7.4, ...): a reference that does not know them is not asked.
  * DOCS: the summaries are cairn's own words, the arguments are not described, and subcommands
    carry no history; the rest (since, group, complexity, doc flags, deprecation, history) is
    compared.
The in-process table tests (crates/server/src/resp_cases/introspect.rs) hold the exact rows;
this test keeps them honest against whatever redis-server is installed.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import TARGET, RespError, Server, decode_resp

pytestmark = pytest.mark.redis_only

CAIRN_ONLY_PREFIXES = ("tag.", "sql.", "wb.", "repl.")
# Commands whose arguments grew after Redis 7.0 (version of the change): against an older
# reference their arity and DOCS history are not compared.
GREW_AFTER_7_0 = {"zrank": (7, 2), "zrevrank": (7, 2)}


def older_than(ref, name) -> bool:
    """Whether the reference predates the change GREW_AFTER_7_0 records for `name`."""
    if name not in GREW_AFTER_7_0:
        return False
    info = text(call(ref, "INFO", "server"))
    version = next(line.split(":")[1] for line in info.splitlines() if line.startswith("redis_version:"))
    return tuple(int(p) for p in version.strip().split(".")[:2]) < GREW_AFTER_7_0[name]


# Commands every reference (7.0 or later) has: a reference that does not know one is an error.
OLDER_THAN_7_2 = ("get", "set", "hset", "zadd", "eval", "client", "config", "command")


@pytest.fixture(scope="module")
def redis_reference():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    srv = Server(kind="redis", name="introspect-redis")
    srv.start()
    yield srv
    srv.stop()


def call(conn, *args):
    return decode_resp(conn.command(*args))


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def pairs(flat) -> dict:
    """A RESP2 map (a flat list) as a dict, keys decoded."""
    return {text(k): v for k, v in zip(flat[0::2], flat[1::2])}


def redis_commands(conn, ref) -> list[str]:
    """cairn's Redis commands that the reference knows too."""
    names = [text(n) for n in call(conn, "COMMAND", "LIST")]
    names = [n for n in names if "|" not in n and not n.startswith(CAIRN_ONLY_PREFIXES)]
    known = call(ref, "COMMAND", "INFO", *names)
    return [n for n, info in zip(names, known) if info is not None or n in OLDER_THAN_7_2]


def normalised_info(entry):
    """A COMMAND INFO entry with its sets as sorted lists and its subcommands by name."""
    (name, arity, flags, first, last, step, acl, tips, key_specs, subs) = entry
    return {
        "name": text(name),
        "arity": arity,
        "flags": sorted(map(text, flags)),
        "keys": (first, last, step),
        "acl": sorted(map(text, acl)),
        "tips": sorted(map(text, tips)),
        "key_specs": key_specs,
        "subcommands": {text(s[0]): normalised_info(s) for s in subs},
    }


def test_command_info_matches_redis(server, redis_reference):
    cairn, ref = server.raw(timeout=10), redis_reference.raw(timeout=10)
    names = redis_commands(cairn, ref)
    assert "get" in names and "set" in names
    ours = call(cairn, "COMMAND", "INFO", *names)
    theirs = call(ref, "COMMAND", "INFO", *names)
    checked_subs = 0
    for name, o, t in zip(names, ours, theirs):
        assert t is not None, f"redis-server does not know {name}"
        o, t = normalised_info(o), normalised_info(t)
        for sub, entry in o.pop("subcommands").items():
            if sub not in t["subcommands"]:
                assert sub in ("client|setinfo", "client|no-touch"), f"redis-server lacks {sub}"
                continue
            assert entry == t["subcommands"][sub], sub
            checked_subs += 1
        t.pop("subcommands")
        if older_than(ref, name):
            o.pop("arity"), t.pop("arity")
        assert o == t, name
    assert checked_subs >= 20


def test_command_docs_match_redis(server, redis_reference):
    cairn, ref = server.raw(timeout=10), redis_reference.raw(timeout=10)
    names = redis_commands(cairn, ref)
    ours, theirs = pairs(call(cairn, "COMMAND", "DOCS", *names)), pairs(call(ref, "COMMAND", "DOCS", *names))
    assert set(ours) == set(names)
    for name in names:
        o, t = pairs(ours[name]), pairs(theirs[name])
        for doc in (o, t):
            doc.pop("summary")
            doc.pop("arguments", None)
        osubs, tsubs = pairs(o.pop("subcommands", [])), pairs(t.pop("subcommands", []))
        if older_than(ref, name):
            o.pop("history", None), t.pop("history", None)
        for sub, entry in osubs.items():
            if sub in tsubs:
                want = {k: v for k, v in pairs(tsubs[sub]).items() if k not in ("summary", "arguments", "history")}
                # The same fields left out on both sides, so that the test also runs against
                # Redis itself (`make validate`).
                got = {k: v for k, v in pairs(entry).items() if k not in ("summary", "arguments", "history")}
                assert got == want, sub
        assert o == t, name


def requests_for(name: str, arity: int) -> list[list[str]]:
    """Requests of every length the command accepts, up to a few optional arguments."""
    low = abs(arity)
    high = low if arity > 0 else low + 3
    return [[name] + [f"a{i}" for i in range(1, n)] for n in range(low, high + 1)]


# Requests whose keys depend on what the arguments say, not just on their count.
SPECIAL_REQUESTS = [
    ["set", "k", "v", "GET"],
    ["set", "k", "v", "NX", "PX", "10"],
    ["getex", "k", "PERSIST"],
    ["mset", "a", "1", "b"],
    ["expire", "k", "10", "NX"],
    ["config", "get", "maxmemory"],
    ["client", "list"],
    ["ping"],
]


def test_command_getkeys_matches_redis(server, redis_reference):
    cairn, ref = server.raw(timeout=10), redis_reference.raw(timeout=10)
    names = redis_commands(cairn, ref)
    infos = call(cairn, "COMMAND", "INFO", *names)
    requests = list(SPECIAL_REQUESTS)
    for info in infos:
        requests += requests_for(text(info[0]), info[1])
    compared = 0
    for request in requests:
        for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
            got = call(cairn, "COMMAND", sub, *request)
            want = call(ref, "COMMAND", sub, *request)
            if isinstance(want, RespError) and older_than(ref, request[0]):
                continue  # arguments the older reference does not take yet
            assert got == want, (sub, request)
            compared += not isinstance(want, RespError)
    assert compared > 100
