"""clients/php: the Symfony cache adapter and the Laravel cache store on typed tags, driven
through Debian's php-symfony-cache and php-laravel-framework as an application uses them.

Each scenario is one PHP process (tests/php/cairn_*.php) printing one JSON object of its
steps; the test checks every step, then looks at the server itself (typed tags, what a
TAG.DEL left). The page-fragment examples count the commands an invalidation ran with
INFO commandstats (CONFIG RESETSTAT just before): exactly one TAG.DEL, nothing else.

cairn only: Redis has no TAG.* commands. Skipped, saying why, where php, phpredis or the
frameworks are missing (scripts/setup.sh installs them).
"""

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.cairn_only

PHP_DIR = Path(__file__).resolve().parent / "php"
HASHED_TYPE = 4294967295      # TagRegistry::HASHED_TYPE
NAMESPACE_TYPE = 4294967294   # TagRegistry::NAMESPACE_TYPE


def php_with(*includes):
    php = shutil.which("php")
    if not php:
        pytest.skip("php not installed (scripts/setup.sh installs php-cli php-redis)")
    mods = subprocess.run([php, "-m"], capture_output=True, text=True, timeout=30).stdout.split()
    if "redis" not in mods:
        pytest.skip("the phpredis extension is not loaded (scripts/setup.sh installs php-redis)")
    for include in includes:
        found = subprocess.run([php, "-r", f"exit(stream_resolve_include_path('{include}') ? 0 : 1);"],
                               timeout=30)
        if found.returncode != 0:
            pytest.skip(f"{include} not found (scripts/setup.sh installs php-symfony-cache "
                        "php-psr-simple-cache php-laravel-framework)")
    return php


