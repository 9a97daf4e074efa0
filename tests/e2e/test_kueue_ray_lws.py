"""RayJobs, RayClusters and LeaderWorkerSets through the tenant's queue, on a real kube-apiserver.

The CRDs are KubeRay's and LWS's own, from the module sources Kueue v0.19.2's go.mod requires
(`github.com/ray-project/kuberay/ray-operator` v1.6.2, `sigs.k8s.io/lws` v0.9.0) in the shared Go
module cache. No KubeRay operator, LWS controller or Kueue runs in this lane: the KubeRay operator is
impersonated as its ServiceAccount bound to its real ClusterRole (the module's
`config/rbac/role.yaml`), the StatefulSet controller as its ServiceAccount (as
test_vcluster_guard.py does), and objects are as Kueue's webhooks would leave them (a labelled
RayJob/RayCluster suspended, a labelled LWS's pods gated). What is proven is the prod stack's
`gpu-tenancy-kueue-queue` policy (its CEL type-checked against these CRDs by the real API server)
refusing a hostile llm-finetune (Ray) or inference (LWS) developer, and admitting the operator.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.e2e.test_tenancy_admission import on_own_pool, pod
from tests.e2e.test_tenancy_isolation import GPU, call, members
from tests.e2e.test_vcluster_guard import STATEFULSET_CONTROLLER
from tools.scheduling import integration_crd_paths, required_module_dir

pytestmark = pytest.mark.e2e

KUBERAY_ROLE = Path("config/rbac/role.yaml")   # in KubeRay's module source
OPERATOR_NS = "kuberay-system"
OPERATOR = (f"system:serviceaccount:{OPERATOR_NS}:kuberay-operator", ["system:serviceaccounts", f"system:serviceaccounts:{OPERATOR_NS}"])
RAY_NS, LWS_NS = "llm-finetune", "inference"
POLICY = "ValidatingAdmissionPolicy 'gpu-tenancy-kueue-queue'"
QUEUE = "kueue.x-k8s.io/queue-name"


def path(resource: str, namespace: str, name: str = "") -> str:
    group = {"rayclusters": "ray.io/v1", "rayjobs": "ray.io/v1", "leaderworkersets": "leaderworkerset.x-k8s.io/v1",
             "statefulsets": "apps/v1"}.get(resource)
    base = f"/apis/{group}/namespaces/{namespace}/{resource}" if group else f"/api/v1/namespaces/{namespace}/{resource}"
    return f"{base}/{name}" if name else base


def template(stack, gpus: int, tenant: str = RAY_NS) -> dict:
    """A pod template as a member writes it: the pod of test_tenancy_admission, no queue label or gate
    (Kueue puts them on the pods it gates, not on templates), on the tenant's own pool if it asks for GPUs."""
    body = pod(limits={GPU: str(gpus)}, **on_own_pool(stack, tenant)) if gpus else pod()
    body["metadata"].pop("labels", None)
    body["spec"].pop("schedulingGates", None)
    return {"metadata": {}, "spec": body["spec"]}


def cluster_spec(stack, gpus: int) -> dict:
    return {"headGroupSpec": {"rayStartParams": {}, "template": template(stack, 0)},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {},
                                  "template": template(stack, gpus)}]}


def labelled(body: dict, queue: str | None, suspend: bool | None, owner: tuple[str, str, str] | None = None) -> dict:
    if queue:
        body["metadata"]["labels"] = {QUEUE: queue}
    if suspend is not None:
        body["spec"]["suspend"] = suspend
    if owner:
        kind, name, uid = owner
        body["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": kind, "name": name, "uid": uid, "controller": True}]
    return body


def raycluster(stack, gpus: int = 1, queue: str | None = "default", suspend: bool | None = True, owner=None) -> dict:
    return labelled({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": f"e2e-rc-{uuid.uuid4().hex[:6]}"},
                     "spec": cluster_spec(stack, gpus)}, queue, suspend, owner)


