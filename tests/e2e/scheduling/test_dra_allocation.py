"""DRA claims on the real kube-scheduler v1.37.2: a granted tenant's claim is allocated only on its pools.

The fixture stack tests/fixtures/dra runs on its own control plane with kube-scheduler. ResourceSlices
stand in for the NVIDIA DRA driver: one per node, pool = node name, 8 devices whose `productName`
matches the node's GPU class (what the tool's DeviceClass selectors read). vision may use h100-shared
and b200-train; h100-robotics is dedicated to robotics. No kubelet runs: a pod is bound and its claim
allocated (status.allocation), which is the scheduler's whole part.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.meta import GPU_TAINT_TOLERATION
from tests.e2e.scheduling.resource_slices import publish_resource_slices
from tools.scheduling import running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "dra"
H100, B200 = "h100.gpu.dra.dev", "b200.gpu.dra.dev"


@pytest.fixture(scope="module")
def dra_plane(e2e_summary):
    for stack in running_scheduling_stack("dra", e2e_summary, root=FIXTURE, what="dra"):
        publish_resource_slices(stack)
        yield stack


def developer(stack, tenant: str):
    api = stack.plane.cp.client_for(f"dev@{tenant}.example.com", [f"{tenant}-devs"])
    return client.CoreV1Api(api), client.CustomObjectsApi(api)


def claim_pod(stack, pool: str, claim_name: str | None = None, resources: dict | None = None) -> dict:
    domain = stack.environment.platform.label_domain
    container = {"name": "main", "image": "registry.invalid/cuda:12",
                 "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                 "resources": {"limits": {"cpu": "100m", "memory": "128Mi", **(resources or {})}}}
    spec = {"automountServiceAccountToken": False, "containers": [container], "nodeSelector": {f"{domain}/pool": pool},
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}
    if claim_name:
        container["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    if claim_name or resources:
        # A GPU pod (claim or DRA extended resource) tolerates the shared GPU pools' taint itself:
        # no Kueue flavor adds it to a bare pod, and the placement policy allows it for GPU pods.
        spec["tolerations"] = [dict(GPU_TAINT_TOLERATION)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"e2e-dra-{uuid.uuid4().hex[:8]}"}, "spec": spec}


def allocated_pools(custom_admin, namespace: str, name: str) -> list[str]:
    claim = custom_admin.get_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", name)
    allocation = (claim.get("status") or {}).get("allocation")
    return sorted({d["pool"] for d in allocation["devices"]["results"]}) if allocation else []


def test_granted_claims_are_allocated_only_on_the_tenants_pools(dra_plane):
    cp = dra_plane.plane.cp
    core, custom = developer(dra_plane, "vision")
    custom_admin = client.CustomObjectsApi(cp.api_client)
    pool_nodes = {pool: [n for n, p in dra_plane.node_pool.items() if p == pool] for pool in set(dra_plane.node_pool.values())}
    results = {}
    for device_class, pool in ((H100, "h100-shared"), (B200, "b200-train")):
        name = f"e2e-{pool}"
        custom.create_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class, "count": 1}}]}}})
        pod = claim_pod(dra_plane, pool, claim_name=name)
        core.create_namespaced_pod("vision", pod)
        bound = cp.wait_for(lambda: core.read_namespaced_pod(pod["metadata"]["name"], "vision").spec.node_name,
                            timeout=90, interval=0.5, what=f"vision pod on {pool} bound")
        results[pool] = (bound, cp.wait_for(lambda: allocated_pools(custom_admin, "vision", name), timeout=30,
                                            what=f"claim {name} allocated"))
    assert results == {pool: (pool_nodes[pool][0], pool_nodes[pool]) for pool in ("h100-shared", "b200-train")}


def test_the_scheduler_made_claim_of_an_extended_resource_pod_lands_on_the_tenants_pool(dra_plane):
    """KEP-5004: no node advertises deviceclass.resource.kubernetes.io/<class>; the scheduler creates the claim itself."""
    cp = dra_plane.plane.cp
    core, _ = developer(dra_plane, "vision")
    custom_admin = client.CustomObjectsApi(cp.api_client)
    pod = claim_pod(dra_plane, "h100-shared", resources={f"deviceclass.resource.kubernetes.io/{H100}": "1"})
    core.create_namespaced_pod("vision", pod)
    node = cp.wait_for(lambda: core.read_namespaced_pod(pod["metadata"]["name"], "vision").spec.node_name,
                       timeout=90, interval=0.5, what="the extended-resource pod bound")
    claims = custom_admin.list_namespaced_custom_object("resource.k8s.io", "v1", "vision", "resourceclaims")["items"]
    made = [c for c in claims if any(o.get("name") == pod["metadata"]["name"] for o in c["metadata"].get("ownerReferences", []))]
    assert node == "gpu-h100-01" and len(made) == 1
    assert allocated_pools(custom_admin, "vision", made[0]["metadata"]["name"]) == ["gpu-h100-01"]


def test_another_tenants_dedicated_pool_is_out_of_reach(dra_plane):
    """vision cannot place a claim pod on robotics' pool, and robotics' devices stay unallocated."""
    cp = dra_plane.plane.cp
    core, _ = developer(dra_plane, "vision")

    def denial() -> str:
        # A policy reaches the admission plugin a moment after it is created: retry (bounded) until it denies.
        try:
            core.create_namespaced_pod("vision", claim_pod(dra_plane, "h100-robotics", claim_name="e2e-h100-shared"), dry_run="All")
        except ApiException as exc:
            return exc.body if exc.status == 403 else ""
        return ""

    assert "node pool 'h100-robotics' is not allowed for tenant vision" in cp.wait_for(denial, what="vision's placement policy to deny")
    custom_admin = client.CustomObjectsApi(cp.api_client)
    pools = set()
    for namespace in ("vision", "speech", "robotics"):
        for c in custom_admin.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"]:
            pools |= {d["pool"] for d in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])}
    assert pools and "gpu-h100-02" not in pools
