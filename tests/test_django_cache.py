"""cairn.django.CairnCache: Django's own cache backend tests, and the backend's extensions.

test_django_base_cache_tests runs Django's ``BaseCacheTests`` (from the pinned Django release's
source, unpacked by scripts/setup.sh) through tests/django_suite.py, once over RESP2 and once
over RESP3 with the near cache on. The other tests cover what Django's suite does not: typed
tags, near-cache coherence across processes' writes, fail open, the async ``a*`` methods.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from conftest import HOST, ROOT, TARGET, wait_until
from client_fixtures import plain, srv  # noqa: F401  (fixtures)

sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
django = pytest.importorskip("django", reason="Django is not installed (scripts/setup.sh installs it)")
cairn = pytest.importorskip("cairn")

if TARGET == "memcached":
    pytest.skip("the Django backend speaks RESP", allow_module_level=True)

from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(USE_TZ=False)

from cairn import where  # noqa: E402
from cairn.django import CairnCache  # noqa: E402

DJANGO_TESTS = Path(os.environ.get("CAIRN_DJANGO_TESTS", ROOT / ".venv" / "django-tests"))


def backend(srv, **options):
    return CairnCache(f"redis://{HOST}:{srv.port}/0", {"TIMEOUT": 300, "OPTIONS": options})


@pytest.mark.parametrize("protocol,near", [(2, False), (3, True)], ids=["resp2", "resp3-near"])
def test_django_base_cache_tests(srv, plain, protocol, near):
    if not (DJANGO_TESTS / "cache" / "tests.py").is_file():
        pytest.skip(f"Django's test sources are not in {DJANGO_TESTS} (scripts/setup.sh unpacks them)")
    cmd = [sys.executable, str(ROOT / "tests" / "django_suite.py"), "--django-tests", str(DJANGO_TESTS),
           "--location", f"redis://{HOST}:{srv.port}/0", "--protocol", str(protocol)]
    if near:
        cmd.append("--near")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    out = p.stdout + p.stderr
    m = re.search(r"RESULT run=(\d+) failures=(\d+) errors=(\d+) skipped=(\d+)", out)
    assert p.returncode == 0 and m, out[-6000:]
    run, failures, errors, skipped = map(int, m.groups())
    # Django 5.2's BaseCacheTests has 54 tests (+1 of ours); only the 3 culling tests skip, as
    # for Django's own Redis backend (a server evicts by memory policy, not MAX_ENTRIES).
    assert run >= 50 and failures == 0 and errors == 0 and skipped <= 3, out[-3000:]


def test_tags_extension(srv, plain):
    if TARGET != "cairn":
        pytest.skip("typed tags are cairn's")
    PAGE = 1
    c = backend(srv)
    c.set("page:5:header", "<h1>5</h1>", 600, tags=[(PAGE, 5)])
    c.set_many({"page:5:body": "<p>", "page:6:body": "<p>6"}, 600, tags=[(PAGE, 5)])
    c.set("page:6:body", "<p>6", tags=[(PAGE, 6)])  # replaces the record's tags
    assert c.add("page:5:footer", "<footer>", tags=[(PAGE, 5)]) is True
    assert c.add("page:5:footer", "again", tags=[(PAGE, 5)]) is False
    assert c.count_by_tag(where(PAGE) == 5) == 3
    assert sorted(c.keys_by_tag(where(PAGE) == 5)) == [":1:page:5:body", ":1:page:5:footer", ":1:page:5:header"]
    assert 590_000 < plain.pttl(":1:page:5:header") <= 600_000
    assert c.delete_by_tag(where(PAGE) == 5) == 3
    assert c.get_many(["page:5:header", "page:5:body", "page:6:body"]) == {"page:6:body": "<p>6"}
    with pytest.raises(TypeError, match="pair"):
        c.set("k", 1, tags=[(1, 2, 3)])


def test_near_cache_coherence_and_read_your_writes(srv, plain):
    a = backend(srv, near=True)
    b = backend(srv, near=True)  # another thread's backend object: the same near cache
    a.set("k", {"v": 1})
    assert b.get("k") == {"v": 1}
    assert a.near is b.near and a.near.enabled
    hits = a.near.stats.hits
    first, second = a.get("k"), a.get("k")
    assert first == second and first is not second, "each hit is unpickled afresh"
    assert a.near.stats.hits >= hits + 2
    plain.set(":1:k", b"7")  # another process writes: the push invalidates the near cache
    wait_until(lambda: a.get("k") == 7, timeout=2, msg="near cache invalidated by push")
    for i in range(100):  # read-your-writes through any backend object
        (a if i % 2 else b).set("k", i)
        assert a.get("k") == i and b.get("k") == i
    assert a.incr("k") == 100 and b.get("k") == 100
    a.delete("k")
    assert b.get("k", "gone") == "gone"
    c = cairn.Client(HOST, srv.port)  # a cairn.Cache-level write in the same process
    try:
        a.set("x", 1)
        assert b.get("x") == 1
        c.redis.set(":1:x", b"2")
        wait_until(lambda: b.get("x") == 2, timeout=2, msg="pushed")
    finally:
        c.close()


def test_fail_open_backend(server_factory):
    s = server_factory()
    ok = backend(s, on_error="fetch", breaker_interval=30)
    strict = backend(s, breaker_interval=30)
    ok.set("k", "v")
    assert ok.get("k") == "v"
    s.stop()
    t0 = time.monotonic()
    assert ok.get("k", "default") == "default"
    assert ok.get_many(["k"]) == {}
    assert ok.has_key("k") is False
    assert ok.add("k", 1) is False and ok.touch("k") is False
    ok.set("k", "v2")  # skipped
    assert ok.get_or_set("k", "computed") == "computed"
    with pytest.raises(cairn.CacheUnavailable):
        ok.delete("k")
    with pytest.raises(redis.ConnectionError):
        strict.get("k")
    assert time.monotonic() - t0 < 2.0


def test_async_methods(srv, plain):
    c = backend(srv)

    async def main():
        await c.aset("a", [1, 2], 60)
        assert await c.aget("a") == [1, 2]
        assert await c.aadd("a", 0) is False
        await c.aset_many({"b": 1, "c": 2})
        assert await c.aget_many(["a", "b", "c"]) == {"a": [1, 2], "b": 1, "c": 2}
        assert await c.aincr("b", 5) == 6
        assert await c.adecr("b") == 5
        assert await c.atouch("a", 10) is True
        assert await c.ahas_key("a") is True
        assert await c.adelete("a") is True
        await c.adelete_many(["b", "c"])
        assert await c.aget_or_set("d", lambda: "made") == "made"
        assert await c.aincr_version("d") == 2
        assert await c.aget("d", version=2) == "made"
        await c.aclear()
        assert await c.aget("d", version=2) is None

    asyncio.run(main())


def test_versions_prefix_and_key_function(srv, plain):
    c = CairnCache(f"{HOST}:{srv.port}", {"KEY_PREFIX": "site", "VERSION": 3,
                                          "KEY_FUNCTION": lambda k, p, v: f"{p}/{v}/{k}"})
    c.set("k", 1)
    assert plain.get("site/3/k") == b"1"  # ints are stored as decimal text (INCRBY works on them)
    assert c.get("k") == 1 and c.get("k", version=2) is None
    assert c.incr_version("k") == 4 and c.get("k", version=4) == 1
    with pytest.raises(ValueError, match="LOCATION"):
        CairnCache(["a:1", "b:2"], {})
    with pytest.raises(ValueError, match="on_error"):
        CairnCache("a:1", {"OPTIONS": {"on_error": "nope"}})
