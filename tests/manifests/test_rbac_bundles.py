"""Role bundles in the rendered Roles: the opted-in role of the opted-in tenant gets the bundle's
rules (viewers: read verbs only), no other role or tenant does, and the guard rails hold."""

from __future__ import annotations

from components.manifests.rbac import bundle_rules, role_rules, roles
from components.validate.role_bundles import FORBIDDEN_GROUPS
from components.spec.role_bundles import READ_VERBS, shipped_bundles

from .example_tenants import tenant_of


def _grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def _role(environment, tenant: str, role: str, namespace: str | None = None) -> dict:
    spec = tenant_of(environment, tenant)
    (found,) = [o for o in roles(spec, environment.view(spec))
                if o["metadata"]["name"] == f"tenant-{role}" and o["metadata"]["namespace"] == (namespace or tenant)]
    return found


def test_opted_in_roles_get_the_bundle_others_do_not(prod):
    ray = ("ray.io", "rayclusters", "create")
    assert ray in _grants(_role(prod, "llm-finetune", "developer")["rules"])
    assert ray in _grants(_role(prod, "llm-finetune", "owner")["rules"])
    notebooks = ("kubeflow.org", "notebooks", "create")
    assert notebooks in _grants(_role(prod, "llm-finetune", "developer")["rules"])
    assert notebooks not in _grants(_role(prod, "llm-finetune", "owner")["rules"])  # owners did not opt in
    for tenant in ("inference", "eval"):
        for role in ("owner", "developer", "viewer"):
            grants = _grants(_role(prod, tenant, role)["rules"])
            assert not {(g, r) for g, r, _ in grants} & {("ray.io", "rayclusters"), ("kubeflow.org", "notebooks")}, (tenant, role)


def test_viewers_get_read_verbs_only(prod):
    viewer = _grants(_role(prod, "llm-finetune", "viewer")["rules"])
    ray = {(g, r, v) for g, r, v in viewer if g == "ray.io"}
    assert ray == {("ray.io", r, v) for r in ("rayclusters", "rayjobs", "rayservices") for v in READ_VERBS}


def test_every_namespace_of_the_tenant_gets_the_bundle(prod):
    for namespace in tenant_of(prod, "inference").all_namespaces:
        assert ("serving.kserve.io", "inferenceservices", "create") in _grants(_role(prod, "inference", "developer", namespace)["rules"])
        assert ("policy", "poddisruptionbudgets", "create") in _grants(_role(prod, "inference", "owner", namespace)["rules"])
        assert ("policy", "poddisruptionbudgets", "create") not in _grants(_role(prod, "inference", "developer", namespace)["rules"])


def test_bundles_keep_the_role_invariants(prod):
    """With every shipped bundle opted into by every role: no wildcard, no escalation verb, no
    forbidden group, no write on quota, LimitRange, NetworkPolicy or namespaces."""
    spec = tenant_of(prod, "eval")
    everything = sorted(shipped_bundles())
    access = {role: {"groups": ["g"], "bundles": everything} for role in ("owners", "developers", "viewers")}
    tenant = spec.model_copy(update={"access": spec.access.model_validate(access)})
    for role in ("owner", "developer", "viewer"):
        rules = [*role_rules(role), *bundle_rules(tenant, role, prod.view(tenant))]
        grants = _grants(rules)
        assert not any("*" in part for grant in grants for part in grant)
        assert not {v for _, _, v in grants} & {"escalate", "impersonate"}
        assert not {g for rule in bundle_rules(tenant, role, prod.view(tenant)) for g in rule["apiGroups"]} & set(FORBIDDEN_GROUPS)
        for group, resource in (("", "resourcequotas"), ("", "limitranges"), ("networking.k8s.io", "networkpolicies"), ("", "namespaces")):
            assert {v for g, r, v in grants if (g, r) == (group, resource)} <= set(READ_VERBS)
        if role == "viewer":
            assert {v for g, _, v in grants if g not in ("", "metrics.k8s.io")} <= set(READ_VERBS)


def test_bundle_rules_are_deterministic(prod):
    spec = tenant_of(prod, "llm-finetune")
    assert bundle_rules(spec, "developer", prod.view(spec)) == bundle_rules(spec, "developer", prod.view(spec))
    assert bundle_rules(spec, "developer", prod.view(spec))[0]["apiGroups"] == ["kubeflow.org"]  # kubeflow-notebooks: bundles in name order
