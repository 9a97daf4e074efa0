"""docs/gpu-sharing.md holds the isolation table generated from components/fleet/isolation.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from components.fleet.isolation import isolation_rows
from tools import isolation_table
from tools.isolation_table import BEGIN, END, render_table, with_table

REPO = Path(__file__).resolve().parents[2]


def test_committed_table_is_up_to_date():
    text = isolation_table.DOC.read_text(encoding="utf-8")

    assert with_table(text) == text, f"docs/gpu-sharing.md's isolation table is out of date; regenerate it with `{isolation_table.REGENERATE}`"


def test_the_table_has_a_row_per_mode_between_the_markers():
    lines = render_table().splitlines()

    assert lines[0] == BEGIN and lines[-1] == END
    assert lines[1].startswith("| mode | set by | memory bound | fault isolation | compute share |")
    assert [line.split(" | ")[0].removeprefix("| ") for line in lines[3:-1]] == [r.mode for r in isolation_rows()]


def test_only_the_block_between_the_markers_is_replaced():
    text = f"before\n{BEGIN}\nstale row\n{END}\nafter\n"

    assert with_table(text) == f"before\n{render_table()}\nafter\n"


def test_a_page_without_markers_is_refused():
    with pytest.raises(ValueError, match="no isolation table markers"):
        with_table("# GPU sharing\n")


def test_check_fails_on_a_stale_copy_and_the_command_rewrites_it(tmp_path, monkeypatch, capsys):
    page = tmp_path / "gpu-sharing.md"
    page.write_text(f"intro\n{BEGIN}\n| old |\n{END}\n", encoding="utf-8")
    monkeypatch.setattr(isolation_table, "DOC", page)

    assert isolation_table.main(["--check"]) == 1
    assert isolation_table.REGENERATE in capsys.readouterr().err
    assert isolation_table.main([]) == 0
    assert page.read_text(encoding="utf-8") == f"intro\n{render_table()}\n"
    assert isolation_table.main(["--check"]) == 0


def test_the_module_checks_the_committed_page():
    result = subprocess.run([sys.executable, "-m", "tools.isolation_table", "--check"], capture_output=True, text=True, cwd=REPO, timeout=120)

    assert result.returncode == 0, result.stderr
