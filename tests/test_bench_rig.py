"""bench/run.py's rig: summary.md is composed from each suite's JSON (every row names its run, a
run of one suite changes its rows only, issue 19's figures against their goals), and the threads
and sql suites that bring issue 19 parts 1 and 5 into `make bench` run in quick mode (~30 s)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CAIRN_BIN, TARGET

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "bench"))

import summary  # noqa: E402  (bench/summary.py)


def copy_results(dst):
    for p in RESULTS.glob("*.json"):
        shutil.copy(p, dst / p.name)


def issue19_table(text):
    section = text[text.index("## Issue 19 figures"):text.index("## Headline figures")]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| goal")
            and not line.startswith("| ---")]


@pytest.mark.cairn_only
def test_committed_summary_is_what_the_json_gives():
    assert summary.render(RESULTS, False) == (RESULTS / "summary.md").read_text(), \
        "bench/results/summary.md is stale: .venv/bin/python bench/run.py --summary-only"


@pytest.mark.cairn_only
def test_a_run_of_one_suite_changes_its_rows_only(tmp_path):
    copy_results(tmp_path)
    before = summary.render(tmp_path, False)
    mem = json.loads((tmp_path / "memory.json").read_text())
    mem["machine"].update(cairn_commit="abcdef1", date="2030-01-02 03:04 UTC", cairn_default_threads=1)
    mem["machine"].pop("cairn_binary", None)
    # A figure on the other side of the 64 B goal from the committed one, so the verdict flips.
    was_met = "not met" not in next(r for r in issue19_table(before) if "≤ 64 B" in r)
    fake, verdict = (70.0, "not met") if was_met else (60.0, "**met**")
    mem["results"]["32B"][f"cairn-{mem['machine']['nproc']}t"]["rss_per_key"]["median"] = fake
    (tmp_path / "memory.json").write_text(json.dumps(mem))
    after = summary.render(tmp_path, False)
    changed = [line for line in after.splitlines() if line not in before.splitlines()]
    assert changed, "the memory suite's new run changed nothing"
    before_lines = before.splitlines()
    for line in changed:
        if line.startswith("- ") and "memory" not in line:
            # A run line that memory shared with another suite splits: the other suite keeps
            # its machine line as it was.
            machine = line.split(": ", 1)[1]
            assert any(b.startswith("- ") and b.endswith(machine) for b in before_lines), line
            continue
        assert "memory" in line and "abcdef1" in line, line
    # Its rows name the new run and the default it recorded, with the verdict of the new figure.
    row = next(r for r in issue19_table(after) if "≤ 64 B" in r)
    assert f"{fake} B" in row and verdict in row and "cairn abcdef1, 2030-01-02, full, 2 cores, default 1t" in row
    assert ("not met" in row) == was_met


@pytest.mark.cairn_only
def test_issue19_table_has_every_part_with_page_and_command():
    rows = issue19_table((RESULTS / "summary.md").read_text())
    for part, page in (("1.", "threads"), ("2.", "memory"), ("3.", "eviction"), ("4.", "latency"), ("5.", "sql")):
        mine = [r for r in rows if r.startswith(f"| {part}")]
        assert mine, f"no issue 19 row for part {part}"
        for r in mine:
            assert f"[{page}.md]({page}.md)" in r and f'--suites {page}"' in r
            assert "met" in r and "cairn " in r


@pytest.mark.skipif(TARGET != "cairn", reason="the rig runs every server itself")
@pytest.mark.timeout(300)  # two quick runs (~15 s each idle, threads with its control pair); a shared machine is slower
def test_quick_threads_and_sql_suites(tmp_path):
    if not shutil.which("redis-benchmark") or not shutil.which("redis-server"):
        pytest.skip("redis-server / redis-benchmark not installed")
    bench = Path(CAIRN_BIN).parent / "cairn-bench"
    if not bench.exists():
        pytest.skip("cairn-bench not built (make build)")

    def run(suites):
        done = subprocess.run([sys.executable, str(ROOT / "bench/run.py"), "--quick", "--suites", suites,
                               "--cairn", CAIRN_BIN, "--bench", str(bench), "--out", str(tmp_path)],
                              capture_output=True, text=True, timeout=240, cwd=ROOT)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return (tmp_path / "summary.md").read_text()

    first = run("threads,sql")
    rows = issue19_table(first)
    assert [r[:4] for r in rows] == ["| 1.", "| 5."], rows
    threads = json.loads((tmp_path / "threads.json").read_text())
    default = threads["machine"]["cairn_default_threads"]
    assert default >= 1 and threads["threads"]["cairn default"] == str(default)
    # The control pair ran, and the verdict the page states is the one summary.md gives.
    assert threads["threads"]["cairn 1t again"] == "1" and set(threads["verdict"]["workloads"]) == {
        "SET", "GET", "SET -P 16", "GET -P 16"}
    page_met = "**met** in this run" in (tmp_path / "threads.md").read_text()
    assert page_met == (threads["verdict"]["met"] is True) == ("| **met** |" in rows[0])
    assert all(f"default {default}t" in r and "quick" in r for r in rows)
    assert "[sql.md](sql.md)" in rows[1] and "GET" in rows[1]
    sql_row = rows[1]
    # A second run of one suite leaves the other's row as it was.
    second = run("threads")
    assert issue19_table(second)[1] == sql_row


@pytest.mark.cairn_only
def test_threads_verdict_rule():
    import threads  # bench/threads.py

    def samples(default_ratio, loops="1", rounds=12):
        # --threads 1 at 5 µs/op; the control and the default wobble ±2% around their ratio.
        wobble = [1 + 0.02 * ((i * 7) % 5 - 2) / 2 for i in range(rounds)]
        per = {w: [{"cpu_us_per_op": 5.0} for _ in range(rounds)] for w, _, _ in threads.WORKLOADS}
        mk = {name: {w: [{"cpu_us_per_op": 5.0 * r * x} for x in wobble] for w, _, _ in threads.WORKLOADS}
              for name, r in ((threads.CONTROL, 1.0), (threads.DEFAULT, default_ratio))}
        return {threads.BASE: per, **mk}, {threads.BASE: "1", threads.CONTROL: "1", threads.DEFAULT: loops}

    v = threads.verdict(*samples(1.0))
    assert v["met"] is True and all(x["floor"] <= 0.021 for x in v["workloads"].values())
    # 10% more CPU per op than --threads 1, far above a ±2% noise floor: not met, whatever the loop count.
    assert threads.verdict(*samples(1.10))["met"] is False
    assert threads.verdict(*samples(1.10, loops="2"))["met"] is False
    # Less CPU than --threads 1 is met with another configuration too.
    assert threads.verdict(*samples(0.9, loops="4"))["met"] is True
    # 3% above, beyond the floor (±0.02 here): met only as the same configuration whose interval overlaps
    # the control's; with another loop count, or 4% above (no overlap), not met.
    same = threads.verdict(*samples(1.03))
    assert same["met"] is True
    assert {x["why"] for x in same["workloads"].values()} == {"same configuration, within noise"}
    assert threads.verdict(*samples(1.03, loops="2"))["met"] is False
    assert threads.verdict(*samples(1.04))["met"] is False
    # Without the control pair (an older run) there is no verdict.
    old, chosen = samples(1.0)
    del old[threads.CONTROL]
    assert threads.verdict(old, chosen)["met"] is None
