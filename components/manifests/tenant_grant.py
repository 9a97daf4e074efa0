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
"""

from __future__ import annotations

from typing import Any, Iterable

from ..fleet.facts import FleetFacts, TenantView
from ..spec.tenant import Tenant
from .meta import TENANT_GRANT_API, TENANT_GRANT_KIND, KubeObject, kube_object, object_meta, owned_labels, platform_labels
from .placement_policy import foreign_pools, pinning_resources, placement
from .quota import priority_cap
from .rbac import ROLES

API_VERSION, KIND = TENANT_GRANT_API, TENANT_GRANT_KIND
GROUP, _, VERSION = API_VERSION.partition("/")
PLURAL = "tenantgrants"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_API_VERSION = "apiextensions.k8s.io/v1"


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "description": description, "items": {"type": "string"}}


def _spec_schema() -> dict[str, Any]:
    properties = {
        "namespaces": _strings("The tenant's namespaces (ServiceAccounts of these may be bound in its RoleBindings)."),
        "groups": _strings("Groups of the tenant's roles (owners, developers, viewers)."),
        "users": _strings("Users of the tenant's roles."),
        "tenant": {"type": "string", "description": "The tenant's name (the TenantGrant's name too)."},
        "ingressHosts": _strings("Hostnames an Ingress of the tenant may serve."),
        "ingressDomains": _strings("Domains whose subdomains an Ingress of the tenant may serve."),
        "externalNames": _strings("Hostnames an ExternalName Service of the tenant may point to."),
        "externalNameDomains": _strings("Domains whose subdomains an ExternalName Service of the tenant may point to."),
        "priorityClasses": {
            "type": "array",
            "description": "The stack's PriorityClasses the tenant may use, with their values.",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "properties": {"name": {"type": "string"}, "value": {"type": "integer", "format": "int32"}},
            },
        },
        "gpuClasses": _strings("GPU classes the tenant's pods may select (placement policy)."),
        "pools": _strings("Node pools the tenant's pods may select: its dedicated pools and the shared pools of its classes."),
        "dedicatedPools": _strings("Node pools dedicated to the tenant."),
        "gpuProducts": _strings("GPU products (nvidia.com/gpu.product) of its classes."),
        "pinningClasses": _strings("Classes whose every pool the tenant may use: selecting one pins a GPU pod to allowed nodes."),
        "pinningProducts": _strings("Products whose every pool the tenant may use."),
        "pinningResources": _strings("GPU resources only the tenant's pools offer: requesting only these pins a pod."),
        "foreignPools": {
            "type": "array",
            "description": "Other tenants' dedicated pools, which no pod of the tenant may reach.",
            "items": {
                "type": "object",
                "required": ["labels", "nodes", "pool", "staticNodes", "tenant"],
                "properties": {
                    "pool": {"type": "string"},
                    "tenant": {"type": "string", "description": "The tenant the pool is dedicated to."},
                    "labels": {"type": "object", "description": "The labels of the pool's nodes (class, pool, tenant, product).",
                               "additionalProperties": {"type": "string"}},
                    "nodes": _strings("The pool's static node names."),
                    "staticNodes": {"type": "boolean", "description": "false for an autoscaled pool: any node name may be one of it."},
                },
            },
        },
        "maxPriority": {"type": "integer", "format": "int32",
                        "description": "The highest value of its PriorityClasses (0 when none): the cap on its Kueue Workloads' priority."},
    }
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


def hosts(entries: Iterable[str], domain: str | None = None) -> tuple[list[str], list[str]]:
    """(hostnames, domains whose subdomains are allowed) of host entries (`*.example.com`: the
    subdomains of example.com), plus `domain` and its subdomains.

    >>> hosts(["a.example.org", "*.b.example.org"], "t.apps.example.com")
    (['a.example.org', 't.apps.example.com'], ['b.example.org', 't.apps.example.com'])
    """
    exact, domains = set(), set()
    if domain:
        exact.add(domain)
        domains.add(domain)
    for entry in entries:
        if entry.startswith("*."):
            domains.add(entry[2:])
        else:
            exact.add(entry)
    return sorted(exact), sorted(domains)


def ingress_hosts(tenant: Tenant, view: TenantView) -> tuple[list[str], list[str]]:
    """(hostnames, domains whose subdomains) an Ingress of the tenant may serve.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com", ingressDomain="apps.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A",
    ...     costCenter="cc-1", network={"ingressHosts": ["a.example.org", "*.b.example.org"]})
    >>> ingress_hosts(t, env.view(t))
    (['a.apps.example.com', 'a.example.org'], ['a.apps.example.com', 'b.example.org'])
    """
    domain = view.platform.ingress_domain
    return hosts(tenant.network.ingress_hosts, f"{tenant.name}.{domain}" if domain else None)


def granted_priority_classes(tenant: Tenant, view: TenantView) -> dict[str, int]:
    """The stack's PriorityClasses the tenant may use (its cap there is not `pods: 0`), with their values.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
    >>> sorted(granted_priority_classes(t, env.view(t)))
    ['batch', 'interactive']
    """
    granted = {}
    for name, spec in view.platform.priority_classes.items():
        cap = priority_cap(tenant, name, spec)
        if cap is None or cap.pods != 0:
            granted[name] = spec.value
    return dict(sorted(granted.items()))


def members(tenant: Tenant) -> tuple[list[str], list[str]]:
    """(groups, users) of the tenant's three roles, sorted.

    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1",
    ...     access={"owners": {"groups": ["a-leads"]}, "viewers": {"users": ["bob@example.com"]}})
    >>> members(t)
    (['a-leads'], ['bob@example.com'])
    """
    access = tenant.access
    groups = sorted({g for role in ROLES for g in getattr(access, f"{role}s").groups})
    users = sorted({u for role in ROLES for u in getattr(access, f"{role}s").users})
    return groups, users


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
    ingress_exact, ingress_domains = ingress_hosts(tenant, view)
    names_exact, names_domains = hosts(tenant.network.external_names)
    groups, users = members(tenant)
    granted = granted_priority_classes(tenant, view)
    allowed = placement(tenant, view)
    return kube_object(
        API_VERSION,
        KIND,
        object_meta(tenant.name, labels=owned_labels(tenant, view)),
        spec={
            "dedicatedPools": allowed.dedicated_pools,
            "externalNameDomains": names_domains,
            "externalNames": names_exact,
            "foreignPools": foreign_pools(allowed, view),
            "gpuClasses": allowed.classes,
            "gpuProducts": allowed.products,
            "groups": groups,
            "ingressDomains": ingress_domains,
            "ingressHosts": ingress_exact,
            "maxPriority": max([0, *granted.values()]),
            "namespaces": list(tenant.all_namespaces),
            "pinningClasses": allowed.pinning_classes,
            "pinningProducts": allowed.pinning_products,
            "pinningResources": pinning_resources(allowed, view),
            "pools": allowed.pools,
            "priorityClasses": [{"name": name, "value": value} for name, value in granted.items()],
            "tenant": tenant.name,
            "users": users,
        },
    )
