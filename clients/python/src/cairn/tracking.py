"""The invalidation stream behind near caches.

One :class:`TrackingHub` per client owns two connections, both watched by one daemon thread:

* the **listener**, a RESP2 connection subscribed to ``__redis__:invalidate``, which receives
  every invalidation as a pub/sub message;
* the **registrar**, which holds ``CLIENT TRACKING ON REDIRECT <listener> BCAST PREFIX <ns>: ...``
  for every near-cached namespace, so that every change of a key under those prefixes (a write
  from either protocol, an expiry, an eviction, a TAG.DEL, a FLUSHALL) is pushed to the listener.

Why BCAST rather than the default "remember what I read" mode: in default mode the server stops
tracking a client's keys when that client disconnects, so the near cache's coherence would depend
on the health of every pooled connection that ever filled it, including idle ones nobody watches.
With BCAST, coherence depends only on these two connections, which the hub health-checks
(PING every ``health_interval`` seconds, failure after ``health_timeout``). The price is that the
process hears about every write under its prefixes, not just the keys it holds.

When either connection fails, every registered near cache is flushed and disabled (nothing is
kept while the stream is down), and the hub reconnects with exponential backoff. Near caches are
re-enabled (and flushed again) only once the new stream covers them.

:meth:`TrackingHub.sync` is a barrier: the registrar writes a marker key under a prefix of its own
(``__cairn__:sync:<listener id>:``, also BCAST-tracked) and the barrier completes when the marker's
invalidation reaches the listener. It travels the same path as every invalidation the server
posted before it, so they have all been applied by then. (A PING through the listener would not
do: a server may answer it before delivering invalidations that were already queued.)
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import redis
from redis.connection import AbstractConnection

from .near import NearCache

__all__ = ["TrackingHub", "CHANNEL", "connection_factory"]

log = logging.getLogger("cairn.tracking")

CHANNEL = b"__redis__:invalidate"
_SYNC_ROOT = b"__cairn__:sync:"

# Connection settings that carry over from a client's pool to the hub's own connections.
_CARRY = {
    "host", "port", "path", "db", "username", "password", "socket_connect_timeout", "socket_keepalive",
    "socket_keepalive_options", "socket_type", "credential_provider", "encoding", "encoding_errors",
    "ssl_keyfile", "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_data", "ssl_check_hostname",
    "ssl_ca_path", "ssl_password", "ssl_min_version", "ssl_ciphers",
}

ConnectionFactory = Callable[[str], AbstractConnection]


def connection_factory(connection_class: type, connection_kwargs: Dict[str, Any],
                       socket_timeout: float = 5.0) -> ConnectionFactory:
    """Builds unconnected sync redis-py connections like a (sync or asyncio) pool's, but RESP2,
    bytes, and named: ``factory(client_name)``."""
    name = connection_class.__name__
    if "Unix" in name:
        cls: type = redis.UnixDomainSocketConnection
    elif "SSL" in name:
        cls = redis.SSLConnection
    else:
        cls = redis.Connection
    kw = {k: v for k, v in connection_kwargs.items() if k in _CARRY}
    if cls is redis.Connection:
        kw = {k: v for k, v in kw.items() if not k.startswith("ssl_") and k != "path"}
    elif cls is redis.UnixDomainSocketConnection:
        kw = {k: v for k, v in kw.items() if k not in ("host", "port", "socket_keepalive",
                                                      "socket_keepalive_options", "socket_type")
              and not k.startswith("ssl_")}
    kw.update(protocol=2, decode_responses=False, socket_timeout=socket_timeout, health_check_interval=0)
    kw.setdefault("socket_connect_timeout", socket_timeout)

    def make(client_name: str) -> AbstractConnection:
        return cls(client_name=client_name, **kw)

    return make


def _minimal_prefixes(prefixes: Sequence[bytes]) -> List[bytes]:
    """Drops prefixes covered by a shorter one (Redis refuses overlapping BCAST prefixes)."""
    out: List[bytes] = []
    for p in sorted(set(prefixes), key=len):
        if not any(p.startswith(q) for q in out):
            out.append(p)
    return out


class HubStats:
    """Counters of the invalidation stream."""

    __slots__ = ("messages", "keys", "flush_messages", "connects", "losses", "barriers")

    def __init__(self) -> None:
        self.messages = 0  #: invalidation messages received
        self.keys = 0  #: keys named by them
        self.flush_messages = 0  #: "flush everything" messages (FLUSHALL)
        self.connects = 0  #: times the stream was (re)established
        self.losses = 0  #: times it broke (each one flushed the near caches)
        self.barriers = 0  #: sync() barriers sent

    def as_dict(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"HubStats({self.as_dict()})"


_HUBS: "weakref.WeakSet[TrackingHub]" = weakref.WeakSet()


class TrackingHub:
    """Keeps registered near caches coherent (see the module docstring).

    ``factory(client_name)`` makes an unconnected sync redis-py connection.
    """

    def __init__(self, factory: ConnectionFactory, *, health_interval: float = 1.0,
                 health_timeout: Optional[float] = None, reconnect_min: float = 0.05,
                 reconnect_max: float = 2.0) -> None:
        self._factory = factory
        self.health_interval = float(health_interval)
        self.health_timeout = float(health_timeout if health_timeout is not None else max(1.0, 2 * health_interval))
        self.reconnect_min = reconnect_min
        self.reconnect_max = reconnect_max
        self.stats = HubStats()
        #: called with the key list (None = flush everything) of each invalidation, on the hub thread
        self.on_invalidation: Optional[Callable[[Optional[List[bytes]]], None]] = None
        #: called (on the hub thread) each time the stream is (re)established: the server is up
        self.on_connect: Optional[Callable[[], None]] = None
        self._caches: Tuple[Tuple[bytes, NearCache], ...] = ()
        self._init_runtime()
        _HUBS.add(self)

    def _init_runtime(self) -> None:
        self._state_lock = threading.RLock()  # caches, registrar, readiness
        self._send_lock = threading.Lock()  # writes to the listener socket
        self._listener: Optional[AbstractConnection] = None
        self._listener_ok = False
        self._registrar: Optional[AbstractConnection] = None
        self._ready = threading.Event()
        self._closed = threading.Event()
        self._broken: Optional[BaseException] = None
        self._barriers: Dict[bytes, "concurrent.futures.Future[bool]"] = {}
        self._seq = itertools.count(1)
        self._thread: Optional[threading.Thread] = None
        self._pid = os.getpid()
        self.listener_id: Optional[int] = None
        self._sync_prefix = _SYNC_ROOT + b"0:"
        self.registrar_id: Optional[int] = None
        self._covered: Tuple[bytes, ...] = ()  # the prefixes the current registrar tracks
        self.generation = 0
        self.last_error: Optional[BaseException] = None
        self.failed_attempts = 0  # connection attempts (or streams) that failed

    # -- public ------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether the invalidation stream is up and covers every registered namespace."""
        return self._ready.is_set()

    def wait_ready(self, timeout: Optional[float] = None) -> bool:
        """Starts the hub if needed and waits until the stream is up."""
        self._start()
        return self._ready.wait(timeout)

    def register(self, namespace: str, near: NearCache, wait: Optional[float] = 5.0) -> bool:
        """Adds a near cache for ``namespace``; returns whether it is covered within ``wait`` s."""
        prefix = namespace.encode("utf-8") + b":"
        with self._state_lock:
            self._caches = self._caches + ((prefix, near),)
            if self._ready.is_set():
                try:
                    # A namespace the registrar already covers needs no new registration (a
                    # cache created per request must not cost a connection each time).
                    if not any(prefix.startswith(p) for p in self._covered):
                        self._rebuild_registrar()
                    near.set_enabled(True)
                except Exception as e:  # the hub thread reconnects and covers it then
                    log.warning("cairn: could not extend tracking to %r: %s", namespace, e)
                    self._broken = e
        failed_before = self.failed_attempts
        self._start()
        if wait:
            # Until covered, or until a connection attempt fails: a cache created while the
            # server is down must not block its caller (fail open); the hub keeps retrying.
            deadline = time.monotonic() + wait
            while not near.enabled and time.monotonic() < deadline and self.failed_attempts == failed_before:
                time.sleep(0.005)
        return near.enabled

    def unregister(self, near: NearCache) -> None:
        """Stops invalidating ``near`` (its namespace stays tracked until the next reconnect)."""
        with self._state_lock:
            self._caches = tuple(c for c in self._caches if c[1] is not near)
        near.set_enabled(False)

    def sync_future(self) -> "concurrent.futures.Future[bool]":
        """A barrier: the future becomes True once every invalidation the server posted to the
        listener before this call has been applied, False if the stream is down or breaks.

        Blocks for one round trip on the registrar (the marker write)."""
        fut: "concurrent.futures.Future[bool]" = concurrent.futures.Future()
        with self._state_lock:
            reg = self._registrar
            if reg is None or not self._ready.is_set():
                fut.set_result(False)
                return fut
            marker = self._sync_prefix + str(next(self._seq)).encode()
            self._barriers[marker] = fut
            try:
                reg.send_command("SET", marker, b"1", "PX", 10000)
                reg.read_response()
            except Exception as e:
                self._barriers.pop(marker, None)
                fut.set_result(False)
                self._broken = e
        self.stats.barriers += 1
        return fut

    def sync(self, timeout: float = 1.0) -> bool:
        """Blocking :meth:`sync_future`; False on timeout."""
        try:
            return self.sync_future().result(timeout)
        except concurrent.futures.TimeoutError:
            return False

    def close(self) -> None:
        """Stops the thread and closes the connections; registered caches are disabled."""
        self._closed.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2.0)
        with self._state_lock:
            for _, near in self._caches:
                near.set_enabled(False)
        self._teardown()

    # -- thread ------------------------------------------------------------------------------
    def _start(self) -> None:
        if os.getpid() != self._pid:  # forked and not yet reset
            self._after_fork()
        if self._thread is None and not self._closed.is_set():
            with self._state_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="cairn-tracking", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        delay = self.reconnect_min
        while not self._closed.is_set():
            try:
                self._connect()
                delay = self.reconnect_min
                self._serve()
            except Exception as e:
                if not self._closed.is_set():
                    self.last_error = e
                    self.failed_attempts += 1
                    log.info("cairn: invalidation stream lost: %s", e)
            finally:
                self._lost()
            if self._closed.wait(delay):
                break
            delay = min(delay * 2, self.reconnect_max)

    def _connect(self) -> None:
        listener = self._factory("cairn-near-listener")
        try:
            listener.connect()
            listener.send_command("CLIENT", "ID")
            lid = int(listener.read_response())
            listener.send_command("SUBSCRIBE", CHANNEL)
            listener.read_response()
        except BaseException:
            listener.disconnect()
            raise
        with self._send_lock:
            self._listener = listener
            self._listener_ok = True
        with self._state_lock:
            self._broken = None
            self.listener_id = lid
            self._sync_prefix = _SYNC_ROOT + str(lid).encode() + b":"
            self.generation += 1
            if self._caches:
                self._rebuild_registrar()
            for _, near in self._caches:
                near.set_enabled(True)
            self.stats.connects += 1
            self._ready.set()
        cb = self.on_connect
        if cb is not None:
            cb()

    def _rebuild_registrar(self) -> None:
        """A registrar covering every registered prefix; replaces the old one (caller holds the
        state lock). The new one is in place before the old one goes: no gap."""
        prefixes = _minimal_prefixes([p for p, _ in self._caches] + [self._sync_prefix])
        reg = self._factory("cairn-near-registrar")
        try:
            reg.connect()
            reg.send_command("CLIENT", "ID")
            rid = int(reg.read_response())
            args: List[Any] = ["CLIENT", "TRACKING", "ON", "REDIRECT", self.listener_id, "BCAST"]
            for p in prefixes:
                args += ["PREFIX", p]
            reg.send_command(*args)
            reg.read_response()
        except BaseException:
            reg.disconnect()
            raise
        old, self._registrar, self.registrar_id = self._registrar, reg, rid
        self._covered = tuple(prefixes)
        if old is not None:
            old.disconnect()

    def _serve(self) -> None:
        listener = self._listener
        assert listener is not None
        poll = min(0.1, self.health_interval)
        last_rx = time.monotonic()
        ping_sent: Optional[float] = None
        while not self._closed.is_set():
            if self._broken is not None:
                raise ConnectionError(f"tracking registration failed: {self._broken}")
            if listener.can_read(timeout=poll):
                msg = listener.read_response()
                last_rx = time.monotonic()
                ping_sent = None
                self._handle(msg)
                continue
            now = time.monotonic()
            if ping_sent is not None:
                if now - ping_sent > self.health_timeout:
                    raise TimeoutError(f"no answer to the listener's PING within {self.health_timeout}s")
            elif now - last_rx >= self.health_interval:
                with self._send_lock:
                    listener.send_command("PING")
                ping_sent = now
                with self._state_lock:
                    reg = self._registrar
                    if reg is not None:
                        reg.send_command("PING")
                        reg.read_response()

    def _handle(self, msg: Any) -> None:
        if not isinstance(msg, list) or not msg:
            return
        kind = msg[0]
        if kind == b"message" and len(msg) >= 3 and msg[1] == CHANNEL:
            keys = msg[2]
            if isinstance(keys, bytes):
                keys = [keys]
            self.stats.messages += 1
            if keys is None:
                self.stats.flush_messages += 1
                for _, near in self._caches:
                    near.flush()
            else:
                self.stats.keys += len(keys)
                for prefix, near in self._caches:
                    n = len(prefix)
                    mine = [k[n:].decode("utf-8", "surrogateescape") for k in keys if k.startswith(prefix)]
                    if mine:
                        near.invalidate_pushed(mine)
                if self._barriers:
                    for k in keys:
                        if k.startswith(_SYNC_ROOT):
                            fut = self._barriers.pop(k, None)
                            if fut is not None and not fut.done():
                                fut.set_result(True)
            cb = self.on_invalidation
            if cb is not None:
                cb(keys)

    def _lost(self) -> None:
        with self._send_lock:
            self._listener_ok = False
        with self._state_lock:
            was_ready = self._ready.is_set()
            self._ready.clear()
            for _, near in self._caches:
                near.set_enabled(False)
            if was_ready:
                self.stats.losses += 1
        self._teardown()

    def _teardown(self) -> None:
        with self._send_lock:
            self._listener_ok = False
            listener, self._listener = self._listener, None
            barriers, self._barriers = self._barriers, {}
        with self._state_lock:
            reg, self._registrar = self._registrar, None
            self._covered = ()
        for fut in barriers.values():
            if not fut.done():
                fut.set_result(False)
        for conn in (listener, reg):
            if conn is not None:
                try:
                    conn.disconnect()
                except Exception:
                    pass

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's sockets and thread; start afresh when used."""
        caches = self._caches
        for _, near in caches:
            near._reset_after_fork()
        self._init_runtime()
        self._caches = caches


def _reset_hubs_in_child() -> None:
    for hub in list(_HUBS):
        try:
            had_thread = hub._thread is not None
            hub._after_fork()
            if had_thread and hub._caches:
                hub._start()
        except Exception:  # pragma: no cover - best effort
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_hubs_in_child)