def rayjob(stack, gpus: int = 1, queue: str | None = "default", suspend: bool | None = True) -> dict:
    return labelled({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": f"e2e-rj-{uuid.uuid4().hex[:6]}"},
                     "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                              "rayClusterSpec": cluster_spec(stack, gpus)}}, queue, suspend)


def lws(stack, gpus: int = 1, queue: str | None = "default") -> dict:
    worker = template(stack, gpus, LWS_NS)
    return labelled({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": f"e2e-lws-{uuid.uuid4().hex[:6]}"},
                     "spec": {"replicas": 1, "rolloutStrategy": {"type": "RollingUpdate"}, "startupPolicy": "LeaderCreated",
                              "leaderWorkerTemplate": {"size": 2, "workerTemplate": worker}}}, queue, None)


def gpu_pod(stack, tenant: str, owner: tuple[str, str, str, str], queue: str | None = None, gated: bool = False) -> dict:
    """A GPU pod on the tenant's pool as its controller (apiVersion, kind, name, uid) makes it."""
    body = pod(limits={GPU: "1"}, **on_own_pool(stack, tenant))
    if not queue:
        body["metadata"].pop("labels", None)
    if not gated:
        body["spec"].pop("schedulingGates", None)
    api_version, kind, name, uid = owner
    body["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}]
    return body


def refused(status_message: tuple[int, str], *expected: str) -> None:
    status, message = status_message
    assert status == 403 and POLICY in message, message
    for text in expected:
        assert text in message, message


def admitted(status_message: tuple[int, str]) -> None:
    status, message = status_message
    assert status in (200, 201), message


def bind_kuberay_operator(apiserver) -> None:
    """The KubeRay operator's own ClusterRole (from its module) bound to its ServiceAccount, as upstream's kustomize does."""
    role = yaml.safe_load((required_module_dir("github.com/ray-project/kuberay/ray-operator") / KUBERAY_ROLE).read_text())
    apiserver.apply(role, field_manager="e2e-kuberay")
    apiserver.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "kuberay-operator"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
                     "subjects": [{"kind": "ServiceAccount", "name": "kuberay-operator", "namespace": OPERATOR_NS}]},
                    field_manager="e2e-kuberay")


def actors(apiserver) -> tuple:
    """Clients of (admin, Ray developer, LWS developer, KubeRay operator, StatefulSet controller)."""
    ray_dev = members(RAY_NS, RAY_NS)["developer"]
    lws_dev = members(LWS_NS, LWS_NS)["developer"]
    return (apiserver.api_client, apiserver.client_for(ray_dev.user, ray_dev.groups), apiserver.client_for(lws_dev.user, lws_dev.groups),
            apiserver.client_for(*OPERATOR), apiserver.client_for(*STATEFULSET_CONTROLLER))


@pytest.fixture(scope="module")
def ray(apiserver, prod_stack):
    """The CRDs, the KubeRay operator's ClusterRole bound to its ServiceAccount, and the `actors`."""
    paths = integration_crd_paths()
    missing = [str(p) for p in paths if not p.is_file()]
    assert not missing, f"the module zips lack {missing} (tools/build.sh fills the Go module cache)"
    ext = client.ApiextensionsV1Api(apiserver.api_client)
    for crd_path in paths:
        crd = yaml.safe_load(crd_path.read_text())
        apiserver.apply(crd, field_manager="e2e-crd-install")
        apiserver.wait_for(lambda n=crd["metadata"]["name"]: any(
            c.type == "Established" and c.status == "True" for c in (ext.read_custom_resource_definition(n).status.conditions or [])),
            what=f"CRD {crd['metadata']['name']} Established")
    bind_kuberay_operator(apiserver)
    clients = actors(apiserver)
    admin, member = clients[0], clients[1]
    # The members may work with the new kinds (RBAC of their bundles: ray, leaderworkersets) once they are served.
    for resource, namespace, api in (("rayclusters", RAY_NS, member), ("rayjobs", RAY_NS, member), ("leaderworkersets", LWS_NS, clients[2])):
        apiserver.wait_for(lambda: call(api, "LIST", path(resource, namespace))[0] == 200, timeout=30, what=f"{resource} served")
    yield clients
    for resource in ("rayclusters", "rayjobs"):
        call(admin, "DELETE", path(resource, RAY_NS) + "?labelSelector=e2e%3Dray-lws", dry_run=False)


def test_the_policy_type_checks_against_the_ray_and_lws_crds(apiserver, ray):
    """The controller manager type-checks each expression against every kind the policy matches, the CRDs' schemas included."""
    admission = client.AdmissionregistrationV1Api(ray[0])
    policy = apiserver.wait_for(lambda: (p := admission.read_validating_admission_policy("gpu-tenancy-kueue-queue")).status
                                and p.status.observed_generation == p.metadata.generation and p, what="the policy's type check")
    assert not (policy.status.type_checking and policy.status.type_checking.expression_warnings), policy.status.type_checking


@pytest.mark.parametrize("resource", ["rayclusters", "rayjobs"])
def test_a_gpu_ray_workload_goes_through_the_queue(prod_stack, ray, resource):
    """Unlabelled, or labelled but not suspended (Kueue's webhook suspends what it queues): refused.
    The neighbour, labelled and suspended as Kueue leaves it, and a CPU one outside the queue: admitted."""
    _, member, _, _, _ = ray
    build = {"rayclusters": raycluster, "rayjobs": rayjob}[resource]
    kind = {"rayclusters": "RayCluster", "rayjobs": "RayJob"}[resource]
    refused(call(member, "POST", path(resource, RAY_NS), build(prod_stack, queue=None)),
            f"a {kind} that requests GPUs must go through the tenant's queue")
    refused(call(member, "POST", path(resource, RAY_NS), build(prod_stack, suspend=False)), "suspended by Kueue")
    admitted(call(member, "POST", path(resource, RAY_NS), build(prod_stack)))
    admitted(call(member, "POST", path(resource, RAY_NS), build(prod_stack, gpus=0, queue=None, suspend=False)))


@pytest.mark.parametrize("resource", ["rayclusters", "rayjobs"])
def test_a_member_can_neither_unsuspend_a_queued_ray_workload_nor_add_gpus_outside_the_queue(prod_stack, ray, resource):
    admin, member, _, _, _ = ray
    build = {"rayclusters": raycluster, "rayjobs": rayjob}[resource]
    kind = {"rayclusters": "RayCluster", "rayjobs": "RayJob"}[resource]
    queued_one, cpu = build(prod_stack), build(prod_stack, gpus=0, queue=None, suspend=True)
    for body in (queued_one, cpu):
        body["metadata"].setdefault("labels", {})["e2e"] = "ray-lws"
        admitted(call(member, "POST", path(resource, RAY_NS), body, dry_run=False))
    refused(call(member, "PATCH", path(resource, RAY_NS, queued_one["metadata"]["name"]), {"spec": {"suspend": False}}),
            f"a queued {kind} starts when Kueue admits it")
    with_gpus = build(prod_stack, queue=None, suspend=True)["spec"]
    refused(call(member, "PATCH", path(resource, RAY_NS, cpu["metadata"]["name"]), {"spec": with_gpus}),
            f"GPU requests cannot be added to a {kind} outside the tenant's queue")
    # the neighbours: starting the CPU one, GPUs for the queued one
    admitted(call(member, "PATCH", path(resource, RAY_NS, cpu["metadata"]["name"]), {"spec": {"suspend": False}}))
    admitted(call(member, "PATCH", path(resource, RAY_NS, queued_one["metadata"]["name"]), {"spec": with_gpus | {"suspend": True}}))


def test_a_rayjobs_cluster_comes_only_from_the_operator_and_changes_only_with_it(prod_stack, ray):
    """Kueue skips a RayCluster naming a queued RayJob as controller (KubeRay copies the RayJob's
    labels onto it): a member forging one, or raising the workers of the operator's, gets refused."""
    admin, member, _, operator, _ = ray
    job = rayjob(prod_stack)
    job["metadata"]["labels"]["e2e"] = "ray-lws"
    admitted(call(member, "POST", path("rayjobs", RAY_NS), job, dry_run=False))
    uid = client.CustomObjectsApi(admin).get_namespaced_custom_object("ray.io", "v1", RAY_NS, "rayjobs", job["metadata"]["name"])["metadata"]["uid"]
    child = raycluster(prod_stack, suspend=None, owner=("RayJob", job["metadata"]["name"], uid))
    child["metadata"]["labels"]["e2e"] = "ray-lws"
    refused(call(member, "POST", path("rayclusters", RAY_NS), child),
            "a RayCluster that requests GPUs and names a RayJob as its controller is created by the RayJob controller")
    admitted(call(operator, "POST", path("rayclusters", RAY_NS), child, dry_run=False))
    more = copy.deepcopy(child["spec"]["workerGroupSpecs"])
    more[0]["replicas"], more[0]["maxReplicas"] = 8, 8
    name = child["metadata"]["name"]
    refused(call(member, "PATCH", path("rayclusters", RAY_NS, name), {"spec": {"workerGroupSpecs": more}}),
            "changes only with its RayJob")
    admitted(call(operator, "PATCH", path("rayclusters", RAY_NS, name), {"spec": {"workerGroupSpecs": more}}))
    admitted(call(member, "PATCH", path("rayclusters", RAY_NS, name), {"metadata": {"labels": {"team": "a"}}}))


def test_a_rayclusters_gpu_pods_come_only_from_the_operator(prod_stack, ray):
    """KubeRay creates a RayCluster's pods ungated (Kueue counts them in the RayCluster's Workload):
    a member's pod naming a RayCluster as controller is refused, labelled and gated or not; the operator's is admitted."""
    _, member, _, operator, _ = ray
    owner = ("ray.io/v1", "RayCluster", "rc", str(uuid.uuid4()))
    for queue, gated in ((None, False), ("default", True)):
        refused(call(member, "POST", path("pods", RAY_NS), gpu_pod(prod_stack, RAY_NS, owner, queue, gated)),
                "a Pod that requests GPUs and names a RayCluster as its controller")
    admitted(call(operator, "POST", path("pods", RAY_NS), gpu_pod(prod_stack, RAY_NS, owner)))


def test_a_gpu_leaderworkerset_goes_through_the_queue_and_its_pods_are_gated(prod_stack, ray):
    """Kueue does not suspend an LWS: its webhook labels the pod templates, its pod webhook gates the
    pods the StatefulSet controller makes. An unlabelled GPU LWS is refused; a StatefulSet's GPU pod
    without the gate too (the LWS controller's StatefulSets are no way round the queue)."""
    _, _, member, _, statefulsets = ray
    refused(call(member, "POST", path("leaderworkersets", LWS_NS), lws(prod_stack, queue=None)),
            "a LeaderWorkerSet that requests GPUs must go through the tenant's queue")
    admitted(call(member, "POST", path("leaderworkersets", LWS_NS), lws(prod_stack)))
    admitted(call(member, "POST", path("leaderworkersets", LWS_NS), lws(prod_stack, gpus=0, queue=None)))
    owner = ("apps/v1", "StatefulSet", "lws-0", str(uuid.uuid4()))
    refused(call(statefulsets, "POST", path("pods", LWS_NS), gpu_pod(prod_stack, LWS_NS, owner, queue="default")),
            "Kueue's scheduling gate")
    admitted(call(statefulsets, "POST", path("pods", LWS_NS), gpu_pod(prod_stack, LWS_NS, owner, queue="default", gated=True)))
