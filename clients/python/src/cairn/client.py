"""The synchronous client: :class:`Client` and its typed :class:`Cache`."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import weakref
from typing import (Any, Callable, Dict, Generator, Generic, Hashable, Iterable, List, Mapping, Optional, Sequence,
                    Tuple, TypeVar, Union, overload)

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

try:
    from typing import Literal
except ImportError:  # pragma: no cover - Python < 3.8
    from typing_extensions import Literal  # type: ignore

from . import commands as cmd
from ._core import DEFAULT, CacheCore, Cmd, Fetch, Pipe, Sleep, TTLArg, WriteIf, run_flow
from .commands import TTL, Call
from .near import MISS, NearCache, peer_group
from .resilience import ON_ERROR, TRANSPORT_ERRORS, CacheUnavailable, CircuitBreaker
from .serializers import Serializer, SerializerSpec, resolve_serializer
from .sql import SqlResult
from .tags import QueryLike, Tag, TagLike, TagPage
from .tracking import TrackingHub, connection_factory

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Client", "Cache", "endpoint_of"]

#: default socket timeouts, seconds: a cache that answers slower than this is not worth waiting for
CONNECT_TIMEOUT = 0.25
READ_TIMEOUT = 0.5


def endpoint_of(r: Any) -> Hashable:
    """Which server (and database) a redis-py client talks to: the key of the process-wide near
    cache groups (read-your-writes across clients)."""
    kw = r.connection_pool.connection_kwargs
    return (kw.get("path") or kw.get("host", "localhost"), kw.get("port", 6379), kw.get("db", 0))


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
    :param connect_timeout: seconds to connect (default 0.25); redis-py's ``socket_connect_timeout``.
    :param read_timeout: seconds to wait for a reply (default 0.5); redis-py's ``socket_timeout``.
    :param breaker_interval: after a connection error or timeout, calls fail fast with
        :class:`~cairn.CacheUnavailable` for this many seconds, then one call tries the server
        again (default 5; 0: no breaker). See :mod:`cairn.resilience`.

    Unless told otherwise (``retry=``), redis-py does not retry: the breaker decides when to try
    again, so a dead server costs one short timeout per interval instead of retries with backoff.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 6380, *, redis_client: Optional[redis.Redis] = None,
                 health_interval: float = 1.0, health_timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = CONNECT_TIMEOUT, read_timeout: Optional[float] = READ_TIMEOUT,
                 breaker_interval: float = 5.0, **redis_kwargs: Any) -> None:
        _check_kwargs(redis_kwargs)
        for name, t in (("connect_timeout", connect_timeout), ("read_timeout", read_timeout)):
            if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
                raise ValueError(f"{name} must be a positive number of seconds (None: wait forever), not {t!r}")
        if redis_client is None:
            redis_kwargs.setdefault("socket_timeout", read_timeout)
            redis_kwargs.setdefault("socket_connect_timeout", connect_timeout)
            redis_kwargs.setdefault("retry", Retry(NoBackoff(), 0))
            redis_client = redis.Redis(host=host, port=port, **redis_kwargs)
        elif redis_client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("wrap a redis.Redis created with decode_responses=False")
        #: the underlying redis-py client
        self.redis: redis.Redis = redis_client
        #: the circuit breaker in front of every server call of this client
        self.breaker = CircuitBreaker(breaker_interval)
        self.endpoint = endpoint_of(redis_client)
        self._health = (health_interval, health_timeout)
        self._hub: Optional[TrackingHub] = None
        self._hub_lock = threading.Lock()
        self._caches: List["Cache[Any]"] = []
        self._cache_memo: Dict[Hashable, "Cache[Any]"] = {}

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "Client":
        """``Client.from_url("redis://localhost:6380/0")`` (redis-py URL syntax)."""
        own = {k: kwargs.pop(k) for k in ("health_interval", "health_timeout", "connect_timeout", "read_timeout",
                                          "breaker_interval") if k in kwargs}
        _check_kwargs(kwargs)
        kwargs.setdefault("socket_timeout", own.pop("read_timeout", READ_TIMEOUT))
        kwargs.setdefault("socket_connect_timeout", own.pop("connect_timeout", CONNECT_TIMEOUT))
        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        return cls(redis_client=redis.Redis.from_url(url, **kwargs), **own)

    # -- plumbing ------------------------------------------------------------------------------
    def _guarded(self, fn: Callable[..., R], *args: Any) -> R:
        """Runs one server call through the circuit breaker; transport failures (refused,
        reset, timed out) become :class:`CacheUnavailable`."""
        breaker = self.breaker
        breaker.before()
        try:
            out = fn(*args)
        except CacheUnavailable:
            raise
        except TRANSPORT_ERRORS as e:
            breaker.failure(e)
            raise CacheUnavailable(f"cairn server unavailable: {e}") from e
        breaker.success()
        return out

    def _call(self, call: Call[R]) -> R:
        return call.parse(self._guarded(self.redis.execute_command, *call.args))

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
                # The stream reconnecting proves the server is back: close the breaker at once.
                self._hub.on_connect = self.breaker.success
            return self._hub

    def _drive(self, flow: Generator[Any, Any, R], fetch: Optional[Callable[[], Any]] = None) -> R:
        """Runs a sans-I/O flow with blocking calls."""
        return run_flow(flow, lambda effect: self._perform(effect, fetch))

    def _perform(self, effect: Any, fetch: Optional[Callable[[], Any]]) -> Any:
        kind = type(effect)
        if kind is Fetch:
            assert fetch is not None
            return fetch()
        if kind is Sleep:
            time.sleep(effect.seconds)
            return None
        return self._guarded(self._perform_io, effect)

    def _perform_io(self, effect: Any) -> Any:
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
        raise TypeError(f"unknown effect {effect!r}")

    def ping(self) -> bool:
        """PING."""
        return bool(self._guarded(self.redis.ping))

    def close(self) -> None:
        """Closes near caches, the invalidation stream and the connection pool."""
        for c in list(self._caches):
            c.close()
        self._cache_memo.clear()
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
    @overload
    def cache(self, namespace: str, serializer: Literal["str"], **options: Any) -> "Cache[str]": ...

    @overload
    def cache(self, namespace: str, serializer: Literal["bytes"], **options: Any) -> "Cache[bytes]": ...

    @overload
    def cache(self, namespace: str, serializer: "Serializer[T]", **options: Any) -> "Cache[T]": ...

    @overload
    def cache(self, namespace: str, serializer: str = "json", **options: Any) -> "Cache[Any]": ...

    def cache(self, namespace: str, serializer: SerializerSpec = "json", *, ttl: Optional[TTL] = None,
              near: bool = True, max_items: int = 10_000, max_local_ttl: float = 60.0,
              stale_ttl: Optional[TTL] = None, lease_ttl: TTL = 5.0, lease_wait: Optional[TTL] = None,
              poll_interval: float = 0.01, on_error: str = "raise",
              ready_timeout: Optional[float] = 5.0) -> "Cache[Any]":
        """A typed cache over keys ``<namespace>:<key>``.

        Calling it again with the same arguments returns the same :class:`Cache` (call it per
        request freely: no new connection, near cache or tracking registration each time).
        The value type follows the serializer: ``cache("n", "str")`` is a ``Cache[str]``,
        ``cache("n", "bytes")`` a ``Cache[bytes]``, ``cache("n", MySerializer())`` a ``Cache[T]``
        for a ``Serializer[T]``.

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
        :param on_error: ``"raise"`` (default): a server that is down or slow raises
            :class:`~cairn.CacheUnavailable`. ``"fetch"``: fail open, reads report a miss
            (``get`` returns the default, ``get_or_fetch`` calls ``fetch()``) and fills
            (``set``, ``add``, ``set_many``, ``touch``) are skipped; invalidations
            (``delete``, ``delete_many``, ``delete_by_tag``) and ``incr`` still raise, since
            dropping them silently would serve stale data once the server is back.
        :param ready_timeout: wait this long for the invalidation stream (the near cache stays
            bypassed until it is up).
        """
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error is one of {ON_ERROR}, not {on_error!r}")
        ser_key: Hashable = serializer if isinstance(serializer, str) else ("id", id(serializer))
        memo_key = (namespace, ser_key, ttl, near, max_items, max_local_ttl, stale_ttl, lease_ttl, lease_wait,
                    poll_interval, on_error)
        found = self._cache_memo.get(memo_key)
        if found is not None and not found._closed:
            return found
        near_cache = NearCache(max_items, max_local_ttl) if near else None
        core: CacheCore[Any] = CacheCore(namespace, resolve_serializer(serializer), ttl=ttl, stale_ttl=stale_ttl,
                                         near=near_cache, lease_ttl=lease_ttl, lease_wait=lease_wait,
                                         poll_interval=poll_interval,
                                         peers=peer_group(self.endpoint, namespace))
        c: Cache[Any] = Cache(self, core, on_error=on_error)
        if near_cache is not None:
            self.tracking.register(namespace, near_cache, wait=ready_timeout)
        self._caches.append(c)
        self._cache_memo[memo_key] = c
        return c


def _key_part(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, (list, tuple)):
        return [_key_part(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _key_part(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    raise TypeError(f"@cached builds keys from str/int/float/bool/None/list/tuple/dict arguments; "
                    f"pass key= for a {type(v).__name__} argument")


def default_cache_key(func: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> str:
    """``module.qualname:<JSON of the arguments>``: the key ``@cached`` uses without ``key=``."""
    parts = json.dumps([_key_part(list(args)), _key_part(kwargs)], separators=(",", ":"), sort_keys=True)
    return f"{func.__module__}.{func.__qualname__}:{parts}"


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

    def __init__(self, client: Client, core: CacheCore[T], *, on_error: str = "raise") -> None:
        self._client = client
        self._core = core
        self._near = core.near
        self._fail_open = on_error == "fetch"
        self._closed = False
        self._flights: Dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        _CACHES.add(self)

    @property
    def on_error(self) -> str:
        """``"raise"`` or ``"fetch"`` (fail open); see :meth:`Client.cache`."""
        return "fetch" if self._fail_open else "raise"

    def _read(self, flow: Generator[Any, Any, R], miss: Callable[[], R]) -> R:
        """Drives a read; with ``on_error="fetch"`` an unavailable server is a miss."""
        if not self._fail_open:
            return self._client._drive(flow)
        try:
            return self._client._drive(flow)
        except CacheUnavailable:
            flow.close()
            return miss()

    def _fill(self, flow: Generator[Any, Any, R], skipped: R) -> R:
        """Drives a cache fill; with ``on_error="fetch"`` an unavailable server skips it."""
        return self._read(flow, lambda: skipped)

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
        return self._read(self._core.get(key, default), lambda: default)

    def get_many(self, keys: Sequence[str]) -> Dict[str, T]:
        """The values of the present keys among ``keys``, in one round trip for the misses."""
        if isinstance(keys, str):
            raise TypeError("get_many takes a sequence of keys, not one str")
        return self._read(self._core.get_many(keys), dict)

    def has_key(self, key: str) -> bool:
        """Whether ``key`` holds a (fresh) value."""
        return self.get(key, MISS) is not MISS

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
            if not self._fail_open:
                flight.value = self._client._drive(self._core.fetch(key, ttl, tags), fetch)
                return flight.value
            fetched: List[Any] = []

            def fetch_once() -> Any:
                fetched.append(fetch())
                return fetched[-1]

            try:
                flight.value = self._client._drive(self._core.fetch(key, ttl, tags), fetch_once)
            except CacheUnavailable:
                # Fail open: the value comes from fetch() (once), and is not stored.
                flight.value = fetched[-1] if fetched else fetch()
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
        self._fill(self._core.set(key, value, ttl, tags), None)

    def set_many(self, items: Mapping[str, T], ttl: TTLArg = DEFAULT,
                 tags: Optional[Iterable[TagLike]] = None) -> None:
        """Stores every item in one round trip (one MULTI/EXEC), each with ``tags`` when given."""
        self._fill(self._core.set_many(items, ttl, tags), None)

    def add(self, key: str, value: T, ttl: TTLArg = DEFAULT, tags: Optional[Iterable[TagLike]] = None) -> bool:
        """Stores ``value`` only if ``key`` is absent; returns whether it did."""
        return self._fill(self._core.add(key, value, ttl, tags), False)

    def incr(self, key: str, delta: int = 1, ttl: TTLArg = DEFAULT) -> int:
        """Adds ``delta`` atomically and returns the new value; a missing key starts at 0 (and
        gets the cache's TTL). Needs a serializer storing ints as decimal text (``"json"``)."""
        return self._client._drive(self._core.incr(key, delta, ttl))

    def decr(self, key: str, delta: int = 1, ttl: TTLArg = DEFAULT) -> int:
        """``incr(key, -delta)``."""
        return self.incr(key, -delta, ttl)

    def touch(self, key: str, ttl: TTLArg = DEFAULT) -> bool:
        """Gives ``key`` a new TTL (``None``: no expiry); returns whether the key exists."""
        return self._fill(self._core.touch(key, ttl), False)

    def delete(self, *keys: str) -> int:
        """Deletes keys; returns how many existed."""
        return self._client._drive(self._core.delete(keys))

    def delete_many(self, keys: Iterable[str]) -> int:
        """Deletes ``keys`` in one command; returns how many existed."""
        return self._client._drive(self._core.delete(keys))  # type: ignore[arg-type]

    def cached(self, key: Optional[Callable[..., str]] = None, *, ttl: TTLArg = DEFAULT,
               tags: Optional[Callable[..., Iterable[TagLike]]] = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: the function's result is cached with :meth:`get_or_fetch` (single-flight,
        stampede protection, fail open with ``on_error="fetch"``).

        :param key: ``key(*args, **kwargs) -> str``; default: the function's qualified name and
            its arguments as JSON (see :func:`default_cache_key`).
        :param tags: ``tags(*args, **kwargs) -> [(type, value), ...]``: the stored record's tags.

        ::

            @users.cached(ttl=60, tags=lambda user_id: [(USER, user_id)])
            def profile(user_id: int) -> dict: ...

            users.delete_by_tag(where(USER) == 42)   # drops every cached result for user 42
        """
        def decorate(func: Callable[..., T]) -> Callable[..., T]:
            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> T:
                k = key(*args, **kwargs) if key is not None else default_cache_key(func, args, kwargs)
                t = tags(*args, **kwargs) if tags is not None else None
                return self.get_or_fetch(k, lambda: func(*args, **kwargs), ttl, t)
            wrapper.cache = self  # type: ignore[attr-defined]
            return wrapper
        return decorate

    # -- tags ----------------------------------------------------------------------------------
    def get_by_tag(self, query: QueryLike) -> Dict[str, T]:
        """This namespace's values whose records match ``query``, in one atomic TAG.GET.

        Tags are global on the server: records of other namespaces are filtered out here.
        """
        return self._read(self._core.get_by_tag(query), dict)

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
        self._closed = True
        if self._near is not None:
            if self._client._hub is not None:
                self._client._hub.unregister(self._near)
            if self._core.peers is not None:
                self._core.peers.discard(self._near)
        if self in self._client._caches:
            self._client._caches.remove(self)
        memo = self._client._cache_memo
        for k, v in list(memo.items()):
            if v is self:
                del memo[k]
