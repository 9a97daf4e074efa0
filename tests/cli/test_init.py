"""`tenants init` as a new platform team uses it: a minimal stack for a described cluster (flags or
an inventory file), valid with no warnings and no tenants; wrong descriptions are refused, located
on the flag or the inventory line, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.cli.main import main
from components.load import load_environment
from components.spec.stack import CONFIG_KEY
from tests.project_edits import line_of

FLAGS = ["--label-domain", "gpu.example.com", "--gpu-class", "h100=H100-80GB", "--pool", "h100-a=h100:8:gpu-01,gpu-02"]


def run(capsys, root: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--root", str(root), *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_init_from_flags_writes_a_valid_stack_without_warnings(capsys, tmp_path):
    code, out, err = run(capsys, tmp_path, "init", *FLAGS)
    assert code == 0 and err == ""
    assert f"wrote {tmp_path / 'stacks' / 'Pulumi.prod.yaml'}: 1 GPU class(es), 1 node pool(s), no tenants" in out
    assert "tenants --root" in out and "new TEAM --owner-group GROUP --gpu h100=1" in out
    platform = yaml.safe_load((tmp_path / "stacks" / "Pulumi.prod.yaml").read_text())["config"][CONFIG_KEY]
    assert platform["gpuClasses"]["h100"] == {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}
    assert platform["nodePools"]["h100-a"] == {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["gpu-01", "gpu-02"]}
    assert platform["tenants"] == "all"
    assert (tmp_path / "tenants").is_dir() and not list((tmp_path / "tenants").iterdir())
    environment = load_environment(tmp_path, "prod", strict_warnings=True)  # no warnings at all
    assert environment.tenants == [] and environment.warnings == []
    code, out, err = run(capsys, tmp_path, "validate", "--strict")
    assert (code, out.strip(), err) == (0, "prod: 0 tenant(s) ok", "")


def test_init_then_new_then_render(capsys, tmp_path):
    assert run(capsys, tmp_path, "init", *FLAGS)[0] == 0
    code, _, err = run(capsys, tmp_path, "new", "team-a", "--owner-group", "team-a-leads", "--gpu", "h100=8")
    assert code == 0, err
    code, out, err = run(capsys, tmp_path, "render", "--stack", "prod", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "rendered prod: 1 tenants" in out


def test_init_keeps_the_render_output_out_of_git(capsys, tmp_path):
    # #41: without it a committed out/ made `tenants stacks` list every rendered file as a stack.
    code, out, _ = run(capsys, tmp_path, "init", *FLAGS)
    assert code == 0 and f"wrote {tmp_path / '.gitignore'}: out/ (what tenants render writes) is not committed" in out
    assert (tmp_path / ".gitignore").read_text() == "# tenants render writes here\nout/\n"
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitignore").write_text(".venv")   # a project's own, without a final newline
    code, out, _ = run(capsys, other, "init", *FLAGS)
    assert code == 0 and "added to" in out
    assert (other / ".gitignore").read_text() == ".venv\n# tenants render writes here\nout/\n"
    code, out, _ = run(capsys, other, "init", *FLAGS, "--force")
    assert code == 0 and ".gitignore" not in out and (other / ".gitignore").read_text().count("out/") == 1


INVENTORY = """\
labelDomain: gpu.example.com
gpuClasses:
  h100: {model: H100-80GB}
  l4: {model: L4, sharing: timeSlicing, timeSlicing: {replicas: 4}}
  a100-mig: {model: A100-80GB, sharing: mig}
  custom: {model: X1, product: ACME-X1, memory: 64Gi}
nodePools:
  h100-train: {gpuClass: h100, gpusPerNode: 8, nodes: [gpu-h100-01]}
  l4-shared: {gpuClass: l4, gpusPerNode: 2, nodeSelector: {pool: l4}, maxNodes: 4}
  a100-mig: {gpuClass: a100-mig, gpusPerNode: 8, nodes: [gpu-a100-01], migLayout: all-1g.10gb}
  custom: {gpuClass: custom, gpusPerNode: 4, nodes: [gpu-x-01]}
"""


def test_init_from_an_inventory_file(capsys, tmp_path):
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY)
    code, out, err = run(capsys, tmp_path, "init", "--stack", "dev", "--inventory", str(inventory))
    assert code == 0 and err == "", err
    assert "4 GPU class(es), 4 node pool(s), no tenants" in out
    environment = load_environment(tmp_path, "dev", strict_warnings=True)
    assert sorted(environment.platform.gpu_classes) == ["a100-mig", "custom", "h100", "l4"]
    assert environment.platform.gpu_classes["l4"].product == "NVIDIA-L4"
    assert environment.platform.gpu_classes["custom"].product == "ACME-X1"


COMMENTED_INVENTORY = """\
# The lab cluster, racks 3 and 4 (ticket OPS-118).
labelDomain: gpu.example.com   # the label prefix our node pools already use
gpuClasses:
  # Bought in 2025; time-sliced for notebooks.
  l4: {model: L4, sharing: timeSlicing, timeSlicing: {replicas: 4}}
  h100:
    model: H100-80GB
    overcommit: 1.25   # finance agreed to 25% on training
