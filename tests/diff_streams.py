"""Seeded random command streams for the differential test (test_differential.py).

A small key space (keys collide, change type, expire) and value pools chosen so that Redis and
cairn can agree exactly: what they may not (and why) is kept out here, each at its place:
  * INCRBYFLOAT / HINCRBYFLOAT operands are dyadic (x.5, x.25): Redis adds in 80-bit long
    double and prints 17 digits, cairn adds in f64 and prints the shortest round-trip form
    (0.1 + 0.2 is "0.3" there, "0.30000000000000004" here); no operand lies beyond f64's range
    (1e400 is finite as a long double).
  * Expiry is far in the future (>= 100 s) or already past, never racing the clock; SET gets no
    past deadline (Redis 7.0 keeps that dead key, and DBSIZE counts it, until it is read or
    reaped; cairn drops it at once).
"""

from __future__ import annotations

import random

# Absolute deadlines that never race the clock: 2100-01-01 and 2001-09-09.
FUTURE_S = 4102444800
PAST_S = 1000000000

KEYS = [b"k0", b"k1", b"k2", b"k3", b"k4", b"h0", b"h1", b"n0", b"n1", b"x\x00\xff y", b""]
FIELDS = [b"f0", b"f1", b"f2", b"f3", b"", b"f\r\n"]
INTS = [b"0", b"1", b"-1", b"7", b"42", b"-100", b"9223372036854775807", b"-9223372036854775808",
        b"9223372036854775806", b"-9223372036854775807"]
# Dyadic floats only (see the module docstring).
FLOATS = [b"1.5", b"-0.25", b"10.5", b"5.0e3", b"3.0e0", b"-2", b"0.5", b"1e2", b"+4", b"-0"]
# Not integers; "0x10" and "0x1.8p1" are floats to Redis's strtold (and to cairn). No "1e400":
# finite as a long double in Redis, infinite as an f64 in cairn (see the module docstring).
NOT_NUMBERS = [b"abc", b"", b" 1", b"1 ", b"0x10", b"0x1.8p1", b"0x", b"1.5.1", b"nan", b"12a", b"--1",
               b"99999999999999999999", b"inf", b"-inf", b"1e5000"]
STRINGS = [b"abc", b"hello world", b"", b"\x00\x01\xfe\xff", b"a\r\nb", b"v" * 300, b"01", b"+1"]
PATTERNS = [b"*", b"k*", b"k?", b"k[0-2]", b"h*", b"*1", b"[^k]*", b"n[!0]", b"\\k0", b"x*", b"[a-", b"?"]
EXPIRE_OPTS = [b"NX", b"XX", b"GT", b"LT", b"nx", b"gt", b"BAD"]


