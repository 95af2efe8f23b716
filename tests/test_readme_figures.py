"""Results that stay true (issue 20): README.md's figures table is what bench/figures.py makes
from the committed result pages, and every result page names the commit it ran at."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import figures  # noqa: E402


pytestmark = pytest.mark.cairn_only  # about the repository, not a server


def test_readme_figures_match_the_pages():
    readme = figures.README.read_text()
    assert figures.render(readme) == readme, "README.md's figures are stale: python3 bench/figures.py"


def test_every_result_page_names_its_commit():
    assert figures.pages_without_commit() == []


def test_check_catches_a_drift(tmp_path, monkeypatch):
    # A hand edit of a generated figure is caught, and regeneration restores it.
    readme = figures.README.read_text()
    row = figures.table()[2]
    drifted = readme.replace(row, row.replace("|", "| 90 B (hand-copied) |", 2).replace("| ", "|", 1), 1)
    assert drifted != readme
    assert figures.render(drifted) == readme
    page = "memory.md"
    text = (figures.RESULTS / page).read_text()
    assert figures.page_commit(text)
    assert figures.page_commit(text.replace("cairn ", "server ")) is None


def test_figures_script_check_mode():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "figures.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_performance_section_has_one_table_the_generated_one():
    # Figures outside the generated table are hand-copied and drift (issue 20): the Performance
    # section holds no other table, and the snapshot section quotes none.
    readme = figures.README.read_text()
    section = readme[readme.index("## Performance\n"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    outside = section[:section.index(figures.BEGIN)] + section[section.index(figures.END):]
    assert [line for line in outside.splitlines() if line.startswith("|")] == []
    assert "1.58 s" not in readme.replace("\n".join(figures.table()), "")


def test_study_rows_come_from_the_study_page():
    rows = [r for r in figures.table() if "studies/thesis/results/summary.md" in r]
    assert len(rows) == 4 and all("no commit" not in r for r in rows)
