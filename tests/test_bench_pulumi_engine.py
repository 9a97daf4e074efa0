"""The pure parts of bench/pulumi_engine.py: shard sizing, the sharded synthetic stack, which stacks
a one-tenant change previews, the process-tree memory probe and the results table. (The engine
runs themselves are a benchmark, `make bench-pulumi`; a small one is in the real-engine lane.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.pulumi_engine import (
    change_one_tenant,
    changed_tenant,
    git,
    make_project,
    offline_diff,
    ratio,
    shard_names,
    stacks_to_preview,
    table,
    tree_rss,
    verdicts,
)
from tools.synthetic import STACK
from components.load import load_environment
from components.fleet.shard_stacks import stack_parts, tenant_stack


@pytest.mark.parametrize("count, size, expected", [(10, 50, 1), (50, 50, 1), (51, 50, 2), (100, 50, 2), (300, 50, 6), (300, 100, 3)])
def test_shards_hold_about_shard_size_tenants(count, size, expected):
    names = shard_names(count, size)
    assert len(names) == expected
    assert names == sorted(set(names)) and all(n.startswith("s") for n in names)


def test_a_shard_size_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        shard_names(10, 0)


def test_the_sharded_project_is_a_valid_environment_whose_shards_cover_every_tenant(tmp_path):
    shards = shard_names(120, 40)
    environment = load_environment(make_project(tmp_path / "p", 120, shards), STACK)
    parts = stack_parts(environment)
    assert [p.stack for p in parts] == [STACK, *(f"{STACK}.{s}" for s in shards)]
    assert parts[0].platform and not parts[0].tenants
    members = [t for p in parts[1:] for t in p.tenants]
    assert sorted(members) == sorted(t.name for t in environment.tenants) and len(members) == 120
    assert all(p.tenants for p in parts[1:]), [len(p.tenants) for p in parts]


def test_a_one_tenant_change_previews_only_that_tenants_shard(tmp_path):
    project = make_project(tmp_path / "p", 40, shard_names(40, 10))
    environment = load_environment(project, STACK)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    assert change_one_tenant(project, 40) == changed_tenant(40) == "team-00020"
    document = offline_diff(project)
    expected = [tenant_stack(environment, "team-00020")]
    assert stacks_to_preview(document) == (expected, "tenants diff touchedStacks")


def test_the_tree_probe_counts_a_childs_memory():
    # The child allocates and touches 64 MiB, then waits on stdin: measured while surely alive.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = bytearray(64 * 2**20); print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        tree = tree_rss(os.getpid())
        assert child.pid in tree and os.getpid() in tree
        assert tree[child.pid][1] >= 64 * 2**20
    finally:
        child.stdin.close()
        child.wait()


def _row(n: int, **sharded) -> dict:
    return {
        "n": n,
        "mock": {"seconds": 10.0, "peak_mb": 400.0},
        "unsharded": {
            "up": {"seconds": 60.0, "resources": 4000, "tree_peak_mb": 900.0},
            "preview": {"seconds": 20.0, "tree_peak_mb": 800.0},
            "preview_one": {"seconds": 24.0, "tree_peak_mb": 810.0},
        },
        "sharded": {"shard_sizes": [45, 55], "up_seconds": 70.0, "previewed": ["bench.s02"], "not_previewed": 2,
                    "stacks": ["bench", "bench.s01", "bench.s02"], "up": [{"tree_peak_mb": 500.0}, {"tree_peak_mb": 600.0}],
                    "preview_one": [{"tree_peak_mb": 550.0}], "preview_one_seconds": 12.0, **sharded},
    }


def test_the_table_states_times_ratios_and_memory():
    times, memory = table([_row(100)]).split("\n\n")
    assert times.splitlines()[2] == (
        "| 100 | 4000 | 10.0 s | 60.0 s | 20.0 s | 24.0 s | 2.00x | 3.00x | 5.0 | 2 (45-55) | 70.0 s "
        "| 12.0 s (1 / 2) | 0.50x |"
    )
    assert memory.splitlines()[2] == "| 100 | 400 | 900 | 800 | 810 | 600 | 550 |"


def test_verdicts_are_for_the_largest_size():
    assert verdicts([_row(10), _row(300)])[:2] == [
        "met    one-tenant change in the sharded 300-tenant fleet previews in under 60 s (12.0 s)",
        "met    untouched stacks not previewed (2 of 3 skipped)",
    ]
    assert verdicts([_row(300, preview_one_seconds=61.0, not_previewed=0)])[0].startswith("MISSED")
    assert verdicts([_row(300, not_previewed=0)])[1].startswith("MISSED")
    assert verdicts([_row(100)])[-1] == "(the targets are stated for N = 300)"
    assert ratio(None, 1.0) is None and ratio(1.0, 0) is None
