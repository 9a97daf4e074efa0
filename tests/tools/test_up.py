"""`make up` (tools/up.py): which Pulumi stacks it deploys and in what graph, what it copies, and how it
runs shards concurrently: all decided or checked before (or without) any control plane."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from components.spec.problems import InvalidInput
from tests.project_edits import append_to, line_of
from tools import up as up_module
from tools.engine import copy_project, with_local_vcluster_chart

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


# --- the kept run directory: `make up` again, `make up-preview`, `make down` ------------------------------


def test_a_second_prepare_keeps_the_engines_salts_and_drops_deleted_tenants(up, tmp_path):
    source = copy_project(tmp_path / "source")
    run = tmp_path / "run"
    project, _ = up.prepare(source, "prod", run)
    append_to(project / "stacks" / "Pulumi.prod.yaml", "encryptionsalt: v1:prod-salt\n")
    (project / "stacks" / "Pulumi.prod.a.yaml").write_text("encryptionsalt: v1:shard-salt\n")  # only the engine writes it
    (source / "tenants" / "eval.yaml").unlink()

    project, _ = up.prepare(source, "prod", run)

    assert "encryptionsalt: v1:prod-salt" in (project / "stacks" / "Pulumi.prod.yaml").read_text()
    assert (project / "stacks" / "Pulumi.prod.yaml").read_text().endswith((source / "stacks" / "Pulumi.prod.yaml").read_text())
    assert (project / "stacks" / "Pulumi.prod.a.yaml").read_text() == "encryptionsalt: v1:shard-salt\n"
    assert not (project / "tenants" / "eval.yaml").exists()


def test_a_salt_is_not_added_twice(up, tmp_path):
    (tmp_path / "Pulumi.lab.yaml").write_text("encryptionsalt: v1:new\nconfig: {}\n")

    up.restore_salts(tmp_path, {"Pulumi.lab.yaml": "encryptionsalt: v1:old"})

    assert (tmp_path / "Pulumi.lab.yaml").read_text() == "encryptionsalt: v1:new\nconfig: {}\n"


def _pretend_make_up() -> subprocess.Popen:
    """A process whose command line is a `python -m tools.up`'s, once it has started."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "tools.up"])
    deadline = time.monotonic() + 10
    while b"\0tools.up\0" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


def test_only_a_live_tools_up_process_holds_a_run(up, tmp_path):
    (tmp_path / up.HOLDER).write_text(f"{os.getpid()}\n")   # pytest: alive, but not `tools.up`
    assert up.running_holder(tmp_path) is None
    with _pretend_make_up() as proc:
        try:
            (tmp_path / up.HOLDER).write_text(f"{proc.pid}\n")
            assert up.running_holder(tmp_path) == proc.pid
        finally:
            proc.kill()


def test_down_removes_the_kept_run_and_refuses_while_make_up_runs_it(tmp_path):
    run = tmp_path / "kept" / "prod"
    (run / "state" / "backend").mkdir(parents=True)
    down = [sys.executable, "-m", "tools.up", "--stack", "prod", "--dir", str(tmp_path / "kept"), "--down"]
    with _pretend_make_up() as holder:
        try:
            (run / "holder.pid").write_text(f"{holder.pid}\n")
            refused = subprocess.run(down, capture_output=True, text=True, cwd=REPO)
        finally:
            holder.kill()
    assert refused.returncode == 1 and f"`make up` (pid {holder.pid}) still runs this control plane" in refused.stderr
    assert run.is_dir()

    removed = subprocess.run(down, capture_output=True, text=True, cwd=REPO)

    assert removed.returncode == 0 and "make down: removed" in removed.stdout, removed.stderr
    assert not run.exists()


def test_a_preview_reports_each_change_and_applies_nothing(up):
    report = up.run_report([up.StackRun("prod", True, "update 1", 3.0, steps=(("update", "eval-q", "kubernetes:core/v1:ResourceQuota"),))], "preview")

    assert report.splitlines() == ["make up-preview: prod: update 1 in 3.0s",
                                   "make up-preview: prod:   update eval-q kubernetes:core/v1:ResourceQuota",
                                   "make up-preview: every stack previewed (nothing applied: `make up` applies it)"]


def test_unchanged_resources_are_no_change(up):
    assert up.change_summary({"same": 57}) == "no change"
    assert up.change_summary({"same": 50, "update": 3, "create": 1}) == "create 1, update 3"


def test_an_up_lists_no_resource_its_engine_output_named_already(up):
    runs = [up.StackRun("prod", True, "create 143", 9.7, steps=(("create", "eval-q", "kubernetes:core/v1:ResourceQuota"),))]

    assert up.run_report(runs).splitlines() == ["make up: prod: create 143 in 9.7s", "make up: every stack deployed"]


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

        def recover(self):
            return []

        def export(self):   # a state without node taint patches: no cluster is asked about their owners
            return []

        def up(self, **kwargs):
            raise error

    monkeypatch.setattr(tools.engine, "Engine", Failing)
    assert up.deploy_in_process(Path("/p"), "dev", Path("/s"), Path("/k")) == 1
    result = capsys.readouterr().out.splitlines()[-1]
    assert result == up.RESULT_MARKER + '{"ok": false, "summary": "failed: kubernetes:core/v1:Node ' \
        "(dev-platform-node-dev-l4-01-joined): resource 'dev-l4-01' does not exist\"}"
