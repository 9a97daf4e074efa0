"""MIG through DRA on the real kube-scheduler v1.37.2: partitions allocated within each GPU's shared counters.

The fixture stack tests/fixtures/dra-mig (gpuStack: dra; two A100-80GB nodes of one GPU each, layout
`mix` = 1 x 3g.40gb + 4 x 1g.10gb per GPU) runs on its own control plane with kube-scheduler.
ResourceSlices stand in for the NVIDIA DRA driver with DynamicMIG (partitionable_slices.py: per node a
counter-set slice and a slice of the full GPU and every partition it could hold, each consuming its
multiprocessors and memory slices). DRAPartitionableDevices is beta and on by default in v1.37
(measured: the API server keeps `sharedCounters` and `consumesCounters`, below). vision is granted
quota.mig {1g.10gb: 7, 3g.40gb: 1}; robotics only h100; speech nothing. No kubelet runs: a pod is
bound and its claim allocated (status.allocation), which is the scheduler's whole part.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.fleet import mig
from components.manifests.meta import GPU_TAINT_TOLERATION
from tests.e2e.scheduling.partitionable_slices import publish_partitionable_slices
from tools.scheduling import running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra-mig"
SMALL, LARGE = "a100-mig-1g.10gb.gpu.mig.dev", "a100-mig-3g.40gb.gpu.mig.dev"
GROUP, VERSION = "resource.k8s.io", "v1"


@pytest.fixture(scope="module")
def mig_plane(e2e_summary):
    for stack in running_scheduling_stack("dra", e2e_summary, root=FIXTURE, what="dra-mig"):
        publish_partitionable_slices(stack)
        yield stack


def developer(stack, tenant: str):
    api = stack.plane.cp.client_for(f"dev@{tenant}.example.com", [f"{tenant}-devs"])
    return client.CoreV1Api(api), client.CustomObjectsApi(api)


def claim(name: str, **counts: int) -> dict:
    """A ResourceClaim with one request per DeviceClass (`counts`: class -> devices)."""
    requests = [{"name": f"r{i}", "exactly": {"deviceClassName": device_class, "count": count}}
                for i, (device_class, count) in enumerate(counts.items())]
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": requests}}}


def claim_pod(claim_name: str) -> dict:
    container = {"name": "main", "image": "registry.invalid/cuda:12",
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                 "resources": {"limits": {"cpu": "100m", "memory": "128Mi"}, "claims": [{"name": "gpu"}]}}
    spec = {"automountServiceAccountToken": False, "containers": [container], "nodeSelector": {"gpu.mig.dev/pool": "a100-mig"},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}], "tolerations": [dict(GPU_TAINT_TOLERATION)],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"e2e-mig-{uuid.uuid4().hex[:8]}"}, "spec": spec}


def allocation(custom_admin, name: str) -> list[tuple[str, str]]:
    found = custom_admin.get_namespaced_custom_object(GROUP, VERSION, "vision", "resourceclaims", name)
    result = ((found.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
    return sorted((d["pool"], d["device"]) for d in result)


def submit(stack, name: str, **counts: int) -> str:
    """vision's claim and a pod using it; returns the pod's name."""
    core, custom = developer(stack, "vision")
    custom.create_namespaced_custom_object(GROUP, VERSION, "vision", "resourceclaims", claim(name, **counts))
    pod = claim_pod(name)
    core.create_namespaced_pod("vision", pod)
    return pod["metadata"]["name"]


def bound_node(stack, pod: str) -> str:
    core = client.CoreV1Api(stack.plane.cp.api_client)
    return stack.plane.cp.wait_for(lambda: core.read_namespaced_pod(pod, "vision").spec.node_name,
                                   timeout=90, interval=0.5, what=f"pod {pod} bound")


def unschedulable(stack, pod: str) -> str:
    """The scheduler's verdict on a pod it could not place (PodScheduled False, Unschedulable)."""
    core = client.CoreV1Api(stack.plane.cp.api_client)

    def verdict() -> str:
        conditions = core.read_namespaced_pod(pod, "vision").status.conditions or []
        return next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"
                     and c.reason == "Unschedulable"), "")
    return stack.plane.cp.wait_for(verdict, timeout=90, interval=0.5, what=f"pod {pod} found unschedulable")