def run_php(php, script, port):
    done = subprocess.run([php, str(PHP_DIR / script), str(port)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def name_hash(name):
    """TagRegistry::hash, the documented rule: SHA-1's first 8 bytes, big-endian, signed."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big", signed=True)


def test_tag_registry_hash_is_the_documented_rule():
    php = php_with()
    code = ("require 'clients/php/autoload.php'; $t = new Cairn\\Cache\\TagRegistry(['page' => 1]);"
            "echo json_encode([$t->map('page:5'), $t->map('page:-9223372036854775808'),"
            " $t->map('page:05'), $t->map('page:9223372036854775808'), $t->map('authors'),"
            " $t->map('pages:5'), $t->namespaceTag('app')]);")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([php, "-r", code], capture_output=True, text=True, timeout=30, cwd=root)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        [1, 5], [1, -2**63],
        [HASHED_TYPE, name_hash("page:05")],                  # not canonical: hashed
        [HASHED_TYPE, name_hash("page:9223372036854775808")],  # past 64 bits: hashed
        [HASHED_TYPE, name_hash("authors")],
        [HASHED_TYPE, name_hash("pages:5")],                  # kind not registered
        [NAMESPACE_TYPE, name_hash("app")],
    ]


# --- Symfony ------------------------------------------------------------------------------

def test_symfony_adapter(server, r):
    php = php_with("Symfony/Component/Cache/autoload.php", "Psr/SimpleCache/autoload.php")
    out = run_php(php, "cairn_symfony.php", server.port)
    ns = [NAMESPACE_TYPE, name_hash("app")]
    # PSR-6 items: hit, miss, the record (namespace tag), getItems, delete, Symfony's key rules
    assert out["save_get"] == [True, True, {"name": "Ada"}]
    assert out["miss"] == [False, None]
    assert out["stored_as"] == [1, [ns]]
    assert out["get_items"] == [["user.1", True], ["nope", False]]
    assert out["delete"] == [True, False]
    assert "reserved characters" in out["bad_key"]
    # expiry: PX in milliseconds, gone after it; the default lifetime; saved already expired
    assert out["expiry"] == [True, True, False]
    assert out["default_lifetime"] is True
    assert out["saved_expired"] == [True, False]
    # tags across items: one tag's items, then several tags at once (hashed and kinds)
    assert out["tag_save"] == [True, True, True, True]
    assert out["invalidate_one"] == [True, [False, True, False, True]]
    assert out["invalidate_many"] == [True, {"multi": 1, "tag.del": 3, "exec": 1}, [False, False]]
    assert "Invalid cache tag" in out["bad_tag"]
    # 16 tags + the namespace tag: past max-tags-per-record, refused and logged
    assert out["too_many_tags"] is False
    assert any("crowded" in line and "too many tags" in line for line in out["log"]), out["log"]
    # deferred saves: nothing written until commit() or a read of a deferred key (as in
    # Symfony); invalidateTags commits first; commit() is the TAG.SETs alone
    assert out["deferred"] == [0, False, 0, 2, 3]
    assert out["deferred_invalidate"] == [False, False, True, False]
    assert out["commit"] == [True, {"tag.set": 5}, 5]
    # the contracts' get(): computed once, recomputed after its tag was invalidated
    assert out["contracts_get"] == ["rendered 1", "rendered 1", "rendered 2", 2]
    # PSR-16 through Symfony's Psr16Cache
    assert out["psr16"] == [True, "one", True, True,
                            {"s1": "one", "s2": 2, "s3": [3], "s4": "dflt"}, True, False, True, False]
    # clear(): one TAG.DEL of the namespace tag; other namespaces and foreign keys stay
    assert out["clear"] == [True, {"tag.del": 1}, False, False, "kept", 1]
    assert out["clear_prefix"] == [True, False, False, True]
    # a connection with OPT_PREFIX and a serializer
    assert out["connection_prefix"] == [True, 1, [[NAMESPACE_TYPE, name_hash("pfx_ns")], [1, 5]],
                                        "v", True, False]
    # the page-fragment example: page 5's two fragments gone with exactly one TAG.DEL
    before, ok, stats, left = out["fragments"]
    assert (before, ok, stats, left) == (2, True, {"tag.del": 1}, [False, False, True])
    assert out["log"] == [line for line in out["log"] if "crowded" in line]
    # what the server holds: typed tags any client can use
    assert r.execute_command("TAG.COUNT", "WHERE", 1, "=", 5) == 0
    assert r.execute_command("TAG.KEYS", "WHERE", 2, "=", 42) == [b"0", [b"app:frag.p7.u42.inbox"]]
    assert sorted(map(tuple, r.execute_command("TAG.OF", "app:frag.p7.u42.inbox"))) == \
        sorted([tuple(ns), (1, 7), (2, 42)])


# --- Laravel ------------------------------------------------------------------------------

def test_laravel_store(server, r):
    php = php_with("Illuminate/Cache/autoload.php")
    out = run_php(php, "cairn_laravel.php", server.port)
    ns = [NAMESPACE_TYPE, name_hash("app")]
    # registered by the service provider with Cache::extend('cairn', ...)
    assert out["store_class"] == "Cairn\\Cache\\Laravel\\CairnStore"
    assert (out["put"], out["get"]) == (True, {"name": "Ada"})
    assert out["stored_as"] == [True, [ns]]
    assert out["get_missing"] == "default"
    assert out["add"] == [True, False, "first"]
    assert out["increment"] == [1, 6, 5, "5"]
    assert out["put_many"] == [True, {"a": "1", "b": "two", "c": None}]
    assert out["remember"] == ["fresh", "fresh"]
    assert out["forever_forget"] == [True, -1, True, False, False]
    assert out["expiry"] == [True, "soon gone", None]
    # tags: items under a tag list are read under that list (Laravel's rule); flushing one
    # tag removes its items under every list, and nothing else
    assert out["tags_put"] == [True, True, True]
    assert out["tags_get"] == ["John", "John the author", None, "Anne"]
    assert out["tags_flush"] == [True, None, None, "Anne"]
    assert out["tags_none_flush"] == [True, "Anne", "first"]   # no tags: nothing to flush
    assert out["tags_add_increment"] == [True, False, 1, 3, None, None]
    assert out["tags_many"] == {"k1": "v1", "k2": "v2", "k3": None}
    # locks: owner, lifetime, a stranger cannot release, restoreLock, block
    assert out["lock"] == [True, True, False, False, True, True, True]
    assert out["lock_restore_block"] == [True, "ran"]
    # a store on a Laravel Redis connection with OPT_PREFIX and a serializer: keys carry the
    # connection's prefix, values are the store's own (the serializer is not applied twice)
    other_ns = [NAMESPACE_TYPE, name_hash("laravel_database_other")]
    assert out["connection_prefix"] == [True, ["v"], False, 2, True, "tagged", 1, [other_ns],
                                        [True, 1, True], True, {"k": None, "n": "2"}]
    # Cache::flush(): one TAG.DEL; other prefixes, foreign keys and held locks stay
    assert out["flush"] == [True, {"tag.del": 1}, None, None, "2", 1, False, True]
    # the page-fragment example: page 5's two fragments gone with exactly one TAG.DEL
    assert out["fragments"] == [2, True, {"tag.del": 1}, None, None, "<div>..</div>"]
    assert r.execute_command("TAG.COUNT", "WHERE", 1, "=", 5) == 0
    assert r.execute_command("TAG.COUNT", "WHERE", 2, "=", 42) == 1
    # a hashed tag is found by any client that applies the documented rule
    assert out["hashed"] is True
    assert r.execute_command("TAG.COUNT", "WHERE", HASHED_TYPE, "=", name_hash("newsletter")) == 1


# --- the READMEs' examples, as shipped ----------------------------------------------------

EXAMPLE_OUTPUT = [
    "page 5 for user 42: rendered p5.header, p5.u42.sidebar",
    "page 7 for user 42: rendered p7.header, p7.u42.sidebar",
    "page 5 for user 42: all fragments from the cache",
    "page 5 fragments on the server: 2",
    None,                                   # the invalidation's own line
    "page 5 fragments on the server: 0",
    "page 5 for user 42: rendered p5.header, p5.u42.sidebar",
    "page 7 for user 42: all fragments from the cache",
    None,
    "page 7 for user 42: rendered p7.u42.sidebar",
]


@pytest.mark.parametrize("example, include", [
    ("symfony_fragments.php", "Symfony/Component/Cache/autoload.php"),
    ("laravel_fragments.php", "Illuminate/Cache/autoload.php"),
])
def test_fragment_examples(server, r, example, include):
    php = php_with(include)
    path = Path(__file__).resolve().parent.parent / "clients" / "php" / "examples" / example
    done = subprocess.run([php, str(path), str(server.port)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(EXAMPLE_OUTPUT), lines
    for line, want in zip(lines, EXAMPLE_OUTPUT):
        assert want is None or line == want, lines
    # what is left: page 5's header (its sidebar went with user 42), page 7's header and
    # its sidebar rendered again
    assert r.execute_command("TAG.COUNT", "WHERE", 1, "=", 5) == 1
    assert r.execute_command("TAG.COUNT", "WHERE", 1, "=", 7) == 2
    assert r.execute_command("TAG.COUNT", "WHERE", 2, "=", 42) == 1
