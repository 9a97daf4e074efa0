"""Names that are imported or assigned and never used, caught by a tool (pyflakes), not by review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ["components", "tests", "bench", "tools", "__main__.py", "conftest.py"]


def test_no_unused_imports_or_variables_and_no_undefined_names():
    done = subprocess.run([sys.executable, "-m", "pyflakes", *CHECKED], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_reports_an_unused_import(tmp_path):
    (tmp_path / "sloppy.py").write_text("import os\n")
    done = subprocess.run([sys.executable, "-m", "pyflakes", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1 and "'os' imported but unused" in done.stdout, done.stdout + done.stderr
