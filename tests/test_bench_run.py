"""bench/run.py end to end at a size that takes seconds: every phase runs and fills its column."""

from __future__ import annotations

import subprocess
import sys

from bench.run import REPO


def _row(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--sizes", "10", "--pulumi-sizes", "", *args],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("| 10 |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_one_round_measures_render_into_a_new_directory_and_a_re_render():
    # With --repeat 1 the only round must still time a re-render (the earlier output is made first).
    cells = _row("--repeat", "1")
    render, rerender, floor = cells[2], cells[3], cells[4]
    assert all(cell.endswith(" s") and float(cell[:-2]) > 0 for cell in (render, rerender, floor)), cells
