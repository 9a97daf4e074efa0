"""`compare_stack` on loaded environments (no git): capacity rows, stack-level changes, warnings."""

from __future__ import annotations

from pathlib import Path

import yaml

from components.review.diff import Side, capacity_rows, compare_stack, report
from components.load import load_environment
from components.spec.base import API_VERSION
from components.spec.stack import CONFIG_KEY

TEAM = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: {name}
displayName: Team
costCenter: cc
access: {{owners: {{groups: [{name}-leads]}}}}
quota: {{gpu: {gpus}}}
gpu: {{classes: [h100]}}
"""
STACK = {
    "apiVersion": API_VERSION,
    "labelDomain": "gpu.example.com",
    "gpuClasses": {"h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}},
    "nodePools": {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]}},
    "capacityWarningRatio": 0.75,
}


def project(root: Path, teams: dict[str, int], **platform) -> Path:
    (root / "tenants").mkdir(parents=True, exist_ok=True)
    (root / "stacks").mkdir(parents=True, exist_ok=True)
    for old in (root / "tenants").glob("*.yaml"):
        old.unlink()
    for name, gpus in teams.items():
        (root / "tenants" / f"{name}.yaml").write_text(TEAM.format(name=name, gpus=gpus))
    config = {"config": {CONFIG_KEY: {**STACK, **platform}}}
    (root / "stacks" / "Pulumi.prod.yaml").write_text(yaml.safe_dump(config))
    return root


def env(root: Path, teams: dict[str, int], **platform):
    return load_environment(project(root, teams, **platform), "prod")


def test_capacity_rows_follow_validation_arithmetic(tmp_path):
    rows = capacity_rows(env(tmp_path, {"a": 6, "b": 6}))

    assert rows[("gpuClass", "h100")] == {
        "capacity": 16, "overcommit": 1, "limit": 16, "requested": 12, "status": "warning", "byTenant": {"a": 6, "b": 6},
    }


def test_suspended_tenants_do_not_count_against_capacity(tmp_path):
    root = project(tmp_path, {"a": 6, "b": 6})
    path = root / "tenants" / "b.yaml"
    path.write_text(path.read_text() + "lifecycle: suspended\n")

    assert capacity_rows(load_environment(root, "prod"))[("gpuClass", "h100")]["requested"] == 6


def test_identical_environments_are_unchanged_without_warnings(tmp_path):
    environment = env(tmp_path, {"a": 4})

    result = compare_stack("prod", Side(environment), Side(environment))

    assert result["change"] == "unchanged" and result["warnings"] == [] and result["tenantDetails"] == []
    assert report([result], {"ref": "HEAD", "commit": "0" * 40})["changed"] is False


def test_entering_the_warning_band_warns_once(tmp_path):
    before = env(tmp_path / "a", {"a": 4})
    after = env(tmp_path / "b", {"a": 12})

    result = compare_stack("prod", Side(before), Side(after))

    assert [w["kind"] for w in result["warnings"]] == ["capacity"]
    assert "quotas add up to 12" in result["warnings"][0]["message"]


def test_staying_in_the_warning_band_with_less_demand_does_not_warn(tmp_path):
    before = env(tmp_path / "a", {"a": 14})
    after = env(tmp_path / "b", {"a": 13})

    warnings = compare_stack("prod", Side(before), Side(after))["warnings"]

    # No capacity warning; the lowered namespace quota itself is always flagged.
    assert [w["kind"] for w in warnings] == ["quota-lowered"]


def test_removing_capacity_under_quotas_warns(tmp_path):
    before = env(tmp_path / "a", {"a": 14})
    pools = {"train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n1", "n2"]}, "spare": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n3"]}}
    bigger = env(tmp_path / "b", {"a": 14}, nodePools=pools)

    result = compare_stack("prod", Side(bigger), Side(before))

    assert [w["kind"] for w in result["warnings"]] == ["capacity"]
    assert [n["node"] for n in result["nodes"]] == ["n3"] and result["nodes"][0]["change"] == "removed"


def test_tenant_disabled_in_the_stack_is_retained_too(tmp_path):
    before = env(tmp_path / "a", {"a": 4, "b": 4})
    after = env(tmp_path / "b", {"a": 4, "b": 4}, tenants=["a"])

    result = compare_stack("prod", Side(before), Side(after))

    removed = [w for w in result["warnings"] if w["kind"] == "tenant-removed"]
    assert len(removed) == 1 and "disabled in this stack" in removed[0]["message"]


def test_base_problems_become_notes(tmp_path):
    environment = env(tmp_path, {"a": 4})

    result = compare_stack("prod", Side(None, ["the base is invalid (1 error(s))"]), Side(environment))

    assert result["notes"] == ["stack prod: the base is invalid (1 error(s))"]
    assert result["change"] == "changed"  # not "added": the stack existed, it just did not load


def test_new_dedicated_autoscaled_pool_asks_for_a_node_group_update(tmp_path):
    pools = {"auto": {"gpuClass": "h100", "gpusPerNode": 8, "maxNodes": 2, "nodeSelector": {"pool": "auto"}}}
    before = env(tmp_path / "a", {"a": 4}, nodePools=pools)
    root = project(tmp_path / "b", {"a": 4}, nodePools=pools)
    path = root / "tenants" / "a.yaml"
    path.write_text(path.read_text().replace("gpu: {classes: [h100]}", "gpu: {dedicatedPools: [auto]}"))
    after = load_environment(root, "prod")

    result = compare_stack("prod", Side(before), Side(after))

    assert [g["pool"] for g in result["nodeGroups"]] == ["auto"]
    assert "node-group" in [w["kind"] for w in result["warnings"]]


def _example_copy(root: Path) -> Path:
    import shutil

    repo = Path(__file__).resolve().parents[2]
    for part in ("tenants", "stacks"):
        shutil.copytree(repo / part, root / part)
    return root


def test_a_mig_layout_change_names_the_nodes_to_drain(tmp_path):
    base, head = _example_copy(tmp_path / "base"), _example_copy(tmp_path / "head")
    stack = head / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    old = "        - devices: [0, 1, 2, 3]\n          profiles: {1g.10gb: 7}\n        - devices: [4, 5, 6, 7]\n"
    assert text.count(old) == 1
    stack.write_text(text.replace(old, "        - devices: [4, 5, 6, 7]\n          profiles: {1g.10gb: 7}\n        - devices: [0, 1, 2, 3]\n"))
    document = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(head, "prod")))
    (drain,) = [w for w in document["warnings"] if w["kind"] == "mig-drain"]
    assert drain["message"].endswith(": gpu-a100-03, gpu-a100-04")   # the a100-mig pool, not the whole-GPU A100s
    unchanged = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(base, "prod")))
    assert not [w for w in unchanged["warnings"] if w["kind"] == "mig-drain"]


def test_decommissioning_on_kueue_says_the_cluster_queue_is_stopped(tmp_path):
    base, head = _example_copy(tmp_path / "base"), _example_copy(tmp_path / "head")
    tenant = head / "tenants" / "inference.yaml"
    tenant.write_text(tenant.read_text() + "lifecycle: decommissioned\ndecommission: {confirm: inference}\n")
    document = compare_stack("prod", Side(load_environment(base, "prod")), Side(load_environment(head, "prod")))
    (warning,) = [w for w in document["warnings"] if w["kind"] == "tenant-decommissioned"]
    assert "ClusterQueue inference is stopped (stopPolicy: HoldAndDrain), not deleted: admitted workloads must finish" in warning["message"]
