"""Everything an environment deploys, as plain objects grouped by owner: the single source that the
Pulumi components, `tenants render`, `tenants diff` and the tests all read.
"""

from __future__ import annotations

from typing import Collection

from ..fleet.facts import TenantView
from ..fleet.environment import Environment
from ..spec.tenant import Tenant
from . import api_fairness, gpu_platform, monitoring_rules, queues, tenant_core, vcluster, vcluster_guard
from .meta import KubeObject, sort_objects

PLATFORM = "_platform"


def tenant_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """Objects of one tenant: namespaces, quotas, LimitRange, RBAC, NetworkPolicies, GPU placement,
    queues, and with monitoring its quota series (a PrometheusRule in the monitoring namespace).

    >>> [o["kind"] for o in tenant_objects(tenant, view)][:1]
    ['Namespace']
    """
    return sort_objects(
        [
            *tenant_core.tenant_objects(tenant, view),
            *gpu_platform.tenant_gpu_objects(tenant, view),
            *queues.tenant_queue_objects(tenant, view),
            *filter(None, [monitoring_rules.tenant_prometheus_rule(tenant, view)]),
        ]
    )


def platform_objects(environment: Environment) -> list[KubeObject]:
    """Cluster-wide objects: PriorityClasses, node labels, MIG/time-slicing configs, policies, shared RBAC, monitoring.

    >>> sorted({o["kind"] for o in platform_objects(prod)})
    ['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'CustomResourceDefinition', 'FlowSchema', 'Node', 'PriorityClass', 'PriorityLevelConfiguration', 'PrometheusRule', 'ResourceFlavor', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']
    """
    return sort_objects(
        [
            *tenant_core.platform_core_objects(environment.facts),
            *api_fairness.api_fairness_objects(environment.facts),
            *gpu_platform.platform_gpu_objects(environment.facts),
            *queues.platform_queue_objects(environment.facts),
            *vcluster_guard.vcluster_guard_objects(environment.facts),
            *monitoring_objects(environment),
        ]
    )


def monitoring_objects(environment: Environment) -> list[KubeObject]:
    """The PrometheusRule and the Grafana dashboard ConfigMaps ([] unless the stack has `monitoring:`).

    >>> [(o["kind"], o["metadata"]["name"]) for o in monitoring_objects(prod)]
    [('PrometheusRule', 'gpu-tenancy'), ('ConfigMap', 'gpu-tenancy-fleet-overview'), ('ConfigMap', 'gpu-tenancy-tenant')]
    >>> monitoring_objects(dev)
    []
    """
    if environment.platform.monitoring is None:
        return []
    # Grafana's SDK is a heavy import: only stacks with monitoring pay for it, not every CLI start.
    from . import monitoring_dashboards

    rule = monitoring_rules.prometheus_rule(environment.facts)
    return ([rule] if rule else []) + monitoring_dashboards.dashboard_config_maps(environment.facts)


def helm_releases(tenant: Tenant, view: TenantView) -> list[dict]:
    """Helm charts a tenant gets (its optional vCluster), as plain release descriptions.

    >>> [r["chart"] for r in helm_releases(dev.tenants[2].spec, dev.view(dev.tenants[2].spec))], helm_releases(dev.tenants[0].spec, dev.view(dev.tenants[0].spec))
    (['vcluster'], [])
    """
    release = vcluster.vcluster_release(tenant, view)
    return [release] if release else []


def environment_objects(environment: Environment, skip: Collection[str] = ()) -> dict[str, list[KubeObject]]:
    """All objects of an environment keyed by owner: `_platform` first, then tenants by name
    (but those in `skip`, whose objects the caller knows already).

    >>> list(environment_objects(prod, skip={"eval", "inference"}))
    ['_platform', 'llm-finetune']
    """
    result = {PLATFORM: platform_objects(environment)}
    for loaded in environment.tenants:
        if loaded.name not in skip:
            result[loaded.name] = tenant_objects(loaded.spec, environment.view(loaded.spec))
    return result
