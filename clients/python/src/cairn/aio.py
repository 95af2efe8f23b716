"""The asyncio client: :class:`AsyncClient` and :class:`AsyncCache`.

The logic is the sync client's (the sans-I/O flows in :mod:`cairn._core` and the near cache in
:mod:`cairn.near`), driven with ``await``. Commands go through :mod:`redis.asyncio`. The
invalidation stream is the same :class:`~cairn.tracking.TrackingHub` thread as in the sync client,
so invalidations are applied even while the event loop is busy.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import (Any, Awaitable, Callable, Dict, Generator, Generic, Iterable, List, Mapping, Optional, Sequence,
                    TypeVar, Union)

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import commands as cmd
from ._core import DEFAULT, CacheCore, Cmd, Fetch, Pipe, Sleep, TTLArg, WriteIf
from .client import CONNECT_TIMEOUT, READ_TIMEOUT, _check_kwargs, endpoint_of
from .commands import TTL, Call
from .near import MISS, NearCache, peer_group
from .resilience import ON_ERROR, TRANSPORT_ERRORS, CacheUnavailable, CircuitBreaker
from .serializers import SerializerSpec, resolve_serializer
from .sql import SqlResult
from .tags import QueryLike, Tag, TagLike, TagPage
from .tracking import TrackingHub, connection_factory

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["AsyncClient", "AsyncCache"]

Fetcher = Callable[[], Union[T, Awaitable[T]]]


class AsyncClient:
    """The asyncio twin of :class:`cairn.Client`, on :class:`redis.asyncio.Redis` (same
    parameters, the same default timeouts and circuit breaker; ``redis_client`` wraps an
    existing ``redis.asyncio.Redis``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6380, *,
                 redis_client: Optional[aredis.Redis] = None, health_interval: float = 1.0,
                 health_timeout: Optional[float] = None, connect_timeout: Optional[float] = CONNECT_TIMEOUT,
                 read_timeout: Optional[float] = READ_TIMEOUT, breaker_interval: float = 5.0,
                 **redis_kwargs: Any) -> None:
        _check_kwargs(redis_kwargs)
        if redis_client is None:
            redis_kwargs.setdefault("socket_timeout", read_timeout)
            redis_kwargs.setdefault("socket_connect_timeout", connect_timeout)
            redis_kwargs.setdefault("retry", Retry(NoBackoff(), 0))
            redis_client = aredis.Redis(host=host, port=port, **redis_kwargs)
        elif redis_client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("wrap a redis.asyncio.Redis created with decode_responses=False")
        #: the underlying redis.asyncio client
        self.redis: aredis.Redis = redis_client
        #: the circuit breaker in front of every server call of this client
        self.breaker = CircuitBreaker(breaker_interval)
        self.endpoint = endpoint_of(redis_client)
        self._health = (health_interval, health_timeout)
        self._hub: Optional[TrackingHub] = None
        self._hub_lock = threading.Lock()
        self._caches: List["AsyncCache[Any]"] = []

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "AsyncClient":
        """``AsyncClient.from_url("redis://localhost:6380/0")`` (redis-py URL syntax)."""
        own = {k: kwargs.pop(k) for k in ("health_interval", "health_timeout", "connect_timeout", "read_timeout",
                                          "breaker_interval") if k in kwargs}
        _check_kwargs(kwargs)
        kwargs.setdefault("socket_timeout", own.pop("read_timeout", READ_TIMEOUT))
        kwargs.setdefault("socket_connect_timeout", own.pop("connect_timeout", CONNECT_TIMEOUT))
        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        return cls(redis_client=aredis.Redis.from_url(url, **kwargs), **own)

    # -- plumbing ------------------------------------------------------------------------------
    async def _guarded(self, fn: Callable[..., Awaitable[R]], *args: Any) -> R:
        """One server call through the circuit breaker (see :meth:`cairn.Client._guarded`)."""
        breaker = self.breaker
        breaker.before()
        try:
            out = await fn(*args)
        except CacheUnavailable:
            raise
        except TRANSPORT_ERRORS as e:
            breaker.failure(e)
            raise CacheUnavailable(f"cairn server unavailable: {e}") from e
        breaker.success()
        return out

    async def _call(self, call: Call[R]) -> R:
        return call.parse(await self._guarded(self.redis.execute_command, *call.args))

    @property
    def tracking(self) -> TrackingHub:
        """The invalidation stream shared by this client's near caches (created on first use)."""
        with self._hub_lock:
            if self._hub is None:
                pool = self.redis.connection_pool
                interval, timeout = self._health
                timeout = timeout if timeout is not None else max(1.0, 2 * interval)
                factory = connection_factory(pool.connection_class, pool.connection_kwargs, timeout)
                self._hub = TrackingHub(factory, health_interval=interval, health_timeout=timeout)
                self._hub.on_connect = self.breaker.success
            return self._hub

    async def _drive(self, flow: Generator[Any, Any, R], fetch: Optional[Fetcher[Any]] = None) -> R:
        """Runs a sans-I/O flow with awaits."""
        value: Any = None
        error: Optional[BaseException] = None
        try:
            while True:
                try:
                    effect = flow.throw(error) if error is not None else flow.send(value)
                except StopIteration as stop:
                    return stop.value
                value, error = None, None
                try:
                    value = await self._perform(effect, fetch)
                except BaseException as e:
                    error = e
        finally:
            flow.close()

    async def _perform(self, effect: Any, fetch: Optional[Fetcher[Any]]) -> Any:
        kind = type(effect)
        if kind is Fetch:
            assert fetch is not None
            result = fetch()
            if inspect.isawaitable(result):
                result = await result
            return result
        if kind is Sleep:
            await asyncio.sleep(effect.seconds)
            return None
        return await self._guarded(self._perform_io, effect)

    async def _perform_io(self, effect: Any) -> Any:
        r = self.redis
        kind = type(effect)
        if kind is Pipe:
            p = r.pipeline(transaction=effect.transaction)
            for c in effect.cmds:
                p.execute_command(*c)
            return await p.execute()
        if kind is Cmd:
            return await r.execute_command(*effect.args)
        if kind is WriteIf:
            async with r.pipeline(transaction=True) as p:
                try:
                    await p.watch(effect.key)
                    if await p.execute_command("GET", effect.key) != effect.expect:
                        await p.unwatch()
                        return False
                    p.multi()
                    p.execute_command(*effect.cmd)
                    await p.execute()
                    return True
                except redis.WatchError:
                    return False
        raise TypeError(f"unknown effect {effect!r}")

    async def ping(self) -> bool:
        """PING."""
        return bool(await self._guarded(self.redis.ping))

    async def aclose(self) -> None:
        """Closes near caches, the invalidation stream and the connection pool."""
        for c in list(self._caches):
            c.close()
        if self._hub is not None:
            hub, self._hub = self._hub, None
            await asyncio.get_running_loop().run_in_executor(None, hub.close)
        await self.redis.aclose() if hasattr(self.redis, "aclose") else await self.redis.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- typed tags (see cairn.Client for the documentation) ------------------------------------
    async def tag_set(self, key: Union[str, bytes], value: Union[str, bytes, int, float], *,
                      ttl: Optional[TTL] = None, tags: Iterable[TagLike] = ()) -> bool:
        """``TAG.SET``: sets ``key`` (replacing its tags with ``tags``), with an optional TTL."""
        return await self._call(cmd.tag_set(key, value, ttl=ttl, tags=tags))

    async def tag_add(self, key: Union[str, bytes], *tags: TagLike) -> int:
        """``TAG.ADD``: adds tags; returns how many were new."""
        return await self._call(cmd.tag_add(key, tags))

    async def tag_rem(self, key: Union[str, bytes], *tags: TagLike) -> int:
        """``TAG.REM``: removes tags; returns how many went."""
        return await self._call(cmd.tag_rem(key, tags))

    async def tag_of(self, key: Union[str, bytes]) -> List[Tag]:
        """``TAG.OF``: the record's tags."""
        return await self._call(cmd.tag_of(key))

    async def tag_get(self, query: QueryLike, *, limit: Optional[int] = None,
                      cursor: Optional[str] = None) -> "TagPage[Dict[bytes, Optional[bytes]]]":
        """``TAG.GET``: one page of the group's keys and values."""
        return await self._call(cmd.tag_get(query, limit=limit, cursor=cursor))

    async def tag_get_all(self, query: QueryLike, *, page_size: Optional[int] = None) -> Dict[bytes, Optional[bytes]]:
        """Every key and value of the group, following cursors when ``page_size`` is given."""
        out: Dict[bytes, Optional[bytes]] = {}
        cursor: Optional[str] = None
        while True:
            page = await self.tag_get(query, limit=page_size, cursor=cursor)
            out.update(page.items)
            if page.done:
                return out
            cursor = page.cursor

    async def tag_keys(self, query: QueryLike, *, limit: Optional[int] = None,
                       cursor: Optional[str] = None) -> "TagPage[List[bytes]]":
        """``TAG.KEYS``: one page of the group's keys."""
        return await self._call(cmd.tag_keys(query, limit=limit, cursor=cursor))

    async def tag_count(self, query: QueryLike) -> int:
        """``TAG.COUNT``."""
        return await self._call(cmd.tag_count(query))

    async def tag_del(self, query: QueryLike) -> int:
        """``TAG.DEL``: removes every matching record; returns how many."""
        return await self._call(cmd.tag_del(query))

    # -- SQL tables ----------------------------------------------------------------------------
    async def sql_exec(self, sql: str, *params: Any) -> int:
        """``SQL.EXEC``: returns rows changed."""
        return await self._call(cmd.sql_exec(sql, params))

    async def sql_query(self, sql: str, *params: Any) -> SqlResult:
        """``SQL.QUERY``: column names and rows (RESP2: integers, bytes for text/blob/real;
        RESP3: integers, floats, bytes, None)."""
        return await self._call(cmd.sql_query(sql, params))

    async def sql_expire(self, table: str, *, age: Optional[float] = None, rows: Optional[int] = None,
                         ops: Optional[int] = None) -> Any:
        """``SQL.EXPIRE``: sets, or with no rule shows, the table's expiry rules."""
        return await self._call(cmd.sql_expire(table, age=age, rows=rows, ops=ops))

    async def sql_tables(self) -> List[str]:
        """``SQL.TABLES``."""
        return await self._call(cmd.sql_tables())

    async def sql_describe(self, table: str) -> List[Dict[str, Any]]:
        """``SQL.DESCRIBE``: the table's columns, ``{"name", "type", "notnull", "default", "pk"}``."""
        return await self._call(cmd.sql_describe(table))

    # -- typed caches --------------------------------------------------------------------------
    async def cache(self, namespace: str, serializer: SerializerSpec = "json", *, ttl: Optional[TTL] = None,
                    near: bool = True, max_items: int = 10_000, max_local_ttl: float = 60.0,
                    stale_ttl: Optional[TTL] = None, lease_ttl: TTL = 5.0, lease_wait: Optional[TTL] = None,
                    poll_interval: float = 0.01, on_error: str = "raise",
                    ready_timeout: Optional[float] = 5.0) -> "AsyncCache[Any]":
        """A typed cache; the parameters are :meth:`cairn.Client.cache`'s. Awaitable because it
        waits (off the event loop) for the invalidation stream to cover the namespace."""
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error is one of {ON_ERROR}, not {on_error!r}")
        near_cache = NearCache(max_items, max_local_ttl) if near else None
        core: CacheCore[Any] = CacheCore(namespace, resolve_serializer(serializer), ttl=ttl, stale_ttl=stale_ttl,
                                         near=near_cache, lease_ttl=lease_ttl, lease_wait=lease_wait,
                                         poll_interval=poll_interval, peers=peer_group(self.endpoint, namespace))
        c: AsyncCache[Any] = AsyncCache(self, core, on_error=on_error)
        if near_cache is not None:
            hub = self.tracking
            await asyncio.get_running_loop().run_in_executor(None, hub.register, namespace, near_cache, ready_timeout)
        self._caches.append(c)
        return c


