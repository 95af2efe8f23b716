"""A Django cache backend on cairn: ``cairn.django.CairnCache``.

The full Django cache API (get/set/add/delete, get_many/set_many/delete_many, incr/decr, touch,
has_key, clear, versions, key prefixes and key functions, and the async ``a*`` methods Django
derives from them), plus cairn's typed tags and an optional near cache::

    CACHES = {
        "default": {
            "BACKEND": "cairn.django.CairnCache",
            "LOCATION": "redis://127.0.0.1:6380/0",
            "TIMEOUT": 300,
            "OPTIONS": {
                "protocol": 3,             # RESP2 (default of redis-py < 8) or RESP3
                "near": True,              # near cache, kept coherent by server push
                "on_error": "fetch",       # fail open: a down server is a miss, not a 500
            },
        }
    }

    from django.core.cache import cache
    from cairn import where
    cache.set("fragment:page:5:header", html, 600, tags=[(PAGE, 5)])
    cache.delete_by_tag(where(PAGE) == 5)      # every fragment of page 5, one TAG.DEL

How values are stored (as Django's own Redis backend does): ints as their decimal text, so
``incr`` is the server's atomic INCRBY; everything else pickled. Like every Django cache, the
server must only be writable by trusted processes (pickle).

Options (``OPTIONS``; the rest go to redis-py's ``Redis.from_url``):

* ``protocol``: 2 or 3 (redis-py's default when absent).
* ``near``: ``True`` or ``{"max_items": n, "max_local_ttl": s}``: a near cache of the raw values
  in process memory (every hit is unpickled afresh, so callers never share objects), coherent
  through cairn's invalidation push (see the client README). Keys must start with
  ``KEY_PREFIX + ":"`` to be near-cached (the default key function does); others always go to
  the server.
* ``on_error``: ``"raise"`` (default, as Django's Redis backend) or ``"fetch"``: when the server
  is down or slow, reads are misses (``get`` returns the default, ``get_many`` ``{}``,
  ``has_key`` False) and fills are skipped (``set`` does nothing, ``add``/``touch`` return
  False); deletions, ``incr`` and ``clear`` still raise.
* ``connect_timeout`` (0.25 s), ``read_timeout`` (0.5 s), ``breaker_interval`` (5 s): see
  :class:`cairn.Client`.

One :class:`cairn.Client` (one connection pool, one invalidation stream) serves every thread's
cache object for a ``LOCATION`` and ``OPTIONS``: Django makes a backend object per thread.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any, Dict, Hashable, Iterable, List, Optional, Tuple

import redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache

from .client import Client
from .commands import ttl_ms
from .near import MISS, NearCache, peer_group
from .resilience import CacheUnavailable
from .tags import QueryLike, TagLike, parse_keys_page, tag_args, to_query

__all__ = ["CairnCache"]

_I64 = 1 << 63

# INCRBY only on an existing key (Django's incr raises ValueError for a missing one), atomically.
_INCR = b"if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end return false"

_CLIENTS: Dict[Hashable, Client] = {}
_CLIENTS_LOCK = threading.Lock()
_NEARS: Dict[Hashable, NearCache] = {}

_OWN_OPTIONS = ("near", "on_error", "connect_timeout", "read_timeout", "breaker_interval", "health_interval")


def _freeze(v: Any) -> Hashable:
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v if isinstance(v, Hashable) else ("id", id(v))


def _shared_client(url: str, options: Dict[str, Any]) -> Client:
    key = (url, _freeze(options))
    with _CLIENTS_LOCK:
        c = _CLIENTS.get(key)
        if c is None:
            c = _CLIENTS[key] = Client.from_url(url, **options)
        return c


class CairnCache(BaseCache):
    """Django cache backend on cairn (see the module docstring)."""

    def __init__(self, server: Any, params: Dict[str, Any]) -> None:
        super().__init__(params)
        if isinstance(server, (list, tuple)):
            if len(server) != 1:
                raise ValueError("cairn.django.CairnCache takes one LOCATION (a cairn server or a proxy in front)")
            server = server[0]
        if not isinstance(server, str) or not server:
            raise ValueError(f"LOCATION is a redis:// URL or host:port, not {server!r}")
        self._url = server if "://" in server else f"redis://{server}"
        options = dict(params.get("OPTIONS") or {})
        near = options.pop("near", False)
        on_error = options.pop("on_error", "raise")
        if on_error not in ("raise", "fetch"):
            raise ValueError(f"OPTIONS on_error is 'raise' or 'fetch', not {on_error!r}")
        self._fail_open = on_error == "fetch"
        self._options = options
        self._near_opts: Optional[Dict[str, Any]] = None
        if near:
            self._near_opts = {} if near is True else dict(near)
            unknown = set(self._near_opts) - {"max_items", "max_local_ttl"}
            if unknown:
                raise ValueError(f"OPTIONS near takes max_items and max_local_ttl, not {sorted(unknown)}")
        self._near_prefix = f"{self.key_prefix}:"
        self._near_cache: Optional[NearCache] = None
        self._client_obj: Optional[Client] = None

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def client(self) -> Client:
        """The shared :class:`cairn.Client` of this LOCATION and OPTIONS."""
        c = self._client_obj
        if c is None:
            c = self._client_obj = _shared_client(self._url, self._options)
        return c

    @property
    def near(self) -> Optional[NearCache]:
        """The near cache (shared by the threads' backend objects), or None."""
        if self._near_opts is None:
            return None
        if self._near_cache is None:
            client = self.client
            key = (id(client), self.key_prefix, _freeze(self._near_opts))
            with _CLIENTS_LOCK:
                near = _NEARS.get(key)
                created = near is None
                if created:
                    near = _NEARS[key] = NearCache(**self._near_opts)
                    peer_group(client.endpoint, self.key_prefix).add(near)
            assert near is not None
            if created:
                client.tracking.register(self.key_prefix, near, wait=2.0)
            self._near_cache = near
        return self._near_cache

    def _near_key(self, full: str) -> Optional[str]:
        return full[len(self._near_prefix):] if full.startswith(self._near_prefix) else None

    def _dropped(self, fulls: Iterable[str]) -> None:
        """Read-your-writes for the near caches of this prefix in the process."""
        if self._near_opts is None:
            return
        keys = [k for k in (self._near_key(f) for f in fulls) if k is not None]
        if keys:
            peer_group(self.client.endpoint, self.key_prefix).invalidate_many(keys)

    def _run(self, *args: Any) -> Any:
        return self.client._guarded(self.client.redis.execute_command, *args)

    def _pipe(self, cmds: List[Tuple[Any, ...]], transaction: bool = False) -> List[Any]:
        def run() -> List[Any]:
            p = self.client.redis.pipeline(transaction=transaction)
            for c in cmds:
                p.execute_command(*c)
            return p.execute()
        return self.client._guarded(run)

    @staticmethod
    def _encode(value: Any) -> bytes:
        if type(value) is int and -_I64 <= value < _I64:
            return str(value).encode()
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def _decode(raw: bytes) -> Any:
        try:
            return int(raw)
        except ValueError:
            return pickle.loads(raw)  # noqa: S301 - Django caches pickle; the server is trusted

    def _px(self, timeout: Any) -> Optional[int]:
        """Milliseconds to live; None: forever; 0: already expired."""
        t = self.get_backend_timeout(timeout)
        if t is None:
            return None
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise TypeError(f"a cache timeout is a number of seconds or None, not {t!r}")
        return 0 if t <= 0 else ttl_ms(t)

    def get_backend_timeout(self, timeout: Any = DEFAULT_TIMEOUT) -> Optional[float]:
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return None
        return max(0, timeout)

    def _write_cmd(self, full: str, data: bytes, px: Optional[int], tags: Optional[Iterable[TagLike]],
                   nx: bool = False) -> Tuple[Any, ...]:
        if tags:
            flat = tag_args(tags)
            args: List[Any] = ["TAG.SET", full, data]
            if px:
                args += ["PX", px]
            for i in range(0, len(flat), 2):
                args += ["TAG", flat[i], flat[i + 1]]
            return tuple(args)
        args = ["SET", full, data]
        if nx:
            args.append("NX")
        if px:
            args += ["PX", px]
        return tuple(args)

    # -- reads ---------------------------------------------------------------------------------
    def _read_one(self, full: str) -> Any:
        """The stored raw bytes of ``full`` (None: missing), through the near cache."""
        near = self.near
        nk = self._near_key(full) if near is not None else None
        if near is None or nk is None:
            return self._run("GET", full)
        raw, _ = near.read(nk)
        if raw is not MISS:
            return raw
        token = near.begin_fill(nk)
        try:
            raw, pttl = self._pipe([("GET", full), ("PTTL", full)])
        except BaseException:
            near.abort_fill(token)
            raise
        if raw is None:
            near.abort_fill(token)
        else:
            near.complete_fill(token, raw, pttl / 1000.0 if isinstance(pttl, int) and pttl > 0 else None)
        return raw

    def get(self, key: Any, default: Any = None, version: Optional[int] = None) -> Any:
        full = self.make_and_validate_key(key, version=version)
        try:
            raw = self._read_one(full)
        except CacheUnavailable:
            if self._fail_open:
                return default
            raise
        return default if raw is None else self._decode(raw)

    def get_many(self, keys: Iterable[Any], version: Optional[int] = None) -> Dict[Any, Any]:
        keys = list(keys)
        if not keys:
            return {}
        fulls = {self.make_and_validate_key(k, version=version): k for k in keys}
        near = self.near
        out: Dict[Any, Any] = {}
        missing = []
        for full, k in fulls.items():
            nk = self._near_key(full) if near is not None else None
            if near is not None and nk is not None:
                raw, _ = near.read(nk)
                if raw is not MISS:
                    out[k] = self._decode(raw)
                    continue
            missing.append(full)
        if missing:
            try:
                raws = self._run("MGET", *missing)
            except CacheUnavailable:
                if self._fail_open:
                    return out
                raise
            for full, raw in zip(missing, raws):
                if raw is not None:
                    out[fulls[full]] = self._decode(raw)
        return out

    def has_key(self, key: Any, version: Optional[int] = None) -> bool:
        full = self.make_and_validate_key(key, version=version)
        near = self.near
        nk = self._near_key(full) if near is not None else None
        if near is not None and nk is not None and near.get(nk, MISS) is not MISS:
            return True
        try:
            return bool(self._run("EXISTS", full))
        except CacheUnavailable:
            if self._fail_open:
                return False
            raise

    # -- writes --------------------------------------------------------------------------------
    def _fill(self, fn: Any, skipped: Any) -> Any:
        try:
            return fn()
        except CacheUnavailable:
            if self._fail_open:
                return skipped
            raise

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None,
            tags: Optional[Iterable[TagLike]] = None) -> None:
        """Django's ``set``; ``tags=[(type, value), ...]`` stores the record with typed tags (a
        TAG.SET, replacing its tags)."""
        full = self.make_and_validate_key(key, version=version)
        px = self._px(timeout)
        cmd = ("DEL", full) if px == 0 else self._write_cmd(full, self._encode(value), px, tags)

        def run() -> None:
            try:
                self._run(*cmd)
            finally:
                self._dropped([full])
        self._fill(run, None)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None,
            tags: Optional[Iterable[TagLike]] = None) -> bool:
        """Django's ``add`` (store only if absent); ``tags`` as in :meth:`set`."""
        full = self.make_and_validate_key(key, version=version)
        px = self._px(timeout)
        data = self._encode(value)

        def run() -> bool:
            try:
                if tags:
                    # TAG.SET has no NX: EXISTS and TAG.SET under WATCH.
                    def watched() -> bool:
                        with self.client.redis.pipeline(transaction=True) as p:
                            try:
                                p.watch(full)
                                if p.execute_command("EXISTS", full):
                                    p.unwatch()
                                    return False
                                p.multi()
                                p.execute_command(*self._write_cmd(full, data, px or None, tags))
                                if px == 0:
                                    p.execute_command("DEL", full)
                                p.execute()
                                return True
                            except redis.WatchError:
                                return False
                    return self.client._guarded(watched)
                if px == 0:
                    stored, _ = self._pipe([("SET", full, data, "NX"), ("DEL", full)], transaction=True)
                    return stored is not None and stored is not False
                return self._run(*self._write_cmd(full, data, px, None, nx=True)) is not None
            finally:
                self._dropped([full])
        return self._fill(run, False)

    def set_many(self, data: Dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None,
                 tags: Optional[Iterable[TagLike]] = None) -> List[Any]:
        """Django's ``set_many`` in one MULTI/EXEC; returns the keys that failed (none)."""
        if not data:
            return []
        px = self._px(timeout)
        fulls = [self.make_and_validate_key(k, version=version) for k in data]
        if px == 0:
            cmds: List[Tuple[Any, ...]] = [("DEL", *fulls)]
        else:
            tag_list = list(tags) if tags else None
            cmds = [self._write_cmd(f, self._encode(v), px, tag_list) for f, v in zip(fulls, data.values())]

        def run() -> List[Any]:
            try:
                self._pipe(cmds, transaction=True)
            finally:
                self._dropped(fulls)
            return []
        return self._fill(run, list(data))

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Optional[int] = None) -> bool:
        full = self.make_and_validate_key(key, version=version)
        px = self._px(timeout)

        def run() -> bool:
            try:
                if px is None:
                    _, exists = self._pipe([("PERSIST", full), ("EXISTS", full)], transaction=True)
                    return bool(exists)
                if px == 0:
                    return bool(self._run("DEL", full))
                return bool(self._run("PEXPIRE", full, px))
            finally:
                self._dropped([full])
        return self._fill(run, False)

    def delete(self, key: Any, version: Optional[int] = None) -> bool:
        full = self.make_and_validate_key(key, version=version)
        try:
            return bool(self._run("DEL", full))
        finally:
            self._dropped([full])

    def delete_many(self, keys: Iterable[Any], version: Optional[int] = None) -> None:
        fulls = [self.make_and_validate_key(k, version=version) for k in keys]
        if not fulls:
            return
        try:
            self._run("DEL", *fulls)
        finally:
            self._dropped(fulls)

    def incr(self, key: Any, delta: int = 1, version: Optional[int] = None) -> int:
        """Atomic INCRBY on an existing key; ValueError when missing, TypeError when the value is
        not an integer (as Django's local-memory cache)."""
        full = self.make_and_validate_key(key, version=version)
        try:
            n = self._run("EVAL", _INCR, 1, full, int(delta))
        except Exception as e:
            if "not an integer" in str(e) and not isinstance(e, CacheUnavailable):
                raise TypeError(f"the value of {key!r} is not an integer") from e
            raise
        finally:
            self._dropped([full])
        if n is None or n is False:
            raise ValueError(f"Key '{key}' not found.")
        return int(n)

    def clear(self) -> None:
        """FLUSHDB, as Django's Redis backend: every key of the database, not just this prefix."""
        try:
            self._run("FLUSHDB")
        finally:
            if self._near_opts is not None and self.near is not None:
                for near in peer_group(self.client.endpoint, self.key_prefix).members():
                    near.flush()

    def close(self, **kwargs: Any) -> None:
        """Django calls this at the end of each request: the shared pool stays open."""

    # -- typed tags ----------------------------------------------------------------------------
    def delete_by_tag(self, query: QueryLike) -> int:
        """Deletes every record matching ``query`` with one TAG.DEL (tags are global on the
        server: every prefix and version); returns how many."""
        args = to_query(query).args()
        if self._near_opts is None:
            return int(self._run("TAG.DEL", *args))
        keys_reply, n = self._pipe([("TAG.KEYS", *args), ("TAG.DEL", *args)], transaction=True)
        self._dropped(k.decode("utf-8", "surrogateescape") for k in parse_keys_page(keys_reply).items)
        return int(n)

    def count_by_tag(self, query: QueryLike) -> int:
        """How many records match ``query`` (TAG.COUNT)."""
        return int(self._run("TAG.COUNT", *to_query(query).args()))

    def keys_by_tag(self, query: QueryLike) -> List[str]:
        """The server keys (as made by ``make_key``) of the records matching ``query``."""
        reply = self._run("TAG.KEYS", *to_query(query).args())
        return [k.decode("utf-8", "surrogateescape") for k in parse_keys_page(reply).items]
