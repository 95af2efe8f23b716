"""Runs Django's own cache backend test cases (``BaseCacheTests``) against cairn.django.CairnCache.

Django ships its test suite in the source distribution, not in the wheel: scripts/setup.sh
unpacks ``tests/cache`` of the pinned Django release into ``.venv/django-tests`` (the directory
is given here as ``--django-tests``). This script subclasses ``cache.tests.BaseCacheTests`` the
way Django's own ``RedisCacheTests`` does (same settings helper, same excluded "cull" caches:
a server cache evicts by its memory policy, not by MAX_ENTRIES) and runs it with Django's test
runner, which creates the test database the middleware tests need.

Usage (tests/test_django_cache.py runs it once per protocol):
    python tests/django_suite.py --django-tests DIR --location redis://127.0.0.1:PORT/0 \
        --protocol 2|3 [--near]
Prints one line ``RESULT run=N failures=F errors=E skipped=S`` and exits non-zero on a failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--django-tests", required=True)
    ap.add_argument("--location", required=True)
    ap.add_argument("--protocol", type=int, choices=(2, 3), required=True)
    ap.add_argument("--near", action="store_true")
    ap.add_argument("-v", "--verbosity", type=int, default=1)
    opts = ap.parse_args()

    tests_dir = Path(opts.django_tests)
    if not (tests_dir / "cache" / "tests.py").is_file():
        print(f"no Django test sources in {tests_dir}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(tests_dir))
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "clients" / "python" / "src"))  # this checkout's client

    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY="cairn-django-suite",
        USE_TZ=False,
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "cache"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
        MIDDLEWARE=[],
        ROOT_URLCONF=None,
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}],
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()

    import unittest

    from django.test import TestCase, override_settings
    from django.test.runner import DiscoverRunner

    from cache.tests import BaseCacheTests, caches_setting_for_tests  # Django's own test cases

    import cairn.django

    options = {"protocol": opts.protocol}
    if opts.near:
        options["near"] = True
    base = {"BACKEND": "cairn.django.CairnCache", "LOCATION": opts.location, "OPTIONS": options}

    @override_settings(CACHES=caches_setting_for_tests(base=base, exclude={"cull", "zero_cull"}))
    class CairnCacheTests(BaseCacheTests, TestCase):
        """Django's BaseCacheTests, as Django runs them for its Redis backend."""

        def test_backend_is_cairn(self):
            from django.core.cache import caches

            cache = caches["default"]
            self.assertIsInstance(cache, cairn.django.CairnCache)
            self.assertEqual(cache.client.redis.connection_pool.connection_kwargs.get("protocol"), opts.protocol)
            self.assertEqual(cache.near is not None, opts.near)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "")
    runner = DiscoverRunner(verbosity=opts.verbosity, interactive=False)
    runner.setup_test_environment()
    old = runner.setup_databases()
    try:
        suite = unittest.TestLoader().loadTestsFromTestCase(CairnCacheTests)
        result = runner.run_suite(suite)
    finally:
        runner.teardown_databases(old)
        runner.teardown_test_environment()
    print(f"RESULT run={result.testsRun} failures={len(result.failures)} errors={len(result.errors)} "
          f"skipped={len(result.skipped)}")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
