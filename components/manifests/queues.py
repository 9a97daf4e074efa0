"""Scheduler queues of an environment, chosen by the stack's `scheduler`: none, kueue or kai.

With `none`, the namespace ResourceQuota is the only GPU budget and nothing is built here.
"""

from __future__ import annotations

from ..fleet.facts import FleetFacts, TenantView
from ..spec.tenant import Tenant
from . import kai, kueue
from .meta import KubeObject, sort_objects


def tenant_queue_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's queue objects: Kueue ClusterQueue + LocalQueues (plus the stopped ClusterQueues of
    its previous names; decommissioned, only its own, stopped), or a KAI leaf Queue (none when decommissioned).

    >>> [o["kind"] for o in tenant_queue_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))]
    ['ClusterQueue', 'LocalQueue']
    """
    scheduler = view.platform.scheduler
    if scheduler == "kueue":
        return sort_objects(kueue.tenant_kueue_objects(tenant, view))
    if tenant.is_decommissioned:
        return []
    if scheduler == "kai":
        return sort_objects(kai.tenant_kai_objects(tenant, view))
    return []


def platform_queue_objects(facts: FleetFacts) -> list[KubeObject]:
    """Cluster-wide queue objects: Kueue ResourceFlavors, or KAI department Queues and the queue-pinning policy.

    >>> [o["kind"] for o in platform_queue_objects(dev.facts)]
    []
    """
    scheduler = facts.platform.scheduler
    if scheduler == "kueue":
        return sort_objects(kueue.platform_kueue_objects(facts))
    if scheduler == "kai":
        return sort_objects(kai.platform_kai_objects(facts))
    return []
