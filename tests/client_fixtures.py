"""Fixtures the Python client's test files share: one cairn server per test module (named after
the module) and a plain redis-py connection to it, flushed before each test. Imported by name
into the modules that use them."""

import pytest
import redis

from conftest import HOST, Server


@pytest.fixture(scope="module")
def srv(request):
    s = Server([], name=request.module.__name__.removeprefix("test_").replace("_", "-"))
    s.start()
    yield s
    s.stop()


@pytest.fixture
def plain(srv):
    r = redis.Redis(host=HOST, port=srv.port, socket_timeout=10)
    r.flushall()
    yield r
    r.close()
