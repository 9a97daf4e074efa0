"""Queues, placement and quota together, on a real kube-scheduler and a real Kueue.

The example prod stack (`scheduler: kueue`) is applied as rendered. Jobs go to a tenant's
LocalQueue with no node selector or toleration of their own: Kueue picks a ResourceFlavor,
injects its node labels and tolerations, unsuspends the Job; the job controller creates the
pods; the tenant's placement policy and ResourceQuota admit them; kube-scheduler binds them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.placement_policy import placement
from components.model import capacity as cap
from tests.e2e.conftest import AppliedStack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = ("kueue.x-k8s.io", "v1beta2")

ENVIRONMENT, _ = AppliedStack.render("prod")


def _pools_offering(resource: str) -> set[str]:
    platform = ENVIRONMENT.platform
    return {name for name, pool in platform.node_pools.items()
            if cap.node_gpu_resources(platform, pool).get(resource, 0) > 0}


def _cases() -> list[tuple[str, str, str]]:
    """(tenant, GPU class, resource) for every class each tenant may use and resource it offers."""
    platform = ENVIRONMENT.platform
    cases = []
    for loaded in ENVIRONMENT.tenants:
        allowed = set(placement(loaded.spec, ENVIRONMENT).pools)
        for name in sorted({platform.node_pools[p].gpu_class for p in allowed}):
            offered = set()
            for pool in sorted(allowed):
                if platform.node_pools[pool].gpu_class == name:
                    offered |= set(cap.node_gpu_resources(platform, platform.node_pools[pool]))
            for resource in sorted(offered):
                if cap.gpu_quota_by_resource(loaded.spec, platform).get(resource, 0) > 0:
                    cases.append((loaded.name, name, resource))
    return cases


def _forbidden_classes() -> list[tuple[str, str]]:
    platform = ENVIRONMENT.platform
    out = []
    for loaded in ENVIRONMENT.tenants:
        allowed = {platform.node_pools[p].gpu_class for p in placement(loaded.spec, ENVIRONMENT).pools}
        out += [(loaded.name, c) for c in sorted(platform.gpu_classes) if c not in allowed]
    return out


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def job(resources: dict[str, int], *, parallelism: int = 1, node_selector: dict | None = None,
        queue: str | None = "default") -> dict[str, Any]:
    """A Job whose pods satisfy Pod Security `restricted` and carry no placement of their own."""
    values = {"cpu": "100m", "memory": "128Mi", **{r: str(n) for r, n in resources.items()}}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "main", "image": "registry.invalid/cuda:12",   # never pulled: no kubelet
            "resources": {"requests": dict(values), "limits": dict(values)},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }],
    }
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    meta: dict[str, Any] = {"name": f"e2e-{uuid.uuid4().hex[:8]}"}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                     "template": {"spec": pod_spec}}}


class Jobs:
    """Submit Jobs as the tenant's developers would; deleted (with pods and Workloads) after the test."""

    def __init__(self, stack) -> None:
        self.stack = stack
        self.cp = stack.plane.cp
        self.batch = client.BatchV1Api(self.cp.api_client)
        self.core = client.CoreV1Api(self.cp.api_client)
        self.created: list[tuple[str, str]] = []

    def submit(self, namespace: str, body: dict) -> str:
        self.batch.create_namespaced_job(namespace, body)
        self.created.append((namespace, body["metadata"]["name"]))
        return body["metadata"]["name"]

    def pods(self, namespace: str, name: str) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items

    def workload(self, namespace: str, name: str) -> dict | None:
        res = self.cp.dynamic.resources.get(api_version="/".join(KUEUE), kind="Workload")
        for wl in self.cp.dynamic.get(res, namespace=namespace).to_dict()["items"]:
            if any(o["kind"] == "Job" and o["name"] == name for o in wl["metadata"].get("ownerReferences", [])):
                return wl
        return None

    def condition(self, namespace: str, name: str, kind: str) -> dict | None:
        wl = self.workload(namespace, name)
        for c in (wl or {}).get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return c
        return None

    def wait_bound(self, namespace: str, name: str, count: int, timeout: float = 90) -> list[client.V1Pod]:
        def bound():
            pods = self.pods(namespace, name)
            return pods if len(pods) == count and all(p.spec.node_name for p in pods) else None

        try:
            return self.cp.wait_for(bound, timeout=timeout, interval=0.5, what=f"{count} bound pods of job {namespace}/{name}")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.explain(namespace, name)}") from None

    def wait_pending_in_queue(self, namespace: str, name: str, timeout: float = 60) -> dict:
        """Until Kueue has looked at the Workload and not reserved quota for it (the reason is in the message)."""
        def evaluated():
            c = self.condition(namespace, name, "QuotaReserved")
            return c if c and c["status"] == "False" and c.get("message") else None

        try:
            return self.cp.wait_for(evaluated, timeout=timeout, interval=0.5, what=f"Kueue to evaluate {namespace}/{name}")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.explain(namespace, name)}") from None

    def explain(self, namespace: str, name: str) -> str:
        """Events and workload status, to say why a job is not where the test expected it."""
        events = self.core.list_namespaced_event(namespace).items
        lines = [f"{e.involved_object.kind}/{e.involved_object.name}: {e.reason}: {e.message}"
                 for e in events if name in (e.involved_object.name or "")]
        wl = self.workload(namespace, name)
        lines.append(f"workload status: {(wl or {}).get('status')}")
        for pod in self.pods(namespace, name):
            lines.append(f"pod {pod.metadata.name}: node={pod.spec.node_name} conditions={pod.status.conditions}")
        return "\n".join(lines)

    def cleanup(self) -> None:
        for namespace, name in self.created:
            try:
                self.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for namespace, name in self.created:
            self.cp.wait_for(lambda n=namespace, j=name: not self.pods(n, j) and self.workload(n, j) is None,
                             timeout=60, interval=0.5, what=f"pods and Workload of {namespace}/{name} deleted")


