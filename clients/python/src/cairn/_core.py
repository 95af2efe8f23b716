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
from typing import Any, Dict, Generator, Generic, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

from . import envelope
from .commands import TTL, ttl_ms
from .near import MISS, NearCache
from .serializers import Serializer
from .tags import QueryLike, TagLike, parse_get_page, parse_keys_page, tag_args, to_query

T = TypeVar("T")

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

    def fresh(self, now_ms: Optional[int] = None) -> bool:
        return not self.soft_ms or self.soft_ms > (now_ms if now_ms is not None else _now_ms())


def _now_ms() -> int:
    return int(time.time() * 1000)


LEASE_ROOT = b"__lease__:"


class CacheCore(Generic[T]):
    """Configuration and flows of one typed cache namespace (see :class:`cairn.Cache`)."""

    def __init__(self, namespace: str, serializer: Serializer, *, ttl: Optional[TTL], stale_ttl: Optional[TTL],
                 near: Optional[NearCache], lease_ttl: TTL, lease_wait: Optional[TTL], poll_interval: float) -> None:
        if not namespace or not isinstance(namespace, str):
            raise ValueError("a cache needs a non-empty str namespace")
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

    def resolve_ttl(self, ttl: TTLArg) -> Optional[int]:
        return self.ttl_ms if ttl is DEFAULT else ttl_ms(ttl)  # type: ignore[arg-type]

    def encode(self, value: Any, ttl: TTLArg) -> Tuple[bytes, Optional[int]]:
        """The stored bytes and the server PX (None: no expiry)."""
        payload = self.serializer.dumps(value)
        px = self.resolve_ttl(ttl)
        if self.stale_ms and px:
            return envelope.encode(payload, _now_ms() + px), px + self.stale_ms
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
            now = _now_ms()
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
        if found is None or not found.fresh():
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
            now = _now_ms()
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
            if self.near is not None:
                self.near.invalidate(key)

    def delete(self, keys: Sequence[str]) -> Flow[int]:
        if not keys:
            return 0
        fulls = [self.full_key(k) for k in keys]
        try:
            n = yield Cmd("DEL", *fulls)
        finally:
            if self.near is not None:
                self.near.invalidate_many(keys)
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
            if found.fresh():
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
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.lease_wait
            if now >= deadline:
                break
            yield Sleep(min(deadline - now, self.poll_interval * random.uniform(0.75, 1.25)))
            found = (yield from self.read([key]))[key]
            if found is not None:
                if found.fresh():
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
        stored = False
        try:
            stored = yield WriteIf(full, expect, self.write_cmd(full, data, px, tags))
        finally:
            if near is not None and token is not None:
                if stored:
                    kept, soft = self.decode(data)
                    soft_in = (soft - _now_ms()) / 1000.0 if soft else None
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
        now = _now_ms()
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
        if self.near is not None:
            mine = [self.strip(k) for k in parse_keys_page(keys_reply).items]
            self.near.invalidate_many([k for k in mine if k is not None])
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

