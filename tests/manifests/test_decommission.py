"""What a decommissioned tenant keeps (issue 34 A): its guard and image policy bindings, as long as its
namespaces exist; and what it loses: every write of its members (all three Roles read as viewers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.manifests.build import tenant_objects
from components.manifests.meta import object_id
from components.manifests.rbac import ROLES, READ, role_rules, roles

from .example_tenants import tenant_of, viewed

REGISTRY = "ghcr.io/team-a"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dra"
WRITES = {"create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate"}


def _decommissioned(tenant):
    return tenant.model_copy(update={"lifecycle": "decommissioned", "decommission": {"confirm": tenant.name}})


def _verbs(role: dict) -> set[str]:
    return {verb for rule in role["rules"] for verb in rule["verbs"]}


def _ids(objects, kinds) -> set[str]:
    return {object_id(o) for o in objects if o["kind"] in kinds}


@pytest.mark.parametrize("name", ["eval", "inference", "llm-finetune"])
def test_the_guard_and_placement_bindings_and_the_grant_stay(prod, name):
    active = tenant_of(prod, name)
    kept = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "TenantGrant", "ClusterRoleBinding")
    assert _ids(viewed(tenant_objects, active, prod), kept) == _ids(viewed(tenant_objects, _decommissioned(active), prod), kept)
    names = {o["metadata"]["name"] for o in viewed(tenant_objects, _decommissioned(active), prod)}
    assert {f"gpu-tenancy-guard-{name}", f"gpu-tenancy-placement-{name}"} <= names


def test_the_image_policy_and_its_binding_stay(make_tenant, make_environment):
    environment = make_environment(images={"requireDigest": True})
    active = make_tenant(images={"registries": [REGISTRY]})
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    before = [o for o in viewed(tenant_objects, active, environment) if o["kind"] in kinds]
    after = [o for o in viewed(tenant_objects, _decommissioned(active), environment) if o["kind"] in kinds]
    assert [o["metadata"]["name"] for o in after] == [o["metadata"]["name"] for o in before] == [
        "gpu-tenancy-images-team-a", "gpu-tenancy-guard-team-a", "gpu-tenancy-images-team-a", "gpu-tenancy-placement-team-a"]
    # Same rules: only the lifecycle label differs.
    assert [o["spec"] for o in after] == [o["spec"] for o in before]


@pytest.mark.parametrize("name", ["eval", "inference", "llm-finetune"])
def test_every_role_of_a_decommissioned_tenant_reads_as_a_viewer(prod, name):
    """Bundles too (eval's developers have kubeflow-pipelines): read verbs only, no Secrets, no exec."""
    tenant = _decommissioned(tenant_of(prod, name))
    viewer = [r for r in viewed(roles, tenant, prod) if r["metadata"]["name"] == "tenant-viewer"]
    for role in viewed(roles, tenant, prod):
        assert _verbs(role) <= {*READ}, (role["metadata"], _verbs(role) - set(READ))
        resources = {r for rule in role["rules"] for r in rule["resources"]}
        assert not resources & {"secrets", "pods/exec", "pods/attach", "pods/portforward"}, role["metadata"]
    assert role_rules("viewer") == viewer[0]["rules"][:len(role_rules("viewer"))]


def test_the_active_roles_still_write(prod):
    """The neighbour: the same tenant active (or suspended) keeps its owners' and developers' writes."""
    for lifecycle in ("active", "suspended"):
        tenant = tenant_of(prod, "eval").model_copy(update={"lifecycle": lifecycle})
        by_name = {r["metadata"]["name"]: _verbs(r) for r in viewed(roles, tenant, prod) if r["metadata"]["namespace"] == "eval"}
        assert WRITES - {"escalate", "impersonate"} <= by_name["tenant-owner"]
        assert {"create", "delete"} <= by_name["tenant-developer"]
        assert not by_name["tenant-viewer"] & WRITES


def test_claim_rules_read_only_when_decommissioned():
    dra = load_environment(FIXTURE, "dra")
    granted = next(t.spec for t in dra.tenants if any("resourceclaims" in r for rule in
                   next(o for o in viewed(roles, t.spec, dra) if o["metadata"]["name"] == "tenant-developer")["rules"] for r in rule["resources"]))
    claims = [rule for role in viewed(roles, _decommissioned(granted), dra) for rule in role["rules"] if "resourceclaims" in rule["resources"]]
    assert claims and all(set(rule["verbs"]) == set(READ) for rule in claims)


def test_role_bindings_and_service_accounts_stay_as_they_are(prod):
    """Only the Roles' rules change (in place): a RoleBinding's roleRef cannot change without a re-create."""
    active = tenant_of(prod, "llm-finetune")
    kinds = ("RoleBinding", "ServiceAccount", "ClusterRoleBinding")
    strip = lambda o: {**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "labels"}}
    before = [strip(o) for o in viewed(tenant_objects, active, prod) if o["kind"] in kinds]
    after = [strip(o) for o in viewed(tenant_objects, _decommissioned(active), prod) if o["kind"] in kinds]
    assert before == after and before
    assert {o["metadata"]["name"] for o in viewed(roles, _decommissioned(active), prod)} == {f"tenant-{r}" for r in ROLES}
