"""Everything GPU-related an environment deploys, split into cluster-wide and per-tenant objects."""

from __future__ import annotations

from ..fleet.facts import FleetFacts, TenantView
from ..spec.tenant import Tenant
from . import claim_policy, device_classes, gpu_nodes, mig_config, placement_policy, priority_classes, time_slicing
from .meta import KubeObject, sort_objects


def platform_gpu_objects(facts: FleetFacts) -> list[KubeObject]:
    """Node patches, the MIG and time-slicing ConfigMaps, the PriorityClasses, the tool's DRA
    DeviceClasses and the placement policy (each tenant's binding is in `tenant_gpu_objects`), in
    `sort_objects` order.

    >>> sorted({o["kind"] for o in platform_gpu_objects(dev.facts)})
    ['ConfigMap', 'Node', 'PriorityClass', 'ValidatingAdmissionPolicy']
    """
    objects = [
        placement_policy.placement_policy(facts),
        *gpu_nodes.node_patches(facts),
        *priority_classes.priority_classes(facts),
        *device_classes.device_classes(facts),
    ]
    for config_map in (mig_config.mig_config_map(facts), time_slicing.device_plugin_config_map(facts)):
        if config_map is not None:
            objects.append(config_map)
    return sort_objects(objects)


def tenant_gpu_objects(tenant: Tenant, view: TenantView) -> list[KubeObject]:
    """The tenant's placement binding, and with a DeviceClass grant its claim policy and binding, in `sort_objects` order.

    >>> [o["metadata"]["name"] for o in tenant_gpu_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))]
    ['gpu-tenancy-placement-eval']
    """
    return sort_objects([*placement_policy.placement_objects(tenant, view), *claim_policy.claim_objects(tenant, view)])
