"""`gpu-tenancy:index:Fleet`: every tenant of one environment plus the platform objects."""

from __future__ import annotations

from typing import Optional

import pulumi

from .gpu_platform import GpuPlatform
from .kubernetes import logical_name
from ..manifests.placement_policy import binding_name
from ..manifests.build import platform_objects, tenant_objects
from ..manifests.tenant_grant import grant_prerequisite, is_tenant_grant
from ..manifests.renames import rename_message
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
        platform = platform_objects(environment) if part.platform else []
        self.platform = GpuPlatform(f"{name}-platform", platform, child, taints_later=True) if part.platform else None
        admission = [self.platform.resources[logical_name(f"{name}-platform", obj)] for obj in platform if grant_prerequisite(obj)] \
            if self.platform else []
        # Tenant components are named after the tenant alone: their URNs must not depend on the
        # fleet's contents (the parent chain already scopes them to this fleet).
        objects = {loaded.name: tenant_objects(loaded.spec, environment.view(loaded.spec)) for loaded in tenants}
        self.tenants = {
            loaded.name: Tenant(loaded.name, loaded.spec, environment, child, objects=objects[loaded.name], admission=admission)
            for loaded in tenants
        }
        # Node taints wait for the placement bindings and grants that say who may tolerate them (in
        # this stack; a sharded environment's are in its shard stacks, docs/gpu-sharing.md).
        policies = [
            resource
            for tenant, objs in objects.items()
            for obj in objs
            if (obj["metadata"]["name"] == binding_name(tenant) and obj["kind"] == "ValidatingAdmissionPolicyBinding")
            or is_tenant_grant(obj)
            if (resource := self.tenants[tenant].resources.get(logical_name(tenant, obj))) is not None
        ]
        if self.platform is not None:
            self.platform.add_taints(policies)
        # Previous names of this stack's tenants -> what the rename does (warned when the old name
        # was deployed here last time; the same words as `tenants diff`).
        self.renames = {
            old: rename_message(old, loaded.spec, objects[loaded.name], environment.platform.protect_namespaces)
            for loaded in tenants
            for old in loaded.spec.previous_names
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
