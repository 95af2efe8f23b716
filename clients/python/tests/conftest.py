"""Unit tests of the cairn client: no server, a fake clock (see fakes.py)."""

import sys
from pathlib import Path

# This checkout's client first, whatever the venv has installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
