"""The typed cache's logic, written once as sans-I/O generators.

Each operation is a generator that *yields effects* (run this command, run this pipeline, call the
fetch function, sleep, wait for the invalidation barrier) and receives their results. The sync
client drives the generators with blocking calls, the asyncio client with ``await``: the logic,
including the near-cache fill rules and the lease protocol, exists once.
"""

from __future__ import annotations

import enum
import os
import random
import time
from typing import Any, Callable, Dict, Generator, Generic, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import envelope
from .commands import TTL, ttl_ms
from .near import MISS, NearCache, PeerGroup
from .serializers import Serializer
from .tags import QueryLike, TagLike, parse_get_page, parse_keys_page, tag_args, to_query

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["DEFAULT", "TTLArg", "CacheCore", "Cmd", "Pipe", "WriteIf", "Fetch", "Sleep", "FETCH"]


class _Default(enum.Enum):
    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default.DEFAULT
"""Sentinel: "use the cache's configured TTL" (pass ``ttl=None`` for no expiry)."""

TTLArg = Union[TTL, None, _Default]


# -- effects ---------------------------------------------------------------------------------------

class Cmd:
    """Run one command; the result is redis-py's reply."""

    __slots__ = ("args",)

    def __init__(self, *args: Any) -> None:
        self.args = args


class Pipe:
    """Run commands in one round trip (in MULTI/EXEC when ``transaction``); the result is the list
    of replies."""

    __slots__ = ("cmds", "transaction")

    def __init__(self, cmds: Sequence[Tuple[Any, ...]], transaction: bool = False) -> None:
        self.cmds = cmds
        self.transaction = transaction


class WriteIf:
    """Run ``cmd`` atomically only if ``key`` currently holds ``expect`` (None: is absent), with
    WATCH/GET/MULTI/EXEC. The result is whether it ran."""

    __slots__ = ("key", "expect", "cmd")

    def __init__(self, key: bytes, expect: Optional[bytes], cmd: Tuple[Any, ...]) -> None:
        self.key = key
        self.expect = expect
        self.cmd = cmd


class Fetch:
    """Call the caller's fetch function; the result is its value."""

    __slots__ = ()


FETCH = Fetch()


class Sleep:
    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Effect = Union[Cmd, Pipe, WriteIf, Fetch, Sleep]
Flow = Generator[Effect, Any, T]


class Found:
    """A value read from the server: decoded value, soft expiry (unix ms, 0: none), raw bytes."""

    __slots__ = ("value", "soft_ms", "raw")

    def __init__(self, value: Any, soft_ms: int, raw: bytes) -> None:
        self.value = value
        self.soft_ms = soft_ms
        self.raw = raw

    def fresh(self, now_ms: int) -> bool:
        return not self.soft_ms or self.soft_ms > now_ms


def _now_ms() -> int:
    return int(time.time() * 1000)


LEASE_ROOT = b"__lease__:"


def run_flow(flow: Generator[Any, Any, R], perform: Callable[[Any], Any]) -> R:
    """Runs a sans-I/O flow to completion with blocking calls: each effect it yields is
    `perform`ed and the result (or the exception, which the flow cleans up after and
    re-raises) is sent back in."""
    value: Any = None
    error: Optional[BaseException] = None
    while True:
        try:
            effect = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            value = perform(effect)
        except BaseException as e:
            error = e


