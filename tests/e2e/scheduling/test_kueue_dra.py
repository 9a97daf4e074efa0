"""Kueue v0.19.2 counting DRA devices on the real kube-scheduler: the tests/fixtures/dra-kueue stack.

Kueue runs with the stack's `deviceClassMappings` in its Configuration (`tenants render` writes them
to `_kueue-configuration.yaml`; tools/scheduling.py puts them into the lane's Kueue config), and the
ClusterQueues count b200, a class served by DRA alone, as `deviceclass.resource.kubernetes.io/<class>`
in a flavor of its own pool. ResourceSlices stand in for the DRA driver (resource_slices.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from tests.e2e.scheduling.jobs import QUEUE_LABEL, event_lines, job, wait_or_explain
from tests.e2e.scheduling.resource_slices import publish_resource_slices
from tools.scheduling import running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra-kueue"
B200 = "b200.gpu.dra.dev"
B200_QUEUED = f"deviceclass.resource.kubernetes.io/{B200}"


@pytest.fixture(scope="module")
def plane(e2e_summary):
    for stack in running_scheduling_stack("dra", e2e_summary, root=FIXTURE, what="dra + kueue"):
        publish_resource_slices(stack)
        yield stack


def developer(stack, tenant: str):
    api = stack.plane.cp.client_for(f"dev@{tenant}.example.com", [f"{tenant}-devs"])
    return client.BatchV1Api(api), client.CustomObjectsApi(api)


def dra_job(*, template: str | None = None, resources: dict | None = None) -> dict:
    """A queued Job whose one pod gets a B200 through a claim template or an extended resource."""
    body = job(resources or {})
    spec = body["spec"]["template"]["spec"]
    if template is not None:
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return body


def workload(stack, namespace: str, job_name: str) -> dict | None:
    cp = stack.plane.cp
    res = cp.dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    for wl in cp.dynamic.get(res, namespace=namespace).to_dict()["items"]:
        if any(o["kind"] == "Job" and o["name"] == job_name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def quota_reserved(stack, namespace: str, job_name: str) -> dict | None:
    """The Workload's QuotaReserved condition once Kueue has decided (True, or False with its reason)."""
    wl = workload(stack, namespace, job_name) or {}
    for c in wl.get("status", {}).get("conditions", []):
        if c["type"] == "QuotaReserved" and (c["status"] == "True" or c.get("message")):
            return c
    return None


def explain(stack, namespace: str, name: str) -> str:
    core = client.CoreV1Api(stack.plane.cp.api_client)
    return "\n".join([*event_lines(core, namespace, name), f"workload: {workload(stack, namespace, name)}"])


def decided(stack, namespace: str, name: str) -> dict:
    return wait_or_explain(stack.plane.cp, lambda: quota_reserved(stack, namespace, name),
                           f"Kueue to decide on {namespace}/{name}", lambda: explain(stack, namespace, name), 90)


def test_kueue_admits_a_granted_claim_template_through_the_mapped_resource_and_counts_it(plane):
    """vision (b200: 1): its claim-template Job is admitted in flavor b200-train, charged as the mapped
    resource, and bound on the b200 node; a second B200, asked as the class's extendedResourceName,
    is charged to the same resource and waits (quota 1)."""
    cp = plane.plane.cp
    batch, custom = developer(plane, "vision")
    name = f"b200-{uuid.uuid4().hex[:6]}"
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": B200, "count": 1}}]}}}})
    first = dra_job(template=name)
    batch.create_namespaced_job("vision", first)
    condition = decided(plane, "vision", first["metadata"]["name"])
    assert condition["status"] == "True", condition
    assignment = workload(plane, "vision", first["metadata"]["name"])["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"][B200_QUEUED] == "b200-train" and assignment["resourceUsage"][B200_QUEUED] == "1"
    assert "nvidia.com/gpu" not in assignment["resourceUsage"]
    core = client.CoreV1Api(cp.api_client)
    selector = f"job-name={first['metadata']['name']}"
    node = wait_or_explain(cp, lambda: next((p.spec.node_name for p in core.list_namespaced_pod("vision", label_selector=selector).items
                                              if p.spec.node_name), None),
                           "the claim pod bound", lambda: explain(plane, "vision", first["metadata"]["name"]), 90)
    assert node == "gpu-b200-01"

    second = dra_job(resources={"gpu.dra.dev/b200": 1})
    batch.create_namespaced_job("vision", second)
    condition = decided(plane, "vision", second["metadata"]["name"])
    assert condition["status"] == "False" and B200_QUEUED in condition["message"], condition


def test_kueue_refuses_a_b200_job_of_a_tenant_not_granted_the_class(plane):
    """robotics (h100 only): its ClusterQueue covers no B200 resource, so Kueue reserves no quota."""
    batch, _ = developer(plane, "robotics")
    body = dra_job(resources={B200_QUEUED: 1})
    assert body["metadata"]["labels"][QUEUE_LABEL] == "default"
    batch.create_namespaced_job("robotics", body)
    condition = decided(plane, "robotics", body["metadata"]["name"])
    assert condition["status"] == "False" and B200_QUEUED in condition["message"], condition