class Gen:
    """Random commands over a small key space, so that keys collide, change type and expire."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def pick(self, seq):
        return self.rng.choice(seq)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def key(self) -> bytes:
        return self.pick(KEYS)

    def field(self) -> bytes:
        return self.pick(FIELDS)

    def value(self) -> bytes:
        r = self.rng.random()
        if r < 0.35:
            return self.pick(INTS)
        if r < 0.55:
            return self.pick(FLOATS)
        if r < 0.65:
            return self.pick(NOT_NUMBERS)
        if r < 0.85:
            return self.pick(STRINGS)
        return bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 12)))

    def int_arg(self) -> bytes:
        return self.pick(INTS) if self.chance(0.85) else self.pick(NOT_NUMBERS)

    def float_arg(self) -> bytes:
        return self.pick(FLOATS + INTS[:6]) if self.chance(0.85) else self.pick(NOT_NUMBERS)

    def seconds(self) -> bytes:
        return self.pick([b"100", b"1000", b"86400", b"12345"])

    def millis(self) -> bytes:
        return self.pick([b"100000", b"2500000", b"86400000"])

    def bad_time(self) -> bytes:
        return self.pick([b"0", b"-5", b"abc", b"1.5", b"9223372036854775807", b"-9223372036854775808"])

    def expiry_pair(self, unit: bytes, past: bool) -> list[bytes]:
        """EX/PX/EXAT/PXAT with a valid or invalid amount; an absolute one in the past if `past`."""
        good = self.chance(0.85)
        past = past and self.chance(0.3)
        u = unit.upper()
        if u in (b"EX",):
            amount = self.seconds() if good else self.bad_time()
        elif u == b"PX":
            amount = self.millis() if good else self.bad_time()
        elif u == b"EXAT":
            amount = (str(PAST_S if past else FUTURE_S + self.rng.randrange(1000)).encode()
                      if good else self.bad_time())
        else:
            amount = (str(PAST_S * 1000 if past else (FUTURE_S + self.rng.randrange(1000)) * 1000 + 7).encode()
                      if good else self.bad_time())
        return [unit, amount]

    def expire_amount(self, name: bytes) -> bytes:
        r = self.rng.random()
        if name in (b"EXPIRE",):
            return self.seconds() if r < 0.75 else self.pick([b"0", b"-1", b"abc", b"9223372036854775807", b"1.0"])
        if name == b"PEXPIRE":
            return self.millis() if r < 0.75 else self.pick([b"0", b"-1", b"abc", b"9223372036854775807"])
        if name == b"EXPIREAT":
            if r < 0.6:
                return str(FUTURE_S + self.rng.randrange(3)).encode()
            return self.pick([str(PAST_S).encode(), b"0", b"-1", b"x", b"9223372036854775807"])
        if r < 0.6:
            return str(FUTURE_S * 1000 + self.rng.randrange(3) * 1000).encode()
        return self.pick([str(PAST_S * 1000).encode(), b"0", b"-1", b"x"])

    # -- the commands ----------------------------------------------------------------------

    def plain(self) -> list[bytes]:
        """One command outside any transaction logic."""
        k, g = self.key(), self
        choices = [
            (8, lambda: [b"GET", k]),
            (10, lambda: [b"SET", k, g.value()] + g.set_options()),
            (2, lambda: [b"SETNX", k, g.value()]),
            (2, lambda: [b"SETEX", k, g.seconds() if g.chance(0.8) else g.bad_time(), g.value()]),
            (2, lambda: [b"PSETEX", k, g.millis() if g.chance(0.8) else g.bad_time(), g.value()]),
            (2, lambda: [b"GETSET", k, g.value()]),
            (2, lambda: [b"GETDEL", k]),
            (3, lambda: [b"GETEX", k] + g.getex_options()),
            (3, lambda: [b"MGET"] + [g.key() for _ in range(g.rng.randrange(1, 5))]),
            (2, lambda: [b"MSET"] + g.pairs(g.rng.randrange(1, 4))),
            (2, lambda: [b"MSETNX"] + g.pairs(g.rng.randrange(1, 4))),
            (3, lambda: [b"INCR", k]),
            (2, lambda: [b"DECR", k]),
            (3, lambda: [b"INCRBY", k, g.int_arg()]),
            (2, lambda: [b"DECRBY", k, g.int_arg()]),
            (3, lambda: [b"INCRBYFLOAT", k, g.float_arg()]),
            (3, lambda: [b"APPEND", k, g.value()]),
            (2, lambda: [b"STRLEN", k]),
            (3, lambda: [b"GETRANGE", k, g.range_arg(), g.range_arg()]),
            (2, lambda: [b"SETRANGE", k, g.pick([b"0", b"1", b"3", b"10", b"-1", b"x"]), g.pick(STRINGS[:5])]),
            (3, lambda: [b"DEL"] + [g.key() for _ in range(g.rng.randrange(1, 4))]),
            (1, lambda: [b"UNLINK"] + [g.key() for _ in range(g.rng.randrange(1, 3))]),
            (3, lambda: [b"EXISTS"] + [g.key() for _ in range(g.rng.randrange(1, 4))]),
            (1, lambda: [b"TOUCH"] + [g.key() for _ in range(g.rng.randrange(1, 3))]),
            (3, lambda: [b"TYPE", k]),
            (6, lambda: g.expire_command(k)),
            (4, lambda: [g.pick([b"TTL", b"PTTL", b"EXPIRETIME", b"PEXPIRETIME"]), k]),
            (2, lambda: [b"PERSIST", k]),
            (2, lambda: [b"KEYS", g.pick(PATTERNS)]),
            (2, lambda: g.scan_command()),
            (2, lambda: [b"DBSIZE"]),
            (10, lambda: [b"HSET", k] + g.field_pairs(g.rng.randrange(1, 4))),
            (2, lambda: [b"HMSET", k] + g.field_pairs(g.rng.randrange(1, 3))),
            (2, lambda: [b"HSETNX", k, g.field(), g.value()]),
            (5, lambda: [b"HGET", k, g.field()]),
            (2, lambda: [b"HMGET", k] + [g.field() for _ in range(g.rng.randrange(1, 4))]),
            (3, lambda: [b"HGETALL", k]),
            (3, lambda: [b"HDEL", k] + [g.field() for _ in range(g.rng.randrange(1, 3))]),
            (2, lambda: [b"HEXISTS", k, g.field()]),
            (2, lambda: [b"HLEN", k]),
            (2, lambda: [b"HSTRLEN", k, g.field()]),
            (2, lambda: [b"HKEYS", k]),
            (2, lambda: [b"HVALS", k]),
            (4, lambda: [b"HINCRBY", k, g.field(), g.int_arg()]),
            (3, lambda: [b"HINCRBYFLOAT", k, g.field(), g.float_arg()]),
            (1, lambda: [b"PING"] + ([g.value()] if g.chance(0.5) else [])),
            (1, lambda: [b"ECHO", g.value()]),
            (1, lambda: [b"SELECT", g.pick([b"0", b"1", b"-1", b"x"])]),
            (1, lambda: [g.pick([b"FLUSHALL", b"FLUSHDB"])]
             + ([g.pick([b"ASYNC", b"SYNC", b"sync", b"NOW"])] if g.chance(0.3) else [])),
            (1, lambda: [g.pick([b"NOSUCHCMD", b"GETT", b"HSETT"]), g.key()]),
        ]
        total = sum(w for w, _ in choices)
        r = self.rng.randrange(total)
        for w, make in choices:
            if r < w:
                cmd = make()
                break
            r -= w
        if self.chance(0.04):
            cmd = self.break_arity(cmd)
        return cmd

    def break_arity(self, cmd: list[bytes]) -> list[bytes]:
        """Drops or adds arguments; many of these become arity or syntax errors."""
        if self.chance(0.5) and len(cmd) > 1:
            return cmd[: self.rng.randrange(1, len(cmd))]
        return cmd + [self.value() for _ in range(self.rng.randrange(1, 3))]

    def set_options(self) -> list[bytes]:
        opts = []
        if self.chance(0.2):
            opts.append(self.pick([b"NX", b"XX", b"nx"]))
        if self.chance(0.15):
            opts.append(b"GET")
        if self.chance(0.3):
            # No deadline in the past here: Redis 7.0 then keeps the dead key, and DBSIZE counts
            # it, until something reads it or its expiry cycle comes by; cairn drops it at once.
            opts += self.expiry_pair(self.pick([b"EX", b"PX", b"EXAT", b"PXAT", b"ex"]), past=False)
            if self.chance(0.05):
                opts += self.expiry_pair(self.pick([b"EX", b"PX", b"EXAT"]), past=False)
        elif self.chance(0.1):
            opts.append(b"KEEPTTL")
        if self.chance(0.03):
            opts.append(self.pick([b"NX", b"XX", b"KEEPTTL", b"EX", b"BOGUS"]))
        self.rng.shuffle(opts) if self.chance(0.3) else None
        return opts

    def getex_options(self) -> list[bytes]:
        r = self.rng.random()
        if r < 0.3:
            return []
        if r < 0.45:
            return [b"PERSIST"]
        if r < 0.9:
            return self.expiry_pair(self.pick([b"EX", b"PX", b"EXAT", b"PXAT"]), past=True)
        return self.pick([[b"PERSIST", b"EX", b"100"], [b"EX"], [b"BOGUS"], [b"EX", b"100", b"PX", b"5"],
                          [b"PERSIST", b"PERSIST"], [b"EX", b"100", b"EX", b"200"], [b"KEEPTTL"],
                          [b"EX", b"abc", b"PERSIST"]])

    def expire_command(self, k: bytes) -> list[bytes]:
        name = self.pick([b"EXPIRE", b"PEXPIRE", b"EXPIREAT", b"PEXPIREAT"])
        cmd = [name, k, self.expire_amount(name)]
        if self.chance(0.3):
            cmd += [self.pick(EXPIRE_OPTS) for _ in range(self.rng.randrange(1, 3))]
        return cmd

    def scan_command(self) -> list[bytes]:
        cmd = [b"SCAN", b"0"]
        if self.chance(0.5):
            cmd += [b"MATCH", self.pick(PATTERNS)]
        if self.chance(0.5):
            cmd += [b"COUNT", self.pick([b"1", b"2", b"5", b"100", b"0", b"-1", b"x"])]
        if self.chance(0.3):
            cmd += [b"TYPE", self.pick([b"string", b"hash", b"HASH", b"list"])]
        if self.chance(0.05):
            cmd[1] = self.pick([b"x", b"-1", b"", b"+0", b"18446744073709551616", b" 0", b"7"])
        if self.chance(0.05):
            cmd.append(b"MATCH")
        return cmd

    def range_arg(self) -> bytes:
        return self.pick([b"0", b"1", b"2", b"-1", b"-2", b"-100", b"100", b"5", b"x",
                          b"9223372036854775807", b"-9223372036854775808"])

    def pairs(self, n: int) -> list[bytes]:
        out = []
        for _ in range(n):
            out += [self.key(), self.value()]
        return out

    def field_pairs(self, n: int) -> list[bytes]:
        out = []
        for _ in range(n):
            out += [self.field(), self.value()]
        return out

    def stream(self, n: int):
        """(connection, command) pairs; connection 0 runs transactions, 1 interferes."""
        out = []
        while len(out) < n:
            r = self.rng.random()
            if r < 0.12:
                out += self.transaction()
            elif r < 0.3:
                out.append((1, self.plain()))
            elif r < 0.31:
                out.append((0, self.pick([[b"EXEC"], [b"DISCARD"], [b"UNWATCH"], [b"MULTI"], [b"DISCARD"]])))
            else:
                out.append((0, self.plain()))
        # An unterminated MULTI would leave connection 0 queueing into the next stream.
        out.append((0, [b"DISCARD"]))
        return out

    def transaction(self):
        ops = []
        watched = []
        if self.chance(0.6):
            watched = [self.key() for _ in range(self.rng.randrange(1, 3))]
            ops.append((0, [b"WATCH"] + watched))
            for _ in range(self.rng.randrange(0, 3)):
                ops.append((0, self.plain()))
        # The other client may touch what connection 0 watches.
        for _ in range(self.rng.randrange(0, 3)):
            ops.append((1, self.plain()))
        ops.append((0, [b"MULTI"]))
        for _ in range(self.rng.randrange(0, 6)):
            if self.chance(0.05):
                ops.append((0, self.pick([[b"MULTI"], [b"WATCH", self.key()], [b"UNWATCH"]])))
            else:
                ops.append((0, self.plain()))
            if self.chance(0.15):
                ops.append((1, self.plain()))
        ops.append((0, [b"DISCARD"] if self.chance(0.15) else [b"EXEC"]))
        return ops
