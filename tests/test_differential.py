"""Differential test: the same seeded random command streams go to cairn and to a real redis-server.

Every stream (strings, keys, hashes, expiry, MULTI/EXEC/WATCH/DISCARD over two connections, wrong
types, wrong arity, bad numbers) is replayed on both servers in lock step, and each reply is compared
after normalisation: TTLs as ranges, unordered replies (KEYS, HKEYS, HVALS, HGETALL, a whole SCAN
iteration) as sets or dicts. Everything else, errors included, must match byte for byte.

Knobs:
  CAIRN_DIFF_SEED    first seed (default 1); stream i uses seed + i. A failure prints the seed of
                     its stream and the command; rerun it alone with CAIRN_DIFF_SEED=<s> CAIRN_DIFF_ROUNDS=1.
  CAIRN_DIFF_ROUNDS  streams per server mode (default 60: about 24,000 commands, 2-5 s a mode).
  CAIRN_DIFF_OPS     commands per stream (default 400).
  CAIRN_DIFF_KEEP_GOING=1  report every mismatch (resynchronising after each), not only the first.
Odd streams switch both connections to RESP3 first (HELLO 3), so maps, sets and nulls are
compared in their RESP3 form as well.

Deliberate differences are kept out of the generator (diff_streams.py says which and why) or
recognised by the checker:
  * Results of INCRBYFLOAT on huge integers (INCRBY near 2^63, then INCRBYFLOAT) differ in the
    last digits (long double vs f64): the checker accepts results that agree to 15 significant
    digits and resynchronises both servers with FLUSHALL.
  * WATCH of an absent key that another client creates and deletes again before EXEC: cairn's WATCH
    compares CAS versions and cannot notice it (docs/architecture.md, "Known limits"). The checker
    recognises that exact case (the key was absent at WATCH time and Redis aborted) and
    resynchronises both servers with FLUSHALL instead of failing.
  * SCAN cursors and page sizes are each server's own: a whole iteration is compared as a set,
    a single page (inside EXEC) only when it ends the iteration from cursor 0.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter

import pytest

from conftest import TARGET, RespError, Server, decode_resp, encode_command
from diff_streams import PAST_S, Gen

pytestmark = pytest.mark.redis_only

SEED = int(os.environ.get("CAIRN_DIFF_SEED", "1"))
ROUNDS = int(os.environ.get("CAIRN_DIFF_ROUNDS", "60"))
OPS = int(os.environ.get("CAIRN_DIFF_OPS", "400"))
# Report every mismatch (resynchronising after each) instead of stopping at the first.
KEEP_GOING = os.environ.get("CAIRN_DIFF_KEEP_GOING", "") not in ("", "0")

# Relative TTLs are compared with this much slack (both servers see a command within milliseconds
# of each other; the slack covers rounding and a slow machine).
TTL_SLACK_S = 2
TTL_SLACK_MS = 2000

# -- normalising replies ----------------------------------------------------------------------

def name_of(cmd) -> bytes:
    return cmd[0].upper() if cmd else b""


def _sorted(items):
    return sorted(items, key=repr)


def normalise(cmd, value):
    """A comparable form of the decoded reply `value` to `cmd`."""
    if isinstance(value, RespError):
        return ("error", str(value))
    name = name_of(cmd)
    if name in (b"KEYS", b"HKEYS", b"HVALS") and isinstance(value, list):
        return ("unordered", _sorted(value))
    if name == b"HGETALL":
        if isinstance(value, list):  # RESP2: flat field/value list
            value = dict(zip(value[0::2], value[1::2]))
        if isinstance(value, dict):
            return ("map", _sorted(value.items()))
    if name in (b"TTL", b"PTTL", b"EXPIRETIME", b"PEXPIRETIME") and isinstance(value, int) and value >= 0:
        # Only where the deadline came from a relative expiry does the value depend on the clock.
        return ("time", value)
    if name == b"SCAN" and isinstance(value, list) and len(value) == 2 and isinstance(value[1], list):
        # One page (inside EXEC): cursors and page sizes are the implementation's own.
        return ("scan-page", value[0] == b"0" and cmd[1:2] == [b"0"], _sorted(value[1]))
    if isinstance(value, set):
        return ("set", _sorted(value))
    return value


def float_close(a, b) -> bool:
    """Both replies are the same number to 15 significant digits (long double vs f64)."""
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return x == y or abs(x - y) <= 1e-15 * max(abs(x), abs(y))


def time_close(name: bytes, a: int, b: int) -> bool:
    slack = TTL_SLACK_MS if name in (b"PTTL", b"PEXPIRETIME") else TTL_SLACK_S
    return abs(a - b) <= slack


def same(cmd, a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "time":
        return time_close(name_of(cmd), a[1], b[1])
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "scan-page":
        # Pages that end the iteration from cursor 0 hold every key; others any subset.
        return a[2] == b[2] if a[1] and b[1] else True
    return a == b


# -- talking to both servers -----------------------------------------------------------------

class Peer:
    """Two connections to one server."""

    def __init__(self, srv: Server):
        self.srv = srv
        self.conns = [srv.raw(timeout=10), srv.raw(timeout=10)]

    def send(self, conn: int, cmd):
        self.conns[conn].send(encode_command(*cmd))

    def read(self, conn: int):
        return decode_resp(self.conns[conn].read_resp())

    def call(self, conn: int, *cmd):
        self.send(conn, cmd)
        return self.read(conn)

    def scan_all(self, conn: int, cmd):
        """Runs a SCAN from cursor 0 to the end; returns the set of keys, or the first error.
        From another cursor only whether it is accepted is comparable."""
        if len(cmd) < 2 or cmd[1] != b"0":
            reply = self.call(conn, *cmd)
            return reply if isinstance(reply, RespError) else ("scan-from", cmd[1])
        seen, cursor, rounds = set(), b"0", 0
        while True:
            reply = self.call(conn, cmd[0], cursor, *cmd[2:])
            if isinstance(reply, RespError):
                return reply
            cursor, keys = reply
            seen.update(keys)
            rounds += 1
            if cursor == b"0" or rounds > 10000:
                return ("scan", _sorted(seen))

    def close(self):
        for c in self.conns:
            c.close()


class Mismatch(AssertionError):
    pass


class Checker:
    """Replays one stream on both peers and compares each reply."""

    def __init__(self, cairn: Peer, redis_peer: Peer, seed: int, mode: str):
        self.cairn, self.redis = cairn, redis_peer
        self.seed, self.mode = seed, mode
        self.history = []
        self.queued = [None, None]      # commands queued by MULTI on each connection, or None
        self.absent_watched = [set(), set()]  # keys that did not exist when WATCHed
        self.tolerated = []
        self.mismatches = []
        self.resync_pending = False
        self.seen_ok = {}               # command name -> non-error replies (coverage)

    def fail(self, i, conn, cmd, want, got, why="reply differs"):
        lines = [f"cairn and redis-server disagree ({why}) in stream seed={self.seed} "
                 f"(mode {self.mode}) at command #{i} on connection {conn}:",
                 f"  command: {cmd!r}",
                 f"  redis:   {want!r}",
                 f"  cairn:   {got!r}",
                 "  previous commands:"]
        lines += [f"    #{j} c{c}: {h!r}" for j, c, h in self.history[-15:]]
        if isinstance(self.seed, int):
            lines.append(f"  rerun: CAIRN_DIFF_SEED={self.seed} CAIRN_DIFF_ROUNDS=1 CAIRN_MODES={self.mode} "
                         f".venv/bin/python -m pytest tests/test_differential.py -q -k random")
        raise Mismatch("\n".join(lines))

    def resync(self):
        for peer in (self.cairn, self.redis):
            for c in (0, 1):
                peer.call(c, b"DISCARD")  # errors harmlessly outside MULTI
                peer.call(c, b"UNWATCH")
            peer.call(0, b"FLUSHALL")
        self.queued = [None, None]
        self.absent_watched = [set(), set()]

    def exists(self, key) -> bool:
        return self.redis.call(1, b"EXISTS", key) == 1

    def run(self, stream):
        for i, (conn, cmd) in enumerate(stream):
            try:
                self.step(i, conn, cmd)
                if self.resync_pending and self.queued[conn] is None:
                    self.resync_pending = False
                    self.resync()
            except Mismatch as e:
                if not KEEP_GOING:
                    raise
                self.mismatches.append(str(e))
                self.resync()
            self.history.append((i, conn, cmd))

    def step(self, i, conn, cmd):
        name = name_of(cmd)
        in_multi = self.queued[conn] is not None
        if name == b"WATCH" and not in_multi:
            # Remember which watched keys were absent (see the module docstring); asked on the
            # other connection, which has no transaction state, and only of Redis.
            self.absent_watched[conn] |= {k for k in cmd[1:] if not self.exists(k)}
        if name == b"SCAN" and not in_multi:
            want, got = self.redis.scan_all(conn, cmd), self.cairn.scan_all(conn, cmd)
            self.compare(i, conn, cmd, normalise(cmd, want), normalise(cmd, got), want)
            return
        self.redis.send(conn, cmd)
        self.cairn.send(conn, cmd)
        want, got = self.redis.read(conn), self.cairn.read(conn)
        if name == b"EXEC" and in_multi and isinstance(want, list) and isinstance(got, list):
            queued = self.queued[conn]
            if len(want) == len(queued) == len(got):
                for sub, w, g in zip(queued, want, got):
                    if self.resync_pending:
                        # A long double result diverged earlier in this EXEC; what follows may
                        # read it. Both servers are resynchronised right after.
                        break
                    self.compare(i, conn, cmd, normalise(sub, w), normalise(sub, g), w, sub=sub)
                self.count(cmd, want)
                self.after(conn, cmd, want, in_multi)
                return
        if (name == b"EXEC" and in_multi and want is None and isinstance(got, list)
                and self.absent_watched[conn]):
            # The documented WATCH limit: a watched absent key was created and deleted again.
            # Nothing left that proves it, so accept only when every watched absent key is absent
            # now in Redis too, then resynchronise the two servers.
            if all(not self.exists(k) for k in self.absent_watched[conn]):
                self.tolerated.append((self.seed, i, "WATCH of an absent key recreated and deleted"))
                self.after(conn, cmd, want, in_multi)
                self.resync()
                return
        self.compare(i, conn, cmd, normalise(cmd, want), normalise(cmd, got), want)
        self.after(conn, cmd, want, in_multi)

    def compare(self, i, conn, cmd, want, got, raw_want, sub=None):
        shown = cmd if sub is None else [*cmd, b"->", *sub]
        if same(sub or cmd, want, got):
            self.count(sub or cmd, raw_want)
            return
        if ((name_of(sub or cmd) in (b"INCRBYFLOAT", b"HINCRBYFLOAT") or self.resync_pending)
                and isinstance(want, bytes) and isinstance(got, bytes) and float_close(want, got)):
            # (Until the resynchronisation, reads of that number differ the same way.)
            self.tolerated.append((self.seed, i, "long double vs f64 precision"))
            self.resync_pending = True
            return
        self.fail(i, conn, shown, want, got)

    def count(self, cmd, raw):
        if not isinstance(raw, RespError):
            self.seen_ok[name_of(cmd)] = self.seen_ok.get(name_of(cmd), 0) + 1

    def after(self, conn, cmd, reply, in_multi):
        """Follows connection state from Redis's replies (the reference)."""
        name = name_of(cmd)
        if in_multi:
            if name in (b"EXEC", b"DISCARD") and not isinstance(reply, RespError):
                self.queued[conn] = None
                self.absent_watched[conn] = set()
            elif name == b"EXEC":  # EXECABORT also ends the transaction
                self.queued[conn] = None
                self.absent_watched[conn] = set()
            elif reply == b"QUEUED":
                self.queued[conn].append(cmd)
        elif name == b"MULTI" and reply == b"OK":
            self.queued[conn] = []
        elif name in (b"UNWATCH", b"EXEC", b"DISCARD") and reply == b"OK":
            self.absent_watched[conn] = set()


