"""Decommissioning on a real kube-apiserver (issue 34 A): from the deploy that decommissions a tenant
until its namespaces are gone, no member writes there, and the guard and image policies still hold.

A tenant made for this module, `retiring` (namespaces `retiring` and `retiring-data`, every role, a
CI ServiceAccount), in the prod inventory with a registry list, next to the applied prod stack. It is
applied active, then decommissioned as the deploy does it: the decommissioned render applied, the
objects it no longer renders deleted, its namespaces kept (Pulumi deletes them only when the file is
removed, and then before the tenant's cluster-scoped objects). Then, as its owner, developer, viewer
and CI ServiceAccount: no Ingress for a foreign host, no RoleBinding to `system:authenticated`, no
pod from an unlisted registry; reading still works. The legitimate neighbours: a platform operator
deletes the namespaces (with the guard in place), and the active tenant next door (`eval`) works as
before. Member requests reuse test_tenancy_isolation's requests (dry-run writes) and minted clients.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.image_policy import policy_name
from components.manifests.meta import object_id
from tests.e2e.made_tenants import rendered
from tools.applied_stack import apply_tenant, remove_tenant
from tests.e2e.test_tenancy_isolation import PATHS, Member, binding, call, group, guard, ingress, members, pod, rbac_allows

pytestmark = pytest.mark.e2e

NAME = "retiring"
NAMESPACES = (NAME, f"{NAME}-data")
ALLOWED = "registry.invalid/allowed"
OWN_HOST = f"{NAME}.apps.acme.dev"
FOREIGN_HOST = "eval.apps.acme.dev"          # the neighbour's host: its traffic, if an Ingress could claim it
IMAGES = {"registries": [ALLOWED]}           # isolation's pods run registry.invalid/app:1: not listed
MEMBERS = {
    "owner": Member(NAME, "owner", f"e2e-owner@{NAME}", (f"{NAME}-leads",)),
    "developer": Member(NAME, "developer", f"e2e-dev@{NAME}", (f"{NAME}-devs",)),
    "viewer": Member(NAME, "viewer", f"e2e-viewer@{NAME}", (f"{NAME}-readers",)),
    "ci": Member(NAME, "ci", f"system:serviceaccount:{NAME}:ci", ("system:serviceaccounts", f"system:serviceaccounts:{NAME}")),
}
DECOMMISSIONED = {"namespaces": [f"{NAME}-data"], "lifecycle": "decommissioned", "decommission": {"confirm": NAME}}


def attacks() -> dict[str, tuple[str, dict[str, Any]]]:
    """What a churned customer's member would still try: (resource, body) per attack."""
    return {
        "Ingress for a foreign host": ("ingresses", ingress(FOREIGN_HOST)),
        "RoleBinding to system:authenticated": ("rolebindings", binding(group("system:authenticated"), role="tenant-owner")),
        "pod from an unlisted registry": ("pods", pod()),
    }


def _as(apiserver, role: str) -> client.ApiClient:
    return apiserver.client_for(MEMBERS[role].user, MEMBERS[role].groups)


def _writes(objects: list[dict[str, Any]], role: str, resource: str) -> bool:
    """Whether the rendered Role `tenant-<role>` of the primary namespace lets it create `resource`."""
    (found,) = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == f"tenant-{role}"
                and o["metadata"]["namespace"] == NAME]
    return any(resource in r["resources"] and "create" in r["verbs"] for r in found["rules"])


def _gone(apiserver, obj: dict[str, Any]) -> bool:
    try:
        apiserver.get_object(obj)
    except ApiException as exc:
        return exc.status == 404
    return False


