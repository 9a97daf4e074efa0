from __future__ import annotations

import json

from components.manifests.meta import ENVIRONMENT_LABEL, TENANT_LABEL, sort_objects
from components.manifests.tenant_core import platform_core_objects, tenant_objects
from components.fleet.environment import Environment, LoadedTenant

from .example_tenants import synthetic_environment, tenant_of, viewed


def _ids(objects: list[dict]) -> list[tuple[str, str, str]]:
    return [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects]


def test_a_tenant_gets_every_core_concept(prod):
    kinds = {o["kind"] for o in viewed(tenant_objects, tenant_of(prod, "llm-finetune"), prod)}
    assert kinds == {"Namespace", "ResourceQuota", "LimitRange", "Role", "RoleBinding", "ServiceAccount",
                     "ClusterRoleBinding", "NetworkPolicy", "ValidatingAdmissionPolicyBinding", "TenantGrant"}


def test_objects_are_sorted_namespaces_first_and_deterministic(prod):
    tenant = tenant_of(prod, "inference")
    objects = tenant_objects(tenant, prod.view(tenant))
    assert objects == sort_objects(objects)
    assert [o["kind"] for o in objects[:2]] == ["Namespace", "Namespace"]
    assert json.dumps(objects) == json.dumps(tenant_objects(tenant, prod.view(tenant)))


def test_objects_are_plain_json_with_unique_identities(rendered):
    for owners in rendered.values():
        for objects in owners.values():
            assert json.loads(json.dumps(objects)) == objects
            assert len(set(_ids(objects))) == len(objects)


def test_no_two_objects_share_a_mutable_part(rendered):
    # Shared dicts would leak an edit of one object into another and render as YAML anchors.
    seen: dict[int, str] = {}

    def walk(value, where: str) -> None:
        if isinstance(value, (dict, list)):
            assert id(value) not in seen, f"{where} is the same object as {seen[id(value)]}"
            seen[id(value)] = where
            for key, item in value.items() if isinstance(value, dict) else enumerate(value):
                walk(item, f"{where}.{key}")

    for env, owners in rendered.items():
        for owner, objects in owners.items():
            for obj in objects:
                walk(obj, f"{env}/{owner}/{obj['kind']}/{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}")


def test_every_object_is_labelled_and_namespaced_within_its_tenant(rendered):
    for env_name, owners in rendered.items():
        for owner, objects in owners.items():
            if owner == "_platform":
                continue
            namespaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
            for obj in objects:
                labels = obj["metadata"]["labels"]
                assert labels[TENANT_LABEL] == owner
                assert labels[ENVIRONMENT_LABEL] == env_name
                if obj["kind"] not in ("Namespace", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                                       "TenantGrant"):
                    assert obj["metadata"]["namespace"] in namespaces


def test_adding_a_tenant_changes_no_other_tenants_objects(prod, make_tenant):
    before = {loaded.name: tenant_objects(loaded.spec, prod.view(loaded.spec)) for loaded in prod.tenants}
    newcomer = make_tenant(name="aaa-new", network={"ingressFrom": {"tenants": ["eval"]}})
    grown = Environment(prod.name, prod.platform, prod.platform_doc, [LoadedTenant(newcomer, None), *prod.tenants])
    after = {loaded.name: tenant_objects(loaded.spec, grown.view(loaded.spec)) for loaded in grown.tenants}
    # The one exception is the point of a grant: the newcomer accepts ingress from eval, so eval gets
    # the matching egress (under default-deny egress the grant would do nothing otherwise).
    changed = {name: [o for o in after[name] if o not in before[name]] for name in before}
    assert {name: [(o["kind"], o["metadata"]["name"]) for o in objs] for name, objs in changed.items()} == {
        "eval": [("NetworkPolicy", "tenant-network")], "inference": [], "llm-finetune": []}
    old_policy = next(o for o in before["eval"] if o["kind"] == "NetworkPolicy")
    added = [rule for rule in changed["eval"][0]["spec"]["egress"] if rule not in old_policy["spec"]["egress"]]
    assert [rule["to"][0]["namespaceSelector"]["matchExpressions"][0]["values"] for rule in added] == [["aaa-new"]]
    unchanged = {name: [o for o in objs if o is not old_policy] for name, objs in before.items()}
    assert {name: [o for o in after[name] if o in before[name]] for name in before} == unchanged


def test_suspended_and_decommissioned_tenants_keep_their_objects():
    env, tenants = synthetic_environment()
    for tenant in tenants:
        objects = tenant_objects(tenant, env.view(tenant))
        assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == sorted(tenant.all_namespaces)
        assert any(o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "suspended" for o in objects)


def test_platform_core_objects(prod):
    assert _ids(platform_core_objects(prod.facts)) == [
        ("ClusterRole", "", "gpu-tenancy:cluster-viewer"),
        ("ClusterRoleBinding", "", "gpu-tenancy:platform-admins"),
        ("CustomResourceDefinition", "", "tenantgrants.gpu-tenancy.dev"),
        ("ValidatingAdmissionPolicy", "", "gpu-tenancy-guard"),
    ]
