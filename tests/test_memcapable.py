"""libmemcached's protocol conformance checker against the memcached port.

Debian's libmemcached-tools installs it as ``memccapable``; other builds call
it ``memcapable``.  It is run with ``-a`` (ASCII protocol only): cairn speaks
memcached's text and meta protocols, not the binary protocol, so the binary
sub-tests do not apply.  No other sub-test is skipped.
Validated against memcached 1.6 with CAIRN_TARGET=memcached.
"""

import shutil
import subprocess

import pytest

from conftest import HOST

pytestmark = pytest.mark.memcache_only


def _memcapable():
    for name in ("memccapable", "memcapable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_memcapable_ascii(server, mc):
    exe = _memcapable()
    if exe is None:
        pytest.skip("memccapable/memcapable not installed (apt-get install libmemcached-tools)")
    # -t: per-I/O timeout in seconds, so a hung reply fails fast instead of blocking
    p = subprocess.run([exe, "-a", "-t", "5", "-h", HOST, "-p", str(server.memcache_port)],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode == 0, f"{exe} failed (status {p.returncode}):\n{out}"
    assert "All tests passed" in out, out
    assert "[FAIL]" not in out
