"""The vCluster's ServiceAccount against a hostile tenant member, on a real kube-apiserver.

The chart binds the vCluster's host rights to `vc-vcluster` of the tenant's namespace (what they
are: test_vcluster_values.py), and its token is mounted in the control-plane pod `vcluster-0`. A
tenant owner or developer may create pods as any ServiceAccount of the namespace, change pods and
StatefulSets and exec into pods (RBAC lets them try: checked first), so the vCluster guard
(`components.manifests.vcluster_guard`, built for dev, whose llm-finetune has a vCluster, and
applied here to the prod stack's llm-finetune namespace) must refuse each way to that token, and
admit the neighbour: the same objects as another ServiceAccount, the control-plane pod made by the
StatefulSet controller (impersonated: this lane runs no StatefulSet controller), exec into
another pod, deleting the control-plane pod.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from components.load import load_environment
from components.manifests.vcluster_guard import SERVICE_ACCOUNT, vcluster_guard_objects
from tests.e2e.test_tenancy_isolation import Member, call, members, pod
from tests.e2e.test_vcluster_values import may

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
NS = "llm-finetune"
CONTROL_PLANE = "vcluster-0"
NEIGHBOUR = "e2e-not-the-vcluster"
PODS = f"/api/v1/namespaces/{NS}/pods"
STATEFULSETS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
REFUSED = "may run as ServiceAccount vc-vcluster only as the vCluster's control plane"
ROLES = ("owner", "developer")
STATEFULSET_CONTROLLER = ("system:serviceaccount:kube-system:statefulset-controller", ["system:serviceaccounts", "system:serviceaccounts:kube-system"])
JOB_CONTROLLER = ("system:serviceaccount:kube-system:job-controller", ["system:serviceaccounts", "system:serviceaccounts:kube-system"])


def as_account(body: dict, account: str = SERVICE_ACCOUNT, field: str = "serviceAccountName", name: str | None = None,
               owner: tuple[str, str] | None = None, uid: str | None = None) -> dict:
    """The pod `body` running as `account`, named `name`, controlled by `owner` (kind, name; `uid` or a made-up one)."""
    body["spec"][field] = account
    if name:
        body["metadata"]["name"] = name
    if owner:
        kind, owner_name = owner
        body["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1" if kind == "StatefulSet" else "batch/v1", "kind": kind,
                                                "name": owner_name, "uid": uid or str(uuid.uuid4()), "controller": True}]
    return body


def statefulset(account: str, name: str | None = None) -> dict:
    template = pod()
    template["spec"]["serviceAccountName"] = account
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name or f"e2e-{uuid.uuid4().hex[:6]}"},
            "spec": {"serviceName": "x", "selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}}, "spec": template["spec"]}}}


def new_image(admin, name: str) -> dict:
    """The pod as it is, but for the image of each container (the one field of a container an update may change)."""
    body = admin.sanitize_for_serialization(client.CoreV1Api(admin).read_namespaced_pod(name, NS))
    for container in body["spec"]["containers"]:
        container["image"] = "registry.invalid/steal-the-token:1"
    return body


def session(api, subresource: str, name: str) -> tuple[int, str]:
    return call(api, "POST", f"{PODS}/{name}/{subresource}?command=cat&command=/var/run/secrets/kubernetes.io/serviceaccount/token&stdout=true",
                dry_run=False)


@pytest.fixture(scope="module")
def guarded(apiserver, prod_stack):
    """The dev vCluster guard on the prod stack's llm-finetune, the chart's ServiceAccount, its control-plane
    pod as the StatefulSet controller makes it, and a neighbour pod."""
    admin = apiserver.api_client
    objects = vcluster_guard_objects(load_environment(REPO_ROOT, "dev").facts)
    apiserver.apply_objects(objects)
    status, message = call(admin, "POST", f"/api/v1/namespaces/{NS}/serviceaccounts",
                           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT}}, dry_run=False)
    assert status in (201, 409), message
    developer = members(NS, NS)["developer"]
    probe = lambda: call(apiserver.client_for(developer.user, developer.groups), "POST", PODS, as_account(pod()))  # noqa: E731
    apiserver.wait_for(lambda: probe()[0] == 403, timeout=30, what="the vCluster guard to take effect")
    # The chart's StatefulSet, applied by the platform (no StatefulSet controller runs here: its pod is made
    # below as that controller would, owned by it so that the garbage collector keeps it).
    status, message = call(admin, "POST", STATEFULSETS, statefulset(SERVICE_ACCOUNT, name="vcluster"), dry_run=False)
    assert status in (201, 409), f"the platform applies the chart's StatefulSet: {message}"
    uid = client.AppsV1Api(admin).read_namespaced_stateful_set("vcluster", NS).metadata.uid
    controller = apiserver.client_for(*STATEFULSET_CONTROLLER)
    status, message = call(controller, "POST", PODS, as_account(pod(), name=CONTROL_PLANE, owner=("StatefulSet", "vcluster"), uid=uid), dry_run=False)
    assert status in (201, 409), f"the StatefulSet controller's control-plane pod is admitted: {message}"
    status, message = call(admin, "POST", PODS, as_account(pod(), account="default", name=NEIGHBOUR), dry_run=False)
    assert status in (201, 409), message
    yield admin
    for path in (f"{PODS}/{CONTROL_PLANE}", f"{PODS}/{NEIGHBOUR}", f"{STATEFULSETS}/vcluster"):
        call(admin, "DELETE", path, dry_run=False)
    admission = client.AdmissionregistrationV1Api(admin)
    admission.delete_validating_admission_policy_binding(objects[1]["metadata"]["name"])
    admission.delete_validating_admission_policy(objects[0]["metadata"]["name"])


def test_the_policy_type_checks_without_warnings(apiserver, guarded):
    """The controller manager type-checks each expression against every kind the policy matches."""
    admission = client.AdmissionregistrationV1Api(guarded)
    policy = apiserver.wait_for(lambda: (p := admission.read_validating_admission_policy("gpu-tenancy-vcluster-guard")).status
                                and p.status.observed_generation == p.metadata.generation and p, what="the policy's type check")
    assert not (policy.status.type_checking and policy.status.type_checking.expression_warnings), policy.status.type_checking


def member(role: str) -> Member:
    return members(NS, NS)[role]


@pytest.mark.parametrize("role", ROLES)
def test_rbac_lets_a_member_try_every_way_to_the_token_but_token_request(apiserver, guarded, role):
    who = (member(role).user, list(member(role).groups))
    for verb, group, resource in (("create", "", "pods"), ("patch", "", "pods"), ("create", "", "pods/exec"),
                                  ("create", "", "pods/attach"), ("create", "apps", "statefulsets"), ("patch", "apps", "statefulsets")):
        assert may(apiserver, who, verb, group, resource, NS), (role, verb, resource)
    assert not may(apiserver, who, "create", "", "serviceaccounts/token", NS), "TokenRequest is granted to no tenant role"
    assert not may(apiserver, who, "patch", "", "pods/ephemeralcontainers", NS), "nor ephemeral containers (kubectl debug)"


@pytest.mark.parametrize("role", ROLES)
def test_a_member_may_not_run_a_pod_as_the_vclusters_service_account(apiserver, guarded, role):
    api = apiserver.client_for(member(role).user, member(role).groups)
    for body in (as_account(pod()), as_account(pod(), field="serviceAccount"),
                 as_account(pod(), owner=("StatefulSet", "vcluster"))):   # a forged owner is no StatefulSet controller
        status, message = call(api, "POST", PODS, body)
        assert (status, REFUSED in message) == (403, True), message
    status, message = call(api, "POST", PODS, as_account(pod(), account="default"))
    assert status == 201, f"the same pod as another ServiceAccount is admitted: {message}"


def test_only_the_statefulset_controller_for_the_charts_statefulset_makes_the_control_plane_pod(apiserver, guarded):
    """A Job or Deployment of a member runs as the account through a kube-system controller: its owner is no StatefulSet."""
    status, message = call(apiserver.client_for(*JOB_CONTROLLER), "POST", PODS, as_account(pod(), owner=("Job", "steal")))
    assert (status, REFUSED in message) == (403, True), message
    status, message = call(apiserver.client_for(*STATEFULSET_CONTROLLER), "POST", PODS, as_account(pod(), owner=("StatefulSet", "other")))
    assert (status, REFUSED in message) == (403, True), message
    status, message = call(apiserver.client_for(*STATEFULSET_CONTROLLER), "POST", PODS, as_account(pod(), owner=("StatefulSet", "vcluster")))
    assert status == 201, message


@pytest.mark.parametrize("role", ROLES)
def test_a_member_may_not_make_a_statefulset_run_as_the_vclusters_service_account(apiserver, guarded, role):
    api = apiserver.client_for(member(role).user, member(role).groups)
    status, message = call(api, "POST", STATEFULSETS, statefulset(SERVICE_ACCOUNT))
    assert status == 403 and "is the vCluster's, applied by the platform" in message, message
    status, message = call(api, "POST", STATEFULSETS, statefulset("default"))
    assert status == 201, f"a StatefulSet as another ServiceAccount is admitted: {message}"
    image = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "registry.invalid/steal-the-token:1"}]}}}}
    status, message = call(api, "PATCH", f"{STATEFULSETS}/vcluster", image)
    assert status == 403 and "is the vCluster's, applied by the platform" in message, f"the chart's StatefulSet cannot be changed: {message}"
    status, message = call(api, "PATCH", f"{STATEFULSETS}/vcluster/scale", {"spec": {"replicas": 0}})
    assert status == 200, f"scaling it (its own pods, from the same template) is admitted: {message}"


@pytest.mark.parametrize("role", ROLES)
def test_a_member_may_not_change_the_control_plane_pod_but_may_delete_it(apiserver, guarded, role):
    api = apiserver.client_for(member(role).user, member(role).groups)
    status, message = call(api, "PUT", f"{PODS}/{CONTROL_PLANE}", new_image(guarded, CONTROL_PLANE))
    assert status == 403 and "may not be changed by tenant members" in message, message
    status, message = call(api, "PUT", f"{PODS}/{NEIGHBOUR}", new_image(guarded, NEIGHBOUR))
    assert status == 200, f"changing another pod's image is admitted: {message}"
    status, message = call(apiserver.client_for(*STATEFULSET_CONTROLLER), "PATCH", f"{PODS}/{CONTROL_PLANE}",
                           {"metadata": {"labels": {"apps.kubernetes.io/pod-index": "0"}}})
    assert status == 200, f"kube-system controllers may still change it: {message}"
    status, message = call(api, "DELETE", f"{PODS}/{CONTROL_PLANE}")
    assert status == 200, f"deleting it is admitted (the StatefulSet makes it again): {message}"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("subresource", ["exec", "attach"])
def test_a_member_may_not_exec_into_the_control_plane_pod(apiserver, guarded, role, subresource):
    api = apiserver.client_for(member(role).user, member(role).groups)
    status, message = session(api, subresource, CONTROL_PLANE)
    assert status == 403 and f"{subresource} into {CONTROL_PLANE} is refused: it is the vCluster's control-plane pod" in message, message
    status, message = session(api, subresource, NEIGHBOUR)
    assert status != 403, f"{subresource} into another pod passes admission (and fails later: no node here): {message}"