class AsyncCache(Generic[T]):
    """The asyncio twin of :class:`cairn.Cache` (same consistency rules). Single-flight is per
    event loop: use one AsyncCache from one loop."""

    def __init__(self, client: AsyncClient, core: CacheCore[T], *, on_error: str = "raise") -> None:
        self._client = client
        self._core = core
        self._near = core.near
        self._fail_open = on_error == "fetch"
        self._flights: Dict[str, "asyncio.Future[Any]"] = {}

    async def _read(self, flow: Generator[Any, Any, R], miss: Callable[[], R]) -> R:
        if not self._fail_open:
            return await self._client._drive(flow)
        try:
            return await self._client._drive(flow)
        except CacheUnavailable:
            return miss()

    @property
    def namespace(self) -> str:
        """The namespace: keys are stored as ``<namespace>:<key>``."""
        return self._core.namespace

    @property
    def near(self) -> Optional[NearCache]:
        """The near cache, or None when ``near=False``."""
        return self._near

    def full_key(self, key: str) -> bytes:
        """The server key behind ``key``."""
        return self._core.full_key(key)

    def get_local(self, key: str, default: Optional[T] = None) -> Optional[T]:
        """The near cache's fresh value for ``key`` without any I/O, or ``default``."""
        near = self._near
        if near is None:
            return default
        return near.get(key, default)

    async def get(self, key: str, default: Optional[T] = None) -> Optional[T]:
        """The value of ``key``, or ``default`` when it is missing (or stale)."""
        near = self._near
        if near is not None:
            value, _ = near.read(key)
            if value is not MISS:
                return value
        return await self._read(self._core.get(key, default), lambda: default)

    async def get_many(self, keys: Sequence[str]) -> Dict[str, T]:
        """The values of the present keys among ``keys``, one round trip for the misses."""
        return await self._read(self._core.get_many(keys), dict)

    async def get_or_fetch(self, key: str, fetch: Fetcher[T], ttl: TTLArg = DEFAULT,
                           tags: Optional[Iterable[TagLike]] = None) -> T:
        """The value of ``key``, computed by ``fetch()`` (sync or async) when missing; single-flight
        in the loop and stampede-protected across processes."""
        near = self._near
        stale_entry = None
        if near is not None:
            value, stale_entry = near.read(key)
            if value is not MISS:
                return value
        flight = self._flights.get(key)
        if flight is not None:
            if stale_entry is not None:
                return stale_entry.value
            return await asyncio.shield(flight)
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            fetched: List[Any] = []

            async def fetch_once() -> Any:
                result = fetch()
                if inspect.isawaitable(result):
                    result = await result
                fetched.append(result)
                return result

            try:
                value = await self._client._drive(self._core.fetch(key, ttl, tags), fetch_once)
            except CacheUnavailable:
                if not self._fail_open:
                    raise
                value = fetched[-1] if fetched else await fetch_once()
            flight.set_result(value)
            return value
        except BaseException as e:
            if not flight.done():
                flight.set_exception(e)
                flight.exception()  # mark retrieved: followers may not exist
            raise
        finally:
            self._flights.pop(key, None)

    async def set(self, key: str, value: T, ttl: TTLArg = DEFAULT, tags: Optional[Iterable[TagLike]] = None) -> None:
        """Stores ``value`` (with ``tags``: a TAG.SET, replacing the record's tags)."""
        await self._read(self._core.set(key, value, ttl, tags), lambda: None)

    async def set_many(self, items: Mapping[str, T], ttl: TTLArg = DEFAULT,
                       tags: Optional[Iterable[TagLike]] = None) -> None:
        """:meth:`cairn.Cache.set_many`."""
        await self._read(self._core.set_many(items, ttl, tags), lambda: None)

    async def add(self, key: str, value: T, ttl: TTLArg = DEFAULT, tags: Optional[Iterable[TagLike]] = None) -> bool:
        """:meth:`cairn.Cache.add`."""
        return await self._read(self._core.add(key, value, ttl, tags), lambda: False)

    async def incr(self, key: str, delta: int = 1, ttl: TTLArg = DEFAULT) -> int:
        """:meth:`cairn.Cache.incr`."""
        return await self._client._drive(self._core.incr(key, delta, ttl))

    async def decr(self, key: str, delta: int = 1, ttl: TTLArg = DEFAULT) -> int:
        return await self.incr(key, -delta, ttl)

    async def touch(self, key: str, ttl: TTLArg = DEFAULT) -> bool:
        """:meth:`cairn.Cache.touch`."""
        return await self._read(self._core.touch(key, ttl), lambda: False)

    async def delete_many(self, keys: Iterable[str]) -> int:
        """:meth:`cairn.Cache.delete_many`."""
        return await self._client._drive(self._core.delete(keys))  # type: ignore[arg-type]

    async def delete(self, *keys: str) -> int:
        """Deletes keys; returns how many existed."""
        return await self._client._drive(self._core.delete(keys))

    async def get_by_tag(self, query: QueryLike) -> Dict[str, T]:
        """This namespace's values whose records match ``query`` (one atomic TAG.GET)."""
        return await self._client._drive(self._core.get_by_tag(query))

    async def keys_by_tag(self, query: QueryLike) -> List[str]:
        """This namespace's keys whose records match ``query``."""
        return await self._client._drive(self._core.keys_by_tag(query))

    async def delete_by_tag(self, query: QueryLike) -> int:
        """Deletes every record matching ``query`` (every namespace: tags are global); the near
        cache drops the deleted keys before this returns. Returns how many."""
        return await self._client._drive(self._core.delete_by_tag(query))

    async def prefetch(self, keys: Optional[Sequence[str]] = None, *, tag: Optional[QueryLike] = None) -> int:
        """Warms the near cache with ``keys`` and/or the keys matching ``tag``; returns how many
        values were found."""
        return await self._client._drive(self._core.prefetch(keys, tag))

    async def sync(self, timeout: float = 1.0) -> bool:
        """Waits (off the event loop) until every invalidation sent before the call is applied."""
        if self._near is None:
            return True
        hub = self._client.tracking
        return await asyncio.get_running_loop().run_in_executor(None, hub.sync, timeout)

    def clear_local(self) -> None:
        """Empties the near cache (the server is untouched)."""
        if self._near is not None:
            self._near.flush()

    def stats(self) -> Dict[str, int]:
        """Near-cache counters (empty without a near cache)."""
        return self._near.stats.as_dict() if self._near is not None else {}

    def close(self) -> None:
        """Detaches the near cache from the invalidation stream."""
        if self._near is not None:
            if self._client._hub is not None:
                self._client._hub.unregister(self._near)
            if self._core.peers is not None:
                self._core.peers.discard(self._near)
        if self in self._client._caches:
            self._client._caches.remove(self)