@pytest.fixture(scope="module")
def retiring(apiserver, prod_stack) -> Iterator[dict[str, Any]]:
    """Applied active (with some of the team's own objects), then decommissioned as the deploy does it;
    whatever is left of it afterwards is deleted (the last test deletes it as the removal PR would)."""
    active = rendered(NAME, IMAGES, namespaces=[f"{NAME}-data"])
    apply_tenant(apiserver, active)
    admin = apiserver.api_client
    apiserver.wait_for(lambda: call(admin, "POST", PATHS["pods"].format(ns=NAME), pod())[0] == 403,
                       what=f"the image policy of {NAME} in force")
    owner = _as(apiserver, "owner")
    # Active, the guard refuses the attacks RBAC lets the owner try; the team has objects of its own.
    status, message = call(owner, "POST", PATHS["ingresses"].format(ns=NAME), ingress(FOREIGN_HOST))
    assert status == 403 and guard(NAME) in message, (status, message)
    for body in (binding(group(f"{NAME}-devs"), name="team-readers"),):
        assert call(owner, "POST", PATHS["rolebindings"].format(ns=NAME), body, dry_run=False)[0] == 201
    assert call(owner, "POST", PATHS["configmaps"].format(ns=f"{NAME}-data"),
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes"}, "data": {"k": "v"}}, dry_run=False)[0] == 201

    decommissioned = rendered(NAME, IMAGES, **DECOMMISSIONED)
    kept = {object_id(o) for o in decommissioned}
    dropped = [o for o in active if object_id(o) not in kept and o["kind"] != "Namespace"]
    apply_tenant(apiserver, decommissioned)
    for obj in dropped:
        resource = apiserver.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        apiserver.dynamic.delete(resource, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    # RBAC's caches follow the Roles' new rules a moment later: until they say what the render says.
    apiserver.wait_for(lambda: rbac_allows(admin, MEMBERS["owner"], "create", "ingresses", NAME)
                       == _writes(decommissioned, "owner", "ingresses"), what=f"the new Roles of {NAME} in force")
    yield {"active": active, "decommissioned": decommissioned, "dropped": dropped}
    remove_tenant(apiserver, [*decommissioned, *dropped])


def test_the_deploy_deletes_no_guard(apiserver, retiring):
    dropped = sorted(f"{o['kind']} {o['metadata']['name']}" for o in retiring["dropped"])
    assert not [d for d in dropped if d.split()[0] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                                                       "TenantGrant", "Role", "RoleBinding")], dropped
    adm = client.AdmissionregistrationV1Api(apiserver.api_client)
    for name in (f"gpu-tenancy-guard-{NAME}", policy_name(NAME), f"gpu-tenancy-placement-{NAME}"):
        assert adm.read_validating_admission_policy_binding(name).metadata.name == name
    assert adm.read_validating_admission_policy(policy_name(NAME))


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("role", sorted(MEMBERS))
def test_no_member_writes_any_more(apiserver, retiring, role, namespace):
    api = _as(apiserver, role)
    for what, (resource, body) in attacks().items():
        status, message = call(api, "POST", PATHS[resource].format(ns=namespace), body)
        assert status == 403 and f'cannot create resource "{resource}"' in message, (role, what, status, message)
    # Nor change or delete what the team left there.
    for method, body in (("PATCH", {"subjects": [group("system:authenticated")]}), ("DELETE", None)):
        status, message = call(api, method, PATHS["rolebindings"].format(ns=NAME) + "/team-readers", body)
        assert status == 403 and "cannot" in message, (role, method, status, message)


@pytest.mark.parametrize("role", ["owner", "developer", "ci"])
def test_members_keep_read_access_only(apiserver, retiring, role):
    api = _as(apiserver, role)
    for resource in ("pods", "configmaps", "rolebindings", "ingresses"):
        status, message = call(api, "LIST", PATHS[resource].format(ns=NAME))
        assert status == 200, (role, resource, status, message)
    status, message = call(api, "LIST", PATHS["secrets"].format(ns=NAME))
    assert status == 403 and 'cannot list resource "secrets"' in message, (role, status, message)


def test_the_guard_and_image_policy_still_hold_for_whoever_may_write(apiserver, retiring):
    """A platform operator (RBAC allows everything) still meets both policies in the namespaces."""
    admin = apiserver.api_client
    status, message = call(admin, "POST", PATHS["ingresses"].format(ns=NAME), ingress(FOREIGN_HOST))
    assert status == 403 and guard(NAME) in message and FOREIGN_HOST in message, (status, message)
    status, message = call(admin, "POST", PATHS["pods"].format(ns=f"{NAME}-data"), pod())
    assert status == 403 and policy_name(NAME) in message and "is not from a registry" in message, (status, message)


def test_a_neighbouring_active_tenant_is_unaffected(apiserver, retiring):
    """eval's owner publishes its own host (FOREIGN_HOST above) and still meets its guard elsewhere."""
    roles = members("eval", "eval")
    owner = apiserver.client_for(roles["owner"].user, roles["owner"].groups)
    assert call(owner, "POST", PATHS["ingresses"].format(ns="eval"), ingress(FOREIGN_HOST))[0] == 201
    status, message = call(owner, "POST", PATHS["ingresses"].format(ns="eval"), ingress(OWN_HOST))
    assert status == 403 and guard("eval") in message, (status, message)
    status, message = call(owner, "POST", PATHS["rolebindings"].format(ns="eval"), binding(group("system:authenticated")))
    assert status == 403 and guard("eval") in message, (status, message)
    assert call(owner, "POST", PATHS["rolebindings"].format(ns="eval"), binding(group("eval-eng")))[0] == 201
    developer = apiserver.client_for(roles["developer"].user, roles["developer"].groups)
    status, message = call(developer, "POST", PATHS["pods"].format(ns="eval"), pod())
    assert status == 201, (status, message)


def test_a_platform_operator_deletes_the_namespaces_then_the_rest(apiserver, retiring):
    """The removal PR's order: namespaces first, with every policy in place, then the cluster-scoped objects."""
    for namespace in NAMESPACES:
        apiserver.delete_namespace(namespace)
    for namespace in NAMESPACES:
        apiserver.wait_for(lambda ns=namespace: _gone(apiserver, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                           timeout=120, what=f"namespace {namespace} deleted with the guard in place")
    remove_tenant(apiserver, retiring["decommissioned"])
    left = [object_id(o) for o in retiring["decommissioned"] if not o["metadata"].get("namespace") and not _gone(apiserver, o)]
    assert not left, left
