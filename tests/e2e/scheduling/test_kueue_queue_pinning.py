"""No GPU pod outside the tenant's queue, on a real Kueue (with its `pod` integration) and kube-scheduler.

The example prod stack as rendered. Kueue labels a bare pod with the LocalQueue `default` and gates
it; `gpu-tenancy-kueue-queue` refuses, as a tenant developer, a GPU pod Kueue did not queue (one
naming a Job as controller, which Kueue skips), while the bare pod is admitted by the tenant's
ClusterQueue and bound; only Kueue lifts the gate. On a copy where `research` has
`queue.admission: direct`, research's unlabelled pods start without a queue, but never beyond its
nominal quota, although its cohort neighbour's GPUs are idle.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.meta import GPU_TAINT_TOLERATION, KUEUE_ADMISSION_GATE, pool_label
from components.manifests.quota import TENANT_QUOTA
from tests.e2e.scheduling.borrowing import write_borrowing_project
from tests.e2e.scheduling.jobs import QUEUE_LABEL, Jobs, job, wait_or_explain
from tests.e2e.scheduling.kai import developer_of
from tools.applied_stack import AppliedStack
from tools.scheduling import SchedulingStack, cpu_node, running_scheduling_stack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

ENVIRONMENT, _ = AppliedStack.render("prod")


def gpu_pod(gpus: int, *, queue: str | None, pool: str | None = "a100-shared") -> dict[str, Any]:
    """A whole-GPU pod (Pod Security `restricted`) selecting `pool` (a bare pod is placed at creation,
    before Kueue picks a flavor, so the placement policy wants its selector as for any GPU pod)."""
    values = {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": str(gpus)}
    meta: dict[str, Any] = {"name": f"e2e-pin-{uuid.uuid4().hex[:8]}"}
    if queue is not None:
        meta["labels"] = {QUEUE_LABEL: queue}
    selector = {"nodeSelector": {pool_label(ENVIRONMENT.platform): pool}} if pool and gpus else {}
    # Unlabelled, a pod may be a direct tenant's, which no Kueue flavor gives the shared GPU pools'
    # taint toleration: it carries its own, as the placement policy allows GPU pods to.
    if gpus and queue is None:
        selector["tolerations"] = [dict(GPU_TAINT_TOLERATION)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        **selector,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "registry.invalid/cuda:12",   # never pulled: no kubelet
                        "resources": {"requests": dict(values), "limits": dict(values)},
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    }}


class Pods:
    """Pods created as a tenant's developer; deleted after the test."""

    def __init__(self, stack: SchedulingStack) -> None:
        self.stack, self.cp = stack, stack.plane.cp
        self.core = client.CoreV1Api(self.cp.api_client)
        self.created: list[tuple[str, str]] = []

    def member(self, tenant: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.cp.client_for(*developer_of(self.stack, tenant)))

    def create(self, tenant: str, body: dict) -> str:
        self.member(tenant).create_namespaced_pod(tenant, body)
        self.created.append((tenant, body["metadata"]["name"]))
        return body["metadata"]["name"]

    def refused(self, tenant: str, body: dict) -> str:
        with pytest.raises(ApiException) as refusal:
            self.create(tenant, body)
        assert refusal.value.status == 403, refusal.value.body
        return refusal.value.body

    def wait_bound(self, tenant: str, name: str) -> client.V1Pod:
        def bound():
            pod = self.core.read_namespaced_pod(name, tenant)
            return pod if pod.spec.node_name else None

        return wait_or_explain(self.cp, bound, f"pod {tenant}/{name} bound", lambda: self.explain(tenant, name), 90)

    def explain(self, tenant: str, name: str) -> str:
        pod = self.core.read_namespaced_pod(name, tenant)
        return f"pod {name}: gates={pod.spec.scheduling_gates} conditions={pod.status.conditions}"

    def cleanup(self) -> None:
        for namespace, name in self.created:
            try:
                self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for namespace, name in self.created:
            self.cp.wait_for(lambda n=namespace, p=name: not any(x.metadata.name == p for x in self.core.list_namespaced_pod(n).items),
                             timeout=60, interval=0.5, what=f"pod {namespace}/{name} gone")


@pytest.fixture
def pods(kueue_stack) -> Iterator[Pods]:
    p = Pods(kueue_stack)
    yield p
    p.cleanup()


def test_a_gpu_pod_that_escapes_kueue_is_refused_and_the_queued_one_is_admitted(kueue_stack, pods):
    """Kueue skips a pod that names a Job as its controller (any tenant may write that
    ownerReference): without the policy it would start outside the queue."""
    # Kueue checks that the Job exists: the developer's own Job, queued and suspended, will do.
    owner = job({"nvidia.com/gpu": 64})
    batch = client.BatchV1Api(pods.cp.client_for(*developer_of(kueue_stack, "eval")))
    made = batch.create_namespaced_job("eval", owner)
    try:
        # Kueue's pod webhook answers 404 for a Job its cache has not seen yet (seen under load): its
        # Workload for the Job says it has.
        pods.cp.wait_for(lambda: Jobs(kueue_stack).workload("eval", made.metadata.name),
                         what=f"Kueue's Workload of Job {made.metadata.name}")
        _escaping_pod_is_refused(pods, made)
    finally:
        client.BatchV1Api(pods.cp.api_client).delete_namespaced_job(made.metadata.name, "eval", propagation_policy="Background")
    # The legitimate neighbour: a bare pod, which Kueue labels with the LocalQueue `default` and gates.
    name = pods.create("eval", gpu_pod(1, queue=None))
    created = pods.core.read_namespaced_pod(name, "eval")
    assert created.metadata.labels.get(QUEUE_LABEL) == "default"
    pod = pods.wait_bound("eval", name)   # Kueue admitted its Workload and lifted the gate
    assert not pod.spec.scheduling_gates
    assert kueue_stack.node_pool[pod.spec.node_name] == "a100-shared"


