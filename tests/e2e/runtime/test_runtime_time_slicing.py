"""Time-sliced shares and a vCluster tenant's CPU pods on the dev stack (no queueing: the
ResourceQuota alone), pods run by kwok.

dev's L4 pool is time-sliced 4 ways: its node advertises 2 GPUs x 4 replicas of `nvidia.com/gpu`,
and a tenant's `gpu: {l4: 2}` is 2 of those shares. Two tenants run their full share at once on the
same two physical GPUs; each share is one unit of the tenant's quota, a share more is refused, and
the quota comes back when the Jobs finish.

llm-finetune runs a vCluster on dev; what it syncs to the host namespace besides the tenant's GPU
pods (its control plane, CoreDNS) asks for CPU only. Every node of dev's inventory is a GPU node
with the GPU taint, which a CPU pod may not tolerate (the placement policy), so such a pod runs only
on a CPU node outside the inventory.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.fleet import gpu_capacity as cap
from components.manifests.meta import GPU_TAINT_TOLERATION, pool_label
from tests.e2e.runtime.runs import RuntimeJobs, timed_job
from tests.e2e.scheduling.jobs import event_lines, wait_or_explain
from tools.runtime import kwok_cpu_node, running_runtime_stack

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

POOL, TENANTS = "l4-shared", ("eval", "llm-finetune")


@pytest.fixture(scope="module")
def dev_stack(e2e_summary):
    yield from running_runtime_stack("dev", e2e_summary)


@pytest.fixture
def jobs(dev_stack):
    j = RuntimeJobs(dev_stack)
    yield j
    j.cleanup()


def _share_job(platform, count: int) -> dict:
    # No Kueue flavor adds placement on dev: the pods select the pool and tolerate its GPU taint.
    return timed_job({cap.GPU: 1}, 5, parallelism=count, queue=None,
                     node_selector={pool_label(platform): POOL}, tolerations=[dict(GPU_TAINT_TOLERATION)])


def test_time_sliced_shares_run_side_by_side_each_one_unit_of_quota(dev_stack, jobs, e2e_summary):
    platform = dev_stack.environment.platform
    pool, gpu_class = platform.node_pools[POOL], platform.gpu_classes[platform.node_pools[POOL].gpu_class]
    [node] = pool.nodes
    core = client.CoreV1Api(dev_stack.plane.cp.api_client)
    shares = pool.gpus_per_node * gpu_class.replication.replicas
    assert core.read_node(node).status.allocatable[cap.GPU] == str(shares) == "8"

    quotas = {t: cap.gpu_quota_by_resource(dev_stack.tenant(t), platform)[cap.GPU] for t in TENANTS}
    assert quotas == {"eval": 2, "llm-finetune": 2}
    names = {t: jobs.submit(t, _share_job(platform, quotas[t])) for t in TENANTS}
    running = [p for t in TENANTS for p in jobs.wait_pod_phase(t, names[t], "Running", quotas[t])]
    assert {p.spec.node_name for p in running} == {node}   # 4 shares of 2 physical L4s at once
    for tenant in TENANTS:
        jobs.wait_quota(tenant, cap.quota_key(cap.GPU), str(quotas[tenant]))

    extra = _share_job(platform, 1)["spec"]["template"]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("eval", {"apiVersion": "v1", "kind": "Pod",
                                            "metadata": {"name": "e2e-one-share-too-many"}, "spec": extra["spec"]})
    assert refused.value.status == 403 and "exceeded quota" in refused.value.body

    for tenant in TENANTS:
        jobs.wait_complete(tenant, names[tenant])
        jobs.wait_quota(tenant, cap.quota_key(cap.GPU), "0")
    e2e_summary.append(f"runtime lane (dev): {len(running)} time-sliced shares ran at once on {node} "
                       f"({pool.gpus_per_node} L4s x {gpu_class.replication.replicas}), each 1 unit of its tenant's quota")


def _coredns_pod() -> dict:
    """A pod shaped like the CoreDNS a vCluster syncs into its host namespace: CPU only, no placement."""
    values = {"cpu": "100m", "memory": "70Mi"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "coredns-e2e-x-kube-system-x-vcluster", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "coredns", "image": "registry.invalid/coredns:1.12",
                                     "resources": {"requests": dict(values), "limits": dict(values)},
                                     "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}


def test_a_vcluster_tenants_cpu_pods_find_no_inventory_node_and_run_on_a_cpu_node(dev_stack, e2e_summary):
    tenant = "llm-finetune"
    assert dev_stack.tenant(tenant).vcluster.enabled
    cp = dev_stack.plane.cp
    core = client.CoreV1Api(cp.api_client)
    name = core.create_namespaced_pod(tenant, _coredns_pod()).metadata.name
    try:
        def refused() -> str | None:
            lines = [line for line in event_lines(core, tenant, name) if "FailedScheduling" in line]
            return lines[-1] if lines else None

        why = wait_or_explain(cp, refused, f"kube-scheduler to find no node for {name}",
                              lambda: str(core.read_namespaced_pod(name, tenant).status), timeout=60)
        assert f"0/{len(dev_stack.node_pool)} nodes are available: {len(dev_stack.node_pool)} node(s) had untolerated taint" in why, why
        taints = {n: {t.key for t in core.read_node(n).spec.taints or []} for n in dev_stack.node_pool}
        assert all(GPU_TAINT_TOLERATION["key"] in keys for keys in taints.values()), taints   # the pools' GPU taint
        with kwok_cpu_node(cp, "e2e-cpu-01") as node:
            def running():
                pod = core.read_namespaced_pod(name, tenant)
                return pod if pod.status.phase == "Running" else None

            pod = wait_or_explain(cp, running, f"{name} Running on {node}", lambda: "\n".join(event_lines(core, tenant, name)), 60)
            assert pod.spec.node_name == node
        e2e_summary.append(f"runtime lane (dev): a vCluster's CoreDNS-shaped CPU pod in {tenant}: no inventory node "
                           f"(all {len(taints)} carry the GPU taint), Running once a CPU node exists")
    finally:
        cp.delete_pods(tenant, [name])
