"""The synchronous client: :class:`Client` and its typed :class:`Cache`."""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, Generator, Generic, Iterable, List, Optional, Sequence, TypeVar, Union

import redis

from . import commands as cmd
from ._core import DEFAULT, CacheCore, Cmd, Fetch, Pipe, Sleep, TTLArg, WriteIf
from .commands import TTL, Call
from .near import MISS, NearCache
from .serializers import SerializerSpec, resolve_serializer
from .sql import SqlResult
from .tags import QueryLike, Tag, TagLike, TagPage
from .tracking import TrackingHub, connection_factory

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Client", "Cache"]


def _check_kwargs(kwargs: Dict[str, Any]) -> None:
    if kwargs.get("decode_responses"):
        raise ValueError("cairn clients work in bytes (decode_responses=False); typed caches decode values "
                         "with their serializer")


class _Flight:
    __slots__ = ("event", "value", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None


_CACHES: "weakref.WeakSet[Cache[Any]]" = weakref.WeakSet()


def _reset_caches_in_child() -> None:
    for c in list(_CACHES):
        c._flights = {}
        c._flights_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_caches_in_child)


class Client:
    """A cairn client on top of redis-py (its connection pool, parsers and errors).

    ``Client(host, port, **redis_kwargs)`` builds a :class:`redis.Redis`; ``Client(redis_client=r)``
    wraps an existing one (it must not decode responses). Everything redis-py offers is on
    :attr:`redis`; this class adds typed methods for cairn's tag and SQL commands and
    :meth:`cache`, a typed cache with an optional near cache.

    :param health_interval: seconds of silence after which the near caches' invalidation stream
        is health-checked (PING).
    :param health_timeout: the stream counts as lost (near caches flushed, then reconnected) when
        a health check gets no answer within this many seconds; default ``max(1, 2 *
        health_interval)``. Also the socket timeout of the stream's connections.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 6380, *, redis_client: Optional[redis.Redis] = None,
                 health_interval: float = 1.0, health_timeout: Optional[float] = None, **redis_kwargs: Any) -> None:
        _check_kwargs(redis_kwargs)
        if redis_client is None:
            redis_kwargs.setdefault("socket_timeout", 10.0)
            redis_kwargs.setdefault("socket_connect_timeout", 5.0)
            redis_client = redis.Redis(host=host, port=port, **redis_kwargs)
        elif redis_client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("wrap a redis.Redis created with decode_responses=False")
        #: the underlying redis-py client
        self.redis: redis.Redis = redis_client
        self._health = (health_interval, health_timeout)
        self._hub: Optional[TrackingHub] = None
        self._hub_lock = threading.Lock()
        self._caches: List["Cache[Any]"] = []

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "Client":
        """``Client.from_url("redis://localhost:6380/0")`` (redis-py URL syntax)."""
        health = {k: kwargs.pop(k) for k in ("health_interval", "health_timeout") if k in kwargs}
        _check_kwargs(kwargs)
        return cls(redis_client=redis.Redis.from_url(url, **kwargs), **health)

    # -- plumbing ------------------------------------------------------------------------------
    def _call(self, call: Call[R]) -> R:
        return call.parse(self.redis.execute_command(*call.args))

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
            return self._hub

    def _drive(self, flow: Generator[Any, Any, R], fetch: Optional[Callable[[], Any]] = None) -> R:
        """Runs a sans-I/O flow with blocking calls."""
        value: Any = None
        error: Optional[BaseException] = None
        while True:
            try:
                effect = flow.throw(error) if error is not None else flow.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                value = self._perform(effect, fetch)
            except BaseException as e:  # handed to the flow, which cleans up and re-raises
                error = e

    def _perform(self, effect: Any, fetch: Optional[Callable[[], Any]]) -> Any:
        r = self.redis
        kind = type(effect)
        if kind is Pipe:
            p = r.pipeline(transaction=effect.transaction)
            for c in effect.cmds:
                p.execute_command(*c)
            return p.execute()
        if kind is Cmd:
            return r.execute_command(*effect.args)
        if kind is WriteIf:
            with r.pipeline(transaction=True) as p:
                try:
                    p.watch(effect.key)
                    if p.execute_command("GET", effect.key) != effect.expect:
                        p.unwatch()
                        return False
                    p.multi()
                    p.execute_command(*effect.cmd)
                    p.execute()
                    return True
                except redis.WatchError:
                    return False
        if kind is Fetch:
            assert fetch is not None
            return fetch()
        if kind is Sleep:
            time.sleep(effect.seconds)
            return None
        raise TypeError(f"unknown effect {effect!r}")

    def ping(self) -> bool:
        """PING."""
        return bool(self.redis.ping())

    def close(self) -> None:
        """Closes near caches, the invalidation stream and the connection pool."""
        for c in list(self._caches):
            c.close()
        if self._hub is not None:
            self._hub.close()
            self._hub = None
        self.redis.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- typed tags ----------------------------------------------------------------------------
    def tag_set(self, key: Union[str, bytes], value: Union[str, bytes, int, float], *, ttl: Optional[TTL] = None,
                tags: Iterable[TagLike] = ()) -> bool:
        """``TAG.SET``: sets ``key`` (replacing its tags with ``tags``), with an optional TTL."""
        return self._call(cmd.tag_set(key, value, ttl=ttl, tags=tags))

    def tag_add(self, key: Union[str, bytes], *tags: TagLike) -> int:
        """``TAG.ADD``: adds tags to an existing record; returns how many were new."""
        return self._call(cmd.tag_add(key, tags))

    def tag_rem(self, key: Union[str, bytes], *tags: TagLike) -> int:
        """``TAG.REM``: removes tags; returns how many went."""
        return self._call(cmd.tag_rem(key, tags))

    def tag_of(self, key: Union[str, bytes]) -> List[Tag]:
        """``TAG.OF``: the record's tags (empty for a missing key)."""
        return self._call(cmd.tag_of(key))

    def tag_get(self, query: QueryLike, *, limit: Optional[int] = None,
                cursor: Optional[str] = None) -> "TagPage[Dict[bytes, Optional[bytes]]]":
        """``TAG.GET``: one page of the group's keys and values, in key order. Without ``limit``
        the whole group comes in one atomic read."""
        return self._call(cmd.tag_get(query, limit=limit, cursor=cursor))

    def tag_get_all(self, query: QueryLike, *, page_size: Optional[int] = None) -> Dict[bytes, Optional[bytes]]:
        """Every key and value of the group, following cursors when ``page_size`` is given."""
        out: Dict[bytes, Optional[bytes]] = {}
        cursor: Optional[str] = None
        while True:
            page = self.tag_get(query, limit=page_size, cursor=cursor)
            out.update(page.items)
            if page.done:
                return out
            cursor = page.cursor

    def tag_keys(self, query: QueryLike, *, limit: Optional[int] = None,
                 cursor: Optional[str] = None) -> "TagPage[List[bytes]]":
        """``TAG.KEYS``: one page of the group's keys, in key order."""
        return self._call(cmd.tag_keys(query, limit=limit, cursor=cursor))

    def tag_count(self, query: QueryLike) -> int:
        """``TAG.COUNT``: how many records match."""
        return self._call(cmd.tag_count(query))

    def tag_del(self, query: QueryLike) -> int:
        """``TAG.DEL``: removes every matching record at once; returns how many."""
        return self._call(cmd.tag_del(query))

    # -- SQL tables ----------------------------------------------------------------------------
    def sql_exec(self, sql: str, *params: Any) -> int:
        """``SQL.EXEC``: DDL or a write with ``?`` parameters bound (never interpolated); returns
        rows changed. Parameters: int, float, str, bytes (see :data:`cairn.sql.SqlParam`)."""
        return self._call(cmd.sql_exec(sql, params))

    def sql_query(self, sql: str, *params: Any) -> SqlResult:
        """``SQL.QUERY``: column names and rows (RESP2: integers, bytes for text/blob/real;
        RESP3: integers, floats, bytes, None)."""
        return self._call(cmd.sql_query(sql, params))

    def sql_expire(self, table: str, *, age: Optional[float] = None, rows: Optional[int] = None,
                   ops: Optional[int] = None) -> Any:
        """``SQL.EXPIRE``: sets the table's expiry rules (AGE seconds, ROWS n, OPS n); with no
        rule given, returns the current rules as a dict."""
        return self._call(cmd.sql_expire(table, age=age, rows=rows, ops=ops))

    def sql_tables(self) -> List[str]:
        """``SQL.TABLES``: the table names."""
        return self._call(cmd.sql_tables())

    def sql_describe(self, table: str) -> List[Dict[str, Any]]:
        """``SQL.DESCRIBE``: the table's columns, ``{"name", "type", "notnull", "default", "pk"}``."""
        return self._call(cmd.sql_describe(table))

    # -- typed caches --------------------------------------------------------------------------
    def cache(self, namespace: str, serializer: SerializerSpec = "json", *, ttl: Optional[TTL] = None,
              near: bool = True, max_items: int = 10_000, max_local_ttl: float = 60.0,
              stale_ttl: Optional[TTL] = None, lease_ttl: TTL = 5.0, lease_wait: Optional[TTL] = None,
              poll_interval: float = 0.01,
              ready_timeout: Optional[float] = 5.0) -> "Cache[Any]":
        """A typed cache over keys ``<namespace>:<key>``.

        :param serializer: ``"json"`` (default), ``"str"``, ``"bytes"``, ``"msgpack"``, ``"pickle"``
            (unsafe for untrusted data) or a :class:`~cairn.serializers.Serializer`.
        :param ttl: default time to live of written values (None: no expiry).
        :param near: keep decoded values in process memory, invalidated by the server.
        :param max_items: near-cache bound (CLOCK eviction).
        :param max_local_ttl: seconds a near entry lives at most (safety net).
        :param stale_ttl: keep values this long past ``ttl`` as *stale*: get_or_fetch serves them
            while one caller refreshes (stale-while-revalidate). Values are then stored in an envelope.
        :param lease_ttl: how long a get_or_fetch lease holds before others may take over.
        :param lease_wait: how long a caller waits for another's fetch before fetching itself
            (default: ``lease_ttl``).
        :param poll_interval: seconds between polls while waiting for another's fetch.
        :param ready_timeout: wait this long for the invalidation stream (the near cache stays
            bypassed until it is up).
        """
        near_cache = NearCache(max_items, max_local_ttl) if near else None
        core: CacheCore[Any] = CacheCore(namespace, resolve_serializer(serializer), ttl=ttl, stale_ttl=stale_ttl,
                                         near=near_cache, lease_ttl=lease_ttl, lease_wait=lease_wait,
                                         poll_interval=poll_interval)
        c: Cache[Any] = Cache(self, core)
        if near_cache is not None:
            self.tracking.register(namespace, near_cache, wait=ready_timeout)
        self._caches.append(c)
        return c


