"""What every tenant gets, whatever its GPUs: namespaces, quotas, LimitRange, RBAC, NetworkPolicies, the
guard admission policy (what is in the objects RBAC lets tenant members write) and, where the stack or
tenant restricts them, the image registries policy.

Object names derive only from the tenant and the concept (`tenant-quota`, `tenant-owner`,
`gpu-tenancy:<tenant>:cluster-viewer`), so adding or removing a tenant never renames another's
objects. Lifecycle is data here, not control flow: a suspended or decommissioned tenant still
gets all its objects (labelled with the lifecycle, plus a quota admitting no new pods; decommissioned,
its Roles read only, while the guard and image policy bindings stay as long as its namespaces do); deleting
them is the deployment's decision (`components/resources/tenant.py` lifts retain/protect for a confirmed
decommission), never a side effect of a builder returning less.
"""

from __future__ import annotations

from ..fleet.facts import FleetFacts, TenantView
from ..spec.tenant import Tenant
from .guard_policy import guard_objects, guard_policy
from .image_policy import image_objects
from .limit_range import limit_ranges
from .meta import KubeObject, sort_objects
from .namespace import namespaces
from .network_policy import network_policies
from .quota import resource_quotas
from .rbac import platform_rbac_objects, tenant_rbac_objects
from .tenant_grant import grant_crd, tenant_grant


def tenant_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's core objects in deterministic order.

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a",
    ...     displayName="A", costCenter="cc-1")
    >>> tenant_objects(t, env.view(t))[0]["kind"]
    'Namespace'
    """
    return sort_objects(
        [
            *namespaces(tenant, view),
            *resource_quotas(tenant, view),
            *limit_ranges(tenant, view),
            *tenant_rbac_objects(tenant, view),
            *network_policies(tenant, view),
            *guard_objects(tenant, view),
            tenant_grant(tenant, view),
            *image_objects(tenant, view),
        ]
    )


def platform_core_objects(facts: FleetFacts) -> list[KubeObject]:
    """Cluster-wide objects the tenants' access relies on: the read-only ClusterRole, the admin binding,
    the guard policy and the TenantGrant CRD (the per-tenant parameters of it and of the placement policy).

    >>> from components.fleet.environment import Environment
    >>> from components.spec.stack import Platform
    >>> env = Environment("dev", Platform(labelDomain="gpu.example.com"), None, [])
    >>> [o["metadata"]["name"] for o in platform_core_objects(env.facts)]
    ['gpu-tenancy:cluster-viewer', 'gpu-tenancy:platform-admins', 'tenantgrants.gpu-tenancy.dev', 'gpu-tenancy-guard']
    """
    return sort_objects([*platform_rbac_objects(facts), grant_crd(facts), guard_policy(facts)])