class CacheCore(Generic[T]):
    """Configuration and flows of one typed cache namespace (see :class:`cairn.Cache`)."""

    def __init__(self, namespace: str, serializer: Serializer, *, ttl: Optional[TTL], stale_ttl: Optional[TTL],
                 near: Optional[NearCache], lease_ttl: TTL, lease_wait: Optional[TTL], poll_interval: float,
                 peers: Optional[PeerGroup] = None, wall_ms: Callable[[], int] = _now_ms,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"a cache needs a non-empty str namespace, not {namespace!r}")
        if not isinstance(poll_interval, (int, float)) or isinstance(poll_interval, bool) or poll_interval <= 0:
            raise ValueError(f"poll_interval must be a positive number of seconds, not {poll_interval!r}")
        self.namespace = namespace
        self.prefix = namespace.encode("utf-8") + b":"
        # Leases live outside the namespace: a near cache's BCAST tracking covers "<ns>:", and
        # every lease taken or released there would be pushed to every process as an invalidation.
        self.lease_prefix = LEASE_ROOT + self.prefix
        self.serializer = serializer
        self.ttl_ms = ttl_ms(ttl)
        self.stale_ms = ttl_ms(stale_ttl) if stale_ttl else None
        if self.stale_ms and not self.ttl_ms:
            raise ValueError("stale_ttl needs a ttl (the soft expiry)")
        self.near = near
        #: every near cache of this namespace in the process (read-your-writes across caches)
        self.peers = peers
        if peers is not None and near is not None:
            peers.add(near)
        self.now_ms = wall_ms  # unix ms, for soft expiries; injectable for tests
        self.monotonic = monotonic
        self.lease_ms = ttl_ms(lease_ttl) or 5000
        wait_ms = ttl_ms(lease_wait) if lease_wait is not None else self.lease_ms
        self.lease_wait = (wait_ms or 0) / 1000.0
        self.poll_interval = float(poll_interval)

    # -- keys and values -----------------------------------------------------------------------
    def full_key(self, key: str) -> bytes:
        if not isinstance(key, str):
            raise TypeError(f"cache keys are str, not {type(key).__name__}")
        return self.prefix + key.encode("utf-8")

    def lease_key(self, key: str) -> bytes:
        return self.lease_prefix + key.encode("utf-8")

    def strip(self, full: bytes) -> Optional[str]:
        if not full.startswith(self.prefix):
            return None
        return full[len(self.prefix):].decode("utf-8", "surrogateescape")

    def drop_local(self, keys: Sequence[str]) -> None:
        """Read-your-writes: drops ``keys`` from this process's near caches of the namespace
        (this cache's and its peers') and cancels their fills in flight."""
        if self.near is not None:
            self.near.invalidate_many(keys)
        if self.peers is not None:
            self.peers.invalidate_many(keys, besides=self.near)

    def resolve_ttl(self, ttl: TTLArg) -> Optional[int]:
        return self.ttl_ms if ttl is DEFAULT else ttl_ms(ttl)  # type: ignore[arg-type]

    def encode(self, value: Any, ttl: TTLArg) -> Tuple[bytes, Optional[int]]:
        """The stored bytes and the server PX (None: no expiry)."""
        payload = self.serializer.dumps(value)
        px = self.resolve_ttl(ttl)
        if self.stale_ms and px:
            return envelope.encode(payload, self.now_ms() + px), px + self.stale_ms
        return envelope.encode(payload), px

    def decode(self, raw: bytes) -> Tuple[Any, int]:
        payload, soft = envelope.decode(raw)
        return self.serializer.loads(payload), soft

    def write_cmd(self, full: bytes, data: bytes, px: Optional[int],
                  tags: Optional[Iterable[TagLike]]) -> Tuple[Any, ...]:
        args: List[Any]
        if tags:
            args = ["TAG.SET", full, data]
            if px:
                args += ["PX", px]
            flat = tag_args(tags)
            for i in range(0, len(flat), 2):
                args += ["TAG", flat[i], flat[i + 1]]
        else:
            args = ["SET", full, data]
            if px:
                args += ["PX", px]
        return tuple(args)

    # -- reads ---------------------------------------------------------------------------------
    def read(self, keys: Sequence[str]) -> Flow[Dict[str, Optional[Found]]]:
        """Reads ``keys`` in one round trip and fills the near cache with what it may keep."""
        near = self.near
        fulls = [self.full_key(k) for k in keys]
        tokens = [near.begin_fill(k) for k in keys] if near is not None else None
        cmds: List[Tuple[Any, ...]] = []
        for f in fulls:
            cmds.append(("GET", f))
            cmds.append(("PTTL", f))
        out: Dict[str, Optional[Found]] = {}
        try:
            replies = yield Pipe(cmds)
            now = self.now_ms()
            for i, k in enumerate(keys):
                raw, pttl = replies[2 * i], replies[2 * i + 1]
                token = tokens[i] if tokens is not None else None
                if raw is None or (isinstance(pttl, int) and pttl == -2):
                    if token is not None:
                        near.abort_fill(token)  # type: ignore[union-attr]
                    out[k] = None
                    continue
                value, soft = self.decode(raw)
                out[k] = Found(value, soft, raw)
                if token is not None:
                    server_ttl = pttl / 1000.0 if isinstance(pttl, int) and pttl > 0 else None
                    soft_in = (soft - now) / 1000.0 if soft else None
                    near.complete_fill(token, value, server_ttl, soft_in)  # type: ignore[union-attr]
        except BaseException:
            if tokens is not None:
                for token in tokens:  # idempotent for tokens already used
                    near.abort_fill(token)  # type: ignore[union-attr]
            raise
        return out

    def get(self, key: str, default: Any) -> Flow[Any]:
        found = (yield from self.read([key]))[key]
        if found is None or not found.fresh(self.now_ms()):
            return default
        return found.value

    def get_many(self, keys: Sequence[str]) -> Flow[Dict[str, Any]]:
        out: Dict[str, Any] = {}
        missing: List[str] = []
        near = self.near
        for k in keys:
            if near is not None:
                v, _ = near.read(k)
                if v is not MISS:
                    out[k] = v
                    continue
            missing.append(k)
        if missing:
            found = yield from self.read(missing)
            now = self.now_ms()
            for k in missing:
                f = found[k]
                if f is not None and f.fresh(now):
                    out[k] = f.value
        return out

    # -- writes --------------------------------------------------------------------------------
    def set(self, key: str, value: Any, ttl: TTLArg, tags: Optional[Iterable[TagLike]]) -> Flow[None]:
        full = self.full_key(key)
        data, px = self.encode(value, ttl)
        try:
            yield Cmd(*self.write_cmd(full, data, px, tags))
        finally:
            # Read-your-writes: fills begun before this point are cancelled, later ones read
            # the server after the write.
            self.drop_local([key])

    def set_many(self, items: Mapping[str, Any], ttl: TTLArg, tags: Optional[Iterable[TagLike]]) -> Flow[None]:
        if not isinstance(items, Mapping):
            raise TypeError(f"set_many takes a mapping of keys to values, not {type(items).__name__}")
        keys = list(items)
        tag_list = list(tags) if tags else None
        cmds = []
        for k in keys:
            data, px = self.encode(items[k], ttl)
            cmds.append(self.write_cmd(self.full_key(k), data, px, tag_list))
        if not cmds:
            return None
        try:
            yield Pipe(cmds, transaction=True)
        finally:
            self.drop_local(keys)
        return None

    def add(self, key: str, value: Any, ttl: TTLArg, tags: Optional[Iterable[TagLike]]) -> Flow[bool]:
        full = self.full_key(key)
        data, px = self.encode(value, ttl)
        try:
            if tags:
                stored = yield WriteIf(full, None, self.write_cmd(full, data, px, tags))
            else:
                args: List[Any] = ["SET", full, data, "NX"]
                if px:
                    args += ["PX", px]
                stored = (yield Cmd(*args)) is not None
        finally:
            self.drop_local([key])
        return bool(stored)

    def check_counter(self) -> None:
        """incr needs integers stored as decimal text (what INCRBY reads)."""
        try:
            ok = self.serializer.loads(b"7") == 7 and self.serializer.dumps(7) == b"7"
        except Exception:
            ok = False
        if not ok:
            raise TypeError(f"incr needs a serializer that stores integers as decimal text (\"json\"), "
                            f"not {getattr(self.serializer, 'name', self.serializer)!r}")
        if self.stale_ms:
            raise TypeError("incr cannot work on a cache with stale_ttl (values are stored in an envelope)")

    def incr(self, key: str, delta: int, ttl: TTLArg) -> Flow[int]:
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"incr's delta must be an int, not {type(delta).__name__}")
        self.check_counter()
        full = self.full_key(key)
        px = self.resolve_ttl(ttl)
        # A missing key starts at 0 with the cache's TTL; an existing one keeps its TTL.
        create: List[Any] = ["SET", full, b"0", "NX"]
        if px:
            create += ["PX", px]
        try:
            _, n = yield Pipe([tuple(create), ("INCRBY", full, delta)], transaction=True)
        finally:
            self.drop_local([key])
        if isinstance(n, BaseException):
            raise n
        return int(n)

    def touch(self, key: str, ttl: TTLArg) -> Flow[bool]:
        full = self.full_key(key)
        px = self.resolve_ttl(ttl)
        try:
            if px:
                done = yield Cmd("PEXPIRE", full, px)
            else:
                # PERSIST answers 0 for a key without a TTL: ask whether it exists instead.
                _, done = yield Pipe([("PERSIST", full), ("EXISTS", full)], transaction=True)
        finally:
            self.drop_local([key])
        return bool(done)

    def delete(self, keys: Sequence[str]) -> Flow[int]:
        if isinstance(keys, str):
            raise TypeError("delete_many takes a sequence of keys, not one str")
        keys = list(keys)
        if not keys:
            return 0
        fulls = [self.full_key(k) for k in keys]
        try:
            n = yield Cmd("DEL", *fulls)
        finally:
            self.drop_local(keys)
        return int(n)

    # -- get_or_fetch --------------------------------------------------------------------------
    def fetch(self, key: str, ttl: TTLArg, tags: Optional[Iterable[TagLike]]) -> Flow[Any]:
        """The slow path of get_or_fetch: read, else lease + fetch + store, else wait or serve stale.

        Protocol (cross-process stampede protection):

        1. Read the key. Fresh: done.
        2. Missing or stale: try to take the lease ``SET __lease__:<ns>:<key> <token> NX PX lease_ttl``.
           The winner calls fetch, stores the value only if the key still holds what it saw
           (WATCH/MULTI, so a newer write is never overwritten), and releases the lease if it is
           still its own.
        3. A loser with a stale value returns it at once (stale-while-revalidate). A loser with
           nothing polls the key every ``poll_interval`` (with jitter), taking the lease itself
           if the holder gives it up, for at most ``lease_wait``; then it fetches on its own and
           stores only if the key is still absent.
        """
        full = self.full_key(key)
        lease = self.lease_key(key)
        stale: Optional[Found] = None
        found = (yield from self.read([key]))[key]
        if found is not None:
            if found.fresh(self.now_ms()):
                return found.value
            stale = found
        deadline: Optional[float] = None
        while True:
            token = os.urandom(12).hex().encode()
            got = yield Cmd("SET", lease, token, "NX", "PX", self.lease_ms)
            if got:
                return (yield from self._fetch_and_store(key, full, lease, token, ttl, tags, stale))
            if stale is not None:
                return stale.value
            now = self.monotonic()
            if deadline is None:
                deadline = now + self.lease_wait
            if now >= deadline:
                break
            yield Sleep(min(deadline - now, self.poll_interval * random.uniform(0.75, 1.25)))
            found = (yield from self.read([key]))[key]
            if found is not None:
                if found.fresh(self.now_ms()):
                    return found.value
                stale = found
        # The holder is taking too long: fetch without the lease, store only into a gap.
        value = yield FETCH
        yield from self._store_fetched(key, full, None, value, ttl, tags)
        return value

    def _store_fetched(self, key: str, full: bytes, expect: Optional[bytes], value: Any, ttl: TTLArg,
                       tags: Optional[Iterable[TagLike]]) -> Flow[None]:
        """Stores a fetched value if the key still holds ``expect``, and keeps it in the near cache
        (this process is likely to read it again; see NearCache.begin_own_fill)."""
        data, px = self.encode(value, ttl)
        near = self.near
        token = near.begin_own_fill(key) if near is not None else None
        if self.peers is not None:
            self.peers.invalidate_many([key], besides=near)
        stored = False
        try:
            stored = yield WriteIf(full, expect, self.write_cmd(full, data, px, tags))
        finally:
            if near is not None and token is not None:
                if stored:
                    kept, soft = self.decode(data)
                    soft_in = (soft - self.now_ms()) / 1000.0 if soft else None
                    near.complete_fill(token, kept, px / 1000.0 if px else None, soft_in)
                else:
                    near.own_write_failed(token)

    def _fetch_and_store(self, key: str, full: bytes, lease: bytes, token: bytes, ttl: TTLArg,
                         tags: Optional[Iterable[TagLike]], stale: Optional[Found]) -> Flow[Any]:
        try:
            value = yield FETCH
            yield from self._store_fetched(key, full, stale.raw if stale is not None else None, value, ttl, tags)
        except BaseException:
            try:
                yield WriteIf(lease, token, ("DEL", lease))
            except Exception:
                pass
            raise
        yield WriteIf(lease, token, ("DEL", lease))
        return value

    # -- tags ----------------------------------------------------------------------------------
    def get_by_tag(self, query: QueryLike) -> Flow[Dict[str, Any]]:
        reply = yield Cmd("TAG.GET", *to_query(query).args())
        page = parse_get_page(reply)
        now = self.now_ms()
        out: Dict[str, Any] = {}
        for full, raw in page.items.items():
            key = self.strip(full)
            if key is None or raw is None:
                continue
            value, soft = self.decode(raw)
            if soft and soft <= now:
                continue
            out[key] = value
        return out

    def keys_by_tag(self, query: QueryLike) -> Flow[List[str]]:
        reply = yield Cmd("TAG.KEYS", *to_query(query).args())
        page = parse_keys_page(reply)
        keys = [self.strip(k) for k in page.items]
        return [k for k in keys if k is not None]

    def delete_by_tag(self, query: QueryLike) -> Flow[int]:
        # TAG.KEYS and TAG.DEL in one transaction: the exact keys deleted, so this process's near
        # cache drops them before returning (read-your-writes) without waiting for the push.
        args = to_query(query).args()
        keys_reply, n = yield Pipe([("TAG.KEYS", *args), ("TAG.DEL", *args)], transaction=True)
        if self.near is not None or self.peers is not None:
            mine = [self.strip(k) for k in parse_keys_page(keys_reply).items]
            self.drop_local([k for k in mine if k is not None])
        return int(n)

    def prefetch(self, keys: Optional[Sequence[str]], query: Optional[QueryLike], chunk: int = 256) -> Flow[int]:
        wanted: List[str] = list(keys or ())
        if query is not None:
            wanted += yield from self.keys_by_tag(query)
        loaded = 0
        for i in range(0, len(wanted), chunk):
            found = yield from self.read(wanted[i:i + chunk])
            loaded += sum(1 for f in found.values() if f is not None)
        return loaded

