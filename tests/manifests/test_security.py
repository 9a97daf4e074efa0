"""Security pins over every object of the example stacks and the synthetic one.

Namespaces and quotas isolate nothing by themselves; these properties are what RBAC,
NetworkPolicy, Pod Security and admission-time quota must keep true for any tenant file.
"""

from __future__ import annotations

import pytest

from components.manifests.rbac import CLUSTER_VIEWER, ROLES, role_name

from .example_tenants import tenant_of

ENVIRONMENTS = ("dev", "prod", "lab")
PROTECTED = {"resourcequotas", "limitranges", "networkpolicies", "namespaces"}
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
READ = {"get", "list", "watch"}
TENANT_ROLES = {role_name(role) for role in ROLES}


def _tenants(rendered: dict, env: str):
    return [(name, objects) for name, objects in rendered[env].items() if name != "_platform"]


def _of_kind(objects: list[dict], *kinds: str) -> list[dict]:
    return [o for o in objects if o["kind"] in kinds]


def _cluster_viewer(rendered: dict, env: str) -> dict:
    (role,) = [o for o in rendered[env]["_platform"] if o["kind"] == "ClusterRole" and o["metadata"]["name"] == CLUSTER_VIEWER]
    return role


def _tenant_rules(rendered: dict, env: str) -> list[tuple[str, dict]]:
    """Every rule a tenant subject can hold: its Roles, and the shared read-only ClusterRole."""
    rules = [(f"{env}/{name}/{role['metadata']['namespace']}/{role['metadata']['name']}", rule)
             for name, objects in _tenants(rendered, env)
             for role in _of_kind(objects, "Role", "ClusterRole")
             for rule in role["rules"]]
    rules += [(f"{env}/{CLUSTER_VIEWER}", rule) for rule in _cluster_viewer(rendered, env)["rules"]]
    assert rules
    return rules


