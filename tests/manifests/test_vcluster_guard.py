"""The vCluster guard: built only where a vCluster runs, and replayed offline on two CEL engines
(tests/manifests/cel_admission.py; exec and attach, which need `request.name`, are proven on the
real API server in tests/e2e/test_vcluster_guard.py)."""

from __future__ import annotations

import pytest

from components.manifests.build import platform_objects
from components.manifests.vcluster_guard import POLICY_NAME, SERVICE_ACCOUNT, vcluster_guard_objects

from .cel_admission import ENGINES, admit

MEMBER = {"operator": False}
STATEFULSET_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


@pytest.fixture
def policy(dev):
    return vcluster_guard_objects(dev.facts)[0]


def _pod(account: str | None = SERVICE_ACCOUNT, owner: str | None = None, field: str = "serviceAccountName") -> dict:
    meta: dict = {"name": "p"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": owner, "uid": "u", "controller": True}]
    return {"kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}], **({field: account} if account else {})}}


def test_only_the_environments_with_a_vcluster_get_the_guard_bound_to_their_namespaces(environments):
    for name, environment in environments.items():
        objects = vcluster_guard_objects(environment.facts)
        with_vcluster = sorted(t.name for t in environment.tenants if t.spec.vcluster.enabled and t.spec.lifecycle != "decommissioned")
        assert bool(objects) == bool(with_vcluster), name
        if objects:
            binding = objects[1]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
            assert binding == [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": with_vcluster}]
            assert {o["metadata"]["name"] for o in platform_objects(environment)} >= {POLICY_NAME}


def test_a_member_may_not_run_a_pod_as_the_vclusters_service_account(engine, policy):
    for body in (_pod(), _pod(field="serviceAccount"), _pod(owner="vcluster")):
        assert admit(engine, policy, body, resource="pods", given=MEMBER), body
    assert admit(engine, policy, _pod("default"), resource="pods", given=MEMBER) == []
    assert admit(engine, policy, _pod(None), resource="pods", given=MEMBER) == []


def test_only_a_kube_system_controller_for_the_charts_statefulset_makes_its_pod(engine, policy):
    assert admit(engine, policy, _pod(owner="vcluster"), resource="pods", user=STATEFULSET_CONTROLLER, given=MEMBER) == []
    assert admit(engine, policy, _pod(owner="other"), resource="pods", user=STATEFULSET_CONTROLLER, given=MEMBER)
    assert admit(engine, policy, _pod(), resource="pods", user="system:serviceaccount:kube-system:job-controller", given=MEMBER)
    assert admit(engine, policy, _pod(), resource="pods", given={"operator": True}) == []


def test_the_control_plane_pod_changes_only_by_controllers(engine, policy):
    old = _pod(owner="vcluster")
    assert admit(engine, policy, old, resource="pods", operation="UPDATE", old=old, given=MEMBER)
    assert admit(engine, policy, old, resource="pods", operation="UPDATE", old=old, user=STATEFULSET_CONTROLLER, given=MEMBER) == []
    other = _pod("default")
    assert admit(engine, policy, other, resource="pods", operation="UPDATE", old=other, given=MEMBER) == []


def test_a_statefulset_as_the_account_is_the_platforms(engine, policy):
    def statefulset(account):
        return {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": {"spec": _pod(account)["spec"]}}}

    assert admit(engine, policy, statefulset(SERVICE_ACCOUNT), resource="statefulsets", given=MEMBER)
    assert admit(engine, policy, statefulset(SERVICE_ACCOUNT), resource="statefulsets", given={"operator": True}) == []
    assert admit(engine, policy, statefulset("default"), resource="statefulsets", given=MEMBER) == []
