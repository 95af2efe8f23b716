"""The near cache: decoded values in process memory, coherent through pushed invalidations.

This module is pure bookkeeping (no I/O), shared by the sync and asyncio clients and safe to use
from any thread. The rules that make it coherent:

* **Fill tokens.** A fill (reading a key from the server to keep it locally) takes a token
  *before* it sends the read and inserts *only if the token is still valid* when the reply is in.
  An invalidation of the key (a push from the server, or a local write) cancels every pending
  token of that key, so an invalidation that arrives while a fill is in flight always wins: the
  possibly stale reply is returned to its caller but not kept.
* **Epochs.** :meth:`NearCache.flush` (connection lost, FLUSHALL, reconnect) empties the cache and
  bumps the epoch, which cancels every fill started before it.
* **Disabled until covered.** While the invalidation stream is not established, tokens are born
  invalid: nothing is kept that the server would not tell us about.
* **Own writes.** A process that stores a value it just fetched keeps it (:meth:`begin_own_fill`):
  the server will push the invalidation of that very write back to this process (BCAST cannot
  tell writers apart), so the cache counts its own writes per key and lets that many pushes pass
  without dropping the entry. Pushes for a key arrive in the order the server ran its writes, so a
  push that passes is either the own write's or one that came before it; a later write's push
  always drops the entry. While an own write is in flight, other fills of the key are not kept
  (they might have read the value from before it).
* **Local TTL.** Every entry expires locally after ``max_local_ttl`` seconds, or sooner when the
  server's own TTL for the key is shorter: a safety net, not the coherence mechanism.
* **Bounded size.** At most ``max_items`` entries, evicted in CLOCK order (an entry read since
  the hand last passed gets a second chance). Reads take no lock.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Tuple

__all__ = ["NearCache", "NearStats", "FillToken", "MISS", "PeerGroup", "peer_group"]

_INF = float("inf")
MISS: Any = object()  # "not answered from memory" (None is a value a cache may hold)


class _Entry:
    __slots__ = ("value", "deadline", "soft", "ref")

    def __init__(self, value: Any, deadline: float, soft: float) -> None:
        self.value = value
        self.deadline = deadline  # the cache clock's time after which the entry is gone
        self.soft = soft  # the cache clock's time after which the value is stale (inf: never)
        self.ref = False


class FillToken:
    """Permission to insert one key's value, revoked by an invalidation of the key."""

    __slots__ = ("key", "epoch", "valid")

    def __init__(self, key: str, epoch: int, valid: bool) -> None:
        self.key = key
        self.epoch = epoch
        self.valid = valid


