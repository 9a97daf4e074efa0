"""KAI Scheduler counting DRA claims in a tenant's queue: the tests/fixtures/dra-kai stack (issue #38 item 2).

KAI charges a queue one GPU per device that a pod's ResourceClaims ask of a DeviceClass whose name
contains "gpu" (`exactly` requests only), beside the pod's `nvidia.com/gpu`. vision holds h100: 2
(device plugin, or claims of h100.gpu.dra.dev, one budget) and b200: 1 (DRA only), so its Queue
deserves 3 GPUs; its ResourceQuota admits up to 15 `nvidia.com/gpu` (what its pools can lend), so
KAI, not the API server, decides a pod past 3. ResourceSlices stand in for the NVIDIA DRA driver
(resource_slices.py); KAI's scheduler allocates the claim and its binder writes the allocation.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.meta import GPU_TAINT_TOLERATION, KAI_QUEUE_LABEL
from tests.e2e.scheduling.kai import KaiPods, kai_pod, on_pool, running_kai_stack
from tests.e2e.scheduling.resource_slices import publish_resource_slices
from tests.e2e.scheduling.test_kai_queue_quota import _scheduling_reasons

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra-kai"
B200 = "b200.gpu.dra.dev"
TENANT = "vision"


@pytest.fixture(scope="module")
def kai_dra_stack(e2e_summary):
    for stack in running_kai_stack("dra", e2e_summary, root=FIXTURE, what="dra-kai + KAI"):
        publish_resource_slices(stack)
        yield stack


@pytest.fixture
def pods(kai_dra_stack):
    created = KaiPods(kai_dra_stack)
    yield created
    created.cleanup()
    custom = client.CustomObjectsApi(kai_dra_stack.plane.cp.api_client)
    for claim in custom.list_namespaced_custom_object("resource.k8s.io", "v1", TENANT, "resourceclaims")["items"]:
        custom.delete_namespaced_custom_object("resource.k8s.io", "v1", TENANT, "resourceclaims", claim["metadata"]["name"])
    key = f"requests.deviceclass.resource.kubernetes.io/{B200}"
    cp = kai_dra_stack.plane.cp
    cp.wait_for(lambda: cp.quota_used(TENANT).get("tenant-quota", {}).get(key, "0") == "0", timeout=60,
                what="vision's B200 claims released from its quota")


def _claim(custom: client.CustomObjectsApi, device_class: str = B200, *, first_available: bool = False,
           queue: str | None = TENANT, dry_run: bool = False) -> str:
    """A standalone ResourceClaim of one device, created as `custom`'s user (admission in full, not stored with
    `dry_run`); labelled with `queue` unless None."""
    name = f"e2e-kai-{uuid.uuid4().hex[:8]}"
    choice = {"deviceClassName": device_class, "count": 1}
    request = {"name": "gpu", **({"firstAvailable": [{"name": "only", **choice}]} if first_available else {"exactly": choice})}
    meta = {"name": name, **({"labels": {KAI_QUEUE_LABEL: queue}} if queue else {})}
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", TENANT, "resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
        "spec": {"devices": {"requests": [request]}}}, **({"dry_run": "All"} if dry_run else {}))
    return name


def _claim_pod(stack, claim: str) -> dict:
    """A KAI pod in vision's queue on the B200 pool, getting its GPU through `claim` only."""
    body = kai_pod(0, queue=TENANT, **on_pool(stack, TENANT, "b200-train"))
    spec = body["spec"]
    spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    spec["tolerations"] = [*spec.get("tolerations", []), dict(GPU_TAINT_TOLERATION)]
    return body


def _member(stack) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(stack.plane.cp.client_for(f"dev@{TENANT}.example.com", [f"{TENANT}-devs"]))


def test_the_queue_deserves_the_dra_only_grant_too(kai_dra_stack):
    """The premise: vision's Queue is h100 2 + b200 1; its ResourceQuota holds 1 B200 device and 15 nvidia.com/gpu."""
    queue = kai_dra_stack.find("Queue", TENANT)
    hard = kai_dra_stack.find("ResourceQuota", "tenant-quota", TENANT)["spec"]["hard"]
    assert queue["spec"]["resources"]["gpu"]["quota"] == 3
    assert hard[f"requests.deviceclass.resource.kubernetes.io/{B200}"] == "1"
    assert int(hard["requests.nvidia.com/gpu"]) > 3


def test_kai_counts_a_claim_in_the_queue_and_holds_the_pod_it_leaves_no_room_for(kai_dra_stack, pods):
    """A B200 claim pod and 2 H100s fill vision's 3; one H100 more is held (NonPreemptibleOverQuota) until the
    claim pod goes. Were the claim not counted, the third H100 would fit and be bound at once."""
    stack, cp = kai_dra_stack, kai_dra_stack.plane.cp
    member = _member(stack)
    custom_admin = client.CustomObjectsApi(cp.api_client)
    claim = _claim(member)
    claim_pod = pods.submit(TENANT, _claim_pod(stack, claim))
    assert stack.node_pool[pods.wait_bound(TENANT, claim_pod).spec.node_name] == "b200-train"
    allocation = cp.wait_for(lambda: (custom_admin.get_namespaced_custom_object(
        "resource.k8s.io", "v1", TENANT, "resourceclaims", claim).get("status") or {}).get("allocation"),
        timeout=30, what="the B200 claim allocated")
    assert {d["pool"] for d in allocation["devices"]["results"]} == {"gpu-b200-01"}
    assert pods.bind_request(TENANT, claim_pod) is not None   # KAI placed it, not kube-scheduler

    h100 = on_pool(stack, TENANT, "h100-shared")
    two = pods.submit(TENANT, kai_pod(2, queue=TENANT, **h100))
    pods.wait_bound(TENANT, two)
    third = pods.submit(TENANT, kai_pod(1, queue=TENANT, **h100))

    def held():
        group = pods.pod_group(TENANT, third)
        return group if "NonPreemptibleOverQuota" in _scheduling_reasons(group) else None

    cp.wait_for(held, timeout=90, interval=0.5, what="KAI to hold vision's fourth GPU over its queue's 3")
    assert pods.core.read_namespaced_pod(third, TENANT).spec.node_name is None
    pods.core.delete_namespaced_pod(claim_pod, TENANT, grace_period_seconds=0)
    assert stack.node_pool[pods.wait_bound(TENANT, third).spec.node_name] == "h100-shared"


@pytest.mark.parametrize("claim, refusal", [
    ({"first_available": True}, "firstAvailable is refused on this KAI stack"),
    ({"queue": None}, f"needs the label {KAI_QUEUE_LABEL}: {TENANT}"),
    ({"queue": "robotics"}, f"needs the label {KAI_QUEUE_LABEL}: {TENANT}"),
], ids=["firstAvailable", "no queue label", "another tenant's queue"])
def test_a_claim_kai_would_not_count_or_schedule_is_refused_and_the_counted_one_admitted(kai_dra_stack, pods, claim, refusal):
    """As vision's developer: a `firstAvailable` claim (KAI counts `exactly` requests only) and a standalone
    claim without vision's queue label (KAI would leave its pod unschedulable) are refused by the tenant's
    claim policy; the same device asked with `exactly` and the label is admitted."""
    member = _member(kai_dra_stack)
    with pytest.raises(ApiException) as refused:
        _claim(member, **claim)
    assert refused.value.status in (403, 422) and refusal in refused.value.body, refused.value.body
    assert _claim(member, dry_run=True)