def _hard(quota: dict) -> dict[str, str]:
    return quota["spec"]["hard"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_tenant_role_writes_quota_limit_range_network_policy_or_namespace(rendered, env):
    for where, rule in _tenant_rules(rendered, env):
        assert not (PROTECTED & set(rule["resources"]) and WRITES & set(rule["verbs"])), where


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_wildcards_anywhere_in_tenant_rules(rendered, env):
    for where, rule in _tenant_rules(rendered, env):
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in item for item in rule.get(field, [])), f"{where}: {field}"
        assert "nonResourceURLs" not in rule, where


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_bind_and_escalate_only_on_the_tenants_own_roles(rendered, env):
    binds = 0
    for where, rule in _tenant_rules(rendered, env):
        if {"bind", "escalate"} & set(rule["verbs"]):
            binds += 1
            assert rule["apiGroups"] == ["rbac.authorization.k8s.io"], where
            assert rule["resources"] == ["roles"], where
            assert rule.get("resourceNames") and set(rule["resourceNames"]) <= TENANT_ROLES, where
        assert "escalate" not in rule["verbs"], where
        assert "impersonate" not in rule["verbs"], where
        assert not {"clusterroles", "clusterrolebindings", "serviceaccounts/token"} & set(rule["resources"]), where
    assert binds > 0


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_tenant_subjects_bind_only_tenant_roles_or_the_read_only_cluster_role(rendered, env):
    tenant_subjects = set()
    for name, objects in _tenants(rendered, env):
        for binding in _of_kind(objects, "RoleBinding"):
            assert binding["roleRef"]["kind"] == "Role", name
            assert binding["roleRef"]["name"] in TENANT_ROLES, name
            tenant_subjects |= {(s["kind"], s.get("namespace", ""), s["name"]) for s in binding["subjects"]}
        for binding in _of_kind(objects, "ClusterRoleBinding"):
            assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_VIEWER}
            tenant_subjects |= {(s["kind"], s.get("namespace", ""), s["name"]) for s in binding["subjects"]}
    assert tenant_subjects
    assert {v for rule in _cluster_viewer(rendered, env)["rules"] for v in rule["verbs"]} <= READ
    for binding in _of_kind(rendered[env]["_platform"], "RoleBinding", "ClusterRoleBinding"):
        if binding["roleRef"]["name"] != CLUSTER_VIEWER:
            subjects = {(s["kind"], s.get("namespace", ""), s["name"]) for s in binding["subjects"]}
            assert not subjects & tenant_subjects, binding["metadata"]["name"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_tenant_namespace_has_default_deny_and_pod_security(rendered, env):
    for name, objects in _tenants(rendered, env):
        for namespace in _of_kind(objects, "Namespace"):
            ns = namespace["metadata"]["name"]
            labels = namespace["metadata"]["labels"]
            for mode in ("enforce", "audit", "warn"):
                assert labels[f"pod-security.kubernetes.io/{mode}"] in ("baseline", "restricted"), ns
                version = labels[f"pod-security.kubernetes.io/{mode}-version"]
                assert version == "latest" or version.startswith("v1."), ns
            # One policy selecting every pod both ways: whatever its rules do not allow is denied.
            policies = [o for o in _of_kind(objects, "NetworkPolicy") if o["metadata"]["namespace"] == ns]
            assert [(p["spec"]["podSelector"], p["spec"]["policyTypes"]) for p in policies] == [({}, ["Ingress", "Egress"])], ns


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_cpu_and_memory_quota_come_with_limit_range_defaults(rendered, env):
    checked = 0
    for name, objects in _tenants(rendered, env):
        for quota in _of_kind(objects, "ResourceQuota"):
            ns = quota["metadata"]["namespace"]
            ranges = [o for o in _of_kind(objects, "LimitRange") if o["metadata"]["namespace"] == ns]
            containers = [item for r in ranges for item in r["spec"]["limits"] if item["type"] == "Container"]
            for key in _hard(quota):
                side, _, resource = key.partition(".")
                if resource in ("cpu", "memory") or key in ("cpu", "memory"):
                    checked += 1
                    section = "default" if side == "limits" else "defaultRequest"
                    resource = resource or key
                    assert any(resource in item.get(section, {}) for item in containers), f"{ns}: {key}"
    assert checked > 0


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_gpu_quota_keys_are_only_requests_of_extended_resources(rendered, env):
    gpu_keys = 0
    for name, objects in _tenants(rendered, env):
        for quota in _of_kind(objects, "ResourceQuota"):
            for key in _hard(quota):
                assert not key.startswith("limits.nvidia.com/"), key
                assert not key.startswith("nvidia.com/"), key
                gpu_keys += key.startswith("requests.nvidia.com/")
    assert gpu_keys > 0


def test_suspended_tenant_gets_a_pods_zero_quota_in_each_namespace(rendered):
    objects = rendered["lab"]["kitchen"]
    namespaces = {o["metadata"]["name"] for o in _of_kind(objects, "Namespace")}
    suspended = {q["metadata"]["namespace"]: _hard(q) for q in _of_kind(objects, "ResourceQuota") if q["metadata"]["name"] == "suspended"}
    assert set(suspended) == namespaces == {"kitchen", "kitchen-data", "kitchen-ci"}
    assert all(hard == {"pods": "0"} for hard in suspended.values())


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_online_inference_is_closed_to_tenants_without_a_grant(rendered, environments, env):
    environment = environments[env]
    for name, objects in _tenants(rendered, env):
        granted = "online-inference" in tenant_of(environment, name).quota.priority_classes
        scoped = [q for q in _of_kind(objects, "ResourceQuota") if q["metadata"]["name"] == "priority-online-inference"]
        assert {q["metadata"]["namespace"] for q in scoped} == set(tenant_of(environment, name).all_namespaces)
        for quota in scoped:
            assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["online-inference"]}
            ]
            assert (_hard(quota)["pods"] != "0") == granted, f"{name}/{quota['metadata']['namespace']}"
    assert any(name == "inference" for name, _ in _tenants(rendered, env))