class NearStats:
    """Counters of a near cache (``hits`` is approximate under heavy thread contention)."""

    __slots__ = ("hits", "misses", "fills", "rejected_fills", "invalidations", "own_pushes", "flushes", "evictions",
                 "expirations")

    def __init__(self) -> None:
        self.hits = 0  #: gets answered from memory
        self.misses = 0  #: gets that went to the server
        self.fills = 0  #: values kept after a read
        self.rejected_fills = 0  #: reads not kept: an invalidation or flush came first
        self.invalidations = 0  #: keys invalidated (pushes and local writes)
        self.own_pushes = 0  #: pushes of this process's own kept writes, let pass
        self.flushes = 0  #: whole-cache flushes (lost stream, FLUSHALL, reconnect)
        self.evictions = 0  #: entries dropped for max_items
        self.expirations = 0  #: entries dropped for their local TTL

    def as_dict(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"NearStats({self.as_dict()})"


class NearCache:
    """A bounded, token-guarded map from keys to decoded values (see the module docstring)."""

    def __init__(self, max_items: int = 10_000, max_local_ttl: float = 60.0, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        if max_local_ttl <= 0:
            raise ValueError("max_local_ttl must be positive")
        self.max_items = int(max_items)
        self.max_local_ttl = float(max_local_ttl)
        self._clock = clock  # monotonic seconds; injectable for tests
        self.data: Dict[str, _Entry] = {}
        self._pending: Dict[str, List[FillToken]] = {}
        self._own: Dict[str, int] = {}  # own writes per key whose push has not come back yet
        self._lock = threading.Lock()
        self.epoch = 0
        self.enabled = False
        self.stats = NearStats()
        # test hook: called with the key between a fill's reply and its insertion
        self._before_insert: Optional[Any] = None

    # -- reads -------------------------------------------------------------------------------
    def lookup(self, key: str) -> Optional[_Entry]:
        """The live entry for ``key`` (fresh or stale), or None. Lock-free."""
        e = self.data.get(key)
        if e is None:
            return None
        if e.deadline <= self._clock():
            self._expire(key, e)
            return None
        e.ref = True
        return e

    def get(self, key: str, default: Any = None) -> Any:
        """The fresh value of ``key``, or ``default``."""
        e = self.data.get(key)
        if e is not None:
            now = self._clock()
            if e.soft > now and e.deadline > now:
                e.ref = True
                self.stats.hits += 1
                return e.value
        return default

    def read(self, key: str) -> Tuple[Any, Optional[_Entry]]:
        """A cache read, counted as a hit or a miss: ``(value, None)`` when ``key`` is fresh here,
        else ``(MISS, entry)`` with the stale entry still kept (or None). Lock-free."""
        e = self.data.get(key)
        if e is not None:
            now = self._clock()
            if e.deadline > now:
                if e.soft > now:
                    e.ref = True
                    self.stats.hits += 1
                    return e.value, None
                self.stats.misses += 1
                return MISS, e
            self._expire(key, e)
        self.stats.misses += 1
        return MISS, None

    def _expire(self, key: str, e: _Entry) -> None:
        with self._lock:
            if self.data.get(key) is e:
                del self.data[key]
                self.stats.expirations += 1

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: str) -> bool:
        return self.lookup(key) is not None

    def keys(self) -> List[str]:
        return list(self.data)

    # -- fills -------------------------------------------------------------------------------
    def begin_fill(self, key: str) -> FillToken:
        """Takes a token for ``key`` before its read is sent."""
        with self._lock:
            token = FillToken(key, self.epoch, self.enabled and key not in self._own)
            if token.valid:
                self._pending.setdefault(key, []).append(token)
            return token

    def complete_fill(self, token: FillToken, value: Any, server_ttl: Optional[float] = None,
                      soft_in: Optional[float] = None) -> bool:
        """Inserts ``value`` if ``token`` survived; returns whether it did.

        ``server_ttl``: seconds the server keeps the key (None: no expiry); ``soft_in``: seconds
        until the value turns stale (None: never).
        """
        hook = self._before_insert
        if hook is not None:
            hook(token.key)
        now = self._clock()
        with self._lock:
            self._unpend(token)
            if not (token.valid and token.epoch == self.epoch and self.enabled):
                self.stats.rejected_fills += 1
                return False
            ttl = self.max_local_ttl if server_ttl is None else min(self.max_local_ttl, server_ttl)
            if ttl <= 0:
                return False
            soft = _INF if soft_in is None else now + soft_in
            data = self.data
            data.pop(token.key, None)
            data[token.key] = _Entry(value, now + ttl, soft)
            self.stats.fills += 1
            if len(data) > self.max_items:
                self._evict()
            return True

    def begin_own_fill(self, key: str) -> FillToken:
        """Takes a token for a value this process is about to write to the server and keep.

        Drops the key and cancels the other fills of it (they may have read an older value), and
        expects the write's invalidation push. Follow with :meth:`complete_fill` once the write is
        done, or with :meth:`own_write_failed` if it did not happen.
        """
        with self._lock:
            self._invalidate(key)
            self._own[key] = self._own.get(key, 0) + 1
            token = FillToken(key, self.epoch, self.enabled)
            if token.valid:
                self._pending.setdefault(key, []).append(token)
            return token

    def own_write_failed(self, token: FillToken) -> None:
        """The write begun with :meth:`begin_own_fill` did not run: no push will come for it."""
        with self._lock:
            self._unpend(token)
            if token.epoch != self.epoch:
                return  # flushed meanwhile: the count is gone already
            n = self._own.get(token.key, 0)
            if n > 1:
                self._own[token.key] = n - 1
            elif n == 1:
                del self._own[token.key]
            else:
                # A push was let through on this write's account: it was another writer's.
                self._invalidate(token.key)

    def invalidate_pushed(self, keys: Iterable[str]) -> None:
        """Invalidations pushed by the server: a key's own writes each let one push pass."""
        with self._lock:
            own = self._own
            for key in keys:
                n = own.get(key)
                if n:
                    if n > 1:
                        own[key] = n - 1
                    else:
                        del own[key]
                    self.stats.own_pushes += 1
                    continue
                self._invalidate(key)

    def abort_fill(self, token: FillToken) -> None:
        """Gives a token back without inserting (the key was missing, or the read failed)."""
        with self._lock:
            self._unpend(token)

    def _unpend(self, token: FillToken) -> None:
        lst = self._pending.get(token.key)
        if lst is not None:
            try:
                lst.remove(token)
            except ValueError:
                pass
            if not lst:
                del self._pending[token.key]

    def _evict(self) -> None:
        # CLOCK over insertion order: a referenced entry moves to the back once.
        data = self.data
        budget = 2 * len(data) + 1
        while len(data) > self.max_items and budget > 0:
            budget -= 1
            key = next(iter(data))
            e = data.pop(key)
            if e.ref:
                e.ref = False
                data[key] = e
            else:
                self.stats.evictions += 1

    # -- invalidation ------------------------------------------------------------------------
    def invalidate(self, key: str) -> None:
        """Drops ``key`` and cancels its fills in flight."""
        with self._lock:
            self._invalidate(key)

    def invalidate_many(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._invalidate(key)

    def _invalidate(self, key: str) -> None:
        self.stats.invalidations += 1
        self.data.pop(key, None)
        pending = self._pending.pop(key, None)
        if pending:
            for t in pending:
                t.valid = False

    def flush(self) -> None:
        """Drops everything and cancels every fill in flight."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        self.epoch += 1
        self.stats.flushes += 1
        self.data.clear()
        for lst in self._pending.values():
            for t in lst:
                t.valid = False
        self._pending.clear()
        self._own.clear()

    def _reset_after_fork(self) -> None:
        """In a forked child: fresh lock (the parent's may have been held at the fork), empty,
        disabled until the child's own invalidation stream covers it."""
        self._lock = threading.Lock()
        self.epoch += 1
        self.data.clear()
        self._pending.clear()
        self._own.clear()
        self.enabled = False

    def set_enabled(self, enabled: bool) -> None:
        """Turns keeping values on (the invalidation stream covers this cache) or off; both flush."""
        with self._lock:
            self._flush()
            self.enabled = enabled


class PeerGroup:
    """Every near cache of one namespace on one server in this process.

    Read-your-writes holds per *process*: a write through any :class:`~cairn.Cache` (of any
    :class:`~cairn.Client`) drops the key from every near cache of the namespace and cancels
    their fills in flight before the write call returns, instead of leaving the other caches
    to wait for the server's push.
    """

    def __init__(self) -> None:
        self._members: "weakref.WeakSet[NearCache]" = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, near: NearCache) -> None:
        with self._lock:
            self._members.add(near)

    def discard(self, near: NearCache) -> None:
        with self._lock:
            self._members.discard(near)

    def members(self) -> List[NearCache]:
        with self._lock:
            return list(self._members)

    def invalidate_many(self, keys: Iterable[str], *, besides: Optional[NearCache] = None) -> None:
        """Drops ``keys`` from every member (except ``besides``)."""
        keys = list(keys)
        for near in self.members():
            if near is not besides:
                near.invalidate_many(keys)


_GROUPS: Dict[Hashable, PeerGroup] = {}
_GROUPS_LOCK = threading.Lock()


def peer_group(endpoint: Hashable, namespace: str) -> PeerGroup:
    """The process-wide :class:`PeerGroup` of ``namespace`` on the server ``endpoint``."""
    with _GROUPS_LOCK:
        g = _GROUPS.get((endpoint, namespace))
        if g is None:
            g = _GROUPS[(endpoint, namespace)] = PeerGroup()
        return g
