from __future__ import annotations

import pytest

from components.manifests.meta import ENVIRONMENT_LABEL, TENANT_LABEL
from components.manifests.rbac import (
    CLUSTER_VIEWER,
    PLATFORM_ADMIN_BINDING,
    READ,
    all_subjects,
    platform_rbac_objects,
    role_bindings,
    role_rules,
    roles,
    service_accounts,
    tenant_rbac_objects,
)

from .example_tenants import tenant_of, viewed

GROUP = "rbac.authorization.k8s.io"


def _grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def _binding(objects: list[dict], namespace: str, name: str) -> dict:
    (found,) = [o for o in objects if o["metadata"].get("namespace") == namespace and o["metadata"]["name"] == name]
    return found


def test_three_roles_in_every_namespace_with_the_same_rules(prod):
    tenant = tenant_of(prod, "inference")
    objects = roles(tenant, prod.view(tenant))
    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects) == [
        (ns, f"tenant-{role}") for ns in ("inference", "inference-canary") for role in ("developer", "owner", "viewer")
    ]
    by_name = {}
    for role in objects:
        by_name.setdefault(role["metadata"]["name"], []).append(role["rules"])
    assert all(rules[0] == rules[1] for rules in by_name.values())


def test_developers_manage_workloads(prod):
    grants = _grants(role_rules("developer"))
    for resource in ("pods", "services", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"):
        assert ("", resource, "create") in grants and ("", resource, "delete") in grants
    for group, resource in (("apps", "deployments"), ("apps", "statefulsets"), ("batch", "jobs"), ("batch", "cronjobs"),
                            ("autoscaling", "horizontalpodautoscalers"), ("networking.k8s.io", "ingresses"),
                            ("kubeflow.org", "pytorchjobs")):
        assert (group, resource, "patch") in grants
    assert ("", "pods/exec", "create") in grants
    assert ("", "pods/portforward", "create") in grants
    assert ("", "pods/log", "get") in grants
    assert ("", "events", "list") in grants


def test_kueue_objects_are_read_only_for_every_role():
    for role in ("owner", "developer", "viewer"):
        verbs = {v for g, r, v in _grants(role_rules(role)) if g == "kueue.x-k8s.io"}
        assert verbs == set(READ)


def test_only_owners_create_role_bindings_and_bind_only_tenant_roles():
    owner = role_rules("owner")
    assert (GROUP, "rolebindings", "create") in _grants(owner)
    (bind,) = [r for r in owner if "bind" in r["verbs"]]
    assert bind == {"apiGroups": [GROUP], "resources": ["roles"], "verbs": ["bind"],
                    "resourceNames": ["tenant-developer", "tenant-owner", "tenant-viewer"]}
    for role in ("developer", "viewer"):
        grants = _grants(role_rules(role))
        assert not {v for g, r, v in grants if g == GROUP} - set(READ)


def test_viewers_read_only_and_never_secrets():
    grants = _grants(role_rules("viewer"))
    assert {v for _, _, v in grants} == set(READ)
    assert not [r for _, r, _ in grants if r == "secrets"]
    assert not [r for _, r, _ in grants if r in ("pods/exec", "pods/attach", "pods/portforward")]
    assert ("", "pods", "list") in grants
    assert ("", "resourcequotas", "get") in grants


def test_unknown_role_is_an_error():
    with pytest.raises(ValueError, match="unknown tenant role 'admin'"):
        role_rules("admin")


def test_bindings_for_groups_and_users(prod):
    objects = viewed(role_bindings, tenant_of(prod, "eval"), prod)
    developers = _binding(objects, "eval", "tenant-developers")
    assert developers["roleRef"] == {"apiGroup": GROUP, "kind": "Role", "name": "tenant-developer"}
    assert developers["subjects"] == [
        {"kind": "Group", "apiGroup": GROUP, "name": "eval-eng"},
        {"kind": "User", "apiGroup": GROUP, "name": "contractor-jo@acme.dev"},
    ]


def test_role_without_subjects_gets_no_binding(prod):
    names = {o["metadata"]["name"] for o in viewed(role_bindings, tenant_of(prod, "inference"), prod)}
    assert names == {"tenant-owners", "tenant-developers"}


def test_ci_service_accounts_live_and_are_bound_in_their_own_namespace(prod):
    tenant = tenant_of(prod, "inference")
    accounts = service_accounts(tenant, prod.view(tenant))
    assert [(a["metadata"]["namespace"], a["metadata"]["name"]) for a in accounts] == [
        ("inference", "deployer"),
        ("inference-canary", "deployer"),
    ]
    assert all(a["metadata"]["labels"][TENANT_LABEL] == "inference" for a in accounts)
    objects = role_bindings(tenant, prod.view(tenant))
    for namespace in ("inference", "inference-canary"):
        subjects = _binding(objects, namespace, "tenant-developers")["subjects"]
        accounts_here = [s for s in subjects if s["kind"] == "ServiceAccount"]
        assert accounts_here == [{"kind": "ServiceAccount", "name": "deployer", "namespace": namespace}]


def test_ci_service_account_role_decides_its_binding(make_tenant, make_environment):
    tenant = make_tenant(
        namespaces=["team-a-ci"],
        access={"ciServiceAccounts": [{"name": "release", "role": "owner", "namespace": "team-a-ci"}, {"name": "reader", "role": "viewer"}]},
    )
    objects = role_bindings(tenant, make_environment().view(tenant))
    assert [(o["metadata"]["namespace"], o["metadata"]["name"], o["subjects"][0]["name"]) for o in objects] == [
        ("team-a", "tenant-viewers", "reader"),
        ("team-a-ci", "tenant-owners", "release"),
    ]


def test_cluster_viewer_binding_holds_every_subject_once(make_tenant, make_environment):
    tenant = make_tenant(
        access={
            "owners": {"groups": ["leads"]},
            "developers": {"groups": ["eng", "leads"], "users": ["jo@x.dev"]},
            "ciServiceAccounts": [{"name": "ci"}],
        }
    )
    objects = tenant_rbac_objects(tenant, make_environment().view(tenant))
    (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert binding["metadata"]["name"] == "gpu-tenancy:team-a:cluster-viewer"
    assert binding["roleRef"] == {"apiGroup": GROUP, "kind": "ClusterRole", "name": CLUSTER_VIEWER}
    assert binding["subjects"] == all_subjects(tenant)
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [
        ("Group", "eng"), ("Group", "leads"), ("ServiceAccount", "ci"), ("User", "jo@x.dev"),
    ]


def test_tenant_without_subjects_gets_no_cluster_binding(make_tenant, make_environment):
    kinds = {o["kind"] for o in tenant_rbac_objects(make_tenant(), make_environment().view(make_tenant()))}
    assert kinds == {"Role"}


def test_platform_rbac_objects(prod):
    viewer, admin = platform_rbac_objects(prod.facts)
    assert viewer["kind"] == "ClusterRole" and viewer["metadata"]["name"] == CLUSTER_VIEWER
    # Nodes are not readable unless the stack opts in (tenantAccess.nodeRead).
    assert _grants(viewer["rules"]) == {
        (group, resource, verb)
        for group, resource in (("scheduling.k8s.io", "priorityclasses"),
                                ("storage.k8s.io", "storageclasses"), ("node.k8s.io", "runtimeclasses"))
        for verb in READ
    }
    assert admin["metadata"]["name"] == PLATFORM_ADMIN_BINDING
    assert admin["roleRef"] == {"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"}
    assert admin["subjects"] == [{"kind": "Group", "apiGroup": GROUP, "name": "platform-admins"}]
    assert TENANT_LABEL not in admin["metadata"]["labels"]
    assert admin["metadata"]["labels"][ENVIRONMENT_LABEL] == "prod"


def test_node_read_is_a_stack_opt_in(make_environment):
    viewer, _ = platform_rbac_objects(make_environment(tenantAccess={"nodeRead": True}).facts)
    assert {(g, r, v) for g, r, v in _grants(viewer["rules"]) if r == "nodes"} == {("", "nodes", verb) for verb in READ}


def test_platform_admin_group_comes_from_the_stack(make_environment):
    _, admin = platform_rbac_objects(make_environment(platformAdminGroup="sre").facts)
    assert admin["subjects"][0]["name"] == "sre"