# -- the test --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def redis_reference():
    if TARGET == "memcached":
        pytest.skip("needs a RESP endpoint")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    srv = Server(kind="redis", name="diff-redis")
    srv.start()
    yield srv
    srv.stop()


# pytest.ini's 60 s guard, stretched for long runs (CAIRN_DIFF_ROUNDS=300 and more).
@pytest.mark.timeout(max(60, ROUNDS * OPS // 200))
def test_random_streams_match_redis(server, redis_reference):
    cairn, ref = Peer(server), Peer(redis_reference)
    mode = getattr(server, "mode", TARGET)
    tolerated, coverage, total, mismatches = [], {}, 0, []
    started = time.monotonic()
    try:
        for r in range(ROUNDS):
            seed = SEED + r
            resp3 = seed % 2 == 1
            for peer in (cairn, ref):
                for c in (0, 1):
                    peer.call(c, b"HELLO", b"3" if resp3 else b"2")
                peer.call(0, b"FLUSHALL")
            checker = Checker(cairn, ref, seed, mode)
            stream = Gen(seed).stream(OPS)
            checker.run(stream)
            total += len(stream)
            tolerated += checker.tolerated
            mismatches += checker.mismatches
            for k, v in checker.seen_ok.items():
                coverage[k] = coverage.get(k, 0) + v
    finally:
        cairn.close()
        ref.close()
    elapsed = time.monotonic() - started
    kinds = Counter(t[2] for t in tolerated)
    print(f"\ndifferential ({mode}): {ROUNDS} streams from seed {SEED}, {total} commands in {elapsed:.1f}s; "
          f"tolerated: {dict(kinds)}")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n\n".join(mismatches)
    # The comparison means something only if the streams exercise every command with success
    # (not only errors): a generator gone wrong would otherwise pass vacuously.
    expected = {name_of(make) for make in (
        [b"GET"], [b"SET"], [b"SETNX"], [b"SETEX"], [b"PSETEX"], [b"GETSET"], [b"GETDEL"], [b"GETEX"],
        [b"MGET"], [b"MSET"], [b"MSETNX"], [b"INCR"], [b"DECR"], [b"INCRBY"], [b"DECRBY"],
        [b"INCRBYFLOAT"], [b"APPEND"], [b"STRLEN"], [b"GETRANGE"], [b"SETRANGE"], [b"DEL"],
        [b"EXISTS"], [b"TYPE"], [b"TTL"], [b"PTTL"], [b"PERSIST"], [b"KEYS"], [b"SCAN"],
        [b"DBSIZE"], [b"HSET"], [b"HGET"], [b"HGETALL"], [b"HDEL"], [b"HINCRBY"], [b"HINCRBYFLOAT"],
        [b"MULTI"], [b"EXEC"], [b"WATCH"], [b"DISCARD"])}
    if ROUNDS * OPS >= 2000:
        missing = sorted(n.decode() for n in expected if coverage.get(n, 0) == 0)
        assert not missing, f"commands never answered without an error: {missing}"


# -- the mismatches found so far, pinned ------------------------------------------------------
# Each script once made cairn answer differently from Redis 7.0; random streams may stop
# reaching them when the generator changes, these do not.

FOUND = {
    "unwatch-is-queued": [(0, [b"WATCH", b"k"]), (0, [b"MULTI"]), (0, [b"UNWATCH"]), (0, [b"EXEC"])],
    "set-options-before-amounts": [
        (0, [b"SET", b"k", b"v", b"nx", b"EX", b"GET", b"1000"]),
        (0, [b"SET", b"k", b"v", b"EX", b"abc", b"BOGUS"]),
        (0, [b"SET", b"k", b"v", b"KEEPTTL", b"KEEPTTL"]),
        (0, [b"SET", b"k", b"v", b"NX", b"NX"]),
        (0, [b"SET", b"k", b"w", b"XX", b"GET", b"GET", b"EX", b"100", b"EX", b"200"]),
        (0, [b"TTL", b"k"]),
        (0, [b"SET", b"k", b"v", b"EX", b"100", b"PX", b"100"]),
        (0, [b"SET", b"k", b"v", b"KEEPTTL", b"EX", b"100"]),
    ],
    "getex-order": [
        (0, [b"GETEX", b"missing", b"EXAT", b"-5"]),
        (0, [b"HSET", b"h", b"f", b"1"]),
        (0, [b"GETEX", b"h", b"EX", b"-1"]),
        (0, [b"SET", b"s", b"v"]),
        (0, [b"GETEX", b"s", b"EX", b"abc"]),
        (0, [b"GETEX", b"s", b"PX", b"-9223372036854775808"]),
        (0, [b"GETEX", b"s", b"PERSIST", b"PERSIST"]),
        (0, [b"GETEX", b"s", b"EX", b"100", b"EX", b"200"]),
        (0, [b"TTL", b"s"]),
        (0, [b"GETEX", b"s", b"PERSIST", b"EX", b"100"]),
        (0, [b"GETEX", b"s", b"KEEPTTL"]),
    ],
    "getex-persist-without-deadline-is-no-change": [
        (0, [b"SET", b"k", b"v"]),
        (0, [b"WATCH", b"k"]),
        (0, [b"GETEX", b"k", b"PERSIST"]),
        (0, [b"MULTI"]),
        (0, [b"GET", b"k"]),
        (0, [b"EXEC"]),
    ],
    "expire-options-before-amount": [
        (0, [b"SET", b"k", b"v"]),
        (0, [b"PEXPIRE", b"k", b"abc", b"nx", b"GT"]),
        (0, [b"EXPIRE", b"k", b"abc", b"FOO"]),
        (0, [b"EXPIRE", b"k", b"100", b"\x00\x01\xfe"]),
        (0, [b"EXPIRE", b"k", b"100", b"opt\r\n"]),
    ],
    "float-parsing": [
        (0, [b"SET", b"k", b"1"]),
        (0, [b"INCRBYFLOAT", b"k", b"0x10"]),
        (0, [b"INCRBYFLOAT", b"k", b"-0X1.8p1"]),
        (0, [b"INCRBYFLOAT", b"k", b"0x"]),
        (0, [b"INCRBYFLOAT", b"k", b"1e5000"]),
        (0, [b"SET", b"big", b"1e5000"]),
        (0, [b"INCRBYFLOAT", b"big", b"1"]),
        (0, [b"HSET", b"h", b"f", b"1"]),
        (0, [b"HINCRBYFLOAT", b"h", b"f", b"inf"]),
        (0, [b"HINCRBYFLOAT", b"k", b"f", b"-inf"]),
        (0, [b"HINCRBYFLOAT", b"h", b"f", b"0x8"]),
    ],
    "error-messages-as-redis-formats-them": [
        (0, [b"GETT", b"x\x00\xff y"]),
        (0, [b"NOSUCH"] + [b"a" * 50 for _ in range(5)]),
        (0, [b"NOSUCH\x00X", b"\xff\xfe"]),
    ],
    "scan-cursors": [
        (0, [b"SET", b"k", b"v"]),
        (0, [b"SCAN", b"-1"]),
        (0, [b"SCAN", b"", b"COUNT", b"100"]),
        (0, [b"SCAN", b"+0"]),
        (0, [b"SCAN", b"18446744073709551616"]),
        (0, [b"SCAN", b" 0"]),
        (0, [b"MULTI"]),
        (0, [b"SCAN", b"-1", b"COUNT", b"-1"]),
        (0, [b"EXEC"]),
    ],
}


@pytest.mark.parametrize("script", sorted(FOUND))
def test_found_mismatches_stay_fixed(server, redis_reference, script):
    cairn, ref = Peer(server), Peer(redis_reference)
    try:
        for peer in (cairn, ref):
            peer.call(0, b"FLUSHALL")
        Checker(cairn, ref, seed=f"pinned:{script}", mode=getattr(server, "mode", TARGET)).run(FOUND[script])
    finally:
        cairn.close()
        ref.close()


@pytest.mark.cairn_only
def test_set_with_a_past_deadline_leaves_no_key(r):
    # Redis 7.0 keeps such a key until it is read or its expiry cycle reaps it (DBSIZE counts it
    # meanwhile); cairn drops it at once.
    r.flushall()
    assert r.set("k", "v", exat=PAST_S) is True
    assert r.dbsize() == 0
    assert r.set("k", "v", pxat=PAST_S * 1000, get=True) is None
    assert r.dbsize() == 0 and r.get("k") is None
