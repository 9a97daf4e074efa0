"""`tenants render`: deterministic files that equal what the Pulumi program registers."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tools.synthetic import write_project
from components.cli import main
from components.manifests.meta import object_id
from components.load import load_environment, stack_names
from components.output import render
from components.output.render import PARALLEL_FROM, render_directory, render_files
from components.resources.kubernetes import registered_metadata
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
        if path.name.endswith(".helm.yaml") or path.name in render.platform_extras(load_environment(REPO, stack)):
            continue   # not objects: Helm releases, what Kueue's config and node groups must hold
        for obj in yaml.safe_load_all(path.read_text()):
            # The Pulumi shell adds one annotation: its stable server-side apply field manager.
            rendered[object_id(obj)] = normalise({**obj, "metadata": registered_metadata(obj)})
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


@pytest.fixture(scope="module")
def parallel_fleet(tmp_path_factory):
    """A fleet just large enough to be rendered in two processes."""
    return write_project(tmp_path_factory.mktemp("fleet"), PARALLEL_FROM + 1, scheduler="kai")


def _written(directory) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.iterdir())}


def test_rendering_in_two_processes_writes_the_same_bytes(parallel_fleet, tmp_path):
    environment = load_environment(parallel_fleet, "bench")
    files, count = render_directory(environment, tmp_path / "out", 2)
    expected = render_files(environment)
    assert _written(tmp_path / "out") == expected and files == len(expected)
    assert count == sum(text.count("\n---\n") for text in expected.values() if not text.startswith("# Helm"))


def test_a_write_error_in_a_worker_is_reported_and_leaves_nothing(parallel_fleet, tmp_path, monkeypatch, capsys):
    write_part = render._write_part

    def disk_full_in_the_worker(environment, names, with_platform, directory, earlier=None):
        if not with_platform:  # only the forked worker renders without the platform
            raise OSError(28, "No space left on device", str(directory / "team-00001.yaml"))
        return write_part(environment, names, with_platform, directory, earlier)

    monkeypatch.setattr(render, "_write_part", disk_full_in_the_worker)
    out = tmp_path / "out"
    assert main(["--root", str(parallel_fleet), "render", "--stack", "bench", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "No space left on device" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_small_fleet_renders_in_one_process(monkeypatch, tmp_path):
    environment = load_environment(REPO, "prod")

    def no_workers(method):
        raise AssertionError(f"a {len(environment.tenants)}-tenant fleet started a worker ({method})")

    monkeypatch.setattr("components.output.render.multiprocessing.get_context", no_workers)
    render_directory(environment, tmp_path / "out", 2)
    assert _written(tmp_path / "out") == render_files(environment)


def _inodes(directory) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in directory.iterdir()}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_rerender_keeps_unchanged_files_and_rewrites_the_others(parallel_fleet, tmp_path, processes):
    environment = load_environment(parallel_fleet, "bench")
    out = tmp_path / "out"
    render_directory(environment, out, processes)
    before = _inodes(out)
    edited, removed = out / "team-00003.yaml", out / "team-00004.yaml"
    edited.write_text(edited.read_text() + "# a hand edit of the same length or not\n")
    removed.unlink()

    assert render_directory(environment, out, processes)[0] == len(before)
    after = _inodes(out)
    assert _written(out) == render_files(environment)
    unchanged = set(before) - {edited.name, removed.name}
    assert {name: after[name] for name in unchanged} == {name: before[name] for name in unchanged}
    assert after[edited.name] != before[edited.name] and removed.name in after
    # The replaced output is gone: no file of the new one is still linked from anywhere else.
    assert all((out / name).stat().st_nlink == 1 for name in after)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_rerender_writes_the_files_when_they_cannot_be_linked(parallel_fleet, tmp_path, monkeypatch):
    environment = load_environment(parallel_fleet, "bench")
    out = tmp_path / "out"
    render_directory(environment, out, 2)
    before = _inodes(out)

    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted", str(source))

    monkeypatch.setattr("components.output.render.os.link", no_links)
    render_directory(environment, out, 2)
    assert _written(out) == render_files(environment)
    assert not set(_inodes(out).items()) & set(before.items())


def test_a_stack_whose_queues_count_dra_classes_gets_the_kueue_configuration_it_needs(tmp_path):
    """`_kueue-configuration.yaml` beside `_platform.yaml`, written the same by either path, and re-rendered in place."""
    environment = load_environment(REPO / "tests" / "fixtures" / "dra-kueue", "dra")
    files = render_files(environment)
    text = files["_kueue-configuration.yaml"]
    assert text.startswith(render.KUEUE_HEADER)
    assert yaml.safe_load(text)["resources"]["deviceClassMappings"][0] == {
        "name": "deviceclass.resource.kubernetes.io/b200.gpu.dra.dev", "deviceClassNames": ["b200.gpu.dra.dev"]}
    out = tmp_path / "out"
    for _ in range(2):   # the second time over its own output, which it must recognise as its own
        render.check_output_directory(out)
        render_directory(environment, out, 1)
    assert {p.name: p.read_text() for p in out.iterdir()} == files
    assert "_kueue-configuration.yaml" not in render_files(load_environment(REPO / "tests" / "fixtures" / "dra", "dra"))


def test_the_gpu_operators_dra_stack_renders_without_any_gfd_or_mig_label(tmp_path):
    """tests/fixtures/dra-operator: classes described by ResourceSlice attributes, no `product`; every GPU
    node gets the tool's pool and class labels only, and each class its generated DeviceClass."""
    environment = load_environment(REPO / "tests" / "fixtures" / "dra-operator", "dra")
    assert not environment.warnings
    objects = [o for text in render_files(environment).values() for o in yaml.safe_load_all(text) if o]
    nodes = [o for o in objects if o.get("kind") == "Node"]
    # (a label patch and a taint patch per node; the shared pools keep the tool's nvidia.com/gpu=present taint)
    assert len({o["metadata"]["name"] for o in nodes}) == 3
    assert all(not [k for k in o["metadata"].get("labels", {}) if k.startswith("nvidia.com/")] for o in nodes)
    assert not [o for o in objects if o.get("kind") == "ConfigMap" and o["metadata"]["namespace"] == "gpu-operator"]
    classes = {o["metadata"]["name"]: o["spec"]["selectors"] for o in objects if o.get("kind") == "DeviceClass"}
    assert sorted(classes) == ["b200.gpu.op.dev", "h100.gpu.op.dev"]
    assert classes["h100.gpu.op.dev"][1]["cel"]["expression"] == (
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && device.attributes['gpu.nvidia.com'].type == 'gpu'")
    quota = next(o for o in objects if o.get("kind") == "ResourceQuota" and o["metadata"]["namespace"] == "vision"
                 and "requests.deviceclass.resource.kubernetes.io/b200.gpu.op.dev" in o["spec"]["hard"])
    assert quota["spec"]["hard"]["b200.gpu.op.dev.deviceclass.resource.k8s.io/devices"] == "1"
    assert quota["spec"]["hard"]["requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com"] == "0"
