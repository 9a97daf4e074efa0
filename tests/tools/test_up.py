"""`make up` (tools/up.py): which Pulumi stacks it deploys and in what graph, what it copies, and how it
runs shards concurrently: all decided or checked before (or without) any control plane."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from components.spec.problems import InvalidInput
from tests.project_edits import line_of
from tools import up as up_module
from tools.engine import with_local_vcluster_chart

REPO = Path(__file__).resolve().parents[2]
SHARDED = REPO / "tests" / "fixtures" / "sharded"


@pytest.fixture(scope="module")
def up():
    return up_module


def test_an_unsharded_environment_is_one_stack(up):
    assert up.stacks_to_deploy(REPO, "prod") == ["prod"]


def test_a_sharded_environment_deploys_its_own_stack_then_every_shard(up):
    assert up.stacks_to_deploy(SHARDED, "lab") == ["lab", "lab.blue", "lab.green"]


def test_one_shard_comes_after_its_environments_stack(up):
    assert up.stacks_to_deploy(SHARDED, "lab.green") == ["lab", "lab.green"]


def test_an_unknown_shard_is_refused_with_the_fix(up):
    with pytest.raises(ValueError, match=r"shard 'red' is not in lab's `sharding.shards` \(blue, green\)"):
        up.stacks_to_deploy(SHARDED, "lab.red")


def test_an_unknown_environment_is_refused(up):
    with pytest.raises(InvalidInput, match="no such stack 'nope'"):
        up.stacks_to_deploy(REPO, "nope")


# --- copying what the stack names ---------------------------------------------------------------------


def _vcluster_source(tmp_path: Path, chart: str) -> Path:
    return with_local_vcluster_chart(tmp_path / "source", chart)


def test_the_local_vcluster_chart_is_copied_into_the_throw_away_project(up, tmp_path):
    source = _vcluster_source(tmp_path, "charts/vcluster")

    project, graph = up.prepare(source, "dev", tmp_path / "run")

    assert graph == [("dev", ())]
    assert (project / "charts" / "vcluster" / "Chart.yaml").read_text() == (source / "charts" / "vcluster" / "Chart.yaml").read_text()
    assert (project / "charts" / "vcluster" / "values.schema.json").is_file()


def test_a_bad_chart_path_is_a_located_error_before_anything_is_copied(up, tmp_path):
    source = _vcluster_source(tmp_path, "charts/no-such-chart")
    line = line_of(source / "stacks" / "Pulumi.dev.yaml", "chart: charts/no-such-chart")

    with pytest.raises(InvalidInput) as err:
        up.prepare(source, "dev", tmp_path / "run")

    assert f"stacks/Pulumi.dev.yaml:{line}:" in str(err.value)
    assert "vcluster.chart" in str(err.value) and "no chart at 'charts/no-such-chart'" in str(err.value)
    assert not (tmp_path / "run").exists()


def test_make_up_reports_the_bad_path_without_a_traceback(tmp_path):
    source = _vcluster_source(tmp_path, "charts/no-such-chart")

    done = subprocess.run([sys.executable, "-m", "tools.up", "--stack", "dev", "--from", str(source),
                           "--dir", str(tmp_path / "run"), "--exit"], capture_output=True, text=True, cwd=REPO)

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "stacks/Pulumi.dev.yaml:" in done.stderr and "no chart at 'charts/no-such-chart'" in done.stderr


# --- the deploy graph, concurrently ---------------------------------------------------------------------


def test_the_deploy_graph_puts_the_platform_before_every_shard(up):
    assert up.deploy_graph(SHARDED, "lab") == [("lab", ()), ("lab.blue", ("lab",)), ("lab.green", ("lab",))]


GRAPH = [("lab", ()), ("lab.a", ("lab",)), ("lab.b", ("lab",)), ("lab.c", ("lab",))]


def test_independent_shards_run_concurrently_up_to_the_worker_count(up):
    running, peak, lock = set(), [0], threading.Lock()
    both_shards_in = threading.Barrier(2, timeout=30)  # passes only when two shards run at once

    def deploy(stack):
        with lock:
            running.add(stack)
            peak[0] = max(peak[0], len(running))
        if stack in ("lab.a", "lab.b"):
            both_shards_in.wait()
        with lock:
            running.discard(stack)
        return up.StackRun(stack, True, "create 1")

    runs = up.deploy_stacks(GRAPH, deploy, workers=2)

    assert [r.stack for r in runs] == ["lab", "lab.a", "lab.b", "lab.c"] and all(r.ok for r in runs)
    assert peak[0] == 2


def test_the_platform_runs_alone_before_the_shards(up):
    order = []

    def deploy(stack):
        order.append(stack)
        return up.StackRun(stack, True, "ok")

    up.deploy_stacks(GRAPH, deploy, workers=3)

    assert order[0] == "lab" and sorted(order[1:]) == ["lab.a", "lab.b", "lab.c"]


def test_a_failed_shard_stops_no_other_and_fails_the_run(up):
    def deploy(stack):
        if stack == "lab.b":
            raise RuntimeError("admission webhook denied the request")
        return up.StackRun(stack, True, "create 3")

    runs = up.deploy_stacks(GRAPH, deploy, workers=2)

    assert {r.stack: r.ok for r in runs} == {"lab": True, "lab.a": True, "lab.b": False, "lab.c": True}
    assert "admission webhook denied" in runs[2].summary
    report = up.run_report(runs)
    assert report.splitlines()[-1].startswith("make up: FAILED: lab.b (the other stacks are deployed")


def test_a_failed_platform_stack_starts_no_shard(up):
    started = []

    def deploy(stack):
        started.append(stack)
        return up.StackRun(stack, stack != "lab", "failed: quota" if stack == "lab" else "ok")

    runs = up.deploy_stacks(GRAPH, deploy, workers=2)

    assert started == ["lab"]
    assert [(r.stack, r.ran, r.summary) for r in runs[1:]] == [(s, False, "not run: lab failed") for s in ("lab.a", "lab.b", "lab.c")]


def test_a_failed_stacks_summary_carries_the_engines_error_not_the_empty_stderr(up, monkeypatch, capsys):
    """The CLI's error text of a failed `up` ends with its (empty) stderr: the summary line said only
    "failed: stderr:". It now carries the resource's error, the engine's closing "update failed" left out."""
    from pulumi.automation._cmd import CommandResult
    from pulumi.automation.errors import create_command_error

    import tools.engine

    stdout = ("Updating (dev):\n\nDiagnostics:\n  kubernetes:core/v1:Node (dev-platform-node-dev-l4-01-joined):\n"
              "    error: resource 'dev-l4-01' does not exist\n\n  pulumi:pulumi:Stack (gpu-tenancy-dev):\n"
              "    error: update failed\n\nResources:\n    1 errored\n")
    error = create_command_error(CommandResult(stdout=stdout, stderr="", code=255))
    assert str(error).rstrip().endswith("stderr:")

    class Failing:
        def __init__(self, *args, **kwargs):
            pass

        def up(self, **kwargs):
            raise error

    monkeypatch.setattr(tools.engine, "Engine", Failing)
    assert up.deploy_in_process(Path("/p"), "dev", Path("/s"), Path("/k")) == 1
    result = capsys.readouterr().out.splitlines()[-1]
    assert result == up.RESULT_MARKER + '{"ok": false, "summary": "failed: kubernetes:core/v1:Node ' \
        "(dev-platform-node-dev-l4-01-joined): resource 'dev-l4-01' does not exist\"}"
