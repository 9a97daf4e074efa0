"""The pure parts of bench/pulumi_engine.py: shard sizing, the sharded synthetic stack, which stacks
a one-tenant change previews, the process-tree memory probe and the results table. (The engine
runs themselves are a benchmark, `make bench-pulumi`; a small one is in the real-engine lane.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.pulumi_engine import (
    change_one_tenant,
    changed_tenant,
    deploy_figures,
    fleet_table,
    git,
    make_project,
    offline_diff,
    preview_target,
    ratio,
    TreeSampler,
    control_plane_cpu,
    recommended_shard_size,
    settled_after,
    shard_names,
    spread,
    stacks_to_preview,
    table,
    touched_tenant,
    tree_rss,
    verdicts,
)
from tools.control_plane import Process
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


def test_the_worst_case_change_is_in_the_largest_shard_and_previews_only_it(tmp_path):
    project = make_project(tmp_path / "p", 60, shard_names(60, 10))
    parts = stack_parts(load_environment(project, STACK))
    sizes = sorted(len(p.tenants) for p in parts[1:])
    assert sizes[0] < sizes[-1], sizes  # rendezvous hashing: uneven, so the largest shard is the worst case
    tenant = touched_tenant(parts, 60, largest=True)
    assert len(next(p for p in parts[1:] if tenant in p.tenants).tenants) == sizes[-1]
    assert touched_tenant(parts, 60, largest=False) == changed_tenant(60)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    assert change_one_tenant(project, 60, tenant) == tenant
    assert stacks_to_preview(offline_diff(project))[0] == [tenant_stack(load_environment(project, STACK), tenant)]


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


_BURN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\nprint('done', flush=True)\nimport sys; sys.stdin.read()"


def test_the_tree_sampler_counts_the_cpu_of_a_child_by_name():
    with TreeSampler(os.getpid(), interval=0.05) as sampler:
        child = subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "done"
            time.sleep(0.2)  # sampled at least once after the burn, while still alive
        finally:
            child.stdin.close()
            child.wait()
    assert sum(sampler.cpu_seconds.values()) >= 0.45, sampler.cpu_seconds


def test_a_control_plane_process_reports_the_cpu_it_used(tmp_path):
    burner = Process("burner", [sys.executable, "-c", _BURN.replace("sys.stdin.read()", "time.sleep(30)")], tmp_path)
    try:
        deadline = time.monotonic() + 30
        while "done" not in burner.log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert burner.cpu_seconds() >= 0.45
    finally:
        burner.stop()
    assert burner.cpu_seconds() == 0.0  # gone: nothing to read


def test_the_control_plane_settles_only_after_a_quiet_window():
    busy = [(t, 0.5 * t) for t in range(0, 61)]  # half a core for a minute
    assert settled_after(busy) is None
    quiet_after_busy = busy + [(60 + t, 30.0 + 0.01 * t) for t in range(1, 11)]
    assert settled_after(quiet_after_busy) == 65  # the first window of 5 s wholly after the busy minute
    assert settled_after(quiet_after_busy, window=8) == 67  # 59-67 s: 0.57 CPU s, under a tenth of 8
    assert settled_after(quiet_after_busy, share=0.6) == 5  # half a core counts as idle at 0.6
    assert settled_after([]) is None and settled_after([(0, 0.0)]) is None


def test_control_plane_cpu_is_the_difference_per_process():
    assert control_plane_cpu({"etcd": 2.0}, {"etcd": 3.5, "kube-apiserver": 1.0}) == {"etcd": 1.5, "kube-apiserver": 1.0}


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


def test_spread_is_min_median_max_whatever_the_order():
    assert spread([5.0]) == (5.0, 5.0, 5.0)
    assert spread([4.0, 1.0, 3.0]) == (1.0, 3.0, 4.0)
    assert spread([4.0, 1.0, 3.0, 2.0]) == (1.0, 2.5, 4.0)
    assert spread([]) is None


def _stack(name: str, seconds: float, resources: int, peak: float) -> dict:
    return {"stack": name, "seconds": seconds, "process_seconds": seconds + 4.0, "resources": resources, "tree_peak_mb": peak}


def test_a_deploy_sums_its_stacks_and_names_the_failed_ones():
    stacks = [_stack("bench", 10.0, 100, 400.0), _stack("bench.s01", 30.0, 900, 950.0),
              {"stack": "bench.s02", "error": "boom", "process_seconds": 2.0}, _stack("bench.s03", 20.0, 800, 900.0)]
    figures = deploy_figures(stacks, 45.0)
    assert figures["resources"] == 1800
    assert figures["up_spread"] == (10.0, 20.0, 30.0)
    assert figures["up_sum_seconds"] == 60.0 and figures["process_sum_seconds"] == 72.0
    assert figures["wall_seconds"] == 45.0 and figures["largest_tree_peak_mb"] == 950.0
    assert figures["failed"] == ["bench.s02"]


def test_the_recommended_shard_size_is_the_largest_whose_preview_has_the_spreads_headroom():
    assert recommended_shard_size({25: 20.0, 50: 24.0}, 30.0) == 50        # 28.8 s < 30 s
    assert recommended_shard_size({25: 20.0, 50: 25.0}, 30.0) == 25        # 30.0 s is not under 30 s
    assert recommended_shard_size({50: 20.0, 25: 26.0}, 30.0) == 50        # not the first, not the smallest
    assert recommended_shard_size({25: 26.0, 50: None}, 30.0) is None       # an unmeasured preview never fits
    assert recommended_shard_size({}, 30.0) is None
    assert (preview_target(100), preview_target(300), preview_target(1000)) == (60.0, 60.0, 30.0)


def test_a_measured_preview_of_the_largest_shard_counts_as_it_is():
    # 50's middle tenant previews in 20 s (x 1.2 = 24 s fits), but its largest shard took 33 s
    assert recommended_shard_size({25: 15.0, 50: 20.0}, 30.0, largest={25: 21.0, 50: 33.0}) == 25
    # a largest-shard preview under the target fits even when the middle one x 1.2 would not
    assert recommended_shard_size({25: 26.0}, 30.0, largest={25: 29.0}) == 25
    # where it was not measured, the 20% rule stands
    assert recommended_shard_size({25: 15.0, 50: 20.0}, 30.0, largest={25: 21.0, 50: None}) == 50


def _fleet(size: int, shard_sizes: list[int], preview: float, **walls: float) -> dict:
    deploys = {}
    for workers, wall in walls.items():
        stacks = [_stack("bench", 5.0, 100, 400.0), *(_stack(f"bench.s{i:02d}", 10.0 + i, 35 * n, 800.0 + i)
                                                      for i, n in enumerate(shard_sizes, 1))]
        deploys[workers[1:]] = deploy_figures(stacks, wall)
    return {"shard_size": size, "shard_sizes": shard_sizes, "deploys": deploys, "diff_seconds": 1.5,
            "previewed": ["bench.s01"], "preview_one_seconds": preview, "preview_one": [{"tree_peak_mb": 700.0}]}


def test_the_fleet_table_states_each_deploy_the_ratio_the_preview_and_the_recommendation():
    row = {"n": 100, "mock": {"seconds": 30.0, "peak_mb": 480.0},
           "fleet": [_fleet(50, [48, 52], 47.0, w1=80.0, w2=60.0), _fleet(25, [20, 30, 22, 28], 30.0, w1=100.0, w2=55.0)]}
    lines = fleet_table([row]).splitlines()
    assert lines[0].split(" | ")[4:7] == ["up per stack, 1 worker (min / median / max)",
                                          "up, all stacks, 1 worker (wall; sum of stacks)",
                                          "up per stack, 2 workers (min / median / max)"]
    assert "2 / 1 workers (wall)" in lines[0]
    # sorted by shard size; 25: 5 stacks, 100 + 35 * 100 resources, up 5.0 / 12.0 / 14.0 s, 2 workers 0.55x
    assert lines[2] == ("| 100 | 25 | 5 (20-30) | 3600 | 5.0 / 12.0 / 14.0 s | 100.0 s (75.0 s) | 5.0 / 12.0 / 14.0 s "
                        "| 55.0 s (75.0 s) | 0.55x | 1.5 s | 30.0 s (1) | n/a | 804 | 700 | 30.0 s (480 MB) |")
    assert lines[3].startswith("| 100 | 50 | 3 (48-52) | 3600 | 5.0 / 11.0 / 12.0 s | 80.0 s (40.0 s) |")
    assert "| 0.75x |" in lines[3]
    # target 60 s at N = 100: 47 s x 1.2 = 56.4 s fits, so the larger size is recommended
    assert lines[-1].startswith("N = 100: recommended shard size about 50 tenants")


def test_the_fleet_table_shows_the_largest_shards_preview_and_recommends_by_it():
    small, large = _fleet(15, [10, 20], 18.0, w1=300.0), _fleet(25, [15, 37], 25.0, w1=280.0)
    small["largest_shard_preview"] = {"preview_one_seconds": 27.0, "shard_tenants": 20, "preview_one": [{"tree_peak_mb": 650.0}]}
    large["largest_shard_preview"] = {"preview_one_seconds": 46.0, "shard_tenants": 37, "preview_one": [{"tree_peak_mb": 990.0}]}
    lines = fleet_table([{"n": 1000, "fleet": [large, small]}]).splitlines()
    assert "one-tenant preview, largest shard (tenants)" in lines[0]
    assert "| 18.0 s (1) | 27.0 s (20) | 802 | 700 |" in lines[2]
    assert "| 25.0 s (1) | 46.0 s (37) | 802 | 990 |" in lines[3]  # the largest shard's preview peak counts
    # 25 x 1.2 = 30 s would not fit anyway, but 46 s measured is what rules it out
    assert lines[-1] == ("N = 1000: recommended shard size about 15 tenants (largest measured whose largest shard's "
                         "one-tenant preview is under 30 s)")


def test_the_fleet_table_says_what_did_not_run():
    row = {"n": 1000, "fleet": [_fleet(25, [20, 30], 28.0, w1=900.0)]}
    lines = fleet_table([row]).splitlines()
    assert "2 worker" not in lines[0] and "/ 1 workers" not in lines[0]
    assert lines[2].endswith("| n/a |")  # no mock floor measured
    assert lines[-1].startswith("N = 1000: recommended shard size below 25 tenants")  # 33.6 s > 30 s
    failed = _fleet(25, [20, 30], 20.0, w1=900.0, w2=500.0)
    failed["deploys"]["2"]["failed"] = ["bench.s02"]
    assert "; FAILED bench.s02" in fleet_table([{"n": 1000, "fleet": [failed]}])


def test_a_fleet_deploy_runs_the_platform_stack_first_then_the_shards_within_the_worker_count(monkeypatch, tmp_path):
    import threading

    import bench.pulumi_engine as bench

    graph = [("bench", ()), *((f"bench.s{i:02d}", ("bench",)) for i in range(1, 6))]
    events, running, lock = [], [0], threading.Lock()
    most = [0]

    def fake_engine(project, stack, state, kubeconfig, op):
        assert op == "up"
        with lock:
            events.append(("start", stack))
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            if stack == "bench.s03":
                raise RuntimeError("`pulumi up` of bench.s03 failed (1):\nboom")
            return {"stack": stack, "seconds": 1.0, "resources": 10, "tree_peak_mb": 100.0, "errors": [],
                    "summary": {"create": 10}}
        finally:
            with lock:
                running[0] -= 1
                events.append(("end", stack))

    monkeypatch.setattr(bench, "run_engine", fake_engine)
    out = bench.deploy_fleet(tmp_path, graph, tmp_path / "state", tmp_path / "kubeconfig", 2, lambda _: None)
    assert events[:2] == [("start", "bench"), ("end", "bench")]
    assert sorted(s for e, s in events if e == "start") == sorted(name for name, _ in graph)
    assert most[0] <= 2
    assert [s["stack"] for s in out["stacks"]] == [name for name, _ in graph]
    assert out["failed"] == ["bench.s03"] and "boom" in out["stacks"][3]["error"]
    assert out["resources"] == 50 and out["workers"] == 2
