"""GPU JobSets through the tenant's queue, on a real Kueue (its `jobset` integration), the real JobSet
controller and kube-scheduler.

The example prod stack as rendered. A developer submits a JobSet labelled with the LocalQueue
`default`: Kueue's webhook suspends it and makes one Workload for the whole JobSet; the tenant's
ClusterQueue admits it and Kueue unsuspends it (injecting its flavor's node labels and
tolerations); the JobSet controller, as its own ServiceAccount with upstream's RBAC, creates the
child Jobs, which `gpu-tenancy-kueue-queue` admits because they name a JobSet as controller and come
from whoever may update `jobsets/status`; the job controller creates the pods and kube-scheduler
binds them on the tenant's pools. What a member cannot do, as the member: a GPU JobSet Kueue
skipped (it names the member's queued Job as its controller, so Kueue neither labels nor suspends
it), a JobSet of another queue, GPUs added by update to a CPU JobSet outside the queue, a Job that
forges a JobSet's labels and controller reference, and starting a queued JobSet or its Jobs by hand.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.placement_policy import placement
from tests.e2e.scheduling.jobs import QUEUE_LABEL, Jobs, job, wait_or_explain
from tests.e2e.scheduling.kai import developer_of
from tools.applied_stack import AppliedStack

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

ENVIRONMENT, _ = AppliedStack.render("prod")
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
TENANT = "eval"


def jobset(gpus: int, *, replicas: int = 2, queue: str | None = "default") -> dict[str, Any]:
    """A JobSet of `replicas` one-pod Jobs, each asking for `gpus` whole GPUs (pods as `job()` makes them)."""
    meta: dict[str, Any] = {"name": f"e2e-js-{uuid.uuid4().hex[:8]}"}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    template = job({"nvidia.com/gpu": gpus}, queue=None)
    return {"apiVersion": "/".join(JOBSET[:2]), "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": template["spec"]}}]}}


def controlled_by(body: dict, owner: Any, api_version: str, kind: str) -> dict:
    body["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
                                            "uid": owner["metadata"]["uid"], "controller": True}]
    return body


class JobSets(Jobs):
    """JobSets created as a tenant's developer; deleted (with their Jobs, pods and Workload) after the test."""

    KIND = "JobSet"

    def __init__(self, stack) -> None:
        super().__init__(stack)
        self.custom = client.CustomObjectsApi(self.cp.api_client)

    def member(self, tenant: str) -> client.ApiClient:
        return self.cp.client_for(*developer_of(self.stack, tenant))

    def submit(self, namespace: str, body: dict) -> str:
        self.quota_used_before.setdefault(namespace, self.cp.quota_used(namespace))
        group, version, plural = JOBSET
        client.CustomObjectsApi(self.member(namespace)).create_namespaced_custom_object(group, version, namespace, plural, body)
        self.created.append((namespace, body["metadata"]["name"]))
        return body["metadata"]["name"]

    @staticmethod
    def refused(create: Any) -> str:
        """The body of the API server's 403 for `create()` (made as the member), from the queue policy."""
        with pytest.raises(ApiException) as refusal:
            create()
        assert refusal.value.status == 403, refusal.value.body
        assert "gpu-tenancy-kueue-queue" in refusal.value.body, refusal.value.body
        return refusal.value.body

    def get(self, namespace: str, name: str) -> dict:
        group, version, plural = JOBSET
        return self.custom.get_namespaced_custom_object(group, version, namespace, plural, name)

    def pods(self, namespace: str, name: str) -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items

    def child_jobs(self, namespace: str, name: str) -> list[client.V1Job]:
        return self.batch.list_namespaced_job(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items

    def delete(self, namespace: str, name: str) -> None:
        group, version, plural = JOBSET
        self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name, propagation_policy="Background")

    def explain(self, namespace: str, name: str) -> str:
        jobs = [f"job {j.metadata.name}: suspend={j.spec.suspend} status={j.status}" for j in self.child_jobs(namespace, name)]
        return "\n".join([super().explain(namespace, name), f"jobset status: {self.get(namespace, name).get('status')}", *jobs])


@pytest.fixture
def jobsets(kueue_stack) -> Iterator[JobSets]:
    j = JobSets(kueue_stack)
    yield j
    j.cleanup()


