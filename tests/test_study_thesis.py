"""Smoke test of the thesis study's rig (studies/thesis): the quick variant end to end.

It starts PostgreSQL, cairn, the service nodes and Locust for real, for every mode, and checks
that the rig works (every run measured, the figures drawn), not the study's numbers.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAIRN_BIN, ROOT

pytestmark = pytest.mark.cairn_only


@pytest.mark.timeout(600)
def test_thesis_study_quick(tmp_path):
    out = tmp_path / "thesis"
    proc = subprocess.run([sys.executable, str(ROOT / "studies/thesis/run.py"), "--quick", "--out", str(out),
                           "--cairn-bin", CAIRN_BIN], capture_output=True, text=True, timeout=540,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    runs = json.loads((out / "runs.json").read_text())
    assert len(runs) == 24, sorted(runs)  # 8 configurations x 3 modes
    for rid, r in runs.items():
        assert r["reads"] + r["writes"] >= 1450, rid  # 1,500 requests per run
        assert r["reads"] > 500 and r["writes"] > 50, rid  # 50% to 95% reads
        assert 0.0 <= r["hit_rate"] <= 1.0, rid
        if r["hit_rate"] < 1.0:
            assert r["total_miss_ms"] >= 10.0, f"{rid}: a miss waits the database's 10 ms"
        if r["config"]["prefetch"]:
            assert r["hit_rate"] > 0.5, f"{rid}: the prefetched domain is cached"
        if r["config"]["mode"] == "pernode":
            assert r["local_hit_share"] == 1.0, rid
        if r["config"]["mode"] == "shared":
            assert r["local_hit_share"] == 0.0, rid

    summary = (out / "summary.md").read_text()
    for name in ("5_1", "5_2", "5_3", "5_4", "5_5", "5_6"):
        assert (out / f"figure_{name}.png").stat().st_size > 10_000
        assert f"figure_{name}.png" in summary
    for sweep in ("nodes", "read_pct", "shared_pct"):
        assert (out / f"sweep_{sweep}.png").stat().st_size > 10_000
