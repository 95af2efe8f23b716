"""CircuitBreaker with a fake clock: closed, open for an interval, half-open with one trial."""

import pytest
from fakes import FakeClock

from cairn.resilience import CacheUnavailable, CircuitBreaker


def test_breaker_cycle():
    clock = FakeClock()
    b = CircuitBreaker(5.0, clock=clock)
    b.before()
    assert b.state == "closed"
    b.failure(TimeoutError("slow"))
    assert b.state == "open"
    for _ in range(3):
        with pytest.raises(CacheUnavailable, match="slow"):
            b.before()
    assert b.rejected == 3
    clock.advance(5.0)
    assert b.state == "half-open"
    b.before()  # the trial call
    with pytest.raises(CacheUnavailable):
        b.before()  # others still fail fast while the trial runs
    b.failure(ConnectionError("still down"))  # the trial failed: open for another interval
    clock.advance(4.9)
    with pytest.raises(CacheUnavailable):
        b.before()
    clock.advance(0.1)
    b.before()
    b.success()
    assert b.state == "closed"
    b.before()
    assert b.failures == 2


def test_zero_interval_never_opens():
    b = CircuitBreaker(0, clock=FakeClock())
    b.failure(TimeoutError())
    b.before()
    assert b.state == "closed"


def test_bad_interval():
    with pytest.raises(ValueError, match="breaker_interval"):
        CircuitBreaker(-1)
    with pytest.raises(ValueError):
        CircuitBreaker("5")  # type: ignore[arg-type]


def test_unavailable_is_a_redis_connection_error():
    import redis

    assert issubclass(CacheUnavailable, redis.ConnectionError)
