"""GPU RayJobs and LeaderWorkerSets through the tenant's queue, on a real Kueue (its `rayjob`,
`raycluster`, `leaderworkerset` and `pod` integrations) and kube-scheduler.

No KubeRay operator or LWS controller runs (neither is built: the lane's cold build budget is
spent): the KubeRay operator is impersonated as its ServiceAccount with its own ClusterRole, the
StatefulSet controller as its ServiceAccount, each creating what it creates from the object Kueue
left. Real here: Kueue's webhooks (suspending a labelled RayJob, skipping the RayJob's RayCluster and
the RayCluster's pods, labelling and annotating an LWS's pod templates, gating their pods), its
Workload and admission of the RayJob, its unsuspending, and `gpu-tenancy-kueue-queue` on all of it.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from kubernetes import client

from tests.e2e.scheduling.jobs import Jobs
from tests.e2e.test_kueue_ray_lws import (LWS_NS, QUEUE, RAY_NS, actors, admitted, bind_kuberay_operator, call, lws, path,
                                          raycluster, rayjob, refused)

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]


class RayJobs(Jobs):
    KIND = "RayJob"


@pytest.fixture
def ray(kueue_stack):
    cp = kueue_stack.plane.cp
    bind_kuberay_operator(cp)
    made: list[tuple[str, str, str]] = []
    yield actors(cp), made
    for resource, namespace, name in reversed(made):
        call(cp.api_client, "DELETE", path(resource, namespace, name), dry_run=False)


def test_a_labelled_gpu_rayjob_is_queued_admitted_and_its_operator_made_children_pass(kueue_stack, ray):
    """The neighbour: Kueue's webhook suspends the member's RayJob, Kueue admits its Workload and
    unsuspends it; the operator's RayCluster (the RayJob's labels, its controller the RayJob) and
    GPU worker pod (its controller the RayCluster, ungated: Kueue skips it) are admitted."""
    (admin, member, _, operator, _), made = ray
    cp = kueue_stack.plane.cp
    body = rayjob(kueue_stack, suspend=None)
    name = body["metadata"]["name"]
    admitted(call(member, "POST", path("rayjobs", RAY_NS), body, dry_run=False))
    made.append(("rayjobs", RAY_NS, name))
    custom = client.CustomObjectsApi(admin)
    jobs = RayJobs(kueue_stack)

    def started():
        job = custom.get_namespaced_custom_object("ray.io", "v1", RAY_NS, "rayjobs", name)
        return job if not job["spec"].get("suspend") else None   # Kueue clears it

    try:
        job = cp.wait_for(started, timeout=90, interval=0.5, what=f"Kueue to admit and unsuspend RayJob {name}")
    except TimeoutError:
        log = [line for line in (cp.log_dir / "kueue.log").read_text().splitlines() if "ray" in line.lower()][-15:]
        raise AssertionError("\n".join([str(jobs.workload(RAY_NS, name)),
                                         str(custom.get_namespaced_custom_object("ray.io", "v1", RAY_NS, "rayjobs", name)), *log]))
    wl = jobs.workload(RAY_NS, name)
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"]["conditions"]), wl
    assert {ps["name"] for ps in wl["spec"]["podSets"]} >= {"head", "gpu"}, wl["spec"]["podSets"]
    # The operator's RayCluster from the admitted spec (Kueue merged its flavor into the templates).
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": f"{name}-raycluster", "labels": dict(job["metadata"]["labels"]),
                            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": name,
                                                 "uid": job["metadata"]["uid"], "controller": True}]},
               "spec": copy.deepcopy(job["spec"]["rayClusterSpec"])}
    admitted(call(operator, "POST", path("rayclusters", RAY_NS), cluster, dry_run=False))
    made.append(("rayclusters", RAY_NS, cluster["metadata"]["name"]))
    created = custom.get_namespaced_custom_object("ray.io", "v1", RAY_NS, "rayclusters", cluster["metadata"]["name"])
    assert not created["spec"].get("suspend"), "Kueue skips a RayCluster of a queued RayJob"
    worker = copy.deepcopy(created["spec"]["workerGroupSpecs"][0]["template"])
    worker["metadata"] = {"name": f"{name}-worker-{uuid.uuid4().hex[:4]}", "labels": worker.get("metadata", {}).get("labels", {}),
                          "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster["metadata"]["name"],
                                               "uid": created["metadata"]["uid"], "controller": True}]}
    pod = {"apiVersion": "v1", "kind": "Pod", **worker}
    status, message = call(operator, "POST", path("pods", RAY_NS), pod)
    assert status == 201, message
    # The member's forgery of the same pod, and of another RayCluster of the RayJob, are refused.
    refused(call(member, "POST", path("pods", RAY_NS), pod), "names a RayCluster as its controller")
    forged = copy.deepcopy(cluster)
    forged["metadata"]["name"] += "-2"
    refused(call(member, "POST", path("rayclusters", RAY_NS), forged), "names a RayJob as its controller")


def test_a_members_bypasses_with_kueue_running(kueue_stack, ray):
    """Kueue's webhook names the LocalQueue `default` on an unlabelled RayCluster in a tenant namespace
    and suspends it (so the member's unlabelled, unsuspended GPU RayCluster is queued, not refused);
    a labelled one another queue's, and starting a queued one by hand, are refused."""
    (admin, member, _, _, _), made = ray
    status, message = call(member, "POST", path("rayclusters", RAY_NS), raycluster(kueue_stack, queue=None, suspend=False))
    assert status == 201 and '"suspend":true' in message and f'"{QUEUE}":"default"' in message, message
    refused(call(member, "POST", path("rayclusters", RAY_NS), raycluster(kueue_stack, queue="other", suspend=False)),
            "must go through the tenant's queue")
    body = raycluster(kueue_stack, gpus=64, suspend=None)   # more than the queue holds: stays suspended
    admitted(call(member, "POST", path("rayclusters", RAY_NS), body, dry_run=False))
    made.append(("rayclusters", RAY_NS, body["metadata"]["name"]))
    stored = client.CustomObjectsApi(admin).get_namespaced_custom_object("ray.io", "v1", RAY_NS, "rayclusters", body["metadata"]["name"])
    assert stored["spec"]["suspend"] is True, "Kueue's webhook suspends a labelled RayCluster"
    refused(call(member, "PATCH", path("rayclusters", RAY_NS, body["metadata"]["name"]), {"spec": {"suspend": False}}),
            "a queued RayCluster starts when Kueue admits it")


def test_a_labelled_gpu_leaderworkersets_pods_are_labelled_and_gated_by_kueue(kueue_stack, ray):
    """Kueue's LWS webhook puts the queue label and its pod-group annotations on the templates; a pod
    the StatefulSet controller makes from the worker template is gated by Kueue's pod webhook and
    admitted; without the annotation Kueue would not gate it, and the policy refuses it."""
    (admin, _, member, _, statefulsets), made = ray
    body = lws(kueue_stack)
    admitted(call(member, "POST", path("leaderworkersets", LWS_NS), body, dry_run=False))
    made.append(("leaderworkersets", LWS_NS, body["metadata"]["name"]))
    stored = client.CustomObjectsApi(admin).get_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", LWS_NS, "leaderworkersets", body["metadata"]["name"])
    template = stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert template["metadata"]["labels"][QUEUE] == "default", template["metadata"]
    assert "kueue.x-k8s.io/pod-suspending-parent" in template["metadata"]["annotations"], template["metadata"]
    # The LWS controller's worker StatefulSet (Kueue's pod webhook walks a pod's owners up to the LWS).
    sts_name = f"{body['metadata']['name']}-0"
    selector = {"e2e-lws": sts_name}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": sts_name, "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                                               "name": body["metadata"]["name"], "uid": stored["metadata"]["uid"],
                                                               "controller": True}]},
           "spec": {"serviceName": sts_name, "replicas": 0, "selector": {"matchLabels": selector},
                    "template": {"metadata": {**template["metadata"], "labels": {**template["metadata"]["labels"], **selector}},
                                 "spec": template["spec"]}}}
    status, message = call(admin, "POST", f"/apis/apps/v1/namespaces/{LWS_NS}/statefulsets", sts, dry_run=False)
    assert status == 201, message
    made.append(("statefulsets", LWS_NS, sts_name))
    sts_uid = client.AppsV1Api(admin).read_namespaced_stateful_set(sts_name, LWS_NS).metadata.uid
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{sts_name}-1", "labels": {**template["metadata"]["labels"], **selector},
                        "annotations": template["metadata"]["annotations"],
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts_name,
                                             "uid": sts_uid, "controller": True}]},
           "spec": copy.deepcopy(template["spec"])}
    status, message = call(statefulsets, "POST", path("pods", LWS_NS), pod)
    assert status == 201, message
    assert "kueue.x-k8s.io/admission" in message, "Kueue gates the pod of an LWS"
    ungated = copy.deepcopy(pod)
    del ungated["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"]
    ungated["metadata"]["labels"].pop(QUEUE)
    refused(call(statefulsets, "POST", path("pods", LWS_NS), ungated), "a pod that requests GPUs must go through the tenant's queue")
