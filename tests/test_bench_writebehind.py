"""The write-behind benchmark's rig (bench/writebehind.py --quick): CPU per SET/HSET with
write-behind off and on against redis-server with and without AOF, and coalescing on a small
Zipf load, against a private PostgreSQL; the page is written naming the commit (about 25 s)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAIRN_BIN, TARGET

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(TARGET != "cairn", reason="the rig runs both servers itself")
def test_writebehind_bench_quick(tmp_path):
    import wb_pg

    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed")
    if not wb_pg._bin("initdb"):
        pytest.skip("PostgreSQL not installed")
    if not (ROOT / "target/release/cairn-bench").exists():
        pytest.skip("cairn-bench not built (make build)")
    done = subprocess.run([sys.executable, str(ROOT / "bench/writebehind.py"), "--quick", "--cairn",
                           CAIRN_BIN, "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    page = (tmp_path / "writebehind-quick.md").read_text()
    results = json.loads((tmp_path / "writebehind-quick.json").read_text())
    commit = results["commit"]
    assert len(commit) == 7 and f"at commit `{commit}`" in page, page[:400]
    assert "## Coalescing" in page and "nan" not in page
    assert (tmp_path / "writebehind-quick.png").stat().st_size > 0
    for label, r in results["cpu"].items():
        assert r["SET"]["median_us"] > 0 and r["HSET"]["median_us"] > 0, label
    assert results["cpu"]["cairn, write-behind everysec"]["SET_flush"]["median_us"] > 0
    z = results["zipf"]
    for label in ("behind, delay 0ms", "behind, delay 100ms", "behind, delay 1s"):
        m = z[label]["median"]
        # Every acknowledged write reached the database, at most once per write.
        assert 0 < m["rows"] <= m["writes"] and m["rows"] == m["rows_written"], (label, m)
    # Write-through is either measured or reported as not available at this commit.
    if "refused" in z["through"]:
        assert f"not available at {commit}" in page
    else:
        assert z["through"]["median"]["rows"] > 0
