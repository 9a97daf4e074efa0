"""The GPU stack cutover in `tenants diff` (components/review/gpu_cutover.py): tests/fixtures/dra-operator
in its device-plugin form, after step 1 (`both`, b200 on DRA) and after step 2 (its own `dra` stack)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from components.load import load_environment
from components.review.diff import Side, compare_stack
from components.spec.yaml_source import parse_yaml
from tests.project_edits import replace_once

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dra-operator"


def fleet(step: str, root: Path = FIXTURE):
    """The fixture's fleet on the stack of one cutover step (`devicePlugin`, `both`, `dra`)."""
    if step == "dra":
        return load_environment(root, "dra")
    path = FIXTURE / "cutover" / f"Pulumi.dra.{step}.yaml"
    return load_environment(root, "dra", platform_doc=parse_yaml(path.read_text(), str(path)))


def warnings(before: str, after: str, root: Path = FIXTURE) -> dict[tuple[str, str | None], str]:
    found = compare_stack("dra", Side(fleet(before)), Side(fleet(after, root)))["warnings"]
    return {(w["kind"], w["tenant"]): w["message"] for w in found}


def test_step_one_names_the_moved_class_and_the_pods_refused_on_their_next_creation():
    found = warnings("devicePlugin", "both")
    stack = found[("gpu-stack-cutover", None)]
    assert "gpuStack devicePlugin → both, class b200 serving devicePlugin → dra" in stack
    assert "nvidia.com/gpu.product and the MIG Manager" not in stack  # GFD stays on `both`
    robotics = found[("gpu-path-refused", "robotics")]
    assert "pods asking for nvidia.com/gpu (requests.nvidia.com/gpu 8 → 0)" in robotics
    assert "ask instead with ResourceClaims of DeviceClass b200.gpu.op.dev (b200.gpu.op.dev.deviceclass.resource.k8s.io/devices 8)" in robotics
    assert "its ClusterQueue stops counting nvidia.com/gpu, counts deviceclass.resource.kubernetes.io/b200.gpu.op.dev" in robotics
    # vision keeps its h100s on the device plugin: only its b200 leaves nvidia.com/gpu.
    assert "pods asking for nvidia.com/gpu beyond 2 (requests.nvidia.com/gpu 3 → 2)" in found[("gpu-path-refused", "vision")]
    assert ("gpu-path-refused", "speech") not in found  # h100 only: nothing it asks for changes yet


def test_the_cutover_replaces_the_borrowing_warning_that_blamed_another_tenant():
    kinds = {kind for kind, _ in warnings("devicePlugin", "both")}
    assert not kinds & {"borrowing-lowered", "quota-lowered"}, kinds


def test_step_two_says_the_operator_removes_the_gfd_labels():
    found = warnings("both", "dra")
    assert "gpuStack both → dra, class h100 serving devicePlugin → dra" in found[("gpu-stack-cutover", None)]
    assert "nvidia.com/gpu.product and the MIG Manager's nvidia.com/mig.config node labels are removed" in found[("gpu-stack-cutover", None)]
    assert {t for kind, t in found if kind == "gpu-path-refused"} == {"speech", "vision"}
    assert "requests.nvidia.com/gpu 1 → 0" in found[("gpu-path-refused", "speech")]


def test_a_tenant_lowering_its_own_quota_in_the_cutover_keeps_its_quota_lowered_warning(tmp_path):
    root = Path(shutil.copytree(FIXTURE, tmp_path / "fleet"))
    replace_once(root / "tenants" / "speech.yaml", 'cpu: {requests: "8", limits: "16"}', 'cpu: {requests: "4", limits: "16"}')
    found = warnings("both", "dra", root)
    # speech's own edit may be why its GPUs go down too, so the quota warning keeps saying so.
    assert "requests.cpu 8 → 4" in found[("quota-lowered", "speech")]
    assert "requests.nvidia.com/gpu 1 → 0" in found[("quota-lowered", "speech")]
    assert ("gpu-path-refused", "speech") in found


@pytest.mark.parametrize("step", ["devicePlugin", "both", "dra"])
def test_no_cutover_no_cutover_warning(step):
    assert not [k for k, _ in warnings(step, step) if k.startswith("gpu-")]
