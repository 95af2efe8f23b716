"""The Python client with the newest redis-py it supports (clients/python/pyproject.toml pins
``redis>=5.0,<9``; the venv holds the oldest tested release, scripts/setup.sh installs the newest
into .venv/redis-newest).

redis-py 8 talks RESP3 by default: the client's tests (tests/test_client.py, the near cache,
tags, SQL and its reply types; tests/test_client_web.py, fail open and read-your-writes;
tests/test_django_cache.py, the Django backend with Django's own test cases) run again in a
child pytest with that redis-py first on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

import pytest

from conftest import ROOT, TARGET

NEWEST = Path(os.environ.get("CAIRN_REDIS_NEWEST", ROOT / ".venv" / "redis-newest"))

if TARGET == "memcached":
    pytest.skip("the cairn client speaks RESP", allow_module_level=True)


def test_client_suite_with_newest_redis_py():
    if not (NEWEST / "redis" / "__init__.py").is_file():
        pytest.skip(f"no redis-py in {NEWEST} (scripts/setup.sh installs it)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "clients" / "python" / "src"), str(NEWEST),
                                         env.get("PYTHONPATH", "")])
    env.setdefault("CAIRN_MODES", "reactor")
    probe = subprocess.run([sys.executable, "-c", "import redis; print(redis.__version__)"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and int(probe.stdout.split(".")[0]) >= 8, probe.stdout + probe.stderr
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_client.py", "tests/test_client_web.py", "tests/test_django_cache.py"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-8000:]
    assert " failed" not in p.stdout
