"""Failing fast and failing open: the circuit breaker in front of the server, and the error it raises.

A cache is an optimisation: when the server is down or slow, a web request should lose a few
hundred milliseconds once, not block for minutes or fail. Two parts make that so:

* Every server call of a :class:`~cairn.Client` goes through one :class:`CircuitBreaker`. A
  connection error or a timeout *opens* it: for ``interval`` seconds every call fails at once
  with :class:`CacheUnavailable`, without touching the network. Then one caller is let through
  (half-open): its success closes the breaker, its failure opens it for another interval. So a
  dead server costs at most one (short) timeout per interval, whatever the request rate.
* A cache created with ``on_error="fetch"`` turns :class:`CacheUnavailable` into a miss:
  ``get`` returns its default, ``get_or_fetch`` calls ``fetch()``. See :class:`cairn.Cache`.

The clock is injectable (``clock=``) so that the unit tests drive it by hand.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Optional

import redis

__all__ = ["CacheUnavailable", "CircuitBreaker", "ON_ERROR"]

ON_ERROR = ("raise", "fetch")
"""The values of a cache's ``on_error``: ``"raise"`` (the default) or ``"fetch"`` (fail open)."""


class CacheUnavailable(redis.ConnectionError):
    """The server could not be reached in time, or the circuit breaker is open.

    A :class:`redis.ConnectionError`, so existing ``except redis.ConnectionError`` handlers
    catch it; the original error (connection refused, timeout...) is its ``__cause__``.
    """


class CircuitBreaker:
    """Closed, open for ``interval`` seconds after a failure, then half-open (one trial call).

    :param interval: seconds calls fail fast after a failure (0 disables the breaker: every
        call tries the server).
    """

    def __init__(self, interval: float = 5.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or interval < 0:
            raise ValueError(f"breaker_interval must be a number of seconds >= 0, not {interval!r}")
        self.interval = float(interval)
        self._clock = clock
        self._lock = threading.Lock()
        self._open_until = 0.0  # clock value until which calls fail fast; 0: closed
        self._trial = False  # a half-open trial call is in flight
        self.failures = 0  #: failed calls that opened (or re-opened) the breaker
        self.rejected = 0  #: calls failed fast while open
        self.last_error: Optional[BaseException] = None

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"``."""
        with self._lock:
            if not self._open_until:
                return "closed"
            return "open" if self._clock() < self._open_until or self._trial else "half-open"

    def before(self) -> None:
        """Called before a server call: raises :class:`CacheUnavailable` while open."""
        if not self._open_until:  # closed: the common case takes no lock
            return
        with self._lock:
            if not self._open_until:
                return
            if self._clock() >= self._open_until and not self._trial:
                self._trial = True  # half-open: this caller tries the server
                return
            self.rejected += 1
        raise CacheUnavailable(f"cairn server unavailable (circuit open after: {self.last_error})")

    def success(self) -> None:
        if self._open_until or self._trial:
            with self._lock:
                self._open_until = 0.0
                self._trial = False

    def failure(self, error: BaseException) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = error
            self._trial = False
            if self.interval > 0:
                self._open_until = self._clock() + self.interval

    def stats(self) -> Dict[str, object]:
        return {"state": self.state, "failures": self.failures, "rejected": self.rejected}


#: errors that mean "the server is unreachable or slow" (not "the server said no")
TRANSPORT_ERRORS = (redis.ConnectionError, redis.TimeoutError, ConnectionError, TimeoutError, OSError)
