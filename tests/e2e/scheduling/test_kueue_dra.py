"""Kueue v0.19.2 counting DRA devices on the real kube-scheduler: the tests/fixtures/dra-operator stack.

The stack is on the GPU Operator's DRA stack: no GPU Feature Discovery label on any node, each class
described by its devices' ResourceSlice attributes and its DeviceClass generated from them. Kueue runs
with the stack's `deviceClassMappings` in its Configuration (`tenants render` writes them to
`_kueue-configuration.yaml`; tools/scheduling.py puts them into the lane's Kueue config), and the
ClusterQueues count b200 as `deviceclass.resource.kubernetes.io/b200.gpu.op.dev` in the flavors of
its pools. ResourceSlices stand in for the DRA driver (resource_slices.py).
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

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra-operator"
B200 = "b200.gpu.op.dev"
B200_QUEUED = f"deviceclass.resource.kubernetes.io/{B200}"


@pytest.fixture(scope="module")
def plane(e2e_summary):
    for stack in running_scheduling_stack("dra", e2e_summary, root=FIXTURE, what="dra-operator + kueue"):
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


def test_the_nodes_carry_no_gpu_feature_discovery_label(plane):
    core = client.CoreV1Api(plane.plane.cp.api_client)
    labels = {k for node in core.list_node().items for k in (node.metadata.labels or {})}
    assert {"gpu.op.dev/pool", "gpu.op.dev/gpu-class"} <= labels
    assert not {k for k in labels if k.startswith("nvidia.com/")}


def test_kueue_admits_a_granted_claim_template_through_the_mapped_resource_and_it_binds_on_its_pool(plane):
    """vision (b200: 1): its claim-template Job is admitted in flavor b200-shared, charged as the mapped
    resource, bound on the shared B200 node and given a device of that node's pool only (never of
    robotics' b200-robotics); a second B200, asked as the implicit extended resource, is charged to
    the same resource and waits (quota 1)."""
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
    assert assignment["flavors"][B200_QUEUED] == "b200-shared" and assignment["resourceUsage"][B200_QUEUED] == "1"
    assert "nvidia.com/gpu" not in assignment["resourceUsage"]
    core = client.CoreV1Api(cp.api_client)
    selector = f"job-name={first['metadata']['name']}"
    pod = wait_or_explain(cp, lambda: next((p for p in core.list_namespaced_pod("vision", label_selector=selector).items
                                             if p.spec.node_name), None),
                          "the claim pod bound", lambda: explain(plane, "vision", first["metadata"]["name"]), 90)
    assert pod.spec.node_name == "gpu-b200-01"
    admin = client.CustomObjectsApi(cp.api_client)
    claims = admin.list_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaims")["items"]
    (claim,) = [c for c in claims if any(o.get("name") == pod.metadata.name for o in c["metadata"].get("ownerReferences", []))]
    allocated = cp.wait_for(lambda: (admin.get_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaims",
                                                                         claim["metadata"]["name"]).get("status") or {}).get("allocation"),
                            timeout=30, what="the pod's claim allocated")
    assert {d["pool"] for d in allocated["devices"]["results"]} == {"gpu-b200-01"}

    second = dra_job(resources={B200_QUEUED: 1})
    batch.create_namespaced_job("vision", second)
    condition = decided(plane, "vision", second["metadata"]["name"])
    assert condition["status"] == "False" and B200_QUEUED in condition["message"], condition


def test_kueue_refuses_a_b200_job_of_a_tenant_not_granted_the_class(plane):
    """speech (h100 only): its ClusterQueue covers no B200 resource, so Kueue reserves no quota."""
    batch, _ = developer(plane, "speech")
    body = dra_job(resources={B200_QUEUED: 1})
    assert body["metadata"]["labels"][QUEUE_LABEL] == "default"
    batch.create_namespaced_job("speech", body)
    condition = decided(plane, "speech", body["metadata"]["name"])
    assert condition["status"] == "False" and B200_QUEUED in condition["message"], condition
