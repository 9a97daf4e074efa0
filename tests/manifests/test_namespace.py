from __future__ import annotations

import json

from components.manifests.meta import COST_CENTER_LABEL, ENVIRONMENT_LABEL, LIFECYCLE_LABEL, TENANT_LABEL
from components.manifests.namespace import (
    CONTACTS_ANNOTATION,
    DISPLAY_NAME_ANNOTATION,
    OWNERS_ANNOTATION,
    namespaces,
    pod_security_level,
)

from .example_tenants import tenant_of, viewed


def _labels(ns: dict) -> dict:
    return ns["metadata"]["labels"]


def test_one_namespace_per_tenant_namespace_own_first(prod):
    objects = viewed(namespaces, tenant_of(prod, "llm-finetune"), prod)
    assert [o["metadata"]["name"] for o in objects] == ["llm-finetune", "llm-finetune-data"]
    assert {(o["apiVersion"], o["kind"]) for o in objects} == {("v1", "Namespace")}
    assert all("namespace" not in o["metadata"] for o in objects)


def test_ownership_cost_and_lifecycle_labels(prod):
    labels = _labels(viewed(namespaces, tenant_of(prod, "eval"), prod)[0])
    assert labels[TENANT_LABEL] == "eval"
    assert labels[ENVIRONMENT_LABEL] == "prod"
    assert labels[COST_CENTER_LABEL] == "cc-4300"
    assert labels[LIFECYCLE_LABEL] == "active"
    assert labels["app.kubernetes.io/managed-by"] == "gpu-tenancy"


def test_pod_security_defaults_to_the_stack_level_at_its_version(prod):
    labels = _labels(viewed(namespaces, tenant_of(prod, "eval"), prod)[0])
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "baseline"
        assert labels[f"pod-security.kubernetes.io/{mode}-version"] == prod.platform.pod_security.version == "latest"


def test_pod_security_version_defaults_to_latest(make_tenant, make_environment):
    assert _labels(namespaces(make_tenant(), make_environment().view(make_tenant()))[0])["pod-security.kubernetes.io/enforce-version"] == "latest"
    pinned = make_environment(podSecurity={"version": "v1.30"})
    assert _labels(namespaces(make_tenant(), pinned.view(make_tenant()))[0])["pod-security.kubernetes.io/enforce-version"] == "v1.30"


def test_tenant_pod_security_level_applies_to_all_its_namespaces(prod):
    for ns in viewed(namespaces, tenant_of(prod, "inference"), prod):
        assert _labels(ns)["pod-security.kubernetes.io/enforce"] == "restricted"
        assert _labels(ns)["pod-security.kubernetes.io/warn"] == "restricted"


def test_pod_security_never_looser_than_the_stack(make_tenant, make_environment):
    env = make_environment(podSecurity={"level": "restricted", "version": "v1.31"})
    tenant = make_tenant(podSecurity="baseline")
    assert pod_security_level(tenant, env.platform) == "restricted"
    labels = _labels(namespaces(tenant, env.view(tenant))[0])
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit-version"] == "v1.31"


def test_annotations_carry_display_name_owners_and_compact_contacts(prod):
    annotations = viewed(namespaces, tenant_of(prod, "llm-finetune"), prod)[1]["metadata"]["annotations"]
    assert annotations[DISPLAY_NAME_ANNOTATION] == "LLM Fine-tuning"
    assert annotations[OWNERS_ANNOTATION] == "llm-finetune-leads"
    assert annotations[COST_CENTER_LABEL] == "cc-4100"
    contacts = annotations[CONTACTS_ANNOTATION]
    assert " " not in contacts.replace("Ana Ruiz", "")
    assert json.loads(contacts) == [{"name": "Ana Ruiz", "email": "ana.ruiz@acme.dev", "chat": "#llm-finetune"}]


def test_tenant_without_contacts_or_description_has_no_such_annotations(make_tenant, make_environment):
    annotations = namespaces(make_tenant(), make_environment().view(make_tenant()))[0]["metadata"]["annotations"]
    assert CONTACTS_ANNOTATION not in annotations
    assert "gpu-tenancy.dev/description" not in annotations
    assert OWNERS_ANNOTATION not in annotations


def test_suspended_lifecycle_is_labelled(make_tenant, make_environment):
    labels = _labels(viewed(namespaces, make_tenant(lifecycle="suspended"), make_environment())[0])
    assert labels[LIFECYCLE_LABEL] == "suspended"


def test_a_direct_admission_tenant_says_so_on_its_namespaces():
    from components.fleet.environment import Environment
    from components.manifests.namespace import namespaces
    from components.spec.stack import Platform
    from components.spec.tenant import Tenant

    t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="serve", displayName="S", costCenter="cc-1",
               queue={"admission": "direct"})
    for scheduler, expected in (("kueue", "direct"), ("kai", "direct"), ("none", None)):
        env = Environment("dev", Platform(labelDomain="gpu.example.com", scheduler=scheduler), None, [])
        (ns,) = namespaces(t, env.view(t))
        assert ns["metadata"]["labels"].get("gpu-tenancy.dev/queue-admission") == expected
