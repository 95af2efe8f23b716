"""The three cache systems a node can run, behind the thesis's ICache interface (Listing 1).

* ``shared``: every node reads and writes one cairn server; nothing is kept in the process.
* ``pernode``: each node keeps its own in-process cache; a write drops the key locally and
  broadcasts the key on a cairn pub/sub channel so that every other node drops it too (the
  thesis's distributed system, which used Redis pub/sub the same way).
* ``hybrid``: a near cache in each node in front of the shared cairn server, kept coherent by the
  server's client tracking (the cairn client's ``cache(near=True)``).

Each ``get_or_fetch`` is timed the way the thesis reports it: *cache response* is the time until
the cache knows whether it has the element, *lookup* the time in the slow memory (the database),
*total* the whole call (cache response + lookup + storing the value).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import redis

import cairn
from cairn.near import NearCache

MODES = ("shared", "pernode", "hybrid")
NAMESPACE = "people"
CHANNEL = "thesis:invalidate"
# The thesis's caches had no bound and no expiry: capacity is not what the study compares.
UNBOUNDED = 10_000_000
FOREVER = 10.0 ** 9

# One read: (hit, cache response s, lookup s, total s, answered from process memory).
Sample = Tuple[bool, float, float, float, bool]


class PerNodeCache:
    """An in-process cache kept coherent by invalidations broadcast over cairn pub/sub.

    Fills are token-guarded (:class:`cairn.near.NearCache`): an invalidation that arrives while a
    value is being looked up cancels the fill, so a stale read is never kept. Nothing is kept
    until the subscription is confirmed.
    """

    def __init__(self, host: str, port: int) -> None:
        self.near = NearCache(UNBOUNDED, FOREVER)
        # A node's own broadcasts come back to it; it has already dropped the key, and dropping
        # it again could cancel a fill that began after the write.
        self._origin = str(os.getpid()).encode()
        self._redis = redis.Redis(host, port)
        self._pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(**{CHANNEL: self._on_message})
        self._pubsub.get_message(timeout=5.0)  # the subscribe confirmation
        self.near.set_enabled(True)
        self._thread = self._pubsub.run_in_thread(sleep_time=1.0, daemon=True)

    def _on_message(self, message: Dict[str, Any]) -> None:
        origin, _, key = message["data"].partition(b"|")
        if origin != self._origin:
            self.near.invalidate(key.decode())

    def get_or_fetch(self, key: str, fetch: Callable[[], Any]) -> Tuple[Any, bool]:
        """The value, and whether it came from process memory."""
        value = self.near.get(key, _MISS)
        if value is not _MISS:
            return value, True
        token = self.near.begin_fill(key)
        try:
            value = fetch()
        except BaseException:
            self.near.abort_fill(token)
            raise
        self.near.complete_fill(token, value)
        return value, False

    def put(self, key: str, value: Any) -> None:
        token = self.near.begin_fill(key)
        self.near.complete_fill(token, value)

    def delete(self, key: str) -> None:
        self.near.invalidate(key)
        self._redis.publish(CHANNEL, self._origin + b"|" + key.encode())

    def close(self) -> None:
        self._thread.stop()
        self._pubsub.close()
        self._redis.close()


class CairnCache:
    """The shared and hybrid systems: the cairn client's typed cache, with or without near."""

    def __init__(self, host: str, port: int, near: bool) -> None:
        self.client = cairn.Client(host, port)
        self.cache = self.client.cache(NAMESPACE, serializer="json", near=near,
                                       max_items=UNBOUNDED, max_local_ttl=FOREVER)

    def get_or_fetch(self, key: str, fetch: Callable[[], Any]) -> Tuple[Any, bool]:
        """The value, and whether it came from process memory (the near cache)."""
        near = self.cache.near
        if near is not None:
            value = near.get(key, _MISS)
            if value is not _MISS:
                return value, True
        return self.cache.get_or_fetch(key, fetch), False

    def put(self, key: str, value: Any) -> None:
        self.cache.set(key, value)

    def delete(self, key: str) -> None:
        self.cache.delete(key)

    def close(self) -> None:
        self.client.close()


_MISS = object()


def open_cache(mode: str, host: str, port: int) -> Any:
    if mode == "pernode":
        return PerNodeCache(host, port)
    if mode in ("shared", "hybrid"):
        return CairnCache(host, port, near=(mode == "hybrid"))
    raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")


class TimedCache:
    """Wraps a cache with the thesis's per-request measurements."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: List[Sample] = []
        self.writes: List[float] = []
        self._lock = threading.Lock()

    def get_or_fetch(self, key: str, lookup: Callable[[], Any]) -> Any:
        marks: List[float] = []

        def timed_lookup() -> Any:
            marks.append(time.perf_counter())
            value = lookup()
            marks.append(time.perf_counter())
            return value

        t0 = time.perf_counter()
        value, local = self.inner.get_or_fetch(key, timed_lookup)
        t1 = time.perf_counter()
        if marks:
            sample = (False, marks[0] - t0, marks[1] - marks[0], t1 - t0, False)
        else:
            sample = (True, t1 - t0, 0.0, t1 - t0, local)
        self.reads.append(sample)  # list.append is atomic in CPython
        return value

    def delete(self, key: str) -> float:
        t0 = time.perf_counter()
        self.inner.delete(key)
        elapsed = time.perf_counter() - t0
        self.writes.append(elapsed)
        return elapsed

    def put(self, key: str, value: Any) -> None:
        self.inner.put(key, value)

    def take(self) -> Tuple[List[Sample], List[float]]:
        """The samples so far, and starts a fresh record."""
        with self._lock:
            reads, writes = self.reads, self.writes
            self.reads, self.writes = [], []
        return reads, writes

    def close(self) -> None:
        self.inner.close()