@pytest.fixture
def jobs(kueue_stack):
    j = Jobs(kueue_stack)
    yield j
    j.cleanup()


def _pools_of(stack, pods: list[client.V1Pod]) -> set[str]:
    return {stack.node_pool[p.spec.node_name] for p in pods}


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------


def test_stack_applies_cleanly_with_kueue_webhooks(kueue_stack, e2e_summary):
    """Every rendered object is accepted, with Kueue's validating webhooks in the path."""
    rejected = [f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}: {r.reason} {r.body}"
                for o, r in kueue_stack.results if isinstance(r, ApiException)]
    assert not rejected, "\n".join(rejected)
    cqs = kueue_stack.of_kind("ClusterQueue")
    flavors = kueue_stack.of_kind("ResourceFlavor")
    e2e_summary.append(f"scheduling lane (prod): {len(cqs)} ClusterQueues, {len(flavors)} ResourceFlavors, "
                       f"{len(kueue_stack.node_pool)} ready nodes")


def test_cluster_queues_are_active(kueue_stack):
    """Kueue accepts every ClusterQueue: its flavors exist and its quotas are well-formed."""
    cp = kueue_stack.plane.cp
    res = cp.dynamic.resources.get(api_version="/".join(KUEUE), kind="ClusterQueue")

    def active(name: str) -> bool:
        conds = cp.dynamic.get(res, name=name).to_dict().get("status", {}).get("conditions", [])
        return any(c["type"] == "Active" and c["status"] == "True" for c in conds)

    for cq in kueue_stack.of_kind("ClusterQueue"):
        name = cq["metadata"]["name"]
        cp.wait_for(lambda n=name: active(n), timeout=60, what=f"ClusterQueue {name} Active")


@pytest.mark.parametrize("tenant,gpu_class,resource", _cases())
def test_job_without_selectors_lands_only_on_the_tenants_pools(kueue_stack, jobs, tenant, gpu_class, resource):
    allowed = set(placement(kueue_stack.tenant(tenant), ENVIRONMENT).pools)
    expected = {p for p in allowed if ENVIRONMENT.platform.node_pools[p].gpu_class == gpu_class} & _pools_offering(resource)
    name = jobs.submit(tenant, job({resource: 1}, parallelism=2))
    pods = jobs.wait_bound(tenant, name, 2)
    assert _pools_of(kueue_stack, pods) <= expected, jobs.explain(tenant, name)
    wl = jobs.workload(tenant, name)
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"]["conditions"])


@pytest.mark.parametrize("tenant,gpu_class", _forbidden_classes())
def test_a_class_the_tenant_may_not_use_never_gets_a_pod(kueue_stack, jobs, tenant, gpu_class):
    """Asking for the class by its label: no flavor of the tenant's queue matches, nothing is admitted."""
    platform = ENVIRONMENT.platform
    from components.manifests.gpu_nodes import gpu_class_label

    resource = cap.class_resource(platform.gpu_classes[gpu_class])
    name = jobs.submit(tenant, job({resource: 1}, node_selector={gpu_class_label(platform): gpu_class}))
    jobs.wait_pending_in_queue(tenant, name)
    assert jobs.pods(tenant, name) == []


def test_dedicated_pool_gets_no_other_tenants_pod_while_empty(kueue_stack, jobs):
    """Fill eval's whole-GPU quota; nothing spills onto the idle dedicated H100 pools."""
    platform = ENVIRONMENT.platform
    eval_quota = cap.gpu_quota_by_class(kueue_stack.tenant("eval"), platform)["a100"]
    per_pod = platform.node_pools["a100-shared"].gpus_per_node // 2
    name = jobs.submit("eval", job({cap.GPU: per_pod}, parallelism=eval_quota // per_pod))
    pods = jobs.wait_bound("eval", name, eval_quota // per_pod)
    assert _pools_of(kueue_stack, pods) == {"a100-shared"}
    extra = jobs.submit("eval", job({cap.GPU: 1}))
    jobs.wait_pending_in_queue("eval", extra)
    assert jobs.pods("eval", extra) == []
    dedicated = {n for n, pool in kueue_stack.node_pool.items()
                 if pool in {"h100-train", "h100-serve"}}
    on_dedicated = [p for p in jobs.core.list_pod_for_all_namespaces().items
                    if p.spec.node_name in dedicated and p.metadata.namespace == "eval"]
    assert on_dedicated == []


def test_over_quota_job_stays_pending_without_pods(kueue_stack, jobs):
    platform = ENVIRONMENT.platform
    quota = cap.gpu_quota_by_class(kueue_stack.tenant("llm-finetune"), platform)["h100"]
    per_pod = platform.node_pools["h100-train"].gpus_per_node
    name = jobs.submit("llm-finetune", job({cap.GPU: per_pod}, parallelism=quota // per_pod + 1))
    cond = jobs.wait_pending_in_queue("llm-finetune", name)
    assert "insufficient" in cond["message"].lower() or "quota" in cond["message"].lower(), cond
    assert jobs.pods("llm-finetune", name) == []


def test_mig_job_lands_on_mig_nodes_only(kueue_stack, jobs):
    mig_pools = _pools_offering("nvidia.com/mig-1g.10gb")
    assert mig_pools, "the prod example has no MIG pool offering 1g.10gb"
    name = jobs.submit("eval", job({"nvidia.com/mig-1g.10gb": 1}, parallelism=3))
    pods = jobs.wait_bound("eval", name, 3)
    assert _pools_of(kueue_stack, pods) <= mig_pools
