"""The stacks without Kueue on a real kube-scheduler: dev (`scheduler: none`) and staging
(`scheduler: kai`: pods that do not name `kai-scheduler` still go to kube-scheduler, and the
placement policy holds for them too; the real KAI Scheduler is in test_kai_scheduling.py).

For every tenant and every pool it may use, a GPU pod selecting the pool (tolerating its own
taint on a dedicated pool) is admitted and bound to that pool; a pod asking only for a resource
that just the tenant's pools offer needs no selector at all and is bound there too.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from components.manifests.meta import pool_label, tenant_label
from components.manifests.placement_policy import pinning_resources, placement
from components.fleet import gpu_capacity as cap
from tools.scheduling import running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]


@pytest.fixture(scope="module", params=["dev", "staging"])
def plain_stack(request, e2e_summary):
    yield from running_scheduling_stack(request.param, e2e_summary)


def _pod(resource: str, selector: dict | None, toleration: dict | None) -> dict:
    spec: dict = {
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "registry.invalid/cuda:12",
                        "resources": {"limits": {"cpu": "100m", "memory": "128Mi", resource: "1"},
                                      "requests": {"cpu": "100m", "memory": "128Mi", resource: "1"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }
    if selector:
        spec["nodeSelector"] = selector
    if toleration:
        spec["tolerations"] = [toleration]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"e2e-{uuid.uuid4().hex[:8]}"}, "spec": spec}


def _bind(stack, namespace: str, body: dict) -> str:
    """Create the pod, return the pool it is bound to, then delete it and wait until its quota is free.

    The quota controller releases a deleted pod's usage asynchronously; without the wait the next
    pod of a tenant whose GPU quota is 1 is refused for usage that is already gone.
    """
    cp = stack.plane.cp
    core = client.CoreV1Api(cp.api_client)
    used_before = cp.quota_used(namespace)
    core.create_namespaced_pod(namespace, body)
    name = body["metadata"]["name"]
    try:
        pod = cp.wait_for(lambda: (p := core.read_namespaced_pod(name, namespace)).spec.node_name and p,
                          timeout=90, interval=0.5, what=f"pod {namespace}/{name} bound")
        return stack.node_pool[pod.spec.node_name]
    finally:
        cp.delete_pods(namespace, [name], quota_used_before=used_before)


def test_every_tenants_pod_lands_on_the_pool_it_selects(plain_stack, e2e_summary):
    environment = plain_stack.environment
    platform = environment.platform
    bound = 0
    for loaded in environment.tenants:
        if loaded.spec.lifecycle != "active":
            continue
        allowed = placement(loaded.spec, environment.view(loaded.spec))
        for pool in allowed.pools:
            offered = cap.node_gpu_resources(platform, platform.node_pools[pool])
            held = cap.gpu_quota_by_resource(loaded.spec, platform)
            resource = next((r for r in offered if held.get(r)), None)
            if resource is None or not platform.node_pools[pool].nodes:
                continue
            toleration = ({"key": tenant_label(platform), "operator": "Equal", "value": loaded.name,
                           "effect": "NoSchedule"} if pool in allowed.dedicated_pools else None)
            assert _bind(plain_stack, loaded.name, _pod(resource, {pool_label(platform): pool}, toleration)) == pool
            bound += 1
    assert bound >= 2
    e2e_summary.append(f"scheduling lane ({environment.name}): {bound} tenant x pool pods bound by kube-scheduler")


def test_a_pod_pinned_by_its_request_needs_no_selector(plain_stack):
    environment = plain_stack.environment
    platform = environment.platform
    checked = 0
    for loaded in environment.tenants:
        view = environment.view(loaded.spec)
        allowed = placement(loaded.spec, view)
        held = cap.gpu_quota_by_resource(loaded.spec, platform)
        for resource in pinning_resources(allowed, view):
            if held.get(resource) and loaded.spec.lifecycle == "active":
                assert _bind(plain_stack, loaded.name, _pod(resource, None, None)) in allowed.pools
                checked += 1
    if environment.name == "dev":   # dev: nvidia.com/gpu only on l4-shared, 1g.10gb only on a100-mig
        assert checked >= 3
