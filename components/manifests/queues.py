"""Scheduler queues of an environment, chosen by the stack's `scheduler`: none, kueue or kai.

With `none`, the namespace ResourceQuota is the only GPU budget and nothing is built here.
"""

from __future__ import annotations

from ..fleet import gpu_capacity as cap
from ..fleet.facts import FleetFacts, TenantView
from ..fleet import feasibility as feas
from ..spec.tenant import Tenant
from . import kai, kueue
from .meta import KubeObject, sort_objects


def tenant_queue_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's queue objects: Kueue ClusterQueue + LocalQueues, or a KAI leaf Queue; none when decommissioned.

    >>> [o["kind"] for o in tenant_queue_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))]   # doctest: +SKIP
    ['ClusterQueue', 'LocalQueue']
    """
    if tenant.lifecycle == "decommissioned":
        return []
    scheduler = view.platform.scheduler
    if scheduler == "kueue":
        return sort_objects(kueue.tenant_kueue_objects(tenant, view))
    if scheduler == "kai":
        return sort_objects(kai.tenant_kai_objects(tenant, view))
    return []


def platform_queue_objects(facts: FleetFacts) -> list[KubeObject]:
    """Cluster-wide queue objects: Kueue ResourceFlavors, or KAI department Queues and the queue-pinning policy.

    >>> [o["kind"] for o in platform_queue_objects(dev.facts)]   # doctest: +SKIP
    []
    """
    scheduler = facts.platform.scheduler
    if scheduler == "kueue":
        return sort_objects(kueue.platform_kueue_objects(facts))
    if scheduler == "kai":
        return sort_objects(kai.platform_kai_objects(facts))
    return []


def gpu_ceiling_by_resource(tenant: Tenant, view: TenantView) -> dict[str, int]:
    """Most GPUs per extended resource the tenant's queue can admit: the ResourceQuota's GPU keys.

    The one rule (docs/queues-and-vclusters.md, "Quota under a queue"): nominal quota plus what the
    queue can borrow -- per class, its `borrowingLimit`, but never more than the other members of its
    cohort (KAI: department) lend on the pools it may reach; with no limit, all they lend there
    (`components.fleet.facts.FleetFacts.borrowable`, read from the view). Without a queueing scheduler, or with Kueue and no
    cohort, it is the nominal quota. The ResourceQuota then admits exactly the pods the queue admits.

    >>> gpu_ceiling_by_resource(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))   # doctest: +SKIP
    {'nvidia.com/gpu': 20, 'nvidia.com/mig-1g.10gb': 48, 'nvidia.com/mig-3g.40gb': 16}
    """
    platform = view.platform
    totals = dict(cap.gpu_quota_by_resource(tenant, platform))
    for commodity, units in view.borrowable:
        resource = feas.commodity_resource(platform, commodity)
        totals[resource] = totals.get(resource, 0) + units
    return dict(sorted(totals.items()))