nodePools:
  l4-shared: {gpuClass: l4, gpusPerNode: 2, nodes: [dev-gpu-01]}   # rack 3
  h100-train:
    gpuClass: h100
    gpusPerNode: 8
    # gpu-h100-02 comes back from repair in January.
    nodes: [gpu-h100-01]
"""


def test_init_keeps_the_inventorys_comments(capsys, tmp_path):
    # #41: the stack file tenants init wrote from an inventory dropped every comment of it.
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(COMMENTED_INVENTORY)
    code, _, err = run(capsys, tmp_path, "init", "--stack", "lab", "--inventory", str(inventory))
    assert code == 0 and err == "", err
    text = (tmp_path / "stacks" / "Pulumi.lab.yaml").read_text()
    for comment in [line.split("#", 1)[1] for line in COMMENTED_INVENTORY.splitlines() if "#" in line]:
        assert f"#{comment}" in text
    platform = yaml.safe_load(text)["config"][CONFIG_KEY]
    assert list(platform)[:2] == ["apiVersion", "labelDomain"] and platform["tenants"] == "all"
    assert platform["gpuClasses"]["h100"] == {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi",
                                              "overcommit": 1.25}
    assert "    # gpu-h100-02 comes back from repair in January.\n" in text   # at its key's new depth
    environment = load_environment(tmp_path, "lab", strict_warnings=True)
    assert environment.platform.node_pools["h100-train"].nodes == ["gpu-h100-01"]


def test_an_inventory_mistake_is_located_in_the_inventory(capsys, tmp_path):
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY.replace("gpuClass: l4,", "gpuClass: l44,"))
    code, out, err = run(capsys, tmp_path, "init", "--inventory", str(inventory))
    assert code == 1 and out == ""
    line = line_of(inventory, "l4-shared:")
    assert f"{inventory}:{line}:" in err
    assert "nodePools.l4-shared.gpuClass: unknown GPU class 'l44'; did you mean 'l4'?" in err
    assert "tenants init: nothing written" in err
    assert not (tmp_path / "stacks").exists()


def test_an_unknown_field_in_the_inventory_is_located(capsys, tmp_path):
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY.replace("  h100: {model: H100-80GB}", "  h100: {model: H100-80GB, sharng: mig}"))
    code, _, err = run(capsys, tmp_path, "init", "--inventory", str(inventory))
    assert code == 1
    assert f"{inventory}:{line_of(inventory, 'sharng')}:" in err and "sharng" in err
    assert not (tmp_path / "stacks").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu-class", "h100=H100"], "tenants init: --gpu-class h100=H100: unknown GPU model 'H100'; did you mean 'H100-80GB'?"),
        (["--gpu-class", "h100"], "tenants init: --gpu-class h100: write NAME=MODEL"),
        (["--pool", "a=h100:eight:n1"], "tenants init: --pool a=h100:eight:n1: GPUs per node must be a whole number"),
        (["--pool", "a=h100"], "tenants init: --pool a=h100: write NAME=CLASS:GPUS_PER_NODE:NODE"),
        (["--pool", "a=h10:8:n1"], "tenants init: --pool a=h10:8:n1: nodePools.a.gpuClass: unknown GPU class 'h10'; did you mean 'h100'?"),
        (["--gpu-class", "H100=H100-80GB"], "tenants init: --gpu-class H100=H100-80GB: gpuClasses.H100"),
        (["--stack", "Prod"], "tenants init: --stack Prod: a stack name is a DNS label"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(capsys, tmp_path, argv, message):
    code, out, err = run(capsys, tmp_path, "init", "--label-domain", "gpu.example.com", "--gpu-class", "h100=H100-80GB", *argv)
    assert code == 1 and out == ""
    assert message in err, err
    assert not (tmp_path / "stacks").exists()


def test_label_domain_is_required(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path, "init", "--gpu-class", "h100=H100-80GB")
    assert code == 1
    assert "tenants init: --label-domain is required (e.g. --label-domain gpu.example.com)" in err
    assert not (tmp_path / "stacks").exists()


def test_an_existing_stack_is_kept_unless_forced(capsys, tmp_path):
    assert run(capsys, tmp_path, "init", *FLAGS)[0] == 0
    before = (tmp_path / "stacks" / "Pulumi.prod.yaml").read_text()
    code, _, err = run(capsys, tmp_path, "init", "--label-domain", "other.example.com")
    assert code == 1 and "exists; use --force" in err
    assert (tmp_path / "stacks" / "Pulumi.prod.yaml").read_text() == before
    assert run(capsys, tmp_path, "init", "--label-domain", "other.example.com", "--force")[0] == 0
    assert "other.example.com" in (tmp_path / "stacks" / "Pulumi.prod.yaml").read_text()


def test_list_models(capsys, tmp_path):
    code, out, _ = run(capsys, tmp_path, "init", "--list-models")
    assert code == 0
    assert "H100-80GB" in out and "NVIDIA-H100-80GB-HBM3" in out
    assert not (tmp_path / "stacks").exists()
