"""Time-sliced shares and a vCluster tenant's CPU pods on the dev stack (no queueing: the
ResourceQuota alone), pods run by kwok.

dev's L4 pool is time-sliced 4 ways: its node advertises 2 GPUs x 4 replicas of `nvidia.com/gpu`,
and a tenant's `gpu: {l4: 2}` is 2 of those shares. Two tenants run their full share at once on the
same two physical GPUs; each share is one unit of the tenant's quota, a share more is refused, and
the quota comes back when the Jobs finish.

llm-finetune runs a vCluster on dev, on shared pools only; its control plane and what it syncs to
the host namespace besides the tenant's GPU pods (CoreDNS) ask for CPU only, with the node selector
and tolerations our vCluster values give them. Every node of dev's inventory is a GPU node with the
GPU taint, which a CPU pod may not tolerate (the placement policy), so such pods run only on a CPU
node outside the inventory; they did not even there while the values pinned every synced pod to
the tenant's GPU class (`components.manifests.vcluster.node_selector`).
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.fleet import gpu_capacity as cap
from components.manifests.meta import GPU_TAINT_TOLERATION, pool_label
from components.manifests.vcluster import vcluster_release
from tests.e2e.runtime.runs import RuntimeJobs, timed_job
from tests.e2e.scheduling.jobs import event_lines, wait_or_explain
from tools.runtime import kwok_cpu_node, running_runtime_stack

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

POOL, TENANTS = "l4-shared", ("eval", "llm-finetune")


@pytest.fixture(scope="module")
def dev_stack(e2e_summary, runtime_totals):
    yield from running_runtime_stack("dev", e2e_summary, totals=runtime_totals)


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


def _toleration(text: str) -> dict:
    """One of vCluster's `enforceTolerations` (`key[=value][:Effect]`) as a pod toleration.

    >>> _toleration("gpu.acme.dev/tenant=inference:NoSchedule")
    {'key': 'gpu.acme.dev/tenant', 'operator': 'Equal', 'value': 'inference', 'effect': 'NoSchedule'}
    """
    rest, _, effect = text.partition(":")
    key, equal, value = rest.partition("=")
    out = {"key": key, "operator": "Equal" if equal else "Exists"}
    if equal:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out


def _cpu_pod(name: str, labels: dict, requests: dict, values: dict, synced: bool) -> dict:
    """A CPU-only pod of the vCluster as the host sees it: the chart's control-plane pod (`synced`
    False: our values set no `controlPlane.statefulSet.scheduling`, so no selector, no toleration) or
    one the syncer copies from inside (its CoreDNS): the node selector of `sync.fromHost.nodes` and
    the tolerations of `sync.toHost.pods.enforceTolerations`."""
    spec = {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": name.split("-")[0], "image": "registry.invalid/vcluster-e2e:1",
                            "resources": {"requests": dict(requests), "limits": dict(requests)},
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}
    if synced:
        selector = values["sync"]["fromHost"]["nodes"]["selector"]["labels"]
        tolerations = [_toleration(t) for t in values["sync"]["toHost"]["pods"]["enforceTolerations"]]
        if selector:
            spec["nodeSelector"] = dict(selector)
        if tolerations:
            spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def test_a_vcluster_tenants_cpu_pods_wait_for_a_cpu_node_and_run_there(dev_stack, e2e_summary):
    tenant = "llm-finetune"
    spec = dev_stack.tenant(tenant)
    assert spec.vcluster.enabled and not spec.gpu.dedicated_pools   # its pools are shared
    values = vcluster_release(spec, dev_stack.environment.view(spec))["values"]
    control_plane = values["controlPlane"]["statefulSet"]["resources"]["requests"]
    pods = [_cpu_pod("vcluster-0", {"app": "vcluster"}, control_plane, values, synced=False),
            _cpu_pod("coredns-e2e-x-kube-system-x-vcluster", {"k8s-app": "kube-dns"},
                     {"cpu": "100m", "memory": "70Mi"}, values, synced=True)]
    cp = dev_stack.plane.cp
    core = client.CoreV1Api(cp.api_client)
    names = [core.create_namespaced_pod(tenant, pod).metadata.name for pod in pods]
    try:
        for name in names:   # every inventory node is a GPU node with the GPU taint: none for a CPU pod
            def refused(n=name) -> str | None:
                lines = [line for line in event_lines(core, tenant, n) if "FailedScheduling" in line]
                return lines[-1] if lines else None

            why = wait_or_explain(cp, refused, f"kube-scheduler to find no node for {name}",
                                  lambda n=name: str(core.read_namespaced_pod(n, tenant).status), timeout=60)
            assert f"0/{len(dev_stack.node_pool)} nodes are available: {len(dev_stack.node_pool)} node(s) had untolerated taint" in why, why
        taints = {n: {t.key for t in core.read_node(n).spec.taints or []} for n in dev_stack.node_pool}
        assert all(GPU_TAINT_TOLERATION["key"] in keys for keys in taints.values()), taints
        with kwok_cpu_node(cp, "e2e-cpu-01") as node:   # the cluster's CPU nodes, which the inventory does not list
            for name in names:
                def running(n=name):
                    pod = core.read_namespaced_pod(n, tenant)
                    return pod if pod.status.phase == "Running" else None

                pod = wait_or_explain(cp, running, f"{name} Running on {node}",
                                      lambda n=name: "\n".join(event_lines(core, tenant, n)), 60)
                assert pod.spec.node_name == node
        e2e_summary.append(f"runtime lane (dev): {tenant}'s vCluster control plane and synced CoreDNS (CPU only, shared "
                           f"pools): no inventory node (all {len(taints)} carry the GPU taint), both Running on a CPU node")
    finally:
        cp.delete_pods(tenant, names)
