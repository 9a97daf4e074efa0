"""bench/run.py end to end at a size that takes seconds: every phase runs and fills its column."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.pulumi_engine import changed_tenant, shard_names, shard_of
from bench.run import REPO, sharded_fleet
from components.fleet.shard_stacks import stack_parts
from components.load import load_environment
from tools.synthetic import STACK


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


def test_the_stack_selection_names_the_changed_tenants_shard_and_no_other(tmp_path):
    # The sharded fleet of the stack-selection phase, split as the listing says, with one tenant
    # changed: `tenants diff --format stacks` must name that tenant's shard and no other shard.
    root = sharded_fleet(tmp_path / "fleet", 10, 3)
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--phase", "stacks", "--root", str(root), "--repeat", "1"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    parts = stack_parts(load_environment(root, STACK))
    assert result["stacks"] == len(parts) == 1 + len(shard_names(10, 3))
    assert result["largest_shard"] == max(len(p.tenants) for p in parts[1:])
    assert [s for s in result["selected"] if s != STACK] == [shard_of(parts, changed_tenant(10)).stack]


def test_the_table_has_validate_and_the_stack_selection_at_the_shard_size_asked():
    cells = _row("--repeat", "1", "--shard-size", "4")
    validate, stacks, selection = cells[14], cells[16], cells[17]
    assert validate.endswith(" s") and float(validate[:-2]) > 0, cells
    assert stacks.startswith(f"{1 + len(shard_names(10, 4))} at ~4 ("), cells
    shards = [stack for stack in selection.split(": ")[1].split(", ") if stack.startswith(f"{STACK}.")]
    assert len(shards) == 1, cells   # the changed tenant's shard, and no other