class Cache(Generic[T]):
    """A typed cache namespace (``ICache<'a>``): values of one type under ``<namespace>:<key>``.

    **Consistency of the near cache** (when ``near=True``):

    * *Read-your-writes in a process*: after :meth:`set`, :meth:`delete`, :meth:`delete_by_tag`
      or :meth:`get_or_fetch` return, every read in this process sees the write (or a later one).
    * *Bounded staleness across processes*: a write elsewhere is visible here once its
      invalidation push arrives (typically well under a millisecond on a LAN); :meth:`sync` waits
      for that explicitly.
    * An invalidation arriving while a fill is in flight wins: the fill is not kept.
    * If the invalidation stream breaks, the near cache is flushed and bypassed until it is back.
    * Each entry lives at most ``max_local_ttl`` seconds (and never past the server's TTL).

    Values returned from the near cache are shared objects: treat them as read-only.
    """

    def __init__(self, client: Client, core: CacheCore[T]) -> None:
        self._client = client
        self._core = core
        self._near = core.near
        self._flights: Dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        _CACHES.add(self)

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

    # -- reads ---------------------------------------------------------------------------------
    def get(self, key: str, default: Optional[T] = None) -> Optional[T]:
        """The value of ``key``, or ``default`` when it is missing (or stale)."""
        near = self._near
        if near is not None:
            value, _ = near.read(key)
            if value is not MISS:
                return value
        return self._client._drive(self._core.get(key, default))

    def get_many(self, keys: Sequence[str]) -> Dict[str, T]:
        """The values of the present keys among ``keys``, in one round trip for the misses."""
        return self._client._drive(self._core.get_many(keys))

    def get_or_fetch(self, key: str, fetch: Callable[[], T], ttl: TTLArg = DEFAULT,
                     tags: Optional[Iterable[TagLike]] = None) -> T:
        """The value of ``key``; when missing, ``fetch()`` computes it and it is stored.

        Single-flight in the process (concurrent callers share one fetch) and stampede-protected
        across processes (one fetcher per key holds a lease; the others poll briefly, or get the
        stale value when ``stale_ttl`` keeps one). See :meth:`cairn._core.CacheCore.fetch`.
        """
        near = self._near
        stale_entry = None
        if near is not None:
            value, stale_entry = near.read(key)
            if value is not MISS:
                return value
        with self._flights_lock:
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = self._flights[key] = _Flight()
        assert flight is not None
        if not leader:
            if stale_entry is not None:
                return stale_entry.value
            flight.event.wait()
            if flight.error is not None:
                raise flight.error
            return flight.value
        try:
            flight.value = self._client._drive(self._core.fetch(key, ttl, tags), fetch)
            return flight.value
        except BaseException as e:
            flight.error = e
            raise
        finally:
            with self._flights_lock:
                self._flights.pop(key, None)
            flight.event.set()

    # -- writes --------------------------------------------------------------------------------
    def set(self, key: str, value: T, ttl: TTLArg = DEFAULT, tags: Optional[Iterable[TagLike]] = None) -> None:
        """Stores ``value`` (with ``tags``: a TAG.SET, replacing the record's tags)."""
        self._client._drive(self._core.set(key, value, ttl, tags))

    def delete(self, *keys: str) -> int:
        """Deletes keys; returns how many existed."""
        return self._client._drive(self._core.delete(keys))

    # -- tags ----------------------------------------------------------------------------------
    def get_by_tag(self, query: QueryLike) -> Dict[str, T]:
        """This namespace's values whose records match ``query``, in one atomic TAG.GET.

        Tags are global on the server: records of other namespaces are filtered out here.
        """
        return self._client._drive(self._core.get_by_tag(query))

    def keys_by_tag(self, query: QueryLike) -> List[str]:
        """This namespace's keys whose records match ``query``."""
        return self._client._drive(self._core.keys_by_tag(query))

    def delete_by_tag(self, query: QueryLike) -> int:
        """Deletes every record matching ``query`` (in *every* namespace: tags are global) with
        one TAG.DEL (in a transaction with TAG.KEYS, so that this process's near cache drops the
        exact keys before returning). Returns how many."""
        return self._client._drive(self._core.delete_by_tag(query))

    # -- near cache ----------------------------------------------------------------------------
    def prefetch(self, keys: Optional[Sequence[str]] = None, *, tag: Optional[QueryLike] = None) -> int:
        """Warms the near cache with ``keys`` and/or the keys matching ``tag``; returns how many
        values were found."""
        return self._client._drive(self._core.prefetch(keys, tag))

    def sync(self, timeout: float = 1.0) -> bool:
        """Waits until every invalidation the server sent before this call has been applied to
        the near cache (a marker write through the invalidation stream); False on timeout or
        when the stream is down."""
        if self._near is None:
            return True
        return self._client.tracking.sync(timeout)

    def clear_local(self) -> None:
        """Empties the near cache (the server is untouched)."""
        if self._near is not None:
            self._near.flush()

    def stats(self) -> Dict[str, int]:
        """Near-cache counters (empty without a near cache)."""
        return self._near.stats.as_dict() if self._near is not None else {}

    def close(self) -> None:
        """Detaches the near cache from the invalidation stream."""
        if self._near is not None and self._client._hub is not None:
            self._client._hub.unregister(self._near)
        if self in self._client._caches:
            self._client._caches.remove(self)
