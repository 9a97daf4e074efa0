"""Scheduler queues of an environment, chosen by the stack's `scheduler`: none, kueue or kai.

With `none`, the namespace ResourceQuota is the only GPU budget and nothing is built here.
"""

from __future__ import annotations

from ..fleet import gpu_capacity as cap
from ..fleet.facts import FleetFacts, TenantView
from ..fleet.queue_arithmetic import borrowing_limits, dedicated_only_classes, queue_borrows
from ..fleet import feasibility as feas
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
    if tenant.lifecycle == "decommissioned":
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


def gpu_ceiling_by_resource(tenant: Tenant, view: TenantView) -> dict[str, int]:
    """Most GPUs per extended resource the tenant's pods may hold: the ResourceQuota's GPU keys.

    The one rule (docs/queues-and-vclusters.md, "The quota under a queue"). The nominal quota, plus,
    when the tenant's queue can borrow (a cohort or KAI department, `queue.admission: queued`), a
    headroom read from the tenant's own spec and the stack only: per GPU class its `borrowingLimit`,
    never more than the pools it may reach hold beyond its quota (capacity x overcommit); with no
    limit, and for MIG profiles, all of that. Every GPU pod of such a tenant went through its queue
    (the queue-pinning policy), so the queue, not this ceiling, is what limits borrowing; the
    ceiling only never depends on what other tenants lend, so a quota edit changes one tenant.
    Without a queueing scheduler, with Kueue and no cohort, or with `admission: direct` (pods may
    bypass the queue, and ResourceQuota cannot tell them apart), it is the nominal quota.

    >>> gpu_ceiling_by_resource(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))
    {'nvidia.com/gpu': 20, 'nvidia.com/mig-1g.10gb': 48, 'nvidia.com/mig-3g.40gb': 16}
    """
    platform = view.platform
    totals = dict(cap.gpu_quota_by_resource(tenant, platform))
    if not queue_borrows(tenant, platform):
        return dict(sorted(totals.items()))
    limits = borrowing_limits(tenant, platform) or {}
    dedicated = dedicated_only_classes(tenant, platform)
    own = feas.tenant_demand(tenant, platform)
    reach: dict[feas.Commodity, int] = {}
    for name in view.reachable_pools:
        pool = platform.node_pools[name]
        for commodity, units in feas.pool_supply(platform, pool).items():
            reach[commodity] = reach.get(commodity, 0) + feas.pool_limit(platform, pool, units)
    for commodity, units in sorted(reach.items()):
        kind, name = commodity
        if kind == "class" and name in dedicated:
            continue
        headroom = max(0, units - own.get(commodity, 0))
        if kind == "class" and name in limits:
            headroom = min(headroom, limits[name])
        if headroom:
            resource = feas.commodity_resource(platform, commodity)
            totals[resource] = totals.get(resource, 0) + headroom
    return dict(sorted(totals.items()))
