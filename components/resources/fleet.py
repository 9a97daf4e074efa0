"""`gpu-tenancy:index:Fleet`: every tenant of one environment plus the platform objects."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import pulumi

from .gpu_platform import GpuPlatform
from ..manifests.build import platform_objects, tenant_objects
from ..manifests.renames import rename_message
from ..fleet.gpu_capacity import gpu_quota_by_resource
from ..fleet.environment import Environment, LoadedTenant
from ..manifests.meta import KubeObject
from ..fleet.shard_stacks import stack_part
from ..spec.tenant import Tenant as TenantSpec
from .tenant import Tenant


class Fleet(pulumi.ComponentResource):
    """One stack's tenants; each tenant is its own component, so adding one never touches another.

    `stack` is the Pulumi stack being deployed (default: the environment's own). In a sharded
    environment (docs/sharding.md) the environment's stack registers the platform objects only and
    each shard stack `<env>.<shard>` only its tenants, under a Fleet of the same name, so that a
    tenant's URNs differ between shards by the stack alone. (`pulumi state move` parents a moved
    tenant to the destination's root; the Tenant's aliases take it back under this Fleet.)

    >>> registered = pulumi_mocks(lambda: Fleet("lab", lab, stack="lab.blue"), stack="lab.blue")
    >>> sorted(r.name for r in registered if r.type == "gpu-tenancy:index:Tenant")
    ['audio', 'speech']
    """

    def __init__(
        self,
        name: str,
        environment: Environment,
        opts: Optional[pulumi.ResourceOptions] = None,
        *,
        stack: Optional[str] = None,
    ) -> None:
        super().__init__("gpu-tenancy:index:Fleet", name, None, opts)
        part = stack_part(environment, stack or environment.name)
        members = set(part.tenants)
        tenants = [loaded for loaded in environment.tenants if loaded.name in members]
        child = pulumi.ResourceOptions(parent=self)
        # The platform first (its taints last, below): the tenants' guard bindings and TenantGrants
        # need its guard policy and the TenantGrant CRD. A shard stack has neither: they are in the
        # environment's stack, which is deployed first (docs/sharding.md).
        self.platform = GpuPlatform(f"{name}-platform", platform_objects(environment), child, taints_later=True) \
            if part.platform else None
        admission = self.platform.admission if self.platform else []
        # Tenant components are named after the tenant alone: their URNs must not depend on the
        # fleet's contents (the parent chain already scopes them to this fleet).
        objects = {loaded.name: tenant_objects(loaded.spec, environment.view(loaded.spec)) for loaded in tenants}
        self.tenants = {
            loaded.name: Tenant(loaded.name, loaded.spec, environment, child, objects=objects[loaded.name], admission=admission)
            for loaded in tenants
        }
        # Node taints wait for the placement bindings and grants that say who may tolerate them (in
        # this stack; a sharded environment's are in its shard stacks, docs/gpu-sharing.md).
        if self.platform is not None:
            self.platform.add_taints([gate for tenant in self.tenants.values() for gate in tenant.taint_gates])
        # Previous names of this stack's tenants -> what the rename does (warned when the old name
        # was deployed here last time; the same words as `tenants diff`).
        self.renames = _renames(tenants, objects, environment.platform.protect_namespaces)
        self.summary = {loaded.name: _summary(loaded.spec, environment) for loaded in tenants}
        self.register_outputs({"tenants": self.summary})


def _renames(tenants: Sequence[LoadedTenant], objects: Mapping[str, list[KubeObject]], protect: bool) -> dict[str, str]:
    """Each previous name of `tenants` -> the message of its rename.

    >>> _renames(prod.tenants, {}, False)
    {}
    """
    return {old: rename_message(old, loaded.spec, objects[loaded.name], protect) for loaded in tenants for old in loaded.spec.previous_names}


def _summary(spec: TenantSpec, environment: Environment) -> dict[str, Any]:
    """What the stack exports of a tenant (read back by the next update to warn about departures).

    >>> sorted(_summary(tenant, prod))
    ['gpuQuota', 'lifecycle', 'namespaces']
    """
    return {
        "namespaces": spec.all_namespaces,
        "lifecycle": spec.lifecycle,
        "gpuQuota": gpu_quota_by_resource(spec, environment.platform),
    }
