"""The GPU stack cutover of tests/fixtures/dra-operator on the real engine (issue #38, item 4).

The fleet is deployed in its device-plugin form (tests/fixtures/dra-operator/cutover/), then through
step 1 (`gpuStack: both`, b200 on DRA) and step 2 (the fixture's own `gpuStack: dra` stack), one
`pulumi up` each. Before every step, `tenants diff`'s cutover warnings (review/gpu_cutover.py) name
the tenants whose `nvidia.com/gpu` pods are refused when next created; on the real API server, as
each tenant's developer, a placed pod asking for its whole `requests.nvidia.com/gpu` of the side
before is admitted before the step and refused after it exactly for the tenants named, and what the
warning says to ask for instead (a ResourceClaim, the DeviceClass's implicit extended resource) is
admitted. The DRA form deploys with its generated DeviceClasses, and a second `up` changes nothing.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.load import load_environment
from components.manifests.build import environment_objects
from components.review.diff import Side, compare_stack
from tests.e2e.test_tenancy_dra import IMPLICIT, claim, create_claim, gpu_pod, placed
from tools.applied_stack import wait_policies_in_force
from tools.engine import Engine, LocalCluster, copy_project

pytestmark = pytest.mark.pulumi

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra-operator"
STACK = "dra"
STEPS = ("devicePlugin", "both", "dra")
GPU_KEY = "requests.nvidia.com/gpu"
GROUPS = {"robotics": "robotics-devs", "speech": "speech-devs", "vision": "vision-devs"}


def stack_text(step: str) -> str:
    path = FIXTURE / ("stacks/Pulumi.dra.yaml" if step == "dra" else f"cutover/Pulumi.dra.{step}.yaml")
    return path.read_text()


class Cutover:
    """The fixture fleet as a Pulumi project on a local control plane, one stack file per step."""

    def __init__(self, root: Path) -> None:
        self.project = copy_project(root / "project")
        for part in ("tenants", "stacks"):
            shutil.rmtree(self.project / part)
            shutil.copytree(FIXTURE / part, self.project / part)
        self.stack_file = self.project / "stacks" / f"Pulumi.{STACK}.yaml"
        self.stack_file.write_text(stack_text("devicePlugin"))
        self.cluster = LocalCluster(root / "cluster", self.project, STACK).start()
        self.engine = Engine(self.project, STACK, root / "state", self.cluster.kubeconfig)

    def environment(self):
        return load_environment(self.project, STACK)

    def to(self, step: str) -> None:
        self.stack_file.write_text(stack_text(step))


@pytest.fixture(scope="module")
def cutover(tmp_path_factory):
    c = Cutover(tmp_path_factory.mktemp("gpu-cutover"))
    try:
        yield c
    finally:
        c.cluster.stop()


def gpu_keys(environment) -> dict[str, int]:
    """Each tenant's `requests.nvidia.com/gpu` of its `tenant-quota`, as rendered."""
    found = {}
    for tenant, objects in environment_objects(environment).items():
        for o in objects:
            if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "tenant-quota":
                found[tenant] = int(o["spec"]["hard"].get(GPU_KEY, "0"))
    return found


def in_force(cluster: LocalCluster, environment, timeout: float = 60) -> None:
    """Wait until what an `up` applied judges admission: the admission policies and bindings (the
    API server loads them a moment after the apply; a CI run saw vision's claim refused by its
    claims policy of the step before), and the quotas, whose admission judges by status.hard (the
    controller copies every new spec.hard)."""
    wait_policies_in_force(cluster.cp, timeout)
    core = client.CoreV1Api(cluster.api_client)
    deadline = time.monotonic() + timeout
    for tenant in GROUPS:
        while True:
            q = core.read_namespaced_resource_quota("tenant-quota", tenant)
            if q.status and q.status.hard == q.spec.hard:
                break
            assert time.monotonic() < deadline, f"quota of {tenant} not in force: {q.status}"
            time.sleep(0.5)


def admits(cluster: LocalCluster, environment, tenant: str, resources: dict[str, str]) -> str:
    """'admitted', or the API server's refusal, for a placed pod of `tenant`'s developer (dry run)."""
    core = client.CoreV1Api(cluster.cp.client_for(f"dev@{GROUPS[tenant]}.example.com", [GROUPS[tenant]]))
    try:
        core.create_namespaced_pod(tenant, placed(gpu_pod(resources), environment, tenant), dry_run="All")
    except ApiException as exc:
        assert exc.status == 403, exc.body
        return exc.body
    return "admitted"


def test_each_step_refuses_exactly_the_pods_the_diff_names(cutover, timed):
    before = cutover.environment()
    up = timed("up of the device-plugin form", cutover.engine.up)
    assert set(up.changes) == {"create"}, up.changes
    in_force(cutover.cluster, before)
    for step in STEPS[1:]:
        cutover.to(step)
        after = cutover.environment()
        warnings = compare_stack(STACK, Side(before), Side(after))["warnings"]
        named = {w["tenant"] for w in warnings if w["kind"] == "gpu-path-refused" and GPU_KEY in w["message"]}
        assert any(w["kind"] == "gpu-stack-cutover" for w in warnings), warnings
        asked = {t: n for t, n in gpu_keys(before).items() if n}
        for tenant, n in asked.items():
            assert admits(cutover.cluster, before, tenant, {"nvidia.com/gpu": str(n)}) == "admitted", (step, tenant)
        timed(f"up of step {step}", cutover.engine.up)
        in_force(cutover.cluster, after)
        refused = {t for t, n in asked.items()
                   if admits(cutover.cluster, after, t, {"nvidia.com/gpu": str(n)}) != "admitted"}
        assert refused == named, (step, refused, named)
        for tenant in refused:
            assert "exceeded quota: tenant-quota" in admits(cutover.cluster, after, tenant, {"nvidia.com/gpu": str(asked[tenant])})
        before = after


def test_what_the_diff_says_to_ask_instead_is_admitted(cutover):
    environment = cutover.environment()   # the DRA form, deployed by the test above
    assert environment.platform.effective_gpu_stack == "dra"
    classes = {o.metadata.name for o in client.ResourceV1Api(cutover.cluster.api_client).list_device_class().items}
    assert {"b200.gpu.op.dev", "h100.gpu.op.dev"} <= classes, classes
    for tenant, device_class in (("robotics", "b200.gpu.op.dev"), ("speech", "h100.gpu.op.dev"), ("vision", "h100.gpu.op.dev")):
        assert admits(cutover.cluster, environment, tenant, {IMPLICIT + device_class: "1"}) == "admitted", tenant
        custom = client.CustomObjectsApi(cutover.cluster.cp.client_for(f"dev@{GROUPS[tenant]}.example.com", [GROUPS[tenant]]))
        create_claim(custom, tenant, claim(device_class))   # dry run; raises if refused
    # A class the tenant is not granted stays refused (speech has no b200).
    body = admits(cutover.cluster, environment, "speech", {IMPLICIT + "b200.gpu.op.dev": "1"})
    assert body != "admitted"


def test_a_second_up_of_the_dra_form_changes_nothing(cutover):
    again = cutover.engine.up()
    assert again.changes == {}, again.ops("create", "update", "delete", "replace")
