"""Everything an environment deploys, as plain objects grouped by owner: the single source that the
Pulumi components, `tenants render`, `tenants diff` and the tests all read.
"""

from __future__ import annotations

from ..fleet.environment import Environment
from ..spec.tenant import Tenant
from . import gpu_platform, monitoring_rules, queues, tenant_core, vcluster
from .meta import KubeObject, sort_objects

PLATFORM = "_platform"


def tenant_objects(tenant: Tenant, environment: Environment) -> list[KubeObject]:
    """Objects of one tenant: namespaces, quotas, LimitRange, RBAC, NetworkPolicies, GPU placement,
    queues, and with monitoring its quota series (a PrometheusRule in the monitoring namespace).

    >>> [o["kind"] for o in tenant_objects(env.tenants[0].spec, env)][:1]   # doctest: +SKIP
    ['Namespace']
    """
    return sort_objects(
        [
            *tenant_core.tenant_objects(tenant, environment),
            *gpu_platform.tenant_gpu_objects(tenant, environment),
            *queues.tenant_queue_objects(tenant, environment),
            *filter(None, [monitoring_rules.tenant_prometheus_rule(tenant, environment)]),
        ]
    )


def platform_objects(environment: Environment) -> list[KubeObject]:
    """Cluster-wide objects: PriorityClasses, node labels, MIG/time-slicing configs, policies, shared RBAC, monitoring."""
    return sort_objects(
        [
            *tenant_core.platform_core_objects(environment),
            *gpu_platform.platform_gpu_objects(environment),
            *queues.platform_queue_objects(environment),
            *monitoring_objects(environment),
        ]
    )


def monitoring_objects(environment: Environment) -> list[KubeObject]:
    """The PrometheusRule and the Grafana dashboard ConfigMaps ([] unless the stack has `monitoring:`)."""
    if environment.platform.monitoring is None:
        return []
    # Grafana's SDK is a heavy import: only stacks with monitoring pay for it, not every CLI start.
    from . import monitoring_dashboards

    rule = monitoring_rules.prometheus_rule(environment)
    return ([rule] if rule else []) + monitoring_dashboards.dashboard_config_maps(environment)


def helm_releases(tenant: Tenant, environment: Environment) -> list[dict]:
    """Helm charts a tenant gets (its optional vCluster), as plain release descriptions."""
    release = vcluster.vcluster_release(tenant, environment)
    return [release] if release else []


def environment_objects(environment: Environment) -> dict[str, list[KubeObject]]:
    """All objects of an environment keyed by owner: `_platform` first, then tenants by name."""
    result = {PLATFORM: platform_objects(environment)}
    for loaded in environment.tenants:
        result[loaded.name] = tenant_objects(loaded.spec, environment)
    return result