def _escaping_pod_is_refused(pods: Pods, owner: client.V1Job) -> None:
    escaping = gpu_pod(1, queue=None)
    escaping["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner.metadata.name,
                                                "uid": owner.metadata.uid, "controller": True}]
    body = pods.refused("eval", escaping)
    assert "gpu-tenancy-kueue-queue" in body and "must go through the tenant's queue" in body
    escaping["metadata"]["labels"] = {QUEUE_LABEL: "default"}   # labelled, still not gated by Kueue
    assert "scheduling gate kueue.x-k8s.io/admission" in pods.refused("eval", escaping)


@pytest.fixture
def held_eval_queue(kueue_stack) -> Iterator[None]:
    """eval's ClusterQueue held (`stopPolicy: Hold`, as when suspended), so a new pod stays gated."""
    custom = client.CustomObjectsApi(kueue_stack.plane.cp.api_client)
    custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "eval", {"spec": {"stopPolicy": "Hold"}})
    yield
    custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "eval", {"spec": {"stopPolicy": None}})


def test_the_tenant_cannot_lift_kueues_gate(kueue_stack, pods, held_eval_queue):
    name = pods.create("eval", gpu_pod(1, queue="default"))
    pod = pods.core.read_namespaced_pod(name, "eval")
    assert KUEUE_ADMISSION_GATE in [g.name for g in pod.spec.scheduling_gates]
    with pytest.raises(ApiException) as refusal:
        pods.member("eval").patch_namespaced_pod(name, "eval", {"spec": {"schedulingGates": None}})
    assert refusal.value.status == 403 and "only Kueue lifts the scheduling gate" in refusal.value.body
    with pytest.raises(ApiException) as relabel:
        pods.member("eval").patch_namespaced_pod(name, "eval", {"metadata": {"labels": {QUEUE_LABEL: None}}})
    assert relabel.value.status == 403 and "cannot be added, changed or removed" in relabel.value.body
    assert pods.core.read_namespaced_pod(name, "eval").spec.node_name is None


def test_a_cpu_pod_needs_no_queue(kueue_stack, pods):
    body = gpu_pod(0, queue=None)
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                   "limits": {"cpu": "100m", "memory": "128Mi"}}
    with cpu_node(kueue_stack.plane.cp, "e2e-cpu-pinning"):   # every GPU node is tainted against CPU pods
        pods.wait_bound("eval", pods.create("eval", body))
        pods.cleanup()


# --- queue.admission: direct ----------------------------------------------------------------

@pytest.fixture(scope="module")
def direct_stack(e2e_summary: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulingStack]:
    """The borrowing copy (cohort `shared`: eval 12, research 8 A100s on a100-shared), research `admission: direct`."""
    root = write_borrowing_project(tmp_path_factory.mktemp("direct") / "project")
    research = root / "tenants" / "research.yaml"
    research.write_text(research.read_text() + "access:\n  developers:\n    groups: [research-eng]\nqueue:\n  admission: direct\n")
    yield from running_scheduling_stack("prod", e2e_summary, root, what="prod + cohort 'shared', research direct")


@pytest.fixture
def direct_pods(direct_stack) -> Iterator[Pods]:
    p = Pods(direct_stack)
    yield p
    p.cleanup()


def test_a_direct_tenant_bypasses_the_queue_but_never_its_nominal_quota(direct_stack, direct_pods):
    hard = direct_pods.core.read_namespaced_resource_quota(TENANT_QUOTA, "research").spec.hard
    assert hard["requests.nvidia.com/gpu"] == "8"   # nominal only: eval's 12 idle A100s are not its to take
    assert not direct_stack.of_kind("ClusterQueue", "research") and not direct_stack.of_kind("LocalQueue", "research")
    names = [direct_pods.create("research", gpu_pod(4, queue=None)) for _ in range(2)]   # 8, started directly
    for name in names:
        pod = direct_pods.wait_bound("research", name)
        assert QUEUE_LABEL not in (pod.metadata.labels or {}) and not pod.spec.scheduling_gates
    with pytest.raises(ApiException) as refusal:
        direct_pods.create("research", gpu_pod(1, queue=None))
    assert refusal.value.status == 403 and "exceeded quota" in refusal.value.body
    # the neighbour is still queued: its pods are labelled and gated by Kueue, then admitted
    name = direct_pods.create("eval", gpu_pod(1, queue=None))
    assert direct_pods.core.read_namespaced_pod(name, "eval").metadata.labels.get(QUEUE_LABEL) == "default"
    direct_pods.wait_bound("eval", name)
