"""Kueue v0.19.2 counting MIG partitions claimed through DRA, on the real kube-scheduler: tests/fixtures/dra-mig-kueue.

MIG through DRA (partitionable devices, as the NVIDIA DRA driver publishes them with DynamicMIG): a
DeviceClass per profile of the pool's layout, each a Kueue `deviceClassMappings` entry under its
implicit extended resource, and vision's ClusterQueue holding its `quota.mig` per profile on the
a100-mig flavor (1g.10gb: 7, 3g.40gb: 1). Kueue runs with the stack's mappings in its Configuration;
partitionable_slices.py stands in for the driver (per GPU a counter set and every partition it could
hold). No kubelet runs: a pod is bound and its claim allocated, which is the scheduler's whole part.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from tests.e2e.scheduling.jobs import QUEUE_LABEL, wait_or_explain
from tests.e2e.scheduling.partitionable_slices import publish_partitionable_slices
from tests.e2e.scheduling.test_kueue_dra import decided, developer, dra_job, explain, workload
from tools.scheduling import running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra-mig-kueue"
SMALL, LARGE = "a100-mig-1g.10gb.gpu.mig.dev", "a100-mig-3g.40gb.gpu.mig.dev"
QUEUED = "deviceclass.resource.kubernetes.io/"


@pytest.fixture(scope="module")
def plane(e2e_summary):
    for stack in running_scheduling_stack("dra", e2e_summary, root=FIXTURE, what="dra-mig + kueue"):
        publish_partitionable_slices(stack)
        yield stack


def _template(custom: client.CustomObjectsApi, device_class: str, count: int) -> str:
    name = f"mig-{uuid.uuid4().hex[:6]}"
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaimtemplates", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count}}]}}}})
    return name


def test_the_queues_count_each_profile_under_its_device_class(plane):
    queue = plane.find("ClusterQueue", "vision")
    quotas = {r["name"]: (f["name"], r["nominalQuota"]) for g in queue["spec"]["resourceGroups"] for f in g["flavors"]
              for r in f["resources"] if r["name"].startswith(QUEUED)}
    assert quotas == {QUEUED + SMALL: ("a100-mig", "7"), QUEUED + LARGE: ("a100-mig", "1")}


def test_kueue_admits_a_granted_partition_and_holds_the_one_past_the_profiles_quota(plane):
    """vision's 1g.10gb claim-template Job: admitted in flavor a100-mig, charged one 1g.10gb, bound on an
    a100-mig node with a 1g.10gb partition of that node's GPU allocated. Two 3g.40gb against a quota of
    one: Kueue reserves no quota (the ResourceQuota would see nothing yet: a template counts nothing)."""
    cp = plane.plane.cp
    batch, custom = developer(plane, "vision")
    first = dra_job(template=_template(custom, SMALL, 1))
    batch.create_namespaced_job("vision", first)
    condition = decided(plane, "vision", first["metadata"]["name"])
    assert condition["status"] == "True", condition
    assignment = workload(plane, "vision", first["metadata"]["name"])["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"][QUEUED + SMALL] == "a100-mig" and assignment["resourceUsage"][QUEUED + SMALL] == "1"
    core, admin = client.CoreV1Api(cp.api_client), client.CustomObjectsApi(cp.api_client)
    selector = f"job-name={first['metadata']['name']}"
    pod = wait_or_explain(cp, lambda: next((p for p in core.list_namespaced_pod("vision", label_selector=selector).items
                                             if p.spec.node_name), None),
                          "the partition's pod bound", lambda: explain(plane, "vision", first["metadata"]["name"]), 90)
    assert plane.node_pool[pod.spec.node_name] == "a100-mig"
    claims = admin.list_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaims")["items"]
    (claim,) = [c for c in claims if any(o.get("name") == pod.metadata.name for o in c["metadata"].get("ownerReferences", []))]
    allocated = cp.wait_for(lambda: (admin.get_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaims",
                                                                         claim["metadata"]["name"]).get("status") or {}).get("allocation"),
                            timeout=30, what="the pod's claim allocated")
    (device,) = allocated["devices"]["results"]
    assert device["pool"] == pod.spec.node_name and "-mig-1g10gb-" in device["device"], device   # the driver drops the dot

    over = dra_job(template=_template(custom, LARGE, 2))
    batch.create_namespaced_job("vision", over)
    condition = decided(plane, "vision", over["metadata"]["name"])
    assert condition["status"] == "False" and QUEUED + LARGE in condition["message"], condition


def test_kueue_refuses_a_partition_to_a_tenant_without_the_profile(plane):
    """robotics (h100 only), asking a 1g.10gb as the implicit extended resource: its ClusterQueue covers
    no MIG resource, so Kueue reserves no quota."""
    batch, _ = developer(plane, "robotics")
    body = dra_job(resources={QUEUED + SMALL: 1})
    assert body["metadata"]["labels"][QUEUE_LABEL] == "default"
    batch.create_namespaced_job("robotics", body)
    condition = decided(plane, "robotics", body["metadata"]["name"])
    assert condition["status"] == "False" and QUEUED + SMALL in condition["message"], condition
