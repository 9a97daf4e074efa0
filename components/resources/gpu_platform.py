"""`gpu-tenancy:index:GpuPlatform`: cluster-wide objects of an environment as Pulumi resources."""

from __future__ import annotations

from typing import Optional

import pulumi

from ..manifests.meta import KubeObject
from .kubernetes import logical_name, register


class GpuPlatform(pulumi.ComponentResource):
    """PriorityClasses, node labels (NodePatch with a fixed field manager), MIG and time-slicing
    ConfigMaps, admission policies and shared RBAC: everything that belongs to no single tenant.

    >>> from components.manifests.build import platform_objects
    >>> registered = pulumi_mocks(lambda: GpuPlatform("prod-platform", platform_objects(prod)))
    >>> [t for t in sorted({r.type for r in registered}) if t.startswith("kubernetes:core/")]
    ['kubernetes:core/v1:ConfigMap', 'kubernetes:core/v1:NodePatch']
    """

    def __init__(self, name: str, objects: list[KubeObject], opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-tenancy:index:GpuPlatform", name, None, opts)
        self.resources: dict[str, pulumi.Resource] = {}
        for obj in objects:
            child = logical_name(name, obj)
            self.resources[child] = register(child, obj, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"objects": len(objects)})
