"""Scheduler queues of an environment, chosen by the stack's `scheduler`: none, kueue or kai.

With `none`, the namespace ResourceQuota is the only GPU budget and nothing is built here.
"""

from __future__ import annotations

from ..model import capacity as cap
from ..model.load import Environment
from ..model.queue_checks import cohort_of
from ..model.tenant import Tenant
from . import kai, kueue
from .meta import KubeObject, sort_objects


def tenant_queue_objects(tenant: Tenant, environment: Environment) -> list[KubeObject]:
    """The tenant's queue objects: Kueue ClusterQueue + LocalQueues, or a KAI leaf Queue; none when decommissioned.

    >>> [o["kind"] for o in tenant_queue_objects(prod.tenants[0].spec, prod)]   # doctest: +SKIP
    ['ClusterQueue', 'LocalQueue']
    """
    if tenant.lifecycle == "decommissioned":
        return []
    scheduler = environment.platform.scheduler
    if scheduler == "kueue":
        return sort_objects(kueue.tenant_kueue_objects(tenant, environment))
    if scheduler == "kai":
        return sort_objects(kai.tenant_kai_objects(tenant, environment))
    return []


def platform_queue_objects(environment: Environment) -> list[KubeObject]:
    """Cluster-wide queue objects: Kueue ResourceFlavors, or KAI department Queues and the queue-pinning policy.

    >>> [o["kind"] for o in platform_queue_objects(dev)]   # doctest: +SKIP
    []
    """
    scheduler = environment.platform.scheduler
    if scheduler == "kueue":
        return sort_objects(kueue.platform_kueue_objects(environment))
    if scheduler == "kai":
        return sort_objects(kai.platform_kai_objects(environment))
    return []


def gpu_ceiling_by_resource(tenant: Tenant, environment: Environment) -> dict[str, int]:
    """Most GPUs per extended resource the tenant's queue can admit: its quota plus what it may borrow.

    The namespace ResourceQuota rejects pods above it, so borrowing only works up to the
    ResourceQuota; a quota builder that wants borrowing to be usable sets the GPU keys to this
    ceiling instead of the nominal quota. A class that may borrow without limit returns the
    nominal quota (no finite ceiling to offer).

    >>> gpu_ceiling_by_resource(prod.tenants[0].spec, prod)   # doctest: +SKIP
    {'nvidia.com/gpu': 24, 'nvidia.com/mig-1g.10gb': 48, 'nvidia.com/mig-3g.40gb': 16}
    """
    platform = environment.platform
    totals = dict(cap.gpu_quota_by_resource(tenant, platform))
    if platform.scheduler == "none" or (platform.scheduler == "kueue" and cohort_of(tenant, platform) is None):
        return totals
    for name, limit in sorted((tenant.queue.borrowing_limit or {}).items()):
        gpu_class = platform.gpu_classes.get(name)
        if gpu_class is None or cap.is_mig_mixed(gpu_class):
            continue
        resource = cap.class_resource(gpu_class)
        totals[resource] = totals.get(resource, 0) + limit
    return dict(sorted(totals.items()))