@pytest.fixture
def queued_job(kueue_stack) -> Iterator[client.V1Job]:
    """The member's own Job, queued by Kueue and never admitted (64 GPUs): a workload Kueue manages."""
    jobs = Jobs(kueue_stack)
    body = job({"nvidia.com/gpu": 64})
    made = client.BatchV1Api(jobs.cp.client_for(*developer_of(kueue_stack, TENANT))).create_namespaced_job(TENANT, body)
    jobs.created.append((TENANT, made.metadata.name))
    jobs.wait_pending_in_queue(TENANT, made.metadata.name)
    yield made
    jobs.cleanup()


def _eval_gpu_pools() -> set[str]:
    spec = next(t.spec for t in ENVIRONMENT.tenants if t.name == TENANT)
    return set(placement(spec, ENVIRONMENT.view(spec)).pools)


def test_the_queue_policy_type_checks_against_the_served_jobset_kind(kueue_stack):
    """With the JobSet CRD served, the API server type-checks the policy against JobSets too: no warning."""
    cp = kueue_stack.plane.cp
    admission = client.AdmissionregistrationV1Api(cp.api_client)

    def checked():
        policy = admission.read_validating_admission_policy("gpu-tenancy-kueue-queue")
        status = policy.status
        return status if status and status.observed_generation == policy.metadata.generation and status.type_checking else None

    status = cp.wait_for(checked, timeout=60, interval=0.5, what="gpu-tenancy-kueue-queue type-checked")
    assert not status.type_checking.expression_warnings, status.type_checking.expression_warnings


def test_a_gpu_jobset_is_admitted_as_one_workload_and_its_pods_bound(kueue_stack, jobsets):
    name = jobsets.submit(TENANT, jobset(1, replicas=2))
    pods = jobsets.wait_bound(TENANT, name, 2)
    assert {kueue_stack.node_pool[p.spec.node_name] for p in pods} <= _eval_gpu_pools(), jobsets.explain(TENANT, name)
    wl = jobsets.workload(TENANT, name)   # one Workload for the JobSet, two pods in its pod set
    assert wl is not None and [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("workers", 2)]
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"]["conditions"])
    children = jobsets.child_jobs(TENANT, name)
    assert len(children) == 2 and all(not j.spec.suspend for j in children)
    child_jobs = Jobs(kueue_stack)
    for child in children:   # made by the JobSet controller, counted in the JobSet's Workload only
        (owner,) = [o for o in child.metadata.owner_references if o.controller]
        assert (owner.kind, owner.name) == ("JobSet", name)
        assert child_jobs.workload(TENANT, child.metadata.name) is None


def test_an_unlabelled_gpu_jobset_is_queued_by_kueue(kueue_stack, jobsets):
    """Kueue's webhook names the LocalQueue `default` of a JobSet that names none, and suspends it."""
    name = jobsets.submit(TENANT, jobset(64, replicas=1, queue=None))
    made = jobsets.get(TENANT, name)
    assert made["metadata"]["labels"][QUEUE_LABEL] == "default" and made["spec"]["suspend"] is True
    assert "quota" in jobsets.wait_pending_in_queue(TENANT, name)["message"]
    assert not jobsets.pods(TENANT, name)


