"""`gpu-tenancy:index:Fleet`: every tenant of one environment plus the platform objects."""

from __future__ import annotations

from typing import Optional

import pulumi

from .gpu_platform import GpuPlatform
from ..manifests.build import environment_objects, PLATFORM
from ..model.capacity import gpu_quota_by_resource
from ..model.load import Environment
from .tenant import Tenant


class Fleet(pulumi.ComponentResource):
    """One stack's tenants; each tenant is its own component, so adding one never touches another.

    >>> Fleet("prod", load_environment(Path("."), "prod"))   # doctest: +SKIP
    """

    def __init__(self, name: str, environment: Environment, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-tenancy:index:Fleet", name, None, opts)
        objects = environment_objects(environment)
        child = pulumi.ResourceOptions(parent=self)
        self.platform = GpuPlatform(f"{name}-platform", objects[PLATFORM], child)
        # Tenant components are named after the tenant alone: their URNs must not depend on the
        # fleet's contents (the parent chain already scopes them to this fleet).
        self.tenants = {
            loaded.name: Tenant(loaded.name, loaded.spec, environment, child, objects=objects[loaded.name])
            for loaded in environment.tenants
        }
        self.summary = {
            loaded.name: {
                "namespaces": loaded.spec.all_namespaces,
                "lifecycle": loaded.spec.lifecycle,
                "gpuQuota": gpu_quota_by_resource(loaded.spec, environment.platform),
            }
            for loaded in environment.tenants
        }
        self.register_outputs({"tenants": self.summary})
