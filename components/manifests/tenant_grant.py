"""What the platform grants one tenant, as the parameters its admission policies read.

The guard and placement policies (guard_policy.py, placement_policy.py) are one
ValidatingAdmissionPolicy each for the whole environment; each tenant's bindings point them at the
tenant's `TenantGrant` (`gpu-tenancy.dev/v1alpha1`, cluster-scoped, named after the tenant): its
namespaces, groups and users, the hosts its Ingresses and ExternalName Services may name, the
PriorityClasses it may use, and where its pods may run (its GPU classes and pools, the pools that
pin a GPU pod, and other tenants' dedicated pools, which no pod of it may reach).

Why parameters and not literals inlined into one policy per tenant: kube-controller-manager
type-checks every policy against the schema of every kind it matches, once per expression and
kind, and a guard matches eight kinds. One inlined guard cost it 3.8 CPU seconds; 1,000 tenants
kept two cores busy for 24 minutes after a deploy, and again after any change to the guard's
template (docs/performance.md). A binding and its parameters are not type-checked, and the shared
policy is checked once.

Tenant members cannot write a TenantGrant: it is cluster-scoped and no tenant role names it
(rbac.py). A binding whose TenantGrant is missing denies every request it matches
(`parameterNotFoundAction: Deny`): both policies fail closed. The grant exists as long as any of
the tenant's bindings does, a decommissioned tenant's too (its placement binding stays until its
namespaces are gone).

Each field is declared once, as a `GrantField` (grant_fields.py) next to the rules that read it
(`GRANT_FIELDS` of guard_policy.py and placement_policy.py): the CRD's schema and every tenant's
grant are generated from those declarations, and the rules read a field by its `cel` accessor.
"""

from __future__ import annotations

import copy
from typing import Any

from . import guard_policy, placement_policy
from ..fleet.facts import FleetFacts, TenantView
from ..spec.tenant import Tenant
from .grant_fields import TENANT_NAME, GrantField, GrantSource, by_name
from .meta import TENANT_GRANT_API, TENANT_GRANT_KIND, KubeObject, kube_object, object_meta, owned_labels, platform_labels

API_VERSION, KIND = TENANT_GRANT_API, TENANT_GRANT_KIND
GROUP, _, VERSION = API_VERSION.partition("/")
PLURAL = "tenantgrants"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_API_VERSION = "apiextensions.k8s.io/v1"


def grant_fields() -> dict[str, GrantField]:
    """Every TenantGrant field by name: the tenant's name and what each policy's rules read.

    >>> list(grant_fields())[:4]
    ['tenant', 'namespaces', 'groups', 'users']
    """
    return by_name((TENANT_NAME, *guard_policy.GRANT_FIELDS, *placement_policy.GRANT_FIELDS))


def _spec_schema() -> dict[str, Any]:
    # A copy per CRD: no two built objects share a mutable part (the declarations are module-level).
    properties = {name: copy.deepcopy(field.schema) for name, field in grant_fields().items()}
    return {"type": "object", "required": sorted(properties), "properties": properties}


def grant_crd_schema() -> dict[str, Any]:
    """The OpenAPI schema of a TenantGrant (its CRD's only version).

    >>> sorted(grant_crd_schema()["properties"]["spec"]["properties"])[:3]
    ['dedicatedPools', 'externalNameDomains', 'externalNames']
    """
    return {
        "type": "object",
        "description": "What the platform grants one tenant: the parameters of its admission policies. Written by gpu-tenancy only.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _spec_schema(),
        },
    }


def grant_crd(facts: FleetFacts) -> KubeObject:
    """The CustomResourceDefinition of TenantGrant (one per cluster; the environment's platform objects).

    >>> crd = grant_crd(prod.facts)
    >>> crd["metadata"]["name"], crd["spec"]["scope"], crd["spec"]["versions"][0]["name"]
    ('tenantgrants.gpu-tenancy.dev', 'Cluster', 'v1alpha1')
    """
    return kube_object(
        CRD_API_VERSION,
        "CustomResourceDefinition",
        object_meta(CRD_NAME, labels=platform_labels(facts.environment_label)),
        spec={
            "group": GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": KIND.lower()},
            "scope": "Cluster",
            "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": grant_crd_schema()}}],
        },
    )


def grant_prerequisite(obj: KubeObject) -> bool:
    """Whether a tenant's TenantGrant and bindings must come after `obj`: the TenantGrant CRD, or a
    policy whose parameters are TenantGrants.

    >>> grant_prerequisite(grant_crd(prod.facts)), grant_prerequisite(tenant_grant(tenant, view))
    (True, False)
    """
    if obj["kind"] == "CustomResourceDefinition":
        return obj["metadata"]["name"] == CRD_NAME
    return obj["kind"] == "ValidatingAdmissionPolicy" and obj.get("spec", {}).get("paramKind", {}).get("kind") == KIND


def reads_grant(obj: KubeObject) -> bool:
    """Whether `obj` is a binding that hands its policy a TenantGrant (so must come after the grant).

    >>> from components.manifests.guard_policy import guard_binding
    >>> reads_grant(guard_binding(tenant, view)), reads_grant(tenant_grant(tenant, view))
    (True, False)
    """
    return obj["kind"] == "ValidatingAdmissionPolicyBinding" and "paramRef" in obj.get("spec", {})


def is_tenant_grant(obj: KubeObject) -> bool:
    """Whether `obj` is a TenantGrant.

    >>> is_tenant_grant(tenant_grant(tenant, view)), is_tenant_grant(grant_crd(prod.facts))
    (True, False)
    """
    return obj["kind"] == KIND and obj["apiVersion"] == API_VERSION


def tenant_grant(tenant: Tenant, view: TenantView) -> KubeObject:
    """The tenant's TenantGrant: what its admission policies allow it, named after the tenant.

    >>> grant = tenant_grant(tenant, view)
    >>> grant["kind"], grant["metadata"]["name"], grant["spec"]["namespaces"]
    ('TenantGrant', 'eval', ['eval'])
    """
    source = GrantSource(tenant, view)
    return kube_object(
        API_VERSION,
        KIND,
        object_meta(tenant.name, labels=owned_labels(tenant, view)),
        spec={name: field.value(source) for name, field in sorted(grant_fields().items())},
    )
