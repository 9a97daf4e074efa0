"""`gpu-tenancy:index:Fleet`: every tenant of one environment plus the platform objects."""

from __future__ import annotations

from typing import Optional

import pulumi

from .gpu_platform import GpuPlatform
from ..manifests.build import platform_objects
from ..fleet.gpu_capacity import gpu_quota_by_resource
from ..fleet.environment import Environment
from ..fleet.shard_stacks import stack_part
from .tenant import Tenant


class Fleet(pulumi.ComponentResource):
    """One stack's tenants; each tenant is its own component, so adding one never touches another.

    `stack` is the Pulumi stack being deployed (default: the environment's own). In a sharded
    environment (docs/sharding.md) the environment's stack registers the platform objects only and
    each shard stack `<env>.<shard>` only its tenants, under a Fleet of the same name, so that a
    tenant's URNs differ between shards by the stack alone. (`pulumi state move` parents a moved
    tenant to the destination's root; the Tenant's aliases take it back under this Fleet.)

    >>> Fleet("prod", load_environment(Path("."), "prod"), stack="prod.a")   # doctest: +SKIP
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
        self.platform = GpuPlatform(f"{name}-platform", platform_objects(environment), child) if part.platform else None
        # Tenant components are named after the tenant alone: their URNs must not depend on the
        # fleet's contents (the parent chain already scopes them to this fleet).
        self.tenants = {
            loaded.name: Tenant(loaded.name, loaded.spec, environment, child)
            for loaded in tenants
        }
        self.summary = {
            loaded.name: {
                "namespaces": loaded.spec.all_namespaces,
                "lifecycle": loaded.spec.lifecycle,
                "gpuQuota": gpu_quota_by_resource(loaded.spec, environment.platform),
            }
            for loaded in tenants
        }
        self.register_outputs({"tenants": self.summary})