def test_a_gpu_jobset_outside_the_queue_is_refused(kueue_stack, jobsets, queued_job):
    """Wrapping a JobSet in the member's queued Job: Kueue skips a JobSet whose controller it
    manages (no queue label, not suspended), so without the policy its Jobs would start at once."""
    owner = client.ApiClient().sanitize_for_serialization(queued_job)
    group, version, plural = JOBSET
    member = client.CustomObjectsApi(jobsets.member(TENANT))

    def create(body: dict):
        return lambda: member.create_namespaced_custom_object(group, version, TENANT, plural, body)

    body = jobsets.refused(create(controlled_by(jobset(1), owner, "batch/v1", "Job")))
    assert "a JobSet that requests GPUs must go through the tenant's queue" in body and "suspended by Kueue" in body
    body = jobsets.refused(create(controlled_by(jobset(1, queue=None), owner, "batch/v1", "Job")))
    assert "a JobSet that requests GPUs must go through the tenant's queue: the label kueue.x-k8s.io/queue-name: default (got '')" in body
    body = jobsets.refused(create(jobset(1, queue="other")))
    assert "(got 'other')" in body
    # the legitimate neighbour: the same JobSet without GPUs is the member's to run
    cpu = controlled_by(jobset(0, queue=None), owner, "batch/v1", "Job")
    cpu["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}}
    jobsets.quota_used_before.setdefault(TENANT, jobsets.cp.quota_used(TENANT))
    member.create_namespaced_custom_object(group, version, TENANT, plural, cpu)
    jobsets.created.append((TENANT, cpu["metadata"]["name"]))


def test_a_forged_jobset_job_is_refused_and_a_queued_jobset_starts_only_by_kueue(kueue_stack, jobsets):
    """The member's own JobSet, queued and never admitted (64 GPUs): the JobSet controller made its
    Jobs, suspended. A Job that names it as controller and carries its labels is refused, labelled or
    not (Kueue would skip it), and neither the JobSet nor its Jobs start by the member's hand."""
    name = jobsets.submit(TENANT, jobset(64, replicas=1))
    jobsets.wait_pending_in_queue(TENANT, name)
    parent = jobsets.get(TENANT, name)
    (child,) = wait_or_explain(jobsets.cp, lambda: jobsets.child_jobs(TENANT, name) or None, f"the Job of JobSet {name}",
                               lambda: jobsets.explain(TENANT, name), 60)
    assert child.spec.suspend
    batch = client.BatchV1Api(jobsets.member(TENANT))
    for queue in (None, "default"):
        forged = controlled_by(job({"nvidia.com/gpu": 1}, queue=queue), parent, "jobset.x-k8s.io/v1alpha2", "JobSet")
        forged["metadata"].setdefault("labels", {}).update({key: value for key, value in child.metadata.labels.items()
                                                            if key.startswith("jobset.sigs.k8s.io/")})
        body = jobsets.refused(lambda f=forged: batch.create_namespaced_job(TENANT, f))
        assert "names a JobSet as its controller is created by the JobSet controller" in body
    body = jobsets.refused(lambda: batch.patch_namespaced_job(child.metadata.name, TENANT, {"spec": {"suspend": False}}))
    assert "changes only with its JobSet" in body
    body = jobsets.refused(lambda: batch.patch_namespaced_job(child.metadata.name, TENANT, {"spec": {"parallelism": 8}}))
    assert "changes only with its JobSet" in body
    batch.patch_namespaced_job(child.metadata.name, TENANT, {"metadata": {"labels": {"team": "eval-ml"}}})   # metadata is the member's
    group, version, plural = JOBSET
    member = client.CustomObjectsApi(jobsets.member(TENANT))
    body = jobsets.refused(lambda: member.patch_namespaced_custom_object(group, version, TENANT, plural, name,
                                                                                 {"spec": {"suspend": False}}))
    assert "a queued JobSet starts when Kueue admits it" in body
    assert jobsets.batch.read_namespaced_job(child.metadata.name, TENANT).spec.suspend
    assert not jobsets.pods(TENANT, name)


def test_a_cpu_jobset_outside_the_queue_cannot_gain_gpus(kueue_stack, jobsets):
    """The member's CPU JobSet labelled for another queue (no such LocalQueue: Kueue holds it, no
    queue of the tenant's counts it) cannot be given GPU requests by update: the queue policy's one
    rule over Jobs and JobSets refuses it (403), ahead of the JobSet webhook, which would refuse it
    as an immutable field (422), so the policy does not rely on that webhook being there; its
    metadata stays the member's."""
    cpu = jobset(0, replicas=1, queue="other")
    cpu["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}}
    name = jobsets.submit(TENANT, cpu)
    group, version, plural = JOBSET
    member = client.CustomObjectsApi(jobsets.member(TENANT))
    replicated = jobsets.get(TENANT, name)["spec"]["replicatedJobs"]
    replicated[0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}}
    body = jobsets.refused(lambda: member.patch_namespaced_custom_object(
        group, version, TENANT, plural, name, {"spec": {"replicatedJobs": replicated}}))
    assert "GPU requests cannot be added to a JobSet outside the tenant's queue (label kueue.x-k8s.io/queue-name: default, " \
           "got 'other')" in body
    member.patch_namespaced_custom_object(group, version, TENANT, plural, name, {"metadata": {"labels": {"team": "eval-ml"}}})
    assert not jobsets.pods(TENANT, name)
