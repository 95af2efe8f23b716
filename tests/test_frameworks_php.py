"""The frameworks web applications run on Redis, unmodified, from Debian's packages: Laravel's
cache (Illuminate\\Cache\\Repository over RedisStore, phpredis connector), Symfony's RedisAdapter
and RedisTagAwareAdapter, PHP sessions with phpredis's session locking, and redis-py's Lock.

Each scenario is one PHP process (tests/php/*.php) printing one JSON object of its steps; the
test checks every step. All of them pass against real Redis (CAIRN_TARGET=redis) and cairn: they
need Lua scripting (EVAL/EVALSHA for `add`, lock release, session locks, tag invalidation) and
sets (tag sets).

scripts/setup.sh installs php-cli php-redis php-symfony-cache php-laravel-framework.
"""

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis

from conftest import HOST

pytestmark = pytest.mark.redis_only

PHP_DIR = Path(__file__).resolve().parent / "php"


def _php(include=None):
    php = shutil.which("php")
    if not php:
        pytest.skip("php not installed (scripts/setup.sh installs php-cli php-redis)")
    mods = subprocess.run([php, "-m"], capture_output=True, text=True, timeout=30).stdout.split()
    if "redis" not in mods:
        pytest.skip("the phpredis extension is not loaded (scripts/setup.sh installs php-redis)")
    if include:
        found = subprocess.run([php, "-r", f"exit(stream_resolve_include_path('{include}') ? 0 : 1);"],
                               timeout=30)
        if found.returncode != 0:
            pytest.skip(f"{include} not found (scripts/setup.sh installs php-laravel-framework "
                        "php-symfony-cache)")
    return php


def run_php(php, script, *args, ini=(), timeout=30):
    cmd = [php]
    for setting in ini:
        cmd += ["-d", setting]
    cmd += [str(PHP_DIR / script), *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return json.loads(lines[-1]), done.stderr


@pytest.fixture
def tag_friendly_server(server_factory):
    """A server whose policy Symfony's RedisTagAwareAdapter accepts (noeviction or volatile-*)."""
    return server_factory("--maxmemory-policy", "volatile-lru")


# --- Laravel ------------------------------------------------------------------------------

def test_laravel_cache(server, r):
    php = _php("Illuminate/Cache/autoload.php")
    out, _ = run_php(php, "laravel_cache.php", server.port)
    assert out["put"] is True
    assert out["get"] == {"name": "Ada"}
    assert out["get_missing"] == "default"
    assert (out["add_new"], out["add_existing"], out["add_value"]) == (True, False, "first")
    assert out["increment"] == [1, 6, 5]
    assert out["put_many"] is True
    assert out["many"] == {"a": "1", "b": "2", "c": None}
    assert out["remember"] == ["fresh", "fresh"]
    assert out["forever_forget"] == [True, True, False]
    assert (out["tags_put"], out["tags_get"]) == (True, "John")
    assert out["tags_flush"] is True
    assert out["tags_after_flush"] is None
    # got it; a second owner does not; released; then free for the next one
    assert out["lock"] == [True, False, True, True, True]
    assert out["flush"] == [True, None]


# --- Symfony ------------------------------------------------------------------------------

def test_symfony_redis_adapter(tag_friendly_server):
    php = _php("Symfony/Component/Cache/autoload.php")
    out, _ = run_php(php, "symfony_cache.php", tag_friendly_server.port, "plain")
    assert out["plain_save"] is True
    assert out["plain_get"] == [True, 42]
    assert out["plain_delete"] == [True, False]
    assert out["log"] == []


def test_symfony_tag_aware_adapter(tag_friendly_server):
    php = _php("Symfony/Component/Cache/autoload.php")
    out, _ = run_php(php, "symfony_cache.php", tag_friendly_server.port, "tagged")
    assert out["tag_save"] == [True, True, True], out["log"]
    assert out["tag_get"] == ["value of post1", "value of post2", "value of profile"]
    assert out["invalidate"] is True, out["log"]
    assert out["after_invalidate"] == [False, True, False]
    assert out["log"] == []


def test_symfony_tag_aware_adapter_refuses_an_allkeys_policy(server_factory):
    """What Symfony checks (INFO's maxmemory_policy): an evicting allkeys-* policy is refused
    by name, which needs the policy's real name (cairn used to say `evict`)."""
    php = _php("Symfony/Component/Cache/autoload.php")
    srv = server_factory("--maxmemory-policy", "allkeys-lru")
    out, _ = run_php(php, "symfony_cache.php", srv.port, "tagged")
    assert out["tag_save"] == [False, False, False]
    assert any('maxmemory-policy setting "allkeys-lru" is *not* supported' in line
               for line in out["log"]), out["log"]


# --- PHP sessions with locking -------------------------------------------------------------

def test_php_session_locking(server, r):
    php = _php()
    ini = [
        "session.save_handler=redis",
        f"session.save_path=tcp://{HOST}:{server.port}",
        "session.use_cookies=0",
        "redis.session.locking_enabled=1",
        "redis.session.lock_retries=100",       # 100 x 10 ms: a lost lock fails within ~1 s
        "redis.session.lock_wait_time=10000",
    ]
    first = {}

    def request_a():
        first["out"], first["err"] = run_php(php, "session_lock.php", server.port, "sess1", "A", "0.4",
                                             ini=ini)

    a = threading.Thread(target=request_a)
    a.start()
    # B asks while A holds the session (A holds it 0.4 s).
    deadline = time.monotonic() + 5
    while r.exists("PHPREDIS_SESSION:sess1_LOCK") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.exists("PHPREDIS_SESSION:sess1_LOCK") == 1, "request A never took the session lock"
    second, second_err = run_php(php, "session_lock.php", server.port, "sess1", "B", "0", ini=ini)
    a.join(10)
    a_out = first["out"]
    assert first["err"] == "" and second_err == "", first["err"] + second_err
    assert a_out["started"] and a_out["closed"] and second["started"] and second["closed"]
    # B got the session only after A released it, and promptly, and saw what A wrote.
    assert second["got"] >= a_out["released"]
    assert second["got"] - a_out["released"] < 0.5
    assert second["visits"] == ["A", "B"]
    assert r.exists("PHPREDIS_SESSION:sess1_LOCK") == 0


# --- redis-py Lock ------------------------------------------------------------------------

def test_redis_py_lock(r):
    lock = r.lock("resource", timeout=10)
    assert lock.acquire(blocking=False) is True
    other = r.lock("resource", timeout=10)
    assert other.acquire(blocking=False) is False
    assert lock.owned() is True
    assert lock.extend(20) is True
    assert 20_000 < r.pttl("resource") <= 30_000
    assert lock.reacquire() is True and r.pttl("resource") > 9_000
    lock.release()
    assert r.exists("resource") == 0
    assert other.acquire(blocking=True, blocking_timeout=1) is True
    # Someone else's token under the name: the owner check of release fails.
    r.set("resource", "not-a-token")
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        other.release()
    assert r.get("resource") == b"not-a-token"