def test_the_api_server_keeps_the_counters(mig_plane):
    custom_admin = client.CustomObjectsApi(mig_plane.plane.cp.api_client)
    slices = custom_admin.list_cluster_custom_object(GROUP, VERSION, "resourceslices")["items"]
    counter_sets = [s["name"] for sl in slices for s in sl["spec"].get("sharedCounters", [])]
    consuming = [d for sl in slices for d in sl["spec"].get("devices", []) if d.get("consumesCounters")]
    assert sorted(counter_sets) == ["gpu-0-counter-set", "gpu-0-counter-set"]   # one per node's GPU, in its pool
    # Per A100-80GB: the full GPU and 25 partitions (7 + 7 + 4 + 3 + 2 + 1 + 1 placements of its 7 profiles).
    assert len(consuming) == 2 * 26 and {d["attributes"]["profile"]["string"] for d in consuming if "profile" in d["attributes"]} == set(
        mig.geometry()["A100-80GB"].profiles)


def test_two_granted_slices_then_counters_refuse_what_quota_allows(mig_plane):
    """2 x 1g.10gb are allocated on one GPU; 1 x 3g.40gb + 5 x 1g.10gb (within quota and within the devices
    published per GPU: 7 and 2) needs 9 memory slices of 8 on any one GPU and stays unallocated; the layout
    itself (1 x 3g.40gb + 4 x 1g.10gb) is allocated on the other GPU once that claim is gone."""
    cp = mig_plane.plane.cp
    custom_admin = client.CustomObjectsApi(cp.api_client)
    first = bound_node(mig_plane, submit(mig_plane, "two-small", **{SMALL: 2}))
    two = cp.wait_for(lambda: allocation(custom_admin, "two-small"), timeout=30, what="two-small allocated")
    assert [pool for pool, _ in two] == [first, first] and len({device for _, device in two}) == 2
    assert all("-mig-1g10gb-" in device for _, device in two)

    too_big = submit(mig_plane, "beyond-counters", **{LARGE: 1, SMALL: 5})
    assert "cannot allocate all claims" in unschedulable(mig_plane, too_big)
    assert allocation(custom_admin, "beyond-counters") == []

    core, custom = developer(mig_plane, "vision")
    core.delete_namespaced_pod(too_big, "vision", grace_period_seconds=0)
    custom.delete_namespaced_custom_object(GROUP, VERSION, "vision", "resourceclaims", "beyond-counters")

    def layout_submitted() -> str:
        # The quota controller releases the deleted claim's devices a moment later: retry (bounded) until admitted.
        try:
            return submit(mig_plane, "layout", **{LARGE: 1, SMALL: 4})
        except ApiException as exc:
            if exc.status == 403 and "exceeded quota" in exc.body:
                return ""
            raise
    second = bound_node(mig_plane, cp.wait_for(layout_submitted, timeout=60, interval=1, what="the layout claim admitted by quota"))
    layout = cp.wait_for(lambda: allocation(custom_admin, "layout"), timeout=30, what="layout allocated")
    assert second != first and {pool for pool, _ in layout} == {second} and len(layout) == 5


def test_an_ungranted_tenant_is_refused(mig_plane):
    """robotics (granted h100 only) is refused by its claim policy; speech (no grant) has no claim verbs at all."""
    cp = mig_plane.plane.cp
    _, robotics = developer(mig_plane, "robotics")
    _, speech = developer(mig_plane, "speech")

    def refusal(custom, namespace: str) -> tuple[int, str]:
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim("mig", **{SMALL: 1}), dry_run="All")
        except ApiException as exc:
            return exc.status, exc.body
        return 0, ""

    def policy_denial() -> str:
        # A policy reaches the admission plugin a moment after it is created: retry (bounded) until it denies.
        status, body = refusal(robotics, "robotics")
        return body if status == 403 and "DeviceClasses" in body else ""

    assert "may name only the DeviceClasses it has a grant for: h100.gpu.mig.dev" in cp.wait_for(policy_denial, what="robotics' claim policy to deny")
    status, body = refusal(speech, "speech")
    assert status == 403 and "resourceclaims" in body and "forbidden" in body.lower()
