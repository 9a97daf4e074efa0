"""The claim policy (DRA ResourceClaims and templates), claim RBAC, and DRA pods in the placement policy,
replayed on two CEL engines (tests/manifests/cel_admission.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.manifests.claim_policy import claim_objects, claim_policy, claim_rules
from components.manifests.placement_policy import placement_policy
from components.manifests.tenant_grant import tenant_grant
from tests.manifests.cel_admission import ENGINES
from tests.manifests.cel_admission import admit as replay

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dra"
H100, B200 = "h100.gpu.dra.dev", "b200.gpu.dra.dev"


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


@pytest.fixture(scope="module")
def dra():
    return load_environment(FIXTURE, "dra")


def tenant(environment, name):
    return next(t.spec for t in environment.tenants if t.name == name)


def view(environment, name):
    return environment.view(tenant(environment, name))


def request_exactly(device_class, mode="ExactCount", **extra):
    exactly = {"deviceClassName": device_class, "allocationMode": mode, **extra}
    if mode == "ExactCount":
        exactly["count"] = 1
    return {"name": "gpu", "exactly": exactly}


def claim(*requests):
    return {"spec": {"devices": {"requests": list(requests)}}}


def template(*requests):
    return {"spec": {"spec": {"devices": {"requests": list(requests)}}}}


def admit(engine, policy, obj, resource="resourceclaims"):
    return replay(engine, policy, obj, resource=resource)


@pytest.mark.parametrize("wrap, resource", [(claim, "resourceclaims"), (template, "resourceclaimtemplates")])
def test_granted_classes_are_admitted_and_every_escape_refused(engine, dra, wrap, resource):
    policy = claim_policy(tenant(dra, "vision"), view(dra, "vision"))
    fallback = {"name": "gpu", "firstAvailable": [
        {"name": "a", "deviceClassName": H100, "allocationMode": "ExactCount", "count": 1},
        {"name": "b", "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1}]}
    assert admit(engine, policy, wrap(request_exactly(H100), request_exactly(B200)), resource) == []
    assert admit(engine, policy, wrap(), resource) == []
    cases = {
        "may name only the DeviceClasses it has a grant for: b200.gpu.dra.dev, h100.gpu.dra.dev": [
            wrap(request_exactly("gpu.nvidia.com")), wrap(request_exactly("unlisted.example.com")), wrap(fallback)],
        "adminAccess is refused": [wrap(request_exactly(H100, adminAccess=True))],
        "allocationMode All is refused": [wrap(request_exactly(H100, mode="All"))],
        "needs `exactly` or `firstAvailable`": [wrap({"name": "gpu"})],
    }
    for expected, objects in cases.items():
        for obj in objects:
            messages = admit(engine, policy, obj, resource)
            assert any(expected in m for m in messages), (obj, messages)


def test_claim_verbs_and_policy_come_only_with_a_grant(dra):
    vision, speech = tenant(dra, "vision"), tenant(dra, "speech")
    assert [o["kind"] for o in claim_objects(vision, dra.view(vision))] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert claim_objects(speech, dra.view(speech)) == []
    assert claim_rules(speech, "developer", dra.view(speech)) == []
    assert "create" in claim_rules(vision, "developer", dra.view(vision))[0]["verbs"]
    assert claim_rules(vision, "viewer", dra.view(vision))[0]["verbs"] == ["get", "list", "watch"]


def test_example_stacks_grant_no_claims(environments):
    for environment in environments.values():
        for loaded in environment.tenants:
            assert claim_objects(loaded.spec, environment.view(loaded.spec)) == []


def pod(resources=None, node_selector=None, claims=False):
    spec = {"containers": [{"name": "main", "image": "x", "resources": {"limits": resources or {}}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    return {"spec": spec}


def test_dra_pods_must_select_the_tenants_pools(engine, dra):
    policy, grant = placement_policy(dra.facts), tenant_grant(tenant(dra, "vision"), view(dra, "vision"))
    must_select = "pods of tenant vision that request GPUs must select where they run"
    for unplaced in (pod({"deviceclass.resource.kubernetes.io/h100.gpu.dra.dev": "1"}), pod({"gpu.dra.dev/b200": "1"}),
                     pod(claims=True)):
        assert any(must_select in m for m in replay(engine, policy, unplaced, resource="pods", params=grant)), unplaced
    placed = pod({"gpu.dra.dev/b200": "1"}, node_selector={"gpu.dra.dev/gpu-class": "b200"}, claims=True)
    assert replay(engine, policy, placed, resource="pods", params=grant) == []
    # nvidia.com/gpu is h100's extendedResourceName: DRA devices could serve it anywhere, so it pins nothing.
    assert any(must_select in m for m in replay(engine, policy, pod({"nvidia.com/gpu": "1"}), resource="pods", params=grant))
