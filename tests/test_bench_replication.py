"""The replication benchmark's rig (bench/replication.py --quick): a primary and two replicas of
cairn and of redis-server, CPU per SET with 0/1/2 replicas, lag probes, a small full sync; the
result page is written with every figure (about 10 s)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAIRN_BIN, TARGET

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(TARGET != "cairn", reason="the rig runs both servers itself")
def test_replication_bench_quick(tmp_path):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed")
    if not (ROOT / "target/release/cairn-bench").exists():
        pytest.skip("cairn-bench not built (make build)")
    done = subprocess.run([sys.executable, str(ROOT / "bench/replication.py"), "--quick", "--cairn",
                           CAIRN_BIN, "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    page = (tmp_path / "replication-quick.md").read_text()
    assert "## Full sync of 20000 keys" in page and "nan" not in page
    results = json.loads((tmp_path / "replication-quick.json").read_text())
    for kind in ("cairn", "redis"):
        r = results[kind]
        assert all(r["cpu_us"][str(n)] > 0 for n in range(3))
        assert r["lag"]["probes"] > 0 and r["lag"]["p50_us"] > 0
        assert r["sync"]["seconds"] > 0 and r["sync"]["samples"] >= 0
    floor = results["cairn"]["send_floor"]
    assert floor["back_to_back_us_per_set"] > 0 and floor["asleep_us_per_set"] > 0
    assert "## The sends alone: the kernel's floor" in page
