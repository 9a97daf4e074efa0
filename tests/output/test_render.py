"""`tenants render`: deterministic files that equal what the Pulumi program registers."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tools.synthetic import write_project
from components.cli import main
from components.manifests.meta import object_id
from components.load import load_environment, stack_names
from components.output.render import PARALLEL_FROM, render_files, render_in_processes
from components.resources.kubernetes import with_field_manager
from tools.pulumi_mocks import REPO, normalise, run_program
from tests.resources.test_fleet import _registered_objects

STACKS = stack_names(REPO)


@pytest.mark.parametrize("stack", STACKS)
def test_render_writes_loadable_deterministic_files(stack, tmp_path, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["--root", str(REPO), "render", "--stack", stack, "--out", str(first)]) == 0
    assert main(["--root", str(REPO), "render", "--stack", stack, "--out", str(second)]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith(f"rendered {stack}: 3 tenants, ")
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert "_platform.yaml" in names and "eval.yaml" in names
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
        docs = list(yaml.safe_load_all((first / name).read_text()))
        assert docs and all(isinstance(d, dict) for d in docs)


@pytest.mark.parametrize("stack", STACKS)
def test_render_equals_mock_runtime_registrations(stack, tmp_path):
    assert main(["--root", str(REPO), "render", "--stack", stack, "--out", str(tmp_path)]) == 0
    rendered = {}
    for path in tmp_path.glob("*.yaml"):
        if path.name.endswith(".helm.yaml"):
            continue
        for obj in yaml.safe_load_all(path.read_text()):
            # The Pulumi shell adds one annotation: its stable server-side apply field manager.
            rendered[object_id(obj)] = normalise({**obj, "metadata": with_field_manager(obj["metadata"])})
    registrations, _ = run_program(stack)
    assert _registered_objects(registrations) == rendered


def test_render_invalid_input_writes_nothing(tmp_path, capsys):
    root = tmp_path / "project"
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, root / part)
    bad = (root / "tenants" / "eval.yaml").read_text().replace("costCenter: cc-4300", "costCenter: cc-4300\nqouta: {}")
    (root / "tenants" / "eval.yaml").write_text(bad)
    out = tmp_path / "out"
    assert main(["--root", str(root), "render", "--stack", "prod", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "tenants/eval.yaml:" in err and "qouta: unknown field; did you mean 'quota'?" in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_rendering_in_two_processes_writes_the_same_bytes(tmp_path):
    environment = load_environment(write_project(tmp_path / "fleet", PARALLEL_FROM + 1, scheduler="kai"), "bench")
    files, count = render_in_processes(environment, 2)
    assert files == render_files(environment)
    assert count == sum(text.count("\n---\n") for text in files.values() if not text.startswith("# Helm"))


def test_a_small_fleet_renders_in_one_process(monkeypatch):
    environment = load_environment(REPO, "prod")

    def no_workers(method):
        raise AssertionError(f"a {len(environment.tenants)}-tenant fleet started a worker ({method})")

    monkeypatch.setattr("components.output.render.multiprocessing.get_context", no_workers)
    assert render_in_processes(environment, 2)[0] == render_files(environment)
