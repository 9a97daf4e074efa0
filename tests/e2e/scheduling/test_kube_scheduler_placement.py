"""The stacks without Kueue on a real kube-scheduler: dev (`scheduler: none`) and staging
(`scheduler: kai`: pods that do not name `kai-scheduler` still go to kube-scheduler, and the
placement policy holds for them too; the real KAI Scheduler is in test_kai_scheduling.py).

For every tenant and every pool it may use, a GPU pod selecting the pool (tolerating the pool's
taint: its own on a dedicated pool, `nvidia.com/gpu=present` on a shared one) is admitted and bound
to that pool; a pod asking only for a resource that just the tenant's pools offer needs no selector
and is bound there too. CPU-only pods never land on the tainted shared GPU nodes (issue 22 step 4:
they used to fill a shared pool and strand its GPUs), and may not tolerate the taint.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.gpu_nodes import pool_taints
from components.manifests.meta import GPU_TAINT_KEY, GPU_TAINT_TOLERATION, GPU_TAINT_VALUE, pool_label, tenant_label
from components.manifests.placement_policy import pinning_resources, placement
from components.fleet import gpu_capacity as cap
from tools.control_plane import TAINT_PATCH_MANAGER
from tools.scheduling import cpu_node as scheduling_cpu_node, running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]


@pytest.fixture(scope="module", params=["dev", "staging"])
def plain_stack(request, e2e_summary):
    yield from running_scheduling_stack(request.param, e2e_summary)


# What a GPU pod adds for a shared pool (a Kueue flavor injects the same; ExtendedResourceToleration too).
SHARED_TOLERATION = GPU_TAINT_TOLERATION


def _pod(resource: str | None, selector: dict | None, toleration: dict | None, cpu: str = "100m") -> dict:
    amounts = {"cpu": cpu, "memory": "128Mi", **({resource: "1"} if resource else {})}
    spec: dict = {
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "registry.invalid/cuda:12",
                        "resources": {"limits": dict(amounts), "requests": dict(amounts)},
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
                           "effect": "NoSchedule"} if pool in allowed.dedicated_pools else SHARED_TOLERATION)
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
                assert _bind(plain_stack, loaded.name, _pod(resource, None, SHARED_TOLERATION)) in allowed.pools
                checked += 1
    if environment.name == "dev":   # dev: nvidia.com/gpu only on l4-shared, 1g.10gb only on a100-mig
        assert checked >= 3


CPU_NODE, CPU_NODE_CPU = "e2e-cpu-01", "2"


@pytest.fixture
def cpu_node(plain_stack):
    """One untainted node without GPUs (2 cpus); the GPU nodes keep only what the rendered patches
    gave them (shared MIG pools too: issue 22 item 4)."""
    with scheduling_cpu_node(plain_stack.plane.cp, CPU_NODE, CPU_NODE_CPU) as name:
        yield name


def _is_mig(platform, pool: str) -> bool:
    return platform.gpu_classes[platform.node_pools[pool].gpu_class].sharing == "mig"


def _unschedulable_reason(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    pod = core.read_namespaced_pod(name, namespace)
    assert not pod.spec.node_name, f"{namespace}/{name} was bound to {pod.spec.node_name}"
    condition = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
    return condition.message if condition is not None and condition.reason == "Unschedulable" else None


def test_cpu_pods_stay_off_the_shared_gpu_pools_and_gpu_pods_still_land_there(plain_stack, cpu_node, e2e_summary):
    environment = plain_stack.environment
    platform = environment.platform
    cp = plain_stack.plane.cp
    core = client.CoreV1Api(cp.api_client)
    shared = [name for name, pool in sorted(platform.node_pools.items())
              if pool.nodes and name not in environment.facts.pool_owners]
    assert shared and all(pool_taints(environment.facts, name)[0]["key"] == GPU_TAINT_KEY for name in shared)
    mig_pools = [name for name in shared if _is_mig(platform, name)]
    assert mig_pools, f"{environment.name} has no shared MIG pool with static nodes"
    for name in shared:   # on the cluster: put there by the rendered taint patch, MIG pools included
        for node in platform.node_pools[name].nodes:
            live = core.read_node(node)
            assert (GPU_TAINT_KEY, GPU_TAINT_VALUE, "NoSchedule") in {(t.key, t.value, t.effect) for t in live.spec.taints or []}
            owners = {m.manager for m in live.metadata.managed_fields
                      if m.operation == "Apply" and "f:taints" in (m.fields_v1 or {}).get("f:spec", {})}
            assert TAINT_PATCH_MANAGER in owners, (node, owners)

    def granted(t, pools):   # an active tenant holding GPU quota on one of `pools`
        allowed = placement(t.spec, environment.view(t.spec))
        held = cap.gpu_quota_by_resource(t.spec, platform)
        return t.spec.lifecycle == "active" and any(
            p in allowed.pools and any(held.get(r) for r in cap.node_gpu_resources(platform, platform.node_pools[p])) for p in pools)

    tenant = next(t for t in environment.tenants if granted(t, mig_pools))
    namespace = tenant.name
    # A small CPU pod goes to the CPU node, however many free cpus the GPU nodes have.
    used_before = cp.quota_used(namespace)   # released again after each CPU pod, for the GPU pod's _bind
    small = _pod(None, None, None)
    core.create_namespaced_pod(namespace, small)
    try:
        try:
            bound = cp.wait_for(lambda: core.read_namespaced_pod(small["metadata"]["name"], namespace).spec.node_name,
                                timeout=90, interval=0.5, what="the CPU pod bound")
        except TimeoutError:
            raise AssertionError(_unschedulable_reason(core, namespace, small["metadata"]["name"])) from None
        assert bound == cpu_node
    finally:
        cp.delete_pods(namespace, [small["metadata"]["name"]], quota_used_before=used_before)
    # A CPU pod too big for the CPU node stays Pending rather than take a shared GPU node (each has
    # 128 free cpus): before the taint, pods like it filled the shared pool and stranded its GPUs.
    big = _pod(None, None, None, cpu="3")
    core.create_namespaced_pod(namespace, big)
    try:
        reason = cp.wait_for(lambda: _unschedulable_reason(core, namespace, big["metadata"]["name"]),
                             timeout=90, interval=0.5, what="the scheduler's reason for the big CPU pod")
        # The scheduler counts, not names, the taints: every GPU node turned it away by a taint, the CPU node by size.
        gpu_nodes = [n for pool in platform.node_pools.values() for n in pool.nodes]
        assert f"1 Insufficient cpu, {len(gpu_nodes)} node(s) had untolerated taint(s)" in reason, reason
    finally:
        cp.delete_pods(namespace, [big["metadata"]["name"]], quota_used_before=used_before)
    # Nor does a CPU pod that selects a shared MIG pool's nodes: their taint, from the taint patch, turns
    # it away (kube-scheduler checks taints before the selector: every GPU node, MIG ones included, is
    # counted as tainted, the CPU node as not selected).
    mig = mig_pools[0]
    aimed = _pod(None, {pool_label(platform): mig}, None)
    core.create_namespaced_pod(namespace, aimed)
    try:
        reason = cp.wait_for(lambda: _unschedulable_reason(core, namespace, aimed["metadata"]["name"]),
                             timeout=90, interval=0.5, what="the scheduler's reason for the CPU pod on a MIG pool")
        assert f"{len(gpu_nodes)} node(s) had untolerated taint(s)" in reason, reason
    finally:
        cp.delete_pods(namespace, [aimed["metadata"]["name"]], quota_used_before=used_before)
    # It may not tolerate the taint to get there.
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, _pod(None, None, SHARED_TOLERATION, cpu="3"), dry_run="All")
    assert refused.value.status == 403 and "only pods that request GPUs may tolerate taint nvidia.com/gpu" in refused.value.body
    # The legitimate neighbour: the tenant's GPU pod (a MIG slice), tolerating the taint, is bound to its shared MIG pool.
    allowed = placement(tenant.spec, environment.view(tenant.spec))
    held = cap.gpu_quota_by_resource(tenant.spec, platform)
    pool = next(p for p in allowed.pools if p in mig_pools
                and any(held.get(r) for r in cap.node_gpu_resources(platform, platform.node_pools[p])))
    resource = next(r for r in cap.node_gpu_resources(platform, platform.node_pools[pool]) if held.get(r))
    assert _bind(plain_stack, namespace, _pod(resource, {pool_label(platform): pool}, SHARED_TOLERATION)) == pool
    e2e_summary.append(f"scheduling lane ({environment.name}): CPU pods kept off shared GPU pools {', '.join(shared)}; "
                       f"{namespace}'s GPU pod bound to {pool}")
